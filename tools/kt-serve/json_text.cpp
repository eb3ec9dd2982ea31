#include "tools/kt-serve/json_text.h"

#include <vector>

namespace kt::serve {

namespace {

struct TooDeep {};
struct TooWide {};

// Parses body as one JSON object, refusing in the parser's callback (which
// sees every value with its depth, before a deep structure is built) more
// than kMaxJsonDepth levels and, when count_keys, objects of more than
// kMaxJsonKeys keys.
template <class J>
Result<J> parse_limited_object(std::string_view body, bool count_keys) {
  if (body.empty()) return err("the request body is empty: a JSON object was expected");
  try {
    std::vector<size_t> keys;  // per open object
    typename J::parser_callback_t limits = [&keys, count_keys](int depth, typename J::parse_event_t ev, J&) {
      using E = typename J::parse_event_t;
      if (depth > kMaxJsonDepth) throw TooDeep{};
      if (!count_keys) return true;
      if (ev == E::object_start) keys.push_back(0);
      if (ev == E::object_end && !keys.empty()) keys.pop_back();
      if (ev == E::key && !keys.empty() && ++keys.back() > kMaxJsonKeys) throw TooWide{};
      return true;
    };
    J j = J::parse(body, limits);
    if (!j.is_object()) return err("the request body must be a JSON object, not ", j.type_name());
    return j;
  } catch (const TooDeep&) {
    return err("the request body nests deeper than ", kMaxJsonDepth, " levels");
  } catch (const TooWide&) {
    return err("the request body has an object with more than ", kMaxJsonKeys, " keys");
  } catch (const std::exception& e) {
    return err("the request body is not valid JSON: ", printable(e.what(), 200));
  }
}

}  // namespace

Result<nlohmann::json> parse_json_object(std::string_view body) {
  return parse_limited_object<nlohmann::json>(body, false);
}

Result<nlohmann::ordered_json> parse_ordered_json_object(std::string_view body) {
  return parse_limited_object<nlohmann::ordered_json>(body, true);
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace kt::serve
