// kt-bench mla: DeepSeek's latent attention on the CPU (cpu.mla_attention_absorbed,
// the registry's kernel as a plan binds it) at real models' shapes with the
// weights a --mla-split file holds (k_b Q5_0, v_b Q4_K, as kt-gguf synth writes
// them) over an F16 latent cache: one decoding token at several context lengths
// and a 512-token prompt chunk. Per call: time, the bytes it must read (the
// cache rows it attends to, plus k_b and v_b once) as GB/s against the DRAM
// triad, and GFLOP/s (q_abs, scores, attended latents, W_V).
//
// CPU-only decode of V2-Lite spends ~4 ms a token here (README): this is the
// figure to move, and its ratio says whether bandwidth or something else binds.
// The prompt chunk also runs cpu.mla_attention with kv_b (Q4_K; the
// decompressed form, what a plan's prefill takes: K and V of every cached row
// made from the latents, then attention per head), its FLOPs counted as that
// form's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "runtime/thread_pool.h"
#include "tools/kt-bench/bench_weights.h"
#include "tools/kt-bench/machine_limits.h"

namespace kt::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct MlaShape {
  const char* name;
  int64_t H, dn, dr, dv, r;
};

const MlaShape kMlaShapes[] = {
    {"deepseek-v2-lite", 16, 128, 64, 128, 512},
    {"deepseek-v3", 128, 128, 64, 128, 512},
};

constexpr GgmlType kKb = GgmlType::Q5_0, kVb = GgmlType::Q4_K, kKvb = GgmlType::Q4_K, kCache = GgmlType::F16;

struct MlaResult {
  double seconds = 0;  // per call, best of the repetitions
  double bytes = 0;    // cache rows attended plus k_b and v_b
  double flops = 0;
};

// n tokens ending at position ctx - 1 of one sequence, over a cache of ctx rows;
// decompressed: cpu.mla_attention, else cpu.mla_attention_absorbed.
MlaResult time_mla(const MlaShape& s, ThreadPool& pool, int64_t ctx, int64_t n, int reps, bool decompressed) {
  SplitMix64 rng(5);
  const std::vector<uint8_t> kb = random_weight_bytes(kKb, s.dn, s.r, s.H, rng),
                             vb = random_weight_bytes(kVb, s.r, s.dv, s.H, rng);
  const std::vector<uint8_t> lat = random_weight_bytes(kCache, s.r, ctx, 1, rng),
                             pe = random_weight_bytes(kCache, s.dr, ctx, 1, rng);
  kern::KvView kv{kern::KvView::Kind::MlaLatent, kCache, 1, ctx, 1, s.r, s.dr,
                  const_cast<uint8_t*>(lat.data()), const_cast<uint8_t*>(pe.data())};
  kern::CallSpec spec;
  spec.kernel = decompressed ? "cpu.mla_attention" : "cpu.mla_attention_absorbed";
  // The decompressed fast path multiplies kv_b (given k_b and v_b, the kernel
  // of that name takes the absorbed path).
  const std::vector<uint8_t> kvb =
      decompressed ? random_weight_bytes(kKvb, s.r, s.H * (s.dn + s.dv), 1, rng) : std::vector<uint8_t>();
  if (decompressed)
    spec.weights = {weight_view(kvb, kKvb, s.r, s.H * (s.dn + s.dv), 1, "kv_b")};
  else
    spec.weights = {weight_view(kb, kKb, s.dn, s.r, s.H, "k_b"), weight_view(vb, kVb, s.r, s.dv, s.H, "v_b")};
  spec.kv = &kv;
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"n_heads", s.H}, {"d_nope", s.dn}, {"d_rope", s.dr},
                               {"d_v", s.dv}, {"kv_lora_rank", s.r}}) {
    kern::Param p;
    p.key = key;
    p.i = v;
    spec.params.push_back(p);
  }
  kern::Param scale;
  scale.key = "kq_scale";
  scale.f = 0.1;
  spec.params.push_back(scale);
  spec.in = {{GgmlType::F32, s.H * (s.dn + s.dr), n}};
  spec.out = {{GgmlType::F32, s.H * s.dv, n}};
  std::string error;
  auto k = kern::find_kernel(spec.kernel)->make(spec, &error);
  if (!k) {
    std::fprintf(stderr, "kt-bench mla: %s\n", error.c_str());
    std::exit(1);
  }
  std::vector<float> q(size_t(n * s.H * (s.dn + s.dr))), y(size_t(n * s.H * s.dv));
  for (float& v : q) v = 2 * float(rng.uniform()) - 1;
  std::vector<int32_t> pos(static_cast<size_t>(n)), slot(static_cast<size_t>(n), 0), tok(static_cast<size_t>(n), 0);
  for (int64_t t = 0; t < n; ++t) pos[size_t(t)] = int32_t(ctx - n + t);
  kern::Step step{n, tok.data(), pos.data(), slot.data(), 0, nullptr};
  kern::Act in[1] = {{q.data(), GgmlType::F32, s.H * (s.dn + s.dr), n, n}};
  kern::Act out[1] = {{y.data(), GgmlType::F32, s.H * s.dv, n, n}};
  kern::CallArgs a;
  a.in = in;
  a.out = out;
  a.weights = spec.weights;
  a.kv = &kv;
  a.step = &step;
  a.par = &pool;
  double best = 1e30;
  for (int rep = 0; rep < reps + 1; ++rep) {
    const auto t0 = Clock::now();
    k->run(a);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep > 0) best = std::min(best, dt);  // the first call pages everything in
  }
  MlaResult res;
  res.seconds = best;
  double attended = 0;  // (token, cached row) pairs
  for (int64_t t = 0; t < n; ++t) attended += double(pos[size_t(t)] + 1);
  const double row_bytes = double(s.r + s.dr) * double(type_traits(kCache).type_size);
  res.bytes = double(ctx) * row_bytes + double(decompressed ? kvb.size() : kb.size() + vb.size());
  if (decompressed)
    res.flops = 2.0 * double(ctx) * double(s.H) * double(s.r) * double(s.dn + s.dv) +  // K_nope and V
                2.0 * attended * double(s.H) * double(s.dn + s.dr + s.dv);            // scores, P V
  else
    res.flops = 2.0 * double(n) * double(s.H) * double(s.r) * double(s.dn + s.dv) +  // q_abs, W_V
                2.0 * attended * double(s.H) * double(s.r + s.dr + s.r);            // scores, attended latents
  return res;
}

}  // namespace

