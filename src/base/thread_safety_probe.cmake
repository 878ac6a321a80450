# SPDX-License-Identifier: Apache-2.0
# Runs at build time in a Clang build with KILN_THREAD_SAFETY (target thread_safety_probe):
# thread_safety_probe.cc must compile cleanly as it is and fail with a thread-safety error for
# each KILN_PROBE_CASE, so a build whose analysis silently checks nothing (flags lost, macros
# expanding to nothing) fails instead of passing.
#   cmake -DCXX=clang++ -DFLAGS="-Wthread-safety ..." -DINCLUDE=src -DSRC=probe.cc
#         -DSTAMP=out.stamp -P thread_safety_probe.cmake
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
file(STRINGS "${SRC}" cases REGEX "KILN_PROBE_CASE == [0-9]+")
list(LENGTH cases num_cases)
if(num_cases EQUAL 0)
  message(FATAL_ERROR "thread-safety probe: no KILN_PROBE_CASE in ${SRC}")
endif()
set(cmd ${CXX} -std=c++20 -fsyntax-only ${flags} -I${INCLUDE})
execute_process(COMMAND ${cmd} ${SRC} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0 OR out MATCHES "warning:")
  message(FATAL_ERROR "thread-safety probe: the correct code of ${SRC} does not compile "
                      "cleanly:\n${out}")
endif()
foreach(case RANGE 1 ${num_cases})
  execute_process(COMMAND ${cmd} -DKILN_PROBE_CASE=${case} ${SRC}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "-Wthread-safety")
    message(FATAL_ERROR "thread-safety probe: case ${case} of ${SRC} was not rejected by the "
                        "thread-safety analysis (is -Wthread-safety on?):\n${out}")
  endif()
endforeach()
file(TOUCH "${STAMP}")
