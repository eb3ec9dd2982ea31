// Decode's GPU work as recorded work (CUDA graphs): runs of GPU calls
// recorded once and replayed (run_recorded), or, for a hybrid plan, the whole
// step as one recording gated by host flags (run_gated).
#include <immintrin.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/executor_impl.h"

namespace kt {

Status Executor::Impl::step_key(DeviceState& dev, const kern::Step& step, std::vector<uint64_t>* key) {
  std::string e;
  const uint64_t token = dev.api->prepare_step(dev.queue, step, &e);
  if (!token) return err(plan.path(), ": ", e);
  key->insert(key->end(), {uint64_t(step.n_tokens), uint64_t(step.n_outputs), token});
  return ok_status();
}

Recording& Executor::Impl::keep_recording(BoundPhase& ph, std::vector<Recording>& list, std::vector<uint64_t> key,
                                          void* graph, DeviceState& dev, std::chrono::steady_clock::time_point t0) {
  list.push_back(Recording{std::move(key), graph, dev.api, 0});
  ++recordings_made;
  if (profiling) account(ph.name + " (recording cuda graphs)", t0);
  return list.back();
}

Status Executor::Impl::launch_recording(BoundPhase& ph, Recording& rec, DeviceState& dev) {
  rec.last_used = recorded_steps;
  const auto t0 = std::chrono::steady_clock::now();
  std::string e;
  if (!dev.api->launch_graph(rec.graph, dev.queue, &e)) return err(plan.path(), ": ", e);
  if (profiling) account(ph.name + " (cuda graph launches)", t0);
  return ok_status();
}

size_t Executor::Impl::recordable_end(BoundPhase& ph, size_t i, const kern::Step& step) {
  const int device = ph.calls[i].device;
  if (!devices[size_t(device)]->api) return i + 1;
  size_t j = i;
  while (j < ph.calls.size()) {
    BoundCall& c = ph.calls[j];
    if (c.device != device || !c.kernel->capturable(args_for(c, step))) break;
    ++j;
    // A CPU call will wait for the downloads: the recording ends after them,
    // so the GPU work after them (the shared experts beside the CPU's) is
    // another recording, launched before the CPU call and not waited for.
    if (c.transfer == kern::Kernel::Transfer::Download &&
        (j == ph.calls.size() || ph.calls[j].transfer != kern::Kernel::Transfer::Download))
      break;
  }
  return std::max(j, i + 1);
}

Status Executor::Impl::run_recorded(BoundPhase& ph, size_t i, size_t j, const kern::Step& step) {
  DeviceState& dev = *devices[size_t(ph.calls[i].device)];
  const auto t0 = std::chrono::steady_clock::now();
  std::string e;
  std::vector<uint64_t> key = {i, j};
  KT_TRY(step_key(dev, step, &key));
  for (size_t k = i; k < j; ++k) key.push_back(ph.calls[k].kernel->graph_key(args_for(ph.calls[k], step)));
  Recording* rec = nullptr;
  size_t same_start = 0;
  for (Recording& r : ph.recordings) {
    if (r.key == key) rec = &r;
    if (r.key[0] == i) ++same_start;
  }
  if (!rec) {
    // Positions moved attention to another split, or a new batch shape: record
    // anew. A few recordings per run stay (batch sizes a server alternates).
    constexpr size_t kKeep = 8;
    if (same_start >= kKeep) {
      auto lru = ph.recordings.end();
      for (auto it = ph.recordings.begin(); it != ph.recordings.end(); ++it)
        if (it->key[0] == i && (lru == ph.recordings.end() || it->last_used < lru->last_used)) lru = it;
      lru->release();
      ph.recordings.erase(lru);
    }
    if (!dev.api->begin_capture(dev.queue, &e)) {
      recording_off = true;  // off for this executor: the calls run one by one
      for (size_t k = i; k < j; ++k) KT_TRY(run_call(ph, ph.calls[k], step));
      return ok_status();
    }
    for (size_t k = i; k < j; ++k) ph.calls[k].kernel->run(args_for(ph.calls[k], step));
    void* graph = dev.api->end_capture(dev.queue, &e);
    if (!graph) {
      // Recorded, not run: run the calls one by one, and from now on.
      std::fprintf(stderr, "kt: %s: cuda graphs off: %s\n", plan.path().c_str(), e.c_str());
      recording_off = true;
      for (size_t k = i; k < j; ++k) KT_TRY(run_call(ph, ph.calls[k], step));
      return ok_status();
    }
    rec = &keep_recording(ph, ph.recordings, std::move(key), graph, dev, t0);
  } else if (profiling) {
    account(ph.name + " (host: the recorded calls' keys)", t0);
  }
  KT_TRY(launch_recording(ph, *rec, dev));
  // The copies' events, after the recording: it ends with its downloads.
  for (size_t k = i; k < j; ++k) KT_TRY(after_transfer(ph.calls[k], dev));
  return ok_status();
}

namespace {

// The gates of a phase: where the queue waits for a CPU call and where it
// tells the host that its copies landed. A CPU call's "done" gates the first
// GPU call after it (the GPU work after a CPU call is issued, today, only once
// it ran: gating it keeps that order); a run of transfers (downloads, and
// uploads whose host bytes a later CPU call may write) ends in a "landed"
// flag, written before the GPU work that follows it, and every CPU call waits
// for the landed flags since the previous CPU call. The shared experts the
// plan puts after the downloads so run beside the CPU's experts.
template <class OnGpu>
void plan_gates(BoundPhase& ph, OnGpu on_gpu) {
  BoundPhase::Gates& g = ph.gates;
  const size_t n = ph.calls.size();
  g.wait_before.assign(n, -1);
  g.write_after.assign(n, -1);
  g.done_of.assign(n, -1);
  g.cpu_waits.assign(n, {});
  int ids = 0, ungated = -1, last_transfer = -1;
  std::vector<int> landed;
  auto close_transfers = [&] {
    if (last_transfer < 0) return;
    g.write_after[size_t(last_transfer)] = ids;
    landed.push_back(ids++);
    last_transfer = -1;
  };
  for (size_t k = 0; k < n; ++k) {
    const BoundCall& c = ph.calls[k];
    if (!on_gpu(c)) {
      close_transfers();
      g.cpu_waits[k] = std::move(landed);
      landed.clear();
      ungated = int(k);
      continue;
    }
    if (!is_host_copy(c)) close_transfers();
    if (ungated >= 0) {
      g.done_of[size_t(ungated)] = ids;
      g.wait_before[k] = ids++;
      ungated = -1;
    }
    if (is_host_copy(c)) last_transfer = int(k);
  }
  g.n_flags = ids;
  g.built = true;
}

// The host's side of a flag: spin on the word the GPU writes (PCIe writes
// reach it in order after the copies they follow), then clear it. False when
// it has not come within `limit` (a GPU that stopped: an error, not a hang).
bool await_flag(uint32_t* f, std::chrono::seconds limit) {
  if (__atomic_load_n(f, __ATOMIC_ACQUIRE) != 1) {
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t spins = 1; __atomic_load_n(f, __ATOMIC_ACQUIRE) != 1; ++spins) {
      _mm_pause();
      if (spins % (1 << 20) == 0 && std::chrono::steady_clock::now() - start > limit) return false;
    }
  }
  __atomic_store_n(f, 0, __ATOMIC_RELAXED);
  return true;
}

}  // namespace

