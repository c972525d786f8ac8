/* decode_api.h — example 09's kernels as a library a model calls for every layer of every decoding
 * step (libdecode_attn_<backend>.so; from Python through ctypes: quality/decode_kernels.py).
 *
 * A session holds, for each layer, a paged K/V cache (and a paged index-key cache for DeepSeek
 * sparse attention) and one block table shared by the layers; pages are handed out from a pool in
 * a seeded shuffled order as the sequences grow. One step:
 *
 *   dec_session_begin(s, n)                   n new tokens per sequence: their pages, lengths + n
 *   for every layer:
 *       dec_session_append(s, layer, k, v, ki)     the new tokens' K, V (index keys) into the pages
 *       dec_session_attend(s, layer, mode, ...)    their queries over the layer's cache (n <= 8)
 *   dec_session_end(s)
 *
 * A prompt is appended the same way (n = its length, append only: its attention is the prefill's,
 * not a decoding step's). Inputs and outputs are fp32 host arrays in the layouts of decode.h; the
 * cache holds them in the session's dtype. Every call returns 0, or nonzero with a one-line
 * message in dec_session_error(s): 2 for input the kernels refuse (a selection outside the cache,
 * more new tokens than the session holds), 1 for a device error.
 */
#ifndef DECODE_API_H
#define DECODE_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dec_session dec_session;

enum { DEC_MODE_DENSE = 0, DEC_MODE_DSA = 1, DEC_MODE_SELECTION = 2 };

/* dtype: 0 f32, 1 f16, 2 bf16 (attn_dtype). max_tokens: the longest a sequence may grow.
 * index_dim 0: no index-key cache (no DSA). NULL on failure, with the reason in err. */
dec_session *dec_session_open(int layers, int batch, int heads, int kv_heads, int head_dim,
                              int dtype, int page_size, int max_tokens, int index_heads,
                              int index_dim, unsigned long long seed, char *err, int err_len);
void dec_session_close(dec_session *s);
/* The FP8 cache (decode.h, "FP8 cache": e4m3 with a power-of-two scale per token and K/V head)
 * instead of the dtype's: appends quantise (version 11), dense attention reads it (version 12).
 * Before the first token; dense only (a session with an index-key cache, or a DSA or selection
 * step, is refused with 2). */
int dec_session_use_fp8(dec_session *s);
const char *dec_session_error(const dec_session *s);
/* Current length of sequence b. */
int dec_session_length(const dec_session *s, int b);

int dec_session_begin(dec_session *s, int n_new);
/* k, v [B, n, H_kv, D]; ki [B, n, D_I] or NULL. */
int dec_session_append(dec_session *s, int layer, const float *k, const float *v, const float *ki);
/* q [B, n, H, D] -> out [B, n, H, D], lse [H, B * n] (NULL: not wanted).
 *   DEC_MODE_DENSE      version 5 (paged, GQA tiles, split-KV by our rule)
 *   DEC_MODE_DSA        version 6 (indexer: q_index [B, n, H_I, D_I], w [B, n, H_I]), example
 *                       05's radix top-k of topk tokens, version 9 over them
 *   DEC_MODE_SELECTION  version 9 over sel [B * n, topk] (ascending positions, then -1), e.g. a
 *                       sink + window pattern made by the caller */
int dec_session_attend(dec_session *s, int layer, int mode, int topk, const float *q,
                       const float *q_index, const float *w, const int32_t *sel, float *out,
                       float *lse);
int dec_session_end(dec_session *s);
/* The last DSA selection ([B * n, topk] int32) into out. */
int dec_session_selection(const dec_session *s, int32_t *out);
/* Seconds spent in the kernels and their copies (each call synchronises), since open. */
double dec_session_seconds(const dec_session *s);
/* "sim" or "gpu"; the device's name. */
const char *dec_session_backend(void);
const char *dec_session_device(const dec_session *s);

#ifdef __cplusplus
}
#endif
#endif /* DECODE_API_H */
