// The chat-template renderer against hostile input: the server renders
// untrusted messages, and templates can come from untrusted GGUF files. Every
// template below must end in a value (output or error), never a crash, a hang
// or unbounded memory. Renders run on a thread with a 4 MiB stack, so a
// recursion bound that only holds on an 8 MiB main stack fails here.
#include <gtest/gtest.h>

#include <pthread.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/chat_template.h"

namespace kt {
namespace {

using json = nlohmann::ordered_json;

// Wall-clock bounds only mean something in an optimized, uninstrumented build
// (Debug + ASan runs the interpreter ~80x slower).
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
constexpr bool kTimed = true;
#else
constexpr bool kTimed = false;
#endif

// Runs fn on a thread with a fixed stack size.
void on_small_stack(const std::function<void()>& fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 4u << 20);
  pthread_t th;
  auto trampoline = [](void* p) -> void* {
    (*static_cast<const std::function<void()>*>(p))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&th, &attr, trampoline, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
}

Result<std::string> render(const std::string& src, const json& ctx = json::object(),
                           ChatTemplateOptions opts = {}) {
  auto tpl = ChatTemplate::parse(src, "t");
  if (!tpl) return tpl.error();
  return tpl->render(ctx, opts);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

struct Hostile {
  std::string tpl;
  const char* error;             // a part of the expected error message
  uint64_t steps = 2'000'000;    // budget (small keeps the test fast)
};

std::vector<Hostile> hostile_templates() {
  const std::string deep_list = "{% set ns = namespace(x=none) %}{% for i in range(100000) %}"
                                "{% set ns.x = [ns.x] %}{% endfor %}";
  return {
      // Unbounded recursion and loops.
      {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "macro calls nested deeper than"},
      {"{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
       "macro calls nested deeper than"},
      {"{% macro f(n) %}{% if n > 0 %}" + repeat("{% if true %}", 60) + "{{ " + repeat("(", 120) +
           "f(n-1)" + repeat(")", 120) + " }}" + repeat("{% endif %}", 60) +
           "{% endif %}{% endmacro %}{{ f(39) }}",
       "nested deeper than"},
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
       "step budget"},
      {"{% for i in range(1000) %}{{ range(100000)|join }}{% endfor %}", "step budget"},
      {"{{ range(100001)|length }}", "Range too big"},
      {"{{ range(9223372036854775807)|length }}", "Range too big"},
      // Exponential growth of strings and lists; output size.
      {"{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
       "exceeds the limit", 20'000'000},
      {"{% set ns = namespace(s=[1]) %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
       "exceeds the limit", 20'000'000},
      {"{{ 'x' * 100000000 }}", "exceeds the limit"},
      {"{{ [1] * 100000000 }}", "exceeds the limit"},
      {"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output exceeds the limit", 20'000'000},
      // Cheap to build, huge to walk or to produce: walks and sizes are charged.
      {"{% set big = range(100000)|list %}{% set l = [big] * 100000 %}{{ l }}", "step budget"},
      {"{% set big = range(100000)|list %}{{ [big] * 1000 == [big + []] * 1000 }}", "step budget"},
      {"{% set big = range(100000)|list %}{{ ([big] * 1000)|tojson }}", "step budget"},
      {"{% set s = 'x' * 1000000 %}{{ s.replace('', s) }}", "exceeds the limit"},
      {"{% set s = 'x' * 1000000 %}{{ s|replace('x', s) }}", "exceeds the limit"},
      {"{% set s = '\\n' * 1000000 %}{{ s|indent(4000) }}", "exceeds the limit"},
      {"{% set s = 'x' * 10000000 %}{{ s|list|length }}", "step budget"},
      {"{% set s = 'x' * 10000 %}{% for i in range(100000) %}{% set t = s ~ s %}{% endfor %}",
       "step budget"},
      // Values nested a million deep or cyclic: walks are bounded, frees iterative.
      {deep_list + "{{ ns.x|tojson }}", "Circular reference detected"},
      {deep_list + "{{ ns.x }}", "nested deeper than"},
      {deep_list + "{{ ns.x == ns.x }}{{ undefined_name.boom }}", "'undefined_name' is undefined"},
      {"{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set ns.x = (ns.x,) %}{% endfor %}"
       "{{ {ns.x: 1} }}",
       "unhashable"},
      {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested deeper than"},
      {"{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me|tojson }}", "not JSON serializable"},
      // Syntax nested too deeply for a recursive parser.
      {"{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}", "nested too deeply"},
      {"{{ " + repeat("1+", 100000) + "1 }}", "nested too deeply"},
      {"{{ " + repeat("not ", 100000) + "1 }}", "nested too deeply"},
      {"{{ " + repeat("-", 100000) + "1 }}", "nested too deeply"},
      {"{{ " + repeat("[", 5000) + repeat("]", 5000) + " }}", "nested too deeply"},
      {repeat("{% if true %}", 5000) + repeat("{% endif %}", 5000), "nested too deeply"},
      // Unterminated and malformed tags.
      {"{{ x", "t:1:1: syntax error"},
      {"{% if x %}", "expected 'elif' or 'else' or 'endif'"},
      {"{# unterminated", "missing end of comment tag"},
      {"{% raw %} unterminated", "missing end of raw directive"},
      {"{{ 'unterminated }}", "unterminated string literal"},
      {"{% macro m( %}", "syntax error"},
      {"{% for %}", "syntax error"},
      {"{{ }}", "expected an expression"},
      {"{% %}", "tag name expected"},
      {"{% endif %}", "unknown tag 'endif'"},
      {"{{ '\\x' }}", "truncated \\x escape"},
      {"{{ 99999999999999999999 }}", "out of range"},
      {"{{ 2 ** 9999999999 }}", "OverflowError"},
      {"{{ (-9223372036854775807 - 1) // -1 }}", "OverflowError"},
      // Sandbox: no mutation of lists and dicts.
      {"{% set l = [] %}{{ l.append(1) }}", "SecurityError"},
      {"{{ {}.update({'a': 1}) }}", "SecurityError"},
      {"{{ ''.__class__ }}{{ ''.__class__.__mro__ }}", "UndefinedError"},
  };
}

TEST(ChatTemplateHostile, EveryHostileTemplateFailsCleanly) {
  on_small_stack([] {
    for (const Hostile& h : hostile_templates()) {
      SCOPED_TRACE(h.tpl.substr(0, 120));
      ChatTemplateOptions opts;
      opts.max_steps = h.steps;
      auto out = render(h.tpl, json::object(), opts);
      ASSERT_FALSE(out.ok()) << "rendered " << out->size() << " bytes";
      EXPECT_NE(out.error().message.find(h.error), std::string::npos) << out.error().message;
    }
  });
}

// The default budget (not a test-sized one) ends a 10^10-step loop; how fast is
// kt-bench's business, and ctest's per-test TIMEOUT catches a budget that stops
// being enforced.
TEST(ChatTemplateHostile, DefaultStepBudgetEndsAnEndlessLoop) {
  if (!kTimed) GTEST_SKIP() << "20M interpreter steps take minutes in instrumented builds";
  auto out = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("step budget"), std::string::npos);
}

TEST(ChatTemplateHostile, ErrorsNameLineAndColumn) {
  auto out = render("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message.rfind("t:3:10: ", 0), 0u) << out.error().message;
  out = render("a\n\n   {{ none.split('x') }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message.rfind("t:3:", 0), 0u) << out.error().message;
  out = render("{{ raise_exception('Only user and assistant roles are supported!') }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message, "t:1:19: Only user and assistant roles are supported!");
}

// Messages are data: template syntax inside them is printed, not run.
TEST(ChatTemplateHostile, MessageContentIsNeverInterpreted) {
  json ctx = {{"messages", json::array({{{"role", "user"}, {"content", "{{ 7*7 }}{% for %}{#"}}})}};
  auto out = render("{% for m in messages %}[{{ m.content }}]{% endfor %}", ctx);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "[{{ 7*7 }}{% for %}{#]");
}

TEST(ChatTemplateHostile, DeeplyNestedInputIsRefused) {
  // Built and handed over by moves only: copying a deep nlohmann::json recurses.
  json deep = json::array();
  for (int k = 0; k < 20000; ++k) {
    json outer = json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  json ctx = json::object();
  ctx["messages"] = std::move(deep);
  auto out = render("{{ messages|length }}", ctx);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("nested deeper than"), std::string::npos);
  // Wide is fine: a hundred thousand messages.
  json wide = json::array();
  for (int k = 0; k < 100000; ++k) wide.push_back({{"role", "user"}, {"content", "hi"}});
  out = render("{{ messages|length }}", json{{"messages", wide}});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "100000");
}

TEST(ChatTemplateHostile, ContextMustBeAnObject) {
  auto tpl = ChatTemplate::parse("x");
  ASSERT_TRUE(tpl.ok());
  EXPECT_FALSE(tpl->render(json::array()).ok());
}

// Mutations of the real templates (bytes dropped, duplicated, swapped in from
// Jinja's punctuation) rendered with a real conversation: whatever happens,
// parse and render return.
TEST(ChatTemplateHostile, MutatedRealTemplatesNeverCrash) {
  const std::string dir = std::string(KT_TEST_DATA_DIR) + "/chat-templates/";
  std::ifstream mf(dir + "manifest.json");
  json manifest = json::parse(mf);
  std::ifstream cf(dir + "cases.json");
  json cases = json::parse(cf);
  json ctx = {{"messages", cases["cases"][5]["variants"]["args_object"]},
              {"tools", cases["cases"][5]["tools"]},
              {"add_generation_prompt", true},
              {"bos_token", "<s>"},
              {"eos_token", "</s>"}};
  const std::string alphabet = "{}%#-+()[]|.,'\"~=<>!*/ \n";
  std::mt19937 rng(12345);
  int parsed = 0, rendered = 0, total = 0;
  on_small_stack([&] {
    ChatTemplateOptions opts;
    opts.max_steps = 200'000;
    for (const auto& [name, tpl] : manifest["templates"].items()) {
      std::ifstream f(dir + tpl["file"].get<std::string>(), std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string src = ss.str();
      for (int trial = 0; trial < 150; ++trial) {
        std::string m = src;
        int edits = 1 + int(rng() % 4);
        for (int e = 0; e < edits && !m.empty(); ++e) {
          size_t at = rng() % m.size();
          switch (rng() % 3) {
            case 0: m.erase(at, 1 + rng() % 8); break;
            case 1: m.insert(at, m.substr(rng() % m.size(), 1 + rng() % 16)); break;
            default: m[at] = alphabet[rng() % alphabet.size()];
          }
        }
        ++total;
        auto t = ChatTemplate::parse(m, name);
        if (!t) continue;
        ++parsed;
        auto out = t->render(ctx, opts);
        rendered += out.ok();
      }
    }
  });
  std::printf("mutated templates: %d tried, %d parsed, %d rendered\n", total, parsed, rendered);
  EXPECT_EQ(total, 15 * 150);
  EXPECT_GT(parsed, 0);
}

// Random token soup: the parser and evaluator see every kind of garbage.
TEST(ChatTemplateHostile, RandomTokenSoupNeverCrashes) {
  const char* pieces[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "if", "for", "in", "endif",
                          "endfor", "set", "macro", "endmacro", "x", "ns", "namespace()", "loop",
                          "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "tojson", "length", "is",
                          "not", "defined", "1", "'s'", "\"q\"", "~", "*", "**", "//", "%", "==",
                          " ", "\n", "else", "elif", "raw", "endraw", "break", "range(99999)",
                          "messages", "items", "map", "join", "a", "=", "none", "true"};
  std::mt19937 rng(777);
  json ctx = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  int parsed = 0;
  on_small_stack([&] {
    ChatTemplateOptions opts;
    opts.max_steps = 100'000;
    for (int trial = 0; trial < 5000; ++trial) {
      std::string src;
      int n = 1 + int(rng() % 40);
      for (int k = 0; k < n; ++k) src += pieces[rng() % std::size(pieces)];
      auto t = ChatTemplate::parse(src);
      if (!t) continue;
      ++parsed;
      (void)t->render(ctx, opts);
    }
  });
  std::printf("token soup: %d of 5000 parsed\n", parsed);
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace kt
