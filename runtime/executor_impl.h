// Internal to the executor (executor.cpp, executor_recorded.cpp): the plan as
// bound to kernels, devices and buffers. Nothing outside runtime/executor*.cpp
// includes this.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/device.h"
#include "runtime/executor.h"
#include "runtime/thread_pool.h"

namespace kt {
namespace exec {


// Anonymous memory from the OS: page-aligned, zero-filled lazily, and a clear
// error instead of a crash when the machine cannot provide it.
class HostMemory {
 public:
  HostMemory() = default;
  HostMemory(HostMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  HostMemory& operator=(HostMemory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~HostMemory() {
    if (p_) munmap(p_, n_);
  }
  static Result<HostMemory> allocate(uint64_t bytes, const std::string& what,
                                     const std::string& hint = " (lower --ctx or --parallel)") {
    HostMemory m;
    if (bytes == 0) return m;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return err("cannot allocate ", bytes >> 20, " MiB for ", what, ": out of memory", hint);
    m.p_ = p;
    m.n_ = bytes;
    return m;
  }
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }

 private:
  void* p_ = nullptr;
  uint64_t n_ = 0;
};

struct BoundCall {
  std::unique_ptr<kern::Kernel> kernel;
  std::string_view name;
  std::vector<int> in, out;
  std::vector<kern::Act> in_acts, out_acts;  // refreshed from the buffers every step
  std::vector<kern::WeightView> weights;
  int kv = -1;
  int layer = -1;
  int device = 0;
  kern::Kernel::Transfer transfer = kern::Kernel::Transfer::None;
};

// A copy between host and GPU memory: CPU calls wait for its event.
inline bool is_host_copy(const BoundCall& c) {
  return c.transfer == kern::Kernel::Transfer::Upload || c.transfer == kern::Kernel::Transfer::Download;
}

// Work recorded from a run of a phase's GPU calls (DeviceApi graphs), replayed
// while the run's key is unchanged: [first call, end, tokens, outputs, the
// device's prepare_step token, each call's graph_key].
struct Recording {
  std::vector<uint64_t> key;
  void* graph = nullptr;
  kern::DeviceApi* api = nullptr;
  uint64_t last_used = 0;

  void release() { api->release_graph(graph); }
};

struct BoundPhase {
  std::string name;
  int64_t max_tokens = 0;
  int64_t min_tokens = 0;  // a prefill variant's fewest tokens per step
  int logits = -1;
  std::vector<BoundCall> calls;
  std::vector<Recording> recordings;
  // Decode as one recording gated by host flags (executor_recorded.cpp):
  // per call, the flag the queue waits for before a GPU call (a CPU call's
  // "done"), the flag it writes after a GPU call (transfers "landed"), and
  // the flags a CPU call waits for; -1 where none. Built once per phase.
  struct Gates {
    bool built = false;
    int n_flags = 0;
    std::vector<int> wait_before, write_after, done_of;
    std::vector<std::vector<int>> cpu_waits;
  } gates;
  std::vector<Recording> gated;  // its recordings, keyed like run_recorded's
};

// A plan device as the runtime holds it: the CPU (api null) or a GPU through
// its DeviceApi, with its queue and the device memory it owns.
struct DeviceState {
  std::string name;  // "cpu", "cuda:0"
  kern::DeviceApi* api = nullptr;
  int index = 0;
  void* queue = nullptr;
  std::vector<void*> owned;  // device allocations, freed at unload
  uint8_t* arena = nullptr;  // activation arena (host or device memory)
  HostMemory host_arena;
  kern::DeviceApi* pinned_by = nullptr;  // the GPU API that pinned host_arena

  uint32_t* flags = nullptr;  // host flags of gated decode (DeviceApi::alloc_flags)
  int n_flags = 0;

