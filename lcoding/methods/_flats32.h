/* The k q-flats' single-precision class scores (_kq.flat_class_scores_f32).
 *
 *     score[m] = -||x||^2 - g0[m] + sum_t g_t[m]^2     (g: the row's products with
 *     best[c]  = max_j score[c k + j]                   the flats' precomputed rows)
 *
 * With AVX2 the products and the scores are one fused pass over groups of eight
 * flats (lcoding_flat_scores_fused, below), and the class maxima run eight floats a
 * vector: in the build's baseline (SSE2) they ran one float at a time, with a NaN test
 * each, 40 % of letter's single-precision scoring.  Without it (or path 1) sgemm makes
 * the products and the passes run one float at a time.
 *
 * The two paths may round differently (a fused multiply-add against a product and a
 * sum, other summation orders); both are within the error bound the caller adds
 * (every operation rounded at most once relative to its operands), and the labels the
 * caller decides are the double path's either way.
 */
#ifndef LCODING_FLATS32_H
#define LCODING_FLATS32_H

#include <math.h>
#include <stdint.h>

static void lcoding_flat_scores_f32(const float *g, intptr_t M, intptr_t q, float xx,
                                    float *score)
{
    intptr_t m, t;
    for (m = 0; m < M; ++m)
        score[m] = -xx - g[m];
    for (t = 0; t < q; ++t) {
        const float *gt = g + M + t * M;
        for (m = 0; m < M; ++m)
            score[m] += gt[m] * gt[m];
    }
}

/* out[c] = max_j score[c k + j]; returns 1 when a score is NaN (out is then not
 * meaningful), else 0 */
static int lcoding_class_max_f32_scalar(const float *score, intptr_t C, intptr_t k,
                                        double *out)
{
    intptr_t c, j;
    int nan = 0;
    for (c = 0; c < C; ++c) {
        const float *s = score + c * k;
        float best = s[0];
        nan |= best != best;
        for (j = 1; j < k; ++j) {
            nan |= s[j] != s[j];
            best = s[j] > best ? s[j] : best;
        }
        out[c] = (double)best;
    }
    return nan;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define LCODING_FLATS32_HAVE_AVX2 1

__attribute__((target("avx2,fma"))) static int
lcoding_class_max_f32_avx2(const float *score, intptr_t C, intptr_t k, double *out)
{
    intptr_t c, j;
    __m256 unordered = _mm256_setzero_ps();
    int nan = 0;
    for (c = 0; c < C; ++c) {
        const float *s = score + c * k;
        float best;
        j = 0;
        if (k >= 8) {
            __m256 vbest = _mm256_loadu_ps(s);
            float lanes[8];
            int l;
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(vbest, vbest, _CMP_UNORD_Q));
            for (j = 8; j + 8 <= k; j += 8) {
                __m256 v = _mm256_loadu_ps(s + j);
                unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                vbest = _mm256_max_ps(vbest, v);
            }
            _mm256_storeu_ps(lanes, vbest);
            best = lanes[0];
            for (l = 1; l < 8; ++l)
                best = lanes[l] > best ? lanes[l] : best;
        } else {
            best = s[0];
            nan |= best != best;
            j = 1;
        }
        for (; j < k; ++j) {
            nan |= s[j] != s[j];
            best = s[j] > best ? s[j] : best;
        }
        out[c] = (double)best;
    }
    return nan | (_mm256_movemask_ps(unordered) != 0);
}

/* The products and the scores in one pass, without the product matrix (AVX2).
 *
 * Why: after sgemm the product matrix of a block of rows (256 rows x 5 x 832 flats on
 * letter: 4 MB) leaves the caches, and its short inner dimension (17) keeps sgemm near
 * half the FMA units' rate.  Here eight flats sit in the lanes of a vector: a flat
 * group's rows of A (q + 1 terms of d1 numbers, 2.7 KB on letter) stay in L1 while
 * every row of the block runs over them, two rows at a time, and each term's
 * products go straight into the score:
 *     score[i][m] = -xx_i - (xa_i . A0_m) + sum_t (xa_i . At_m)^2
 * with the same rounding bound as the sgemm path (each product a sum of d1 terms
 * rounded in float, in any order; each square and sum one fused rounding).
 *
 * At: [group][term][u][lane] floats, term 0 the centre row [-2 c_m, ||c_m||^2], term
 * t the direction row [F_mt, -F_mt . c_m]; lanes past M are zero.  xa: n rows of d1
 * floats (the constant 1 last), xx: their squared norms.  score: n rows of Mp floats
 * (Mp = 8 groups). */
#define LCODING_FUSED_TILE 6    /* terms a pass: 2 rows x 6 accumulators, 12 registers */

/* one accumulator pair (rows x0, x1) of term j of a tile; named registers, not an
 * array: GCC stored an array's twelve vectors to the stack on every step */
#define LCODING_FUSED_STEP(j)                                                        \
    if (T > j) {                                                                     \
        __m256 w = _mm256_loadu_ps(Ag + ((intptr_t)(j) * d1 + u) * 8);              \
        __asm__("" : "+x"(w));  /* one load for both rows, not one folded into each */ \
        p##j = _mm256_fmadd_ps(w, b0, p##j);                                         \
        r##j = _mm256_fmadd_ps(w, b1, r##j);                                         \
    }
