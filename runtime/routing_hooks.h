// Routing hooks (kernels/kernel.h RoutingHook) the tools install:
//  - RoutingStats counts what the routers chose: tokens per (layer, expert)
//    for prefill and decode, distinct experts per decode step (the expert
//    weight bytes a step must read), and how often a token's expert is chosen
//    again by the next token of its sequence (temporal locality). Benchmarks
//    report bytes per token from it; routing profiles (issue 13) are its counts.
//  - ForcedRouting replaces the model's choice with experts drawn uniformly at
//    random (seeded), keeping the weights: with random weights a model may route
//    every token to the same experts, which a large L3 cache then serves, so
//    decode benchmarks also run this way to hold speed against DRAM bandwidth
//    (../shared/PEERS.md, "Routing and caches").
//  - RoutingChain runs several in order.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/kernel.h"

namespace kt {

class RoutingStats final : public kern::RoutingHook {
 public:
  void on_route(kern::RouteEvent& e) override;
  // The phase the next events belong to (the tool knows which it runs).
  void set_decode(bool decode) { decode_ = decode; }
  void reset();

  struct Layer {
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

class ForcedRouting final : public kern::RoutingHook {
 public:
  explicit ForcedRouting(uint64_t seed) : state_(seed ? seed : 1) {}
  void on_route(kern::RouteEvent& e) override;

 private:
  uint64_t next();
  uint64_t state_;
};

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
