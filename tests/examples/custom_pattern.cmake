# ---- 06 a pattern of our own: the ladder ---------------------------------------------------------
# Included by tests/examples/CMakeLists.txt (example_case, example_rejects, example_common,
# planted_copy come from there). Every case runs dense FA2 and block_sparse (example 04's
# versions 1 and 2, reused) with --check-only against the reference under the pattern (the
# ladder's predicate, FlashAttention's 2x rule).
# Tiles are 64 x 64: L = 1 and 17 fit in one, 129 and 300 end in a partial one. Pattern blocks
# b = 64 line up with the tiles (only the diagonal is partial), b = 24 and 100 do not (partial
# tiles apply the predicate inside), and Lq != Lk shifts the blocks off the tiles. The ladder's
# block mask against the exact one (every entry tested): unit.patterns (tests/unit).
example_case(06 custom_pattern L1             -B 1 -H 2 -L 1 -D 64 --pattern ladder:b=64,w=1)
example_case(06 custom_pattern L17_causal     -B 2 -H 1 -L 17 -D 64 --causal
             --pattern ladder:b=4,s=1,w=1)
example_case(06 custom_pattern L300_causal    -B 1 -H 1 -L 300 -D 64 --causal
             --pattern ladder:b=64,s=1,w=1)
example_case(06 custom_pattern L300_b24_causal_bf16 -B 1 -H 1 -L 300 -D 64 --causal --dtype bf16
             --pattern ladder:b=24,s=2,w=2)
example_case(06 custom_pattern L129_D128_b100 -B 1 -H 2 -L 129 -D 128
             --pattern ladder:b=100,s=0,w=1)
# Lq != Lk (bottom-right alignment: the blocks are counted on aligned positions a = i + Lk - Lq)
example_case(06 custom_pattern lq64_lk300_causal -B 1 -H 1 --lq 64 --lk 300 -D 64 --causal
             --pattern ladder:b=32,s=1,w=1)
example_case(06 custom_pattern lq129_lk17_causal_bf16 -B 1 -H 1 --lq 129 --lk 17 -D 64 --causal
             --dtype bf16 --pattern ladder:b=8,s=1,w=1)
example_case(06 custom_pattern lq1_lk1000_causal -B 1 -H 2 --lq 1 --lk 1000 -D 64 --causal
             --pattern ladder:b=64,s=1,w=2)
# varlen: an empty sequence, different key lengths, one block-mask slice per sequence
example_case(06 custom_pattern varlen_causal  -H 2 -D 64 --seqlens 130,0,70 --seqlens-k 200,5,70
             --causal --pattern ladder:b=16,s=1,w=2)
example_case(06 custom_pattern varlen_bf16    -H 1 -D 128 --seqlens 65,1,0 --dtype bf16
             --pattern ladder:b=64,s=1,w=1)
# Threads of a block released in shuffled order after every barrier (see example 02).
example_case(06 custom_pattern shuffled_order -B 1 -H 1 -L 200 -D 64 --causal
             --pattern ladder:b=64,s=1,w=1)
if("sim" IN_LIST ATTN_BACKEND_LIST)
  set_tests_properties(example06.shuffled_order.sim PROPERTIES
                       ENVIRONMENT "CUDASIM_ORDER=shuffle;CUDASIM_SEED=3")
endif()

example_rejects(06 custom_pattern w0         "error: --pattern: .*w must be an integer in \\[1,"
                --pattern ladder:b=64,w=0)
example_rejects(06 custom_pattern b0         "error: --pattern: .*b must be an integer in \\[1,"
                --pattern ladder:b=0,w=2)
example_rejects(06 custom_pattern missing_b  "error: --pattern: .*missing parameter b"
                --pattern ladder:w=2)
example_rejects(06 custom_pattern unknown_param "error: --pattern: .*unknown parameter 'r'"
                --pattern ladder:b=64,w=2,r=1)
example_rejects(06 custom_pattern f32        "error: .*f32" --dtype f32 -L 16 --kernel 2
                --pattern ladder:b=64,w=1)

example_common(06 06_custom_pattern custom_pattern --check-only -L 65 -D 64 --causal)

# Example 04's block-sparse loop, the one example 06 runs, without the __syncthreads() at the end
# of each listed key tile, linked into example 06's program: the next listed tile's cp.async
# copies overwrite k_s and v_s while other warps still read the current one. ThreadSanitizer must
# report that race on the ladder's tiles (sim-tsan protects example 06).
if(ATTN_SANITIZER STREQUAL "tsan")
  planted_copy(ladder_no_sync "${ATTN_ROOT}/examples/04_sparse_patterns/sparse_patterns.cu"
               "__syncthreads(); // all warps done with K_j and V_j before the next tile's copies"
               "/* planted race: the end-of-tile __syncthreads() was here */"
               custom_pattern_planted)
  attn_cuda_executable(custom_pattern_no_sync SOURCES
                       "${ATTN_ROOT}/examples/06_custom_pattern/main.c"
                       "${ATTN_ROOT}/examples/06_custom_pattern/custom_pattern.cu"
                       "${ladder_no_sync}"
                       LIBRARIES flash2_fwd_kernels attn_sparse)
  attn_add_test(example06.planted_race COMMAND custom_pattern_no_sync
                ARGS --check-only --quiet --kernel 2 -B 1 -H 1 -L 200 -D 64 --causal
                --pattern ladder:b=64,s=1,w=1 LABELS examples BACKENDS sim
                PASS_REGEX "ThreadSanitizer: data race.*custom_pattern_planted\\.cu:[0-9]+")
endif()

# ladder.py (the rule, exact density, the GPU grid's parameters) against example 04's PyTorch
# predicate and the C harness's count of computed entries. Needs torch: the python suite's
# interpreter (ATTN_PYTHON, or .venv).
set(_py06 "${ATTN_PYTHON}")
if(NOT _py06 AND EXISTS "${ATTN_ROOT}/.venv/bin/python")
  set(_py06 "${ATTN_ROOT}/.venv/bin/python")
endif()
if(_py06 AND "sim" IN_LIST ATTN_BACKEND_LIST AND NOT ATTN_SANITIZER)
  add_test(NAME example06.ladder_py
           COMMAND "${_py06}" "${CMAKE_CURRENT_SOURCE_DIR}/test_ladder.py"
                   $<TARGET_FILE:custom_pattern_sim>)
  set_tests_properties(example06.ladder_py PROPERTIES LABELS "examples;python" TIMEOUT 300)
endif()
