// The CPU kernels a plan can call, by the names plans use ("cpu.matmul").
// Each binds a plan call (kernels/kernel.h) and runs it over the runtime's
// thread pool. Where a fast kernel exists (AVX-512, AMX) the factory picks it
// from the CPU's features unless the call asks for the reference
// (CallSpec::impl); the reference path calls kernels/cpu/ops_ref.h, which
// defines what every kernel computes. Inputs, outputs, weights and params of
// each kernel: kernels/cpu/README.md.
#pragma once

#include <span>
#include <string>

#include "kernels/registry.h"

namespace kt::kern {

std::span<const KernelEntry> cpu_kernels();

// Factories, one per kernel (cpu_kernels_*.cpp).
std::unique_ptr<Kernel> make_cpu_embed(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_rms_norm(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_add_rms_norm(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_add(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_silu_mul(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_sigmoid_gate_add(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_select_rows(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_matmul(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_rope(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_kv_store(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_attention(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_mla_cache_store(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_mla_attention(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_mla_attention_absorbed(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_moe_gate(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cpu_moe_experts(const CallSpec&, std::string*);

// Whether a product with weights of `type` may take the fast path
// (kernels/cpu/matmul_q.h): it computes the reference's GgmlCpu numbers, and
// where the call's `bf16_rows` asks for BF16 steps, matmul_bf16 runs here too.
bool use_fast_matmul(const CallSpec& s, GgmlType type);
// The fast path's kernel name for `type` (Kernel::impl): matmul_q's, then
// matmul_bf16's after a '+' where bf16_rows > 0.
std::string fast_matmul_impl(GgmlType type, int64_t bf16_rows);

}  // namespace kt::kern
