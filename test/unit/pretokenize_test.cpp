// The pre-tokenizers and the split-regex engine: the engine against
// libstdc++'s std::regex (what llama.cpp runs the patterns through), the
// hand-written gpt-2 matcher against the engine, ECMAScript details, and
// inputs that make plain backtracking quadratic.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <regex>

#include "runtime/pretokenize.h"
#include "test/unit/vocab_cases.h"

namespace kt {
namespace {

using test::find_data;
using test::read_cases;
using test::VocabCase;

// The hand-written gpt-2 matcher and the regex engine running gpt-2's pattern
// are two implementations of one split: they must agree.
TEST(PreTokenizer, Gpt2MatcherAgreesWithRegexEngine) {
  auto pre = PreTokenizer::for_name("gpt-2");
  ASSERT_TRUE(pre.ok()) << pre.error().message;
  auto re = SplitRegex::compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
  ASSERT_TRUE(re.ok()) << re.error().message;
  std::vector<std::string> texts = {"Hello world", "  Hello\n\n  x", "it's 2024!!  ", "\xC3\xA9t\xC3\xA9 \xE2\x80\x94 ok"};
  if (const auto p = find_data("vocab/ggml-vocab-gpt-2.gguf"))
    for (const VocabCase& c : read_cases(*p)) texts.push_back(c.text);
  for (const std::string& text : texts) {
    const auto cpts = utf8_to_codepoints(text);
    const auto subject = SplitRegex::map_subject(cpts, re->mode());
    const std::vector<size_t> whole = {cpts.size()};
    std::vector<std::string> by_regex;
    size_t at = 0;
    for (size_t len : cpts.empty() ? std::vector<size_t>{} : re->split(subject, whole)) {
      std::string w;
      for (size_t i = at; i < at + len; ++i) append_utf8(cpts[i], &w);
      by_regex.push_back(w);
      at += len;
    }
    EXPECT_EQ(pre->split(text), by_regex) << text;
  }
}

// The regex engine against libstdc++'s std::regex, which is what llama.cpp runs
// these patterns through: the same pattern rewrite for \p{..} (collapsed text,
// one stand-in byte per category, llama.cpp's unicode.cpp) or std::wregex on the
// code points, the same std::regex_iterator walk. Every pattern of every
// pre-tokenizer, on the vocabulary test strings and random Unicode text.
std::string collapse_like_llama_cpp(std::string_view p) {
  static const std::map<std::string, std::string> kSets = {
      {"N", "\xD1\x30-\x39"},
      {"L", "\xD2\x41-\x5A\x61-\x7A"},
      {"P", "\xD3\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D"},
      {"M", "\xD4"},
      {"S", "\xD5\\\x24\\\x2B\x3C-\x3E\x5E\x60\\\x7C"},
  };
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '[' && (i == 0 || p[i - 1] != '\\')) { out += '['; inside = true; continue; }
    if (inside && p[i] == ']' && p[i - 1] != '\\') { out += ']'; inside = false; continue; }
    if (p.substr(i, 3) == "\\p{") {
      const size_t close = p.find('}', i);
      std::string name(p.substr(i + 3, close - i - 3));
      if (name.size() == 2 && name[0] == 'L') name = "L";
      out += inside ? kSets.at(name) : "[" + kSets.at(name) + "]";
      i = close;
      continue;
    }
    out += p[i];
  }
  return out;
}

template <class CharT>
std::vector<size_t> std_regex_split(const std::basic_string<CharT>& text, const std::basic_regex<CharT>& re) {
  std::vector<size_t> out;
  int64_t start = 0;
  for (std::regex_iterator<const CharT*> it(text.data(), text.data() + text.size(), re), end; it != end; ++it) {
    if (it->position() > start) out.push_back(it->position() - start);
    if (it->length() > 0) out.push_back(it->length());
    start = it->position() + it->length();
  }
  if (start < int64_t(text.size())) out.push_back(text.size() - start);
  return out;
}

