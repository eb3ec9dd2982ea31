#!/usr/bin/env bash
# On the device machine: kt-bench e2e of one plan under several binaries or
# settings, alternating round by round (a host's speed drifts between runs, so
# each comparison is made within one call), then one line a run.
#   bash scripts/device-ab.sh PLAN ROUNDS VARIANT...
# VARIANT: LABEL:BINDIR or LABEL:VAR=VALUE,...:BINDIR, then optionally
# +PLANFILE (that variant's plan in place of PLAN: a plan an older kt-compile
# made, for an older binary), e.g.
#   bash scripts/device-ab.sh out/device/bench/plans/v2lite@all-gpu.ktp 3 \
#     base:out/base/bin+out/base/v2lite@all-gpu.ktp new:out/device/bin \
#     nofold:KT_CUDA_FOLDS=0:out/device/bin
# A BINDIR holding only kt-bench (an older build packed alone) takes its
# shared libraries from out/device/bin. The plan's model must exist (device-run.sh
# synthesizes the bench models; or kt-gguf synth). KT_BENCH_ARGS replaces
# kt-bench e2e's arguments (default --prompt 64 --gen 128).
set -u
cd "$(dirname "$0")/.."
plan=$1 rounds=$2
shift 2
for d in out/device out/base; do
  [ -f $d/bin.tar.xz ] && [ ! -d $d/bin ] && tar -C $d -xJf $d/bin.tar.xz
done
libs="$PWD/out/device/bin"
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    label=${v%%:*}
    rest=${v#*:}
    envs=""
    if [[ "$rest" == *:* ]]; then envs=${rest%%:*}; rest=${rest#*:}; fi
    p=$plan
    if [[ "$rest" == *+* ]]; then p=${rest#*+}; rest=${rest%%+*}; fi
    line=$(env ${envs//,/ } LD_LIBRARY_PATH="$libs" "$rest/kt-bench" e2e "$p" ${KT_BENCH_ARGS:---prompt 64 --gen 128} 2>&1 |
           grep -E '^own, no hooks|^  on the GPU' | head -2 | tr -s ' ' | paste -sd'|')
    printf '%-12s round %d: %s\n' "$label" "$r" "${line:-no result}"
  done
done
