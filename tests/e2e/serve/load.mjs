// Load driver for serve_load.sh: R rounds of N requests from C concurrent clients; validates every
// response (200 with the right shape, or a 429 error), reads the server's VmRSS after each round
// and fails when memory keeps growing after the warm-up rounds.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, requests: { type: 'string' }, clients: { type: 'string' } } });
const rounds = Number(values.rounds), perRound = Number(values.requests), clients = Number(values.clients);
const base = process.env.SLUICE_URL;
const pid = process.env.SLUICE_PID;

function rssKiB() {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]);
}

function body(i) {
  const kind = i % 4;
  const common = { model: 'tiny', max_tokens: 3 + (i % 5), temperature: i % 3 === 0 ? 0.8 : 0, seed: i };
  const stream = kind >= 2;
  if (kind % 2 === 0) return ['/v1/completions', { ...common, prompt: `request ${i} of the load test`, stream }];
  return ['/v1/chat/completions', { ...common, messages: [{ role: 'user', content: `hello ${i}` }], stream }];
}

function check(cond, what, text) {
  if (!cond) throw new Error(`${what}: ${text.slice(0, 400)}`);
}

async function one(i, counts) {
  const [path, req] = body(i);
  const res = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(req) });
  const text = await res.text();
  if (res.status === 429) {
    const e = JSON.parse(text);
    check(e.error?.code === 'rate_limit_exceeded' && e.error.message, '429 body', text);
    counts.limited++;
    // Like a polite client: back off briefly before the next request.
    await new Promise((r) => setTimeout(r, 10 + (i % 7) * 5));
    return;
  }
  check(res.status === 200, `HTTP ${res.status}`, text);
  const chat = path.includes('chat');
  if (req.stream) {
    check(text.endsWith('data: [DONE]\n\n'), 'stream end', text);
    const chunks = text.split('\n\n').filter((e) => e && e !== 'data: [DONE]' && !e.startsWith(':')).map((e) => JSON.parse(e.slice(6)));
    check(chunks.every((c) => c.object === (chat ? 'chat.completion.chunk' : 'text_completion')), 'chunk object', text);
    const finals = chunks.filter((c) => c.choices[0]?.finish_reason);
    check(finals.length === 1, 'one finish_reason', text);
  } else {
    const j = JSON.parse(text);
    check(j.object === (chat ? 'chat.completion' : 'text_completion'), 'object', text);
    check(['stop', 'length'].includes(j.choices[0].finish_reason), 'finish_reason', text);
    check(j.usage.completion_tokens <= req.max_tokens, 'max_tokens', text);
  }
  counts.ok++;
}

const history = [];
let next = 0;
for (let r = 0; r < rounds; r++) {
  const counts = { ok: 0, limited: 0 };
  const t0 = Date.now();
  const end = next + perRound;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < end) await one(next++, counts);
  }));
  const health = await (await fetch(base + '/health')).json();
  const rss = rssKiB();
  history.push(rss);
  console.log(`round ${r + 1}: ${counts.ok} answered, ${counts.limited} got 429, ${Date.now() - t0} ms, ` +
              `server VmRSS ${rss} KiB, completed ${health.completed}`);
  if (counts.ok + counts.limited !== perRound) throw new Error('a request got neither an answer nor a 429');
  if (counts.ok === 0) throw new Error('no request was answered');
}
// The first two rounds warm the allocator (glibc gives each connection thread its own arena as it
// first serves); after them, growth must stay within noise: 4 MiB in total.
const warm = Math.min(1, history.length - 1);
const growth = history[history.length - 1] - history[warm];
console.log(`VmRSS by round (KiB): ${history.join(' ')}; growth after round ${warm + 1}: ${growth} KiB`);
if (growth > 4096) throw new Error(`server memory grew by ${growth} KiB across rounds`);
