# The card table of the CTest module (cmake/oomguardCards.cmake) against `oomguard cards --json`:
# each card's MiB is its reported total_bytes rounded up to a MiB. CTest Package.CardTableMatchesOomguardCards
# runs the check; after a change to allocators/cards.cpp, rewrite the table with
#   cmake -DOOMGUARD=build/oomguard -DTABLE=cmake/oomguardCards.cmake -DWRITE=ON -P tests/package/card_table.cmake
execute_process(COMMAND "${OOMGUARD}" cards --json OUTPUT_VARIABLE json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "card table: `${OOMGUARD} cards --json` failed (${rc})")
endif()
set(expected)
set(lines)
string(JSON count LENGTH "${json}")
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON key GET "${json}" ${i} key)
  string(JSON bytes GET "${json}" ${i} total_bytes)
  math(EXPR mib "(${bytes} + 1048575) / 1048576")
  list(APPEND expected "${key}=${mib}")
  string(APPEND lines "  ${key}=${mib}\n")
endforeach()

file(READ "${TABLE}" current_text)
string(REGEX MATCH "^.*# --- generated below this line ---\n" header "${current_text}")
set(generated "${header}set(OOMGUARD_CARD_MIB\n${lines})\n")
if(WRITE)
  file(WRITE "${TABLE}" "${generated}")
  message(STATUS "card table: wrote ${TABLE} (${count} cards)")
  return()
endif()
include("${TABLE}")
if(NOT OOMGUARD_CARD_MIB STREQUAL expected)
  message(FATAL_ERROR "card table: ${TABLE} differs from `oomguard cards --json`:\n"
                      "  table:    ${OOMGUARD_CARD_MIB}\n  expected: ${expected}\n"
                      "Rewrite it: cmake -DOOMGUARD=${OOMGUARD} -DTABLE=${TABLE} -DWRITE=ON -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
message(STATUS "card table: ${count} cards, as `oomguard cards --json` gives them")
