#include "runtime/reasoning_split.h"

namespace kt {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest tail of s that begins tag (a partial tag).
size_t partial_tail(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kClose);
  return close == std::string_view::npos || close < open;
}

ReasoningSplitter::ReasoningSplitter(bool starts_inside) : state_(starts_inside ? State::Inside : State::Start) {}

ReasoningSplitter::Piece ReasoningSplitter::push(std::string_view text) {
  Piece out;
  held_ += text;
  for (;;) {
    switch (state_) {
      case State::Start: {
        // Leading whitespace, then either <think> or the answer.
        size_t i = 0;
        while (i < held_.size() && is_space(held_[i])) ++i;
        const std::string_view rest = std::string_view(held_).substr(i);
        if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, i + kOpen.size());
          state_ = State::Inside;
          continue;
        }
        if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // undecided
        state_ = State::Answer;
        continue;
      }
      case State::Inside: {
        const size_t close = held_.find(kClose);
        if (close != std::string::npos) {
          out.reasoning += held_.substr(0, close);
          held_.erase(0, close + kClose.size());
          state_ = State::AfterClose;
          continue;
        }
        const size_t keep = partial_tail(held_, kClose);
        out.reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      case State::AfterClose: {
        size_t i = 0;
        while (i < held_.size() && is_space(held_[i])) ++i;
        held_.erase(0, i);
        if (held_.empty()) return out;
        state_ = State::Answer;
        continue;
      }
      case State::Answer:
        out.content += held_;
        held_.clear();
        return out;
    }
  }
}

ReasoningSplitter::Piece ReasoningSplitter::flush() {
  Piece out;
  if (state_ == State::Inside) out.reasoning = std::move(held_);
  else if (state_ != State::AfterClose) out.content = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace kt
