// How CPU kernels spread work over the runtime's threads.
//  - for_each_item: items taken one at a time from a shared counter, so
//    uneven items (experts with more tokens, a slow core) balance themselves.
//  - worth_threads: whether a call is big enough that waking the pool pays
//    (tiny models and decode steps have calls of a few thousand MACs).
//  - Scratch: per-thread buffers reused across calls (calls run one at a time
//    on the executor's thread), 64-byte aligned for the vector kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>

#include "kernels/kernel.h"

namespace kt::kern {

// A call whose work (multiply-adds, or bytes) is below this runs on one thread.
constexpr int64_t kMinParallelWork = int64_t(1) << 16;

inline bool worth_threads(int64_t work) { return work >= kMinParallelWork; }

inline void for_each_item(Parallel& par, int64_t n, bool parallel, const std::function<void(int64_t, int)>& fn) {
  if (!parallel || n <= 1 || par.n_threads() == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  par.for_range(std::min<int64_t>(n, par.n_threads()), [&](int64_t, int64_t, int thread) {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i, thread);
  });
}

// Asks for bytes [p, p + n) to be brought into L2 without waiting for them. An
// item that is about to read a few KB of cold memory (a decoding token's
// weights and cache rows, another core's partial sums) issues all its misses
// at once this way rather than one dependent wait at a time.
inline void prefetch_l2(const void* p, uint64_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (uint64_t i = 0; i < n; i += 64) __builtin_prefetch(b + i, 0, 2);
}

// A growable 64-byte-aligned buffer. It grows to a quarter more than asked:
// sizes that follow the routing (an expert's tiles, a step's grouped rows)
// wander around their mean, and each growth maps fresh pages whose first
// touch faults (a 512-token V2-Lite MoE layer: 1800 faults, 0.9 of its 10 ms,
// in a call that had to grow its tiles' buffer by a few KB).
class Scratch {
 public:
  void* get(size_t bytes) {
    if (bytes > cap_) {
      cap_ = (bytes + bytes / 4 + 4095) & ~size_t(4095);
      p_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, cap_)));
    }
    return p_.get();
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> p_;
  size_t cap_ = 0;
};

// Scratch `slot` of the calling thread.
inline void* scratch(int slot, size_t bytes) {
  thread_local Scratch s[10];
  return s[slot].get(bytes);
}

}  // namespace kt::kern
