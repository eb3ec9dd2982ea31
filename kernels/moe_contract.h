// The device-independent part of the MoE kernels' contracts: the params and
// shapes cpu.* and cuda.* moe_gate / moe_experts check alike, in one place, so
// the two factories cannot drift apart (each adds only its own limits).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/ops_ref.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

// moe_gate: n_used, gating, n_group, topk_group, norm, scale; the router
// weight [n_embd, n_expert] and optional F32 selection bias [n_expert]; the
// outputs ids I32 and weights F32 of n_used columns. Fills *r; false (with
// the Binder's error) when a check fails.
bool bind_moe_gate(Binder& b, const CallSpec& s, cpu::ref::MoeRouting* r);

// moe_experts' optional expert_slots for a call whose weights hold n_held
// slices: each entry -1 or a slice, at most 2^20 entries. Empty when absent.
std::vector<int64_t> bind_expert_slots(Binder& b, int64_t n_held);

// moe_experts: inputs x F32 [n_embd], ids I32 and weights F32 of n_used
// columns; gate and up [n_embd, n_ff, n_held], down [n_ff, n_embd, n_held];
// the output [n_embd]; the optional expert_slots. Fills the shape; false (with
// the Binder's error) when a check fails. `choices` is each factory's.
// extra_inputs: inputs after those three that the caller checks
// (cuda.moe_experts' x already rounded).
struct MoeExpertsShape {
  int64_t n_embd = 0, n_ff = 0, n_held = 0, n_used = 0;
  std::vector<int64_t> slots;
};
bool bind_moe_experts(Binder& b, const CallSpec& s, MoeExpertsShape* out, size_t extra_inputs = 0);

}  // namespace kt::kern
