#include "runtime/routing_profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kt {

namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "kt-routing-profile";
constexpr int kVersion = 1;
// Deeper than any profile (3 levels) needs; stops a nested bomb early.
constexpr int kMaxDepth = 8;

struct TooDeep {};
struct DuplicateKey {
  std::string key;
};

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

// Reads one layer object; `at` is its place ("layers[3]").
Result<RoutingProfile::Layer> parse_layer(const json& j, const std::string& where, const std::string& at) {
  if (!j.is_object()) return err(where, ": ", at, ": expected an object, found ", j.type_name());
  static const std::set<std::string> known = {"layer",   "n_expert",          "n_used",  "prefill",       "decode",
                                              "decode_steps", "distinct_in_steps", "repeats", "repeat_chances"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) return err(where, ": ", at, ": unknown key '", printable(k, 48), "'");
  auto field = [&](const char* key) -> Result<const json*> {
    auto it = j.find(key);
    if (it == j.end()) return err(where, ": ", at, ": missing \"", key, "\"");
    return &*it;
  };
  // Every count is a non-negative integer that fits 64 bits (the JSON parser
  // reads those as unsigned; negatives, fractions and larger numbers are not).
  auto count = [&](const json& v, const std::string& place) -> Result<uint64_t> {
    if (!v.is_number_unsigned())
      return err(where, ": ", place, ": expected a non-negative integer below 2^64, found ",
                 v.is_number() ? printable(v.dump(), 40) : std::string(v.type_name()));
    return v.get<uint64_t>();
  };
  auto bounded = [&](const char* key, uint64_t lo, uint64_t hi) -> Result<uint64_t> {
    auto f = field(key);
    if (!f.ok()) return f.error();
    auto v = count(**f, at + "." + key);
    if (!v.ok()) return v.error();
    if (*v < lo || *v > hi) return err(where, ": ", at, ".", key, ": ", *v, " is outside ", lo, "..", hi);
    return *v;
  };
  RoutingProfile::Layer l;
  auto layer = bounded("layer", 0, kProfileMaxLayerIndex);
  if (!layer.ok()) return layer.error();
  l.layer = int(*layer);
  auto n_expert = bounded("n_expert", 1, uint64_t(kProfileMaxExperts));
  if (!n_expert.ok()) return n_expert.error();
  l.n_expert = int64_t(*n_expert);
  auto n_used = bounded("n_used", 1, uint64_t(l.n_expert));
  if (!n_used.ok()) return n_used.error();
  l.n_used = int64_t(*n_used);
  for (const char* key : {"prefill", "decode"}) {
    auto f = field(key);
    if (!f.ok()) return f.error();
    const json& a = **f;
    const std::string place = at + "." + key;
    if (!a.is_array()) return err(where, ": ", place, ": expected an array, found ", a.type_name());
    if (int64_t(a.size()) != l.n_expert)
      return err(where, ": ", place, ": ", a.size(), " counts, n_expert is ", l.n_expert);
    std::vector<uint64_t>& out = std::string_view(key) == "prefill" ? l.prefill : l.decode;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      auto c = count(a[i], place + "[" + std::to_string(i) + "]");
      if (!c.ok()) return c.error();
      out.push_back(*c);
    }
  }
  uint64_t* scalars[] = {&l.decode_steps, &l.distinct_in_steps, &l.repeats, &l.repeat_chances};
  const char* names[] = {"decode_steps", "distinct_in_steps", "repeats", "repeat_chances"};
  for (int i = 0; i < 4; ++i) {
    auto v = bounded(names[i], 0, UINT64_MAX);
    if (!v.ok()) return v.error();
    *scalars[i] = *v;
  }
  if (l.repeats > l.repeat_chances)
    return err(where, ": ", at, ": repeats (", l.repeats, ") exceed repeat_chances (", l.repeat_chances, ")");
  return l;
}

