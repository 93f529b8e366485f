// The official OpenAI client (v6) against `sluice serve` on a tiny random model. Random weights
// make gibberish: these tests check structure, determinism, limits and errors, not meaning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.SLUICE_OPENAI_DIR + '/');
const { OpenAI } = require('openai');
const baseURL = process.env.SLUICE_URL;
const client = new OpenAI({ baseURL, apiKey: process.env.SLUICE_KEY, maxRetries: 0, timeout: 60_000 });
const model = 'tiny';
const hi = [{ role: 'user', content: 'Hello there' }];

async function collect(stream) {
  const out = { reasoning: '', content: '', finish: [], usage: null, chunks: 0, roles: [], toolCalls: [] };
  for await (const chunk of stream) {
    out.chunks++;
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      const d = c.delta ?? {};
      if (d.role) out.roles.push(d.role);
      if (d.reasoning_content) out.reasoning += d.reasoning_content;
      if (d.content) out.content += d.content;
      if (d.text) out.content += d.text;
      if (c.text) out.content += c.text;
      if (d.tool_calls) out.toolCalls.push(...d.tool_calls);
      if (c.finish_reason) out.finish.push(c.finish_reason);
    }
  }
  return out;
}

test('models.list names the served model', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
});

test('chat: JSON response shape, greedy determinism, usage', async () => {
  const req = { model, messages: hi, max_tokens: 10, temperature: 0 };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.equal(a.object, 'chat.completion');
  assert.match(a.id, /^chatcmpl-/);
  assert.equal(a.choices.length, 1);
  assert.equal(a.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(a.choices[0].finish_reason));
  assert.ok(a.usage.prompt_tokens > 0 && a.usage.completion_tokens <= 10);
  assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  assert.equal(typeof a.usage.prompt_tokens_details.cached_tokens, 'number');
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.equal(a.choices[0].message.reasoning_content, b.choices[0].message.reasoning_content);
  // The backend configuration: the same for every reply of one server.
  assert.match(a.system_fingerprint, /^fp_[0-9a-f]{12}$/);
  assert.equal(b.system_fingerprint, a.system_fingerprint);
});

test('chat: streamed deltas equal the JSON answer; role first, one finish, usage chunk', async () => {
  const req = { model, messages: hi, max_completion_tokens: 12, temperature: 0 };
  const json = await client.chat.completions.create(req);
  const s = await collect(await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
  assert.deepEqual(s.roles, ['assistant']);
  assert.equal(s.finish.length, 1);
  assert.equal(s.finish[0], json.choices[0].finish_reason);
  assert.equal(s.content, json.choices[0].message.content ?? '');
  assert.equal(s.reasoning, json.choices[0].message.reasoning_content ?? '');
  assert.deepEqual(s.usage.completion_tokens, json.usage.completion_tokens);
  const plain = await collect(await client.chat.completions.create({ ...req, stream: true }));
  assert.equal(plain.usage, null);
});

test('chat: reasoning_effort renders the thinking-effort message; none turns thinking off', async () => {
  const low = await client.chat.completions.create({ model, messages: hi, max_tokens: 6, temperature: 0, reasoning_effort: 'low' });
  const max = await client.chat.completions.create({ model, messages: hi, max_tokens: 6, temperature: 0, reasoning_effort: 'max' });
  const off = await client.chat.completions.create({ model, messages: hi, max_tokens: 6, temperature: 0, reasoning_effort: 'none' });
  const high = await client.chat.completions.create({ model, messages: hi, max_tokens: 1, reasoning_effort: 'high' });
  assert.equal(low.usage.prompt_tokens, max.usage.prompt_tokens);  // 'low' and 'max' are 3 byte tokens each
  assert.equal(high.usage.prompt_tokens, low.usage.prompt_tokens + 1);
  assert.ok(off.usage.prompt_tokens < low.usage.prompt_tokens);
  assert.equal(off.choices[0].message.reasoning_content, undefined);
  // With thinking on, the reply starts in the think channel: what the model wrote before any
  // response marker is reasoning, never content.
  const on = low.choices[0].message;
  assert.ok((on.reasoning_content ?? '').length + (on.content ?? '').length > 0 || low.choices[0].finish_reason === 'stop');
});

test('chat: tools and a tool-call round trip are accepted and rendered', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const first = await client.chat.completions.create({ model, messages: hi, tools, max_tokens: 4, temperature: 0 });
  const plain = await client.chat.completions.create({ model, messages: hi, max_tokens: 4, temperature: 0 });
  assert.ok(first.usage.prompt_tokens > plain.usage.prompt_tokens + 50, 'the tool declaration is in the prompt');
  const history = [...hi,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 3}' }];
  const second = await client.chat.completions.create({ model, messages: history, tools, tool_choice: 'auto', max_tokens: 4, temperature: 0 });
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
  const required = await client.chat.completions.create({ model, messages: hi, tools, tool_choice: 'required', max_tokens: 2 });
  assert.ok(required.usage.prompt_tokens > first.usage.prompt_tokens);
});

