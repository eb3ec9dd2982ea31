// Writes GGUF v3 files. Tests use it to craft (and then corrupt) files; tools use
// it to synthesize full-size models, so tensor data can be produced by a callback
// while writing instead of being held in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/type_traits.h"
#include "runtime/gguf.h"
#include "runtime/result.h"

namespace kt {

// An owned metadata value for writing.
struct GgufOwnedValue {
  GgufType type = GgufType::UINT32;
  uint64_t u = 0;  // unsigned integers and BOOL
  int64_t i = 0;   // signed integers
  double f = 0;    // FLOAT32/FLOAT64
  std::string s;   // STRING
  GgufType elem_type = GgufType::UINT32;  // ARRAY
  std::vector<GgufOwnedValue> elems;      // ARRAY

  static GgufOwnedValue u32(uint32_t v) { GgufOwnedValue x; x.type = GgufType::UINT32; x.u = v; return x; }
  static GgufOwnedValue u64(uint64_t v) { GgufOwnedValue x; x.type = GgufType::UINT64; x.u = v; return x; }
  static GgufOwnedValue i32(int32_t v) { GgufOwnedValue x; x.type = GgufType::INT32; x.i = v; return x; }
  static GgufOwnedValue f32(float v) { GgufOwnedValue x; x.type = GgufType::FLOAT32; x.f = v; return x; }
  static GgufOwnedValue boolean(bool v) { GgufOwnedValue x; x.type = GgufType::BOOL; x.u = v; return x; }
  static GgufOwnedValue str(std::string v) { GgufOwnedValue x; x.type = GgufType::STRING; x.s = std::move(v); return x; }
  static GgufOwnedValue array(GgufType elem, std::vector<GgufOwnedValue> v) {
    GgufOwnedValue x; x.type = GgufType::ARRAY; x.elem_type = elem; x.elems = std::move(v); return x;
  }
  // Copies a value read from another file (used to rewrite or extend files).
  static GgufOwnedValue from(const GgufValue& v);
};

class GgufWriter {
 public:
  using FillFn = std::function<void(uint8_t* dst, uint64_t nbytes)>;

  void set_version(uint32_t v) { version_ = v; }      // 2 or 3
  void set_alignment(uint32_t a);                      // also written as general.alignment
  void add(std::string key, GgufOwnedValue v);
  // shape is in ggml order (fastest first); data must be exactly the tensor's bytes.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                  std::vector<uint8_t> data);
  void add_tensor_f32(std::string name, std::vector<int64_t> shape, std::span<const float> data);
  // Data produced while writing, in chunks, for files larger than memory.
  void add_tensor_fill(std::string name, GgmlType type, std::vector<int64_t> shape, FillFn fill);

  std::vector<uint8_t> to_bytes() const;
  Status write(const std::string& path) const;

  // Byte offset where the data section starts, once all tensors are added.
  uint64_t data_offset() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    std::vector<uint8_t> data;
    FillFn fill;
  };
  template <class Sink>
  void emit(Sink& sink, bool header_only) const;

  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufOwnedValue>> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace kt
