# The stop request of Ctrl-C, as the kernels see it (lcoding/core/threads.py).
#
# A long kernel takes an optional ``const unsigned char[::1] stop`` (the Python side
# passes threads.STOP_FLAG) and returns early, between rows or blocks of rows, once
# stop[0] != 0; the Python driver then raises through threads.check_stop(), so the
# half-done pass is never used.  The flag is written by the main thread while the
# kernel runs in a worker, hence the volatile read (the compiler may not keep it in
# a register across the loop).


cdef extern from *:
    """
    static inline int lcoding_stop_requested(const unsigned char* flag) {
        return flag != NULL && *(const volatile unsigned char*)flag != 0;
    }
    """
    bint stop_requested "lcoding_stop_requested" (const unsigned char* flag) noexcept nogil


cdef inline const unsigned char* stop_pointer(const unsigned char[::1] stop) noexcept:
    # the flag's address, or NULL when no flag was passed (stop=None)
    if stop is None or stop.shape[0] == 0:
        return NULL
    return &stop[0]
