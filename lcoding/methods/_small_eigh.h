/* The top q eigenpairs of a small symmetric matrix (lcoding_top_eigh), for the k
 * q-flats' best-fit flats: the eigenvectors of the q largest eigenvalues of a d x d
 * scatter, d up to a few dozen, solved thousands of times a training.
 *
 *   1. Householder reduction to tridiagonal form, T = Q^T A Q with
 *      Q = H_0 H_1 ... H_{n-3}, H_k = I - beta_k v_k v_k^T (Golub & Van Loan,
 *      Matrix Computations, 4th ed., Algorithm 8.3.1), ~(4/3) n^3 flops;
 *   2. the q largest eigenvalues of T by bisection on Sturm counts (ibid., 8.4.2;
 *      LAPACK's dstebz), O(n q) a halving;
 *   3. their eigenvectors of T by inverse iteration on T - lambda I (LU with
 *      partial pivoting, zero pivots replaced by eps ||T||; pseudo-random start
 *      vectors; close eigenvalues pulled apart by 10 eps ||T|| and their vectors
 *      orthogonalised against each other, as LAPACK's dstein does, here in two
 *      passes), O(n q); the values their Rayleigh quotients;
 *   4. each vector mapped back, z <- Q z, O(n^2 q).
 *
 * Why not LAPACK: for n = 17 (letter's k q-flats) dsyev took 25-37 us a matrix,
 * over half of letter's training: below the block size its reduction is ~5 level-2
 * BLAS calls a column (each far costlier than its few hundred flops here), and its
 * QL step rotates all n eigenvectors where 4 are wanted.  Solving one eigenpair at
 * a time, this took 11-15 us (all 17 eigenvalues by implicit QL: 13-16): latency
 * (chains of dependent operations) and mispredicted branches on signs.  Steps 2-4
 * now solve four eigenpairs side by side (two SSE2 registers, the choices as bit
 * masks), the reduction's short loops run without aliasing tests, and the whole is
 * built for AVX2 too: letter's scatters (17 x 17, q = 4) 12.5 -> 5.0 us, 50 x 50
 * with q = 12 120-130 -> 72-85 us (C, the same matrices, best of 5 runs).  The
 * vectors agree with dsyev's to rounding wherever the q-th eigenvalue is apart from
 * the next (where it is not, any basis of the tied space is as good a fit, and the
 * two may pick different ones).
 */
#ifndef LCODING_SMALL_EIGH_H
#define LCODING_SMALL_EIGH_H

#include <float.h>
#include <math.h>
#include <string.h>

#define LCODING_EIGH_BISECTIONS 32        /* halvings of each eigenvalue's bracket */
#define LCODING_EIGH_INVERSE_STEPS 3      /* one step is usually exact already */
#define LCODING_EIGH_LANES 4              /* eigenpairs solved side by side */

/* Entry i of inverse iteration's start vector for eigenpair t: a hash of (t, i)
 * (splitmix64's finaliser) mapped to [0.5, 1.5) */
static inline double lcoding_eigh_start(int t, int i)
{
    unsigned long long z = (unsigned long long)t * 0x9E3779B97F4A7C15ULL
                           + (unsigned long long)i * 0xD1B54A32D192ED03ULL + 1ULL;
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return 0.5 + (double)(z >> 11) * 0x1p-53;
}

/* Work: 32 n doubles, n ints. */
static inline long lcoding_top_eigh_work(long n) { return 32 * n; }

/* Two doubles side by side: GCC's and Clang's vector extension (an SSE2 register in
 * the x86-64 baseline, NEON on ARM), loads and stores unaligned; the lanes of this
 * file are pairs of them.  The lanes' choices (signs, pivots) are bit masks, not
 * branches: the bisection with the compiler's branches on each lane's sign took
 * 15 000 cycles at n = 17, q = 4 (the one-lane-at-a-time loop: 13 500), with masks
 * 4 500.  (Four-double vectors without AVX compiled to scalar compares.) */
