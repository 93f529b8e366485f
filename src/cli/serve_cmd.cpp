// `sluice serve`: the OpenAI-compatible HTTP server (GET /v1/models, POST /v1/completions and
// /v1/chat/completions, /health) over one loaded engine; loopback only unless --host says otherwise.
#include <cstdio>

#include "cli/commands.h"
#include "runtime/engine.h"
#include "runtime/speculate/make_drafter.h"
#include "serve/http_server.h"

namespace sluice::cli {

Action register_serve(CLI::App& app) {
  auto o = std::make_shared<serve::ServeOptions>();
  auto no_reuse = std::make_shared<bool>(false);
  auto no_prefetch = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (chat, completions, SSE)");
  sub->add_option("--model", o->engine.model_dir, "Model directory (config.json, safetensors, tokenizer files)")->required();
  sub->add_option("--host", o->host, "Address to listen on (loopback by default)")->default_val("127.0.0.1");
  sub->add_option("--port", o->port, "Port (0 = any free port, printed on stderr)")->default_val(8000)->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  sub->add_option("--model-id", o->model_id, "Model name clients must send (default: the model directory's name)");
  sub->add_option("--max-tokens", o->max_tokens, "Most tokens one request may generate")->default_val(1000000)->check(CLI::PositiveNumber);
  sub->add_option("--max-context", o->max_context, "Most tokens of prompt plus reply")->default_val(32768)->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  sub->add_option("--queue", o->queue, "Requests that may wait while one generates (more get 429)")->default_val(0)->check(CLI::Range(0, 64));
  sub->add_option("--max-request-bytes", o->max_request_bytes, "Largest request body accepted (more get 413)")
      ->default_val(size_t(128) << 20)->check(CLI::Range(size_t(1024), size_t(1) << 34));
  sub->add_option("--draft", o->engine.draft, runtime::kDraftHelp)->default_val("off");
  sub->add_option("--device", o->engine.device, runtime::kDeviceHelp)->default_val("cpu");
  sub->add_flag("--no-state-reuse", *no_reuse, "Always prefill the whole prompt (never continue the last conversation's state)");
  sub->add_option("--experts", o->engine.experts, "Where routed experts come from: auto, stream, resident")->default_val("auto");
  sub->add_option("--cache-gb", o->engine.cache_gb, "RAM budget of the expert cache when streaming (GB)")->default_val(1.0);
  sub->add_flag("--no-prefetch", *no_prefetch, "Do not predict and pre-read the next layer's experts");
  return [o, no_reuse, no_prefetch] {
    o->state_reuse = !*no_reuse;
    o->engine.prefetch = !*no_prefetch;
    serve::Service service(*o);
    return serve::serve_http(service);
  };
}

}  // namespace sluice::cli
