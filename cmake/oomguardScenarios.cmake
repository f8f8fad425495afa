# oomguard_add_scenarios: scenario files as CTest tests, one per scenario x backend x card.
#
#   oomguard_add_scenarios(TARGET memory_checks PATHS memory-scenarios
#                          BACKEND cpu cuda CARD t4 a100-80gb LABELS memory)
#   # tests oomguard.<scenario>.cpu.t4, oomguard.<scenario>.cuda.a100-80gb, ...
#
# TARGET      an executable that serves oomguard's command line: a program with OOMGUARD_MAIN() or
#             oomguard::Main (oomguard/main.h), or oomguard::tool for scenarios of built-in layers only
# PATHS       scenario .json files, or folders: their *.json, not those in subfolders (baselines/);
#             relative paths are taken from the current source folder
# BACKEND     cpu, meta or cuda (default cpu); a scenario gets a test only for the backends its
#             "backends" key lists (default ["cpu"], scenarios/FORMAT.md)
# CARD        card presets, `oomguard cards` (default t4)
# TIMEOUT     seconds per test (default 600)
# LABELS      labels besides oomguard, the backend and the card
# EXTRA_ARGS  more arguments to `run`, e.g. --strict
# JUNIT_DIR   where each test writes <test name>.xml (default <current binary folder>/oomguard-junit)
# NAME_PREFIX the test names' first part (default oomguard), for a second call over the same files
#
# Each test runs `<TARGET> run <file> --backend B --card C --report junit=<JUNIT_DIR>/<test>.xml
# EXTRA_ARGS`: exit 0 passes, 1 (failures) and 2 (input errors) fail. A scenario reported
# UNSUPPORTED (cuda without a GPU) is shown as skipped. A cuda test asks CTest for its card's memory,
# RESOURCE_GROUPS "gpus:<MiB>", so that `ctest --resource-spec-file spec.json -jN` (the spec from
# oomguard_write_resource_spec, oomguardResourceSpec.cmake) runs cuda tests side by side only while
# their cards fit in a GPU, and runs each on the GPU CTest chose (oomguardRunOnGpu.cmake). The
# scenario names are read at configure time, and adding a file to a folder reconfigures.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/oomguardResourceSpec.cmake)

