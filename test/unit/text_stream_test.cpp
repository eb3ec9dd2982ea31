// Streaming detokenization and stop strings (runtime/text_stream.h): every
// string of llama.cpp's vocabulary tests streamed one token at a time must
// give decode()'s text in valid UTF-8 pieces; byte tokens that split a
// character are held; space cleaning matches the batch function; stop strings
// are cut the same way however the text is split.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "test/unit/vocab_cases.h"

namespace kt {
namespace {

using test::find_data;
using test::read_cases;

const std::string kFffd = "\xEF\xBF\xBD";

// An independent strict UTF-8 check (no overlongs, surrogates, or code points
// past U+10FFFF), written from the definition rather than as a state machine.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    size_t len;
    uint32_t cp, min;
    if (b < 0x80) { ++i; continue; }
    if ((b & 0xE0) == 0xC0) { len = 2; cp = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; cp = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; cp = b & 0x07; min = 0x10000; }
    else return false;
    if (i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      const uint8_t c = uint8_t(s[i + j]);
      if ((c & 0xC0) != 0x80) return false;
      cp = cp << 6 | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

struct Loaded {
  GgufFile file;
  Tokenizer tok;
};

const Loaded* load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second.get();
  const auto path = find_data("vocab/ggml-vocab-" + name + ".gguf");
  if (!path) return (cache[name] = nullptr).get();
  Result<GgufFile> f = GgufFile::open(path->string());
  if (!f.ok()) {
    ADD_FAILURE() << f.error().message;
    return nullptr;
  }
  Result<Tokenizer> t = Tokenizer::from_gguf(*f);
  if (!t.ok()) {
    ADD_FAILURE() << t.error().message;
    return nullptr;
  }
  return (cache[name] = std::make_unique<Loaded>(Loaded{std::move(f).value(), std::move(t).value()})).get();
}

// Streams ids one at a time; every piece must be valid UTF-8 on its own.
struct Streamed {
  std::vector<std::string> pieces;
  std::string text;
};
Streamed stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool starts_sequence = true,
                bool render_special = false) {
  TokenTextStream s(tok, starts_sequence, render_special);
  Streamed out;
  for (int32_t id : ids) out.pieces.push_back(s.push(id));
  out.pieces.push_back(s.flush());
  for (const std::string& p : out.pieces) {
    EXPECT_TRUE(valid_utf8(p)) << "piece \"" << printable(p) << "\"";
    out.text += p;
  }
  return out;
}

// ---- Utf8Assembler ----------------------------------------------------------

std::string assemble(std::string_view bytes, bool byte_by_byte) {
  Utf8Assembler a;
  std::string out;
  if (byte_by_byte) {
    for (char c : bytes) a.feed(std::string_view(&c, 1), &out);
  } else {
    a.feed(bytes, &out);
  }
  a.finish(&out);
  return out;
}

TEST(Utf8Assembler, InvalidBytesBecomeOneReplacementPerMaximalSubpart) {
  // Expected outputs from Python's bytes.decode("utf-8", "replace").
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\x80", kFffd},
      {"\xC0\x80", kFffd + kFffd},                      // overlong lead
      {"\xE0\x80\x80", kFffd + kFffd + kFffd},          // overlong 3-byte
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},          // surrogate
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // past U+10FFFF
      {"\xE4\xBD" "A", kFffd + "A"},
      {"\xF0\x9F\x98", kFffd},                          // truncated at the end
      {"\xFF", kFffd},
      {"\xF5\x80", kFffd + kFffd},
      {"\xE4\xBD" "A\xE4\xBD\xA0", kFffd + "A\xE4\xBD\xA0"},
      {"a\xE4\xE4\xBD\xA0", "a" + kFffd + "\xE4\xBD\xA0"},
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(assemble(in, false), want) << printable(in);
    EXPECT_EQ(assemble(in, true), want) << printable(in);
  }
}

TEST(Utf8Assembler, HoldsAnIncompleteTailUntilItCompletes) {
  Utf8Assembler a;
  std::string out;
  a.feed("x\xE4", &out);
  EXPECT_EQ(out, "x");
  EXPECT_TRUE(a.pending());
  a.feed("\xBD", &out);
  EXPECT_EQ(out, "x");
  a.feed("\xA0y", &out);
  EXPECT_EQ(out, "x\xE4\xBD\xA0y");
  EXPECT_FALSE(a.pending());
}

