# The k* coding of LLC-JO (Anava & Levy 2016, Algorithm 1; algorithms.md §C.3) and
# the per-point helpers shared with the joint SGD kernel (_joint_sgd.pyx).
#
#     min_{gamma in simplex} ||gamma||_2 + gamma . eta,   eta_i = mu ||x - v_i||^2
#
# Greedy loop over the anchors in increasing eta, drawn one at a time from a
# binary min-heap (O(m) heapify + O(log m) per anchor the loop actually needs):
#     lambda_0 = eta_1 + 1;  while k < m and lambda_k > eta_{k+1}:
#         k += 1;  S1 += eta_k;  S2 += eta_k^2;
#         lambda_k = (S1 + sqrt(max(k + S1^2 - k S2, 0))) / k
#     gamma_i = (lambda - eta_i)_+ / sum_j (lambda - eta_j)_+   (i <= k*)

cdef void heap_build(double* key, int* ids, Py_ssize_t n) noexcept nogil
cdef void heap_pop(double* key, int* ids, Py_ssize_t* n, double* out_key, int* out_id) noexcept nogil

cdef Py_ssize_t kstar_row(const double* dist, Py_ssize_t m, double mu,
                          double* hkey, int* hid, int* out_idx, double* out_raw,
                          double* out_gamma, double* out_sum, double* out_lam) noexcept nogil
