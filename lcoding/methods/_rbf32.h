/* One row's sums of a two-class RBF expansion with the exponentials in single
 * precision (lcoding_rbf_sums_mixed, for _kernels.rbf_sums_mixed):
 *
 *     e_j = -gamma max((||x||^2 - 2 x.v_j) + ||v_j||^2, 0)          (double)
 *     k_j = exp(float(e_j))                                           (float)
 *     f = sum_j a_j k_j                                               (double)
 *     A = sum_j |a_j| k_j,  Ae = sum_j |a_j| k_j |e_j|                (float sums)
 *
 * A and Ae size the error bound the caller puts around f
 * (KernelExpansionModel._rbf32_bound): a row whose f is farther from 0 than the bound
 * has the label the double-precision decision value gives; the others are computed
 * again in double.  The distances and f stay in double because the expansion's
 * weights are large and cancel (a kernel PCA map: |f| ~ 1 where A ~ 4e4): a float
 * there would leave most rows' labels open.
 *
 * Why: magic04's model (1000 landmarks of 10 features) predicted a row in ~2.0 us in
 * double -- dgemm's inner products with an inner dimension of 10 (mostly packing) and
 * 1000 double exponentials (_exp.h: four a vector, 13 terms).  Here one pass over the
 * points, 32 at a time: their inner products (the row's d values against the
 * points stored feature-major, eight independent sums), then the exponentials eight a
 * vector with 7 terms, and the sums, without a buffer in between.
 *
 * exp(e) for e in [-87, 0]:  k = round(e / ln 2), r = (e - k ln2_hi) - k ln2_lo, exp(r)
 * by its Taylor polynomial of degree 7 (|r| <= ln(2)/2: the first term left out is
 * r^8 / 8! < 6e-9, a tenth of float's unit roundoff u = 2^-24), times 2^k built in the
 * exponent bits.  Below -87 (exp(e) < 1.7e-38, float's smallest normal) the value is 0;
 * the bound counts those points' weights.  Relative error at most 1.3 u measured over
 * 600 000 exponents (1.0 u for libm's expf); the tests hold both to 3 u, which the
 * bound assumes.  Without AVX2 and FMA: the same sums one point at a
 * time with libm's expf (within 1 ulp).  The caller keeps ||x||^2 and ||v_j||^2 below
 * 1e300, so no product overflows and no value is NaN.
 */
#ifndef LCODING_RBF32_H
#define LCODING_RBF32_H

#include <math.h>
#include <stdint.h>

#define LCODING_RBF32_EXP_FLOOR (-87.0f)

/* points j0 <= j < m one at a time, added to the sums */
static void lcoding_rbf_sums_tail(const double *x, double x_sq, intptr_t d, const double *VT,
                                  const double *v_sq, intptr_t m, intptr_t j0,
                                  double neg_gamma, const double *a, const float *absa,
                                  double *f, double *A, double *Ae)
{
    intptr_t j, u;
    for (j = j0; j < m; ++j) {
        double dot = 0.0, dist, e, k;
        float ef;
        for (u = 0; u < d; ++u)
            dot += x[u] * VT[u * m + j];
        dist = (x_sq - 2.0 * dot) + v_sq[j];
        e = neg_gamma * (dist > 0.0 ? dist : 0.0);
        ef = (float)e;
        k = ef < LCODING_RBF32_EXP_FLOOR ? 0.0 : (double)expf(ef);
        *f += a[j] * k;
        *A += (double)absa[j] * k;
        *Ae -= (double)absa[j] * k * e;
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define LCODING_RBF32_HAVE_AVX2 1

__attribute__((target("avx2,fma"))) static inline __m256 lcoding_exp8_nonpositive(__m256 e)
{
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);        /* 8 significant bits */
    const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 keep = _mm256_cmp_ps(e, _mm256_set1_ps(LCODING_RBF32_EXP_FLOOR), _CMP_GE_OQ);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(e, log2e),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, ln2_lo, _mm256_fnmadd_ps(k, ln2_hi, e));
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    __m256i bits;
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^k, k in [-126, 0] where kept: a normal float's exponent bits (a dropped
     * lane's k may be anything; the mask zeroes it) */
    bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    return _mm256_and_ps(p, keep);
}

/* the exponents of four points: -gamma max((x_sq - 2 dot) + v_sq, 0) */
__attribute__((target("avx2,fma"))) static inline __m256d
lcoding_rbf_exponent4(__m256d dot, __m256d x_sq, const double *v_sq, __m256d neg_gamma)
{
    __m256d dist = _mm256_add_pd(_mm256_fnmadd_pd(_mm256_set1_pd(2.0), dot, x_sq),
                                 _mm256_loadu_pd(v_sq));
    return _mm256_mul_pd(neg_gamma, _mm256_max_pd(dist, _mm256_setzero_pd()));
}

