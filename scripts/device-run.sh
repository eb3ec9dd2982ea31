#!/usr/bin/env bash
# Runs on the device machine, from the root of the carried tree (out/device from
# scripts/device-pack.sh): unpacks the binaries, runs every packed test binary
# whose name matches REGEX (default: all), each under a time limit, then prints
# a short table (one line per binary) and, last, the GPU benchmark's table.
#   bash scripts/device-run.sh [REGEX]
# Environment: KT_TEST_TIMEOUT (seconds per binary, default 300). With $OUT set
# (the device tool), the benchmark table is also copied there.
set -u
cd "$(dirname "$0")/.."
filter=${1:-}
if [ -f out/device/bin.tar.xz ] && [ ! -d out/device/bin ]; then
  tar -C out/device -xJf out/device/bin.tar.xz
fi
export LD_LIBRARY_PATH="$PWD/out/device/bin:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
lscpu | grep -E 'Model name|^CPU\(s\)' | sed 's/^/cpu: /'
grep -o -E 'amx_(bf16|int8|tile)|avx512_bf16|avx512_fp16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/^/cpu flags: /'; echo
rm -f out/device/bench.txt
table=()
fail=0
for t in out/device/bin/*_test; do
  name=$(basename "$t")
  [[ -n "$filter" && ! "$name" =~ $filter ]] && continue
  start=$(date +%s)
  out=$(timeout "${KT_TEST_TIMEOUT:-300}" "$t" --gtest_brief=1 2>&1); rc=$?
  secs=$(( $(date +%s) - start ))
  # GPU tests print their own summaries (worst errors, plans); show them whole.
  if [[ "$name" == cuda_* ]]; then echo "$out" | grep -v '^\[==========\]\|^\[  PASSED  \]' ; else echo "$out" | tail -n 20; fi
  passed=$(echo "$out" | grep -oE '\[  PASSED  \] [0-9]+' | grep -oE '[0-9]+$' || echo 0)
  skipped=$(echo "$out" | grep -oE '\[  SKIPPED \] [0-9]+' | grep -oE '[0-9]+$' || echo 0)
  failed=$(echo "$out" | grep -oE '\[  FAILED  \] [0-9]+ test' | grep -oE '[0-9]+' || echo 0)
  # A crash (signal) or a timeout hides the tests after it: run each test of
  # the binary alone, synchronizing after every kernel, to name the culprit.
  if [ $rc -ge 124 ]; then
    echo "== $name stopped (status $rc): each test alone, KT_CUDA_SYNC=1 =="
    for tc in $("$t" --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
      o=$(KT_CUDA_SYNC=1 timeout 60 "$t" --gtest_brief=1 --gtest_filter="$tc" 2>&1); r=$?
      [ $r -ne 0 ] && { echo "-- $tc: status $r"; echo "$o" | tail -n 8; }
    done
  fi
  [ $rc -ne 0 ] && fail=1
  status=ok
  [ $rc -eq 124 ] && status=TIMEOUT
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && status=FAIL
  table+=("$(printf '%-28s %-7s passed %-4s failed %-3s skipped %-4s %4ss' "$name" "$status" "$passed" "$failed" "$skipped" "$secs")")
done
# End to end on the synthetic full-size models (device-pack.sh compiled their
# plans): the CPU's limits, one MoE layer, then prefill and decode of each plan.
# KT_BENCH=0 skips this; KT_BENCH_PLANS (a regex) picks plans; KT_BENCH_ARGS
# replaces kt-bench e2e's arguments (default --prompt 512 --gen 64); a plan's
# NAME.args (device-pack.sh: the routing it is measured under) adds to them.
if [ "${KT_BENCH:-1}" = 1 ] && [ -d out/device/bench/plans ]; then
  bin=out/device/bin
  while read -r name args; do  # only the models the chosen plans need
    need=0
    for p in out/device/bench/plans/"$name"@*.ktp; do
      [[ -z "${KT_BENCH_PLANS:-}" || "$(basename "$p")" =~ ${KT_BENCH_PLANS} ]] && need=1
    done
    [ $need = 1 ] && $bin/kt-gguf synth $args -o "out/device/bench/models/$name.gguf" | tail -1
  done < out/device/bench/models.txt
  : > out/device/e2e.txt
  if [ "${KT_BENCH_LIMITS:-1}" = 1 ]; then  # the machine's limits and one MoE layer (KT_BENCH_LIMITS=0: skip)
    $bin/kt-bench --quick 2>&1 | grep -E "GB/s|TFLOP" | head -4 | tee out/device/e2e.txt
    $bin/kt-bench moe --model deepseek-v2-lite 2>&1 | tail -5 | head -4 | tee -a out/device/e2e.txt
  fi
  for p in out/device/bench/plans/*.ktp; do
    [[ -n "${KT_BENCH_PLANS:-}" && ! "$(basename "$p")" =~ ${KT_BENCH_PLANS} ]] && continue
    echo "== $(basename "$p")" | tee -a out/device/e2e.txt
    full=out/device/e2e-$(basename "$p" .ktp | tr @ -).txt
    extra=""
    [ -f "${p%.ktp}.args" ] && extra=$(cat "${p%.ktp}.args")
    [ -n "$extra" ] && echo "   ($extra)" | tee -a out/device/e2e.txt
    timeout 240 $bin/kt-bench e2e "$p" ${KT_BENCH_ARGS:---prompt 512 --gen 64} $extra > "$full" 2>&1
    grep -A4 '^routing' "$full" | tee -a out/device/e2e.txt
    grep 'predicted' "$full" | tee -a out/device/e2e.txt
    [ -n "${OUT:-}" ] && cp "$full" "$OUT/" 2>/dev/null
  done
fi
echo
echo "== device summary =="
printf '%s\n' "${table[@]}"
[ -f out/device/e2e.txt ] && { echo; echo "== end to end =="; cat out/device/e2e.txt; }
if [ -f out/device/bench.txt ]; then
  echo
  echo "== GPU benchmark =="
  cat out/device/bench.txt
  [ -n "${OUT:-}" ] && cp out/device/bench.txt "$OUT/" 2>/dev/null
fi
exit $fail
