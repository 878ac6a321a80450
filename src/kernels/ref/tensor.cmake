# SPDX-License-Identifier: Apache-2.0
# The tensor op family's reference kernels (rows in table_tensor.inc) and their tests.
target_sources(kiln_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/shape_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/gather_scatter.cc
  ${CMAKE_CURRENT_LIST_DIR}/pad.cc
  ${CMAKE_CURRENT_LIST_DIR}/layout_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/sort_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/resize.cc
  ${CMAKE_CURRENT_LIST_DIR}/string_ops.cc)

kiln_test(ref_tensor_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/shape_ops_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gather_scatter_test.cc
  LIBS kiln_kernels)
