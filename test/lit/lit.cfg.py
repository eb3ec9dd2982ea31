# lit configuration of kt's compiler tests. From the build tree,
# lit.site.cfg.py sets the paths; from the source tree pass
# --param kt_build=<build dir> (or set KT_BUILD_DIR).
import os
import sys

import lit.formats

config.name = "kt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(config.test_source_root))

if not hasattr(config, "kt_obj_root"):
    build = lit_config.params.get("kt_build") or os.environ.get("KT_BUILD_DIR")
    if not build:
        lit_config.fatal("run lit on <build>/test/lit, or pass --param kt_build=<build dir>")
    config.kt_obj_root = os.path.abspath(build)
    config.kt_tools_dir = os.path.join(config.kt_obj_root, "bin")
    config.llvm_tools_dir = "/usr/lib/llvm-22/bin"
    config.shared_models_dir = os.path.join(os.path.dirname(repo), "shared", "models")
    config.python_executable = sys.executable
    config.kt_cuda_kernels = False
config.test_exec_root = os.path.join(config.kt_obj_root, "test", "lit")

for tool in ("kt-compile", "kt-opt", "kt-gguf", "kt-exec", "kt-plan"):
    if not os.path.exists(os.path.join(config.kt_tools_dir, tool)):
        lit_config.fatal(f"{tool} is not built in {config.kt_tools_dir}")
config.environment["PATH"] = os.pathsep.join(
    [config.kt_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

# The full reference set beside the checkout (../shared/models); tests that
# need more than the copies in test/data are UNSUPPORTED without it.
if os.path.isfile(os.path.join(config.shared_models_dir, "tiny-dsv2lite-F32.gguf")):
    config.available_features.add("shared-models")

# A build with CUDA kernels (nvcc was found): plans placed on a GPU load past
# the kernel lookup and stop at the device check instead.
if getattr(config, "kt_cuda_kernels", False):
    config.available_features.add("cuda-kernels")

config.substitutions.append(("%shared_models", config.shared_models_dir))
config.substitutions.append(("%test_data", os.path.join(repo, "test", "data")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%python", config.python_executable))
