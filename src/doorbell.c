// SPDX-License-Identifier: MIT
/*
 * Doorbell postponement: when a send queue's doorbell is rung, and the
 * bounded-delay flusher that keeps a postponed one from being stranded.
 *
 * The send path writes WQEs without a doorbell while more follows
 * (tx.c); qps_db_ring_locked() rings once for all of them and counts why.
 * A send call that returns with WQEs still unrung on a send queue
 * (QPS_MSG_MORE) arms that queue for the flusher: one thread per context,
 * started on first use, that sleeps on a condition variable and rings
 * every queue whose WQEs have waited db_delay_ns. When no queue is armed it
 * lingers a few periods and then waits with no deadline; the call that
 * arms a queue next wakes it. A send that rings before returning (no MORE,
 * or the end of a batch) touches none of this.
 */
#define _GNU_SOURCE	/* pthread_setname_np, strerrordesc_np */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "sq.h"

/* Empty periods before the flusher waits without a deadline. */
#define QPS_DB_LINGER 64
/* The flusher's timer slack: the default 50 us would dwarf the delay. */
#define QPS_DB_SLACK_NS 1000UL
/* Its policy: SCHED_BATCH spares a busy sender's CPU the wake-up
 * preemptions, SCHED_OTHER keeps the delay bound on a loaded machine
 * (docs/performance.md measures both). */
#define QPS_DB_SCHED_DEFAULT SCHED_BATCH

/*
 * Ring @sq's doorbell for every WQE written since the last one. Returns
 * how many it released (0 when none waited) or -errno (generic path: the
 * chain could not be posted and was counted in tx_errors).
 *
 * The last of them asks for a completion (completion moderation): so
 * every WQE rung is reaped without waiting for a later send that may
 * never come: a flow's in-flight count drains (docs/txq_select.md), and
 * a flush, a close or a sender waiting for a slot finds its WQEs done.
 * The send path (sq_path.h) sets the flag; it is counted here.
 */
int qps_db_ring_locked(struct qps_sq *sq, enum qps_txf cause)
{
	uint32_t n = sq->unrung, bf = 0;
	int ret;

	if (!n)
		return 0;
	/* since_sig counts the WQEs written after the last signalled one:
	 * none means the tail asked already. */
	if (sq->since_sig) {
		sq->st->signaled++;
		sq->since_sig = 0;
	}
	ret = sq->path->ring(sq, &bf);
	if (ret > 0)
		sq->st->doorbells += (uint64_t)ret;
	sq->st->bf += bf;
	/* Relaxed: a hint for callers without the lock (qps_tx_run_end,
	 * qps_tx_poll); the decision is taken under it. */
	__atomic_store_n(&sq->unrung, 0, __ATOMIC_RELAXED);
	sq->st->flush[cause]++;
	/* Relaxed: the flusher reads it as a hint and decides under
	 * sq->lock, which we hold. */
	__atomic_store_n(&sq->db_armed, false, __ATOMIC_RELAXED);
	return ret < 0 ? ret : (int)n;
}

static void qps_db_wake(struct qps_db_timer *t)
{
	pthread_mutex_lock(&t->lock);
	if (__atomic_load_n(&t->idle, __ATOMIC_RELAXED)) {
		__atomic_store_n(&t->idle, false, __ATOMIC_RELAXED);
		pthread_cond_signal(&t->cond);
	}
	pthread_mutex_unlock(&t->lock);
}

/* Is any send queue armed? Seq-cst: see the Dekker pair in qps_db_main. */
static bool qps_db_any_armed(struct qps_ctx *ctx)
{
	uint32_t i;

	for (i = 0; i < ctx->nsq; i++)
		if (__atomic_load_n(&ctx->sq[i].db_armed, __ATOMIC_SEQ_CST))
			return true;
	return false;
}

/* Signed: another CPU's clock read may be a hair ahead of ours. */
static bool qps_db_overdue(uint64_t now, uint64_t since, uint64_t delay)
{
	return (int64_t)(now - since) >= (int64_t)delay;
}

