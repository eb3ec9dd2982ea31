// The sampler chain (runtime/sampler.h): greedy, reproducibility, the
// distribution of draws against softmax(logits / T), each filter on hand-made
// examples, the penalties' formulas, and logits that are not numbers.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "runtime/sampler.h"

namespace kt {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Logits from std::mt19937 (the same on every standard library; the
// distributions are not): roughly uniform in [-scale, scale).
std::vector<float> random_logits(std::mt19937* g, size_t n, float scale = 8.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = (float((*g)() >> 8) / float(1 << 24) * 2.0f - 1.0f) * scale;
  return v;
}

int32_t reference_argmax(const std::vector<float>& v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[size_t(best)]) best = int32_t(i);
  return best;
}

// Only the temperature: every filter off.
SamplerParams plain(float temperature, uint64_t seed = 1) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<double> softmax(const std::vector<float>& logits, double t) {
  double m = -INFINITY, z = 0;
  for (float x : logits) m = std::max(m, double(x));
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) z += (p[i] = std::exp((logits[i] - m) / t));
  for (double& x : p) x /= z;
  return p;
}

std::map<int32_t, int> histogram(Sampler* s, const std::vector<float>& logits, int draws) {
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) ++h[s->sample(logits.data(), int64_t(logits.size()))];
  return h;
}

std::set<int32_t> keys(const std::map<int32_t, int>& h) {
  std::set<int32_t> k;
  for (const auto& [id, n] : h) k.insert(id);
  return k;
}

// Pearson's chi-square of the counts against the probabilities (buckets with
// p = 0 must be empty; they are checked separately by the callers).
double chi_square(const std::map<int32_t, int>& h, const std::vector<double>& p, int draws) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const auto it = h.find(int32_t(i));
    const double o = it == h.end() ? 0 : it->second, e = p[i] * draws;
    chi += (o - e) * (o - e) / e;
  }
  return chi;
}

// Upper 0.1% points of the chi-square distribution by degrees of freedom.
double chi_square_limit(size_t dof) {
  static const double k[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59};
  return dof < std::size(k) ? k[dof] : 1e300;
}

// ---- greedy ------------------------------------------------------------------

TEST(Sampler, GreedyIsTheArgmaxOfRandomLogits) {
  std::mt19937 g(7);
  for (float t : {0.0f, -1.0f, kNaN}) {
    SamplerParams p;  // the other filters are on and must be ignored
    p.temperature = t;
    p.seed = 3;
    Sampler s(p);
    for (int row = 0; row < 200; ++row) {
      const auto logits = random_logits(&g, 1000 + size_t(row));
      ASSERT_EQ(s.sample(logits.data(), int64_t(logits.size())), reference_argmax(logits)) << row;
    }
  }
}

TEST(Sampler, GreedyTiesGoToTheLowestId) {
  Sampler s(plain(0.0f));
  const std::vector<float> logits = {1, 5, 2, 5, 5};
  EXPECT_EQ(s.sample(logits.data(), 5), 1);
}

// ---- reproducibility -----------------------------------------------------------

std::vector<int32_t> run(uint64_t seed, int n, const SamplerParams& base = {}) {
  SamplerParams p = base;
  p.seed = seed;
  p.repeat_penalty = 1.1f;  // the history takes part too
  Sampler s(p);
  std::mt19937 g(11);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const auto logits = random_logits(&g, 32000, 4.0f);
    const int32_t t = s.sample(logits.data(), int64_t(logits.size()));
    s.accept(t);
    out.push_back(t);
  }
  return out;
}

TEST(Sampler, SameSeedSameTokens) {
  const auto a = run(42, 300), b = run(42, 300);
  EXPECT_EQ(a, b);
  SamplerParams wide;  // a wide nucleus, so the draws really are random
  wide.top_k = 0;
  wide.min_p = 0;
  EXPECT_EQ(run(42, 100, wide), run(42, 100, wide));
}

TEST(Sampler, DifferentSeedsDiffer) {
  SamplerParams wide;
  wide.top_k = 0;
  wide.min_p = 0;
  wide.temperature = 1.5f;
  const auto a = run(1, 100, wide), b = run(2, 100, wide);
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 50);  // thousands of candidates per draw: equal by chance rarely
}

