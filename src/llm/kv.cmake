# SPDX-License-Identifier: Apache-2.0
# The paged KV cache (block manager and storage), paged attention and the decoder's
# small row-wise ops (RMSNorm, RoPE, SwiGLU). Included by src/llm/CMakeLists.txt.
add_library(kiln_llm_kv STATIC)
target_sources(kiln_llm_kv PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/kv_blocks.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/kv_cache.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/attention.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/attention_avx2.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/attention_avx512.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/llm_ops.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/llm_ops_avx2.cc)
set_source_files_properties(
  ${CMAKE_CURRENT_SOURCE_DIR}/attention_avx2.cc ${CMAKE_CURRENT_SOURCE_DIR}/llm_ops_avx2.cc
  TARGET_DIRECTORY kiln_llm_kv PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/attention_avx512.cc
  TARGET_DIRECTORY kiln_llm_kv
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mfma;-mf16c")
target_link_libraries(kiln_llm_kv PUBLIC kiln_base kiln_tensor kiln_kernels)

# The block manager: pure bookkeeping, no ISA-dependent code.
kiln_test(llm_kv_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kv_blocks_test.cc
  LIBS kiln_llm_kv)
# The storage's conversions, paged attention and the ops: fast vs reference at every ISA level.
kiln_test(llm_kernels_test ISA_LEVELS
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/kv_cache_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/attention_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/llm_ops_test.cc
  LIBS kiln_llm_kv)
