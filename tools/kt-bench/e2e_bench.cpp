// kt-bench e2e PLAN: end-to-end prefill and decode speed of a plan, held
// against this machine's DRAM bandwidth measured in the same run.
//
// Decode of a MoE model with its experts on the CPU reads, per token, every
// CPU weight that is not an expert once, plus the active experts' weights:
// bytes per token / triad bandwidth is the decode limit. The active experts
// come from the routing actually taken (distinct experts of the CPU's share
// per layer per step: hot experts a plan holds on the GPU are not counted),
// and the run is repeated with routing forced at random,
// which defeats the L3 cache random weights would otherwise enjoy
// (../shared/PEERS.md, "Routing and caches"): uniformly by default, or with the
// skew of real models (--routing zipf:S, profile:FILE) that hot-expert
// placement is measured under. Counting routes costs a GPU router a round trip
// to the host every layer, so the rows "own, no hooks" (the model's routing)
// and "uniform, no hook" (forced uniformly, the GPU drawing the experts) run
// without it, at the speed a user gets, with the bytes the counted run found.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/device.h"
#include "runtime/executor.h"
#include "runtime/plan_loader.h"
#include "runtime/routing_hooks.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "tools/kt-bench/machine_limits.h"

namespace kt::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Bytes {
  double dense = 0;                    // CPU weights every decode step reads (all but routed experts)
  std::map<int, double> per_expert;    // layer -> bytes of one routed expert on the CPU
  std::map<int, std::vector<bool>> gpu_held;  // layer -> experts the GPU holds (kt-place-experts)
};

// Distinct experts each decode step chooses from the CPU's share, per layer:
// the experts a step reads from DRAM. A hot expert the plan holds on the GPU
// (its CPU call's expert_slots entry is -1) is not CPU traffic.
class CpuExpertsPerStep final : public kern::RoutingHook {
 public:
  explicit CpuExpertsPerStep(const std::map<int, std::vector<bool>>& gpu_held) : gpu_held_(gpu_held) {}
  void set_decode(bool decode) { decode_ = decode; }
  void on_route(kern::RouteEvent& e) override {
    if (!decode_ || !e.step) return;
    const auto held = gpu_held_.find(e.layer);
    std::vector<bool> seen(size_t(e.n_expert), false);
    uint64_t distinct = 0;
    for (int64_t i = 0; i < e.step->n_tokens * e.n_used; ++i) {
      const int32_t id = e.ids[i];
      if (id < 0 || id >= e.n_expert || seen[size_t(id)]) continue;
      seen[size_t(id)] = true;
      if (held == gpu_held_.end() || size_t(id) >= held->second.size() || !held->second[size_t(id)]) ++distinct;
    }
    auto& [sum, steps] = per_layer_[e.layer];
    sum += distinct;
    ++steps;
  }
  // layer -> (sum over decode steps of distinct CPU experts, decode steps)
  const std::map<int, std::pair<uint64_t, uint64_t>>& per_layer() const { return per_layer_; }

 private:
  const std::map<int, std::vector<bool>>& gpu_held_;
  bool decode_ = false;
  std::map<int, std::pair<uint64_t, uint64_t>> per_layer_;
};

// The plan's decode calls (every phase named "decode"), in order.
std::vector<const plan::Call*> decode_calls(const plan::Plan& p) {
  std::vector<const plan::Call*> calls;
  for (const plan::Phase* ph : *p.phases())
    if (ph->name() && ph->name()->str() == "decode" && ph->calls())
      for (const plan::Call* c : *ph->calls()) calls.push_back(c);
  return calls;
}

// A call's parameter `key`, or null.
const plan::Param* find_param(const plan::Call* c, std::string_view key) {
  if (c->params())
    for (const plan::Param* prm : *c->params())
      if (prm->key() && prm->key()->string_view() == key) return prm;
  return nullptr;
}

