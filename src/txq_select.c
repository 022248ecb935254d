// SPDX-License-Identifier: MIT
/*
 * Send-QP selection: cached picks for connected endpoints, a flow table
 * with the in-flight rule for unconnected sends, pick policies, per-QP
 * completion accounting and sharded counters. See txq_select.h for the
 * API and docs/txq_select.md for the design.
 */
#define _GNU_SOURCE	/* sched_getcpu */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txq_select.h"

#define QPS_TXQ_DEFAULT_SEED 0x5150534bu	/* "QPSK" */
#define QPS_TXQ_MAX_CPU_MAP 4096
#define QPS_TXQ_SHARD_NONE UINT32_MAX

__thread uint32_t qps_txq_tls_shard __attribute__((tls_model("initial-exec")));

/* Shard numbers in use, one bit each; a thread holds one from its first
 * count to its exit. */
static _Atomic uint64_t qps_txq_shard_used;
static pthread_key_t qps_txq_shard_key;
static pthread_once_t qps_txq_shard_once = PTHREAD_ONCE_INIT;
static bool qps_txq_shard_key_ok;

/* Thread policy: index + 1 of this thread, handed out round-robin. */
static __thread uint32_t qps_txq_tls_rr;
static _Atomic uint32_t qps_txq_rr_next;

static bool qps_is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* The thread exits: its shard number goes back to the pool. The release
 * pairs with the acquire CAS in qps_txq_shard_assign, so the next owner's
 * relaxed increments come after this thread's last ones. */
static void qps_txq_shard_release(void *v)
{
	uint32_t n = (uint32_t)(uintptr_t)v - 1;

	qps_txq_tls_shard = QPS_TXQ_SHARD_NONE;
	atomic_fetch_and_explicit(&qps_txq_shard_used, ~(1ull << n),
				  memory_order_release);
}

static void qps_txq_shard_key_init(void)
{
	qps_txq_shard_key_ok = pthread_key_create(&qps_txq_shard_key,
						  qps_txq_shard_release) == 0;
}

/* Give this thread a shard number, or QPS_TXQ_SHARD_NONE when all are
 * taken (or its release could not be arranged); sets qps_txq_tls_shard. */
static uint32_t qps_txq_shard_assign(void)
{
	uint64_t used;
	uint32_t n;

	qps_txq_tls_shard = QPS_TXQ_SHARD_NONE;
	pthread_once(&qps_txq_shard_once, qps_txq_shard_key_init);
	if (!qps_txq_shard_key_ok)
		return QPS_TXQ_SHARD_NONE;
	used = atomic_load_explicit(&qps_txq_shard_used, memory_order_relaxed);
	do {
		if (used == UINT64_MAX)
			return QPS_TXQ_SHARD_NONE;
		n = (uint32_t)__builtin_ctzll(~used);
	} while (!atomic_compare_exchange_weak_explicit(&qps_txq_shard_used,
			&used, used | 1ull << n, memory_order_acquire,
			memory_order_relaxed));
	if (pthread_setspecific(qps_txq_shard_key,
				(void *)(uintptr_t)(n + 1)) != 0) {
		atomic_fetch_and_explicit(&qps_txq_shard_used, ~(1ull << n),
					  memory_order_release);
		return QPS_TXQ_SHARD_NONE;
	}
	qps_txq_tls_shard = n + 1;
	return n + 1;
}

void qps_txq_count_slow(struct qps_txq_sel *sel, enum qps_txq_ctr c)
{
	uint32_t v = qps_txq_tls_shard;

	if (v == 0)
		v = qps_txq_shard_assign();
	if (v - 1 < sel->nshards) {
		_Atomic uint64_t *p = &sel->shards[v - 1].c[c];

		atomic_store_explicit(p, atomic_load_explicit(p,
				      memory_order_relaxed) + 1,
				      memory_order_relaxed);
		return;
	}
	/* Shared by every thread without a shard: an atomic RMW. */
	atomic_fetch_add_explicit(&sel->overflow.c[c], 1,
				  memory_order_relaxed);
}

static uint32_t qps_txq_thread_index(void)
{
	uint32_t v = qps_txq_tls_rr;

	if (!v) {
		v = atomic_fetch_add_explicit(&qps_txq_rr_next, 1,
					      memory_order_relaxed) + 1;
		if (!v)	/* 2^32 threads later: skip the "unset" value */
			v = 1;
		qps_txq_tls_rr = v;
	}
	return v - 1;
}

