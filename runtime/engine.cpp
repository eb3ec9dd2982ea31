// The engine's public side: start and stop, submission with its checks, the
// metrics snapshot. The worker's loop is in engine_scheduler.cpp.
#include "runtime/engine.h"

#include "runtime/engine_state.h"

namespace kt {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

Result<std::unique_ptr<Engine>> Engine::start(std::unique_ptr<Executor> executor, const EngineOptions& options) {
  if (!executor) return err("engine: no executor");
  if (options.max_queue < 0) return err("engine: negative queue bound ", options.max_queue);
  auto tok = Tokenizer::from_gguf(executor->gguf());
  if (!tok.ok()) return tok.error();
  if (options.routing) executor->set_routing_hook(options.routing);
  auto p = std::make_unique<Impl>(std::move(executor), std::move(*tok), options);
  p->slots.resize(size_t(p->ex->n_slots()));
  p->free_slots = p->ex->n_slots();
  p->metrics.max_queue = options.max_queue;
  p->metrics.n_slots = p->ex->n_slots();
  p->metrics.kv_tokens_capacity = int64_t(p->ex->n_slots()) * p->ex->n_ctx();
  Impl* raw = p.get();
  p->worker = std::thread([raw] { raw->run(); });
  return std::unique_ptr<Engine>(new Engine(std::move(p)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : p_(std::move(impl)) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(p_->mu);
    p_->stopping = true;
  }
  p_->wake.notify_all();
  if (p_->worker.joinable()) p_->worker.join();
}

std::optional<Rejection> Engine::submit(EngineRequest request) {
  const Impl& p = *p_;
  auto invalid = [&](Rejection::Reason reason, std::string message) {
    std::lock_guard<std::mutex> lock(p_->mu);
    ++p_->metrics.requests_rejected_invalid;
    return Rejection{reason, std::move(message)};
  };
  const int64_t n = int64_t(request.prompt.size());
  if (n == 0) return invalid(Rejection::Reason::InvalidPrompt, "the prompt has no tokens");
  // At least one position must stay free for the first generated token.
  if (n >= p.ex->n_ctx())
    return invalid(Rejection::Reason::PromptTooLong,
                   std::string("the prompt has ") + std::to_string(n) + " tokens; the context holds " +
                       std::to_string(p.ex->n_ctx()) + " (prompt and reply together)");
  const int64_t n_vocab = p.ex->n_vocab();
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= n_vocab)
      return invalid(Rejection::Reason::InvalidPrompt, "prompt token " + std::to_string(i) + " (" +
                                                          std::to_string(request.prompt[i]) +
                                                          ") is outside the vocabulary of " + std::to_string(n_vocab));
  if (!request.on_event) return invalid(Rejection::Reason::InvalidPrompt, "no event callback");
  {
    std::lock_guard<std::mutex> lock(p_->mu);
    if (p_->stopping) return Rejection{Rejection::Reason::Stopped, "the server is shutting down"};
    // Requests that free slots will take at once do not count as waiting.
    if (int(p_->queue.size()) >= p.options.max_queue + p_->free_slots) {
      ++p_->metrics.requests_rejected_queue_full;
      return Rejection{Rejection::Reason::QueueFull,
                       "the server is busy: " + std::to_string(p_->queue.size()) + " requests are waiting already"};
    }
    ++p_->metrics.requests_submitted;
    p_->queue.push_back(QueuedRequest{std::move(request), EngineClock::now()});
  }
  p_->wake.notify_one();
  return std::nullopt;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(p_->mu);
  EngineMetrics m = p_->metrics;
  m.queue_length = int(p_->queue.size());
  return m;
}

const Tokenizer& Engine::tokenizer() const { return p_->tok; }
const plan::Plan& Engine::plan() const { return p_->ex->plan(); }
const GgufFile& Engine::gguf() const { return p_->ex->gguf(); }
int64_t Engine::n_ctx() const { return p_->ex->n_ctx(); }
int64_t Engine::n_vocab() const { return p_->ex->n_vocab(); }
int Engine::n_slots() const { return p_->ex->n_slots(); }
int Engine::n_threads() const { return p_->ex->n_threads(); }

}  // namespace kt
