#include "passes/rules/placement_math.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace kt::rules {
namespace {

struct Suffix {
  std::string_view text;
  uint64_t scale;
};
constexpr Suffix kSuffixes[] = {
    {"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10},
    {"TB", 1000000000000ull}, {"GB", 1000000000ull}, {"MB", 1000000ull}, {"KB", 1000ull},
    {"B", 1},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  const std::string_view all = trim(text);
  std::string_view num = all;
  uint64_t scale = 1;
  for (const Suffix& s : kSuffixes) {
    if (num.size() > s.text.size() && num.substr(num.size() - s.text.size()) == s.text) {
      num = trim(num.substr(0, num.size() - s.text.size()));
      scale = s.scale;
      break;
    }
  }
  double value = 0;
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  if (num.empty() || ec != std::errc() || end != num.data() + num.size() || !(value >= 0) ||
      value * double(scale) >= 1.8e19)
    return err("bad size '", printable(all), "' (a number of bytes, or with B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  return uint64_t(std::llround(value * double(scale)));
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = double(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::optional<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device{};
  if (text == "cuda") return Device{true, 0, false};
  if (text.substr(0, 5) != "cuda:" || text.size() == 5 || text.size() > 8) return std::nullopt;
  int index = 0;
  const std::string_view digits = text.substr(5);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || index < 0) return std::nullopt;
  return Device{true, index, true};
}

OpCost op_cost(const CostInputs& in) {
  OpCost c;
  c.weight_bytes = in.bytes;
  if (in.bytes == 0) return c;
  const double elements = double(in.elements), bytes = double(in.bytes), L = double(in.prefill_len);
  switch (in.kind) {
    case CostKind::Dense:
      c.flops_per_token = 2 * in.elements;
      c.intensity_decode = 2 * elements / bytes;
      c.intensity_prefill = L * c.intensity_decode;
      break;
    case CostKind::Norm:
      c.flops_per_token = 4 * in.elements;
      c.intensity_decode = 4 * elements / bytes;
      c.intensity_prefill = L * c.intensity_decode;
      break;
    case CostKind::Lookup:
      break;
    case CostKind::RoutedExperts: {
      const double share = in.n_experts > 0 ? double(in.top_k) / double(in.n_experts) : 1.0;
      c.flops_per_token = uint64_t(std::llround(2 * elements * share));
      // Batch 1 reads only the chosen experts: as many FLOPs per byte as a linear.
      c.intensity_decode = 2 * elements / bytes;
      // A short prompt may not touch every expert; then only the touched ones
      // move and the intensity cannot fall below decode's.
      c.intensity_prefill = std::max(2 * L * share * elements / bytes, c.intensity_decode);
      break;
    }
  }
  return c;
}

uint64_t kv_cache_bytes(const ModelDims& d, int64_t ctx) {
  const int64_t per_token_layer = d.kv_lora_rank > 0 ? d.kv_lora_rank + d.qk_rope_head_dim
                                                     : 2 * d.kv_heads * d.head_dim;
  return uint64_t(std::max<int64_t>(0, per_token_layer)) * uint64_t(std::max<int64_t>(0, ctx)) *
         uint64_t(std::max<int64_t>(0, d.layers)) * 2;
}

uint64_t activation_bytes(const ModelDims& d, int64_t prefill_len) {
  const uint64_t L = uint64_t(std::max<int64_t>(0, prefill_len));
  const uint64_t widest = uint64_t(std::max({d.intermediate, d.moe_intermediate * d.top_k, d.hidden, int64_t(0)}));
  const uint64_t per_token = 4 * uint64_t(std::max<int64_t>(0, d.hidden)) + 3 * widest;
  return 4 * (L * per_token + L * L * uint64_t(std::max<int64_t>(0, d.heads)) + uint64_t(std::max<int64_t>(0, d.vocab)));
}

}  // namespace kt::rules
