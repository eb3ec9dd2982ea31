// The token sampler: llama.cpp's default chain over one row of logits.
//
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw
//
// in that order, as llama.cpp's common sampler applies them (top-p and min-p see
// the probabilities before temperature; temperature only shapes the final draw).
// temperature <= 0 (or NaN) is greedy: the argmax after the penalties, lowest id
// on ties; the other filters and the generator are then not used.
//
// Reproducible: one seed and the same logits and history give the same tokens
// on every machine and build. The generator is our own (xoshiro256**, seeded by
// splitmix64), uniforms are made from its top 53 bits, and exp() is our own too
// (libm's may differ by an ulp between libraries, which can move a draw that
// falls on a bucket boundary). Ties between equal logits are broken by id, so
// the candidate order never depends on a sort's implementation.
//
// Bad logits never crash it nor give an id outside [0, n_vocab): NaN counts as
// -inf and +inf as the largest finite float. When every logit is -inf (or NaN)
// there is nothing to draw from and it returns the argmax convention: id 0, the
// lowest of the equal maxima. n_vocab <= 0 (or no logits) returns -1.
//
// Allocation-free once warm: the buffers grow to the vocabulary on the first
// call and are reused; the history is trimmed in place.
//
// Constrained decoding passes a TokenMask (token_mask.h): tokens it does not
// allow count as -inf after the penalties, before every filter, so greedy and
// sampled draws alike only ever pick allowed tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace kt {

struct TokenMask;

// Defaults are llama.cpp's CLI defaults (common/common.h, common_params_sampling).
struct SamplerParams {
  // A seed that asks for a random one (from std::random_device); Sampler::seed()
  // reports the seed actually used, so a random run can be repeated.
  static constexpr uint64_t kRandomSeed = UINT64_MAX;

  float temperature = 0.8f;     // <= 0: greedy
  int32_t top_k = 40;           // <= 0: off (the whole vocabulary)
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off; keeps p >= min_p * max p
  float repeat_penalty = 1.0f;  // 1: off; logit > 0 ? logit / r : logit * r
  int32_t repeat_last_n = 64;   // window of all three penalties; 0: off, < 0: the whole history
  float presence_penalty = 0.0f;   // OpenAI's: logit -= presence * (count > 0)
  float frequency_penalty = 0.0f;  // OpenAI's: logit -= frequency * count
  uint64_t seed = kRandomSeed;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params = {});

  // The next token for one row of n_vocab logits (not modified). Uses the
  // accepted history for the penalties; does not accept the token itself.
  int32_t sample(const float* logits, int64_t n_vocab) { return sample(logits, n_vocab, nullptr); }
  // The same, among the tokens mask allows (null: all). When every allowed
  // logit is -inf (or NaN) the lowest allowed id; -1 when the mask allows none.
  int32_t sample(const float* logits, int64_t n_vocab, const TokenMask* mask);

  // After sample(): log-probabilities under the distribution it drew from
  // before temperature and the filters (the logits after penalties and mask,
  // softmax at temperature 1): that of token, and the k most likely tokens,
  // best first (OpenAI's logprobs / top_logprobs). Masked tokens have -inf.
  struct TokenLogprob {
    int32_t id;
    float logprob;
  };
  float logprobs(int32_t token, int k, std::vector<TokenLogprob>* top) const;

  // Adds a token to the history the penalties look at: prompt tokens too, so
  // that the penalties see them (llama.cpp accepts the prompt as well). Ids
  // outside the vocabulary of a later sample() are kept but never penalised.
  void accept(int32_t token);

  // Forgets the history and restarts the generator from seed(): a reset
  // sampler repeats its tokens.
  void reset();

  const SamplerParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }  // the seed in use (resolved when random)

 private:
  struct Rng {  // xoshiro256**, state from splitmix64 of the seed
    uint64_t s[4];
    void seed(uint64_t seed);
    uint64_t next();
    double uniform();  // [0, 1), 53 random bits
  };
  struct Candidate {
    float logit;
    int32_t id;
  };

  void apply_penalties(int32_t n_vocab);
  int32_t argmax(int32_t n_vocab) const;
  void apply_mask(const TokenMask& mask, int32_t n_vocab);
  int32_t first_allowed(int32_t n_vocab) const;
  void select_top_k(int32_t n_vocab, int32_t k);
  int32_t draw(float max_logit);

  SamplerParams params_;
  uint64_t seed_;
  Rng rng_;
  std::vector<int32_t> history_;  // trimmed to the last repeat_last_n (when >= 0)
  std::vector<float> work_;       // sanitized, penalised logits
  std::vector<Candidate> cand_;   // survivors of top-k (and min-p), best first
  std::vector<double> weight_;    // the final draw's weights, one per candidate
  std::vector<uint32_t> count_;   // per-id counts of the penalty window; zero between calls
  std::vector<int32_t> distinct_; // ids counted in count_
  const TokenMask* mask_ = nullptr; // of the current sample() call
  int32_t last_n_ = 0;             // vocabulary of the last sample() call (for logprobs)
};

}  // namespace kt
