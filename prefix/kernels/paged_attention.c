// Attention for a batch of short query chunks over paged contexts, bf16 on AVX512-BF16
// CPUs: decode steps (one new token per sequence) and prefill chunks of a few dozen
// tokens after a cached prompt (the questions that arrive together after one system
// prompt). Every sequence's context is read straight from the paged cache through its
// block table: no gather, no padding to the longest sequence.
//
// Two phases per layer, one online softmax per query row across both:
//   1. the shared prefix: the leading keys every sequence holds in the same physical
//      blocks (a cached system prompt) are packed once per KV head and scored against
//      all the batch's query rows of that head (rows = tokens x G, G = query heads per
//      KV head), 8 rows per micro-tile, so each packed key feeds every sequence; every
//      query sits after the shared prefix, so no mask is needed here;
//   2. each sequence's own keys, packed 32 at a time as they are read, against that
//      sequence's rows, causal (token t of a chunk of q_len sees keys up to
//      seq_len - q_len + t).
// No log-sum-exp merge: each row's running max, sum and output continue from phase 1
// into phase 2.
//
// Layouts (strides in elements, the last dimension contiguous):
//   q, out [T, H, D]: sequence s's queries are rows q_starts[s] .. q_starts[s]+q_lens[s]-1;
//   k_slots, v_slots [num_slots, Hkv, D] (the cache's layer); block_tables [S, stride];
//   seq_lens [S] (keys of each sequence, its new tokens included). shared_len: keys
//   [0, shared_len) lie in the same physical blocks for every sequence, and no query
//   sits before shared_len (the caller checks both).
#include "attention_common.h"

#define MAX_GROUP 16  // query heads per KV head

typedef struct {
    const bf16 *k_slots, *v_slots;
    int64_t slot_stride, block_size, table_stride;
    const int64_t *block_tables;
    int d, group;
    float scale;
} paged_t;

// Phase 2 for one (sequence, KV head): its rows' state (loaded from phase 1) continued
// over keys [k_begin, seq_len), 4-row tiles, causal per row.
static void attend_own_keys(const paged_t *p, int64_t s, int h, int64_t q_len, int64_t seq_len,
                            int64_t k_begin, const bf16 *q_rows, float *acc, float *row_max,
                            float *row_sum, bf16 *kp, bf16 *vp, float *scores, bf16 *probs,
                            float *corr, int64_t *lo, int64_t *hi) {
    const int64_t *table = p->block_tables + s * p->table_stride;
    rows_t k_rows = {p->k_slots + h * p->d, p->slot_stride, table, p->block_size};
    rows_t v_rows = {p->v_slots + h * p->d, p->slot_stride, table, p->block_size};
    int64_t rows = q_len * p->group, padded = (rows + 3) / 4 * 4;
    for (int64_t r = 0; r < padded; r++) {
        int64_t rr = r < rows ? r : rows - 1;  // padding rows repeat the last real row
        lo[r] = 0;
        hi[r] = seq_len - q_len + rr / p->group;
    }
    for (int64_t k0 = k_begin; k0 < seq_len; k0 += KB) {
        pack_k(&k_rows, seq_len, k0, p->d, kp);
        pack_v(&v_rows, seq_len, k0, p->d, vp);
        for (int64_t r = 0; r < padded; r += 4) {
            // a tile whose last (latest) row cannot see k0 sees nothing of this block
            if (hi[r + 3] < k0) continue;
            score_tile_4(q_rows + r * p->d, p->d, kp, scores);
            softmax_block(4, scores, p->scale, k0, k0 + KB - 1 > hi[r], lo + r, hi + r,
                          row_max + r, row_sum + r, corr, probs);
            pv_rows(p->d, 4, acc + r * p->d, corr, probs, vp);
        }
    }
}

