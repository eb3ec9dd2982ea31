// cuda.upload, cuda.download, cuda.peer_copy: the step's rows of each input to
// the output beside it. A call may carry several buffers (kt-insert-transfers
// joins the downloads a run of GPU calls hands to the host: a hybrid decode
// layer's normed rows, expert ids and weights are one call).
//
// Between GPU memory and page-locked host memory the GPU maps, up to
// kKernelCopyBytes, the copy is a kernel (loads or stores over PCIe by the SMs)
// rather than a copy-engine transfer: for the few KB a decode step hands
// between the GPU and the CPU it costs less, in the GPU's chain and at a
// recording's launch (V2-Lite hybrid, H200 host, alternating: the host's wait
// for the GPU per token 3.24 -> 2.53 ms, the step's cudaGraphLaunch 480 / 309
// -> 49 / 31 us). Other copies take cudaMemcpyAsync.
//
// In a gated step (runtime/executor_recorded.cpp) the copies take the host
// flags themselves (Kernel::takes_flags): an upload waits for the host's
// "done" and a download sets "landed" inside the copy's own kernel, one block,
// so a hand-off is one kernel where it was the copy and a flag kernel, each a
// plain launch waiting for the whole queue before it.
#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_host_flags.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/kernel_bind.h"

namespace kt::cuda {

namespace {

// Buffers one copy call carries at most.
constexpr int kMaxCopies = 8;

struct CopyList {
  const uint32_t* src[kMaxCopies];
  uint32_t* dst[kMaxCopies];
  int64_t words[kMaxCopies];
  int n;
};

// Buffer blockIdx.y, 4-byte words. The fence publishes the stores to the host
// before the kernel is seen to end. A plain launch (not cuda::launch): host
// memory's ordering with the flag kernels rests on whole-kernel boundaries
// (cuda_launch.cuh).
__global__ void copy_words_kernel(CopyList l) {
  const int b = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < l.words[b]) l.dst[b][i] = l.src[b][i];
  __threadfence_system();
}

// The whole hand-off in one block: wait for the host's flag (await, may be
// null), copy every buffer, set the GPU's flag (signal, may be null) once the
// stores reached host memory. Thread 0 acquires the host's flag and the
// barrier passes that on to the block (as a grid barrier does); the block's
// stores meet at a barrier before thread 0's system fence and release. The
// flags order host memory within the kernel, so it may start early (PDL): it
// reads and writes nothing before wait_for_inputs().
constexpr int kFlaggedThreads = 1024;
__global__ void __launch_bounds__(kFlaggedThreads)
    copy_flagged_kernel(CopyList l, uint32_t* await, uint32_t* signal) {
  wait_for_inputs();
  if (await) {
    if (threadIdx.x == 0) await_host_flag(await, 1u);
    __syncthreads();
  }
  for (int b = 0; b < l.n; ++b)
    for (int64_t i = threadIdx.x; i < l.words[b]; i += blockDim.x) l.dst[b][i] = l.src[b][i];
  if (signal) {
    __syncthreads();
    if (threadIdx.x == 0) signal_host_flag(signal, 1u);
  }
}

}  // namespace

}  // namespace kt::cuda

namespace kt::kern {

namespace {

class Copy final : public Kernel {
 public:
  // Peer copies wait for the source GPU's queue first: not recorded.
  bool capturable(const CallArgs&) const override { return kind_ != Transfer::Peer; }
  bool takes_flags() const override { return kind_ != Transfer::Peer; }
  Copy(int device, Transfer kind) : device_(device), kind_(kind) {}

