// The official Anthropic client against `sluice serve`'s /v1/messages on a tiny random model.
// Random weights make gibberish: these tests check shapes, event order, determinism, limits and
// errors, not meaning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.SLUICE_ANTHROPIC_DIR + '/');
const Anthropic = require('@anthropic-ai/sdk').default ?? require('@anthropic-ai/sdk');
const baseURL = process.env.SLUICE_URL;
const apiKey = process.env.SLUICE_KEY;
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = 'tiny';
const hi = [{ role: 'user', content: 'Hello there' }];
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

test('messages.create: the message shape, usage, greedy determinism', async () => {
  const req = { model, max_tokens: 10, messages: hi, temperature: 0 };
  const a = await client.messages.create(req);
  const b = await client.messages.create(req);
  assert.match(a.id, /^msg_/);
  assert.equal(a.type, 'message');
  assert.equal(a.role, 'assistant');
  assert.equal(a.model, model);
  assert.ok(['end_turn', 'max_tokens'].includes(a.stop_reason), a.stop_reason);
  assert.equal(a.stop_sequence, null);
  assert.ok(a.usage.output_tokens >= 1 && a.usage.output_tokens <= 10);
  assert.ok(a.usage.input_tokens + a.usage.cache_read_input_tokens > 0);
  // No `thinking` in the request: no thinking block, as Anthropic's API answers.
  for (const block of a.content) assert.equal(block.type, 'text');
  assert.deepEqual(b.content, a.content);
  assert.equal(typeof a.sluice.ttft_ms, 'number');
  assert.equal(typeof a.sluice.tokens_per_second, 'number');
});

test('streams: raw events in the documented order; the accumulated message equals the JSON one', async () => {
  const req = { model, max_tokens: 12, messages: hi, temperature: 0 };
  const json = await client.messages.create(req);
  const events = [];
  for await (const e of await client.messages.create({ ...req, stream: true })) events.push(e);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.equal(types.at(-2), 'message_delta');  // (the client drops ping events)
  assert.deepEqual(events[0].message.content, []);
  const open = new Set();
  let next = 0;
  for (const e of events) {
    if (e.type === 'content_block_start') { assert.equal(e.index, next++); open.add(e.index); }
    if (e.type === 'content_block_delta') assert.ok(open.has(e.index));
    if (e.type === 'content_block_stop') { assert.ok(open.delete(e.index)); }
  }
  assert.equal(open.size, 0);
  const delta = events.at(-2);
  assert.equal(delta.delta.stop_reason, json.stop_reason);
  assert.equal(delta.usage.output_tokens, json.usage.output_tokens);
  const final = await client.messages.stream(req).finalMessage();
  assert.deepEqual(final.content, json.content);
  assert.equal(final.stop_reason, json.stop_reason);
  assert.equal(final.usage.output_tokens, json.usage.output_tokens);
});

test('thinking off gives text blocks; system prompts as a string or blocks count as input', async () => {
  const off = await client.messages.create({ model, max_tokens: 8, messages: hi, temperature: 0,
                                             thinking: { type: 'disabled' } });
  assert.ok(off.content.every((b) => b.type === 'text'));
  const on = await client.messages.create({ model, max_tokens: 2048, messages: hi, temperature: 0,
                                            thinking: { type: 'enabled', budget_tokens: 1024 }, stop_sequences: ['\n'] });
  assert.ok(on.content.every((b) => b.type === 'thinking' || b.type === 'text'));
  const plain = { model, max_tokens: 1, messages: hi, temperature: 0, thinking: { type: 'disabled' } };
  const base = await client.messages.create(plain);
  const sys = await client.messages.create({ ...plain, system: 'Be brief.' });
  const blocks = await client.messages.create({ ...plain, system: [{ type: 'text', text: 'Be ' },
    { type: 'text', text: 'brief.', cache_control: { type: 'ephemeral' } }] });
  const inputOf = (m) => m.usage.input_tokens + m.usage.cache_read_input_tokens;
  assert.ok(inputOf(sys) > inputOf(base));
  assert.equal(inputOf(blocks), inputOf(sys));
});