Result<RoutingProfile> parse_document(const json& doc, const std::string& where) {
  if (!doc.is_object()) return err(where, ": expected a JSON object, found ", doc.type_name());
  static const std::set<std::string> known = {"format", "version", "gguf_fingerprint", "arch", "layers"};
  for (const auto& [k, v] : doc.items())
    if (!known.count(k)) return err(where, ": unknown key '", printable(k, 48), "'");
  auto fmt = doc.find("format");
  if (fmt == doc.end() || !fmt->is_string() || fmt->get_ref<const std::string&>() != kFormat)
    return err(where, ": not a routing profile (\"format\" must be \"", kFormat, "\")");
  auto ver = doc.find("version");
  if (ver == doc.end() || !ver->is_number_integer() || ver->get<int64_t>() != kVersion)
    return err(where, ": routing profile version ",
               ver == doc.end() ? std::string("missing") : printable(ver->dump(), 24), ", this kt reads version ",
               kVersion);
  RoutingProfile p;
  auto fp = doc.find("gguf_fingerprint");
  if (fp == doc.end() || !fp->is_string()) return err(where, ": \"gguf_fingerprint\" must be a string of 16 hex digits");
  const std::string& fps = fp->get_ref<const std::string&>();
  if (fps.size() != 16 || fps.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return err(where, ": gguf_fingerprint '", printable(fps, 40), "' is not 16 hex digits");
  p.gguf_fingerprint = std::stoull(fps, nullptr, 16);  // 16 hex digits: cannot throw
  auto arch = doc.find("arch");
  if (arch == doc.end() || !arch->is_string()) return err(where, ": \"arch\" must be a string");
  p.arch = arch->get<std::string>();
  if (p.arch.size() > 256) return err(where, ": arch is ", p.arch.size(), " bytes long (at most 256)");
  auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array()) return err(where, ": \"layers\" must be an array");
  if (layers->size() > kProfileMaxLayers)
    return err(where, ": ", layers->size(), " layers, more than ", kProfileMaxLayers);
  for (size_t i = 0; i < layers->size(); ++i) {
    auto l = parse_layer((*layers)[i], where, "layers[" + std::to_string(i) + "]");
    if (!l.ok()) return l.error();
    if (!p.layers.empty() && l->layer <= p.layers.back().layer)
      return err(where, ": layers[", i, "]: layer ", l->layer, l->layer == p.layers.back().layer ? " repeats" : " is out of order",
                 " (layers must be sorted and unique)");
    p.layers.push_back(std::move(*l));
  }
  return p;
}

// a += b, refusing to wrap.
bool add_to(uint64_t& a, uint64_t b) { return !__builtin_add_overflow(a, b, &a); }

}  // namespace

double RoutingProfile::share(const Layer& l, int64_t e, bool decode_only) const {
  if (e < 0 || size_t(e) >= l.prefill.size() || l.prefill.size() != l.decode.size()) return 0.0;
  // Sums in long double: counts near 2^64 must not wrap.
  long double total = 0, mine = 0;
  for (size_t i = 0; i < l.decode.size(); ++i) {
    const long double c = (long double)l.decode[i] + (decode_only ? 0.0L : (long double)l.prefill[i]);
    total += c;
    if (int64_t(i) == e) mine = c;
  }
  return total > 0 ? double(mine / total) : 0.0;
}

Result<RoutingProfile> parse_routing_profile(std::string_view text, const std::string& where) {
  if (text.size() > kProfileMaxFileBytes)
    return err(where, ": ", text.size(), " bytes, more than a routing profile may have (", kProfileMaxFileBytes, ")");
  json doc;
  try {
    // The callback sees every event with its depth: deep nesting stops before
    // it is built, and a key given twice in one object (which the parser would
    // silently resolve to the last) is an error.
    std::vector<std::set<std::string>> keys;
    json::parser_callback_t check = [&keys](int depth, json::parse_event_t ev, json& parsed) {
      if (depth > kMaxDepth) throw TooDeep{};
      if (ev == json::parse_event_t::object_start) keys.emplace_back();
      else if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
      else if (ev == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
        throw DuplicateKey{parsed.get<std::string>()};
      return true;
    };
    doc = json::parse(text.begin(), text.end(), check);
  } catch (const TooDeep&) {
    return err(where, ": nested deeper than ", kMaxDepth, " levels: not a routing profile");
  } catch (const DuplicateKey& d) {
    return err(where, ": key '", printable(d.key, 48), "' appears twice in one object");
  } catch (const json::parse_error& e) {
    // nlohmann says "[json.exception.parse_error.101] parse error at line L,
    // column C: <why>"; keep the why, and name the place our way.
    std::string why = e.what();
    if (size_t c = why.find(": "); c != std::string::npos) why = why.substr(c + 2);
    const size_t at = std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size());
    const std::string_view before = text.substr(0, at);
    const size_t line = 1 + size_t(std::count(before.begin(), before.end(), '\n'));
    const size_t nl = before.rfind('\n');
    const size_t col = 1 + (nl == std::string_view::npos ? at : at - nl - 1);
    return err(where, ":", line, ":", col, ": not valid JSON: ", printable(why, 160));
  } catch (const json::exception& e) {
    return err(where, ": not valid JSON: ", printable(e.what(), 160));
  }
  try {  // the accessors above are checked; this is for what nlohmann may still throw
    return parse_document(doc, where);
  } catch (const std::exception& e) {
    return err(where, ": ", printable(e.what(), 160));
  }
}

