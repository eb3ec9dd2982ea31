// Tool conversations through real chat templates (runtime/chat_conversation.h,
// tool_calls.h, reasoning_split.h):
// - what each template wants (probed) is what the reference renderer found;
// - a request's conversation with tools, adapted by kt and rendered by kt's
//   interpreter, is byte for byte what jinja2 renders from the same
//   conversation in the template's own form (test/data/tool-templates,
//   made by render_tool_templates.py outside kt);
// - the tool-call syntax of each family: texts drawn at random from the
//   grammar of forced calls parse back into calls whose arguments are JSON
//   objects of the tools' schemas; hand-written outputs parse; broken ones
//   stay content;
// - reasoning splits the same however the text is cut into pieces.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/chat_conversation.h"
#include "runtime/grammar_matcher.h"
#include "runtime/reasoning_split.h"

namespace {

using J = nlohmann::ordered_json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kData = std::string(KT_TEST_DATA_DIR);
const char* kTemplates[] = {"deepseek-ai-DeepSeek-V3.1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
                            "Qwen-Qwen2.5-7B-Instruct",  "Qwen-Qwen3-0.6B",
                            "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506"};

struct Loaded {
  kt::ChatTemplate tpl;
  std::string source, bos, eos, form;
};

Loaded load(const std::string& name) {
  const J manifest = J::parse(read(kData + "/chat-templates/manifest.json"));
  const J& info = manifest["templates"][name];
  const std::string source = read(kData + "/chat-templates/" + info["file"].get<std::string>());
  auto tpl = kt::ChatTemplate::parse(source, name);
  EXPECT_TRUE(tpl.ok()) << (tpl.ok() ? "" : tpl.error().message);
  return {std::move(*tpl), source, info["bos_token"].get<std::string>(), info["eos_token"].get<std::string>(),
          info["results"]["06_tool_call_result"]["input"].get<std::string>()};
}

TEST(ChatConversation, ProbedNeedsAreTheReferenceRenderersForms) {
  for (const char* name : kTemplates) {
    const Loaded t = load(name);
    const kt::ChatTemplateCaps caps = kt::probe_chat_template(t.tpl, t.bos, t.eos);
    EXPECT_TRUE(caps.renders_tool_calls) << name;
    EXPECT_EQ(caps.object_arguments, t.form.find("args_object") != std::string::npos) << name << " " << t.form;
    EXPECT_EQ(caps.empty_for_null, t.form.find("content_empty") != std::string::npos) << name << " " << t.form;
    EXPECT_EQ(caps.renders_tools, t.source.find("tool\xE2\x96\x81" "calls") == std::string::npos) << name;
    EXPECT_EQ(caps.nine_char_ids, std::string(name).find("istral") != std::string::npos) << name;
  }
}

TEST(ChatConversation, RenderingsMatchJinja2) {
  const J data = J::parse(read(kData + "/tool-templates/conversations.json"));
  auto specs = kt::parse_tool_specs(data["tools"]);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  kt::ChatTemplateOptions opts;
  std::tm day{};
  day.tm_year = 2026 - 1900;
  day.tm_mon = 0;
  day.tm_mday = 15;
  opts.now = day;
  int compared = 0;
  for (const char* name : kTemplates) {
    const Loaded t = load(name);
    const kt::ChatTemplateCaps caps = kt::probe_chat_template(t.tpl, t.bos, t.eos);
    const auto format = kt::tool_call_format_for(t.source);
    for (auto it = data["conversations"].begin(); it != data["conversations"].end(); ++it) {
      const J ctx = kt::chat_template_context(caps, *format, it.value(), data["tools"], *specs, true, t.bos, t.eos);
      auto text = t.tpl.render(ctx, opts);
      ASSERT_TRUE(text.ok()) << name << " " << it.key() << ": " << text.error().message;
      const std::string expected = read(kData + "/tool-templates/expected/" + name + "__" + it.key() + ".txt");
      ASSERT_FALSE(expected.empty());
      EXPECT_EQ(*text, expected) << name << " " << it.key();
      ++compared;
    }
  }
  EXPECT_EQ(compared, 18);
}

TEST(ChatConversation, EachFamilyIsFoundInItsTemplates) {
  EXPECT_STREQ(kt::tool_call_format_for(load("deepseek-ai-DeepSeek-V3.1").source)->name(), "deepseek-v3.1");
  EXPECT_STREQ(kt::tool_call_format_for(load("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B").source)->name(), "deepseek");
  EXPECT_STREQ(kt::tool_call_format_for(load("Qwen-Qwen2.5-7B-Instruct").source)->name(), "hermes");
  EXPECT_STREQ(kt::tool_call_format_for(load("Qwen-Qwen3-0.6B").source)->name(), "hermes");
  EXPECT_STREQ(kt::tool_call_format_for(load("mistralai-Mistral-Nemo-Instruct-2407").source)->name(), "mistral");
  EXPECT_STREQ(kt::tool_call_format_for(load("Mistral-Small-3.2-24B-Instruct-2506").source)->name(), "mistral-v11");
  EXPECT_STREQ(kt::tool_call_format_for(load("meta-llama-Llama-3.1-8B-Instruct").source)->name(), "json");
}

// Random texts of the forced-call grammar parse back into valid calls.
TEST(ToolCalls, ForcedCallsParseBack) {
  const J data = J::parse(read(kData + "/tool-templates/conversations.json"));
  auto specs = kt::parse_tool_specs(data["tools"]);
  ASSERT_TRUE(specs.ok());
  std::vector<std::unique_ptr<kt::ToolCallFormat>> formats;
  formats.push_back(kt::make_hermes_tool_calls());
  formats.push_back(kt::make_deepseek_tool_calls(false));
  formats.push_back(kt::make_deepseek_tool_calls(true));
  formats.push_back(kt::make_mistral_tool_calls(false));
  formats.push_back(kt::make_mistral_tool_calls(true));
  formats.push_back(kt::make_json_tool_calls());
  std::mt19937 rng(4);
  for (const auto& f : formats) {
    for (bool parallel : {false, true}) {
      auto g = f->calls_grammar(*specs, parallel);
      ASSERT_TRUE(g.ok()) << f->name() << ": " << g.error().message;
      kt::GrammarMatcher m(std::make_shared<const kt::Grammar>(std::move(*g)));
      for (int run = 0; run < 40; ++run) {
        std::string text;
        auto s = m.start();
        while (!m.finished(s) && text.size() < 4000) {
          if (m.accepting(s) && rng() % 3 == 0) break;
          std::vector<std::pair<char, kt::GrammarMatcher::State>> next;
          for (int b = 0; b < 256; ++b)
            if (auto t = m.next(s, uint8_t(b)); t != kt::GrammarMatcher::kDead) next.push_back({char(b), t});
          auto pick = next[rng() % next.size()];
          if (text.size() > 200) {  // steer to the end
            for (const auto& n : next)
              if (m.min_bytes_to_end(n.second) < m.min_bytes_to_end(pick.second)) pick = n;
          }
          text += pick.first;
          s = pick.second;
        }
        ASSERT_TRUE(m.accepting(s)) << f->name() << ": " << text;
        const kt::ParsedToolOutput out = f->parse(text);
        ASSERT_FALSE(out.calls.empty()) << f->name() << " did not parse its own call: " << text;
        if (!parallel) {
          EXPECT_EQ(out.calls.size(), 1u) << text;
        }
        EXPECT_EQ(out.content, "") << f->name() << ": " << text;
        for (const kt::ToolCall& c : out.calls) {
          EXPECT_TRUE(c.name == "get_weather" || c.name == "search_docs") << c.name;
          const J args = J::parse(c.arguments, nullptr, false);
          ASSERT_TRUE(args.is_object()) << c.arguments;
          if (c.name == "get_weather") {
            EXPECT_TRUE(args.contains("city")) << c.arguments;
          }
          if (c.name == "search_docs") {
            EXPECT_TRUE(args.contains("query")) << c.arguments;
          }
        }
      }
    }
  }
}

TEST(ToolCalls, ModelOutputsParse) {
  const std::string sep = "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>";
  const std::string cb = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>";
  const std::string ce = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>";
  const std::string csb = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>";
  const std::string cse = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>";
  struct Case {
    std::unique_ptr<kt::ToolCallFormat> f;
    std::string text, content;
    std::vector<std::pair<std::string, std::string>> calls;
  };
  std::vector<Case> cases;
  cases.push_back({kt::make_hermes_tool_calls(),
                   "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
                   "Let me check.\n",
                   {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_weather", "{\"city\":\"Oslo\"}"}}});
  cases.push_back({kt::make_deepseek_tool_calls(false),
                   csb + cb + "function" + sep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + ce + "\n" + cb +
                       "function" + sep + "search_docs\n```json\n{\"query\": \"rain\"}\n```" + ce + cse,
                   "",
                   {{"get_weather", "{\"city\":\"Paris\"}"}, {"search_docs", "{\"query\":\"rain\"}"}}});
  cases.push_back({kt::make_deepseek_tool_calls(true), "Sure." + csb + cb + "get_weather" + sep + "{\"city\":\"Rome\"}" + ce + cse,
                   "Sure.", {{"get_weather", "{\"city\":\"Rome\"}"}}});
  cases.push_back({kt::make_mistral_tool_calls(false),
                   "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcdefghi\"}]", "",
                   {{"get_weather", "{\"city\":\"Paris\"}"}}});
  cases.push_back({kt::make_mistral_tool_calls(true), "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search_docs[ARGS]{\"query\": \"x\"}",
                   "", {{"get_weather", "{\"city\":\"Paris\"}"}, {"search_docs", "{\"query\":\"x\"}"}}});
  cases.push_back({kt::make_json_tool_calls(), "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}]}", "",
                   {{"f", "{\"a\":1}"}}});
  // Broken calls stay content.
  cases.push_back({kt::make_hermes_tool_calls(), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1]}\n</tool_call>",
                   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1]}\n</tool_call>", {}});
  cases.push_back({kt::make_mistral_tool_calls(false), "[TOOL_CALLS][{\"name\": \"f\"", "[TOOL_CALLS][{\"name\": \"f\"", {}});
  for (const Case& c : cases) {
    const kt::ParsedToolOutput out = c.f->parse(c.text);
    EXPECT_EQ(out.content, c.content) << c.f->name() << ": " << c.text;
    ASSERT_EQ(out.calls.size(), c.calls.size()) << c.f->name() << ": " << c.text;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(out.calls[i].name, c.calls[i].first);
      EXPECT_EQ(out.calls[i].arguments, c.calls[i].second);
    }
  }
}

