// The "cuda" DeviceApi (kernels/device.h) over the CUDA runtime: device memory,
// pinned host memory, streams as queues, events. Every failure is one line that
// names the CUDA error (and, for an allocation, the bytes asked and free).
// Without a driver or a GPU, count() is 0: nothing is printed, nothing aborts.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>
#include <string>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_host_flags.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace kt::cuda {

namespace {

// The host flags as one-thread kernels on the queue. They were stream memory
// operations (cuStreamWaitValue32 / cuStreamWriteValue32): a recorded V2-Lite
// hybrid step holding those cost 430-520 us of host time per cudaGraphLaunch,
// with kernels 300-350 (kt-bench e2e --profile, H200 host, alternating), and
// kt links no libcuda to reach them. The wait spins on the mapped word with
// system-scope acquire loads (each a PCIe read), then clears it.
__global__ void wait_flag_kernel(uint32_t* f, uint32_t value) { await_host_flag(f, value); }

// Everything before it on the queue has finished (stream order); the release
// store orders this thread's view, and copies have landed in host memory.
__global__ void write_flag_kernel(uint32_t* f, uint32_t value) { signal_host_flag(f, value); }

}  // namespace

cudaError_t host_flag_on_device(uint32_t* flag, uint32_t** device) {
  void* p = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&p, flag, 0);
  if (e != cudaSuccess) cudaGetLastError();
  *device = static_cast<uint32_t*>(p);
  return e;
}

void queue_await_host_flag(cudaStream_t s, uint32_t* f, uint32_t value) {
  wait_flag_kernel<<<1, 1, 0, s>>>(f, value);
}
void queue_signal_host_flag(cudaStream_t s, uint32_t* f, uint32_t value) {
  write_flag_kernel<<<1, 1, 0, s>>>(f, value);
}

}  // namespace kt::cuda

namespace kt::kern {

namespace {

using cuda::error_text;

bool fail(std::string* error, const std::string& what, cudaError_t e) {
  cudaGetLastError();  // clear the sticky-free error state for the next call
  if (error) *error = what + ": " + error_text(int(e));
  return false;
}

class CudaDevice final : public DeviceApi {
 public:
  std::string_view kind() const override { return "cuda"; }

  int count() const override {
    static const int n = [] {
      int c = 0;
      if (cudaGetDeviceCount(&c) != cudaSuccess) {
        cudaGetLastError();
        return 0;
      }
      return c;
    }();
    return n;
  }

  std::string name(int index) const override {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
      cudaGetLastError();
      return "cuda:" + std::to_string(index);
    }
    return p.name;
  }

  bool mem_info(int index, uint64_t* free_bytes, uint64_t* total_bytes) const override {
    if (cudaSetDevice(index) != cudaSuccess) return fail(nullptr, "", cudaGetLastError());
    size_t f = 0, t = 0;
    const cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) return fail(nullptr, "", e);
    *free_bytes = f;
    *total_bytes = t;
    return true;
  }