test('tools: declared tools, a tool_use / tool_result round trip, tool_choice any', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather in a city',
                   input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
  const plain = await client.messages.create({ model, max_tokens: 4, messages: hi, temperature: 0 });
  const first = await client.messages.create({ model, max_tokens: 4, messages: hi, tools, temperature: 0 });
  const inputOf = (m) => m.usage.input_tokens + m.usage.cache_read_input_tokens;
  assert.ok(inputOf(first) > inputOf(plain) + 50, 'the tool declaration is in the prompt');
  const history = [...hi,
    { role: 'assistant', content: [{ type: 'thinking', thinking: 'I need the weather.', signature: '' },
                                   { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: '3 C, cloudy' },
                              { type: 'text', text: 'Thanks, and tomorrow?' }] }];
  const second = await client.messages.create({ model, max_tokens: 4, messages: history, tools, temperature: 0 });
  assert.ok(inputOf(second) > inputOf(first));
  const any = await client.messages.create({ model, max_tokens: 2, messages: hi, tools, tool_choice: { type: 'any' } });
  assert.ok(inputOf(any) > inputOf(first));
  const streamed = await client.messages.stream({ model, max_tokens: 4, messages: history, tools, temperature: 0 }).finalMessage();
  assert.deepEqual(streamed.content, second.content);
  // A named tool is a call of that tool, enforced (guided decoding); an unknown name is a 400.
  const toolChoice = { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true };
  const forced = await client.messages.create({ model, max_tokens: 300, messages: hi, tools, tool_choice: toolChoice,
    temperature: 0, thinking: { type: 'disabled' } });
  if (forced.stop_reason === 'tool_use') {  // a random model may still be inside the string at max_tokens
    const uses = forced.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1);
    assert.equal(uses[0].name, 'get_weather');
    assert.equal(typeof uses[0].input.city, 'string');
  } else {
    assert.equal(forced.stop_reason, 'max_tokens');
  }
  await assert.rejects(client.messages.create({ model, max_tokens: 2, messages: hi, tools,
                                                tool_choice: { type: 'tool', name: 'get_time' } }),
    (e) => e instanceof Anthropic.BadRequestError && e.error.error.type === 'invalid_request_error' &&
           /get_time/.test(e.error.error.message));
});

test('messages.countTokens: the prompt a create with the same messages reads', async () => {
  const sys = 'Be brief.';
  const counted = await client.messages.countTokens({ model, messages: hi, system: sys });
  assert.equal(typeof counted.input_tokens, 'number');
  const made = await client.messages.create({ model, max_tokens: 1, messages: hi, system: sys, temperature: 0 });
  assert.equal(counted.input_tokens, made.usage.input_tokens + made.usage.cache_read_input_tokens);
  const plain = await client.messages.countTokens({ model, messages: hi });
  const more = await client.messages.countTokens({ model, messages: [...hi, { role: 'assistant', content: 'Hi.' },
                                                                     { role: 'user', content: 'And you?' }] });
  assert.ok(counted.input_tokens > plain.input_tokens, 'a system prompt counts');
  assert.ok(more.input_tokens > plain.input_tokens, 'more turns count');
  await assert.rejects(client.messages.countTokens({ model, messages: hi, max_tokens: 5 }),
                       (e) => e.status === 400 && /max_tokens/.test(e.message));
});

test('stop sequences cut the text and are reported', async (t) => {
  const req = { model, max_tokens: 40, messages: hi, temperature: 0, thinking: { type: 'disabled' } };
  const full = await client.messages.create(req);
  const text = textOf(full);
  const stop = [...Array(Math.max(0, text.length - 4)).keys()].map((i) => text.slice(i + 2, i + 4))
    .find((s) => s.length === 2 && !s.includes('\uFFFD') && text.indexOf(s) >= 1);
  if (!stop) { t.skip('no usable stop sequence in this gibberish'); return; }
  const cut = await client.messages.create({ ...req, stop_sequences: [stop] });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(textOf(cut), text.slice(0, text.indexOf(stop)));
  const streamed = await client.messages.stream({ ...req, stop_sequences: [stop] }).finalMessage();
  assert.equal(streamed.stop_sequence, stop);
  assert.equal(textOf(streamed), textOf(cut));
});

