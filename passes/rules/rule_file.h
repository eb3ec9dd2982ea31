// KTransformers' optimize-rule YAML, read exactly as KTransformers reads it: a
// list of {match: {name, class}, replace: {class, kwargs}, recursive}. A module
// is decided by the first rule whose every given condition holds; `name` is a
// Python regex applied with re.search (ktransformers/optimize/optimize.py,
// gen_optimize_config: anywhere in the path unless the pattern anchors it), so
// lookahead and unanchored patterns behave as in the original files. Every rule keeps the
// file:line:col of each of its parts for error messages and --explain.
#pragma once

#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/result.h"

namespace kt::rules {

struct SourceLoc {
  std::string file;
  int line = 0;  // 1-based
  int col = 0;   // 1-based
  std::string str() const { return file + ":" + std::to_string(line) + ":" + std::to_string(col); }
};

// A kwargs value: a scalar (as written) or, for transfer_map, a map of them.
struct KwValue {
  std::string scalar;
  std::vector<std::pair<std::string, std::string>> entries;  // when is_map
  bool is_map = false;
  SourceLoc loc;
};

struct Rule {
  SourceLoc loc;  // the list item
  std::optional<std::string> name_pattern;
  SourceLoc name_loc;
  std::shared_ptr<const std::regex> name_re;
  std::optional<std::string> match_class;
  SourceLoc class_loc;
  std::string replace_class;
  SourceLoc replace_loc;
  std::vector<std::pair<std::string, KwValue>> kwargs;
  bool recursive = true;

  // KTransformers' test: re.search(name, path) and the module is of match.class.
  bool matches(std::string_view path, std::string_view cls) const;
  const KwValue* kwarg(std::string_view key) const;
};

struct RuleFile {
  std::string path;
  std::vector<Rule> rules;
  // The index of the first rule matching (path, cls), or -1.
  int first_match(std::string_view path, std::string_view cls) const;
};

Result<RuleFile> load_rule_file(const std::string& path);
Result<RuleFile> parse_rule_file(std::string_view text, const std::string& name);

}  // namespace kt::rules
