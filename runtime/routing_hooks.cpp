#include "runtime/routing_hooks.h"

#include <algorithm>
#include <set>

namespace kt {

void RoutingStats::reset() {
  layers_.clear();
  last_.clear();
}

void RoutingStats::on_route(kern::RouteEvent& e) {
  Layer& L = layers_[e.layer];
  if (L.prefill.empty()) {
    L.prefill.assign(size_t(e.n_expert), 0);
    L.decode.assign(size_t(e.n_expert), 0);
  }
  std::vector<uint64_t>& counts = decode_ ? L.decode : L.prefill;
  std::set<int32_t> distinct;
  for (int64_t t = 0; t < e.step->n_tokens; ++t) {
    const int32_t* ids = e.ids + t * e.n_used;
    for (int64_t k = 0; k < e.n_used; ++k) {
      if (ids[k] >= 0 && ids[k] < e.n_expert) ++counts[size_t(ids[k])];
      distinct.insert(ids[k]);
    }
    std::vector<int32_t>& last = last_[{e.layer, e.step->slot[t]}];
    if (!last.empty()) {
      for (int64_t k = 0; k < e.n_used; ++k)
        if (std::find(last.begin(), last.end(), ids[k]) != last.end()) ++L.repeats;
      L.repeat_chances += uint64_t(e.n_used);
    }
    last.assign(ids, ids + e.n_used);
  }
  if (decode_) {
    ++L.decode_steps;
    L.distinct_in_steps += distinct.size();
  }
}

double RoutingStats::distinct_experts_per_step() const {
  double sum = 0;
  for (const auto& [il, L] : layers_)
    if (L.decode_steps) sum += double(L.distinct_in_steps) / double(L.decode_steps);
  return sum;
}

uint64_t ForcedRouting::next() {  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void ForcedRouting::on_route(kern::RouteEvent& e) {
  for (int64_t t = 0; t < e.step->n_tokens; ++t) {
    int32_t* ids = e.ids + t * e.n_used;
    // n_used distinct experts, uniformly (a partial Fisher-Yates over the ids).
    for (int64_t k = 0; k < e.n_used; ++k) {
      int32_t pick;
      do {
        pick = int32_t(next() % uint64_t(e.n_expert));
      } while (std::find(ids, ids + k, pick) != ids + k);
      ids[k] = pick;
    }
  }
}

}  // namespace kt
