// libFuzzer target: kt-serve's request bodies read in-process, as the
// handlers read them (parse with limits, then the endpoint's reader: fields,
// messages, tools, tool_choice, response_format / format schemas, the chat
// template, tokenization), without a model: the context holds a tokenizer
// and a template, no engine. The first byte picks the endpoint and the
// template; the rest is the body. Selectors past the endpoints feed the rest
// as a model's output through the reply's reader (reasoning, tool calls in
// each template's syntax). Readers answer with an error value: an exception
// escaping one (it would be a 500) is a finding, as is any crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat_conversation.h"
#include "runtime/chat_template.h"
#include "runtime/gguf.h"
#include "runtime/tokenizer.h"
#include "runtime/tool_calls.h"
#include "tools/kt-serve/anthropic_request.h"
#include "tools/kt-serve/chat_output.h"
#include "tools/kt-serve/json_text.h"
#include "tools/kt-serve/ollama_request.h"
#include "tools/kt-serve/openai_request.h"
#include "tools/kt-serve/serve_context.h"

namespace {

using kt::serve::ServeContext;

const char* const kTemplates[] = {"Qwen-Qwen2.5-7B-Instruct", "deepseek-ai-DeepSeek-V3.1",
                                  "Mistral-Small-3.2-24B-Instruct-2506", "Qwen-Qwen3-0.6B"};
constexpr size_t kNTemplates = sizeof(kTemplates) / sizeof(kTemplates[0]);

const kt::Tokenizer& tokenizer() {
  static const kt::Tokenizer* tok = [] {
    static auto g = kt::GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/tiny-dsv3-F32.gguf");
    if (!g) std::abort();
    auto t = kt::Tokenizer::from_gguf(g.value());
    if (!t) std::abort();
    return new kt::Tokenizer(std::move(t.value()));
  }();
  return *tok;
}

ServeContext* make_context(const char* name) {
  std::ifstream in(std::string(KT_TEST_DATA_DIR) + "/chat-templates/templates/" + name + ".jinja", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  auto tpl = kt::ChatTemplate::parse(ss.str(), name);
  if (!in || !tpl) std::abort();
  kt::serve::ServeOptions o;
  o.ctx = 1024;
  auto* ctx = new ServeContext{nullptr, tokenizer(), o, {}, std::move(tpl.value()), ss.str(), {}};
  ctx->model.name = "tiny";
  const kt::Tokenizer& tok = tokenizer();
  ctx->template_caps = kt::probe_chat_template(*ctx->chat_template, tok.bos() >= 0 ? tok.token_text(tok.bos()) : "",
                                               tok.eos() >= 0 ? tok.token_text(tok.eos()) : "");
  ctx->tool_format = kt::tool_call_format_for(ctx->chat_template_source);
  return ctx;
}

// Made once, never freed: a plain array of pointers (no destructor at exit
// that would leave them unreachable for the leak check).
ServeContext& context(size_t i) {
  static ServeContext* ctxs[kNTemplates] = {};
  ServeContext*& c = ctxs[i % kNTemplates];
  if (!c) c = make_context(kTemplates[i % kNTemplates]);
  return *c;
}

void read_body(unsigned endpoint, std::string_view body, const ServeContext& ctx) {
  auto j = kt::serve::parse_json_object(body);
  if (!j.ok()) return;
  auto ordered = kt::serve::parse_ordered_json_object(body);
  if (!ordered.ok()) return;
  switch (endpoint) {
    case 0: {
      kt::serve::OpenAiRequest r;
      (void)kt::serve::read_chat_request(*j, *ordered, ctx, r);
      break;
    }
    case 1: {
      kt::serve::OpenAiRequest r;
      (void)kt::serve::read_completion_request(*j, *ordered, ctx, r);
      break;
    }
    case 2: {
      kt::serve::OllamaRequest r;
      (void)kt::serve::read_ollama_chat(*j, *ordered, ctx, r);
      break;
    }
    case 3: {
      kt::serve::OllamaRequest r;
      (void)kt::serve::read_ollama_generate(*j, *ordered, ctx, r);
      break;
    }
    default: {
      kt::serve::MessagesRequest r;
      (void)kt::serve::read_messages(*j, *ordered, ctx, r);
      break;
    }
  }
}

// The text as a model's output, in pieces of 1 to 8 bytes (a stream splits
// markers anywhere), with the reasoning split on.
void read_output(std::string_view text, const ServeContext& ctx) {
  kt::serve::ChatOutput out(true, text.size() % 3 == 0, ctx.tool_format.get());
  for (size_t i = 0; i < text.size();) {
    const size_t n = 1 + (uint8_t(text[i]) % 8);
    (void)out.push(text.substr(i, n));
    i += n;
  }
  std::vector<kt::ToolCall> calls;
  (void)out.finish(&calls);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const unsigned sel = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ServeContext& ctx = context(sel / 8);
  try {
    if (sel % 8 < 5)
      read_body(sel % 8, rest, ctx);
    else
      read_output(rest, ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_serve_request: an exception escaped: %s\n", e.what());
    std::abort();
  }
  return 0;
}
