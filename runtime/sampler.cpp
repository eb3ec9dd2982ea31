// The sampler chain (sampler.h). Every step that decides a token uses only
// IEEE +, -, *, / and exact operations (floor, ldexp, comparisons), in a fixed
// order, so the same seed gives the same tokens on every conforming build.
#include "runtime/sampler.h"

#include "runtime/token_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/cpu/vec_f32.h"

// A fused multiply-add rounds once where a*b+c rounds twice: contracting would
// make the weights depend on the target's instruction set. GCC contracts only
// in GNU modes (kt builds -std=c++20); clang contracts within an expression
// unless told not to.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace kt {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// exp(x) for x <= 0, to about 1 ulp, from basic operations only (libm's exp is
// not the same function in every C library). Cody-Waite reduction x = k ln2 + r
// with |r| <= ln2/2 (k rounded by the 1.5 * 2^52 trick, exact in round-to-
// nearest), Taylor to r^13 (the next term is < 1e-17 there) in Estrin's scheme,
// 2^k from its bits. Branch-free so that loops over a vocabulary vectorize.
// Below e^-708 (where doubles stop being normal), NaN included: 0.
inline double exp_nonpositive(double x) {
  constexpr double kInvLn2 = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 32 significant bits: k * hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kShift = 0x1.8p52;
  constexpr auto c = [] {
    std::array<double, 14> f{};
    f[0] = 1.0;
    for (int i = 1; i < 14; ++i) f[i] = f[i - 1] / i;
    return f;
  }();
  const bool in_range = x >= -708.0;
  const double xc = in_range ? (x > 0.0 ? 0.0 : x) : -708.0;
  const double shifted = xc * kInvLn2 + kShift;  // k in the low bits of the significand
  const double kd = shifted - kShift;
  const double r = (xc - kd * kLn2Hi) - kd * kLn2Lo;
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double p01 = c[0] + c[1] * r, p23 = c[2] + c[3] * r, p45 = c[4] + c[5] * r;
  const double p67 = c[6] + c[7] * r, p89 = c[8] + c[9] * r, p1011 = c[10] + c[11] * r;
  const double p1213 = c[12] + c[13] * r;
  const double p = (p01 + r2 * p23) + r4 * (p45 + r2 * p67) + r8 * ((p89 + r2 * p1011) + r4 * p1213);
  const uint64_t k_bits = std::bit_cast<uint64_t>(shifted) - std::bit_cast<uint64_t>(kShift);
  const double scale = std::bit_cast<double>((k_bits + 1023) << 52);  // 2^k, k in [-1022, 0]
  return in_range ? p * scale : 0.0;
}

