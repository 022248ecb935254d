/* SPDX-License-Identifier: MIT */
/*
 * Device-access primitives: the barriers and MMIO stores that order what
 * the CPU writes against what a device (or emu's engine) reads. Shared by
 * the core's direct send path, the providers and the lock-free rings, so
 * that no other file defines a fence or a spin-wait hint. Self-contained:
 * providers include it (through provider.h) without the core's headers.
 *
 * Memory types: "memory" is ordinary write-back memory the device reads
 * by DMA (WQEs, owner words); "MMIO" an uncached register (the doorbell);
 * "WC" a write-combining register (BlueFlame).
 *
 * Under the thread sanitizer, which does not model fences (GCC warns on
 * them), the C11 fallbacks become compiler barriers; what TSan checks
 * then comes from the release/acquire stores and loads around them.
 */
#ifndef QPS_UDMA_H
#define QPS_UDMA_H

#include <stdint.h>

/* ThreadSanitizer: gcc defines __SANITIZE_THREAD__, clang answers
 * __has_feature(thread_sanitizer) only. */
#if defined(__SANITIZE_THREAD__)
#define QPS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QPS_TSAN 1
#endif
#endif

#if defined(QPS_TSAN)
#define QPS_UDMA_FENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#else
#define QPS_UDMA_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

#if defined(__x86_64__)

/* Memory stores before it reach the device before later memory or MMIO
 * stores (x86 keeps stores in order: the compiler is all that can move). */
static inline void qps_udma_to_device_barrier(void)
{
	__asm__ volatile("" ::: "memory");
}

/* Loads of device-written memory after it see at least what an earlier
 * load (an owner bit, a CQE) said was there. */
static inline void qps_udma_from_device_barrier(void)
{
	__asm__ volatile("lfence" ::: "memory");
}

/* Every earlier store, WC included, leaves the CPU before later stores. */
static inline void qps_mmio_flush_writes(void)
{
	__asm__ volatile("sfence" ::: "memory");
}

/* Spin-wait hint: lets the sibling hyperthread run, saves power. */
static inline void qps_cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

#elif defined(__aarch64__)

/* Memory stores before it reach the device before later memory or MMIO
 * stores (store-store, outer shareable). */
static inline void qps_udma_to_device_barrier(void)
{
	__asm__ volatile("dmb oshst" ::: "memory");
}

/* Loads of device-written memory after it see at least what an earlier
 * load (an owner bit, a CQE) said was there. */
static inline void qps_udma_from_device_barrier(void)
{
	__asm__ volatile("dmb oshld" ::: "memory");
}

/* Every earlier store, WC included, completes before later stores. */
static inline void qps_mmio_flush_writes(void)
{
	__asm__ volatile("dsb st" ::: "memory");
}

/* Spin-wait hint: lets another hardware thread run. */
static inline void qps_cpu_relax(void)
{
	__asm__ volatile("yield" ::: "memory");
}

#else

/* Generic fallback: a full fence orders everything against everything. */
static inline void qps_udma_to_device_barrier(void)
{
	QPS_UDMA_FENCE();
}

/* Generic fallback: as above, loads included. */
static inline void qps_udma_from_device_barrier(void)
{
	QPS_UDMA_FENCE();
}

/* Generic fallback: as above, WC stores included where the C fence
 * reaches them. */
static inline void qps_mmio_flush_writes(void)
{
	QPS_UDMA_FENCE();
}

/* Generic fallback: only keeps the compiler from collapsing the loop. */
static inline void qps_cpu_relax(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

#endif

/* Before a burst of WC stores: earlier memory and MMIO stores go first,
 * so the WC burst cannot overtake them (rdma-core's mmio_wc_start). */
static inline void qps_mmio_wc_start(void)
{
	qps_mmio_flush_writes();
}

/* One 32-bit store to a device register; @be_val is already big-endian
 * (ordering against memory stores is the caller's barrier's job). */
static inline void qps_mmio_write32_be(void *addr, uint32_t be_val)
{
	*(volatile uint32_t *)addr = be_val;
}

/* One 64-bit store to a device register, never split; @be_val is already
 * big-endian. */
static inline void qps_mmio_write64_be(void *addr, uint64_t be_val)
{
	*(volatile uint64_t *)addr = be_val;
}

#endif /* QPS_UDMA_H */
