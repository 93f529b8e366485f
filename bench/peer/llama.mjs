// llama.cpp as a peer: loads a GGUF with node-llama-cpp's prebuilt CPU binary (never compiles),
// generates greedily from prompt token ids and prints one JSON object on stdout:
//   {"generated":[ids], "load_ms", "ttft_ms", "decode_tok_s", "threads", "top":[[[id,logit],...] per step]}
// ttft_ms: from submitting the prompt to the first generated token; decode_tok_s: the tokens after
// the first over the time they took. --top K adds each step's K highest logits (from a second,
// scoring-only run over prompt + generated ids, one token at a time as generation ran; not timed).
// With --events PATH it also writes the events log `sluice run --events` writes (run_start,
// prefill_done, one decode_step per token, run_end), so that `sluice bench run` can run it as a
// peer arm: --arm "llama:--peer 'node bench/peer/llama.mjs' --model FILE.gguf --threads 2".
// --force-ids 4,5,6 adds "forced": each step's --top K (at least 1) highest logits over prompt + those
// ids fed one at a time (teacher forcing: another engine's greedy path), for top-1 agreement along it.
// A GGUF without a vocabulary (tokenizer model "none", written for checkpoints without tokenizer
// files) runs on ids alone: node-llama-cpp's load-time tokenize/detokenize check is skipped for it
// (llama.cpp aborts on tokenizing without a tokenizer).
// Usage: node llama.mjs --model FILE.gguf --prompt-ids 1,2,3 --max-new N [--threads T] [--context C] [--top K]
//                       [--force-ids IDS] [--kv-type f16|f32] [--flash-attn true|false|auto] [--events PATH]
//                       [--mmap true|false|auto] [--lazy true|false|auto]
// (--mmap and --lazy set node-llama-cpp's useMmap and lazyMode; its defaults otherwise: mmap on, lazy off.
// --kv-type sets the KV cache's type (default F16) and --flash-attn flash attention (default auto,
// on for the CPU here); with F32 weights, --kv-type f32 --flash-attn false makes llama.cpp's
// forward pass fp32 throughout: its F16 cache and its flash attention round keys, values and
// queries to F16, 1e-3 logit differences on the tiny models.)
// Needs node_modules/node-llama-cpp (3.22.1): in $SLUICE_PEER_DIR, else next to this script (`cd
// bench/peer && npm install --ignore-scripts`), else in the working directory.
import {createRequire} from "node:module";
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";

const args = {threads: 0, context: 0, top: 0, maxNew: 16};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === "--model") args.model = v;
    else if (k === "--prompt-ids") args.prompt = v.split(",").filter(s => s.length).map(s => parseInt(s, 10));
    else if (k === "--max-new") args.maxNew = parseInt(v, 10);
    else if (k === "--threads") args.threads = parseInt(v, 10);
    else if (k === "--context") args.context = parseInt(v, 10);
    else if (k === "--top") args.top = parseInt(v, 10);
    else if (k === "--kv-type") args.kvType = v.toUpperCase();
    else if (k === "--flash-attn") args.flashAttn = v === "auto" ? "auto" : v === "true";
    else if (k === "--force-ids") args.force = v.split(",").filter(s => s.length).map(s => parseInt(s, 10));
    else if (k === "--events") args.events = v;
    else if (k === "--lazy") args.lazy = v === "auto" ? "auto" : v === "true";
    else if (k === "--mmap") args.mmap = v === "auto" ? "auto" : v === "true";
    else { console.error(`llama.mjs: unknown option ${k}`); process.exit(2); }
}
if (!args.model || !args.prompt?.length) {
    console.error("usage: node llama.mjs --model FILE.gguf --prompt-ids 1,2,3 --max-new N [--threads T] [--context C] [--top K]");
    process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const peerDir = process.env.SLUICE_PEER_DIR ||
    [here, process.cwd()].find(d => fs.existsSync(path.join(d, "node_modules", "node-llama-cpp"))) || process.cwd();
const require = createRequire(path.join(peerDir, "package.json"));
const {getLlama, LlamaLogLevel, LlamaModel, readGgufFileInfo} = await import(require.resolve("node-llama-cpp"));
const info = await readGgufFileInfo(args.model, {readTensorInfo: false, logWarnings: false,
    ignoreKeys: ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"]});
if (info.metadata?.tokenizer?.ggml?.model === "none")
    LlamaModel.prototype.getWarnings = function () { return []; };

const t0 = performance.now();
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0,
    ...(args.lazy !== undefined ? {lazyMode: args.lazy} : {}), ...(args.mmap !== undefined ? {useMmap: args.mmap} : {})});
const contextSize = args.context || Math.max(64, args.prompt.length + args.maxNew + 8);
const context = await model.createContext({
    contextSize, batchSize: Math.max(32, args.prompt.length), sequences: 1,
    ...(args.threads > 0 ? {threads: args.threads} : {}),
    ...(args.flashAttn !== undefined ? {flashAttention: args.flashAttn} : {}),
    ...(args.kvType ? {experimentalKvCacheKeyType: args.kvType, experimentalKvCacheValueType: args.kvType} : {}),
});
const seq = context.getSequence();
const loadMs = performance.now() - t0;

const generated = [];
const events = [];
let tStart = performance.now(), tFirst = 0, tLast = 0;
events.push({event: "run_start", prompt_ids: args.prompt, max_new: args.maxNew, engine: "llama.cpp"});
// temperature 0: llama_sampler_init_greedy (argmax); EOG tokens are yielded, not stopped on.
for await (const tok of seq.evaluate(args.prompt, {temperature: 0, yieldEogToken: true})) {
    const now = performance.now();
    const t = now - tStart;
    events.push({event: generated.length === 0 ? "prefill_done" : "decode_step", t_ms: t,
                 duration_ms: now - (generated.length === 0 ? tStart : tLast), emitted: [tok]});
    if (generated.length === 0) tFirst = now;
    tLast = now;
    generated.push(tok);
    if (generated.length >= args.maxNew) break;
}
if (args.events) {
    events.push({event: "run_end", status: "ok", completion_ids: generated, stop_reason: "max_new",
                 wall_ms: tLast - tStart});
    fs.writeFileSync(args.events, events.map(e => JSON.stringify(e)).join("\n") + "\n");
}
const out = {
    generated,
    load_ms: loadMs,
    ttft_ms: tFirst - tStart,
    decode_tok_s: generated.length > 1 ? (generated.length - 1) / ((tLast - tFirst) / 1000) : 0,
    threads: context.currentThreads ?? args.threads,
};
// The logits of prompt + `ids`: the prompt in one batch, as generation fed it, then each id alone
// (one batch over the whole path would take llama.cpp's batched kernels, e.g. chunked KDA, which
// differ from its one-token steps). One row of the k highest per step.
async function score(ids, k) {
    await seq.clearHistory();
    const last = args.prompt.length - 1;
    const res = await seq.controlledEvaluate(args.prompt.map((t, i) =>
        i === last ? [t, {generateNext: {token: true, logits: true}}] : t));
    const rows = [[...res[last].next.logits.entries()].slice(0, k)];
    for (const t of ids.slice(0, -1)) {
        const r = await seq.controlledEvaluate([[t, {generateNext: {token: true, logits: true}}]]);
        rows.push([...r[0].next.logits.entries()].slice(0, k));
    }
    return rows;
}
if (args.top > 0) out.top = await score(generated, args.top);
if (args.force?.length) out.forced = await score(args.force, Math.max(1, args.top));
console.log(JSON.stringify(out));
await context.dispose();
await model.dispose();
await llama.dispose();
