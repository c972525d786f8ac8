# cmake/generator_check.cmake — the chapter builds with CMake's Makefile generator only. Where two
# folders compile one .cu for the simulator, each has its rule for the one rewritten source
# (cudasim_gen/, where the grader also keeps the solutions' out of a learner's reach): Makefiles
# accept that, Ninja refuses the build ("multiple rules generate ..."). Included before project()
# by the top-level CMakeLists.txt (so that it is said before a missing ninja is) and by
# cmake/attn.cmake (an example built on its own).
include_guard(GLOBAL)
if(CMAKE_GENERATOR MATCHES "Ninja")
  message(FATAL_ERROR "the chapter builds with CMake's Makefile generator, not ${CMAKE_GENERATOR}: "
                      "configure without -G (or with -G \"Unix Makefiles\") in a new build folder, "
                      "and unset CMAKE_GENERATOR if it names Ninja (the presets name the Makefile "
                      "generator themselves)")
endif()
