// kt-bench moe: one MoE layer of a real model's shape (random valid blocks),
// run through the registry's cpu.moe_experts as a plan runs it: decode (one
// token, experts chosen at random, so each step reads new experts) in GB/s of
// expert weights against the DRAM triad, and prefill (128, 512, 2048 tokens) in
// TFLOP/s against oneDNN's BF16 GEMM on the same shapes. --routing draws the
// experts uniformly (default), Zipf-skewed or as a routing profile says.
// --int8 / --int4 repack the experts to int8 / int4 first, as a plan with
// KTransformers' AMXInt8 / AMXInt4 has the runtime do (kernels/cpu/matmul_i8.h);
// GB/s then counts the repacked bytes.
// A model's decode step reads each layer's experts once, so little of a layer
// is still in the last-level cache when the next step reaches it. One layer
// called again and again would be served partly from that cache (V2-Lite's
// int4 layer is 294 MB, the device Xeon's L3 300 MB: the one-token row read
// above the triad), so the calls rotate over copies of the layer holding four
// times the L3 together, as a model's layers would.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/matmul_i8.h"
#include "kernels/kernel.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "runtime/routing_hooks.h"
#include "runtime/thread_pool.h"
#include "tools/kt-bench/bench_weights.h"
#include "tools/kt-bench/machine_limits.h"

namespace kt::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int64_t n_embd, n_ff, n_expert, n_used;
  GgmlType gate_up, down;  // llama.cpp's Q4_K_M choice for these widths
};

// Q4_K_M: Q4_K gate/up; down Q6_K in "more bits" layers, else Q4_K; rows not a
// multiple of 256 fall back to Q5_0 (for Q4_K) and Q8_0 (for Q6_K).
const Shape kShapes[] = {
    {"deepseek-v2-lite", 2048, 1408, 64, 6, GgmlType::Q4_K, GgmlType::Q5_0},
    {"deepseek-v3", 7168, 2048, 256, 8, GgmlType::Q4_K, GgmlType::Q4_K},
    {"qwen2-57b-a14b", 3584, 2560, 64, 8, GgmlType::Q4_K, GgmlType::Q4_K},
    {"mixtral-8x7b", 4096, 14336, 8, 2, GgmlType::Q4_K, GgmlType::Q4_K},
};

struct Layer {
  std::vector<uint8_t> gate, up, down;
  kern::WeightView w[3];
  std::vector<uint8_t> i8[3];  // --int8 / --int4: the repacked matrices (64-byte aligned within)
};

// The bytes of a repacked matrix's buffer past its alignment slack.
uint64_t repacked_bytes(const std::vector<uint8_t>& b) { return b.size() - 64; }
uint8_t* aligned64(std::vector<uint8_t>& b) {
  return b.data() + (64 - reinterpret_cast<uintptr_t>(b.data()) % 64) % 64;
}

