// Errors as values with a place. The runtime and kernels are built without
// relying on exceptions (the compiler side links LLVM, built with -fno-exceptions),
// so every fallible call returns Result<T> and the message names where it failed:
// "model.gguf:1234: tensor 'blk.0.ffn_up.weight': ...".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kt {

struct Error {
  std::string message;
};

// Builds an Error from pieces: err("file.gguf:", off, ": bad magic").
template <class... Parts>
Error err(Parts&&... parts) {
  std::string s;
  auto append = [&s](const auto& p) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(p)>>)
      s += std::to_string(p);
    else
      s += p;
  };
  (append(parts), ...);
  return Error{std::move(s)};
}

// Text from an input file (a key, a tensor name, a YAML scalar) as it may appear
// inside a one-line error: control bytes escaped as \xNN, long text cut with "...".
// No input can make a message span lines or pages.
inline std::string printable(std::string_view s, size_t max_len = 96) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  if (s.size() > max_len) out += "...";
  return out;
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

}  // namespace kt

// Propagates an error from an expression returning Result/Status.
#define KT_TRY(expr)                                    \
  do {                                                  \
    auto kt_try_r_ = (expr);                            \
    if (!kt_try_r_.ok()) return kt_try_r_.error();      \
  } while (0)
