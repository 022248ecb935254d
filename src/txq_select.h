/* SPDX-License-Identifier: MIT */
/*
 * Send-QP selection (seeds 000 and 002): which of a context's N send QPs
 * carries a datagram.
 *
 * - Connected endpoints keep a cache slot (struct qps_txq_cache): unset at
 *   creation, set by the first pick, then returned directly, with no hash
 *   and no policy call, while the route generation and the QP's generation
 *   it was taken under still hold. Resets are counted by cause.
 * - Unconnected sends go through a flow table indexed by flow hash. An
 *   entry is one 64-bit word {qp, head}; a flow may leave its QP only once
 *   that QP's completion count has reached the head recorded for the flow's
 *   last packet, so a move never reorders the flow.
 * - New picks follow a policy: hash (default), cpu (CPU -> QP map, like
 *   XPS) or thread (one QP per sending thread, assigned round-robin).
 *
 * Per-QP accounting has one writer per counter: `enqueued` by the QP's
 * posting side, `completed` by its completion side. Statistics are sharded
 * per thread (one writer per shard); qps_txq_stats() adds the shards up.
 * docs/txq_select.md has the design and the contract with the send path.
 */
#ifndef QPS_TXQ_SELECT_H
#define QPS_TXQ_SELECT_H

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define QPS_TXQ_MAX_QP 1024
#define QPS_TXQ_MAX_FLOWS (1u << 24)
#define QPS_TXQ_DEFAULT_FLOWS 4096
#define QPS_TXQ_MAX_SHARDS 64	/* threads with a counter shard of their own */

enum qps_txq_policy {
	QPS_TXQ_POLICY_HASH = 0,	/* flow hash over the QPs */
	QPS_TXQ_POLICY_CPU,		/* current CPU -> QP (XPS) */
	QPS_TXQ_POLICY_THREAD,		/* one QP per sending thread */
	QPS_TXQ_POLICY_MAX,
};

/* Why a connected endpoint's cached pick was dropped. */
enum qps_txq_reset_cause {
	QPS_TXQ_RESET_CONNECT = 0,	/* connect, reconnect, disconnect */
	QPS_TXQ_RESET_ROUTE,		/* neighbour/route change (route gen) */
	QPS_TXQ_RESET_QP,		/* QP error or re-creation */
	QPS_TXQ_RESET_MAX,
};

enum qps_txq_flags {
	QPS_TXQ_F_SEED = 1 << 0,	/* attr.seed instead of the default */
	/* Test only: let flows move regardless of packets in flight, so the
	 * reorder tests can show what the rule prevents. */
	QPS_TXQ_F_NO_INFLIGHT_RULE = 1 << 1,
};

struct qps_txq_attr {
	uint32_t nqp;		/* power of two, 1..QPS_TXQ_MAX_QP */
	uint32_t flow_entries;	/* power of two; 0 = QPS_TXQ_DEFAULT_FLOWS */
	uint32_t nshards;	/* 1..QPS_TXQ_MAX_SHARDS; 0 = the maximum */
	enum qps_txq_policy policy;
	uint32_t flags;		/* enum qps_txq_flags */
	uint32_t seed;		/* flow hash seed, with QPS_TXQ_F_SEED */
	/* cpu policy: QP of CPU i is cpu_map[i] (i < cpu_map_len, values
	 * < nqp); other CPUs, or no map: i & (nqp - 1). Copied. */
	const uint16_t *cpu_map;
	uint32_t cpu_map_len;
	/* Current CPU for the cpu policy; NULL = sched_getcpu(). A negative
	 * answer falls back to the hash policy. Tests substitute it. */
	int (*getcpu)(void *arg);
	void *getcpu_arg;
	/* First value of every QP's counters (tests cross the 2^32 wrap). */
	uint32_t count_base;
};

/* The 4-tuple in network byte order, as in struct sockaddr_in. */
struct qps_txq_tuple {
	uint32_t saddr;
	uint32_t daddr;
	uint16_t sport;
	uint16_t dport;
};

/*
 * A connected endpoint's cached pick. qp = -1 when unset. The fields are
 * relaxed atomics only so that two threads sending on one endpoint at once
 * are a benign race rather than undefined behaviour: a torn slot either
 * fails validation (a recomputation) or holds one of the two picks, both
 * valid QP indexes.
 */
