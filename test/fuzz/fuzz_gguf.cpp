// libFuzzer target: GGUF header, metadata, tensor table, and a typed view of
// every tensor (the first row of each decoded through the type table). Anything
// accepted must be safe to walk; anything refused must be refused with one line.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "runtime/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kt::GgufFile::from_bytes("fuzz.gguf", {data, size});
  if (!f.ok()) {
    if (f.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  for (const auto& kv : f->metadata()) (void)kv.value.to_string(16);
  std::vector<float> row;
  for (const auto& t : f->tensors()) {
    const kt::TypeTraits& tt = kt::type_traits(t.type);
    if (!tt.supported() || t.ne[0] > (1 << 16)) continue;
    row.resize(size_t(t.ne[0]));
    tt.dequant_row(t.row(0), row.data(), t.ne[0]);
    (void)tt.dot_row(t.row(t.nrows() - 1), row.data(), t.ne[0]);
  }
  return 0;
}
