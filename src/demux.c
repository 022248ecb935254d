// SPDX-License-Identifier: MIT
/*
 * Demultiplexing: which endpoint queues get a received datagram, and the
 * bind and 4-tuple tables it reads.
 *
 *   multicast  the (group, port) rule (mcast.c). One subscriber: the early
 *              path, straight to that endpoint; several: fan-out, every
 *              subscriber holding the same receive buffer by reference.
 *   broadcast  every endpoint bound to the port (fan-out).
 *   unicast    the first entry of the 4-tuple bucket: a connected endpoint
 *              found without walking a chain; otherwise the most specific
 *              endpoint bound to the port (which also finds a connected
 *              endpoint that is not first in its bucket).
 *
 * Each valid datagram is counted once: rx_demux_early, _fanout,
 * _connected, _bound, or rx_no_endpoint.
 *
 * The receive path runs this under rx.lock and inside an epoch section,
 * reading the tables without ctl_lock (demux.h); writers below hold
 * ctl_lock. Endpoints never leave the context's slab, and a closed one is
 * reused only after a grace period, so following a stale chain pointer
 * always lands on a valid endpoint.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "demux.h"
#include "endpoint.h"
#include "qps_int.h"
#include "rx.h"

#define QPS_CONN_MIN 64u
#define QPS_CONN_MAX 65536u

uint32_t qps_conn_hash(uint32_t saddr, uint16_t sport, uint16_t dport)
{
	uint32_t h = saddr ^ ((uint32_t)sport << 16 | dport);

	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

int qps_demux_init(struct qps_ctx *ctx)
{
	uint32_t n = QPS_CONN_MIN;

	while (n < ctx->ept.max && n < QPS_CONN_MAX)
		n <<= 1;
	/* An array of pointers: sizeof(*tab) is right (a false positive of
	 * clang-tidy 14). NOLINTNEXTLINE(bugprone-sizeof-expression) */
	ctx->dmx.conn_tab = calloc(n, sizeof(*ctx->dmx.conn_tab));
	if (!ctx->dmx.conn_tab)
		return -ENOMEM;
	ctx->dmx.conn_mask = n - 1;
	return 0;
}

/* Every endpoint is closed by now: the chains are empty. */
void qps_demux_fini(struct qps_ctx *ctx)
{
	free(ctx->dmx.conn_tab);
	ctx->dmx.conn_tab = NULL;
}

/* --- writers, under ctl_lock ------------------------------------- */

static struct qps_ep **qps_bind_bucket(struct qps_ctx *ctx, uint16_t port)
{
	return &ctx->dmx.bind_tab[ntohs(port) % QPS_BIND_BUCKETS];
}

void qps_bind_link_locked(struct qps_ep *ep)
{
	struct qps_ep **b = qps_bind_bucket(ep->ctx, ep->local.sin_port);

	ep->bind_next = *b;
	/* Release (seq-cst): ep->local is set before readers find @ep. */
	QPS_RCU_STORE(*b, ep);
}

void qps_bind_unlink_locked(struct qps_ep *ep)
{
	struct qps_ep **pp = qps_bind_bucket(ep->ctx, ep->local.sin_port);

	for (; *pp; pp = &(*pp)->bind_next) {
		if (*pp == ep) {
			/* ep->bind_next stays: a reader standing on @ep
			 * still reaches the rest of the chain. */
			QPS_RCU_STORE(*pp, ep->bind_next);
			return;
		}
	}
}

/* Writers hold ctl_lock; the receive path reads it as a hint only:
 * whatever it reads, the bound lookup finds a connected endpoint too. */
static void qps_conn_count(struct qps_ctx *ctx, int d)
{
	__atomic_store_n(&ctx->dmx.nconn, ctx->dmx.nconn + (uint32_t)d,
			 __ATOMIC_RELAXED);
}

static void qps_conn_unlink(struct qps_ctx *ctx, struct qps_conn *c)
{
	struct qps_conn **pp;

	pp = &ctx->dmx.conn_tab[qps_conn_hash(c->saddr, c->sport, c->dport) &
				ctx->dmx.conn_mask];
	for (; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			QPS_RCU_STORE(*pp, c->next);
			qps_conn_count(ctx, -1);
			return;
		}
	}
}

int qps_conn_set_locked(struct qps_ep *ep, uint32_t peer, uint16_t pport)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_conn *c, *old = ep->conn, **b;

	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->saddr = peer;
	c->sport = pport;
	c->dport = ep->local.sin_port;
	c->daddr = ep->local.sin_addr.s_addr;
	c->ep = ep;
	b = &ctx->dmx.conn_tab[qps_conn_hash(peer, pport, c->dport) &
			       ctx->dmx.conn_mask];
	c->next = *b;
	/* The newest connection goes first: it is the one the fast path
	 * sees. Release (seq-cst): @c is complete before it is found. */
	QPS_RCU_STORE(*b, c);
	qps_conn_count(ctx, 1);
	QPS_RCU_STORE(ep->conn, c);
	if (old) {
		qps_conn_unlink(ctx, old);
		qps_retire(ctx, old);
	}
	return 0;
}

