#!/usr/bin/env bash
# Installs everything kt builds against, from the distribution's packages only.
# Safe to run twice: apt-get skips what is already there. Works on Debian 12 and
# Ubuntu 24.04 (both ship MLIR/LLVM 22 through their llvm-22 packages here).
# CUDA is not installed: when nvcc is present (e.g. /usr/local/cuda) the build uses it.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  cmake ninja-build g++ git python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 lld-22
  libyaml-cpp-dev libflatbuffers-dev flatbuffers-compiler
  libdnnl-dev libgtest-dev libzstd-dev nlohmann-json3-dev
)

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
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
