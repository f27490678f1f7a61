/* Rows of a CSR matrix times a dense matrix (the k q-metrics' PCA: _kq.csr_times_dense).
 *
 *     out[i, :] = sum_jj data[jj] * B[indices[jj], :],   jj = indptr[i] .. indptr[i+1] - 1
 *
 * out's rows are ldo doubles apart (ldo >= p: the PCA writes into the first p columns
 * of its output rows, the constant coordinate after them).
 *
 * Each output starts at 0 and adds its products in storage order, a product then a
 * sum (never a fused multiply-add): scipy's csr_matvecs' order, so the PCA's values,
 * and the models trained on them, keep their bits.  With AVX2 (no FMA) each row runs
 * its outputs 52 at a time in thirteen registers across the row's entries (scipy adds
 * a whole output row in memory per entry, two doubles a vector).  Every lane does the same
 * two roundings as the scalar loop, so both paths give the same bits.
 */
#ifndef LCODING_CSR_DENSE_H
#define LCODING_CSR_DENSE_H

#include <stdint.h>

static void lcoding_csr_dense_scalar(const int64_t *indptr, const int32_t *indices,
                                     const double *data, intptr_t r0, intptr_t r1,
                                     const double *B, intptr_t p, double *out, intptr_t ldo)
{
    intptr_t i, jj, k;
    for (i = r0; i < r1; ++i) {
        double *y = out + (i - r0) * ldo;
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

/* columns k0 .. k0 + 4 V - 1 of one output row (V = 1 .. 13 vectors of four, a
 * constant where it is called, so the sums stay in named registers: thirteen of them,
 * the broadcast value and a load fill AVX2's sixteen; the last vector's lanes past p
 * masked off: they load 0 and are not stored), each vector its own chain of sums
 * across the row's entries */
#define LCODING_CSR_STEP(u)                                                          \
    if (V > u) {                                                                     \
        const __m256d b = (u == V - 1) ? _mm256_maskload_pd(x + 4 * (u), last_mask)  \
                                       : _mm256_loadu_pd(x + 4 * (u));               \
        s##u = _mm256_add_pd(s##u, _mm256_mul_pd(a, b));                             \
    }
#define LCODING_CSR_STORE(u)                                                         \
    if (V > u) {                                                                     \
        if (u == V - 1)                                                              \
            _mm256_maskstore_pd(y + k0 + 4 * (u), last_mask, s##u);                  \
        else                                                                         \
            _mm256_storeu_pd(y + k0 + 4 * (u), s##u);                                \
    }

__attribute__((target("avx2"), always_inline)) static inline void
lcoding_csr_dense_tile(const int32_t *indices, const double *data, intptr_t start,
                       intptr_t stop, const double *B, intptr_t p, intptr_t k0, const int V,
                       __m256i last_mask, double *y)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
            s7 = s0, s8 = s0, s9 = s0, s10 = s0, s11 = s0, s12 = s0;
    intptr_t jj;
    for (jj = start; jj < stop; ++jj) {
        const __m256d a = _mm256_set1_pd(data[jj]);
        const double *x = B + (intptr_t)indices[jj] * p + k0;
        LCODING_CSR_STEP(0) LCODING_CSR_STEP(1) LCODING_CSR_STEP(2) LCODING_CSR_STEP(3)
        LCODING_CSR_STEP(4) LCODING_CSR_STEP(5) LCODING_CSR_STEP(6) LCODING_CSR_STEP(7)
        LCODING_CSR_STEP(8) LCODING_CSR_STEP(9) LCODING_CSR_STEP(10) LCODING_CSR_STEP(11)
        LCODING_CSR_STEP(12)
    }
    LCODING_CSR_STORE(0) LCODING_CSR_STORE(1) LCODING_CSR_STORE(2) LCODING_CSR_STORE(3)
    LCODING_CSR_STORE(4) LCODING_CSR_STORE(5) LCODING_CSR_STORE(6) LCODING_CSR_STORE(7)
    LCODING_CSR_STORE(8) LCODING_CSR_STORE(9) LCODING_CSR_STORE(10) LCODING_CSR_STORE(11)
    LCODING_CSR_STORE(12)
}

#define LCODING_CSR_TILE(V)                                                          \
    case V: lcoding_csr_dense_tile(indices, data, start, stop, B, p, k0, V, mask, y); break;

__attribute__((target("avx2"))) static void
lcoding_csr_dense_avx2(const int64_t *indptr, const int32_t *indices, const double *data,
                       intptr_t r0, intptr_t r1, const double *B, intptr_t p, double *out,
                       intptr_t ldo)
{
    /* 52 columns a pass (thirteen chains: an add's latency is hidden behind the
     * others' loads; the k q-metrics' 50 directions in one pass over a row's entries),
     * the rest in one pass of up to thirteen vectors, the last masked */
    const __m256i full = _mm256_set1_epi64x(-1);
    const intptr_t lanes = (p % 52) % 4;
    const __m256i last = lanes ? _mm256_setr_epi64x(-1, lanes > 1 ? -1 : 0,
                                                    lanes > 2 ? -1 : 0, 0) : full;
    intptr_t i, k0;
    for (i = r0; i < r1; ++i) {
        const intptr_t start = indptr[i], stop = indptr[i + 1];
        double *y = out + (i - r0) * ldo;
        for (k0 = 0; k0 < p; k0 += 52) {
            const intptr_t cols = p - k0 < 52 ? p - k0 : 52;
            const __m256i mask = cols < 52 ? last : full;
            switch ((int)((cols + 3) / 4)) {
            LCODING_CSR_TILE(1) LCODING_CSR_TILE(2) LCODING_CSR_TILE(3)
            LCODING_CSR_TILE(4) LCODING_CSR_TILE(5) LCODING_CSR_TILE(6)
            LCODING_CSR_TILE(7) LCODING_CSR_TILE(8) LCODING_CSR_TILE(9)
            LCODING_CSR_TILE(10) LCODING_CSR_TILE(11) LCODING_CSR_TILE(12)
            default: lcoding_csr_dense_tile(indices, data, start, stop, B, p, k0, 13, mask,
                                            y); break;
            }
        }
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
                              intptr_t p, double *out, intptr_t ldo, int avx2)
{
#ifdef LCODING_CSR_DENSE_HAVE_AVX2
    if (avx2) {
        lcoding_csr_dense_avx2(indptr, indices, data, r0, r1, B, p, out, ldo);
        return;
    }
#endif
    (void)avx2;
    lcoding_csr_dense_scalar(indptr, indices, data, r0, r1, B, p, out, ldo);
}

#endif