test('completions: JSON and stream agree; stop sequences cut the text', async () => {
  const req = { model, prompt: 'In the beginning', max_tokens: 24, temperature: 0 };
  const a = await client.completions.create(req);
  assert.equal(a.object, 'text_completion');
  const s = await collect(await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.content, a.choices[0].text);
  assert.equal(s.usage.completion_tokens, a.usage.completion_tokens);
  const text = a.choices[0].text;
  if (text.length >= 6) {
    const stop = text.slice(3, 5);
    const cut = await client.completions.create({ ...req, stop: [stop] });
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, 'stop');
    const sc = await collect(await client.completions.create({ ...req, stop, stream: true }));
    assert.equal(sc.content, cut.choices[0].text);
    assert.deepEqual(sc.finish, ['stop']);
  }
});

test('sampling: the same seed gives the same text; max_tokens is a hard limit', async () => {
  const req = { model, prompt: 'Seeded', max_tokens: 16, temperature: 1.0, top_p: 0.9, seed: 1234 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const one = await client.completions.create({ model, prompt: 'x', max_tokens: 1, temperature: 0 });
  const many = await client.completions.create({ model, prompt: 'x', max_tokens: 700, temperature: 0, ignore_eos: true });
  assert.equal(many.usage.completion_tokens, 700);
  assert.equal(many.choices[0].finish_reason, 'length');
  assert.equal(one.usage.completion_tokens, 1);
  assert.equal(one.choices[0].finish_reason, 'length');
});

test('state reuse: an extension of the last tape is continued; another prompt later, the prefix cache restores it', async () => {
  const base = 'A long shared conversation prefix';
  const first = await client.completions.create({ model, prompt: base, max_tokens: 1, temperature: 0 });
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const req = { model, prompt: base + ' and its continuation', max_tokens: 8, temperature: 0 };
  const cont = await client.completions.create(req);
  assert.equal(cont.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens);
  // After another prompt, the prefix cache still holds the state at the end of the first prompt
  // (this K3-architecture model's recurrent part is kept where each prompt ends).
  await client.completions.create({ model, prompt: 'something else', max_tokens: 1 });
  const again = await client.completions.create(req);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens);
  assert.equal(again.choices[0].text, cont.choices[0].text, 'reuse is exact');
});

// Guided decoding: schemas without free strings, so even random weights finish a reply quickly;
// the checks below are the schemas' own rules, spelled out.
const shape = { type: 'object', additionalProperties: false, required: ['unit', 'count', 'ok'],
  properties: { unit: { enum: ['c', 'f'] }, count: { type: 'integer' }, ok: { type: 'boolean' } } };
function matchesShape(v) {
  return v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).every((k) => k in shape.properties) &&
    ['c', 'f'].includes(v.unit) && Number.isInteger(v.count) && typeof v.ok === 'boolean';
}
const shapeTools = [
  { type: 'function', function: { name: 'measure', parameters: shape, strict: true } },
  { type: 'function', function: { name: 'toggle', parameters: { type: 'object', additionalProperties: false,
    required: ['on'], properties: { on: { type: 'boolean' } } } } }];

