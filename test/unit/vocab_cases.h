// llama.cpp's tokenizer test vectors (tests/test-tokenizer-0.cpp's format) and
// where the test data lives, for the tokenizer and pre-tokenizer tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kt::test {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// test/data first (what a plain clone has), then the shared reference set.
inline std::optional<fs::path> find_data(const std::string& rel) {
  for (const fs::path& dir : {fs::path(KT_TEST_DATA_DIR), fs::path(KT_SHARED_MODELS_DIR)}) {
    if (fs::exists(dir / rel)) return dir / rel;
  }
  return std::nullopt;
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Split as llama.cpp's tests/test-tokenizer-0.cpp: strings are separated by
// "\n__ggml_vocab_test__\n"; one line of ids per string.
inline std::vector<VocabCase> read_cases(const fs::path& vocab) {
  const std::string inp = read_file(vocab.string() + ".inp");
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(read_file(vocab.string() + ".out"));
  std::vector<VocabCase> cases;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    VocabCase c;
    c.text = i < texts.size() ? texts[i] : "";
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << vocab;
  return cases;
}

}  // namespace kt::test
