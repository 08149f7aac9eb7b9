/*
 * clock.c - the one clock the library, the servers, the tools and the
 * tests read: CLOCK_MONOTONIC in nanoseconds (a vDSO call, ~20 ns), and
 * the coarse one in milliseconds (~5 ns, a few ms resolution) for
 * per-pass timestamps where a syscall-free read matters more than
 * precision.
 */
#include <time.h>
#include "paste.h"

uint64_t paste_clock_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t paste_clock_coarse_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}
