# SPDX-License-Identifier: Apache-2.0
# The sequence and optional op family's reference kernels (rows in table_sequence.inc) and their
# tests. (SequenceMap and If/Loop over sequences live in kiln_runtime and are tested there.)
target_sources(kiln_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/sequence.cc)

kiln_test(ref_sequence_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/sequence_test.cc
  LIBS kiln_kernels)
