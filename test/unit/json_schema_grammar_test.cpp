// JSON Schema -> grammar -> matcher (runtime/json_schema_grammar.h,
// grammar.h, grammar_matcher.h, regex_grammar.h): for each schema, texts that
// validate are accepted whole, texts that do not are refused at some byte;
// generated texts (random walks through the automaton) parse as JSON and
// satisfy the schema's checks that this test can state; hostile schemas
// (cycles, deep nesting, huge enums, unsupported keywords) get one-line
// errors naming the place.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/grammar_matcher.h"
#include "runtime/json_schema_grammar.h"

namespace {

using J = nlohmann::ordered_json;

std::shared_ptr<const kt::Grammar> compile(const std::string& schema_text) {
  auto g = kt::json_schema_grammar(J::parse(schema_text));
  EXPECT_TRUE(g.ok()) << schema_text << ": " << (g.ok() ? "" : g.error().message);
  if (!g.ok()) return nullptr;
  return std::make_shared<const kt::Grammar>(std::move(*g));
}

std::string compile_error(const std::string& schema_text) {
  auto g = kt::json_schema_grammar(J::parse(schema_text));
  EXPECT_FALSE(g.ok()) << schema_text << " compiled";
  return g.ok() ? "" : g.error().message;
}

bool matches(kt::GrammarMatcher& m, const std::string& text) {
  const auto s = m.walk(m.start(), text);
  return s != kt::GrammarMatcher::kDead && m.accepting(s);
}

// A random text of the grammar: bytes drawn among those that keep the state
// alive, steering to the end (fewest bytes to finish) once past `soft` bytes.
std::string random_text(kt::GrammarMatcher& m, std::mt19937& rng, size_t soft = 60) {
  std::string out;
  auto s = m.start();
  for (size_t step = 0; step < 5000; ++step) {
    if (m.finished(s)) break;
    if (m.accepting(s) && (out.size() > soft || rng() % 8 == 0)) break;
    std::vector<std::pair<uint8_t, kt::GrammarMatcher::State>> next;
    for (int b = 0; b < 256; ++b) {
      const auto t = m.next(s, uint8_t(b));
      if (t != kt::GrammarMatcher::kDead) next.push_back({uint8_t(b), t});
    }
    if (next.empty()) break;
    std::pair<uint8_t, kt::GrammarMatcher::State> pick = next[rng() % next.size()];
    if (out.size() > soft) {
      for (const auto& n : next)
        if (m.min_bytes_to_end(n.second) < m.min_bytes_to_end(pick.second)) pick = n;
    }
    out += char(pick.first);
    s = pick.second;
  }
  EXPECT_TRUE(m.accepting(s)) << "random text did not end: " << out;
  return out;
}

TEST(Grammar, BuilderChecksLeftRecursionAndEndlessRules) {
  {
    kt::GrammarBuilder b;
    const uint32_t a = b.add_rule("a"), c = b.add_rule("c");
    b.add_alt(a, {kt::GrammarBuilder::ref(c), b.byte('x')});
    b.add_alt(c, {kt::GrammarBuilder::ref(a)});
    b.add_alt(c, {});
    auto g = b.finish(a);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("a -> c -> a"), std::string::npos) << g.error().message;
  }
  {
    kt::GrammarBuilder b;  // r ::= "x" r : never ends
    const uint32_t r = b.add_rule("r");
    b.add_alt(r, {b.byte('x'), kt::GrammarBuilder::ref(r)});
    auto g = b.finish(r);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("recurses forever"), std::string::npos) << g.error().message;
  }
  {
    kt::GrammarBuilder b;  // r ::= "x" r | "y": right recursion in constant stack depth
    const uint32_t r = b.add_rule("r");
    b.add_alt(r, {b.byte('x'), kt::GrammarBuilder::ref(r)});
    b.add_alt(r, {b.byte('y')});
    auto g = b.finish(r);
    ASSERT_TRUE(g.ok()) << g.error().message;
    kt::GrammarMatcher m(std::make_shared<const kt::Grammar>(std::move(*g)));
    EXPECT_TRUE(matches(m, std::string(100000, 'x') + "y"));
    EXPECT_LT(m.n_states(), 8u);
    EXPECT_EQ(m.min_bytes_to_end(m.start()), 1u);
  }
}

