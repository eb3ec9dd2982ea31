#include "tools/kt-serve/serve_options.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

namespace kt::serve {

const char kServeUsage[] =
    "usage: kt-serve plan.ktp [options]\n"
    "  --host ADDR            address to listen on (default 127.0.0.1; 0.0.0.0: every interface)\n"
    "  --port N               port (default 11434; 0: a free one, printed on stdout)\n"
    "  --api-key KEY          API calls need 'Authorization: Bearer KEY' (or set KT_SERVE_API_KEY)\n"
    "  --parallel N           sequences decoded together, each with its KV slot (default 4)\n"
    "  --queue N              requests waiting for a slot; more are refused with 503 (default 64)\n"
    "  --ctx N                context tokens per sequence (default: the plan's)\n"
    "  --threads N            compute threads (default: physical cores)\n"
    "  --http-threads N       connection threads (default: parallel + queue + 64)\n"
    "  --model-name NAME      the model's name in the API (default: the plan's file name)\n"
    "  --chat-template FILE   a Jinja chat template, instead of the model's own\n"
    "  --max-body BYTES       largest request body (default 8 MiB); larger get 413\n"
    "  --no-prompt-cache      do not reuse a slot's cached prompt prefix\n"
    "  --reasoning-format F   deepseek (default): a leading <think> block is returned as reasoning_content\n"
    "                         (Ollama: thinking); none: left in the content\n"
    "  --routing-profile-out F.json  count which routed experts every request chose (prefill and\n"
    "                         decode), written at exit, for kt-compile --profile\n"
    "  --verbose              one line per request on stderr\n";

namespace {

std::optional<int64_t> integer(const char* s, int64_t lo, int64_t hi) {
  if (!s || !*s) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace

std::string parse_serve_args(int argc, char** argv, ServeOptions& o, bool* help) {
  *help = false;
  if (const char* key = std::getenv("KT_SERVE_API_KEY")) o.api_key = key;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto text = [&](std::string& out) -> std::string {
      if (!value) return arg + ": missing value";
      out = value;
      ++i;
      return "";
    };
    auto number = [&](auto& out, int64_t lo, int64_t hi) -> std::string {
      auto v = integer(value, lo, hi);
      if (!v) return arg + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
                     (value ? value : "") + "'";
      out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
      ++i;
      return "";
    };
    std::string e;
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return "";
    } else if (arg == "--host") {
      e = text(o.host);
    } else if (arg == "--port") {
      e = number(o.port, 0, 65535);
    } else if (arg == "--api-key") {
      e = text(o.api_key);
      if (e.empty() && o.api_key.empty()) e = "--api-key: the key is empty";
    } else if (arg == "--parallel" || arg == "-np") {
      e = number(o.parallel, 1, 1024);
    } else if (arg == "--queue") {
      e = number(o.queue, 0, 1 << 20);
    } else if (arg == "--ctx" || arg == "-c") {
      e = number(o.ctx, 1, int64_t(1) << 24);
    } else if (arg == "--threads" || arg == "-t") {
      e = number(o.threads, 1, 4096);
    } else if (arg == "--http-threads") {
      e = number(o.http_threads, 1, 65536);
    } else if (arg == "--model-name") {
      e = text(o.model_name);
      if (e.empty() && o.model_name.empty()) e = "--model-name: the name is empty";
    } else if (arg == "--chat-template") {
      e = text(o.chat_template_file);
    } else if (arg == "--max-body") {
      e = number(o.max_body, 1024, int64_t(1) << 32);
    } else if (arg == "--no-prompt-cache") {
      o.prompt_cache = false;
    } else if (arg == "--reasoning-format") {
      std::string f;
      e = text(f);
      if (e.empty() && f != "none" && f != "deepseek") e = "--reasoning-format: expected none or deepseek, got '" + f + "'";
      o.reasoning_split = f != "none";
    } else if (arg == "--routing-profile-out") {
      e = text(o.routing_profile_out);
    } else if (arg == "--verbose" || arg == "-v") {
      o.verbose = true;
    } else if (!arg.empty() && arg[0] == '-') {
      e = "unknown option " + arg + " (kt-serve --help)";
    } else if (o.plan.empty()) {
      o.plan = arg;
    } else {
      e = "unexpected argument '" + arg + "' (kt-serve --help)";
    }
    if (!e.empty()) return e;
  }
  if (o.plan.empty()) return std::string("no plan given\n") + kServeUsage;
  return "";
}

}  // namespace kt::serve