// A sum in a fixed order (four interleaved partial sums, then pairwise): the
// same result everywhere, and four times shorter a dependency chain than one
// running sum.
double fixed_order_sum(const double* w, size_t n) {
  double s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (size_t j = 0; j < 4; ++j) s[j] += w[i + j];
  for (size_t j = 0; i < n; ++i, ++j) s[j] += w[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// The candidate order: higher logit first, lower id first among equal logits.
// A strict total order, so the top-k set and its order are unique whatever the
// heap or sort implementation.
struct Better {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};

// NaN never compares, and +inf minus +inf is NaN: both would poison the sums.
float sanitize(float x) {
  if (std::isnan(x)) return kNegInf;
  if (x == std::numeric_limits<float>::infinity()) return std::numeric_limits<float>::max();
  return x;
}

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t random_seed() {
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
#if defined(__cpp_exceptions)
  try {  // random_device may throw where there is no entropy source
    std::random_device rd;
    seed ^= (uint64_t(rd()) << 32) ^ rd();
  } catch (...) {
  }
#else
  std::random_device rd;
  seed ^= (uint64_t(rd()) << 32) ^ rd();
#endif
  // Never hand out the value that means "random": reporting it as the seed in
  // use would not repeat the run.
  return seed == SamplerParams::kRandomSeed ? 0 : seed;
}

}  // namespace

void Sampler::Rng::seed(uint64_t seed) {
  // splitmix64 maps distinct states to distinct outputs, so the four words
  // differ and xoshiro's forbidden all-zero state cannot occur.
  for (uint64_t& w : s) w = splitmix64(&seed);
}

uint64_t Sampler::Rng::next() {
  const auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double Sampler::Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

Sampler::Sampler(const SamplerParams& params)
    : params_(params), seed_(params.seed == SamplerParams::kRandomSeed ? random_seed() : params.seed) {
  rng_.seed(seed_);
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(seed_);
}

void Sampler::accept(int32_t token) {
  history_.push_back(token);
  // Keep the window, trimming in place (no reallocation) once the history is
  // twice the window, so that trimming costs O(1) per token on average.
  const int32_t n = params_.repeat_last_n;
  if (n >= 0 && history_.size() >= 2 * size_t(n) + 64)
    history_.erase(history_.begin(), history_.end() - n);
}

void Sampler::apply_penalties(int32_t n_vocab) {
  const float repeat = params_.repeat_penalty;
  const bool use_repeat = repeat > 0.0f && repeat != 1.0f;  // <= 0 or NaN: off
  const float freq = std::isfinite(params_.frequency_penalty) ? params_.frequency_penalty : 0.0f;
  const float pres = std::isfinite(params_.presence_penalty) ? params_.presence_penalty : 0.0f;
  if (params_.repeat_last_n == 0 || (!use_repeat && freq == 0.0f && pres == 0.0f)) return;

  const size_t window = params_.repeat_last_n < 0
                            ? history_.size()
                            : std::min(history_.size(), size_t(params_.repeat_last_n));
  if (count_.size() < size_t(n_vocab)) count_.resize(size_t(n_vocab), 0);
  distinct_.clear();
  for (size_t i = history_.size() - window; i < history_.size(); ++i) {
    const int32_t t = history_[i];
    if (t < 0 || t >= n_vocab) continue;
    if (count_[size_t(t)]++ == 0) distinct_.push_back(t);
  }
  for (int32_t t : distinct_) {
    float x = work_[size_t(t)];
    const uint32_t c = count_[size_t(t)];
    count_[size_t(t)] = 0;
    if (use_repeat) x = x > 0.0f ? x / repeat : x * repeat;  // llama.cpp: logit <= 0 is multiplied
    x -= float(c) * freq + pres;  // c > 0 here
    work_[size_t(t)] = sanitize(x);
  }
}

// The lowest index of the largest logit (work_ holds no NaN: sanitized).
int32_t Sampler::argmax(int32_t n_vocab) const { return int32_t(kern::vec::argmax(work_.data(), n_vocab)); }

// The k best by Better into cand_, best first: one pass with a heap of k whose
// top is the worst kept, so most logits cost one comparison.
void Sampler::select_top_k(int32_t n_vocab, int32_t k) {
  cand_.clear();
  for (int32_t i = 0; i < k; ++i) cand_.push_back({work_[size_t(i)], i});
  std::make_heap(cand_.begin(), cand_.end(), Better{});
  for (int32_t i = k; i < n_vocab; ++i) {
    // Ids grow, so an equal logit never beats the worst kept one.
    if (!(work_[size_t(i)] > cand_.front().logit)) continue;
    std::pop_heap(cand_.begin(), cand_.end(), Better{});
    cand_.back() = {work_[size_t(i)], i};
    std::push_heap(cand_.begin(), cand_.end(), Better{});
  }
  std::sort(cand_.begin(), cand_.end(), Better{});
}

// Temperature, then one draw from the softmax over cand_.
int32_t Sampler::draw(float max_logit) {
  const double inv_t = 1.0 / double(params_.temperature);
  if (weight_.size() < cand_.size()) weight_.resize(cand_.size());
  double total = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    weight_[i] = exp_nonpositive((double(cand_[i].logit) - double(max_logit)) * inv_t);
    total += weight_[i];
  }
  // total >= 1 (the best candidate weighs exp(0)); r < total unless rounding
  // lands it on total, and then the last candidate that can be drawn is taken.
  const double r = rng_.uniform() * total;
  double cum = 0.0;
  size_t last = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    if (weight_[i] == 0.0) continue;
    cum += weight_[i];
    last = i;
    if (r < cum) return cand_[i].id;
  }
  return cand_[last].id;
}

void Sampler::apply_mask(const TokenMask& mask, int32_t n_vocab) {
  for (int32_t w = 0; w * 64 < n_vocab; ++w) {
    const uint64_t bits = size_t(w) < mask.bits.size() ? mask.bits[size_t(w)] : 0;
    const int32_t end = std::min(n_vocab, (w + 1) * 64);
    if (bits == ~uint64_t(0) && end - w * 64 == 64) continue;
    for (int32_t i = w * 64; i < end; ++i)
      if (!((bits >> (i - w * 64)) & 1)) work_[size_t(i)] = kNegInf;
  }
}

int32_t Sampler::first_allowed(int32_t n_vocab) const {
  if (!mask_) return 0;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (mask_->allowed(i)) return i;
  return -1;
}

