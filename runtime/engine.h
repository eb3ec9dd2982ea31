// The generation engine: continuous batching of many requests over one
// Executor, what kt-serve runs (and what tests drive without HTTP).
//
// One worker thread owns the executor (forward() is not thread-safe). Requests
// (prompt tokens, sampling, stop strings, a token budget, an event callback, a
// cancellation flag) wait in a bounded queue; submit() refuses one past the
// bound at once, so an overloaded server answers 503 instead of queueing
// without end. Each turn of the worker's loop (engine_scheduler.cpp):
//
//   1. retires cancelled requests, queued or running: a running one frees its
//      KV slot before anything else runs, so a client that disconnects gives
//      its slot to the next request within one step;
//   2. admits waiting requests into free slots, oldest first;
//   3. runs ONE prefill step: prompt chunks of the requests still prefilling,
//      oldest first, packed up to the plan's prefill step size (--ubatch); a
//      long prompt takes several turns, so decoding of the others is delayed
//      by at most one prefill step per token, never by a whole prompt;
//   4. runs ONE decode step for every sequence that has a token to feed (one
//      forward over all of them, split only if more than the plan's decode
//      step size), samples each row with the request's own sampler, and
//      streams the text through the callback;
//   5. retires finished requests and frees their slots.
//
// A sequence always goes through the same phases whatever else runs beside it
// (its prompt in prefill steps, each generated token in a decode step), and
// every kernel computes a token's row from that row and its own sequence's
// cache only, so greedy output does not depend on the company a request keeps
// (engine_test checks it).
//
// Prompt caching: a freed slot keeps its cache, and a request only runs the
// part of its prompt that its slot does not already hold (the last prompt
// token always runs, for its logits). A request whose prompt is at least half
// cached in a free slot takes the slot with the longest such prefix; the
// others take the least recently used free slots, so a few shared tokens (a
// common preamble) do not evict a cache that another request could use whole.
// The cache is bounded by the slots (n_slots x n_ctx rows); the least
// recently used slot's cache goes first.
//
// Constrained decoding: a request with a grammar (GenerationParams::grammar,
// e.g. from a JSON schema) samples only tokens that keep its text a prefix of
// the grammar's language and can still end within its token budget, so the
// output is complete and valid however the model behaves (token_mask.h). The
// masks are computed on the worker before each sampling; the automaton and
// its cache of masks are kept per grammar (LRU) and shared by requests with
// the same grammar, so a repeated schema costs little after its first use.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor.h"
#include "runtime/routing_hooks.h"
#include "runtime/grammar.h"
#include "runtime/result.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer.h"

namespace kt {

struct GenerationParams {
  SamplerParams sampling;
  int64_t max_tokens = -1;         // generated tokens at most; < 0: until end of text or context
  std::vector<std::string> stop;   // the text ends before the first of these (not included)
  bool ignore_eos = false;         // end-of-generation tokens do not stop it
  // The output must match this grammar (null: free text). With one, the text
  // is the tokens' bytes as the constraint saw them, and the request ends as
  // soon as the grammar admits nothing more.
  std::shared_ptr<const Grammar> grammar;
  // Control tokens add their text (the tool-call markers of some models are
  // control tokens); otherwise they print nothing.
  bool render_special = false;
  // false: run the whole prompt, reusing no slot's cache (llama.cpp's
  // cache_prompt); the slot still keeps what this request leaves in it.
  bool prompt_cache = true;
  // >= 0: each generated token's log-probability and the k most likely
  // tokens at its step (EngineEvent::logprobs); < 0: none.
  int32_t logprobs = -1;
};

// A generated token's log-probability, and the most likely tokens at its step.
struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<Sampler::TokenLogprob> top;
};

enum class FinishReason { Stop, Length, Cancelled, Error };
// "stop", "length", "cancelled", "error" (OpenAI's finish_reason words where it has them).
const char* finish_reason_name(FinishReason r);