// Repacks the three weights as the runtime does for a plan's "int8" or "int4"
// layout; returns the seconds it took.
double repack_layer(Layer& L, int threads, cpu::WeightBits bits) {
  const auto t0 = Clock::now();
  for (int k = 0; k < 3; ++k) {
    kern::WeightView& v = L.w[k];
    L.i8[k].resize(cpu::i8_matrix_bytes(v.ne[0], v.ne[1], bits) * size_t(v.ne[2]) + 64);
    uint8_t* p = aligned64(L.i8[k]);
    cpu::repack_i8_matrices(v.type, v.data, v.nb[1], v.nb[2], v.ne[0], v.ne[1], v.ne[2], p, threads, bits);
    v.data = p;
    v.layout = bits == cpu::WeightBits::Int4 ? kern::WeightLayout::Int4 : kern::WeightLayout::Int8;
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<Layer> make_layer(const Shape& s) {
  auto L = std::make_unique<Layer>();
  SplitMix64 rng(7);
  L->gate = random_weight_bytes(s.gate_up, s.n_embd, s.n_ff, s.n_expert, rng);
  L->up = random_weight_bytes(s.gate_up, s.n_embd, s.n_ff, s.n_expert, rng);
  L->down = random_weight_bytes(s.down, s.n_ff, s.n_embd, s.n_expert, rng);
  L->w[0] = weight_view(L->gate, s.gate_up, s.n_embd, s.n_ff, s.n_expert, "gate_exps");
  L->w[1] = weight_view(L->up, s.gate_up, s.n_embd, s.n_ff, s.n_expert, "up_exps");
  L->w[2] = weight_view(L->down, s.down, s.n_ff, s.n_embd, s.n_expert, "down_exps");
  return L;
}

// Another copy of L's experts as the calls read them (the repacked matrices
// where there are any, else the file's blocks), its views pointing at them.
std::unique_ptr<Layer> copy_layer(const Layer& L) {
  auto c = std::make_unique<Layer>();
  const std::vector<uint8_t>* plain[3] = {&L.gate, &L.up, &L.down};
  std::vector<uint8_t>* plain_c[3] = {&c->gate, &c->up, &c->down};
  for (int k = 0; k < 3; ++k) {
    c->w[k] = L.w[k];
    if (L.i8[k].empty()) {
      *plain_c[k] = *plain[k];
      c->w[k].data = plain_c[k]->data();
    } else {
      c->i8[k].resize(L.i8[k].size());
      uint8_t* p = aligned64(c->i8[k]);
      std::memcpy(p, L.w[k].data, repacked_bytes(L.i8[k]));
      c->w[k].data = p;
    }
  }
  return c;
}

struct MoeTime {
  double seconds = 0;   // per call, best of the repetitions
  double median = 0;    // per call, median of the repetitions (what a run of many calls sees)
  double distinct = 0;  // experts one call reads, mean over the calls
};

// cpu.moe_experts over n tokens, with a new draw of experts every call, call
// r on layer copy r mod the copies.
MoeTime time_moe(const Shape& s, const std::vector<std::unique_ptr<Layer>>& copies, ThreadPool& pool, int64_t n,
                 int reps, const RoutingDistribution& dist, int64_t bf16_rows) {
  const Layer& L = *copies[0];
  kern::CallSpec spec;
  spec.kernel = "cpu.moe_experts";
  if (bf16_rows > 0) {
    kern::Param p;
    p.key = "bf16_rows";
    p.i = bf16_rows;
    spec.params.push_back(p);
  }
  spec.in = {{GgmlType::F32, s.n_embd, n}, {GgmlType::I32, s.n_used, n}, {GgmlType::F32, s.n_used, n}};
  spec.out = {{GgmlType::F32, s.n_embd, n}};
  spec.weights = {L.w[0], L.w[1], L.w[2]};
  std::string error;
  auto k = kern::find_kernel("cpu.moe_experts")->make(spec, &error);
  if (!k) {
    std::fprintf(stderr, "kt-bench moe: %s\n", error.c_str());
    std::exit(1);
  }
  std::vector<float> x(size_t(n * s.n_embd)), w(size_t(n * s.n_used), 1.0f / float(s.n_used)),
      y(size_t(n * s.n_embd));
  std::vector<int32_t> ids(size_t(n * s.n_used));
  SplitMix64 rng(11);
  for (float& v : x) v = 2 * rng.uniform() - 1;
  std::vector<int32_t> pos(static_cast<size_t>(n)), slot(static_cast<size_t>(n), 0), tok(static_cast<size_t>(n), 0);
  for (int64_t t = 0; t < n; ++t) pos[size_t(t)] = int32_t(t);
  kern::Step step{n, tok.data(), pos.data(), slot.data(), 0, nullptr};
  kern::Act in[3] = {{x.data(), GgmlType::F32, s.n_embd, n, n},
                     {ids.data(), GgmlType::I32, s.n_used, n, n},
                     {w.data(), GgmlType::F32, s.n_used, n, n}};
  kern::Act out[1] = {{y.data(), GgmlType::F32, s.n_embd, n, n}};
  kern::CallArgs a;
  a.in = in;
  a.out = out;
  a.weights = spec.weights;
  a.step = &step;
  a.par = &pool;
  // The draw goes through the routing hook benchmarks force whole models with,
  // as if this were layer 0's router.
  ForcedRouting forced(dist, 11);
  kern::RouteEvent ev;
  ev.layer = 0;
  ev.step = &step;
  ev.n_expert = s.n_expert;
  ev.n_used = s.n_used;
  ev.ids = ids.data();
  ev.weights = w.data();
  double best = 1e30, distinct = 0;
  std::vector<double> times;
  for (int r = 0; r < reps + 1; ++r) {
    forced.on_route(ev);
    if (!forced.unmatched_layers().empty()) {
      std::fprintf(stderr, "kt-bench moe: --routing %s: the profile has no layer of %lld experts (%s)\n",
                   dist.name.c_str(), (long long)s.n_expert, s.name);
      std::exit(1);
    }
    std::vector<bool> seen(size_t(s.n_expert), false);
    for (int32_t e : ids) seen[size_t(e)] = true;
    distinct += double(std::count(seen.begin(), seen.end(), true)) / double(reps + 1);
    a.weights = copies[size_t(r) % copies.size()]->w;
    const auto t0 = Clock::now();
    k->run(a);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) {  // the first call pages the weights in
      best = std::min(best, dt);
      times.push_back(dt);
    }
  }
  std::sort(times.begin(), times.end());
  return {best, times[times.size() / 2], distinct};
}

}  // namespace

