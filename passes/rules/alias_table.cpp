#include "passes/rules/alias_table.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace kt::rules {

extern const char kBuiltinAliasesYaml[];  // generated from rules/aliases.yaml

namespace {

Result<Alias> resolve(const std::map<std::string, Alias, std::less<>>& table, const std::string& what,
                      const std::string& name, const SourceLoc& loc, std::vector<std::string>* warnings) {
  auto it = table.find(name);
  if (it == table.end()) return err(loc.str(), ": unknown ", what, " '", printable(name), "' (not in kt's alias table, rules/aliases.yaml)");
  const Alias& a = it->second;
  if (!a.unsupported.empty()) return err(loc.str(), ": ", what, " '", printable(name), "' is not supported: ", a.unsupported);
  if (!a.instead.empty() && warnings)
    warnings->push_back(loc.str() + ": warning: " + what + " '" + printable(name) + "': kt uses " + a.instead);
  return a;
}

}  // namespace

Result<AliasTable> AliasTable::parse(std::string_view text, const std::string& name) {
  AliasTable t;
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    for (const auto& kv : root["model_classes"]) t.model_classes_[kv.first.Scalar()] = kv.second.Scalar();
    auto read = [](const YAML::Node& section, std::map<std::string, Alias, std::less<>>& out) {
      for (const auto& kv : section) {
        Alias a;
        a.kt = kv.second["kt"].as<std::string>();
        if (kv.second["instead"]) a.instead = kv.second["instead"].as<std::string>();
        if (kv.second["unsupported"]) a.unsupported = kv.second["unsupported"].as<std::string>();
        out[kv.first.Scalar()] = a;
      }
    };
    for (const auto& kv : root["bases"])
      for (const auto& b : kv.second) t.bases_[kv.first.Scalar()].push_back(b.Scalar());
    read(root["classes"], t.classes_);
    read(root["ops"], t.ops_);
  } catch (const YAML::Exception& e) {
    return err(name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg);
  }
  if (t.classes_.empty() || t.ops_.empty() || t.model_classes_.empty())
    return err(name, ": alias table needs model_classes, classes and ops");
  // A base must be a class rules may name, or no rule could ever use the row.
  for (const auto& [derived, bases] : t.bases_)
    for (const std::string& b : bases)
      if (!t.model_class(b)) return err(name, ": bases of '", derived, "': '", b, "' is not in model_classes");
  return t;
}

const AliasTable& AliasTable::builtin() {
  static const AliasTable table = [] {
    auto t = parse(kBuiltinAliasesYaml, "rules/aliases.yaml");
    if (!t) {  // the build embeds a file the tests parse: failing here is a build bug
      std::fprintf(stderr, "kt: built-in alias table: %s\n", t.error().message.c_str());
      std::abort();
    }
    return std::move(t.value());
  }();
  return table;
}

const std::string* AliasTable::model_class(std::string_view cls) const {
  auto it = model_classes_.find(cls);
  return it == model_classes_.end() ? nullptr : &it->second;
}

bool AliasTable::is_instance(std::string_view cls, std::string_view of) const {
  if (of == "torch.nn.Module") return true;
  // Breadth-first over the bases; `seen` keeps a cyclic (broken) table finite.
  std::vector<std::string_view> todo{cls};
  std::vector<std::string_view> seen;
  while (!todo.empty()) {
    const std::string_view c = todo.back();
    todo.pop_back();
    if (c == of) return true;
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    if (auto it = bases_.find(c); it != bases_.end())
      for (const std::string& b : it->second) todo.push_back(b);
  }
  return false;
}

Result<Alias> AliasTable::resolve_class(const std::string& name, const SourceLoc& loc, std::vector<std::string>* warnings) const {
  return resolve(classes_, "operator class", name, loc, warnings);
}

Result<Alias> AliasTable::resolve_op(const std::string& name, const SourceLoc& loc, std::vector<std::string>* warnings) const {
  return resolve(ops_, "op", name, loc, warnings);
}

Status AliasTable::check(const RuleFile& f, std::vector<std::string>* warnings) const {
  for (const Rule& r : f.rules) {
    if (r.match_class && !model_class(*r.match_class))
      return err(r.class_loc.str(), ": unknown class '", printable(*r.match_class), "' in match (no kt op has this class)");
    KT_TRY(resolve_class(r.replace_class, r.replace_loc, warnings));
    for (const char* key : {"generate_op", "prefill_op"})
      if (const KwValue* v = r.kwarg(key)) KT_TRY(resolve_op(v->scalar, v->loc, warnings));
  }
  return ok_status();
}

}  // namespace kt::rules
