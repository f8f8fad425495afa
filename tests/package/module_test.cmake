# oomguard_add_scenarios and oomguard_write_resource_spec (cmake/), run by CTest
# (tests/package/CMakeLists.txt), without a compiler or LibTorch:
#   CHECK=registers      one test per scenario x backend x card, named, labelled, timed and, on
#                        cuda, asking for the card's MiB; under a resource spec a cuda test runs
#                        with CUDA_VISIBLE_DEVICES set to its GPU; UNSUPPORTED shows as skipped
#   CHECK=errors         each bad argument stops the configure with a message naming what was expected
#   CHECK=resource_spec  the spec from nvidia-smi's listing, and the empty one without nvidia-smi
# -D inputs: CHECK, SOURCE_DIR, SCRATCH (emptied first).
function(fail what)
  message(FATAL_ERROR "module test (${CHECK}): ${what}")
endfunction()

file(REMOVE_RECURSE "${SCRATCH}")
file(MAKE_DIRECTORY "${SCRATCH}/scenarios/baselines" "${SCRATCH}/empty")
file(WRITE "${SCRATCH}/scenarios/a.json" [[{"name": "alpha", "backends": ["cpu", "cuda"]}]])
file(WRITE "${SCRATCH}/scenarios/b.json" [[{"name": "beta"}]])
file(WRITE "${SCRATCH}/scenarios/broken.json" [[{"name": "broken",]])
file(WRITE "${SCRATCH}/scenarios/unsupported.json" [[{"name": "unsupported", "backends": ["cpu"]}]])
file(WRITE "${SCRATCH}/scenarios/baselines/alpha.json" [[{"name": "alpha-baseline"}]])
file(WRITE "${SCRATCH}/scenarios/notes.txt" "not a scenario\n")
file(WRITE "${SCRATCH}/twins/one.json" [[{"name": "twin"}]])
file(WRITE "${SCRATCH}/twins/two.json" [[{"name": "twin"}]])
file(WRITE "${SCRATCH}/runner.sh"
     "#!/bin/sh\necho \"runner: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES $*\"\n"
     "case \"$*\" in *unsupported.json*) echo 'UNSUPPORTED unsupported  [cpu]';; esac\n")
file(CHMOD "${SCRATCH}/runner.sh" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

# Configures the module project with `call`; *out gets the output, *rc the exit code.
function(configure call build out rc)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/package/module" -B "${build}"
                          "-DOOMGUARD_MODULE_DIR=${SOURCE_DIR}/cmake" "-DRUNNER=${SCRATCH}/runner.sh" "-DCALL=${call}"
                  RESULT_VARIABLE code OUTPUT_VARIABLE text ERROR_VARIABLE text)
  set(${out} "${text}" PARENT_SCOPE)
  set(${rc} "${code}" PARENT_SCOPE)
endfunction()

# The value of property `name` of the test `test` in ctest's json-v1 listing, or NOTFOUND.
function(test_property json test name out)
  string(JSON count LENGTH "${json}" tests)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON test_name GET "${json}" tests ${i} name)
    if(test_name STREQUAL test)
      if(name STREQUAL "command")
        string(JSON value GET "${json}" tests ${i} command)
        set(${out} "${value}" PARENT_SCOPE)
        return()
      endif()
      string(JSON n LENGTH "${json}" tests ${i} properties)
      math(EXPR last_property "${n} - 1")
      foreach(p RANGE ${last_property})
        string(JSON property GET "${json}" tests ${i} properties ${p} name)
        if(property STREQUAL name)
          string(JSON value GET "${json}" tests ${i} properties ${p} value)
          set(${out} "${value}" PARENT_SCOPE)
          return()
        endif()
      endforeach()
    endif()
  endforeach()
  set(${out} NOTFOUND PARENT_SCOPE)
endfunction()

# `actual` against the concatenation of the remaining arguments, blanks and newlines aside. (ARGV<n>,
# not ARGN: a list keeps the ; between a [ and its ] inside one element.)
function(expect_equal what actual)
  set(expected "")
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE 2 ${last})
    string(APPEND expected "${ARGV${i}}")
  endforeach()
  string(REGEX REPLACE "[ \n]" "" actual "${actual}")
  string(REGEX REPLACE "[ \n]" "" expected "${expected}")
  if(NOT actual STREQUAL expected)
    fail("${what}:\n  got      ${actual}\n  expected ${expected}")
  endif()
endfunction()

