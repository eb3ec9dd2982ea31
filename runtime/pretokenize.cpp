// The pre-tokenizer table (name -> split regexes and flags), the hand-written
// matchers for the gpt-2 and llama-3 patterns, and UTF-8 conversion.
#include "runtime/pretokenize.h"

#include <optional>

#include "runtime/unicode_data.h"

namespace kt {

std::vector<uint32_t> utf8_to_codepoints(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  auto cont = [&](size_t i) { return i < s.size() && (uint8_t(s[i]) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = uint8_t(s[i]);
    if (!(c & 0x80)) {
      out.push_back(c);
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && cont(i + 1)) {
      out.push_back(uint32_t(c & 0x1F) << 6 | (uint8_t(s[i + 1]) & 0x3F));
      i += 2;
    } else if ((c & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      out.push_back(uint32_t(c & 0x0F) << 12 | uint32_t(uint8_t(s[i + 1]) & 0x3F) << 6 |
                    (uint8_t(s[i + 2]) & 0x3F));
      i += 3;
    } else if ((c & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      out.push_back(uint32_t(c & 0x07) << 18 | uint32_t(uint8_t(s[i + 1]) & 0x3F) << 12 |
                    uint32_t(uint8_t(s[i + 2]) & 0x3F) << 6 | (uint8_t(s[i + 3]) & 0x3F));
      i += 4;
    } else {
      out.push_back(0xFFFD);  // one replacement per bad byte, like llama.cpp
      i += 1;
    }
  }
  return out;
}

void append_utf8(uint32_t cp, std::string* out) {
  // Four-byte forms can decode past U+10FFFF; llama.cpp throws on those, we
  // substitute U+FFFD so that hostile text cannot abort the process.
  if (cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

namespace {

// ---- the table -------------------------------------------------------------

constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3Pattern =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The cased letters of DeepSeek-LLM's tokenizer.json, written as escapes
// because several are canonical singletons (U+1FBE, U+2126, U+212A ...) that an
// editor's normalization would silently turn into other code points.
constexpr std::string_view kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5"
    "\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59"
    "\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
    "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E"
    "\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A"
    "\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2"
    "\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+";

// CJK Unified Ideographs up to U+9FA5, U+0800..U+4E00 and Hangul.
constexpr std::string_view kDeepseekCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

struct PreTokenizerSpec {
  std::vector<std::string_view> names;
  std::vector<std::string_view> patterns;
  bool ignore_merges = false;
  bool clean_spaces = true;
  bool add_bos = false;
};

// From llama.cpp's llama-vocab.cpp (names, patterns, flags), commit c392e509.
const std::vector<PreTokenizerSpec>& specs() {
  static const std::vector<PreTokenizerSpec> k = {
      {{"default", ""},
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Pattern, "\\p{N}+", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de"},
       {kGpt2Pattern}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"},
       {kLlama3Pattern}, /*ignore_merges=*/true, /*clean_spaces=*/true, /*add_bos=*/true},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLlmLetters,
        "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$",
        kDeepseekCjk, "\\p{N}+"},
       false, /*clean_spaces=*/false},
      {{"deepseek-coder"},
       {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"},
       false, /*clean_spaces=*/false},
      {{"deepseek-v3"},
       {"\\p{N}{1,3}", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
        "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
       false, /*clean_spaces=*/false},
      {{"qwen2", "deepseek-r1-qwen"},
       {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       false, /*clean_spaces=*/false},
  };
  return k;
}

// ---- hand-written matchers -------------------------------------------------

constexpr uint16_t kWhitespaceBit = 1 << 8;
constexpr uint32_t kOutside = 0xFFFFFFFF;

// One piece [ini, end) of the text, seen as the hand-written matchers see it:
// outside the piece there is no code point (kOutside) and no flag at all.
struct PieceView {
  const std::vector<uint32_t>& cpts;
  size_t ini, end;
  uint32_t cpt(size_t i) const { return i >= ini && i < end ? cpts[i] : kOutside; }
  uint16_t flags(size_t i) const {
    if (i < ini || i >= end) return 0;
    const uint32_t c = cpts[i];
    return unicode::category_flag(c) | (unicode::is_whitespace(c) ? kWhitespaceBit : 0);
  }
  bool letter(size_t i) const { return flags(i) & unicode::kLetter; }
  bool number(size_t i) const { return flags(i) & unicode::kNumber; }
  bool space(size_t i) const { return flags(i) & kWhitespaceBit; }
  // [^\s\p{L}\p{N}] inside the piece
  bool other(size_t i) const {
    const uint16_t f = flags(i);
    return f != 0 && !(f & (kWhitespaceBit | unicode::kLetter | unicode::kNumber));
  }
};

// 's|'t|'re|'ve|'m|'ll|'d at pos (ASCII case folding when fold: no non-ASCII
// code point lowercases to one of these letters). Returns the length or 0.
size_t contraction(const PieceView& v, size_t pos, bool fold) {
  if (v.cpt(pos) != '\'' || pos + 1 >= v.end) return 0;
  auto lower = [&](uint32_t c) { return fold && c >= 'A' && c <= 'Z' ? c + 32 : c; };
  const uint32_t a = lower(v.cpt(pos + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= v.end) return 0;
  const uint32_t b = lower(v.cpt(pos + 2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// Whitespace run at pos: \s+(?!\S) leaves the last one for the next word when a
// non-space follows inside the piece; otherwise \s+ takes all.
size_t whitespace_run(const PieceView& v, size_t pos) {
  size_t n = 0;
  while (v.space(pos + n)) ++n;
  if (n > 1 && v.cpt(pos + n) != kOutside) return n - 1;
  return n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const PieceView& v, std::vector<size_t>* out) {
  size_t pos = v.ini;
  while (pos < v.end) {
    size_t len = contraction(v, pos, false);
    if (!len) {
      const size_t body = pos + (v.cpt(pos) == ' ');
      size_t e = body;
      if (v.letter(body)) { while (v.letter(e)) ++e; }
      else if (v.number(body)) { while (v.number(e)) ++e; }
      else if (v.other(body)) { while (v.other(e)) ++e; }
      if (e > body) len = e - pos;
    }
    if (!len) len = whitespace_run(v, pos);
    if (!len) len = 1;
    out->push_back(len);
    pos += len;
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const PieceView& v, std::vector<size_t>* out) {
  size_t pos = v.ini;
  auto emit = [&](size_t e) { out->push_back(e - pos); pos = e; };
  while (pos < v.end) {
    const uint32_t c = v.cpt(pos);
    if (size_t len = contraction(v, pos, true)) { emit(pos + len); continue; }
    if (c != '\r' && c != '\n' && !v.number(pos) && (v.letter(pos) || v.letter(pos + 1))) {
      size_t e = pos + 1;
      while (v.letter(e)) ++e;
      emit(e);
      continue;
    }
    if (v.number(pos)) {
      size_t e = pos;
      while (v.number(e) && e - pos < 3) ++e;
      emit(e);
      continue;
    }
    const size_t body = pos + (c == ' ');
    if (v.other(body)) {
      size_t e = body;
      while (v.other(e)) ++e;
      while (v.cpt(e) == '\r' || v.cpt(e) == '\n') ++e;
      emit(e);
      continue;
    }
    size_t n = 0, last_newline_end = 0;
    for (; v.space(pos + n); ++n) {
      if (v.cpt(pos + n) == '\r' || v.cpt(pos + n) == '\n') last_newline_end = pos + n + 1;
    }
    if (last_newline_end) { emit(last_newline_end); continue; }
    const size_t ws = whitespace_run(v, pos);
    emit(pos + (ws ? ws : 1));
  }
}

enum class Matcher { kGpt2, kLlama3, kRegex };

}  // namespace

struct PreTokenizer::Step {
  Matcher matcher = Matcher::kRegex;
  std::optional<SplitRegex> regex;
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::string PreTokenizer::supported_names() {
  std::string s;
  for (const PreTokenizerSpec& spec : specs()) {
    for (std::string_view n : spec.names) {
      if (n.empty()) continue;
      if (!s.empty()) s += ", ";
      s += n;
    }
  }
  return s;
}

std::vector<std::string_view> PreTokenizer::patterns(std::string_view name) {
  for (const PreTokenizerSpec& spec : specs())
    for (std::string_view n : spec.names)
      if (n == name) return spec.patterns;
  return {};
}

Result<PreTokenizer> PreTokenizer::for_name(std::string_view name) {
  for (const PreTokenizerSpec& spec : specs()) {
    bool hit = false;
    for (std::string_view n : spec.names) hit = hit || n == name;
    if (!hit) continue;
    PreTokenizer p;
    p.ignore_merges_ = spec.ignore_merges;
    p.clean_spaces_ = spec.clean_spaces;
    p.default_add_bos_ = spec.add_bos;
    for (std::string_view pattern : spec.patterns) {
      Step step;
      if (pattern == kGpt2Pattern) {
        step.matcher = Matcher::kGpt2;
      } else if (pattern == kLlama3Pattern) {
        step.matcher = Matcher::kLlama3;
      } else {
        Result<SplitRegex> re = SplitRegex::compile(pattern);
        if (!re.ok()) return re.error();
        step.regex.emplace(std::move(re).value());
      }
      p.steps_.push_back(std::move(step));
    }
    return p;
  }
  return err("unsupported pre-tokenizer '", name, "' (supported: ", supported_names(), ")");
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  const std::vector<uint32_t> cpts = utf8_to_codepoints(text);
  if (cpts.empty()) return {};
  std::vector<size_t> pieces = {cpts.size()};
  std::optional<std::vector<uint32_t>> subject[2];  // by SplitRegex::Mode, made on first use
  for (const Step& step : steps_) {
    std::vector<size_t> next;
    next.reserve(pieces.size() * 2);
    if (step.matcher == Matcher::kRegex) {
      const SplitRegex::Mode mode = step.regex->mode();
      auto& subj = subject[mode == SplitRegex::Mode::kWide];
      if (!subj) subj = SplitRegex::map_subject(cpts, mode);
      next = step.regex->split(*subj, pieces);
    } else {
      size_t ini = 0;
      for (size_t len : pieces) {
        const PieceView view{cpts, ini, ini + len};
        if (step.matcher == Matcher::kGpt2) split_gpt2(view, &next);
        else split_llama3(view, &next);
        ini += len;
      }
    }
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t ini = 0;
  for (size_t len : pieces) {
    std::string w;
    for (size_t i = ini; i < ini + len; ++i) append_utf8(cpts[i], &w);
    words.push_back(std::move(w));
    ini += len;
  }
  return words;
}

}  // namespace kt