TEST(PreTokenizer, RegexEngineAgreesWithStdRegex) {
  std::vector<std::string> texts = {"Hello world", "  x\r\n\r\n y  ", "I'VE 1234567 ~~!! ok"};
  for (const char* name : {"llama-spm", "deepseek-coder", "deepseek-llm", "gpt-2"})
    if (const auto p = find_data(std::string("vocab/ggml-vocab-") + name + ".gguf"))
      for (const VocabCase& c : read_cases(*p)) texts.push_back(c.text);
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string s;
    for (int k = rng() % 24; k > 0; --k) {
      static const uint32_t kPicks[] = {' ', '\n', '\r', '\'', 's', 'A', '7', '~', '$', 0xA0, 0xE9, 0x0301,
                                        0x2003, 0x3000, 0x4E2D, 0x3042, 0xFF01, 0x1F600, 0x10400, 0x0660};
      const uint32_t cp = rng() % 2 ? kPicks[rng() % std::size(kPicks)] : 0x20 + rng() % 0x3000;
      append_utf8(cp >= 0xD800 && cp < 0xE000 ? 'z' : cp, &s);
    }
    texts.push_back(s);
  }
  size_t compared = 0;
  for (const char* pre : {"default", "gpt-2", "llama-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3", "qwen2"}) {
    for (std::string_view pattern : PreTokenizer::patterns(pre)) {
      auto mine = SplitRegex::compile(pattern);
      ASSERT_TRUE(mine.ok()) << mine.error().message;
      const bool collapsed = mine->mode() == SplitRegex::Mode::kCollapsed;
      std::regex re_c;
      std::wregex re_w;
      const auto flags = std::regex_constants::optimize | std::regex_constants::nosubs;
      if (collapsed) {
        re_c = std::regex(collapse_like_llama_cpp(pattern), flags);
      } else {
        const auto pcp = utf8_to_codepoints(pattern);
        re_w = std::wregex(std::wstring(pcp.begin(), pcp.end()), flags);
      }
      for (const std::string& text : texts) {
        const auto cpts = utf8_to_codepoints(text);
        if (cpts.empty()) continue;
        const auto subject = SplitRegex::map_subject(cpts, mine->mode());
        std::vector<size_t> want;
        if (collapsed) want = std_regex_split(std::string(subject.begin(), subject.end()), re_c);
        else want = std_regex_split(std::wstring(subject.begin(), subject.end()), re_w);
        EXPECT_EQ(mine->split(subject, std::vector<size_t>{cpts.size()}), want) << pre << " /" << pattern << "/ on " << text;
        ++compared;
      }
    }
  }
  std::cout << "[ regex    ] " << compared << " splits identical to std::regex\n";
}

