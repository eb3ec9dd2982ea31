// A byte-level GGUF builder for tests: lays out a file field by field so a test
// can put a wrong value in exactly one place. (GgufWriter only writes valid files.)
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kt::test {

struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) { b.push_back(v); return *this; }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& f32(float v) { return raw(&v, 4); }
  Bytes& str(const std::string& s) { u64(s.size()); return raw(s.data(), s.size()); }
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Bytes& append(const Bytes& o) { return raw(o.b.data(), o.b.size()); }
  Bytes& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  size_t size() const { return b.size(); }
};

// A small well-formed file, assembled from parts that tests may replace.
struct GgufParts {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  bool override_counts = false;
  uint64_t n_tensors = 0, n_kv = 0;
  std::vector<Bytes> kvs;      // each: key string, u32 type, value
  std::vector<Bytes> infos;    // each: name, n_dims, dims, type, offset
  Bytes data;                  // the data section
  size_t alignment = 32;

  static Bytes kv_u32(const std::string& key, uint32_t v) { Bytes x; x.str(key).u32(4).u32(v); return x; }
  static Bytes kv_str(const std::string& key, const std::string& v) { Bytes x; x.str(key).u32(8).str(v); return x; }
  static Bytes info(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    Bytes x;
    x.str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) x.u64(d);
    x.u32(type).u64(offset);
    return x;
  }

  // Two tensors: "a" F32 [8, 4] (128 bytes) at 0, "b" Q4_0 [64, 2] (72 bytes) at 128.
  static GgufParts valid() {
    GgufParts p;
    p.kvs.push_back(kv_str("general.architecture", "llama"));
    p.kvs.push_back(kv_u32("llama.block_count", 2));
    Bytes arr;
    arr.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(3).str("a").str("bc").str("<s>");
    p.kvs.push_back(arr);
    p.infos.push_back(info("a", {8, 4}, 0, 0));
    p.infos.push_back(info("b", {64, 2}, 2, 128));
    for (int i = 0; i < 128 + 72; ++i) p.data.u8(uint8_t(i));
    return p;
  }

  std::vector<uint8_t> build() const {
    Bytes out;
    out.u32(magic).u32(version);
    out.u64(override_counts ? n_tensors : infos.size());
    out.u64(override_counts ? n_kv : kvs.size());
    for (const auto& k : kvs) out.append(k);
    for (const auto& t : infos) out.append(t);
    out.pad_to(alignment);
    out.append(data);
    return out.b;
  }
};

}  // namespace kt::test
