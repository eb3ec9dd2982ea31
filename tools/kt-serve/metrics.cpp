#include "tools/kt-serve/metrics.h"

#include <cstdio>

#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

void HttpCounters::count(std::string_view path, int status) {
  size_t route = kRoutes.size() - 1;
  for (size_t i = 0; i + 1 < kRoutes.size(); ++i) {
    const std::string_view r = kRoutes[i];
    const bool prefix = r == "/static" || r == "/v1/models";  // /static/app.js, /v1/models/NAME
    if (path == r || (prefix && path.substr(0, r.size()) == r && path.size() > r.size() && path[r.size()] == '/')) {
      route = i;
      break;
    }
  }
  const int c = status / 100 - 1;
  if (c < 0 || c >= int(kClasses.size())) return;
  n_[route][size_t(c)].fetch_add(1, std::memory_order_relaxed);
}

namespace {

class Writer {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out_ += name + " " + buf + "\n";
  }
  void metric(const char* name, const char* type, const char* help, double v) {
    family(name, type, help);
    sample(name, v);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string render_metrics(const ServeContext& ctx) {
  const EngineMetrics m = ctx.engine->metrics();
  Writer w;
  w.family("kt_http_requests_total", "counter", "HTTP requests answered, by route and status class.");
  for (size_t r = 0; r < HttpCounters::kRoutes.size(); ++r)
    for (size_t c = 0; c < HttpCounters::kClasses.size(); ++c)
      if (const uint64_t n = ctx.http.get(r, c))
        w.sample("kt_http_requests_total{route=\"" + std::string(HttpCounters::kRoutes[r]) + "\",code=\"" +
                     std::string(HttpCounters::kClasses[c]) + "\"}",
                 double(n));
  w.metric("kt_requests_submitted_total", "counter", "Generation requests the engine accepted.",
           double(m.requests_submitted));
  w.family("kt_requests_finished_total", "counter", "Generation requests finished, by reason.");
  for (FinishReason r : {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled, FinishReason::Error})
    w.sample(std::string("kt_requests_finished_total{reason=\"") + finish_reason_name(r) + "\"}",
             double(m.requests_finished[int(r)]));
  w.family("kt_requests_rejected_total", "counter", "Generation requests refused, by reason.");
  w.sample("kt_requests_rejected_total{reason=\"queue_full\"}", double(m.requests_rejected_queue_full));
  w.sample("kt_requests_rejected_total{reason=\"invalid_prompt\"}", double(m.requests_rejected_invalid));
  w.metric("kt_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", double(m.prompt_tokens));
  w.metric("kt_prompt_tokens_cached_total", "counter", "Prompt tokens found in a slot's cache (not run again).",
           double(m.prompt_tokens_cached));
  w.metric("kt_prefill_tokens_total", "counter", "Tokens run in prefill steps.", double(m.prefill_tokens));
  w.metric("kt_generated_tokens_total", "counter", "Tokens generated.", double(m.generated_tokens));
  w.metric("kt_prefill_seconds_total", "counter", "Time spent in prefill steps.", m.prefill_seconds);
  w.metric("kt_decode_seconds_total", "counter", "Time spent in decode steps (forward and sampling).",
           m.decode_seconds);
  w.metric("kt_decode_steps_total", "counter", "Decode steps (one forward over all running sequences).",
           double(m.decode_steps));
  w.metric("kt_decode_step_tokens_total", "counter", "Tokens decoded, summed over decode steps (batch sizes).",
           double(m.decode_step_tokens));
  w.metric("kt_prefill_tokens_per_second", "gauge", "Prefill throughput: prefill tokens over prefill time.",
           m.prefill_seconds > 0 ? double(m.prefill_tokens) / m.prefill_seconds : 0.0);
  w.metric("kt_decode_tokens_per_second", "gauge",
           "Decode throughput, all sequences together: tokens decoded over decode time.",
           m.decode_seconds > 0 ? double(m.decode_step_tokens) / m.decode_seconds : 0.0);
  w.metric("kt_constrained_tokens_total", "counter",
           "Tokens sampled under a grammar's mask (response_format, format, forced tool calls).",
           double(m.constrained_tokens));
  w.metric("kt_constraint_mask_walks_total", "counter",
           "Token masks computed by a walk of the vocabulary's trie (the others came from the cache).",
           double(m.constraint_mask_walks));
  w.metric("kt_constraint_mask_seconds_total", "counter",
           "Time computing token masks (included in the prefill and decode seconds).", m.constraint_seconds);
  w.metric("kt_queue_length", "gauge", "Requests waiting for a slot.", m.queue_length);
  w.metric("kt_queue_capacity", "gauge", "Requests that may wait; more are refused with 503.", m.max_queue);
  w.metric("kt_slots_active", "gauge", "KV slots held by running requests.", m.slots_active);
  w.metric("kt_slots_total", "gauge", "KV slots (sequences decoded together at most).", m.n_slots);
  w.metric("kt_kv_cache_tokens_used", "gauge", "KV cache rows held by running requests.", double(m.kv_tokens_active));
  w.metric("kt_kv_cache_tokens_capacity", "gauge", "KV cache rows in all slots.", double(m.kv_tokens_capacity));
  w.metric("kt_kv_cache_usage_ratio", "gauge", "KV cache rows used over capacity.",
           m.kv_tokens_capacity > 0 ? double(m.kv_tokens_active) / double(m.kv_tokens_capacity) : 0.0);
  return w.take();
}

}  // namespace kt::serve
