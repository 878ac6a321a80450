# SPDX-License-Identifier: Apache-2.0
# The decoder model (architectures, weight binding), the engine (one forward step over a
# flattened batch on the paged KV cache) and sampling: kiln_llm, the whole of src/llm.
add_library(kiln_llm STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/model.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/engine.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/prompt.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/sampling.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/stop_strings.cc)
target_link_libraries(kiln_llm PUBLIC kiln_llm_formats kiln_llm_quants kiln_llm_tokenizer
  kiln_llm_chat_template kiln_llm_kv kiln_kernels kiln_base simdjson::simdjson)
# bench/llm/run.py's read-bandwidth probe (the limit token generation is measured against).
add_executable(kiln_read_bandwidth ${CMAKE_SOURCE_DIR}/bench/llm/read_bandwidth.cc)
target_link_libraries(kiln_read_bandwidth PRIVATE OpenMP::OpenMP_CXX)

# Sampling (penalties, bias, min_tokens, top-k/p, min-p, logprobs, seeds) and the stop-string
# filter: hand-computed expectations on small vocabularies, no model.
kiln_test(llm_sampling_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/sampling_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/stop_strings_test.cc
  LIBS kiln_llm)

if(KILN_BUILD_TESTS)
  # Runs on the test models of the fixture llm_test_models (tests/llm/CMakeLists.txt).
  add_executable(llm_engine_test ${CMAKE_CURRENT_SOURCE_DIR}/engine_test.cc)
  target_link_libraries(llm_engine_test PRIVATE kiln_llm GTest::gtest GTest::gtest_main)
  gtest_discover_tests(llm_engine_test DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 300 FIXTURES_REQUIRED llm_models LABELS "llm"
               ENVIRONMENT "KILN_LLM_TEST_MODELS=${CMAKE_BINARY_DIR}/llm-test-models")
  # And whole at every lower ISA level: the step's numerics with the AVX2 and scalar kernels.
  kiln_test_at_isa_levels(NAME llm_engine_test COMMAND $<TARGET_FILE:llm_engine_test>)
  foreach(level avx512 avx2 scalar)
    set_tests_properties(llm_engine_test@${level} PROPERTIES FIXTURES_REQUIRED llm_models
      ENVIRONMENT "KILN_LLM_TEST_MODELS=${CMAKE_BINARY_DIR}/llm-test-models")
  endforeach()
endif()
