# SPDX-License-Identifier: Apache-2.0
# The training-domain optimizer kernels (Adagrad, Adam, Momentum; rows in table_training.inc)
# and their tests.
target_sources(kiln_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/training.cc)

kiln_test(ref_training_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/training_test.cc
  LIBS kiln_kernels)
