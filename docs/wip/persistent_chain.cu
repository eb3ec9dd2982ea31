// Probe (docs/wip: stand-alone, not built by CMake): how close to HBM bandwidth can a one-token
// decode of a V2-Lite-shaped model get, (A) as today's chain of kernels (one
// per phase, PDL + L2 prefetch in each prologue, recorded in a CUDA graph),
// (B) as one persistent kernel with a grid barrier between the same phases,
// (C) persistent with the phases merged to 8 a layer (norms, routing and
// combines repeated per block), (D) C with the layer's dense weights
// prefetched into L2 ahead of their phases, (E) C with the next group's dense
// weights copied into shared memory before each barrier. The work per weight is light
// (4 dp4a per 16 bytes): a bound on what the structure allows, not the math.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

enum Kind { Dense = 0, ExpertsGU = 1, ExpertsDown = 2, Tiny = 3 };
struct Phase { const uint4* w; uint64_t n16; int kind; int blocks; int group; };
// A layer's experts: 64 slices of gate+up and of down; 6 chosen ids.
struct Layer { const uint4* gu; const uint4* down; uint64_t gu16, down16; const int* ids; };

constexpr int kUsed = 6, kExperts = 64, kThreads = 256;

__device__ __forceinline__ unsigned dot16(uint4 v, int x, unsigned acc) {
  acc = __dp4a(int(v.x), x, int(acc)); acc = __dp4a(int(v.y), x, int(acc));
  acc = __dp4a(int(v.z), x, int(acc)); acc = __dp4a(int(v.w), x, int(acc));
  return acc;
}
__device__ __forceinline__ uint4 ldnc(const uint4* p) {
  uint4 v; asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)); return v;
}
// Stream [lo, hi) of w (16-byte units) over the block's threads, 4 loads in flight each.
__device__ unsigned stream(const uint4* w, uint64_t lo, uint64_t hi, int x) {
  unsigned acc = 0;
  uint64_t i = lo + threadIdx.x;
  for (; i + 3 * kThreads < hi; i += 4 * kThreads) {
    uint4 a = ldnc(w + i), b = ldnc(w + i + kThreads), c = ldnc(w + i + 2 * kThreads), d = ldnc(w + i + 3 * kThreads);
    acc = dot16(a, x, acc); acc = dot16(b, x, acc); acc = dot16(c, x, acc); acc = dot16(d, x, acc);
  }
  for (; i < hi; i += kThreads) acc = dot16(ldnc(w + i), x, acc);
  return acc;
}
__device__ __forceinline__ void prefetch_l2(const void* p, uint64_t bytes) {
  uint64_t a = reinterpret_cast<uint64_t>(p), lo = a & ~15ull, hi = (a + bytes + 15) & ~15ull;
  for (uint64_t q = lo; q < hi;) { uint32_t n = uint32_t(std::min<uint64_t>(hi - q, 1u << 20)); asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(q), "r"(n) : "memory"); q += n; }
}
// Part `part` of `parts` of a phase's bytes (experts: the 6 chosen slices as one range).
__device__ unsigned phase_part(const Phase& ph, const Layer& L, int part, int parts, int x, bool prefetch_only) {
  if (ph.kind == Dense || ph.kind == Tiny) {
    uint64_t lo = ph.n16 * part / parts, hi = ph.n16 * (part + 1) / parts;
    if (prefetch_only) { if (threadIdx.x == 0 && hi > lo) prefetch_l2(ph.w + lo, (hi - lo) * 16); return 0; }
    return stream(ph.w, lo, hi, x);
  }
  const uint4* base = ph.kind == ExpertsGU ? L.gu : L.down;
  const uint64_t per = ph.kind == ExpertsGU ? L.gu16 : L.down16, total = per * kUsed;
  uint64_t lo = total * part / parts, hi = total * (part + 1) / parts;
  unsigned acc = 0;
  while (lo < hi) {
    const int k = int(lo / per);
    const uint64_t end = std::min<uint64_t>(hi, (k + 1) * per);
    const uint4* w = base + uint64_t(__ldcg(L.ids + k)) * per - uint64_t(k) * per;
    if (prefetch_only) { if (threadIdx.x == 0) prefetch_l2(w + lo, (end - lo) * 16); }
    else acc += stream(w, lo, end, x);
    lo = end;
  }
  return acc;
}
__device__ __forceinline__ void block_out(unsigned acc, unsigned* out) {
  __shared__ unsigned s[kThreads / 32];
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) { unsigned t = 0; for (int i = 0; i < kThreads / 32; ++i) t += s[i]; out[16 + (blockIdx.x & 511)] = t; }
  __syncthreads();
}
// (A) one phase a kernel.
__global__ void __launch_bounds__(kThreads) phase_kernel(Phase ph, Layer L, unsigned* out, int pdl) {
  if (pdl) {
    if (ph.kind == Dense) phase_part(ph, L, blockIdx.x, gridDim.x, 1, true);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  const int x = int(__ldcg(out + 16)) | 1;  // "the activation": written by the phase before
  block_out(phase_part(ph, L, blockIdx.x, gridDim.x, x, false), out);
}
// A grid barrier for co-resident blocks.
__device__ void grid_sync(unsigned* count, unsigned* gen, unsigned n) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned g = *(volatile unsigned*)gen;
    __threadfence();
    if (atomicAdd(count, 1u) == n - 1) { *(volatile unsigned*)count = 0; __threadfence(); atomicAdd(gen, 1u); }
    else while (*(volatile unsigned*)gen == g) {}
    __threadfence();
  }
  __syncthreads();
}
// (B)/(C)/(D): every phase of every layer in one launch; phases of one group
// run without a barrier between them (split over the blocks side by side), a
// barrier after each group. prefetch: each block prefetches its share of the
// next layer's dense weights into L2 at the start of group `pf_group`.
__global__ void __launch_bounds__(kThreads) persistent(const Phase* phases, int n_phase, const Layer* layers, int n_layer,
                                                       unsigned* out, unsigned* bar, int pf_group) {
  for (int l = 0; l < n_layer; ++l) {
    const Layer L = layers[l];
    int p = 0;
    while (p < n_phase) {
      const int g = phases[l * n_phase + p].group;
      int q = p;
      while (q < n_phase && phases[l * n_phase + q].group == g) ++q;
      if (g == pf_group && l + 1 < n_layer)
        for (int r = 0; r < n_phase; ++r) {
          const Phase nx = phases[(l + 1) * n_phase + r];
          if (nx.kind == Dense) phase_part(nx, layers[l + 1], blockIdx.x, gridDim.x, 1, true);
        }
      const int x = int(__ldcg(out + 16)) | 1;
      unsigned acc = 0;
      for (int r = p; r < q; ++r) {
        const Phase ph = phases[l * n_phase + r];
        // Tiny phases: a few blocks; the others go on to the next phase of the group.
        if (ph.kind == Tiny) { if (int(blockIdx.x) < ph.blocks) acc += phase_part(ph, L, blockIdx.x, ph.blocks, x, false); }
        else acc += phase_part(ph, L, blockIdx.x, gridDim.x, x, false);
      }
      block_out(acc, out);
      grid_sync(bar, bar + 1, gridDim.x);
      p = q;
    }
  }
}
// (E): C, and before each barrier a block copies its share of the next group's
// dense weights into shared memory (cp.async: no registers hold them), so
// they arrive while the grid waits; the next group reads them from there.
constexpr uint64_t kStageBytes = 160 * 1024;
__device__ __forceinline__ void cp_async16(void* smem, const void* g) {
  const unsigned a = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(g) : "memory");
}
// The group's phases from p: [p, q); visits each dense phase's slice of this block with
// its offset in the stage (those that fit).
template <class F>
__device__ void staged_slices(const Phase* ph, int p, int q, F f) {
  uint64_t at = 0;
  for (int r = p; r < q; ++r) {
    if (ph[r].kind != Dense) continue;
    const uint64_t lo = ph[r].n16 * blockIdx.x / gridDim.x, hi = ph[r].n16 * (blockIdx.x + 1) / gridDim.x;
    if ((at + hi - lo) * 16 > kStageBytes) return;
    f(r, lo, hi, at);
    at += hi - lo;
  }
}
__device__ int group_end(const Phase* ph, int n_phase, int p) {
  int q = p;
  while (q < n_phase && ph[q].group == ph[p].group) ++q;
  return q;
}
__global__ void __launch_bounds__(kThreads) persistent_staged(const Phase* phases, int n_phase, const Layer* layers,
                                                              int n_layer, unsigned* out, unsigned* bar) {
  extern __shared__ uint4 stage[];
  bool staged_next = false;
  for (int l = 0; l < n_layer; ++l) {
    const Layer L = layers[l];
    const Phase* ph = phases + l * n_phase;
    int p = 0;
    while (p < n_phase) {
      const int q = group_end(ph, n_phase, p);
      const int x = int(__ldcg(out + 16)) | 1;
      unsigned acc = 0;
      uint64_t staged_lo[32], staged_at[32];  // per phase of the group: -1 if not staged
      for (int r = p; r < q; ++r) staged_lo[r - p] = ~0ull;
      if (staged_next) {
        staged_slices(ph, p, q, [&](int r, uint64_t lo, uint64_t, uint64_t at) { staged_lo[r - p] = lo; staged_at[r - p] = at; });
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads();
      }
      for (int r = p; r < q; ++r) {
        const Phase P = ph[r];
        if (P.kind == Tiny) { if (int(blockIdx.x) < P.blocks) acc += phase_part(P, L, blockIdx.x, P.blocks, x, false); continue; }
        if (staged_lo[r - p] != ~0ull) {
          const uint64_t lo = P.n16 * blockIdx.x / gridDim.x, hi = P.n16 * (blockIdx.x + 1) / gridDim.x;
          for (uint64_t i = threadIdx.x; i < hi - lo; i += kThreads) acc = dot16(stage[staged_at[r - p] + i], x, acc);
        } else {
          acc += phase_part(P, L, blockIdx.x, gridDim.x, x, false);
        }
      }
      __syncthreads();  // the stage is read before it is refilled
      // Stage the next group's dense slices (the next layer's first group after the last).
      const Phase* nph = q < n_phase ? ph : (l + 1 < n_layer ? ph + n_phase : nullptr);
      const int np = q < n_phase ? q : 0;
      staged_next = nph != nullptr;
      if (nph) {
        staged_slices(nph, np, group_end(nph, n_phase, np), [&](int r, uint64_t lo, uint64_t hi, uint64_t at) {
          for (uint64_t i = threadIdx.x; i < hi - lo; i += kThreads) cp_async16(stage + at + i, nph[r].w + lo + i);
        });
        asm volatile("cp.async.commit_group;" ::: "memory");
      }
      block_out(acc, out);
      grid_sync(bar, bar + 1, gridDim.x);
      p = q;
    }
  }
}
__global__ void copy_kernel(const uint4* a, uint4* b, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) b[i] = a[i];
}

