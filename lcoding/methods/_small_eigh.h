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
 *      partial pivoting, zero pivots replaced by eps ||T||; close eigenvalues
 *      pulled apart by 10 eps ||T|| and their vectors orthogonalised against each
 *      other, as LAPACK's dstein does), O(n q); the values their Rayleigh quotients;
 *   4. each vector mapped back, z <- Q z, O(n^2 q).
 *
 * Why not LAPACK: for n = 17 (letter's k q-flats) dsyev took 25-37 us a matrix,
 * over half of letter's training: below the block size its reduction is ~5 level-2
 * BLAS calls a column (each far costlier than its few hundred flops here), and its
 * QL step rotates all n eigenvectors where 4 are wanted.  This takes 11-15 us (n =
 * 50, q = 12: 110-160 us against 320-455); all 17 eigenvalues by implicit QL
 * instead of the 4 by bisection took 13-16 us in the same runs.  What is left is
 * latency, not flops -- chains of dependent divisions and multiply-adds (an AVX2
 * build was no faster).  The vectors agree with dsyev's to rounding wherever the
 * q-th eigenvalue is apart from the next (where it is not, any basis of the tied
 * space is as good a fit, and the two may pick different ones).
 */
#ifndef LCODING_SMALL_EIGH_H
#define LCODING_SMALL_EIGH_H

#include <float.h>
#include <math.h>
#include <string.h>

#define LCODING_EIGH_BISECTIONS 32        /* halvings of each eigenvalue's bracket */
#define LCODING_EIGH_INVERSE_STEPS 3      /* one step is usually exact already */

/* Work: 12 n doubles, n ints. */
static inline long lcoding_top_eigh_work(long n) { return 12 * n; }

/* One row of the q Sturm sequences side by side (step 2 below): the next minors
 * and the sign changes; separate arrays (restrict) so the loop vectorises. */
static inline void lcoding_sturm_row(int q, double d, double e2, const double *restrict lam,
                              double *restrict p0, double *restrict p1,
                              double *restrict count)
{
    int t;
    for (t = 0; t < q; ++t) {
        double pn = (d - lam[t]) * p1[t] - e2 * p0[t];
        count[t] += ((pn < 0.0) != (p1[t] < 0.0)) ? 1.0 : 0.0;
        p0[t] = p1[t];
        p1[t] = pn;
    }
}

/* Keeps the minors within 2^+-200 (a power of two: exact, signs unchanged). */
static inline void lcoding_sturm_rescale(int q, double *p0, double *p1)
{
    int t;
    for (t = 0; t < q; ++t) {
        double big = fabs(p1[t]) > fabs(p0[t]) ? fabs(p1[t]) : fabs(p0[t]);
        if (big > 0x1p200) {
            p0[t] *= 0x1p-200;
            p1[t] *= 0x1p-200;
        } else if (big < 0x1p-200) {
            p0[t] *= 0x1p200;
            p1[t] *= 0x1p200;
        }
    }
}

/* Overwrites the row-major symmetric n x n matrix A (both triangles read).  On
 * return vecs (q x n, row-major) holds orthonormal eigenvectors of the q largest
 * eigenvalues, largest first, and vals (q) those eigenvalues.  Returns 0, or 1 when
 * inverse iteration broke down (not seen on finite input), or 2 for a non-finite
 * matrix. */
static int lcoding_top_eigh(int n, int q, double *A, double *vals, double *vecs,
                            double *work, int *iwork)
{
    double *diag = work, *off = diag + n, *beta = off + n, *ev = beta + n, *eo = ev + n;
    double *dg = eo + n, *du = dg + n, *du2 = du + n, *dl = du2 + n, *x = dl + n;
    double *p = x + n, *lam = p + n;
    int *swap = iwork;
    int i, j, k, t, start, exponent;
    double tnorm = 0.0, pert, ortol, f, g, acc, amax = 0.0, scale;

    if (n <= 0 || q <= 0)
        return 0;
    for (i = 0; i < n * n; ++i) {
        if (!isfinite(A[i]))
            return 2;
        if (fabs(A[i]) > amax)
            amax = fabs(A[i]);
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
        for (i = 1; i < len; ++i)
            sigma += xr[i] * xr[i];
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
        /* p = beta A22 v;  w = p - (beta p.v / 2) v;  A22 -= v w^T + w v^T */
        K = 0.0;
        for (i = 0; i < len; ++i) {
            const double *row = A22 + (long)i * n;
            acc = 0.0;
            for (j = 0; j < len; ++j)
                acc += row[j] * xr[j];
            p[i] = beta[k] * acc;
            K += p[i] * xr[i];
        }
        K *= 0.5 * beta[k];
        for (i = 0; i < len; ++i)
            p[i] -= K * xr[i];
        for (i = 0; i < len; ++i) {
            double *row = A22 + (long)i * n;
            double vi = xr[i], wi = p[i];
            for (j = 0; j < len; ++j)
                row[j] -= vi * p[j] + wi * xr[j];
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

    /* 2. the q largest eigenvalues of T by bisection, all q side by side.  The count
     *    of eigenvalues below x is the number of sign changes along the leading
     *    principal minors p_i of T - x I (a Sturm sequence: p_0 = 1,
     *    p_i = (d_{i-1} - x) p_{i-1} - e_{i-2}^2 p_{i-2}), each bracket [lo, hi]
     *    halved LCODING_EIGH_BISECTIONS times from the Gershgorin interval: to
     *    ~2^-30 ||T||, enough for step 3, whose vectors converge by |x - lambda| / gap
     *    a step (the values are then their Rayleigh quotients).  Minors, not the
     *    pivots p_i / p_{i-1} (LAPACK's dstebz): no division in the recurrence, and
     *    the q brackets' recurrences are one loop the compiler vectorises; the
     *    minors are rescaled by powers of two every 8 rows (their signs unchanged),
     *    as |p_i| can grow or shrink by orders of magnitude a row.  An exact zero
     *    minor counts as positive (measure zero: the bracket moves by at most one
     *    halving). */
    {
        double glo = 0.0, ghi = 0.0, *lo = ev, *hi = eo, *p0 = p, *p1 = x, *e2 = dl;
        double *count = du;
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
        for (t = 0; t < q; ++t) {
            lo[t] = glo;
            hi[t] = ghi;
        }
        for (k = 0; k < LCODING_EIGH_BISECTIONS; ++k) {
            for (t = 0; t < q; ++t) {
                lam[t] = 0.5 * (lo[t] + hi[t]);
                p0[t] = 1.0;
                p1[t] = diag[0] - lam[t];
                count[t] = p1[t] < 0.0;
            }
            for (i = 1; i < n; ++i) {
                lcoding_sturm_row(q, diag[i] , e2[i - 1], lam, p0, p1, count);
                if ((i & 7) == 0)
                    lcoding_sturm_rescale(q, p0, p1);
            }
            for (t = 0; t < q; ++t) {
                /* lambda_t, the t-th largest: n - t eigenvalues lie below x iff x is
                 * above it */
                if (count[t] >= (double)(n - t))
                    hi[t] = lam[t];
                else
                    lo[t] = lam[t];
            }
        }
        for (t = 0; t < q; ++t)
            lam[t] = 0.5 * (lo[t] + hi[t]);
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

    /* 3. inverse iteration on T for each, clusters orthogonalised */
    pert = DBL_EPSILON * tnorm;
    ortol = 1e-3 * tnorm;
    start = 0;
    for (t = 0; t < q; ++t) {
        double *z = vecs + (long)t * n;
        if (t > 0) {
            if (lam[t - 1] - lam[t] < 10.0 * pert)
                lam[t] = lam[t - 1] - 10.0 * pert;
            if (ev[t - 1] - ev[t] > ortol)
                start = t;                  /* a new cluster */
        }
        /* LU of T - lambda I with partial pivoting (LAPACK dgttrf's layout) */
        for (i = 0; i < n; ++i) {
            dg[i] = diag[i] - lam[t];
            du[i] = off[i];
            dl[i] = off[i];
            du2[i] = 0.0;
        }
        for (i = 0; i < n - 1; ++i) {
            if (fabs(dg[i]) >= fabs(dl[i])) {
                swap[i] = 0;
                if (dg[i] != 0.0) {
                    f = dl[i] / dg[i];
                    dl[i] = f;
                    dg[i + 1] -= f * du[i];
                } else {
                    dl[i] = 0.0;
                }
            } else {
                swap[i] = 1;
                f = dg[i] / dl[i];
                dg[i] = dl[i];
                dl[i] = f;
                g = du[i];
                du[i] = dg[i + 1];
                dg[i + 1] = g - f * dg[i + 1];
                if (i < n - 2) {
                    du2[i] = du[i + 1];
                    du[i + 1] = -f * du[i + 1];
                }
            }
        }
        for (i = 0; i < n; ++i) {           /* dg now holds the pivots' reciprocals */
            if (fabs(dg[i]) < pert)
                dg[i] = dg[i] < 0.0 ? -pert : pert;
            dg[i] = 1.0 / dg[i];
        }
        /* a fixed start vector, not orthogonal to any eigenvector in practice */
        for (i = 0; i < n; ++i)
            z[i] = 1.0 + (double)((7 * i + 3 * t) % 11) / 16.0;
        for (k = 0; k < LCODING_EIGH_INVERSE_STEPS; ++k) {
            double norm = 0.0;
            for (i = 0; i < n; ++i)
                if (fabs(z[i]) > norm)
                    norm = fabs(z[i]);
            norm = 1.0 / norm;
            for (i = 0; i < n; ++i)
                z[i] *= norm;               /* keep the solve's growth finite */
            for (i = 0; i < n - 1; ++i) {
                if (swap[i]) {
                    g = z[i];
                    z[i] = z[i + 1];
                    z[i + 1] = g - dl[i] * z[i];
                } else {
                    z[i + 1] -= dl[i] * z[i];
                }
            }
            z[n - 1] *= dg[n - 1];
            if (n >= 2)
                z[n - 2] = (z[n - 2] - du[n - 2] * z[n - 1]) * dg[n - 2];
            for (i = n - 3; i >= 0; --i)
                z[i] = (z[i] - du[i] * z[i + 1] - du2[i] * z[i + 2]) * dg[i];
            for (j = start; j < t; ++j) {   /* against the cluster's earlier vectors */
                const double *y = vecs + (long)j * n;
                acc = 0.0;
                for (i = 0; i < n; ++i)
                    acc += y[i] * z[i];
                for (i = 0; i < n; ++i)
                    z[i] -= acc * y[i];
            }
            norm = 0.0;                     /* 2-norm, scaled by the largest entry */
            for (i = 0; i < n; ++i)
                if (fabs(z[i]) > norm)
                    norm = fabs(z[i]);
            if (!(norm > 0.0) || !isfinite(norm))
                return 1;
            norm = 1.0 / norm;
            for (i = 0; i < n; ++i)
                z[i] *= norm;
            norm = 0.0;
            for (i = 0; i < n; ++i)
                norm += z[i] * z[i];
            norm = 1.0 / sqrt(norm);
            for (i = 0; i < n; ++i)
                z[i] *= norm;
        }
        acc = diag[n - 1] * z[n - 1] * z[n - 1];    /* the Rayleigh quotient z^T T z */
        for (i = 0; i < n - 1; ++i)
            acc += z[i] * (diag[i] * z[i] + 2.0 * off[i] * z[i + 1]);
        vals[t] = acc / scale;
    }

    /* 4. back to A's coordinates: z <- H_0 (H_1 (... H_{n-3} z)) */
    for (t = 0; t < q; ++t) {
        double *z = vecs + (long)t * n;
        for (k = n - 3; k >= 0; --k) {
            const double *v = A + (long)k * n + k + 1;
            double *zs = z + k + 1;
            int len = n - k - 1;
            if (beta[k] == 0.0)
                continue;
            acc = 0.0;
            for (i = 0; i < len; ++i)
                acc += v[i] * zs[i];
            acc *= beta[k];
            for (i = 0; i < len; ++i)
                zs[i] -= acc * v[i];
        }
    }
    return 0;
}

#endif
