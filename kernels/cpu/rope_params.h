// Reading a call's rope parameters (cpu.rope, cpu.mla_cache_store share them).
#pragma once

#include "kernels/cpu/ops_ref.h"
#include "kernels/kernel_bind.h"

namespace kt::kern {

// params: n_dims, mode (0 normal, 2 NeoX), freq_base, freq_scale, n_ctx_orig,
// ext_factor, attn_factor, beta_fast, beta_slow.
cpu::ref::RopeParams read_rope_params(Binder& b);

}  // namespace kt::kern
