/* Inner loop of _knn.local_decision_values (LL-SVM prediction), in C so that it can
 * be compiled twice: for AVX2 and for the baseline x86-64 (SSE2), with the choice
 * made once at load time (GCC function multi-versioning).  Only the vector width
 * changes: every out[i, c] is accumulated in the same order, and the AVX2 target
 * has no fused multiply-add (that would be "fma"), so both give bit-identical values.
 * MNIST, 200 anchors, k = 30, 10 classes: 14 CPU us per test row, against 20 for
 * the same loop as Cython with a runtime-length accumulator array.
 *
 * For the rows i = bucket_row[pos], pos0 <= pos < pos1, coded by one anchor with
 * weight g = bucket_wt[pos], whose local weights are the (stride x nr_w) block wa:
 *     out[i, c] += g * (sum_{j in x_i, j < nr_feature} x_ij wa[j, c] + B wa[nr_feature, c])
 */
#ifndef LCODING_LOCAL_DOT_H
#define LCODING_LOCAL_DOT_H

#include <stdint.h>

#define LCODING_LOCAL_DOT_MAX_W 64
/* by_row's bitset of anchor ids: up to this many anchors (64 words a row at most) */
#define LCODING_LOCAL_DOT_BITSET_ANCHORS 4096

/* index of the lowest set bit of a nonzero word */
static inline int lcoding_ctz64(uint64_t bits)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(bits);
#else
    int b = 0;
    while (!(bits & 1)) {
        bits >>= 1;
        ++b;
    }
    return b;
#endif
}

/* target_clones needs GCC >= 8 and the loader's ifunc support (glibc on x86-64 Linux);
 * elsewhere the baseline build is used */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
    && defined(__GLIBC__) && (__GNUC__ >= 8)
#define LCODING_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define LCODING_MULTIVERSION
#endif

/* acc[c] = sum_{p in p0..p1-1, X_indices[p] < nr_feature} X_data[p] wa[col, c0 + c]
 *          + B wa[nr_feature, c0 + c]   for c < nc  (the bias row only when B >= 0) */
static inline void lcoding_local_dot_acc(const double *X_data, const int *X_indices,
                                         int64_t p0, int64_t p1, const double *wa,
                                         intptr_t nr_feature, intptr_t nr_w, intptr_t c0,
                                         intptr_t nc, double bias, double *acc)
{
    intptr_t c;
    int64_t p;
    for (c = 0; c < nc; ++c)
        acc[c] = 0.0;
    for (p = p0; p < p1; ++p) {
        intptr_t col = X_indices[p];
        if (col < nr_feature) {
            const double xv = X_data[p];
            const double *wrow = wa + col * nr_w + c0;
            for (c = 0; c < nc; ++c)
                acc[c] += xv * wrow[c];
        }
    }
    if (bias >= 0) {
        const double *wrow = wa + nr_feature * nr_w + c0;
        for (c = 0; c < nc; ++c)
            acc[c] += bias * wrow[c];
    }
}

LCODING_MULTIVERSION
static void lcoding_local_dot_rows(const double *X_data, const int *X_indices,
                                   const int64_t *X_indptr, const int *bucket_row,
                                   const double *bucket_wt, intptr_t pos0, intptr_t pos1,
                                   const double *wa, intptr_t nr_feature, intptr_t nr_w,
                                   double bias, double *out)
{
    double acc[LCODING_LOCAL_DOT_MAX_W];
    intptr_t pos, c, c0, nc, i;
    /* classes in chunks of LCODING_LOCAL_DOT_MAX_W (one chunk unless nr_w > 64) */
    for (c0 = 0; c0 < nr_w; c0 += LCODING_LOCAL_DOT_MAX_W) {
        nc = nr_w - c0 < LCODING_LOCAL_DOT_MAX_W ? nr_w - c0 : LCODING_LOCAL_DOT_MAX_W;
        for (pos = pos0; pos < pos1; ++pos) {
            i = bucket_row[pos];
            lcoding_local_dot_acc(X_data, X_indices, X_indptr[i], X_indptr[i + 1], wa,
                                  nr_feature, nr_w, c0, nc, bias, acc);
            {
                const double g = bucket_wt[pos];
                double *o = out + i * nr_w + c0;
                for (c = 0; c < nc; ++c)
                    o[c] += g * acc[c];
            }
        }
    }
}

/* Fixed-width version: the anchor's block is first copied to wpad with NCW columns
 * (nr_w <= NCW, zero padded) so that the class loop has a compile-time length and the
 * NCW accumulators live in registers (a runtime-length acc[] goes through memory on
 * every nonzero).  Same order of operations per (row, class) as the generic loop. */