# The scenario files PATHS names, absolute and sorted within each folder, in *files.
function(_oomguard_scenario_files files expected)
  set(found)
  foreach(given IN LISTS ARGN)
    get_filename_component(path "${given}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(IS_DIRECTORY "${path}")
      # CONFIGURE_DEPENDS: a build re-runs the glob, so a new scenario file reconfigures.
      file(GLOB in_folder LIST_DIRECTORIES false CONFIGURE_DEPENDS "${path}/*.json")
      if(NOT in_folder)
        message(FATAL_ERROR "oomguard_add_scenarios: PATHS folder '${path}' holds no *.json scenario file")
      endif()
      list(SORT in_folder)
      list(APPEND found ${in_folder})
    elseif(EXISTS "${path}" AND path MATCHES "\\.json$")
      list(APPEND found "${path}")
    elseif(EXISTS "${path}")
      message(FATAL_ERROR "oomguard_add_scenarios: PATHS '${path}' is not a .json scenario file or a folder of them")
    elseif(given MATCHES "^[A-Z_]+$")
      # cmake_parse_arguments files an unknown keyword after PATHS under PATHS.
      message(FATAL_ERROR "oomguard_add_scenarios: PATHS '${given}' does not exist; a misspelt keyword? ${expected}")
    else()
      message(FATAL_ERROR "oomguard_add_scenarios: PATHS '${path}' does not exist (a scenario .json file or a folder)")
    endif()
  endforeach()
  set(${files} "${found}" PARENT_SCOPE)
endfunction()

# A scenario's name and backends from its file: "name" (the file's stem when the file does not
# parse or has none: oomguard then reports the file UNRESOLVED, a failing test) and "backends"
# (["cpu"] when absent; every backend when unreadable, so that the broken file still shows).
function(_oomguard_read_scenario file name_out backends_out)
  get_filename_component(name "${file}" NAME_WE)
  set(backends cpu meta cuda)
  file(READ "${file}" text)
  string(JSON top ERROR_VARIABLE error TYPE "${text}")
  if(NOT error AND top STREQUAL "OBJECT")
    string(JSON parsed ERROR_VARIABLE error GET "${text}" name)
    if(NOT error AND parsed)
      set(name "${parsed}")
    endif()
    string(JSON type ERROR_VARIABLE error TYPE "${text}" backends)
    if(error)
      set(backends cpu)
    elseif(type STREQUAL "ARRAY")
      set(backends)
      string(JSON count LENGTH "${text}" backends)
      if(count GREATER 0)
        math(EXPR last "${count} - 1")
        foreach(i RANGE ${last})
          string(JSON backend GET "${text}" backends ${i})
          list(APPEND backends "${backend}")
        endforeach()
      endif()
    endif()
  endif()
  set(${name_out} "${name}" PARENT_SCOPE)
  set(${backends_out} "${backends}" PARENT_SCOPE)
endfunction()

# The MiB a cuda test of `card` asks CTest for: the card's reported capacity (oomguardCards.cmake).
function(_oomguard_card_mib card mib_out)
  include(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/oomguardCards.cmake)
  string(TOLOWER "${card}" key)
  set(keys)
  foreach(entry IN LISTS OOMGUARD_CARD_MIB)
    string(REPLACE "=" ";" pair "${entry}")
    list(GET pair 0 entry_key)
    list(GET pair 1 entry_mib)
    list(APPEND keys "${entry_key}")
    if(entry_key STREQUAL key)
      set(${mib_out} "${entry_mib}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  list(JOIN keys ", " keys)
  message(FATAL_ERROR "oomguard_add_scenarios: CARD '${card}' is not a card preset; BACKEND cuda needs one "
                      "of ${keys} (the keys `oomguard cards` prints; aliases such as 3090 are not read here)")
endfunction()

function(oomguard_add_scenarios)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET;TIMEOUT;JUNIT_DIR;NAME_PREFIX"
                        "PATHS;BACKEND;CARD;LABELS;EXTRA_ARGS")
  set(expected "expected TARGET <executable> PATHS <file-or-folder>... [BACKEND cpu|meta|cuda ...] [CARD <card> ...] "
               "[TIMEOUT <seconds>] [LABELS <label> ...] [EXTRA_ARGS <arg> ...] [JUNIT_DIR <dir>] [NAME_PREFIX <name>]")
  string(JOIN "" expected ${expected})
  if(ARG_UNPARSED_ARGUMENTS)
    list(JOIN ARG_UNPARSED_ARGUMENTS " " unexpected)
    message(FATAL_ERROR "oomguard_add_scenarios: unexpected arguments '${unexpected}'; ${expected}")
  endif()
  foreach(keyword IN LISTS ARG_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "oomguard_add_scenarios: ${keyword} needs a value; ${expected}")
  endforeach()
  if(NOT ARG_TARGET)
    message(FATAL_ERROR "oomguard_add_scenarios: TARGET is required: the executable that runs the scenarios "
                        "(a program with OOMGUARD_MAIN(), or oomguard::tool)")
  endif()
  if(NOT TARGET "${ARG_TARGET}")
    message(FATAL_ERROR "oomguard_add_scenarios: TARGET '${ARG_TARGET}' is not a target; expected an executable "
                        "defined before this call (add_executable), or oomguard::tool")
  endif()
  get_target_property(type "${ARG_TARGET}" TYPE)
  if(NOT type STREQUAL "EXECUTABLE")
    message(FATAL_ERROR "oomguard_add_scenarios: TARGET '${ARG_TARGET}' is not an executable (its type is ${type}); "
                        "expected one whose main is OOMGUARD_MAIN() or oomguard::Main")
  endif()
  if(NOT ARG_PATHS)
    message(FATAL_ERROR "oomguard_add_scenarios: PATHS is required: scenario .json files or folders of them")
  endif()
  if(NOT ARG_BACKEND)
    set(ARG_BACKEND cpu)
  endif()
  foreach(backend IN LISTS ARG_BACKEND)
    if(NOT backend MATCHES "^(cpu|meta|cuda)$")
      message(FATAL_ERROR "oomguard_add_scenarios: BACKEND '${backend}' is not a backend; expected cpu, meta or cuda")
    endif()
  endforeach()
  if(NOT ARG_CARD)
    set(ARG_CARD t4)
  endif()
  if(NOT DEFINED ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  elseif(NOT ARG_TIMEOUT MATCHES "^[0-9]+(\\.[0-9]+)?$" OR ARG_TIMEOUT EQUAL 0)
    message(FATAL_ERROR "oomguard_add_scenarios: TIMEOUT '${ARG_TIMEOUT}' is not a number of seconds above 0")
  endif()
  if(NOT ARG_JUNIT_DIR)
    set(ARG_JUNIT_DIR "${CMAKE_CURRENT_BINARY_DIR}/oomguard-junit")
  endif()
  get_filename_component(ARG_JUNIT_DIR "${ARG_JUNIT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  file(MAKE_DIRECTORY "${ARG_JUNIT_DIR}")
  if(NOT ARG_NAME_PREFIX)
    set(ARG_NAME_PREFIX oomguard)
  endif()
  set(labels)
  foreach(label IN LISTS ARG_LABELS)
    string(APPEND labels ";${label}")
  endforeach()
  set(mib_of_card)
  if("cuda" IN_LIST ARG_BACKEND)
    foreach(card IN LISTS ARG_CARD)
      _oomguard_card_mib("${card}" mib)
      list(APPEND mib_of_card "${mib}")
    endforeach()
  endif()

  _oomguard_scenario_files(files "${expected}" ${ARG_PATHS})
  set(seen_names)
  set(seen_files)
  foreach(file IN LISTS files)
    # Editing a file (its name, its backends) reconfigures.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
    _oomguard_read_scenario("${file}" name scenario_backends)
    list(FIND seen_names "${name}" seen)
    if(NOT seen EQUAL -1)
      list(GET seen_files ${seen} other)
      message(FATAL_ERROR "oomguard_add_scenarios: scenario name '${name}' is in both ${other} and ${file}; "
                          "a name must be unique among PATHS (oomguard reports the second UNRESOLVED)")
    endif()
    list(APPEND seen_names "${name}")
    list(APPEND seen_files "${file}")
    foreach(backend IN LISTS ARG_BACKEND)
      if(NOT backend IN_LIST scenario_backends)
        continue()  # oomguard would report it UNSUPPORTED: nothing to test
      endif()
      set(card_index 0)
      foreach(card IN LISTS ARG_CARD)
        set(test "${ARG_NAME_PREFIX}.${name}.${backend}.${card}")
        set(command "$<TARGET_FILE:${ARG_TARGET}>" run "${file}" --backend ${backend} --card ${card}
                    --report "junit=${ARG_JUNIT_DIR}/${test}.xml" ${ARG_EXTRA_ARGS})
        if(backend STREQUAL "cuda")
          set(command "${CMAKE_COMMAND}" -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/oomguardRunOnGpu.cmake" -- ${command})
        endif()
        add_test(NAME "${test}" COMMAND ${command})
        set_tests_properties("${test}" PROPERTIES
                             LABELS "oomguard;${backend};${card}${labels}"
                             TIMEOUT ${ARG_TIMEOUT}
                             SKIP_REGULAR_EXPRESSION "(^|\n)UNSUPPORTED ")
        if(backend STREQUAL "cuda")
          list(GET mib_of_card ${card_index} mib)
          set_tests_properties("${test}" PROPERTIES RESOURCE_GROUPS "gpus:${mib}")
        endif()
        math(EXPR card_index "${card_index} + 1")
      endforeach()
    endforeach()
  endforeach()
endfunction()
