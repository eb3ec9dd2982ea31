#!/usr/bin/env bash
# DESIGN.md: runtime/ and kernels/ never include MLIR or LLVM; kernels/ includes
# nothing from the layers above it. Prints the offending lines and fails.
set -u
root=$1
bad=0
if grep -rnE '#include *[<"](mlir|llvm)/' "$root/runtime" "$root/kernels"; then bad=1; fi
if grep -rnE '#include *"(runtime|passes|dialects|tools)/' "$root/kernels"; then bad=1; fi
if grep -rnE '#include *"(passes|dialects|tools)/' "$root/runtime"; then bad=1; fi
[ $bad -eq 0 ] && echo "layering: ok"
exit $bad
