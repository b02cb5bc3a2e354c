# Tests do not read the caller's environment: run from a shell that sets
# OMP_NUM_THREADS=1, KMP_BLOCKTIME=7 or ONEDNN_MAX_CPU_ISA=avx2, a test whose
# program inherits it asserts on settings or repro lines the caller chose
# (py_sweep's "env -u ONEDNN_MAX_CPU_ISA ..." repro lines, rightly added by
# the tool, were red that way). So every test runs with the knob table's
# variables (python/threadburn/knobs.tsv: the OpenMP, LLVM, libgomp, oneDNN
# and CUDA knobs and LD_PRELOAD) unset, but for those the test's own
# ENVIRONMENT sets: ctest's ENVIRONMENT_MODIFICATION, one rule for every test.
#
# Each tests/<kind>/CMakeLists.txt calls threadburn_clean_test_env() last:
# CMake 3.25 sets a test's properties only in the directory that added it.
# The gtest cases (gtest_discover_tests) exist only once their program is
# built: a script ctest reads after their lists (TEST_INCLUDE_FILES, in
# order) gives them the same rule (they set no ENVIRONMENT of their own).
file(STRINGS "${PROJECT_SOURCE_DIR}/python/threadburn/knobs.tsv" _tb_knob_lines REGEX "^[A-Z][A-Z0-9_]*\t")
set(THREADBURN_KNOB_VARIABLES)
foreach(_line IN LISTS _tb_knob_lines)
  # (a doc cell's ';' splits a line into list items: only a name followed by a tab is one)
  if(_line MATCHES "^([A-Z][A-Z0-9_]*)\t")
    list(APPEND THREADBURN_KNOB_VARIABLES ${CMAKE_MATCH_1})
  endif()
endforeach()
list(REMOVE_DUPLICATES THREADBURN_KNOB_VARIABLES)
if(NOT THREADBURN_KNOB_VARIABLES MATCHES "OMP_NUM_THREADS")
  message(FATAL_ERROR "tests/clean_env.cmake: no knob read from python/threadburn/knobs.tsv")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/python/threadburn/knobs.tsv")

function(threadburn_clean_test_env)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_test IN LISTS _tests)
    get_test_property(${_test} ENVIRONMENT _env)
    set(_unset)
    foreach(_knob IN LISTS THREADBURN_KNOB_VARIABLES)
      if(NOT "${_env}" MATCHES "(^|;)${_knob}=")
        list(APPEND _unset "${_knob}=unset:")
      endif()
    endforeach()
    set_property(TEST ${_test} APPEND PROPERTY ENVIRONMENT_MODIFICATION ${_unset})
  endforeach()
  # gtest_discover_tests' lists: <target>[1]_include.cmake sets <target>_TESTS.
  get_property(_includes DIRECTORY PROPERTY TEST_INCLUDE_FILES)
  set(_lists)
  foreach(_include IN LISTS _includes)
    if(_include MATCHES "/([^/]+)\\[[0-9]+\\]_include\\.cmake$")
      list(APPEND _lists ${CMAKE_MATCH_1}_TESTS)
    endif()
  endforeach()
  if(_lists)
    set(_unset)
    foreach(_knob IN LISTS THREADBURN_KNOB_VARIABLES)
      list(APPEND _unset "${_knob}=unset:")
    endforeach()
    set(_script "${CMAKE_CURRENT_BINARY_DIR}/threadburn_clean_env.cmake")
    file(WRITE "${_script}" "# tests/clean_env.cmake: the gtest cases without the caller's knobs\n"
         "foreach(_list ${_lists})\n"
         "  if(\${_list})\n"
         "    set_tests_properties(\${\${_list}} PROPERTIES ENVIRONMENT_MODIFICATION \"${_unset}\")\n"
         "  endif()\n"
         "endforeach()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_script}")
  endif()
endfunction()
