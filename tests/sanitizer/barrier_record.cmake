# barrier_record.cmake — runs check_cases' barrier_record kernel with the simulator's barrier
# record on (CUDASIM_BARRIER_RECORD, common/cudasim/README.md) and checks each marked barrier's
# line of the record: EXPECT is a list of <line>:<shown> (1 shown to matter, 0 only reached).
# -DPROGRAM=<simcheck_cases> -DDIR=<empty folder for the record> -DORDER=forward|reverse|shuffle
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "CUDASIM_BARRIER_RECORD=${DIR}"
                        "CUDASIM_ORDER=${ORDER}" "${PROGRAM}" barrier_record
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "barrier_record: the case failed (${rc}): ${out}")
endif()
file(GLOB records "${DIR}/barriers.*.tsv")
list(LENGTH records n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "barrier_record: ${n} record files in ${DIR}, want 1")
endif()
file(READ "${records}" text)
foreach(e IN LISTS EXPECT)
  string(REPLACE ":" ";" e "${e}")
  list(GET e 0 line)
  list(GET e 1 shown)
  if(NOT text MATCHES "'barrier_record'\t[^\t\n]*check_cases\\.cu\t${line}\t${shown}\n")
    message(FATAL_ERROR "barrier_record: the barrier at check_cases.cu:${line} is not recorded "
                        "with shown = ${shown}; the record:\n${text}")
  endif()
endforeach()
message("PASS barrier record: ${EXPECT}")
