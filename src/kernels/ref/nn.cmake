# SPDX-License-Identifier: Apache-2.0
# The nn op family's reference kernels (reductions, normalizations, pooling extras,
# ConvTranspose, Einsum, Det, Dropout) and their unit tests.
target_sources(kiln_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_norm.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_misc.cc
  ${CMAKE_CURRENT_LIST_DIR}/conv_transpose.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum.cc)

kiln_test(ref_nn_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/reduce_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/nn_norm_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/nn_misc_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/conv_transpose_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/einsum_test.cc
  LIBS kiln_kernels)
