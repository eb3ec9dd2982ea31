// Tokenizer: loading from GGUF metadata, the special-token split, decoding.
// The two BPE algorithms live in tokenizer_spm.cpp and tokenizer_bpe.cpp.
#include "runtime/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/pretokenize.h"

namespace kt {

namespace {

// Tokens llama.cpp recognises by their text when the GGUF names no id for the
// role (llama-vocab.cpp, load()); a recognised token also becomes a control
// token, so that plain text containing it is not cut at it.
struct TextRole {
  const char* key;  // tokenizer.ggml.<key>; an id given there wins
  std::vector<std::string_view> texts;
  bool end_of_generation;
};
const std::vector<TextRole>& text_roles() {
  static const std::vector<TextRole> k = {
      {"eot_token_id",
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "<\uFF5Cend\u2581of\u2581sentence\uFF5C>", "<end_of_utterance>"},
       true},
      {"eom_token_id", {"<|eom_id|>"}, true},
      {"fim_pre_token_id",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uFF5Cfim\u2581begin\uFF5C>", "<PRE>",
        "\u2581<PRE>", "<|code_prefix|>"},
       false},
      {"fim_suf_token_id",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uFF5Cfim\u2581hole\uFF5C>", "<SUF>",
        "\u2581<SUF>", "<|code_suffix|>"},
       false},
      {"fim_mid_token_id",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uFF5Cfim\u2581end\uFF5C>", "<MID>",
        "\u2581<MID>", "<|code_middle|>"},
       false},
      {"fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}, true},
      {"fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}, true},
      {"fim_sep_token_id", {"<|file_sep|>"}, true},
  };
  return k;
}

// Texts of tokens that end generation wherever they are.
const std::vector<std::string_view>& eog_texts() {
  static const std::vector<std::string_view> k = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
      "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
      "<\uFF5Cend\u2581of\u2581sentence\uFF5C>"};
  return k;
}

