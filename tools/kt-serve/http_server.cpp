#include "tools/kt-serve/http_server.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/kt-serve/anthropic_api.h"
#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/json_text.h"
#include "tools/kt-serve/ollama_api.h"
#include "tools/kt-serve/openai_api.h"
#include "tools/kt-serve/web_page.h"

namespace kt::serve {

namespace {

// Paths that need the API key (when there is one): the APIs and the metrics.
// The page and /health do not: the page asks for the key itself.
bool needs_key(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/v1" || path.rfind("/api/", 0) == 0 || path == "/metrics";
}

// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string status_message(int status) {
  switch (status) {
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "the request body is larger than the server takes (kt-serve --max-body)";
    case 414: return "the request line is too long";
    case 400: return "bad request";
    default: return "HTTP " + std::to_string(status);
  }
}

}  // namespace

int bind_server(httplib::Server& server, const std::string& host, int port) {
  // The sockets httplib makes while it binds (one per address it tries).
  auto made = std::make_shared<std::vector<int>>();
  server.set_socket_options([made](socket_t sock) {
    httplib::default_socket_options(sock);
    made->push_back(int(sock));
  });
  const int got = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  server.set_socket_options(httplib::default_socket_options);
  if (got < 0) return -1;
  for (const int fd : *made) {
    // The one it kept: listening, on the port it reported (the others were
    // closed, and their numbers may be the kept one's).
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    const int bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (bound_port == got) ::listen(fd, SOMAXCONN);
  }
  return got;
}

void configure_server(httplib::Server& server, ServeContext& ctx) {
  const ServeOptions& o = ctx.options;
  // httplib gives each connection a thread for as long as it lasts: a
  // streaming response, an idle keep-alive connection, a client that sends
  // its request slowly. Room for every slot and queued request, and 64 more
  // (threads are cheap; a client that sends nothing for 10 s is dropped).
  const size_t threads = o.http_threads > 0 ? size_t(o.http_threads) : size_t(o.parallel + o.queue + 64);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(o.max_body);
  server.set_read_timeout(10, 0);
  server.set_write_timeout(30, 0);  // a client that stops reading frees its thread and slot
  server.set_keep_alive_timeout(5);
  server.set_tcp_nodelay(true);      // streamed tokens go out at once

  server.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (ctx.options.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (same_secret(req.get_header_value("Authorization"), "Bearer " + ctx.options.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    // Anthropic's clients send the key as x-api-key.
    if (req.has_header("x-api-key") && same_secret(req.get_header_value("x-api-key"), ctx.options.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, api_of_path(req.path), unauthorized());
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Any error response without a body (no route, 413 from the body limit,
  // 400 from a request httplib could not parse) gets the API's error JSON.
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, api_of_path(req.path),
                   with_status(res.status, status_message(res.status), res.status == 404 ? "not_found" : ""));
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    send_error(res, api_of_path(req.path), server_error("internal error"));
  });
  const auto started = std::chrono::steady_clock::now();
  server.set_logger([&ctx, started](const httplib::Request& req, const httplib::Response& res) {
    ctx.http.count(req.path, res.status);
    if (!ctx.options.verbose) return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "kt-serve: %.3f %s %s %s %d\n", t, req.remote_addr.c_str(), req.method.c_str(),
                 printable(req.path, 200).c_str(), res.status);
  });

  server.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    const EngineMetrics m = ctx.engine->metrics();
    res.set_content(dump_json(nlohmann::json{{"status", "ok"},
                                             {"model", ctx.model.name},
                                             {"slots_active", m.slots_active},
                                             {"slots_total", m.n_slots},
                                             {"queue_length", m.queue_length}}),
                    "application/json");
  });
  server.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(ctx), "text/plain; version=0.0.4; charset=utf-8");
  });
  install_openai_routes(server, ctx);
  install_anthropic_routes(server, ctx);
  install_ollama_routes(server, ctx);
  install_web_routes(server);
}

}  // namespace kt::serve
