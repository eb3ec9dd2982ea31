// Random but valid encodings of each supported type: every fp16 scale finite and
// small (like trained weights' scales), the quantized bits uniformly random. Used
// by benchmarks (speed does not depend on the values) and by kernel tests (fast
// kernels are compared with the reference on random inputs, never on zeros).
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"

namespace kt {

// A small, fast generator (splitmix64): reproducible from a seed.
struct SplitMix64 {
  uint64_t s;
  explicit SplitMix64(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / float(1 << 24)); }  // [0, 1)
};

// Whether fill_random_blocks knows where this type keeps its scales.
bool random_blocks_supported(GgmlType t);

// Fills nbytes (whole blocks) of type t. Float types get values in
// [center - spread, center + spread]; block types get random bits with scales
// that keep every weight below 1 in magnitude (center and spread are ignored).
void fill_random_blocks(GgmlType t, uint8_t* dst, uint64_t nbytes, SplitMix64& rng, float center = 0.0f,
                        float spread = 0.05f);

}  // namespace kt
