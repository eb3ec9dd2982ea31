// The engine's worker: the continuous-batching loop (the policy is described
// in engine.h). Everything here runs on the one thread that owns the executor.
#include <algorithm>
#include <utility>

#include "runtime/engine_state.h"

namespace kt {

namespace {

double seconds(EngineClock::time_point a, EngineClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool is_cancelled(const EngineRequest& r) { return r.cancel && r.cancel->load(std::memory_order_relaxed); }

// Grammars whose automata and masks are kept for the next request with the
// same grammar, and the bounds of each automaton (1 KiB per state, ~80 bytes
// per stack frame, 4 MiB of masks): ~40 MiB each at most.
constexpr size_t kMaxMaskers = 8;
constexpr size_t kMaskerStates = 16384;
constexpr size_t kMaskerFrames = size_t(1) << 18;

// The worker's loop, split into the steps engine.h lists.
class Scheduler {
 public:
  explicit Scheduler(Engine::Impl& p) : p_(p), n_vocab_(p.ex->n_vocab()), n_ctx_(p.ex->n_ctx()) {}

  void run() {
    for (;;) {
      std::vector<QueuedRequest> admitted, dropped;
      {
        std::unique_lock<std::mutex> lock(p_.mu);
        p_.wake.wait(lock, [&] { return p_.stopping || !p_.queue.empty() || !p_.running.empty(); });
        if (p_.stopping) break;
        for (auto it = p_.queue.begin(); it != p_.queue.end();) {
          if (is_cancelled(it->request)) {
            dropped.push_back(std::move(*it));
            it = p_.queue.erase(it);
          } else {
            ++it;
          }
        }
        // Cancelled requests give their slots back before admission.
        for (auto& r : p_.running)
          if (is_cancelled(r->request)) finish(*r, FinishReason::Cancelled);
        retire_finished_locked();
        while (!p_.queue.empty() && p_.free_slots > 0) {
          admitted.push_back(std::move(p_.queue.front()));
          p_.queue.pop_front();
          --p_.free_slots;
        }
        // Out of the queue is in a slot, for anyone watching the metrics.
        p_.metrics.slots_active = int(p_.running.size() + admitted.size());
      }
      deliver_done();
      for (QueuedRequest& q : dropped) cancel_queued(q);
      admit(admitted);
      prefill_step();
      decode_step();
      {
        std::lock_guard<std::mutex> lock(p_.mu);
        retire_finished_locked();
        publish_locked();
      }
      deliver_done();
    }
    shutdown();
  }

 private:
  SlotState& slot_of(const RunningRequest& r) { return p_.slots[size_t(r.slot)]; }

  // Tokens of prompt that slot s caches, as a prefix; the last prompt token
  // always runs, to give the logits of the first generated one.
  int64_t reusable(size_t s, const EngineRequest& r) const {
    const std::vector<int32_t>& prompt = r.prompt;
    if (!p_.options.prompt_cache || !r.params.prompt_cache) return 0;
    const std::vector<int32_t>& cached = p_.slots[s].cached;
    const size_t n = std::min(cached.size(), prompt.size() - 1);
    size_t i = 0;
    while (i < n && cached[i] == prompt[i]) ++i;
    return int64_t(i);
  }

  // Admits the requests taken from the queue, into free slots. First those
  // whose prompt is mostly (half or more) cached in some free slot take the
  // best such slot; then the others take the least recently used free slots.
  // So a request that only shares a few tokens with a slot (a common
  // preamble) does not evict a cache that a later request of the same batch
  // could have used whole.
  void admit(std::vector<QueuedRequest>& admitted) {
    std::vector<bool> placed(admitted.size(), false);
    for (size_t i = 0; i < admitted.size(); ++i) {
      const std::vector<int32_t>& prompt = admitted[i].request.prompt;
      int64_t best_reuse = 0;
      int32_t best = -1;
      for (size_t s = 0; s < p_.slots.size(); ++s) {
        if (p_.slots[s].busy) continue;
        const int64_t reuse = reusable(s, admitted[i].request);
        if (reuse > best_reuse) best_reuse = reuse, best = int32_t(s);
      }
      if (best >= 0 && 2 * best_reuse >= int64_t(prompt.size())) {
        place(std::move(admitted[i]), best);
        placed[i] = true;
      }
    }
    for (size_t i = 0; i < admitted.size(); ++i) {
      if (placed[i]) continue;
      int32_t lru = -1;
      for (size_t s = 0; s < p_.slots.size(); ++s)
        if (!p_.slots[s].busy && (lru < 0 || p_.slots[s].last_used < p_.slots[size_t(lru)].last_used)) lru = int32_t(s);
      // The queue hands out at most free_slots requests, so one is free.
      place(std::move(admitted[i]), lru);
    }
  }

  void place(QueuedRequest&& q, int32_t slot) {
    auto r = std::make_unique<RunningRequest>(std::move(q), p_.tok);
    const std::vector<int32_t>& prompt = r->request.prompt;
    const int64_t reuse = reusable(size_t(slot), r->request);
    SlotState& st = p_.slots[size_t(slot)];
    st.busy = true;
    st.cached.resize(size_t(reuse));
    r->slot = slot;
    r->n_prompt_run = reuse;
    r->n_cached = reuse;
    r->admitted = EngineClock::now();
    if (r->request.params.grammar)
      r->constraint = std::make_unique<TokenConstraint>(masker_for(r->request.params.grammar, r->request.params.render_special));
    for (int32_t t : prompt) r->sampler.accept(t);  // the penalties see the prompt, as in llama.cpp
    wm_.prompt_tokens += prompt.size();
    wm_.prompt_tokens_cached += uint64_t(reuse);
    p_.running.push_back(std::move(r));
  }

  // One prefill step: the next prompt chunks of the requests still
  // prefilling, oldest first, up to the plan's prefill step size.
  void prefill_step() {
    struct Part {
      RunningRequest* r;
      int64_t n;
      int32_t output = -1;  // index into the step's logits when this chunk ends the prompt
    };
    std::vector<Part> parts;
    Batch b;
    int64_t budget = p_.ex->max_tokens(PhaseKind::Prefill);
    for (auto& up : p_.running) {
      RunningRequest& r = *up;
      if (r.phase != RunningRequest::Phase::Prefill || budget == 0) continue;
      const int64_t left = int64_t(r.request.prompt.size()) - r.n_prompt_run;
      const int64_t n = std::min(left, budget);
      for (int64_t i = 0; i < n; ++i) {
        b.tokens.push_back(r.request.prompt[size_t(r.n_prompt_run + i)]);
        b.pos.push_back(int32_t(r.n_prompt_run + i));
        b.slot.push_back(r.slot);
      }
      Part part{&r, n};
      if (n == left) {
        part.output = int32_t(b.outputs.size());
        b.outputs.push_back(int32_t(b.tokens.size()) - 1);
      }
      parts.push_back(part);
      budget -= n;
    }
    if (parts.empty()) return;
    if (b.outputs.empty()) b.outputs.push_back(int32_t(b.tokens.size()) - 1);  // forward wants a row
    const auto t0 = EngineClock::now();
    if (p_.options.routing) p_.options.routing->set_decode(false);
    auto logits = p_.ex->forward(b, PhaseKind::Prefill);
    wm_.prefill_seconds += seconds(t0, EngineClock::now());
    ++wm_.prefill_steps;
    wm_.prefill_tokens += b.tokens.size();
    if (!logits.ok()) {
      for (Part& part : parts) fail(*part.r, logits.error().message);
      return;
    }
    for (Part& part : parts) {
      RunningRequest& r = *part.r;
      SlotState& st = slot_of(r);
      st.cached.insert(st.cached.end(), r.request.prompt.begin() + r.n_prompt_run,
                       r.request.prompt.begin() + r.n_prompt_run + part.n);
      r.n_prompt_run += part.n;
      if (part.output < 0) continue;
      r.first_token = EngineClock::now();
      if (r.request.params.max_tokens == 0) {
        finish(r, FinishReason::Length);
        continue;
      }
      r.phase = RunningRequest::Phase::Decode;
      const float* row = logits->data() + size_t(part.output) * size_t(n_vocab_);
      if (const int32_t t = sample(r, row); t >= 0) on_token(r, t);
    }
  }

  // One decode step: every sequence's pending token at once (in as few
  // forwards as the plan's decode step size allows).
  void decode_step() {
    std::vector<RunningRequest*> seqs;
    for (auto& up : p_.running)
      if (up->phase == RunningRequest::Phase::Decode && up->pending >= 0) seqs.push_back(up.get());
    if (seqs.empty()) return;
    const size_t chunk = size_t(std::max<int64_t>(1, p_.ex->max_tokens(PhaseKind::Decode)));
    const auto t0 = EngineClock::now();
    for (size_t at = 0; at < seqs.size(); at += chunk) {
      const size_t n = std::min(chunk, seqs.size() - at);
      Batch b;
      for (size_t i = 0; i < n; ++i) {
        const RunningRequest& r = *seqs[at + i];
        b.tokens.push_back(r.pending);
        b.pos.push_back(int32_t(p_.slots[size_t(r.slot)].cached.size()));
        b.slot.push_back(r.slot);
        b.outputs.push_back(int32_t(i));
      }
      if (p_.options.routing) p_.options.routing->set_decode(true);
      auto logits = p_.ex->forward(b, PhaseKind::Decode);
      ++wm_.decode_steps;
      wm_.decode_step_tokens += n;
      if (!logits.ok()) {
        for (size_t i = 0; i < n; ++i) fail(*seqs[at + i], logits.error().message);
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        RunningRequest& r = *seqs[at + i];
        slot_of(r).cached.push_back(r.pending);
        r.pending = -1;
        if (const int32_t t = sample(r, logits->data() + i * size_t(n_vocab_)); t >= 0) on_token(r, t);
      }
    }
    wm_.decode_seconds += seconds(t0, EngineClock::now());
  }

  // The constraint's masker for a grammar: a recent one with the same
  // grammar and vocabulary, or a new one (the least recently used goes).
  std::shared_ptr<TokenMasker> masker_for(const std::shared_ptr<const Grammar>& g, bool render_special) {
    std::shared_ptr<const TokenVocab>& vocab = p_.vocab[render_special ? 1 : 0];
    if (!vocab) vocab = TokenVocab::build(p_.tok, render_special);
    auto& ms = p_.maskers;
    for (size_t i = 0; i < ms.size(); ++i) {
      TokenMasker& m = *ms[i];
      if (&m.vocab() == vocab.get() && !m.matcher().overflowed() && m.matcher().grammar().same_as(*g)) {
        std::shared_ptr<TokenMasker> hit = ms[i];
        ms.erase(ms.begin() + std::ptrdiff_t(i));
        ms.push_back(hit);
        return hit;
      }
    }
    GrammarMatcherLimits limits;
    limits.max_states = kMaskerStates;
    limits.max_frames = kMaskerFrames;
    ms.push_back(std::make_shared<TokenMasker>(g, vocab, /*cache_bytes=*/size_t(4) << 20, limits));
    if (ms.size() > kMaxMaskers) ms.erase(ms.begin());
    return ms.back();
  }

  // The next token of r from its row of logits, under its constraint's mask
  // when it has one; -1 (and r failed) when the constraint allows nothing.
  int32_t sample(RunningRequest& r, const float* row) {
    const TokenMask* mask = nullptr;
    if (r.constraint) {
      const auto t0 = EngineClock::now();
      const uint64_t walks = r.constraint->masker().stats().walks;
      // Tokens that may still be generated, this one included: the budget,
      // and the context (each but the last is fed at the next position).
      const GenerationParams& gp = r.request.params;
      int64_t left = n_ctx_ - int64_t(slot_of(r).cached.size()) + 1;
      if (gp.max_tokens >= 0) left = std::min(left, gp.max_tokens - int64_t(r.generated.size()));
      mask = r.constraint->next_mask(left);
      wm_.constraint_seconds += seconds(t0, EngineClock::now());
      wm_.constraint_mask_walks += r.constraint->masker().stats().walks - walks;
      ++wm_.constrained_tokens;
      if (!mask) {
        fail(r, "constrained decoding: " + r.constraint->error());
        return -1;
      }
    }
    const int32_t t = r.sampler.sample(row, n_vocab_, mask);
    if (t < 0) fail(r, "the sampler found no token");
    return t;
  }

  // A token's text: the stream's, or for constrained requests the token's
  // bytes as the constraint saw them.
  std::string token_text(RunningRequest& r, int32_t token) {
    if (!r.constraint) return r.text.push(token);
    std::string out;
    r.raw_text.feed(r.constraint->masker().vocab().bytes(token), &out);
    return out;
  }

  // A sampled token: end of generation, text through the stop matcher, the
  // budget and the context decide whether it is fed next.
  void on_token(RunningRequest& r, int32_t token) {
    r.generated.push_back(token);
    ++wm_.generated_tokens;
    ++r.unreported;
    const GenerationParams& gp = r.request.params;
    if (!gp.ignore_eos && p_.tok.is_eog(token)) {
      finish(r, FinishReason::Stop);
      return;
    }
    if (gp.logprobs >= 0) {
      TokenLogprobs lp;
      lp.token = token;
      lp.logprob = r.sampler.logprobs(token, gp.logprobs, &lp.top);
      r.logprobs.push_back(std::move(lp));
    }
    if (r.constraint && !r.constraint->accept(token)) {
      fail(r, "constrained decoding: the sampled token does not fit the grammar");
      return;
    }
    r.sampler.accept(token);
    StopMatcher::Output o = r.stop.push(token_text(r, token));
    if (!o.text.empty()) emit_text(r, std::move(o.text));
    if (o.stopped) r.stop_index = o.stop_index;
    if (o.stopped || (r.constraint && r.constraint->finished())) {
      finish(r, FinishReason::Stop);
    } else if (gp.max_tokens >= 0 && int64_t(r.generated.size()) >= gp.max_tokens) {
      finish(r, FinishReason::Length);
    } else if (int64_t(slot_of(r).cached.size()) >= n_ctx_) {
      finish(r, FinishReason::Length);  // no position left to feed it at
    } else {
      r.pending = token;
    }
  }

  void emit_text(RunningRequest& r, std::string text) {
    EngineEvent e;
    e.text = std::move(text);
    e.n_tokens = std::exchange(r.unreported, 0);
    e.logprobs = std::exchange(r.logprobs, {});
    r.request.on_event(std::move(e));
  }

  // Marks the request finished; its done event goes out when it is retired.
  void finish(RunningRequest& r, FinishReason reason) {
    if (r.phase == RunningRequest::Phase::Finished) return;
    r.phase = RunningRequest::Phase::Finished;
    r.finish = reason;
    r.pending = -1;
  }

  void fail(RunningRequest& r, const std::string& message) {
    finish(r, FinishReason::Error);
    r.error = message;
  }

  // Frees the slots of finished requests and makes their done events, sent
  // by deliver_done() outside the lock. Under mu: free_slots is shared with
  // submit().
  void retire_finished_locked() {
    const auto now = EngineClock::now();
    for (auto it = p_.running.begin(); it != p_.running.end();) {
      RunningRequest& r = **it;
      if (r.phase != RunningRequest::Phase::Finished) {
        ++it;
        continue;
      }
      EngineEvent e;
      if (r.finish == FinishReason::Stop || r.finish == FinishReason::Length) {
        // What the detokenizer and the stop matcher still hold.
        std::string held;
        if (r.constraint)
          r.raw_text.finish(&held);
        else
          held = r.text.flush();
        StopMatcher::Output o = r.stop.push(held);
        e.text = std::move(o.text);
        if (o.stopped && o.stop_index >= 0) r.stop_index = o.stop_index;
        if (!o.stopped) e.text += r.stop.flush();
      }
      e.n_tokens = std::exchange(r.unreported, 0);
      e.logprobs = std::exchange(r.logprobs, {});
      e.done = true;
      e.finish = r.finish;
      e.stop_index = r.stop_index;
      e.error = r.error;
      e.prompt_tokens = int64_t(r.request.prompt.size());
      e.cached_tokens = r.n_cached;
      e.completion_tokens = int64_t(r.generated.size());
      e.queue_s = seconds(r.submitted, r.admitted);
      const bool started = r.first_token != EngineClock::time_point();
      e.prefill_s = started ? seconds(r.admitted, r.first_token) : seconds(r.admitted, now);
      e.decode_s = started ? seconds(r.first_token, now) : 0;
      e.output_tokens = std::move(r.generated);
      ++wm_.requests_finished[int(r.finish)];
      SlotState& st = slot_of(r);
      st.busy = false;
      st.last_used = ++p_.use_clock;
      ++p_.free_slots;
      done_.emplace_back(std::move(r.request.on_event), std::move(e));
      it = p_.running.erase(it);
    }
  }

  void deliver_done() {
    for (auto& [fn, e] : done_) fn(std::move(e));
    done_.clear();
  }

  void cancel_queued(QueuedRequest& q) {
    EngineEvent e;
    e.done = true;
    e.finish = FinishReason::Cancelled;
    e.prompt_tokens = int64_t(q.request.prompt.size());
    e.queue_s = seconds(q.submitted, EngineClock::now());
    ++wm_.requests_finished[int(FinishReason::Cancelled)];
    q.request.on_event(std::move(e));
  }

  // The worker's counters into the shared snapshot (submit() owns the others).
  void publish_locked() {
    EngineMetrics& m = p_.metrics;
    for (int i = 0; i < 4; ++i) m.requests_finished[i] = wm_.requests_finished[i];
    m.prompt_tokens = wm_.prompt_tokens;
    m.prompt_tokens_cached = wm_.prompt_tokens_cached;
    m.prefill_tokens = wm_.prefill_tokens;
    m.generated_tokens = wm_.generated_tokens;
    m.prefill_steps = wm_.prefill_steps;
    m.decode_steps = wm_.decode_steps;
    m.decode_step_tokens = wm_.decode_step_tokens;
    m.prefill_seconds = wm_.prefill_seconds;
    m.decode_seconds = wm_.decode_seconds;
    m.constrained_tokens = wm_.constrained_tokens;
    m.constraint_mask_walks = wm_.constraint_mask_walks;
    m.constraint_seconds = wm_.constraint_seconds;
    m.slots_active = int(p_.running.size());
    m.kv_tokens_active = 0;
    for (const auto& r : p_.running) m.kv_tokens_active += int64_t(slot_of(*r).cached.size());
  }

  void shutdown() {
    std::deque<QueuedRequest> queued;
    {
      std::lock_guard<std::mutex> lock(p_.mu);
      for (auto& r : p_.running) finish(*r, FinishReason::Cancelled);
      retire_finished_locked();
      queued.swap(p_.queue);
      publish_locked();
    }
    deliver_done();
    for (QueuedRequest& q : queued) cancel_queued(q);
  }

  Engine::Impl& p_;
  const int64_t n_vocab_, n_ctx_;
  EngineMetrics wm_;  // the worker's counters
  std::vector<std::pair<EventFn, EngineEvent>> done_;  // made under mu, sent outside it
};

}  // namespace

void Engine::Impl::run() { Scheduler(*this).run(); }

}  // namespace kt
