# Parsing kernel for LIBSVM / svmlight sparse text: one sample per line,
#
#     line    := blank* [ label { blank+ index ":" value } blank* ] [ "#" comment ]
#     label   := number                      (any finite float; "+1" is fine)
#     index   := [ "+" ] digit+              (1 <= index <= 2**31 - 1; leading zeros allowed)
#     value   := number                      (finite)
#     number  := [ "+" | "-" ] ( digit+ [ "." digit* ] | "." digit+ )
#                [ ( "e" | "E" ) [ "+" | "-" ] digit+ ]
#     blank   := " " "\t" "\v" "\f" "\x1c".."\x1f"   (the ASCII blanks of Python's str.split)
#
# Lines end at "\n", "\r\n" or a lone "\r" (Python's universal newlines, which is what
# liblinear-official's text-mode reader sees).  Blank lines and comment-only lines
# hold no sample; "#" ends the data of a line wherever it appears.  Input is bytes,
# ASCII only: any other byte inside a token makes that token invalid.
#
# Each sample is appended to growable CSR buffers: its label, its 0-based int32
# column indices in increasing order (a row given out of order is sorted, a
# repeated index is an error) with their float64 values, and int64 row pointers.
# Zero values are dropped unless the parser keeps them (liblinear-official's
# list-of-dict mode keeps them).
#
# Numbers are converted exactly as Python's float() converts them (correctly
# rounded to nearest-even), without locale-dependent strtod:
#   1. w = the first 19 significant digits, q = decimal exponent (value w * 10**q);
#   2. w <= 2**53 and |q| <= 22: one IEEE multiplication or division of two exact
#      doubles, hence correctly rounded (Clinger 1990);
#   3. otherwise, with 5**q ~ T 2**e (T a 128-bit truncation, from a table) and w
#      shifted left by lz bits to fill 64 bits, w * 10**q ~ (w 2**lz) T 2**(q + e - lz)
#      (Eisel-Lemire, Lemire 2021).  The top 128 bits A of the 192-bit product are
#      within 2 units of the exact product, so rounding A to 53 bits is exact unless
#      the discarded bits lie within those 2 units of a halfway point;
#   4. the rest (more than 19 significant digits, near-ties, subnormal or
#      overflowing results, huge exponents) goes to PyOS_string_to_double under
#      the GIL, the routine float() itself uses.
#
# The parser reads a stream in chunks: a line cut by a chunk boundary is carried
# over (copied) and finished with the next chunk.  Errors stop parsing and are
# reported as a status code with the line number and the offending token; the
# Python layer (lcoding.io) words the message.
from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport PyObject
from cython cimport view

import numpy as np


cdef extern from "Python.h":
    double PyOS_string_to_double(const char* s, char** endptr,
                                 PyObject* overflow_exception) except? -1.0

cdef extern from *:
    int __builtin_clzll(unsigned long long x) nogil


cpdef enum Status:
    OK = 0
    BAD_LABEL = 1           # the first token of a line is not a number
    NO_COLON = 2            # a feature token without ':'
    BAD_INDEX = 3           # the text before ':' is not an integer
    INDEX_NOT_POSITIVE = 4  # index <= 0
    INDEX_TOO_LARGE = 5     # index > 2**31 - 1
    INDEX_ABOVE_LIMIT = 6   # index > the caller's n_features
    BAD_VALUE = 7           # the text after ':' is not a number
    NONFINITE_LABEL = 8
    NONFINITE_VALUE = 9
    DUPLICATE_INDEX = 10    # an index given twice in one row
    QID_TOKEN = 11          # svmlight's qid:<n>
    NO_MEMORY = 12


cdef enum CharClass:
    TOKEN_CHAR = 0
    BLANK = 1
    LINE_END = 2
    COMMENT = 3

cdef unsigned char CHAR_CLASS[256]
for _c in range(256):
    CHAR_CLASS[_c] = TOKEN_CHAR
for _c in (0x20, 0x09, 0x0b, 0x0c, 0x1c, 0x1d, 0x1e, 0x1f):
    CHAR_CLASS[_c] = BLANK
CHAR_CLASS[0x0a] = LINE_END
CHAR_CLASS[0x0d] = LINE_END
CHAR_CLASS[0x23] = COMMENT

cdef enum:
    INDEX_MAX = 2147483647
    MAX_DIGITS = 19                    # 10**19 < 2**64
    EXPONENT_CAP = 100000000           # |decimal exponent| saturates here
    FLOAT_OK = 0                       # results of the number conversions
    FLOAT_REJECTED = 1
    FLOAT_NO_MEMORY = 2
cdef uint64_t TWO_POW_53 = (<uint64_t>1) << 53
cdef uint64_t TWO_POW_52 = (<uint64_t>1) << 52
cdef uint64_t LOW32 = 0xFFFFFFFF
cdef uint64_t ALL_ONES = 0xFFFFFFFFFFFFFFFF

# Exact powers of ten for Clinger's path.
cdef double POW10[23]
for _c in range(23):
    POW10[_c] = float(10 ** _c)