  void run(const CallArgs& a) override {
    cuda::use_device(device_);
    auto s = static_cast<cudaStream_t>(a.queue);
    uint32_t* await = a.await_flag ? flag_pointer(a.await_flag, 0) : nullptr;
    uint32_t* signal = a.signal_flag ? flag_pointer(a.signal_flag, 1) : nullptr;
    cuda::CopyList l{};
    l.n = int(a.in.size());
    int64_t total = 0, longest = 0;
    uint64_t bytes[cuda::kMaxCopies];
    bool kernel = kind_ != Transfer::Peer;
    for (int k = 0; k < l.n; ++k) {
      const Act &x = a.in[size_t(k)], &y = a.out[size_t(k)];
      bytes[k] = uint64_t(x.rows) * uint64_t(x.cols) * type_traits(x.type).type_size;
      void* host = kind_ == Transfer::Upload ? x.data : y.data;
      void* mapped = kernel && bytes[k] % 4 == 0 ? mapped_pointer(k, host) : nullptr;
      kernel = kernel && mapped;
      l.src[k] = static_cast<const uint32_t*>(kind_ == Transfer::Upload ? mapped : x.data);
      l.dst[k] = static_cast<uint32_t*>(kind_ == Transfer::Upload ? y.data : mapped);
      l.words[k] = int64_t(bytes[k] / 4);
      total += l.words[k];
      longest = std::max(longest, l.words[k]);
    }
    kernel = kernel && uint64_t(total) * 4 <= kKernelCopyBytes;
    if (kernel && (await || signal) && total <= kFlaggedWords) {
      cuda::launch(cuda::copy_flagged_kernel, 1, cuda::kFlaggedThreads, 0, s, l, await, signal);
      cuda::check_launch("cuda copy (one kernel with its host flags)", a.queue);
      return;
    }
    if (await) cuda::queue_await_host_flag(s, await, 1u);
    if (kernel && longest > 0) {
      cuda::copy_words_kernel<<<dim3(unsigned(cuda::ceil_div(longest, 256)), unsigned(l.n)), 256, 0, s>>>(l);
      cuda::check_launch("cuda copy (kernel)", a.queue);
    } else if (!kernel) {
      for (int k = 0; k < l.n; ++k) {
        if (bytes[k] == 0) continue;
        const cudaError_t e =
            cudaMemcpyAsync(a.out[size_t(k)].data, a.in[size_t(k)].data, bytes[k], cudaMemcpyDefault, s);
        if (e != cudaSuccess) cuda::check_launch("cuda copy", a.queue);
      }
    }
    if (signal) cuda::queue_signal_host_flag(s, signal, 1u);
    cuda::check_launch("cuda copy (host flags)", a.queue);
  }
  Transfer transfer() const override { return kind_; }
  std::string_view impl() const override { return kind_ == Transfer::Peer ? "cudaMemcpyAsync" : "mapped or copy engine"; }

 private:
  // Up to this many bytes a copy with mapped host memory is a kernel, and up
  // to kFlaggedWords one block's (V3's 7168-value row and its routing: 28 KB).
  static constexpr uint64_t kKernelCopyBytes = 256 << 10;
  static constexpr int64_t kFlaggedWords = 16 << 10;

  // The GPU's address of page-locked host memory at `host` (buffer k), or null
  // where it has none (pageable memory). A call's host buffers stay put: asked once.
  void* mapped_pointer(int k, void* host) {
    Mapped& m = mapped_[k];
    if (host == m.host) return m.device;
    cudaPointerAttributes at{};
    void* d = nullptr;
    if (cudaPointerGetAttributes(&at, host) == cudaSuccess && at.type == cudaMemoryTypeHost) d = at.devicePointer;
    cudaGetLastError();
    m = {host, d};
    return d;
  }
  // The same for a host flag (slot 0: await, 1: signal).
  uint32_t* flag_pointer(uint32_t* host, int slot) {
    Mapped& m = flags_[slot];
    if (host != m.host) {
      uint32_t* d = nullptr;
      if (cuda::host_flag_on_device(host, &d) != cudaSuccess) d = host;  // unified addressing: the same address
      m = {host, d};
    }
    return static_cast<uint32_t*>(m.device);
  }

  struct Mapped {
    void* host = nullptr;
    void* device = nullptr;
  };
  int device_;
  Transfer kind_;
  Mapped mapped_[cuda::kMaxCopies];
  Mapped flags_[2];
};

std::unique_ptr<Kernel> make_copy(const CallSpec& s, std::string* error, Kernel::Transfer kind) {
  Binder b(s, error);
  const size_t n = s.in.size();
  if (b.check(s.device >= 0, "a CUDA kernel needs a GPU device") &&
      b.check(n >= 1 && n <= size_t(cuda::kMaxCopies), "a copy carries 1 to ", cuda::kMaxCopies, " buffers, not ",
              n) &&
      b.arity(n, n, 0)) {
    for (size_t k = 0; k < n && b.ok(); ++k) {
      b.out_cols(k, s.in[k].cols);
      b.out_type(k, s.in[k].type);
      b.check(s.out[k].max_rows >= s.in[k].max_rows, "output ", k, " holds ", s.out[k].max_rows, " rows, input ",
              s.in[k].max_rows);
    }
  }
  return b.done(std::make_unique<Copy>(s.device, kind));
}

}  // namespace

std::unique_ptr<Kernel> make_cuda_upload(const CallSpec& s, std::string* error) {
  return make_copy(s, error, Kernel::Transfer::Upload);
}
std::unique_ptr<Kernel> make_cuda_download(const CallSpec& s, std::string* error) {
  return make_copy(s, error, Kernel::Transfer::Download);
}
std::unique_ptr<Kernel> make_cuda_peer_copy(const CallSpec& s, std::string* error) {
  return make_copy(s, error, Kernel::Transfer::Peer);
}

}  // namespace kt::kern
