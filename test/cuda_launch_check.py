#!/usr/bin/env python3
"""kernels/cuda/cuda_launch.cuh's contract, checked on the sources (CI cannot run
CUDA code): a kernel that cuda::launch() starts may begin before the kernel
ahead of it ends, so its body must call wait_for_inputs() before it reads or
writes what other kernels touch. A kernel launched with launch() but lacking
the call races with its predecessor; this fails and names it. Kernels that keep
plain <<<>>> launches are listed, so that a new one is a decision.

usage: cuda_launch_check.py KERNELS_CUDA_DIR
"""
import pathlib
import re
import sys

# Plain launches, on purpose (cuda_launch.cuh says why): host-memory ordering
# rests on whole-kernel boundaries; load-time dequantization is not in a step.
PLAIN = {"wait_flag_kernel", "write_flag_kernel", "copy_words_kernel",
         "k_f16", "k_bf16", "k_deq32"}


def strip(src):
    """src without comments and __launch_bounds__(...), which would read as names."""
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return re.sub(r"__launch_bounds__\s*\([^)]*\)", "", src)


def first_argument(src, start):
    """The text of the call's first argument, src[start] being just past '('."""
    depth, i = 0, start
    while i < len(src):
        c = src[i]
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            if depth == 0:
                break
            depth -= 1
        elif c == "," and depth == 0:
            break
        i += 1
    return src[start:i]


def kernel_bodies(src, qualifier="__global__"):
    """{name: body} of every function in src declared with qualifier."""
    out = {}
    for m in re.finditer(qualifier + r"[^;{]*?\b(\w+)\s*\(", src):
        open_brace = src.find("{", m.end())
        depth, i = 0, open_brace
        while i < len(src):
            if src[i] == "{":
                depth += 1
            elif src[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out[m.group(1)] = src[open_brace:i + 1]
    return out


def main():
    root = pathlib.Path(sys.argv[1])
    sources = {p: strip(p.read_text()) for p in sorted(root.glob("*.cu")) + sorted(root.glob("*.cuh"))}
    bodies = {}
    helpers = {}  # __device__ functions, whose waits count for the kernels calling them
    for src in sources.values():
        bodies.update(kernel_bodies(src))
        helpers.update(kernel_bodies(src, "__device__"))
    errors = []
    launched = set()
    for path, src in sources.items():
        if path.name == "cuda_launch.cuh":  # defines launch()
            continue
        for m in re.finditer(r"\blaunch\(", src):
            arg = first_argument(src, m.end())
            names = [n for n in re.findall(r"\w+", arg) if n in bodies]
            if not names:
                errors.append(f"{path.name}: launch({arg.strip()}, ...) names no __global__ kernel")
            launched.update(names)
        for m in re.finditer(r"(?:cuda::)?(\w+)\s*(?:<[^<>;]*>)?\s*<<<", src):
            if m.group(1) not in PLAIN:
                errors.append(f"{path.name}: {m.group(1)} has a plain <<<>>> launch; use cuda::launch "
                              "(and wait_for_inputs) or list it in PLAIN with the reason")
    def waits(body, seen):
        """Whether body calls wait_for_inputs(), itself or through the __device__ functions it calls."""
        if "wait_for_inputs()" in body:
            return True
        for callee in set(re.findall(r"\b(\w+)\s*(?:<[^<>;()]*>)?\s*\(", body)) & set(helpers) - seen:
            seen.add(callee)
            if callee != "wait_for_inputs" and waits(helpers[callee], seen):
                return True
        return False

    for name in sorted(launched):
        if not waits(bodies[name], set()):
            errors.append(f"{name}: launched with cuda::launch but never calls wait_for_inputs()")
    for e in errors:
        print("cuda launch contract:", e)
    if not errors:
        print(f"cuda launch contract: ok ({len(launched)} kernels launched with PDL, "
              f"{len(PLAIN & set(bodies))} plain)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