# 128-bit truncations of 5**q for q in [POW5_MIN_Q, POW5_MAX_Q]:
#     5**q = (POW5_HI * 2**64 + POW5_LO + theta) * 2**POW5_E2,   0 <= theta < 1,
# with POW5_HI >= 2**63 (theta = 0 whenever 5**q fits in 128 bits).  Results
# outside this range of q are zero, subnormal or infinite: step 4 handles them.
cdef enum:
    POW5_MIN_Q = -342
    POW5_MAX_Q = 308
    POW5_COUNT = POW5_MAX_Q - POW5_MIN_Q + 1
cdef uint64_t POW5_HI[POW5_COUNT]
cdef uint64_t POW5_LO[POW5_COUNT]
cdef int POW5_E2[POW5_COUNT]


def _pow5_table_entry(q):
    """``(T, e2)``: ``T`` the 128-bit truncation of ``5**q * 2**-e2``, in [2**127, 2**128)."""
    if q >= 0:
        p = 5 ** q
        e2 = p.bit_length() - 128
        t = p >> e2 if e2 >= 0 else p << -e2
    else:
        p = 5 ** -q                      # never a power of two, so 2**k / p is never exact
        k = 127 + p.bit_length()
        t = (1 << k) // p
        e2 = -k
    return t, e2


for _q in range(POW5_MIN_Q, POW5_MAX_Q + 1):
    _t, _e2 = _pow5_table_entry(_q)
    POW5_HI[_q - POW5_MIN_Q] = _t >> 64
    POW5_LO[_q - POW5_MIN_Q] = _t & ((1 << 64) - 1)
    POW5_E2[_q - POW5_MIN_Q] = _e2
del _c, _q, _t, _e2


cdef struct Entry:
    int32_t index
    double value


cdef struct ParseState:
    bint keep_zeros
    int64_t index_limit      # largest index accepted
    double* labels           # [cap_rows]
    int64_t* indptr          # [cap_rows + 1]; indptr[0] = 0
    int32_t* indices         # [cap_nnz], 0-based
    double* values           # [cap_nnz]
    Py_ssize_t n_rows
    Py_ssize_t cap_rows
    Py_ssize_t nnz
    Py_ssize_t cap_nnz
    int64_t max_index        # largest 1-based index stored so far (0: none)
    int64_t line             # 1-based number of the line being parsed
    Entry* scratch           # sort buffer for rows given out of order
    Py_ssize_t cap_scratch
    int status
    int64_t error_line
    Py_ssize_t error_start   # offending text, as offsets into the buffer parsed
    Py_ssize_t error_end
    int64_t error_detail     # the index, for DUPLICATE_INDEX / INDEX_ABOVE_LIMIT;
                             # the bytes asked for, for NO_MEMORY
    int64_t nomem_bytes      # size of the last allocation that failed


# ---------------------------------------------------------------- numbers

cdef struct Decimal:
    uint64_t mantissa        # the first MAX_DIGITS significant digits
    int64_t exponent         # value = +-mantissa * 10**exponent, unless truncated
    bint negative
    bint truncated           # a non-zero digit beyond MAX_DIGITS was dropped


cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define LCODING_LITTLE_ENDIAN 1
    #else
    #define LCODING_LITTLE_ENDIAN 0
    #endif
    """
    bint LITTLE_ENDIAN "LCODING_LITTLE_ENDIAN"


cdef inline bint eight_digits(const unsigned char* s) noexcept nogil:
    # s[0:8] are all ASCII digits: every byte has high nibble 3, and so has byte + 6
    cdef uint64_t v
    if not LITTLE_ENDIAN:
        return False
    memcpy(&v, s, 8)
    return ((v & <uint64_t>0xF0F0F0F0F0F0F0F0)
            | (((v + <uint64_t>0x0606060606060606) & <uint64_t>0xF0F0F0F0F0F0F0F0) >> 4)
            ) == <uint64_t>0x3333333333333333


cdef inline uint64_t eight_digits_value(const unsigned char* s) noexcept nogil:
    # Value of the 8 digits s[0:8] (s[0] most significant), with three multiplications:
    # bytes (d0..d7) -> pairs 10 d_k + d_k+1 in the even bytes -> the two halves
    # (P0 1e6 + P2 1e2) + (P1 1e4 + P3) summed in the upper 32 bits.
    cdef uint64_t v
    memcpy(&v, s, 8)
    v -= <uint64_t>0x3030303030303030
    v = v * 10 + (v >> 8)
    return (((v & <uint64_t>0x000000FF000000FF) * <uint64_t>(100 + (1000000 << 32)))
            + (((v >> 16) & <uint64_t>0x000000FF000000FF) * <uint64_t>(1 + (10000 << 32)))
            ) >> 32


cdef void long_mantissa(const unsigned char* s, Py_ssize_t int_start, Py_ssize_t n_int,
                        Py_ssize_t n_frac, Decimal* d) noexcept nogil:
    # Mantissa and exponent of a number with more than MAX_DIGITS digits: keep the
    # first MAX_DIGITS significant ones (leading zeros are not significant).
    cdef uint64_t w = 0
    cdef int n_sig = 0
    cdef int64_t q = 0
    cdef unsigned int digit
    cdef Py_ssize_t k, frac_start = int_start + n_int + 1
    for k in range(int_start, int_start + n_int):
        digit = s[k] - c'0'
        if n_sig < MAX_DIGITS:
            w = w * 10 + digit
            if w != 0:
                n_sig += 1
        else:
            q += 1
            if digit != 0:
                d.truncated = True
    for k in range(frac_start, frac_start + n_frac):
        digit = s[k] - c'0'
        if n_sig < MAX_DIGITS:
            w = w * 10 + digit
            q -= 1
            if w != 0:
                n_sig += 1
        elif digit != 0:
            d.truncated = True
    d.mantissa = w
    d.exponent = q


cdef inline Py_ssize_t scan_decimal(const unsigned char* s, Py_ssize_t n,
                                    Decimal* d) noexcept nogil:
    # Longest prefix of s[0:n] that is a number; returns its length (0: none).
    cdef Py_ssize_t i = 0, j, int_start, n_int, n_frac = 0, exp_start
    cdef uint64_t w = 0
    cdef int64_t e = 0
    cdef bint exp_negative = False
    cdef unsigned int digit
    d.negative = False
    d.truncated = False
    if n > 0 and (s[0] == c'-' or s[0] == c'+'):
        d.negative = s[0] == c'-'
        i = 1
    # w wraps around when there are more than MAX_DIGITS digits: redone below
    int_start = i
    while i + 8 <= n and eight_digits(s + i):
        w = w * 100000000 + eight_digits_value(s + i)
        i += 8
    while i < n:
        digit = s[i] - c'0'
        if digit > 9:
            break
        w = w * 10 + digit
        i += 1
    n_int = i - int_start
    if i < n and s[i] == c'.':
        i += 1
        j = i
        while i + 8 <= n and eight_digits(s + i):
            w = w * 100000000 + eight_digits_value(s + i)
            i += 8
        while i < n:
            digit = s[i] - c'0'
            if digit > 9:
                break
            w = w * 10 + digit
            i += 1
        n_frac = i - j
    if n_int + n_frac == 0:
        return 0
    if n_int + n_frac <= MAX_DIGITS:
        d.mantissa = w
        d.exponent = -n_frac
    else:
        long_mantissa(s, int_start, n_int, n_frac, d)
    if i < n and (s[i] == c'e' or s[i] == c'E'):
        j = i + 1
        if j < n and (s[j] == c'-' or s[j] == c'+'):
            exp_negative = s[j] == c'-'
            j += 1
        exp_start = j
        while j < n:
            digit = s[j] - c'0'
            if digit > 9:
                break
            if e < EXPONENT_CAP:
                e = e * 10 + digit
            j += 1
        if j > exp_start:           # else ("1e", "1e+") the "e" is not part of the number
            i = j
            d.exponent += -e if exp_negative else e
    return i


cdef inline void mul_64x64(uint64_t a, uint64_t b, uint64_t* hi, uint64_t* lo) noexcept nogil:
    # 128-bit product a * b = hi * 2**64 + lo, from 32-bit halves.
    cdef uint64_t a0 = a & LOW32, a1 = a >> 32, b0 = b & LOW32, b1 = b >> 32
    cdef uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1
    cdef uint64_t middle = (p00 >> 32) + (p01 & LOW32) + (p10 & LOW32)
    lo[0] = (middle << 32) | (p00 & LOW32)
    hi[0] = p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32)


cdef inline bint scaled_to_double(uint64_t w, int64_t q, double* out) noexcept nogil:
    # Step 3 of the header, for w > 0 and POW5_MIN_Q <= q <= POW5_MAX_Q.  Returns
    # False (out untouched) when the result cannot be decided here.
    cdef int lz = __builtin_clzll(w)
    cdef Py_ssize_t k = q - POW5_MIN_Q
    cdef uint64_t W = w << lz
    cdef uint64_t hi1, lo1, hi2, lo2, top_hi, top_lo, mantissa, rest_hi, half_hi, bits
    cdef int shift
    cdef int64_t exp2
    mul_64x64(W, POW5_HI[k], &hi1, &lo1)
    mul_64x64(W, POW5_LO[k], &hi2, &lo2)
    # top 128 bits of (hi1:lo1:0 + hi2:lo2); the exact product is in [A, A + 2)
    top_lo = lo1 + hi2
    top_hi = hi1 + (1 if top_lo < lo1 else 0)
    # A >= 2**126: keep 53 bits, the discarded part is rest_hi:top_lo
    shift = 10 + <int>(top_hi >> 63)
    mantissa = top_hi >> shift
    rest_hi = top_hi & (((<uint64_t>1) << shift) - 1)
    half_hi = (<uint64_t>1) << (shift - 1)
    if rest_hi == half_hi and top_lo == 0:
        return False
    if rest_hi == half_hi - 1 and top_lo == ALL_ONES:
        return False
    if rest_hi > half_hi or (rest_hi == half_hi and top_lo != 0):
        mantissa += 1
    exp2 = shift + 128 + POW5_E2[k] + q - lz   # A ~ mantissa 2**(shift + 64), P = A 2**64
    if mantissa == TWO_POW_53:
        mantissa = TWO_POW_52
        exp2 += 1
    if exp2 < -1074 or exp2 > 971:  # subnormal or overflowing: rounding differs
        return False
    # IEEE binary64 of mantissa * 2**exp2 (normal: biased exponent 1..2046)
    bits = (<uint64_t>(exp2 + 52 + 1023) << 52) | (mantissa & (TWO_POW_52 - 1))
    memcpy(out, &bits, sizeof(double))
    return True


cdef int python_float(const unsigned char* s, Py_ssize_t n, double* out) noexcept with gil:
    # Step 4: CPython's correctly rounded, locale-independent conversion.  With an
    # end pointer and no overflow exception it raises only MemoryError.
    cdef bytes text
    cdef char* end
    try:
        text = PyBytes_FromStringAndSize(<const char*>s, n)
        out[0] = PyOS_string_to_double(PyBytes_AS_STRING(text), &end, NULL)
    except BaseException:
        return FLOAT_NO_MEMORY
    if end != PyBytes_AS_STRING(text) + n:
        return FLOAT_REJECTED
    return FLOAT_OK


cdef inline int decimal_to_double(const unsigned char* s, Py_ssize_t n, const Decimal* d,
                                  double* out) noexcept nogil:
    # s[0:n] is the text d was scanned from.  Returns FLOAT_OK, FLOAT_REJECTED or
    # FLOAT_NO_MEMORY.
    cdef double x
    cdef uint64_t w = d.mantissa
    cdef int64_t q = d.exponent
    if w == 0:                       # every digit is zero: exactly +-0
        x = 0.0
    elif d.truncated:
        return python_float(s, n, out)
    elif w <= TWO_POW_53 and -22 <= q <= 22:
        x = <double>w
        if q >= 0:
            x = x * POW10[q]
        else:
            x = x / POW10[-q]
    elif POW5_MIN_Q <= q <= POW5_MAX_Q and scaled_to_double(w, q, &x):
        pass
    else:
        return python_float(s, n, out)
    out[0] = -x if d.negative else x
    return FLOAT_OK


cdef bint is_nonfinite_word(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    # "nan", "inf" or "infinity" in any case, optionally signed: float() accepts them.
    cdef const char* words[3]
    cdef Py_ssize_t lengths[3]
    cdef Py_ssize_t w, i
    words[0] = "nan"; words[1] = "inf"; words[2] = "infinity"
    lengths[0] = 3; lengths[1] = 3; lengths[2] = 8
    if n > 0 and (s[0] == c'+' or s[0] == c'-'):
        s += 1
        n -= 1
    for w in range(3):
        if n != lengths[w]:
            continue
        for i in range(n):
            if (s[i] | 0x20) != <unsigned char>words[w][i]:
                break
        else:
            return True
    return False


# ---------------------------------------------------------------- rows

cdef inline Py_ssize_t token_end(const unsigned char* buf, Py_ssize_t p,
                                 Py_ssize_t end) noexcept nogil:
    while p < end and CHAR_CLASS[buf[p]] == TOKEN_CHAR:
        p += 1
    return p


cdef inline bint ends_token(const unsigned char* buf, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    return p >= end or CHAR_CLASS[buf[p]] != TOKEN_CHAR


cdef int fail(ParseState* st, int status, Py_ssize_t start, Py_ssize_t stop,
              int64_t detail) noexcept nogil:
    st.status = status
    st.error_line = st.line
    st.error_start = start
    st.error_end = stop
    st.error_detail = detail
    return -1


cdef int number_status(const unsigned char* buf, Py_ssize_t start, Py_ssize_t stop,
                       int bad, int nonfinite) noexcept nogil:
    return nonfinite if is_nonfinite_word(buf + start, stop - start) else bad


cdef int reserve_entries(ParseState* st, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap = st.cap_nnz
    cdef void* grown
    if st.nnz + extra <= cap:
        return 0
    while cap < st.nnz + extra:
        cap = cap * 2 if cap >= 4096 else 4096
    grown = realloc(st.indices, cap * sizeof(int32_t))
    if grown == NULL:
        st.nomem_bytes = cap * sizeof(int32_t)
        return -1
    st.indices = <int32_t*>grown
    grown = realloc(st.values, cap * sizeof(double))
    if grown == NULL:
        st.nomem_bytes = cap * sizeof(double)
        return -1
    st.values = <double*>grown
    st.cap_nnz = cap
    return 0


cdef int reserve_row(ParseState* st) noexcept nogil:
    cdef Py_ssize_t cap = st.cap_rows
    cdef void* grown
    if st.n_rows < cap:
        return 0
    cap = cap * 2 if cap >= 1024 else 1024
    grown = realloc(st.labels, cap * sizeof(double))
    if grown == NULL:
        st.nomem_bytes = cap * sizeof(double)
        return -1
    st.labels = <double*>grown
    grown = realloc(st.indptr, (cap + 1) * sizeof(int64_t))
    if grown == NULL:
        st.nomem_bytes = (cap + 1) * sizeof(int64_t)
        return -1
    st.indptr = <int64_t*>grown
    st.cap_rows = cap
    return 0


cdef int compare_entries(const void* a, const void* b) noexcept nogil:
    cdef int32_t ia = (<const Entry*>a).index, ib = (<const Entry*>b).index
    return (ia > ib) - (ia < ib)


cdef int sort_row(ParseState* st, Py_ssize_t start) noexcept nogil:
    # Sort entries [start, nnz) by index; a repeated index is reported.
    cdef Py_ssize_t n = st.nnz - start, i
    cdef void* grown
    if n > st.cap_scratch:
        grown = realloc(st.scratch, n * sizeof(Entry))
        if grown == NULL:
            return fail(st, NO_MEMORY, 0, 0, <int64_t>(n * sizeof(Entry)))
        st.scratch = <Entry*>grown
        st.cap_scratch = n
    for i in range(n):
        st.scratch[i].index = st.indices[start + i]
        st.scratch[i].value = st.values[start + i]
    qsort(st.scratch, n, sizeof(Entry), compare_entries)
    for i in range(n):
        if i > 0 and st.scratch[i].index == st.scratch[i - 1].index:
            return fail(st, DUPLICATE_INDEX, 0, 0, <int64_t>st.scratch[i].index + 1)
        st.indices[start + i] = st.scratch[i].index
        st.values[start + i] = st.scratch[i].value
    return 0


cdef void drop_zeros(ParseState* st, Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t i, kept = start
    for i in range(start, st.nnz):
        if st.values[i] != 0.0:
            st.indices[kept] = st.indices[i]
            st.values[kept] = st.values[i]
            kept += 1
    st.nnz = kept


cdef int parse_features(ParseState* st, const unsigned char* buf, Py_ssize_t* pos,
                        Py_ssize_t end, bint* in_order, bint* has_zero) noexcept nogil:
    # Append the index:value tokens from pos[0] up to the end of the line's data.
    cdef Py_ssize_t p = pos[0], start, digits_start, colon, stop
    cdef int64_t index, previous = 0
    cdef unsigned int digit
    cdef int converted
    cdef Decimal d
    cdef double value
    while True:
        while p < end and CHAR_CLASS[buf[p]] == BLANK:
            p += 1
        if p >= end or CHAR_CLASS[buf[p]] != TOKEN_CHAR:
            break
        start = p
        if buf[p] == c'+':
            p += 1
        digits_start = p
        index = 0
        while p < end:
            digit = buf[p] - c'0'
            if digit > 9:
                break
            if index <= INDEX_MAX:
                index = index * 10 + digit
            p += 1
        if p >= end or buf[p] != c':' or p == digits_start:
            return bad_index_token(st, buf, start, end)
        colon = p
        if index == 0:
            return fail(st, INDEX_NOT_POSITIVE, start, token_end(buf, p, end), 0)
        if index > INDEX_MAX:
            return fail(st, INDEX_TOO_LARGE, start, token_end(buf, p, end), 0)
        if index > st.index_limit:
            return fail(st, INDEX_ABOVE_LIMIT, start, token_end(buf, p, end), st.index_limit)
        stop = colon + 1 + scan_decimal(buf + colon + 1, end - colon - 1, &d)
        if stop == colon + 1 or not ends_token(buf, stop, end):
            stop = token_end(buf, stop, end)
            return fail(st, number_status(buf, colon + 1, stop, BAD_VALUE, NONFINITE_VALUE),
                        start, stop, 0)
        converted = decimal_to_double(buf + colon + 1, stop - colon - 1, &d, &value)
        if converted != FLOAT_OK:
            return fail(st, NO_MEMORY if converted == FLOAT_NO_MEMORY else BAD_VALUE,
                        start, stop, 0)
        if not isfinite(value):
            return fail(st, NONFINITE_VALUE, start, stop, 0)
        if index <= previous:
            if index == previous:
                return fail(st, DUPLICATE_INDEX, start, stop, index)
            in_order[0] = False
        previous = index
        if st.nnz >= st.cap_nnz and reserve_entries(st, 1) != 0:
            return fail(st, NO_MEMORY, start, stop, st.nomem_bytes)
        st.indices[st.nnz] = <int32_t>(index - 1)
        st.values[st.nnz] = value
        st.nnz += 1
        if value == 0.0:
            has_zero[0] = True
        p = stop
    pos[0] = p
    return 0


cdef int bad_index_token(ParseState* st, const unsigned char* buf, Py_ssize_t start,
                         Py_ssize_t end) noexcept nogil:
    # Classify a feature token whose index part did not parse.
    cdef Py_ssize_t stop = token_end(buf, start, end), colon = start, p
    while colon < stop and buf[colon] != c':':
        colon += 1
    if colon == stop:
        return fail(st, NO_COLON, start, stop, 0)
    if (colon - start == 3 and buf[start] == c'q' and buf[start + 1] == c'i'
            and buf[start + 2] == c'd'):
        return fail(st, QID_TOKEN, start, stop, 0)
    # "-5:1" and "-0:1" are integers, just not positive ones
    if colon - start >= 2 and buf[start] == c'-':
        for p in range(start + 1, colon):
            if buf[p] < c'0' or buf[p] > c'9':
                break
        else:
            return fail(st, INDEX_NOT_POSITIVE, start, stop, 0)
    return fail(st, BAD_INDEX, start, stop, 0)


cdef int parse_row(ParseState* st, const unsigned char* buf, Py_ssize_t* pos,
                   Py_ssize_t end) noexcept nogil:
    # One sample, from its label (at pos[0]) to the end of its data.
    cdef Py_ssize_t start = pos[0], stop, row_start = st.nnz
    cdef Decimal d
    cdef double label
    cdef bint in_order = True, has_zero = False
    cdef int converted
    stop = start + scan_decimal(buf + start, end - start, &d)
    if stop == start or not ends_token(buf, stop, end):
        stop = token_end(buf, stop, end)
        return fail(st, number_status(buf, start, stop, BAD_LABEL, NONFINITE_LABEL),
                    start, stop, 0)
    converted = decimal_to_double(buf + start, stop - start, &d, &label)
    if converted != FLOAT_OK:
        return fail(st, NO_MEMORY if converted == FLOAT_NO_MEMORY else BAD_LABEL,
                    start, stop, 0)
    if not isfinite(label):
        return fail(st, NONFINITE_LABEL, start, stop, 0)
    pos[0] = stop
    if parse_features(st, buf, pos, end, &in_order, &has_zero) != 0:
        return -1
    if not in_order and sort_row(st, row_start) != 0:
        return -1
    if has_zero and not st.keep_zeros:
        drop_zeros(st, row_start)
    if st.nnz > row_start and st.indices[st.nnz - 1] >= st.max_index:
        st.max_index = <int64_t>st.indices[st.nnz - 1] + 1
    if st.n_rows >= st.cap_rows and reserve_row(st) != 0:
        return fail(st, NO_MEMORY, start, stop, st.nomem_bytes)
    st.labels[st.n_rows] = label
    st.n_rows += 1
    st.indptr[st.n_rows] = st.nnz
    return 0


cdef Py_ssize_t parse_lines(ParseState* st, const unsigned char* buf,
                            Py_ssize_t end) noexcept nogil:
    # Parse buf[0:end], which ends at a line end or at the end of the input.
    # Returns end, or -1 after a failure (st.status says why).
    cdef Py_ssize_t p = 0
    while p < end:
        while p < end and CHAR_CLASS[buf[p]] == BLANK:
            p += 1
        if p >= end:
            break
        if CHAR_CLASS[buf[p]] == TOKEN_CHAR:
            if parse_row(st, buf, &p, end) != 0:
                return -1
        if p < end and CHAR_CLASS[buf[p]] == COMMENT:
            while p < end and CHAR_CLASS[buf[p]] != LINE_END:
                p += 1
        if p < end:
            # only a line end can be here: tokens, blanks and comments were consumed
            if buf[p] == c'\r' and p + 1 < end and buf[p + 1] == c'\n':
                p += 1
            p += 1
            st.line += 1
    return end


cdef Py_ssize_t first_line_end(const unsigned char* buf, Py_ssize_t n) noexcept nogil:
    # Length of the first whole line of buf[0:n] with its line end; 0 when no line
    # end is known yet (none at all, or a "\r" in the last byte, maybe half of "\r\n").
    cdef Py_ssize_t i = 0
    while i < n and CHAR_CLASS[buf[i]] != LINE_END:
        i += 1
    if i >= n - 1:
        return n if i == n - 1 and buf[i] == c'\n' else 0
    if buf[i] == c'\r' and buf[i + 1] == c'\n':
        return i + 2
    return i + 1


cdef Py_ssize_t complete_lines_end(const unsigned char* buf, Py_ssize_t n) noexcept nogil:
    # Length of the longest prefix of buf[0:n] made of whole lines.  A "\r" in the
    # last byte may be the first half of "\r\n", so it does not close a line yet.
    cdef Py_ssize_t i = n - 1
    while i >= 0:
        if buf[i] == c'\n' or (buf[i] == c'\r' and i < n - 1):
            return i + 1
        i -= 1
    return 0


cdef object take_buffer(void* data, Py_ssize_t n, Py_ssize_t itemsize, str fmt, object dtype):
    # A numpy array owning the malloc'ed buffer data[0:n] (freed with the array).
    cdef view.array wrapper
    cdef void* shrunk
    if n == 0:
        free(data)
        return np.empty(0, dtype=dtype)
    shrunk = realloc(data, n * itemsize)    # give back the growth slack
    if shrunk != NULL:
        data = shrunk
    wrapper = view.array(shape=(n,), itemsize=itemsize, format=fmt, mode="c",
                         allocate_buffer=False)
    wrapper.data = <char*>data
    wrapper.callback_free_data = free
    return np.asarray(wrapper)


cdef class LibsvmParser:
    """Incremental LIBSVM parser: ``feed`` chunks of bytes, then ``finish``.

    ``keep_zeros`` keeps explicit zero values (liblinear-official's list-of-dict
    mode); ``index_limit`` is the largest feature index accepted.  After a call
    that returns a status other than ``Status.OK`` the parser is spent; the
    failure is described by ``status``, ``error_line`` (1-based),
    ``error_token`` (bytes) and ``error_detail`` (an index, for duplicates and
    ``INDEX_ABOVE_LIMIT``).  One thread at a time may use a parser; parsing
    itself runs without the GIL.
    """
    cdef ParseState st
    cdef unsigned char* carry          # start of a line cut by the last chunk boundary
    cdef Py_ssize_t carry_len
    cdef Py_ssize_t carry_cap
    cdef bint finished
    cdef readonly bytes error_token

    def __cinit__(self, bint keep_zeros=False, int64_t index_limit=2147483647):
        self.st.keep_zeros = keep_zeros
        self.st.index_limit = index_limit if index_limit < INDEX_MAX else INDEX_MAX
        self.st.line = 1
        self.st.status = OK
        self.st.indptr = <int64_t*>malloc(sizeof(int64_t))
        if self.st.indptr == NULL:
            raise MemoryError("LibsvmParser: cannot allocate the 8-byte row pointer array")
        self.st.indptr[0] = 0
        self.error_token = b""

    def __dealloc__(self):
        free(self.st.labels)
        free(self.st.indptr)
        free(self.st.indices)
        free(self.st.values)
        free(self.st.scratch)
        free(self.carry)

    @property
    def status(self):
        return Status(self.st.status)

    @property
    def error_line(self):
        return self.st.error_line

    @property
    def error_detail(self):
        return self.st.error_detail

    @property
    def max_index(self):
        """Largest 1-based feature index stored so far, also in rows already
        taken by ``take_arrays`` (0 when no entry was stored)."""
        return self.st.max_index

    @property
    def n_rows(self):
        return self.st.n_rows

    @property
    def keep_zeros(self):
        return self.st.keep_zeros

    @property
    def index_limit(self):
        return self.st.index_limit

    @property
    def lines_done(self):
        """Number of line ends consumed so far."""
        return self.st.line - 1

    cdef int append_carry(self, const unsigned char* data, Py_ssize_t n) except -1:
        cdef Py_ssize_t cap = self.carry_cap
        cdef void* grown
        if self.carry_len + n > cap:
            while cap < self.carry_len + n:
                cap = cap * 2 if cap >= 4096 else 4096
            grown = realloc(self.carry, cap)
            if grown == NULL:
                raise MemoryError(f"reading: cannot allocate {cap} bytes to hold one line "
                                  f"of the input")
            self.carry = <unsigned char*>grown
            self.carry_cap = cap
        if n > 0:
            memcpy(self.carry + self.carry_len, data, n)
        self.carry_len += n
        return 0

    cdef int parse_carry(self, Py_ssize_t end) except -1:
        # Parse carry[0:end] and keep carry[end:].
        cdef Py_ssize_t done
        with nogil:
            done = parse_lines(&self.st, self.carry, end)
        if done < 0:
            self.error_token = self.carry[self.st.error_start:self.st.error_end]
            return 0
        self.carry_len -= end
        if self.carry_len > 0:
            memcpy(self.carry, self.carry + end, self.carry_len)
        return 0

    def feed(self, const unsigned char[::1] chunk not None):
        """Parse the whole lines of ``chunk`` (after any carried-over partial line).

        Returns the status (``Status.OK`` unless a line is malformed).
        """
        cdef Py_ssize_t n = chunk.shape[0], head, last_end, done = 0
        cdef const unsigned char* data
        if self.finished or self.st.status != OK:
            raise RuntimeError("LibsvmParser: feed() after finish() or after an error")
        if n == 0:
            return self.status
        data = &chunk[0]
        if self.carry_len > 0:
            # the carried partial line ends with this chunk's first line end
            head = first_line_end(data, n)
            if head == 0:
                self.append_carry(data, n)
                return self.status
            self.append_carry(data, head)
            self.parse_carry(self.carry_len)
            if self.st.status != OK:
                return self.status
            data += head
            n -= head
        with nogil:
            last_end = complete_lines_end(data, n)
            if last_end > 0:
                done = parse_lines(&self.st, data, last_end)
        if done < 0:
            self.error_token = data[self.st.error_start:self.st.error_end]
            return self.status
        self.append_carry(data + last_end, n - last_end)
        return self.status

    def finish(self):
        """Parse the last, unterminated line; returns the status."""
        if self.finished or self.st.status != OK:
            raise RuntimeError("LibsvmParser: finish() called twice or after an error")
        self.finished = True
        if self.carry_len > 0:
            self.parse_carry(self.carry_len)
        return self.status

    def take_arrays(self):
        """``(labels, indptr, indices, values)`` parsed so far, as numpy arrays.

        The arrays take over the parser's buffers; the parser then holds no rows.
        """
        cdef ParseState* st = &self.st
        labels = take_buffer(st.labels, st.n_rows, sizeof(double), "d", np.float64)
        indptr = take_buffer(st.indptr, st.n_rows + 1, sizeof(int64_t), "q", np.int64)
        indices = take_buffer(st.indices, st.nnz, sizeof(int32_t), "i", np.int32)
        values = take_buffer(st.values, st.nnz, sizeof(double), "d", np.float64)
        st.labels = NULL
        st.indices = NULL
        st.values = NULL
        st.indptr = <int64_t*>malloc(sizeof(int64_t))
        if st.indptr == NULL:
            raise MemoryError("LibsvmParser: cannot allocate the 8-byte row pointer array")
        st.indptr[0] = 0
        st.n_rows = st.cap_rows = st.nnz = st.cap_nnz = 0
        return labels, indptr, indices, values


def line_start_after(const unsigned char[::1] buf not None, Py_ssize_t pos):
    """Offset just past the first "\\n" at or after ``pos`` in ``buf``; -1 if none.

    A cut there splits the buffer into whole lines (a "\\r\\n" pair stays whole).
    """
    cdef Py_ssize_t i = max(pos, 0), n = buf.shape[0]
    with nogil:
        while i < n and buf[i] != c'\n':
            i += 1
    return i + 1 if i < n else -1


def parse_float(bytes token not None):
    """The value of one number token, converted as the parser converts it.

    Raises ValueError when ``token`` is not a number of the grammar above.
    """
    cdef const unsigned char* s = token
    cdef Py_ssize_t n = len(token), used
    cdef Decimal d
    cdef double value
    cdef int converted
    used = scan_decimal(s, n, &d)
    if used == 0 or used != n:
        raise ValueError(f"not a number: {token!r}")
    converted = decimal_to_double(s, n, &d, &value)
    if converted == FLOAT_NO_MEMORY:
        raise MemoryError(f"parse_float: cannot allocate a copy of the {n}-byte token")
    if converted != FLOAT_OK:
        raise ValueError(f"not a number: {token!r}")
    return value


cdef extern from *:
    """
    /* Dict building for row_dicts.  Pre-sizing, and inserting with a known hash
       (an int's hash is its value), are private CPython API: later versions and
       other interpreters use the public calls. */
    #if defined(PYPY_VERSION) || PY_VERSION_HEX >= 0x030D0000
    #define lcoding_dict_with_room(n) PyDict_New()
    #define lcoding_dict_set_int_key(d, key, value, k) PyDict_SetItem(d, key, value)
    #else
    #define lcoding_dict_with_room(n) _PyDict_NewPresized(n)
    #define lcoding_dict_set_int_key(d, key, value, k) \
        _PyDict_SetItem_KnownHash(d, key, value, (Py_hash_t)(k))
    #endif
    """
    dict dict_with_room "lcoding_dict_with_room" (Py_ssize_t n)
    int dict_set_int_key "lcoding_dict_set_int_key" (
        dict d, PyObject* key, PyObject* value, Py_ssize_t k) except -1

cdef enum:
    FLOAT_CACHE_BITS = 12       # direct-mapped cache of 4096 recently made floats
    KEY_TABLE_SLACK = 4         # row_dicts: a direct table of index objects while the
    KEY_TABLE_MIN = 65536       # largest index <= SLACK * values + MIN


def row_dicts(const int64_t[::1] indptr not None, const int32_t[::1] indices not None,
              const double[::1] values not None):
    """``[{index + 1: value, ...} for each row]`` of CSR arrays (0-based ``indices``).

    The list-of-dict layout of liblinear-official's ``svm_read_problem``.  All
    dicts share one int object per distinct index, and float objects are shared
    between equal values (same bits) that come close together (LIBSVM data
    often repeat a few values); floats are immutable, so this is invisible
    except to ``is``.

    Memory is O(number of values), whatever the indices: the table of shared
    index objects is indexed by the index itself only while the largest index
    is at most KEY_TABLE_SLACK times the number of values (plus a constant);
    beyond that it holds the distinct indices only (numpy.unique gives each
    value the position of its index among them), so a file with one value at
    index 2**31 - 1 costs no more than one with a value at index 1.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, i, slot, k, pos
    cdef Py_ssize_t nnz = indices.shape[0]
    cdef int64_t p
    cdef int32_t largest = -1
    cdef uint64_t bits
    cdef uint64_t cached_bits[1 << FLOAT_CACHE_BITS]
    cdef list keys, out, cached_floats
    cdef dict row
    cdef object number
    cdef bint direct
    cdef const int64_t[::1] key_pos
    for p in range(nnz):
        if indices[p] > largest:
            largest = indices[p]
    direct = <int64_t>largest + 2 <= KEY_TABLE_SLACK * <int64_t>nnz + KEY_TABLE_MIN
    if direct:
        keys = list(range(<Py_ssize_t>largest + 2))
    else:
        # sparse indices: one key object per distinct index, found by position
        distinct_array, inverse = np.unique(np.asarray(indices), return_inverse=True)
        keys = [int(v) + 1 for v in distinct_array]
        key_pos = np.ascontiguousarray(inverse, dtype=np.int64).reshape(-1)
    cached_floats = [None] * (1 << FLOAT_CACHE_BITS)
    out = [None] * n_rows
    for i in range(n_rows):
        row = dict_with_room(indptr[i + 1] - indptr[i])
        for p in range(indptr[i], indptr[i + 1]):
            memcpy(&bits, &values[p], sizeof(double))
            slot = <Py_ssize_t>((bits * <uint64_t>0x9E3779B97F4A7C15) >> (64 - FLOAT_CACHE_BITS))
            if cached_floats[slot] is None or cached_bits[slot] != bits:
                cached_floats[slot] = values[p]
                cached_bits[slot] = bits
            k = indices[p] + 1
            pos = k if direct else key_pos[p]
            # borrowed references: keys and cached_floats hold them
            dict_set_int_key(row, PyList_GET_ITEM(keys, pos),
                             PyList_GET_ITEM(cached_floats, slot), k)
        out[i] = row
    return out
