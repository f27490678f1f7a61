/* exp(v[i]) in place over an array: the RBF kernel values of the kernel maps
 * (_kernels.apply_kernel), four at a time with AVX2 and FMA where the CPU has them.
 *
 * Why: an RBF kernel map predicts a row with one exponential per landmark, and libm's
 * exp (a call per value, ~10 ns here) was 60 % of magic04's prediction with 300
 * landmarks; here a value costs ~1.5 ns, and that prediction fell from 2.2 to 1.1-1.3
 * us a row (1000 landmarks: 7.5 to 3.8).
 *
 * Math (Cody & Waite's reduction, then a polynomial):
 *     k = round(x log2(e))                 (x log2(e) + 1.5 2^52 - 1.5 2^52: the
 *                                           nearest integer, ties to even)
 *     r = (x - k ln2_hi) - k ln2_lo        |r| <= ln(2) / 2; ln2_hi has 21 trailing
 *                                           zero bits, so k ln2_hi is exact
 *     exp(r) = sum_{j=0}^{13} r^j / j!     (Horner; the first term left out is
 *                                           r^14 / 14! < 5e-18 relative)
 *     exp(x) = 2^k exp(r)                  (2^k built in the exponent bits: the
 *                                           integer k sits in the low bits of the
 *                                           shifted sum above)
 * within 1 ulp of libm's exp for -708 <= x <= 708 (tests/methods/test_invariant.py).
 * Outside it, where 2^k would leave the normal range, and for NaN, libm's exp gives
 * the value.
 *
 * Both paths run the same IEEE operations in the same order, every multiply-add an
 * explicit fused one (fma() in the scalar path: one rounding, in hardware or, on a
 * CPU without FMA, in libm's exact software form) and no multiply left next to an
 * add for the compiler to fuse, so every value is bit-identical whichever path the
 * CPU takes -- the same model on every x86-64 machine.
 */
#ifndef LCODING_EXP_H
#define LCODING_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define LCODING_EXP_LOG2E 1.4426950408889634074
#define LCODING_EXP_LN2_HI 6.93147180369123816490e-01
#define LCODING_EXP_LN2_LO 1.90821492927058770002e-10
#define LCODING_EXP_SHIFT 6755399441055744.0 /* 1.5 * 2^52 */
#define LCODING_EXP_LIMIT 708.0

/* 1 / j! for j = 13 down to 2 */
static const double lcoding_exp_coef[12] = {
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
    1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
    1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0};

static inline double lcoding_exp_scalar(double x)
{
    double t, kd, r, p, scale;
    int64_t bits, shift_bits;
    int j;
    if (!(x >= -LCODING_EXP_LIMIT && x <= LCODING_EXP_LIMIT))
        return exp(x);
    t = fma(x, LCODING_EXP_LOG2E, LCODING_EXP_SHIFT);
    kd = t - LCODING_EXP_SHIFT;
    r = fma(-kd, LCODING_EXP_LN2_LO, fma(-kd, LCODING_EXP_LN2_HI, x));
    p = lcoding_exp_coef[0];
    for (j = 1; j < 12; ++j)
        p = fma(p, r, lcoding_exp_coef[j]);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    {
        const double shift = LCODING_EXP_SHIFT;
        memcpy(&bits, &t, sizeof bits);
        memcpy(&shift_bits, &shift, sizeof shift_bits);
    }
    bits = (bits - shift_bits + 1023) << 52;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static void lcoding_exp_array_scalar(double *v, intptr_t n)
{
    intptr_t i;
    for (i = 0; i < n; ++i)
        v[i] = lcoding_exp_scalar(v[i]);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define LCODING_EXP_HAVE_AVX2 1

/* exp of the four lanes of x, for lanes within [-708, 708] (lcoding_exp_store4 puts
 * libm's value in the others) */
__attribute__((target("avx2,fma"))) static inline __m256d lcoding_exp4(__m256d x)
{
    const __m256d shift = _mm256_set1_pd(LCODING_EXP_SHIFT);
    const __m256d one = _mm256_set1_pd(1.0);
    __m256d t = _mm256_fmadd_pd(x, _mm256_set1_pd(LCODING_EXP_LOG2E), shift);
    __m256d kd = _mm256_sub_pd(t, shift);
    __m256d r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(LCODING_EXP_LN2_LO),
                                 _mm256_fnmadd_pd(kd, _mm256_set1_pd(LCODING_EXP_LN2_HI), x));
    __m256d p = _mm256_set1_pd(lcoding_exp_coef[0]);
    __m256i e;
    int j;
    for (j = 1; j < 12; ++j)
        p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(lcoding_exp_coef[j]));
    p = _mm256_fmadd_pd(p, r, one);
    p = _mm256_fmadd_pd(p, r, one);
    e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_sub_epi64(_mm256_castpd_si256(t),
                                                            _mm256_castpd_si256(shift)),
                                           _mm256_set1_epi64x(1023)),
                          52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

