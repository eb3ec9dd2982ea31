#include "tools/kt-serve/chat_output.h"

#include <random>

namespace kt::serve {

ChatOutput::ChatOutput(bool split_reasoning, bool reasoning_open, const ToolCallFormat* tools)
    : split_(split_reasoning), reasoning_(reasoning_open), tools_(tools) {
  if (tools_) triggers_ = tools_->triggers();
}

void ChatOutput::content(std::string_view text, Delta* out) {
  if (!tools_) {
    out->content += text;
    return;
  }
  if (in_call_) {
    call_text_ += text;
    return;
  }
  pending_ += text;
  size_t first = std::string::npos;
  for (const std::string& t : triggers_) first = std::min(first, pending_.find(t));
  if (first != std::string::npos) {
    out->content += pending_.substr(0, first);
    call_text_ = pending_.substr(first);
    pending_.clear();
    in_call_ = true;
    return;
  }
  // Hold back the longest tail that may begin a marker.
  size_t keep = 0;
  for (const std::string& t : triggers_)
    for (size_t n = std::min(pending_.size(), t.size() - 1); n > keep; --n)
      if (pending_.compare(pending_.size() - n, n, t, 0, n) == 0) {
        keep = n;
        break;
      }
  out->content += pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
}

ChatOutput::Delta ChatOutput::push(std::string_view text) {
  Delta out;
  if (!split_) {
    content(text, &out);
    return out;
  }
  ReasoningSplitter::Piece p = reasoning_.push(text);
  out.reasoning = std::move(p.reasoning);
  content(p.content, &out);
  return out;
}

ChatOutput::Delta ChatOutput::finish(std::vector<ToolCall>* calls) {
  Delta out;
  if (split_) {
    ReasoningSplitter::Piece p = reasoning_.flush();
    out.reasoning = std::move(p.reasoning);
    content(p.content, &out);
  }
  out.content += pending_;
  pending_.clear();
  if (in_call_) {
    ParsedToolOutput parsed = tools_->parse(call_text_);
    out.content += parsed.content;
    for (ToolCall& c : parsed.calls) {
      c.id = tool_call_id();
      calls->push_back(std::move(c));
    }
  }
  return out;
}

ChatOutput::Delta ChatOutput::step(std::string_view text, bool done, std::vector<ToolCall>* calls) {
  Delta d = push(text);
  if (done) {
    Delta rest = finish(calls);
    d.reasoning += rest.reasoning;
    d.content += rest.content;
  }
  return d;
}

std::string tool_call_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id;
  for (int i = 0; i < 9; ++i) id += digits[rng() % 62];
  return id;
}

}  // namespace kt::serve
