// /metrics: the engine's counters and the HTTP requests answered, in the
// Prometheus text exposition format (version 0.0.4).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace kt::serve {

struct ServeContext;

// Requests answered, by route and status class. Routes are a fixed list (any
// other path counts as "other"), so no client can grow the label set.
class HttpCounters {
 public:
  static constexpr std::array<std::string_view, 16> kRoutes = {
      "/",         "/static",     "/health",      "/metrics",      "/v1/models",
      "/v1/chat/completions",     "/v1/completions", "/v1/messages", "/api/chat",
      "/api/generate",            "/api/tags",    "/api/show",     "/api/version",
      "/api/ps",   "/favicon.ico", "other"};
  static constexpr std::array<std::string_view, 5> kClasses = {"1xx", "2xx", "3xx", "4xx", "5xx"};

  void count(std::string_view path, int status);
  uint64_t get(size_t route, size_t status_class) const { return n_[route][status_class].load(); }

 private:
  std::atomic<uint64_t> n_[kRoutes.size()][kClasses.size()] = {};
};

std::string render_metrics(const ServeContext& ctx);

}  // namespace kt::serve