int run_mla_bench(int argc, char** argv) {
  std::string only;
  int threads = 0;
  bool quick = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) only = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr, "usage: kt-bench mla [--model deepseek-v2-lite|deepseek-v3] [--threads N] [--quick]\n");
      return 2;
    }
  }
  ThreadPool pool(threads);
  const TriadResult triad = measure_triad(uint64_t(quick ? 1 : 3) << 30, pool.n_threads(), 3);
  std::printf("cpu: %s, %d threads; DRAM triad %.1f GB/s; k_b %s, v_b %s, cache %s\n", cpu_description().c_str(),
              pool.n_threads(), triad.gbps, std::string(type_name(kKb)).c_str(), std::string(type_name(kVb)).c_str(),
              std::string(type_name(kCache)).c_str());
  std::printf("%-18s %8s %8s %10s %10s %10s %10s\n", "model", "context", "tokens", "us", "GB/s", "of triad",
              "GFLOP/s");
  // Rows: absorbed; "512d": the same prompt chunk decompressed.
  nlohmann::json j = {{"triad_gbps", triad.gbps}, {"threads", pool.n_threads()}, {"mla", nlohmann::json::array()}};
  for (const MlaShape& s : kMlaShapes) {
    if (!only.empty() && only != s.name) continue;
    struct Run {
      int64_t ctx, n;
      bool decompressed;
    };
    for (const Run r : {Run{576, 1, false}, Run{2048, 1, false}, Run{4096, 1, false}, Run{512, 512, false},
                        Run{512, 512, true}}) {
      if (quick && (r.ctx > 2048 || r.n > 1)) continue;
      const MlaResult m = time_mla(s, pool, r.ctx, r.n, r.n == 1 ? 50 : 3, r.decompressed);
      const double gbps = m.bytes / m.seconds / 1e9;
      // A prompt chunk is compute: its bytes are read once for 512 tokens.
      char bw[32] = "-", ratio[32] = "-";
      if (r.n == 1) {
        std::snprintf(bw, sizeof bw, "%.1f", gbps);
        std::snprintf(ratio, sizeof ratio, "%.0f%%", 100.0 * gbps / triad.gbps);
      }
      std::printf("%-18s %8lld %7lld%s %10.1f %10s %10s %10.1f\n", s.name, (long long)r.ctx, (long long)r.n,
                  r.decompressed ? "d" : " ", m.seconds * 1e6, bw, ratio, m.flops / m.seconds / 1e9);
      j["mla"].push_back({{"model", s.name}, {"context", r.ctx}, {"tokens", r.n}, {"decompressed", r.decompressed},
                          {"us", m.seconds * 1e6}, {"gbps", gbps}, {"gflops", m.flops / m.seconds / 1e9}});
    }
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace kt::bench
