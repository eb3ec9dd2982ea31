// Writing float32 rows to a .npy file as they come (kt-exec --logits-out):
// [rows][cols] in C order, the row count patched into the header at close().
// The layout of ../shared/models/ref/*.npy, so tests compare them directly.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "runtime/result.h"

namespace kt {

class NpyWriter {
 public:
  static Result<NpyWriter> create(const std::string& path, int64_t cols);
  NpyWriter(NpyWriter&& o) noexcept;
  NpyWriter& operator=(NpyWriter&&) = delete;
  ~NpyWriter();

  Status append(std::span<const float> row);  // cols values
  Status close();
  int64_t rows() const { return rows_; }

 private:
  NpyWriter(std::FILE* f, std::string path, int64_t cols) : f_(f), path_(std::move(path)), cols_(cols) {}
  Status write_header();
  std::FILE* f_ = nullptr;
  std::string path_;
  int64_t cols_ = 0;
  int64_t rows_ = 0;
};

}  // namespace kt
