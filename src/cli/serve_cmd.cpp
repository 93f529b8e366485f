// `sluice serve`: the OpenAI-compatible HTTP server (GET /v1/models, POST /v1/completions and
// /v1/chat/completions, /health) over one loaded engine; loopback only unless --host says otherwise.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "cli/state_cache_flags.h"
#include "runtime/engine.h"
#include "runtime/speculate/make_drafter.h"
#include "serve/http_server.h"

namespace sluice::cli {
namespace {

// The key from --api-key, --api-key-file or SLUICE_API_KEY (in that order; none: no key), or a
// usage error message in *problem. An empty key would turn authentication off without a word, so
// it is refused wherever it comes from.
std::optional<std::string> api_key_from(const CLI::Option* flag, const std::string& flag_value,
                                        const std::string& file, std::string* problem) {
  if (flag->count() > 0) {
    if (flag_value.empty()) *problem = "--api-key is empty; give a key, or leave the option out to serve without one";
    return flag_value;
  }
  if (!file.empty()) {
    std::ifstream in(file);
    std::string key;
    if (!in || !std::getline(in, key)) {
      *problem = "--api-key-file " + file + ": cannot read a key from it (missing, unreadable or empty)";
      return std::nullopt;
    }
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty()) *problem = "--api-key-file " + file + ": its first line is empty";
    return key;
  }
  if (const char* env = std::getenv("SLUICE_API_KEY")) {
    if (!*env) *problem = "SLUICE_API_KEY is set but empty; unset it to serve without a key";
    return std::string(env);
  }
  return std::nullopt;
}

}  // namespace

