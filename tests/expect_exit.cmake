# expect_exit.cmake — runs a command and checks its exit status and output, for tests of error
# handling (a bad flag must exit 2 with a message naming it, not merely "fail").
#   cmake -DCMD="prog;arg;..." -DCODES="2" -DREGEX="error: .*-L" -P expect_exit.cmake
# CODES: accepted exit statuses (a list). REGEX: must match stdout+stderr. LINES: if set, the
# most non-empty lines of stderr allowed (error messages are one line).
cmake_minimum_required(VERSION 3.24)
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit status: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT rc IN_LIST CODES)
  message(FATAL_ERROR "expected exit status in {${CODES}}, got ${rc}")
endif()
if(DEFINED REGEX AND NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}'")
endif()
if(DEFINED LINES)
  string(REGEX REPLACE "\n+$" "" err_trim "${err}")
  string(REPLACE ";" "," err_trim "${err_trim}") # ';' would split CMake's list of lines
  string(REGEX MATCHALL "[^\n]+" err_lines "${err_trim}")
  list(LENGTH err_lines n)
  if(n GREATER LINES)
    message(FATAL_ERROR "expected at most ${LINES} line(s) on stderr, got ${n}")
  endif()
endif()
