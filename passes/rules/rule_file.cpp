#include "passes/rules/rule_file.h"

#include "passes/rules/regex_cost.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace kt::rules {
namespace {

// Patterns longer than this are refused: a rule names module paths, and a huge
// pattern is either a mistake or an attempt to stall the regex engine.
constexpr size_t kMaxPatternLength = 1024;

SourceLoc loc_of(const std::string& file, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return SourceLoc{file, m.line + 1, m.column + 1};
}

Error at(const SourceLoc& l, const std::string& what) { return err(l.str(), ": ", what); }

// ECMAScript regexes (std::regex) accept what these files use: lookahead,
// groups, alternation, classes. Python-only syntax ((?P<..>), inline flags) fails
// to compile and is reported with the rule's location.
Result<std::shared_ptr<const std::regex>> compile_pattern(const std::string& p, const SourceLoc& l) {
  if (p.size() > kMaxPatternLength)
    return at(l, "name pattern is " + std::to_string(p.size()) + " characters; the limit is " + std::to_string(kMaxPatternLength));
  if (std::string why = regex_cost_problem(p); !why.empty())
    return at(l, "name pattern \"" + printable(p) + "\" is refused: " + why);
  try {
    return std::make_shared<const std::regex>(p, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return at(l, "bad regular expression \"" + printable(p) + "\": " + e.what());
  }
}

Result<std::string> scalar(const YAML::Node& n, const std::string& file, const std::string& what) {
  if (!n.IsScalar()) return at(loc_of(file, n), what + " must be a string");
  return n.Scalar();
}

Result<Rule> parse_rule(const YAML::Node& item, const std::string& file) {
  Rule r;
  r.loc = loc_of(file, item);
  if (!item.IsMap()) return at(r.loc, "a rule must be a mapping with 'match' and 'replace'");
  for (const auto& kv : item) {
    const std::string key = kv.first.Scalar();
    if (key != "match" && key != "replace" && key != "recursive")
      return at(loc_of(file, kv.first), "unknown rule key '" + printable(key) + "' (expected match, replace, recursive)");
  }
  const YAML::Node match = item["match"], replace = item["replace"];
  if (!match) return at(r.loc, "rule has no 'match'");
  if (!replace) return at(r.loc, "rule has no 'replace'");
  if (!match.IsMap()) return at(loc_of(file, match), "'match' must be a mapping with 'name' and/or 'class'");
  for (const auto& kv : match) {
    const std::string key = kv.first.Scalar();
    const SourceLoc kl = loc_of(file, kv.second);
    if (key == "name") {
      auto s = scalar(kv.second, file, "match.name");
      if (!s) return s.error();
      r.name_pattern = s.value();
      r.name_loc = kl;
      auto re = compile_pattern(*r.name_pattern, kl);
      if (!re) return re.error();
      r.name_re = re.value();
    } else if (key == "class") {
      auto s = scalar(kv.second, file, "match.class");
      if (!s) return s.error();
      r.match_class = s.value();
      r.class_loc = kl;
    } else {
      return at(loc_of(file, kv.first), "unknown match key '" + printable(key) + "' (expected name, class)");
    }
  }
  if (!r.name_pattern && !r.match_class) return at(loc_of(file, match), "'match' needs 'name' or 'class'");

  if (!replace.IsMap()) return at(loc_of(file, replace), "'replace' must be a mapping with 'class' and optional 'kwargs'");
  for (const auto& kv : replace) {
    const std::string key = kv.first.Scalar();
    if (key == "class") {
      auto s = scalar(kv.second, file, "replace.class");
      if (!s) return s.error();
      r.replace_class = s.value();
      r.replace_loc = loc_of(file, kv.second);
    } else if (key == "kwargs") {
      const YAML::Node& kw = kv.second;
      if (kw.IsNull()) continue;
      if (!kw.IsMap()) return at(loc_of(file, kw), "'kwargs' must be a mapping");
      for (const auto& a : kw) {
        KwValue v;
        v.loc = loc_of(file, a.second);
        if (a.second.IsMap()) {
          v.is_map = true;
          for (const auto& e : a.second) {
            if (!e.first.IsScalar() || !e.second.IsScalar())
              return at(loc_of(file, e.first), "kwargs." + printable(a.first.Scalar()) + " entries must be scalars");
            v.entries.emplace_back(e.first.Scalar(), e.second.Scalar());
          }
        } else if (a.second.IsScalar()) {
          v.scalar = a.second.Scalar();
        } else if (a.second.IsNull()) {
          v.scalar = "None";  // `prefill_op:` with no value, as Python reads it
        } else {
          return at(v.loc, "kwargs." + printable(a.first.Scalar()) + " must be a scalar or a mapping");
        }
        r.kwargs.emplace_back(a.first.Scalar(), std::move(v));
      }
    } else {
      return at(loc_of(file, kv.first), "unknown replace key '" + printable(key) + "' (expected class, kwargs)");
    }
  }
  if (r.replace_class.empty()) return at(loc_of(file, replace), "'replace' has no 'class' (use \"default\" to keep the module)");

  if (const YAML::Node rec = item["recursive"]) {
    // KTransformers reads it through PyYAML (YAML 1.1 booleans) and bool().
    const std::string s = rec.IsScalar() ? rec.Scalar() : "";
    if (s == "True" || s == "true" || s == "yes" || s == "on") r.recursive = true;
    else if (s == "False" || s == "false" || s == "no" || s == "off") r.recursive = false;
    else return at(loc_of(file, rec), "'recursive' must be True or False, not '" + printable(s) + "'");
  }
  return r;
}

}  // namespace

bool Rule::matches(std::string_view path, std::string_view cls) const {
  if (match_class && *match_class != cls) return false;
  if (name_re) {
    if (!std::regex_search(path.begin(), path.end(), *name_re)) return false;
  }
  return true;
}

const KwValue* Rule::kwarg(std::string_view key) const {
  for (const auto& [k, v] : kwargs)
    if (k == key) return &v;
  return nullptr;
}

int RuleFile::first_match(std::string_view path, std::string_view cls) const {
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].matches(path, cls)) return int(i);
  return -1;
}

Result<RuleFile> parse_rule_file(std::string_view text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return err(name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": malformed YAML: ", printable(e.msg, 200));
  }
  RuleFile f;
  f.path = name;
  if (root.IsNull()) return f;  // an empty file has no rules
  if (!root.IsSequence()) return at(loc_of(name, root), "a rule file is a list of rules ('- match: ...')");
  try {
    for (const auto& item : root) {
      auto r = parse_rule(item, name);
      if (!r) return r.error();
      f.rules.push_back(std::move(r.value()));
    }
  } catch (const YAML::Exception& e) {
    return err(name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", printable(e.msg, 200));
  }
  return f;
}

Result<RuleFile> load_rule_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(path, ": cannot open rule file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_rule_file(ss.str(), path);
}

}  // namespace kt::rules
