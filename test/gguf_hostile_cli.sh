#!/usr/bin/env bash
# kt-gguf on every hostile file: exit status 1, exactly one line on stderr naming
# the file, and no sanitizer report. The corpus is written by gguf_hostile_test.
set -u
hostile_test=$1 kt_gguf=$2 dir=$3
"$hostile_test" --gtest_filter='GgufHostile.EveryCaseIsRefusedWithOneLine' >/dev/null || { echo "corpus test failed"; exit 1; }
n=0 bad=0
for f in "$dir"/*.gguf; do
  n=$((n + 1))
  err=$("$kt_gguf" info "$f" 2>&1 >/dev/null); rc=$?
  lines=$(printf '%s\n' "$err" | wc -l)
  if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || [[ "$err" != *"$(basename "$f"):"* ]]; then
    echo "FAIL $(basename "$f"): rc=$rc lines=$lines: $err"; bad=$((bad + 1))
  fi
done
echo "$n hostile files, $bad failures"
[ $n -ge 30 ] && [ $bad -eq 0 ]
