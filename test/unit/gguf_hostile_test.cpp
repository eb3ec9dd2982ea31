// Hostile GGUF files, built here field by field: each must be refused with one
// line naming the file, the byte offset and the field, never a crash, an
// out-of-bounds read (the suite runs under ASan/UBSan in CI) or a huge allocation.
// The corpus is also written to disk for the kt-gguf tool test (gguf_hostile_cli).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>

#include "runtime/gguf.h"
#include "test/unit/gguf_bytes.h"

namespace kt {
namespace {

using test::Bytes;
using test::GgufParts;

struct Case {
  std::string name;
  std::function<std::vector<uint8_t>()> make;
  std::string field;  // a substring the message must contain
};

std::vector<uint8_t> with(std::function<void(GgufParts&)> edit) {
  GgufParts p = GgufParts::valid();
  edit(p);
  return p.build();
}

std::vector<Case> corpus() {
  const uint64_t kHuge = uint64_t(1) << 60;
  std::vector<Case> c;
  auto add = [&](std::string n, std::function<std::vector<uint8_t>()> m, std::string f) {
    c.push_back({std::move(n), std::move(m), std::move(f)});
  };
  auto edit = [&](std::string n, std::function<void(GgufParts&)> e, std::string f) {
    add(std::move(n), [e] { return with(e); }, std::move(f));
  };
  auto truncated = [&](std::string n, std::function<size_t(const std::vector<uint8_t>&)> at, std::string f) {
    add(std::move(n), [at] {
      auto b = GgufParts::valid().build();
      b.resize(at(b));
      return b;
    }, std::move(f));
  };
  const size_t kv0 = 24;  // the first key starts after magic, version and two counts

  add("empty", [] { return std::vector<uint8_t>(); }, "header");
  add("three-bytes", [] { return std::vector<uint8_t>{'G', 'G', 'U'}; }, "header");
  edit("bad-magic", [](GgufParts& p) { p.magic = 0x46554746; }, "magic");
  edit("version-1", [](GgufParts& p) { p.version = 1; }, "version");
  edit("version-99", [](GgufParts& p) { p.version = 99; }, "version");
  edit("big-endian", [](GgufParts& p) { p.version = 0x03000000; }, "big-endian");
  truncated("truncated-in-counts", [](auto&) { return size_t(12); }, "tensor count");
  add("truncated-in-first-key", [=] {
    GgufParts p = GgufParts::valid();
    p.infos.clear();  // no tensors, so the key itself is what runs out
    p.data = Bytes();
    p.kvs.resize(1);
    auto b = p.build();
    b.resize(kv0 + 20);  // inside the 20-byte key "general.architecture"
    return b;
  }, "metadata key 0");
  truncated("truncated-in-array", [=](auto& b) { return b.size() - 200 - 32 - 80; }, "metadata");
  truncated("truncated-in-tensor-info", [](auto& b) { return b.size() - 200 - 20; }, "tensor");
  truncated("truncated-in-data", [](auto& b) { return b.size() - 10; }, "tensor 'b'");
  edit("absurd-tensor-count", [=](GgufParts& p) { p.override_counts = true; p.n_tensors = kHuge; p.n_kv = 3; }, "tensor count");
  edit("absurd-kv-count", [=](GgufParts& p) { p.override_counts = true; p.n_tensors = 2; p.n_kv = kHuge; }, "metadata count");
  edit("kv-count-past-end", [](GgufParts& p) { p.override_counts = true; p.n_tensors = 2; p.n_kv = 12; }, "");
  edit("key-length-past-end", [](GgufParts& p) { Bytes k; k.u64(1000000).raw("abc", 3); p.kvs[0] = k; }, "metadata key 0");
  edit("key-length-2pow63", [](GgufParts& p) { Bytes k; k.u64(uint64_t(1) << 63); p.kvs[0] = k; }, "metadata key 0");
  edit("empty-key", [](GgufParts& p) { p.kvs[1] = GgufParts::kv_u32("", 1); }, "empty key");
  // Found by fuzz_gguf: names from the file went into messages raw.
  edit("newline-in-key", [](GgufParts& p) { p.kvs[1] = GgufParts::kv_u32("bad\nkey", 1); p.kvs.push_back(GgufParts::kv_u32("bad\nkey", 2)); },
       "metadata 'bad\\x0akey': duplicate key");
  edit("huge-tensor-name", [](GgufParts& p) { p.infos[1] = GgufParts::info(std::string(5000, 'n'), {64, 2}, 2, 129); }, "nnn...'");
  edit("duplicate-key", [](GgufParts& p) { p.kvs[1] = GgufParts::kv_str("general.architecture", "x"); }, "duplicate key");
  edit("unknown-value-type", [](GgufParts& p) { Bytes k; k.str("x").u32(99).u32(0); p.kvs[1] = k; }, "unknown value type 99");
  edit("string-past-end", [](GgufParts& p) { Bytes k; k.str("x").u32(8).u64(uint64_t(1) << 40); p.kvs[1] = k; }, "metadata 'x'");
  edit("u32-array-overflow", [](GgufParts& p) { Bytes k; k.str("x").u32(9).u32(4).u64(uint64_t(1) << 62); p.kvs[1] = k; }, "runs past the end");
  edit("string-array-huge", [=](GgufParts& p) { Bytes k; k.str("x").u32(9).u32(8).u64(kHuge); p.kvs[1] = k; }, "cannot fit");
  edit("array-unknown-elem", [](GgufParts& p) { Bytes k; k.str("x").u32(9).u32(13).u64(1); p.kvs[1] = k; }, "unknown array element type");
  edit("array-nesting-too-deep", [](GgufParts& p) {
    Bytes k; k.str("x").u32(9);
    for (int d = 0; d < 12; ++d) k.u32(9).u64(1);
    k.u32(4).u64(0);
    p.kvs[1] = k;
  }, "nested");
  edit("bool-is-2", [](GgufParts& p) { Bytes k; k.str("x").u32(7).u8(2); p.kvs[1] = k; }, "boolean");
  edit("alignment-zero", [](GgufParts& p) { p.kvs.push_back(GgufParts::kv_u32("general.alignment", 0)); }, "general.alignment");
  edit("alignment-not-pow2", [](GgufParts& p) { p.kvs.push_back(GgufParts::kv_u32("general.alignment", 48)); }, "general.alignment");
  edit("alignment-string", [](GgufParts& p) { p.kvs.push_back(GgufParts::kv_str("general.alignment", "32")); }, "general.alignment");
  edit("tensor-name-past-end", [](GgufParts& p) { Bytes t; t.u64(uint64_t(1) << 50); p.infos[1] = t; }, "tensor 1 name");
  edit("empty-tensor-name", [](GgufParts& p) { p.infos[1] = GgufParts::info("", {64, 2}, 2, 128); }, "empty name");
  edit("zero-dims", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {}, 2, 128); }, "0 dimensions");
  edit("five-dims", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {32, 1, 1, 1, 1}, 2, 128); }, "5 dimensions");
  edit("dim-zero", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 0}, 2, 128); }, "dimension 1 is 0");
  edit("dim-negative", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, uint64_t(-5)}, 2, 128); }, "dimension 1");
  edit("dims-product-overflows", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {uint64_t(1) << 32, uint64_t(1) << 32}, 0, 128); }, "overflows");
  edit("bytes-overflow", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {uint64_t(1) << 62}, 28, 128); }, "byte size overflows");
  edit("unknown-tensor-type", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 2}, 77, 128); }, "unknown tensor type id 77");
  edit("retired-tensor-type", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 2}, 4, 128); }, "unknown tensor type id 4");
  edit("row-not-block-multiple", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {33, 2}, 2, 128); }, "block size");
  edit("offset-misaligned", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 2}, 2, 129); }, "alignment");
  edit("offset-past-end", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 2}, 2, 4096); }, "past the end");
  edit("offset-plus-size-overflows", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 2}, 2, uint64_t(-32)); }, "past the end");
  edit("overlapping-tensors", [](GgufParts& p) { p.infos[1] = GgufParts::info("b", {64, 2}, 2, 96); }, "overlaps");
  edit("duplicate-tensor-name", [](GgufParts& p) { p.infos[1] = GgufParts::info("a", {64, 2}, 2, 128); }, "duplicate tensor name");
  edit("data-section-missing", [](GgufParts& p) { p.data = Bytes(); p.infos.resize(1); p.infos[0] = GgufParts::info("a", {8, 4}, 0, 0); }, "");
  return c;
}

