# standalone_build.cmake — configures and builds one example folder as its own CMake project
# (every example must build standalone), then runs its program once on the simulator, through the
# launcher named like the program (./flash_fwd runs flash_fwd_sim here).
#   cmake -DSRC=<example dir> -DBIN=<scratch build dir> -DPROGRAM=<name> [-DARGS=<a;b;...>]
#         -P standalone_build.cmake
# ARGS: the program's arguments (default --check-only -L 33 -D 16).
# Built unoptimised (Debug): the test asks whether the folder builds on its own, which the
# optimisation level does not change, and -O0 compiles the simulator's templates about three times
# faster (example 07 on 2 cores: 57 s Release, 20 s Debug); the plain sim build compiles the same
# sources optimised. Without debug information (-O0 alone): the twelve builds took 170 s of CPU
# instead of 194 s with -g (one after the other, a cold compile cache each time).
cmake_minimum_required(VERSION 3.24)
if(NOT DEFINED ARGS)
  set(ARGS --check-only -L 33 -D 16)
endif()
file(REMOVE_RECURSE "${BIN}")
# With ccache (scripts/test.sh installs it where it can), the twelve folders share one compile
# cache in the chapter's build folder: each still configures and builds everything it needs on
# its own, but the simulator and the harness, the same sources with the same flags in every
# folder, are compiled once. CCACHE_BASEDIR=${BIN}: this build's own paths are hashed relative,
# so that the folders' different build paths do not make every object a miss.
set(launcher)
find_program(ATTN_CCACHE ccache)
if(ATTN_CCACHE)
  set(top "${BIN}")
  while(NOT EXISTS "${top}/CMakeCache.txt" AND NOT top STREQUAL "/")
    get_filename_component(top "${top}" DIRECTORY)
  endwhile()
  if(top STREQUAL "/")
    get_filename_component(top "${BIN}" DIRECTORY)
  endif()
  set(ENV{CCACHE_DIR} "${top}/standalone-ccache")
  set(ENV{CCACHE_BASEDIR} "${BIN}")
  set(ENV{CCACHE_NOHASHDIR} "1")
  set(launcher -DCMAKE_C_COMPILER_LAUNCHER=${ATTN_CCACHE}
               -DCMAKE_CXX_COMPILER_LAUNCHER=${ATTN_CCACHE})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SRC}" -B "${BIN}" -G "Unix Makefiles" -DATTN_BACKENDS=sim
                        -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0
                        "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -DATTN_GRID_CELLS=0x1" ${launcher}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure of ${SRC} failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${BIN}" -j 2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "build of ${SRC} failed:\n${out}\n${err}")
endif()
# ${PROGRAM} without a suffix: the launcher (cmake/attn.cmake) that a course's `./flash_fwd` runs;
# this build has the sim backend only, so it runs ${PROGRAM}_sim.
execute_process(COMMAND "${BIN}/${PROGRAM}" ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "PASS")
  message(FATAL_ERROR "standalone ${PROGRAM} (${PROGRAM}_sim) did not pass (exit ${rc})")
endif()
file(REMOVE_RECURSE "${BIN}")