uint8_t attr_of_type(int64_t type) {
  switch (type) {
    case 1: return kTokenNormal;
    case 2: return kTokenUnknown;
    case 3: return kTokenControl;
    case 4: return kTokenUserDefined;
    case 5: return kTokenUnused;
    case 6: return kTokenByte;
    default: return kTokenUndefined;
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, or -1.
int byte_of_token_text(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Metadata access with errors that name the place: "<file>:<offset>: <key>: ...".
class MetaReader {
 public:
  explicit MetaReader(const GgufFile& f) : f_(f) {}

  const GgufKV* find(std::string_view key) const {
    for (const GgufKV& kv : f_.metadata())
      if (kv.key == key) return &kv;
    return nullptr;
  }
  Error bad(const GgufKV& kv, const std::string& what) const {
    return err(f_.path(), ":", kv.file_offset, ": ", kv.key, ": ", what);
  }
  Error missing(std::string_view key) const { return err(f_.path(), ": ", key, ": missing"); }

  // An array of elem (or of any of elems), with exactly n entries when n > 0.
  Result<const GgufKV*> array(std::string_view key, std::initializer_list<GgufType> elems,
                              uint64_t n) const {
    const GgufKV* kv = find(key);
    if (!kv) return missing(key);
    bool ok = kv->value.type() == GgufType::ARRAY;
    bool elem_ok = false;
    for (GgufType e : elems) elem_ok = elem_ok || kv->value.elem_type() == e;
    if (!ok || !elem_ok)
      return bad(*kv, "expected an array of " + std::string(gguf_type_name(*elems.begin())) +
                          ", found " + std::string(gguf_type_name(kv->value.type())) +
                          (ok ? " of " + std::string(gguf_type_name(kv->value.elem_type())) : ""));
    if (n && kv->value.size() != n)
      return bad(*kv, "has " + std::to_string(kv->value.size()) + " entries for " +
                          std::to_string(n) + " tokens");
    return kv;
  }

  // An optional token id; *id is left alone when the key is absent.
  Status token_id(std::string_view key, size_t n_vocab, int32_t* id) const {
    const GgufKV* kv = find(key);
    if (!kv) return ok_status();
    int64_t v = 0;
    if (!kv->value.is_integer() || !kv->value.get_i64(&v))
      return bad(*kv, "expected an integer token id, found " + kv->value.to_string());
    if (v < 0 || uint64_t(v) >= n_vocab)
      return bad(*kv, "token id " + std::to_string(v) + " is outside the vocabulary of " +
                          std::to_string(n_vocab));
    *id = int32_t(v);
    return ok_status();
  }

  Status flag(std::string_view key, bool* out) const {
    const GgufKV* kv = find(key);
    if (!kv) return ok_status();
    if (!kv->value.get_bool(out)) return bad(*kv, "expected a bool, found " + kv->value.to_string());
    return ok_status();
  }

 private:
  const GgufFile& f_;
};

}  // namespace

Tokenizer::Tokenizer() { std::fill(std::begin(byte_token_), std::end(byte_token_), -1); }
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  const MetaReader meta(gguf);
  Tokenizer t;

  const GgufKV* model_kv = meta.find("tokenizer.ggml.model");
  if (!model_kv) return meta.missing("tokenizer.ggml.model");
  const std::string_view model = model_kv->value.str();
  if (model == "llama") {
    t.model_ = Model::kSpm;
    t.add_space_prefix_ = true;
    t.add_bos_ = true;
  } else if (model == "gpt2") {
    t.model_ = Model::kBpe;
    std::string_view pre;
    if (const GgufKV* pre_kv = meta.find("tokenizer.ggml.pre")) {
      if (pre_kv->value.type() != GgufType::STRING) return meta.bad(*pre_kv, "expected a string");
      pre = pre_kv->value.str();
    }
    Result<PreTokenizer> p = PreTokenizer::for_name(pre);
    if (!p.ok()) {
      return pre.empty() ? err(gguf.path(), ": tokenizer.ggml.pre: ", p.error().message)
                         : meta.bad(*meta.find("tokenizer.ggml.pre"), p.error().message);
    }
    t.pre_ = std::make_unique<PreTokenizer>(std::move(p).value());
    t.add_bos_ = t.pre_->default_add_bos();
    t.clean_spaces_ = t.pre_->clean_spaces();
    t.ignore_merges_ = t.pre_->ignore_merges();
  } else {
    return meta.bad(*model_kv, "unsupported tokenizer model " + model_kv->value.to_string() +
                                   " (supported: \"llama\", \"gpt2\")");
  }

  // Tokens, scores, types.
  Result<const GgufKV*> tokens = meta.array("tokenizer.ggml.tokens", {GgufType::STRING}, 0);
  if (!tokens.ok()) return tokens.error();
  const GgufValue& tok = (*tokens)->value;
  const uint64_t n = tok.size();
  if (n == 0 || n > uint64_t(INT32_MAX)) return meta.bad(**tokens, "bad token count " + std::to_string(n));

  const GgufValue* scores = nullptr;
  if (meta.find("tokenizer.ggml.scores")) {
    auto s = meta.array("tokenizer.ggml.scores", {GgufType::FLOAT32, GgufType::INT32}, n);
    if (!s.ok()) return s.error();
    scores = &(*s)->value;
  }
  const GgufValue* types = nullptr;
  if (meta.find("tokenizer.ggml.token_type")) {
    auto s = meta.array("tokenizer.ggml.token_type", {GgufType::INT32}, n);
    if (!s.ok()) return s.error();
    types = &(*s)->value;
  }

  t.text_.resize(n);
  t.score_.assign(n, 0.0f);
  t.attr_.assign(n, kTokenNormal);
  t.id_of_.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string word(tok.at(i).str());
    if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    if (scores) {
      double d = 0;
      scores->at(i).get_f64(&d);
      t.score_[i] = float(d);
    }
    if (types) {
      int64_t ty = 0;
      types->at(i).get_i64(&ty);
      t.attr_[i] = attr_of_type(ty);
      if (t.attr_[i] == kTokenByte && byte_of_token_text(word) < 0)
        return meta.bad(*meta.find("tokenizer.ggml.token_type"),
                        "token " + std::to_string(i) + " is a byte token but its text is not <0xXX>");
    }
    auto [it, inserted] = t.id_of_.emplace(word, int32_t(i));
    if (!inserted)
      return meta.bad(**tokens, "duplicate token \"" + word + "\" at ids " +
                                    std::to_string(it->second) + " and " + std::to_string(i));
    t.text_[i] = std::move(word);
  }

  if (t.model_ == Model::kBpe) {
    Result<const GgufKV*> merges = meta.array("tokenizer.ggml.merges", {GgufType::STRING}, 0);
    if (!merges.ok()) return merges.error();
    const GgufValue& m = (*merges)->value;
    t.merge_rank_.reserve(m.size());
    for (uint64_t i = 0; i < m.size() && i < uint64_t(INT32_MAX); ++i) {
      const std::string_view s = m.at(i).str();
      // "left right", split at the first space after the first byte; the first
      // of duplicate entries keeps its rank. An entry without a space can never match.
      if (s.find(' ', 1) == std::string_view::npos) continue;
      t.merge_rank_.emplace(std::string(s), int32_t(i));
    }
  } else {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      int32_t id = t.find_token(hex);
      if (id < 0) id = t.find_token(std::string(1, char(b)));
      t.byte_token_[b] = id;
    }
  }

  // Special ids: the model's defaults when they fit, then the GGUF's.
  auto fit = [&](int32_t id) { return id >= 0 && uint64_t(id) < n ? id : -1; };
  t.bos_ = fit(t.model_ == Model::kSpm ? 1 : 11);
  t.eos_ = fit(t.model_ == Model::kSpm ? 2 : 11);
  t.unk_ = fit(t.model_ == Model::kSpm ? 0 : -1);
  KT_TRY(meta.token_id("tokenizer.ggml.bos_token_id", n, &t.bos_));
  KT_TRY(meta.token_id("tokenizer.ggml.eos_token_id", n, &t.eos_));
  KT_TRY(meta.token_id("tokenizer.ggml.unknown_token_id", n, &t.unk_));
  KT_TRY(meta.token_id("tokenizer.ggml.padding_token_id", n, &t.pad_));
  KT_TRY(meta.flag("tokenizer.ggml.add_bos_token", &t.add_bos_));
  KT_TRY(meta.flag("tokenizer.ggml.add_eos_token", &t.add_eos_));
  KT_TRY(meta.flag("tokenizer.ggml.add_space_prefix", &t.add_space_prefix_));
  if (t.add_bos_ && t.bos_ < 0) return err(gguf.path(), ": add_bos_token is set but there is no BOS token");
  if (t.add_eos_ && t.eos_ < 0) return err(gguf.path(), ": add_eos_token is set but there is no EOS token");

  // Roles found by text, and the end-of-generation set.
  for (const TextRole& role : text_roles()) {
    int32_t id = -1;
    KT_TRY(meta.token_id(std::string("tokenizer.ggml.") + role.key, n, &id));
    if (id < 0) {
      for (std::string_view text : role.texts) {
        const int32_t cand = t.find_token(text);
        if (cand >= 0 && (id < 0 || cand < id)) id = cand;
      }
      if (id >= 0) t.attr_[id] |= kTokenControl;
    }
    if (std::strcmp(role.key, "eot_token_id") == 0) t.eot_ = id;
    if (std::strcmp(role.key, "eom_token_id") == 0) t.eom_ = id;
    if (id >= 0 && role.end_of_generation) t.eog_.push_back(id);
  }
  for (std::string_view text : eog_texts()) {
    const int32_t id = t.find_token(text);
    if (id < 0) continue;
    t.eog_.push_back(id);
    t.attr_[id] |= kTokenControl;
  }
  if (t.eos_ >= 0) t.eog_.push_back(t.eos_);
  std::sort(t.eog_.begin(), t.eog_.end());
  t.eog_.erase(std::unique(t.eog_.begin(), t.eog_.end()), t.eog_.end());

  // Special tokens that can be cut out of text, longest first so that a token
  // containing another wins (ties: lower id first; llama.cpp's order is unspecified).
  for (uint64_t i = 0; i < n; ++i)
    if (t.attr_[i] & (kTokenControl | kTokenUserDefined | kTokenUnknown)) t.special_longest_.push_back(int32_t(i));
  std::stable_sort(t.special_longest_.begin(), t.special_longest_.end(),
                   [&](int32_t a, int32_t b) { return t.text_[a].size() > t.text_[b].size(); });
  return t;
}

