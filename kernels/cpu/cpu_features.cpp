// cpuid/xgetbv feature detection (Intel SDM vol. 2, CPUID leaf 1 and leaf 7) and
// the process-wide ISA ceiling.
#include "kernels/cpu/cpu_features.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KT_X86 1
#endif
#if defined(__linux__) && defined(KT_X86)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kt::cpu {
namespace {

#ifdef KT_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

unsigned long long xgetbv0() {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool bit(unsigned v, int i) { return (v >> i) & 1u; }
#endif

CpuFeatures detect() {
  CpuFeatures f;
#ifdef KT_X86
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  if (!osxsave) return f;  // no xgetbv: the OS saves no AVX state
  const unsigned long long xcr0 = xgetbv0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG, XTILEDATA
  const unsigned max_leaf = cpuid(0, 0).a;
  if (max_leaf < 7) return f;
  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  const bool avx = bit(l1.c, 28), fma = bit(l1.c, 12), f16c = bit(l1.c, 29);
  f.avx2 = os_avx && avx && fma && f16c && bit(l7.b, 5);
  if (os_avx512) {
    f.avx512f = bit(l7.b, 16);
    f.avx512dq = bit(l7.b, 17);
    f.avx512bw = bit(l7.b, 30);
    f.avx512vl = bit(l7.b, 31);
    f.avx512vbmi = bit(l7.c, 1);
    f.avx512vnni = bit(l7.c, 11);
    f.avx512bf16 = bit(l7s1.a, 5);
  }
  if (os_amx) {
    f.amx_bf16 = bit(l7.d, 22);
    f.amx_tile = bit(l7.d, 24);
    f.amx_int8 = bit(l7.d, 25);
  }
#endif
  return f;
}

constexpr int kNoLimit = 1000;

int limit_from_env() {
  const char* s = std::getenv("KT_CPU_ISA");
  if (!s || !*s) return kNoLimit;
  Isa isa;
  if (parse_isa(s, &isa)) return int(isa);
  std::fprintf(stderr, "kt: KT_CPU_ISA=%s is not one of scalar|avx2|avx512|amx; ignored\n", s);
  return kNoLimit;
}

std::atomic<int>& limit_slot() {
  static std::atomic<int> limit{limit_from_env()};
  return limit;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Amx: return "amx";
  }
  return "?";
}

bool parse_isa(std::string_view s, Isa* out) {
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
    if (s == isa_name(i)) {
      *out = i;
      return true;
    }
  }
  return false;
}

bool amx_permitted() {
  static const bool granted = [] {
#if defined(__linux__) && defined(KT_X86)
    const CpuFeatures& f = cpu_features();
    if (!(f.amx_tile && f.amx_int8 && f.amx_bf16)) return false;
    constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

Isa detected_isa() {
  static const Isa isa = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.avx2) return Isa::Scalar;
    if (!(f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx512vnni)) return Isa::Avx2;
    if (!amx_permitted()) return Isa::Avx512;
    return Isa::Amx;
  }();
  return isa;
}

Isa active_isa() {
  const int limit = limit_slot().load(std::memory_order_relaxed);
  const int detected = int(detected_isa());
  return Isa(detected < limit ? detected : limit);
}

void set_isa_limit(Isa limit) { limit_slot().store(int(limit), std::memory_order_relaxed); }

Isa isa_limit() {
  const int l = limit_slot().load(std::memory_order_relaxed);
  return l >= int(Isa::Amx) ? Isa::Amx : Isa(l);
}

}  // namespace kt::cpu
