/* v4_api.h — example 12's kernels as a library a model calls for each V4 attention layer, step by
 * step (libdeepseek_v4_attn_<backend>.so; from Python through ctypes: v4_generate.py). The shape of
 * example 09's decode library (decode_api.h), for a layer whose cache is compressed entries.
 *
 * A session is one CSA or HCA layer of one batch: the rotated queries and keys of every token so
 * far, the streaming compressor's ring of the last 2m (HCA: m) tokens' projections, the
 * compressed entries in a paged pool (a page table hands pages out in reverse order), CSA's index
 * keys. One call per step of n new tokens per sequence:
 *
 *   n > 1  a prefill chunk: kernels 1-4 over the chunk's rows (v4_launch_prefill_rows)
 *   n = 1  a decoding step: kernel 5's streaming body for the one token (v4_launch_decode_rows)
 *
 * so prefill -> decode -> prefill hands the compressor's state over in both directions. Inputs
 * and outputs are fp32 host arrays in the layouts of deepseek_v4.h with L = n; the device holds
 * them in the session's dtype (fp16 or bf16). Every call returns 0, or nonzero with a one-line
 * message in v4_session_error(s): 2 for input refused (more tokens than the session holds), 1
 * for a device error.
 */
#ifndef V4_API_H
#define V4_API_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct v4_session v4_session;

/* kind 0 CSA, 1 HCA; dtype 1 f16, 2 bf16 (attn_dtype). The layer's constant weights, fp32:
 * cbias [m, c] (c = 2*D for CSA, D for HCA), cnorm [D], sinks [H]; CSA: ibias [m, 2*DI],
 * inorm [DI] (NULL for HCA). NULL on failure, with the reason in err. */
v4_session *v4_session_open(int kind, int batch, int heads, int head_dim, int m, int window,
                            int topk, int index_heads, int index_dim, int rope_dim,
                            double rope_theta, double eps, int page, int max_tokens, int dtype,
                            const float *cbias, const float *cnorm, const float *ibias,
                            const float *inorm, const float *sinks, char *err, int err_len);
void v4_session_close(v4_session *s);
const char *v4_session_error(const v4_session *s);
/* Tokens so far (every sequence of the batch has the same length). */
int v4_session_length(const v4_session *s);
/* n new tokens: q [B, n, H, D], kv [B, n, D] (normed, rotated at their positions), ckv, cgate
 * [B, n, c], CSA: ikv, igate [B, n, 2*DI], qI [B, n, HI, DI] (rotated), wI [B, n, HI] (times
 * HI^-1/2 DI^-1/2; NULL for HCA) -> out [B, n, H, D] (the rotary part rotated back). */
int v4_session_step(v4_session *s, int n, const float *q, const float *kv, const float *ckv,
                    const float *cgate, const float *ikv, const float *igate, const float *qI,
                    const float *wI, float *out);
/* "sim" or "gpu". */
const char *v4_session_backend(void);

#ifdef __cplusplus
}
#endif
#endif /* V4_API_H */
