# inputs_honoured.cmake — runs an example with --inputs opposed --amplitude 3 --dump DIR and
# checks the tensors it dumped (inputs_check.c): the shared input flags reach every example.
#   cmake -DCMD="prog;arg;..." -DCHECK=inputs_check -DDIR=folder -P inputs_honoured.cmake
cmake_minimum_required(VERSION 3.24)
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND ${CMD} --inputs opposed --amplitude 3 --dump "${DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the run failed (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${CHECK}" "${DIR}" 3 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the dumped inputs do not follow --inputs opposed --amplitude 3")
endif()
