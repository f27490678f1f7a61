/* The score passes of the k q-flats' single-precision class scores
 * (_kq.flat_class_scores_f32), eight floats a vector with AVX2 where the CPU has it.
 *
 * Why: after sgemm the scores of one row are a few passes over the flats
 *     score[m] = -||x||^2 - g0[m] + sum_t g_t[m]^2      (g: the row's products)
 *     best[c]  = max_j score[c k + j]
 * and in the build's baseline (SSE2) the class maxima ran one float at a time, with a
 * NaN test each: 40 % of letter's single-precision scoring.
 *
 * The two paths may round differently (a fused multiply-add against a product and a
 * sum); both are within the error bound the caller adds (every operation rounded
 * at most once relative to its operands), and the labels the caller decides are the
 * double path's either way.
 */
#ifndef LCODING_FLATS32_H
#define LCODING_FLATS32_H

#include <math.h>
#include <stdint.h>

static void lcoding_flat_scores_f32_scalar(const float *g, intptr_t M, intptr_t q, float xx,
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

__attribute__((target("avx2,fma"))) static void
lcoding_flat_scores_f32_avx2(const float *g, intptr_t M, intptr_t q, float xx, float *score)
{
    intptr_t m, t;
    const __m256 nxx = _mm256_set1_ps(-xx);
    for (m = 0; m + 8 <= M; m += 8)
        _mm256_storeu_ps(score + m, _mm256_sub_ps(nxx, _mm256_loadu_ps(g + m)));
    for (; m < M; ++m)
        score[m] = -xx - g[m];
    for (t = 0; t < q; ++t) {
        const float *gt = g + M + t * M;
        for (m = 0; m + 8 <= M; m += 8) {
            __m256 v = _mm256_loadu_ps(gt + m);
            _mm256_storeu_ps(score + m, _mm256_fmadd_ps(v, v, _mm256_loadu_ps(score + m)));
        }
        for (; m < M; ++m)
            score[m] = fmaf(gt[m], gt[m], score[m]);
    }
}

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
#endif

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

static void lcoding_flat_scores_f32(const float *g, intptr_t M, intptr_t q, float xx,
                                    float *score, int avx2)
{
#ifdef LCODING_FLATS32_HAVE_AVX2
    if (avx2) {
        lcoding_flat_scores_f32_avx2(g, M, q, xx, score);
        return;
    }
#endif
    (void)avx2;
    lcoding_flat_scores_f32_scalar(g, M, q, xx, score);
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
