# cmake/attn.cmake — shared build logic: backends, sanitizers, and the functions that turn a
# CUDA source into a simulator program (host C++ against common/cudasim) or a GPU program (nvcc).
#
# Included by the top-level CMakeLists.txt and by every example built standalone.
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/generator_check.cmake")

set(ATTN_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." CACHE INTERNAL "")
cmake_path(NORMAL_PATH ATTN_ROOT)

set(ATTN_BACKENDS "auto" CACHE STRING
    "Backends to build: sim, gpu, 'sim;gpu', or auto (the tour's: gpu where nvcc is found and a \
GPU answers, else sim)")
set(ATTN_SANITIZER "" CACHE STRING "Sanitizer for the sim backend: '', asan (ASan+UBSan) or tsan")
set_property(CACHE ATTN_SANITIZER PROPERTY STRINGS "" asan tsan)
# What to build: all (the default), or examples: the simulator, the harness, the examples and the
# benchmark with their tests (labels cudasim, examples, benchmarks; sim-tsan, whose labels are
# cudasim and tsan, without the benchmark), without the exercises, the grader and the Python
# suites. The sim-asan and sim-tsan presets, which test only those labels,
# build only them (tests/README.md, "What each preset runs, and why"); grader/grade.py
# reconfigures such a build with ATTN_PARTS=all when asked to grade in it.
set(ATTN_PARTS "all" CACHE STRING "What to build: all, or examples (see cmake/attn.cmake)")
set_property(CACHE ATTN_PARTS PROPERTY STRINGS all examples)
if(NOT ATTN_PARTS MATCHES "^(all|examples)$")
  message(FATAL_ERROR "ATTN_PARTS is '${ATTN_PARTS}': use all or examples")
endif()
option(ATTN_SIM_CHECK "Simulator's checked mode: kernel sources instrumented (clang), memcheck, \
racecheck and initcheck on (the sim-check preset)" OFF)
# A fixed list, never 'native': configuring must work on machines without a GPU. One per major
# version: sm_80's code runs on sm_86 and sm_89 GPUs too (CUDA's binary compatibility within a
# major version), so adding 86 and 89 would double the build for no GPU it could not serve.
set(ATTN_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures for the gpu backend")
# The architectures of the committed register, spill and SASS tables (benchmarks/results/ptxas,
# examples/08_flex_attention/results/ptxas.json): attn_tabled_architectures() compiles the kernels
# those tables describe for them, whatever ATTN_CUDA_ARCHITECTURES says.
set(ATTN_TABLED_ARCHITECTURES "80;90")
# A gpu build that is a compile check only (scripts/test.sh where no GPU answers: the gpu tests
# skip there) optimises at -O1 (NVVM, ptxas and the host compiler): the same code is parsed and
# assembled in less time (example 09's decode.cu for sm_90: 30 s, 12 s), but its SASS is not
# what a GPU would run, so the kernels whose registers and spills are tabled
# (attn_tabled_architectures) keep the full optimisation.
option(ATTN_GPU_COMPILE_CHECK "gpu backend: device code at -O1, for a build that is never run" OFF)
# The cells of the {fp16, bf16} x {64, 128} grid that the simulator builds' kernel sources compile
# (ATTN_GRID_CELLS, common/device/dispatch.cuh: a bit per cell), where not all four: sim-tsan
# compiles fp16 at D = 64 alone (0x1), the cell of every case it runs (a race is a matter of
# barriers and threads, the same in every cell of one template; the other builds run the others),
# in less CPU time (example 08's source under ThreadSanitizer: 3.7 s instead of 8.0 s; the whole
# sim-tsan build 107 s instead of 142 s).
# A case asking for another cell stops with exit status 2 and names the cell.
set(ATTN_SIM_GRID_CELLS "" CACHE STRING
    "Cells of the dtype x D grid the simulator's kernel sources compile (empty: all four)")

set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
# Position-independent code everywhere, so that an example may link its kernels (and the harness
# and the simulator under them) into a shared library that another program loads at run time
# (example 09's libdecode_attn_<backend>.so, which the quality toolkit's model calls from Python).
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# attn_write_if_changed(<path> <content>): writes <path> only when its content would change, so
# that configuring again leaves a generated source (and what is compiled from it) alone.
function(attn_write_if_changed path content)
  file(WRITE "${path}.new" "${content}")
  file(COPY_FILE "${path}.new" "${path}" ONLY_IF_DIFFERENT)
  file(REMOVE "${path}.new")
endfunction()

# ---- which backends -------------------------------------------------------------------------
# auto (the default, `cmake -B build`): the backend the chapter tour (scripts/run.sh) uses, said
# up front: the gpu backend where nvcc is found and a GPU answers (nvidia-smi -L lists one), else
# the simulator, even where nvcc is installed. Both would double the build (the GPU code is
# compiled for two architectures); ATTN_BACKENDS="sim;gpu" asks for them.
if(ATTN_BACKENDS STREQUAL "auto")
  include(CheckLanguage)
  check_language(CUDA)
  set(_attn_gpu_answers FALSE)
  if(CMAKE_CUDA_COMPILER)
    find_program(ATTN_NVIDIA_SMI nvidia-smi)
    if(ATTN_NVIDIA_SMI)
      execute_process(COMMAND "${ATTN_NVIDIA_SMI}" -L OUTPUT_VARIABLE _attn_smi
                      RESULT_VARIABLE _attn_smi_rc ERROR_QUIET)
      if(_attn_smi_rc EQUAL 0 AND _attn_smi MATCHES "(^|\n)GPU ")
        set(_attn_gpu_answers TRUE)
      endif()
    endif()
  endif()
  if(_attn_gpu_answers)
    set(_attn_backends gpu)
    set(_attn_why "a GPU answers (nvidia-smi -L) and nvcc is here")
  else()
    set(_attn_backends sim)
    if(CMAKE_CUDA_COMPILER)
      set(_attn_why "nvcc is here but no GPU answers (nvidia-smi -L); the gpu preset compiles the \
GPU programs")
    else()
      set(_attn_why "no CUDA compiler found")
    endif()
  endif()
  message(NOTICE "attn: ATTN_BACKENDS=auto builds the ${_attn_backends} backend only, as \
scripts/run.sh does: ${_attn_why}. -DATTN_BACKENDS=\"sim;gpu\" builds both. `cmake --build` \
compiles one file at a time unless given -j: cmake --build <dir> -j$(nproc).")
else()
  set(_attn_backends ${ATTN_BACKENDS})
endif()
if(ATTN_SANITIZER AND "gpu" IN_LIST _attn_backends)
  message(STATUS "attn: sanitizer builds use the simulator backend only")
  list(REMOVE_ITEM _attn_backends gpu)
endif()
foreach(_b IN LISTS _attn_backends)
  if(NOT _b MATCHES "^(sim|gpu)$")
    message(FATAL_ERROR "attn: unknown backend '${_b}' in ATTN_BACKENDS (use sim, gpu or auto)")
  endif()
endforeach()
set(ATTN_BACKEND_LIST ${_attn_backends} CACHE INTERNAL "")

if("gpu" IN_LIST ATTN_BACKEND_LIST)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${ATTN_CUDA_ARCHITECTURES})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

# ---- warnings and sanitizers ----------------------------------------------------------------
if(NOT COMMAND attn_target_defaults)
  function(attn_target_defaults tgt)
    target_compile_options(${tgt} PRIVATE
      $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wno-unknown-pragmas -Wno-missing-field-initializers>
      $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>)
  endfunction()
endif()

if(ATTN_SANITIZER STREQUAL "asan")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(ATTN_SANITIZER STREQUAL "tsan")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(ATTN_SANITIZER)
  message(FATAL_ERROR "attn: ATTN_SANITIZER must be '', asan or tsan (got '${ATTN_SANITIZER}')")
endif()

if(ATTN_SIM_CHECK)
  if(ATTN_SANITIZER)
    message(FATAL_ERROR "attn: ATTN_SIM_CHECK and ATTN_SANITIZER cannot be combined")
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "attn: ATTN_SIM_CHECK needs clang (-fsanitize-coverage=trace-loads); "
                        "configure with the sim-check preset (clang-14)")
  endif()
  # Every load and store of a rewritten kernel source calls __sanitizer_cov_load<n>/store<n>
  # (common/cudasim/src/stream.cpp). Vectorisers would merge accesses into wider ones a GPU
  # does not make; device asserts stay on (no NDEBUG).
  # -fsanitize=alignment: a misaligned T* dereference calls a handler of the simulator's.
  # CUDASIM_TRACE_COPIES: an assignment of a vector wider than 8 bytes (uint4, float4) is one
  # traced access each way, not an unseen memcpy (common/cudasim/include/vector_types.h).
  # Those vectors also get an empty member (no room taken) that makes their copy non-trivial, so
  # that -fsanitize=alignment checks `float4 v = *p` too; initialisations that leave it out are
  # not worth a warning.
  set(ATTN_SIM_CHECK_FLAGS -fsanitize-coverage=func,trace-loads,trace-stores -DCUDASIM_TRACE_COPIES
      -fsanitize=alignment -Wno-missing-field-initializers -fno-vectorize -fno-slp-vectorize
      -UNDEBUG CACHE INTERNAL "")
