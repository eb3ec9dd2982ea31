#!/usr/bin/env bash
# The whole test suite: first the runtime world under ASan+UBSan (GGUF reader,
# hostile corpus, kernels, tokenizer, templates), then a bounded libFuzzer run of
# every parser (KT_FUZZ_MINUTES each, default 0.5), then everything (compiler,
# lit, tools) in the release build. The last line is ctest's summary of that run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${KT_JOBS:-$(nproc)}

echo "== sanitizers (address, undefined): runtime and kernels =="
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs" 2>&1 | grep -E "tests passed|tests failed|Failed|\*\*\*"

echo "== fuzzing: every parser for ${KT_FUZZ_MINUTES:-0.5} min =="
scripts/fuzz.sh all "${KT_FUZZ_MINUTES:-0.5}"

echo "== release: full suite =="
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