TEST(ChatConversation, IdsAndToolSpecs) {
  EXPECT_EQ(kt::nine_char_id("abcdefghi"), "abcdefghi");
  const std::string id = kt::nine_char_id("call_8f2a7c1e9b0d4f6a");
  EXPECT_EQ(id.size(), 9u);
  EXPECT_EQ(kt::nine_char_id("call_8f2a7c1e9b0d4f6a"), id);
  EXPECT_NE(kt::nine_char_id("call_8f2a7c1e9b0d4f6b"), id);
  auto bad = [](const char* tools) {
    auto r = kt::parse_tool_specs(J::parse(tools));
    EXPECT_FALSE(r.ok()) << tools;
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(bad(R"([{"type":"function","function":{"parameters":{}}}])").find("tools[0].function.name"), std::string::npos);
  EXPECT_NE(bad(R"([{"type":"retrieval"}])").find("tools[0].type"), std::string::npos);
  EXPECT_NE(bad(R"([{"type":"function","function":{"name":"a/b"}}])").find("may hold only"), std::string::npos);
  EXPECT_NE(bad(R"({"a":1})").find("must be a list"), std::string::npos);
}

TEST(ReasoningSplit, AnyCutGivesTheSameSplit) {
  struct Case {
    bool open;
    std::string text, reasoning, content;
  };
  const std::vector<Case> cases = {
      {false, "<think>\nStep 1. Step 2.\n</think>\n\nThe answer is 4.", "\nStep 1. Step 2.\n", "The answer is 4."},
      {true, "Let me see...</think>Paris.", "Let me see...", "Paris."},
      {false, "  <think>a</think>b", "a", "b"},
      {false, "No thinking here <think>x</think>", "", "No thinking here <think>x</think>"},
      {true, "never closed <thin", "never closed <thin", ""},
      {false, "<thin", "", "<thin"},
      {false, "", "", ""},
  };
  for (const Case& c : cases) {
    for (size_t cut = 1; cut <= std::max<size_t>(1, c.text.size()); ++cut) {
      kt::ReasoningSplitter s(c.open);
      std::string r, t;
      for (size_t i = 0; i < c.text.size(); i += cut) {
        auto p = s.push(std::string_view(c.text).substr(i, cut));
        r += p.reasoning;
        t += p.content;
      }
      auto p = s.flush();
      r += p.reasoning;
      t += p.content;
      EXPECT_EQ(r, c.reasoning) << c.text << " cut " << cut;
      EXPECT_EQ(t, c.content) << c.text << " cut " << cut;
    }
  }
  EXPECT_TRUE(kt::prompt_opens_reasoning("<|Assistant|><think>\n"));
  EXPECT_FALSE(kt::prompt_opens_reasoning("<|Assistant|><think>\n</think>"));
  EXPECT_FALSE(kt::prompt_opens_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
