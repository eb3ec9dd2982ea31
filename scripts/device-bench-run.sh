#!/usr/bin/env bash
# Runs on the device machine from the root of the carried tree (see
# device-bench-pack.sh): CPU kernel tests at every ISA level the CPU has, the
# machine's limits, matmul GB/s, and end-to-end CPU-only decode and prefill of
# the synthetic DeepSeek-V2-Lite (Q4_K_M, 9.7 GB), with a short table last.
set -u
cd "$(dirname "$0")/../out/bench"
[ -d lib ] || tar -xJf lib.tar.xz
export LD_LIBRARY_PATH="$PWD/lib:${LD_LIBRARY_PATH:-}"
lscpu | grep -E 'Model name|^CPU\(s\)' | sed 's/^/cpu: /'
grep -o -E 'amx_(bf16|int8|tile)|avx512_bf16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
bin/kt-gguf synth --like deepseek-v2-lite --mla-split -o models/v2lite.gguf | tail -1
bin/cpu_kernels_test --gtest_brief=1 2>&1 | tail -3
bin/matmul_q_test --gtest_brief=1 2>&1 | tail -3
bin/kt-bench --quick 2>&1 | tail -6
# Matmul from DRAM (14336 x 4096, copies rotated past the L3), decode batches.
for t in Q4_K Q6_K Q8_0 Q5_0; do bin/kt-bench matmul --type $t --batch 1 2>&1 | grep -E "^ +$t"; done
bin/kt-bench matmul --type Q4_K --batch 8 2>&1 | grep -E "^ +Q4_K"
bin/kt-bench moe --model deepseek-v2-lite 2>&1 | tail -5 | head -4
bin/kt-bench moe --model deepseek-v3 2>&1 | tail -5 | head -4
bin/kt-bench e2e plans/v2lite-cpu.ktp --prompt 512 --gen 64 --profile 2>&1 | tee e2e.txt | head -24