typedef double lcoding_v2d __attribute__((vector_size(16), aligned(8), may_alias));
typedef long long lcoding_v2i __attribute__((vector_size(16), aligned(8), may_alias));
#define LCODING_V2_AT(p) (*(lcoding_v2d *)(p))   /* the two doubles at p */

/* m ? a : b, lane by lane (m: all ones or all zeros a lane) */
#define LCODING_V2_SELECT(m, a, b) \
    ((lcoding_v2d)((((lcoding_v2i)(a)) & (m)) | (((lcoding_v2i)(b)) & ~(m))))
#define LCODING_V2_ABS(a) \
    ((lcoding_v2d)(((lcoding_v2i)(a)) & (lcoding_v2i){0x7fffffffffffffffLL, \
                                                      0x7fffffffffffffffLL}))
#define LCODING_V2_MAX(a, b) LCODING_V2_SELECT((a) > (b), a, b)
#define LCODING_V2_SPLAT(x) ((lcoding_v2d){(x), (x)})
#define LCODING_V2_ONES(m) ((lcoding_v2d)((lcoding_v2i)LCODING_V2_SPLAT(1.0) & (m)))

/* Step 2 for LCODING_EIGH_LANES (4) eigenvalues side by side: the t0 + l-th
 * largest (l < nb; the other lanes repeat lane 0 and are dropped) by
 * LCODING_EIGH_BISECTIONS halvings of [glo, ghi]. */
static inline __attribute__((always_inline)) void
lcoding_bisect_lanes(int n, const double *diag, const double *e2, double glo, double ghi,
                     int t0, int nb, double *out)
{
    const lcoding_v2d zero = LCODING_V2_SPLAT(0.0), one = LCODING_V2_SPLAT(1.0);
    const lcoding_v2d big = LCODING_V2_SPLAT(0x1p200), small = LCODING_V2_SPLAT(0x1p-200);
    lcoding_v2d lo0 = LCODING_V2_SPLAT(glo), lo1 = lo0, hi0 = LCODING_V2_SPLAT(ghi), hi1 = hi0;
    lcoding_v2d below0, below1;
    double below[4];
    int i, k, l;
    for (l = 0; l < 4; ++l)
        /* lambda_t, the t-th largest: n - t eigenvalues lie below x iff x is above it */
        below[l] = (double)(n - (t0 + (l < nb ? l : 0)));
    below0 = (lcoding_v2d){below[0], below[1]};
    below1 = (lcoding_v2d){below[2], below[3]};
    for (k = 0; k < LCODING_EIGH_BISECTIONS; ++k) {
        lcoding_v2d lam0 = 0.5 * (lo0 + hi0), lam1 = 0.5 * (lo1 + hi1);
        lcoding_v2d a0 = one, a1 = one, b0 = diag[0] - lam0, b1 = diag[0] - lam1;
        lcoding_v2d c0 = LCODING_V2_ONES(b0 < zero), c1 = LCODING_V2_ONES(b1 < zero);
        for (i = 1; i < n; ++i) {
            const double di = diag[i], ei = e2[i - 1];
            lcoding_v2d pn0 = (di - lam0) * b0 - ei * a0, pn1 = (di - lam1) * b1 - ei * a1;
            c0 += LCODING_V2_ONES((pn0 < zero) ^ (b0 < zero));
            c1 += LCODING_V2_ONES((pn1 < zero) ^ (b1 < zero));
            a0 = b0;
            b0 = pn0;
            a1 = b1;
            b1 = pn1;
            if ((i & 7) == 0) {
                /* keep the minors within 2^+-200 (a power of two: exact, signs kept) */
                lcoding_v2d m0 = LCODING_V2_MAX(LCODING_V2_ABS(a0), LCODING_V2_ABS(b0));
                lcoding_v2d m1 = LCODING_V2_MAX(LCODING_V2_ABS(a1), LCODING_V2_ABS(b1));
                lcoding_v2d f0 = LCODING_V2_SELECT(m0 > big, small,
                                                   LCODING_V2_SELECT(m0 < small, big, one));
                lcoding_v2d f1 = LCODING_V2_SELECT(m1 > big, small,
                                                   LCODING_V2_SELECT(m1 < small, big, one));
                a0 *= f0;
                b0 *= f0;
                a1 *= f1;
                b1 *= f1;
            }
        }
        hi0 = LCODING_V2_SELECT(c0 >= below0, lam0, hi0);
        lo0 = LCODING_V2_SELECT(c0 >= below0, lo0, lam0);
        hi1 = LCODING_V2_SELECT(c1 >= below1, lam1, hi1);
        lo1 = LCODING_V2_SELECT(c1 >= below1, lo1, lam1);
    }
    lo0 = 0.5 * (lo0 + hi0);
    lo1 = 0.5 * (lo1 + hi1);
    for (l = 0; l < nb; ++l)
        out[l] = l < 2 ? lo0[l] : lo1[l - 2];
}

