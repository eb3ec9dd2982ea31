#include "runtime/routing_hooks.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "runtime/routing_profile.h"

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
  L.n_used = e.n_used;
  std::vector<uint64_t>& counts = decode_ ? L.decode : L.prefill;
  std::set<int32_t> distinct;
  for (int64_t t = 0; t < e.step->n_tokens; ++t) {
    const int32_t* ids = e.ids + t * e.n_used;
    for (int64_t k = 0; k < e.n_used; ++k) {
      if (ids[k] >= 0 && size_t(ids[k]) < counts.size()) ++counts[size_t(ids[k])];
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

// ---- distributions ----------------------------------------------------------

RoutingDistribution profile_distribution(const RoutingProfile& p, std::string name) {
  RoutingDistribution d;
  d.kind = RoutingDistribution::Kind::Profile;
  d.name = std::move(name);
  for (const RoutingProfile::Layer& l : p.layers) {
    // Decode is what the benchmarks time; a profile of prompts alone still has
    // its prefill counts.
    uint64_t n_decode = 0;
    for (uint64_t c : l.decode) n_decode += c > 0;
    const std::vector<uint64_t>& counts = n_decode ? l.decode : l.prefill;
    d.profile_layers.emplace_back(l.layer, std::vector<double>(counts.begin(), counts.end()));
  }
  return d;
}

Result<RoutingDistribution> parse_routing_distribution(std::string_view spec) {
  if (spec == "uniform") return RoutingDistribution{};
  if (spec.starts_with("zipf:")) {
    const std::string s(spec.substr(5));
    char* end = nullptr;
    errno = 0;
    const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
    if (s.empty() || *end || errno || !(v >= 0 && v <= 16))
      return err("--routing ", printable(spec), ": the Zipf exponent must be a number from 0 to 16");
    RoutingDistribution d;
    d.kind = RoutingDistribution::Kind::Zipf;
    d.zipf_s = v;
    d.name = std::string(spec);
    return d;
  }
  if (spec.starts_with("profile:")) {
    const std::string path(spec.substr(8));
    if (path.empty()) return err("--routing profile: needs a file: profile:FILE");
    auto p = read_routing_profile(path);
    if (!p.ok()) return p.error();
    if (p->layers.empty()) return err(path, ": the routing profile has no layers");
    return profile_distribution(*p, std::string(spec));
  }
  return err("--routing ", printable(spec), ": expected uniform, zipf:S or profile:FILE");
}

std::vector<double> inclusion_probabilities(const std::vector<double>& weights, int64_t n_used) {
  const size_t n = weights.size();
  std::vector<double> pi(n, 0.0);
  if (n == 0 || n_used <= 0) return pi;
  std::vector<bool> capped(n, false);
  size_t n_capped = 0;
  // A draw of n_used distinct experts includes each at most once: an expert
  // whose proportional share asks for more than every token is taken by every
  // token (1), and the choices left are shared by the others in proportion.
  for (;;) {
    const double need = double(std::min<int64_t>(n_used, int64_t(n))) - double(n_capped);
    double sum = 0;
    for (size_t i = 0; i < n; ++i)
      if (!capped[i] && weights[i] > 0) sum += weights[i];
    if (sum <= 0) {  // only zero weights left: they share what is left evenly
      const double each = need / double(n - n_capped);
      for (size_t i = 0; i < n; ++i) pi[i] = capped[i] ? 1.0 : each;
      return pi;
    }
    bool over = false;
    for (size_t i = 0; i < n; ++i) {
      if (capped[i]) continue;
      pi[i] = weights[i] > 0 ? weights[i] * need / sum : 0.0;
      if (pi[i] > 1.0) {
        capped[i] = true;
        pi[i] = 1.0;
        ++n_capped;
        over = true;
      }
    }
    if (!over) return pi;
  }
}

// ---- ForcedRouting ------------------------------------------------------------

uint64_t ForcedRouting::next() {  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<double> ForcedRouting::layer_weights(int layer, int64_t n_expert) {
  std::vector<double> w;
  if (dist_.kind == RoutingDistribution::Kind::Zipf) {
    // The expert of rank r (1-based) has popularity 1/r^s; which expert holds
    // which rank is a permutation drawn per layer from the seed alone, so hot
    // experts differ by layer and do not depend on the order of events.
    ForcedRouting perm_rng(seed_ ^ (0xd1b54a32d192ed03ull * uint64_t(layer + 1)));
    std::vector<int32_t> rank(static_cast<size_t>(n_expert));
    for (int64_t i = 0; i < n_expert; ++i) rank[size_t(i)] = int32_t(i);
    for (int64_t i = n_expert - 1; i > 0; --i) std::swap(rank[size_t(i)], rank[perm_rng.next() % uint64_t(i + 1)]);
    w.resize(size_t(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) w[size_t(e)] = std::pow(double(rank[size_t(e)] + 1), -dist_.zipf_s);
    return w;
  }
  // Profile: the same layer if it has this many experts, else the profile's
  // layers of this many experts in turn (a profile of a model with fewer
  // layers, e.g. a tiny one, then drives a full-size model of its family),
  // else its layers whose expert count E divides n_expert, stretched: each of
  // its experts stands for n_expert / E of the model's (expert e for e % E),
  // which share its count, so a tiny model's 8 experts drive 64 or 256.
  std::vector<const std::vector<double>*> same, fewer;
  for (const auto& [pl, counts] : dist_.profile_layers) {
    if (int64_t(counts.size()) == n_expert) {
      if (pl == layer) return counts;
      same.push_back(&counts);
    } else if (!counts.empty() && int64_t(counts.size()) < n_expert && n_expert % int64_t(counts.size()) == 0) {
      fewer.push_back(&counts);
    }
  }
  const size_t turn = size_t(layer < 0 ? 0 : layer);
  if (!same.empty()) return *same[turn % same.size()];
  if (fewer.empty()) return {};
  const std::vector<double>& c = *fewer[turn % fewer.size()];
  const int64_t k = n_expert / int64_t(c.size());
  w.resize(size_t(n_expert));
  for (int64_t e = 0; e < n_expert; ++e) w[size_t(e)] = c[size_t(e) % c.size()] / double(k);
  return w;
}

const std::vector<double>& ForcedRouting::inclusion(int layer, int64_t n_expert, int64_t n_used) {
  LayerPlan& p = plans_[layer];
  if (p.n_expert == n_expert && p.n_used == n_used) return p.pi;
  p.n_expert = n_expert;
  p.n_used = n_used;
  if (dist_.kind == RoutingDistribution::Kind::Uniform) {
    p.pi.assign(size_t(n_expert), double(n_used) / double(n_expert));
    return p.pi;
  }
  const std::vector<double> w = layer_weights(layer, n_expert);
  if (w.empty()) {
    if (std::find(unmatched_.begin(), unmatched_.end(), layer) == unmatched_.end()) unmatched_.push_back(layer);
    p.pi.assign(size_t(n_expert), double(n_used) / double(n_expert));
  } else {
    p.pi = inclusion_probabilities(w, n_used);
  }
  return p.pi;
}

void ForcedRouting::draw_uniform(int32_t* ids, int64_t n_expert, int64_t n_used) {
  // n_used distinct experts, uniformly (rejecting repeats).
  for (int64_t k = 0; k < n_used; ++k) {
    int32_t pick;
    do {
      pick = int32_t(next() % uint64_t(n_expert));
    } while (std::find(ids, ids + k, pick) != ids + k);
    ids[k] = pick;
  }
}

void ForcedRouting::draw_weighted(int32_t* ids, const std::vector<double>& pi, int64_t n_used) {
  // Systematic sampling over a random order (Madow): lay the experts' inclusion
  // probabilities end to end (total n_used) and take the experts under the
  // points u, u+1, ..., u+n_used-1. Each expert is taken with exactly its
  // probability, and none twice since none covers more than 1; the fresh random
  // order per token keeps pairs of experts from always (or never) going together.
  const size_t n = pi.size();
  if (order_.size() != n) {
    order_.resize(n);
    for (size_t i = 0; i < n; ++i) order_[i] = int32_t(i);
  }
  for (size_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[next() % uint64_t(i + 1)]);
  const double u = uniform01();
  size_t j = 0;
  double end = pi[size_t(order_[0])];  // where expert order_[j]'s interval ends
  int64_t k = 0;
  for (; k < n_used; ++k) {
    const double point = u + double(k);
    if (k > 0 && j < n) {  // rounding must not take one expert twice
      ++j;
      if (j < n) end += pi[size_t(order_[j])];
    }
    while (j < n && (end <= point || pi[size_t(order_[j])] <= 0)) {
      ++j;
      if (j < n) end += pi[size_t(order_[j])];
    }
    if (j >= n) break;
    ids[k] = order_[j];
  }
  // Rounding at the very end (the sum a hair under n_used): fill from the
  // experts not taken yet, most probable first.
  for (; k < n_used; ++k) {
    int32_t best = -1;
    for (size_t i = 0; i < n; ++i)
      if (std::find(ids, ids + k, int32_t(i)) == ids + k && (best < 0 || pi[i] > pi[size_t(best)])) best = int32_t(i);
    ids[k] = best;
  }
}

void ForcedRouting::on_route(kern::RouteEvent& e) {
  if (e.n_expert <= 0 || e.n_used <= 0 || e.n_used > e.n_expert) return;
  if (dist_.kind == RoutingDistribution::Kind::Uniform) {
    for (int64_t t = 0; t < e.step->n_tokens; ++t) draw_uniform(e.ids + t * e.n_used, e.n_expert, e.n_used);
    return;
  }
  const std::vector<double>& pi = inclusion(e.layer, e.n_expert, e.n_used);
  for (int64_t t = 0; t < e.step->n_tokens; ++t) draw_weighted(e.ids + t * e.n_used, pi, e.n_used);
}

}  // namespace kt
