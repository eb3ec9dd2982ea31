// Routing profiles: how often each routed expert of each MoE layer was chosen
// in real runs (kt-exec --routing-profile-out), for prefill and decode apart,
// with the temporal locality of the choices. The compiler places hot experts
// on the GPU from them (issue 13); kt-bench routes synthetic models by them.
//
// The file is JSON, tied to the model by the GGUF fingerprint of its header
// (plan_loader.h gguf_fingerprint), so a profile of one model is not applied to
// another by mistake; merging two profiles of a model adds their counts:
//   {"format":"kt-routing-profile","version":1,"gguf_fingerprint":"<16 hex>",
//    "arch":"deepseek2","layers":[{"layer":1,"n_expert":64,"n_used":6,
//    "prefill":[...],"decode":[...],"decode_steps":N,"distinct_in_steps":N,
//    "repeats":N,"repeat_chances":N}, ...]}
// Profiles come from files anyone can hand over: the reader bounds every size
// and answers every malformed input with one line naming the file and place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/result.h"
#include "runtime/routing_hooks.h"

namespace kt {

// Bounds of the reader: far above any model (DeepSeek-V3: 58 MoE layers of
// 256 experts), low enough that a hostile file cannot make it allocate much.
constexpr int64_t kProfileMaxExperts = 65536;
constexpr size_t kProfileMaxLayers = 4096;
constexpr int kProfileMaxLayerIndex = 1 << 20;
constexpr uint64_t kProfileMaxFileBytes = 256ull << 20;

struct RoutingProfile {
  uint64_t gguf_fingerprint = 0;  // runtime/plan_loader.h gguf_fingerprint() of the model
  std::string arch;               // general.architecture
  struct Layer {
    int layer = -1;  // block index (blk.N)
    int64_t n_expert = 0, n_used = 0;
    std::vector<uint64_t> prefill, decode;  // tokens that chose each expert, size n_expert
    uint64_t decode_steps = 0, distinct_in_steps = 0;
    uint64_t repeats = 0, repeat_chances = 0;  // temporal locality (see RoutingStats)
  };
  std::vector<Layer> layers;  // sorted by layer, unique
  // Fraction of a layer's routed choices (prefill+decode, or decode only) that
  // went to expert e; 0 where the layer has no choices (or e is out of range).
  double share(const Layer& l, int64_t e, bool decode_only) const;
};

// Every failure is one line naming the path and the place in the file.
Result<RoutingProfile> read_routing_profile(const std::string& path);
Result<RoutingProfile> parse_routing_profile(std::string_view json, const std::string& where);
std::string routing_profile_json(const RoutingProfile& p);
Status write_routing_profile(const std::string& path, const RoutingProfile& p);
// Same fingerprint, and the same layers with the same shapes: counts added
// (refused where a sum would overflow 64 bits).
Result<RoutingProfile> merge_routing_profiles(const RoutingProfile& a, const RoutingProfile& b);
// The counts RoutingStats gathered; n_used_fallback for a layer whose events
// did not say (none today: every event carries it).
RoutingProfile routing_profile_from(const RoutingStats& stats, uint64_t fingerprint, const std::string& arch,
                                    int64_t n_used_fallback);

}  // namespace kt
