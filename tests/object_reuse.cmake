# The CMake side of tests/object_reuse.py, for the scripts (cmake -P) that build oomguard again in a
# folder of their own (package/package_test.cmake, libtorch_free_build.cmake).
#
# Inputs, as the scripts get them: GENERATOR, MAKE_PROGRAM, BINARY_DIR_OF_MAIN (the main build),
# PYTHON, LAUNCHER (the real compiler launcher, may be empty).

# Sets `out` to the configure arguments (-C FILE) that make `other_build` take the main build's
# objects, one line per compile in `log`; empty where the generator is not Ninja (no `ninja -t deps`):
# then every compile is real.
function(object_reuse_arguments out other_build log)
  set(${out} "" PARENT_SCOPE)
  if(NOT GENERATOR MATCHES "Ninja")
    return()
  endif()
  set(launcher "${LAUNCHER}")
  if(NOT launcher)
    set(launcher none)
  endif()
  set(file "${log}.cmake")
  file(WRITE "${file}" "set(CMAKE_CXX_COMPILER_LAUNCHER [[${PYTHON};${OBJECT_REUSE_SCRIPT};${BINARY_DIR_OF_MAIN};"
                       "${MAKE_PROGRAM};${other_build};${log};${launcher}]] CACHE STRING \"\" FORCE)\n")
  file(REMOVE "${log}")
  set(${out} -C "${file}" PARENT_SCOPE)
endfunction()

# Prints how many compiles `log` says were taken from the main build and why the others were real.
function(object_reuse_report what log)
  if(NOT EXISTS "${log}")
    return()
  endif()
  file(STRINGS "${log}" reused REGEX "^reused ")
  file(STRINGS "${log}" compiled REGEX "^compiled ")
  list(LENGTH reused reused_count)
  list(LENGTH compiled compiled_count)
  list(JOIN compiled "\n  " compiled)
  message(STATUS "${what}: ${reused_count} objects taken from ${BINARY_DIR_OF_MAIN}, ${compiled_count} compiled:\n  ${compiled}")
endfunction()

set(OBJECT_REUSE_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/object_reuse.py")
