/* Rows of a CSR matrix times a dense matrix (the k q-metrics' PCA: _kq.csr_times_dense).
 *
 *     out[i, :] = sum_jj data[jj] * B[indices[jj], :],   jj = indptr[i] .. indptr[i+1] - 1
 *
 * Each output starts at 0 and adds its products in storage order, a product then a
 * sum (never a fused multiply-add): scipy's csr_matvecs' order, so the PCA's values,
 * and the models trained on them, keep their bits.  With AVX2 (no FMA) each row runs
 * its outputs 32 at a time in eight registers across the row's entries (scipy adds a
 * whole output row in memory per entry, two doubles a vector).  Every lane does the same
 * two roundings as the scalar loop, so both paths give the same bits.
 */
#ifndef LCODING_CSR_DENSE_H
#define LCODING_CSR_DENSE_H

#include <stdint.h>

static void lcoding_csr_dense_scalar(const int64_t *indptr, const int32_t *indices,
                                     const double *data, intptr_t r0, intptr_t r1,
                                     const double *B, intptr_t p, double *out)
{
    intptr_t i, jj, k;
    for (i = r0; i < r1; ++i) {
        double *y = out + (i - r0) * p;
        for (k = 0; k < p; ++k)
            y[k] = 0.0;
        for (jj = indptr[i]; jj < indptr[i + 1]; ++jj) {
            const double a = data[jj];
            const double *x = B + (intptr_t)indices[jj] * p;
            for (k = 0; k < p; ++k)
                y[k] += a * x[k];
        }
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define LCODING_CSR_DENSE_HAVE_AVX2 1

/* columns k0 .. k0 + 4 v - 1 of one output row (v = 1 .. 8 vectors of four; the last
 * one's lanes past p masked off: they load 0 and are not stored), each vector its own
 * chain of sums across the row's entries */
__attribute__((target("avx2"))) static inline void
lcoding_csr_dense_tile(const int32_t *indices, const double *data, intptr_t start,
                       intptr_t stop, const double *B, intptr_t p, intptr_t k0, int v,
                       __m256i last_mask, double *y)
{
    __m256d s[8];
    intptr_t jj;
    int u;
    for (u = 0; u < 8; ++u)
        s[u] = _mm256_setzero_pd();
    for (jj = start; jj < stop; ++jj) {
        const __m256d a = _mm256_set1_pd(data[jj]);
        const double *x = B + (intptr_t)indices[jj] * p + k0;
        for (u = 0; u < v - 1; ++u)
            s[u] = _mm256_add_pd(s[u], _mm256_mul_pd(a, _mm256_loadu_pd(x + 4 * u)));
        s[v - 1] = _mm256_add_pd(s[v - 1], _mm256_mul_pd(
            a, _mm256_maskload_pd(x + 4 * (v - 1), last_mask)));
    }
    for (u = 0; u < v - 1; ++u)
        _mm256_storeu_pd(y + k0 + 4 * u, s[u]);
    _mm256_maskstore_pd(y + k0 + 4 * (v - 1), last_mask, s[v - 1]);
}

__attribute__((target("avx2"))) static void
lcoding_csr_dense_avx2(const int64_t *indptr, const int32_t *indices, const double *data,
                       intptr_t r0, intptr_t r1, const double *B, intptr_t p, double *out)
{
    /* 32 columns a pass (eight chains: an add's latency is hidden behind the others'
     * loads), the rest in one pass of up to eight vectors, the last masked */
    const __m256i full = _mm256_set1_epi64x(-1);
    const intptr_t rest = p % 32, lanes = rest % 4;
    const __m256i last = lanes ? _mm256_setr_epi64x(-1, lanes > 1 ? -1 : 0,
                                                    lanes > 2 ? -1 : 0, 0) : full;
    intptr_t i, k0;
    for (i = r0; i < r1; ++i) {
        const intptr_t start = indptr[i], stop = indptr[i + 1];
        double *y = out + (i - r0) * p;
        for (k0 = 0; k0 + 32 <= p; k0 += 32)
            lcoding_csr_dense_tile(indices, data, start, stop, B, p, k0, 8, full, y);
        if (rest)
            lcoding_csr_dense_tile(indices, data, start, stop, B, p, k0,
                                   (int)((rest + 3) / 4), last, y);
    }
}
#endif

/* 1 where the AVX2 loop runs: path 0 and a CPU with AVX2 */
static inline int lcoding_csr_dense_avx2_ok(int path)
{
#ifdef LCODING_CSR_DENSE_HAVE_AVX2
    return path != 1 && __builtin_cpu_supports("avx2");
#else
    (void)path;
    return 0;
#endif
}

static void lcoding_csr_dense(const int64_t *indptr, const int32_t *indices,
                              const double *data, intptr_t r0, intptr_t r1, const double *B,
                              intptr_t p, double *out, int avx2)
{
#ifdef LCODING_CSR_DENSE_HAVE_AVX2
    if (avx2) {
        lcoding_csr_dense_avx2(indptr, indices, data, r0, r1, B, p, out);
        return;
    }
#endif
    (void)avx2;
    lcoding_csr_dense_scalar(indptr, indices, data, r0, r1, B, p, out);
}

#endif