int32_t Tokenizer::find_token(std::string_view text) const {
  auto it = id_of_.find(text);
  return it == id_of_.end() ? -1 : it->second;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && size_t(id) < text_.size() ? text_[id] : kNone;
}

uint8_t Tokenizer::token_attr(int32_t id) const {
  return id >= 0 && size_t(id) < attr_.size() ? attr_[id] : 0;
}

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

// llama.cpp's tokenizer_st_partition: for each special token, longest first, cut
// every remaining text fragment at each of its occurrences.
std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text,
                                                          bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({false, -1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_longest_) {
    if (!parse_special && (attr_[id] & (kTokenControl | kTokenUnknown))) continue;
    const std::string& tok = text_[id];
    if (text.find(tok) == std::string_view::npos) continue;  // then in no fragment either
    next.clear();
    for (const Fragment& f : frags) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      size_t off = f.offset, len = f.length;
      while (len > 0) {
        const size_t m = text.substr(0, off + len).find(tok, off);
        if (m == std::string_view::npos) {
          next.push_back({false, -1, off, len});
          break;
        }
        if (m > off) next.push_back({false, -1, off, m - off});
        next.push_back({true, id, 0, 0});
        len = off + len - (m + tok.size());
        off = m + tok.size();
      }
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && add_bos_) out.push_back(bos_);
  bool after_special = true;  // SPM: a fragment that starts the text or follows a special token
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.is_token) {
      out.push_back(f.id);
      after_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.offset, f.length);
    if (model_ == Model::kSpm) {
      std::string s = add_space_prefix_ && after_special ? " " : "";
      s += raw;
      encode_spm(s, &out);
    } else {
      encode_bpe(raw, &out);
    }
    after_special = false;
  }
  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