// Returns 0, -1 for a shape this kernel does not handle, -2 when out of memory.
int cachegate_paged_attention(const bf16 *q, int64_t q_stride, const int64_t *q_starts,
                              const int64_t *q_lens, const int64_t *seq_lens, int64_t num_seqs,
                              int64_t shared_len, const bf16 *k_slots, const bf16 *v_slots,
                              int64_t slot_stride, const int64_t *block_tables,
                              int64_t table_stride, int64_t block_size, bf16 *out,
                              int64_t out_stride, int num_heads, int num_kv_heads, int d,
                              float scale, int num_threads) {
    if (d != 64 && d != 128) return -1;
    if (num_heads % num_kv_heads || block_size < 1) return -1;
    int group = num_heads / num_kv_heads;
    if (group > MAX_GROUP) return -1;
    if (num_seqs <= 0) return 0;
    paged_t p = {k_slots, v_slots, slot_stride, block_size, table_stride, block_tables,
                 d,       group,   scale};
    // token u of the batch (sequences in order) is query row tok_row[u]; its rows in
    // phase 1 are u * G .. u * G + G - 1 of each KV head
    int64_t total = 0, max_q = 0;
    for (int64_t s = 0; s < num_seqs; s++) {
        total += q_lens[s];
        if (q_lens[s] > max_q) max_q = q_lens[s];
    }
    int64_t *first = (int64_t *)malloc(sizeof(int64_t) * (num_seqs + total));
    int64_t *tok_row = first + num_seqs;
    int64_t u = 0;
    for (int64_t s = 0; s < num_seqs; s++) {
        first[s] = u;
        for (int64_t t = 0; t < q_lens[s]; t++) tok_row[u++] = q_starts[s] + t;
    }
    // phase 1 covers whole 32-key blocks of the shared prefix; the rest goes to phase 2
    int64_t shared_kb = num_seqs > 1 ? shared_len / KB : 0;
    int64_t rows = total * group, padded = (rows + TILE - 1) / TILE * TILE;
    size_t head_pack = (size_t)shared_kb * KB * d;
    float *acc = (float *)malloc(sizeof(float) * num_kv_heads * padded * (d + 2));
    bf16 *q_rows = (bf16 *)malloc(sizeof(bf16) * num_kv_heads * padded * d);
    bf16 *kpack = head_pack ? (bf16 *)malloc(sizeof(bf16) * head_pack * num_kv_heads) : NULL;
    bf16 *vpack = head_pack ? (bf16 *)malloc(sizeof(bf16) * head_pack * num_kv_heads) : NULL;
    if (!first || !acc || !q_rows || (head_pack && (!kpack || !vpack))) {
        free(first);
        free(acc);
        free(q_rows);
        free(kpack);
        free(vpack);
        return -2;
    }
    float *row_max = acc + (size_t)num_kv_heads * padded * d;
    float *row_sum = row_max + num_kv_heads * padded;
    int64_t local_rows = (max_q * group + 3) / 4 * 4;
    if (local_rows < TILE) local_rows = TILE;
    int failed = 0;
#pragma omp parallel num_threads(num_threads)
    {
        bf16 *kp = (bf16 *)malloc(sizeof(bf16) * KB * d * 2), *vp = kp ? kp + KB * d : NULL;
        float *scores = (float *)malloc(sizeof(float) * (TILE * KB + TILE));
        float *corr = scores ? scores + TILE * KB : NULL;
        bf16 *probs = (bf16 *)malloc(sizeof(bf16) * TILE * KB);
        int64_t *lo = (int64_t *)malloc(sizeof(int64_t) * local_rows * 2);
        int64_t *hi = lo ? lo + local_rows : NULL;
        float *l_acc = (float *)malloc(sizeof(float) * local_rows * (d + 2));
        float *l_max = l_acc ? l_acc + local_rows * d : NULL;
        float *l_sum = l_max ? l_max + local_rows : NULL;
        bf16 *l_q = (bf16 *)malloc(sizeof(bf16) * local_rows * d);
        int ok = kp && scores && probs && lo && l_acc && l_q;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        // (every thread reaches every worksharing loop; one that lacks memory skips work)
#pragma omp for schedule(static)
        for (int64_t i = 0; i < num_kv_heads * padded; i++) {
            int64_t h = i / padded, r = i % padded, rr = r < rows ? r : rows - 1;
            const bf16 *src = q + tok_row[rr / group] * q_stride + (h * group + rr % group) * d;
            memcpy(q_rows + i * d, src, d * sizeof(bf16));
            memset(acc + i * d, 0, d * sizeof(float));
            row_max[i] = -INFINITY;
            row_sum[i] = 0.0f;
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < shared_kb * num_kv_heads; i++) {
            int64_t h = i / shared_kb, kb = i % shared_kb;
            rows_t k_rows = {k_slots + h * d, slot_stride, block_tables, block_size};
            rows_t v_rows = {v_slots + h * d, slot_stride, block_tables, block_size};
            pack_k(&k_rows, shared_len, kb * KB, d, kpack + h * head_pack + kb * KB * d);
            pack_v(&v_rows, shared_len, kb * KB, d, vpack + h * head_pack + kb * KB * d);
        }
        // phase 1: tiles of 8 rows of one KV head over the whole shared prefix
        int64_t tiles = padded / TILE;
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < (shared_kb ? num_kv_heads * tiles : 0); i++) {
            if (!ok) continue;
            int64_t h = i / tiles, base = h * padded + (i % tiles) * TILE;
            for (int64_t kb = 0; kb < shared_kb; kb++) {
                score_tile(q_rows + base * d, d, kpack + h * head_pack + kb * KB * d, scores);
                softmax_block(TILE, scores, scale, kb * KB, 0, lo, hi, row_max + base,
                              row_sum + base, corr, probs);
                pv_rows(d, TILE, acc + base * d, corr, probs, vpack + h * head_pack + kb * KB * d);
            }
        }
        // phase 2: each sequence's own keys, then its rows are final
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < num_seqs * num_kv_heads; i++) {
            if (!ok) continue;
            int64_t s = i / num_kv_heads;
            int h = (int)(i % num_kv_heads);
            int64_t n = q_lens[s] * group, n_pad = (n + 3) / 4 * 4;
            int64_t src0 = h * padded + first[s] * group;  // this sequence's rows, head h
            for (int64_t r = 0; r < n_pad; r++) {
                int64_t src = src0 + (r < n ? r : n - 1);
                memcpy(l_q + r * d, q_rows + src * d, d * sizeof(bf16));
                memcpy(l_acc + r * d, acc + src * d, d * sizeof(float));
                l_max[r] = row_max[src];
                l_sum[r] = row_sum[src];
            }
            attend_own_keys(&p, s, h, q_lens[s], seq_lens[s], shared_kb * KB, l_q, l_acc, l_max,
                            l_sum, kp, vp, scores, probs, corr, lo, hi);
            for (int64_t r = 0; r < n; r++) {
                int64_t row = tok_row[first[s] + r / group];
                write_row(out + row * out_stride + (h * group + r % group) * d, l_acc + r * d,
                          l_sum[r], d);
            }
        }
        free(kp);
        free(scores);
        free(probs);
        free(lo);
        free(l_acc);
        free(l_q);
    }
    free(first);
    free(acc);
    free(q_rows);
    free(kpack);
    free(vpack);
    return failed ? -2 : 0;
}
