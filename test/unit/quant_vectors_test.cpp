// The reference dequantizers and dot products against llama.cpp's own numbers
// (test/data/quant-vectors.gguf, made by llama.cpp; see test/data/README.md):
// for each type, TYPE.quant (64 rows of 256 values quantized by llama.cpp) must
// decode to exactly the floats in TYPE.dequant, bit for bit, and each row's dot
// product with `activation` must match TYPE.matvec.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/type_traits.h"
#include "runtime/gguf.h"

namespace {

// Every type kt has reference kernels for; the file must cover each of them.
const char* const kQuantTypes[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",   "Q2_K",
                                   "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};

// The fixture, opened once; nullptr (and a failure naming why) when unreadable.
const kt::GgufFile* vectors() {
  static kt::Result<kt::GgufFile> file =
      kt::GgufFile::open(std::string(KT_TEST_DATA_DIR) + "/quant-vectors.gguf");
  if (!file.ok()) {
    ADD_FAILURE() << file.error().message;
    return nullptr;
  }
  return &*file;
}

// The float32 values of an F32 tensor, or of an F64 one rounded to double as is.
std::vector<double> read_floats(const kt::GgufTensor& t) {
  std::vector<double> out(size_t(t.nelements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.type == kt::GgmlType::F64) {
      std::memcpy(&out[i], t.data + 8 * i, 8);
    } else {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      out[i] = f;
    }
  }
  return out;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct TypeVectors {
  const kt::TypeTraits* traits;
  const kt::GgufTensor* quant;
  const kt::GgufTensor* dequant;
  const kt::GgufTensor* matvec;
};

// Looks up TYPE.quant/.dequant/.matvec and checks their shapes fit together.
TypeVectors find_vectors(const std::string& type) {
  const kt::GgufFile* f = vectors();
  if (!f) return {};
  TypeVectors v{kt::find_type_by_name(type), f->tensor(type + ".quant"),
                f->tensor(type + ".dequant"), f->tensor(type + ".matvec")};
  EXPECT_NE(v.traits, nullptr) << type;
  EXPECT_NE(v.quant, nullptr) << type << ".quant missing";
  EXPECT_NE(v.dequant, nullptr) << type << ".dequant missing";
  EXPECT_NE(v.matvec, nullptr) << type << ".matvec missing";
  if (!v.traits || !v.quant || !v.dequant || !v.matvec) return {};
  EXPECT_EQ(std::string(kt::type_name(v.quant->type)), type);
  EXPECT_EQ(v.dequant->type, kt::GgmlType::F32);
  EXPECT_EQ(v.quant->ne[0], v.dequant->ne[0]);
  EXPECT_EQ(v.quant->nrows(), v.dequant->nrows());
  EXPECT_EQ(v.matvec->nelements(), v.quant->nrows());
  return v;
}

class QuantVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantVectors, DequantIsBitExact) {
  const TypeVectors v = find_vectors(GetParam());
  ASSERT_NE(v.quant, nullptr);
  ASSERT_TRUE(v.traits->supported());
  const int64_t n = v.quant->ne[0];
  std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  for (int64_t r = 0; r < v.quant->nrows(); ++r) {
    v.traits->dequant_row(v.quant->row(r), got.data(), n);
    std::memcpy(want.data(), v.dequant->row(r), size_t(n) * 4);
    if (std::memcmp(got.data(), want.data(), size_t(n) * 4) == 0) continue;
    int64_t i = 0;
    while (bits_of(got[size_t(i)]) == bits_of(want[size_t(i)])) ++i;
    int64_t mismatches = 0;
    for (int64_t j = 0; j < n; ++j) mismatches += bits_of(got[size_t(j)]) != bits_of(want[size_t(j)]);
    FAIL() << GetParam() << " row " << r << ": " << mismatches << " of " << n
           << " values differ; first at index " << i << " (block " << i / v.traits->block_size
           << "): got " << got[size_t(i)] << " (0x" << std::hex << bits_of(got[size_t(i)])
           << "), llama.cpp " << std::dec << want[size_t(i)] << " (0x" << std::hex
           << bits_of(want[size_t(i)]) << ")";
  }
}

TEST_P(QuantVectors, DotMatchesMatvec) {
  const TypeVectors v = find_vectors(GetParam());
  ASSERT_NE(v.quant, nullptr);
  const kt::GgufTensor* act = vectors()->tensor("activation");
  ASSERT_NE(act, nullptr);
  ASSERT_EQ(act->type, kt::GgmlType::F32);
  const int64_t n = v.quant->ne[0];
  ASSERT_EQ(act->nelements(), n);
  std::vector<float> x(static_cast<size_t>(n));
  std::memcpy(x.data(), act->data, size_t(n) * 4);
  const std::vector<double> want = read_floats(*v.matvec);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t r = 0; r < v.quant->nrows(); ++r) {
    const double got = v.traits->dot_row(v.quant->row(r), x.data(), n);
    // The reference sum was taken in float64 and stored as float32, so it carries
    // up to half an ulp of float (6e-8 relative). The floor, from the terms'
    // magnitudes, keeps a sum that cancels to near zero from demanding more.
    v.traits->dequant_row(v.quant->row(r), w.data(), n);
    double magnitude = 0;
    for (int64_t j = 0; j < n; ++j) magnitude += std::fabs(double(w[size_t(j)]) * x[size_t(j)]);
    const double tol = 1e-5 * std::fabs(want[size_t(r)]) + 1e-9 * magnitude;
    EXPECT_NEAR(got, want[size_t(r)], tol) << GetParam() << " row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantVectors, ::testing::ValuesIn(kQuantTypes),
                         [](const auto& info) { return std::string(info.param); });

// The file is what llama.cpp reads; every quantized tensor in it must map to a
// table row kt can compute with, with the same bytes per row.
TEST(QuantVectorsFile, EveryTypeHasASupportedTableRow) {
  ASSERT_NE(vectors(), nullptr);
  int quant_tensors = 0;
  for (const kt::GgufTensor& t : vectors()->tensors()) {
    const kt::TypeTraits* tt = kt::find_type(uint32_t(t.type));
    ASSERT_NE(tt, nullptr) << t.name;
    EXPECT_TRUE(tt->supported()) << t.name << ": " << tt->name;
    EXPECT_EQ(tt->row_bytes(t.ne[0]), t.row_bytes()) << t.name << ": " << tt->name;
    quant_tensors += t.name.ends_with(".quant");
  }
  EXPECT_EQ(quant_tensors, int(std::size(kQuantTypes)));
}

}  // namespace
