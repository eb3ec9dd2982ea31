// Pre-tokenizers of byte-level BPE vocabularies: the split of a text into words
// before BPE merges run inside each word, selected by the GGUF key
// tokenizer.ggml.pre. Each is a list of split regexes applied in turn, each one
// splitting every piece the previous ones left (matches and the gaps between them
// both become pieces), exactly as llama.cpp's unicode_regex_split does. Two
// patterns (gpt-2's and llama-3's) run as hand-written matchers over Unicode
// categories, as in llama.cpp; the others run through SplitRegex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/pretokenize_regex.h"
#include "runtime/result.h"

namespace kt {

// UTF-8 as llama.cpp decodes it: an invalid or truncated sequence yields
// U+FFFD and resumes at the next byte (no check for overlong forms or surrogates).
std::vector<uint32_t> utf8_to_codepoints(std::string_view s);
void append_utf8(uint32_t cp, std::string* out);
// Bytes of the UTF-8 sequence a lead byte starts (1 for continuation bytes).
inline size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

class PreTokenizer {
 public:
  // name: the value of tokenizer.ggml.pre ("" means llama.cpp's "default").
  static Result<PreTokenizer> for_name(std::string_view name);
  // The names for_name accepts, for messages.
  static std::string supported_names();
  // The split patterns of a name, in order (empty when unknown); for tests.
  static std::vector<std::string_view> patterns(std::string_view name);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Words of text, in order, UTF-8 (invalid input bytes come back as U+FFFD).
  std::vector<std::string> split(std::string_view text) const;

  // Per-vocabulary flags llama.cpp ties to the pre-tokenizer name.
  bool ignore_merges() const { return ignore_merges_; }  // a word that is a token is kept whole
  bool clean_spaces() const { return clean_spaces_; }    // decode removes " ," " ." ... spaces
  bool default_add_bos() const { return default_add_bos_; }

 private:
  struct Step;  // one regex: a hand-written matcher or a SplitRegex
  PreTokenizer() = default;
  std::vector<Step> steps_;
  bool ignore_merges_ = false;
  bool clean_spaces_ = true;
  bool default_add_bos_ = false;
};

}  // namespace kt