/* The QP a new pick of flow @hash gets under the selector's policy. */
static uint32_t qps_txq_policy(struct qps_txq_sel *sel, uint32_t hash)
{
	int cpu;

	qps_txq_count(sel, QPS_TXQ_CTR_COMPUTED);
	switch (sel->policy) {
	case QPS_TXQ_POLICY_CPU:
		cpu = sel->getcpu ? sel->getcpu(sel->getcpu_arg) :
				    sched_getcpu();
		if (cpu < 0)
			break;
		if ((uint32_t)cpu < sel->cpu_map_len)
			return sel->cpu_map[cpu];
		return (uint32_t)cpu & (sel->nqp - 1);
	case QPS_TXQ_POLICY_THREAD:
		return qps_txq_thread_index() & (sel->nqp - 1);
	default:
		break;
	}
	return qps_txq_policy_hash(sel, hash);
}

/*
 * Is k * i (mod 2^64), i = 0..1023, spread evenly over 8 bins of its top
 * bits? That is the hash of flows that differ by a step of one in one
 * field. A random k fails when it lies close to a fraction of 2^64 with a
 * small denominator (about 1 in 100 does).
 */
static bool qps_txq_step_even(uint64_t k)
{
	uint32_t bins[8] = { 0 };
	uint32_t lo = UINT32_MAX, hi = 0;
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < 1024; i++, v += k)
		bins[v >> 61]++;
	for (i = 0; i < 8; i++) {
		lo = bins[i] < lo ? bins[i] : lo;
		hi = bins[i] > hi ? bins[i] : hi;
	}
	return hi - lo <= 16;	/* within about 6% of 128 */
}

/* Even for steps of 1, 2^8, 2^16 and 2^24 in a field: consecutive hosts,
 * subnets, and the port in the high half of the ports word. */
static bool qps_txq_key_even(uint64_t k)
{
	unsigned int s;

	for (s = 0; s < 32; s += 8)
		if (!qps_txq_step_even(k << s))
			return false;
	return true;
}

/*
 * The hash coefficients: a Weyl sequence (steps of 2^64 / golden ratio)
 * from the seed, each value passed through a multiply-xorshift finaliser,
 * so that nearby seeds give unrelated coefficients. k0 is a plain offset;
 * a multiplier that fails qps_txq_key_even is drawn again.
 */
static void qps_txq_keys(struct qps_txq_sel *sel, uint32_t seed)
{
	uint64_t w = (uint64_t)seed << 32 | seed;
	unsigned int i = 0;

	while (i < 4) {
		uint64_t k;

		w += 0x9e3779b97f4a7c15ull;
		k = w;
		k = (k ^ (k >> 31)) * 0xbb67ae8584caa73bull; /* frac(sqrt 3) */
		k = (k ^ (k >> 29)) * 0x9e3779b97f4a7c15ull;
		k ^= k >> 32;
		if (i == 0 || qps_txq_key_even(k))
			sel->key[i++] = k;
	}
}

static int qps_txq_attr_check(const struct qps_txq_attr *a)
{
	uint32_t i;

	if (!qps_is_pow2(a->nqp) || a->nqp > QPS_TXQ_MAX_QP)
		return -EINVAL;
	if (a->flow_entries && (!qps_is_pow2(a->flow_entries) ||
				a->flow_entries > QPS_TXQ_MAX_FLOWS))
		return -EINVAL;
	if (a->nshards > QPS_TXQ_MAX_SHARDS)
		return -EINVAL;
	if ((unsigned int)a->policy >= QPS_TXQ_POLICY_MAX)
		return -EINVAL;
	if (a->flags & ~(uint32_t)(QPS_TXQ_F_SEED | QPS_TXQ_F_NO_INFLIGHT_RULE))
		return -EINVAL;
	if (a->cpu_map_len > QPS_TXQ_MAX_CPU_MAP ||
	    (a->cpu_map_len && !a->cpu_map))
		return -EINVAL;
	for (i = 0; i < a->cpu_map_len; i++)
		if (a->cpu_map[i] >= a->nqp)
			return -EINVAL;
	return 0;
}