int Executor::Impl::gated_device(BoundPhase& ph, const kern::Step& step) {
  static const bool env_off = [] {
    const char* v = std::getenv("KT_GATED");  // KT_GATED=0: hybrid decode as before (for comparisons)
    return v && *v == '0';
  }();
  // A hook that watches or changes routes on the host breaks the step at every
  // router; one whose draws the GPU makes itself does not.
  if (env_off || gating_off || (routing && !routing->device_uniform_seed())) return -1;
  int device = -1;
  bool any_cpu = false;
  for (BoundCall& c : ph.calls) {
    if (!devices[size_t(c.device)]->api) {
      any_cpu = true;
      continue;
    }
    if (device >= 0 && c.device != device) return -1;  // one GPU only
    device = c.device;
    if (c.transfer == kern::Kernel::Transfer::Peer || !c.kernel->capturable(args_for(c, step))) return -1;
  }
  return any_cpu ? device : -1;  // all on the GPU: run_recorded records it whole already
}

Status Executor::Impl::run_gated(BoundPhase& ph, int device, const kern::Step& step, bool* ran) {
  *ran = false;
  DeviceState& dev = *devices[size_t(device)];
  std::string e;
  auto on_gpu = [&](const BoundCall& c) { return devices[size_t(c.device)]->api != nullptr; };
  // KT_COPY_FLAGS=0: the flags as kernels of their own around the copies (for comparisons).
  static const bool flag_kernels = [] {
    const char* v = std::getenv("KT_COPY_FLAGS");
    return v && *v == '0';
  }();
  if (!ph.gates.built) {
    plan_gates(ph, on_gpu);
    if (dev.n_flags < ph.gates.n_flags) {
      dev.api->free_flags(dev.flags);
      dev.n_flags = 0;
      dev.flags = dev.api->alloc_flags(dev.index, ph.gates.n_flags, &e);
      if (!dev.flags) {
        gating_off = true;  // this device cannot: the step runs as before
        std::fprintf(stderr, "kt: %s: gated decode off: %s\n", plan.path().c_str(), e.c_str());
        return ok_status();
      }
      dev.n_flags = ph.gates.n_flags;
    }
  }
  const BoundPhase::Gates& g = ph.gates;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<uint64_t> key;
  KT_TRY(step_key(dev, step, &key));
  for (BoundCall& c : ph.calls)
    if (on_gpu(c)) key.push_back(c.kernel->graph_key(args_for(c, step)));
  Recording* rec = nullptr;
  for (Recording& r : ph.gated)
    if (r.key == key) rec = &r;
  if (!rec) {
    constexpr size_t kKeep = 8;
    if (ph.gated.size() >= kKeep) {
      auto lru = std::min_element(ph.gated.begin(), ph.gated.end(),
                                  [](const Recording& a, const Recording& b) { return a.last_used < b.last_used; });
      lru->release();
      ph.gated.erase(lru);
    }
    if (!dev.api->begin_capture(dev.queue, &e)) {
      gating_off = true;
      return ok_status();
    }
    bool ok = true;
    for (size_t k = 0; k < ph.calls.size() && ok; ++k) {
      BoundCall& c = ph.calls[k];
      if (!on_gpu(c)) continue;
      // A copy that takes the flags waits and signals inside its own kernel.
      kern::CallArgs a = args_for(c, step);
      uint32_t* await = g.wait_before[k] >= 0 ? dev.flags + g.wait_before[k] : nullptr;
      uint32_t* signal = g.write_after[k] >= 0 ? dev.flags + g.write_after[k] : nullptr;
      const bool own = c.kernel->takes_flags() && !flag_kernels;
      if (own) a.await_flag = await, a.signal_flag = signal;
      if (await && !own) ok = dev.api->wait_flag(dev.queue, await, 1, &e);
      if (ok) c.kernel->run(a);
      if (ok && signal && !own) ok = dev.api->write_flag(dev.queue, signal, 1, &e);
    }
    std::string e2;
    void* graph = dev.api->end_capture(dev.queue, &e2);
    if (!ok || !graph) {
      if (graph) dev.api->release_graph(graph);
      gating_off = true;  // recorded, not run: the step runs as before, and from now on
      std::fprintf(stderr, "kt: %s: gated decode off: %s\n", plan.path().c_str(), (ok ? e2 : e).c_str());
      return ok_status();
    }
    rec = &keep_recording(ph, ph.gated, std::move(key), graph, dev, t0);
  }
  KT_TRY(launch_recording(ph, *rec, dev));
  // The CPU calls, in order, each once the copies it reads have landed; its
  // "done" lets the GPU work waiting for it go.
  for (size_t k = 0; k < ph.calls.size(); ++k) {
    BoundCall& c = ph.calls[k];
    if (on_gpu(c)) continue;
    const auto tw = std::chrono::steady_clock::now();
    for (int f : g.cpu_waits[k])
      if (!await_flag(dev.flags + f, std::chrono::seconds(60))) {
        gating_off = true;
        return err(plan.path(), ": ", dev.name, " did not finish the copies ", c.name,
                   " reads within 60 s (gated decode; KT_GATED=0 runs without it)");
      }
    if (profiling && !g.cpu_waits[k].empty()) account(ph.name + " (host waits for GPU flags)", tw);
    const kern::CallArgs a = args_for(c, step);
    const auto tc = std::chrono::steady_clock::now();
    c.kernel->run(a);
    if (profiling) account(ph.name + " " + std::string(c.name) + " (" + std::string(c.kernel->impl()) + ")", tc);
    if (g.done_of[k] >= 0) __atomic_store_n(dev.flags + g.done_of[k], 1u, __ATOMIC_RELEASE);
  }
  *ran = true;
  return ok_status();
}

}  // namespace kt
