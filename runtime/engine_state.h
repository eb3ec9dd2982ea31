// Engine internals shared by engine.cpp (submission, lifetime, metrics) and
// engine_scheduler.cpp (the worker's loop). Not for use outside the engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/engine.h"
#include "runtime/text_stream.h"
#include "runtime/token_mask.h"

namespace kt {

using EngineClock = std::chrono::steady_clock;

// A request waiting for a slot.
struct QueuedRequest {
  EngineRequest request;
  EngineClock::time_point submitted;
};

// A request holding a slot, as the worker drives it.
struct RunningRequest {
  RunningRequest(QueuedRequest&& q, const Tokenizer& tok)
      : request(std::move(q.request)), submitted(q.submitted), sampler(request.params.sampling),
        text(tok, /*starts_sequence=*/false, request.params.render_special), stop(request.params.stop) {}

  enum class Phase { Prefill, Decode, Finished };

  EngineRequest request;
  EngineClock::time_point submitted, admitted, first_token;
  int32_t slot = -1;
  Phase phase = Phase::Prefill;
  int64_t n_prompt_run = 0;   // prompt tokens in the slot's cache (cached ones included)
  int64_t n_cached = 0;       // prompt tokens that came from the cache
  int32_t pending = -1;       // sampled token to feed in the next decode step
  int32_t unreported = 0;     // generated tokens not yet counted in an event
  std::vector<int32_t> generated;
  Sampler sampler;
  TokenTextStream text;
  StopMatcher stop;
  // Constrained requests: the grammar's place, and their text made of the
  // very bytes the constraint checked (TokenTextStream would clean spaces).
  std::unique_ptr<TokenConstraint> constraint;
  Utf8Assembler raw_text;
  std::vector<TokenLogprobs> logprobs;  // not yet in an event
  FinishReason finish = FinishReason::Stop;
  int32_t stop_index = -1;
  std::string error;
};

// A KV slot: what its cache holds (valid even when free, for prompt caching).
struct SlotState {
  std::vector<int32_t> cached;
  bool busy = false;
  uint64_t last_used = 0;
};

struct Engine::Impl {
  Impl(std::unique_ptr<Executor> ex, Tokenizer tok, const EngineOptions& o)
      : ex(std::move(ex)), tok(std::move(tok)), options(o) {}

  void run();  // the worker (engine_scheduler.cpp)

  std::unique_ptr<Executor> ex;
  const Tokenizer tok;
  const EngineOptions options;

  // Shared with submitters, under mu.
  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<QueuedRequest> queue;
  bool stopping = false;
  int free_slots = 0;     // slots neither busy nor promised to a queued request's admission
  EngineMetrics metrics;  // queue_length filled in by metrics()

  // The worker's own.
  std::vector<SlotState> slots;
  std::vector<std::unique_ptr<RunningRequest>> running;  // admission order
  uint64_t use_clock = 0;
  // Constrained decoding: the vocabulary's trie (without and with control
  // tokens' text), built on first use, and the maskers of recent grammars
  // (most recent last).
  std::shared_ptr<const TokenVocab> vocab[2];
  std::vector<std::shared_ptr<TokenMasker>> maskers;

  std::thread worker;
};

}  // namespace kt