/* Overwrites the row-major symmetric n x n matrix A (both triangles read).  On
 * return vecs (q x n, row-major) holds orthonormal eigenvectors of the q largest
 * eigenvalues, largest first, and vals (q) those eigenvalues.  Returns 0, or 1 when
 * inverse iteration broke down (not seen on finite input), or 2 for a non-finite
 * matrix. */
static inline __attribute__((always_inline)) int
lcoding_top_eigh_impl(int n, int q, double *A, double *vals, double *vecs, double *work,
                      int *iwork)
{
    enum { NL = LCODING_EIGH_LANES };
    double *diag = work, *off = diag + n, *beta = off + n, *ev = beta + n, *e2 = ev + n;
    double *p = e2 + n, *lam = p + n;
    /* the lanes' LU factors and vectors, entry i of lane l at [i * NL + l] */
    double *Lf = lam + n, *U1 = Lf + NL * n, *U2 = U1 + NL * n, *sw = U2 + NL * n;
    double *rp = sw + NL * n, *z = rp + NL * n;
    int *cluster = iwork;
    int i, j, k, t, l, t0, nb, exponent;
    double tnorm = 0.0, pert, ortol, acc, amax = 0.0, scale;

    if (n <= 0 || q <= 0)
        return 0;
    {
        /* the largest |entry|, and whether any is not finite: no branch an entry */
        const lcoding_v2d huge = LCODING_V2_SPLAT(DBL_MAX);
        lcoding_v2d top = LCODING_V2_SPLAT(0.0);
        lcoding_v2i bad = {0, 0};
        for (i = 0; i + 1 < n * n; i += 2) {
            lcoding_v2d a = LCODING_V2_ABS(LCODING_V2_AT(A + i));
            bad |= ~(a <= huge);            /* NaN or infinite */
            top = LCODING_V2_MAX(a, top);
        }
        if (i < n * n) {
            lcoding_v2d a = LCODING_V2_ABS(LCODING_V2_SPLAT(A[i]));
            bad |= ~(a <= huge);
            top = LCODING_V2_MAX(a, top);
        }
        if (bad[0] | bad[1])
            return 2;
        amax = top[0] > top[1] ? top[0] : top[1];
    }
    /* scale by a power of two (exactly) to largest entry in [1/2, 1): no overflow in
     * the squares below, none of the inverse iteration's vectors underflowing */
    frexp(amax, &exponent);
    scale = ldexp(1.0, -exponent);
    if (amax > 0.0 && scale != 1.0)
        for (i = 0; i < n * n; ++i)
            A[i] *= scale;

    /* 1. Householder: column k below the diagonal (row k right of it, by symmetry)
     *    is x; v = x - alpha e_1 scaled to v_0 = 1 is stored over row k. */
    for (k = 0; k < n - 2; ++k) {
        double *xr = A + (long)k * n + k + 1;
        int len = n - k - 1;
        double sigma = 0.0, x0 = xr[0], mu, alpha, v0, K;
        double *A22 = A + (long)(k + 1) * n + k + 1;
        {
            /* two sums side by side, not one chain of dependent additions */
            lcoding_v2d s2 = LCODING_V2_SPLAT(0.0);
            for (i = 1; i + 1 < len; i += 2)
                s2 += LCODING_V2_AT(xr + i) * LCODING_V2_AT(xr + i);
            sigma = s2[0] + s2[1];
            if (i < len)
                sigma += xr[i] * xr[i];
        }
        if (sigma == 0.0) {                 /* already tridiagonal in this column */
            beta[k] = 0.0;
            off[k] = x0;
            continue;
        }
        mu = sqrt(x0 * x0 + sigma);
        alpha = x0 <= 0.0 ? mu : -mu;       /* x0 - alpha without cancellation */
        v0 = x0 - alpha;
        beta[k] = 2.0 * v0 * v0 / (v0 * v0 + sigma);
        xr[0] = 1.0;
        for (i = 1; i < len; ++i)
            xr[i] /= v0;
        off[k] = alpha;
        /* p = beta A22 v;  w = p - (beta p.v / 2) v;  A22 -= v w^T + w v^T.  A22 v as
         * a sum of A22's rows (its columns, A22 being symmetric) scaled by v: the
         * loop over i vectorises, where a dot product a row is one chain of
         * dependent additions (the whole reduction took 8 900 of the one-pair-at-a-
         * time solver's 34 000 cycles at n = 17). */
        {
            /* restrict: the rows, v and p do not overlap, so the short inner loops
             * need no run-time overlap tests before their vector code */
            double *restrict pr = p;
            for (i = 0; i < len; ++i)
                pr[i] = 0.0;
            for (j = 0; j < len; ++j) {
                const double *restrict row = A22 + (long)j * n;
                double vj = xr[j];
                for (i = 0; i < len; ++i)
                    pr[i] += row[i] * vj;
            }
        }
        {
            lcoding_v2d k2 = LCODING_V2_SPLAT(0.0);
            for (i = 0; i < len; ++i)
                p[i] *= beta[k];
            for (i = 0; i + 1 < len; i += 2)
                k2 += LCODING_V2_AT(p + i) * LCODING_V2_AT(xr + i);
            K = k2[0] + k2[1];
            if (i < len)
                K += p[i] * xr[i];
        }
        K *= 0.5 * beta[k];
        for (i = 0; i < len; ++i)
            p[i] -= K * xr[i];
        for (i = 0; i < len; ++i) {
            double *restrict row = A22 + (long)i * n;
            const double *restrict pr = p, *restrict vr = xr;
            double vi = xr[i], wi = p[i];
            for (j = 0; j < len; ++j)
                row[j] -= vi * pr[j] + wi * vr[j];
        }
    }
    for (i = 0; i < n; ++i)
        diag[i] = A[(long)i * n + i];
    if (n >= 2)
        off[n - 2] = A[(long)(n - 2) * n + n - 1];
    off[n - 1] = 0.0;
    for (i = 0; i < n; ++i) {
        double rs = fabs(diag[i]) + fabs(off[i]) + (i > 0 ? fabs(off[i - 1]) : 0.0);
        if (rs > tnorm)
            tnorm = rs;
    }

    /* 2. the q largest eigenvalues of T by bisection (lcoding_bisect_lanes, up to
     *    NL side by side).  The count of eigenvalues below x is the number of sign
     *    changes along the leading principal minors p_i of T - x I (a Sturm
     *    sequence: p_0 = 1, p_i = (d_{i-1} - x) p_{i-1} - e_{i-2}^2 p_{i-2}), each
     *    bracket [lo, hi] halved LCODING_EIGH_BISECTIONS times from the Gershgorin
     *    interval: to ~2^-30 ||T||, enough for step 3, whose vectors converge by
     *    |x - lambda| / gap a step (the values are then their Rayleigh quotients).
     *    Minors, not the pivots p_i / p_{i-1} (LAPACK's dstebz): no division in
     *    the recurrence; the minors are rescaled by powers of two every 8 rows
     *    (their signs unchanged), as |p_i| can grow or shrink by orders of
     *    magnitude a row.  An exact zero minor counts as positive (measure zero:
     *    the bracket moves by at most one halving). */
    {
        double glo = 0.0, ghi = 0.0;
        for (i = 0; i < n; ++i) {
            double rad = fabs(off[i]) + (i > 0 ? fabs(off[i - 1]) : 0.0);
            if (i == 0 || diag[i] - rad < glo)
                glo = diag[i] - rad;
            if (i == 0 || diag[i] + rad > ghi)
                ghi = diag[i] + rad;
            e2[i] = off[i] * off[i];
        }
        glo -= 4.0 * DBL_EPSILON * tnorm + DBL_MIN;
        ghi += 4.0 * DBL_EPSILON * tnorm + DBL_MIN;
        for (t0 = 0; t0 < q; t0 += NL)
            lcoding_bisect_lanes(n, diag, e2, glo, ghi, t0, q - t0 < NL ? q - t0 : NL,
                                 lam + t0);
    }
    for (t = 0; t < q; ++t)
        ev[t] = lam[t];                 /* the brackets' midpoints, descending */
    if (tnorm == 0.0) {                     /* the zero matrix: dsyev's unit vectors */
        memset(vecs, 0, (long)q * n * sizeof(double));
        memset(vals, 0, q * sizeof(double));
        for (t = 0; t < q; ++t)
            vecs[(long)t * n + (n - 1 - t)] = 1.0;
        return 0;
    }

    /* 3. inverse iteration on T, NL eigenvectors side by side (each lane's own
     *    LU, pivots chosen lane by lane without branches), close eigenvalues
     *    pulled apart and the vectors of a cluster orthogonalised against its
     *    earlier ones, as LAPACK's dstein does.  Solved one vector at a time, the
     *    solves' chains of dependent multiply-adds left the core idle between them
     *    (8 800 cycles at n = 17, q = 4). */
    pert = DBL_EPSILON * tnorm;
    ortol = 1e-3 * tnorm;
    cluster[0] = 0;                         /* the first vector of t's cluster */
    for (t = 1; t < q; ++t) {
        if (lam[t - 1] - lam[t] < 10.0 * pert)
            lam[t] = lam[t - 1] - 10.0 * pert;
        cluster[t] = ev[t - 1] - ev[t] > ortol ? t : cluster[t - 1];
    }
    for (t0 = 0; t0 < q; t0 += NL) {
        const lcoding_v2d zero = LCODING_V2_SPLAT(0.0), one = LCODING_V2_SPLAT(1.0);
        const lcoding_v2d pv = LCODING_V2_SPLAT(pert);
        lcoding_v2d shift[2], dgc[2], duc[2];
        int h, ortho = 0;
        nb = q - t0 < NL ? q - t0 : NL;
        for (h = 0; h < 2; ++h) {
            shift[h] = (lcoding_v2d){lam[t0 + (2 * h < nb ? 2 * h : 0)],
                                     lam[t0 + (2 * h + 1 < nb ? 2 * h + 1 : 0)]};
            dgc[h] = diag[0] - shift[h];
            duc[h] = LCODING_V2_SPLAT(off[0]);
        }
        for (l = 0; l < nb; ++l)
            ortho |= cluster[t0 + l] < t0 + l;
        /* LU with partial pivoting of T - shift I (LAPACK dgttrf's): row i's pivot
         * is the larger of the current diagonal g and the subdiagonal e_i; swapped,
         * U's row i is (e_i, d_{i+1} - shift, e_{i+1}); sw holds the swaps' masks */
        for (i = 0; i < n - 1; ++i) {
            const lcoding_v2d e = LCODING_V2_SPLAT(off[i]), en = LCODING_V2_SPLAT(off[i + 1]);
            for (h = 0; h < 2; ++h) {
                lcoding_v2d g = dgc[h], u = duc[h], dn = diag[i + 1] - shift[h], f;
                lcoding_v2i s = LCODING_V2_ABS(g) < LCODING_V2_ABS(e);
                lcoding_v2d num = LCODING_V2_SELECT(s, g, e), den = LCODING_V2_SELECT(s, e, g);
                lcoding_v2i nz = den != zero;
                f = LCODING_V2_SELECT(nz, num / LCODING_V2_SELECT(nz, den, one), zero);
                LCODING_V2_AT(Lf + i * NL + 2 * h) = f;
                LCODING_V2_AT(rp + i * NL + 2 * h) = LCODING_V2_SELECT(s, e, g);
                LCODING_V2_AT(U1 + i * NL + 2 * h) = LCODING_V2_SELECT(s, dn, u);
                LCODING_V2_AT(U2 + i * NL + 2 * h) = LCODING_V2_SELECT(s, en, zero);
                LCODING_V2_AT(sw + i * NL + 2 * h) = (lcoding_v2d)s;
                dgc[h] = LCODING_V2_SELECT(s, u - f * dn, dn - f * u);
                duc[h] = LCODING_V2_SELECT(s, -f * en, en);
            }
        }
        for (h = 0; h < 2; ++h) {
            LCODING_V2_AT(rp + (n - 1) * NL + 2 * h) = dgc[h];
            LCODING_V2_AT(U1 + (n - 1) * NL + 2 * h) = zero;
            LCODING_V2_AT(U2 + (n - 1) * NL + 2 * h) = zero;
        }
        for (i = 0; i < 2 * n; ++i) {       /* rp: the pivots' reciprocals */
            lcoding_v2d g = LCODING_V2_AT(rp + 2 * i);
            g = LCODING_V2_SELECT(LCODING_V2_ABS(g) < pv, LCODING_V2_SELECT(g < zero, -pv, pv), g);
            LCODING_V2_AT(rp + 2 * i) = one / g;
        }
        /* fixed pseudo-random start vectors (as LAPACK's dstein draws them), not
         * orthogonal to any eigenvector in practice and independent of each other:
         * a tied eigenvalue's vectors grow from the start vectors' parts in its
         * space, so those parts must span it (the earlier pattern, 1 + ((7 i + 3 t)
         * mod 11) / 16, repeated every 11 vectors: 12 tied zero eigenvalues of a
         * scatter with 12 zero columns got only 10 vectors, then duplicates) */
        for (i = 0; i < n; ++i)
            for (l = 0; l < NL; ++l)
                z[i * NL + l] = lcoding_eigh_start(t0 + l, i);
        for (k = 0; k < LCODING_EIGH_INVERSE_STEPS; ++k) {
            lcoding_v2d nm[2], cur[2], z1[2], z2[2];
            for (h = 0; h < 2; ++h)
                nm[h] = zero;
            for (i = 0; i < n; ++i)
                for (h = 0; h < 2; ++h)
                    nm[h] = LCODING_V2_MAX(LCODING_V2_ABS(LCODING_V2_AT(z + i * NL + 2 * h)),
                                           nm[h]);
            for (h = 0; h < 2; ++h) {
                nm[h] = one / nm[h];        /* keep the solve's growth finite */
                cur[h] = LCODING_V2_AT(z + 2 * h) * nm[h];
            }
            for (i = 0; i < n - 1; ++i) {   /* forward: L's swaps and multipliers */
                for (h = 0; h < 2; ++h) {
                    lcoding_v2i s = (lcoding_v2i)LCODING_V2_AT(sw + i * NL + 2 * h);
                    lcoding_v2d nxt = LCODING_V2_AT(z + (i + 1) * NL + 2 * h) * nm[h];
                    lcoding_v2d a = LCODING_V2_SELECT(s, nxt, cur[h]);
                    lcoding_v2d b = LCODING_V2_SELECT(s, cur[h], nxt);
                    LCODING_V2_AT(z + i * NL + 2 * h) = a;
                    cur[h] = b - LCODING_V2_AT(Lf + i * NL + 2 * h) * a;
                }
            }
            for (h = 0; h < 2; ++h) {       /* back: U */
                z2[h] = cur[h] * LCODING_V2_AT(rp + (n - 1) * NL + 2 * h);
                LCODING_V2_AT(z + (n - 1) * NL + 2 * h) = z2[h];
                z1[h] = z2[h];
                if (n >= 2) {
                    z1[h] = (LCODING_V2_AT(z + (n - 2) * NL + 2 * h)
                             - LCODING_V2_AT(U1 + (n - 2) * NL + 2 * h) * z2[h])
                            * LCODING_V2_AT(rp + (n - 2) * NL + 2 * h);
                    LCODING_V2_AT(z + (n - 2) * NL + 2 * h) = z1[h];
                }
            }
            for (i = n - 3; i >= 0; --i)
                for (h = 0; h < 2; ++h) {
                    lcoding_v2d zi = (LCODING_V2_AT(z + i * NL + 2 * h)
                                      - LCODING_V2_AT(U1 + i * NL + 2 * h) * z1[h]
                                      - LCODING_V2_AT(U2 + i * NL + 2 * h) * z2[h])
                                     * LCODING_V2_AT(rp + i * NL + 2 * h);
                    LCODING_V2_AT(z + i * NL + 2 * h) = zi;
                    z2[h] = z1[h];
                    z1[h] = zi;
                }
            if (ortho) {
                /* against the cluster's earlier vectors (the final ones of earlier
                 * blocks, this step's of the lanes before in this block), lane
                 * after lane, each normalised before the next uses it; two passes
                 * of Gram-Schmidt ("twice is enough"): in a tight cluster the
                 * iterate is mostly the earlier vectors, and one pass left them at
                 * 1e-9 from orthogonal (eigenvalues 1 +- 1e-12) */
                for (l = 0; l < nb; ++l) {
                    double top = 0.0, ss = 0.0;
                    int pass;
                    for (pass = 0; pass < 2; ++pass)
                        for (j = cluster[t0 + l]; j < t0 + l; ++j) {
                            const double *y = j < t0 ? vecs + (long)j * n : z + (j - t0);
                            const int sy = j < t0 ? 1 : NL;
                            acc = 0.0;
                            for (i = 0; i < n; ++i)
                                acc += y[i * sy] * z[i * NL + l];
                            for (i = 0; i < n; ++i)
                                z[i * NL + l] -= acc * y[i * sy];
                        }
                    for (i = 0; i < n; ++i) /* 2-norm, scaled by the largest entry */
                        top = fabs(z[i * NL + l]) > top ? fabs(z[i * NL + l]) : top;
                    if (!(top > 0.0) || !isfinite(top))
                        return 1;
                    top = 1.0 / top;
                    for (i = 0; i < n; ++i) {
                        z[i * NL + l] *= top;
                        ss += z[i * NL + l] * z[i * NL + l];
                    }
                    ss = 1.0 / sqrt(ss);
                    for (i = 0; i < n; ++i)
                        z[i * NL + l] *= ss;
                }
            } else {
                /* no clusters: the same steps, the lanes at once */
                lcoding_v2d ss[2];
                for (h = 0; h < 2; ++h) {
                    nm[h] = zero;
                    ss[h] = zero;
                }
                for (i = 0; i < n; ++i)
                    for (h = 0; h < 2; ++h)
                        nm[h] = LCODING_V2_MAX(LCODING_V2_ABS(LCODING_V2_AT(z + i * NL + 2 * h)),
                                               nm[h]);
                for (l = 0; l < nb; ++l)
                    if (!(nm[l / 2][l % 2] > 0.0) || !isfinite(nm[l / 2][l % 2]))
                        return 1;
                for (h = 0; h < 2; ++h)
                    nm[h] = one / nm[h];
                for (i = 0; i < n; ++i)
                    for (h = 0; h < 2; ++h) {
                        lcoding_v2d zi = LCODING_V2_AT(z + i * NL + 2 * h) * nm[h];
                        LCODING_V2_AT(z + i * NL + 2 * h) = zi;
                        ss[h] += zi * zi;
                    }
                for (h = 0; h < 2; ++h)
                    ss[h] = (lcoding_v2d){1.0 / sqrt(ss[h][0]), 1.0 / sqrt(ss[h][1])};
                for (i = 0; i < n; ++i)
                    for (h = 0; h < 2; ++h)
                        LCODING_V2_AT(z + i * NL + 2 * h) *= ss[h];
            }
        }
        {
            lcoding_v2d rq[2];              /* the Rayleigh quotients z^T T z */
            for (h = 0; h < 2; ++h) {
                lcoding_v2d zl = LCODING_V2_AT(z + (n - 1) * NL + 2 * h);
                rq[h] = diag[n - 1] * zl * zl;
            }
            for (i = 0; i < n - 1; ++i)
                for (h = 0; h < 2; ++h) {
                    lcoding_v2d zi = LCODING_V2_AT(z + i * NL + 2 * h);
                    rq[h] += zi * (diag[i] * zi
                                   + 2.0 * off[i] * LCODING_V2_AT(z + (i + 1) * NL + 2 * h));
                }
            for (l = 0; l < nb; ++l)
                vals[t0 + l] = rq[l / 2][l % 2] / scale;
        }
        for (l = 0; l < nb; ++l)            /* in T's coordinates, for later blocks */
            for (i = 0; i < n; ++i)
                vecs[(long)(t0 + l) * n + i] = z[i * NL + l];
    }

    /* 4. back to A's coordinates: z <- H_0 (H_1 (... H_{n-3} z)), NL at once */
    for (t0 = 0; t0 < q; t0 += NL) {
        const lcoding_v2d zero = LCODING_V2_SPLAT(0.0);
        int h;
        nb = q - t0 < NL ? q - t0 : NL;
        for (i = 0; i < n; ++i)
            for (l = 0; l < NL; ++l)
                z[i * NL + l] = l < nb ? vecs[(long)(t0 + l) * n + i] : 0.0;
        for (k = n - 3; k >= 0; --k) {
            const double *v = A + (long)k * n + k + 1;
            double *zs = z + (k + 1) * NL;
            lcoding_v2d dot[2];
            int len = n - k - 1;
            if (beta[k] == 0.0)
                continue;
            for (h = 0; h < 2; ++h)
                dot[h] = zero;
            for (i = 0; i < len; ++i)
                for (h = 0; h < 2; ++h)
                    dot[h] += v[i] * LCODING_V2_AT(zs + i * NL + 2 * h);
            for (h = 0; h < 2; ++h)
                dot[h] *= beta[k];
            for (i = 0; i < len; ++i)
                for (h = 0; h < 2; ++h)
                    LCODING_V2_AT(zs + i * NL + 2 * h) -= dot[h] * v[i];
        }
        for (l = 0; l < nb; ++l)
            for (i = 0; i < n; ++i)
                vecs[(long)(t0 + l) * n + i] = z[i * NL + l];
    }
    return 0;
}

