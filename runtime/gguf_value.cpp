// Typed access to GGUF metadata values and tensor views.
#include <cmath>
#include <cstring>

#include "runtime/gguf.h"

namespace kt {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "u8";
    case GgufType::INT8: return "i8";
    case GgufType::UINT16: return "u16";
    case GgufType::INT16: return "i16";
    case GgufType::UINT32: return "u32";
    case GgufType::INT32: return "i32";
    case GgufType::FLOAT32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "str";
    case GgufType::ARRAY: return "arr";
    case GgufType::UINT64: return "u64";
    case GgufType::INT64: return "i64";
    case GgufType::FLOAT64: return "f64";
  }
  return "?";
}

namespace {
template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::get_i64(int64_t* out) const {
  switch (type_) {
    case GgufType::UINT8: *out = load<uint8_t>(data_); return true;
    case GgufType::INT8: *out = load<int8_t>(data_); return true;
    case GgufType::UINT16: *out = load<uint16_t>(data_); return true;
    case GgufType::INT16: *out = load<int16_t>(data_); return true;
    case GgufType::UINT32: *out = load<uint32_t>(data_); return true;
    case GgufType::INT32: *out = load<int32_t>(data_); return true;
    case GgufType::INT64: *out = load<int64_t>(data_); return true;
    case GgufType::UINT64: {
      const uint64_t u = load<uint64_t>(data_);
      if (u > uint64_t(INT64_MAX)) return false;
      *out = int64_t(u);
      return true;
    }
    default: return false;
  }
}

bool GgufValue::get_u64(uint64_t* out) const {
  if (type_ == GgufType::UINT64) {
    *out = load<uint64_t>(data_);
    return true;
  }
  int64_t i = 0;
  if (!get_i64(&i) || i < 0) return false;
  *out = uint64_t(i);
  return true;
}

bool GgufValue::get_f64(double* out) const {
  if (type_ == GgufType::FLOAT32) {
    *out = load<float>(data_);
    return true;
  }
  if (type_ == GgufType::FLOAT64) {
    *out = load<double>(data_);
    return true;
  }
  if (type_ == GgufType::UINT64) {
    *out = double(load<uint64_t>(data_));
    return true;
  }
  int64_t i = 0;
  if (!get_i64(&i)) return false;
  *out = double(i);
  return true;
}

bool GgufValue::get_bool(bool* out) const {
  if (type_ != GgufType::BOOL) return false;
  *out = data_[0] != 0;
  return true;
}

std::string_view GgufValue::str() const {
  if (type_ != GgufType::STRING) return {};
  return std::string_view(reinterpret_cast<const char*>(data_ + 8), nbytes_ - 8);
}

GgufValue GgufValue::at(uint64_t i) const {
  GgufValue e;
  if (type_ != GgufType::ARRAY || i >= count_) return e;
  e.type_ = elem_type_;
  if (elem_offsets_) {
    // Variable-size elements: re-read the element header at its recorded offset.
    const uint8_t* p = data_ + (*elem_offsets_)[i];
    const uint64_t end = (i + 1 < count_) ? (*elem_offsets_)[i + 1] : nbytes_;
    e.data_ = p;
    e.nbytes_ = end - (*elem_offsets_)[i];
    if (elem_type_ == GgufType::ARRAY) {
      // Nested arrays were validated at parse time; rebuild their view lazily.
      e.elem_type_ = GgufType(load<uint32_t>(p));
      e.count_ = load<uint64_t>(p + 4);
      e.data_ = p + 12;
      e.nbytes_ -= 12;
      if (scalar_size_of(e.elem_type_) == 0) {
        auto offs = std::make_shared<std::vector<uint64_t>>();
        offs->reserve(e.count_);
        uint64_t pos = 0;
        for (uint64_t k = 0; k < e.count_; ++k) {
          offs->push_back(pos);
          pos += element_bytes(e.elem_type_, e.data_ + pos);
        }
        e.elem_offsets_ = std::move(offs);
      }
    }
    return e;
  }
  const uint64_t esz = scalar_size_of(elem_type_);
  e.data_ = data_ + i * esz;
  e.nbytes_ = esz;
  return e;
}

uint64_t GgufValue::scalar_size_of(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

// Bytes of one already-validated element of type t starting at p.
uint64_t GgufValue::element_bytes(GgufType t, const uint8_t* p) {
  if (uint64_t s = scalar_size_of(t)) return s;
  if (t == GgufType::STRING) return 8 + load<uint64_t>(p);
  const GgufType et = GgufType(load<uint32_t>(p));
  const uint64_t n = load<uint64_t>(p + 4);
  uint64_t total = 12;
  if (uint64_t s = scalar_size_of(et)) return total + n * s;
  for (uint64_t k = 0; k < n; ++k) total += element_bytes(et, p + total);
  return total;
}

std::string GgufValue::to_string(size_t max_elems) const {
  switch (type_) {
    case GgufType::STRING: {
      std::string s(str());
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      std::string out = "\"";
      for (char c : s) out += (c == '\n') ? std::string("\\n") : std::string(1, c);
      return out + "\"";
    }
    case GgufType::BOOL: return data_[0] ? "true" : "false";
    case GgufType::FLOAT32: case GgufType::FLOAT64: {
      double d = 0;
      get_f64(&d);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", d);
      return buf;
    }
    case GgufType::UINT64: return std::to_string(load<uint64_t>(data_));
    case GgufType::ARRAY: {
      std::string out = "[";
      for (uint64_t i = 0; i < count_ && i < max_elems; ++i) {
        if (i) out += ", ";
        out += at(i).to_string(max_elems);
      }
      if (count_ > max_elems) out += ", ... (" + std::to_string(count_) + " " + std::string(gguf_type_name(elem_type_)) + ")";
      return out + "]";
    }
    default: {
      int64_t i = 0;
      get_i64(&i);
      return std::to_string(i);
    }
  }
}

std::string GgufTensor::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) {
    if (d) s += ", ";
    s += std::to_string(ne[d]);
  }
  return s + "]";
}

Result<std::span<const float>> GgufTensor::f32() const {
  if (type != GgmlType::F32)
    return err("tensor '", name, "': is ", type_name(type), ", expected F32");
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) != 0)
    return err("tensor '", name, "': data is not 4-byte aligned in the file");
  return std::span<const float>(reinterpret_cast<const float*>(data), size_t(nelements()));
}

}  // namespace kt
