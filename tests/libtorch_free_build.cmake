# Configures oomguard with OOMGUARD_WITH_TORCH=OFF in BINARY_DIR, builds the LibTorch-free tests and
# runs them. Run by CTest (tests/CMakeLists.txt); fails when any step fails.
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${BINARY_DIR};-G;${GENERATOR};-DOOMGUARD_WITH_TORCH=OFF"
    "${CMAKE_COMMAND};--build;${BINARY_DIR};--target;oomguard_plain_tests"
    "${BINARY_DIR}/tests/oomguard_plain_tests;--gtest_brief=1")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " shown "${step}")
    message(FATAL_ERROR "LibTorch-free build: `${shown}` failed (${rc})")
  endif()
endforeach()
# The proof that nothing found LibTorch: the cache names no Torch package.
file(STRINGS "${BINARY_DIR}/CMakeCache.txt" torch_lines REGEX "^Torch_DIR:")
if(torch_lines)
  message(FATAL_ERROR "LibTorch-free build: CMake found LibTorch (${torch_lines})")
endif()
