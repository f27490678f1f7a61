# A spin barrier for the threads of one kernel call (lcoding/linear/_dual_cd.pyx's
# block-synchronous dual CD): K threads, each inside the same nogil kernel, meet
# after every block of rows.  A block is tens of microseconds of work, so a
# condition variable (a futex wake-up, 5-50 us) would cost as much as the block;
# the waiting thread spins on an atomic generation counter instead, pausing the
# core between reads, and yields the core after ``spins`` reads (the caller's
# choice: a few thousand when every thread has a core -- on a shared machine the
# thread it waits for may still have been descheduled -- and a few when there are
# more threads than cores, where spinning only keeps the late thread off the
# core).  The choice changes timing only, never a result.
#
# State: two int64 in memory shared by the threads (a NumPy array the driver
# allocates per call, zeroed): [arrived, generation].  Sense by generation: the
# last thread to arrive resets the count and bumps the generation, which releases
# the others; a thread's later arrival can never be confused with this round's.
#
# Ctrl-C: the waiting threads read the stop flag (_stop.pxd) while they spin and
# return 1 when it is set, so a stopped thread never leaves the others waiting
# for good; the kernel then returns and its driver raises.
from libc.stdint cimport int64_t


cdef extern from *:
    """
    #if defined(_WIN32)
    #include <windows.h>
    #define LCODING_YIELD() SwitchToThread()
    #else
    #include <sched.h>
    #define LCODING_YIELD() sched_yield()
    #endif
    #if defined(__x86_64__) || defined(__i386__)
    #define LCODING_PAUSE() __builtin_ia32_pause()
    #else
    #define LCODING_PAUSE() ((void)0)
    #endif
    static inline int lcoding_barrier_wait(int64_t* state, int64_t n_threads,
                                           const unsigned char* stop, long spins_max) {
        int64_t gen = __atomic_load_n(&state[1], __ATOMIC_ACQUIRE);
        long spins = 0;
        if (__atomic_add_fetch(&state[0], 1, __ATOMIC_ACQ_REL) == n_threads) {
            __atomic_store_n(&state[0], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&state[1], gen + 1, __ATOMIC_RELEASE);
            return 0;
        }
        while (__atomic_load_n(&state[1], __ATOMIC_ACQUIRE) == gen) {
            if (stop != NULL && *(const volatile unsigned char*)stop != 0)
                return 1;
            if (++spins < spins_max) {
                LCODING_PAUSE();
            } else {
                LCODING_YIELD();
            }
        }
        return 0;
    }
    """
    int barrier_wait "lcoding_barrier_wait" (int64_t* state, int64_t n_threads,
                                             const unsigned char* stop,
                                             long spins_max) noexcept nogil