TEST(Sampler, ResetRepeatsTheTokens) {
  Sampler s(plain(1.0f, 99));
  std::mt19937 g(5);
  const auto logits = random_logits(&g, 500, 2.0f);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 50; ++i) first.push_back(s.sample(logits.data(), 500));
  s.reset();
  for (int i = 0; i < 50; ++i) second.push_back(s.sample(logits.data(), 500));
  EXPECT_EQ(first, second);
}

TEST(Sampler, RandomSeedIsResolvedAndReported) {
  const SamplerParams random = plain(1.0f, SamplerParams::kRandomSeed);
  Sampler a(random), b(random);
  EXPECT_NE(a.seed(), SamplerParams::kRandomSeed);
  EXPECT_NE(a.seed(), b.seed());
  EXPECT_EQ(SamplerParams{}.seed, SamplerParams::kRandomSeed);  // llama.cpp's default: random
  // The reported seed repeats the run.
  Sampler c(plain(1.0f, a.seed()));
  std::mt19937 g(8);
  const auto logits = random_logits(&g, 300, 1.0f);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(a.sample(logits.data(), 300), c.sample(logits.data(), 300));
}

// The tokens of one fixed input, written down: a change here means every seed
// now gives other text than before (and than on other builds of the old code).
TEST(Sampler, GoldenSequence) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 2654435761u) % 1000u) / 250.0f;
  SamplerParams p;
  p.seed = 1234;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.top_p = 0.99f;
  p.temperature = 1.0f;
  Sampler s(p);
  std::vector<int32_t> got;
  for (int i = 0; i < 12; ++i) got.push_back(s.sample(logits.data(), int64_t(logits.size())));
  const std::vector<int32_t> want = {908, 52, 361, 412, 134, 613, 55, 745, 913, 750, 712, 17};
  EXPECT_EQ(got, want);
}

// ---- the distribution ------------------------------------------------------------

TEST(Sampler, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.7f, -1.0f, 0.9f};
  constexpr int kDraws = 200000;
  for (float t : {0.5f, 1.0f, 1.8f}) {
    Sampler s(plain(t, 2024));
    const auto h = histogram(&s, logits, kDraws);
    const auto p = softmax(logits, t);
    const double chi = chi_square(h, p, kDraws);
    EXPECT_LT(chi, chi_square_limit(logits.size() - 1)) << "T=" << t;
    for (size_t i = 0; i < p.size(); ++i) {  // and no bucket off by more than 5 sigma
      const double e = p[i] * kDraws, sd = std::sqrt(kDraws * p[i] * (1 - p[i]));
      const auto it = h.find(int32_t(i));
      EXPECT_NEAR(it == h.end() ? 0 : it->second, e, 5 * sd) << "T=" << t << " id " << i;
    }
  }
}

// A sampler that ignored T (or applied it twice) must fail here.
TEST(Sampler, TemperatureChangesTheDistribution) {
  const std::vector<float> logits = {0.0f, 1.0f};
  constexpr int kDraws = 100000;
  for (float t : {0.25f, 1.0f, 4.0f}) {
    Sampler s(plain(t, 77));
    const auto h = histogram(&s, logits, kDraws);
    const double want = 1.0 / (1.0 + std::exp(-1.0 / t));  // P(id 1)
    EXPECT_NEAR(double(h.at(1)) / kDraws, want, 0.005) << "T=" << t;
  }
}

// ---- the filters ------------------------------------------------------------------

TEST(Sampler, TopKOneIsGreedy) {
  std::mt19937 g(3);
  SamplerParams p = plain(1.0f, 5);
  p.top_k = 1;
  Sampler s(p);
  for (int row = 0; row < 200; ++row) {
    const auto logits = random_logits(&g, 5000, 0.5f);  // flat: anything but the max is likely
    ASSERT_EQ(s.sample(logits.data(), 5000), reference_argmax(logits));
  }
}