// What one decode step reads from CPU memory, from the plan: every CPU weight
// its decode calls use, routed experts counted per expert.
Bytes cpu_bytes(const Executor& ex) {
  Bytes b;
  const plan::Plan& p = ex.plan();
  std::vector<bool> seen(p.weights() ? p.weights()->size() : 0, false);
  for (const plan::Call* c : decode_calls(p)) {
    if (p.devices()->Get(uint32_t(c->device()))->kind() != plan::DeviceKind::CPU || !c->weights()) continue;
    const bool experts = c->kernel()->str().ends_with("moe_experts");
    if (const plan::Param* prm = experts ? find_param(c, "expert_slots") : nullptr; prm && prm->ints()) {
      std::vector<bool>& held = b.gpu_held[c->layer()];
      held.assign(prm->ints()->size(), false);
      for (uint32_t e = 0; e < prm->ints()->size(); ++e) held[e] = prm->ints()->Get(e) < 0;
    }
    for (int w : *c->weights()) {
      if (seen[size_t(w)]) continue;
      seen[size_t(w)] = true;
      const plan::Weight* wt = p.weights()->Get(uint32_t(w));
      if (experts) {
        const int64_t n_expert = wt->shape()->size() > 2 ? wt->shape()->Get(2) : 1;
        b.per_expert[c->layer()] += double(wt->bytes()) / double(n_expert);
      } else if (!c->kernel()->str().ends_with("embed")) {  // one row, not the table
        b.dense += double(wt->bytes());
      }
    }
  }
  return b;
}

// What one decode step reads from GPU memory, from the plan: every weight its
// decode calls on a CUDA device use, once; a stack of experts (a 3-D weight)
// counts as the experts one token chooses (n_used of the layer's moe_gate:
// one token's choices are distinct); an embedding table one row (not counted,
// as on the CPU). Held against the HBM copy bandwidth for all-GPU plans.
struct GpuBytes {
  double per_token = 0;
  int device = -1;  // the first CUDA device's ordinal (-1: the plan has none)
};
GpuBytes gpu_bytes(const Executor& ex) {
  GpuBytes g;
  const plan::Plan& p = ex.plan();
  const std::vector<const plan::Call*> calls = decode_calls(p);
  std::map<int, int64_t> n_used;  // layer -> experts a token chooses
  for (const plan::Call* c : calls)
    if (c->kernel()->str().ends_with("moe_gate"))
      if (const plan::Param* prm = find_param(c, "n_used")) n_used[c->layer()] = prm->i();
  std::vector<bool> seen(p.weights() ? p.weights()->size() : 0, false);
  for (const plan::Call* c : calls) {
    const plan::Device* d = p.devices()->Get(uint32_t(c->device()));
    if (d->kind() != plan::DeviceKind::CUDA || !c->weights() || c->kernel()->str().ends_with("embed")) continue;
    if (g.device < 0) g.device = d->index();
    for (int w : *c->weights()) {
      if (seen[size_t(w)]) continue;
      seen[size_t(w)] = true;
      const plan::Weight* wt = p.weights()->Get(uint32_t(w));
      if (wt->shape()->size() > 2) {
        const auto it = n_used.find(c->layer());
        const double used = it == n_used.end() ? 0.0 : double(it->second);
        g.per_token += double(wt->bytes()) * used / double(std::max<int64_t>(wt->shape()->Get(2), 1));
      } else {
        g.per_token += double(wt->bytes());
      }
    }
  }
  return g;
}

struct RunResult {
  double prefill_tps = 0, decode_tps = 0, expert_bytes_per_token = 0, bytes_per_token = 0;
  double pick_us = 0;  // the host's greedy pick (Sampler) a decoded token
};

