#!/usr/bin/env bash
# Packs, here, the CPU benchmark of the device machine (16-core Xeon, AMX):
# the runtime world built without CUDA or MLIR, the CPU kernel tests, and
# plans compiled here for the synthetic full-size models that
# scripts/device-bench-run.sh synthesizes there (kt-gguf synth is
# deterministic, so the plans' fingerprints match). Carry out/bench.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${KT_JOBS:-$(nproc)}
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKT_BUILD_COMPILER=OFF -DKT_CUDA=OFF >/dev/null
cmake --build build/bench -j "$jobs" --target kt-bench kt-exec kt-gguf kt-plan cpu_kernels_test matmul_q_test
compile=${KT_COMPILE:-build/release/bin/kt-compile}
rm -rf out/bench && mkdir -p out/bench/bin out/bench/lib out/bench/plans out/bench/models
cp build/bench/bin/{kt-bench,kt-exec,kt-gguf,kt-plan,cpu_kernels_test,matmul_q_test} out/bench/bin/
for b in out/bench/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}' | grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl|librt' || true
done | sort -u | while read -r lib; do cp -L "$lib" out/bench/lib/; done
# The models, here only long enough to compile their plans.
tmp=$(mktemp -d /tmp/kt-bench-models.XXXX)
trap 'rm -rf "$tmp"' EXIT
synth() {  # name, synth args
  local name=$1; shift
  build/bench/bin/kt-gguf synth "$@" -o "$tmp/$name.gguf" >/dev/null
  ln -sf "$tmp/$name.gguf" "out/bench/models/$name.gguf"
}
synth v2lite --like deepseek-v2-lite --mla-split
"$compile" out/bench/models/v2lite.gguf --gpu-mem 0 --mla absorbed --ctx 4096 -o out/bench/plans/v2lite-cpu.ktp
rm -f out/bench/models/*.gguf
# oneDNN alone is 40 MB and the device tool carries 64 MiB: ship it compressed.
tar -C out/bench -cJf out/bench/lib.tar.xz lib && rm -rf out/bench/lib
strip out/bench/bin/*
du -sh out/bench | awk '{print "packed " $1 " in out/bench"}'