endif()
# sim-tsan: the kernel sources are checked for misaligned accesses as well (the simulator's
# handler reports them, as in sim-check, and in sim-asan, whose -fsanitize=undefined has them;
# the plain build checks the vector casts the rewriter marks). Next to ThreadSanitizer its cost
# does not show.
# sim-asan: the kernel sources (the rewritten .cu) unoptimised, the simulator and the harness at
# the preset's -O1. ASan and UBSan check every access and operation of -O0 code (none optimised
# away), and GCC compiles these template-heavy sources with both instrumentations in less than
# half the time: tests/README.md, "The builds: what was weighed".
if(ATTN_SANITIZER STREQUAL "tsan")
  set(ATTN_SIM_KERNEL_FLAGS -fsanitize=alignment)
elseif(ATTN_SANITIZER STREQUAL "asan")
  set(ATTN_SIM_KERNEL_FLAGS -O0)
elseif(ATTN_SIM_CHECK)
  set(ATTN_SIM_KERNEL_FLAGS ${ATTN_SIM_CHECK_FLAGS})
else()
  set(ATTN_SIM_KERNEL_FLAGS)
endif()
# The simulator's cuda_runtime.h precompiled once per build and variant, for every rewritten .cu
# (GCC only: common/cudasim/CMakeLists.txt). Off in an example folder built on its own, whose few
# kernel sources would not repay the two precompiled headers (and whose test builds share a
# compile cache).
get_filename_component(_attn_top "${CMAKE_SOURCE_DIR}" REALPATH)
get_filename_component(_attn_root "${ATTN_ROOT}" REALPATH)
if(_attn_top STREQUAL _attn_root)
  set(_attn_pch_default ON)
