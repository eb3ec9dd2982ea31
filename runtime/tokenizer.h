// The tokenizer of a GGUF model, built from its tokenizer.ggml.* metadata and
// exact against llama.cpp's (c392e509) for the two kinds kt runs:
// - "llama": SentencePiece BPE over the vocabulary's scores, spaces as U+2581,
//   a leading space before text that starts the prompt or follows a special
//   token (add_space_prefix), unknown characters as <0xXX> byte tokens.
// - "gpt2": byte-level BPE over tokenizer.ggml.merges after a pre-tokenizer
//   split chosen by tokenizer.ggml.pre (pretokenize.h).
// Text is first cut at special tokens: user-defined tokens always, control and
// unknown tokens only when parse_special is set (llama.cpp's tokenize() flags).
//
// Where llama.cpp aborts, warns or leaves the outcome unspecified, we choose:
// a byte with no byte token gives <unk> (llama.cpp throws); a four-byte UTF-8
// form past U+10FFFF reads as U+FFFD (throws); special tokens of equal length
// are tried lowest id first, and a role found by text (EOT, FIM) takes the
// lowest id (both follow hash order there); scores and token types must have
// exactly one entry per token (longer arrays are accepted there); a special id
// outside the vocabulary is an error (a warning there). Unicode categories come
// from Python's tables (unicode_data.h), possibly an older Unicode version.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/result.h"

namespace kt {

class PreTokenizer;

// Token attributes (llama.cpp's llama_token_attr), from tokenizer.ggml.token_type.
enum TokenAttr : uint8_t {
  kTokenUndefined = 0,
  kTokenUnknown = 1 << 0,
  kTokenUnused = 1 << 1,
  kTokenNormal = 1 << 2,
  kTokenControl = 1 << 3,
  kTokenUserDefined = 1 << 4,
  kTokenByte = 1 << 5,
};

class Tokenizer {
 public:
  enum class Model { kSpm, kBpe };

  // Errors name the file, the key and its byte offset: a missing or mistyped
  // key, arrays whose lengths disagree, duplicate tokens, ids out of range.
  static Result<Tokenizer> from_gguf(const GgufFile& gguf);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: BOS (and EOS) as the model asks (tokenizer.ggml.add_bos_token ...).
  // parse_special: control tokens written in the text ("<s>", "<|im_end|>") become
  // those tokens; otherwise they are tokenized as plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes of one token, as llama.cpp's token_to_piece: control and unknown
  // tokens are empty unless render_special. A byte token is one byte, so a piece
  // may be part of a UTF-8 sequence (stream output must buffer until complete).
  // An id outside the vocabulary gives "".
  std::string decode_token(int32_t id, bool render_special = false) const;
  // Concatenated pieces; drops the space the encoder prefixed (add_space_prefix)
  // from the first token, and for gpt-2-style vocabularies cleans " ," " ." ...
  // as llama.cpp's detokenize does.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  Model model() const { return model_; }
  size_t n_vocab() const { return text_.size(); }
  int32_t bos() const { return bos_; }  // -1 when the vocabulary has none
  int32_t eos() const { return eos_; }
  int32_t eot() const { return eot_; }
  int32_t unk() const { return unk_; }
  int32_t pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // End of generation: EOS, EOT, EOM and the tokens llama.cpp recognises by text.
  bool is_eog(int32_t id) const;

  int32_t find_token(std::string_view text) const;  // -1 when absent
  const std::string& token_text(int32_t id) const;  // "" outside the vocabulary
  uint8_t token_attr(int32_t id) const;              // TokenAttr bits; 0 outside the vocabulary

 private:
  Tokenizer();

  struct Fragment {
    bool is_token;
    int32_t id;
    size_t offset, length;  // into the encoded text, when !is_token
  };
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;
  void encode_spm(std::string_view text, std::vector<int32_t>* out) const;  // tokenizer_spm.cpp
  void encode_bpe(std::string_view text, std::vector<int32_t>* out) const;  // tokenizer_bpe.cpp
  std::string bpe_piece_bytes(const std::string& token) const;              // tokenizer_bpe.cpp
  int32_t merge_rank(std::string_view left, std::string_view right) const;  // tokenizer_bpe.cpp

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  Model model_ = Model::kSpm;
  std::vector<std::string> text_;
  std::vector<float> score_;
  std::vector<uint8_t> attr_;
  StringMap id_of_;
  StringMap merge_rank_;                  // "left right" -> rank (gpt2)
  std::unique_ptr<PreTokenizer> pre_;     // gpt2
  int32_t byte_token_[256];               // SPM byte fallback: <0xXX> (or the byte itself), -1
  std::vector<int32_t> special_longest_;  // special-token candidates, longest text first
  std::vector<int32_t> eog_;              // sorted
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
  bool clean_spaces_ = false, ignore_merges_ = false;
};

}  // namespace kt
