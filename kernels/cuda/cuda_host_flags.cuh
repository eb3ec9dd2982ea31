// The GPU's side of the host flags that gate a hybrid step
// (runtime/executor_recorded.cpp): 32-bit words in page-locked host memory the
// GPU maps. The host writes 1 when its experts are done and the GPU's work
// after them may go; the GPU writes 1 when its copies to the host have landed.
// Used by the one-thread flag kernels (cuda_device.cu) and by the copies that
// take the flags themselves (cuda_copy.cu), so a hand-off is one kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kt::cuda {

// Spins until *f reads `value` (system-scope acquire loads, each a PCIe read),
// then clears it for the flag's next use. One thread calls it.
__device__ __forceinline__ void await_host_flag(uint32_t* f, uint32_t value) {
  uint32_t v;
  for (;;) {
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
    if (v == value) break;
    __nanosleep(200);
  }
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(f), "r"(0u) : "memory");
}

// Sets *f to `value` after every store this thread has seen: one thread calls
// it, after the block's threads each fenced their own stores at system scope
// and met at a barrier (so the host reads the data once it reads the flag).
__device__ __forceinline__ void signal_host_flag(uint32_t* f, uint32_t value) {
  __threadfence_system();
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(f), "r"(value) : "memory");
}

// The GPU's address of a flag in mapped page-locked host memory (the
// allocation's mapping; an error where the flag is not such memory).
cudaError_t host_flag_on_device(uint32_t* flag, uint32_t** device);

// The same as one-thread kernels on a queue (plain launches: they wait for
// everything before them), for a hand-off that is not one kernel (cuda_device.cu).
// f: the GPU's address of the flag.
void queue_await_host_flag(cudaStream_t s, uint32_t* f, uint32_t value);
void queue_signal_host_flag(cudaStream_t s, uint32_t* f, uint32_t value);

}  // namespace kt::cuda