/* v[0:4] = exp(x) for the four lanes of x, libm's exp for those outside [-708, 708]
 * or NaN (ordered, non-signalling comparisons) */
__attribute__((target("avx2,fma"))) static inline void lcoding_exp_store4(double *v, __m256d x,
                                                                      __m256d value)
{
    int inside = _mm256_movemask_pd(
        _mm256_and_pd(_mm256_cmp_pd(x, _mm256_set1_pd(-LCODING_EXP_LIMIT), _CMP_GE_OQ),
                      _mm256_cmp_pd(x, _mm256_set1_pd(LCODING_EXP_LIMIT), _CMP_LE_OQ)));
    _mm256_storeu_pd(v, value);
    if (inside != 0xF) {
        double xs[4];
        int lane;
        _mm256_storeu_pd(xs, x);
        for (lane = 0; lane < 4; ++lane)
            if (!(inside & (1 << lane)))
                v[lane] = exp(xs[lane]);
    }
}

__attribute__((target("avx2,fma"))) static void lcoding_exp_array_avx2(double *v, intptr_t n)
{
    intptr_t i = 0;
    /* four vectors an iteration: the 13 dependent steps of one polynomial are
     * latency-bound; four side by side keep both FP units busy */
    for (; i + 16 <= n; i += 16) {
        __m256d x0 = _mm256_loadu_pd(v + i), x1 = _mm256_loadu_pd(v + i + 4);
        __m256d x2 = _mm256_loadu_pd(v + i + 8), x3 = _mm256_loadu_pd(v + i + 12);
        __m256d y0 = lcoding_exp4(x0), y1 = lcoding_exp4(x1);
        __m256d y2 = lcoding_exp4(x2), y3 = lcoding_exp4(x3);
        lcoding_exp_store4(v + i, x0, y0);
        lcoding_exp_store4(v + i + 4, x1, y1);
        lcoding_exp_store4(v + i + 8, x2, y2);
        lcoding_exp_store4(v + i + 12, x3, y3);
    }
    for (; i + 4 <= n; i += 4) {
        __m256d x = _mm256_loadu_pd(v + i);
        lcoding_exp_store4(v + i, x, lcoding_exp4(x));
    }
    lcoding_exp_array_scalar(v + i, n - i);
}
#endif

/* The RBF kernel's exponents of one row x (d features) against m points stored
 * feature-major (VT: d x m):
 *     out[j] = -gamma ||x - v_j||^2 = neg_gamma * sum_u (x_u - VT[u m + j])^2
 * summed feature by feature (a fused multiply-add a feature, in both paths), for the
 * rows of few features, where dgemm's inner products are all packing and overhead.
 * Same bits on both paths, as for exp. */
