# SPDX-License-Identifier: Apache-2.0
# Reference kernels of kiln's own operators (domain ai.kiln, op/kiln_ops.h) and their tests.
target_sources(kiln_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/kiln_ops.cc
                                    ${CMAKE_CURRENT_LIST_DIR}/image_ops.cc
                                    ${CMAKE_CURRENT_LIST_DIR}/text_ops.cc)

kiln_test(ref_kiln_ops_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kiln_ops_test.cc
  LIBS kiln_kernels)
