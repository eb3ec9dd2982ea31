// How CPU kernels spread work over the runtime's threads.
//  - for_each_item: items taken one at a time from a shared counter, so
//    uneven items (experts with more tokens, a slow core) balance themselves.
//  - for_each_item_by_range: a contiguous range of items a thread, the
//    ranges' ends taken by threads done with their own (neighbouring items
//    that share inputs stay on one core).
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

// Items in one contiguous range per thread, each thread taking its own range
// front to back and then, done with it, the others' from their back ends. For
// items that share inputs with their neighbours (a MoE operator's blocks of
// rows of one expert read that expert's activation tiles): a thread keeps
// reading what is already in its cache, and the same split over the experts
// in a phase before (for_each_item_by_range over experts or their rows) put
// each expert's inputs in the cache of the thread that then reads them. Taken
// one at a time from a shared counter (for_each_item), consecutive items went
// to different threads, and each fetched its expert's tiles from another
// core's cache: as many bytes as its weights at 512 tokens.
inline void for_each_item_by_range(Parallel& par, int64_t n, bool parallel,
                                   const std::function<void(int64_t, int)>& fn) {
  const int64_t t = std::min<int64_t>(n, par.n_threads());
  // One thread (for_each_item runs them in order), or ranges past 32-bit ends.
  if (!parallel || t <= 1 || n >= (int64_t(1) << 32)) return for_each_item(par, n, parallel, fn);
  // Range r's items not yet taken: [front, back) packed in one word (front in
  // the high half), so an owner taking the front and a thief taking the back
  // never both take the last one.
  struct alignas(64) Range {
    std::atomic<uint64_t> left;
  };
  std::unique_ptr<Range[]> ranges(new Range[size_t(t)]);
  auto bound = [&](int64_t r) { return uint64_t(n * r / t); };
  for (int64_t r = 0; r < t; ++r) ranges[size_t(r)].left.store(bound(r) << 32 | bound(r + 1));
  // Takes one item of range r from its front (or back); -1 when it is empty.
  auto take = [&](int64_t r, bool front) -> int64_t {
    std::atomic<uint64_t>& w = ranges[size_t(r)].left;
    for (uint64_t v = w.load(std::memory_order_relaxed);;) {
      const uint64_t f = v >> 32, b = v & 0xffffffffu;
      if (f >= b) return -1;
      const uint64_t next = front ? (f + 1) << 32 | b : f << 32 | (b - 1);
      if (w.compare_exchange_weak(v, next, std::memory_order_relaxed)) return int64_t(front ? f : b - 1);
    }
  };
  par.for_range(t, [&](int64_t r, int64_t, int thread) {
    for (int64_t i; (i = take(r, true)) >= 0;) fn(i, thread);
    for (int64_t k = 1; k < t; ++k)
      for (int64_t i; (i = take((r + k) % t, false)) >= 0;) fn(i, thread);
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
  thread_local Scratch s[12];
  return s[slot].get(bytes);
}

}  // namespace kt::kern