__attribute__((target("avx2,fma"))) static void
lcoding_rbf_sums_mixed_avx2(const double *x, double x_sq, intptr_t d, const double *VT,
                            const double *v_sq, intptr_t m, double neg_gamma,
                            const double *a, const float *absa, double *f, double *A,
                            double *Ae)
{
    const __m256d xs = _mm256_set1_pd(x_sq), ng = _mm256_set1_pd(neg_gamma);
    __m256d sf0 = _mm256_setzero_pd(), sf1 = _mm256_setzero_pd();
    __m256 sa = _mm256_setzero_ps(), se = _mm256_setzero_ps();
    float lanes[8];
    double lanes_d[4], tf, ta = 0.0, te = 0.0;
    intptr_t j = 0, u;
    for (; j + 32 <= m; j += 32) {
        /* 32 points a pass: eight independent inner products, then four independent
         * exponentials (each a chain of ~10 dependent operations): enough in flight
         * that their latencies overlap */
        __m256d dot[8];
        __m256 ef[4], k[4], w[4];
        int g;
        for (g = 0; g < 8; ++g)
            dot[g] = _mm256_setzero_pd();
        for (u = 0; u < d; ++u) {
            const double *row = VT + u * m + j;
            __m256d xu = _mm256_set1_pd(x[u]);
            for (g = 0; g < 8; ++g)
                dot[g] = _mm256_fmadd_pd(xu, _mm256_loadu_pd(row + 4 * g), dot[g]);
        }
        for (g = 0; g < 4; ++g) {
            __m256d lo = lcoding_rbf_exponent4(dot[2 * g], xs, v_sq + j + 8 * g, ng);
            __m256d hi = lcoding_rbf_exponent4(dot[2 * g + 1], xs, v_sq + j + 8 * g + 4, ng);
            ef[g] = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
        }
        for (g = 0; g < 4; ++g)
            k[g] = lcoding_exp8_nonpositive(ef[g]);
        for (g = 0; g < 4; ++g) {
            sf0 = _mm256_fmadd_pd(_mm256_loadu_pd(a + j + 8 * g),
                                  _mm256_cvtps_pd(_mm256_castps256_ps128(k[g])), sf0);
            sf1 = _mm256_fmadd_pd(_mm256_loadu_pd(a + j + 8 * g + 4),
                                  _mm256_cvtps_pd(_mm256_extractf128_ps(k[g], 1)), sf1);
            w[g] = _mm256_mul_ps(_mm256_loadu_ps(absa + j + 8 * g), k[g]);
            sa = _mm256_add_ps(sa, w[g]);
            se = _mm256_fnmadd_ps(w[g], ef[g], se);
        }
    }
    _mm256_storeu_pd(lanes_d, _mm256_add_pd(sf0, sf1));
    tf = (lanes_d[0] + lanes_d[1]) + (lanes_d[2] + lanes_d[3]);
    _mm256_storeu_ps(lanes, sa);
    for (u = 0; u < 8; ++u)
        ta += lanes[u];
    _mm256_storeu_ps(lanes, se);
    for (u = 0; u < 8; ++u)
        te += lanes[u];
    lcoding_rbf_sums_tail(x, x_sq, d, VT, v_sq, m, j, neg_gamma, a, absa, &tf, &ta, &te);
    *f = tf;
    *A = ta;
    *Ae = te;
}
#endif

/* One row x (d values, ||x||^2 = x_sq) against the m points VT (d x m, feature-major,
 * squared norms v_sq); path 0: AVX2 where the CPU has it, 1: scalar.  Returns the
 * path taken (1, 2). */
static int lcoding_rbf_sums_mixed(const double *x, double x_sq, intptr_t d, const double *VT,
                                  const double *v_sq, intptr_t m, double neg_gamma,
                                  const double *a, const float *absa, double *f, double *A,
                                  double *Ae, int path)
{
#ifdef LCODING_RBF32_HAVE_AVX2
    if (path != 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        lcoding_rbf_sums_mixed_avx2(x, x_sq, d, VT, v_sq, m, neg_gamma, a, absa, f, A, Ae);
        return 2;
    }
#endif
    *f = *A = *Ae = 0.0;
    lcoding_rbf_sums_tail(x, x_sq, d, VT, v_sq, m, 0, neg_gamma, a, absa, f, A, Ae);
    return 1;
}

#endif
