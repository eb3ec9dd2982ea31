# MLIR/LLVM 22 from Debian's packages. Only dialects/, passes/ and the compiler
# tools include this; the runtime world never sees these flags or libraries.
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
message(STATUS "kt: MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)
# LLVM_DEFINITIONS is one string; add_definitions would garble it (TOOLCHAIN.md trap 1).
separate_arguments(KT_LLVM_DEFS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
set(KT_MLIR_INCLUDE_DIRS ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
find_program(KT_LIT NAMES lit lit-22 HINTS /usr/lib/llvm-22/bin REQUIRED)
find_program(KT_FILECHECK NAMES FileCheck FileCheck-22 HINTS /usr/lib/llvm-22/bin REQUIRED)

# kt_mlir_target(<target>): compile against MLIR headers and link the one shared
# libMLIR (not the static component libraries: smaller, faster links in CI).
function(kt_mlir_target target)
  target_include_directories(${target} SYSTEM PUBLIC ${KT_MLIR_INCLUDE_DIRS})
  target_compile_definitions(${target} PUBLIC ${KT_LLVM_DEFS})
  target_link_libraries(${target} PUBLIC MLIR LLVM)
endfunction()
