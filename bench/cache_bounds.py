#!/usr/bin/env python3
"""What an expert cache of a given size could read on a router trace, with and without knowing
the future: the bound behind issue 14's "bytes read <= 1.3x MIN".

    python3 bench/cache_bounds.py --slots 112 RUN.trace.jsonl [...]
    python3 bench/cache_bounds.py --cache-bytes 6e6 --record-bytes 53248 RUN.trace.jsonl
    python3 bench/cache_bounds.py --json ...   (one JSON object per trace)

A trace is what `sluice run --router-trace` (and every `sluice bench run` run, in
runs/N-ARM.trace.jsonl) writes: one (layer, experts) request per line. The first pass over the
layers is the prefill (--prefill-passes for a chunked one); the rest is decode, one request per
layer per token. For the decode
requests this prints expert reads per token of:

  MIN              Belady, starting from the best content, free to not admit an expert
                   (the bench's `min_bytes_per_token`; no cache of this size reads less)
  static           one fixed set, the most-used experts of the decode, chosen knowing every
                   count but not the order (the bench's `static_bytes_per_token`)
  LRU              least recently used, every expert admitted
  LFU              every expert admitted; the victim is the least used over the whole trace
                   (the counts known in advance, as warm heat from earlier runs of the same
                   prompt gives sluice's eviction)
  LFU+next H       LFU that also knows the next H requests exactly and never evicts an expert
                   they use while another victim exists (a perfect router predictor H layers
                   ahead; H = layers is the whole next token)

Every cache but MIN and static admits each expert of a request (a request's experts are
computed from the cache, so they are all resident together). Ratios are to MIN.
"""
import argparse
import collections
import heapq
import json
import sys


def load(path, prefill_passes):
    with open(path) as f:
        head = json.loads(f.readline())
        if head.get("format") != "sluice-router-trace":
            sys.exit(f"{path}: not a sluice router trace (first line {head})")
        e = int(head["num_experts"])
        reqs, layers = [], []
        for n, line in enumerate(f, 2):
            try:
                d = json.loads(line)
                layers.append(int(d["layer"]))
                reqs.append([layers[-1] * e + int(x) for x in d["experts"]])
            except (ValueError, KeyError, TypeError) as err:
                sys.exit(f"{path}:{n}: malformed request ({err})")
    # A pass asks for its layers in order (a layer's union in one request or in several); the
    # decode starts where pass prefill_passes + 1 does.
    split, passes = 0, 1
    for i in range(1, len(layers)):
        if layers[i] < layers[i - 1]:
            passes += 1
            if passes == prefill_passes + 1:
                split = i
                break
    if not split:
        sys.exit(f"{path}: no decode after {prefill_passes} prefill pass(es)")
    return reqs, split, len(set(layers))


def min_reads(keys, slots):
    """Belady's MIN with bypass, from the best start (the experts needed first)."""
    never = len(keys) + 1
    nxt, first = [never] * len(keys), {}
    for i in range(len(keys) - 1, -1, -1):
        nxt[i] = first.get(keys[i], never)
        first[keys[i]] = i
    start = sorted(first, key=first.get)[:slots]
    next_of = {k: first[k] for k in start}
    heap = [(-first[k], k) for k in start]
    heapq.heapify(heap)
    reads = 0
    for i, k in enumerate(keys):
        if k in next_of:
            next_of[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
            continue
        reads += 1
        while heap and next_of.get(heap[0][1]) != -heap[0][0]:
            heapq.heappop(heap)  # stale entries
        if len(next_of) < slots:
            next_of[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
        elif heap and -heap[0][0] > nxt[i]:
            _, far = heapq.heappop(heap)
            del next_of[far]
            next_of[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
    return reads


def run_cache(reqs, split, slots, victim_key, after=None):
    """A cache that admits every expert of a request; victim_key(x, i) is smallest for the victim.
    It starts empty before the prefill and counts the decode's reads; after(i, req) runs after
    each request."""
    cache, reads = set(), 0
    for i, req in enumerate(reqs):
        need = set(req)
        for k in req:
            if k in cache:
                continue
            if i >= split:
                reads += 1
            if len(cache) >= slots:
                cache.remove(min((x for x in cache if x not in need), key=lambda x: victim_key(x, i)))
            cache.add(k)
        if after:
            after(i, req)
    return reads


def bounds(path, slots, horizons, prefill_passes=1):
    reqs, split, layers = load(path, prefill_passes)
    decode = [k for r in reqs[split:] for k in r]
    tokens = (len(reqs) - split) / layers
    counts = collections.Counter(decode)
    out = {"MIN": min_reads(decode, slots)}
    keep = {k for k, _ in counts.most_common(slots)}
    out["static"] = sum(1 for k in decode if k not in keep)
    last = {}
    out["LRU"] = run_cache(reqs, split, slots, lambda x, i: last.get(x, -1),
                           lambda i, req: last.update((k, i) for k in req))
    total = collections.Counter(k for r in reqs for k in r)
    out["LFU"] = run_cache(reqs, split, slots, lambda x, i: total[x])
    sets = [set(r) for r in reqs]
    for h in horizons:
        # An expert one of the next h requests uses is evicted only when every candidate is,
        # the one needed last first; the rest go least used first.
        def key(x, i, h=h):
            for j in range(i + 1, min(len(reqs), i + 1 + h)):
                if x in sets[j]:
                    return (1, -j, total[x])
            return (0, 0, total[x])
        out[f"LFU+next {h}"] = run_cache(reqs, split, slots, key)
    return out, tokens, layers


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="router traces (sluice run --router-trace)")
    ap.add_argument("--slots", type=int, help="cache slots (experts the cache holds)")
    ap.add_argument("--cache-bytes", type=float, help="cache budget in bytes (with --record-bytes)")
    ap.add_argument("--record-bytes", type=float, help="bytes of one expert's slot")
    ap.add_argument("--horizons", default="1,2,4,8,16", help="requests known ahead, comma-separated")
    ap.add_argument("--prefill-passes", type=int, default=1,
                    help="passes before the decode (more than 1 for a chunked prefill; default 1)")
    ap.add_argument("--json", action="store_true", help="one JSON object per trace: reads per token of each cache")
    a = ap.parse_args()
    slots = a.slots or (int(a.cache_bytes // a.record_bytes) if a.cache_bytes and a.record_bytes else None)
    if not slots:
        ap.error("give --slots, or --cache-bytes and --record-bytes")
    horizons = [int(h) for h in a.horizons.split(",") if h]
    for path in a.traces:
        out, tokens, layers = bounds(path, slots, horizons, a.prefill_passes)
        if a.json:
            print(json.dumps({"trace": path, "slots": slots, "layers": layers, "tokens": tokens,
                              "reads_per_token": {k: v / tokens for k, v in out.items()}}))
            continue
        print(f"{path}: {slots} slots, {layers} MoE layers, {tokens:.0f} decode tokens")
        print(f"  {'cache':<14} {'reads/token':>11} {'x MIN':>6}")
        for name, reads in out.items():
            ratio = f"{reads / out['MIN']:6.3f}" if out["MIN"] else f"{'-':>6}"
            print(f"  {name:<14} {reads / tokens:11.2f} {ratio}")


if __name__ == "__main__":
    main()
