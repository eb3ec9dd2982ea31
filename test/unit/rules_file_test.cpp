// KTransformers' rule semantics and the alias table: the real rule files load
// unchanged, matching follows Python's re.search, and every kind of bad rule is one
// error naming file:line:col.
#include <gtest/gtest.h>

#include <filesystem>

#include "passes/rules/alias_table.h"
#include "passes/rules/regex_cost.h"
#include "passes/rules/rule_file.h"

namespace kt::rules {
namespace {

const std::string kRulesDir = std::string(KT_TEST_DATA_DIR) + "/ktransformers-rules";

TEST(RuleFile, EveryKTransformersFileLoadsAndResolves) {
  int files = 0, rules = 0;
  for (const auto& e : std::filesystem::directory_iterator(kRulesDir)) {
    if (e.path().extension() != ".yaml") continue;
    auto f = load_rule_file(e.path().string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    std::vector<std::string> warnings;
    auto st = AliasTable::builtin().check(f.value(), &warnings);
    EXPECT_TRUE(st.ok()) << st.error().message;
    ++files;
    rules += int(f->rules.size());
  }
  EXPECT_EQ(files, 5);
  EXPECT_GE(rules, 40);
}

TEST(RuleFile, V3FileDecidesModulesAsKTransformersDoes) {
  auto f = load_rule_file(kRulesDir + "/DeepSeek-V3-Chat.yaml");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const std::string linear = "torch.nn.Linear";
  auto decided_by = [&](const std::string& path, const std::string& cls) {
    const int i = f->first_match(path, cls);
    return i < 0 ? std::string("none") : f->rules[size_t(i)].replace_class;
  };
  EXPECT_EQ(decided_by("lm_head", linear), "ktransformers.operators.linear.KTransformersLinear");
  // The lookahead keeps kv_b_proj out of the Marlin rule.
  EXPECT_EQ(decided_by("model.layers.3.mlp.shared_experts.gate_proj", linear),
            "ktransformers.operators.linear.KTransformersLinear");
  EXPECT_EQ(decided_by("model.layers.3.self_attn.kv_b_proj", linear), "none");
  EXPECT_EQ(decided_by("model.layers.3.mlp", "ktransformers.models.modeling_deepseek_v3.DeepseekV3MoE"),
            "ktransformers.operators.experts.KDeepseekV3MoE");
  // A dense layer's mlp has another class: the MoE rule must not take it.
  EXPECT_EQ(decided_by("model.layers.0.mlp", "ktransformers.models.modeling_deepseek_v3.DeepseekV3MLP"), "none");
  const int experts = f->first_match("model.layers.7.mlp.experts", "anything");
  ASSERT_GE(experts, 0);
  const Rule& r = f->rules[size_t(experts)];
  EXPECT_FALSE(r.recursive);
  ASSERT_NE(r.kwarg("generate_op"), nullptr);
  EXPECT_EQ(r.kwarg("generate_op")->scalar, "KExpertsCPU");
  EXPECT_EQ(r.kwarg("out_device")->scalar, "cuda");
  // "^model.embed_tokens" has no $: re.search matches the prefix.
  EXPECT_EQ(decided_by("model.embed_tokens", "torch.nn.Embedding"), "default");
}

// KTransformers applies `name` with re.search: unanchored patterns match anywhere.
TEST(RuleFile, NameMatchesAnywhereLikePythonReSearch) {
  auto f = parse_rule_file("- match: {name: 'layers\\.0\\.'}\n  replace: {class: default}\n"
                           "- match: {name: '^lm_head$'}\n  replace: {class: default}\n", "t.yaml");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_TRUE(f->rules[0].matches("model.layers.0.mlp", "x"));
  EXPECT_FALSE(f->rules[0].matches("model.layers.10.mlp", "x"));
  EXPECT_TRUE(f->rules[1].matches("lm_head", "x"));
  EXPECT_FALSE(f->rules[1].matches("model.lm_head", "x"));
  EXPECT_FALSE(f->rules[1].matches("lm_head.weight", "x"));
}

TEST(RuleFile, MultiGpuTransferMapIsKept) {
  auto f = load_rule_file(kRulesDir + "/DeepSeek-V3-Chat-multi-gpu.yaml");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const int i = f->first_match("model", "ktransformers.models.modeling_deepseek_v3.DeepseekV3Model");
  ASSERT_GE(i, 0);
  const KwValue* tm = f->rules[size_t(i)].kwarg("transfer_map");
  ASSERT_NE(tm, nullptr);
  ASSERT_TRUE(tm->is_map);
  ASSERT_EQ(tm->entries.size(), 1u);
  EXPECT_EQ(tm->entries[0].first, "30");
  EXPECT_EQ(tm->entries[0].second, "cuda:1");
}

struct BadCase {
  const char* text;
  const char* where;  // "t.yaml:L:C"
  const char* what;
};

TEST(RuleFile, BadRulesNameTheirPlace) {
  const BadCase cases[] = {
      {"- match: {name: 'a'\n", "t.yaml:2:1", "malformed YAML"},
      {"match: {name: a}\n", "t.yaml:1:1", "list of rules"},
      {"- replace: {class: default}\n", "t.yaml:1:3", "no 'match'"},
      {"- match: {name: a}\n", "t.yaml:1:3", "no 'replace'"},
      {"- match: {name: '(unclosed'}\n  replace: {class: default}\n", "t.yaml:1:17", "bad regular expression"},
      {"- match: {name: '(?P<x>a)'}\n  replace: {class: default}\n", "t.yaml:1:17", "bad regular expression"},
      {"- match: {nmae: a}\n  replace: {class: default}\n", "t.yaml:1:11", "unknown match key 'nmae'"},
      {"- match: {}\n  replace: {class: default}\n", "t.yaml:1:10", "needs 'name' or 'class'"},
      {"- match: {name: a}\n  replace: {kwargs: {}}\n", "t.yaml:2:12", "has no 'class'"},
      {"- match: {name: a}\n  replace: {class: default, kwarg: {}}\n", "t.yaml:2:29", "unknown replace key 'kwarg'"},
      {"- match: {name: a}\n  replace: {class: default}\n  recursive: maybe\n", "t.yaml:3:14", "True or False"},
      {"- match: {name: a}\n  replace: {class: default}\n  recurse: False\n", "t.yaml:3:3", "unknown rule key"},
      {"- match: {name: a}\n  replace: {class: default, kwargs: [1, 2]}\n", "t.yaml:2:37", "must be a mapping"},
      // Patterns a backtracking engine could stall on.
      {"- match: {name: '^(a+)+$'}\n  replace: {class: default}\n", "t.yaml:1:17", "a repeated group holds a repetition"},
      {"- match: {name: '^(model|model)*x'}\n  replace: {class: default}\n", "t.yaml:1:17", "holds alternatives"},
      {"- match: {name: '((x.*)y)*'}\n  replace: {class: default}\n", "t.yaml:1:17", "holds a repetition"},
      {"- match: {name: '(a{2,})+'}\n  replace: {class: default}\n", "t.yaml:1:17", "holds a repetition"},
      {"- match: {name: '.*.*.*.*.*x'}\n  replace: {class: default}\n", "t.yaml:1:17", "more than 4 unbounded"},
      {"- match: {name: 'a{1000}'}\n  replace: {class: default}\n", "t.yaml:1:17", "counts past 100"},
  };
  for (const BadCase& c : cases) {
    auto f = parse_rule_file(c.text, "t.yaml");
    ASSERT_FALSE(f.ok()) << c.text;
    const std::string& m = f.error().message;
    EXPECT_EQ(m.rfind(std::string(c.where) + ": ", 0), 0u) << "want " << c.where << " in: " << m;
    EXPECT_NE(m.find(c.what), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// What KTransformers' files and ordinary rules use stays accepted (escapes,
// classes holding metacharacters, lookahead, optional groups, a repeated group
// of one atom); only repetition of repetition or alternatives is refused.
TEST(RuleFile, RegexCostBoundKeepsRealPatterns) {
  for (const char* ok : {"^model\\.layers\\.(0|[1-9]|[12][0-9])\\.(?!self_attn\\.kv_b_proj).*$",
                         "^model\\.layers\\.(?!.*self_attn\\.kv_b_proj).*$", "(^model\\.layers\\.([3456][0-9])\\.)|(model.norm)",
                         "^model\\.layers\\..*\\.block_sparse_moe\\.experts$", "a{2,5}b?c*", "[(*+]+x", "\\(a+\\)+",
                         "(?:ab)?c", "x{", "(a)*", "([0-9])+\\."})
    EXPECT_EQ(rules::regex_cost_problem(ok), "") << ok;
  EXPECT_NE(rules::regex_cost_problem("^(m|o|d|e|l|\\.|[a-z0-9_])*$"), "");
}

// fuzz_rules' finding (2026-11-29, a timeout): libstdc++'s std::regex takes a
// quantifier on a quantifier (".**", which ECMAScript forbids) as a repetition
// of a repetition and backtracks without end against a module path. Refused;
// a lazy '?' after one quantifier stays accepted.
TEST(RuleFile, QuantifierOnAQuantifierIsRefused) {
  for (const char* bad : {"^model\\.layers\\..**\\.self_attn$", "a+*", "a*+", "a*{2}", "a{2}*", "a???", "a*?*"})
    EXPECT_NE(rules::regex_cost_problem(bad), "") << bad;
  for (const char* ok : {"a*?", "a+?", "a??", "a{2,3}?", "(a*)?b", "a*b*", "[*+]*", "\\**"})
    EXPECT_EQ(rules::regex_cost_problem(ok), "") << ok;
  auto f = parse_rule_file("- match: {name: \"^model\\\\..**x$\"}\n  replace: {class: default}\n", "r.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("r.yaml:1:"), std::string::npos) << f.error().message;
  EXPECT_EQ(f.error().message.find('\n'), std::string::npos) << f.error().message;
}

// fuzz_rules' finding: std::regex reads a backreference's number into an int
// without a check (UBSan: signed overflow inside libstdc++). A backreference
// of more than 3 digits names no group: refused before std::regex sees it.
TEST(RuleFile, HugeBackreferenceIsRefusedInOneLine) {
  EXPECT_NE(rules::regex_cost_problem("(a)\\8888888888888888888"), "");
  EXPECT_EQ(rules::regex_cost_problem("(a)\\1"), "");
  auto f = parse_rule_file("- match: {name: \"(a)\\\\8888888888888888888\"}\n  replace: {class: default}\n", "r.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("r.yaml:1:"), std::string::npos) << f.error().message;
  EXPECT_NE(f.error().message.find("backreference"), std::string::npos) << f.error().message;
  EXPECT_EQ(f.error().message.find('\n'), std::string::npos);
}

TEST(AliasTable, UnknownAndUnsupportedNamesAreErrorsAtTheirLine) {
  const AliasTable& t = AliasTable::builtin();
  std::vector<std::string> warnings;
  auto check = [&](const char* text) {
    auto f = parse_rule_file(text, "r.yaml");
    EXPECT_TRUE(f.ok());
    return t.check(f.value(), &warnings);
  };
  auto s1 = check("- match: {name: a}\n  replace: {class: ktransformers.operators.experts.KNoSuchExperts}\n");
  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.error().message.rfind("r.yaml:2:20: unknown operator class 'ktransformers.operators.experts.KNoSuchExperts'", 0), 0u)
      << s1.error().message;
  auto s2 = check("- match: {name: a}\n  replace:\n    class: default\n    kwargs: {generate_op: KLinearFP8}\n");
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.error().message.find("r.yaml:4:27: op 'KLinearFP8' is not supported"), std::string::npos) << s2.error().message;
  auto s3 = check("- match: {class: torch.nn.Linearr}\n  replace: {class: default}\n");
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.error().message.find("r.yaml:1:18: unknown class 'torch.nn.Linearr'"), std::string::npos) << s3.error().message;
  warnings.clear();
  auto s4 = check("- match: {class: torch.nn.Linear}\n  replace:\n    class: default\n    kwargs: {generate_op: KLinearMarlin}\n");
  ASSERT_TRUE(s4.ok()) << s4.error().message;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("r.yaml:4:27: warning: op 'KLinearMarlin': kt uses"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace kt::rules