TEST(Sampler, TopKKeepsExactlyTheKBest) {
  std::mt19937 g(4);
  const auto logits = random_logits(&g, 200, 1.0f);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  SamplerParams p = plain(3.0f, 6);  // hot, so every kept token shows up
  p.top_k = 7;
  Sampler s(p);
  const auto h = histogram(&s, logits, 20000);
  EXPECT_EQ(keys(h), std::set<int32_t>(order.begin(), order.begin() + 7));
  // Within the k, the tempered softmax of the k.
  std::vector<float> kept(logits.size(), -kInf);
  for (int i = 0; i < 7; ++i) kept[size_t(order[size_t(i)])] = logits[size_t(order[size_t(i)])];
  EXPECT_LT(chi_square(h, softmax(kept, 3.0), 20000), chi_square_limit(6));
}

TEST(Sampler, TopKTiesAtTheBoundaryKeepTheLowerIds) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, 3.0f};
  SamplerParams p = plain(1.0f, 8);
  p.top_k = 2;
  Sampler s(p);
  EXPECT_EQ(keys(histogram(&s, logits, 2000)), (std::set<int32_t>{1, 3}));
}

// p = 0.05, 0.5, 0.15, 0.3 (ids 0..3): sorted 0.5, 0.3, 0.15, 0.05, cumulative
// 0.5, 0.8, 0.95, 1.0.
std::vector<float> nucleus_logits() {
  return {std::log(0.05f), std::log(0.5f), std::log(0.15f), std::log(0.3f)};
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  const auto logits = nucleus_logits();
  const std::vector<std::pair<float, std::set<int32_t>>> cases = {
      {0.3f, {1}}, {0.5f, {1}}, {0.6f, {1, 3}}, {0.79f, {1, 3}}, {0.81f, {1, 3, 2}},
      {0.9f, {1, 3, 2}}, {0.96f, {1, 3, 2, 0}}, {0.0f, {1}}};
  for (const auto& [top_p, want] : cases) {
    SamplerParams p = plain(1.0f, 9);
    p.top_p = top_p;
    Sampler s(p);
    EXPECT_EQ(keys(histogram(&s, logits, 20000)), want) << "top_p=" << top_p;
  }
  // Renormalised within the nucleus {1, 3}: 0.5 / 0.8.
  SamplerParams p = plain(1.0f, 10);
  p.top_p = 0.7f;
  Sampler s(p);
  const auto h = histogram(&s, logits, 100000);
  EXPECT_NEAR(h.at(1) / 100000.0, 0.625, 0.006);
}

// Equal logits are ordered by id, so a nucleus that ends among them keeps the lower ids.
TEST(Sampler, TopPTiesKeepTheLowerIds) {
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int32_t top_k : {0, 4, 3}) {
    SamplerParams p = plain(1.0f, 11);
    p.top_p = 0.5f;
    p.top_k = top_k;
    Sampler s(p);
    EXPECT_EQ(keys(histogram(&s, logits, 2000)), (std::set<int32_t>{0, 1})) << "top_k=" << top_k;
  }
}

// top-p looks at the probabilities before temperature (llama.cpp's order): a
// hot temperature must not widen the nucleus.
TEST(Sampler, TopPComesBeforeTemperature) {
  SamplerParams p = plain(5.0f, 12);
  p.top_p = 0.6f;
  Sampler s(p);
  EXPECT_EQ(keys(histogram(&s, nucleus_logits(), 20000)), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  // p = 0.4, 0.3, 0.2, 0.06, 0.04
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.06f),
                                     std::log(0.04f)};
  const std::vector<std::pair<float, std::set<int32_t>>> cases = {
      {0.05f, {0, 1, 2, 3, 4}},   // >= 0.02
      {0.125f, {0, 1, 2, 3}},     // >= 0.05
      {0.2f, {0, 1, 2}},          // >= 0.08
      {0.6f, {0, 1}},             // >= 0.24
      {1.0f, {0}}};
  for (const auto& [min_p, want] : cases) {
    for (int32_t top_k : {0, 4, 5}) {  // both paths: with and without top-k
      SamplerParams p = plain(2.0f, 13);
      p.min_p = min_p;
      p.top_k = top_k;
      Sampler s(p);
      std::set<int32_t> w = want;
      if (top_k == 4) w.erase(4);
      EXPECT_EQ(keys(histogram(&s, logits, 20000)), w) << "min_p=" << min_p << " top_k=" << top_k;
    }
  }
}