struct qps_txq_cache {
	_Atomic int32_t qp;
	_Atomic uint32_t qp_gen;	/* sel->qp_gen[qp] when picked */
	_Atomic uint64_t route_gen;	/* caller's route generation then */
};

enum qps_txq_ctr {
	QPS_TXQ_CTR_CACHED = 0,
	QPS_TXQ_CTR_COMPUTED,
	QPS_TXQ_CTR_FLOW_NEW,
	QPS_TXQ_CTR_FLOW_MOVED,
	QPS_TXQ_CTR_FLOW_DEFERRED,
	QPS_TXQ_CTR_RESET,	/* + enum qps_txq_reset_cause */
	QPS_TXQ_CTR_MAX = QPS_TXQ_CTR_RESET + QPS_TXQ_RESET_MAX,
};

struct qps_txq_stats {
	uint64_t picks_cached;		/* served from an endpoint's cache */
	uint64_t picks_computed;	/* policy evaluated */
	uint64_t flow_new;		/* empty flow entry filled */
	uint64_t flow_moves;		/* flow moved to its policy's QP */
	uint64_t flow_deferred;		/* move refused: packets in flight */
	uint64_t resets[QPS_TXQ_RESET_MAX];	/* cache resets by cause */
};

/* One cache line of counters. A shard is written by exactly one thread
 * (relaxed load + store, no locked instruction); see qps_txq_count(). */
struct qps_txq_shard {
	_Atomic uint64_t c[QPS_TXQ_CTR_MAX];
} __attribute__((aligned(64)));

/* A QP's completion accounting; the two counters live on separate lines
 * because different threads write them. */
struct qps_txq_qpc {
	_Atomic uint32_t enqueued;	/* posting side only */
	/* Packets picked for this QP and parked in its priority bands, not
	 * yet counted in enqueued: in flight for the flow rule. Posting
	 * side only (the send queue's lock). */
	_Atomic uint32_t parked;
	uint8_t pad0[56];
	_Atomic uint32_t completed;	/* completion side only */
	uint8_t pad1[60];
} __attribute__((aligned(64)));

struct qps_txq_sel {
	/* Read-mostly, first line. */
	uint32_t nqp;
	uint32_t nshards;
	uint32_t flow_mask;
	enum qps_txq_policy policy;
	bool inflight_rule;
	uint64_t key[4];	/* flow hash coefficients, from the seed */
	int (*getcpu)(void *arg);
	void *getcpu_arg;
	uint16_t *cpu_map;
	uint32_t cpu_map_len;

	_Atomic uint32_t *qp_gen;	/* bumped by qps_txq_qp_reset */
	_Atomic uint64_t *flows;	/* flow_mask + 1 entries */
	struct qps_txq_qpc *qpc;	/* nqp */
	struct qps_txq_shard *shards;	/* nshards */
	/* Threads without a shard of their own add here with atomic RMW. */
	struct qps_txq_shard overflow;
};

/*
 * This thread's shard number + 1: 0 = not assigned yet, UINT32_MAX = none
 * free (counts go to the overflow shard). Numbers are process-wide, so a
 * thread owns shard n of every selector; they return to the pool when the
 * thread exits.
 */
extern __thread uint32_t qps_txq_tls_shard
	__attribute__((tls_model("initial-exec")));

int qps_txq_create(const struct qps_txq_attr *attr, struct qps_txq_sel **out);
void qps_txq_destroy(struct qps_txq_sel *sel);

/* A power of two of send QPs that fits this machine (1..8). */
int qps_txq_default_nqp(void);

/*
 * Flow hash of @t: vector multiply-shift (Dietzfelbinger; Thorup's survey
 * of integer hashing), h = (k0 + k1*saddr + k2*daddr + k3*ports) mod 2^64,
 * top 32 bits. With random 64-bit k (from the seed) and 32-bit inputs the
 * 32-bit result is strongly universal, so any subset of its bits is too:
 * the hash policy takes the QP from its high bits, the flow table its
 * index from the low ones. Being linear, it also spreads flows that differ
 * by a step in one field (consecutive ports or addresses) evenly, like
 * Fibonacci hashing. Three independent multiplies: a few cycles.
 */
