/* The anchors a row's distance bound admits (_knn.topk_row_near): the ids j < m with
 * dist[j] <= t, in increasing order, written to cand; returns how many.
 *
 * Why: the plain loop (cand[a] = j; a += dist[j] <= t) carries its count from one
 * anchor to the next, ~2 cycles an anchor, and was a quarter of ijcnn1's kNN coding
 * (200 anchors, ~18 admitted a row).  With AVX2 four distances are compared at once;
 * their 4-bit mask picks, from a table, the admitted ids' offsets in order, all four
 * slots are stored and the count grows by the mask's population: no branch on the
 * data, one dependent add per four anchors.  The slots past the count are scratch
 * (a <= j, so the four stores stay below m).  Comparisons are exact, so both paths
 * give the same ids.
 */
#ifndef LCODING_ADMIT_H
#define LCODING_ADMIT_H

#include <stdint.h>

static intptr_t lcoding_admit_scalar(const double *dist, intptr_t j0, intptr_t m, double t,
                                     int *cand, intptr_t a)
{
    intptr_t j;
    for (j = j0; j < m; ++j) {
        cand[a] = (int)j;
        a += dist[j] <= t;
    }
    return a;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define LCODING_ADMIT_HAVE_AVX2 1

/* for each 4-bit mask, the set bits' positions in order (the rest 0) */
static const int32_t lcoding_admit_lut[16][4] = {
    {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0},
    {2, 0, 0, 0}, {0, 2, 0, 0}, {1, 2, 0, 0}, {0, 1, 2, 0},
    {3, 0, 0, 0}, {0, 3, 0, 0}, {1, 3, 0, 0}, {0, 1, 3, 0},
    {2, 3, 0, 0}, {0, 2, 3, 0}, {1, 2, 3, 0}, {0, 1, 2, 3}};

__attribute__((target("avx2,popcnt"))) static intptr_t
lcoding_admit_avx2(const double *dist, intptr_t m, double t, int *cand)
{
    const __m256d bound = _mm256_set1_pd(t);
    intptr_t j = 0, a = 0;
    for (; j + 4 <= m; j += 4) {
        int mask = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(dist + j), bound, _CMP_LE_OQ));
        __m128i ids = _mm_add_epi32(_mm_set1_epi32((int)j),
                                    _mm_loadu_si128((const __m128i *)lcoding_admit_lut[mask]));
        _mm_storeu_si128((__m128i *)(cand + a), ids);
        a += _mm_popcnt_u32((unsigned)mask);
    }
    return lcoding_admit_scalar(dist, j, m, t, cand, a);
}
#endif

/* cand[0:count] = the ids j < m with dist[j] <= t, increasing; cand holds m ints.
 * path 0: AVX2 where the CPU has it, 1: the scalar loop (the tests compare them) */
static intptr_t lcoding_admit(const double *dist, intptr_t m, double t, int *cand, int path)
{
#ifdef LCODING_ADMIT_HAVE_AVX2
    if (path == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"))
        return lcoding_admit_avx2(dist, m, t, cand);
#endif
    return lcoding_admit_scalar(dist, 0, m, t, cand, 0);
}

#endif
