#include "kernels/cuda/cuda_context.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace kt::cuda {

namespace {

std::mutex g_mu;

// One device copy of the step's indices per queue. The pinned staging buffer
// is rewritten only after the copy that last read it is done (its event).
struct StepCopy {
  int device = -1;
  std::vector<int32_t> last;  // the host content the device copy holds
  int32_t* pinned = nullptr;
  int32_t* dev = nullptr;
  size_t capacity = 0;  // int32 elements of pinned and dev
  cudaEvent_t done = nullptr;
  DeviceStep view;
};

std::map<void*, StepCopy>& step_copies() {
  static std::map<void*, StepCopy> m;
  return m;
}

struct Workspace {
  void* p = nullptr;
  uint64_t bytes = 0;
};

// (device, queue): 0 the device's queue, 1 its side queue.
std::map<std::pair<int, int>, Workspace>& workspaces() {
  static std::map<std::pair<int, int>, Workspace> m;
  return m;
}

std::map<int, cudaStream_t>& side_queues() {
  static std::map<int, cudaStream_t> m;
  return m;
}

[[noreturn]] void die(const char* what, cudaError_t e) {
  std::fprintf(stderr, "kt cuda: %s: %s\n", what, error_text(int(e)).c_str());
  std::abort();
}

}  // namespace

std::string error_text(int cuda_error) {
  const auto e = cudaError_t(cuda_error);
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void use_device(int device) {
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device) {
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) die("cudaSetDevice", e);
  }
}

void* side_queue(int device, std::string* error) {
  std::lock_guard<std::mutex> lock(g_mu);
  cudaStream_t& s = side_queues()[device];
  if (s) return s;
  use_device(device);
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    s = nullptr;
    cudaGetLastError();
    if (error) *error = "a second queue on cuda:" + std::to_string(device) + ": " + error_text(int(e));
  }
  return s;
}

DeviceStep upload_step(const kern::Step& s, void* queue) {
  const int64_t n = s.n_tokens, n_out = s.n_outputs;
  std::vector<int32_t> host(size_t(3 * n + n_out + 2), 0);
  host[0] = int32_t(n);
  host[1] = int32_t(n_out);
  int32_t max_pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    host[size_t(2 + i)] = s.tokens ? s.tokens[i] : 0;
    host[size_t(2 + n + i)] = s.pos ? s.pos[i] : 0;
    host[size_t(2 + 2 * n + i)] = s.slot ? s.slot[i] : 0;
    if (s.pos) max_pos = std::max(max_pos, s.pos[i]);
  }
  for (int64_t i = 0; i < n_out; ++i) host[size_t(2 + 3 * n + i)] = s.outputs[i];

  std::lock_guard<std::mutex> lock(g_mu);
  StepCopy& c = step_copies()[queue];
  int device = 0;
  cudaGetDevice(&device);
  if (c.device == device && c.last == host) return c.view;
  auto stream = static_cast<cudaStream_t>(queue);
  if (c.device != device || host.size() > c.capacity) {
    // Earlier calls on this queue may still read the old copy.
    if (c.dev) {
      cudaStreamSynchronize(stream);
      int old = 0;
      cudaGetDevice(&old);
      cudaSetDevice(c.device);
      cudaFree(c.dev);
      cudaFreeHost(c.pinned);
      if (c.done) cudaEventDestroy(c.done);
      cudaSetDevice(old);
      c = StepCopy{};
    }
    c.device = device;
    c.capacity = std::max<size_t>(host.size(), 4096);
    cudaError_t e = cudaMalloc(&c.dev, c.capacity * sizeof(int32_t));
    if (e != cudaSuccess) die("the step's indices on the device", e);
    e = cudaMallocHost(&c.pinned, c.capacity * sizeof(int32_t));
    if (e != cudaSuccess) die("the step's pinned staging buffer", e);
    e = cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming);
    if (e != cudaSuccess) die("cudaEventCreate", e);
  } else {
    cudaEventSynchronize(c.done);  // the last copy out of `pinned` has finished
  }
  std::memcpy(c.pinned, host.data(), host.size() * sizeof(int32_t));
  cudaError_t e = cudaMemcpyAsync(c.dev, c.pinned, host.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) die("copying the step's indices to the device", e);
  cudaEventRecord(c.done, stream);
  c.last = std::move(host);
  c.view.tokens = c.dev + 2;
  c.view.pos = c.dev + 2 + n;
  c.view.slot = c.dev + 2 + 2 * n;
  c.view.outputs = c.dev + 2 + 3 * n;
  c.view.n_tokens = n;
  c.view.n_outputs = n_out;
  c.view.max_pos = max_pos;
  return c.view;
}

bool reserve_workspace(int device, uint64_t bytes, std::string* error, int queue) {
  std::lock_guard<std::mutex> lock(g_mu);
  Workspace& w = workspaces()[{device, queue}];
  if (bytes <= w.bytes) return true;
  bytes = (bytes + (1u << 20) - 1) & ~uint64_t((1u << 20) - 1);  // whole MiB: fewer regrowths
  int old = 0;
  cudaGetDevice(&old);
  cudaSetDevice(device);
  if (w.p) {
    cudaDeviceSynchronize();  // work issued earlier may still use it
    cudaFree(w.p);
    w = Workspace{};
  }
  const cudaError_t e = cudaMalloc(&w.p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total = 0;
    cudaMemGetInfo(&free_b, &total);
    *error = "cuda:" + std::to_string(device) + ": a kernel workspace of " + std::to_string(bytes) +
             " bytes: " + error_text(int(e)) + ", " + std::to_string(free_b) + " bytes free";
    w = Workspace{};
    cudaSetDevice(old);
    return false;
  }
  w.bytes = bytes;
  cudaSetDevice(old);
  return true;
}

void* workspace(int device, int queue) {
  std::lock_guard<std::mutex> lock(g_mu);
  return workspaces()[{device, queue}].p;
}

uint64_t workspace_bytes(int device, int queue) {
  std::lock_guard<std::mutex> lock(g_mu);
  return workspaces()[{device, queue}].bytes;
}

int sm_count(int device) {
  static std::map<int, int> cache;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) n = 1;
  cache[device] = n;
  return n;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KT_CUDA_PDL");
    return !(v && *v == '0');
  }();
  return on;
}

namespace {
std::atomic<bool>& stage_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("KT_CUDA_STAGE");
    return !(v && *v == '0');
  }()};
  return on;
}
}  // namespace

bool stage_enabled() { return stage_flag().load(std::memory_order_relaxed); }
void set_stage_enabled(bool on) { stage_flag().store(on, std::memory_order_relaxed); }

void check_launch(const char* what, void* queue) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) die(what, e);
  static const bool sync = [] {
    const char* v = std::getenv("KT_CUDA_SYNC");
    return v && *v && *v != '0';
  }();
  if (sync) {
    e = cudaStreamSynchronize(static_cast<cudaStream_t>(queue));
    if (e != cudaSuccess) die(what, e);
  }
}

}  // namespace kt::cuda
