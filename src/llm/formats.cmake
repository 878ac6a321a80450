# SPDX-License-Identifier: Apache-2.0
# Part 1, formats: the GGUF reader (metadata, tensor infos, over a memory mapping), the
# safetensors reader (single files and sharded checkpoint directories) and ggml's type names.
add_library(kiln_llm_formats STATIC)
target_sources(kiln_llm_formats PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/ggml_type.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/safetensors.cc)
target_link_libraries(kiln_llm_formats PUBLIC kiln_base PRIVATE simdjson::simdjson)

kiln_test(llm_formats_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gguf_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_test.cc
  LIBS kiln_llm_formats)
