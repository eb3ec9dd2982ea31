// Routing hooks (kernels/kernel.h RoutingHook) the tools install:
//  - RoutingStats counts what the routers chose: tokens per (layer, expert)
//    for prefill and decode, distinct experts per decode step (the expert
//    weight bytes a step must read), and how often a token's expert is chosen
//    again by the next token of its sequence (temporal locality). Benchmarks
//    report bytes per token from it; routing profiles (routing_profile.h) are
//    its counts.
//  - ForcedRouting replaces the model's choice with experts drawn at random
//    (seeded), keeping the weights: with random weights a model may route every
//    token to the same experts, which a large L3 cache then serves, so decode
//    benchmarks also run this way to hold speed against DRAM bandwidth
//    (../shared/PEERS.md, "Routing and caches"). Uniformly by default; Zipf or
//    a recorded profile give the skew real models show, which is what hot-expert
//    placement (issue 13) feeds on.
//  - RoutingChain runs several in order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernel.h"
#include "runtime/result.h"

namespace kt {

class RoutingStats final : public kern::RoutingHook {
 public:
  void on_route(kern::RouteEvent& e) override;
  // The phase the next events belong to (the tool knows which it runs).
  void set_decode(bool decode) { decode_ = decode; }
  void reset();

  struct Layer {
    int64_t n_used = 0;                     // experts each token chose (the router's top-k)
    std::vector<uint64_t> prefill, decode;  // tokens per expert
    uint64_t decode_steps = 0;
    uint64_t distinct_in_steps = 0;  // sum over decode steps of distinct experts chosen
    uint64_t repeats = 0, repeat_chances = 0;  // next token of a sequence re-chose an expert
  };
  const std::map<int, Layer>& layers() const { return layers_; }
  // Mean distinct experts per decode step, summed over layers.
  double distinct_experts_per_step() const;

 private:
  bool decode_ = false;
  std::map<int, Layer> layers_;
  std::map<std::pair<int, int32_t>, std::vector<int32_t>> last_;  // (layer, slot) -> experts of its last token
};

struct RoutingProfile;

// What ForcedRouting draws from; kt-bench's --routing.
struct RoutingDistribution {
  enum class Kind { Uniform, Zipf, Profile };
  Kind kind = Kind::Uniform;
  std::string name = "uniform";  // as written: "uniform", "zipf:1.0", "profile:FILE"
  double zipf_s = 0;             // Zipf: popularity of the expert of rank r ~ 1 / r^s
  // Profile: per profile layer (sorted by layer), its choice counts per expert
  // (decode counts where it has any, else prefill).
  std::vector<std::pair<int, std::vector<double>>> profile_layers;
};

// "uniform" | "zipf:S" (0 <= S <= 16) | "profile:FILE" (read and checked now).
Result<RoutingDistribution> parse_routing_distribution(std::string_view spec);
RoutingDistribution profile_distribution(const RoutingProfile& p, std::string name);

class ForcedRouting final : public kern::RoutingHook {
 public:
  explicit ForcedRouting(uint64_t seed) : seed_(seed), state_(seed ? seed : 1) {}
  ForcedRouting(RoutingDistribution d, uint64_t seed) : dist_(std::move(d)), seed_(seed), state_(seed ? seed : 1) {}
  void on_route(kern::RouteEvent& e) override;
  // With allow_device_draws(true), uniform forcing lets a GPU router draw the
  // experts itself (kern::RoutingHook::device_uniform_seed): what a benchmark
  // of forced routing wants when nothing else watches the routes.
  void allow_device_draws(bool on) { device_draws_ = on; }
  uint64_t device_uniform_seed() const override {
    return device_draws_ && dist_.kind == RoutingDistribution::Kind::Uniform ? (seed_ ? seed_ : 1) : 0;
  }

  const RoutingDistribution& distribution() const { return dist_; }
  // The probability that a token's n_used choices in this layer include each
  // expert: what the draws reproduce on average (they sum to n_used). Weights
  // too skewed for n_used distinct choices are capped at 1, the rest scaled up.
  const std::vector<double>& inclusion(int layer, int64_t n_expert, int64_t n_used);
  // Layers a profile could not drive (no profile layer with their expert count):
  // they were routed uniformly. Tools refuse such a run.
  const std::vector<int>& unmatched_layers() const { return unmatched_; }

 private:
  uint64_t next();
  double uniform01() { return double(next() >> 11) * 0x1.0p-53; }
  void draw_uniform(int32_t* ids, int64_t n_expert, int64_t n_used);
  void draw_weighted(int32_t* ids, const std::vector<double>& pi, int64_t n_used);
  std::vector<double> layer_weights(int layer, int64_t n_expert);

  struct LayerPlan {
    int64_t n_expert = 0, n_used = 0;
    std::vector<double> pi;  // empty: uniform
  };
  RoutingDistribution dist_;
  bool device_draws_ = false;
  uint64_t seed_;   // Zipf's per-layer ranking comes from it, not from the draw order
  uint64_t state_;
  std::map<int, LayerPlan> plans_;
  std::vector<int> unmatched_;
  std::vector<int32_t> order_;  // scratch: a random order of the experts
};

// Inclusion probabilities for n_used distinct draws (see ForcedRouting::inclusion):
// proportional to the weights, those above 1 set to 1 and the rest rescaled until none is.
// All-zero weights give the uniform n_used / n.
std::vector<double> inclusion_probabilities(const std::vector<double>& weights, int64_t n_used);

class RoutingChain final : public kern::RoutingHook {
 public:
  void add(kern::RoutingHook* h) {
    if (h) hooks_.push_back(h);
  }
  bool empty() const { return hooks_.empty(); }
  void on_route(kern::RouteEvent& e) override {
    for (kern::RoutingHook* h : hooks_) h->on_route(e);
  }

 private:
  std::vector<kern::RoutingHook*> hooks_;
};

}  // namespace kt