if(CHECK STREQUAL "registers")
  set(build "${SCRATCH}/build")
  set(call "oomguard_add_scenarios(TARGET runner PATHS ${SCRATCH}/scenarios BACKEND cpu cuda CARD t4 H100 TIMEOUT 30 "
           "LABELS mine EXTRA_ARGS --strict JUNIT_DIR junit)")
  string(JOIN "" call ${call})
  configure("${call}" "${build}" out rc)
  if(NOT rc STREQUAL "0")
    fail("configure failed:\n${out}")
  endif()
  execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${build}" --show-only=json-v1 OUTPUT_VARIABLE json)
  set(names)
  string(JSON count LENGTH "${json}" tests)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" tests ${i} name)
    list(APPEND names "${name}")
  endforeach()
  # alpha lists cpu and cuda, beta and unsupported have the default (cpu), broken does not parse (every backend);
  # baselines/ and notes.txt are not scenarios.
  set(expected oomguard.alpha.cpu.t4 oomguard.alpha.cpu.H100 oomguard.alpha.cuda.t4 oomguard.alpha.cuda.H100
      oomguard.beta.cpu.t4 oomguard.beta.cpu.H100 oomguard.broken.cpu.t4 oomguard.broken.cpu.H100
      oomguard.broken.cuda.t4 oomguard.broken.cuda.H100 oomguard.unsupported.cpu.t4 oomguard.unsupported.cpu.H100)
  if(NOT names STREQUAL expected)
    fail("the tests:\n  got      ${names}\n  expected ${expected}")
  endif()
  test_property("${json}" oomguard.alpha.cpu.t4 command value)
  expect_equal("the command of a cpu test" "${value}"
               "[\"${SCRATCH}/runner.sh\",\"run\",\"${SCRATCH}/scenarios/a.json\",\"--backend\",\"cpu\",\"--card\",\"t4\","
               "\"--report\",\"junit=${build}/junit/oomguard.alpha.cpu.t4.xml\",\"--strict\"]")
  test_property("${json}" oomguard.alpha.cpu.t4 LABELS value)
  expect_equal("the labels" "${value}" [=[["cpu","mine","oomguard","t4"]]=])
  test_property("${json}" oomguard.alpha.cpu.t4 TIMEOUT value)
  expect_equal("the timeout" "${value}" "30.0")
  test_property("${json}" oomguard.alpha.cpu.t4 RESOURCE_GROUPS value)
  expect_equal("a cpu test's resource groups" "${value}" "NOTFOUND")
  test_property("${json}" oomguard.alpha.cuda.H100 RESOURCE_GROUPS value)
  expect_equal("a cuda H100 test's resource groups (cmake/oomguardCards.cmake)" "${value}"
               [=[[{"requirements":[{".type":"gpus","slots":81106}]}]]=])
  test_property("${json}" oomguard.alpha.cuda.t4 command value)
  expect_equal("the command of a cuda test" "${value}"
               "[\"${CMAKE_COMMAND}\",\"-P\",\"${SOURCE_DIR}/cmake/oomguardRunOnGpu.cmake\",\"--\",\"${SCRATCH}/runner.sh\","
               "\"run\",\"${SCRATCH}/scenarios/a.json\",\"--backend\",\"cuda\",\"--card\",\"t4\","
               "\"--report\",\"junit=${build}/junit/oomguard.alpha.cuda.t4.xml\",\"--strict\"]")

  # A scenario added to the folder is a test after the next build, which reconfigures.
  file(WRITE "${SCRATCH}/scenarios/c.json" [[{"name": "gamma"}]])
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" RESULT_VARIABLE rc OUTPUT_VARIABLE built
                  ERROR_VARIABLE built)
  execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${build}" -N OUTPUT_VARIABLE out)
  if(NOT rc STREQUAL "0" OR NOT out MATCHES "oomguard[.]gamma[.]cpu[.]t4\n")
    fail("a scenario file added to the folder is not a test after a build (exit ${rc}):\n${built}\n${out}")
  endif()

  # Two GPUs of which only the second holds a T4: CTest puts the t4 tests there, and so does CUDA.
  file(WRITE "${SCRATCH}/spec.json" [=[{"version": {"major": 1, "minor": 0},
    "local": [{"gpus": [{"id": "0", "slots": 1000}, {"id": "1", "slots": 20000}]}]}]=])
  execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${build}" -R "cuda[.]t4$" -V
                          --resource-spec-file "${SCRATCH}/spec.json" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc STREQUAL "0" OR NOT out MATCHES "runner: CUDA_VISIBLE_DEVICES=1 run [^\n]*/a.json --backend cuda")
    fail("a cuda t4 test did not run on GPU 1 under the resource spec (exit ${rc}):\n${out}")
  endif()
  execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${build}" -R "^oomguard[.]unsupported[.]cpu[.]t4$"
                  OUTPUT_VARIABLE out)
  if(NOT out MATCHES "Skipped")
    fail("a scenario reported UNSUPPORTED is not shown as skipped:\n${out}")
  endif()