test('guided: parse with a strict json_schema returns the parsed object, greedy and sampled', async () => {
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.parse({ model, messages: hi, max_tokens: 200, temperature, seed: 7,
      reasoning_effort: 'none', response_format: { type: 'json_schema', json_schema: { name: 'shape', strict: true, schema: shape } } });
    assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].message.content);
    assert.ok(matchesShape(r.choices[0].message.parsed), r.choices[0].message.content);
  }
  const o = await client.chat.completions.create({ model, messages: hi, max_tokens: 200, temperature: 0,
    reasoning_effort: 'none', response_format: { type: 'json_object' } });
  if (o.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
  await assert.rejects(client.chat.completions.create({ model, messages: hi, response_format: { type: 'json_schema',
    json_schema: { name: 'n', schema: { type: 'integer', minimum: 3 } } } }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.json_schema.schema' && /minimum/.test(e.message));
});

test('guided: tool_choice required, named and single calls give schema-valid arguments', async () => {
  const base = { model, messages: hi, tools: shapeTools, max_tokens: 300, reasoning_effort: 'none' };
  for (const [extra, name, single] of [
    [{ tool_choice: 'required', temperature: 0 }, null, false],
    [{ tool_choice: 'required', temperature: 1, seed: 3, parallel_tool_calls: false }, null, true],
    [{ tool_choice: { type: 'function', function: { name: 'measure' } }, temperature: 1, seed: 5 }, 'measure', false]]) {
    const r = await client.chat.completions.create({ ...base, ...extra });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.ok(c.message.tool_calls.length >= 1);
    if (single) assert.equal(c.message.tool_calls.length, 1);
    for (const call of c.message.tool_calls) {
      if (name) assert.equal(call.function.name, name);
      const args = JSON.parse(call.function.arguments);
      if (call.function.name === 'measure') assert.ok(matchesShape(args), call.function.arguments);
      else assert.deepEqual(Object.keys(args), ['on']);
    }
  }
  const streamed = await collect(await client.chat.completions.create({ ...base, tool_choice: 'required', temperature: 0, stream: true }));
  assert.deepEqual(streamed.finish, ['tool_calls']);
  assert.ok(streamed.toolCalls.length >= 1);
});

test('responses: create, stream and the SDK\'s accumulated stream agree; usage; incomplete at the limit', async () => {
  const req = { model, input: 'Hello there', instructions: 'Answer briefly.', max_output_tokens: 12, temperature: 0 };
  const a = await client.responses.create(req);
  assert.equal(a.object, 'response');
  assert.match(a.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(a.status));
  if (a.status === 'incomplete') assert.equal(a.incomplete_details.reason, 'max_output_tokens');
  assert.equal(a.instructions, 'Answer briefly.');
  assert.equal(a.store, false);
  assert.ok(a.usage.input_tokens > 0 && a.usage.output_tokens <= 12);
  assert.equal(a.usage.total_tokens, a.usage.input_tokens + a.usage.output_tokens);
  const text = a.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
  assert.equal(a.output_text, text);  // the SDK's own convenience field
  // Streamed through the SDK's accumulating helper: every event in order, the same items.
  const stream = client.responses.stream(req);
  const deltas = [];
  stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
  const final = await stream.finalResponse();
  // Item ids are per response; everything else is the same greedy reply.
  const items = (r) => r.output.map(({ id, ...rest }) => rest);
  assert.deepEqual(items(final), items(a));
  assert.equal(final.output_text, a.output_text);
  assert.equal(deltas.join(''), a.output_text);
  // Raw events: created first, numbered from 0, completed or incomplete last.
  const events = [];
  for await (const e of await client.responses.create({ ...req, stream: true })) events.push(e);
  assert.equal(events[0].type, 'response.created');
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.ok(['response.completed', 'response.incomplete'].includes(events.at(-1).type));
  assert.deepEqual(items(events.at(-1).response), items(a));
});

test('responses: required, named and single tool calls; the calls and their outputs go back as input', async () => {
  const tools = shapeTools.map((t) => ({ type: 'function', ...t.function }));
  const base = { model, input: 'Measure it.', tools, max_output_tokens: 1000, reasoning: { effort: 'none' } };
  for (const [extra, name, single] of [
    [{ tool_choice: 'required', temperature: 0 }, null, false],
    [{ tool_choice: 'required', temperature: 1, parallel_tool_calls: false }, null, true],
    [{ tool_choice: { type: 'function', name: 'measure' }, temperature: 0 }, 'measure', false]]) {
    const r = await client.responses.create({ ...base, ...extra });
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(r.status, 'completed', JSON.stringify(r.output));
    assert.ok(calls.length >= 1);
    if (single) assert.equal(calls.length, 1);
    for (const call of calls) {
      if (name) assert.equal(call.name, name);
      const args = JSON.parse(call.arguments);
      if (call.name === 'measure') assert.ok(matchesShape(args), call.arguments);
      else assert.deepEqual(Object.keys(args), ['on']);
    }
    if (name) {
      // The agent loop: the calls and their outputs appended to the input, then the next turn.
      const input = [{ role: 'user', content: 'Measure it.' }, ...calls,
        ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '{"ok": true}' }))];
      const next = await client.responses.create({ model, input, tools, max_output_tokens: 8, temperature: 0 });
      assert.ok(['completed', 'incomplete'].includes(next.status));
      assert.ok(next.usage.input_tokens > r.usage.input_tokens);
    }
  }
});