TEST(PreTokenizer, RegexEngineSemantics) {
  auto words = [](std::string_view pattern, std::string_view text) {
    auto re = SplitRegex::compile(pattern);
    EXPECT_TRUE(re.ok()) << (re.ok() ? "" : re.error().message);
    const auto cpts = utf8_to_codepoints(text);
    const auto subject = SplitRegex::map_subject(cpts, re->mode());
    std::vector<std::string> out;
    size_t at = 0;
    for (size_t len : re->split(subject, std::vector<size_t>{cpts.size()})) {
      std::string w;
      for (size_t i = at; i < at + len; ++i) append_utf8(cpts[i], &w);
      out.push_back(w);
      at += len;
    }
    return out;
  };
  using V = std::vector<std::string>;
  // Leftmost-first alternation, not longest.
  EXPECT_EQ(words("a|ab", "ab"), (V{"a", "b"}));
  // Greedy and lazy counted repetition.
  EXPECT_EQ(words("\\p{N}{1,3}", "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(words("a{1,3}?", "aaa"), (V{"a", "a", "a"}));
  // Negative lookahead: the last space stays for the word after it.
  EXPECT_EQ(words("\\s+(?!\\S)|\\s+", "a   b"), (V{"a", "  ", " ", "b"}));
  // $ is the end of the piece.
  EXPECT_EQ(words("\\s+$", "a  b  "), (V{"a  b", "  "}));
  // Collapsed mode: a non-ASCII letter is \p{L}, non-ASCII space is \s.
  EXPECT_EQ(words("\\p{L}+", "ab\xC3\xA9" "1\xD0\xB4"), (V{"ab\xC3\xA9", "1", "\xD0\xB4"}));
  EXPECT_EQ(words("\\s+", "a\xE3\x80\x80" "b"), (V{"a", "\xE3\x80\x80", "b"}));
  // llama.cpp's collapsed \p{S} lists no '~' (kept for identical splits).
  EXPECT_EQ(words("\\p{S}+", "+~$"), (V{"+", "~", "$"}));
  // Wide mode: literal ranges of code points.
  EXPECT_EQ(words("[\u4E00-\u9FA5]+", "ab\u4E2D\u6587cd"), (V{"ab", "\u4E2D\u6587", "cd"}));
  for (const char* bad : {"(", "a)", "[a", "\\p{Han}+", "a**", "\\b", "(?<=a)", "[\u4E00]\\p{L}", "(a*)*"}) {
    EXPECT_FALSE(SplitRegex::compile(bad).ok()) << bad;
  }
  EXPECT_FALSE(PreTokenizer::for_name("no-such-pre").ok());
  for (const char* name : {"default", "gpt-2", "llama-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3", "qwen2"})
    EXPECT_TRUE(PreTokenizer::for_name(name).ok()) << name;
}

TEST(PreTokenizer, Llama3AndQwen2Splits) {
  auto split = [](const char* name, const char* text) {
    auto pre = PreTokenizer::for_name(name);
    EXPECT_TRUE(pre.ok());
    return pre->split(text);
  };
  using V = std::vector<std::string>;
  // Digits in threes for llama-3, one by one for qwen2; contractions any case.
  EXPECT_EQ(split("llama-bpe", "I'M 12345 ok\n\n"), (V{"I", "'M", " ", "123", "45", " ok", "\n\n"}));
  EXPECT_EQ(split("qwen2", "I'M 12345 ok\n\n"), (V{"I", "'M", " ", "1", "2", "3", "4", "5", " ok", "\n\n"}));
  EXPECT_EQ(split("deepseek-v3", "abc 1234 \xE4\xBD\xA0\xE5\xA5\xBD!!"),
            (V{"abc", " ", "123", "4", " ", "\xE4\xBD\xA0\xE5\xA5\xBD", "!!"}));
}

// Long runs that make plain backtracking quadratic (\s+$ over spaces before a
// digit, \s*[\r\n]+ over spaces without a newline): the split stays linear.
// Runs of one character class once made the backtracking matcher quadratic
// (10 K spaces before a digit: 1.8 s, so 100 K: minutes). No wall-clock
// assertion here (speed belongs to kt-bench, and sanitizers slow everything
// 10x): the 28 runs below take seconds when linear, and ctest's per-test
// TIMEOUT (test/CMakeLists.txt) fails them when the matcher goes quadratic.
TEST(PreTokenizer, PathologicalRunsStayLinear) {
  const size_t n = 100 * 1000;
  const std::vector<std::string> texts = {std::string(n, ' ') + "1", std::string(n, ' ') + "x",
                                          std::string(n, '\t') + "~", std::string(n, '!') + " "};
  for (const char* name : {"default", "gpt-2", "llama-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3", "qwen2"}) {
    auto pre = PreTokenizer::for_name(name);
    ASSERT_TRUE(pre.ok());
    for (const std::string& text : texts) {
      const auto words = pre->split(text);
      size_t total = 0;
      for (const auto& w : words) total += w.size();
      EXPECT_EQ(total, text.size()) << name;
    }
  }
}

}  // namespace
}  // namespace kt
