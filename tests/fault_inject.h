/* SPDX-License-Identifier: MIT */
/*
 * Allocation fault injection for the suites that link fault_inject.c with
 * -Wl,--wrap for malloc, calloc, realloc, aligned_alloc, posix_memalign,
 * free, mmap and munmap (qps_fault_inject() in tests/CMakeLists.txt). The
 * static library's calls then go through the wrappers; calls made inside
 * other shared libraries (libc, CUnit) do not.
 */
#ifndef QPS_FAULT_INJECT_H
#define QPS_FAULT_INJECT_H

#include <stdbool.h>

/* Make the @nth allocation call (1 = the next) made by the calling thread
 * fail (NULL, MAP_FAILED, ENOMEM); every other call succeeds. 0 disarms.
 * Other threads are never failed. */
void t_fi_arm(unsigned long nth);

/* Disarm; returns true if the armed failure was injected. */
bool t_fi_disarm(void);

/* Allocation calls the calling thread made since the last t_fi_arm(). */
unsigned long t_fi_calls(void);

/* Blocks (heap and mmap) allocated through the wrappers and not yet
 * released, over all threads: equal before and after an operation that
 * must leave nothing behind. */
long t_fi_live(void);

#endif
