#!/usr/bin/env bash
# Runs libFuzzer targets for a bounded time each, failing on any crash, leak,
# timeout or out-of-memory. Longer local runs: scripts/fuzz.sh fuzz_gguf 30
#   scripts/fuzz.sh [TARGET|all] [MINUTES]     (default: all, 1 minute each)
# New inputs found go to build/fuzz/corpus/<kind> (the seeds in test/fuzz/corpus
# stay as committed); a failing input is left in build/fuzz/artifacts/.
set -uo pipefail
cd "$(dirname "$0")/.."
target=${1:-all}
minutes=${2:-1}
seconds=$(awk "BEGIN {print int($minutes * 60)}")
cmake --preset fuzz >/dev/null || exit 1
cmake --build --preset fuzz -j "${KT_JOBS:-$(nproc)}" >/dev/null || { echo "fuzz: build failed"; exit 1; }
targets=()
if [ "$target" = all ]; then
  for t in build/fuzz/bin/fuzz_*; do targets+=("$(basename "$t")"); done
else
  targets=("$target")
fi
mkdir -p build/fuzz/artifacts build/fuzz/logs
failed=0
for t in "${targets[@]}"; do
  kind=${t#fuzz_}
  work=build/fuzz/corpus/$kind
  mkdir -p "$work"
  dict=()
  [ -f "test/fuzz/$kind.dict" ] && dict=(-dict="test/fuzz/$kind.dict")
  log=build/fuzz/logs/$t.log
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build/fuzz/bin/$t" "$work" "test/fuzz/corpus/$kind" "${dict[@]}" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix=build/fuzz/artifacts/ -print_final_stats=1 >"$log" 2>&1
  rc=$?
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+')
  printf 'fuzz: %-12s %4ss  %9s execs  %7s/s  %6s edges  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "$([ $rc -eq 0 ] && echo ok || echo FAILED)"
  if [ $rc -ne 0 ]; then
    failed=1
    grep -E 'ERROR|SUMMARY|runtime error|#[0-9]+ 0x' "$log" | head -n 20
    ls build/fuzz/artifacts/
  fi
done
exit $failed
