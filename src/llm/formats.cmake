# SPDX-License-Identifier: Apache-2.0
# The GGUF reader (metadata, tensor infos, over a memory mapping), the
# safetensors reader (single files and sharded checkpoint directories) and ggml's type names.
# ggml's type names and geometry (ggml_type.h), shared by the readers and the kernels.
add_library(kiln_llm_types STATIC ${CMAKE_CURRENT_SOURCE_DIR}/ggml_type.cc)
add_library(kiln_llm_formats STATIC)
target_sources(kiln_llm_formats PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/safetensors.cc)
target_link_libraries(kiln_llm_formats PUBLIC kiln_llm_types kiln_base PRIVATE simdjson::simdjson)

kiln_test(llm_formats_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gguf_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_test.cc
  LIBS kiln_llm_formats)