int32_t Sampler::sample(const float* logits, int64_t n_vocab_in, const TokenMask* mask) {
  if (!logits || n_vocab_in <= 0) return -1;
  const int32_t n = int32_t(std::min<int64_t>(n_vocab_in, std::numeric_limits<int32_t>::max()));

  if (work_.size() < size_t(n)) work_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) work_[size_t(i)] = sanitize(logits[i]);
  apply_penalties(n);
  last_n_ = n;
  mask_ = mask;
  if (mask) {
    apply_mask(*mask, n);
    // Every allowed logit -inf (or none allowed): argmax would pick a masked id.
    const int32_t best = argmax(n);
    if (work_[size_t(best)] == kNegInf) return first_allowed(n);
  }

  if (!(params_.temperature > 0.0f)) return argmax(n);

  const bool use_top_k = params_.top_k > 0 && params_.top_k < n;
  const bool use_top_p = params_.top_p < 1.0f;  // NaN: off
  const bool use_min_p = params_.min_p > 0.0f;
  const double top_p = std::max(0.0, double(params_.top_p));
  const double min_p = double(params_.min_p);

  // cand_: the top-k set (the whole vocabulary without top-k), best first, with
  // what min-p will drop already left out where that saves sorting. min-p and
  // top-p both keep a prefix of this order and share its maximum, so applying
  // min-p first changes nothing.
  float max_logit;
  double sum_all = 0.0;  // top-p's normalizer: the whole top-k set
  if (use_top_k) {
    select_top_k(n, params_.top_k);
    max_logit = cand_.front().logit;
    if (max_logit == kNegInf) return argmax(n);
    if (use_top_p) {
      if (weight_.size() < cand_.size()) weight_.resize(cand_.size());
      for (size_t i = 0; i < cand_.size(); ++i)
        weight_[i] = exp_nonpositive(double(cand_[i].logit) - double(max_logit));
      sum_all = fixed_order_sum(weight_.data(), cand_.size());
    }
  } else {
    max_logit = work_[size_t(argmax(n))];
    if (max_logit == kNegInf) return argmax(n);
    cand_.clear();
    if (use_top_p || use_min_p) {
      if (weight_.size() < size_t(n)) weight_.resize(size_t(n));
      for (int32_t i = 0; i < n; ++i)
        weight_[size_t(i)] = exp_nonpositive(double(work_[size_t(i)]) - double(max_logit));
      if (use_top_p) sum_all = fixed_order_sum(weight_.data(), size_t(n));
      for (int32_t i = 0; i < n; ++i)
        if (!use_min_p || weight_[size_t(i)] >= min_p) cand_.push_back({work_[size_t(i)], i});
    } else {
      for (int32_t i = 0; i < n; ++i) cand_.push_back({work_[size_t(i)], i});
    }
    std::sort(cand_.begin(), cand_.end(), Better{});
  }

  // top-p: the shortest prefix whose mass reaches top_p, at least one token.
  size_t keep = cand_.size();
  if (use_top_p) {
    const double target = top_p * sum_all;
    double cum = 0.0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += exp_nonpositive(double(cand_[i].logit) - double(max_logit));
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  // min-p: p_i / p_max is the weight itself. The best candidate (weight 1) always stays.
  if (use_min_p) {
    size_t i = 1;
    while (i < keep && exp_nonpositive(double(cand_[i].logit) - double(max_logit)) >= min_p) ++i;
    keep = i;
  }
  cand_.resize(keep);
  return draw(max_logit);
}

float Sampler::logprobs(int32_t token, int k, std::vector<TokenLogprob>* top) const {
  const int32_t n = last_n_;
  if (top) top->clear();
  if (n <= 0) return kNegInf;
  // log-sum-exp over work_ (penalised, masked), in double.
  float max_logit = kNegInf;
  for (int32_t i = 0; i < n; ++i) max_logit = std::max(max_logit, work_[size_t(i)]);
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(work_[size_t(i)]) - double(max_logit));
  const double lse = double(max_logit) + std::log(sum);
  auto lp = [&](int32_t id) { return float(double(work_[size_t(id)]) - lse); };
  if (top && k > 0) {
    std::vector<Candidate> best;
    for (int32_t i = 0; i < n; ++i) {
      if (work_[size_t(i)] == kNegInf) continue;
      best.push_back({work_[size_t(i)], i});
      std::push_heap(best.begin(), best.end(), Better{});
      if (int(best.size()) > k) {
        std::pop_heap(best.begin(), best.end(), Better{});
        best.pop_back();
      }
    }
    std::sort(best.begin(), best.end(), Better{});
    for (const Candidate& c : best) top->push_back({c.id, lp(c.id)});
  }
  return token >= 0 && token < n ? lp(token) : kNegInf;
}

}  // namespace kt