static inline uint32_t qps_txq_flow_hash(const struct qps_txq_sel *sel,
					 const struct qps_txq_tuple *t)
{
	/* Host order, so that consecutive ports or addresses are a step of
	 * one (a byte swap costs a cycle; a step of 2^24 would use only the
	 * low 40 bits of a coefficient). */
	uint64_t ports = (uint32_t)ntohs(t->sport) << 16 | ntohs(t->dport);

	return (uint32_t)((sel->key[0] + sel->key[1] * ntohl(t->saddr) +
			   sel->key[2] * ntohl(t->daddr) +
			   sel->key[3] * ports) >> 32);
}

void qps_txq_count_slow(struct qps_txq_sel *sel, enum qps_txq_ctr c);

/* Count one event on this thread's shard: its only writer, so a relaxed
 * load and store suffice and readers (relaxed loads) see whole values. */
static inline void qps_txq_count(struct qps_txq_sel *sel, enum qps_txq_ctr c)
{
	uint32_t i = qps_txq_tls_shard - 1;

	if (__builtin_expect(i < sel->nshards, 1)) {
		_Atomic uint64_t *p = &sel->shards[i].c[c];

		atomic_store_explicit(p, atomic_load_explicit(p,
				      memory_order_relaxed) + 1,
				      memory_order_relaxed);
		return;
	}
	qps_txq_count_slow(sel, c);
}

/* A flow entry: (qp + 1) << 32 | head; 0 is an empty entry, so a zeroed
 * table is an empty one. */
static inline uint64_t qps_txq_ent(uint32_t qp, uint32_t head)
{
	return (uint64_t)(qp + 1) << 32 | head;
}

static inline uint32_t qps_txq_ent_qp(uint64_t e)
{
	return (uint32_t)(e >> 32) - 1;	/* empty: UINT32_MAX, out of range */
}

static inline uint32_t qps_txq_ent_head(uint64_t e)
{
	return (uint32_t)e;
}

/* The hash policy's QP: the high bits of the hash, since the flow table's
 * index uses the low ones. */
static inline uint32_t qps_txq_policy_hash(const struct qps_txq_sel *sel,
					   uint32_t hash)
{
	return (uint32_t)(((uint64_t)hash * sel->nqp) >> 32);
}

static inline void qps_txq_cache_init(struct qps_txq_cache *c)
{
	atomic_store_explicit(&c->qp, -1, memory_order_relaxed);
	atomic_store_explicit(&c->qp_gen, 0, memory_order_relaxed);
	atomic_store_explicit(&c->route_gen, 0, memory_order_relaxed);
}

int qps_txq_pick_cached_slow(struct qps_txq_sel *sel, struct qps_txq_cache *c,
			     uint64_t route_gen, const struct qps_txq_tuple *t);

/*
 * qps_txq_pick_cached - the send QP of a connected endpoint. While @c is
 * set, was taken under @route_gen and its QP was not reset since, returns
 * it as is. Otherwise counts the reset's cause (if @c was set), computes a
 * pick from @t with the policy and stores it in @c. Returns the QP index.
 */
static inline int qps_txq_pick_cached(struct qps_txq_sel *sel,
				      struct qps_txq_cache *c,
				      uint64_t route_gen,
				      const struct qps_txq_tuple *t)
{
	int32_t qp = atomic_load_explicit(&c->qp, memory_order_relaxed);

	/* One unsigned compare rejects both "unset" (-1) and out of range.
	 * The acquire on qp_gen pairs with the release in qps_txq_qp_reset:
	 * a sender that still sees the old generation may use the QP as the
	 * resetter found it; one that sees the new one recomputes, and then
	 * also sees whatever the resetter published first (a re-created
	 * QP). */
	if (__builtin_expect((uint32_t)qp < sel->nqp &&
		atomic_load_explicit(&c->route_gen, memory_order_relaxed) ==
		route_gen &&
		atomic_load_explicit(&c->qp_gen, memory_order_relaxed) ==
		atomic_load_explicit(&sel->qp_gen[qp], memory_order_acquire),
		1)) {
		qps_txq_count(sel, QPS_TXQ_CTR_CACHED);
		return qp;
	}
	return qps_txq_pick_cached_slow(sel, c, route_gen, t);
}

/* Drop @c's pick for @cause (connect/disconnect; the others are usually
 * detected by qps_txq_pick_cached itself). 1 if it was set, 0 if not. */
int qps_txq_cache_reset(struct qps_txq_sel *sel, struct qps_txq_cache *c,
			enum qps_txq_reset_cause cause);

/* A pick computed from scratch: hash of @t, then the policy. What an
 * unconnected send without a flow table does on every packet. */
