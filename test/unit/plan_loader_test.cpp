// The plan loader refuses everything that is not a plan of this version for the
// GGUF it names, with one line; corrupt bytes never crash it (ASan in CI).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "runtime/plan_loader.h"

namespace kt {
namespace {

struct PlanSpec {
  uint32_t version = kPlanSchemaVersion;
  std::string gguf = "tiny-dsv3-F32.gguf";
  uint64_t size = 0, fingerprint = 0;
  uint64_t arena = 8192;  // two buffers of 64 x 16 floats
  int buffer_device = 0;
  uint64_t buffer_offset = 0;
  int call_input = 0;
  int call_weight = 0;
  std::string kernel = "rms_norm_ref";
  uint32_t buffer_type = 0;  // F32
  int kv_device = 0;
  int call_kv = -1;
  int64_t n_ctx = 512;
  int64_t max_tokens = 16;
  int64_t min_tokens = 0;
  std::string phase = "decode";
  int logits = 1;
};

std::vector<uint8_t> build(const PlanSpec& s) {
  flatbuffers::FlatBufferBuilder b;
  auto gguf = plan::CreateGgufRef(b, b.CreateString(s.gguf), s.size, s.fingerprint);
  auto model = plan::CreateModel(b, b.CreateString("deepseek2"), 4096, 4, s.n_ctx);
  std::vector<flatbuffers::Offset<plan::Device>> devs{plan::CreateDevice(b, plan::DeviceKind::CPU, 0, s.arena, 0, 0)};
  std::vector<int64_t> shape{64};
  std::vector<flatbuffers::Offset<plan::Weight>> ws{plan::CreateWeight(
      b, b.CreateString("output_norm.weight"), 0, b.CreateVector(shape), 0, b.CreateString("gguf"), 256)};
  std::vector<flatbuffers::Offset<plan::Buffer>> bufs{
      plan::CreateBuffer(b, b.CreateString("x"), s.buffer_device, s.buffer_type, 64, 16, plan::RowKind::TOKENS,
                         s.buffer_offset),
      plan::CreateBuffer(b, b.CreateString("y"), 0, 0, 64, 16, plan::RowKind::OUTPUTS, 64 * 16 * 4)};
  std::vector<flatbuffers::Offset<plan::KvCache>> kvs{
      plan::CreateKvCache(b, 0, s.kv_device, plan::KvKind::MLA_LATENT, 1, 512, 64, 1)};
  std::vector<int> in{s.call_input}, out{1}, w{s.call_weight};
  std::vector<flatbuffers::Offset<plan::Call>> calls{plan::CreateCall(
      b, b.CreateString(s.kernel), 0, b.CreateVector(in), b.CreateVector(out), b.CreateVector(w), 0, -1, s.call_kv,
      b.CreateString("model.norm"))};
  std::vector<flatbuffers::Offset<plan::Phase>> phases{
      plan::CreatePhase(b, b.CreateString(s.phase), s.max_tokens, b.CreateVector(calls), s.logits, s.min_tokens)};
  auto root = plan::CreatePlan(b, s.version, b.CreateString("test"), gguf, model, b.CreateVector(devs),
                               b.CreateVector(ws), b.CreateVector(bufs), b.CreateVector(kvs), b.CreateVector(phases));
  plan::FinishSizePrefixedPlanBuffer(b, root);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

std::string error_of(const PlanSpec& s) {
  auto p = PlanFile::from_bytes("p.ktp", build(s));
  return p.ok() ? std::string("accepted") : p.error().message;
}

TEST(PlanLoader, LoadsAValidPlanAndChecksItsGguf) {
  auto g = GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/tiny-dsv3-F32.gguf");
  ASSERT_TRUE(g.ok()) << g.error().message;
  PlanSpec s;
  s.size = g->file_size();
  s.fingerprint = gguf_fingerprint(g.value());
  const std::string path = std::string(KT_TEST_DATA_DIR) + "/../plan_loader_test.ktp";
  {
    auto bytes = build(s);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  auto p = PlanFile::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->plan().model()->arch()->str(), "deepseek2");
  // Relative GGUF paths are relative to the plan's folder.
  EXPECT_EQ(std::filesystem::path(p->gguf_path()).lexically_normal(),
            (std::filesystem::path(KT_TEST_DATA_DIR) / ".." / "tiny-dsv3-F32.gguf").lexically_normal());
  EXPECT_TRUE(p->check_gguf(g.value()).ok());
  EXPECT_TRUE(p->check_kernels([](std::string_view k) { return k == "rms_norm_ref"; }).ok());
  auto missing = p->check_kernels([](std::string_view) { return false; });
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("kernel 'rms_norm_ref' (decode, model.norm) is not in this build"), std::string::npos)
      << missing.error().message;
}

TEST(PlanLoader, RefusesAChangedGguf) {
  auto g = GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/tiny-dsv3-F32.gguf");
  ASSERT_TRUE(g.ok());
  PlanSpec s;
  s.size = g->file_size();
  s.fingerprint = gguf_fingerprint(g.value()) ^ 1;
  auto p = PlanFile::from_bytes("p.ktp", build(s));
  ASSERT_TRUE(p.ok());
  auto st = p->check_gguf(g.value());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("has changed since the plan was compiled"), std::string::npos);
  s.fingerprint ^= 1;
  s.size += 32;
  auto p2 = PlanFile::from_bytes("p.ktp", build(s));
  ASSERT_FALSE(p2->check_gguf(g.value()).ok());
}

TEST(PlanLoader, FingerprintSeesMetadataChanges) {
  auto a = GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/tiny-dsv3-F32.gguf");
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> bytes(a->bytes(), a->bytes() + a->file_size());
  // Flip one byte inside the first metadata key's text: same size, other header.
  bytes[24 + 8 + 2] ^= 0x20;
  auto b = GgufFile::from_bytes("b.gguf", bytes);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_NE(gguf_fingerprint(a.value()), gguf_fingerprint(b.value()));
}

TEST(PlanLoader, RefusesBadPlansWithOneLine) {
  struct Case {
    const char* name;
    PlanSpec spec;
    const char* want;
  };
  std::vector<Case> cases;
  auto add = [&](const char* n, auto edit, const char* want) {
    PlanSpec s;
    edit(s);
    cases.push_back({n, s, want});
  };
  add("old version", [](PlanSpec& s) { s.version = kPlanSchemaVersion + 1; }, "schema version");
  add("no gguf", [](PlanSpec& s) { s.gguf = ""; }, "names no GGUF");
  add("buffer device", [](PlanSpec& s) { s.buffer_device = 3; }, "device 3 does not exist");
  add("buffer outside arena", [](PlanSpec& s) { s.buffer_offset = 5000; }, "outside its device's arena");
  add("buffer offset overflows", [](PlanSpec& s) { s.buffer_offset = ~uint64_t(0) - 10; }, "outside its device's arena");
  add("input index", [](PlanSpec& s) { s.call_input = 7; }, "buffer index 7 out of range");
  add("negative input", [](PlanSpec& s) { s.call_input = -1; }, "buffer index -1 out of range");
  add("weight index", [](PlanSpec& s) { s.call_weight = 1; }, "weight index 1 out of range");
  add("no kernel", [](PlanSpec& s) { s.kernel = ""; }, "names no kernel");
  add("quantized buffer", [](PlanSpec& s) { s.buffer_type = 12; }, "is not F32, F16, BF16 or I32");
  add("kv device", [](PlanSpec& s) { s.kv_device = 2; }, "KV cache 0 (layer 0): device 2 does not exist");
  add("kv index", [](PlanSpec& s) { s.call_kv = 1; }, "KV cache index 1 out of range");
  add("no context", [](PlanSpec& s) { s.n_ctx = 0; }, "bad n_ctx");
  add("no tokens", [](PlanSpec& s) { s.max_tokens = 0; }, "bad max_tokens");
  add("logits index", [](PlanSpec& s) { s.logits = 9; }, "logits buffer 9 out of range");
  add("min_tokens of decode", [](PlanSpec& s) { s.min_tokens = 4; }, "bad min_tokens 4");
  add("min_tokens past max_tokens", [](PlanSpec& s) { s.phase = "prefill.long", s.min_tokens = 17; },
      "bad min_tokens 17");
  add("negative min_tokens", [](PlanSpec& s) { s.phase = "prefill.long", s.min_tokens = -1; }, "bad min_tokens -1");
  for (const Case& c : cases) {
    const std::string m = error_of(c.spec);
    EXPECT_EQ(m.rfind("p.ktp: ", 0), 0u) << c.name << ": " << m;
    EXPECT_NE(m.find(c.want), std::string::npos) << c.name << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// fuzz_plan's finding: a plan the FlatBuffers verifier accepts whose list of
// 64-bit values (a weight's shape) sits 4 bytes off their alignment; reading it
// was undefined behaviour (UBSan: misaligned load). Refused in one line now.
TEST(PlanLoader, RefusesMisalignedLongVectors) {
  const std::string path = std::string(KT_TEST_DATA_DIR) + "/../fuzz/corpus/plan/misaligned-int64-vector";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto p = PlanFile::from_bytes("p.ktp", std::move(bytes));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("misaligned list of 64-bit values"), std::string::npos) << p.error().message;
  EXPECT_EQ(p.error().message.find('\n'), std::string::npos);
}

TEST(PlanLoader, RefusesNonPlansAndCorruption) {
  EXPECT_NE(PlanFile::load("/nonexistent.ktp").error().message.find("cannot open"), std::string::npos);
  auto not_plan = PlanFile::from_bytes("x.ktp", std::vector<uint8_t>(64, 'x'));
  ASSERT_FALSE(not_plan.ok());
  EXPECT_NE(not_plan.error().message.find("not a kt plan"), std::string::npos);
  const auto good = build(PlanSpec{});
  ASSERT_TRUE(PlanFile::from_bytes("p.ktp", good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    auto p = PlanFile::from_bytes("p.ktp", cut);
    EXPECT_FALSE(p.ok()) << "accepted a plan cut at " << n << " of " << good.size();
  }
  std::mt19937 rng(99);
  for (int i = 0; i < 3000; ++i) {
    auto b = good;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = uint8_t(rng());
    auto p = PlanFile::from_bytes("p.ktp", b);
    if (p.ok()) (void)p->check_kernels([](std::string_view) { return true; });
  }
}

}  // namespace
}  // namespace kt