  ~DeviceState() {
    if (pinned_by) pinned_by->unpin(arena);
    if (!api) return;
    std::string e;
    if (queue) {
      (void)api->sync(queue, &e);
      api->destroy_queue(index, queue);
    }
    api->free_flags(flags);
    for (void* p : owned) api->free(index, p);
  }
};

// Host bytes an asynchronous copy will still read or write: CPU calls touching
// them wait for its event first.
struct PendingCopy {
  // The host bytes of each buffer the copy call carries: [begin, end).
  std::vector<std::pair<const uint8_t*, const uint8_t*>> host;
  bool writes;  // a download (host bytes written) rather than an upload (read)
  kern::DeviceApi* api;
  void* event;
};

}  // namespace exec

using exec::BoundCall;
using exec::BoundPhase;
using exec::DeviceState;
using exec::HostMemory;
using exec::PendingCopy;
using exec::Recording;
using exec::is_host_copy;

struct Executor::Impl {
  Impl(PlanFile p, GgufFile g, ExecOptions o) : plan(std::move(p)), gguf(std::move(g)), options(o) {}
  ~Impl() {
    std::string e;
    for (PendingCopy& c : pending) c.api->release_event(c.event);
    for (TimedCall& t : timed) {  // a step that failed before settle_timed()
      t.api->release_event(t.from);
      t.api->release_event(t.to);
    }
    for (BoundPhase& ph : phases) {
      for (Recording& r : ph.recordings) r.release();
      for (Recording& r : ph.gated) r.release();
    }
  }
  PlanFile plan;
  GgufFile gguf;
  ExecOptions options;
  std::unique_ptr<ThreadPool> pool;
  int64_t n_ctx = 0;
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::vector<kern::WeightView> weights;
  std::vector<std::vector<uint8_t>> host_copies;  // CPU weights holding a subset of a tensor's matrices
  std::vector<HostMemory> host_repacked;           // CPU weights repacked (layout "int8" or "int4")
  std::vector<kern::Act> buffers;
  std::vector<plan::RowKind> row_kinds;
  std::vector<HostMemory> kv_memory;
  std::vector<kern::KvView> kvs;
  std::vector<int64_t> filled;  // per slot: positions whose cache rows are valid
  std::vector<BoundPhase> phases;
  int prefill = -1, decode = -1;  // indices into phases
  // Prefill variants ("prefill.long": min_tokens > 0), fewest tokens first;
  // a step of n tokens runs the last whose min_tokens <= n, else `prefill`.
  std::vector<int> prefill_variants;
  BoundPhase& phase_for(PhaseKind kind, int64_t n_tokens) {
    if (kind == PhaseKind::Decode) return phases[size_t(decode)];
    for (auto it = prefill_variants.rbegin(); it != prefill_variants.rend(); ++it)
      if (phases[size_t(*it)].min_tokens <= n_tokens) return phases[size_t(*it)];
    return phases[size_t(prefill)];
  }
  kern::RoutingHook* routing = nullptr;
  std::vector<int> buffer_device;  // per buffer
  std::vector<int> kv_device;      // per KV cache
  std::vector<PendingCopy> pending;
  bool profiling = false;
  struct KernelTime {
    double seconds = 0;
    uint64_t calls = 0;
  };
  std::map<std::string, KernelTime> profile;  // "phase kernel (impl)"
  // Profiling GPU calls run one by one: events around each, read at the
  // step's end into rows "... [gpu]" (the GPU's own time, no launch or wait).
  struct TimedCall {
    std::string row;
    kern::DeviceApi* api;
    void* from;
    void* to;
  };
  std::vector<TimedCall> timed;
  void settle_timed();

  Status open_devices();
  // Maps in, before the first step, every page of the weights the CPU reads:
  // a decode step must not stop on page faults (they cost as much as the
  // reads: measured 2x slower first steps on a 10 GB model).
  void populate_cpu_weights();
  Status check_device_memory() const;
  Status bind_weights();
  // `to`: WeightLayout::Int8 or Int4 (the plan's layout "int8" or "int4").
  Status repack_weight(const std::string& name, const DeviceState& dev, kern::WeightLayout to, kern::WeightView& v);
  Status allocate();
  Status bind_calls();
  Status check_batch(const Batch& b, const BoundPhase& ph) const;
  // Waits for the copies still touching host bytes a CPU call reads or writes.
  Status settle_host(const BoundCall& c, bool all);
  uint64_t buffer_bytes(int b) const;

  // One call's arguments for this step (its activation views refreshed).
  kern::CallArgs args_for(BoundCall& c, const kern::Step& step);
  Status run_call(BoundPhase& ph, BoundCall& c, const kern::Step& step);
  // A copy's event for CPU calls to wait on.
  Status after_transfer(const BoundCall& c, DeviceState& dev);
  void account(const std::string& row, std::chrono::steady_clock::time_point t0);
  // Decode's GPU calls run as recorded work: the end of the run of calls
  // from `i` that can be recorded together (i + 1 when none can), and the run
  // [i, j) recorded or replayed.
  size_t recordable_end(BoundPhase& ph, size_t i, const kern::Step& step);
  Status run_recorded(BoundPhase& ph, size_t i, size_t j, const kern::Step& step);
  // Shared by both: the step's part of a recording's key (prepare_step's token
  // and the step's shape) appended to *key; a new recording kept in `list`;
  // a recording launched.
  Status step_key(DeviceState& dev, const kern::Step& step, std::vector<uint64_t>* key);
  Recording& keep_recording(BoundPhase& ph, std::vector<Recording>& list, std::vector<uint64_t> key, void* graph,
                            DeviceState& dev, std::chrono::steady_clock::time_point t0);
  Status launch_recording(BoundPhase& ph, Recording& rec, DeviceState& dev);
  // Hybrid decode as one recording: every GPU call of the phase in one graph,
  // the points where the GPU must wait for a CPU call (and the CPU for the
  // GPU's copies) as host flags, so no GPU work waits on the host issuing it.
  // gated_device: the one GPU the phase uses when gating can run this step
  // (every GPU call recordable, no routing hook but one the GPU draws for), else -1.
  int gated_device(BoundPhase& ph, const kern::Step& step);
  Status run_gated(BoundPhase& ph, int device, const kern::Step& step, bool* ran);
  bool gating_off = false;
  bool recording_off = false;
  uint64_t recorded_steps = 0;
  size_t recordings_made = 0;
  bool any_gpu() const {
    return std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d->api != nullptr; });
  }
};

}  // namespace kt