  void* alloc(int index, uint64_t bytes, std::string* error) override {
    cudaError_t e = cudaSetDevice(index);
    if (e != cudaSuccess) {
      fail(error, "cudaSetDevice(" + std::to_string(index) + ")", e);
      return nullptr;
    }
    void* p = nullptr;
    e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t f = 0, t = 0;
      cudaMemGetInfo(&f, &t);
      *error = "cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(index) + ": " +
               error_text(int(e)) + ", " + std::to_string(f) + " bytes free of " + std::to_string(t);
      return nullptr;
    }
    return p;
  }

  void free(int index, void* p) override {
    if (!p) return;
    cudaSetDevice(index);
    cudaFree(p);
  }

  bool memset_zero(int index, void* p, uint64_t bytes, std::string* error) override {
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, bytes, nullptr);
    if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
    return e == cudaSuccess || fail(error, "cudaMemset of " + std::to_string(bytes) + " bytes", e);
  }

  bool pin(void* p, uint64_t bytes, std::string* error) override {
    // Portable: every GPU of the process may copy from and to it.
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    return e == cudaSuccess || fail(error, "cudaHostRegister of " + std::to_string(bytes) + " bytes", e);
  }

  void unpin(void* p) override {
    if (p && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
  }

  void* create_queue(int index, std::string* error) override {
    cudaError_t e = cudaSetDevice(index);
    cudaStream_t s = nullptr;
    // Non-blocking: the legacy default stream (used by synchronous copies)
    // does not serialize with it.
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      fail(error, "cudaStreamCreate on cuda:" + std::to_string(index), e);
      return nullptr;
    }
    return s;
  }

  void destroy_queue(int index, void* queue) override {
    cudaSetDevice(index);
    cudaStreamDestroy(static_cast<cudaStream_t>(queue));
  }

  bool sync(void* queue, std::string* error) override {
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(queue));
    return e == cudaSuccess || fail(error, "cudaStreamSynchronize", e);
  }

  bool copy(void* dst, const void* src, uint64_t bytes, void* queue, std::string* error) override {
    const cudaError_t e = queue ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(queue))
                                : cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    return e == cudaSuccess || fail(error, "cudaMemcpy of " + std::to_string(bytes) + " bytes", e);
  }

  void* record_event(void* queue, std::string* error) override {
    return record(queue, cudaEventDisableTiming, error);
  }

  bool event_done(void* event) override {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) cudaGetLastError();
    return true;  // done, or failed: wait_event reports the error
  }

  bool wait_event(void* event, std::string* error) override {
    const cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(event));
    return e == cudaSuccess || fail(error, "cudaEventSynchronize", e);
  }

  void release_event(void* event) override {
    if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }

  void* record_timed_event(void* queue, std::string* error) override { return record(queue, cudaEventDefault, error); }

  double elapsed_ms(void* from, void* to) override {
    float ms = 0.0f;
    const cudaError_t e = cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to));
    if (e != cudaSuccess) {
      cudaGetLastError();
      return -1.0;
    }
    return double(ms);
  }

  uint64_t prepare_step(void* queue, const Step& step, std::string* error) override {
    int dev = 0;
    cudaError_t e = cudaStreamGetDevice(static_cast<cudaStream_t>(queue), &dev);
    if (e != cudaSuccess) {
      fail(error, "cudaStreamGetDevice", e);
      return 0;
    }
    cuda::use_device(dev);
    const cuda::DeviceStep st = cuda::upload_step(step, queue);
    // Replays read the indices and the scratch where the recording found them.
    const auto a = reinterpret_cast<uintptr_t>(st.tokens), w = reinterpret_cast<uintptr_t>(cuda::workspace(dev));
    return uint64_t(a) * 0x9E3779B97F4A7C15ull ^ (uint64_t(w) + cuda::workspace_bytes(dev)) ^ 1;
  }

  bool begin_capture(void* queue, std::string* error) override {
    static const bool off = [] {
      const char* sync = std::getenv("KT_CUDA_SYNC");  // waits inside run(): not recordable
      const char* graphs = std::getenv("KT_CUDA_GRAPHS");
      return (sync && *sync && *sync != '0') || (graphs && *graphs == '0');
    }();
    if (off) {
      if (error) *error = "recording is off (KT_CUDA_SYNC=1 or KT_CUDA_GRAPHS=0)";
      return false;
    }
    const cudaError_t e = cudaStreamBeginCapture(static_cast<cudaStream_t>(queue), cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess || fail(error, "cudaStreamBeginCapture", e);
  }

  void* end_capture(void* queue, std::string* error) override {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(queue), &graph);
    if (e != cudaSuccess) {
      if (graph) cudaGraphDestroy(graph);
      fail(error, "cudaStreamEndCapture", e);
      return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      fail(error, "cudaGraphInstantiate", e);
      return nullptr;
    }
    return exec;
  }

  bool launch_graph(void* graph, void* queue, std::string* error) override {
    const cudaError_t e = cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(queue));
    return e == cudaSuccess || fail(error, "cudaGraphLaunch", e);
  }

  void release_graph(void* graph) override {
    if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

  uint32_t* alloc_flags(int index, int n, std::string* error) override {
    void* p = nullptr;
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess) e = cudaHostAlloc(&p, size_t(n) * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
      fail(error, "cudaHostAlloc of " + std::to_string(n) + " flags", e);
      return nullptr;
    }
    std::memset(p, 0, size_t(n) * sizeof(uint32_t));
    return static_cast<uint32_t*>(p);
  }

  void free_flags(uint32_t* flags) override {
    if (flags && cudaFreeHost(flags) != cudaSuccess) cudaGetLastError();
  }

  bool wait_flag(void* queue, uint32_t* flag, uint32_t value, std::string* error) override {
    uint32_t* d = nullptr;
    if (const cudaError_t e = cuda::host_flag_on_device(flag, &d); e != cudaSuccess)
      return fail(error, "cudaHostGetDevicePointer of a flag", e);
    cuda::queue_await_host_flag(static_cast<cudaStream_t>(queue), d, value);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess || fail(error, "the flag wait kernel", e);
  }

  bool write_flag(void* queue, uint32_t* flag, uint32_t value, std::string* error) override {
    uint32_t* d = nullptr;
    if (const cudaError_t e = cuda::host_flag_on_device(flag, &d); e != cudaSuccess)
      return fail(error, "cudaHostGetDevicePointer of a flag", e);
    cuda::queue_signal_host_flag(static_cast<cudaStream_t>(queue), d, value);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess || fail(error, "the flag write kernel", e);
  }

 private:
  // An event with `flags` recorded on the queue; it must belong to the queue's device.
  static void* record(void* queue, unsigned flags, std::string* error) {
    auto s = static_cast<cudaStream_t>(queue);
    int dev = 0;
    cudaError_t e = cudaStreamGetDevice(s, &dev);
    if (e == cudaSuccess) e = cudaSetDevice(dev);
    cudaEvent_t ev = nullptr;
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ev, flags);
    if (e == cudaSuccess) e = cudaEventRecord(ev, s);
    if (e != cudaSuccess) {
      if (ev) cudaEventDestroy(ev);
      fail(error, "cudaEventRecord", e);
      return nullptr;
    }
    return ev;
  }

};

}  // namespace

DeviceApi* cuda_device_api() {
  static CudaDevice api;
  return &api;
}

}  // namespace kt::kern
