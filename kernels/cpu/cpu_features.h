// What this CPU can run, read once from cpuid and xgetbv, and the ISA level the
// fast kernels dispatch on. The library itself is compiled for plain x86-64; only
// the files of one ISA (matmul_q_avx512.cpp, ...) get -mavx512* and are called
// after active_isa() says so, so one binary runs on any x86-64 CPU.
//
// A feature counts only when the OS saves its registers (XCR0): AVX-512 in a VM
// whose hypervisor hides the ZMM state is reported absent, as it must be.
#pragma once

#include <string_view>

namespace kt::cpu {

struct CpuFeatures {
  bool avx2 = false;      // with FMA and F16C (every AVX2 CPU has both)
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512vbmi = false;
  bool avx512bf16 = false;
  bool amx_tile = false;  // the OS saves the tile state (XCR0 bits 17, 18)
  bool amx_int8 = false;
  bool amx_bf16 = false;
};

// Detected once, on first use; the same for every thread.
const CpuFeatures& cpu_features();

// Levels in increasing order; each includes the ones below it.
//  Scalar: portable C++ (no intrinsics).
//  Avx2:   AVX2 + FMA + F16C (Haswell, Zen 1 and later).
//  Avx512: AVX-512 F/BW/DQ/VL + VNNI (Ice Lake / Cascade Lake, Zen 4 and later).
//          AVX-512 without VNNI (Skylake-SP) runs the AVX2 kernels.
//  Amx:    Avx512 + AMX-TILE/INT8/BF16 (Sapphire Rapids and later).
enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2, Amx = 3 };

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512", "amx"
// Parses isa_name's strings; false for anything else.
bool parse_isa(std::string_view s, Isa* out);

// The highest level this CPU (and OS) supports.
Isa detected_isa();
// min(detected_isa(), the limit): what the kernels dispatch on now.
Isa active_isa();

// A process-wide ceiling on active_isa(), for tests and benchmarks that compare
// levels on one machine. Starts as the environment variable KT_CPU_ISA
// (scalar|avx2|avx512|amx; anything else is ignored with a message on stderr),
// else no limit (reported as Amx, the highest level). A limit above
// detected_isa() has no effect; set_isa_limit(isa_limit()) restores a saved one.
void set_isa_limit(Isa limit);
Isa isa_limit();

// Linux gives a process the AMX tile state only on request
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)). Asks once; true when
// granted. detected_isa() reports Amx only when this succeeds.
bool amx_permitted();

}  // namespace kt::cpu