Result<RoutingProfile> read_routing_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return err(path, ": cannot open the routing profile");
  const std::streamoff size = in.tellg();
  if (size < 0) return err(path, ": cannot read the routing profile");
  if (uint64_t(size) > kProfileMaxFileBytes)
    return err(path, ": ", uint64_t(size), " bytes, more than a routing profile may have (", kProfileMaxFileBytes, ")");
  std::string text(size_t(size), '\0');
  in.seekg(0);
  if (!in.read(text.data(), size)) return err(path, ": cannot read the routing profile");
  return parse_routing_profile(text, path);
}

std::string routing_profile_json(const RoutingProfile& p) {
  // By hand rather than json::dump: one layer's fields on one line and its two
  // count arrays on one line each keep a profile readable and diffable.
  std::ostringstream o;
  auto list = [&o](const std::vector<uint64_t>& v) {
    o << '[';
    for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
    o << ']';
  };
  o << "{\n  \"format\": \"" << kFormat << "\",\n  \"version\": " << kVersion << ",\n  \"gguf_fingerprint\": \""
    << hex16(p.gguf_fingerprint) << "\",\n  \"arch\": "
    << json(p.arch).dump(-1, ' ', false, json::error_handler_t::replace) << ",\n  \"layers\": [";
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const RoutingProfile::Layer& l = p.layers[i];
    o << (i ? "," : "") << "\n    {\"layer\": " << l.layer << ", \"n_expert\": " << l.n_expert
      << ", \"n_used\": " << l.n_used << ", \"decode_steps\": " << l.decode_steps
      << ", \"distinct_in_steps\": " << l.distinct_in_steps << ", \"repeats\": " << l.repeats
      << ", \"repeat_chances\": " << l.repeat_chances << ",\n     \"prefill\": ";
    list(l.prefill);
    o << ",\n     \"decode\": ";
    list(l.decode);
    o << "}";
  }
  o << (p.layers.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return o.str();
}

Status write_routing_profile(const std::string& path, const RoutingProfile& p) {
  const std::string text = routing_profile_json(p);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return err(path, ": cannot create the routing profile");
  out.write(text.data(), std::streamsize(text.size()));
  out.close();
  if (!out) return err(path, ": cannot write the routing profile");
  return ok_status();
}

Result<RoutingProfile> merge_routing_profiles(const RoutingProfile& a, const RoutingProfile& b) {
  if (a.gguf_fingerprint != b.gguf_fingerprint)
    return err("profiles of different models: gguf fingerprint ", hex16(a.gguf_fingerprint), " and ",
               hex16(b.gguf_fingerprint));
  if (a.layers.size() != b.layers.size())
    return err("profiles of different shapes: ", a.layers.size(), " and ", b.layers.size(), " MoE layers");
  RoutingProfile m = a;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    RoutingProfile::Layer& x = m.layers[i];
    const RoutingProfile::Layer& y = b.layers[i];
    if (x.layer != y.layer || x.n_expert != y.n_expert || x.n_used != y.n_used)
      return err("profiles of different shapes: layer ", x.layer, " (", x.n_expert, " experts, ", x.n_used,
                 " used) against layer ", y.layer, " (", y.n_expert, " experts, ", y.n_used, " used)");
    if (x.prefill.size() != y.prefill.size() || x.decode.size() != y.decode.size())
      return err("profiles of different shapes: layer ", x.layer, " has count arrays of different lengths");
    bool ok = true;
    for (size_t e = 0; e < x.prefill.size(); ++e) ok &= add_to(x.prefill[e], y.prefill[e]);
    for (size_t e = 0; e < x.decode.size(); ++e) ok &= add_to(x.decode[e], y.decode[e]);
    ok &= add_to(x.decode_steps, y.decode_steps) && add_to(x.distinct_in_steps, y.distinct_in_steps);
    ok &= add_to(x.repeats, y.repeats) && add_to(x.repeat_chances, y.repeat_chances);
    if (!ok) return err("layer ", x.layer, ": the merged counts overflow 64 bits");
  }
  return m;
}

RoutingProfile routing_profile_from(const RoutingStats& stats, uint64_t fingerprint, const std::string& arch,
                                    int64_t n_used_fallback) {
  RoutingProfile p;
  p.gguf_fingerprint = fingerprint;
  p.arch = arch;
  for (const auto& [layer, s] : stats.layers()) {  // std::map: sorted, unique
    RoutingProfile::Layer l;
    l.layer = layer;
    l.n_expert = int64_t(s.prefill.size());
    l.n_used = s.n_used > 0 ? s.n_used : n_used_fallback;
    l.prefill = s.prefill;
    l.decode = s.decode;
    l.decode_steps = s.decode_steps;
    l.distinct_in_steps = s.distinct_in_steps;
    l.repeats = s.repeats;
    l.repeat_chances = s.repeat_chances;
    p.layers.push_back(std::move(l));
  }
  return p;
}

}  // namespace kt
