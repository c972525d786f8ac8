# ---- 05 DeepSeek sparse attention ----------------------------------------------------------------
# Included by tests/examples/CMakeLists.txt (example_case, example_rejects, example_common,
# planted_copy come from there). Every case runs the whole pipeline with --check-only: the indexer
# against the double-precision scores, both top-k kernels under the tie rule, and both attention
# kernels against the reference with the selection as the mask. Tiles: 4 queries x 64 keys
# (indexer), 64 selected keys (attention); L = 1, 17 and 64 fit in one tile, 127, 129, 300 and
# 1000 end in a partial one. Sizes keep the whole set within a few minutes on one core; the
# sanitizer builds run the cases registered with example_case only.
example_case(05 deepseek_sparse L1             -B 1 -H 2 -L 1 -D 64 --topk 4)
example_case(05 deepseek_sparse L17_causal     -B 2 -H 3 -L 17 -D 64 --topk 5 --causal)
example_case_plain(05 deepseek_sparse L64_D128_bf16  -B 1 -H 2 -L 64 -D 128 --topk 16
                   --dtype bf16)
example_case_plain(05 deepseek_sparse L127_causal    -B 2 -H 2 -L 127 -D 64 --topk 32 --causal)
example_case_plain(05 deepseek_sparse L129_D128_causal_bf16 -B 1 -H 3 -L 129 -D 128 --topk 64
                   --causal --dtype bf16)
example_case_plain(05 deepseek_sparse L300_causal    -B 1 -H 1 -L 300 -D 64 --topk 40 --causal)
# H = 66 > 64: two head groups per token in sparse_mma, the second with 2 heads
example_case_plain(05 deepseek_sparse H66            -B 1 -H 66 -L 64 -D 64 --topk 20 --causal
             --index-heads 32)
example_case_plain(05 deepseek_sparse index64x128    -B 1 -H 1 -L 129 -D 128 --topk 50
             --index-heads 64 --index-dim 128 --dtype bf16)
example_case_plain(05 deepseek_sparse L1000_causal -B 1 -H 1 -L 1000 -D 64 --topk 64 --causal
                   --chunk 256)
# Lq != Lk (bottom-right causal: with Lq > Lk the first queries see no key: output 0, LSE -inf)
example_case_plain(05 deepseek_sparse lq64_lk300_causal -B 1 -H 2 --lq 64 --lk 300 -D 64 --topk 50
             --causal)
example_case(05 deepseek_sparse lq129_lk17_causal -B 1 -H 2 --lq 129 --lk 17 -D 64 --topk 4
             --causal --dtype bf16)
example_case_plain(05 deepseek_sparse lq17_lk1000    -B 1 -H 2 --lq 17 --lk 1000 -D 128 --topk 200)
# top-k edge cases: k = 1, k = visible (the last row of a causal square), k > every row (the
# program says so and runs dense attention too), ties (all equal, 4 values), -inf rows, large
# magnitudes, and more than 4096 candidates in the threshold bin (passes 2-4 from global memory;
# the bitonic baseline does not take rows that long)
example_case_plain(05 deepseek_sparse k1             -B 1 -H 2 -L 100 -D 64 --topk 1 --causal)
example_case_plain(05 deepseek_sparse k_eq_visible   -B 1 -H 2 -L 100 -D 64 --topk 100 --causal)
example_case_plain(05 deepseek_sparse k_gt_visible   -B 2 -H 2 -L 64 -D 64 --topk 200)
example_case_plain(05 deepseek_sparse scores_equal   -B 1 -H 1 -L 100 -D 64 --topk 20
                   --scores equal)
example_case_plain(05 deepseek_sparse scores_ties    -B 1 -H 1 -L 100 -D 64 --topk 33 --causal
             --scores ties)
example_case_plain(05 deepseek_sparse scores_neginf  -B 1 -H 1 -L 80 -D 64 --topk 10 --causal
             --scores neginf)
example_case_plain(05 deepseek_sparse scores_large   -B 1 -H 1 -L 80 -D 64 --topk 10
                   --scores large)
example_case_plain(05 deepseek_sparse large_inputs   -B 1 -H 2 -L 100 -D 64 --topk 20
                   --amplitude 12)
example_case_plain(05 deepseek_sparse equal_over_4096 -B 1 -H 1 --lq 4 --lk 5000 -D 64 --topk 100
             --scores equal)
# varlen: an empty sequence, different key lengths, causal alignment per sequence
example_case_plain(05 deepseek_sparse varlen_causal  -H 2 -D 64 --seqlens 17,0,129,64
             --seqlens-k 30,5,129,0 --causal --topk 20)
example_case_plain(05 deepseek_sparse varlen_bf16_D128 -H 3 -D 128 --seqlens 100,1,0,65 --topk 32
             --dtype bf16)
# Small cases that the sanitizer builds run too (the others take minutes under instrumentation).
example_case(05 deepseek_sparse varlen_small   -H 1 -D 64 --seqlens 17,0,40 --seqlens-k 30,5,40
             --causal --topk 8)
