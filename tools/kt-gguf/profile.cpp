// `kt-gguf profile-show FILE` and `kt-gguf profile-merge A B ... -o OUT`: routing
// profiles (runtime/routing_profile.h) that kt-exec --routing-profile-out writes;
// `kt-gguf profile-synth MODEL --routing zipf:S -o OUT`: the profile of a routing
// distribution (the expected counts of kt-bench's forced routing, same seed),
// so a synthetic model can be compiled with the placement its benchmark routing
// calls for.
// profile-show's key column is the share of a layer's routed choices its
// hottest quarter of experts takes: the traffic that placing a quarter of the
// experts' bytes on the GPU could take off CPU memory.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/plan_loader.h"
#include "runtime/routing_hooks.h"
#include "runtime/routing_profile.h"
#include "tools/kt-gguf/commands.h"

namespace kt::gguf_tool {
namespace {

// Share of the layer's choices (all, or decode only) that its hottest
// ceil(n_expert / 4) experts cover; negative when there are no such choices.
double top_quarter_share(const RoutingProfile& p, const RoutingProfile::Layer& l, bool decode_only) {
  std::vector<double> s(size_t(l.n_expert));
  for (int64_t e = 0; e < l.n_expert; ++e) s[size_t(e)] = p.share(l, e, decode_only);
  if (std::accumulate(s.begin(), s.end(), 0.0) <= 0) return -1;
  std::sort(s.begin(), s.end(), std::greater<>());
  const size_t quarter = size_t((l.n_expert + 3) / 4);
  return std::accumulate(s.begin(), s.begin() + ptrdiff_t(quarter), 0.0);
}

uint64_t tokens(const std::vector<uint64_t>& counts, int64_t n_used) {
  long double sum = 0;  // counts from a file may be near 2^64 each
  for (uint64_t c : counts) sum += (long double)c;
  return uint64_t(std::min<long double>(sum / (long double)n_used, 1.8e19L));
}

std::string percent(double x) {
  if (x < 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
  return buf;
}

}  // namespace

int profile_show_main(int argc, char** argv) {
  const char* path = nullptr;
  int top = 4;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--top") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 0 || v > 65536) {
        std::fprintf(stderr, "kt-gguf profile-show: --top: expected a count from 0 to 65536, got '%s'\n", argv[i]);
        return 2;
      }
      top = int(v);
    } else if (!path && argv[i][0] != '-') {
      path = argv[i];
    } else {
      std::fprintf(stderr, "kt-gguf profile-show: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!path) {
    std::fprintf(stderr, "usage: kt-gguf profile-show PROFILE.json [--top N]\n");
    return 2;
  }
  auto p = read_routing_profile(path);
  if (!p.ok()) {
    std::fprintf(stderr, "kt-gguf: %s\n", p.error().message.c_str());
    return 1;
  }
  std::printf("%s: %s, gguf fingerprint %016llx, %zu MoE layers\n", path, printable(p->arch).c_str(),
              (unsigned long long)p->gguf_fingerprint, p->layers.size());
  std::printf("%5s %7s %4s %11s %11s %9s %9s %7s %9s  %s\n", "layer", "experts", "used", "prefill tok", "decode tok",
              "top 25%", "(decode)", "repeat", "distinct", "hottest experts: share of all choices");
  double sum_all = 0, sum_decode = 0;
  int n_all = 0, n_decode = 0;
  for (const RoutingProfile::Layer& l : p->layers) {
    const double all = top_quarter_share(*p, l, false), dec = top_quarter_share(*p, l, true);
    if (all >= 0) sum_all += all, ++n_all;
    if (dec >= 0) sum_decode += dec, ++n_decode;
    std::vector<int64_t> order(size_t(l.n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return p->share(l, x, false) > p->share(l, y, false); });
    std::string hottest;
    for (int64_t k = 0; k < std::min<int64_t>(top, l.n_expert) && all >= 0; ++k) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s%lld:%.1f%%", k ? " " : "", (long long)order[size_t(k)],
                    100.0 * p->share(l, order[size_t(k)], false));
      hottest += buf;
    }
    char distinct[24] = "-";
    if (l.decode_steps) std::snprintf(distinct, sizeof distinct, "%.2f", double(l.distinct_in_steps) / double(l.decode_steps));
    const double repeat = l.repeat_chances ? double(l.repeats) / double(l.repeat_chances) : -1;
    std::printf("%5d %7lld %4lld %11llu %11llu %9s %9s %7s %9s  %s\n", l.layer, (long long)l.n_expert,
                (long long)l.n_used, (unsigned long long)tokens(l.prefill, l.n_used),
                (unsigned long long)tokens(l.decode, l.n_used), percent(all).c_str(), percent(dec).c_str(),
                percent(repeat).c_str(), distinct, hottest.c_str());
  }
  std::printf("mean over layers: the hottest 25%% of experts take %s of routed choices (%s in decode)\n",
              percent(n_all ? sum_all / n_all : -1).c_str(), percent(n_decode ? sum_decode / n_decode : -1).c_str());
  return 0;
}

