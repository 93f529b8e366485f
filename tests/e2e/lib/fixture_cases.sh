# Sourced by e2e scripts that replay golden fixtures through `sluice run`.
# cases FILE: prompt_ids_i and greedy_ids_i of an expected.safetensors, one "prompt greedy" line per
# prompt (comma lists). ids: the generated_ids of a `sluice run --json` object on stdin.
cases() {
    python3 - "$1" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb")
n = struct.unpack("<Q", f.read(8))[0]
header = json.loads(f.read(n))
def ids(name):
    a, b = header[name]["data_offsets"]
    f.seek(8 + n + a)
    data = f.read(b - a)
    return ",".join(str(x) for x in struct.unpack("<%di" % (len(data) // 4), data))
i = 0
while "prompt_ids_%d" % i in header:
    print(ids("prompt_ids_%d" % i), ids("greedy_ids_%d" % i))
    i += 1
PY
}
ids() { sed -n 's/.*"generated_ids":\[\([0-9,]*\)\].*/\1/p'; }
