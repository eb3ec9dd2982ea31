// How kt launches its CUDA kernels: with Hopper's programmatic dependent launch
// (PDL), so a kernel's blocks can be resident, and start streaming their
// weights into L2, while the kernel before it on the stream still runs.
//
// Why: a decode step is a chain of ~900 small kernels (kernels/cuda/README.md),
// each a few microseconds, most of it the latency of its first weight loads
// and of its blocks' launch. Without PDL each kernel starts only after the
// previous one has finished and flushed; with it, that start overlaps the
// previous kernel, and the weights (which no kernel writes) are already in L2
// when the inputs are ready.
//
// The contract, for every kernel launched with launch():
// - before its first read of anything an earlier kernel wrote, and before its
//   first global write, it calls wait_for_inputs(). Until then it may only
//   compute addresses and read constant data (weights) or prefetch them;
// - every thread that reads or writes global memory passes wait_for_inputs()
//   first (an early return before it is allowed only where the thread then
//   touches nothing). The grid as a whole then ends after the kernels it
//   depends on, so the guarantee chains along the stream.
// Kernels that rely on ordering beyond this (the host-flag kernels and the
// copies to or from host memory in cuda_device.cu / cuda_elementwise.cu) keep
// plain launches, which wait for everything before them, as does load-time
// dequantization (dequant_cuda.cu), outside any step. test/cuda_launch_check.py
// holds the list and checks the contract on the sources; kernels/cuda/README.md
// has what PDL gained.
//
// KT_CUDA_PDL=0 in the environment launches everything plainly (for measuring
// what PDL gains; the kernels' waits are then no-ops).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "kernels/cuda/cuda_context.h"

namespace kt::cuda {

// Launches kernel<<<grid, block, smem, stream>>>(args...), allowed to begin
// before the previous kernel on the stream ends (see the contract above).
// Errors surface through cudaGetLastError, as with <<<>>> (check_launch).
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Lets kernel K (one instantiation) take `bytes` of dynamic shared memory past
// the 48 KB default: raised once per device, and again only for a larger need
// (cudaFuncSetAttribute costs host time a decode step cannot spare).
template <auto K>
void allow_shared_memory(size_t bytes) {
  if (bytes <= 48 * 1024) return;
  static std::atomic<size_t> allowed[64];
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev >= 64 || allowed[dev].load() < bytes) {
    cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (dev < 64) allowed[dev].store(bytes);
  }
}

// Waits until the kernels this one depends on have ended and their writes are
// visible, then lets the next kernel on the stream launch (its blocks wait in
// their own wait_for_inputs() for this kernel to end). Without PDL both are
// no-ops: the launch already waited.
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks the memory system to bring [p, p + bytes) into L2 (a hint: no data
// returns, no fault). For the weights a block will read, issued before
// wait_for_inputs() so that DRAM's latency passes while the previous kernel
// runs. One thread calls it; the range is widened to 16-byte bounds, which
// stay inside the weights' 256-byte-aligned allocation.
__device__ __forceinline__ void prefetch_l2(const void* p, uint64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  const uint64_t lo = a & ~uint64_t(15), hi = (a + bytes + 15) & ~uint64_t(15);
  for (uint64_t q = lo; q < hi;) {
    // One instruction moves at most 2^32 - 16 bytes; keep well under it.
    const uint32_t n = uint32_t(hi - q < (uint64_t(1) << 20) ? hi - q : (uint64_t(1) << 20));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(q), "r"(n) : "memory");
    q += n;
  }
#endif
}

// Copies [src, src + bytes) into shared memory at dst with asynchronous 16-byte
// copies (cp.async: no registers hold the bytes in flight), spread over the
// block's threads; stage_wait() makes them visible to the whole block. Both
// addresses must be 16-byte aligned; a last piece shorter than 16 bytes reads
// only its own bytes. Why: a matrix-vector product is bound by the bytes each
// SM keeps in flight, and loads into registers are capped by the registers
// (kernels/cuda/README.md, "Weights staged in shared memory"). Issued before
// wait_for_inputs() for weights, it overlaps the kernel ahead.
__device__ __forceinline__ void stage_async(uint8_t* dst, const uint8_t* src, uint64_t bytes) {
  for (uint64_t off = uint64_t(threadIdx.x) * 16; off < bytes; off += uint64_t(blockDim.x) * 16) {
    const uint32_t d = uint32_t(__cvta_generic_to_shared(dst + off));
    const uint32_t n = bytes - off < 16 ? uint32_t(bytes - off) : 16u;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src + off), "r"(n) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void stage_wait() {
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
}

}  // namespace kt::cuda
