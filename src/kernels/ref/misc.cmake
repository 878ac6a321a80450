# SPDX-License-Identifier: Apache-2.0
# The misc op family: quantization, losses, detection, recurrent, signal, random, TfIdf.
target_sources(kiln_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/quantize.cc
  ${CMAKE_CURRENT_LIST_DIR}/detection.cc
  ${CMAKE_CURRENT_LIST_DIR}/rnn.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss.cc
  ${CMAKE_CURRENT_LIST_DIR}/signal.cc
  ${CMAKE_CURRENT_LIST_DIR}/random.cc
  ${CMAKE_CURRENT_LIST_DIR}/tfidf.cc)

kiln_test(ref_misc_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/quantize_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/detection_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/rnn_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/loss_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/signal_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/random_test.cc
  LIBS kiln_kernels)
