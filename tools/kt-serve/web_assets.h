// The web chat page's files, compiled into kt-serve (embed_web.cmake turns
// tools/kt-serve/web/ into web_assets.cpp at build time), so that the server
// is one file and the page needs nothing from the network.
#pragma once

#include <span>
#include <string_view>

namespace kt::serve {

struct WebAsset {
  std::string_view path;          // relative to web/: "index.html", "vendor/marked.min.js"
  std::string_view content_type;
  std::string_view data;
};

std::span<const WebAsset> web_assets();  // generated
const WebAsset* find_web_asset(std::string_view path);

}  // namespace kt::serve