void qps_conn_clear_locked(struct qps_ep *ep)
{
	struct qps_conn *c = ep->conn;

	if (!c)
		return;
	QPS_RCU_STORE(ep->conn, NULL);
	qps_conn_unlink(ep->ctx, c);
	qps_retire(ep->ctx, c);
}

/* --- the receive path, inside an epoch section ------------------- */

static inline struct qps_ep *qps_bind_head(struct qps_ctx *ctx,
					   uint16_t port)
{
	/* Pairs with QPS_RCU_STORE in qps_bind_(un)link_locked. */
	return QPS_RCU_LOAD(ctx->dmx.bind_tab[ntohs(port) % QPS_BIND_BUCKETS]);
}

struct qps_ep *qps_bind_first(struct qps_ctx *ctx, uint16_t port)
{
	return qps_bind_head(ctx, port);
}

/* How well a bound endpoint matches: -1 no, else higher is more specific. */
static inline __attribute__((always_inline)) int
qps_bound_score(const struct qps_ep *ep, const struct qps_frame_hdr *h)
{
	const struct qps_conn *c;
	int score = 0;

	if (ep->local.sin_port != h->dport)
		return -1;
	if (ep->local.sin_addr.s_addr != INADDR_ANY) {
		if (ep->local.sin_addr.s_addr != h->daddr)
			return -1;
		score++;
	}
	/* Pairs with QPS_RCU_STORE in qps_conn_set/clear_locked. */
	c = QPS_RCU_LOAD(ep->conn);
	if (c) {
		if (c->saddr != h->saddr || c->sport != h->sport)
			return -1;
		score += 2;
	}
	return score;
}

/* A subscriber takes the datagram unless its source filter (the sources
 * it joined, or those its any-source membership excludes) or its
 * connected peer says otherwise. @i indexes the first of the subscriber's
 * memberships and is left past its last (they are adjacent, demux.h). */
static bool qps_mc_accept(const struct qps_mc_rule *r, uint32_t *i,
			  const struct qps_frame_hdr *h)
{
	const struct qps_ep *ep = r->s[*i].ep;
	const struct qps_conn *c;
	bool src_ok = false, blocked = false;

	for (; *i < r->n && r->s[*i].ep == ep; (*i)++) {
		const struct qps_mc_sub *m = &r->s[*i];

		if (m->block)
			blocked |= m->source == h->saddr;
		else
			src_ok |= m->source == INADDR_ANY ||
				  m->source == h->saddr;
	}
	if (!src_ok || blocked)
		return false;
	c = QPS_RCU_LOAD(ep->conn);
	return !c || (c->saddr == h->saddr && c->sport == h->sport);
}

static void qps_demux_mcast(struct qps_ctx *ctx, uint32_t buf,
			    const struct qps_frame_info *fi, uint64_t *ts)
{
	const struct qps_mc_rule *r;
	uint32_t i = 0, hit = 0, queued = 0;

	if ((ctx->info.caps & QPS_DEV_CAP_MC_LOOP) &&
	    qps_mc_loop_off(ctx, &fi->hdr)) {
		ctx->st->rx_mc_loop_off++;
		ctx->st->rx_no_endpoint++;
		return;
	}

	/* Pairs with QPS_RCU_STORE of ctx->dmx.mc_tab (mcast.c). */
	r = qps_mc_lookup(QPS_RCU_LOAD(ctx->dmx.mc_tab), fi->hdr.daddr,
			  fi->hdr.dport);
	if (!r) {
		ctx->st->rx_no_endpoint++;
		return;
	}
	if (r->neps == 1) {
		/* Early demux: the rule carries its only subscriber. */
		if (qps_mc_accept(r, &i, &fi->hdr)) {
			qps_rxq_push_locked(r->s[0].ep, buf, fi, ts);
			ctx->st->rx_demux_early++;
		} else {
			ctx->st->rx_mc_filtered++;
			r->s[0].ep->sb->rx_filtered++;
			ctx->st->rx_no_endpoint++;
		}
		return;
	}
	while (i < r->n) {
		struct qps_ep *ep = r->s[i].ep;

		if (!qps_mc_accept(r, &i, &fi->hdr)) {
			ctx->st->rx_mc_filtered++;
			ep->sb->rx_filtered++;
			continue;
		}
		hit++;
		queued += qps_rxq_push_locked(ep, buf, fi, ts);
	}
	if (hit) {
		ctx->st->rx_demux_fanout++;
		ctx->st->rx_fanout_deliveries += queued;
	} else {
		ctx->st->rx_no_endpoint++;
	}
}

static void qps_demux_bcast(struct qps_ctx *ctx, uint32_t buf,
			    const struct qps_frame_info *fi, uint64_t *ts)
{
	struct qps_ep *ep = qps_bind_head(ctx, fi->hdr.dport);
	uint32_t hit = 0, queued = 0;

	/* Pairs with QPS_RCU_STORE in qps_bind_(un)link_locked. */
	for (; ep; ep = QPS_RCU_LOAD(ep->bind_next)) {
		if (qps_bound_score(ep, &fi->hdr) < 0)
			continue;
		hit++;
		queued += qps_rxq_push_locked(ep, buf, fi, ts);
	}
	if (hit) {
		ctx->st->rx_demux_fanout++;
		ctx->st->rx_fanout_deliveries += queued;
	} else {
		ctx->st->rx_no_endpoint++;
	}
}