/* The same code built twice: for the x86-64 baseline (SSE2) and, where the CPU has
 * it, for AVX2 -- the reduction's and the back-transformation's loops then run four
 * doubles a vector (17 x 17, q = 4: 6.1 -> 4.9 us).  AVX2 without FMA: every
 * operation rounds as in the baseline build, so both give the same bits. */
static int lcoding_top_eigh_base(int n, int q, double *A, double *vals, double *vecs,
                                 double *work, int *iwork)
{
    return lcoding_top_eigh_impl(n, q, A, vals, vecs, work, iwork);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define LCODING_EIGH_HAVE_AVX2 1
__attribute__((target("avx2"))) static int
lcoding_top_eigh_avx2(int n, int q, double *A, double *vals, double *vecs, double *work,
                      int *iwork)
{
    return lcoding_top_eigh_impl(n, q, A, vals, vecs, work, iwork);
}
#endif

/* path 0: AVX2 where the CPU has it, 1: the baseline build */
static int lcoding_top_eigh_path(int n, int q, double *A, double *vals, double *vecs,
                                 double *work, int *iwork, int path)
{
#ifdef LCODING_EIGH_HAVE_AVX2
    if (path != 1 && __builtin_cpu_supports("avx2"))
        return lcoding_top_eigh_avx2(n, q, A, vals, vecs, work, iwork);
#endif
    (void)path;
    return lcoding_top_eigh_base(n, q, A, vals, vecs, work, iwork);
}

static int lcoding_top_eigh(int n, int q, double *A, double *vals, double *vecs,
                            double *work, int *iwork)
{
    return lcoding_top_eigh_path(n, q, A, vals, vecs, work, iwork, 0);
}

#endif