TEST(Utf8Assembler, RandomBytesGiveValidTextWhateverTheSplit) {
  std::mt19937 g(21);
  // Bytes biased towards UTF-8's interesting ones.
  const uint8_t pool[] = {'a', ' ', 0x80, 0x9F, 0xA0, 0xBD, 0xBF, 0xC2, 0xC0, 0xDF, 0xE0, 0xE4, 0xED, 0xEF,
                          0xF0, 0xF4, 0xF5, 0xFF, 0x90, 0x8F};
  for (int round = 0; round < 3000; ++round) {
    std::string s(g() % 12, '\0');
    for (char& c : s) c = char(pool[g() % std::size(pool)]);
    const std::string whole = assemble(s, false);
    ASSERT_TRUE(valid_utf8(whole)) << printable(s);
    ASSERT_EQ(assemble(s, true), whole) << printable(s);
    if (valid_utf8(s)) {
      ASSERT_EQ(whole, s) << printable(s);
    }
  }
}

// ---- CleanSpacesStream --------------------------------------------------------

std::string clean(std::string_view in, bool byte_by_byte) {
  CleanSpacesStream c;
  std::string out;
  if (byte_by_byte) {
    for (char ch : in) c.feed(std::string_view(&ch, 1), &out);
  } else {
    c.feed(in, &out);
  }
  c.finish(&out);
  return out;
}

// Worked through llama.cpp's three passes by hand (and checked against decode()
// below, where the gpt-2 vocabulary is at hand).
const std::vector<std::pair<std::string, std::string>>& clean_cases() {
  static const std::vector<std::pair<std::string, std::string>> k = {
      {"Hello , world !", "Hello, world!"},
      {"a  .", "a ."},           // only the space right before
      {" ?x", "?x"},             // at the very start too
      {"x ' y", "x'y"},
      {"a ' ' b", "a'' b"},      // the consumed space opens no second match
      {"' ' '", "'''"},
      {"it 's we 're I 'm they 've", "it's we're I'm they've"},
      {"it 'r", "it 'r"},        // an incomplete " 're" at the end stays
      {"x '", "x '"},
      {"x 'sa", "x'sa"},
      {" ' 's", "''s"},          // " ' " -> "'", then no space is left before 's
      {"  's", " 's"},
      {"no change", "no change"},
      {"", ""},
      {" ", " "},
  };
  return k;
}

TEST(CleanSpacesStream, HandCases) {
  const auto& cases = clean_cases();
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(clean(in, false), want) << "\"" << in << "\"";
    EXPECT_EQ(clean(in, true), want) << "\"" << in << "\"";
  }
}

// The batch function is Tokenizer::decode on a gpt-2 vocabulary: strings of
// the characters the passes care about, one character per token, must come
// out of the stream as decode() gives them.
TEST(CleanSpacesStream, MatchesDecodeOnRandomText) {
  const Loaded* v = load("gpt-2");
  if (!v) GTEST_SKIP() << "ggml-vocab-gpt-2.gguf not found";
  ASSERT_TRUE(decode_cleans_spaces(v->tok));
  auto char_ids = [&](std::string_view text) {
    std::vector<int32_t> ids;
    for (char c : text) {
      const auto p = v->tok.encode(std::string(1, c), false, false);
      ids.insert(ids.end(), p.begin(), p.end());
    }
    return ids;
  };
  for (const auto& [in, want] : clean_cases()) EXPECT_EQ(v->tok.decode(char_ids(in)), want) << in;
  const std::string alphabet = " '.,?!smrvea";
  std::map<char, std::vector<int32_t>> ids_of;
  for (char c : alphabet) ids_of[c] = v->tok.encode(std::string(1, c), false, false);
  std::mt19937 g(22);
  for (int round = 0; round < 5000; ++round) {
    std::vector<int32_t> ids;
    for (size_t n = g() % 14; n > 0; --n) {
      const auto& p = ids_of[alphabet[g() % alphabet.size()]];
      ids.insert(ids.end(), p.begin(), p.end());
    }
    const std::string want = v->tok.decode(ids);
    ASSERT_EQ(stream(v->tok, ids).text, want);
  }
}

TEST(CleanSpacesStream, OnlyWhereDecodeCleans) {
  for (const auto& [name, cleans] : std::vector<std::pair<std::string, bool>>{
           {"gpt-2", true}, {"llama-spm", false}, {"deepseek-coder", false}, {"deepseek-llm", false}}) {
    const Loaded* v = load(name);
    if (!v) continue;
    EXPECT_EQ(decode_cleans_spaces(v->tok), cleans) << name;
  }
}

