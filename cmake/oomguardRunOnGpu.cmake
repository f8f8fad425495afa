# The command of a cuda scenario test (oomguard_add_scenarios): runs it on the GPU CTest gave it.
#
#   cmake -P oomguardRunOnGpu.cmake -- <program> run <file> --backend cuda ...
#
# Under `ctest --resource-spec-file spec.json` CTest names the GPU in CTEST_RESOURCE_GROUP_0_GPUS
# ("id:1,slots:15095", the id being nvidia-smi's index); the program runs with CUDA_VISIBLE_DEVICES
# set to it, so the tests CTest spreads over several GPUs really run there, and with PCI bus order,
# the order nvidia-smi numbers them in. Without a spec it runs as it is. Fails (exit 1) when the
# program exits non-zero.
set(_command)
set(_after_dashes OFF)
foreach(_i RANGE 1 ${CMAKE_ARGC})
  if(_i EQUAL CMAKE_ARGC)
    break()
  endif()
  if(_after_dashes)
    list(APPEND _command "${CMAKE_ARGV${_i}}")
  elseif(CMAKE_ARGV${_i} STREQUAL "--")
    set(_after_dashes ON)
  endif()
endforeach()
if(NOT _command)
  message(FATAL_ERROR "oomguardRunOnGpu: no command; usage: cmake -P oomguardRunOnGpu.cmake -- <program> <args>...")
endif()

set(_env)
if(DEFINED ENV{CTEST_RESOURCE_GROUP_0_GPUS})
  if(NOT "$ENV{CTEST_RESOURCE_GROUP_0_GPUS}" MATCHES "^id:([^,]+),")
    message(FATAL_ERROR "oomguardRunOnGpu: cannot read CTEST_RESOURCE_GROUP_0_GPUS='$ENV{CTEST_RESOURCE_GROUP_0_GPUS}'"
                        " (expected id:<gpu>,slots:<n>)")
  endif()
  set(_env "${CMAKE_COMMAND}" -E env "CUDA_DEVICE_ORDER=PCI_BUS_ID" "CUDA_VISIBLE_DEVICES=${CMAKE_MATCH_1}")
  message(STATUS "oomguard: on GPU ${CMAKE_MATCH_1} (CUDA_VISIBLE_DEVICES, from CTest's resource allocation)")
endif()
execute_process(COMMAND ${_env} ${_command} RESULT_VARIABLE _rc)
if(NOT _rc STREQUAL "0")
  message(FATAL_ERROR "oomguard: exit code ${_rc}")
endif()
