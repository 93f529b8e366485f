// The web chat in headless Chromium against `sluice serve` on a tiny random model whose experts
// stream from two homes: key prompt, streamed replies through both routes, stats, the stop button,
// and the live charts. Random weights make gibberish: the test checks behaviour, not meaning.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.SLUICE_WEB_DIR + '/');
const { chromium } = require('playwright-core');
const url = process.env.SLUICE_URL;
const key = process.env.SLUICE_KEY;

const browser = await chromium.launch({
  executablePath: process.env.SLUICE_CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
// Closed however the tests end: an open browser keeps node (and the e2e test) running.
after(() => browser.close());
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const requests = [];
page.on('request', (r) => requests.push(r.url()));
const problems = [];
page.on('pageerror', (e) => problems.push(String(e)));
page.on('console', (m) => { if (m.type() === 'error' && !/401/.test(m.text())) problems.push(m.text()); });

async function health() { return (await fetch(url + '/health')).json(); }

// Counts the updates of a reply's text while it streams.
async function watchUpdates() {
  await page.evaluate(() => {
    window.__updates = 0;
    new MutationObserver(() => { window.__updates++; })
      .observe(document.getElementById('messages'), { subtree: true, characterData: true, childList: true });
  });
}

async function sendAndWait(prompt) {
  const before = await page.locator('.msg.assistant').count();
  await page.fill('#prompt', prompt);
  await page.click('#send');
  const reply = page.locator('.msg.assistant').nth(before);
  await reply.locator('.stats').waitFor({ state: 'visible', timeout: 60_000 });
  return reply;
}

test('the page asks for the key, then streams a reply with its stats', async () => {
  await page.goto(url + '/');
  await page.locator('#key-dialog').waitFor({ state: 'visible' });
  await page.fill('#key-input', 'not-the-key');
  await page.click('#key-ok');
  await page.locator('#key-error').filter({ hasText: 'refused' }).waitFor({ timeout: 10_000 });
  await page.fill('#key-input', key);
  await page.click('#key-ok');
  await page.locator('#model').filter({ hasText: 'tiny-k3' }).waitFor({ timeout: 10_000 });
  await watchUpdates();
  await page.fill('#max-tokens', '120');
  const reply = await sendAndWait('Tell me about drives.');
  const text = (await reply.locator('.thinking').textContent()) + (await reply.locator('.content').textContent());
  assert.ok(text.length > 0, 'the reply has text');
  assert.ok(await page.evaluate(() => window.__updates) > 3, 'the text arrived in pieces');
  // K3 reasons first: the reasoning folds once the answer starts; a reply that is all reasoning
  // keeps it open and says why there is no answer (cut at max tokens, or ended while thinking).
  const answer = await reply.locator('.content').textContent();
  if (answer) {
    assert.equal(await reply.locator('details.reasoning').getAttribute('open'), null);
  } else {
    assert.notEqual(await reply.locator('details.reasoning').getAttribute('open'), null);
    assert.match(await reply.locator('.cut').textContent(), /^(Cut while still thinking, at \d+ tokens|No answer: )/);
  }
  const stats = await reply.locator('.stats').textContent();
  assert.match(stats, /TTFT \d+ ms · [\d.]+ tok\/s · \d+ tokens · drafts \d+\/\d+ accepted · [\d.]+ (B|kB|MB) read/);
  assert.ok(!/ 0 B read/.test(stats), 'streamed experts were read: ' + stats);
});

test('the Anthropic route streams a second turn with the first reply sent back as blocks', async () => {
  await page.selectOption('#api', 'anthropic');
  await page.fill('#max-tokens', '60');
  const sent = page.waitForRequest((r) => r.url().endsWith('/v1/messages'));
  const reply = await sendAndWait('And then?');
  const body = JSON.parse((await sent).postData());
  assert.equal(body.stream, true);
  assert.deepEqual(body.messages.map((m) => m.role), ['user', 'assistant', 'user']);
  assert.equal(body.messages[1].content[0].type, 'thinking');
  assert.match(await reply.locator('.stats').textContent(), /TTFT \d+ ms/);
});

test('the stop button ends a long reply and its generation', async () => {
  await page.selectOption('#api', 'openai');
  await page.fill('#max-tokens', '100000');
  // A random model may end its reply at any token: this one goes on until stopped (ignore_eos is
  // the server's extension, added to the page's request on its way out).
  const endless = (route) => route.continue({ postData: JSON.stringify({ ...route.request().postDataJSON(), ignore_eos: true }) });
  await page.route('**/v1/chat/completions', endless);
  const before = await page.locator('.msg.assistant').count();
  await page.fill('#prompt', 'Go on forever.');
  await page.click('#send');
  const reply = page.locator('.msg.assistant').nth(before);
  await page.locator('#send.stop').waitFor();
  await page.waitForFunction((n) => {
    const r = document.querySelectorAll('.msg.assistant')[n];
    return r && (r.querySelector('.thinking').textContent.length + r.querySelector('.content').textContent.length) > 20;
  }, before, { timeout: 30_000 });
  await page.click('#send');
  await reply.locator('.stopped').waitFor({ timeout: 10_000 });
  const partial = (await reply.locator('.thinking').textContent()) + (await reply.locator('.content').textContent());
  let generating = true;
  for (let i = 0; i < 50 && generating; ++i) {
    await new Promise((r) => setTimeout(r, 100));
    generating = (await health()).generating;
  }
  assert.equal(generating, false, 'the generation went on after stop');
  assert.equal(await page.locator('#send').textContent(), 'Send');
  await page.unroute('**/v1/chat/completions', endless);
  // The stopped reply is part of the conversation, as on screen; thinking off asks for none.
  await page.fill('#max-tokens', '8');
  await page.selectOption('#thinking', 'off');
  const sent = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
  await sendAndWait('Short, please.');
  const body = JSON.parse((await sent).postData());
  assert.equal(body.reasoning_effort, 'none');
  const last = body.messages.at(-2);
  assert.equal(last.role, 'assistant');
  assert.equal((last.reasoning_content || '') + (last.content || ''), partial);
  await page.selectOption('#thinking', 'on');
});

test('the live panel charts tokens/s, queue, hit rate and both drives from the telemetry stream', async () => {
  await page.fill('#max-tokens', '200');
  await sendAndWait('One more, for the charts.');
  await page.waitForFunction(() => Number(document.getElementById('c-tps').dataset.points) >= 3, null, { timeout: 20_000 });
  const chart = async (id) => page.evaluate((i) => ({ ...document.getElementById(i).dataset }), id);
  assert.ok(Number((await chart('c-tps')).max) > 0, 'tokens/s was drawn above 0');
  assert.ok(Number((await chart('c-read')).max) > 0, 'drive reads were drawn above 0');
  assert.ok(Number((await chart('c-queue')).points) >= 3);
  assert.equal(await page.locator('#drives span').count(), 2);
  assert.equal(await page.locator('#live-state').textContent(), 'live');
  // Let the charts scroll a little past the last reply, then keep a picture of the page.
  await page.locator('.msg.assistant').first().locator('summary').click();
  await new Promise((r) => setTimeout(r, 1500));
  await page.screenshot({ path: process.env.SLUICE_WEB_SCREENSHOT });
});

test('nothing came from anywhere but the server, and the page logged no errors', async () => {
  const origin = new URL(url).origin;
  assert.deepEqual(requests.filter((r) => !r.startsWith(origin) && !r.startsWith('data:')), []);
  assert.deepEqual(problems, []);
  // The page's key lives in memory only.
  assert.equal(await page.evaluate(() => localStorage.length + sessionStorage.length + document.cookie.length), 0);
});