int qps_txq_pick_hash(struct qps_txq_sel *sel, const struct qps_txq_tuple *t);

/*
 * qps_txq_pick_flow - the send QP for an unconnected send of flow @hash
 * (qps_txq_flow_hash). Follows the policy unless that would move the flow
 * off a QP whose completions have not yet reached the flow's recorded
 * head; then the flow stays (counted as deferred). After counting the
 * packet on the returned QP (qps_txq_enqueue), call qps_txq_flow_commit.
 */
int qps_txq_pick_flow(struct qps_txq_sel *sel, uint32_t hash);

/*
 * qps_txq_pick_flow_held - qps_txq_pick_flow, and *@held tells whether the
 * flow stays on the returned QP only because its packets there have not
 * completed (a deferred move). Completions are counted when the caller
 * reaps them; a caller that can reap that QP now may do so and pick again
 * (the second pick counts as a new decision: a move, or another deferral).
 * Every unconnected datagram asks, so the common case makes no call: the
 * hash policy, and the flow on its QP already.
 */
int qps_txq_pick_flow_slow(struct qps_txq_sel *sel, uint32_t hash,
			   bool *held);
/* The decision once the policy said @want. */
int qps_txq_pick_flow_want(struct qps_txq_sel *sel, uint32_t hash,
			   uint32_t want, bool *held);

static inline int qps_txq_pick_flow_held(struct qps_txq_sel *sel,
					 uint32_t hash, bool *held)
{
	uint32_t want;
	uint64_t e;

	if (sel->policy != QPS_TXQ_POLICY_HASH)
		return qps_txq_pick_flow_slow(sel, hash, held);
	want = qps_txq_policy_hash(sel, hash);
	qps_txq_count(sel, QPS_TXQ_CTR_COMPUTED);
	/* Relaxed: as in qps_txq_pick_flow_want, which decides the rest. */
	e = atomic_load_explicit(&sel->flows[hash & sel->flow_mask],
				 memory_order_relaxed);
	if (qps_txq_ent_qp(e) != want)
		return qps_txq_pick_flow_want(sel, hash, want, held);
	if (held)
		*held = false;
	return (int)want;
}

/* Record @head (from qps_txq_enqueue) as flow @hash's last packet on @qp:
 * 1 when the entry now holds @qp with a head at or after @head, 0 when it
 * had meanwhile been moved to another QP (left alone), -EINVAL for a bad
 * @qp. */
int qps_txq_flow_commit(struct qps_txq_sel *sel, uint32_t hash, int qp,
			uint32_t head);

/*
 * Completion accounting. qps_txq_enqueue: posting side of @qp only, before
 * the WRs can reach the device (before the doorbell); *@head = the new
 * enqueued count, the head of the last of the @n packets. A WR counted but
 * then not posted is taken back with qps_txq_enqueue_cancel (same side).
 * qps_txq_complete: completion side of @qp only, for every completion, the
 * flushed and failed ones included; -ERANGE (nothing applied) when that
 * would pass the enqueued count.
 */
/*
 * qps_txq_park - @delta packets of @qp entered (> 0) or left (< 0) its
 * priority bands. Posting side of @qp only. A flow whose QP has parked
 * packets is held there: those packets get their head (qps_txq_enqueue)
 * only when posted, so the flow entry cannot describe them yet.
 */
void qps_txq_park(struct qps_txq_sel *sel, int qp, int32_t delta);
int qps_txq_enqueue(struct qps_txq_sel *sel, int qp, uint32_t n,
		    uint32_t *head);
int qps_txq_enqueue_cancel(struct qps_txq_sel *sel, int qp, uint32_t n);
int qps_txq_complete(struct qps_txq_sel *sel, int qp, uint32_t n);

/* Current counters of @qp (either may be a little stale). */
int qps_txq_qp_counts(struct qps_txq_sel *sel, int qp, uint32_t *enqueued,
		      uint32_t *completed);

/* @qp failed or was re-created: every cache holding it recomputes on its
 * next pick (counted as QPS_TXQ_RESET_QP). Publish the new QP first. */
int qps_txq_qp_reset(struct qps_txq_sel *sel, int qp);

/* Sum of every shard: exact once the counting threads are quiescent,
 * otherwise a snapshot that may trail by in-progress increments. */
int qps_txq_stats(struct qps_txq_sel *sel, struct qps_txq_stats *out);

#endif /* QPS_TXQ_SELECT_H */
