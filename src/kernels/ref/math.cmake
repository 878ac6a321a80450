# SPDX-License-Identifier: Apache-2.0
# The math op family's reference kernels (unary math and activations, binary/variadic math,
# comparisons and logic, Cast/CastLike) and their unit tests.
target_sources(kiln_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/math_unary.cc
  ${CMAKE_CURRENT_LIST_DIR}/math_binary.cc
  ${CMAKE_CURRENT_LIST_DIR}/cast.cc)

kiln_test(ref_math_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/math_unary_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/math_binary_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/cast_test.cc
  LIBS kiln_kernels)