int main(int argc, char** argv) {
  const int n_layer = argc > 1 ? atoi(argv[1]) : 26;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  // V2-Lite's MoE layer at one token, today's chain (bytes of weights; tiny = activations only).
  struct Spec { const char* name; double mb; int kind; int blocks; int group; };
  const Spec spec[] = {
      {"add_rms_norm", 0.008, Tiny, 1, 0},   {"q+kv_a", 4.2, Dense, 0, 0},        {"mla_prepare(k_b)", 0.6, Dense, 0, 1},
      {"attn_split", 0.074, Tiny, 16, 2},    {"attn_combine", 0.016, Tiny, 4, 3}, {"W_V", 0.6, Dense, 0, 3},
      {"quantize", 0.008, Tiny, 1, 4},       {"o", 2.36, Dense, 0, 4},            {"add_rms_norm", 0.008, Tiny, 1, 5},
      {"router", 0.5, Dense, 0, 5},          {"shared gate/up", 6.5, Dense, 0, 5}, {"route", 0.001, Tiny, 1, 6},
      {"quantize", 0.011, Tiny, 1, 6},       {"shared down", 3.2, Dense, 0, 6},   {"quantize x", 0.008, Tiny, 1, 6},
      {"experts gate/up", 19.5, ExpertsGU, 0, 6}, {"quantize", 0.034, Tiny, 1, 7}, {"experts down", 11.9, ExpertsDown, 0, 7},
      {"sum", 0.05, Tiny, 1, 7},             {"add", 0.008, Tiny, 1, 7}};
  const int n_phase = sizeof(spec) / sizeof(spec[0]);
  std::vector<Phase> phases;
  std::vector<Layer> layers;
  double bytes_token = 0;
  std::vector<void*> allocs;
  auto dalloc = [&](uint64_t b) { void* p; CK(cudaMalloc(&p, b)); CK(cudaMemset(p, 1, b)); allocs.push_back(p); return p; };
  srand(7);
  for (int l = 0; l < n_layer; ++l) {
    Layer L;
    L.gu16 = uint64_t(19.5e6 / kUsed / 16); L.down16 = uint64_t(11.9e6 / kUsed / 16);
    L.gu = (const uint4*)dalloc(L.gu16 * 16 * kExperts); L.down = (const uint4*)dalloc(L.down16 * 16 * kExperts);
    int ids[kUsed]; for (int k = 0; k < kUsed; ++k) { again: ids[k] = rand() % kExperts; for (int j = 0; j < k; ++j) if (ids[j] == ids[k]) goto again; }
    int* d_ids = (int*)dalloc(sizeof ids); CK(cudaMemcpy(d_ids, ids, sizeof ids, cudaMemcpyHostToDevice)); L.ids = d_ids;
    layers.push_back(L);
    for (const Spec& s : spec) {
      Phase ph{}; ph.kind = s.kind; ph.group = s.group; ph.n16 = uint64_t(s.mb * 1e6 / 16);
      if (s.kind == Dense || s.kind == Tiny) ph.w = (const uint4*)dalloc(ph.n16 * 16);
      if (s.kind != Tiny) bytes_token += s.mb * 1e6;
      // (A)'s grid: tiny kernels their few blocks; products ~4 waves of 256-thread blocks or one per 16 KB.
      ph.blocks = s.kind == Tiny ? s.blocks : int(std::min<uint64_t>(uint64_t(sms) * 8, std::max<uint64_t>(ph.n16 / 1024, 1)));
      phases.push_back(ph);
    }
  }
  unsigned *out, *bar; CK(cudaMalloc(&out, 4096)); CK(cudaMemset(out, 0, 4096)); bar = out;
  Phase* d_ph; Layer* d_l;
  CK(cudaMalloc(&d_ph, phases.size() * sizeof(Phase))); CK(cudaMemcpy(d_ph, phases.data(), phases.size() * sizeof(Phase), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_l, layers.size() * sizeof(Layer))); CK(cudaMemcpy(d_l, layers.data(), layers.size() * sizeof(Layer), cudaMemcpyHostToDevice));
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  // Flush L2 between repetitions: a 200 MB copy.
  uint4 *fa = (uint4*)dalloc(200 << 20), *fb = (uint4*)dalloc(200 << 20);
  auto flush = [&] { copy_kernel<<<sms * 4, 256, 0, st>>>(fa, fb, (200 << 20) / 16); };
  auto time_it = [&](auto body, int reps) {
    std::vector<float> v;
    for (int r = 0; r < reps + 1; ++r) {
      flush(); cudaEventRecord(e0, st); body(); cudaEventRecord(e1, st); CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (r) v.push_back(ms);
    }
    std::sort(v.begin(), v.end()); return v[v.size() / 2];
  };
  { // HBM copy
    uint4 *a = (uint4*)dalloc(1ull << 30), *b = (uint4*)dalloc(1ull << 30);
    float ms = time_it([&] { cudaMemcpyAsync(b, a, 1ull << 30, cudaMemcpyDeviceToDevice, st); }, 5);
    float ms2 = time_it([&] { copy_kernel<<<sms * 8, 256, 0, st>>>(a, b, (1ull << 30) / 16); }, 5);
    printf("HBM copy: cudaMemcpy %.0f GB/s, kernel %.0f GB/s (read + write)\n", 2.0 * (1 << 30) / ms / 1e6, 2.0 * (1 << 30) / ms2 / 1e6);
  }
  printf("weights a token: %.1f MB over %d layers (%d phases a layer)\n", bytes_token / 1e6, n_layer, n_phase);
  auto report = [&](const char* name, float ms) {
    printf("%-44s %8.1f us a token  %7.1f us a layer  %6.0f GB/s\n", name, ms * 1e3, ms * 1e3 / n_layer, bytes_token / (ms * 1e-3) / 1e9);
  };
  for (int pdl = 0; pdl < 2; ++pdl) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < n_layer; ++l)
      for (int p = 0; p < n_phase; ++p) {
        const Phase& ph = phases[l * n_phase + p];
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg{}; cfg.gridDim = dim3(ph.blocks); cfg.blockDim = dim3(kThreads); cfg.stream = st; cfg.attrs = at; cfg.numAttrs = pdl;
        CK(cudaLaunchKernelEx(&cfg, phase_kernel, ph, layers[l], out, pdl));
      }
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    report(pdl ? "(A) a kernel a phase, graph + PDL + prefetch" : "(A) a kernel a phase, graph", time_it([&] { cudaGraphLaunch(ge, st); }, 5));
  }
  int per_sm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent, kThreads, 0));
  for (int bps : {1, 2, 4}) {
    if (bps > per_sm) continue;
    const int grid = sms * bps;
    auto run = [&](std::vector<Phase> ph, int pf) {
      CK(cudaMemcpy(d_ph, ph.data(), ph.size() * sizeof(Phase), cudaMemcpyHostToDevice));
      return time_it([&] { persistent<<<grid, kThreads, 0, st>>>(d_ph, n_phase, d_l, n_layer, out, bar, pf); }, 5);
    };
    std::vector<Phase> sep = phases;  // (B): every phase its own group
    for (size_t i = 0; i < sep.size(); ++i) sep[i].group = int(i % n_phase);
    char name[80];
    snprintf(name, sizeof name, "(B) persistent, %d barriers a layer, %d/SM", n_phase, bps); report(name, run(sep, -1));
    snprintf(name, sizeof name, "(C) persistent, 8 barriers a layer, %d/SM", bps); report(name, run(phases, -1));
    snprintf(name, sizeof name, "(D) C + next layer's dense to L2 at g6, %d/SM", bps); report(name, run(phases, 6));
    snprintf(name, sizeof name, "(D') C + next layer's dense to L2 at g7, %d/SM", bps); report(name, run(phases, 7));
  }
  {
    CK(cudaFuncSetAttribute(persistent_staged, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStageBytes)));
    int occ = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, persistent_staged, kThreads, kStageBytes));
    if (occ >= 1) {
      CK(cudaMemcpy(d_ph, phases.data(), phases.size() * sizeof(Phase), cudaMemcpyHostToDevice));
      report("(E) C + next group's weights staged in smem", time_it([&] {
        persistent_staged<<<sms, kThreads, kStageBytes, st>>>(d_ph, n_phase, d_l, n_layer, out, bar); }, 5));
      CK(cudaGetLastError());
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
