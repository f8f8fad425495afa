# Configures oomguard with OOMGUARD_WITH_TORCH=OFF in BINARY_DIR, builds the LibTorch-free tests and
# runs them. Run by CTest (tests/CMakeLists.txt); fails when any step fails.
# -D inputs: SOURCE_DIR, BINARY_DIR, GENERATOR, MAKE_PROGRAM, MAIN_BUILD (the build that runs this
# test), PYTHON, LAUNCHER (the compiler launcher, may be empty).
#
# A compile whose command is the main build's takes its object (tests/object_reuse.py): the same
# command line names no LibTorch folder in either build, so the proof stands; the configure, the
# links and the test run are real.
set(BINARY_DIR_OF_MAIN "${MAIN_BUILD}")
include("${CMAKE_CURRENT_LIST_DIR}/object_reuse.cmake")
object_reuse_arguments(reuse "${BINARY_DIR}" "${BINARY_DIR}/object_reuse.log")
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${BINARY_DIR};-G;${GENERATOR};${reuse};-DOOMGUARD_WITH_TORCH=OFF"
    "${CMAKE_COMMAND};--build;${BINARY_DIR};--target;oomguard_plain_tests"
    "${BINARY_DIR}/tests/oomguard_plain_tests;--gtest_brief=1")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " shown "${step}")
    message(FATAL_ERROR "LibTorch-free build: `${shown}` failed (${rc})")
  endif()
endforeach()
object_reuse_report("LibTorch-free build" "${BINARY_DIR}/object_reuse.log")
# The proof that nothing found LibTorch: the cache names no Torch package.
file(STRINGS "${BINARY_DIR}/CMakeCache.txt" torch_lines REGEX "^Torch_DIR:")
if(torch_lines)
  message(FATAL_ERROR "LibTorch-free build: CMake found LibTorch (${torch_lines})")
endif()