// ---- TokenTextStream over llama.cpp's vocabulary tests ------------------------

class VocabStream : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabStream, EveryStringStreamsToItsDecode) {
  const Loaded* v = load(GetParam());
  if (!v) GTEST_SKIP() << GetParam() << " not found";
  const auto cases = read_cases(*find_data("vocab/ggml-vocab-" + GetParam() + ".gguf"));
  ASSERT_GT(cases.size(), 40u);
  size_t checked = 0, held = 0;
  for (const auto& c : cases) {
    for (bool add_special : {false, true}) {
      const std::vector<int32_t> ids = v->tok.encode(c.text, add_special, false);
      const std::string want = v->tok.decode(ids);
      ASSERT_TRUE(valid_utf8(want)) << "decode gave invalid UTF-8 for \"" << printable(c.text) << "\"";
      const Streamed got = stream(v->tok, ids);
      EXPECT_EQ(got.text, want) << GetParam() << ": \"" << printable(c.text) << "\" add_special=" << add_special;
      for (size_t i = 0; i < ids.size(); ++i)  // a token with bytes that printed nothing: held
        held += got.pieces[i].empty() && !v->tok.decode_token(ids[i]).empty();
      ++checked;
    }
  }
  std::cout << "[ streamed ] " << GetParam() << ": " << checked << " sequences, " << held
            << " tokens held back\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, VocabStream,
                         ::testing::Values("llama-spm", "deepseek-coder", "deepseek-llm", "gpt-2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(uint8_t(c)) ? c : '_';
                           return n;
                         });

// ---- hand-built sequences -------------------------------------------------------

std::vector<int32_t> byte_tokens(const Tokenizer& tok, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (char c : bytes) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", unsigned(uint8_t(c)));
    ids.push_back(tok.find_token(hex));
    EXPECT_GE(ids.back(), 0) << hex;
  }
  return ids;
}

TEST(TokenTextStream, ACharacterSplitOverByteTokensWaitsForItsLastByte) {
  const Loaded* v = load("llama-spm");
  if (!v) GTEST_SKIP();
  const std::vector<int32_t> ids = byte_tokens(v->tok, "\xE4\xBD\xA0");  // 你
  const Streamed s = stream(v->tok, ids);
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"", "", "\xE4\xBD\xA0", ""}));
  EXPECT_EQ(s.text, v->tok.decode(ids));
}

TEST(TokenTextStream, AnEmojiOverFourByteTokens) {
  const Loaded* v = load("llama-spm");
  if (!v) GTEST_SKIP();
  std::vector<int32_t> ids = v->tok.encode("Hi", false, false);
  const auto emoji = byte_tokens(v->tok, "\xF0\x9F\x98\x80");
  ids.insert(ids.end(), emoji.begin(), emoji.end());
  const Streamed s = stream(v->tok, ids);
  EXPECT_EQ(s.text, "Hi\xF0\x9F\x98\x80");
  EXPECT_EQ(s.text, v->tok.decode(ids));
  EXPECT_EQ(s.pieces[s.pieces.size() - 2], "\xF0\x9F\x98\x80");  // all at once, on the last byte
}

TEST(TokenTextStream, BpeBytesOfOneCharacterSpreadOverTokens) {
  // Byte-level BPE splits rare characters into byte tokens of their own.
  for (const char* name : {"gpt-2", "deepseek-coder"}) {
    const Loaded* v = load(name);
    if (!v) continue;
    const std::string text = "\xF0\x9F\xA6\x99 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!";  // 🦙 你好 😀!
    const auto ids = v->tok.encode(text, false, false);
    const Streamed s = stream(v->tok, ids);
    EXPECT_EQ(s.text, text) << name;
    size_t held = 0;
    for (size_t i = 0; i < ids.size(); ++i) held += s.pieces[i].empty();
    EXPECT_GT(held, 0u) << name << ": no token was held back; the test tests nothing";
  }
}

TEST(TokenTextStream, AnInvalidByteAtTheEndBecomesAReplacementAtFlush) {
  const Loaded* v = load("llama-spm");
  if (!v) GTEST_SKIP();
  std::vector<int32_t> ids = v->tok.encode("ok", false, false);
  const auto lone = byte_tokens(v->tok, "\xE4");
  ids.insert(ids.end(), lone.begin(), lone.end());
  TokenTextStream s(v->tok);
  std::string text;
  for (int32_t id : ids) text += s.push(id);
  EXPECT_EQ(text, "ok");
  EXPECT_EQ(s.flush(), kFffd);
  // In the middle: the next token shows at once that it cannot complete.
  const int32_t a = v->tok.find_token("\xE2\x96\x81" "a");  // "▁a"
  ASSERT_GE(a, 0);
  EXPECT_EQ(stream(v->tok, {lone[0], a}).pieces[1], kFffd + " a");
}