#define LCODING_LOCAL_DOT_FIXED(NCW)                                                     \
LCODING_MULTIVERSION                                                                   \
static void lcoding_local_dot_rows_##NCW(const double *X_data, const int *X_indices,   \
        const int64_t *X_indptr, const int *bucket_row, const double *bucket_wt,        \
        intptr_t pos0, intptr_t pos1, const double *wpad, intptr_t nr_feature,          \
        intptr_t nr_w, double bias, double *out)                                         \
{                                                                                        \
    intptr_t pos, c, i;                                                                  \
    int64_t p;                                                                           \
    for (pos = pos0; pos < pos1; ++pos) {                                                \
        double acc[NCW];                                                                 \
        i = bucket_row[pos];                                                             \
        for (c = 0; c < NCW; ++c)                                                        \
            acc[c] = 0.0;                                                                \
        for (p = X_indptr[i]; p < X_indptr[i + 1]; ++p) {                                \
            intptr_t col = X_indices[p];                                                 \
            if (col < nr_feature) {                                                      \
                const double xv = X_data[p];                                             \
                const double *wrow = wpad + col * NCW;                                   \
                for (c = 0; c < NCW; ++c)                                                \
                    acc[c] += xv * wrow[c];                                              \
            }                                                                            \
        }                                                                                \
        if (bias >= 0) {                                                                 \
            const double *wrow = wpad + nr_feature * NCW;                                \
            for (c = 0; c < NCW; ++c)                                                    \
                acc[c] += bias * wrow[c];                                                \
        }                                                                                \
        {                                                                                \
            const double g = bucket_wt[pos];                                             \
            double *o = out + i * nr_w;                                                  \
            for (c = 0; c < nr_w; ++c)                                                   \
                o[c] += g * acc[c];                                                      \
        }                                                                                \
    }                                                                                    \
}

LCODING_LOCAL_DOT_FIXED(4)
LCODING_LOCAL_DOT_FIXED(8)
LCODING_LOCAL_DOT_FIXED(12)
LCODING_LOCAL_DOT_FIXED(16)

/* padded width used for nr_w classes (0: the generic loop) */
static inline intptr_t lcoding_local_dot_width(intptr_t nr_w)
{
    if (nr_w <= 1) return 0;          /* binary: one value, nothing to keep in registers */
    if (nr_w <= 16) return (nr_w + 3) / 4 * 4;
    return 0;
}

/* Copy the (stride x nr_w) block wa to wpad (stride x width), zero padded. */
static void lcoding_local_dot_pad(const double *wa, intptr_t stride, intptr_t nr_w,
                                  intptr_t width, double *wpad)
{
    intptr_t r, c;
    for (r = 0; r < stride; ++r) {
        for (c = 0; c < nr_w; ++c)
            wpad[r * width + c] = wa[r * nr_w + c];
        for (; c < width; ++c)
            wpad[r * width + c] = 0.0;
    }
}

/* out rows of one anchor's bucket: the fixed-width version when width > 0 (wpad
 * holds the padded block), else the generic loop over wa. */
static void lcoding_local_dot_bucket(const double *X_data, const int *X_indices,
                                     const int64_t *X_indptr, const int *bucket_row,
                                     const double *bucket_wt, intptr_t pos0, intptr_t pos1,
                                     const double *wa, double *wpad, intptr_t width,
                                     intptr_t nr_feature, intptr_t nr_w, double bias,
                                     double *out)
{
    intptr_t stride = nr_feature + (bias >= 0 ? 1 : 0);
    if (width == 0) {
        lcoding_local_dot_rows(X_data, X_indices, X_indptr, bucket_row, bucket_wt, pos0, pos1,
                               wa, nr_feature, nr_w, bias, out);
        return;
    }
    lcoding_local_dot_pad(wa, stride, nr_w, width, wpad);
    switch (width) {
    case 4: lcoding_local_dot_rows_4(X_data, X_indices, X_indptr, bucket_row, bucket_wt,
                                     pos0, pos1, wpad, nr_feature, nr_w, bias, out); break;
    case 8: lcoding_local_dot_rows_8(X_data, X_indices, X_indptr, bucket_row, bucket_wt,
                                     pos0, pos1, wpad, nr_feature, nr_w, bias, out); break;
    case 12: lcoding_local_dot_rows_12(X_data, X_indices, X_indptr, bucket_row, bucket_wt,
                                       pos0, pos1, wpad, nr_feature, nr_w, bias, out); break;
    default: lcoding_local_dot_rows_16(X_data, X_indices, X_indptr, bucket_row, bucket_wt,
                                       pos0, pos1, wpad, nr_feature, nr_w, bias, out); break;
    }
}

/* Row-major form of the same sums, for a one-column W (binary models): each row is
 * read once while its anchors' weight rows are gathered, instead of once per anchor
 * from a bucket.  A row's anchors are taken
 * in increasing anchor index (a stable insertion sort of its k entries, skipping
 * zero weights), so every out[i, c] gets the bucketed loop's additions in the
 * bucketed loop's order: the two forms give bit-identical values.  out rows
 * row_start..row_stop-1 must be zero on entry; order is k ints of scratch.
 * ijcnn1's binary LL-SVM (100 anchors, k = 8): 6.8 ms per 50 000 rows against 31 ms
 * bucketed (the measurements are in _knn.local_decision_values' notes). */