int run_moe_bench(int argc, char** argv) {
  std::string only;
  int threads = 0;
  bool quick = false;
  int64_t bf16_rows = 0;
  std::optional<cpu::WeightBits> repacked;  // --int8 / --int4
  std::string routing = "uniform";
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) only = argv[++i];
    else if (a == "--routing" && i + 1 < argc) routing = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--quick") quick = true;
    else if (a == "--bf16-rows" && i + 1 < argc) bf16_rows = std::atoll(argv[++i]);
    else if (a == "--int8" && !repacked) repacked = cpu::WeightBits::Int8;
    else if (a == "--int4" && !repacked) repacked = cpu::WeightBits::Int4;
    else {
      std::fprintf(stderr, "usage: kt-bench moe [--model deepseek-v2-lite|deepseek-v3|qwen2-57b-a14b|mixtral-8x7b] "
                           "[--threads N] [--quick] [--routing uniform|zipf:S|profile:FILE]\n"
                           "       [--bf16-rows N]  (experts with N or more of a call's rows in BF16: AMXBF16)\n"
                           "       [--int8]         (experts repacked to int8 at load: AMXInt8)\n"
                           "       [--int4]         (experts repacked to int4 at load: AMXInt4; not with --int8)\n");
      return 2;
    }
  }
  const char* repacked_name = !repacked ? "" : *repacked == cpu::WeightBits::Int4 ? "int4" : "int8";
  auto dist = parse_routing_distribution(routing);
  if (!dist.ok()) {
    std::fprintf(stderr, "kt-bench: %s\n", dist.error().message.c_str());
    return 2;
  }
  ThreadPool pool(threads);
  const TriadResult triad = measure_triad(uint64_t(quick ? 1 : 3) << 30, pool.n_threads(), 3);
  std::printf("cpu: %s, %d threads; DRAM triad %.1f GB/s; routing %s; bf16_rows %lld; experts %s%s\n",
              cpu_description().c_str(), pool.n_threads(), triad.gbps, dist->name.c_str(), (long long)bf16_rows,
              repacked ? "repacked to " : "as the file has them", repacked_name);
  std::printf("%-18s %8s %10s %10s %10s %12s %12s %10s\n", "model", "tokens", "ms", "median ms", "GB/s", "of triad",
              "TFLOP/s", "oneDNN bf16");
  nlohmann::json j = {{"triad_gbps", triad.gbps}, {"threads", pool.n_threads()}, {"routing", dist->name},
                      {"bf16_rows", bf16_rows}, {"int8", repacked == cpu::WeightBits::Int8},
                      {"int4", repacked == cpu::WeightBits::Int4},
                      {"moe", nlohmann::json::array()}};
  for (const Shape& s : kShapes) {
    if (!only.empty() && only != s.name) continue;
    auto L = make_layer(s);
    double expert_bytes = double(L->gate.size() + L->up.size() + L->down.size()) / double(s.n_expert);
    if (repacked) {
      const double sec = repack_layer(*L, pool.n_threads(), *repacked);
      const double file_bytes = expert_bytes * double(s.n_expert);
      expert_bytes = 0;
      for (const auto& b : L->i8) expert_bytes += double(repacked_bytes(b)) / double(s.n_expert);
      std::printf("%-18s repacked %.0f MB of experts to %.0f MB of %s in %.2f s\n", s.name, file_bytes / 1e6,
                  expert_bytes * double(s.n_expert) / 1e6, repacked_name, sec);
    }
    // Copies of the layer holding four times the L3 together (at least 256
    // MB of it, where the OS reports one slice of a split cache), up to 8.
    const uint64_t l3_os = l3_cache_bytes(), l3 = std::max<uint64_t>(l3_os, uint64_t(256) << 20);
    const uint64_t one = uint64_t(expert_bytes * double(s.n_expert));
    const size_t n_copies = size_t(std::clamp<uint64_t>((4 * l3 + one - 1) / one, 1, 8));
    std::vector<std::unique_ptr<Layer>> copies;
    copies.push_back(std::move(L));
    while (copies.size() < n_copies) copies.push_back(copy_layer(*copies[0]));
    std::printf("%-18s calls rotate over %zu copies of the layer's %.0f MB (L3 %.0f MB)\n", s.name, n_copies,
                double(one) / 1e6, double(l3_os) / 1e6);
    for (int64_t n : {int64_t(1), int64_t(128), int64_t(512), int64_t(2048)}) {
      if (quick && n > 128) continue;
      // Ten calls at 128 and 512 tokens (three gave best-of figures 15% apart
      // from run to run on the device's Xeon), five at 2048.
      const MoeTime mt = time_moe(s, copies, pool, n, n == 1 ? 20 : n <= 512 ? 10 : 5, *dist, bf16_rows);
      const double sec = mt.seconds;
      // Bytes: the distinct experts one call reads (all of them once n*n_used >> n_expert
      // under uniform routing; fewer under skew).
      // One token: GB/s of the median call, as a decode of many steps sees it
      // (the best of twenty can still find its experts in the L3).
      const double gbps = mt.distinct * expert_bytes / (n == 1 ? mt.median : sec) / 1e9;
      const double flops = 2.0 * 3.0 * double(s.n_embd) * double(s.n_ff) * double(n * s.n_used);
      char dnnl[32] = "-";
      double dnnl_tflops = 0;
      if (n >= 128) {  // the same FLOPs as one BF16 GEMM per expert over its tokens
        const int64_t m = std::max<int64_t>(1, n * s.n_used / s.n_expert);
        // kt's idle workers spin for a few ms before they sleep: let them, so
        // oneDNN's threads do not share the cores with them.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const GemmResult g = measure_gemm_onednn(m, s.n_ff, s.n_embd, true, 3, pool.n_threads());
        dnnl_tflops = g.tflops;
        std::snprintf(dnnl, sizeof dnnl, "%.2f", g.tflops);
      }
      // ms and TFLOP/s: the best call, as the triad reports its best
      // repetition; the median beside it (decode's calls vary with the experts
      // drawn). GB/s: the best call's, the median's for one token.
      std::printf("%-18s %8lld %10.3f %10.3f %10.1f %11.0f%% %12.3f %10s\n", s.name, (long long)n, sec * 1e3,
                  mt.median * 1e3, gbps, 100.0 * gbps / triad.gbps, flops / sec / 1e12, dnnl);
      j["moe"].push_back({{"model", s.name}, {"tokens", n}, {"ms", sec * 1e3}, {"median_ms", mt.median * 1e3},
                          {"gbps", gbps}, {"median_gbps", mt.distinct * expert_bytes / mt.median / 1e9},
                          {"tflops", flops / sec / 1e12}, {"onednn_bf16_tflops", dnnl_tflops}});
    }
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace kt::bench