TEST(TokenTextStream, TheSentencePiecePrefixSpace) {
  const Loaded* v = load("llama-spm");
  if (!v) GTEST_SKIP();
  const auto ids = v->tok.encode("Hello world", false, false);  // "▁Hello" "▁world"
  EXPECT_EQ(stream(v->tok, ids, /*starts_sequence=*/true).text, "Hello world");
  EXPECT_EQ(stream(v->tok, ids, /*starts_sequence=*/false).text, " Hello world");
  // After BOS (whose piece is empty) decode() drops nothing, and neither does the stream.
  const auto with_bos = v->tok.encode("Hello world", true, false);
  ASSERT_EQ(with_bos.front(), v->tok.bos());
  EXPECT_EQ(stream(v->tok, with_bos).text, v->tok.decode(with_bos));
  EXPECT_EQ(stream(v->tok, with_bos).text, " Hello world");
}

TEST(TokenTextStream, SpecialTokensOnlyWhenRendered) {
  const Loaded* v = load("llama-spm");
  if (!v) GTEST_SKIP();
  const auto ids = v->tok.encode("<s>Hi</s>", false, /*parse_special=*/true);
  ASSERT_EQ(ids.front(), v->tok.bos());
  EXPECT_EQ(stream(v->tok, ids, true, false).text, v->tok.decode(ids, false));
  EXPECT_EQ(stream(v->tok, ids, true, true).text, v->tok.decode(ids, true));
  EXPECT_EQ(stream(v->tok, ids, true, true).text, "<s> Hi</s>");
}

TEST(TokenTextStream, GptTwoHoldsATrailingSpaceForTheNextToken) {
  const Loaded* v = load("gpt-2");
  if (!v) GTEST_SKIP();
  const auto ids = v->tok.encode("Hello ,world", false, false);  // "Hello" " ," "world"
  TokenTextStream s(v->tok);
  std::string text;
  for (int32_t id : ids) text += s.push(id);
  text += s.flush();
  EXPECT_EQ(text, "Hello,world");
  EXPECT_EQ(text, v->tok.decode(ids));
  // A space at the very end comes out at flush.
  TokenTextStream t(v->tok);
  const auto sp = v->tok.encode("a ", false, false);
  std::string pushed;
  for (int32_t id : sp) pushed += t.push(id);
  EXPECT_EQ(pushed, "a");
  EXPECT_EQ(t.flush(), " ");
}

TEST(TokenTextStream, PushesAfterFlushContinueTheSequence) {
  const Loaded* v = load("llama-spm");
  if (!v) GTEST_SKIP();
  const auto ids = v->tok.encode("Hello world", false, false);
  TokenTextStream s(v->tok);
  EXPECT_EQ(s.push(ids[0]), "Hello");
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(s.push(ids[1]), " world");  // the prefix space is dropped only once
  EXPECT_EQ(s.push(-1), "");            // outside the vocabulary: nothing
}

// ---- StopMatcher ---------------------------------------------------------------------

struct StopRun {
  std::string text;
  bool stopped = false;
  int32_t index = -1;
};
StopRun run_stops(const std::vector<std::string>& stops, const std::vector<std::string>& pushes) {
  StopMatcher m(stops);
  StopRun r;
  for (const std::string& p : pushes) {
    const StopMatcher::Output o = m.push(p);
    r.text += o.text;
    if (o.stopped && !r.stopped) {
      r.stopped = true;
      r.index = o.stop_index;
    }
  }
  r.text += m.flush();
  return r;
}

TEST(StopMatcher, AStopStringAcrossThreePushes) {
  StopMatcher m({"</answer>"});
  auto a = m.push("The end</an");
  EXPECT_EQ(a.text, "The end");
  EXPECT_FALSE(a.stopped);
  auto b = m.push("swe");
  EXPECT_EQ(b.text, "");
  EXPECT_FALSE(b.stopped);
  auto c = m.push("r> and more");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.stop_index, 0);
  EXPECT_TRUE(m.stopped());
  EXPECT_TRUE(m.push("later").stopped);
  EXPECT_EQ(m.push("later").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, APrefixThatDoesNotMatchIsReleased) {
  StopMatcher m({"</answer>"});
  EXPECT_EQ(m.push("a </an").text, "a ");
  EXPECT_EQ(m.push("t").text, "</ant");
  EXPECT_EQ(m.push(" <").text, " ");
  EXPECT_EQ(m.flush(), "<");  // the text ended: what was held comes out
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, TextBeforeTheStopInTheSamePushIsEmitted) {
  StopMatcher m({"STOP"});
  const auto o = m.push("go STOP now");
  EXPECT_EQ(o.text, "go ");
  EXPECT_TRUE(o.stopped);
}

