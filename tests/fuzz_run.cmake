# Runs the fuzzer NAME of the tree in TREE (tests/fuzz_build.cmake) for RUNS inputs from its seeds,
# with a fixed random seed so that a failure reproduces, in a fresh corpus under WORK. Run by CTest
# (Fuzz.*, tests/CMakeLists.txt); fails on any finding, naming the file that holds its input.
file(STRINGS "${TREE}/fuzz/fuzzers.tsv" lines)
foreach(line IN LISTS lines)
  string(REPLACE "\t" ";" fields "${line}")  # name, executable, dictionary, seed folder, max_len
  list(GET fields 0 name)
  if(name STREQUAL NAME)
    list(GET fields 1 exe)
    list(GET fields 2 dict)
    list(GET fields 3 seeds)
    list(GET fields 4 max_len)
  endif()
endforeach()
if(NOT exe)
  message(FATAL_ERROR "no fuzzer ${NAME} in ${TREE}/fuzz/fuzzers.tsv")
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus" "${WORK}/findings")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1")
execute_process(
  COMMAND "${exe}" -runs=${RUNS} -seed=1 -max_len=${max_len} -timeout=10 -rss_limit_mb=2048 -dict=${dict}
          -artifact_prefix=${WORK}/findings/ -print_final_stats=1 "${WORK}/corpus" "${seeds}"
  RESULT_VARIABLE rc)
file(GLOB findings "${WORK}/findings/*")
if(NOT rc EQUAL 0 OR findings)
  message(FATAL_ERROR "Fuzzer ${NAME} failed (${rc}): ${findings}\nReproduce with: ${exe} FILE")
endif()