else()
  set(_attn_pch_default OFF)
endif()
option(ATTN_SIM_PCH "sim backend: the simulator's cuda_runtime.h precompiled (GCC)" ${_attn_pch_default})
# A planted copy of a kernel source (planted_copy, tests/examples/CMakeLists.txt) runs a few small
# cases, which its bug must fail: in the plain and checked simulator builds it is compiled at -O1,
# which for these template-heavy sources is about three times faster than -O3 with GCC and a third
# faster than -O2 with the checked build's clang (tests/README.md, "Time budgets"). Under
# ThreadSanitizer they have the build's own -O1 (the sim-tsan preset).
if(NOT ATTN_SANITIZER AND CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
  set(ATTN_SIM_PLANTED_FLAGS -O1)
else()
  set(ATTN_SIM_PLANTED_FLAGS)
endif()

# ---- CUDA sources for a backend -------------------------------------------------------------
# attn_cuda_sources(<out-var> <backend> <sources...>)
# sim: each .cu is rewritten by cudasim_rewrite into <build>/cudasim/<dir>/<name>.cu.cpp (the
#      <<<...>>> launches and extern __shared__ declarations become simulator calls; #line keeps
#      diagnostics on the original file) and compiled as C++17, with any header next to it that
#      launches kernels too (example 04's sparse_fa2.cuh). Other sources pass through.
# gpu: sources pass through to nvcc / the host compilers.
function(attn_cuda_sources out backend)
  set(result)
  foreach(src IN LISTS ARGN)
    cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE
               OUTPUT_VARIABLE abs)
    if(backend STREQUAL "sim" AND abs MATCHES "\\.cu$")
      file(RELATIVE_PATH rel "${ATTN_ROOT}" "${abs}")
      if(rel MATCHES "^\\.\\.")
        cmake_path(GET abs FILENAME rel)
      endif()
      set(gen "${CMAKE_BINARY_DIR}/cudasim_gen/${rel}.cpp")
      # The depfile lists the headers next to the .cu that launch kernels themselves and were
      # rewritten with it (cudasim_rewrite's header): editing one rewrites the .cu again.
      add_custom_command(
        OUTPUT "${gen}"
        COMMAND cudasim_rewrite "${abs}" "${gen}" "${gen}.d"
        DEPENDS "${abs}" cudasim_rewrite
        DEPFILE "${gen}.d"
        COMMENT "cudasim: rewriting ${rel}"
        VERBATIM)
      set(flags ${ATTN_SIM_KERNEL_FLAGS})
      get_source_file_property(planted "${abs}" ATTN_PLANTED)
      if(planted)
        list(APPEND flags ${ATTN_SIM_PLANTED_FLAGS})
      endif()
      # the cells of the dtype x D grid it compiles, where not all four (planted_grid,
      # tests/examples/CMakeLists.txt; device/dispatch.cuh)
      get_source_file_property(cells "${abs}" ATTN_GRID_CELLS)
      if(NOT cells AND ATTN_SIM_GRID_CELLS)
        set(cells ${ATTN_SIM_GRID_CELLS})
      endif()
      if(cells)
        list(APPEND flags -DATTN_GRID_CELLS=${cells})
      endif()
      if(flags)
        set_source_files_properties("${gen}" PROPERTIES COMPILE_OPTIONS "${flags}")
      endif()
      # the precompiled cuda_runtime.h it starts with (common/cudasim/CMakeLists.txt)
      if(ATTN_SIM_PCH_FILES)
        set_source_files_properties("${gen}" PROPERTIES OBJECT_DEPENDS "${ATTN_SIM_PCH_FILES}")
      endif()
      list(APPEND result "${gen}")
    else()
      list(APPEND result "${abs}")
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# Compile settings every target of a backend gets (include paths, runtime library).
function(attn_backend_setup tgt backend)
  attn_target_defaults(${tgt})
  if(backend STREQUAL "sim")
    target_link_libraries(${tgt} PUBLIC cudasim)
    target_compile_definitions(${tgt} PUBLIC ATTN_BACKEND_SIM=1)
  else()
    target_link_libraries(${tgt} PUBLIC CUDA::cudart)
    target_compile_definitions(${tgt} PUBLIC ATTN_BACKEND_GPU=1)
    set_target_properties(${tgt} PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
    if(ATTN_GPU_COMPILE_CHECK)
      set(_untabled "$<NOT:$<BOOL:$<TARGET_PROPERTY:ATTN_TABLED>>>")
      target_compile_options(${tgt} PRIVATE
        "$<$<AND:$<COMPILE_LANGUAGE:CUDA>,${_untabled}>:-Xcicc=-O1;-Xptxas=-O1;-Xcompiler=-O1>"
        "$<$<AND:$<COMPILE_LANGUAGE:C,CXX>,${_untabled}>:-O1>")
    endif()
  endif()
endfunction()

# attn_cuda_library(<name> SOURCES ... [LIBRARIES ...])
# Makes <name>_<backend> static libraries (one per built backend) from kernel sources, so that
# examples, tests, benchmarks and the grader link the same kernels.
function(attn_cuda_library name)
  _attn_cuda_target(LIBRARY ${name} ${ARGN})
endfunction()

# attn_cuda_executable(<name> SOURCES ... [LIBRARIES ...])
# Makes <name>_<backend> executables; LIBRARIES are attn_cuda_library names (suffix added).
function(attn_cuda_executable name)
  _attn_cuda_target(EXECUTABLE ${name} ${ARGN})
endfunction()

# attn_not_in_tsan(<target>...): in sim-tsan (ATTN_SANITIZER tsan) <target> is left out of the
# default build (EXCLUDE_FROM_ALL): a program none of that preset's tests (labels cudasim, tsan)
# runs, such as an example's own checkers, whose tests the other builds run.
# attn_not_in_sanitizers(<target>...): the same in sim-asan and sim-tsan both: a program neither
# preset's tests run (example 11's, whose ranks run inside Open MPI).
# attn_plain_builds_only(<target>...): the same in sim-asan, sim-tsan and the checked build
# (sim-check): a program none of their tests runs (the tools that write a README's tables, the
# simulator's own benchmark).
# <target> is a program or library of attn_cuda_executable/_library (its _sim target) or a plain
# target.
function(_attn_exclude_from_all)
  foreach(name IN LISTS ARGN)
    if(TARGET ${name}_sim)
      set(name ${name}_sim)
    endif()
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endforeach()
endfunction()
function(attn_not_in_tsan)
  if(ATTN_SANITIZER STREQUAL "tsan")
    _attn_exclude_from_all(${ARGN})
  endif()
endfunction()
function(attn_not_in_sanitizers)
  if(ATTN_SANITIZER)
    _attn_exclude_from_all(${ARGN})
  endif()
endfunction()
function(attn_plain_builds_only)
  if(ATTN_SANITIZER OR ATTN_SIM_CHECK)
    _attn_exclude_from_all(${ARGN})
  endif()
endfunction()

# attn_tabled_architectures(<name>...): the gpu targets of attn_cuda_library/_executable <name>
# compiled for ATTN_TABLED_ARCHITECTURES (with their PTX) even where ATTN_CUDA_ARCHITECTURES is
# narrower: scripts/test.sh compiles the rest for sm_90 alone where no GPU answers
# (tests/README.md, "Time budgets"). Their compiles keep ptxas's report (-Xptxas=-v) beside each
# object (cmake/ptxas_log.sh), which the tables read rather than running ptxas again. Called
# beside the test that reads them.
function(attn_tabled_architectures)
  foreach(name IN LISTS ARGN)
    if(TARGET ${name}_gpu)
      set(launcher "${ATTN_ROOT}/cmake/ptxas_log.sh" ${CMAKE_CUDA_COMPILER_LAUNCHER}) # (ccache...)
      set_target_properties(${name}_gpu PROPERTIES CUDA_ARCHITECTURES "${ATTN_TABLED_ARCHITECTURES}"
                            ATTN_TABLED TRUE CUDA_COMPILER_LAUNCHER "${launcher}")
      target_compile_options(${name}_gpu PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
    endif()
  endforeach()
endfunction()

# attn_model_library(<name> SOURCES ... LIBRARIES ...)
# Makes lib<name>_<backend>.so (one per built backend): the library a model loads with ctypes
# (example 09's decode library, 12's V4 library), its LIBRARIES' <lib>_<backend> inside it. Its
# references to the CUDA runtime bind to its own (the simulator's, when sim) at link time and
# nothing of the static libraries inside it is exported: a process that has loaded another CUDA
# runtime (PyTorch's) would otherwise hand it that one's functions. Not in the sanitizer builds:
# the Python process that loads it has no sanitizer runtime.
function(attn_model_library name)
  if(ATTN_SANITIZER)
    return()
  endif()
  cmake_parse_arguments(A "" "" "SOURCES;LIBRARIES" ${ARGN})
  foreach(backend IN LISTS ATTN_BACKEND_LIST)
    add_library(${name}_${backend} SHARED ${A_SOURCES})
    attn_backend_setup(${name}_${backend} ${backend})
    foreach(lib IN LISTS A_LIBRARIES)
      target_link_libraries(${name}_${backend} PRIVATE ${lib}_${backend})
    endforeach()
    set_target_properties(${name}_${backend} PROPERTIES LINKER_LANGUAGE CXX)
    target_link_options(${name}_${backend} PRIVATE -Wl,-Bsymbolic -Wl,--exclude-libs,ALL)
  endforeach()
endfunction()

# The body of both: one target per built backend, linked to that backend's harness and to the
# same backend's variant of each library named.
function(_attn_cuda_target kind name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBRARIES" ${ARGN})
  foreach(backend IN LISTS ATTN_BACKEND_LIST)
    set(tgt ${name}_${backend})
    attn_cuda_sources(srcs ${backend} ${A_SOURCES})
    if(kind STREQUAL "LIBRARY")
      add_library(${tgt} STATIC ${srcs})
      target_include_directories(${tgt} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}")
    else()
      add_executable(${tgt} ${srcs})
      if(backend STREQUAL "sim")
        set_target_properties(${tgt} PROPERTIES LINKER_LANGUAGE CXX)
      endif()
    endif()
    attn_backend_setup(${tgt} ${backend})
    target_link_libraries(${tgt} PUBLIC attn_harness_${backend})
    foreach(lib IN LISTS A_LIBRARIES)
      target_link_libraries(${tgt} PUBLIC ${lib}_${backend})
    endforeach()
  endforeach()
endfunction()

# attn_add_test(<name> COMMAND <target-without-backend> [ARGS ...] LABELS ... [BACKENDS sim gpu]
#               [PASS_REGEX re] [TIMEOUT s])
# Registers <name>.<backend> for each built backend (or those given). Exit 77 = skipped (no GPU).
# attn_text_line(<out> <file> <text>): the line of <file> where <text> starts (its first
# occurrence; a configure error if it has none), so that a test's expected report follows the
# source it names.
function(attn_text_line out file text)
  file(READ "${file}" body)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  string(FIND "${body}" "${text}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "'${text}' not found in ${file}")
  endif()
  string(SUBSTRING "${body}" 0 ${pos} before)
  string(REGEX MATCHALL "\n" newlines "${before}")
  list(LENGTH newlines n)
  math(EXPR line "${n} + 1")
  set(${out} ${line} PARENT_SCOPE)
endfunction()

function(attn_add_test name)
  cmake_parse_arguments(A "" "COMMAND;PASS_REGEX;TIMEOUT" "ARGS;LABELS;BACKENDS" ${ARGN})
  if(NOT A_BACKENDS)
    set(A_BACKENDS ${ATTN_BACKEND_LIST})
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  foreach(backend IN LISTS A_BACKENDS)
    if(NOT backend IN_LIST ATTN_BACKEND_LIST)
      continue()
    endif()
    add_test(NAME ${name}.${backend} COMMAND ${A_COMMAND}_${backend} ${A_ARGS})
    set(labels ${A_LABELS})
    if(backend STREQUAL "gpu")
      list(APPEND labels gpu)
    endif()
    set_tests_properties(${name}.${backend} PROPERTIES
      LABELS "${labels}" SKIP_RETURN_CODE 77 TIMEOUT ${A_TIMEOUT})
    if(A_PASS_REGEX)
      set_tests_properties(${name}.${backend} PROPERTIES PASS_REGULAR_EXPRESSION "${A_PASS_REGEX}")
    endif()
  endforeach()
endfunction()

# Used by an example's CMakeLists.txt when it is the top-level project: brings in the harness
# and the simulator from the chapter's common/ folder (ATTN_STANDALONE: the chapter's own tools,
# such as the simulator's benchmark, stay out of that build).
macro(attn_standalone_setup)
  if(NOT TARGET attn_harness_sim AND NOT TARGET attn_harness_gpu)
    set(ATTN_STANDALONE TRUE)
    enable_testing()
    add_subdirectory("${ATTN_ROOT}/common" "${CMAKE_BINARY_DIR}/_attn_common")
  endif()
endmacro()

# attn_example_program(<program> SOURCES <kernel sources...> [LIBRARIES <libraries...>]
#                      [BENCH <registry symbol>])
# An example folder's kernels and its program, after bringing in the harness and the simulator
# when the example is built on its own (attn_standalone_setup): the library <program>_kernels
# from SOURCES, linked to LIBRARIES (attn_cuda_library), and the program <program> from the
# folder's main.c over it (attn_cuda_executable). BENCH: its kernels in the benchmark
# (attn_example_bench(<program>_kernels <registry symbol>)); an example without it declares
# attn_example_bench(NONE "<reason>") itself.
function(attn_example_program program)
  cmake_parse_arguments(A "" "BENCH" "SOURCES;LIBRARIES" ${ARGN})
  attn_standalone_setup()
  attn_cuda_library(${program}_kernels SOURCES ${A_SOURCES} LIBRARIES ${A_LIBRARIES})
  attn_cuda_executable(${program} SOURCES main.c LIBRARIES ${program}_kernels)
  if(A_BENCH)
    attn_example_bench(${program}_kernels ${A_BENCH})
  endif()
endfunction()

# attn_use_example(<folder> <library>)
# An example that reuses another example's kernels (04 and 05 reuse 03's): the other example's
# library, from examples/<folder>, built here when this example stands alone.
function(attn_use_example folder library)
  attn_standalone_setup() # here, before the other example's folder (enable_testing at the top)
  list(GET ATTN_BACKEND_LIST 0 first_backend)
  if(NOT TARGET ${library}_${first_backend})
    set_property(GLOBAL PROPERTY ATTN_ADDED_${folder} TRUE)
    add_subdirectory("${ATTN_ROOT}/examples/${folder}" "${CMAKE_BINARY_DIR}/_${folder}")
  endif()
endfunction()

# ---- what an example folder declares (examples/README.md, "Adding an example") -------------------
# The build, the tour, the benchmark and the tests find examples/<NN_name>/ by itself; these two
# calls in the example's CMakeLists.txt are what it says about itself.

# attn_example_tour(<program> SIM <args...> GPU <args...>)
# One run of the chapter tour (scripts/run.sh): <program> (an attn_cuda_executable of this folder)
# with SIM's arguments on the simulator (the tour adds --reps 1) and GPU's on a GPU. Call it once
# per run, in the order the tour should show them.
function(attn_example_tour program)
  cmake_parse_arguments(A "" "" "SIM;GPU" ${ARGN})
  if(NOT A_SIM OR NOT A_GPU)
    message(FATAL_ERROR "attn_example_tour(${program}): give SIM and GPU arguments")
  endif()
  cmake_path(GET CMAKE_CURRENT_SOURCE_DIR FILENAME folder)
  string(SUBSTRING "${folder}" 0 2 nn)
  list(JOIN A_SIM " " sim)
  list(JOIN A_GPU " " gpu)
  set_property(GLOBAL APPEND PROPERTY ATTN_TOUR "${nn}|${folder}|${program}|${sim}|${gpu}")
  _attn_program_launcher(${program})
endfunction()

# The program's name without a backend (`./flash_fwd`, as a course's notes write it after
# `cmake .. && make` in an example folder): a script beside <program>_sim and <program>_gpu that
# runs the GPU build where a GPU answers (nvidia-smi -L lists one) and that build exists, else the
# simulator's, with the arguments given.
function(_attn_program_launcher program)
  set(launcher "${CMAKE_CURRENT_BINARY_DIR}/${program}")
  attn_write_if_changed("${launcher}" "#!/bin/sh
# ${program}: runs ${program}_gpu where a GPU answers, else ${program}_sim (the CPU simulator).
# Written by cmake/attn.cmake (_attn_program_launcher).
here=\$(dirname \"\$0\")
if [ -x \"\$here/${program}_gpu\" ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    exec \"\$here/${program}_gpu\" \"\$@\"
fi
if [ -x \"\$here/${program}_sim\" ]; then
    exec \"\$here/${program}_sim\" \"\$@\"
fi
echo \"error: ${program} is not built yet: build ${program}_sim (make ${program}_sim)\" >&2
exit 2
")
  file(CHMOD "${launcher}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
       GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endfunction()

# attn_example_bench(<kernel library> <registry symbol>)
# The benchmark (benchmarks/bench_attention.c) runs every kernel of the attn_example <registry
# symbol>, linked from <kernel library> (an attn_cuda_library of this folder). An example whose
# kernels are a staged pipeline rather than attention kernels says why it is not benchmarked
# instead: attn_example_bench(NONE "<reason>").
function(attn_example_bench library symbol)
  cmake_path(GET CMAKE_CURRENT_SOURCE_DIR FILENAME folder)
  # a reason may span lines, and a ';' would split it (a CMake list): one line, commas
  string(REPLACE ";" "," symbol "${symbol}")
  string(REGEX REPLACE "[ \n]+" " " symbol "${symbol}")
  set_property(GLOBAL APPEND PROPERTY ATTN_BENCH_DECLARED "${folder}|${library}|${symbol}")
  if(library STREQUAL "NONE")
    set_property(GLOBAL APPEND PROPERTY ATTN_BENCH_SKIPPED "${folder}: ${symbol}")
  else()
    set_property(GLOBAL APPEND PROPERTY ATTN_BENCH_EXAMPLES "${library}:${symbol}")
  endif()
endfunction()

# attn_add_examples(): every examples/<NN_name>/ with a CMakeLists.txt, in learning-path order
# (the top-level CMakeLists.txt), then what they declared written into the build folder:
# tour.txt (scripts/run.sh reads it), one line per run, NN|folder|program|simulator
# arguments|GPU arguments; bench.txt, one line per example, folder|kernel library or NONE|registry
# symbol or why not (tests/docs/examples_declared.py checks both against the folders).
function(attn_add_examples)
  file(GLOB dirs LIST_DIRECTORIES true "${ATTN_ROOT}/examples/[0-9][0-9]_*")
  list(SORT dirs)
  foreach(dir IN LISTS dirs)
    cmake_path(GET dir FILENAME folder)
    get_property(added GLOBAL PROPERTY ATTN_ADDED_${folder})
    if(EXISTS "${dir}/CMakeLists.txt" AND NOT added) # (a later example's attn_use_example)
      set_property(GLOBAL PROPERTY ATTN_ADDED_${folder} TRUE)
      add_subdirectory("${dir}" "${CMAKE_BINARY_DIR}/examples/${folder}")
    endif()
  endforeach()
  foreach(what tour bench)
    string(TOUPPER "${what}" key)
    if(what STREQUAL "bench")
      set(key BENCH_DECLARED)
    endif()
    get_property(lines GLOBAL PROPERTY ATTN_${key})
    list(JOIN lines "\n" text)
    attn_write_if_changed("${CMAKE_BINARY_DIR}/${what}.txt" "${text}\n")
  endforeach()
endfunction()
