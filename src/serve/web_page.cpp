// The web chat's page (served at `/`): the conversation, the prompt box with its send/stop
// button, the API key dialog and the live panel's chart canvases. Style and behaviour are in
// web_style.cpp and web_script.cpp; nothing loads from anywhere but this server.
#include "serve/web_assets.h"

namespace sluice::serve {

const std::string_view kWebPageHtml = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sluice</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/web/chat.css">
<script src="/web/chat.js" defer></script>
</head>
<body>
<header>
  <span class="brand">sluice</span>
  <span id="model" class="model">…</span>
  <label class="api">API
    <select id="api">
      <option value="openai">OpenAI /v1/chat/completions</option>
      <option value="anthropic">Anthropic /v1/messages</option>
    </select>
  </label>
  <label class="api">max tokens <input id="max-tokens" type="number" min="1" value="256"></label>
  <label class="api">temperature <input id="temperature" type="number" min="0" max="1" step="0.1" value="0"></label>
  <label class="api">thinking
    <select id="thinking" title="Off turns reasoning off; an effort asks the model for that much (which efforts a model takes depends on its chat format)">
      <option value="on">on</option>
      <option value="off">off</option>
      <option value="low">low</option>
      <option value="medium">medium</option>
      <option value="high">high</option>
      <option value="max">max</option>
    </select>
  </label>
  <button id="new-chat" type="button">New chat</button>
  <button id="change-key" type="button">API key</button>
</header>
<main>
  <section class="chat">
    <div id="messages" aria-live="polite"></div>
    <form id="composer">
      <textarea id="prompt" rows="3" placeholder="Ask something (Enter sends, Shift+Enter for a new line)"></textarea>
      <button id="send" type="submit">Send</button>
    </form>
    <div id="status" class="status"></div>
  </section>
  <aside class="live">
    <h2>Live <span id="live-state" class="live-state">connecting</span></h2>
    <figure><figcaption>tokens / s <b id="v-tps">–</b></figcaption><canvas id="c-tps" class="chart"></canvas></figure>
    <figure><figcaption>queue depth <b id="v-queue">–</b></figcaption><canvas id="c-queue" class="chart"></canvas></figure>
    <figure><figcaption>expert cache hit rate <b id="v-hit">–</b></figcaption><canvas id="c-hit" class="chart"></canvas></figure>
    <figure><figcaption>drive reads, MB/s <b id="v-read">–</b></figcaption><canvas id="c-read" class="chart"></canvas>
      <div id="drives" class="legend"></div></figure>
  </aside>
</main>
<dialog id="key-dialog">
  <form id="key-form" method="dialog">
    <p>This server needs its API key. It is kept in this page's memory only and sent with each request.</p>
    <input id="key-input" type="password" autocomplete="off" placeholder="API key">
    <div class="row"><button id="key-ok" type="submit">Use key</button></div>
    <p id="key-error" class="error"></p>
  </form>
</dialog>
</body>
</html>
)html";

}  // namespace sluice::serve