#define LCODING_FUSED_SQUARE(j)                                                      \
    if (T > j && (j > 0 || !first)) {                                                \
        v0 = _mm256_fmadd_ps(p##j, p##j, v0);                                        \
        v1 = _mm256_fmadd_ps(r##j, r##j, v1);                                        \
    }

__attribute__((target("avx2,fma"), always_inline)) static inline void
lcoding_fused_tile(const float *Ag, intptr_t d1, const float *x0, const float *x1,
                   const int T, int first, __m256 nxx0, __m256 nxx1, float *s0, float *s1)
{
    /* terms t0 .. t0 + T - 1 (T <= 6) of one flat group (Ag points at the first) for
     * rows x0, x1 (x1 may equal x0); first: the tile holds the centre term, term 0 */
    __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0, p4 = p0, p5 = p0;
    __m256 r0 = p0, r1 = p0, r2 = p0, r3 = p0, r4 = p0, r5 = p0, v0, v1;
    intptr_t u;
    for (u = 0; u < d1; ++u) {
        const __m256 b0 = _mm256_broadcast_ss(x0 + u), b1 = _mm256_broadcast_ss(x1 + u);
        LCODING_FUSED_STEP(0)
        LCODING_FUSED_STEP(1)
        LCODING_FUSED_STEP(2)
        LCODING_FUSED_STEP(3)
        LCODING_FUSED_STEP(4)
        LCODING_FUSED_STEP(5)
    }
    if (first) {
        v0 = _mm256_sub_ps(nxx0, p0);
        v1 = _mm256_sub_ps(nxx1, r0);
    } else {
        v0 = _mm256_loadu_ps(s0);
        v1 = _mm256_loadu_ps(s1);
    }
    LCODING_FUSED_SQUARE(0)
    LCODING_FUSED_SQUARE(1)
    LCODING_FUSED_SQUARE(2)
    LCODING_FUSED_SQUARE(3)
    LCODING_FUSED_SQUARE(4)
    LCODING_FUSED_SQUARE(5)
    _mm256_storeu_ps(s0, v0);
    _mm256_storeu_ps(s1, v1);
}

__attribute__((target("avx2,fma"))) static void
lcoding_flat_scores_fused_avx2(const float *At, intptr_t groups, intptr_t q, intptr_t d1,
                               const float *xa, const float *xx, intptr_t n, float *score,
                               intptr_t Mp)
{
    intptr_t g, i, t0, terms = q + 1;
    /* the terms in tiles of at most LCODING_FUSED_TILE, as even as can be (13: 5, 4,
     * 4): a tile of one or two terms would leave the FMA units waiting on latency */
    const intptr_t n_tiles = (terms + LCODING_FUSED_TILE - 1) / LCODING_FUSED_TILE;
    const intptr_t base = terms / n_tiles, longer = terms % n_tiles;
    for (g = 0; g < groups; ++g) {
        const float *Ag = At + g * terms * d1 * 8;
        for (i = 0; i < n; i += 2) {
            const intptr_t i1 = i + 1 < n ? i + 1 : i;   /* an odd last row: twice */
            const __m256 nxx0 = _mm256_set1_ps(-xx[i]), nxx1 = _mm256_set1_ps(-xx[i1]);
            float *s0 = score + i * Mp + g * 8, *s1 = score + i1 * Mp + g * 8;
            intptr_t tile;
            for (tile = 0, t0 = 0; tile < n_tiles; ++tile) {
                const int T = (int)(base + (tile < longer));
                const float *At0 = Ag + t0 * d1 * 8;
                /* constant tile sizes, so the accumulators stay in registers */
                switch (T) {
                case 1: lcoding_fused_tile(At0, d1, xa + i * d1, xa + i1 * d1, 1, t0 == 0,
                                           nxx0, nxx1, s0, s1); break;
                case 2: lcoding_fused_tile(At0, d1, xa + i * d1, xa + i1 * d1, 2, t0 == 0,
                                           nxx0, nxx1, s0, s1); break;
                case 3: lcoding_fused_tile(At0, d1, xa + i * d1, xa + i1 * d1, 3, t0 == 0,
                                           nxx0, nxx1, s0, s1); break;
                case 4: lcoding_fused_tile(At0, d1, xa + i * d1, xa + i1 * d1, 4, t0 == 0,
                                           nxx0, nxx1, s0, s1); break;
                case 5: lcoding_fused_tile(At0, d1, xa + i * d1, xa + i1 * d1, 5, t0 == 0,
                                           nxx0, nxx1, s0, s1); break;
                default: lcoding_fused_tile(At0, d1, xa + i * d1, xa + i1 * d1, 6, t0 == 0,
                                            nxx0, nxx1, s0, s1); break;
                }
                t0 += T;
            }
        }
    }
}
#endif

/* the fused pass where the build and the CPU have AVX2 (avx2 != 0); returns 0 where
 * they do not (the caller then takes sgemm and the passes above) */
static int lcoding_flat_scores_fused(const float *At, intptr_t groups, intptr_t q,
                                     intptr_t d1, const float *xa, const float *xx,
                                     intptr_t n, float *score, intptr_t Mp, int avx2)
{
#ifdef LCODING_FLATS32_HAVE_AVX2
    if (avx2) {
        lcoding_flat_scores_fused_avx2(At, groups, q, d1, xa, xx, n, score, Mp);
        return 1;
    }
#endif
    (void)At; (void)groups; (void)q; (void)d1; (void)xa; (void)xx; (void)n; (void)score;
    (void)Mp; (void)avx2;
    return 0;
}

/* path 0: AVX2 where the CPU has it, 1: the scalar path */
static inline int lcoding_flats32_avx2(int path)
{
#ifdef LCODING_FLATS32_HAVE_AVX2
    return path != 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    (void)path;
    return 0;
#endif
}

static int lcoding_class_max_f32(const float *score, intptr_t C, intptr_t k, double *out,
                                 int avx2)
{
#ifdef LCODING_FLATS32_HAVE_AVX2
    if (avx2)
        return lcoding_class_max_f32_avx2(score, C, k, out);
#endif
    (void)avx2;
    return lcoding_class_max_f32_scalar(score, C, k, out);
}

#endif
