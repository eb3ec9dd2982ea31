#!/usr/bin/env bash
# Runs on the device machine, from the root of the carried tree: every packed test
# binary, then a short table (one line per binary) as the last thing printed.
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/out/device/bin:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
lscpu | grep -E 'Model name|^CPU\(s\)' | sed 's/^/cpu: /'
grep -o -E 'amx_(bf16|int8|tile)|avx512_bf16|avx512_fp16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/^/cpu flags: /'; echo
table=()
fail=0
for t in out/device/bin/*_test; do
  name=$(basename "$t")
  out=$("$t" --gtest_brief=1 2>&1); rc=$?
  echo "$out" | tail -n 20
  passed=$(echo "$out" | grep -oE '\[  PASSED  \] [0-9]+' | grep -oE '[0-9]+$' || echo 0)
  skipped=$(echo "$out" | grep -oE '\[  SKIPPED \] [0-9]+' | grep -oE '[0-9]+$' || echo 0)
  [ $rc -ne 0 ] && fail=1
  table+=("$(printf '%-28s %-6s passed %-4s skipped %-4s' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$passed" "$skipped")")
done
echo
echo "== device summary =="
printf '%s\n' "${table[@]}"
exit $fail
