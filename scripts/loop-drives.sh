#!/usr/bin/env bash
# Emulated drives for benchmarks: N loop devices (sparse files on the disk, direct I/O, ext4 each,
# mounted under DIR/d1..dN), each read-throttled at its own rate by the cgroup v1 blkio controller.
# Needs root, losetup, mkfs.ext4 and /sys/fs/cgroup/blkio; refuses loudly when any is missing.
#
#   scripts/loop-drives.sh up DIR SIZE_GB RATE_MB[,RATE_MB...]   create and mount, set the throttles
#   scripts/loop-drives.sh exec DIR CMD [ARGS...]                run CMD inside the throttled cgroup
#   scripts/loop-drives.sh rates DIR RATE_MB[,RATE_MB...]        change the throttles
#   scripts/loop-drives.sh status DIR                            devices, mounts, throttles
#   scripts/loop-drives.sh down DIR                              unmount, detach, remove the cgroup
#
# Throttling applies only to processes in the cgroup (`exec`), so `prepare` can write at full speed.
# Reads through a loop device with direct I/O still reach the host's cache of the virtual disk;
# the throttle caps each device's rate, it does not emulate a drive's latency curve.
set -euo pipefail

CGROUP=/sys/fs/cgroup/blkio/sluice-drives

die() { echo "loop-drives: $*" >&2; exit 1; }

check_env() {
  [[ $(id -u) == 0 ]] || die "needs root (losetup, mount, cgroup writes)"
  command -v losetup >/dev/null || die "losetup not found (apt install mount)"
  command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found (apt install e2fsprogs)"
  [[ -f /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]] ||
    die "no cgroup v1 blkio controller with throttling at /sys/fs/cgroup/blkio; loop devices would be unthrottled"
}

state_file() { echo "$1/loop-drives.state"; }

set_rates() {
  local dir=$1 rates=$2
  local -a devs rate
  mapfile -t devs < "$(state_file "$dir")"
  IFS=, read -r -a rate <<< "$rates"
  (( ${#rate[@]} == ${#devs[@]} )) || die "${#devs[@]} drives but ${#rate[@]} rates ($rates)"
  mkdir -p "$CGROUP"
  for i in "${!devs[@]}"; do
    local majmin
    majmin=$(cat "/sys/block/$(basename "${devs[$i]}")/dev")
    echo "$majmin $(( rate[i] * 1000000 ))" > "$CGROUP/blkio.throttle.read_bps_device"
  done
  echo "$rates" > "$dir/loop-drives.rates"
}

cmd=${1:-}; shift || true
case "$cmd" in
  up)
    (( $# == 3 )) || die "usage: up DIR SIZE_GB RATE_MB[,RATE_MB...]"
    check_env
    dir=$1 size=$2 rates=$3
    [[ -e $(state_file "$dir") ]] && die "$dir already has loop drives (run down first)"
    IFS=, read -r -a rate <<< "$rates"
    mkdir -p "$dir"
    : > "$(state_file "$dir")"
    for i in "${!rate[@]}"; do
      n=$((i + 1))
      img="$dir/d$n.img"
      truncate -s "${size}G" "$img"
      dev=$(losetup --find --show --direct-io=on "$img")
      echo "$dev" >> "$(state_file "$dir")"
      mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
      mkdir -p "$dir/d$n"
      mount -o noatime "$dev" "$dir/d$n"
      echo "loop-drives: $dir/d$n on $dev (${size} GB sparse, throttled to ${rate[$i]} MB/s)"
    done
    set_rates "$dir" "$rates"
    ;;
  rates)
    (( $# == 2 )) || die "usage: rates DIR RATE_MB[,RATE_MB...]"
    check_env
    set_rates "$1" "$2"
    ;;
  exec)
    (( $# >= 2 )) || die "usage: exec DIR CMD [ARGS...]"
    dir=$1; shift
    [[ -d $CGROUP ]] || die "no throttle cgroup ($CGROUP); run up first"
    [[ -e $(state_file "$dir") ]] || die "$dir has no loop drives"
    echo $$ > "$CGROUP/cgroup.procs"
    exec "$@"
    ;;
  status)
    (( $# == 1 )) || die "usage: status DIR"
    [[ -e $(state_file "$1") ]] || die "$1 has no loop drives"
    while read -r dev; do
      mnt=$(findmnt -n -o TARGET "$dev" || true)
      echo "$dev $(cat "/sys/block/$(basename "$dev")/dev") mounted at ${mnt:-nowhere}"
    done < "$(state_file "$1")"
    echo "throttles (maj:min bytes/s):"
    cat "$CGROUP/blkio.throttle.read_bps_device" 2>/dev/null || echo "  none"
    ;;
  down)
    (( $# == 1 )) || die "usage: down DIR"
    dir=$1
    [[ -e $(state_file "$dir") ]] || die "$dir has no loop drives"
    n=0
    while read -r dev; do
      n=$((n + 1))
      umount "$dir/d$n" 2>/dev/null || true
      losetup -d "$dev" 2>/dev/null || true
      rm -f "$dir/d$n.img"
      rmdir "$dir/d$n" 2>/dev/null || true
    done < "$(state_file "$dir")"
    # The cgroup can go only once no process is in it.
    if [[ -d $CGROUP ]] && [[ -z $(cat "$CGROUP/cgroup.procs") ]]; then rmdir "$CGROUP"; fi
    rm -f "$(state_file "$dir")" "$dir/loop-drives.rates"
    ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