// The one-line contract: "<name>:<offset>: <field>: <reason>".
void expect_one_line_error(const Result<GgufFile>& r, const std::string& name, const std::string& field) {
  ASSERT_FALSE(r.ok()) << name << " was accepted";
  const std::string& m = r.error().message;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_TRUE(std::regex_search(m, std::regex("^[^:]*" + std::regex_replace(name, std::regex("[.]"), "\\.") + ":[0-9]+: ")))
      << "message does not start with file:offset: " << m;
  EXPECT_NE(m.find(field), std::string::npos) << "expected '" << field << "' in: " << m;
}

TEST(GgufHostile, TheBaseFileIsValid) {
  auto f = GgufFile::from_bytes("base.gguf", GgufParts::valid().build());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->at(2).str(), "<s>");
}

TEST(GgufHostile, EveryCaseIsRefusedWithOneLine) {
  const auto cases = corpus();
  EXPECT_GE(cases.size(), 30u);
  // Written to disk too, so the CLI test can run kt-gguf on each.
  const auto dir = std::filesystem::path(KT_HOSTILE_DIR);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto bytes = c.make();
    const std::string file = c.name + ".gguf";
    expect_one_line_error(GgufFile::from_bytes(file, bytes), file, c.field);
    std::ofstream(dir / file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    expect_one_line_error(GgufFile::open((dir / file).string()), file, c.field);
  }
}

// Cutting the file at any byte before its end must be an error, never a crash.
TEST(GgufHostile, EveryTruncationIsRefused) {
  const auto full = GgufParts::valid().build();
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + long(n));
    auto r = GgufFile::from_bytes("cut.gguf", cut);
    ASSERT_FALSE(r.ok()) << "accepted a file cut at byte " << n << " of " << full.size();
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

// Random corruption: accepted or refused, but never a crash or a read out of bounds.
TEST(GgufHostile, RandomCorruptionNeverCrashes) {
  const auto base = GgufParts::valid().build();
  std::mt19937_64 rng(1234);
  int refused = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    auto b = base;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % b.size();
      b[at] = (rng() % 3 == 0) ? 0xff : uint8_t(rng());
    }
    auto r = GgufFile::from_bytes("rand.gguf", b);
    if (!r.ok()) {
      ++refused;
      continue;
    }
    // Whatever was accepted must be safe to walk: every tensor inside the file.
    for (const auto& t : r->tensors()) {
      ASSERT_GE(t.data, r->bytes());
      ASSERT_LE(t.data + t.nbytes, r->bytes() + r->file_size());
    }
    for (const auto& kv : r->metadata()) (void)kv.value.to_string(1000);
  }
  EXPECT_GT(refused, 500);
}

}  // namespace
}  // namespace kt
