# Writes OUTPUT: `rapide --help` followed by `rapide SUB --help` for every subcommand the
# binary lists, so the package ships the reference a man page would hold.
execute_process(COMMAND "${RAPIDE}" --help OUTPUT_VARIABLE top RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "${RAPIDE} --help failed")
endif()
set(text "${top}")
# CLI11 titles the list "Subcommands:" (or "SUBCOMMANDS:" in some versions).
string(REGEX REPLACE ".*[Ss][Uu][Bb][Cc][Oo][Mm][Mm][Aa][Nn][Dd][Ss]:\n" "" listing "${top}")
string(REPLACE "\n" ";" lines "${listing}")
foreach(line ${lines})
  if(line MATCHES "^  ([a-z][a-z-]*) ")
    set(name ${CMAKE_MATCH_1})
    execute_process(COMMAND "${RAPIDE}" ${name} --help OUTPUT_VARIABLE sub)
    string(APPEND text "\n\n======== rapide ${name} ========\n${sub}")
  endif()
endforeach()
file(WRITE "${OUTPUT}" "${text}")
