#include "kernels/norm_contract.h"

#include <string>

namespace kt::kern {

namespace {
// An F32 weight of `cols` values.
void norm_weight(Binder& b, const CallSpec& s, int64_t cols) {
  b.check(s.weights[0].type == GgmlType::F32, "weight '", std::string(s.weights[0].name), "' must be F32");
  b.weight_shape(0, cols);
}
}  // namespace

bool bind_rms_norm(Binder& b, const CallSpec& s, float* eps, int64_t* group) {
  if (!b.arity(1, 1, 1)) return false;
  *eps = float(b.f("eps"));
  *group = b.i("group", s.in[0].cols);
  b.check(*group > 0 && s.in[0].cols % *group == 0, "group ", *group, " does not divide ", s.in[0].cols, " columns");
  norm_weight(b, s, *group);
  b.in_type(0, GgmlType::F32);
  b.out_cols(0, s.in[0].cols);
  return b.ok();
}

bool bind_add_rms_norm(Binder& b, const CallSpec& s, float* eps, size_t extra_outputs, size_t extra_inputs) {
  if (!b.arity(2 + extra_inputs, 2 + extra_outputs, 1)) return false;
  *eps = float(b.f("eps"));
  b.in_type(0, GgmlType::F32);
  for (size_t k = 1; k < 2 + extra_inputs; ++k) {
    b.in_type(k, GgmlType::F32);
    b.in_cols(k, s.in[0].cols);
  }
  b.out_cols(0, s.in[0].cols);
  b.out_cols(1, s.in[0].cols);
  norm_weight(b, s, s.in[0].cols);
  return b.ok();
}

}  // namespace kt::kern
