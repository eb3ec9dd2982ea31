// Helpers for kernel factories: reading a call's parameters and checking its
// shapes once, at bind, with one-line errors ("param 'eps' is missing",
// "input 0 has 512 columns, weight 'blk.0.attn_q.weight' expects 2048").
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kernels/kernel.h"

namespace kt::kern {

class Binder {
 public:
  Binder(const CallSpec& spec, std::string* error) : s_(spec), error_(error) {}

  const CallSpec& spec() const { return s_; }
  bool ok() const { return ok_; }

  // Records the first failure; later checks are skipped. Returns cond.
  template <class... Parts>
  bool check(bool cond, const Parts&... parts) {
    if (!ok_ || cond) return cond;
    ok_ = false;
    std::string m;
    auto append = [&m](const auto& p) {
      if constexpr (std::is_arithmetic_v<std::decay_t<decltype(p)>>)
        m += std::to_string(p);
      else
        m += p;
    };
    (append(parts), ...);
    *error_ = m;
    return false;
  }

  // Inputs, outputs, weights: exact counts (w_max: optional weights allowed).
  bool arity(size_t n_in, size_t n_out, size_t w_min, size_t w_max);
  bool arity(size_t n_in, size_t n_out, size_t n_w) { return arity(n_in, n_out, n_w, n_w); }
  bool needs_kv();

  // Required parameters; missing ones fail the bind.
  int64_t i(std::string_view key);
  double f(std::string_view key);
  // Optional ones.
  int64_t i(std::string_view key, int64_t fallback);
  double f(std::string_view key, double fallback);
  // An optional list of integers (empty when absent).
  std::vector<int64_t> ints(std::string_view key);

  // Shape checks with messages naming the operand.
  bool in_cols(size_t k, int64_t cols);
  bool out_cols(size_t k, int64_t cols);
  bool in_type(size_t k, GgmlType t);
  bool out_type(size_t k, GgmlType t);
  // A weight of 1-4 dims [ne0, ne1, ne2] (1 for absent trailing dims); -1 matches any.
  bool weight_shape(size_t k, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1);
  // The weight's type has reference kernels.
  bool weight_computable(size_t k);

  // Weight k may come repacked (WeightLayout::Int8 or Int4): the factory
  // reads it so. Any other weight not in the file's layout fails the bind in
  // done().
  void accept_repacked(size_t k) { repacked_ok_ |= 1u << k; }

  // The factory's return value: the kernel when every check passed, else null.
  template <class K>
  std::unique_ptr<Kernel> done(std::unique_ptr<K> k) {
    if (!ok_ || !layouts_ok()) return nullptr;
    return k;
  }

 private:
  bool layouts_ok();

  const CallSpec& s_;
  std::string* error_;
  bool ok_ = true;
  uint32_t repacked_ok_ = 0;
};

}  // namespace kt::kern
