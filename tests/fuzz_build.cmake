# Configures the fuzzing tree (clang, OOMGUARD_WITH_TORCH=OFF, OOMGUARD_FUZZERS=ON) in BINARY_DIR and
# builds the fuzzers and their seeds. Run by CTest (Fuzz.Build, tests/CMakeLists.txt), the fixture of
# the Fuzz.* runs; fails when any step fails, clang or libFuzzer missing included (ci/bootstrap.sh).
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${BINARY_DIR};-G;${GENERATOR};-DCMAKE_CXX_COMPILER=${CXX_COMPILER};-DOOMGUARD_WITH_TORCH=OFF;-DOOMGUARD_FUZZERS=ON;-DOOMGUARD_BUILD_TESTS=OFF;-DOOMGUARD_INSTALL=OFF"
    "${CMAKE_COMMAND};--build;${BINARY_DIR};--target;oomguard_fuzzers")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " shown "${step}")
    message(FATAL_ERROR "Fuzzing tree: `${shown}` failed (${rc})")
  endif()
endforeach()