// What a request's callback receives, in order: text pieces, then one event
// with done set (which may carry text too). Text is valid UTF-8, stop strings
// cut out.
struct EngineEvent {
  std::string text;
  int32_t n_tokens = 0;  // tokens generated since the previous event
  std::vector<TokenLogprobs> logprobs;  // for those tokens (end of generation excluded), when asked
  bool done = false;
  // Set when done:
  FinishReason finish = FinishReason::Stop;
  int32_t stop_index = -1;             // the stop string that ended the text (index into stop), or -1
  std::string error;                   // when finish == Error
  int64_t prompt_tokens = 0;           // the whole prompt
  int64_t cached_tokens = 0;           // of which came from the slot's cache
  int64_t completion_tokens = 0;       // generated, including an end-of-generation token
  double queue_s = 0, prefill_s = 0;   // submit -> slot, slot -> first token
  double decode_s = 0;                 // first token -> done
  std::vector<int32_t> output_tokens;  // every generated token (done only)
};

using EventFn = std::function<void(EngineEvent&&)>;

struct EngineRequest {
  std::vector<int32_t> prompt;
  GenerationParams params;
  // Called on the worker thread; must not block (hand the event to the thread
  // that waits for it). Called for nothing else once done has been sent.
  EventFn on_event;
  // Set by the owner to stop the request: it ends with FinishReason::Cancelled
  // at the start of the next step and its slot is free for the next request.
  // May be null.
  std::shared_ptr<const std::atomic<bool>> cancel;
};

struct Rejection {
  enum class Reason { QueueFull, PromptTooLong, InvalidPrompt, Stopped };
  Reason reason;
  std::string message;
};

struct EngineOptions {
  int max_queue = 64;         // requests waiting for a slot; more are refused
  bool prompt_cache = true;   // reuse a free slot's cached prefix
  // kt-serve --routing-profile-out: the routers' choices counted per phase
  // (the engine installs it as the executor's routing hook; read it after the
  // engine is gone). Null: no hook, nothing counted.
  RoutingStats* routing = nullptr;
};

// A snapshot for /metrics. Counters only grow; *_seconds are the worker's time
// inside forward() (prefill) or forward() plus sampling (decode).
struct EngineMetrics {
  uint64_t requests_submitted = 0;
  uint64_t requests_rejected_queue_full = 0;
  uint64_t requests_rejected_invalid = 0;  // prompt too long, empty, bad ids
  uint64_t requests_finished[4] = {};      // by FinishReason
  uint64_t prompt_tokens = 0;              // prompt tokens of admitted requests
  uint64_t prompt_tokens_cached = 0;       // of which reused a slot's cache
  uint64_t prefill_tokens = 0;             // tokens run in prefill steps
  uint64_t generated_tokens = 0;
  uint64_t prefill_steps = 0, decode_steps = 0;
  uint64_t decode_step_tokens = 0;         // sum of decode batch sizes
  double prefill_seconds = 0, decode_seconds = 0;
  uint64_t constrained_tokens = 0;         // tokens sampled under a grammar's mask
  uint64_t constraint_mask_walks = 0;      // masks computed by a walk of the vocabulary (not cached)
  double constraint_seconds = 0;           // time computing masks (part of prefill/decode seconds)
  int queue_length = 0, max_queue = 0;
  int slots_active = 0, n_slots = 0;
  int64_t kv_tokens_active = 0;            // cache rows held by running requests
  int64_t kv_tokens_capacity = 0;          // n_slots * n_ctx
};

class Engine {
 public:
  // Takes the executor (its n_slots slots become the engine's) and starts the
  // worker. The tokenizer comes from the executor's GGUF.
  static Result<std::unique_ptr<Engine>> start(std::unique_ptr<Executor> executor, const EngineOptions& options = {});
  // Stops the worker: queued and running requests end with Cancelled.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request, or says why not (nothing is called back then). Checks
  // here, on the caller's thread: a prompt of 1 to n_ctx - 1 tokens, each in
  // the vocabulary, and room in the queue.
  [[nodiscard]] std::optional<Rejection> submit(EngineRequest request);

  EngineMetrics metrics() const;

  // Immutable after start: safe from any thread.
  const Tokenizer& tokenizer() const;
  const plan::Plan& plan() const;
  const GgufFile& gguf() const;
  int64_t n_ctx() const;
  int64_t n_vocab() const;
  int n_slots() const;
  int n_threads() const;

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> p_;
};

}  // namespace kt
