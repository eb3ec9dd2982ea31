// Routing profiles (runtime/routing_profile.h) and the forced routing kt-bench
// draws from (runtime/routing_hooks.h): the file round-trips, merging adds
// counts and refuses other models, every hostile input is one line; Zipf and
// profile-driven draws reproduce their target frequencies, are distinct per
// token and repeat for a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "runtime/routing_hooks.h"
#include "runtime/routing_profile.h"

namespace kt {
namespace {

RoutingProfile sample_profile() {
  RoutingProfile p;
  p.gguf_fingerprint = 0x0123456789abcdefull;
  p.arch = "deepseek2";
  RoutingProfile::Layer a;
  a.layer = 1;
  a.n_expert = 4;
  a.n_used = 2;
  a.prefill = {3, 1, 0, 4};
  a.decode = {6, 0, 2, 0};
  a.decode_steps = 4;
  a.distinct_in_steps = 8;
  a.repeats = 3;
  a.repeat_chances = 6;
  RoutingProfile::Layer b = a;
  b.layer = 3;
  b.prefill = {0, 0, 0, 0};
  b.decode = {UINT64_MAX - 5, 1, 2, 2};
  p.layers = {a, b};
  return p;
}

void expect_same(const RoutingProfile& x, const RoutingProfile& y) {
  EXPECT_EQ(x.gguf_fingerprint, y.gguf_fingerprint);
  EXPECT_EQ(x.arch, y.arch);
  ASSERT_EQ(x.layers.size(), y.layers.size());
  for (size_t i = 0; i < x.layers.size(); ++i) {
    const auto &a = x.layers[i], &b = y.layers[i];
    EXPECT_EQ(a.layer, b.layer);
    EXPECT_EQ(a.n_expert, b.n_expert);
    EXPECT_EQ(a.n_used, b.n_used);
    EXPECT_EQ(a.prefill, b.prefill);
    EXPECT_EQ(a.decode, b.decode);
    EXPECT_EQ(a.decode_steps, b.decode_steps);
    EXPECT_EQ(a.distinct_in_steps, b.distinct_in_steps);
    EXPECT_EQ(a.repeats, b.repeats);
    EXPECT_EQ(a.repeat_chances, b.repeat_chances);
  }
}

TEST(RoutingProfile, RoundTripsThroughTextAndFile) {
  const RoutingProfile p = sample_profile();
  const std::string text = routing_profile_json(p);
  EXPECT_NE(text.find("\"gguf_fingerprint\": \"0123456789abcdef\""), std::string::npos) << text;
  auto back = parse_routing_profile(text, "p.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  expect_same(p, *back);

  const std::string path = testing::TempDir() + "routing_profile_test.json";
  ASSERT_TRUE(write_routing_profile(path, p).ok());
  auto read = read_routing_profile(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  expect_same(p, *read);
  std::remove(path.c_str());

  RoutingProfile empty;
  auto e = parse_routing_profile(routing_profile_json(empty), "e.json");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_TRUE(e->layers.empty());
}

TEST(RoutingProfile, ArchWithOddBytesStillWritesValidJson) {
  RoutingProfile p = sample_profile();
  p.arch = std::string("dee\"p\n\xff", 7);
  auto back = parse_routing_profile(routing_profile_json(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->arch.substr(0, 6), "dee\"p\n");  // the invalid byte becomes U+FFFD
}

TEST(RoutingProfile, MissingFileIsOneLine) {
  auto r = read_routing_profile("/nonexistent/p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "/nonexistent/p.json: cannot open the routing profile");
}

TEST(RoutingProfile, MergeAddsCounts) {
  RoutingProfile a = sample_profile();
  a.layers[1].decode = {1, 1, 2, 2};
  auto m = merge_routing_profiles(a, a);
  ASSERT_TRUE(m.ok()) << m.error().message;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const auto &x = a.layers[i], &y = m->layers[i];
    for (size_t e = 0; e < x.prefill.size(); ++e) {
      EXPECT_EQ(y.prefill[e], 2 * x.prefill[e]);
      EXPECT_EQ(y.decode[e], 2 * x.decode[e]);
    }
    EXPECT_EQ(y.decode_steps, 2 * x.decode_steps);
    EXPECT_EQ(y.distinct_in_steps, 2 * x.distinct_in_steps);
    EXPECT_EQ(y.repeats, 2 * x.repeats);
    EXPECT_EQ(y.repeat_chances, 2 * x.repeat_chances);
  }
  // Adding counts leaves shares as they were.
  EXPECT_DOUBLE_EQ(m->share(m->layers[0], 0, false), a.share(a.layers[0], 0, false));
}

TEST(RoutingProfile, MergeRefusesOtherModelsAndShapes) {
  const RoutingProfile a = sample_profile();
  auto expect_refused = [&](const RoutingProfile& b, const std::string& says) {
    auto m = merge_routing_profiles(a, b);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find(says), std::string::npos) << m.error().message;
    EXPECT_EQ(m.error().message.find('\n'), std::string::npos);
  };
  RoutingProfile b = a;
  b.gguf_fingerprint ^= 1;
  expect_refused(b, "different models");
  b = a;
  b.layers.pop_back();
  expect_refused(b, "2 and 1 MoE layers");
  b = a;
  b.layers[0].layer = 2;
  expect_refused(b, "different shapes: layer 1");
  b = a;
  b.layers[1].n_used = 3;
  expect_refused(b, "different shapes: layer 3");
  b = a;
  b.layers[0].n_expert = 5;
  b.layers[0].prefill.push_back(0);
  b.layers[0].decode.push_back(0);
  expect_refused(b, "different shapes");
  // Layer 3's first decode count is 2^64 - 6: doubling it overflows.
  auto m = merge_routing_profiles(a, a);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, "layer 3: the merged counts overflow 64 bits");
}

TEST(RoutingProfile, Share) {
  const RoutingProfile p = sample_profile();
  const auto& l = p.layers[0];  // prefill {3,1,0,4}, decode {6,0,2,0}: 16 choices, 8 in decode
  EXPECT_DOUBLE_EQ(p.share(l, 0, false), 9.0 / 16);
  EXPECT_DOUBLE_EQ(p.share(l, 3, false), 4.0 / 16);
  EXPECT_DOUBLE_EQ(p.share(l, 0, true), 6.0 / 8);
  EXPECT_DOUBLE_EQ(p.share(l, 1, true), 0.0);
  EXPECT_DOUBLE_EQ(p.share(l, -1, false), 0.0);
  EXPECT_DOUBLE_EQ(p.share(l, 4, false), 0.0);
  double sum = 0;
  for (int64_t e = 0; e < 4; ++e) sum += p.share(p.layers[1], e, true);
  EXPECT_NEAR(sum, 1.0, 1e-12);  // counts near 2^64 do not wrap
  RoutingProfile::Layer none = l;
  none.prefill.assign(4, 0);
  none.decode.assign(4, 0);
  EXPECT_DOUBLE_EQ(p.share(none, 0, false), 0.0);
}

// Every hostile input: refused with one line that names the file.
TEST(RoutingProfile, HostileInputsAreOneLine) {
  const std::string good_layer =
      R"({"layer":1,"n_expert":2,"n_used":1,"prefill":[1,2],"decode":[0,1],"decode_steps":1,"distinct_in_steps":1,"repeats":0,"repeat_chances":0})";
  auto doc = [](const std::string& layers, const std::string& head = R"("format":"kt-routing-profile","version":1,"gguf_fingerprint":"00000000000000ff","arch":"x")") {
    std::string d = "{";  // appended, not "{" + head: GCC 12 warns falsely (-Wrestrict) on that
    d += head;
    d += R"(,"layers":[)";
    d += layers;
    return d + "]}";
  };
  auto layer_with = [&](const std::string& from, const std::string& to) {
    std::string s = good_layer;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  ASSERT_TRUE(parse_routing_profile(doc(good_layer), "h.json").ok());
  std::string many_layers;
  for (int i = 0; i < 4097; ++i) {
    if (i) many_layers += ",";
    many_layers += layer_with("\"layer\":1", "\"layer\":" + std::to_string(i));
  }
  const std::pair<std::string, std::string> cases[] = {
      {"", "h.json:1:1: not valid JSON"},
      {"{\n\"format\": ", "h.json:2:11: not valid JSON"},
      {"[]", "expected a JSON object, found array"},
      {"{\"format\":\"gguf\"}", "not a routing profile"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":2,"gguf_fingerprint":"00000000000000ff","arch":"x")"),
       "routing profile version 2, this kt reads version 1"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":1,"gguf_fingerprint":"ff","arch":"x")"),
       "gguf_fingerprint 'ff' is not 16 hex digits"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":1,"gguf_fingerprint":"00000000000000fg","arch":"x")"),
       "is not 16 hex digits"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":1,"gguf_fingerprint":255,"arch":"x")"),
       "\"gguf_fingerprint\" must be a string"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":1,"gguf_fingerprint":"00000000000000ff","arch":7)"),
       "\"arch\" must be a string"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":1,"gguf_fingerprint":"00000000000000ff","arch":"x","extra":1)"),
       "unknown key 'extra'"},
      {doc(good_layer, R"("format":"kt-routing-profile","version":1,"version":1,"gguf_fingerprint":"00000000000000ff","arch":"x")"),
       "key 'version' appears twice in one object"},
      {R"({"format":"kt-routing-profile","version":1,"gguf_fingerprint":"00000000000000ff","arch":"x","layers":{}})",
       "\"layers\" must be an array"},
      {doc("7"), "layers[0]: expected an object, found number"},
      {doc(layer_with(R"("n_used":1,)", "")), "layers[0]: missing \"n_used\""},
      {doc(layer_with(R"("n_used":1)", R"("n_used":1,"hot":[])")), "layers[0]: unknown key 'hot'"},
      {doc(layer_with(R"("n_used":1)", R"("n_used":1,"n_used":1)")), "key 'n_used' appears twice"},
      {doc(layer_with(R"("n_expert":2)", R"("n_expert":0)")), "layers[0].n_expert: 0 is outside 1..65536"},
      {doc(layer_with(R"("n_expert":2)", R"("n_expert":65537)")), "layers[0].n_expert: 65537 is outside 1..65536"},
      {doc(layer_with(R"("n_used":1)", R"("n_used":3)")), "layers[0].n_used: 3 is outside 1..2"},
      {doc(layer_with(R"("layer":1)", R"("layer":-1)")), "layers[0].layer: expected a non-negative integer"},
      {doc(layer_with(R"("layer":1)", R"("layer":1048577)")), "layers[0].layer: 1048577 is outside"},
      {doc(layer_with("[1,2]", "[1]")), "layers[0].prefill: 1 counts, n_expert is 2"},
      {doc(layer_with("[1,2]", "{}")), "layers[0].prefill: expected an array, found object"},
      {doc(layer_with("[0,1]", "[0,-1]")), "layers[0].decode[1]: expected a non-negative integer below 2^64, found -1"},
      {doc(layer_with("[0,1]", "[0,1.5]")), "layers[0].decode[1]: expected a non-negative integer below 2^64, found 1.5"},
      {doc(layer_with("[0,1]", "[0,18446744073709551616]")), "layers[0].decode[1]: expected a non-negative integer"},
      {doc(layer_with("[0,1]", "[0,\"1\"]")), "layers[0].decode[1]: expected a non-negative integer below 2^64, found string"},
      {doc(layer_with(R"("repeats":0)", R"("repeats":1)")), "layers[0]: repeats (1) exceed repeat_chances (0)"},
      {doc(layer_with(R"("decode_steps":1)", R"("decode_steps":null)")), "layers[0].decode_steps: expected a non-negative"},
      {doc(good_layer + "," + good_layer), "layers[1]: layer 1 repeats (layers must be sorted and unique)"},
      {doc(layer_with("\"layer\":1", "\"layer\":5") + "," + good_layer), "layers[1]: layer 1 is out of order"},
      {doc(many_layers), "4097 layers, more than 4096"},
      {std::string(20, '[') + std::string(20, ']'), "nested deeper than 8 levels"},
      {doc(good_layer) + "x", "not valid JSON"},
      {"{\"format\":\"kt-routing-profile\xff\"}", "not valid JSON"},
  };
  for (const auto& [text, says] : cases) {
    auto r = parse_routing_profile(text, "h.json");
    ASSERT_FALSE(r.ok()) << text.substr(0, 200);
    const std::string& m = r.error().message;
    EXPECT_EQ(m.rfind("h.json", 0), 0u) << m;
    EXPECT_NE(m.find(says), std::string::npos) << "wanted '" << says << "' in: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_LT(m.size(), 400u) << m;
  }
}