TEST(StopMatcher, OneStopStringIsAPrefixOfAnother) {
  // The shorter one completes first, so it wins, whichever order they are given in.
  for (const auto& stops : {std::vector<std::string>{"</s>", "</s>>"}, std::vector<std::string>{"</s>>", "</s>"}}) {
    const int32_t shorter = stops[0] == "</s>" ? 0 : 1;
    StopRun r = run_stops(stops, {"x</", "s>", ">y"});
    EXPECT_EQ(r.text, "x");
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.index, shorter);
    r = run_stops(stops, {"x</s>>y"});
    EXPECT_EQ(r.text, "x");
    EXPECT_EQ(r.index, shorter);
  }
  // One ends inside the other: "bc" completes before "abcd" could.
  for (const auto& pushes : {std::vector<std::string>{"abcd"}, std::vector<std::string>{"a", "b", "c", "d"}}) {
    const StopRun r = run_stops({"abcd", "bc"}, pushes);
    EXPECT_EQ(r.text, "a");
    EXPECT_EQ(r.index, 1);
  }
  // While a longer one could still match, its prefix is held even if a shorter one cannot.
  StopMatcher m({"abc", "x"});
  EXPECT_EQ(m.push("zab").text, "z");
  EXPECT_EQ(m.push("d").text, "abd");
}

TEST(StopMatcher, EmptyStopStringsAreIgnoredAndIndicesKept) {
  const StopRun r = run_stops({"", "end"}, {"the end"});
  EXPECT_EQ(r.text, "the ");
  EXPECT_EQ(r.index, 1);
  EXPECT_EQ(run_stops({""}, {"text"}).text, "text");
  EXPECT_FALSE(run_stops({}, {"text"}).stopped);
}

TEST(StopMatcher, MultiByteStopStringsKeepTheTextValid) {
  StopMatcher m({"\xE3\x80\x82\xE3\x80\x82"});  // "。。"
  std::string out;
  for (const char* p : {"\xE4\xBD\xA0\xE3\x80\x82", "\xE5\xA5\xBD", "\xE3\x80\x82\xE3\x80\x82!"}) {
    const auto o = m.push(p);
    EXPECT_TRUE(valid_utf8(o.text));
    out += o.text;
  }
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "\xE4\xBD\xA0\xE3\x80\x82\xE5\xA5\xBD");
}

// Random texts and stop strings over a small alphabet, split at random: the
// result must equal the reference (the match that ends first, then the
// longest, on the whole text) for every split.
TEST(StopMatcher, SplitsDoNotChangeTheResult) {
  std::mt19937 g(23);
  auto word = [&](size_t max_len) {
    std::string s(1 + g() % max_len, 'a');
    for (char& c : s) c = char('a' + g() % 3);
    return s;
  };
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::string> stops;
    for (size_t n = 1 + g() % 3; n > 0; --n) stops.push_back(word(4));
    const std::string text = word(16);
    StopRun want{text, false, -1};
    size_t best_end = std::string::npos, best_start = 0;
    for (size_t i = 0; i < stops.size(); ++i) {
      const size_t at = text.find(stops[i]);
      if (at == std::string::npos) continue;
      const size_t end = at + stops[i].size();
      if (end < best_end || (end == best_end && at < best_start)) {
        best_end = end;
        best_start = at;
        want = {text.substr(0, at), true, int32_t(i)};
      }
    }
    std::vector<std::string> pushes;
    for (size_t at = 0; at < text.size();) {
      const size_t len = std::min(text.size() - at, size_t(g() % 4));
      pushes.push_back(text.substr(at, len));
      at += len;
    }
    const StopRun got = run_stops(stops, pushes);
    ASSERT_EQ(got.text, want.text) << text;
    ASSERT_EQ(got.stopped, want.stopped) << text;
    ASSERT_EQ(got.index, want.index) << text;
  }
}

}  // namespace
}  // namespace kt
