// The CUDA kernels a plan can call ("cuda.matmul", ...) and the "cuda" device
// API. Each kernel computes what its "cpu." namesake computes (same inputs,
// outputs, weights and params: kernels/cpu/README.md), with device pointers,
// launched asynchronously on the call's queue; kernels/cuda/README.md says how
// each is built and how close to the CPU reference it lands.
// Plain C++: kernels/registry.cpp includes it when CUDA is built.
#pragma once

#include <span>

#include "kernels/device.h"
#include "kernels/registry.h"

namespace kt::cpu::ref {
struct RopeParams;
}

namespace kt::kern {

std::span<const KernelEntry> cuda_kernels();
DeviceApi* cuda_device_api();

// Factories, one per kernel (kernels/cuda/cuda_*.cu).
std::unique_ptr<Kernel> make_cuda_embed(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_rms_norm(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_add(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_add_rms_norm(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_silu_mul(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_sigmoid_gate_add(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_select_rows(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_matmul(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_matmul_glu(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_matmul_multi(const CallSpec&, std::string*);
// cuda.matmul's, cuda.matmul_glu's and cuda.matmul_multi's optional input k:
// x's rows already rounded (kernels/cuda/cuda_rounded_rows.h). Its block
// size, 0 when absent.
class Binder;
int bind_rounded_rows(Binder& b, const CallSpec& s, size_t k);
std::unique_ptr<Kernel> make_cuda_rope(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_kv_store(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_attention(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_mla_cache_store(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_rope_mla_store(const CallSpec&, std::string*);
// cuda.mla_cache_store's checks (and those of the calls that hold one: input k
// the kv_a rows, weight w their norm) against the call's latent cache.
void bind_mla_store(Binder& b, const CallSpec& s, size_t k, size_t w, const cpu::ref::RopeParams& rope);
std::unique_ptr<Kernel> make_cuda_mla_attention(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_mla_attention_absorbed(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_mla_attention_store(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_moe_gate(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_moe_experts(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_moe_ffn(const CallSpec&, std::string*);
// cuda_moe_grouped.cu: cuda.moe_experts with streamed=1 (weights in host
// memory), and the grouped GEMM path cuda.moe_experts takes for long steps.
std::unique_ptr<Kernel> make_cuda_moe_experts_streamed(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_moe_experts_grouped(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_upload(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_download(const CallSpec&, std::string*);
std::unique_ptr<Kernel> make_cuda_peer_copy(const CallSpec&, std::string*);

}  // namespace kt::kern