// ---- RoutingStats -> profile ----------------------------------------------------

struct Events {
  std::vector<int32_t> tok, pos, slot, ids;
  std::vector<float> w;
  kern::Step step;
  kern::RouteEvent ev;
  Events(int layer, int64_t n_tokens, int64_t n_expert, int64_t n_used)
      : tok(size_t(n_tokens), 0), pos(size_t(n_tokens)), slot(size_t(n_tokens), 0),
        ids(size_t(n_tokens * n_used), 0), w(size_t(n_tokens * n_used), 1.0f) {
    std::iota(pos.begin(), pos.end(), 0);
    step = kern::Step{n_tokens, tok.data(), pos.data(), slot.data(), 0, nullptr};
    ev.layer = layer;
    ev.step = &step;
    ev.n_expert = n_expert;
    ev.n_used = n_used;
    ev.ids = ids.data();
    ev.weights = w.data();
  }
};

TEST(RoutingProfile, FromRoutingStats) {
  RoutingStats stats;
  Events pre(2, 2, 4, 2);
  pre.ids = {0, 1, 1, 3};  // two prompt tokens: {0,1} then {1,3}
  stats.set_decode(false);
  stats.on_route(pre.ev);
  Events dec(2, 1, 4, 2);
  dec.ids = {3, 2};
  stats.set_decode(true);
  stats.on_route(dec.ev);
  const RoutingProfile p = routing_profile_from(stats, 42, "deepseek2", 6);
  ASSERT_EQ(p.layers.size(), 1u);
  const auto& l = p.layers[0];
  EXPECT_EQ(l.layer, 2);
  EXPECT_EQ(l.n_expert, 4);
  EXPECT_EQ(l.n_used, 2);  // from the events, not the fallback
  EXPECT_EQ(l.prefill, (std::vector<uint64_t>{1, 2, 0, 1}));
  EXPECT_EQ(l.decode, (std::vector<uint64_t>{0, 0, 1, 1}));
  EXPECT_EQ(l.decode_steps, 1u);
  EXPECT_EQ(l.distinct_in_steps, 2u);
  // Token 2 re-chose 1 of token 1's {0,1}; token 3 re-chose 3 of {1,3}.
  EXPECT_EQ(l.repeats, 2u);
  EXPECT_EQ(l.repeat_chances, 4u);
  EXPECT_EQ(p.gguf_fingerprint, 42u);
  auto back = parse_routing_profile(routing_profile_json(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
}

// ---- forced routing -------------------------------------------------------------

// Draws n_tokens tokens through the hook (in steps of 64) and counts how often
// each expert was chosen; checks every token's choices are distinct and in range.
std::vector<double> draw_frequencies(ForcedRouting& f, int layer, int64_t n_expert, int64_t n_used, int64_t n_tokens) {
  std::vector<double> freq(size_t(n_expert), 0.0);
  Events e(layer, 64, n_expert, n_used);
  for (int64_t done = 0; done < n_tokens; done += 64) {
    f.on_route(e.ev);
    for (int64_t t = 0; t < 64; ++t) {
      std::set<int32_t> chosen;
      for (int64_t k = 0; k < n_used; ++k) {
        const int32_t id = e.ids[size_t(t * n_used + k)];
        EXPECT_TRUE(id >= 0 && id < n_expert) << id;
        if (id < 0 || id >= n_expert) return freq;
        chosen.insert(id);
        freq[size_t(id)] += 1.0;
      }
      EXPECT_EQ(int64_t(chosen.size()), n_used) << "token " << done + t << ": an expert chosen twice";
    }
  }
  for (double& x : freq) x /= double(n_tokens);
  return freq;
}

TEST(ForcedRouting, InclusionProbabilitiesCapAtOne) {
  // 10:1:1:1 with 2 choices: the first would need 2 * 10/13 > 1, so it is in
  // every token and the other choice is shared evenly.
  const auto pi = inclusion_probabilities({10, 1, 1, 1}, 2);
  EXPECT_DOUBLE_EQ(pi[0], 1.0);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(pi[size_t(i)], 1.0 / 3, 1e-12);
  // Fewer experts with weight than choices: the zero-weight ones fill in evenly.
  const auto z = inclusion_probabilities({5, 0, 0, 0, 0}, 3);
  EXPECT_DOUBLE_EQ(z[0], 1.0);
  for (int i = 1; i < 5; ++i) EXPECT_NEAR(z[size_t(i)], 0.5, 1e-12);
  const auto u = inclusion_probabilities({0, 0, 0, 0}, 1);
  for (double x : u) EXPECT_DOUBLE_EQ(x, 0.25);
}

// Zipf(1.0) with 2 of 64: no expert is capped, so each token includes the
// expert of rank r with probability 2 * (1/r) / H_64. 200k tokens: the standard
// error of a frequency is at most sqrt(0.43 * 0.57 / 200000) = 0.0011; the
// tolerance is 0.005 (4.5 sigma), and the ranks' order must hold at the top.
TEST(ForcedRouting, ZipfFrequenciesMatch) {
  auto d = parse_routing_distribution("zipf:1.0");
  ASSERT_TRUE(d.ok()) << d.error().message;
  ForcedRouting f(*d, 5);
  const int64_t n_expert = 64, n_used = 2, n_tokens = 200000;
  const std::vector<double> freq = draw_frequencies(f, 3, n_expert, n_used, n_tokens);
  const std::vector<double>& pi = f.inclusion(3, n_expert, n_used);
  double h = 0;
  for (int r = 1; r <= n_expert; ++r) h += 1.0 / r;
  std::vector<double> sorted_pi = pi;
  std::sort(sorted_pi.begin(), sorted_pi.end(), std::greater<>());
  for (int r = 1; r <= n_expert; ++r)  // the target is Zipf's, computed here independently
    EXPECT_NEAR(sorted_pi[size_t(r - 1)], double(n_used) / r / h, 1e-12) << "rank " << r;
  for (int64_t e = 0; e < n_expert; ++e) EXPECT_NEAR(freq[size_t(e)], pi[size_t(e)], 0.005) << "expert " << e;
  EXPECT_NEAR(std::accumulate(freq.begin(), freq.end(), 0.0), double(n_used), 1e-9);
}

// Zipf(1.0) with 6 of 64 (V2-Lite's shape): the hottest experts are capped at
// every token; the draws still follow the capped targets.
TEST(ForcedRouting, ZipfCappedFrequenciesMatch) {
  ForcedRouting f(*parse_routing_distribution("zipf:1.0"), 9);
  const std::vector<double> freq = draw_frequencies(f, 0, 64, 6, 100000);
  const std::vector<double>& pi = f.inclusion(0, 64, 6);
  EXPECT_DOUBLE_EQ(*std::max_element(pi.begin(), pi.end()), 1.0);
  for (size_t e = 0; e < 64; ++e) EXPECT_NEAR(freq[e], pi[e], 0.006) << "expert " << e;
}

TEST(ForcedRouting, ZipfHotExpertsDifferByLayer) {
  ForcedRouting f(*parse_routing_distribution("zipf:1.2"), 1);
  std::set<int64_t> hottest;
  for (int layer = 0; layer < 8; ++layer) {
    const std::vector<double>& pi = f.inclusion(layer, 256, 8);
    hottest.insert(std::max_element(pi.begin(), pi.end()) - pi.begin());
  }
  EXPECT_GE(hottest.size(), 4u);
  // The ranking depends on the seed and layer alone, not on what was drawn before.
  ForcedRouting g(*parse_routing_distribution("zipf:1.2"), 1);
  (void)draw_frequencies(g, 5, 256, 8, 640);
  EXPECT_EQ(g.inclusion(2, 256, 8), f.inclusion(2, 256, 8));
}

// A profile of one layer with these counts.
RoutingProfile one_layer(int layer, int64_t n_used, std::vector<uint64_t> prefill, std::vector<uint64_t> decode) {
  RoutingProfile p;
  RoutingProfile::Layer l;
  l.layer = layer;
  l.n_expert = int64_t(decode.size());
  l.n_used = n_used;
  l.prefill = std::move(prefill);
  l.decode = std::move(decode);
  p.layers = {l};
  return p;
}

TEST(ForcedRouting, ProfileFrequenciesMatch) {
  // The prefill counts are ignored: the layer has decode counts.
  const RoutingProfile p = one_layer(1, 2, {0, 0, 0, 0, 0, 0, 0, 100}, {40, 25, 15, 10, 6, 4, 0, 0});
  const RoutingProfile::Layer& l = p.layers[0];
  ForcedRouting f(profile_distribution(p, "profile:test"), 3);
  const std::vector<double> freq = draw_frequencies(f, 1, 8, 2, 100000);
  // A token includes expert e with probability n_used * its share of choices
  // (none exceeds 1 here); frequencies per choice are the profile's shares.
  for (int64_t e = 0; e < 8; ++e)
    EXPECT_NEAR(freq[size_t(e)] / 2, p.share(l, e, true), 0.004) << "expert " << e;
  EXPECT_EQ(freq[6], 0.0);
  EXPECT_EQ(freq[7], 0.0);
  EXPECT_TRUE(f.unmatched_layers().empty());
  // Another layer of 8 experts borrows the profile's; one of 12 has none.
  (void)draw_frequencies(f, 7, 8, 2, 64);
  EXPECT_TRUE(f.unmatched_layers().empty());
  (void)draw_frequencies(f, 2, 12, 2, 64);
  EXPECT_EQ(f.unmatched_layers(), std::vector<int>{2});
}

// A profile of 8 experts drives a layer of 32: expert e stands in for profile
// expert e % 8, the four sharing its count.
TEST(ForcedRouting, ProfileStretchesToMoreExperts) {
  const RoutingProfile p = one_layer(0, 2, std::vector<uint64_t>(8, 0), {40, 25, 15, 10, 6, 4, 0, 0});
  const RoutingProfile::Layer& l = p.layers[0];
  ForcedRouting f(profile_distribution(p, "profile:test"), 5);
  const std::vector<double> freq = draw_frequencies(f, 3, 32, 6, 100000);
  EXPECT_TRUE(f.unmatched_layers().empty());
  for (int64_t e = 0; e < 32; ++e)
    EXPECT_NEAR(freq[size_t(e)] / 6, p.share(l, e % 8, true) / 4, 0.003) << "expert " << e;
  EXPECT_EQ(freq[6], 0.0);
  EXPECT_EQ(freq[31], 0.0);
}

TEST(ForcedRouting, PrefillCountsWhenNoDecode) {
  const RoutingProfile p = one_layer(0, 1, {0, 0, 0, 9}, {0, 0, 0, 0});
  ForcedRouting f(profile_distribution(p, "profile:test"), 3);
  const std::vector<double> freq = draw_frequencies(f, 0, 4, 1, 640);
  EXPECT_EQ(freq[3], 1.0);
}

TEST(ForcedRouting, DeterministicForASeed) {
  for (const char* spec : {"uniform", "zipf:1.0"}) {
    auto d = parse_routing_distribution(spec);
    ASSERT_TRUE(d.ok());
    ForcedRouting a(*d, 17), b(*d, 17), c(*d, 18);
    Events ea(0, 64, 64, 6), eb(0, 64, 64, 6), ec(0, 64, 64, 6);
    a.on_route(ea.ev);
    b.on_route(eb.ev);
    c.on_route(ec.ev);
    EXPECT_EQ(ea.ids, eb.ids) << spec;
    EXPECT_NE(ea.ids, ec.ids) << spec;
  }
  // The uniform distribution is the old ForcedRouting(seed), draw for draw.
  ForcedRouting old(17), now(RoutingDistribution{}, 17);
  Events x(0, 64, 64, 6), y(0, 64, 64, 6);
  old.on_route(x.ev);
  now.on_route(y.ev);
  EXPECT_EQ(x.ids, y.ids);
}

TEST(ForcedRouting, UniformDrawsAreDistinctAndEven) {
  ForcedRouting f(7);
  const std::vector<double> freq = draw_frequencies(f, 0, 16, 4, 64000);
  for (double x : freq) EXPECT_NEAR(x, 0.25, 0.01);
}

// Only uniform forcing, and only where the caller allows it (nothing else
// watching the routes), lets a GPU router draw the experts itself.
TEST(ForcedRouting, DeviceDrawsOnlyForUniformWhenAllowed) {
  ForcedRouting uniform(*parse_routing_distribution("uniform"), 9);
  EXPECT_EQ(uniform.device_uniform_seed(), 0u);
  uniform.allow_device_draws(true);
  EXPECT_EQ(uniform.device_uniform_seed(), 9u);
  ForcedRouting unseeded(*parse_routing_distribution("uniform"), 0);
  unseeded.allow_device_draws(true);
  EXPECT_NE(unseeded.device_uniform_seed(), 0u);  // 0 would mean "no device draws"
  ForcedRouting zipf(*parse_routing_distribution("zipf:1.0"), 9);
  zipf.allow_device_draws(true);
  EXPECT_EQ(zipf.device_uniform_seed(), 0u);
  RoutingChain chain;
  chain.add(&uniform);
  EXPECT_EQ(chain.device_uniform_seed(), 0u);  // a chain may hold hooks that watch
}

TEST(ForcedRouting, BadSpecsAreOneLine) {
  for (const char* spec : {"zipf:", "zipf:x", "zipf:-1", "zipf:17", "zipf:nan", "normal", "profile:", "profile:/nonexistent.json"}) {
    auto d = parse_routing_distribution(spec);
    ASSERT_FALSE(d.ok()) << spec;
    EXPECT_EQ(d.error().message.find('\n'), std::string::npos);
  }
  EXPECT_EQ(parse_routing_distribution("zipf:x").error().message,
            "--routing zipf:x: the Zipf exponent must be a number from 0 to 16");
  EXPECT_EQ(parse_routing_distribution("profile:/nonexistent.json").error().message,
            "/nonexistent.json: cannot open the routing profile");
}

}  // namespace
}  // namespace kt