TEST(Sampler, FiltersCompose) {
  // top-k 3 -> {1, 3, 2} (p .5 .3 .15 of the whole); top-p 0.9 of those
  // (renormalised .526 .316 .158): {1, 3, 2}; min-p 0.35: >= 0.175 -> {1, 3}.
  SamplerParams p = plain(1.0f, 14);
  p.top_k = 3;
  p.top_p = 0.9f;
  p.min_p = 0.35f;
  Sampler s(p);
  EXPECT_EQ(keys(histogram(&s, nucleus_logits(), 20000)), (std::set<int32_t>{1, 3}));
  // top-p is taken within the top-k set: 0.82 of (.526 .316 .158) is reached by
  // two tokens (.842), while over the whole vocabulary (.5 .8 .95) it takes three.
  p.min_p = 0;
  p.top_p = 0.82f;
  Sampler s2(p);
  EXPECT_EQ(keys(histogram(&s2, nucleus_logits(), 20000)), (std::set<int32_t>{1, 3}));
}

// ---- penalties ----------------------------------------------------------------------

// The penalised logit of token 0, bracketed by a competitor (token 1) just
// above and just below: greedy picks whichever is higher.
void expect_penalised(const SamplerParams& params, const std::vector<int32_t>& history, float logit,
                      float want, const char* what) {
  for (float delta : {-0.002f, 0.002f}) {
    SamplerParams p = params;
    p.temperature = 0.0f;
    Sampler s(p);
    for (int32_t t : history) s.accept(t);
    const std::vector<float> logits = {logit, want + delta, -100.0f};
    EXPECT_EQ(s.sample(logits.data(), 3), delta < 0 ? 0 : 1)
        << what << ": logit " << logit << " should become " << want;
  }
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  expect_penalised(p, {0}, 3.0f, 1.5f, "positive");
  expect_penalised(p, {0}, -1.0f, -2.0f, "negative");
  expect_penalised(p, {0, 0, 0}, 3.0f, 1.5f, "once however often it occurred");
  expect_penalised(p, {2}, 3.0f, 3.0f, "not in the history");
  p.repeat_penalty = 0.5f;  // < 1 encourages repeats
  expect_penalised(p, {0}, 3.0f, 6.0f, "penalty below 1");
}

TEST(Sampler, PresenceAndFrequencyPenaltiesAsOpenAIDefinesThem) {
  SamplerParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  expect_penalised(p, {0, 2, 0, 0}, 5.0f, 5.0f - 3 * 0.5f - 0.25f, "three occurrences");
  expect_penalised(p, {0}, -1.0f, -1.0f - 0.5f - 0.25f, "one occurrence");
  p.repeat_penalty = 2.0f;  // llama.cpp: repeat first, then subtract
  expect_penalised(p, {0, 0}, 5.0f, 2.5f - 1.0f - 0.25f, "all three");
}

TEST(Sampler, PenaltiesSeeOnlyTheLastN) {
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  expect_penalised(p, {0, 2, 2, 2}, 3.0f, 3.0f, "out of the window");
  expect_penalised(p, {0, 2, 2}, 3.0f, 1.5f, "inside the window");
  p.repeat_last_n = 0;
  expect_penalised(p, {0}, 3.0f, 3.0f, "window 0 is off");
  p.repeat_last_n = -1;
  std::vector<int32_t> long_history(5000, 2);
  long_history[0] = 0;
  expect_penalised(p, long_history, 3.0f, 1.5f, "-1: the whole history");
  // A long history with a short window: trimming keeps the last n.
  p.repeat_last_n = 64;
  std::vector<int32_t> h(10000, 2);
  h[10000 - 64] = 0;
  expect_penalised(p, h, 3.0f, 1.5f, "last of the window after trimming");
  h[10000 - 64] = 2;
  h[10000 - 65] = 0;
  expect_penalised(p, h, 3.0f, 3.0f, "just outside after trimming");
}