int qps_txq_create(const struct qps_txq_attr *attr, struct qps_txq_sel **out)
{
	struct qps_txq_sel *sel;
	uint32_t nflows, i;
	int ret;

	if (!attr || !out)
		return -EINVAL;
	ret = qps_txq_attr_check(attr);
	if (ret < 0)
		return ret;
	sel = aligned_alloc(64, sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	memset(sel, 0, sizeof(*sel));
	sel->nqp = attr->nqp;
	sel->nshards = attr->nshards ? attr->nshards : QPS_TXQ_MAX_SHARDS;
	nflows = attr->flow_entries ? attr->flow_entries :
					 QPS_TXQ_DEFAULT_FLOWS;
	sel->flow_mask = nflows - 1;
	sel->policy = attr->policy;
	sel->inflight_rule = !(attr->flags & QPS_TXQ_F_NO_INFLIGHT_RULE);
	qps_txq_keys(sel, (attr->flags & QPS_TXQ_F_SEED) ? attr->seed :
					 QPS_TXQ_DEFAULT_SEED);
	sel->getcpu = attr->getcpu;
	sel->getcpu_arg = attr->getcpu_arg;

	sel->qp_gen = calloc(sel->nqp, sizeof(*sel->qp_gen));
	sel->flows = calloc(nflows, sizeof(*sel->flows));
	sel->qpc = aligned_alloc(64, sel->nqp * sizeof(*sel->qpc));
	sel->shards = aligned_alloc(64, sel->nshards * sizeof(*sel->shards));
	if (attr->cpu_map_len)
		sel->cpu_map = calloc(attr->cpu_map_len, sizeof(*sel->cpu_map));
	if (!sel->qp_gen || !sel->flows || !sel->qpc || !sel->shards ||
	    (attr->cpu_map_len && !sel->cpu_map)) {
		qps_txq_destroy(sel);
		return -ENOMEM;
	}
	memset(sel->shards, 0, sel->nshards * sizeof(*sel->shards));
	memset(sel->qpc, 0, sel->nqp * sizeof(*sel->qpc));
	for (i = 0; i < sel->nqp; i++) {
		atomic_init(&sel->qpc[i].enqueued, attr->count_base);
		atomic_init(&sel->qpc[i].completed, attr->count_base);
	}
	if (attr->cpu_map_len)
		memcpy(sel->cpu_map, attr->cpu_map,
		       attr->cpu_map_len * sizeof(*sel->cpu_map));
	sel->cpu_map_len = attr->cpu_map_len;
	*out = sel;
	return 0;
}

void qps_txq_destroy(struct qps_txq_sel *sel)
{
	if (!sel)
		return;
	free(sel->qp_gen);
	free(sel->flows);
	free(sel->qpc);
	free(sel->shards);
	free(sel->cpu_map);
	free(sel);
}

int qps_txq_default_nqp(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	int q = 1;

	while (q < 8 && q <= n / 2)
		q *= 2;
	return q;
}

int qps_txq_pick_cached_slow(struct qps_txq_sel *sel, struct qps_txq_cache *c,
			     uint64_t route_gen, const struct qps_txq_tuple *t)
{
	int32_t old;
	uint32_t qp;

	if (!c || !t)
		return -EINVAL;
	old = atomic_load_explicit(&c->qp, memory_order_relaxed);
	if ((uint32_t)old < sel->nqp)	/* it was set: what broke it? */
		qps_txq_count(sel, QPS_TXQ_CTR_RESET +
			      (atomic_load_explicit(&c->route_gen,
						    memory_order_relaxed) !=
			       route_gen ? QPS_TXQ_RESET_ROUTE :
					   QPS_TXQ_RESET_QP));
	qp = qps_txq_policy(sel, qps_txq_flow_hash(sel, t));
	/* Pairs with the release in qps_txq_qp_reset: the generation stored
	 * is one whose QP we can see. */
	atomic_store_explicit(&c->qp_gen,
			      atomic_load_explicit(&sel->qp_gen[qp],
						   memory_order_acquire),
			      memory_order_relaxed);
	atomic_store_explicit(&c->route_gen, route_gen, memory_order_relaxed);
	atomic_store_explicit(&c->qp, (int32_t)qp, memory_order_relaxed);
	return (int)qp;
}

int qps_txq_cache_reset(struct qps_txq_sel *sel, struct qps_txq_cache *c,
			enum qps_txq_reset_cause cause)
{
	int32_t old;

	if (!c || (unsigned int)cause >= QPS_TXQ_RESET_MAX)
		return -EINVAL;
	/* An exchange, so that racing resets count one reset, not two. */
	old = atomic_exchange_explicit(&c->qp, -1, memory_order_relaxed);
	if ((uint32_t)old >= sel->nqp)
		return 0;
	qps_txq_count(sel, QPS_TXQ_CTR_RESET + cause);
	return 1;
}

int qps_txq_pick_hash(struct qps_txq_sel *sel, const struct qps_txq_tuple *t)
{
	if (!t)
		return -EINVAL;
	return (int)qps_txq_policy(sel, qps_txq_flow_hash(sel, t));
}

/* Have @qp's completions reached @head? Wrap-safe: counters are 32-bit
 * and compared by signed distance, valid while fewer than 2^31 packets
 * separate the two (an older head reads as "in flight" only until the
 * flow's next packet refreshes it). The acquire pairs with the release in
 * qps_txq_complete: seeing the count means seeing the completion work
 * that preceded it. */
static bool qps_txq_drained(struct qps_txq_sel *sel, uint32_t qp,
			    uint32_t head)
{
	uint32_t done = atomic_load_explicit(&sel->qpc[qp].completed,
					     memory_order_acquire);

	/* Acquire: pairs with the release in qps_txq_park, so a zero count
	 * means every parked packet's commit is visible. */
	if (atomic_load_explicit(&sel->qpc[qp].parked, memory_order_acquire))
		return false;
	return (int32_t)(done - head) >= 0;
}

void qps_txq_park(struct qps_txq_sel *sel, int qp, int32_t delta)
{
	_Atomic uint32_t *p;

	if ((uint32_t)qp >= sel->nqp)
		return;
	p = &sel->qpc[qp].parked;
	/* Single writer (the send queue's lock). Release: pairs with the
	 * acquire in qps_txq_drained: the enqueue and flow commit of a
	 * packet that left the bands precede its uncount. */
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) +
			      (uint32_t)delta, memory_order_release);
}