static void lcoding_rbf_exponents_scalar(const double *x, intptr_t d, const double *VT,
                                         intptr_t m, double neg_gamma, double *out,
                                         intptr_t j0)
{
    intptr_t j, u;
    double acc, t;
    for (j = j0; j < m; ++j) {
        acc = 0.0;
        for (u = 0; u < d; ++u) {
            t = x[u] - VT[u * m + j];
            acc = fma(t, t, acc);
        }
        out[j] = acc * neg_gamma;
    }
}

#ifdef LCODING_EXP_HAVE_AVX2
__attribute__((target("avx2,fma"))) static void
lcoding_rbf_exponents_avx2(const double *x, intptr_t d, const double *VT, intptr_t m,
                           double neg_gamma, double *out)
{
    intptr_t j = 0, u;
    const __m256d scale = _mm256_set1_pd(neg_gamma);
    /* sixteen points a pass, four independent sums: one sum's chain of d dependent
     * multiply-adds no longer sets the pace (each point's sum is still the same
     * operations in the same order: the same bits as below and as the scalar path).
     * 1000 points, 20 000 rows of 2-4 features: kernel_block / kernel_decision 4-30 %
     * faster than four points a pass, two runs side by side */
    for (; j + 16 <= m; j += 16) {
        __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
        __m256d a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
        for (u = 0; u < d; ++u) {
            const double *row = VT + u * m + j;
            __m256d xu = _mm256_set1_pd(x[u]);
            __m256d t0 = _mm256_sub_pd(xu, _mm256_loadu_pd(row));
            __m256d t1 = _mm256_sub_pd(xu, _mm256_loadu_pd(row + 4));
            __m256d t2 = _mm256_sub_pd(xu, _mm256_loadu_pd(row + 8));
            __m256d t3 = _mm256_sub_pd(xu, _mm256_loadu_pd(row + 12));
            a0 = _mm256_fmadd_pd(t0, t0, a0);
            a1 = _mm256_fmadd_pd(t1, t1, a1);
            a2 = _mm256_fmadd_pd(t2, t2, a2);
            a3 = _mm256_fmadd_pd(t3, t3, a3);
        }
        _mm256_storeu_pd(out + j, _mm256_mul_pd(a0, scale));
        _mm256_storeu_pd(out + j + 4, _mm256_mul_pd(a1, scale));
        _mm256_storeu_pd(out + j + 8, _mm256_mul_pd(a2, scale));
        _mm256_storeu_pd(out + j + 12, _mm256_mul_pd(a3, scale));
    }
    for (; j + 4 <= m; j += 4) {
        __m256d acc = _mm256_setzero_pd();
        for (u = 0; u < d; ++u) {
            __m256d t = _mm256_sub_pd(_mm256_set1_pd(x[u]), _mm256_loadu_pd(VT + u * m + j));
            acc = _mm256_fmadd_pd(t, t, acc);
        }
        _mm256_storeu_pd(out + j, _mm256_mul_pd(acc, scale));
    }
    lcoding_rbf_exponents_scalar(x, d, VT, m, neg_gamma, out, j);
}
#endif

static int lcoding_rbf_exponents(const double *x, intptr_t d, const double *VT, intptr_t m,
                                 double neg_gamma, double *out, int path)
{
#ifdef LCODING_EXP_HAVE_AVX2
    if (path != 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        lcoding_rbf_exponents_avx2(x, d, VT, m, neg_gamma, out);
        return 2;
    }
#endif
    lcoding_rbf_exponents_scalar(x, d, VT, m, neg_gamma, out, 0);
    return 1;
}

/* v[i] = exp(v[i]) for i < n (see the header); path 0: AVX2 where the CPU has it,
 * 1: the scalar path, 2: AVX2 (the scalar path where the build or CPU lacks it).
 * Returns the path taken (1 or 2). */
static int lcoding_exp_array(double *v, intptr_t n, int path)
{
#ifdef LCODING_EXP_HAVE_AVX2
    if (path != 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        lcoding_exp_array_avx2(v, n);
        return 2;
    }
#endif
    lcoding_exp_array_scalar(v, n);
    return 1;
}

#endif
