# oomguard_add_gtest_suites(TARGET [PER_TEST REGEX] [PROPERTIES ...]): one CTest test per GoogleTest
# suite of TARGET, named SUITE.* and run as `TARGET --gtest_filter=SUITE.*` (one per test for the
# suites whose name matches REGEX), found after each build as gtest_discover_tests finds tests
# (gtest_suites_write.cmake writes the list). One test of a suite: TARGET --gtest_filter=SUITE.NAME.
#
# Why suites and not tests: a test binary that links LibTorch costs about half a second of CPU to
# start (the dynamic loader's relocations and LibTorch's operator registrations), a process per test
# cost CI minutes of CPU, and a CI on a busy 2-core machine has no minutes to spare. A suite's tests
# share a process, so each must leave the process as it found it (its allocators' account, grad
# mode, threads); a test that cannot runs in a suite of its own.
function(oomguard_add_gtest_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PER_TEST" "PROPERTIES")
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  # The properties travel to the script as one ;-free string (| between items).
  string(REPLACE ";" "|" properties "${arg_PROPERTIES}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -DEXE=$<TARGET_FILE:${target}> -DOUT=${list_file} "-DPROPERTIES=${properties}" "-DPER_TEST=${arg_PER_TEST}"
            -P "${PROJECT_SOURCE_DIR}/tests/gtest_suites_write.cmake"
    BYPRODUCTS "${list_file}"
    VERBATIM)
  file(WRITE "${include_file}"
       "if(EXISTS \"${list_file}\")\n  include(\"${list_file}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