int qps_txq_pick_flow(struct qps_txq_sel *sel, uint32_t hash)
{
	return qps_txq_pick_flow_held(sel, hash, NULL);
}

int qps_txq_pick_flow_slow(struct qps_txq_sel *sel, uint32_t hash,
			   bool *held)
{
	return qps_txq_pick_flow_want(sel, hash, qps_txq_policy(sel, hash),
				      held);
}

int qps_txq_pick_flow_want(struct qps_txq_sel *sel, uint32_t hash,
			   uint32_t want, bool *held)
{
	_Atomic uint64_t *slot = &sel->flows[hash & sel->flow_mask];
	uint32_t cur;
	uint64_t e;

	if (held)
		*held = false;
	/*
	 * Entries are read and replaced whole (64-bit relaxed atomics), so a
	 * reader never sees half an update; a qp field out of range reads as
	 * empty. Filling or moving an entry is a CAS: of two threads racing
	 * to move one entry exactly one wins (and counts the move), the
	 * other re-decides against the winner's entry.
	 */
	e = atomic_load_explicit(slot, memory_order_relaxed);
	for (;;) {
		uint32_t base;

		cur = qps_txq_ent_qp(e);
		if (cur == want)
			return (int)want;
		if (cur < sel->nqp && sel->inflight_rule &&
		    !qps_txq_drained(sel, cur, qps_txq_ent_head(e))) {
			qps_txq_count(sel, QPS_TXQ_CTR_FLOW_DEFERRED);
			if (held)
				*held = true;
			return (int)cur;
		}
		/* Provisional head: nothing of this flow is on @want yet, and
		 * any value not above the true count is safe because the
		 * commit raises it. Relaxed: only a lower bound is needed. */
		base = atomic_load_explicit(&sel->qpc[want].enqueued,
					    memory_order_relaxed);
		if (atomic_compare_exchange_weak_explicit(slot, &e,
				qps_txq_ent(want, base), memory_order_relaxed,
				memory_order_relaxed))
			break;
	}
	qps_txq_count(sel, cur < sel->nqp ? QPS_TXQ_CTR_FLOW_MOVED :
					    QPS_TXQ_CTR_FLOW_NEW);
	return (int)want;
}

int qps_txq_flow_commit(struct qps_txq_sel *sel, uint32_t hash, int qp,
			uint32_t head)
{
	_Atomic uint64_t *slot = &sel->flows[hash & sel->flow_mask];
	uint64_t e;

	if ((uint32_t)qp >= sel->nqp)
		return -EINVAL;
	/*
	 * Load, check, store; not a CAS, to keep a locked instruction off
	 * every unconnected send. Benign race: a thread committing between
	 * our load and store on the same entry (the same flow sent from two
	 * threads at once, or two flows colliding in the table) can have its
	 * move or newer head overwritten, which may let that flow move early
	 * and reorder. Seed 002 accepts the same: best effort under collision,
	 * exact for a flow sent by one thread at a time.
	 */
	e = atomic_load_explicit(slot, memory_order_relaxed);
	if (qps_txq_ent_qp(e) != (uint32_t)qp)
		return 0;
	if ((int32_t)(head - qps_txq_ent_head(e)) > 0)
		atomic_store_explicit(slot, qps_txq_ent((uint32_t)qp, head),
				      memory_order_relaxed);
	return 1;
}