TEST(JsonSchemaGrammar, AnyObject) {
  auto g = kt::json_object_grammar();
  ASSERT_TRUE(g.ok()) << g.error().message;
  kt::GrammarMatcher m(std::make_shared<const kt::Grammar>(std::move(*g)));
  for (const char* ok : {"{}", "{ }", R"({"a":1})", R"({"a": [1, 2.5, -3e2, true, null, "x\n\u00e9 ü"], "b": {}})",
                         "{\n  \"k\": {\"n\": [[], [{}]]}\n}", R"({"":-0.0})"})
    EXPECT_TRUE(matches(m, ok)) << ok;
  for (const char* bad : {"", "[]", "1", R"({"a":})", R"({"a":1,})", R"({a:1})", R"({"a":01})", "{\"a\":\"\x01\"}",
                          R"({"a":"\x"})", "{\"a\":\"\xff\"}", R"({"a":1} )", R"({"a":tru})", R"({"a":1}{})"})
    EXPECT_FALSE(matches(m, bad)) << bad;
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const std::string t = random_text(m, rng);
    const J v = J::parse(t, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(v.is_discarded()) << t;
    EXPECT_TRUE(v.is_object()) << t;
  }
}

struct Case {
  const char* schema;
  std::vector<const char*> valid, invalid;
};

TEST(JsonSchemaGrammar, SchemasAcceptTheirValuesAndRefuseOthers) {
  const std::vector<Case> cases = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]})",
       {R"({"name":"Ann"})", R"({"name":"Ann","age":31})", R"({ "name": "x", "age": -2 })"},
       {R"({})", R"({"age":3})", R"({"age":3,"name":"x"})", R"({"name":1})", R"({"name":"x","age":1.5})",
        R"({"name":"x","other":1})"}},
      {R"({"type":"string","enum":["red","green","greenish"]})", {R"("red")", R"("green")", R"("greenish")"},
       {R"("gree")", R"("blue")", "red"}},
      {R"({"const":{"a":[1,2]}})", {R"({"a":[1,2]})"}, {R"({"a": [1, 2]})", R"({"a":[1]})"}},
      {R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})",
       {"[true,false]", "[true, false, true]"}, {"[]", "[true]", "[true,true,true,true]", "[1,2]"}},
      {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("abc")", R"("éü")", R"("\n\"")"},
       {R"("a")", R"("abcd")", R"("")"}},
      {R"({"type":"string","pattern":"^[A-Z][a-z]+-\\d{2,3}$"})", {R"("Abc-12")", R"("Xy-999")"},
       {R"("abc-12")", R"("Abc-1")", R"("Abc-1234")", R"(" Abc-12")"}},
      {R"({"type":"string","pattern":"ab|cd"})", {R"("xxabyy")", R"("cd")"}, {R"("ac")"}},
      {R"({"type":"integer","minimum":-5,"maximum":120})", {"-5", "0", "7", "99", "120", "-1"},
       {"-6", "121", "200", "1000", "-10", "007"}},
      {R"({"type":"integer","exclusiveMinimum":0})", {"1", "42", "9999999"}, {"0", "-1"}},
      {R"({"type":"number","minimum":0,"maximum":1})", {"0", "1", "0.5", "1.0", "0.999"}, {"1.5", "-0.1", "2", "1.01"}},
      {R"({"type":"number","exclusiveMinimum":-2,"exclusiveMaximum":3})", {"-1.5", "0", "2.99", "-1"},
       {"-2", "3", "3.0", "-2.5"}},
      {R"({"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#/$defs/node"}}],"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"$ref":"#"}},"required":["v"]}}})",
       {"null", "[]", R"([{"v":1,"kids":[{"v":2,"kids":null}]}])"}, {R"([{"kids":null}])"}},
      {R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"}},
      {R"({"type":"string","format":"date"})", {R"("2024-02-28")", R"("1999-12-31")"}, {R"("2024-02-30")", R"("2024-13-01")"}},
      {R"({"type":"object","additionalProperties":{"type":"number"}})", {R"({"a":1,"b":2.5})", "{}"}, {R"({"a":"x"})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
       {"{}", R"({"a":1})", R"({"b":1})", R"({"a":1,"c":2})", R"({"a":1,"b":2,"c":3})"},
       {R"({"b":1,"a":2})", R"({,"a":1})", R"({"a":1,})"}},
  };
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    auto g = compile(c.schema);
    if (!g) continue;
    kt::GrammarMatcher m(g);
    for (const char* ok : c.valid) EXPECT_TRUE(matches(m, ok)) << c.schema << " should accept " << ok;
    for (const char* bad : c.invalid) EXPECT_FALSE(matches(m, bad)) << c.schema << " should refuse " << bad;
    for (int i = 0; i < 50; ++i) {
      const std::string t = random_text(m, rng);
      EXPECT_FALSE(J::parse(t, nullptr, false).is_discarded()) << c.schema << ": " << t;
    }
  }
}

