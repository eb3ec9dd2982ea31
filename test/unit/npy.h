// A minimal reader for the .npy files of the reference logits
// (../shared/models/ref/*.npy): little-endian float32, C order, format versions
// 1-3. Anything else is an error naming the file.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/result.h"

namespace kt::test {

struct NpyF32 {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
  const float* row(int64_t r) const { return data.data() + r * cols(); }
};

inline Result<NpyF32> read_npy_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(path, ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return err(path, ": not a .npy file");
  const int major = uint8_t(bytes[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return err(path, ": truncated header");
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    header_at = 12;
  } else {
    return err(path, ": unsupported .npy version ", major);
  }
  if (header_at + header_len > bytes.size()) return err(path, ": truncated header");
  const std::string header = bytes.substr(header_at, header_len);
  if (header.find("'descr': '<f4'") == std::string::npos)
    return err(path, ": dtype is not little-endian float32: ", header);
  if (header.find("'fortran_order': False") == std::string::npos)
    return err(path, ": Fortran order is not supported");

  NpyF32 out;
  const size_t open = header.find("'shape': (");
  const size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) return err(path, ": no shape");
  std::string dims = header.substr(open + 10, close - open - 10);
  int64_t count = 1;
  size_t at = 0;
  while (at < dims.size()) {
    const size_t comma = dims.find(',', at);
    const std::string part =
        dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (part.find_first_of("0123456789") != std::string::npos) {
      out.shape.push_back(std::stoll(part));
      count *= out.shape.back();
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  const size_t data_at = header_at + header_len;
  if (bytes.size() - data_at != size_t(count) * sizeof(float))
    return err(path, ": ", bytes.size() - data_at, " data bytes for ", count, " floats");
  out.data.resize(size_t(count));
  std::memcpy(out.data.data(), bytes.data() + data_at, size_t(count) * sizeof(float));
  return out;
}

}  // namespace kt::test
