// SPDX-License-Identifier: MIT
/*
 * The slow halves of qps_alock (alock.h): every entry through the mutex,
 * the closing of the fast side (which pays the membarrier), and a biased
 * lock's runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alock.h"
#include "qps_int.h"
#include "udma.h"

/* Spins on the application's flag before sleeping: its sections are a
 * few hundred instructions, but its thread may be preempted, and by the
 * waiter itself when that runs SCHED_FIFO on the same CPU, where neither
 * spinning nor sched_yield ever lets the owner run again. */
#define QPS_ALOCK_SPIN		256
#define QPS_ALOCK_NAP_NS	(50 * 1000L)
#define QPS_ALOCK_NAP_MAX_NS	(1000 * 1000L)

uint32_t qps_alock_fenced;

static pthread_once_t qps_alock_once = PTHREAD_ONCE_INIT;
static int qps_alock_reg;
static pthread_mutex_t qps_alock_degrade_lock = PTHREAD_MUTEX_INITIALIZER;
static void *qps_alock_flush_page;

/* Returns 0 or the command's mask, or -errno. */
static long qps_membarrier(int cmd)
{
	int saved = errno;
	long ret = syscall(SYS_membarrier, cmd, 0, 0);

	if (ret < 0)
		ret = -errno;
	errno = saved;
	return ret;
}

static void qps_alock_register(void)
{
#if defined(QPS_TSAN)
	qps_alock_reg = -ENOTSUP;
#else
	long cmds = qps_membarrier(MEMBARRIER_CMD_QUERY);

	if (cmds < 0) {
		qps_alock_reg = (int)cmds;
		return;
	}
	if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
		qps_alock_reg = -ENOSYS;
		return;
	}
	qps_alock_reg = (int)qps_membarrier(
		MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
#endif
}

int qps_alock_asym_check(void)
{
	pthread_once(&qps_alock_once, qps_alock_register);
	if (qps_alock_reg < 0)
		return qps_alock_reg;
	/* Acquire: pairs with the release in qps_alock_degrade; a process
	 * that lost membarrier once does not bias new locks. */
	if (__atomic_load_n(&qps_alock_fenced, __ATOMIC_ACQUIRE))
		return -ENOTSUP;
	/* Registration is inherited by a fork and may predate a seccomp
	 * filter: only a barrier that goes through proves it works now. */
	return (int)qps_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/*
 * A full barrier in every thread of the process without membarrier:
 * taking write access away from a page this process dirtied makes the
 * kernel shoot its TLB entry down on every CPU that runs one of our
 * threads, by an interrupt where the CPU has no broadcast invalidation
 * (x86), and an interrupt serialises the CPU it hits. Elsewhere (arm64's
 * broadcast TLBI) it is no barrier: docs/reliability.md.
 */
static int qps_alock_flush(void)
{
	volatile uint8_t *p;
	int saved = errno;
	int ret = 0;

	if (!qps_alock_flush_page) {
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED) {
			ret = -errno;
			goto out;
		}
		qps_alock_flush_page = m;
	}
	if (mprotect(qps_alock_flush_page, 4096, PROT_READ | PROT_WRITE) < 0) {
		ret = -errno;
		goto out;
	}
	p = qps_alock_flush_page;
	*p = (uint8_t)(*p + 1);
	if (mprotect(qps_alock_flush_page, 4096, PROT_NONE) < 0)
		ret = -errno;
out:
	errno = saved;
	return ret;
}

/* A membarrier failed after start (@err): from now on every entry on
 * every lock is fenced, and the fast-side entries already past their
 * look at the switch are flushed out once. */
