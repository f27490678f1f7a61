# Seeded random numbers for the kernels: splitmix64 (Steele, Lea & Flood 2014).
#
# State is one uint64 owned by the caller and passed by pointer, so kernels never
# share a global generator; the Python driver derives every state from the
# user's seed (-S), which makes runs reproducible bit for bit.
from libc.stdint cimport uint64_t


cdef inline uint64_t rng_next(uint64_t* state) noexcept nogil:
    cdef uint64_t z
    state[0] += <uint64_t>0x9E3779B97F4A7C15
    z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline Py_ssize_t rng_below(uint64_t* state, Py_ssize_t bound) noexcept nogil:
    # Uniform integer in [0, bound); the modulo bias is below bound / 2**64.  An empty
    # range (bound <= 0, which no caller passes) gives 0 instead of a remainder by 0.
    if bound <= 0:
        return 0
    return <Py_ssize_t>(rng_next(state) % <uint64_t>bound)


cdef inline double rng_uniform(uint64_t* state) noexcept nogil:
    # Uniform double in [0, 1) from the top 53 bits.
    return (rng_next(state) >> 11) * (1.0 / 9007199254740992.0)


cdef inline void rng_shuffle_prefix(int* index, Py_ssize_t n, uint64_t* state) noexcept nogil:
    # Uniformly random order of index[0:n] (Fisher-Yates): the visiting order of
    # one coordinate-descent pass over the active set.
    cdef Py_ssize_t s, j
    cdef int tmp
    for s in range(n):
        j = s + rng_below(state, n - s)
        tmp = index[s]; index[s] = index[j]; index[j] = tmp