static void qps_demux_ucast(struct qps_ctx *ctx, uint32_t buf,
			    const struct qps_frame_info *fi, uint32_t key,
			    uint64_t *ts)
{
	const struct qps_frame_hdr *h = &fi->hdr;
	const struct qps_conn *c;
	struct qps_ep *ep, *best = NULL;
	int best_s = -1;

	/* Only the bucket's first entry: no chain walk on the fast path.
	 * Pairs with QPS_RCU_STORE in qps_conn_set_locked/_unlink. With no
	 * connection at all there is no bucket to look at (the hint may be
	 * stale: the bound lookup below finds a connected endpoint too). */
	c = !__atomic_load_n(&ctx->dmx.nconn, __ATOMIC_RELAXED) ? NULL :
		QPS_RCU_LOAD(ctx->dmx.conn_tab[key & ctx->dmx.conn_mask]);
	if (c && c->saddr == h->saddr && c->sport == h->sport &&
	    c->dport == h->dport &&
	    (c->daddr == INADDR_ANY || c->daddr == h->daddr)) {
		qps_rxq_push_locked(c->ep, buf, fi, ts);
		ctx->st->rx_demux_connected++;
		return;
	}
	ep = qps_bind_head(ctx, h->dport);
	for (; ep; ep = QPS_RCU_LOAD(ep->bind_next)) {
		int s = qps_bound_score(ep, h);

		if (s > best_s) {
			best = ep;
			best_s = s;
		}
	}
	if (!best) {
		ctx->st->rx_no_endpoint++;
		return;
	}
	qps_rxq_push_locked(best, buf, fi, ts);
	ctx->st->rx_demux_bound++;
}

uint32_t qps_demux_key(const struct qps_frame_info *fi)
{
	const struct qps_frame_hdr *h = &fi->hdr;
	uint32_t daddr = ntohl(h->daddr);

	if (IN_MULTICAST(daddr) || daddr == INADDR_BROADCAST)
		return 0;
	return qps_conn_hash(h->saddr, h->sport, h->dport);
}

bool qps_demux_keyed(const struct qps_ctx *ctx)
{
	return __atomic_load_n(&ctx->dmx.nconn, __ATOMIC_RELAXED) != 0;
}

/* Entries (connections and rules) that a hot poller keeps in cache
 * anyway: their table slots and objects take a few KiB. */
#define QPS_DEMUX_PF_MIN 64u

bool qps_demux_prefetching(const struct qps_ctx *ctx)
{
	return __atomic_load_n(&ctx->dmx.nconn, __ATOMIC_RELAXED) +
		       __atomic_load_n(&ctx->dmx.mc_nrules,
				       __ATOMIC_RELAXED) > QPS_DEMUX_PF_MIN;
}

void qps_demux_prefetch(struct qps_ctx *ctx, const struct qps_frame_info *fi,
			uint32_t key, int stage)
{
	const struct qps_frame_hdr *h = &fi->hdr;
	uint32_t daddr = ntohl(h->daddr);
	struct qps_conn *const *b;
	const struct qps_conn *c;

	if (IN_MULTICAST(daddr)) {
		qps_mc_prefetch(QPS_RCU_LOAD(ctx->dmx.mc_tab), h->daddr,
				h->dport, stage);
		return;
	}
	if (daddr == INADDR_BROADCAST)
		return;
	b = &ctx->dmx.conn_tab[key & ctx->dmx.conn_mask];
	if (stage == 0) {
		__builtin_prefetch(b);
		return;
	}
	c = QPS_RCU_LOAD(*b);
	if (c)
		__builtin_prefetch(c);
}

/* Limited broadcast, or a directed (subnet) broadcast: a frame to the
 * Ethernet broadcast address that is not addressed to us. */
static bool qps_is_bcast(const struct qps_ctx *ctx,
			 const struct qps_frame_hdr *h)
{
	static const uint8_t ff[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	if (h->daddr == htonl(INADDR_BROADCAST))
		return true;
	return h->daddr != ctx->info.addr.s_addr &&
	       !memcmp(h->dst_mac, ff, sizeof(ff));
}

void qps_demux(struct qps_ctx *ctx, uint32_t buf,
	       const struct qps_frame_info *fi, uint32_t key)
{
	uint32_t daddr = ntohl(fi->hdr.daddr);
	uint64_t ts = 0;	/* read from the clock once, if anyone asks */

	if (IN_MULTICAST(daddr))
		qps_demux_mcast(ctx, buf, fi, &ts);
	else if (qps_is_bcast(ctx, &fi->hdr))
		qps_demux_bcast(ctx, buf, fi, &ts);
	else
		qps_demux_ucast(ctx, buf, fi, key, &ts);
}