TEST(Sampler, PenaltiesApplyBeforeGreedyAndIgnoreIdsOutsideTheVocabulary) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 10.0f;
  Sampler s(p);
  s.accept(-5);
  s.accept(7);  // outside a vocabulary of 2
  s.accept(0);
  const std::vector<float> logits = {2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits.data(), 2), 1);
}

// ---- bad input ------------------------------------------------------------------------

TEST(Sampler, NaNAndInfinityNeverGiveABadId) {
  for (float t : {0.0f, 0.8f}) {
    SamplerParams p;
    p.temperature = t;
    p.seed = 15;
    p.repeat_penalty = 1.3f;
    Sampler s(p);
    s.accept(2);
    const std::vector<float> all_nan(10, kNaN), all_neg_inf(10, -kInf);
    EXPECT_EQ(s.sample(all_nan.data(), 10), 0) << "all NaN: the argmax convention";
    EXPECT_EQ(s.sample(all_neg_inf.data(), 10), 0);
    std::vector<float> mixed = {kNaN, 1.0f, kNaN, -kInf, 1.5f, kNaN};
    for (int i = 0; i < 1000; ++i) {
      const int32_t id = s.sample(mixed.data(), 6);
      ASSERT_TRUE(id == 1 || id == 4) << id;
    }
    std::vector<float> pos_inf = {1.0f, kInf, 3.0f, kNaN, kInf};
    for (int i = 0; i < 1000; ++i) {
      const int32_t id = s.sample(pos_inf.data(), 5);
      ASSERT_TRUE(id == 1 || id == 4) << id;
    }
    std::vector<float> one = {-kInf, -kInf, kNaN, 0.0f};
    for (int i = 0; i < 100; ++i) ASSERT_EQ(s.sample(one.data(), 4), 3);
  }
  // A penalty that would overflow the largest float (+inf / 0.5) stays sane.
  SamplerParams p = plain(1.0f, 16);
  p.repeat_penalty = 0.5f;
  Sampler s(p);
  s.accept(0);
  std::vector<float> big = {kInf, 0.0f};
  for (int i = 0; i < 100; ++i) ASSERT_EQ(s.sample(big.data(), 2), 0);
}

TEST(Sampler, TinyVocabularies) {
  const float one = 0.3f;
  for (float t : {0.0f, 1.0f}) {
    SamplerParams p;
    p.temperature = t;
    p.seed = 17;
    Sampler s(p);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(s.sample(&one, 1), 0);
    const float nan = kNaN;
    EXPECT_EQ(s.sample(&nan, 1), 0);
    EXPECT_EQ(s.sample(&one, 0), -1);
    EXPECT_EQ(s.sample(&one, -3), -1);
    EXPECT_EQ(s.sample(nullptr, 5), -1);
  }
}

// Vocabulary sizes of real models with the default chain, with and without
// top-k; prints the time per token (not asserted: sanitizer builds are ten
// times slower). The logits are shaped like a model's: a bulk around 0 (sd 3)
// and a few tokens well above it.
TEST(Sampler, SpeedOnRealVocabularySizes) {
  std::mt19937 g(18);
  for (int64_t n : {32000, 102400, 151936}) {
    std::vector<float> logits(size_t(n), 0.0f);
    for (int j = 0; j < 4; ++j) {
      const auto u = random_logits(&g, size_t(n), 3.0f);
      for (size_t i = 0; i < logits.size(); ++i) logits[i] += u[i];
    }
    for (int j = 0; j < 20; ++j) logits[g() % size_t(n)] = 20.0f + float(j % 5);
    for (int32_t top_k : {40, 0}) {
      SamplerParams p;
      p.seed = 19;
      p.top_k = top_k;
      Sampler s(p);
      s.sample(logits.data(), n);  // warm the buffers
      const auto t0 = std::chrono::steady_clock::now();
      constexpr int kIters = 50;
      for (int i = 0; i < kIters; ++i) {
        const int32_t id = s.sample(logits.data(), n);
        ASSERT_GE(id, 0);
        ASSERT_LT(id, n);
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kIters;
      std::cout << "[ speed    ] n_vocab " << n << " top_k " << top_k << ": " << us << " us/token\n";
    }
  }
}

}  // namespace
}  // namespace kt
