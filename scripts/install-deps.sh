#!/usr/bin/env bash
# Installs everything kt builds against, from the distribution's packages only.
# Safe to run twice: packages already installed are skipped.
#   scripts/install-deps.sh            compiler + runtime (Debian 12; Ubuntu 24.04
#                                      with LLVM 22 in its apt sources)
#   scripts/install-deps.sh --runtime  runtime world only (no MLIR/LLVM): what a
#                                      machine that only runs plans needs
# CUDA is never installed here: when nvcc is present (/usr/local/cuda) the build uses it.
set -euo pipefail

runtime_only=0
[ "${1:-}" = "--runtime" ] && runtime_only=1

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  cmake ninja-build g++ git python3
  libyaml-cpp-dev libflatbuffers-dev flatbuffers-compiler
  libdnnl-dev libgtest-dev libzstd-dev nlohmann-json3-dev
  libcpp-httplib-dev
)
if [ $runtime_only -eq 0 ]; then
  PKGS+=(llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 lld-22 libclang-rt-22-dev)
  # kt-serve's tests (test/serve): node for the npm clients and a headless Chromium.
  PKGS+=(nodejs chromium)
  # NodeSource's nodejs carries npm (and conflicts with Debian's npm package).
  command -v npm >/dev/null 2>&1 || PKGS+=(npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
for p in "${missing[@]}"; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "install-deps: package '$p' is not in this machine's apt sources." >&2
    case "$p" in *-22*) echo "install-deps: kt needs LLVM/MLIR 22: add LLVM's apt repository for version 22, or use --runtime for a runtime-only build." >&2 ;; esac
    exit 1
  fi
done
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
