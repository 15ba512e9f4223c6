// Building blocks shared by the attention kernels (flash_attention.c, paged_attention.c):
// bf16 conversion, a vectorised exp, packing a block of 32 keys into the operand layouts
// of `vdpbf16ps`, the score and P.V micro-tiles, and the online-softmax update.
//
// Packing: for one KV head and block of 32 keys, K is stored as [D/2][32][2] (a key's D
// values in pairs, 32 keys side by side) and V as [16][D][2] (pairs of keys for each of
// the D values); a score tile then reads each packed key once for 8 query rows, and no
// horizontal reduction sits on the inner loop.
#ifndef CACHEGATE_ATTENTION_COMMON_H
#define CACHEGATE_ATTENTION_COMMON_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KB 32          // keys per block
#define TILE 8         // query rows per score micro-tile

typedef uint16_t bf16;

static inline bf16 to_bf16(float x) {
    // round to nearest even, as the hardware's cvtneps2bf16
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    return (bf16)(u >> 16);
}

static inline float from_bf16(bf16 x) {
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// exp for float32 lanes: 2^n * p(r), r = x - n ln2 in [-ln2/2, ln2/2], degree-6
// polynomial (relative error ~2e-7); inputs below -87 give 0 through scalef.
static inline __m512 exp512(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
    const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
    x = _mm512_max_ps(x, _mm512_set1_ps(-100.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
    r = _mm512_fnmadd_ps(n, ln2_lo, r);
    __m512 p = _mm512_set1_ps(1.38889490e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.33336498e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.16666418e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.66666667e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// Where key `key`'s row of one KV head lies: contiguous rows, or a paged cache's slots
// through the sequence's block table (no gather of the context first).
typedef struct {
    const bf16 *base;            // row 0, this KV head's D values
    int64_t stride;              // elements from one row (slot) to the next
    const int64_t *block_table;  // NULL: contiguous rows
    int64_t block_size;
} rows_t;

static inline const bf16 *row_at(const rows_t *rows, int64_t key) {
    if (!rows->block_table) return rows->base + key * rows->stride;
    int64_t slot = rows->block_table[key / rows->block_size] * rows->block_size +
                   key % rows->block_size;
    return rows->base + slot * rows->stride;
}

// 16x16 transpose of 32-bit elements held in 16 registers (row i -> register i, then
// column i -> register i): interleave 32-bit, then 64-bit, then 128-bit lanes twice.
static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

static const bf16 ZERO_ROW[128] __attribute__((aligned(64))) = {0};

// The 32 key rows of block [k0, k0+32); keys past num_k read a row of zeros.
static inline void block_rows(const rows_t *rows, int64_t num_k, int64_t k0,
                              const bf16 *out[KB]) {
    for (int key = 0; key < KB; key++)
        out[key] = k0 + key < num_k ? row_at(rows, k0 + key) : ZERO_ROW;
}

// K of one KV head, keys [k0, k0+32) -> [D/2][32][2]: a (key x D-pair) matrix of 32-bit
// pairs, transposed 16x16 at a time
static inline void pack_k(const rows_t *k, int64_t num_k, int64_t k0, int d, bf16 *dst) {
    const bf16 *src[KB];
    block_rows(k, num_k, k0, src);
    uint32_t *out = (uint32_t *)dst;  // out[j * KB + key] = pair j of the key's row
    for (int kh = 0; kh < KB / 16; kh++) {
        for (int jh = 0; jh < d / 32; jh++) {
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = _mm512_loadu_si512((const uint32_t *)src[kh * 16 + i] + jh * 16);
            transpose16(r);
            for (int t = 0; t < 16; t++)
                _mm512_storeu_si512(out + (jh * 16 + t) * KB + kh * 16, r[t]);
        }
    }
}

// V of one KV head, keys [k0, k0+32) -> [16][D][2]: rows 2j and 2j+1 interleaved
static inline void pack_v(const rows_t *v, int64_t num_k, int64_t k0, int d, bf16 *dst) {
    const bf16 *src[KB];
    block_rows(v, num_k, k0, src);
    // word i of the result: word i/2 of a (even i) or of b (odd i), +16 for the high half
    __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                      8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
    for (int j = 0; j < KB / 2; j++) {
        for (int c = 0; c < d; c += 32) {
            __m512i a = _mm512_loadu_si512(src[2 * j] + c);
            __m512i b = _mm512_loadu_si512(src[2 * j + 1] + c);
            _mm512_storeu_si512(dst + (j * d + c) * 2, _mm512_permutex2var_epi16(a, lo_idx, b));
            _mm512_storeu_si512(dst + (j * d + c + 16) * 2,
                                _mm512_permutex2var_epi16(a, hi_idx, b));
        }
    }
}

// scores[R][32] = qrows[R][D] . kpacked^T, float32 (R = 8 for prefill's and the shared
// prefix's row tiles, 4 for one sequence's query heads in decode)
#define SCORE_TILE(R)                                                                    \
    static inline void score_tile_##R(const bf16 *qrows, int d, const bf16 *kp,         \
                                      float *scores) {                                   \
        __m512 acc[R][2];                                                                \
        for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();         \
        for (int j = 0; j < d / 2; j++) {                                                \
            __m512bh k0 = (__m512bh)_mm512_loadu_si512(kp + (j * KB) * 2);               \
            __m512bh k1 = (__m512bh)_mm512_loadu_si512(kp + (j * KB + 16) * 2);          \
            for (int r = 0; r < R; r++) {                                                \
                int32_t pair;                                                            \
                memcpy(&pair, qrows + r * d + 2 * j, 4);                                 \
                __m512bh qb = (__m512bh)_mm512_set1_epi32(pair);                         \
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], qb, k0);                         \
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], qb, k1);                         \
            }                                                                            \
        }                                                                                \
        for (int r = 0; r < R; r++) {                                                    \
            _mm512_storeu_ps(scores + r * KB, acc[r][0]);                                \
            _mm512_storeu_ps(scores + r * KB + 16, acc[r][1]);                           \
        }                                                                                \
    }
