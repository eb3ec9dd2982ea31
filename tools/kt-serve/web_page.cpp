#include "tools/kt-serve/web_page.h"

#include "tools/kt-serve/web_assets.h"

namespace kt::serve {

const WebAsset* find_web_asset(std::string_view path) {
  for (const WebAsset& a : web_assets())
    if (a.path == path) return &a;
  return nullptr;
}

namespace {

// The page runs only its own scripts and talks only to this server: no
// inline script, no other origin, nothing framing it.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void send_asset(const WebAsset& a, httplib::Response& res) {
  res.set_header("Content-Security-Policy", kContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(a.data.data(), a.data.size(), std::string(a.content_type));
}

}  // namespace

void install_web_routes(httplib::Server& server) {
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    if (const WebAsset* a = find_web_asset("index.html")) send_asset(*a, res);
  });
  server.Get("/static/(.+)", [](const httplib::Request& req, httplib::Response& res) {
    const WebAsset* a = req.matches.size() > 1 ? find_web_asset(std::string(req.matches[1])) : nullptr;
    if (a && a->path != "index.html")
      send_asset(*a, res);
    else
      res.status = 404;  // the error handler writes the body
  });
}

}  // namespace kt::serve