# Threads of a block released in shuffled order after every barrier (see example 02).
example_case(05 deepseek_sparse shuffled_order -B 1 -H 2 -L 70 -D 64 --topk 8 --causal)
if("sim" IN_LIST ATTN_BACKEND_LIST)
  set_tests_properties(example05.shuffled_order.sim PROPERTIES
                       ENVIRONMENT "CUDASIM_ORDER=shuffle;CUDASIM_SEED=3")
endif()

example_rejects(05 deepseek_sparse topk0        "error: --topk must be at least 1"  --topk 0)
example_rejects(05 deepseek_sparse topk_text    "error: --topk: 'x' is not an integer" --topk x)
example_rejects(05 deepseek_sparse index_heads  "error: .*--index-heads 16, 32, 48 or 64"
                --index-heads 24 -L 16)
example_rejects(05 deepseek_sparse index_dim    "error: .*--index-dim 64 or 128" --index-dim 96
                -L 16)
example_rejects(05 deepseek_sparse f32          "error: .*f16 or bf16" --dtype f32 -L 16)
example_rejects(05 deepseek_sparse D80          "error: .*D = 64 or 128" -D 80 -L 16)
example_rejects(05 deepseek_sparse scores       "error: --scores: unknown kind 'bogus'"
                --scores bogus)
example_rejects(05 deepseek_sparse negative_index
                "error: attention input: query \\(b=0, i=0\\) slot 0 holds index -5"
                --corrupt-index -5 -H 1 -L 40 --topk 8 --check-only)
example_rejects(05 deepseek_sparse index_out_of_range
                "error: attention input: query \\(b=0, i=0\\) slot 0 holds index 40"
                --corrupt-index 40 -H 1 -L 40 --topk 8 --check-only)
example_rejects(05 deepseek_sparse pattern      "error: --pattern: example 05"
                --pattern window:w=3 -L 16)

example_common(05 05_deepseek_sparse deepseek_sparse --check-only -L 33 -D 64 --topk 8)

# The top-k tie rule itself: right selections pass, each kind of wrong one fails.
attn_cuda_executable(test_topk_check SOURCES test_topk_check.c LIBRARIES deepseek_sparse_kernels)
attn_add_test(example05.topk_tie_rule COMMAND test_topk_check LABELS examples)

# Example 05's radix top-k without the __syncthreads() between counting into the histogram and
# warp 0's scan of it: warp 0 reads bins that other warps are still adding to. ThreadSanitizer
# must report that race (sim-tsan protects example 05).
if(ATTN_SANITIZER STREQUAL "tsan")
  planted_copy(ds_no_sync "${ATTN_ROOT}/examples/05_deepseek_sparse/deepseek_sparse.cu"
               "__syncthreads(); // every count is in the histogram before warp 0 scans it"
               "/* planted race: the histogram __syncthreads() was here */")
  attn_cuda_executable(deepseek_sparse_no_sync SOURCES
                       "${ATTN_ROOT}/examples/05_deepseek_sparse/main.c" "${ds_no_sync}"
                       "${ATTN_ROOT}/examples/05_deepseek_sparse/deepseek_reference.c"
                       LIBRARIES flash2_fwd_kernels)
  target_include_directories(deepseek_sparse_no_sync_sim PRIVATE
                             "${ATTN_ROOT}/examples/05_deepseek_sparse")
  attn_add_test(example05.planted_race COMMAND deepseek_sparse_no_sync
                ARGS --check-only --quiet -B 1 -H 1 -L 12 -D 64 --topk 2 TIMEOUT 600
                LABELS examples BACKENDS sim
                PASS_REGEX "ThreadSanitizer: data race.*deepseek_sparse_planted\\.cu:[0-9]+")
endif()

# The pipeline as one harness kernel (what a benchmark runs as "deepseek (k=512)"): against the
# dense reference while every query sees <= 512 keys (then DSA is exact), causal and not, varlen,
# H not a multiple of 16.
attn_cuda_executable(test_deepseek_kernel SOURCES test_deepseek_kernel.c
                     LIBRARIES deepseek_sparse_kernels)
attn_add_test(example05.harness_kernel COMMAND test_deepseek_kernel
              ARGS --check-only --quiet -B 2 -H 3 -L 129 -D 64 --causal --dtype f16
              LABELS examples)
attn_add_test(example05.harness_kernel_varlen COMMAND test_deepseek_kernel
              ARGS --check-only --quiet -H 2 -D 128 --seqlens 70,0,33 --dtype bf16
              LABELS examples)
# ... and past 512 keys it is sparse: a query that sees 600 keys drops 88, so the same check
# against dense attention must FAIL (exit 1): the kernel does select.
foreach(backend IN LISTS ATTN_BACKEND_LIST)
  if(backend STREQUAL "sim" AND NOT ATTN_SANITIZER)
    set(run --check-only -B 1 -H 1 -L 600 -D 64 --dtype f16)
    add_test(NAME example05.harness_kernel_is_sparse.${backend}
             COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:test_deepseek_kernel_${backend}>;${run}"
                     -DCODES=1 "-DREGEX=deepseek_k512 .* FAIL"
                     -P "${CMAKE_CURRENT_SOURCE_DIR}/../expect_exit.cmake")
    set_tests_properties(example05.harness_kernel_is_sparse.${backend} PROPERTIES LABELS examples)
  endif()
endforeach()