SCORE_TILE(8)
SCORE_TILE(4)

static inline void score_tile(const bf16 *qrows, int d, const bf16 *kp, float *scores) {
    score_tile_8(qrows, d, kp, scores);
}

// acc[RT][DV] = acc * corr + probs[RT][32] . vpacked (DV/16 accumulators a row, RT rows
// in registers: 16 accumulators for both instances)
#define PV_TILE(RT, DV)                                                                  \
    static inline void pv_tile_##RT##_##DV(float *acc, const float *corr,               \
                                            const bf16 *probs, const bf16 *vp) {         \
        __m512 o[RT][DV / 16];                                                           \
        for (int r = 0; r < RT; r++) {                                                   \
            __m512 c = _mm512_set1_ps(corr[r]);                                          \
            for (int x = 0; x < DV / 16; x++)                                            \
                o[r][x] = _mm512_mul_ps(_mm512_loadu_ps(acc + r * DV + 16 * x), c);      \
        }                                                                                \
        for (int j = 0; j < KB / 2; j++) {                                               \
            __m512bh vv[DV / 16];                                                        \
            for (int x = 0; x < DV / 16; x++)                                            \
                vv[x] = (__m512bh)_mm512_loadu_si512(vp + (j * DV + 16 * x) * 2);        \
            for (int r = 0; r < RT; r++) {                                               \
                int32_t pair;                                                            \
                memcpy(&pair, probs + r * KB + 2 * j, 4);                                \
                __m512bh pb = (__m512bh)_mm512_set1_epi32(pair);                         \
                for (int x = 0; x < DV / 16; x++)                                        \
                    o[r][x] = _mm512_dpbf16_ps(o[r][x], pb, vv[x]);                      \
            }                                                                            \
        }                                                                                \
        for (int r = 0; r < RT; r++)                                                     \
            for (int x = 0; x < DV / 16; x++)                                            \
                _mm512_storeu_ps(acc + r * DV + 16 * x, o[r][x]);                        \
    }
