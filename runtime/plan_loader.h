// Loading a plan (.ktp, a size-prefixed FlatBuffer): the size prefix and the
// FlatBuffers verifier first, then kt's own checks
// (schema version, every index in range, every buffer inside its arena), then,
// against the GGUF it names, size and fingerprint. Each failure is one line
// naming the plan file and what is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/plan_generated.h"
#include "runtime/result.h"

namespace kt {

// Bumped whenever a reader of the old schema would misread a new plan.
constexpr uint32_t kPlanSchemaVersion = 4;  // 3: Weight.matrices; 4: Phase.min_tokens

// FNV-1a 64 of the GGUF bytes before the data section: the header, metadata and
// tensor table. Any change to names, shapes, types, offsets or metadata changes it.
uint64_t gguf_fingerprint(const GgufFile& f);

// A float option the compiler recorded (Plan.options: e.g. kt-compile
// --profile's predicted_decode_tok_s); 0 when absent.
double plan_option_f(const plan::Plan& p, std::string_view key);

class PlanFile {
 public:
  static Result<PlanFile> load(const std::string& path);
  static Result<PlanFile> from_bytes(std::string name, std::vector<uint8_t> bytes);

  const plan::Plan& plan() const { return *plan_; }
  const std::string& path() const { return path_; }
  // The GGUF path, resolved against the plan's folder when relative.
  std::string gguf_path() const;
  // Refuses a GGUF whose size or fingerprint differ from the ones compiled for.
  Status check_gguf(const GgufFile& f) const;
  // Every kernel a call names must exist in this build: the first missing one is named.
  Status check_kernels(const std::function<bool(std::string_view)>& has_kernel) const;

 private:
  Status verify();
  std::string path_;
  std::vector<uint8_t> bytes_;
  const plan::Plan* plan_ = nullptr;
};

}  // namespace kt
