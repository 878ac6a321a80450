# SPDX-License-Identifier: Apache-2.0
# Part "quants" of src/llm (docs/llm.md): ggml's block-quantized types (ggml_quants.h) and the
# decoder's matrix kernels (llm_matmul.h) with their AVX2 / AVX-512 / AVX512_VNNI / AMX builds behind
# runtime dispatch; the rest is baseline x86-64.
add_library(kiln_llm_quants STATIC)
target_sources(kiln_llm_quants PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/ggml_quants.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/llm_matmul.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_avx2.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_avx512.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_avx512vnni.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_amx.cc)
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_avx2.cc
  TARGET_DIRECTORY kiln_llm_quants PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_avx512.cc
  TARGET_DIRECTORY kiln_llm_quants
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mfma;-mf16c")
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_avx512vnni.cc
  TARGET_DIRECTORY kiln_llm_quants
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mfma;-mf16c;-mavx512vnni")
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/quant_kernels_amx.cc
  TARGET_DIRECTORY kiln_llm_quants
  PROPERTIES COMPILE_OPTIONS
    "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mfma;-mf16c;-mavx512vnni;-mamx-tile;-mamx-int8")
target_link_libraries(kiln_llm_quants PUBLIC kiln_llm_types kiln_base kiln_tensor kiln_kernels)

kiln_test(llm_quants_test ISA_LEVELS
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/ggml_quants_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/llm_matmul_test.cc
  LIBS kiln_llm_quants)

# The matrix-kernel microbenchmark (not a test): build/src/llm/llm_matmul_bench.
add_executable(llm_matmul_bench ${CMAKE_SOURCE_DIR}/bench/llm/matmul_bench.cc)
target_link_libraries(llm_matmul_bench PRIVATE kiln_llm_quants)
