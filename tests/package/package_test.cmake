# The package as users get it, run by CTest (tests/package/CMakeLists.txt). Every step names itself
# when it fails.
#
#   MODE=install    `cmake --install` of this build into a fresh PREFIX; the install tree holds what
#                   it should and nothing that points into the source tree (the fixture of the next two).
#   MODE=installed  the consumer project (tests/package/consumer) against PREFIX: configures with
#                   nothing but CMAKE_PREFIX_PATH, builds, passes its ctest, and it and the installed
#                   tool find the installed catalog.
#   MODE=example    the example project (examples/libtorch-training) against PREFIX, as its README
#                   builds it: builds and passes its ctest.
#   MODE=embedded   the consumer with oomguard's source tree through add_subdirectory and through
#                   FetchContent: builds, passes its ctest, and oomguard's own tests stay out.
#
# -D inputs: MODE, SOURCE_DIR (oomguard's), BINARY_DIR (this build), SCRATCH (emptied first), PREFIX,
# GENERATOR, MAKE_PROGRAM, CXX_COMPILER, LAUNCHER (the compiler launcher, may be empty), TORCH_PYTHON,
# BUILD_TYPE.

set(BINARY_DIR_OF_MAIN "${BINARY_DIR}")
set(PYTHON "${TORCH_PYTHON}")
include("${CMAKE_CURRENT_LIST_DIR}/../object_reuse.cmake")

function(fail what)
  message(FATAL_ERROR "package test (${MODE}): ${what}")
endfunction()

# Runs a command; on failure stops with the step's description, the command and its exit code.
function(step description)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "WORKING_DIRECTORY;OUTPUT_VARIABLE" "COMMAND")
  if(NOT ARG_WORKING_DIRECTORY)
    set(ARG_WORKING_DIRECTORY "${SCRATCH}")
  endif()
  message(STATUS "package test (${MODE}): ${description}")
  string(TIMESTAMP started "%s")
  if(ARG_OUTPUT_VARIABLE)
    execute_process(COMMAND ${ARG_COMMAND} WORKING_DIRECTORY "${ARG_WORKING_DIRECTORY}" RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE out)
    set(${ARG_OUTPUT_VARIABLE} "${out}" PARENT_SCOPE)
  else()
    execute_process(COMMAND ${ARG_COMMAND} WORKING_DIRECTORY "${ARG_WORKING_DIRECTORY}" RESULT_VARIABLE rc)
  endif()
  if(NOT rc STREQUAL "0")
    string(REPLACE ";" " " shown "${ARG_COMMAND}")
    if(ARG_OUTPUT_VARIABLE)
      message("${out}")
    endif()
    fail("step '${description}' failed: `${shown}` exited with ${rc}")
  endif()
  string(TIMESTAMP finished "%s")
  math(EXPR seconds "${finished} - ${started}")
  message(STATUS "package test (${MODE}): ${description}: done, ${seconds} s")
endfunction()