Action register_serve(CLI::App& app) {
  auto o = std::make_shared<serve::ServeOptions>();
  auto no_reuse = std::make_shared<bool>(false);
  auto no_prefetch = std::make_shared<bool>(false);
  auto key_flag = std::make_shared<std::string>();
  auto key_file = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (chat, completions, SSE)");
  sub->add_option("--model", o->engine.model_dir, "Model directory (config.json, safetensors, tokenizer files)")->required();
  sub->add_option("--host", o->host, "Address to listen on (loopback by default)")->default_val("127.0.0.1");
  sub->add_option("--port", o->port, "Port (0 = any free port, printed on stderr)")->default_val(8000)->transform(integer_in(0, 65535));
  CLI::Option* key_opt = sub->add_option(
      "--api-key", *key_flag,
      "Require 'Authorization: Bearer KEY' on every route but /health (visible to other users in ps: "
      "prefer --api-key-file or SLUICE_API_KEY)");
  sub->add_option("--api-key-file", *key_file, "Read the API key from the first line of FILE")->excludes(key_opt);
  sub->add_option("--model-id", o->model_id, "Model name clients must send (default: the model directory's name)");
  sub->add_option("--max-tokens", o->max_tokens, "Most tokens one request may generate")->default_val(1000000)->transform(integer_in(1, INT32_MAX));
  sub->add_option("--default-max-tokens", o->default_max_tokens,
                  "Tokens a chat request without max_tokens may generate (completions: 256)")
      ->default_val(4096)->transform(integer_in(1, INT32_MAX));
  sub->add_option("--max-context", o->max_context, "Most tokens of prompt plus reply")->default_val(32768)->transform(integer_in(2, int64_t(1) << 20));
  sub->add_option("--queue", o->queue, "Requests that may wait while one generates (more get 429)")->default_val(0)->transform(integer_in(0, 64));
  sub->add_option("--max-request-bytes", o->max_request_bytes, "Largest request body accepted (more get 413)")
      ->default_val(size_t(128) << 20)->transform(integer_in(1024, int64_t(1) << 34));
  sub->add_option("--max-request-bytes-in-flight", o->max_request_bytes_in_flight,
                  "Bytes of request bodies over 1 MiB read or served at once; a request past it gets 429 "
                  "(0: (--queue + 1) x --max-request-bytes; never less than --max-request-bytes)")
      ->default_val(0)->transform(integer_in(0, int64_t(1) << 40));
  sub->add_option("--max-connections", o->max_connections,
                  "Connections open at once; more are answered 503 and closed. Idle ones and ones still sending "
                  "a request's headers cost no thread (one event thread holds them)")
      ->default_val(2048)->transform(integer_in(16, 65536));
  sub->add_option("--max-connections-per-client", o->max_connections_per_client,
                  "Connections open at once from one client address; more are answered 503 and closed")
      ->default_val(256)->transform(integer_in(1, 65536));
  sub->add_option("--max-requests", o->max_requests,
                  "Requests read or answered at once, one thread each (a stream holds one until it ends); more are "
                  "answered 503. /health is answered apart from them")
      ->default_val(256)->transform(integer_in(16, 4096));
  sub->add_option("--header-timeout", o->header_timeout_s,
                  "Seconds a client has to send a request's headers (in total, however it trickles them)")
      ->default_val(10)->transform(integer_in(1, 600));
  sub->add_option("--body-timeout", o->body_timeout_s,
                  "Seconds a client has to send a request's body, plus 1 s per 64 KiB of it (in total, however it "
                  "trickles it); then 408 and the connection is closed")
      ->default_val(30)->transform(integer_in(1, 3600));
  sub->add_option("--telemetry-streams", o->telemetry_streams, "GET /v1/telemetry streams open at once (each holds a connection; more get 429)")->default_val(4)->transform(integer_in(0, 64));
  sub->add_option("--draft", o->engine.draft, runtime::kDraftHelp)->default_val("off");
  sub->add_option("--device", o->engine.device, runtime::device_help())->default_val("cpu");
  sub->add_option("--chat-format", o->chat_format, kChatFormatHelp)->check(one_of(chat_format_names()));
  sub->add_flag("--no-state-reuse", *no_reuse,
                "Always prefill the whole prompt (never continue the last conversation's state, nor restore one from "
                "--state-cache)");
  sub->add_option("--experts", o->engine.experts, "Where routed experts come from: auto, stream, resident")
      ->default_val("auto")
      ->check(one_of({"auto", "stream", "resident"}));
  sub->add_option("--cache-gb", o->engine.cache_gb, "RAM budget of the expert cache when streaming (GB)")
      ->default_val(1.0)
      ->transform(positive_number(1e6));
  sub->add_option("--gpu-experts-gb", o->engine.gpu_experts_gb,
                  "Device memory for routed experts in front of the RAM cache when streaming on a GPU: auto, 0 "
                  "(off) or GB")
      ->default_val("auto");
  sub->add_option("--cpu-experts", o->engine.cpu_experts,
                  "Share of each MoE layer's routed experts that decode passes compute on the host's cores while "
                  "the GPU computes the rest (--device cuda:N): auto (balanced by this machine's measured link "
                  "and core rates) or 0..1")
      ->default_val("auto")
      ->transform(auto_or_number_in(0, 1));
  sub->add_flag("--no-prefetch", *no_prefetch, "Do not predict the next layer's experts: no reads ahead into RAM, no copies ahead into GPU memory");
  add_state_cache_flags(sub, o->engine);
  sub->footer("The API key may also come from the environment variable SLUICE_API_KEY (when neither --api-key nor "
              "--api-key-file is given); an empty key is refused.");
  return [o, no_reuse, no_prefetch, key_opt, key_flag, key_file] {
    std::string problem;
    std::optional<std::string> key = api_key_from(key_opt, *key_flag, *key_file, &problem);
    if (!problem.empty()) {
      std::fprintf(stderr, "sluice serve: usage error: %s\n", problem.c_str());
      return 2;
    }
    o->api_key = key.value_or("");
    o->state_reuse = !*no_reuse;
    o->engine.stream.prefetch = !*no_prefetch;
    serve::block_stop_signals();  // before the engine starts threads: only serve_http's waiter takes SIGTERM
    serve::Service service(*o);
    return serve::serve_http(service);
  };
}

}  // namespace sluice::cli
