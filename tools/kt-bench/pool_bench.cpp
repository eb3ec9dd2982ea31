// kt-bench pool: what one parallel pass of the runtime's thread pool costs,
// apart from its work. A CPU-only decode token runs ~250 such passes (every
// parallel kernel call, and the MLA kernel's four), so microseconds a pass
// are milliseconds a token. Per pass, the median over many:
//   - empty: for_range over the threads with nothing to do (the fork, each
//     worker noticing the job, the join);
//   - items: kern::for_each_item over 32 items of ~0.5 us of arithmetic
//     (what a short pass such as the MLA merge looks like);
//   - after a gap: the same, with ~50 us of the caller's own work before each
//     pass (a reference kernel between two parallel calls).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/work_split.h"
#include "runtime/thread_pool.h"

namespace kt::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Busy arithmetic the compiler cannot drop, about `us` microseconds of it.
double spin_work(int64_t iters) {
  volatile double x = 1.0;
  for (int64_t i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

// The median time of pass() over reps runs, each after an untimed before().
template <class Fn, class Before = void (*)()>
double median_us(int reps, Fn&& pass, Before&& before = [] {}) {
  std::vector<double> t;
  t.reserve(size_t(reps));
  for (int i = 0; i < reps; ++i) {
    before();
    const auto t0 = Clock::now();
    pass();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[size_t(reps / 2)];
}

}  // namespace

int run_pool_bench(int argc, char** argv) {
  int threads = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: kt-bench pool [--threads N]\n");
      return 2;
    }
  }
  ThreadPool pool(threads);
  // Calibrate ~0.5 us of work an item and ~50 us for the caller's gap.
  const auto c0 = Clock::now();
  spin_work(1 << 20);
  const double ns_per_iter = std::chrono::duration<double, std::nano>(Clock::now() - c0).count() / double(1 << 20);
  const int64_t item_iters = std::max<int64_t>(1, int64_t(500.0 / ns_per_iter));
  const int64_t gap_iters = std::max<int64_t>(1, int64_t(50000.0 / ns_per_iter));
  const int reps = 20000;
  const double empty = median_us(reps, [&] { pool.for_range(pool.n_threads(), [](int64_t, int64_t, int) {}); });
  auto items = [&] { kern::for_each_item(pool, 32, true, [&](int64_t, int) { spin_work(item_iters); }); };
  const double one_thread = median_us(200, [&] {
    for (int i = 0; i < 32; ++i) spin_work(item_iters);
  });
  const double busy = median_us(reps, items);
  const double after_gap = median_us(2000, items, [&] { spin_work(gap_iters); });
  std::printf("threads %d: empty pass %.2f us; 32 items of ~0.5 us: %.2f us (one thread alone %.2f); "
              "the same after ~50 us of the caller's own work: %.2f us\n",
              pool.n_threads(), empty, busy, one_thread, after_gap);
  std::printf("%s\n", nlohmann::json{{"threads", pool.n_threads()},
                                     {"empty_pass_us", empty},
                                     {"items_pass_us", busy},
                                     {"items_one_thread_us", one_thread},
                                     {"items_after_gap_us", after_gap}}
                          .dump()
                          .c_str());
  return 0;
}

}  // namespace kt::bench
