// The GGUF reader on well-formed files: everything the writer puts in comes back
// out, for every metadata type, both versions, and custom alignment; and real
// llama.cpp-made files parse with the values llama.cpp wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "runtime/gguf.h"
#include "runtime/gguf_writer.h"

namespace kt {
namespace {

using V = GgufOwnedValue;

GgufWriter sample_writer() {
  GgufWriter w;
  w.add("general.architecture", V::str("llama"));
  V u8; u8.type = GgufType::UINT8; u8.u = 200;
  V i8; i8.type = GgufType::INT8; i8.i = -100;
  V u16; u16.type = GgufType::UINT16; u16.u = 60000;
  V i16; i16.type = GgufType::INT16; i16.i = -30000;
  V i64; i64.type = GgufType::INT64; i64.i = -(int64_t(1) << 40);
  V f64; f64.type = GgufType::FLOAT64; f64.f = 2.5e-300;
  w.add("t.u8", u8);
  w.add("t.i8", i8);
  w.add("t.u16", u16);
  w.add("t.i16", i16);
  w.add("t.u32", V::u32(4000000000u));
  w.add("t.i32", V::i32(-2000000000));
  w.add("t.u64", V::u64(uint64_t(1) << 63));
  w.add("t.i64", i64);
  w.add("t.f32", V::f32(0.0707f));
  w.add("t.f64", f64);
  w.add("t.bool", V::boolean(true));
  w.add("t.str", V::str("héllo\nworld"));
  w.add("t.arr_f32", V::array(GgufType::FLOAT32, {V::f32(1.5f), V::f32(-2.f), V::f32(3.25f)}));
  w.add("t.arr_str", V::array(GgufType::STRING, {V::str("a"), V::str(""), V::str("ccc")}));
  w.add("t.nested", V::array(GgufType::ARRAY, {V::array(GgufType::INT32, {V::i32(1), V::i32(2)}),
                                               V::array(GgufType::STRING, {V::str("x"), V::str("yz")})}));
  std::vector<float> a(8 * 3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.5f - 3.f;
  w.add_tensor_f32("a.weight", {8, 3}, a);
  w.add_tensor("b.weight", GgmlType::Q8_0, {64, 2}, std::vector<uint8_t>(2 * 2 * 34, 7));
  return w;
}

TEST(GgufReader, RoundTripsEveryMetadataType) {
  for (uint32_t version : {2u, 3u}) {
    GgufWriter w = sample_writer();
    w.set_version(version);
    auto f = GgufFile::from_bytes("mem.gguf", w.to_bytes());
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->architecture(), "llama");
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    bool b = false;
    ASSERT_TRUE(f->find("t.u8")->get_u64(&u)); EXPECT_EQ(u, 200u);
    ASSERT_TRUE(f->find("t.i8")->get_i64(&i)); EXPECT_EQ(i, -100);
    ASSERT_TRUE(f->find("t.u16")->get_u64(&u)); EXPECT_EQ(u, 60000u);
    ASSERT_TRUE(f->find("t.i16")->get_i64(&i)); EXPECT_EQ(i, -30000);
    ASSERT_TRUE(f->find("t.u32")->get_u64(&u)); EXPECT_EQ(u, 4000000000u);
    ASSERT_TRUE(f->find("t.i32")->get_i64(&i)); EXPECT_EQ(i, -2000000000);
    ASSERT_TRUE(f->find("t.u64")->get_u64(&u)); EXPECT_EQ(u, uint64_t(1) << 63);
    EXPECT_FALSE(f->find("t.u64")->get_i64(&i)) << "2^63 does not fit in int64";
    EXPECT_FALSE(f->find("t.i32")->get_u64(&u)) << "negative does not fit in uint64";
    ASSERT_TRUE(f->find("t.i64")->get_i64(&i)); EXPECT_EQ(i, -(int64_t(1) << 40));
    ASSERT_TRUE(f->find("t.f32")->get_f64(&d)); EXPECT_FLOAT_EQ(float(d), 0.0707f);
    ASSERT_TRUE(f->find("t.f64")->get_f64(&d)); EXPECT_EQ(d, 2.5e-300);
    ASSERT_TRUE(f->find("t.bool")->get_bool(&b)); EXPECT_TRUE(b);
    EXPECT_EQ(f->find("t.str")->str(), "héllo\nworld");
    EXPECT_EQ(f->find("missing"), nullptr);

    const GgufValue* af = f->find("t.arr_f32");
    ASSERT_EQ(af->type(), GgufType::ARRAY);
    ASSERT_EQ(af->size(), 3u);
    ASSERT_TRUE(af->at(2).get_f64(&d)); EXPECT_EQ(d, 3.25);
    const GgufValue* as = f->find("t.arr_str");
    ASSERT_EQ(as->size(), 3u);
    EXPECT_EQ(as->at(0).str(), "a");
    EXPECT_EQ(as->at(1).str(), "");
    EXPECT_EQ(as->at(2).str(), "ccc");
    const GgufValue* n = f->find("t.nested");
    ASSERT_EQ(n->size(), 2u);
    ASSERT_EQ(n->at(0).size(), 2u);
    ASSERT_TRUE(n->at(0).at(1).get_i64(&i)); EXPECT_EQ(i, 2);
    EXPECT_EQ(n->at(1).at(1).str(), "yz");

    ASSERT_EQ(f->tensors().size(), 2u);
    const GgufTensor* a = f->tensor("a.weight");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->type, GgmlType::F32);
    EXPECT_EQ(a->ne[0], 8);
    EXPECT_EQ(a->ne[1], 3);
    EXPECT_EQ(a->nbytes, 96u);
    auto view = a->f32();
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view.value()[5], 5 * 0.5f - 3.f);
    EXPECT_EQ(a->row(2), a->data + 64);
    const GgufTensor* bq = f->tensor("b.weight");
    ASSERT_NE(bq, nullptr);
    EXPECT_EQ(bq->nbytes, 136u);
    EXPECT_EQ(bq->row_bytes(), 68u);
    EXPECT_EQ(bq->data[0], 7);
    EXPECT_FALSE(bq->f32().ok()) << "a Q8_0 tensor has no float view";
    EXPECT_EQ(uint64_t(a->data - f->bytes()) % 32, 0u);
  }
}