// forced_by: the distribution routing is forced to, or null for the model's own.
// hooks = false: no hook counting routes (no bytes counted): a GPU router then
// stays on the GPU instead of handing its logits to the host each layer; with
// forced_by uniform, the GPU draws the forced experts itself
// (RoutingHook::device_uniform_seed).
RunResult run_once(Executor& ex, const Bytes& bytes, int64_t n_prompt, int64_t n_gen,
                   const RoutingDistribution* forced_by, uint64_t seed, bool hooks = true) {
  CpuExpertsPerStep stats(bytes.gpu_held);
  ForcedRouting forced(forced_by ? *forced_by : RoutingDistribution{}, seed);
  RoutingChain chain;
  if (forced_by) chain.add(&forced);
  chain.add(&stats);
  forced.allow_device_draws(!hooks);
  kern::RoutingHook* hook = nullptr;
  if (hooks)
    hook = &chain;
  else if (forced_by)
    hook = &forced;
  ex.set_routing_hook(hook);
  // A prompt of random ids (any valid token: speed does not depend on text).
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  uint64_t s = seed;
  for (int32_t& t : prompt) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = int32_t((s >> 33) % uint64_t(ex.n_vocab()));
  }
  Sequence seq(ex, 0);
  RunResult r;
  stats.set_decode(false);
  auto t0 = Clock::now();
  auto logits = seq.feed(prompt);
  const double t_prefill = seconds(t0);
  if (!logits.ok()) {
    std::fprintf(stderr, "kt-bench: %s\n", logits.error().message.c_str());
    std::exit(1);
  }
  stats.set_decode(true);
  int32_t next = 0;
  t0 = Clock::now();
  double t_pick = 0;
  SamplerParams greedy_params;
  greedy_params.temperature = 0;  // kt-exec --greedy: the same chain, no penalties
  greedy_params.seed = 1;
  Sampler greedy(greedy_params);
  for (int64_t i = 0; i < n_gen; ++i) {
    // Greedy: the argmax of the last logits, as a real generation would feed,
    // picked by the sampler kt-exec and kt-serve use.
    const auto tp = Clock::now();
    next = greedy.sample(logits->data(), int64_t(logits->size()));
    t_pick += seconds(tp);
    logits = seq.feed(std::span<const int32_t>(&next, 1));
    if (!logits.ok()) {
      std::fprintf(stderr, "kt-bench: %s\n", logits.error().message.c_str());
      std::exit(1);
    }
  }
  const double t_decode = seconds(t0);
  ex.set_routing_hook(nullptr);
  if (!forced.unmatched_layers().empty()) {
    std::fprintf(stderr, "kt-bench: --routing %s: the profile has no layer with the expert count of layer %d\n",
                 forced.distribution().name.c_str(), forced.unmatched_layers()[0]);
    std::exit(1);
  }
  r.prefill_tps = double(n_prompt) / t_prefill;
  r.decode_tps = double(n_gen) / t_decode;
  r.pick_us = 1e6 * t_pick / double(std::max<int64_t>(n_gen, 1));
  for (const auto& [layer, ds] : stats.per_layer()) {
    auto it = bytes.per_expert.find(layer);
    if (it != bytes.per_expert.end() && ds.second)
      r.expert_bytes_per_token += it->second * double(ds.first) / double(ds.second);
  }
  r.bytes_per_token = bytes.dense + r.expert_bytes_per_token;
  return r;
}

}  // namespace

