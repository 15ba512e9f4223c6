// Causal flash attention for bf16 on x86 CPUs with AVX512-BF16 (Zen 4, Sapphire Rapids).
//
// Why a kernel of our own: torch's CPU flash kernel computes scores one query row at a
// time and reaches about a quarter of these cores' bf16 peak; here scores are computed
// a block of 32 keys against 8 query rows at a time with `vdpbf16ps` (two bf16 products
// summed into each float32 lane), so every loaded key feeds eight rows and no
// horizontal reduction sits on the inner loop.
//
// Layouts (row strides in elements; the last dimension is contiguous):
//   q   [num_q, H, D]       the new tokens' queries
//   k,v [num_k, Hkv, D]     the whole context, cached prefix first
//   out [num_q, H, D]
// Query token t sits at absolute position offset + t and sees keys 0..offset+t (and,
// with a window w > 0, only keys with position - key < w). The G = H / Hkv query heads
// sharing a KV head are attended together ("rows" = tokens x G), as GQA allows.
//
// Packing (attention_common.h) is one pass over K/V per call, amortised over every query
// row that reads the block.
//
// Softmax is float32 and online (running max and sum per row, as FlashAttention); the
// probabilities are rounded to bf16 for the P.V product, as torch's flash kernel does.
#include "attention_common.h"

#define TOKENS 16  // query tokens per work item

// One work item: TOKENS query tokens of one KV head's group, all their key blocks.
static void attend_item(const bf16 *q, int64_t q_stride, bf16 *out, int64_t out_stride,
                        const bf16 *kpack, const bf16 *vpack, int64_t num_q, int64_t num_k,
                        int64_t offset, int64_t window, int group, int d, int hkv, int64_t t0,
                        float scale, bf16 *qrows, float *scores, bf16 *probs, float *acc,
                        float *row_max, float *row_sum, float *corr, int64_t *row_lo,
                        int64_t *row_hi) {
    int64_t t1 = t0 + TOKENS < num_q ? t0 + TOKENS : num_q;
    int rows = (int)(t1 - t0) * group;
    int padded = (rows + TILE - 1) / TILE * TILE;
    for (int r = 0; r < padded; r++) {
        // padding rows repeat the last real row; their results are dropped
        int rr = r < rows ? r : rows - 1;
        int64_t t = t0 + rr / group;
        int head = hkv * group + rr % group;
        memcpy(qrows + r * d, q + t * q_stride + head * d, d * sizeof(bf16));
        // key k is visible when k <= pos, k < num_k and pos - k < window
        int64_t pos = offset + t;
        row_hi[r] = pos < num_k - 1 ? pos : num_k - 1;
        row_lo[r] = window > 0 ? pos - window + 1 : 0;
        row_max[r] = -INFINITY;
        row_sum[r] = 0.0f;
    }
    memset(acc, 0, sizeof(float) * padded * d);
    int64_t first_pos = offset + t0, last_pos = offset + t1 - 1;
    int64_t kb_end = last_pos / KB + 1;  // blocks past the last row's position are unseen
    int64_t kb_begin = 0;
    if (window > 0) {
        int64_t lowest = first_pos - window + 1;
        kb_begin = lowest > 0 ? lowest / KB : 0;
    }
    int64_t num_kb = (num_k + KB - 1) / KB;
    if (kb_end > num_kb) kb_end = num_kb;
    for (int64_t kb = kb_begin; kb < kb_end; kb++) {
        int64_t k0 = kb * KB;
        const bf16 *kp = kpack + (kb * d / 2) * KB * 2;
        const bf16 *vp = vpack + (kb * KB / 2) * d * 2;
        for (int r = 0; r < padded; r += TILE)
            score_tile(qrows + r * d, d, kp, scores + r * KB);
        // a block needs masking when some row cannot see all its keys
        int partial = k0 + KB - 1 > first_pos || k0 + KB > num_k ||
                      (window > 0 && last_pos - k0 >= window);
        softmax_block(padded, scores, scale, k0, partial, row_lo, row_hi, row_max, row_sum,
                      corr, probs);
        pv_rows(d, padded, acc, corr, probs, vp);
    }
    for (int r = 0; r < rows; r++) {
        int64_t t = t0 + r / group;
        int head = hkv * group + r % group;
        write_row(out + t * out_stride + head * d, acc + r * d, row_sum[r], d);
    }
}

