// SPDX-License-Identifier: MIT
/*
 * UD addressing: where a datagram to an IPv4 address goes on a UD context
 * (docs/verbs.md, "Addressing UD endpoints").
 *
 * Peer table: IPv4 -> (QPN, Q_Key) of the peer's receiving QP, set by the
 * application (qps_ud_peer_set) or learned from the UD header of what
 * arrives (qps_ud_learn). A set entry wins: learning never replaces it,
 * so a datagram that names some address as its source cannot redirect
 * traffic the application pinned; learned entries follow the latest
 * datagram. Open addressing over QPS_UD_PEERS entries whose keys, once
 * written, never go back to empty (a forgotten entry keeps its key with
 * value 0 and is reused by the next new address on its probe path), so
 * readers probe without a lock: the receive path checks its sender in the
 * steady state without taking the table's mutex. Writers hold ud->lock
 * and bump ud->peer_gen after each change.
 *
 * AH cache: IPv4 -> the AH made for it (create_ah once per destination),
 * context-wide under ud->ah_lock, reached only on a miss of the calling
 * send queue's direct-mapped cache, which holds (AH, QPN, Q_Key) while the
 * route generation and the peer generation it was filled under hold. An
 * AH made under an older route generation is replaced (its next hop may
 * have moved) and retired.
 *
 * Retiring is by reference count: the context cache, every send-queue
 * cache entry and every send slot whose WR names an AH hold a reference
 * on it. A slot's reference moves only when the slot is written for a new
 * datagram, which happens after its previous WR completed, so an AH whose
 * count reaches zero is named by no WR the device may still read, and is
 * destroyed then. Retired AHs are therefore bounded by the send slots and
 * cache entries (nsq * (tx_depth + QPS_UD_SQ_SLOTS)); what is left at
 * qps_ud_fini, after the QPs are gone, is destroyed there.
 */
#define _GNU_SOURCE	/* strerrordesc_np: strerror is not thread safe */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sq.h"
#include "ud.h"

#define QPS_UD_PEERS 4096	/* peer table entries, a power of two */
#define QPS_UD_AHS 8192		/* AH cache entries (destinations) */
#define QPS_UD_SQ_SLOTS 64	/* per send queue, direct mapped */

/* A peer's value word: Q_Key << 32 | flags | QPN; 0 = no peer. SET:
 * from qps_ud_peer_set, which learning leaves alone. */
#define QPS_UD_PV_SET (1ull << 24)
#define QPS_UD_PV_LEARNED (1ull << 25)

struct qps_ud_peer {
	uint32_t addr;		/* atomic: 0 = never used, else fixed */
	uint64_t val;		/* atomic: see QPS_UD_PV_* */
};

/* One address handle and who holds it (see the top of the file). */
struct qps_ud_ah {
	struct qps_ah *ah;
	uint64_t gen;		/* route generation it was made under */
	uint32_t addr;
	uint32_t refs;		/* atomic */
	/* Every AH alive, retired or not, under ah_lock. */
	struct qps_ud_ah *prev, *next;
};

struct qps_ud_ah_slot {
	uint32_t addr;		/* 0 = free; a key stays once written */
	struct qps_ud_ah *ah;	/* holds the cache's reference, or NULL */
};

/* A send queue's cached destination; holds a reference on @ah. */
struct qps_ud_cslot {
	uint32_t daddr;
	uint32_t qpn;
	uint32_t qkey;
	uint64_t rgen;		/* route generation it was filled under */
	uint64_t pgen;		/* peer generation it was filled under */
	struct qps_ud_ah *ah;	/* NULL: empty */
};

/* Per send queue, under that queue's lock; the two counters are written
 * so (qps_ud_count) and read without it by qps_ud_stats, which runs on
 * the counter publisher's thread too. */
struct qps_ud_sq {
	struct qps_ud_cslot c[QPS_UD_SQ_SLOTS];
	struct qps_ud_ah **slot_ah;	/* per slot: the AH its WR names */
	uint64_t ah_reused;
	uint64_t tx_no_peer;
} __attribute__((aligned(QPS_CACHELINE)));

