# Sourced by end-to-end scripts that drive npm packages. npm_deps NAME PACKAGE_JSON MODULE [NPM FLAGS]
# installs PACKAGE_JSON's dependencies into $src/build/NAME (or $SLUICE_NPM_CACHE/NAME) once, sets
# $deps to that directory, and exits the script with SKIP (exit 77: ctest reports it skipped) when
# node/npm or the registry is unavailable. Needs $src (the source dir).
npm_deps() {
  local name=$1 package=$2 module=$3
  shift 3
  command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIP: node/npm not installed"; exit 77; }
  deps=${SLUICE_NPM_CACHE:-$src/build}/$name
  mkdir -p "$deps"
  [ -f "$deps/node_modules/$module/package.json" ] && return 0
  cp "$package" "$deps/package.json"
  if ! (cd "$deps" && timeout 300 npm install --no-audit --no-fund --loglevel=error "$@" >"$deps/npm.log" 2>&1); then
    echo "SKIP: could not install the $module npm package (registry unreachable?): $(tail -2 "$deps/npm.log")"
    exit 77
  fi
}
