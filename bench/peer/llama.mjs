// llama.cpp as a peer: loads a GGUF with node-llama-cpp's prebuilt CPU binary (never compiles),
// generates greedily from prompt token ids and prints one JSON object on stdout:
//   {"generated":[ids], "load_ms", "ttft_ms", "decode_tok_s", "threads", "top":[[[id,logit],...] per step]}
// ttft_ms: from submitting the prompt to the first generated token; decode_tok_s: the tokens after
// the first over the time they took. --top K adds each step's K highest logits (from a second,
// scoring-only pass over prompt + generated ids, not timed).
// Usage: node llama.mjs --model FILE.gguf --prompt-ids 1,2,3 --max-new N [--threads T] [--context C] [--top K]
// Needs node_modules/node-llama-cpp (3.22.1) on NODE_PATH's resolution path: run from (or set
// SLUICE_PEER_DIR to) the directory it was installed into.
import {createRequire} from "node:module";
import path from "node:path";

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
    else { console.error(`llama.mjs: unknown option ${k}`); process.exit(2); }
}
if (!args.model || !args.prompt?.length) {
    console.error("usage: node llama.mjs --model FILE.gguf --prompt-ids 1,2,3 --max-new N [--threads T] [--context C] [--top K]");
    process.exit(2);
}
const peerDir = process.env.SLUICE_PEER_DIR || process.cwd();
const require = createRequire(path.join(peerDir, "package.json"));
const {getLlama, LlamaLogLevel} = await import(require.resolve("node-llama-cpp"));

const t0 = performance.now();
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
const contextSize = args.context || Math.max(64, args.prompt.length + args.maxNew + 8);
const context = await model.createContext({
    contextSize, batchSize: Math.max(32, args.prompt.length), sequences: 1,
    ...(args.threads > 0 ? {threads: args.threads} : {}),
});
const seq = context.getSequence();
const loadMs = performance.now() - t0;

const generated = [];
let tStart = performance.now(), tFirst = 0, tLast = 0;
// temperature 0: llama_sampler_init_greedy (argmax); EOG tokens are yielded, not stopped on.
for await (const tok of seq.evaluate(args.prompt, {temperature: 0, yieldEogToken: true})) {
    const now = performance.now();
    if (generated.length === 0) tFirst = now;
    tLast = now;
    generated.push(tok);
    if (generated.length >= args.maxNew) break;
}
const out = {
    generated,
    load_ms: loadMs,
    ttft_ms: tFirst - tStart,
    decode_tok_s: generated.length > 1 ? (generated.length - 1) / ((tLast - tFirst) / 1000) : 0,
    threads: context.currentThreads ?? args.threads,
};
if (args.top > 0) {
    await seq.clearHistory();
    const ids = [...args.prompt, ...generated.slice(0, -1)];
    const first = args.prompt.length - 1;
    const res = await seq.controlledEvaluate(ids.map((t, i) =>
        i >= first ? [t, {generateNext: {token: true, logits: true}}] : t));
    out.top = [];
    for (let i = first; i < ids.length; ++i)
        out.top.push([...res[i].next.logits.entries()].slice(0, args.top));
}
console.log(JSON.stringify(out));
await context.dispose();
await model.dispose();
await llama.dispose();