test('responses: a strict json_schema text format gives output_text valid against it, greedy and sampled', async () => {
  for (const temperature of [0, 1]) {
    const r = await client.responses.create({ model, input: 'A shape, please.', max_output_tokens: 200, temperature,
      reasoning: { effort: 'none' }, text: { format: { type: 'json_schema', name: 'shape', strict: true, schema: shape } } });
    assert.equal(r.status, 'completed', r.output_text);
    assert.ok(matchesShape(JSON.parse(r.output_text)), r.output_text);
  }
});

test('responses: unknown and unsupported fields are typed 400s naming them', async () => {
  for (const [extra, param] of [[{ frobnicate: 1 }, 'frobnicate'], [{ previous_response_id: 'resp_x' }, 'previous_response_id'],
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'], [{ include: ['reasoning.encrypted_content'] }, 'include']]) {
    await assert.rejects(client.responses.create({ model, input: 'x', ...extra }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === param, JSON.stringify(extra));
  }
});

test('logprobs: every generated token with its alternatives, JSON and stream alike; completions too', async () => {
  const req = { model, messages: hi, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 };
  const a = await client.chat.completions.create(req);
  const lp = a.choices[0].logprobs.content;
  // Every generated token but an end token that stopped the reply.
  assert.ok([a.usage.completion_tokens, a.usage.completion_tokens - 1].includes(lp.length), JSON.stringify(a.usage));
  for (const e of lp) {
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].token, e.token);  // greedy took the most likely token
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
    assert.ok(e.logprob <= 0 && e.top_logprobs[2].logprob <= e.top_logprobs[1].logprob);
    assert.ok(Array.isArray(e.bytes));
  }
  const streamed = [];
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true }))
    for (const c of chunk.choices) if (c.logprobs?.content) streamed.push(...c.logprobs.content);
  assert.deepEqual(streamed, lp);
  const c = await client.completions.create({ model, prompt: 'Once upon', max_tokens: 6, temperature: 0, logprobs: 2 });
  const l = c.choices[0].logprobs;
  assert.equal(l.tokens.length, l.token_logprobs.length);
  assert.equal(l.top_logprobs.length, l.tokens.length);
  assert.equal(l.text_offset[0], 0);
  for (let i = 1; i < l.text_offset.length; i++) assert.ok(l.text_offset[i] >= l.text_offset[i - 1]);
  const none = await client.chat.completions.create({ model, messages: hi, max_tokens: 2, temperature: 0 });
  assert.equal(none.choices[0].logprobs, null);
  await assert.rejects(client.chat.completions.create({ model, messages: hi, top_logprobs: 2 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_logprobs');
});

test('errors: typed OpenAI errors with param and code', async () => {
  await assert.rejects(client.chat.completions.create({ model, messages: hi, n: 2 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n');
  await assert.rejects(client.chat.completions.create({ model, messages: hi, frobnicate: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'unknown_parameter' && e.param === 'frobnicate');
  await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages[0].content[0].type');
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: hi }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

test('busy: beyond one running and --queue waiting, requests get 429', async () => {
  const long = { model, prompt: 'busy', max_tokens: 400, temperature: 0, ignore_eos: true };
  const results = await Promise.allSettled([1, 2, 3, 4].map(() => client.completions.create(long)));
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  const limited = results.filter((r) => r.status === 'rejected' && r.reason instanceof OpenAI.RateLimitError).length;
  assert.equal(ok + limited, 4, JSON.stringify(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason))));
  assert.ok(ok >= 1 && limited >= 1, `ok=${ok} limited=${limited}`);
});