int qps_txq_enqueue(struct qps_txq_sel *sel, int qp, uint32_t n,
		    uint32_t *head)
{
	_Atomic uint32_t *p;
	uint32_t v;

	if ((uint32_t)qp >= sel->nqp)
		return -EINVAL;
	p = &sel->qpc[qp].enqueued;
	/* Single writer: our own last value, then a release store that pairs
	 * with the acquire in qps_txq_complete, so the completion side never
	 * counts a packet it cannot see as enqueued. */
	v = atomic_load_explicit(p, memory_order_relaxed) + n;
	atomic_store_explicit(p, v, memory_order_release);
	if (head)
		*head = v;
	return 0;
}

int qps_txq_enqueue_cancel(struct qps_txq_sel *sel, int qp, uint32_t n)
{
	_Atomic uint32_t *p;
	uint32_t enq, done;

	if ((uint32_t)qp >= sel->nqp)
		return -EINVAL;
	p = &sel->qpc[qp].enqueued;
	enq = atomic_load_explicit(p, memory_order_relaxed);
	done = atomic_load_explicit(&sel->qpc[qp].completed,
				    memory_order_acquire);
	if ((int32_t)(enq - n - done) < 0)
		return -ERANGE;
	/* Same writer and pairing as qps_txq_enqueue. */
	atomic_store_explicit(p, enq - n, memory_order_release);
	return 0;
}

int qps_txq_complete(struct qps_txq_sel *sel, int qp, uint32_t n)
{
	struct qps_txq_qpc *q;
	uint32_t enq, done;

	if ((uint32_t)qp >= sel->nqp)
		return -EINVAL;
	q = &sel->qpc[qp];
	/* Pairs with the release in qps_txq_enqueue. */
	enq = atomic_load_explicit(&q->enqueued, memory_order_acquire);
	done = atomic_load_explicit(&q->completed, memory_order_relaxed) + n;
	if ((int32_t)(enq - done) < 0)
		return -ERANGE;
	/* Single writer. Pairs with the acquire in qps_txq_drained (and in
	 * qps_txq_enqueue_cancel, qps_txq_qp_counts). */
	atomic_store_explicit(&q->completed, done, memory_order_release);
	return 0;
}

int qps_txq_qp_counts(struct qps_txq_sel *sel, int qp, uint32_t *enqueued,
		      uint32_t *completed)
{
	if ((uint32_t)qp >= sel->nqp)
		return -EINVAL;
	/* Acquires pair with the writers' releases (enqueue, complete). */
	if (enqueued)
		*enqueued = atomic_load_explicit(&sel->qpc[qp].enqueued,
						 memory_order_acquire);
	if (completed)
		*completed = atomic_load_explicit(&sel->qpc[qp].completed,
						  memory_order_acquire);
	return 0;
}

int qps_txq_qp_reset(struct qps_txq_sel *sel, int qp)
{
	if ((uint32_t)qp >= sel->nqp)
		return -EINVAL;
	/* Any thread may reset (an RMW, so two resets are two bumps). The
	 * release pairs with the acquire in qps_txq_pick_cached and its slow
	 * path: whatever the caller published before (a re-created QP) is
	 * visible to a sender that sees the new generation. */
	atomic_fetch_add_explicit(&sel->qp_gen[qp], 1, memory_order_release);
	return 0;
}

static uint64_t qps_txq_sum(struct qps_txq_sel *sel, unsigned int c)
{
	uint64_t v = atomic_load_explicit(&sel->overflow.c[c],
					  memory_order_relaxed);
	uint32_t i;

	for (i = 0; i < sel->nshards; i++)
		v += atomic_load_explicit(&sel->shards[i].c[c],
					  memory_order_relaxed);
	return v;
}

int qps_txq_stats(struct qps_txq_sel *sel, struct qps_txq_stats *out)
{
	unsigned int i;

	if (!sel || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->picks_cached = qps_txq_sum(sel, QPS_TXQ_CTR_CACHED);
	out->picks_computed = qps_txq_sum(sel, QPS_TXQ_CTR_COMPUTED);
	out->flow_new = qps_txq_sum(sel, QPS_TXQ_CTR_FLOW_NEW);
	out->flow_moves = qps_txq_sum(sel, QPS_TXQ_CTR_FLOW_MOVED);
	out->flow_deferred = qps_txq_sum(sel, QPS_TXQ_CTR_FLOW_DEFERRED);
	for (i = 0; i < QPS_TXQ_RESET_MAX; i++)
		out->resets[i] = qps_txq_sum(sel, QPS_TXQ_CTR_RESET + i);
	return 0;
}
