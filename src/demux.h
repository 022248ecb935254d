/* SPDX-License-Identifier: MIT */
/*
 * Receive demultiplexing state: the tables the receive path reads for
 * every datagram, and the grace periods that let it read them without a
 * lock and without per-packet references.
 *
 * Writers (bind, connect, join, leave, close) serialise on ctx->ctl_lock,
 * build a new object, publish it with one QPS_RCU_STORE and free what it
 * replaced only after qps_epoch_sync(). Readers are the receive pollers:
 * between qps_epoch_enter() and qps_epoch_exit() they follow published
 * pointers with QPS_RCU_LOAD and touch nothing else that a writer frees.
 *
 * Files: epoch.c (grace periods), demux.c (the per-datagram read side),
 * mcast.c (joins, leaves and the refcounted (group, port) steering rules),
 * endpoint.c (bind and connect tables).
 */
#ifndef QPS_DEMUX_H
#define QPS_DEMUX_H

#include <stdbool.h>
#include <stdint.h>

struct qps_ctx;
struct qps_ep;
struct qps_flow;
struct qps_frame_info;

/*
 * Publication. A store is seq-cst so that, together with the seq-cst
 * store in qps_epoch_enter() and the seq-cst load in qps_epoch_sync(), a
 * reader that qps_epoch_sync() did not wait for cannot see what the
 * writer unlinked before calling it (store-buffer ordering: both sides
 * store, then load). A load is seq-cst for the same pairing; it includes
 * acquire, which pairs with the store's release so the object's fields
 * written before publication are visible. On x86 and arm64 the load is a
 * plain (resp. LDAR) load: the fast path takes no atomic read-modify-write.
 */
#define QPS_RCU_LOAD(p) __atomic_load_n(&(p), __ATOMIC_SEQ_CST)
#define QPS_RCU_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_SEQ_CST)

/*
 * One reader slot per receive queue: a sequence that is odd while the
 * queue's poller is inside a read-side section. Only the poller holding
 * the queue writes it.
 */
struct qps_epoch {
	uint32_t seq;
} __attribute__((aligned(64)));

void qps_epoch_enter(struct qps_epoch *e);
void qps_epoch_exit(struct qps_epoch *e);
/* Wait until every section of @n readers that was running on entry has
 * ended. Must not be called from inside a section, nor holding a lock a
 * reader takes before entering (ctx->rx.lock). */
void qps_epoch_sync(struct qps_epoch *e, unsigned int n);
/* Free @p after a grace period: queued until qps_retire_flush(), which
 * waits for one grace period and frees everything queued. Writers call
 * both under ctx->ctl_lock, flushing once at the end of an operation. */
void qps_retire(struct qps_ctx *ctx, void *p);
void qps_retire_flush(struct qps_ctx *ctx);

/* A multicast membership: @source is INADDR_ANY for an any-source join,
 * else one source the endpoint accepts. An endpoint joined to several
 * sources of a group has one entry per source, next to each other. With
 * @block the entry is no membership but a source the endpoint's
 * any-source membership of the group excludes (qps_setfilter): it sits in
 * the same run, after that membership. */
struct qps_mc_sub {
	struct qps_ep *ep;
	uint32_t source;
	uint32_t block;
};

/*
 * One version of the steering rule of a (group, UDP port): the device rule
 * and its subscribers. Immutable once published: join and leave publish a
 * new version into the same table slot and retire the old one, so the
 * receive path reads the key, the counts and the first subscriber from one
 * cache line (allocations are 64-byte aligned). One subscriber (@neps 1)
 * takes the early path whatever number of sources it joined.
 */
struct qps_mc_rule {
	uint32_t group;			/* network order */
	uint16_t port;			/* network order */
	uint32_t n;			/* memberships (s[]), >= 1 */
	uint32_t neps;			/* subscribers: distinct s[].ep */
	struct qps_flow *flow;		/* carried across versions; writers only */
	struct qps_mc_sub s[];
};

/* Open addressing, linear probing, load factor <= 1/2. A slot is NULL
 * (never used: ends a probe), QPS_MC_TOMB (deleted) or a rule. */