int profile_merge_main(int argc, char** argv) {
  std::vector<const char*> inputs;
  const char* out = nullptr;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (argv[i][0] != '-') inputs.push_back(argv[i]);
    else {
      std::fprintf(stderr, "kt-gguf profile-merge: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty() || !out) {
    std::fprintf(stderr, "usage: kt-gguf profile-merge A.json B.json ... -o OUT.json\n"
                         "  adds the counts of routing profiles of one model\n");
    return 2;
  }
  Result<RoutingProfile> merged = Error{};
  for (const char* in : inputs) {
    auto p = read_routing_profile(in);
    if (!p.ok()) {
      std::fprintf(stderr, "kt-gguf: %s\n", p.error().message.c_str());
      return 1;
    }
    if (merged.ok()) {
      auto m = merge_routing_profiles(*merged, *p);
      if (!m.ok()) {
        std::fprintf(stderr, "kt-gguf: %s: %s (against %s)\n", in, m.error().message.c_str(), inputs[0]);
        return 1;
      }
      merged = std::move(m);
    } else {
      merged = std::move(p);
    }
  }
  if (auto s = write_routing_profile(out, *merged); !s.ok()) {
    std::fprintf(stderr, "kt-gguf: %s\n", s.error().message.c_str());
    return 1;
  }
  return 0;
}

int profile_synth_main(int argc, char** argv) {
  const char *model = nullptr, *out = nullptr, *routing = "zipf:1.0";
  uint64_t seed = 42, tokens = 100000;  // kt-bench e2e forces its timed run with seed 42
  for (int i = 0; i < argc; ++i) {
    const bool has = i + 1 < argc;
    if (!std::strcmp(argv[i], "-o") && has) out = argv[++i];
    else if (!std::strcmp(argv[i], "--routing") && has) routing = argv[++i];
    else if (!std::strcmp(argv[i], "--seed") && has) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--tokens") && has) tokens = std::strtoull(argv[++i], nullptr, 10);
    else if (argv[i][0] != '-' && !model) model = argv[i];
    else {
      std::fprintf(stderr, "kt-gguf profile-synth: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!model || !out || tokens == 0) {
    std::fprintf(stderr, "usage: kt-gguf profile-synth MODEL.gguf [--routing zipf:S|uniform|profile:F] [--seed N]\n"
                         "                             [--tokens N] -o OUT.json\n"
                         "  the expected decode counts of N tokens routed as kt-bench e2e --routing forces them\n");
    return 2;
  }
  auto dist = parse_routing_distribution(routing);
  auto g = GgufFile::open(model);
  if (!dist.ok() || !g.ok()) {
    std::fprintf(stderr, "kt-gguf: %s\n", (!dist.ok() ? dist.error() : g.error()).message.c_str());
    return 1;
  }
  int64_t n_used = 0;
  const std::string used_key = std::string(g->architecture()) + ".expert_used_count";
  if (const GgufValue* v = g->find(used_key); !v || !v->get_i64(&n_used) || n_used <= 0) {
    std::fprintf(stderr, "kt-gguf: %s: no %s: not a model with routed experts\n", model, used_key.c_str());
    return 1;
  }
  ForcedRouting forced(*dist, seed);
  RoutingProfile p;
  p.gguf_fingerprint = gguf_fingerprint(*g);
  p.arch = std::string(g->architecture());
  for (const GgufTensor& t : g->tensors()) {
    int layer = -1;
    char tail[64] = {};
    if (std::sscanf(t.name.c_str(), "blk.%d.%63s", &layer, tail) != 2 || std::strcmp(tail, "ffn_gate_exps.weight"))
      continue;
    RoutingProfile::Layer l;
    l.layer = layer;
    l.n_expert = t.ne[2];
    l.n_used = std::min(n_used, l.n_expert);
    l.prefill.assign(size_t(l.n_expert), 0);
    for (double pi : forced.inclusion(layer, l.n_expert, l.n_used)) l.decode.push_back(uint64_t(pi * double(tokens) + 0.5));
    l.decode_steps = tokens;
    l.distinct_in_steps = tokens * uint64_t(l.n_used);
    p.layers.push_back(std::move(l));
  }
  std::sort(p.layers.begin(), p.layers.end(), [](const auto& a, const auto& b) { return a.layer < b.layer; });
  if (p.layers.empty()) {
    std::fprintf(stderr, "kt-gguf: %s has no blk.N.ffn_gate_exps.weight tensors\n", model);
    return 1;
  }
  if (auto st = write_routing_profile(out, p); !st.ok()) {
    std::fprintf(stderr, "kt-gguf: %s\n", st.error().message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace kt::gguf_tool