TEST(GgufReader, HonoursCustomAlignment) {
  GgufWriter w = sample_writer();
  w.set_alignment(256);
  auto f = GgufFile::from_bytes("mem.gguf", w.to_bytes());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(w.data_offset(), f->data_offset());
  for (const auto& t : f->tensors()) EXPECT_EQ(uint64_t(t.data - f->bytes()) % 256, 0u) << t.name;
}

TEST(GgufReader, WritesAndMapsAFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "kt_gguf_reader_test.gguf").string();
  ASSERT_TRUE(sample_writer().write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(f->find("t.str")->str(), "héllo\nworld");
  // A moved GgufFile keeps its mapping and views valid.
  GgufFile moved = std::move(f.value());
  EXPECT_EQ(moved.tensor("a.weight")->f32().value()[1], -2.5f);
  std::filesystem::remove(path);
}

TEST(GgufReader, StreamedTensorDataIsWrittenInPlace) {
  GgufWriter w;
  w.add("general.architecture", V::str("x"));
  uint8_t next = 0;
  w.add_tensor_fill("t", GgmlType::F16, {100, 3}, [&](uint8_t* dst, uint64_t n) {
    for (uint64_t k = 0; k < n; ++k) dst[k] = next++;
  });
  auto f = GgufFile::from_bytes("mem.gguf", w.to_bytes());
  ASSERT_TRUE(f.ok()) << f.error().message;
  const GgufTensor* t = f->tensor("t");
  ASSERT_EQ(t->nbytes, 600u);
  EXPECT_EQ(t->data[599], uint8_t(599 % 256));
}

TEST(GgufReader, OpensMissingFileWithOneLine) {
  auto f = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("/nonexistent/model.gguf"), std::string::npos);
  EXPECT_EQ(f.error().message.find('\n'), std::string::npos);
}

// A file made by llama.cpp's gguf-py: values as llama.cpp wrote them.
TEST(GgufReader, ReadsLlamaCppQuantVectors) {
  auto f = GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/quant-vectors.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  const GgufTensor* q = f->tensor("Q4_K.quant");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::Q4_K);
  EXPECT_EQ(q->ne[0], 256);
  EXPECT_EQ(q->ne[1], 64);
  EXPECT_EQ(q->nbytes, 64u * 144u);
  const GgufTensor* act = f->tensor("activation");
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->ne[0], 256);
}

TEST(GgufReader, ReadsReferenceModelHyperParameters) {
  const std::string path = std::string(KT_TEST_DATA_DIR) + "/tiny-dsv3-F32.gguf";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->architecture(), "deepseek2");
  uint64_t n = 0;
  ASSERT_TRUE(f->find("deepseek2.block_count")->get_u64(&n));
  EXPECT_EQ(n, 4u);
  double scale = 0;
  ASSERT_TRUE(f->find("deepseek2.expert_weights_scale")->get_f64(&scale));
  EXPECT_FLOAT_EQ(float(scale), 2.5f);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->size(), 4096u);
  const GgufTensor* e = f->tensor("blk.3.ffn_gate_exps.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->n_dims, 3);
  EXPECT_EQ(e->ne[2], 8);
}

}  // namespace
}  // namespace kt