elseif(CHECK STREQUAL "errors")
  set(s "${SCRATCH}/scenarios")
  foreach(case
      "oomguard_add_scenarios(PATHS ${s})|TARGET is required: the executable that runs the scenarios"
      "oomguard_add_scenarios(TARGET nope PATHS ${s})|TARGET 'nope' is not a target; expected an executable"
      "oomguard_add_scenarios(TARGET not_an_executable PATHS ${s})|TARGET 'not_an_executable' is not an executable (its type is INTERFACE_LIBRARY)"
      "oomguard_add_scenarios(TARGET runner)|PATHS is required: scenario .json files or folders of them"
      "oomguard_add_scenarios(TARGET runner PATHS ${s}/missing.json)|PATHS '${s}/missing.json' does not exist"
      "oomguard_add_scenarios(TARGET runner PATHS ${s}/notes.txt)|PATHS '${s}/notes.txt' is not a .json scenario file"
      "oomguard_add_scenarios(TARGET runner PATHS ${SCRATCH}/empty)|PATHS folder '${SCRATCH}/empty' holds no *.json"
      "oomguard_add_scenarios(TARGET runner PATHS ${s} BACKEND gpu)|BACKEND 'gpu' is not a backend; expected cpu, meta or cuda"
      "oomguard_add_scenarios(TARGET runner PATHS ${s} BACKEND cuda CARD x100)|CARD 'x100' is not a card preset; BACKEND cuda needs one of t4, l4,"
      "oomguard_add_scenarios(TARGET runner PATHS ${s} TIMEOUT soon)|TIMEOUT 'soon' is not a number of seconds above 0"
      "oomguard_add_scenarios(runner TARGET runner PATHS ${s})|unexpected arguments 'runner'; expected TARGET <executable>"
      "oomguard_add_scenarios(TARGET runner PATHS ${s} CARDS t4)|PATHS 'CARDS' does not exist; a misspelt keyword? expected TARGET <executable>"
      "oomguard_add_scenarios(TARGET runner PATHS ${s} TIMEOUT)|TIMEOUT needs a value"
      "oomguard_add_scenarios(TARGET runner PATHS ${SCRATCH}/twins)|scenario name 'twin' is in both ${SCRATCH}/twins/one.json and ${SCRATCH}/twins/two.json"
      "oomguard_write_resource_spec()|oomguard_write_resource_spec: OUTPUT <file> is required")
    string(FIND "${case}" "|" bar)
    string(SUBSTRING "${case}" 0 ${bar} call)
    math(EXPR from "${bar} + 1")
    string(SUBSTRING "${case}" ${from} -1 expected)
    configure("${call}" "${SCRATCH}/build-error" out rc)
    string(REGEX REPLACE "\n *" " " flat "${out}")
    string(FIND "${flat}" "${expected}" at)
    if(rc STREQUAL "0" OR at EQUAL -1)
      fail("`${call}` (exit ${rc}) did not stop with '${expected}':\n${out}")
    endif()
    file(REMOVE_RECURSE "${SCRATCH}/build-error")
  endforeach()
elseif(CHECK STREQUAL "resource_spec")
  set(module "${SOURCE_DIR}/cmake/oomguardResourceSpec.cmake")
  file(WRITE "${SCRATCH}/nvidia-smi" "#!/bin/sh\nprintf '0, 143771\\n1, 15360\\n'\n")
  file(CHMOD "${SCRATCH}/nvidia-smi" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  execute_process(COMMAND "${CMAKE_COMMAND}" "-DOUTPUT=${SCRATCH}/two.json" "-DNVIDIA_SMI=${SCRATCH}/nvidia-smi"
                          -P "${module}" RESULT_VARIABLE rc)
  file(READ "${SCRATCH}/two.json" two)
  expect_equal("the spec of two GPUs (exit ${rc})" "${two}"
               [=[{"version":{"major":1,"minor":0},"local":[{"gpus":[{"id":"0","slots":143771},{"id":"1","slots":15360}]}]}]=])
  execute_process(COMMAND "${CMAKE_COMMAND}" "-DOUTPUT=${SCRATCH}/none.json" "-DNVIDIA_SMI=${SCRATCH}/no-such-program"
                          -P "${module}" RESULT_VARIABLE rc)
  file(READ "${SCRATCH}/none.json" none)
  expect_equal("the spec without nvidia-smi (exit ${rc})" "${none}"
               [=[{"version":{"major":1,"minor":0},"local":[{"gpus":[]}]}]=])
else()
  fail("CHECK is '${CHECK}'; expected registers, errors or resource_spec")
endif()
message(STATUS "module test (${CHECK}): passed")