static void qps_alock_degrade(long err)
{
	int fl;

	pthread_mutex_lock(&qps_alock_degrade_lock);
	if (__atomic_load_n(&qps_alock_fenced, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&qps_alock_degrade_lock);
		return;
	}
	/* Release: pairs with the acquire in qps_alock_asym_check. The
	 * fast side's relaxed look is made safe by the flush below. */
	__atomic_store_n(&qps_alock_fenced, 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	fl = qps_alock_flush();
	pthread_mutex_unlock(&qps_alock_degrade_lock);
	qps_log_err("membarrier failed after start (%ld): send queue locks "
		    "now fence every entry%s", err,
		    fl < 0 ? " (no flush: docs/reliability.md)" : "");
}

/* The closer's barrier, after its lib_want store and before its look at
 * app_in: a membarrier, or once that fails, the fenced protocol. */
static void qps_alock_barrier(void)
{
	/* Relaxed: once set it stays set; seeing it late costs one more
	 * membarrier attempt. */
	if (!__atomic_load_n(&qps_alock_fenced, __ATOMIC_RELAXED)) {
		long ret = qps_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);

		if (ret == 0)
			return;
		qps_alock_degrade(ret);
	}
	/* Pairs with the fast side's fence in qps_alock_lock. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Waits for the fast side to step out, bounded in spins: past them the
 * waiter sleeps in growing naps, which lets a preempted owner run
 * whatever the waiter's scheduling class. */
static void qps_alock_wait_out(struct qps_alock *l)
{
	unsigned int spins = 0;
	long nap = QPS_ALOCK_NAP_NS;
	struct timespec ts;

	/* Acquire: pairs with the release in qps_alock_unlock. */
	while (__atomic_load_n(&l->app_in, __ATOMIC_ACQUIRE)) {
		if (++spins < QPS_ALOCK_SPIN) {
			qps_cpu_relax();
			continue;
		}
		ts.tv_sec = 0;
		ts.tv_nsec = nap;
		/* An interrupted nap only looks again sooner. */
		(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		if (nap < QPS_ALOCK_NAP_MAX_NS)
			nap *= 2;
	}
}

enum qps_alock_mode qps_alock_init(struct qps_alock *l,
				   enum qps_alock_mode mode)
{
	qps_mutex_init(&l->m);
	if (mode != QPS_ALOCK_MUTEX && !qps_alock_asym_available())
		mode = QPS_ALOCK_MUTEX;
	l->mode = (uint8_t)mode;
	l->app_mutex = false;
	__atomic_store_n(&l->app_in, 0, __ATOMIC_RELAXED);
	/* A biased lock starts closed: a mutex until a thread's first run. */
	__atomic_store_n(&l->lib_want, mode == QPS_ALOCK_BIASED,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&l->owner, 0, __ATOMIC_RELAXED);
	l->last = 0;
	l->run = 0;
	l->bias_run = QPS_ALOCK_BIAS_RUN;
	__atomic_store_n(&l->lib_entries, 0, __ATOMIC_RELAXED);
	return mode;
}

/* Under m: closes the fast side and waits for whoever is on it. @grow:
 * an application thread closed a biased lock, so its owner's next run is
 * made longer; the flusher's closings are bounded by the bursts it rings
 * and leave it as it is. */
static void qps_alock_close(struct qps_alock *l, bool grow)
{
	/* Relaxed: only holders of m write lib_want. */
	if (__atomic_load_n(&l->lib_want, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&l->lib_want, 1, __ATOMIC_RELAXED);
	/*
	 * A full barrier here and in every running thread of the process
	 * (a thread not running gets one from its context switch): pairs
	 * with the compiler barrier in qps_alock_lock. Either the fast
	 * side's app_in store is seen below, or its load of lib_want after
	 * the barrier sees ours. A sandbox may refuse the command after
	 * start: qps_alock_barrier then goes over to fenced entries.
	 */
	qps_alock_barrier();
	qps_alock_wait_out(l);
	/* Relaxed: a counter only read for stats. */
	__atomic_store_n(&l->lib_entries,
			 __atomic_load_n(&l->lib_entries, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
	if (grow && l->bias_run < QPS_ALOCK_BIAS_RUN_MAX)
		l->bias_run *= 2;
}

/* Under m, biased: counts @self's run and, at its end, makes @self the
 * owner if there is none, and opens the fast side to the owner. */
static void qps_alock_count(struct qps_alock *l, uintptr_t self)
{
	uintptr_t owner;

	if (l->last != self) {
		l->last = self;
		l->run = 0;
	}
	if (++l->run < l->bias_run)
		return;
	l->run = 0;
	owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);
	if (!owner) {
		owner = self;
		__atomic_store_n(&l->owner, self, __ATOMIC_RELAXED);
	}
	/* Release: pairs with the acquire in the owner's qps_alock_lock,
	 * which then sees every section made under m. */
	if (owner == self)
		__atomic_store_n(&l->lib_want, 0, __ATOMIC_RELEASE);
}

void qps_alock_lock_lib(struct qps_alock *l)
{
	qps_mutex_lock(&l->m);
	if (l->mode == QPS_ALOCK_MUTEX)
		return;
	qps_alock_close(l, false);
	l->last = 0;
}

void qps_alock_unlock_lib(struct qps_alock *l)
{
	/* Release: pairs with the acquire in qps_alock_lock, so the next
	 * fast-side section sees ours. A biased lock stays closed until
	 * its owner's next run. */
	if (l->mode == QPS_ALOCK_SINGLE)
		__atomic_store_n(&l->lib_want, 0, __ATOMIC_RELEASE);
	qps_mutex_unlock(&l->m);
}

/* The fast side's thread found it closed: step out and queue on the
 * mutex, which every other thread holds while it is in. */
void qps_alock_lock_app_slow(struct qps_alock *l)
{
	/* Release: pairs with the acquire in qps_alock_close's wait. */
	__atomic_store_n(&l->app_in, 0, __ATOMIC_RELEASE);
	qps_mutex_lock(&l->m);
	l->app_mutex = true;
	if (l->mode == QPS_ALOCK_BIASED)
		qps_alock_count(l, qps_thread_id());
}

/* Biased, a thread other than the owner (or any, before there is one). */
void qps_alock_lock_other(struct qps_alock *l)
{
	uintptr_t self = qps_thread_id();

	qps_mutex_lock(&l->m);
	qps_alock_close(l, true);
	/* Only now: the owner, until it is out, reads app_mutex as its own
	 * (qps_alock_unlock). */
	l->app_mutex = true;
	qps_alock_count(l, self);
}

bool qps_alock_biased(const struct qps_alock *l)
{
	return l->mode == QPS_ALOCK_BIASED &&
	       !__atomic_load_n(&l->lib_want, __ATOMIC_RELAXED);
}