TEST(JsonSchemaGrammar, RandomIntegersStayInRange) {
  std::mt19937 rng(3);
  for (auto [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{{-5, 120}, {0, 0}, {7, 7}, {-1000, -998}, {13, 1000000}, {-42, 9}}) {
    const std::string schema = R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" + std::to_string(hi) + "}";
    auto g = compile(schema);
    ASSERT_TRUE(g);
    kt::GrammarMatcher m(g);
    for (int64_t v = lo - 3; v <= std::min(hi + 3, lo + 3000); ++v)
      EXPECT_EQ(matches(m, std::to_string(v)), v >= lo && v <= hi) << schema << " " << v;
    for (int i = 0; i < 100; ++i) {
      const int64_t v = std::stoll(random_text(m, rng, 4));
      EXPECT_TRUE(v >= lo && v <= hi) << schema << " " << v;
    }
  }
}

TEST(JsonSchemaGrammar, HostileSchemasGetOneLineErrors) {
  auto has = [](const std::string& e, const char* what) {
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  has(compile_error(R"({"type":"object","properties":{"a":{"type":"string","minProperties":1}}})"),
      "schema/properties/a: unsupported keyword 'minProperties'");
  has(compile_error(R"({"oneOf":[{"type":"string"}]})"), "unsupported keyword 'oneOf'");
  has(compile_error(R"({"type":"number","multipleOf":3})"), "'multipleOf'");
  has(compile_error(R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}})"), "cycle");
  has(compile_error(R"({"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}}})"), "cycle");
  has(compile_error(R"({"$ref":"#"})"), "cycle");
  has(compile_error(R"({"type":"object","properties":{"me":{"$ref":"#"}},"required":["me"]})"), "recurses forever");
  has(compile_error(R"({"$ref":"https://example.com/s.json"})"), "only references inside the schema");
  has(compile_error(R"({"$ref":"#/nowhere"})"), "points at nothing");
  has(compile_error(R"({"type":"strin"})"), "schema/type: must be one of");
  has(compile_error(R"({"type":"string","pattern":"(a)\\1"})"), "backreferences");
  has(compile_error(R"x({"type":"string","pattern":"(?=a)"})x"), "lookaround");
  has(compile_error(R"({"type":"string","pattern":"a{5000}"})"), "counts above");
  has(compile_error(R"({"type":"string","pattern":"[a"})"), "not closed");
  has(compile_error(R"({"type":"integer","minimum":5,"maximum":2})"), "no integer");
  has(compile_error(R"({"type":"string","format":"hostname"})"), "format 'hostname' is not supported");
  has(compile_error("false"), "admits no value");
  has(compile_error("[1]"), "must be an object or a boolean");
  // 10,000 nested levels (built without the HTTP parser's depth limit).
  J deep = J::object();
  for (int i = 0; i < 10000; ++i) deep = J{{"type", "array"}, {"items", std::move(deep)}};
  has(kt::json_schema_grammar(deep).error().message, "nested deeper than 64 levels");
  // A huge enum, and many large values.
  J big = J::array();
  for (int i = 0; i < 5000; ++i) big.push_back("value-" + std::to_string(i));
  has(kt::json_schema_grammar(J{{"enum", big}}).error().message, "more than 1024 values");
  J fat = J::array();
  for (int i = 0; i < 100; ++i) fat.push_back(std::string(1000, char('a' + i % 26)) + std::to_string(i));
  has(kt::json_schema_grammar(J{{"enum", fat}}).error().message, "bytes");
}

TEST(JsonSchemaGrammar, LargeEnumsShareTheirPrefixes) {
  J values = J::array();
  for (int i = 0; i < 1000; ++i) values.push_back("city-" + std::to_string(i));
  auto g = kt::json_schema_grammar(J{{"enum", values}});
  ASSERT_TRUE(g.ok()) << g.error().message;
  kt::GrammarMatcher m(std::make_shared<const kt::Grammar>(std::move(*g)));
  EXPECT_TRUE(matches(m, "\"city-999\""));
  EXPECT_TRUE(matches(m, "\"city-5\""));
  EXPECT_FALSE(matches(m, "\"city-1000\""));
  // One stack per state along a prefix: the trie keeps the automaton small.
  const auto s = m.walk(m.start(), "\"city-");
  ASSERT_NE(s, kt::GrammarMatcher::kDead);
  EXPECT_LT(m.n_states(), 16u);
}

}  // namespace
