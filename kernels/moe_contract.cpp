#include "kernels/moe_contract.h"

#include <string>

namespace kt::kern {

bool bind_moe_gate(Binder& b, const CallSpec& s, cpu::ref::MoeRouting* r) {
  r->n_expert = s.weights[0].ne[1];
  r->n_used = b.i("n_used");
  const int64_t gating = b.i("gating");
  r->n_group = b.i("n_group", 1);
  r->topk_group = b.i("topk_group", 1);
  r->norm_weights = b.i("norm", 0) != 0;
  r->weights_scale = float(b.f("scale", 0.0));
  if (!b.ok()) return false;
  b.check(gating == 1 || gating == 2, "gating ", gating, " is not 1 (softmax) or 2 (sigmoid)");
  r->gating = gating == 2 ? cpu::ref::MoeGating::Sigmoid : cpu::ref::MoeGating::Softmax;
  b.check(r->n_used > 0 && r->n_used <= r->n_expert, "n_used ", r->n_used, " of ", r->n_expert, " experts");
  b.check(r->n_group >= 1 && r->n_expert % r->n_group == 0 && r->topk_group >= 1 && r->topk_group <= r->n_group &&
              r->n_used <= (r->n_expert / r->n_group) * r->topk_group,
          "groups ", r->n_group, " (top ", r->topk_group, ") do not fit ", r->n_expert, " experts, ", r->n_used,
          " used");
  b.weight_shape(0, s.in[0].cols, r->n_expert);
  if (s.weights.size() > 1) {
    b.check(s.weights[1].type == GgmlType::F32, "bias '", std::string(s.weights[1].name), "' must be F32");
    b.weight_shape(1, r->n_expert);
  }
  b.in_type(0, GgmlType::F32);
  b.out_type(0, GgmlType::I32);
  b.out_cols(0, r->n_used);
  b.out_type(1, GgmlType::F32);
  b.out_cols(1, r->n_used);
  return b.ok();
}

std::vector<int64_t> bind_expert_slots(Binder& b, int64_t n_held) {
  std::vector<int64_t> slots = b.ints("expert_slots");
  b.check(slots.size() <= (1u << 20), "expert_slots: ", slots.size(), " entries");
  for (int64_t m : slots) b.check(m >= -1 && m < n_held, "expert_slots: slice ", m, " is not in -1..", n_held - 1);
  return slots;
}

bool bind_moe_experts(Binder& b, const CallSpec& s, MoeExpertsShape* out, size_t extra_inputs) {
  if (!b.arity(3 + extra_inputs, 1, 3)) return false;
  const int64_t n_embd = s.in[0].cols, n_ff = s.weights[0].ne[1], ne = s.weights[0].ne[2];
  b.weight_shape(0, n_embd, n_ff, ne);
  b.weight_shape(1, n_embd, n_ff, ne);
  b.weight_shape(2, n_ff, n_embd, ne);
  b.in_type(0, GgmlType::F32);
  b.in_type(1, GgmlType::I32);
  b.in_type(2, GgmlType::F32);
  b.in_cols(2, s.in[1].cols);
  b.out_cols(0, n_embd);
  out->slots = bind_expert_slots(b, ne);
  out->n_embd = n_embd;
  out->n_ff = n_ff;
  out->n_held = ne;
  out->n_used = s.in[1].cols;
  return b.ok();
}

}  // namespace kt::kern