test('state reuse: the next turn continues the kept state; after another conversation the prefix cache restores it', async () => {
  const first = await client.messages.create({ model, max_tokens: 1, messages: hi, temperature: 0 });
  const reply = first.content.length ? first.content : [{ type: 'text', text: '' }];
  const next = [...hi, { role: 'assistant', content: reply }, { role: 'user', content: 'Go on.' }];
  const second = await client.messages.create({ model, max_tokens: 4, messages: next, temperature: 0 });
  assert.ok(second.usage.cache_read_input_tokens > 0, JSON.stringify(second.usage));
  await client.messages.create({ model, max_tokens: 1, messages: [{ role: 'user', content: 'Unrelated' }] });
  // The first conversation was kept when the unrelated one replaced it (tests/e2e/serve_prefix_cache.sh
  // compares such replies with a server that reuses nothing).
  const again = await client.messages.create({ model, max_tokens: 4, messages: next, temperature: 0 });
  assert.ok(again.usage.cache_read_input_tokens > 0, JSON.stringify(again.usage));
  assert.deepEqual(again.content, second.content, 'reuse is exact');
});

test('errors: typed Anthropic errors in Anthropic\'s shape', async () => {
  const isError = (cls, type) => (e) => e instanceof cls && e.error?.type === 'error' && e.error.error.type === type &&
    typeof e.error.error.message === 'string';
  await assert.rejects(client.messages.create({ model, messages: hi }),
    isError(Anthropic.BadRequestError, 'invalid_request_error'));
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages: hi, frobnicate: true }),
    (e) => isError(Anthropic.BadRequestError, 'invalid_request_error')(e) && /^frobnicate:/.test(e.error.error.message));
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }),
    (e) => isError(Anthropic.BadRequestError, 'invalid_request_error')(e) && /messages\.0\.content\.0\.type/.test(e.message));
  await assert.rejects(client.messages.create({ model: 'claude-opus-4', max_tokens: 4, messages: hi }),
    isError(Anthropic.NotFoundError, 'not_found_error'));
  const wrong = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model, max_tokens: 1, messages: hi }),
    isError(Anthropic.AuthenticationError, 'authentication_error'));
  // The key as a bearer token works too.
  const bearer = new Anthropic({ baseURL, apiKey: null, authToken: apiKey, maxRetries: 0 });
  const ok = await bearer.messages.create({ model, max_tokens: 1, messages: hi });
  assert.equal(ok.type, 'message');
});

test('busy: beyond one running and --queue waiting, requests get 529 overloaded_error', async () => {
  const long = { model, max_tokens: 400, messages: hi, temperature: 0, thinking: { type: 'disabled' } };
  const results = await Promise.allSettled([1, 2, 3, 4].map(() => client.messages.create(long)));
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  const over = results.filter((r) => r.status === 'rejected' && r.reason instanceof Anthropic.OverloadedError &&
                                     r.reason.error.error.type === 'overloaded_error').length;
  assert.equal(ok + over, 4, JSON.stringify(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason))));
  assert.ok(ok >= 1 && over >= 1, `ok=${ok} overloaded=${over}`);
});

test('an aborted stream stops its generation', async () => {
  const stream = client.messages.stream({ model, max_tokens: 100000, messages: hi, thinking: { type: 'disabled' } });
  let seen = 0;
  for await (const e of stream) {
    if (e.type === 'content_block_delta' && ++seen === 3) break;  // leaving the loop aborts the request
  }
  let generating = true;
  for (let i = 0; i < 50 && generating; ++i) {
    await new Promise((r) => setTimeout(r, 100));
    generating = (await (await fetch(baseURL + '/health')).json()).generating;
  }
  assert.equal(generating, false, 'the generation went on after the client left');
});