// Returns 0, -1 for a shape this kernel does not handle, -2 when out of memory.
// k/v rows are contiguous (block_table NULL) or the slots of a paged cache, slot s at
// k + s * k_stride, key i in slot block_table[i / block_size] * block_size + i % block_size.
int cachegate_flash_attention(const bf16 *q, int64_t q_stride, const bf16 *k,
                              int64_t k_stride, const bf16 *v, int64_t v_stride,
                              const int64_t *block_table, int64_t block_size, bf16 *out,
                              int64_t out_stride, int64_t num_q, int64_t num_k, int num_heads,
                              int num_kv_heads, int d, int64_t offset, int64_t window,
                              float scale, int num_threads) {
    if (d != 64 && d != 128) return -1;
    if (num_heads % num_kv_heads || (block_table && block_size < 1)) return -1;
    if (num_q <= 0) return 0;
    int group = num_heads / num_kv_heads;
    int64_t num_kb = (num_k + KB - 1) / KB;
    size_t head_pack = (size_t)num_kb * KB * d;  // elements per KV head, K or V
    bf16 *kpack = (bf16 *)aligned_alloc(64, head_pack * num_kv_heads * sizeof(bf16));
    bf16 *vpack = (bf16 *)aligned_alloc(64, head_pack * num_kv_heads * sizeof(bf16));
    if (!kpack || !vpack) {
        free(kpack);
        free(vpack);
        return -2;
    }
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (int64_t i = 0; i < num_kb * num_kv_heads; i++) {
        int h = (int)(i / num_kb);
        int64_t kb = i % num_kb;
        rows_t k_rows = {k + h * d, k_stride, block_table, block_size};
        rows_t v_rows = {v + h * d, v_stride, block_table, block_size};
        pack_k(&k_rows, num_k, kb * KB, d, kpack + h * head_pack + kb * KB * d);
        pack_v(&v_rows, num_k, kb * KB, d, vpack + h * head_pack + kb * KB * d);
    }
    int64_t num_items_t = (num_q + TOKENS - 1) / TOKENS;
    int64_t num_items = num_items_t * num_kv_heads;
    int max_rows = (TOKENS * group + TILE - 1) / TILE * TILE;
    int failed = 0;
#pragma omp parallel num_threads(num_threads)
    {
        bf16 *qrows = (bf16 *)malloc(sizeof(bf16) * max_rows * d);
        float *scores = (float *)malloc(sizeof(float) * max_rows * KB);
        bf16 *probs = (bf16 *)malloc(sizeof(bf16) * max_rows * KB);
        float *acc = (float *)malloc(sizeof(float) * max_rows * d);
        float *row_max = (float *)malloc(sizeof(float) * max_rows * 3);
        float *row_sum = row_max ? row_max + max_rows : NULL;
        float *corr = row_max ? row_max + 2 * max_rows : NULL;
        int64_t *row_lo = (int64_t *)malloc(sizeof(int64_t) * max_rows * 2);
        int64_t *row_hi = row_lo ? row_lo + max_rows : NULL;
        int ok = qrows && scores && probs && acc && row_max && row_lo;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        // the latest tokens see the most keys: hand them out first, one at a time
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < num_items; i++) {
            if (!ok) continue;  // out of memory: reported below, never a crash
            int64_t item_t = num_items_t - 1 - i / num_kv_heads;
            int hkv = (int)(i % num_kv_heads);
            attend_item(q, q_stride, out, out_stride, kpack + hkv * head_pack,
                        vpack + hkv * head_pack, num_q, num_k, offset, window, group, d, hkv,
                        item_t * TOKENS, scale, qrows, scores, probs, acc, row_max, row_sum,
                        corr, row_lo, row_hi);
        }
        free(qrows);
        free(scores);
        free(probs);
        free(acc);
        free(row_max);
        free(row_lo);
    }
    free(kpack);
    free(vpack);
    return failed ? -2 : 0;
}