struct qps_ud {
	struct qps_ctx *ctx;
	pthread_mutex_t lock;		/* peer table writers */
	struct qps_ud_peer *peers;
	uint64_t peer_gen;		/* atomic: moves after each change */
	pthread_mutex_t ah_lock;	/* AH cache, AH list, destroys */
	struct qps_ud_ah_slot *ahs;
	struct qps_ud_ah *all;
	struct qps_ud_sq *sq;		/* ctx->nsq */
	uint8_t sgid_index;		/* our ::ffff:addr in the GID table */
	/* Atomic (relaxed): counters only, read by qps_ud_stats. */
	uint64_t ah_created;
	uint64_t ah_live;
	uint64_t peers_learned;
	uint64_t no_peer;		/* connect's checks */
};

/* One writer (the queue's lock holder), readers without the lock. */
static void qps_ud_count(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

static uint32_t qps_ud_hash(uint32_t addr)
{
	uint32_t h = ntohl(addr);

	/* Hosts of one subnet differ in the low bits: keep them, mix in
	 * the rest. */
	return h ^ (h >> 12) ^ (h >> 20);
}

/* Unicast: neither zero, multicast, nor broadcast. */
static bool qps_ud_unicast(uint32_t addr)
{
	uint32_t h = ntohl(addr);

	return h != INADDR_ANY && h != INADDR_BROADCAST && !IN_MULTICAST(h);
}

/* --- peer table --------------------------------------------------------- */

/* The entry of @addr, or NULL; no lock. */
static struct qps_ud_peer *qps_ud_peer_find(struct qps_ud *ud, uint32_t addr)
{
	uint32_t i = qps_ud_hash(addr), n;

	for (n = 0; n < QPS_UD_PEERS; n++, i++) {
		struct qps_ud_peer *p = &ud->peers[i & (QPS_UD_PEERS - 1)];
		/* Acquire: pairs with the release in qps_ud_peer_slot(); a
		 * key seen is one whose value is 0 or what was stored
		 * after it, never the previous key's. */
		uint32_t a = __atomic_load_n(&p->addr, __ATOMIC_ACQUIRE);

		if (a == addr)
			return p;
		if (!a)
			return NULL;
	}
	return NULL;
}

/* The entry of @addr, made if @add (ud->lock held): an unused one or a
 * forgotten one on its probe path. NULL: absent (or the table is full). */
static struct qps_ud_peer *qps_ud_peer_slot(struct qps_ud *ud, uint32_t addr,
					    bool add)
{
	struct qps_ud_peer *reuse = NULL, *p = NULL;
	uint32_t i = qps_ud_hash(addr), n;

	for (n = 0; n < QPS_UD_PEERS; n++, i++) {
		p = &ud->peers[i & (QPS_UD_PEERS - 1)];
		if (p->addr == addr)
			return p;
		if (!p->addr)
			break;
		if (!reuse && !p->val)
			reuse = p;
		p = NULL;
	}
	if (!add)
		return NULL;
	if (reuse)
		p = reuse;
	if (!p)
		return NULL;
	/* Value 0 already (unused or forgotten): readers that see the new
	 * key find no peer until the value follows. Release: pairs with the
	 * acquire in qps_ud_peer_find(). */
	__atomic_store_n(&p->addr, addr, __ATOMIC_RELEASE);
	return p;
}

/* ud->lock held: publish @val for @p, then move the generation. */
static void qps_ud_peer_store(struct qps_ud *ud, struct qps_ud_peer *p,
			      uint64_t val)
{
	__atomic_store_n(&p->val, val, __ATOMIC_RELAXED);
	/* Release: pairs with the acquire in qps_ud_dest_get(); a send queue
	 * that sees the new generation reads this value or a newer one. */
	__atomic_fetch_add(&ud->peer_gen, 1, __ATOMIC_RELEASE);
}

/* QPN and Q_Key for @daddr: the peer table, or the multicast QPN. */
static int qps_ud_peer_of(struct qps_ud *ud, uint32_t daddr, uint32_t *qpn,
			  uint32_t *qkey)
{
	const struct qps_ud_peer *p;
	uint64_t v;

	if (IN_MULTICAST(ntohl(daddr))) {
		*qpn = QPS_UD_MCAST_QPN;
		*qkey = QPS_UD_QKEY;
		return 0;
	}
	if (!qps_ud_unicast(daddr))
		return -EHOSTUNREACH;	/* UD has no broadcast */
	p = qps_ud_peer_find(ud, daddr);
	v = p ? __atomic_load_n(&p->val, __ATOMIC_RELAXED) : 0;
	if (!v)
		return -EHOSTUNREACH;
	*qpn = (uint32_t)v & QPS_UD_QPN_MASK;
	*qkey = (uint32_t)(v >> 32);
	return 0;
}

int qps_ud_peer_known(struct qps_ctx *ctx, uint32_t daddr)
{
	uint32_t qpn, qkey;
	int ret = qps_ud_peer_of(ctx->ud, daddr, &qpn, &qkey);

	if (ret < 0)
		__atomic_fetch_add(&ctx->ud->no_peer, 1, __ATOMIC_RELAXED);
	return ret;
}

void qps_ud_learn(struct qps_ctx *ctx, uint32_t saddr, uint32_t qpn)
{
	struct qps_ud *ud = ctx->ud;
	struct qps_ud_peer *p;
	uint64_t v, want;

	if (!ud || !qpn || qpn >= QPS_UD_MCAST_QPN || !qps_ud_unicast(saddr))
		return;
	want = (uint64_t)QPS_UD_QKEY << 32 | QPS_UD_PV_LEARNED | qpn;
	/* The steady state: known already, or pinned by the application. */
	p = qps_ud_peer_find(ud, saddr);
	v = p ? __atomic_load_n(&p->val, __ATOMIC_RELAXED) : 0;
	if (v == want || (v & QPS_UD_PV_SET))
		return;

	pthread_mutex_lock(&ud->lock);
	p = qps_ud_peer_slot(ud, saddr, true);
	if (!p) {
		pthread_mutex_unlock(&ud->lock);
		qps_log_dbg("UD peer table full (%u entries): not learning "
			    "a sender", QPS_UD_PEERS);
		return;
	}
	v = p->val;
	if (v != want && !(v & QPS_UD_PV_SET)) {
		qps_ud_peer_store(ud, p, want);
		__atomic_fetch_add(&ud->peers_learned, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&ud->lock);
}

int qps_ud_peer_set(struct qps_ctx *ctx, const struct qps_ud_addr *peer)
{
	QPS_ERRNO_GUARD;
	struct qps_ud_peer *p;
	struct qps_ud *ud;
	uint32_t addr;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (!peer)
		return -EFAULT;
	ud = ctx->ud;
	if (!ud)
		return -EOPNOTSUPP;
	addr = peer->addr.s_addr;
	/* 0xffffff is the multicast QPN, no unicast peer's. */
	if (peer->qpn >= QPS_UD_MCAST_QPN || !qps_ud_unicast(addr))
		return -EINVAL;

	pthread_mutex_lock(&ud->lock);
	p = qps_ud_peer_slot(ud, addr, peer->qpn != 0);
	if (!p) {
		ret = peer->qpn ? -ENOSPC : 0;
	} else if (!peer->qpn) {
		if (p->val)
			qps_ud_peer_store(ud, p, 0);
	} else {
		qps_ud_peer_store(ud, p, (uint64_t)(peer->qkey ? peer->qkey :
						    QPS_UD_QKEY) << 32 |
				  QPS_UD_PV_SET | peer->qpn);
	}
	pthread_mutex_unlock(&ud->lock);
	return ret;
}

int qps_ud_local(struct qps_ctx *ctx, struct qps_ud_addr *out)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (!out)
		return -EFAULT;
	if (!ctx->ud)
		return -EOPNOTSUPP;
	memset(out, 0, sizeof(*out));
	out->addr = ctx->info.addr;
	out->qpn = ctx->qp->qp_num;
	out->qkey = QPS_UD_QKEY;
	return 0;
}

/* --- address handles ---------------------------------------------------- */

static void qps_ud_ah_hold(struct qps_ud_ah *a)
{
	/* Relaxed: the caller holds a reference already (a cache entry or
	 * the context cache under ah_lock), so the AH cannot go meanwhile. */
	__atomic_fetch_add(&a->refs, 1, __ATOMIC_RELAXED);
}

/* ah_lock held: unlink and destroy @a. */
static void qps_ud_ah_destroy_locked(struct qps_ud *ud, struct qps_ud_ah *a)
{
	int ret;

	if (a->prev)
		a->prev->next = a->next;
	else
		ud->all = a->next;
	if (a->next)
		a->next->prev = a->prev;
	ret = ud->ctx->ops->destroy_ah(a->ah);
	if (ret < 0)
		qps_log_err("UD: destroying the address handle of a peer: %s",
			    strerrordesc_np(-ret));
	free(a);
	__atomic_fetch_sub(&ud->ah_live, 1, __ATOMIC_RELAXED);
}

/* Drop a reference; the last one destroys the AH. @locked: ah_lock held. */
static void qps_ud_ah_put(struct qps_ud *ud, struct qps_ud_ah *a, bool locked)
{
	/* Release: this holder's uses (a WR that named it has completed)
	 * come before the destroy; acquire for the one that destroys. */
	if (__atomic_fetch_sub(&a->refs, 1, __ATOMIC_ACQ_REL) != 1)
		return;
	if (!locked)
		pthread_mutex_lock(&ud->ah_lock);
	qps_ud_ah_destroy_locked(ud, a);
	if (!locked)
		pthread_mutex_unlock(&ud->ah_lock);
}

/* ah_lock held: a new AH for @addr, with @refs references. */
static int qps_ud_ah_create_locked(struct qps_ud *ud, uint32_t addr,
				   uint64_t gen, uint32_t refs,
				   struct qps_ud_ah **out)
{
	struct ibv_ah_attr attr;
	struct qps_ud_ah *a;
	int ret;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	memset(&attr, 0, sizeof(attr));
	attr.is_global = 1;
	attr.port_num = 0;	/* the context's own port */
	attr.grh.sgid_index = ud->sgid_index;
	attr.grh.hop_limit = QPS_UD_HOP_LIMIT;
	attr.grh.dgid.raw[10] = 0xff;
	attr.grh.dgid.raw[11] = 0xff;
	memcpy(&attr.grh.dgid.raw[12], &addr, 4);
	ret = ud->ctx->ops->create_ah(ud->ctx->dev, &attr, &a->ah);
	if (ret < 0) {
		free(a);
		return ret;
	}
	a->gen = gen;
	a->addr = addr;
	a->refs = refs;
	a->next = ud->all;
	if (a->next)
		a->next->prev = a;
	ud->all = a;
	__atomic_fetch_add(&ud->ah_created, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ud->ah_live, 1, __ATOMIC_RELAXED);
	*out = a;
	return 0;
}

/*
 * The AH for @addr under route generation @gen, with a reference for the
 * caller: the cached one, or (none, or made under an older generation) a
 * new one that replaces it. *@how: 0 reused, 1 created; NULL and -errno
 * in *@how on failure.
 */
static struct qps_ud_ah *qps_ud_ah_get(struct qps_ud *ud, uint32_t addr,
				       uint64_t gen, int *how)
{
	struct qps_ud_ah_slot *s = NULL;
	struct qps_ud_ah *a = NULL;
	uint32_t i = qps_ud_hash(addr), n;

	pthread_mutex_lock(&ud->ah_lock);
	for (n = 0; n < QPS_UD_AHS; n++, i++) {
		s = &ud->ahs[i & (QPS_UD_AHS - 1)];
		if (s->addr == addr || !s->addr)
			break;
		s = NULL;
	}
	if (!s) {
		pthread_mutex_unlock(&ud->ah_lock);
		qps_log_dbg("UD: address handle cache full (%u destinations)",
			    QPS_UD_AHS);
		*how = -ENOSPC;
		return NULL;
	}
	/* A newer generation than ours: another send queue read the route
	 * generation after us; that AH is at least as fresh. */
	if (s->ah && s->ah->gen >= gen) {
		a = s->ah;
		qps_ud_ah_hold(a);
		*how = 0;
	} else {
		/* Two references: the cache's and the caller's. */
		*how = qps_ud_ah_create_locked(ud, addr, gen, 2, &a);
		if (*how == 0) {
			/* Retired: it goes with its last holder. */
			if (s->ah)
				qps_ud_ah_put(ud, s->ah, true);
			s->addr = addr;
			s->ah = a;
			*how = 1;
		} else {
			a = NULL;
		}
	}
	pthread_mutex_unlock(&ud->ah_lock);
	return a;
}

int qps_ud_dest_get(struct qps_sq *sq, uint32_t daddr,
		    struct qps_ud_dest *out)
{
	struct qps_ctx *ctx = sq->ctx;
	struct qps_ud *ud = ctx->ud;
	struct qps_ud_sq *us = &ud->sq[sq->idx];
	struct qps_ud_ah *drop_cache = NULL, *drop_slot = NULL, *cur;
	struct qps_ud_cslot *c;
	uint64_t rgen, pgen;
	size_t slot = (size_t)(out - sq->ud_dest);

	if (out < sq->ud_dest || slot >= ctx->tx_depth)
		return -EINVAL;
	rgen = qps_route_gen(ctx);
	/* Acquire: pairs with the release in qps_ud_peer_store(). Loaded
	 * before the peer: a change after it moves it again, and the next
	 * send looks again. */
	pgen = __atomic_load_n(&ud->peer_gen, __ATOMIC_ACQUIRE);
	c = &us->c[qps_ud_hash(daddr) % QPS_UD_SQ_SLOTS];
	if (c->ah && c->daddr == daddr && c->rgen == rgen && c->pgen == pgen) {
		cur = c->ah;
		qps_ud_count(&us->ah_reused);
	} else {
		uint32_t qpn, qkey;
		int ret = qps_ud_peer_of(ud, daddr, &qpn, &qkey);

		if (ret < 0) {
			qps_ud_count(&us->tx_no_peer);
			return ret;
		}
		cur = qps_ud_ah_get(ud, daddr, rgen, &ret);
		if (!cur)
			return ret;
		if (ret == 0)
			qps_ud_count(&us->ah_reused);
		drop_cache = c->ah;
		*c = (struct qps_ud_cslot){
			.daddr = daddr, .qpn = qpn, .qkey = qkey,
			.rgen = rgen, .pgen = pgen, .ah = cur,
		};
	}
	/* The slot's WR will name @cur: the slot holds it from now on, and
	 * lets go of what its previous, completed WR named. */
	if (us->slot_ah[slot] != cur) {
		qps_ud_ah_hold(cur);
		drop_slot = us->slot_ah[slot];
		us->slot_ah[slot] = cur;
	}
	out->ah = cur->ah->ibv;
	out->daddr = daddr;
	out->qpn = c->qpn;
	out->qkey = c->qkey;
	/* Last: either may have been the last reference of a retired AH. */
	if (drop_cache)
		qps_ud_ah_put(ud, drop_cache, false);
	if (drop_slot)
		qps_ud_ah_put(ud, drop_slot, false);
	return 0;
}

/* --- lifetime and counters ---------------------------------------------- */

void qps_ud_stats(struct qps_ctx *ctx, struct qps_stats *st)
{
	struct qps_ud *ud = ctx->ud;
	uint32_t i;

	if (!ud)
		return;
	st->ud_ah_created = __atomic_load_n(&ud->ah_created, __ATOMIC_RELAXED);
	st->ud_ah_live = __atomic_load_n(&ud->ah_live, __ATOMIC_RELAXED);
	st->ud_peers_learned = __atomic_load_n(&ud->peers_learned,
					       __ATOMIC_RELAXED);
	st->ud_tx_no_peer = __atomic_load_n(&ud->no_peer, __ATOMIC_RELAXED);
	st->ud_ah_reused = 0;
	for (i = 0; i < ctx->nsq; i++) {
		st->ud_ah_reused += __atomic_load_n(&ud->sq[i].ah_reused,
						    __ATOMIC_RELAXED);
		st->ud_tx_no_peer += __atomic_load_n(&ud->sq[i].tx_no_peer,
						     __ATOMIC_RELAXED);
	}
}

/*
 * Where our RoCE v2 GID (::ffff:our address) sits in the port's GID
 * table: index 1 on emu, wherever the kernel put it on a real port (after
 * the RoCE v1 and IPv6 entries, and it moves when addresses change).
 */
#define QPS_UD_GID_SCAN 128

static int qps_ud_find_sgid(struct qps_ctx *ctx, uint8_t *index)
{
	char addr[INET_ADDRSTRLEN];
	union ibv_gid want, gid;
	int i;

	memset(&want, 0, sizeof(want));
	want.raw[10] = 0xff;
	want.raw[11] = 0xff;
	memcpy(&want.raw[12], &ctx->info.addr.s_addr, 4);
	for (i = 0; i < QPS_UD_GID_SCAN; i++) {
		int ret = ctx->ops->query_gid(ctx->dev, i, &gid);

		if (ret == -EINVAL)
			continue;	/* an empty slot, or past the end */
		if (ret < 0)
			return ret;
		if (!memcmp(&gid, &want, sizeof(gid))) {
			*index = (uint8_t)i;
			return 0;
		}
	}
	inet_ntop(AF_INET, &ctx->info.addr, addr, sizeof(addr));
	qps_log_err("UD on %s: no RoCE v2 GID for %s in the port's GID "
		    "table (is the address on the port's netdev?)",
		    ctx->info.name, addr);
	return -EADDRNOTAVAIL;
}

int qps_ud_init(struct qps_ctx *ctx)
{
	struct qps_ud *ud;
	uint32_t i;
	int ret;

	ud = calloc(1, sizeof(*ud));
	if (!ud)
		return -ENOMEM;
	ctx->ud = ud;
	ud->ctx = ctx;
	pthread_mutex_init(&ud->lock, NULL);
	pthread_mutex_init(&ud->ah_lock, NULL);
	ud->peers = calloc(QPS_UD_PEERS, sizeof(*ud->peers));
	ud->ahs = calloc(QPS_UD_AHS, sizeof(*ud->ahs));
	ud->sq = aligned_alloc(QPS_CACHELINE, ctx->nsq * sizeof(*ud->sq));
	/* Zeroed before any return: qps_ud_fini walks ud->sq. */
	if (ud->sq)
		memset(ud->sq, 0, ctx->nsq * sizeof(*ud->sq));
	if (!ud->peers || !ud->ahs || !ud->sq)
		return -ENOMEM;
	for (i = 0; i < ctx->nsq; i++) {
		ud->sq[i].slot_ah = calloc(ctx->tx_depth,
					   sizeof(struct qps_ud_ah *));
		if (!ud->sq[i].slot_ah)
			return -ENOMEM;
	}
	ret = qps_ud_find_sgid(ctx, &ud->sgid_index);
	return ret;
}

void qps_ud_fini(struct qps_ctx *ctx)
{
	struct qps_ud *ud = ctx->ud;
	uint32_t i;

	if (!ud)
		return;
	/* The QPs are gone: no WR names any AH any more, whoever holds it. */
	while (ud->all)
		qps_ud_ah_destroy_locked(ud, ud->all);
	for (i = 0; ud->sq && i < ctx->nsq; i++)
		free(ud->sq[i].slot_ah);
	free(ud->sq);
	free(ud->ahs);
	free(ud->peers);
	pthread_mutex_destroy(&ud->ah_lock);
	pthread_mutex_destroy(&ud->lock);
	free(ud);
	ctx->ud = NULL;
}
