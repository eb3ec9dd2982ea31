#include "runtime/npy_writer.h"

#include <cstring>
#include <utility>

namespace kt {

namespace {
// Header room for any shape: numpy pads the header dict with spaces to a
// multiple of 64 bytes; 128 leaves space for 20-digit dimensions.
constexpr size_t kHeaderBytes = 128;
}  // namespace

Result<NpyWriter> NpyWriter::create(const std::string& path, int64_t cols) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return err(path, ": cannot create: ", std::strerror(errno));
  NpyWriter w(f, path, cols);
  KT_TRY(w.write_header());
  return w;
}

NpyWriter::NpyWriter(NpyWriter&& o) noexcept
    : f_(std::exchange(o.f_, nullptr)), path_(std::move(o.path_)), cols_(o.cols_), rows_(o.rows_) {}

NpyWriter::~NpyWriter() {
  if (f_) (void)close();
}

Status NpyWriter::write_header() {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows_) + ", " +
                     std::to_string(cols_) + "), }";
  std::string header = std::string("\x93NUMPY\x01\x00", 8);
  const size_t len = kHeaderBytes - 10;
  dict.resize(len - 1, ' ');
  dict += '\n';
  header += char(len & 0xff);
  header += char(len >> 8);
  header += dict;
  if (std::fseek(f_, 0, SEEK_SET) != 0 || std::fwrite(header.data(), 1, header.size(), f_) != header.size())
    return err(path_, ": cannot write");
  return std::fseek(f_, 0, SEEK_END) == 0 ? ok_status() : err(path_, ": cannot write");
}

Status NpyWriter::append(std::span<const float> row) {
  if (int64_t(row.size()) != cols_) return err(path_, ": row of ", row.size(), " values, expected ", cols_);
  if (std::fwrite(row.data(), sizeof(float), row.size(), f_) != row.size()) return err(path_, ": cannot write");
  ++rows_;
  return ok_status();
}

Status NpyWriter::close() {
  if (!f_) return ok_status();
  Status s = write_header();
  if (std::fclose(f_) != 0 && s.ok()) s = err(path_, ": cannot close");
  f_ = nullptr;
  return s;
}

}  // namespace kt
