// libFuzzer target: routing profiles (runtime/routing_profile.h), files anyone
// can hand to kt-gguf, kt-bench and kt-compile. Any error is one line; a
// profile that parses writes back to text that parses to the same profile,
// merges with itself (or says why not) and drives the forced routing.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/routing_hooks.h"
#include "runtime/routing_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = kt::parse_routing_profile(text, "fuzz.json");
  if (!p.ok()) {
    if (p.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  auto back = kt::parse_routing_profile(kt::routing_profile_json(*p), "back.json");
  if (!back.ok() || back->layers.size() != p->layers.size() || back->gguf_fingerprint != p->gguf_fingerprint)
    std::abort();
  for (size_t i = 0; i < p->layers.size(); ++i)
    if (back->layers[i].prefill != p->layers[i].prefill || back->layers[i].decode != p->layers[i].decode) std::abort();
  auto m = kt::merge_routing_profiles(*p, *p);
  if (!m.ok() && m.error().message.find('\n') != std::string::npos) std::abort();
  for (const auto& l : p->layers) {
    double sum = 0;
    for (int64_t e = 0; e < l.n_expert; ++e) sum += p->share(l, e, false);
    if (sum > 1.0 + 1e-9) std::abort();
  }
  // Draw a few tokens per layer from it (small layers only: the fuzzer's time
  // goes to the parser).
  kt::ForcedRouting forced(kt::profile_distribution(*p, "profile:fuzz"), 1);
  for (const auto& l : p->layers) {
    if (l.n_expert > 1024) continue;
    std::vector<int32_t> ids(size_t(4 * l.n_used)), zeros(4, 0);
    kt::kern::Step step{4, zeros.data(), zeros.data(), zeros.data(), 0, nullptr};
    kt::kern::RouteEvent ev;
    ev.layer = l.layer;
    ev.step = &step;
    ev.n_expert = l.n_expert;
    ev.n_used = l.n_used;
    ev.ids = ids.data();
    forced.on_route(ev);
    for (size_t t = 0; t < 4; ++t)
      for (int64_t k = 0; k < l.n_used; ++k) {
        const int32_t id = ids[t * size_t(l.n_used) + size_t(k)];
        if (id < 0 || id >= l.n_expert) std::abort();
        for (int64_t j = 0; j < k; ++j)
          if (ids[t * size_t(l.n_used) + size_t(j)] == id) std::abort();
      }
  }
  return 0;
}
