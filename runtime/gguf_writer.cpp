#include "runtime/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace kt {

namespace {
constexpr uint32_t kMagic = 0x46554747;

uint64_t tensor_bytes(GgmlType type, const std::vector<int64_t>& shape) {
  const TypeTraits& tt = type_traits(type);
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n / uint64_t(tt.block_size) * tt.type_size;
}

// Sinks: one appends to memory, one streams to a FILE*.
struct VecSink {
  std::vector<uint8_t>& out;
  void put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  uint64_t pos() const { return out.size(); }
};
struct FileSink {
  FILE* f;
  uint64_t written = 0;
  bool failed = false;
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) failed = true;
    written += n;
  }
  uint64_t pos() const { return written; }
};

template <class Sink, class T>
void put_pod(Sink& s, T v) { s.put(&v, sizeof v); }
template <class Sink>
void put_str(Sink& s, const std::string& str) {
  put_pod<Sink, uint64_t>(s, str.size());
  s.put(str.data(), str.size());
}

template <class Sink>
void put_value(Sink& s, const GgufOwnedValue& v) {
  switch (v.type) {
    case GgufType::UINT8: put_pod<Sink, uint8_t>(s, uint8_t(v.u)); break;
    case GgufType::INT8: put_pod<Sink, int8_t>(s, int8_t(v.i)); break;
    case GgufType::UINT16: put_pod<Sink, uint16_t>(s, uint16_t(v.u)); break;
    case GgufType::INT16: put_pod<Sink, int16_t>(s, int16_t(v.i)); break;
    case GgufType::UINT32: put_pod<Sink, uint32_t>(s, uint32_t(v.u)); break;
    case GgufType::INT32: put_pod<Sink, int32_t>(s, int32_t(v.i)); break;
    case GgufType::UINT64: put_pod<Sink, uint64_t>(s, v.u); break;
    case GgufType::INT64: put_pod<Sink, int64_t>(s, v.i); break;
    case GgufType::FLOAT32: put_pod<Sink, float>(s, float(v.f)); break;
    case GgufType::FLOAT64: put_pod<Sink, double>(s, v.f); break;
    case GgufType::BOOL: put_pod<Sink, uint8_t>(s, v.u ? 1 : 0); break;
    case GgufType::STRING: put_str(s, v.s); break;
    case GgufType::ARRAY:
      put_pod<Sink, uint32_t>(s, uint32_t(v.elem_type));
      put_pod<Sink, uint64_t>(s, v.elems.size());
      for (const auto& e : v.elems) put_value(s, e);
      break;
  }
}
}  // namespace

GgufOwnedValue GgufOwnedValue::from(const GgufValue& v) {
  GgufOwnedValue o;
  o.type = v.type();
  switch (v.type()) {
    case GgufType::STRING: o.s = std::string(v.str()); break;
    case GgufType::BOOL: { bool b = false; v.get_bool(&b); o.u = b; break; }
    case GgufType::FLOAT32: case GgufType::FLOAT64: v.get_f64(&o.f); break;
    case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: case GgufType::UINT64:
      v.get_u64(&o.u); break;
    case GgufType::ARRAY:
      o.elem_type = v.elem_type();
      o.elems.reserve(v.size());
      for (uint64_t k = 0; k < v.size(); ++k) o.elems.push_back(from(v.at(k)));
      break;
    default: v.get_i64(&o.i); break;
  }
  return o;
}

void GgufWriter::set_alignment(uint32_t a) {
  alignment_ = a;
  add("general.alignment", GgufOwnedValue::u32(a));
}

void GgufWriter::add(std::string key, GgufOwnedValue v) {
  for (auto& kv : kvs_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kvs_.emplace_back(std::move(key), std::move(v));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  const uint64_t nb = tensor_bytes(type, shape);
  data.resize(nb);  // callers pass exact sizes; resize keeps the file well-formed regardless
  tensors_.push_back({std::move(name), type, std::move(shape), nb, std::move(data), nullptr});
}

void GgufWriter::add_tensor_f32(std::string name, std::vector<int64_t> shape, std::span<const float> data) {
  std::vector<uint8_t> bytes(data.size_bytes());
  std::memcpy(bytes.data(), data.data(), bytes.size());
  add_tensor(std::move(name), GgmlType::F32, std::move(shape), std::move(bytes));
}

void GgufWriter::add_tensor_fill(std::string name, GgmlType type, std::vector<int64_t> shape, FillFn fill) {
  const uint64_t nb = tensor_bytes(type, shape);
  tensors_.push_back({std::move(name), type, std::move(shape), nb, {}, std::move(fill)});
}

template <class Sink>
void GgufWriter::emit(Sink& s, bool header_only) const {
  put_pod<Sink, uint32_t>(s, kMagic);
  put_pod<Sink, uint32_t>(s, version_);
  put_pod<Sink, uint64_t>(s, tensors_.size());
  put_pod<Sink, uint64_t>(s, kvs_.size());
  for (const auto& [key, v] : kvs_) {
    put_str(s, key);
    put_pod<Sink, uint32_t>(s, uint32_t(v.type));
    put_value(s, v);
  }
  uint64_t off = 0;
  for (const Tensor& t : tensors_) {
    put_str(s, t.name);
    put_pod<Sink, uint32_t>(s, uint32_t(t.shape.size()));
    for (int64_t d : t.shape) put_pod<Sink, uint64_t>(s, uint64_t(d));
    put_pod<Sink, uint32_t>(s, uint32_t(t.type));
    put_pod<Sink, uint64_t>(s, off);
    off += (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  static const uint8_t zeros[64] = {};
  auto pad = [&] {
    uint64_t n = (alignment_ - s.pos() % alignment_) % alignment_;
    while (n) {
      const uint64_t k = std::min<uint64_t>(n, sizeof zeros);
      s.put(zeros, k);
      n -= k;
    }
  };
  pad();
  if (header_only) return;
  // Streamed tensors are produced in ~64 MiB chunks of whole blocks, so a 10 GB
  // file needs no 10 GB buffer and a fill callback never sees half a block.
  constexpr uint64_t kChunk = 64ull << 20;
  std::unique_ptr<uint8_t[]> chunk;
  for (const Tensor& t : tensors_) {
    if (t.fill) {
      if (!chunk) chunk.reset(new uint8_t[kChunk]);
      const uint64_t bs = type_traits(t.type).type_size;
      const uint64_t step = kChunk / bs * bs;
      for (uint64_t done = 0; done < t.nbytes;) {
        const uint64_t n = std::min(step, t.nbytes - done);
        t.fill(chunk.get(), n);
        s.put(chunk.get(), n);
        done += n;
      }
    } else {
      s.put(t.data.data(), t.data.size());
    }
    pad();
  }
}

uint64_t GgufWriter::data_offset() const {
  std::vector<uint8_t> header;
  VecSink s{header};
  emit(s, /*header_only=*/true);
  return header.size();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  VecSink s{out};
  emit(s, false);
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return err(path, ": cannot create: ", std::strerror(errno));
  FileSink s{f};
  emit(s, false);
  const bool close_failed = std::fclose(f) != 0;
  if (s.failed || close_failed) return err(path, ": write failed: ", std::strerror(errno));
  return ok_status();
}

}  // namespace kt