std::string Tokenizer::decode_token(int32_t id, bool render_special) const {
  if (id < 0 || size_t(id) >= text_.size()) return "";
  const uint8_t attr = attr_[id];
  const std::string& text = text_[id];
  if (attr & (kTokenUnknown | kTokenControl)) return render_special ? text : "";
  if (attr & kTokenUserDefined) return text;
  if (attr & kTokenNormal) {
    if (model_ == Model::kBpe) return bpe_piece_bytes(text);
    std::string s;  // U+2581 back to spaces
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        s += ' ';
        i += 2;
      } else {
        s += text[i];
      }
    }
    return s;
  }
  if (attr & kTokenByte) return std::string(1, char(byte_of_token_text(text)));
  return "";  // undefined and unused tokens print nothing
}

namespace {

// llama.cpp's clean_up_tokenization_spaces, three passes over the text. Each
// pass reads its neighbours from the text as the pass found it (src).
std::string clean_spaces(std::string text) {
  if (text.empty()) return text;
  auto pass = [](std::string& src, auto&& body) {
    std::string dst(1, src[0]);
    for (size_t i = 1; i < src.size(); ++i) body(src, dst, i);
    src = std::move(dst);
  };
  // " ?", " !", " .", " ," lose the space.
  pass(text, [](std::string& s, std::string& d, size_t& i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) d.pop_back();
    d += x;
  });
  // " ' " becomes "'".
  pass(text, [](std::string& s, std::string& d, size_t& i) {
    const char x = s[i];
    if (x == '\'' && i + 1 < s.size() && s[i - 1] == ' ' && s[i + 1] == ' ') {
      d.pop_back();
      s[++i] = '\0';  // the space after is skipped, and no longer a space for the next test
    }
    d += x;
  });
  // " 's", " 'm", " 're", " 've" lose the space.
  pass(text, [](std::string& s, std::string& d, size_t& i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && x == '\'' && i + 1 < s.size()) {
      const char x1 = s[i + 1];
      if (x1 == 's' || x1 == 'm') {
        d.pop_back();
      } else if (i + 2 < s.size()) {
        const char x2 = s[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) d.pop_back();
      }
    }
    d += x;
  });
  return text;
}

}  // namespace

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = decode_token(ids[i], render_special);
    if (i == 0 && add_space_prefix_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
  }
  return clean_spaces_ ? clean_spaces(std::move(out)) : out;
}

}  // namespace kt
