// The chat-template renderer against transformers: 15 model templates x 8
// conversations rendered by jinja2 3.1.2 the way apply_chat_template does
// (test/data/chat-templates, copied from ../shared/chat-templates; see its
// README). Every output must match byte for byte; cases where jinja2 raised
// must raise too.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/chat_template.h"

namespace kt {
namespace {

using json = nlohmann::ordered_json;

const std::string kDir = std::string(KT_TEST_DATA_DIR) + "/chat-templates/";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json load_json(const std::string& path) { return json::parse(slurp(path)); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The date the reference renders gave strftime_now (see the README).
ChatTemplateOptions reference_options() {
  ChatTemplateOptions o;
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  o.now = t;
  return o;
}

const json* find_case(const json& cases, const std::string& id) {
  for (const auto& c : cases["cases"])
    if (c["id"] == id) return &c;
  return nullptr;
}

// The variables apply_chat_template passes for a case: messages (or the
// variant the manifest names), add_generation_prompt, bos/eos, tools if any.
json context_for(const json& tpl, const json& c, const std::string& input) {
  json ctx = json::object();
  if (input == "messages") {
    ctx["messages"] = c["messages"];
  } else {
    const std::string variant = input.substr(std::string("variants.").size());
    ctx["messages"] = c["variants"][variant];
  }
  ctx["add_generation_prompt"] = c["add_generation_prompt"];
  ctx["bos_token"] = tpl["bos_token"];
  ctx["eos_token"] = tpl["eos_token"];
  if (c.contains("tools")) ctx["tools"] = c["tools"];
  return ctx;
}

TEST(ChatTemplateReference, AllTemplatesAllCasesMatchTransformers) {
  const json manifest = load_json(kDir + "manifest.json");
  const json cases = load_json(kDir + "cases.json");
  const ChatTemplateOptions opts = reference_options();
  int total = 0, matched = 0, errors_expected = 0;
  for (const auto& [name, tpl] : manifest["templates"].items()) {
    auto parsed = ChatTemplate::parse(slurp(kDir + tpl["file"].get<std::string>()), name);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    for (const auto& [case_id, result] : tpl["results"].items()) {
      ++total;
      const json* c = find_case(cases, case_id);
      ASSERT_NE(c, nullptr) << case_id;
      auto out = parsed->render(context_for(tpl, *c, result["input"]), opts);
      const std::string expected = slurp(kDir + result["expected"].get<std::string>());
      const std::string where = name + " / " + case_id;
      if (result["status"] == "ok") {
        if (!out.ok()) {
          ADD_FAILURE() << where << ": " << out.error().message;
          continue;
        }
        EXPECT_EQ(*out, expected) << where;
        matched += *out == expected;
      } else {
        ++errors_expected;
        if (out.ok()) {
          ADD_FAILURE() << where << ": rendered, but jinja2 raised: " << expected;
          continue;
        }
        // raise_exception: the template's own message; engine errors: any error.
        if (result.value("raised_by", "") == "raise_exception") {
          EXPECT_TRUE(ends_with(out.error().message, ": " + expected)) << where << ": " << out.error().message;
          matched += ends_with(out.error().message, ": " + expected);
        } else {
          ++matched;
        }
      }
    }
  }
  std::printf("chat templates: %d/%d cases match transformers (%d of them expected errors)\n", matched,
              total, errors_expected);
  EXPECT_EQ(total, 120);
  EXPECT_EQ(matched, total);
}

// The manifest also records the inputs each template was first tried with and
// why they were rejected: a jinja2 exception (the same error must come out,
// message included) or a visible mis-render (the same flaw must show).
TEST(ChatTemplateReference, RejectedInputsFailTheWayJinja2Did) {
  const json manifest = load_json(kDir + "manifest.json");
  const json cases = load_json(kDir + "cases.json");
  const ChatTemplateOptions opts = reference_options();
  int checked = 0;
  for (const auto& [name, tpl] : manifest["templates"].items()) {
    auto parsed = ChatTemplate::parse(slurp(kDir + tpl["file"].get<std::string>()), name);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    for (const auto& [case_id, result] : tpl["results"].items()) {
      if (!result.contains("rejected_inputs")) continue;
      const json& c = *find_case(cases, case_id);
      // The tool call's arguments as the OpenAI form gives them: a JSON string.
      const std::string args = c["messages"][1]["tool_calls"][0]["function"]["arguments"];
      for (const auto& rejected : result["rejected_inputs"]) {
        const std::string why = rejected["why"];
        const std::string where = name + " / " + case_id + " / " + rejected["input"].get<std::string>();
        auto out = parsed->render(context_for(tpl, c, rejected["input"]), opts);
        ++checked;
        if (why.find("Error: ") != std::string::npos) {
          ASSERT_FALSE(out.ok()) << where << " rendered; jinja2 raised " << why;
          EXPECT_TRUE(ends_with(out.error().message, why)) << where << ": " << out.error().message;
          continue;
        }
        ASSERT_TRUE(out.ok()) << where << ": " << out.error().message;
        if (why.find("JSON-encoded again") != std::string::npos) {
          EXPECT_NE(out->find(json(args).dump()), std::string::npos) << where;
        }
        if (why.find("does not appear") != std::string::npos) {
          EXPECT_EQ(out->find(args), std::string::npos) << where;
        }
        if (why.find("'None'") != std::string::npos) {
          EXPECT_NE(out->find("None"), std::string::npos) << where;
        }
      }
    }
  }
  EXPECT_EQ(checked, 26);
}

// Lenient mode (list.append/pop, tojson of generators, from_json) renders
// what llama.cpp's engine would for the cases jinja2 refuses; the alt/ files
// hold those renders (not verified against llama.cpp itself).
TEST(ChatTemplateReference, LenientModeRendersTheAltOutputs) {
  const json manifest = load_json(kDir + "manifest.json");
  const json cases = load_json(kDir + "cases.json");
  ChatTemplateOptions opts = reference_options();
  opts.lenient = true;
  int checked = 0;
  for (const auto& [name, tpl] : manifest["templates"].items()) {
    for (const auto& [case_id, result] : tpl["results"].items()) {
      if (!result.contains("alt_lenient")) continue;
      const json& alt = result["alt_lenient"];
      auto parsed = ChatTemplate::parse(slurp(kDir + tpl["file"].get<std::string>()), name);
      ASSERT_TRUE(parsed.ok()) << parsed.error().message;
      auto out = parsed->render(context_for(tpl, *find_case(cases, case_id), alt["input"]), opts);
      ASSERT_TRUE(out.ok()) << name << " / " << case_id << ": " << out.error().message;
      EXPECT_EQ(*out, slurp(kDir + alt["file"].get<std::string>())) << name << " / " << case_id;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3);
}

}  // namespace
}  // namespace kt
