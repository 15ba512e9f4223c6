// Fused element-wise steps of a decoder layer, bf16 on AVX-512 CPUs: one pass over the
// rows where torch runs three to six separate ops (each its own pass over memory and,
// in a decode step of a few rows, its own few microseconds of dispatch).
//
// Each function rounds to bf16 exactly where the torch code it replaces does
// (prefix/model/llama.py, rope.py), so results match it bit for bit except where the
// float32 reduction order or the exp approximation moves a value across a bf16
// rounding boundary:
//   silu_mul:     out = bf16(bf16(silu(g)) * u)                  (F.silu(gate) * up)
//   add_rms_norm: x = bf16(x + delta); out = bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))
//   rope:         out = bf16(bf16(x * cos) + bf16(roll(x, D/2) * sin_signed))
// Widths must be multiples of 16 (the caller checks; SmolLM2's are 64, 576 and 1536).
#include "attention_common.h"

static inline __m512 widen(__m256i h) {
    // 16 bf16 -> 16 float32: the 16 bits become the high half of each lane
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 load16(const bf16 *p) {
    return widen(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m256i narrow(__m512 x) {
    // float32 -> bf16, round to nearest even (as torch rounds bf16 results)
    return (__m256i)_mm512_cvtneps_pbh(x);
}

static inline __m512 round16(__m512 x) { return widen(narrow(x)); }

static inline void store16(bf16 *p, __m512 x) { _mm256_storeu_si256((__m256i *)p, narrow(x)); }

// out[t, :I] = silu(gate_up[t, :I]) * gate_up[t, I:2I]
void cachegate_silu_mul(const bf16 *gate_up, int64_t in_stride, bf16 *out, int64_t out_stride,
                        int64_t rows, int64_t width, int num_threads) {
    const __m512 one = _mm512_set1_ps(1.0f);
#pragma omp parallel for num_threads(num_threads) schedule(static) if (rows * width > 65536)
    for (int64_t t = 0; t < rows; t++) {
        const bf16 *g = gate_up + t * in_stride, *u = g + width;
        bf16 *o = out + t * out_stride;
        for (int64_t c = 0; c < width; c += 16) {
            __m512 x = load16(g + c);
            // silu(x) = x / (1 + exp(-x)), computed in float32 and rounded, as torch's
            __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
            store16(o + c, _mm512_mul_ps(round16(s), load16(u + c)));
        }
    }
}

// x[t] = x[t] + delta[t] (in place, when delta is given); out[t] = rms_norm(x[t]) * weight
void cachegate_add_rms_norm(bf16 *x, int64_t x_stride, const bf16 *delta, int64_t delta_stride,
                            const bf16 *weight, float eps, bf16 *out, int64_t out_stride,
                            int64_t rows, int64_t width, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (rows * width > 65536)
    for (int64_t t = 0; t < rows; t++) {
        bf16 *xr = x + t * x_stride;
        bf16 *o = out + t * out_stride;
        __m512 squares = _mm512_setzero_ps();
        for (int64_t c = 0; c < width; c += 16) {
            __m512 v = load16(xr + c);
            if (delta) {
                v = round16(_mm512_add_ps(v, load16(delta + t * delta_stride + c)));
                _mm256_storeu_si256((__m256i *)(xr + c), narrow(v));
            }
            squares = _mm512_fmadd_ps(v, v, squares);
        }
        float inv = 1.0f / sqrtf(_mm512_reduce_add_ps(squares) / (float)width + eps);
        __m512 vinv = _mm512_set1_ps(inv);
        for (int64_t c = 0; c < width; c += 16) {
            __m512 normed = round16(_mm512_mul_ps(load16(xr + c), vinv));
            store16(o + c, _mm512_mul_ps(load16(weight + c), normed));
        }
    }
}

// out[t, h] = x[t, h] * cos[t] + roll(x[t, h], D/2) * sin_signed[t], for `heads` heads of
// head_dim D each (x's heads contiguous within a row; rows x_stride apart)
void cachegate_rope(const bf16 *x, int64_t x_stride, const bf16 *cos, const bf16 *sin_signed,
                    int64_t table_stride, bf16 *out, int64_t out_stride, int64_t rows,
                    int heads, int head_dim, int num_threads) {
    int half = head_dim / 2;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (rows * heads > 2048)
    for (int64_t t = 0; t < rows; t++) {
        const bf16 *c_row = cos + t * table_stride, *s_row = sin_signed + t * table_stride;
        for (int h = 0; h < heads; h++) {
            const bf16 *xh = x + t * x_stride + (int64_t)h * head_dim;
            bf16 *oh = out + t * out_stride + (int64_t)h * head_dim;
            for (int c = 0; c < head_dim; c += 16) {
                // roll by D/2: element c reads c + D/2 in the first half, c - D/2 after
                int rolled = c < half ? c + half : c - half;
                __m512 a = round16(_mm512_mul_ps(load16(xh + c), load16(c_row + c)));
                __m512 b = round16(_mm512_mul_ps(load16(xh + rolled), load16(s_row + c)));
                store16(oh + c, _mm512_add_ps(a, b));
            }
        }
    }
}
