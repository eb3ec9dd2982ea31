// What every handler shares: the engine, the chat template, the model's
// description and the options. Built once in main(); handlers only read it
// (the engine and the counters are thread-safe). The request readers
// (*_request.h) need only the tokenizer, the template and the options, so a
// context without an engine serves to read requests in-process
// (test/fuzz/fuzz_serve_request.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/chat_conversation.h"
#include "runtime/chat_template.h"
#include "runtime/engine.h"
#include "runtime/tool_calls.h"
#include "tools/kt-serve/metrics.h"
#include "tools/kt-serve/serve_options.h"

namespace kt::serve {

// The served model as /v1/models, /api/tags and /api/show describe it.
struct ModelInfo {
  std::string name;          // its name in the API
  std::string arch;          // GGUF general.architecture
  std::string quantization;  // "Q4_K_M", "F32", ... (GGUF general.file_type)
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
  int64_t modified_unix = 0;  // the GGUF file's modification time
  std::string digest;         // hex of the GGUF header fingerprint the plan checks
};

ModelInfo describe_model(const Engine& engine, const std::string& gguf_path, std::string name);

struct ServeContext {
  Engine* engine;              // null where requests are only read, never run
  const Tokenizer& tokenizer;  // the engine's
  ServeOptions options;
  ModelInfo model;
  std::optional<ChatTemplate> chat_template;  // none: chat endpoints answer 400
  std::string chat_template_source;
  HttpCounters http;
  // What the template wants of a conversation with tools, probed at start,
  // and the syntax its model writes tool calls in (runtime/tool_calls.h).
  ChatTemplateCaps template_caps = {};
  std::unique_ptr<ToolCallFormat> tool_format = make_json_tool_calls();

  // The model's name, or Ollama's spelling of it with the default tag.
  bool is_model(std::string_view name) const { return name == model.name || name == model.name + ":latest"; }
};

}  // namespace kt::serve
