// The web chat's script (served at /web/chat.js): sends the conversation through the OpenAI or the
// Anthropic route and shows the streamed reply (reasoning in an open, growing fold while the model
// thinks, folded once the answer starts; a note when the reply was cut at max tokens; a stop
// button, after which the partial reply stays in the conversation as on screen; thinking on, off
// or an effort; the reply's stats from the response's "sluice" object), and draws the live panel from GET /v1/telemetry. Both
// streams are read with fetch (EventSource cannot send the API key); the key lives in a variable
// of this page only. Model text is only ever set as text, never parsed as HTML.
#include "serve/web_assets.h"

namespace sluice::serve {

const std::string_view kWebScriptJs = R"js('use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  let apiKey = '';            // memory only: never stored
  let model = null;
  let history = [];           // {role, content, reasoning}
  let running = null;         // the AbortController of the reply in progress
  let keyWaiters = [];

  // ---- API key ----
  function authHeaders() {
    return apiKey ? { 'Authorization': 'Bearer ' + apiKey, 'x-api-key': apiKey } : {};
  }
  function askKey(message) {
    $('key-error').textContent = message || '';
    $('key-input').value = '';
    if (!$('key-dialog').open) $('key-dialog').showModal();
    $('key-input').focus();
    return new Promise((resolve) => keyWaiters.push(resolve));
  }
  $('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    apiKey = $('key-input').value.trim();
    $('key-dialog').close();
    const waiters = keyWaiters;
    keyWaiters = [];
    waiters.forEach((w) => w());
  });
  $('change-key').addEventListener('click', () => askKey().then(start));

  // A fetch that asks for the key (again) on 401.
  async function authed(url, init = {}) {
    for (;;) {
      const res = await fetch(url, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
      if (res.status !== 401) return res;
      await askKey(apiKey ? 'That key was refused.' : '');
    }
  }

  async function start() {
    const res = await authed('/v1/models');
    if (!res.ok) { setStatus('Cannot list models: HTTP ' + res.status); return; }
    const body = await res.json();
    model = body.data[0].id;
    $('model').textContent = model;
    telemetry.restart();
  }

  function setStatus(text) { $('status').textContent = text; }

  // ---- conversation ----
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function addUser(text) {
    $('messages').appendChild(el('div', 'msg user', text));
  }
  function addReply() {
    const box = el('div', 'msg assistant');
    const details = el('details', 'reasoning');
    const summary = el('summary', null, 'Reasoning');
    const thinking = el('div', 'thinking');
    details.append(summary, thinking);
    details.hidden = true;
    const content = el('div', 'content');
    const stats = el('div', 'stats');
    stats.hidden = true;
    box.append(details, content, stats);
    $('messages').appendChild(box);
    return { box, details, summary, thinking, content, stats, reasoningText: '', contentText: '' };
  }
  // The fold's caption once the model has stopped thinking.
  function summarize(reply) { reply.summary.textContent = 'Reasoning (' + reply.reasoningText.length + ' characters)'; }
  function scrollDown() { const m = $('messages'); m.scrollTop = m.scrollHeight; }

  function fmtBytes(n) {
    if (n >= 1e9) return (n / 1e9).toFixed(2) + ' GB';
    if (n >= 1e6) return (n / 1e6).toFixed(1) + ' MB';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + ' kB';
    return n + ' B';
  }
  function showStats(reply, s, tokens, cached, clientTtft) {
    const parts = [];
    parts.push('TTFT ' + Math.round(s ? s.ttft_ms : clientTtft) + ' ms');
    if (s) parts.push(s.tokens_per_second.toFixed(1) + ' tok/s');
    if (tokens !== null) parts.push(tokens + ' tokens');
    if (s) parts.push('drafts ' + s.drafts_accepted + '/' + s.drafts_proposed + ' accepted');
    if (s) parts.push(fmtBytes(s.bytes_read) + ' read');
    if (cached) parts.push(cached + ' prompt tokens reused');
    reply.stats.textContent = parts.join(' · ');
    reply.stats.hidden = false;
  }

  function requestFor(api, maxTokens, temperature, thinking) {
    if (api === 'anthropic') {
      const messages = history.map((m) => {
        if (m.role === 'user') return { role: 'user', content: m.content };
        const blocks = [];
        if (m.reasoning) blocks.push({ type: 'thinking', thinking: m.reasoning, signature: '' });
        if (m.content || !m.reasoning) blocks.push({ type: 'text', text: m.content });
        return { role: 'assistant', content: blocks };
      });
      // Anthropic's API thinks only when asked: the chat asks (adaptive: no budget to fit in
      // max_tokens) unless thinking is off; it has no effort setting.
      return { url: '/v1/messages',
               body: { model, messages, max_tokens: maxTokens, temperature, stream: true,
                       thinking: { type: thinking === 'off' ? 'disabled' : 'adaptive' } } };
    }
    const messages = history.map((m) => {
      const out = { role: m.role, content: m.content };
      if (m.reasoning) out.reasoning_content = m.reasoning;
      return out;
    });
    const body = { model, messages, max_tokens: maxTokens, temperature, stream: true,
                   stream_options: { include_usage: true } };
    if (thinking === 'off') body.reasoning_effort = 'none';
    else if (thinking !== 'on') body.reasoning_effort = thinking;
    return { url: '/v1/chat/completions', body };
  }

  // Reads server-sent events from a fetch response: calls onEvent(name, data) per event.
  async function readEvents(res, onEvent) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = 'message', data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) name = line.slice(7);
          else if (line.startsWith('data: ')) data += line.slice(6);
        }
        if (data) onEvent(name, data);
      }
    }
  }

  async function send(text) {
    const api = $('api').value;
    const maxTokens = Math.max(1, parseInt($('max-tokens').value, 10) || 256);
    const temperature = Math.min(1, Math.max(0, parseFloat($('temperature').value) || 0));
    const thinking = $('thinking').value;
    history.push({ role: 'user', content: text });
    addUser(text);
    const reply = addReply();
    scrollDown();
    const controller = new AbortController();
    running = controller;
    setSending(true);
    const started = performance.now();
    let firstAt = null, stats = null, tokens = null, cached = 0, failed = null, cut = false;
    const onText = (kind, piece) => {
      if (!piece) return;
      if (firstAt === null) firstAt = performance.now();
      if (kind === 'reasoning') {
        reply.reasoningText += piece;
        reply.thinking.textContent = reply.reasoningText;
        reply.details.hidden = false;
        // While the model thinks the fold is open and says how far it has got.
        if (!reply.contentText) {
          reply.details.open = true;
          reply.summary.textContent = 'Thinking… (' + reply.reasoningText.length + ' characters)';
        }
      } else {
        // The answer starts: the reasoning folds away.
        if (!reply.contentText && reply.reasoningText) {
          reply.details.open = false;
          summarize(reply);
        }
        reply.contentText += piece;
        reply.content.textContent = reply.contentText;
      }
      scrollDown();
    };
    try {
      const { url, body } = requestFor(api, maxTokens, temperature, thinking);
      const res = await authed(url, { method: 'POST', signal: controller.signal,
                                      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      if (!res.ok) {
        const err = await res.json().catch(() => ({}));
        throw new Error((err.error && err.error.message) || ('HTTP ' + res.status));
      }
      await readEvents(res, (name, data) => {
        if (data === '[DONE]') return;
        const j = JSON.parse(data);
        if (j.error) { failed = j.error.message || 'error'; return; }
        if (api === 'anthropic') {
          if (j.type === 'content_block_delta' && j.delta.type === 'thinking_delta') onText('reasoning', j.delta.thinking);
          else if (j.type === 'content_block_delta' && j.delta.type === 'text_delta') onText('content', j.delta.text);
          else if (j.type === 'message_delta') {
            stats = j.sluice || null;
            tokens = j.usage.output_tokens;
            cached = j.usage.cache_read_input_tokens || 0;
            cut = j.delta.stop_reason === 'max_tokens';
          }
        } else {
          if (j.sluice) stats = j.sluice;
          if (j.usage) { tokens = j.usage.completion_tokens; cached = (j.usage.prompt_tokens_details || {}).cached_tokens || 0; }
          for (const c of j.choices || []) {
            const d = c.delta || {};
            onText('reasoning', d.reasoning_content);
            onText('content', d.content);
            if (c.finish_reason) cut = c.finish_reason === 'length';
          }
        }
      });
      if (failed) throw new Error(failed);
      history.push({ role: 'assistant', content: reply.contentText, reasoning: reply.reasoningText });
      showStats(reply, stats, tokens, cached, (firstAt || performance.now()) - started);
      // A reply that is all reasoning keeps its fold open: it is all there is to read.
      if (reply.contentText || !reply.reasoningText) reply.details.open = false;
      summarize(reply);
      if (cut) {
        const n = tokens !== null ? tokens : maxTokens;
        reply.box.insertBefore(el('div', 'cut', (reply.contentText ? 'Cut at ' : 'Cut while still thinking, at ') + n +
                                  ' tokens (max tokens).'), reply.stats);
      } else if (!reply.contentText && reply.reasoningText) {
        reply.box.insertBefore(el('div', 'cut', 'No answer: the reply ended while still thinking.'), reply.stats);
      }
      setStatus('');
    } catch (e) {
      if (controller.signal.aborted) {
        reply.box.appendChild(el('div', 'stopped', '(stopped)'));
        summarize(reply);
        // What is on screen is the conversation: the partial reply stays in it (the server kept
        // the state of a reply stopped between tokens, so the next turn continues from it).
        if (reply.contentText || reply.reasoningText)
          history.push({ role: 'assistant', content: reply.contentText, reasoning: reply.reasoningText });
      } else {
        reply.box.classList.add('error');
        reply.content.textContent = reply.contentText + (reply.contentText ? '\n' : '') + String(e.message || e);
        history.pop();
      }
    } finally {
      running = null;
      setSending(false);
    }
  }

  function setSending(on) {
    const b = $('send');
    b.textContent = on ? 'Stop' : 'Send';
    b.classList.toggle('stop', on);
    b.type = on ? 'button' : 'submit';
  }
  $('send').addEventListener('click', (e) => {
    if (running) { e.preventDefault(); running.abort(); }
  });
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || running || !model) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('composer').requestSubmit(); }
  });
  $('new-chat').addEventListener('click', () => {
    if (running) running.abort();
    history = [];
    $('messages').textContent = '';
  });

  // ---- live panel ----
  const kPoints = 90;
  const palette = ['#1f6feb', '#e5534b', '#2da44e', '#bf8700', '#8250df', '#1b7c83', '#cf222e', '#6e7781'];
  const series = { tps: [], queue: [], hit: [], drives: [] };

  function push(list, v) { list.push(v); if (list.length > kPoints) list.shift(); }

  // One or more lines over the last kPoints samples, the area under the first filled.
  function draw(canvas, lines, fixedMax) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    let max = fixedMax || 0;
    if (!fixedMax) for (const l of lines) for (const v of l.values) if (v !== null && v > max) max = v;
    if (!(max > 0)) max = 1;
    const x = (i) => w - (kPoints - 1 - i) * (w / (kPoints - 1));
    const y = (v) => h - 3 - (v / max) * (h - 8);
    g.strokeStyle = getComputedStyle(document.documentElement).getPropertyValue('--line');
    g.lineWidth = 1;
    g.beginPath(); g.moveTo(0, y(max) + 0.5); g.lineTo(w, y(max) + 0.5); g.stroke();
    lines.forEach((l, k) => {
      const pad = kPoints - l.values.length;
      g.strokeStyle = l.color;
      g.lineWidth = 1.6;
      g.beginPath();
      let started = false;
      l.values.forEach((v, i) => {
        if (v === null) { started = false; return; }
        if (!started) { g.moveTo(x(pad + i), y(v)); started = true; } else g.lineTo(x(pad + i), y(v));
      });
      g.stroke();
      if (k === 0 && l.values.length > 1) {
        g.lineTo(x(kPoints - 1), h); g.lineTo(x(pad), h); g.closePath();
        g.globalAlpha = 0.12; g.fillStyle = l.color; g.fill(); g.globalAlpha = 1;
      }
    });
    canvas.dataset.points = String(Math.max(0, ...lines.map((l) => l.values.length)));
    canvas.dataset.max = String(Math.max(0, ...lines.flatMap((l) => l.values.filter((v) => v !== null))));
  }

  function onTelemetry(t) {
    push(series.tps, t.tokens_per_second);
    push(series.queue, t.queue_depth);
    push(series.hit, t.cache.hit_rate === null ? null : 100 * t.cache.hit_rate);
    while (series.drives.length < t.drives.length) series.drives.push([]);
    t.drives.forEach((d, i) => push(series.drives[i], d.read_bytes_per_second / 1e6));
    $('v-tps').textContent = t.tokens_per_second.toFixed(1);
    $('v-queue').textContent = t.queue_depth + (t.generating ? ' (generating)' : '');
    $('v-hit').textContent = t.streaming ? (100 * t.cache.hit_rate_total).toFixed(1) + ' % overall' +
      (t.gpu_tier ? ', GPU tier ' + (100 * t.gpu_tier.hit_rate_total).toFixed(1) + ' %' : '') : 'resident';
    $('v-read').textContent = t.streaming ? (t.read_bytes_per_second / 1e6).toFixed(1) : 'no drives';
    draw($('c-tps'), [{ values: series.tps, color: palette[0] }]);
    draw($('c-queue'), [{ values: series.queue, color: palette[3] }]);
    draw($('c-hit'), [{ values: series.hit, color: palette[2] }], 100);
    draw($('c-read'), series.drives.map((v, i) => ({ values: v, color: palette[i % palette.length] })));
    const legend = $('drives');
    legend.textContent = '';
    t.drives.forEach((d, i) => {
      const s = el('span');
      const swatch = el('i');
      swatch.style.background = palette[i % palette.length];
      s.append(swatch, document.createTextNode(d.path.split('/').filter(Boolean).pop() || d.path));
      legend.appendChild(s);
    });
  }

  const telemetry = {
    controller: null,
    restart() {
      if (this.controller) this.controller.abort();
      const controller = new AbortController();
      this.controller = controller;
      this.run(controller);
    },
    async run(controller) {
      while (!controller.signal.aborted) {
        try {
          const res = await fetch('/v1/telemetry', { headers: authHeaders(), signal: controller.signal });
          if (res.status === 401) { $('live-state').textContent = 'needs the key'; return; }
          if (!res.ok) throw new Error('HTTP ' + res.status);
          $('live-state').textContent = 'live';
          await readEvents(res, (name, data) => onTelemetry(JSON.parse(data)));
        } catch (e) {
          if (controller.signal.aborted) return;
        }
        $('live-state').textContent = 'reconnecting';
        await new Promise((r) => setTimeout(r, 2000));
      }
    },
  };

  start().catch((e) => setStatus(String(e.message || e)));
})();
)js";

}  // namespace sluice::serve