/*
 * One look at @sq: ring it if its postponed doorbell is overdue. Returns
 * when it is due next (monotonic ns), or 0 when it is not armed.
 */
static uint64_t qps_db_check_sq(struct qps_sq *sq, uint64_t delay)
{
	uint64_t now, since;

	/* Acquire: pairs with the seq-cst store in qps_db_defer_locked(),
	 * so db_since (stored before it) is this burst's. */
	if (!__atomic_load_n(&sq->db_armed, __ATOMIC_ACQUIRE))
		return 0;
	since = __atomic_load_n(&sq->db_since, __ATOMIC_RELAXED);
	/* The clock after db_since: a burst armed since an earlier clock
	 * read would pass for overdue by an unsigned wrap, and the lock
	 * (a membarrier, on a single-threaded or leaning one) be taken
	 * for nothing. */
	now = qps_now_ns();
	if (!qps_db_overdue(now, since, delay))
		return since + delay;
	qps_alock_lock_lib(&sq->lock);
	/* Decided under the lock: a send may have rung or re-armed. */
	since = __atomic_load_n(&sq->db_since, __ATOMIC_RELAXED);
	now = qps_now_ns();
	if (__atomic_load_n(&sq->db_armed, __ATOMIC_RELAXED) &&
	    qps_db_overdue(now, since, delay))
		qps_db_ring_locked(sq, QPS_TXF_TIMER);
	qps_alock_unlock_lib(&sq->lock);
	return now + delay;
}

/*
 * One look at every send queue: ring what is overdue. Returns when to look
 * next (monotonic ns), or 0 to wait for a wake-up.
 */
static uint64_t qps_db_check(struct qps_ctx *ctx, unsigned int *quiet)
{
	uint64_t next = 0;
	uint32_t i;

	for (i = 0; i < ctx->nsq; i++) {
		uint64_t due = qps_db_check_sq(&ctx->sq[i], ctx->db_delay_ns);
		if (due && (!next || due < next))
			next = due;
	}
	if (next) {
		*quiet = 0;
		return next;
	}
	if (++*quiet >= QPS_DB_LINGER)
		return 0;
	return qps_now_ns() + ctx->db_delay_ns;
}

