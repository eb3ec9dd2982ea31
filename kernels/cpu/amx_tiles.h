// What the AMX kernels (matmul_q_amx.cpp, matmul_bf16_amx.cpp) share: the tile
// configuration's memory layout (palette 1) and a per-thread work buffer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kt::cpu::matmul_detail {

// ldtilecfg's 64 bytes: per tile its rows and bytes a row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// This thread's buffer of at least `bytes`, 64-byte aligned, grown as needed
// and kept (one per thread, shared by both kernels: neither calls the other).
// Defined out of line in amx_tiles.cpp, which is compiled for plain x86-64: an
// inline function of a header the ISA files include could be the copy, with
// their instructions, that the linker keeps for every caller.
void* amx_thread_buffer(size_t bytes);

}  // namespace kt::cpu::matmul_detail