int run_e2e_bench(int argc, char** argv) {
  std::string plan;
  int threads = 0;
  int64_t n_prompt = 512, n_gen = 64;
  double triad_gib = 3.0;
  bool profile = false;
  std::string routing = "uniform";
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads") threads = std::atoi(next());
    else if (a == "--prompt") n_prompt = std::atoll(next());
    else if (a == "--gen") n_gen = std::atoll(next());
    else if (a == "--triad-gib") triad_gib = std::atof(next());
    else if (a == "--profile") profile = true;
    else if (a == "--routing" && i + 1 < argc) routing = next();
    else if (!a.empty() && a[0] != '-' && plan.empty()) plan = a;
    else {
      std::fprintf(stderr,
                   "usage: kt-bench e2e PLAN.ktp [--threads N] [--prompt 512] [--gen 64] [--triad-gib 3] [--profile]\n"
                   "                    [--routing uniform|zipf:S|profile:FILE]\n"
                   "  prefill and decode tok/s; decode bytes per token (the plan's CPU weights, experts\n"
                   "  as routed) and GB/s against the DRAM triad, with the model's routing and with\n"
                   "  routing forced at random: uniformly (default), expert popularity ~ 1/rank^S\n"
                   "  (ranks shuffled per layer), or as often as a routing profile's decode counts say\n");
      return 2;
    }
  }
  if (plan.empty() || n_prompt < 1 || n_gen < 1) {
    std::fprintf(stderr, "kt-bench e2e: give a plan, --prompt and --gen positive\n");
    return 2;
  }
  auto dist = parse_routing_distribution(routing);
  if (!dist.ok()) {
    std::fprintf(stderr, "kt-bench: %s\n", dist.error().message.c_str());
    return 2;
  }
  ExecOptions opts;
  opts.threads = threads;
  opts.n_ctx = 0;
  const auto t_load = Clock::now();
  auto ex = Executor::load(plan, opts);
  if (!ex.ok()) {
    std::fprintf(stderr, "kt-bench: %s\n", ex.error().message.c_str());
    return 1;
  }
  const double load_s = seconds(t_load);
  if (n_prompt + n_gen > (*ex)->n_ctx()) {
    std::fprintf(stderr, "kt-bench e2e: %lld + %lld tokens do not fit the plan's context %lld\n", (long long)n_prompt,
                 (long long)n_gen, (long long)(*ex)->n_ctx());
    return 2;
  }
  const int n_threads = (*ex)->n_threads();
  bool has_gpu = false;
  for (const plan::Device* d : *(*ex)->plan().devices()) has_gpu |= d->kind() == plan::DeviceKind::CUDA;
  const TriadResult triad = measure_triad(uint64_t(triad_gib * double(1ull << 30)), n_threads, 5);
  const Bytes bytes = cpu_bytes(**ex);
  std::printf("cpu: %s\nplan: %s, %d threads, loaded in %.2f s; DRAM triad %.1f GB/s\n", cpu_description().c_str(),
              plan.c_str(), n_threads, load_s, triad.gbps);
  // All experts on the GPU: decode is bound by HBM, not DRAM. Measured after
  // the plan's load, with buffers that leave its memory alone (at most a
  // quarter of what is free, 1 GiB each at most).
  const GpuBytes gpu = gpu_bytes(**ex);
  const bool all_gpu = has_gpu && bytes.per_expert.empty() && gpu.per_token > 0;
  GpuCopyResult hbm;
  if (all_gpu) {
    uint64_t free_bytes = 0, total_bytes = 0;
    kern::DeviceApi* api = kern::find_device_api("cuda");
    const bool known = api && api->mem_info(gpu.device, &free_bytes, &total_bytes);
    const uint64_t copy_bytes = std::min<uint64_t>(1ull << 30, free_bytes / 8 & ~uint64_t(4095));
    if (!known)
      hbm.error = "no memory information for cuda:" + std::to_string(gpu.device);
    else if (copy_bytes < (64ull << 20))
      hbm.error = std::to_string(free_bytes >> 20) + " MiB free on cuda:" + std::to_string(gpu.device);
    else
      hbm = measure_gpu_copy(gpu.device, copy_bytes, 5);
    if (hbm.gbps > 0)
      std::printf("gpu: %s, HBM copy %.0f GB/s (read + write, %.0f MB); decode reads %.1f MB of its weights a token\n",
                  hbm.name.c_str(), hbm.gbps, double(hbm.bytes) / 1e6, gpu.per_token / 1e6);
    else
      std::printf("gpu: HBM copy not measured (%s)\n", hbm.error.c_str());
  }
  // A row's decode against the HBM copy (all-GPU plans), as the CPU rows are
  // held against the triad.
  auto gpu_row = [&](const char* name, double decode_tps, nlohmann::json* out) {
    if (!all_gpu || hbm.gbps <= 0) return;
    const double gbps = gpu.per_token * decode_tps / 1e9;
    std::printf("%-16s %12s %12.2f %14s %14.1f %10.1f %9.0f%% of HBM copy\n", name, "", decode_tps, "-",
                gpu.per_token / 1e6, gbps, 100.0 * gbps / hbm.gbps);
    (*out)["gpu_bytes_per_token"] = gpu.per_token;
    (*out)["gpu_gbps"] = gbps;
    (*out)["gpu_limit_tps"] = hbm.gbps * 1e9 / gpu.per_token;
  };
  std::printf("forced routing: %s\n", dist->name.c_str());
  std::printf("%-16s %12s %12s %14s %14s %10s %10s\n", "routing", "prefill t/s", "decode t/s", "expert MB/tok",
              "total MB/tok", "GB/s", "of triad");
  nlohmann::json j = {{"plan", plan}, {"threads", n_threads}, {"triad_gbps", triad.gbps}, {"prompt", n_prompt},
                      {"gen", n_gen}, {"routing", dist->name}};
  if (all_gpu && hbm.gbps > 0) j["gpu_copy_gbps"] = hbm.gbps;
  const bool uniform = dist->kind == RoutingDistribution::Kind::Uniform;
  double own_bytes_per_token = 0;
  // --profile: the kernels of the run just measured (profiled), after its row.
  auto print_profile = [&](const std::string& title) {
    if (!profile) return;
    std::printf("kernels, %s:\n%s", title.c_str(), (*ex)->profile_report().c_str());
    (*ex)->clear_profile();
  };
  for (bool forced : {false, true}) {
    // Warm up (page in the weights; a profile that cannot drive this model
    // fails here, before the long run), then measure.
    (void)run_once(**ex, bytes, std::min<int64_t>(n_prompt, 16), 2, forced ? &*dist : nullptr, 1);
    (*ex)->set_profiling(profile && forced);
    const RunResult r = run_once(**ex, bytes, n_prompt, n_gen, forced ? &*dist : nullptr, 42);
    (*ex)->set_profiling(false);
    const double gbps = r.bytes_per_token * r.decode_tps / 1e9;
    if (!forced) own_bytes_per_token = r.bytes_per_token;
    const std::string name = !forced ? "model's own" : uniform ? "forced uniform"
                             : dist->kind == RoutingDistribution::Kind::Zipf ? "forced " + dist->name
                                                                                : "forced profile";
    std::printf("%-16s %12.1f %12.2f %14.1f %14.1f %10.1f %9.0f%%\n", name.c_str(), r.prefill_tps, r.decode_tps,
                r.expert_bytes_per_token / 1e6, r.bytes_per_token / 1e6, gbps, 100.0 * gbps / triad.gbps);
    // "uniform" stays the key of the uniform run (scripts read it); a skewed one is "forced".
    j[!forced ? "model" : uniform ? "uniform" : "forced"] = {{"prefill_tps", r.prefill_tps},
                                        {"decode_tps", r.decode_tps},
                                        {"expert_bytes_per_token", r.expert_bytes_per_token},
                                        {"bytes_per_token", r.bytes_per_token},
                                        {"decode_gbps", gbps},
                                        {"decode_limit_tps", triad.gbps * 1e9 / r.bytes_per_token}};
    if (forced) print_profile("forced " + dist->name + " run");
  }
  {
    // The model's own routing with no hook installed: what a user gets. The
    // rows above pay for counting (and forcing) routes: a GPU router hands
    // its logits to the host and waits, every MoE layer.
    (void)run_once(**ex, bytes, std::min<int64_t>(n_prompt, 16), 2, nullptr, 1, false);
    (*ex)->set_profiling(profile);
    const RunResult r = run_once(**ex, bytes, n_prompt, n_gen, nullptr, 42, false);
    (*ex)->set_profiling(false);
    j["own_no_hooks"] = {{"prefill_tps", r.prefill_tps}, {"decode_tps", r.decode_tps}};
    // One token a decode step chooses n_used distinct experts in every MoE
    // layer, whichever they are: without experts held on the GPU (whose share
    // depends on which), the step reads the bytes the counted run measured,
    // so this run's bandwidth is known without counting.
    if (bytes.gpu_held.empty() && own_bytes_per_token > 0) {
      const double gbps = own_bytes_per_token * r.decode_tps / 1e9;
      std::printf("%-16s %12.1f %12.2f %14s %14.1f %10.1f %9.0f%%\n", "own, no hooks", r.prefill_tps, r.decode_tps,
                  "-", own_bytes_per_token / 1e6, gbps, 100.0 * gbps / triad.gbps);
      j["own_no_hooks"]["decode_gbps"] = gbps;
      j["own_no_hooks"]["bytes_per_token"] = own_bytes_per_token;
    } else {
      std::printf("%-16s %12.1f %12.2f %14s %14s %10s %10s\n", "own, no hooks", r.prefill_tps, r.decode_tps, "-", "-",
                  "-", "-");
    }
    gpu_row("  on the GPU", r.decode_tps, &j["own_no_hooks"]);
    if (profile)
      std::printf("host between decode steps: %.1f us a token for the greedy pick (Sampler, %lld logits)\n",
                  r.pick_us, (long long)(*ex)->n_vocab());
    print_profile("the model's own routing, no hooks");
    if (uniform && bytes.gpu_held.empty()) {
      // Routing forced uniformly with nothing counting it: on a GPU router the
      // GPU draws the experts (no host round trip a layer), so this is decode
      // at the DRAM limit's own terms (PEERS.md: the cache cannot help), at
      // the speed a user gets. An all-GPU plan (no CPU bytes) keeps the row
      // for its prefill: a trained model's prompt keeps every expert busy,
      // where random weights' own routing picks a few.
      (void)run_once(**ex, bytes, std::min<int64_t>(n_prompt, 16), 2, &*dist, 1, false);
      (*ex)->set_profiling(profile);
      const RunResult u = run_once(**ex, bytes, n_prompt, n_gen, &*dist, 42, false);
      (*ex)->set_profiling(false);
      j["uniform_no_hooks"] = {{"prefill_tps", u.prefill_tps}, {"decode_tps", u.decode_tps}};
      if (own_bytes_per_token > 0) {
        const double gbps = own_bytes_per_token * u.decode_tps / 1e9;
        std::printf("%-16s %12.1f %12.2f %14s %14.1f %10.1f %9.0f%%\n", "uniform, no hook", u.prefill_tps,
                    u.decode_tps, "-", own_bytes_per_token / 1e6, gbps, 100.0 * gbps / triad.gbps);
        j["uniform_no_hooks"]["decode_gbps"] = gbps;
        j["uniform_no_hooks"]["bytes_per_token"] = own_bytes_per_token;
        j["uniform_no_hooks"]["decode_limit_tps"] = triad.gbps * 1e9 / own_bytes_per_token;
      } else {
        std::printf("%-16s %12.1f %12.2f %14s %14s %10s %10s\n", "uniform, no hook", u.prefill_tps, u.decode_tps, "-",
                    "-", "-", "-");
      }
      gpu_row("  on the GPU", u.decode_tps, &j["uniform_no_hooks"]);
      print_profile("forced uniform, no hook");
    }
    if (has_gpu) {
      // The same without CUDA graphs: every GPU kernel of decode launched on its own.
      (*ex)->set_cuda_graphs(false);
      const RunResult g = run_once(**ex, bytes, n_prompt, n_gen, nullptr, 42, false);
      (*ex)->set_cuda_graphs(true);
      std::printf("%-16s %12.1f %12.2f %14s %14s %10s %10s\n", "  without graphs", g.prefill_tps, g.decode_tps, "-", "-",
                  "-", "-");
      j["own_no_hooks_no_graphs"] = {{"prefill_tps", g.prefill_tps}, {"decode_tps", g.decode_tps}};
    }
  }
  // kt-compile --profile's prediction (hot experts on the GPU, CPU-bound).
  if (const double p = plan_option_f((*ex)->plan(), "predicted_decode_tok_s"); p > 0) {
    std::printf("predicted by kt-compile --profile: decode %.1f tok/s (%.1f without the hot experts) at %.0f GB/s\n", p,
                plan_option_f((*ex)->plan(), "predicted_decode_tok_s_without_profile"),
                plan_option_f((*ex)->plan(), "cpu_bandwidth_gbs"));
    j["predicted_decode_tps"] = p;
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace kt::bench
