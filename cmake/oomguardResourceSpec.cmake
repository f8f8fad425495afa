# A CTest resource-spec file for this machine's GPUs, for the cuda tests of oomguard_add_scenarios,
# which each ask for their card's memory in MiB (RESOURCE_GROUPS "gpus:<MiB>"):
#
#   oomguard_write_resource_spec(OUTPUT ${CMAKE_BINARY_DIR}/gpus.json)    # in a CMakeLists.txt, or
#   cmake -DOUTPUT=gpus.json -P <this file>                                # on the machine that tests
#   ctest --resource-spec-file gpus.json -j8
#
# One `gpus` entry per GPU, id its nvidia-smi index, slots its memory.total in MiB; so CTest runs
# tests side by side on a GPU only while their cards' memory fits in it. No nvidia-smi, or no GPU:
# an empty `gpus` list, and CTest then runs no cuda test (each is "Not Run", a failure). NVIDIA_SMI
# (or -DNVIDIA_SMI=) names the program to ask instead of the one on PATH.
include_guard(GLOBAL)

function(oomguard_write_resource_spec)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "OUTPUT;NVIDIA_SMI" "")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "oomguard_write_resource_spec: unexpected arguments '${ARG_UNPARSED_ARGUMENTS}'; "
                        "expected OUTPUT <file> [NVIDIA_SMI <program>]")
  endif()
  if(NOT ARG_OUTPUT)
    message(FATAL_ERROR "oomguard_write_resource_spec: OUTPUT <file> is required (where to write the spec)")
  endif()
  if(NOT ARG_NVIDIA_SMI)
    find_program(OOMGUARD_NVIDIA_SMI nvidia-smi)
    set(ARG_NVIDIA_SMI "${OOMGUARD_NVIDIA_SMI}")
  endif()
  set(gpus "")
  if(ARG_NVIDIA_SMI)
    execute_process(COMMAND "${ARG_NVIDIA_SMI}" --query-gpu=index,memory.total --format=csv,noheader,nounits
                    OUTPUT_VARIABLE listing RESULT_VARIABLE rc ERROR_QUIET)
    if(rc STREQUAL "0")
      string(REPLACE "\n" ";" lines "${listing}")
      foreach(line IN LISTS lines)
        if(line MATCHES "^[ \t]*([0-9]+)[ \t]*,[ \t]*([0-9]+)[ \t]*$")
          if(gpus)
            string(APPEND gpus ",")
          endif()
          string(APPEND gpus "\n        {\"id\": \"${CMAKE_MATCH_1}\", \"slots\": ${CMAKE_MATCH_2}}")
        endif()
      endforeach()
    endif()
  endif()
  if(gpus)
    string(APPEND gpus "\n      ")
  endif()
  file(WRITE "${ARG_OUTPUT}"
       "{\n  \"version\": {\"major\": 1, \"minor\": 0},\n  \"local\": [\n    {\n      \"gpus\": [${gpus}]\n    }\n  ]\n}\n")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  oomguard_write_resource_spec(OUTPUT "${OUTPUT}" NVIDIA_SMI "${NVIDIA_SMI}")
endif()
