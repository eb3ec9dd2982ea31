// GGUF files (v2 and v3), read through one read-only mmap without copying
// tensor data. The file is hostile until proven otherwise: open() checks every
// count, length, dimension, offset and product against the file size, with
// overflow-safe arithmetic, before using it. A bad file yields one Error line:
// "<path>:<byte offset>: <field>: <what is wrong>".
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <map>
#include <vector>

#include "kernels/type_traits.h"
#include "runtime/result.h"

namespace kt {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5,
  FLOAT32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// A metadata value, viewing the mapped bytes. Scalars and strings are read on
// access; arrays of strings or arrays keep one entry per element (bounded by the
// file size, since every element occupies at least 8 bytes of it).
class GgufValue {
 public:
  GgufType type() const { return type_; }
  bool is_integer() const;
  bool is_float() const { return type_ == GgufType::FLOAT32 || type_ == GgufType::FLOAT64; }

  // Scalars. Integers convert between widths only when the value fits.
  bool get_u64(uint64_t* out) const;
  bool get_i64(int64_t* out) const;
  bool get_f64(double* out) const;  // any integer or float
  bool get_bool(bool* out) const;
  std::string_view str() const;  // empty unless STRING

  // Arrays.
  GgufType elem_type() const { return elem_type_; }
  uint64_t size() const { return count_; }  // elements (0 unless ARRAY)
  GgufValue at(uint64_t i) const;           // i < size()
  // The elements of a numeric array as raw little-endian bytes (nullptr otherwise).
  const uint8_t* raw_data() const { return data_; }

  std::string to_string(size_t max_elems = 8) const;  // for tools and errors

 private:
  friend class GgufParser;
  GgufType type_ = GgufType::UINT8;
  GgufType elem_type_ = GgufType::UINT8;
  const uint8_t* data_ = nullptr;  // start of the payload (after type/count headers)
  uint64_t nbytes_ = 0;            // payload bytes
  uint64_t count_ = 0;             // array elements
  // For arrays of STRING/ARRAY: byte offset of each element within data_.
  std::shared_ptr<const std::vector<uint64_t>> elem_offsets_;

  static uint64_t scalar_size_of(GgufType t);
  static uint64_t element_bytes(GgufType t, const uint8_t* p);
};

struct GgufKV {
  std::string key;
  GgufValue value;
  uint64_t file_offset;  // where the key starts, for messages
};

struct GgufTensor {
  std::string name;
  GgmlType type;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the fastest dimension
  uint64_t offset = 0;           // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping, nbytes long
  uint64_t info_offset = 0;       // file offset of this tensor's table entry

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const { return nbytes / uint64_t(nrows()); }
  const uint8_t* row(int64_t r) const { return data + uint64_t(r) * row_bytes(); }
  std::string shape_string() const;  // "[2048, 102400]"

  // Typed view of an F32 tensor (or F16/BF16 as uint16_t); an error when the
  // type differs or the mapped bytes are not aligned for T.
  Result<std::span<const float>> f32() const;
};

class GgufFile {
 public:
  // Maps and validates path. Every error names path, the byte offset and the field.
  static Result<GgufFile> open(const std::string& path);
  // Validates bytes already in memory; `name` stands for the path in messages.
  // The GgufFile keeps its own copy of the bytes.
  static Result<GgufFile> from_bytes(std::string name, std::span<const uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }  // start of tensor data
  const uint8_t* bytes() const { return base_; }

  const std::vector<GgufKV>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;  // "" when absent
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;
  std::string_view architecture() const { return get_string("general.architecture"); }

 private:
  friend class GgufParser;
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kvs_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> kv_index_, tensor_index_;
};

}  // namespace kt
