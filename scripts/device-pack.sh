#!/usr/bin/env bash
# Builds, here, what the device machine (H100 + Xeon with AMX, no MLIR) runs: the
# runtime world with CUDA for sm_90a, cudart linked statically, and packs the test
# and benchmark binaries into out/device/bin. Then, with the device tool:
#   run  command="bash scripts/device-run.sh"  carry=["out/device"]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset device >/dev/null
cmake --build --preset device -j "${KT_JOBS:-$(nproc)}"
rm -rf out/device && mkdir -p out/device/bin
# Every test binary (GPU and CPU units: the AMX paths are tested there) and tool.
find build/device/bin -maxdepth 1 -type f -executable -exec cp {} out/device/bin/ \;
# Shared libraries the binaries need beyond glibc/libstdc++ travel with them.
for b in out/device/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}' | grep -vE 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl|librt' || true
done | sort -u | while read -r lib; do cp -L "$lib" out/device/bin/; done
du -sh out/device | awk '{print "packed " $1 " in out/device"}'