struct qps_mc_tab {
	uint32_t mask;
	uint32_t live;
	uint32_t tombs;
	struct qps_mc_rule *slot[];
};

#define QPS_MC_TOMB ((struct qps_mc_rule *)(uintptr_t)1)

/* A connected endpoint's 4-tuple, immutable; replaced on reconnect. */
struct qps_conn {
	uint32_t saddr;		/* the peer */
	uint16_t sport;
	uint16_t dport;		/* the endpoint's bound port */
	uint32_t daddr;		/* its bound address, INADDR_ANY = any */
	struct qps_ep *ep;
	struct qps_conn *next;	/* RCU: bucket chain */
};

/* An endpoint's memberships, for leave and close; under ctl_lock. */
struct qps_ep_mc {
	uint32_t group;
	uint32_t source;
};

#define QPS_BIND_BUCKETS 256

struct qps_mc_groups;	/* mcast.c */

/*
 * The tables of a context: written under ctx->ctl_lock (which also guards
 * the endpoint table, endpoint.h; the lock order is at struct qps_ctx,
 * qps_int.h), read by the receive path without it; what a writer unlinks
 * is freed after a grace period (retired, epoch.c).
 */
struct qps_demux {
	struct qps_ep *bind_tab[QPS_BIND_BUCKETS];	/* RCU */
	struct qps_conn **conn_tab;	/* RCU buckets */
	uint32_t conn_mask;
	uint32_t nconn;			/* atomic: in conn_tab, a hint for
					 * the receive path (demux.c) */
	struct qps_mc_tab *mc_tab;	/* RCU */
	struct qps_mc_groups *mc_groups; /* UD: groups attached (mcast.c) */
	uint32_t mc_nrules;		/* atomic: rules now, a hint for
					 * senders (mc_loop.c) */
	void **retired;
	uint32_t retired_n;
	uint32_t retired_cap;
};

/* demux.c */
int qps_demux_init(struct qps_ctx *ctx);
void qps_demux_fini(struct qps_ctx *ctx);
/* @key: qps_demux_key(@fi), computed once per datagram for the
 * prefetching passes and the lookup. */
void qps_demux(struct qps_ctx *ctx, uint32_t buf,
	       const struct qps_frame_info *fi, uint32_t key);
/* Stage 0 prefetches the table slot @fi will be looked up in, stage 1
 * what that slot points to; both only hint the cache. */
void qps_demux_prefetch(struct qps_ctx *ctx, const struct qps_frame_info *fi,
			uint32_t key, int stage);
/* The 4-tuple hash a unicast datagram is looked up by (0 for the others,
 * which are looked up by group). */
uint32_t qps_demux_key(const struct qps_frame_info *fi);
/* Whether a batch's datagrams need their keys (some endpoint is
 * connected), and whether prefetching their table entries pays (the
 * tables are too large to stay in cache); read once per batch. */
bool qps_demux_keyed(const struct qps_ctx *ctx);
bool qps_demux_prefetching(const struct qps_ctx *ctx);
uint32_t qps_conn_hash(uint32_t saddr, uint16_t sport, uint16_t dport);
int qps_conn_set_locked(struct qps_ep *ep, uint32_t peer, uint16_t pport);
void qps_conn_clear_locked(struct qps_ep *ep);
void qps_bind_link_locked(struct qps_ep *ep);
void qps_bind_unlink_locked(struct qps_ep *ep);
struct qps_ep *qps_bind_first(struct qps_ctx *ctx, uint16_t port);

/* mcast.c */
int qps_mcast_init(struct qps_ctx *ctx);
void qps_mcast_fini(struct qps_ctx *ctx);
struct qps_mc_rule *qps_mc_lookup(const struct qps_mc_tab *t, uint32_t group,
				  uint16_t port);
void qps_mc_prefetch(const struct qps_mc_tab *t, uint32_t group, uint16_t port,
		     int stage);
void qps_mcast_leave_all_locked(struct qps_ep *ep);

#endif /* QPS_DEMUX_H */