static void *qps_db_main(void *arg)
{
	struct qps_ctx *ctx = arg;
	struct qps_db_timer *t = &ctx->db_timer;
	unsigned int quiet = 0;
	uint64_t next = qps_now_ns();
	struct sched_param sp = { .sched_priority = 0 };
	struct timespec ts;

	prctl(PR_SET_TIMERSLACK, QPS_DB_SLACK_NS, 0, 0, 0);
	/* Best effort: docs/performance.md ("the doorbell bound") has the
	 * measurement behind the default. */
	if (t->policy != SCHED_OTHER)
		pthread_setschedparam(pthread_self(), t->policy, &sp);
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		if (next) {
			ts.tv_sec = (time_t)(next / 1000000000u);
			ts.tv_nsec = (long)(next % 1000000000u);
			pthread_cond_timedwait(&t->cond, &t->lock, &ts);
		} else {
			/* Seq-cst store, then seq-cst loads of every queue's
			 * db_armed: with the seq-cst store of db_armed, then
			 * load of idle, in qps_db_defer_locked() (Dekker),
			 * either we see its burst or it sees us idle and
			 * wakes us. */
			__atomic_store_n(&t->idle, true, __ATOMIC_SEQ_CST);
			if (!qps_db_any_armed(ctx))
				while (__atomic_load_n(&t->idle,
						       __ATOMIC_RELAXED) &&
				       !t->stop)
					pthread_cond_wait(&t->cond, &t->lock);
			__atomic_store_n(&t->idle, false, __ATOMIC_RELAXED);
			quiet = 0;
		}
		if (t->stop)
			break;
		pthread_mutex_unlock(&t->lock);
		next = qps_db_check(ctx, &quiet);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/*
 * Start the flusher once. Called by senders of any send queue, so the
 * start is decided under t->lock (taken inside the send queue's lock; the
 * flusher never takes them in the other order).
 */
static int qps_db_start(struct qps_ctx *ctx)
{
	struct qps_db_timer *t = &ctx->db_timer;
	sigset_t all, old;
	int ret = 0;

	/* Acquire: pairs with the release store below; a sender that sees
	 * the flusher started sees its thread handle. */
	if (__atomic_load_n(&t->started, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&t->lock);
	if (t->started)
		goto out;
	if (t->failed) {
		ret = -EAGAIN;
		goto out;
	}
	/* The application's signals are not for this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&t->thread, NULL, qps_db_main, ctx);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		/* strerror is not thread safe; this text is constant. */
		const char *why = strerrordesc_np(ret);

		t->failed = true;
		qps_log_err("doorbell flusher thread: %s; postponed doorbells "
			    "are rung at the end of each call",
			    why ? why : "unknown error");
		ret = -ret;
		goto out;
	}
	pthread_setname_np(t->thread, "qps-doorbell");
	/* Release: pairs with the acquire load above. */
	__atomic_store_n(&t->started, true, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/*
 * A send call returns with WQEs unrung on @sq: make sure they are rung
 * within db_delay_ns. Without a delay, or without the flusher, ring now.
 */
int qps_db_defer_locked(struct qps_sq *sq)
{
	struct qps_ctx *ctx = sq->ctx;

	if (!sq->unrung || __atomic_load_n(&sq->db_armed, __ATOMIC_RELAXED))
		return 0;
	if (!ctx->db_delay_ns || qps_db_start(ctx) < 0)
		return qps_db_ring_locked(sq, QPS_TXF_SEND);
	__atomic_store_n(&sq->db_since, qps_now_ns(), __ATOMIC_RELAXED);
	/* Seq-cst store, then seq-cst load of idle: pairs with the
	 * flusher's seq-cst store of idle, then loads of every queue's
	 * db_armed (Dekker). */
	__atomic_store_n(&sq->db_armed, true, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ctx->db_timer.idle, __ATOMIC_SEQ_CST))
		qps_db_wake(&ctx->db_timer);
	return 0;
}

int qps_db_init(struct qps_ctx *ctx)
{
	struct qps_db_timer *t = &ctx->db_timer;
	pthread_condattr_t ca;
	int ret;

	ret = pthread_condattr_init(&ca);
	if (ret)
		return -ret;
	ret = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!ret)
		ret = pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (ret)
		return -ret;
	pthread_mutex_init(&t->lock, NULL);
	t->policy = QPS_DB_SCHED_DEFAULT;
	t->ready = true;
	return 0;
}

/* Stop the flusher; called without any send queue's lock (it may be
 * taking one) and once no thread sends any more. */
void qps_db_stop(struct qps_ctx *ctx)
{
	struct qps_db_timer *t = &ctx->db_timer;

	if (!__atomic_load_n(&t->started, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	/* Relaxed: the flusher has exited and no sender runs any more. */
	__atomic_store_n(&t->started, false, __ATOMIC_RELAXED);
}

void qps_db_fini(struct qps_ctx *ctx)
{
	if (!ctx->db_timer.ready)
		return;
	qps_db_stop(ctx);
	pthread_cond_destroy(&ctx->db_timer.cond);
	pthread_mutex_destroy(&ctx->db_timer.lock);
	ctx->db_timer.ready = false;
}

int qps_ctx_flush(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);
	int total = 0, err = 0;
	uint32_t i;

	if (ret < 0)
		return ret;
	for (i = 0; i < ctx->nsq; i++) {
		qps_alock_lock(&ctx->sq[i].lock);
		ret = qps_db_ring_locked(&ctx->sq[i], QPS_TXF_EXPLICIT);
		qps_alock_unlock(&ctx->sq[i].lock);
		if (ret < 0 && !err)
			err = ret;
		else if (ret > 0)
			total += ret;
	}
	return err ? err : total;
}

int qps_flush(struct qps_ep *ep)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	return qps_ctx_flush(ep->ctx);
}