/* order[0:m] <- the positions j of a row's anchors with a nonzero weight, in
 * increasing anchor id; returns m.  Up to LCODING_LOCAL_DOT_BITSET_ANCHORS anchors
 * (n_words > 0) through a bitset of the ids (n_words 64-bit words, all zero between
 * rows, left zero) and slot[id] = j: no data-dependent branches, where an insertion
 * sort mispredicts (ijcnn1, k = 16 of 200 anchors: 0.13 of 1.29 us a row).  Past
 * that, or for a row that lists an anchor twice, the insertion sort. */
static inline intptr_t lcoding_anchor_order(const int *ai, const double *gi, intptr_t k,
                                            intptr_t *order, uint64_t *seen,
                                            intptr_t *slot, intptr_t n_words)
{
    intptr_t j, t, m = 0;
    if (n_words > 0) {
        intptr_t nz = 0, w, lo = n_words, hi = -1;
        for (j = 0; j < k; ++j) {
            if (gi[j] == 0.0)
                continue;
            w = ai[j] >> 6;
            seen[w] |= (uint64_t)1 << (ai[j] & 63);
            slot[ai[j]] = j;
            lo = w < lo ? w : lo;
            hi = w > hi ? w : hi;
            ++nz;
        }
        for (w = lo; w <= hi; ++w) {
            uint64_t bits = seen[w];
            seen[w] = 0;
            while (bits) {
                order[m++] = slot[w * 64 + lcoding_ctz64(bits)];
                bits &= bits - 1;
            }
        }
        if (m == nz)
            return m;
        m = 0;          /* an anchor listed twice */
    }
    for (j = 0; j < k; ++j) {
        if (gi[j] == 0.0)
            continue;
        t = m++;
        while (t > 0 && ai[order[t - 1]] > ai[j]) {
            order[t] = order[t - 1];
            --t;
        }
        order[t] = j;
    }
    return m;
}

LCODING_MULTIVERSION
static void lcoding_local_dot_by_row(const double *X_data, const int *X_indices,
                                     const int64_t *X_indptr, const int *anchor_idx,
                                     const double *coding_weight, intptr_t k,
                                     intptr_t row_start, intptr_t row_stop, const double *W,
                                     intptr_t nr_feature, intptr_t nr_w, double bias,
                                     double *out, intptr_t *order, uint64_t *seen,
                                     intptr_t *slot, intptr_t n_words)
{
    double acc[LCODING_LOCAL_DOT_MAX_W];
    const double *wt[LCODING_LOCAL_DOT_MAX_W];
    const intptr_t stride = nr_feature + (bias >= 0 ? 1 : 0);
    intptr_t i, t, t0, nt, m, c, c0, nc;
    int64_t p;
    for (i = row_start; i < row_stop; ++i) {
        const int *ai = anchor_idx + i * k;
        const double *gi = coding_weight + i * k;
        double *o = out + i * nr_w;
        m = lcoding_anchor_order(ai, gi, k, order, seen, slot, n_words);
        if (nr_w == 1) {
            /* one column: up to LCODING_LOCAL_DOT_MAX_W anchors' sums side by side,
             * each over the row's nonzeros in order, then the bias (the bucketed
             * form's order, so the same bits), added to the row's value in anchor
             * order: independent chains instead of one chain of m * nnz dependent
             * additions (ijcnn1, k = 16: the chain's add latency was most of it) */
            for (t0 = 0; t0 < m; t0 += LCODING_LOCAL_DOT_MAX_W) {
                nt = m - t0 < LCODING_LOCAL_DOT_MAX_W ? m - t0 : LCODING_LOCAL_DOT_MAX_W;
                for (t = 0; t < nt; ++t) {
                    wt[t] = W + (intptr_t)ai[order[t0 + t]] * stride;
                    acc[t] = 0.0;
                }
                for (p = X_indptr[i]; p < X_indptr[i + 1]; ++p) {
                    const intptr_t col = X_indices[p];
                    if (col < nr_feature) {
                        const double xv = X_data[p];
                        for (t = 0; t < nt; ++t)
                            acc[t] += xv * wt[t][col];
                    }
                }
                for (t = 0; t < nt; ++t) {
                    double a1 = acc[t];
                    if (bias >= 0)
                        a1 += bias * wt[t][nr_feature];
                    o[0] += gi[order[t0 + t]] * a1;
                }
            }
            continue;
        }
        for (t = 0; t < m; ++t) {
            const double g = gi[order[t]];
            const double *wa = W + (intptr_t)ai[order[t]] * stride * nr_w;
            for (c0 = 0; c0 < nr_w; c0 += LCODING_LOCAL_DOT_MAX_W) {
                nc = nr_w - c0 < LCODING_LOCAL_DOT_MAX_W ? nr_w - c0 : LCODING_LOCAL_DOT_MAX_W;
                lcoding_local_dot_acc(X_data, X_indices, X_indptr[i], X_indptr[i + 1], wa,
                                      nr_feature, nr_w, c0, nc, bias, acc);
                for (c = 0; c < nc; ++c)
                    o[c0 + c] += g * acc[c];
            }
        }
    }
}

#endif
