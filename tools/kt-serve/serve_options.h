// kt-serve's command line.
#pragma once

#include <cstdint>
#include <string>

namespace kt::serve {

struct ServeOptions {
  std::string plan;
  std::string host = "127.0.0.1";  // loopback unless asked: the API has no TLS
  int port = 11434;                // Ollama's; 0: any free port (printed)
  std::string api_key;             // non-empty: API calls need "Authorization: Bearer KEY"
  int parallel = 4;                // sequences decoded together = KV slots
  int queue = 64;                  // requests waiting for a slot; more get 503
  int64_t ctx = 0;                 // tokens per sequence; 0: the plan's
  int threads = 0;                 // compute threads; 0: physical cores
  int http_threads = 0;            // 0: parallel + queue + 64
  std::string model_name;          // default: the plan file's name without .ktp
  std::string chat_template_file;  // overrides the model's tokenizer.chat_template
  size_t max_body = 8u << 20;      // request body bytes; more get 413
  bool prompt_cache = true;
  bool reasoning_split = true;     // <think> blocks as reasoning_content / thinking (--reasoning-format none: off)
  bool verbose = false;            // one line per request on stderr
  std::string routing_profile_out;  // a routing profile of everything served, written at exit
};

// Parses argv into o; returns an error message, or "" on success. Sets
// *help when --help was asked for.
std::string parse_serve_args(int argc, char** argv, ServeOptions& o, bool* help);

extern const char kServeUsage[];

}  // namespace kt::serve
