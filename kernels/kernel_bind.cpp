#include "kernels/kernel_bind.h"

namespace kt::kern {

const Param* CallSpec::find(std::string_view key) const {
  for (const Param& p : params)
    if (p.key == key) return &p;
  return nullptr;
}

bool Binder::arity(size_t n_in, size_t n_out, size_t w_min, size_t w_max) {
  return check(s_.in.size() == n_in, "expects ", n_in, " inputs, the call has ", s_.in.size()) &&
         check(s_.out.size() == n_out, "expects ", n_out, " outputs, the call has ", s_.out.size()) &&
         check(s_.weights.size() >= w_min && s_.weights.size() <= w_max, "expects ", w_min,
               w_min == w_max ? "" : " to " + std::to_string(w_max), " weights, the call has ",
               s_.weights.size());
}

bool Binder::needs_kv() { return check(s_.kv != nullptr, "needs a KV cache, the call names none"); }

int64_t Binder::i(std::string_view key) {
  const Param* p = s_.find(key);
  check(p != nullptr, "parameter '", std::string(key), "' is missing");
  return p ? p->i : 0;
}

double Binder::f(std::string_view key) {
  const Param* p = s_.find(key);
  check(p != nullptr, "parameter '", std::string(key), "' is missing");
  return p ? p->f : 0.0;
}

int64_t Binder::i(std::string_view key, int64_t fallback) {
  const Param* p = s_.find(key);
  return p ? p->i : fallback;
}

std::vector<int64_t> Binder::ints(std::string_view key) {
  const Param* p = s_.find(key);
  return p ? p->ints : std::vector<int64_t>{};
}

double Binder::f(std::string_view key, double fallback) {
  const Param* p = s_.find(key);
  return p ? p->f : fallback;
}

bool Binder::in_cols(size_t k, int64_t cols) {
  return check(k < s_.in.size(), "input ", k, " is missing") &&
         check(s_.in[k].cols == cols, "input ", k, " has ", s_.in[k].cols, " columns, expected ", cols);
}

bool Binder::out_cols(size_t k, int64_t cols) {
  return check(k < s_.out.size(), "output ", k, " is missing") &&
         check(s_.out[k].cols == cols, "output ", k, " has ", s_.out[k].cols, " columns, expected ", cols);
}

bool Binder::in_type(size_t k, GgmlType t) {
  return check(k < s_.in.size(), "input ", k, " is missing") &&
         check(s_.in[k].type == t, "input ", k, " is ", std::string(type_name(s_.in[k].type)), ", expected ",
               std::string(type_name(t)));
}

bool Binder::out_type(size_t k, GgmlType t) {
  return check(k < s_.out.size(), "output ", k, " is missing") &&
         check(s_.out[k].type == t, "output ", k, " is ", std::string(type_name(s_.out[k].type)), ", expected ",
               std::string(type_name(t)));
}

bool Binder::weight_shape(size_t k, int64_t ne0, int64_t ne1, int64_t ne2) {
  if (!check(k < s_.weights.size(), "weight ", k, " is missing")) return false;
  const WeightView& w = s_.weights[k];
  const bool match = (ne0 < 0 || w.ne[0] == ne0) && (ne1 < 0 || w.ne[1] == ne1) &&
                     (ne2 < 0 || w.ne[2] == ne2) && w.ne[3] == 1;
  return check(match, "weight '", std::string(w.name), "' is [", w.ne[0], ", ", w.ne[1], ", ", w.ne[2],
               "], expected [", ne0, ", ", ne1, ", ", ne2, "]");
}

bool Binder::weight_computable(size_t k) {
  if (!check(k < s_.weights.size(), "weight ", k, " is missing")) return false;
  const WeightView& w = s_.weights[k];
  const TypeTraits& t = type_traits(w.type);
  return check(t.supported(), "weight '", std::string(w.name), "': type ", std::string(t.name),
               " has no kernels") &&
         check(w.ne[0] % t.block_size == 0, "weight '", std::string(w.name), "': rows of ", w.ne[0],
               " values are not whole ", std::string(t.name), " blocks");
}

bool Binder::layouts_ok() {
  for (size_t k = 0; k < s_.weights.size(); ++k) {
    const WeightView& w = s_.weights[k];
    if (w.layout == WeightLayout::Gguf || (k < 32 && (repacked_ok_ >> k) & 1)) continue;
    return check(false, "weight '", std::string(w.name), "' is repacked to ",
                 layout_name(w.layout), ", which ", std::string(s_.kernel),
                 " does not read (only the routed experts take it)");
  }
  return true;
}

}  // namespace kt::kern
