#!/usr/bin/env bash
# The first device call of the session after 2026-12-08, prepared here (no GPU
# needed): the gpu-folds branch fold by fold against main, and the persistent
# chain probe. Run from the repository root on main:
#   bash docs/wip/measure.sh prep     # ~15-30 min on 2 cores: builds, packs out/device, out/base, the probe
#   run command="bash docs/wip/measure.sh device" carry=["out"] kind=nvidia-h200 timeout_s=560
# prep: out/device = the branch's binaries (git am of gpu-folds.mbox on a
# scratch branch, then back), out/base = main's kt-bench alone, a plan
# whose MLA writes o.q8 (the branch's kt-compile) beside main's plan, and
# out/probe/persist. device: the probe, then each KT_CUDA_FOLDS bit alone
# (1 router, 2 gate/up rounding, 4 experts' sum, 8 W_V rounding, 16 combine)
# with main's binary and plan first and the branch with no folds (0) and all (31).
set -euo pipefail
cd "$(dirname "$0")/../.."
P=out/device/bench/plans
case "${1:-}" in
prep)
  # main's kt-bench, alone (its libraries come from out/device/bin there).
  cmake --preset device >/dev/null && cmake --build --preset device -j 2 --target kt-bench
  rm -rf /tmp/kt-base && mkdir -p /tmp/kt-base/bin out/base && cp build/device/bin/kt-bench /tmp/kt-base/bin/
  strip /tmp/kt-base/bin/kt-bench && tar -C /tmp/kt-base -cJf out/base/bin.tar.xz bin
  # main's plans (all-gpu and the rest): the full pack compiles them.
  [ -f $P/v2lite@all-gpu.ktp ] || echo "no $P: run scripts/device-pack.sh once (plans and models) first" >&2
  # The branch, applied in place on a scratch branch (the build trees stay warm:
  # ~10-15 min of CUDA objects each way, where a fresh tree takes an hour).
  git diff --quiet && git diff --cached --quiet || { echo "measure.sh: commit or stash first" >&2; exit 1; }
  git checkout -q -B folds-measure && git am -q docs/wip/gpu-folds.mbox
  KT_PACK_BIN_ONLY=1 KT_PACK='^(kt-bench|kt-gguf|cuda_(elementwise|kernels|moe_kernels|attention_kernels|plan_e2e)_test)$' \
    KT_JOBS=2 bash scripts/device-pack.sh
  # The fold plan: the branch's kt-compile (its MLA calls write o.q8).
  cmake --build --preset release -j 2 --target kt-compile kt-gguf
  build/release/bin/kt-gguf synth --like deepseek-v2-lite --mla-split -o /tmp/v2lite.gguf | tail -1
  mkdir -p out/device/bench/models && ln -sf /tmp/v2lite.gguf out/device/bench/models/v2lite.gguf
  build/release/bin/kt-compile out/device/bench/models/v2lite.gguf rules/all-gpu.yaml --ctx 4096 \
    -o $P/v2lite@all-gpu-fold.ktp
  git checkout -q - && git branch -q -D folds-measure
  rm -f out/device/bench/models/v2lite.gguf /tmp/v2lite.gguf
  mkdir -p out/probe && nvcc -O3 -std=c++17 --expt-relaxed-constexpr --extended-lambda \
    -gencode=arch=compute_90a,code=sm_90a -cudart static -o out/probe/persist docs/wip/persistent_chain.cu
  rm -rf out/device/bin out/base/bin
  du -sh out ;;
device)
  B=out/device/bin; [ -d $B ] || tar -C out/device -xJf out/device/bin.tar.xz
  nvidia-smi --query-gpu=name --format=csv,noheader
  timeout 40 out/probe/persist 26 || true
  LD_LIBRARY_PATH=$PWD/$B timeout 90 $B/kt-gguf synth --like deepseek-v2-lite --mla-split \
    -o out/device/bench/models/v2lite.gguf | tail -1
  v() { echo "m$1:KT_CUDA_FOLDS=$1:$B"; }
  KT_BENCH_ARGS="--prompt 64 --gen 96" timeout 400 bash scripts/device-ab.sh $P/v2lite@all-gpu-fold.ktp 1 \
    base:out/base/bin+$P/v2lite@all-gpu.ktp $(v 0) $(v 16) $(v 1) $(v 2) $(v 4) $(v 8) $(v 31) \
    base2:out/base/bin+$P/v2lite@all-gpu.ktp
  echo "elapsed $SECONDS s" ;;
*) echo "usage: bash docs/wip/measure.sh prep|device" >&2; exit 2 ;;
esac
