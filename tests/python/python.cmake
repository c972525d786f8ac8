# tests/python/python.cmake — the python suite's interpreter, and how any folder registers a Python
# check (an example's tests/CMakeLists.txt included). Included by tests/CMakeLists.txt before the
# suites.
#
# Needs a Python with torch and numpy: scripts/test.sh makes one in .venv and passes it as
# ATTN_PYTHON. Registered only where the simulator backend is built (the sim and default presets;
# the dump tool needs no device), so that scripts/test.sh, which tests sim and gpu, runs the suite
# once.
set(ATTN_PYTHON "" CACHE FILEPATH "Python interpreter with torch and numpy for the python suite")
# attn_python_has(<out-var> <python> <module>...): TRUE when <python> finds every (top-level)
# module. Found, not imported: importing PyTorch costs seconds of CPU, and each configure asked
# several times (a broken installation fails the tests instead of leaving them unregistered).
function(attn_python_has out py)
  execute_process(COMMAND "${py}" -c "import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
set(ATTN_PY "")
if("sim" IN_LIST ATTN_BACKEND_LIST AND ATTN_PARTS STREQUAL "all")
  if(ATTN_PYTHON)
    set(_py "${ATTN_PYTHON}")
  elseif(EXISTS "${ATTN_ROOT}/.venv/bin/python")
    set(_py "${ATTN_ROOT}/.venv/bin/python")
  else()
    find_program(_py NAMES python3)
  endif()
  if(_py)
    attn_python_has(_has "${_py}" torch numpy)
    if(_has)
      set(ATTN_PY "${_py}")
    endif()
  endif()
  if(NOT ATTN_PY)
    message(WARNING "attn: no Python with torch and numpy found: the python tests are not "
                    "registered (run scripts/setup.sh --python, or pass -DATTN_PYTHON=/path/to/python)")
  endif()
endif()

# The Python tests run in children of one server that imported PyTorch once
# (tests/python/preload.py: about 7 s of CPU saved per test, some forty tests): CTest fixture
# python_preload starts it (python.preload_start) and stops it (python.preload_stop), and a test
# started with ${ATTN_PY_RUN} instead of the interpreter runs as one of its children, or as a
# plain `python script` where none answers. -DATTN_PY_PRELOAD=OFF: every test a Python of its own.
option(ATTN_PY_PRELOAD "run the Python tests in children of one server that imported PyTorch" ON)
set(ATTN_PY_RUN "${ATTN_PY}")
if(ATTN_PY AND ATTN_PY_PRELOAD)
  # A socket's path has room for about 100 bytes: one in /tmp per build folder.
  string(MD5 _sock "${CMAKE_BINARY_DIR}")
  string(SUBSTRING "${_sock}" 0 16 _sock)
  set(ATTN_PY_SOCKET "/tmp/attn-py-${_sock}.sock")
  set(_sock "${ATTN_PY_SOCKET}")
  set(_preload "${CMAKE_CURRENT_LIST_DIR}/preload.py")
  set(ATTN_PY_RUN "${ATTN_PY}" "${_preload}" run "${_sock}")
  add_test(NAME python.preload_start COMMAND "${ATTN_PY}" "${_preload}" start "${_sock}"
                                             "${CMAKE_BINARY_DIR}/python_preload.log")
  add_test(NAME python.preload_stop COMMAND "${ATTN_PY}" "${_preload}" stop "${_sock}")
  # Its environment: what the tests' is at import time (preload.py, LOAD_TIME_ENV)
  set_tests_properties(python.preload_start PROPERTIES FIXTURES_SETUP python_preload
                       LABELS python ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
  set_tests_properties(python.preload_stop PROPERTIES FIXTURES_CLEANUP python_preload LABELS python)
endif()
# attn_py_preloaded(<test>...): the tests whose command starts with ${ATTN_PY_RUN} need the server.
# (After their ENVIRONMENT is set: it adds ATTN_PY_PRELOAD, the socket, for the Python scripts a
# test starts itself: preload.python_command().)
function(attn_py_preloaded)
  if(ATTN_PY AND ATTN_PY_PRELOAD)
    set_tests_properties(${ARGN} PROPERTIES FIXTURES_REQUIRED python_preload)
    set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT "ATTN_PY_PRELOAD=${ATTN_PY_SOCKET}")
  endif()
endfunction()

if(ATTN_PY)
  # The C reference's tensors for the Python checks (attn_testing.dump).
  add_executable(dump_reference "${CMAKE_CURRENT_LIST_DIR}/dump_reference.c")
  target_link_libraries(dump_reference PRIVATE attn_sparse_sim)
  attn_target_defaults(dump_reference)
  set_target_properties(dump_reference PROPERTIES LINKER_LANGUAGE CXX)
endif()

# attn_python_test(<name> <script> [ARGS ...] [TIMEOUT s]): CTest python.<name> runs
# `python <script> ARGS` (label python; generator expressions allowed in ARGS, e.g.
# $<TARGET_FILE:dump_reference> or a program's $<TARGET_FILE:...>), with tests/python (the shared
# attn_testing.py) importable. Each script prints "N passed, M failed" and exits 1 on a failed
# check. Nothing is registered without the interpreter. OMP_WAIT_POLICY=PASSIVE: PyTorch's
# OpenMP threads sleep between parallel regions instead of spinning (spinning costs up to 5x
# the CPU time of the test on 2 shared cores: python.flash2_fwd_reference took 19 s of CPU
# against 3.8 s passive, measured).
function(attn_python_test name script)
  cmake_parse_arguments(A "" "TIMEOUT" "ARGS" ${ARGN})
  if(NOT ATTN_PY)
    return()
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_test(NAME python.${name} COMMAND ${ATTN_PY_RUN} "${script}" ${A_ARGS})
  set_tests_properties(python.${name} PROPERTIES LABELS python TIMEOUT ${A_TIMEOUT}
                       ENVIRONMENT "PYTHONPATH=${ATTN_ROOT}/tests/python;OMP_WAIT_POLICY=PASSIVE")
  attn_py_preloaded(python.${name})
endfunction()