# What a consumer's configure gets besides the generator: the same compiler and launcher, through
# the environment, so that its command line is what a user would type. The ccache settings of
# ci/build.sh, whoever runs this: paths relative to the checkout and no build folder in the hash, so
# that the FetchContent build hits what the add_subdirectory one compiled, and a fresh clone both.
set(consumer_env "${CMAKE_COMMAND}" -E env "CXX=${CXX_COMPILER}" "CCACHE_BASEDIR=${SOURCE_DIR}" CCACHE_NOHASHDIR=true)
if(LAUNCHER)
  list(APPEND consumer_env "CMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()

# The consumer's sources, with one catalog scenario and its baseline in scenarios/.
function(copy_consumer destination)
  file(COPY "${SOURCE_DIR}/tests/package/consumer/" DESTINATION "${destination}")
  file(COPY "${SOURCE_DIR}/scenarios/forgotten-no-grad.json" DESTINATION "${destination}/scenarios")
  file(COPY "${SOURCE_DIR}/scenarios/baselines/forgotten-no-grad.json" DESTINATION "${destination}/scenarios/baselines")
endfunction()

# Configures, builds and tests the consumer in `build`; its ctest must run exactly its scenario, once
# through its own program and once through oomguard::tool.
function(build_and_test_consumer build)
  step("configure the consumer (${ARGN})" COMMAND ${consumer_env} "${CMAKE_COMMAND}" -S "${SCRATCH}/consumer" -B "${build}"
       -G "${GENERATOR}" ${ARGN})
  # One compile per core: beside the other tests, LibTorch's headers at -O2 -g need memory.
  cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
  step("build the consumer" COMMAND "${CMAKE_COMMAND}" --build "${build}" --parallel ${cores})
  step("run the consumer's ctest" COMMAND "${CMAKE_COMMAND}" -E env --unset=OOMGUARD_CATALOG
       "${CMAKE_CTEST_COMMAND}" --test-dir "${build}" --output-on-failure --no-tests=error OUTPUT_VARIABLE out)
  if(NOT out MATCHES "oomguard[.]forgotten-no-grad[.]cpu[.]t4 [.]+ +Passed" OR
     NOT out MATCHES "tool[.]forgotten-no-grad[.]cpu[.]t4 [.]+ +Passed" OR NOT out MATCHES "out of 2\n")
    fail("the consumer's ctest did not run exactly oomguard.forgotten-no-grad.cpu.t4 and "
         "tool.forgotten-no-grad.cpu.t4:\n${out}")
  endif()
endfunction()

# `program list`, run outside the source tree with OOMGUARD_CATALOG unset, lists `expected`.
function(expect_lists program expected)
  string(RANDOM LENGTH 8 suffix)
  set(elsewhere "/tmp/oomguard-package-test-${suffix}")
  file(MAKE_DIRECTORY "${elsewhere}")
  step("${program} list (from ${elsewhere})" COMMAND "${CMAKE_COMMAND}" -E env --unset=OOMGUARD_CATALOG "${program}" list
       WORKING_DIRECTORY "${elsewhere}" OUTPUT_VARIABLE out)
  file(REMOVE_RECURSE "${elsewhere}")
  if(NOT out MATCHES "(^|\n)${expected} ")
    fail("`${program} list` does not list ${expected}, so it did not read the catalog it should have:\n${out}")
  endif()
endfunction()

file(REMOVE_RECURSE "${SCRATCH}")
file(MAKE_DIRECTORY "${SCRATCH}")
copy_consumer("${SCRATCH}/consumer")

set(prefix "${PREFIX}")
if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${prefix}")
  step("install the build into ${prefix}" COMMAND "${CMAKE_COMMAND}" --install "${BINARY_DIR}" --prefix "${prefix}")

  # The public headers, all of them and nothing else.
  file(GLOB source_headers RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/oomguard/*.h")
  file(GLOB_RECURSE installed_headers LIST_DIRECTORIES false RELATIVE "${prefix}/include" "${prefix}/include/*")
  list(SORT source_headers)
  list(SORT installed_headers)
  if(NOT installed_headers STREQUAL source_headers)
    fail("include/ holds '${installed_headers}'; expected the public headers '${source_headers}'")
  endif()
  foreach(file bin/oomguard lib/cmake/oomguard/oomguardConfig.cmake lib/cmake/oomguard/oomguardConfigVersion.cmake
          lib/cmake/oomguard/oomguardTargets.cmake lib/cmake/oomguard/oomguardScenarios.cmake
          share/oomguard/scenarios/FORMAT.md share/oomguard/scenarios/forgotten-no-grad.json
          share/oomguard/scenarios/baselines/forgotten-no-grad.json)
    if(NOT EXISTS "${prefix}/${file}")
      fail("the install has no ${file}")
    endif()
  endforeach()
  file(GLOB source_catalog RELATIVE "${SOURCE_DIR}/scenarios" "${SOURCE_DIR}/scenarios/*.json")
  file(GLOB installed_catalog RELATIVE "${prefix}/share/oomguard/scenarios" "${prefix}/share/oomguard/scenarios/*.json")
  if(NOT installed_catalog STREQUAL source_catalog)
    fail("share/oomguard/scenarios holds '${installed_catalog}'; expected the catalog '${source_catalog}'")
  endif()
  # Nothing the package's CMake files say points into the source tree or this build.
  file(GLOB package_files "${prefix}/lib/cmake/oomguard/*.cmake")
  foreach(file IN LISTS package_files)
    file(READ "${file}" text)
    foreach(tree "${SOURCE_DIR}" "${BINARY_DIR}")
      string(FIND "${text}" "${tree}" at)
      if(NOT at EQUAL -1)
        fail("${file} names ${tree}: an installed package must not point into the source or build tree")
      endif()
    endforeach()
  endforeach()

  # A scenario only the installed catalog has: listing it proves a program read share/oomguard.
  file(READ "${prefix}/share/oomguard/scenarios/forgotten-no-grad.json" text)
  string(JSON text SET "${text}" name [["installed-catalog-marker"]])
  file(WRITE "${prefix}/share/oomguard/scenarios/installed-catalog-marker.json" "${text}")
elseif(MODE STREQUAL "installed")
  build_and_test_consumer("${SCRATCH}/consumer-build" "-DCMAKE_PREFIX_PATH=${prefix}")
  expect_lists("${SCRATCH}/consumer-build/memory_checks" installed-catalog-marker)
  expect_lists("${prefix}/bin/oomguard" installed-catalog-marker)
elseif(MODE STREQUAL "example")
  # The example project (examples/libtorch-training) as its README builds it: its own workload,
  # scenario, baselines and GoogleTest matchers, with nothing but CMAKE_PREFIX_PATH.
  set(example "${SCRATCH}/example-build")
  step("configure the example against the install" COMMAND ${consumer_env} "${CMAKE_COMMAND}"
       -S "${SOURCE_DIR}/examples/libtorch-training" -B "${example}" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${prefix}")
  step("build the example" COMMAND "${CMAKE_COMMAND}" --build "${example}")
  step("run the example's ctest" COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${example}" --output-on-failure
       --no-tests=error OUTPUT_VARIABLE out)
  foreach(test example[.]classifier-eval-no-grad[.]cpu[.]t4 example[.]classifier-eval-no-grad[.]meta[.]t4
          example[.]ClassifierMemory[.]EvaluationWithoutNoGradKeepsEveryBatchsGraph)
    if(NOT out MATCHES "${test} [.]+ +Passed")
      fail("the example's ctest did not pass ${test}:\n${out}")
    endif()
  endforeach()
elseif(MODE STREQUAL "embedded")
  foreach(way add_subdirectory FetchContent)
    set(build "${SCRATCH}/${way}")
    # oomguard's compiles that would be the main build's take its objects (tests/object_reuse.py says
    # when that holds); the consumer's own, the archives, the links and the ctest are real.
    object_reuse_arguments(reuse "${build}/_deps/oomguard-build" "${build}/object_reuse.log")
    # The build type of this build: the baselines hold what an optimised (NDEBUG) harness measures, and an
    # unoptimised one (no build type) counts more allocations (README, "Install and use as a CMake package").
    build_and_test_consumer("${build}" ${reuse} -DOOMGUARD_CONSUME=${way} "-DOOMGUARD_SOURCE=${SOURCE_DIR}"
                            "-DOOMGUARD_TORCH_PYTHON=${TORCH_PYTHON}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
    object_reuse_report("package test (${MODE}): ${way}" "${build}/object_reuse.log")
    if(EXISTS "${build}/_deps/oomguard-build/tests" OR EXISTS "${build}/_deps/oomguard-build/bench")
      fail("${way}: oomguard built its tests or benchmarks inside another project (they default to off there)")
    endif()
    expect_lists("${build}/memory_checks" forgotten-no-grad)
  endforeach()
else()
  fail("MODE is '${MODE}'; expected install, installed, example or embedded")
endif()
message(STATUS "package test (${MODE}): all steps passed")