PV_TILE(4, 64)
PV_TILE(2, 128)

static inline void pv_rows(int d, int rows, float *acc, const float *corr, const bf16 *probs,
                           const bf16 *vp) {
    if (d == 64) {
        for (int r = 0; r < rows; r += 4)
            pv_tile_4_64(acc + r * 64, corr + r, probs + r * KB, vp);
    } else {
        for (int r = 0; r < rows; r += 2)
            pv_tile_2_128(acc + r * 128, corr + r, probs + r * KB, vp);
    }
}


// The online-softmax step for `rows` rows of one 32-key block (float32, as FlashAttention):
// scale the raw scores, hide keys outside [lo[r], hi[r]], update each row's running max
// and sum, and leave the rescale factor in corr[r] and the bf16 probabilities in probs.
// `masked` = 0 when every row sees every key of the block (no per-row bounds needed).
static inline void softmax_block(int rows, const float *scores, float scale, int64_t k0,
                                 int masked, const int64_t *lo, const int64_t *hi,
                                 float *row_max, float *row_sum, float *corr, bf16 *probs) {
    __m512 vscale = _mm512_set1_ps(scale);
    __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int r = 0; r < rows; r++) {
        __m512 s0 = _mm512_mul_ps(_mm512_loadu_ps(scores + r * KB), vscale);
        __m512 s1 = _mm512_mul_ps(_mm512_loadu_ps(scores + r * KB + 16), vscale);
        __mmask16 m0 = 0xFFFF, m1 = 0xFFFF;
        if (masked) {
            __m512i key0 = _mm512_add_epi32(lane, _mm512_set1_epi32((int)k0));
            __m512i key1 = _mm512_add_epi32(key0, _mm512_set1_epi32(16));
            __m512i vhi = _mm512_set1_epi32((int)hi[r]), vlo = _mm512_set1_epi32((int)lo[r]);
            m0 = _mm512_cmple_epi32_mask(key0, vhi) & _mm512_cmpge_epi32_mask(key0, vlo);
            m1 = _mm512_cmple_epi32_mask(key1, vhi) & _mm512_cmpge_epi32_mask(key1, vlo);
            s0 = _mm512_mask_blend_ps(m0, _mm512_set1_ps(-INFINITY), s0);
            s1 = _mm512_mask_blend_ps(m1, _mm512_set1_ps(-INFINITY), s1);
        }
        float block_max = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
        if (block_max == -INFINITY) {
            // nothing visible in this block for this row: leave its state alone
            corr[r] = 1.0f;
            memset(probs + r * KB, 0, KB * sizeof(bf16));
            continue;
        }
        float new_max = block_max > row_max[r] ? block_max : row_max[r];
        corr[r] = row_max[r] == -INFINITY ? 0.0f : expf(row_max[r] - new_max);
        __m512 vmax = _mm512_set1_ps(new_max);
        __m512 p0 = _mm512_maskz_mov_ps(m0, exp512(_mm512_sub_ps(s0, vmax)));
        __m512 p1 = _mm512_maskz_mov_ps(m1, exp512(_mm512_sub_ps(s1, vmax)));
        __m512bh pb = _mm512_cvtne2ps_pbh(p1, p0);
        _mm512_storeu_si512(probs + r * KB, (__m512i)pb);
        row_sum[r] = row_sum[r] * corr[r] + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
        row_max[r] = new_max;
    }
}

// out row = acc / sum, rounded to bf16 (a row that saw nothing is written as zeros)
static inline void write_row(bf16 *dst, const float *acc, float sum, int d) {
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int c = 0; c < d; c++) dst[c] = to_bf16(acc[c] * inv);
}

#endif
