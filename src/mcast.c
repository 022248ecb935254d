// SPDX-License-Identifier: MIT
/*
 * Multicast membership: qps_join(), qps_leave(), qps_setfilter() and
 * qps_getfilter(), and one steering rule
 * on the device per joined (group, UDP port), shared by every endpoint of
 * the context that joined it and removed by the last leave.
 *
 * The device rule (ETH dst = the group's MAC, IPv4 dst = group, UDP dst =
 * port) steers into the context's receive QP. A ConnectX-3 CQE cannot say
 * which rule matched (mlx4 has no flow tag), so the receive path finds the
 * rule again from the header it has parsed anyway, with one probe of the
 * table below; the rule then carries its subscribers, and a rule with one
 * subscriber is the early-demux path (demux.c, docs/architecture.md).
 *
 * Source-specific joins filter in software: one rule serves endpoints with
 * different source lists, so it matches every source. So do the sources an
 * any-source membership excludes (qps_setfilter): entries of the rule
 * marked block, dropped with that membership.
 *
 * Only a datagram's first fragment carries its UDP port, so the port rule
 * misses the rest of a group datagram above the MTU. Where a rule costs
 * the host nothing (QPS_DEV_CAP_MC_GROUP_RULE), each joined group also
 * has one rule on its address alone, weaker than the port rules, made
 * with the group's first (group, port) entry and removed with its last:
 * the later fragments reach the reassembly, and the whole datagram is
 * demultiplexed by port like any other. It steers the group's other ports
 * too; the receive path drops those as rx_no_endpoint.
 *
 * On the UD transport there are no steering rules: a datagram to a group
 * reaches every QP attached to the group's GID, so the device object is
 * the group's attachment (ud_mcast.c), made for the first (group, port)
 * entry of a group and removed with its last; the table below is the same
 * and still finds the subscribers by (group, port). The counters follow
 * the device objects: mc_rules and mc_rules_created count groups attached
 * on UD, steering rules (port and group ones) on the raw path;
 * mc_rule_refs counts memberships on both.
 *
 * Writers hold ctx->ctl_lock. The table and each rule version are read by
 * the receive path without it, and freed after a grace period (demux.h).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "demux.h"
#include "endpoint.h"
#include "qps_int.h"
#include "rx.h"
#include "ud.h"

#define QPS_MC_TAB_MIN 64u

/* The groups with a device object of their own (UD: the attachment of
 * the receiving QP; raw: the group's address rule), each with the number
 * of table entries (ports) using it. Writers only, under ctl_lock; a
 * short array, as a device holds few groups and joins are rare. */
struct qps_mc_group {
	uint32_t group;
	uint32_t refs;
	struct qps_flow *flow;		/* raw path; NULL on UD */
};

struct qps_mc_groups {
	uint32_t n;
	uint32_t cap;
	struct qps_mc_group g[];
};

static uint32_t qps_mc_hash(uint32_t group, uint16_t port)
{
	uint32_t h = group ^ ((uint32_t)port << 16 | port);

	/* Avalanche so that groups differing in one byte spread out. */
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* Receive path (any thread inside an epoch section) and writers. The
 * table always has a NULL slot (load <= 1/2), so the probe ends. */
struct qps_mc_rule *qps_mc_lookup(const struct qps_mc_tab *t, uint32_t group,
				  uint16_t port)
{
	uint32_t i = qps_mc_hash(group, port) & t->mask;

	for (;; i = (i + 1) & t->mask) {
		/* Pairs with QPS_RCU_STORE of the slot by a writer. */
		struct qps_mc_rule *r = QPS_RCU_LOAD(t->slot[i]);

		if (!r)
			return NULL;
		if (r != QPS_MC_TOMB && r->group == group && r->port == port)
			return r;
	}
}

void qps_mc_prefetch(const struct qps_mc_tab *t, uint32_t group, uint16_t port,
		     int stage)
{
	struct qps_mc_rule *const *slot;
	struct qps_mc_rule *r;

	slot = &t->slot[qps_mc_hash(group, port) & t->mask];
	if (stage == 0) {
		__builtin_prefetch(slot);
		return;
	}
	r = QPS_RCU_LOAD(*slot);
	if (r && r != QPS_MC_TOMB)
		__builtin_prefetch(r);
}

static struct qps_mc_tab *qps_mc_tab_new(uint32_t nslots)
{
	struct qps_mc_tab *t;

	/* slot[] holds pointers: sizeof(slot[0]) is right (a false positive
	 * of clang-tidy 14). NOLINTNEXTLINE(bugprone-sizeof-expression) */
	t = calloc(1, sizeof(*t) + (size_t)nslots * sizeof(t->slot[0]));
	if (t)
		t->mask = nslots - 1;
	return t;
}

/* Writers: the slot index holding (group, port), or -1. */
static int64_t qps_mc_find(const struct qps_mc_tab *t, uint32_t group,
			   uint16_t port)
{
	uint32_t i = qps_mc_hash(group, port) & t->mask;

	for (;; i = (i + 1) & t->mask) {
		const struct qps_mc_rule *r = t->slot[i];

		if (!r)
			return -1;
		if (r != QPS_MC_TOMB && r->group == group && r->port == port)
			return i;
	}
}

static void qps_mc_tab_put(struct qps_mc_tab *t, struct qps_mc_rule *r)
{
	uint32_t i = qps_mc_hash(r->group, r->port) & t->mask;

	while (t->slot[i] && t->slot[i] != QPS_MC_TOMB)
		i = (i + 1) & t->mask;
	if (t->slot[i] == QPS_MC_TOMB)
		t->tombs--;
	t->live++;
	/* Release (seq-cst): @r is complete before a reader can see it. */
	QPS_RCU_STORE(t->slot[i], r);
}

/* Room for one more rule; rebuilds (and republishes) when live rules plus
 * tombstones would pass half the slots. */
static int qps_mc_tab_reserve(struct qps_ctx *ctx)
{
	struct qps_mc_tab *t = ctx->dmx.mc_tab, *nt;
	uint32_t n = QPS_MC_TAB_MIN, i;

	if ((t->live + t->tombs + 1) * 2 <= t->mask + 1)
		return 0;
	while (n < (t->live + 1) * 4)
		n <<= 1;
	nt = qps_mc_tab_new(n);
	if (!nt)
		return -ENOMEM;
	for (i = 0; i <= t->mask; i++)
		if (t->slot[i] && t->slot[i] != QPS_MC_TOMB)
			qps_mc_tab_put(nt, t->slot[i]);
	/* Readers move to @nt; those still probing @t see the same rules. */
	QPS_RCU_STORE(ctx->dmx.mc_tab, nt);
	qps_retire(ctx, t);
	return 0;
}

static struct qps_mc_rule *qps_mc_rule_new(uint32_t n)
{
	size_t len = sizeof(struct qps_mc_rule) + n * sizeof(struct qps_mc_sub);
	struct qps_mc_rule *r;

	len = (len + QPS_CACHELINE - 1) & ~(size_t)(QPS_CACHELINE - 1);
	r = aligned_alloc(QPS_CACHELINE, len);
	if (r)
		memset(r, 0, len);
	return r;
}

/* @port 0: the group's address rule, below the port rules. */
static int qps_mc_flow_create(struct qps_ctx *ctx, uint32_t group,
			      uint16_t port, struct qps_flow **flow)
{
	uint8_t buf[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	struct qps_flow_match m;

	memset(&m, 0, sizeof(m));
	qps_mcast_mac(group, m.dst_mac);
	m.match_mac = true;
	m.dst_ip = group;
	m.dst_port = port;
	m.priority = port ? 1 : 2;
	m.type = IBV_FLOW_ATTR_NORMAL;
	return ctx->ops->create_flow(ctx->qp, qps_flow_attr_build(buf, &m),
				     flow);
}

static struct qps_mc_group *qps_mc_group_find(struct qps_ctx *ctx,
					       uint32_t group)
{
	struct qps_mc_groups *gs = ctx->dmx.mc_groups;
	uint32_t i;

	for (i = 0; gs && i < gs->n; i++)
		if (gs->g[i].group == group)
			return &gs->g[i];
	return NULL;
}

/* Whether a group has a device object of its own: see the top. */
static bool qps_mc_group_obj(const struct qps_ctx *ctx)
{
	return ctx->ud || (ctx->info.caps & QPS_DEV_CAP_MC_GROUP_RULE);
}

/* A reference on @group's device object; 1 when this one made it. */
static int qps_mc_group_get(struct qps_ctx *ctx, uint32_t group)
{
	struct qps_mc_groups *gs = ctx->dmx.mc_groups;
	struct qps_mc_group *e = qps_mc_group_find(ctx, group);
	struct qps_flow *flow = NULL;
	int ret;

	if (e) {
		e->refs++;
		return 0;
	}
	if (!gs || gs->n == gs->cap) {
		uint32_t cap = gs ? gs->cap * 2 : 8;
		/* On failure the old array stays in ctx->dmx.mc_groups. */
		struct qps_mc_groups *ng =
			realloc(gs, sizeof(*ng) + cap * sizeof(ng->g[0]));

		if (!ng)
			return -ENOMEM;
		if (!gs)
			ng->n = 0;
		ng->cap = cap;
		ctx->dmx.mc_groups = gs = ng;
	}
	if (ctx->ud)
		ret = qps_ud_group_attach(ctx, group);
	else
		ret = qps_mc_flow_create(ctx, group, 0, &flow);
	if (ret < 0)
		return ret;
	gs->g[gs->n].group = group;
	gs->g[gs->n].refs = 1;
	gs->g[gs->n].flow = flow;
	gs->n++;
	return 1;
}

/* Drop a reference; 1 when it was the last and the object went. */
static int qps_mc_group_put(struct qps_ctx *ctx, uint32_t group)
{
	struct qps_mc_groups *gs = ctx->dmx.mc_groups;
	struct qps_mc_group *e = qps_mc_group_find(ctx, group);
	struct qps_flow *flow;

	if (!e || --e->refs)
		return 0;
	flow = e->flow;
	*e = gs->g[--gs->n];
	/* Nothing to undo on failure: the entry is gone either way, and
	 * a group left attached only costs the device filter room. */
	if (ctx->ud)
		qps_ud_group_detach(ctx, group);
	else
		ctx->ops->destroy_flow(flow);
	return 1;
}

/* The device objects behind a new (group, port) entry: its steering rule
 * and a reference on the group's own object (UD: the attachment only).
 * Returns how many device objects were made. */
static int qps_mc_dev_add(struct qps_ctx *ctx, struct qps_mc_rule *r)
{
	int ret, made = 0;

	r->flow = NULL;
	if (!ctx->ud) {
		ret = qps_mc_flow_create(ctx, r->group, r->port, &r->flow);
		if (ret < 0)
			return ret;
		made = 1;
	}
	if (!qps_mc_group_obj(ctx))
		return made;
	ret = qps_mc_group_get(ctx, r->group);
	if (ret < 0 && r->flow) {
		ctx->ops->destroy_flow(r->flow);
		r->flow = NULL;
	}
	return ret < 0 ? ret : made + ret;
}

/* Undo qps_mc_dev_add; returns how many device objects went. */
static int qps_mc_dev_del(struct qps_ctx *ctx, struct qps_mc_rule *r)
{
	int gone = 0;

	if (r->flow) {
		ctx->ops->destroy_flow(r->flow);
		gone = 1;
	}
	if (qps_mc_group_obj(ctx))
		gone += qps_mc_group_put(ctx, r->group);
	return gone;
}

static void qps_mc_count(struct qps_ctx *ctx, int joins, int leaves,
			 int rules, int created)
{
	qps_mutex_lock(&ctx->rx.lock);
	ctx->st->mc_joins += joins;
	ctx->st->mc_leaves += leaves;
	ctx->st->mc_rule_refs += joins - leaves;
	ctx->st->mc_rules += rules;
	ctx->st->mc_rules_created += created;
	qps_mutex_unlock(&ctx->rx.lock);
	/* Writers hold ctl_lock; senders only read it as a hint. */
	if (rules)
		__atomic_fetch_add(&ctx->dmx.mc_nrules, (uint32_t)rules,
				   __ATOMIC_RELAXED);
}

/* A device without room says -ENOSPC; to the application that is the
 * membership limit, -ENOBUFS as IP_ADD_MEMBERSHIP says it. */
static int qps_mc_dev_err(int ret)
{
	return ret == -ENOSPC ? -ENOBUFS : ret;
}

static int qps_mc_sub_add(struct qps_ctx *ctx, struct qps_ep *ep,
			  uint32_t group, uint32_t source)
{
	uint16_t port = ep->local.sin_port;
	struct qps_mc_rule *old, *r;
	int64_t idx = qps_mc_find(ctx->dmx.mc_tab, group, port);
	uint32_t i, at;
	bool found;

	if (idx < 0) {
		int ret = qps_mc_tab_reserve(ctx);

		if (ret < 0)
			return ret;
		r = qps_mc_rule_new(1);
		if (!r)
			return -ENOMEM;
		r->group = group;
		r->port = port;
		ret = qps_mc_dev_add(ctx, r);
		if (ret < 0) {
			free(r);
			return qps_mc_dev_err(ret);
		}
		r->n = 1;
		r->neps = 1;
		r->s[0].ep = ep;
		r->s[0].source = source;
		/* Frames the rule steers before this store find no rule and
		 * count as rx_no_endpoint: the join has not returned yet. */
		qps_mc_tab_put(ctx->dmx.mc_tab, r);
		qps_mc_count(ctx, 0, 0, ret, ret);
		return 0;
	}
	old = ctx->dmx.mc_tab->slot[idx];
	r = qps_mc_rule_new(old->n + 1);
	if (!r)
		return -ENOMEM;
	/* After the endpoint's other sources, if any: the receive path
	 * decides per endpoint by walking one run of entries. */
	at = old->n;
	found = false;
	for (i = 0; i < old->n; i++) {
		if (old->s[i].ep == ep) {
			at = i + 1;
			found = true;
		}
	}
	memcpy(r, old, sizeof(*r) + at * sizeof(old->s[0]));
	r->s[at].ep = ep;
	r->s[at].source = source;
	r->s[at].block = 0;
	memcpy(&r->s[at + 1], &old->s[at], (old->n - at) * sizeof(old->s[0]));
	r->n = old->n + 1;
	r->neps = old->neps + !found;
	/* Release (seq-cst): the new version replaces the old in place. */
	QPS_RCU_STORE(ctx->dmx.mc_tab->slot[idx], r);
	qps_retire(ctx, old);
	return 0;
}

/* Whether dropping the membership (@ep, @source) drops entry @m: the
 * membership itself, and with an any-source one the sources it excluded. */
static bool qps_mc_sub_goes(const struct qps_mc_sub *m, const struct qps_ep *ep,
			    uint32_t source)
{
	if (m->ep != ep)
		return false;
	if (m->block)
		return source == INADDR_ANY;
	return m->source == source;
}

/* Copy @from's memberships but (@ep, @source) into @to, keeping each
 * endpoint's entries together; @to may be @from. */
static void qps_mc_sub_remove(struct qps_mc_rule *to,
			      const struct qps_mc_rule *from,
			      const struct qps_ep *ep, uint32_t source)
{
	uint32_t i, j, n = from->n, kept = 0;

	for (i = 0, j = 0; i < n; i++) {
		if (qps_mc_sub_goes(&from->s[i], ep, source))
			continue;
		if (from->s[i].ep == ep)
			kept++;
		to->s[j++] = from->s[i];
	}
	if (j < n && !kept)
		to->neps = from->neps - 1;
	to->n = j;
}

static void qps_mc_sub_del(struct qps_ctx *ctx, struct qps_ep *ep,
			   uint32_t group, uint32_t source)
{
	struct qps_mc_tab *t = ctx->dmx.mc_tab;
	int64_t idx = qps_mc_find(t, group, ep->local.sin_port);
	struct qps_mc_rule *old, *r;
	uint32_t i, left = 0;

	if (idx < 0)
		return;
	old = t->slot[idx];
	for (i = 0; i < old->n; i++)
		left += !qps_mc_sub_goes(&old->s[i], ep, source);
	if (left == 0) {
		int gone;

		/* The last subscriber: the device stops delivering first. */
		QPS_RCU_STORE(t->slot[idx], QPS_MC_TOMB);
		t->live--;
		t->tombs++;
		gone = qps_mc_dev_del(ctx, old);
		qps_retire(ctx, old);
		qps_mc_count(ctx, 0, 0, -gone, 0);
		return;
	}
	r = qps_mc_rule_new(left);
	if (!r) {
		/* No memory for a new version: edit this one with the
		 * receive path stopped (it reads only under rx.lock). */
		qps_mutex_lock(&ctx->rx.lock);
		qps_mc_sub_remove(old, old, ep, source);
		qps_mutex_unlock(&ctx->rx.lock);
		return;
	}
	memcpy(r, old, sizeof(*r));
	qps_mc_sub_remove(r, old, ep, source);
	QPS_RCU_STORE(t->slot[idx], r);
	qps_retire(ctx, old);
}

/* Drop membership @i of @ep: its rule reference and its L2 filter entry. */
static void qps_mc_drop(struct qps_ep *ep, uint32_t i)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_ep_mc m = ep->mc[i];
	struct in_addr g = { .s_addr = m.group }, s = { .s_addr = m.source };

	qps_mc_sub_del(ctx, ep, m.group, m.source);
	/* -EOPNOTSUPP: the provider has no separate filter. */
	ctx->ops->mcast_detach(ctx->dev, g, s);
	ep->mc[i] = ep->mc[--ep->nmc];
	qps_mc_count(ctx, 0, 1, 0, 0);
}

void qps_mcast_leave_all_locked(struct qps_ep *ep)
{
	while (ep->nmc)
		qps_mc_drop(ep, ep->nmc - 1);
	free(ep->mc);
	ep->mc = NULL;
	ep->mc_cap = 0;
}

static int qps_mreq_check(struct qps_ep *ep, const struct qps_mreq *mreq,
			  socklen_t len, struct qps_mreq *out)
{
	int ret = qps_ep_check(ep);
	uint32_t src;

	if (ret < 0)
		return ret;
	if (!mreq)
		return -EFAULT;
	if (len < sizeof(*mreq))
		return -EINVAL;
	memcpy(out, mreq, sizeof(*out));
	if (!IN_MULTICAST(ntohl(out->group.s_addr)))
		return -EINVAL;
	src = ntohl(out->source.s_addr);
	if (IN_MULTICAST(src) || src == INADDR_BROADCAST)
		return -EINVAL;
	if (out->iface.s_addr != INADDR_ANY &&
	    out->iface.s_addr != ep->ctx->info.addr.s_addr)
		return -ENODEV;
	if (out->ifindex != 0 && out->ifindex != QPS_IFINDEX)
		return -ENODEV;
	return 0;
}

static int qps_join_locked(struct qps_ep *ep, const struct qps_mreq *mr)
{
	struct qps_ctx *ctx = ep->ctx;
	uint32_t group = mr->group.s_addr, source = mr->source.s_addr;
	uint32_t i, laddr = ep->local.sin_addr.s_addr;
	const struct qps_mc_rule *r;
	struct qps_ep_mc *nm;
	int64_t idx;
	int ret;

	if (qps_ep_check(ep) < 0)
		return -EBADF;
	if (!ep->bound || (laddr != INADDR_ANY && laddr != group))
		return -EINVAL;
	/* The rule's subscribers are this endpoint's memberships of the
	 * group: no walk over everything the endpoint joined. */
	idx = qps_mc_find(ctx->dmx.mc_tab, group, ep->local.sin_port);
	r = idx < 0 ? NULL : ctx->dmx.mc_tab->slot[idx];
	for (i = 0; r && i < r->n; i++) {
		if (r->s[i].ep != ep || r->s[i].block)
			continue;
		if (r->s[i].source == source)
			return -EADDRINUSE;
		if ((r->s[i].source == INADDR_ANY) != (source == INADDR_ANY))
			return -EINVAL;
	}
	if (ep->nmc == ep->mc_cap) {
		uint32_t cap = ep->mc_cap ? ep->mc_cap * 2 : 4;

		nm = realloc(ep->mc, cap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		ep->mc = nm;
		ep->mc_cap = cap;
	}
	ret = ctx->ops->mcast_attach(ctx->dev, mr->group, mr->source);
	if (ret < 0 && ret != -EOPNOTSUPP)
		return qps_mc_dev_err(ret);
	ret = qps_mc_sub_add(ctx, ep, group, source);
	if (ret < 0) {
		ctx->ops->mcast_detach(ctx->dev, mr->group, mr->source);
		return ret;
	}
	ep->mc[ep->nmc].group = group;
	ep->mc[ep->nmc].source = source;
	ep->nmc++;
	qps_mc_count(ctx, 1, 0, 0, 0);
	return 0;
}

int qps_join(struct qps_ep *ep, const struct qps_mreq *mreq, socklen_t len)
{
	QPS_ERRNO_GUARD;
	struct qps_mreq mr;
	struct qps_ctx *ctx;
	int ret = qps_mreq_check(ep, mreq, len, &mr);

	if (ret < 0)
		return ret;
	ctx = ep->ctx;
	pthread_mutex_lock(&ctx->ctl_lock);
	ret = qps_join_locked(ep, &mr);
	if (ret == 0)
		qps_stat_ep_publish_locked(ep);
	qps_retire_flush(ctx);
	pthread_mutex_unlock(&ctx->ctl_lock);
	return ret;
}

int qps_leave(struct qps_ep *ep, const struct qps_mreq *mreq, socklen_t len)
{
	QPS_ERRNO_GUARD;
	struct qps_mreq mr;
	struct qps_ctx *ctx;
	uint32_t i, found = 0;
	int ret = qps_mreq_check(ep, mreq, len, &mr);

	if (ret < 0)
		return ret;
	ctx = ep->ctx;
	pthread_mutex_lock(&ctx->ctl_lock);
	if (qps_ep_check(ep) < 0) {
		pthread_mutex_unlock(&ctx->ctl_lock);
		return -EBADF;
	}
	for (i = 0; i < ep->nmc;) {
		if (ep->mc[i].group == mr.group.s_addr &&
		    (mr.source.s_addr == INADDR_ANY ||
		     ep->mc[i].source == mr.source.s_addr)) {
			qps_mc_drop(ep, i);	/* moves the last into @i */
			found++;
		} else {
			i++;
		}
	}
	if (found)
		qps_stat_ep_publish_locked(ep);
	qps_retire_flush(ctx);
	pthread_mutex_unlock(&ctx->ctl_lock);
	return found ? 0 : -EADDRNOTAVAIL;
}

/* The run of @ep's entries in @r, [*a, *b); false when it has none. */
static bool qps_mc_run(const struct qps_mc_rule *r, const struct qps_ep *ep,
		       uint32_t *a, uint32_t *b)
{
	uint32_t i = 0;

	while (r && i < r->n && r->s[i].ep != ep)
		i++;
	if (!r || i == r->n)
		return false;
	*a = i;
	while (i < r->n && r->s[i].ep == ep)
		i++;
	*b = i;
	return true;
}

/* @ep's rule of @group (writers, under ctl_lock), its slot in @idx. */
static const struct qps_mc_rule *qps_mc_rule_of(struct qps_ep *ep,
						uint32_t group, int64_t *idx)
{
	struct qps_mc_tab *t = ep->ctx->dmx.mc_tab;

	*idx = ep->bound ? qps_mc_find(t, group, ep->local.sin_port) : -1;
	return *idx < 0 ? NULL : t->slot[*idx];
}

static int qps_filter_check(struct qps_ep *ep, const struct qps_msfilter *f)
{
	if (!IN_MULTICAST(ntohl(f->group.s_addr)))
		return -EINVAL;
	if (f->iface.s_addr != INADDR_ANY &&
	    f->iface.s_addr != ep->ctx->info.addr.s_addr)
		return -ENODEV;
	if (f->ifindex != 0 && f->ifindex != QPS_IFINDEX)
		return -ENODEV;
	return 0;
}

/* Replaces @ep's entries in the rule at @idx by @run[@m]. The new
 * memberships are attached before the new version is published and the
 * old ones detached after, so the device never stops delivering a source
 * both filters accept. */
static int qps_filter_replace(struct qps_ep *ep, int64_t idx, uint32_t group,
			      const struct qps_mc_sub *run, uint32_t m)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_mc_tab *t = ctx->dmx.mc_tab;
	struct qps_mc_rule *old = t->slot[idx], *r;
	struct in_addr g = { .s_addr = group }, src;
	uint32_t a = 0, b = 0, i, j, add = 0, gone = 0;
	int ret = 0;

	qps_mc_run(old, ep, &a, &b);
	for (i = 0; i < m; i++)
		add += !run[i].block;
	if (ep->nmc + add > ep->mc_cap) {
		struct qps_ep_mc *nm = realloc(ep->mc,
					       (ep->nmc + add) * sizeof(*nm));

		if (!nm)
			return -ENOMEM;
		ep->mc = nm;
		ep->mc_cap = ep->nmc + add;
	}
	r = qps_mc_rule_new(old->n - (b - a) + m);
	if (!r)
		return -ENOMEM;
	for (i = 0; i < m && ret == 0; i++) {
		src.s_addr = run[i].source;
		if (!run[i].block)
			ret = ctx->ops->mcast_attach(ctx->dev, g, src);
		if (ret == -EOPNOTSUPP)
			ret = 0;
	}
	if (ret < 0) {
		/* @i is past the one that failed. */
		for (i--; i-- > 0;) {
			src.s_addr = run[i].source;
			if (!run[i].block)
				ctx->ops->mcast_detach(ctx->dev, g, src);
		}
		free(r);
		return qps_mc_dev_err(ret);
	}
	memcpy(r, old, sizeof(*r));
	memcpy(r->s, old->s, a * sizeof(r->s[0]));
	memcpy(&r->s[a], run, m * sizeof(r->s[0]));
	memcpy(&r->s[a + m], &old->s[b], (old->n - b) * sizeof(r->s[0]));
	r->n = old->n - (b - a) + m;
	/* Release (seq-cst): the new version replaces the old in place. */
	QPS_RCU_STORE(t->slot[idx], r);
	qps_retire(ctx, old);
	for (i = 0, j = 0; i < ep->nmc; i++) {
		if (ep->mc[i].group != group) {
			ep->mc[j++] = ep->mc[i];
			continue;
		}
		src.s_addr = ep->mc[i].source;
		ctx->ops->mcast_detach(ctx->dev, g, src);
		gone++;
	}
	ep->nmc = j;
	for (i = 0; i < m; i++) {
		if (run[i].block)
			continue;
		ep->mc[ep->nmc].group = group;
		ep->mc[ep->nmc].source = run[i].source;
		ep->nmc++;
	}
	qps_mc_count(ctx, (int)add, (int)gone, 0, 0);
	return 0;
}

int qps_setfilter(struct qps_ep *ep, const struct qps_msfilter *f,
		  socklen_t len)
{
	QPS_ERRNO_GUARD;
	struct qps_mc_sub *run;
	struct qps_ctx *ctx;
	uint32_t i, a, b, m, n;
	int64_t idx = -1;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!f)
		return -EFAULT;
	if (len < QPS_MSFILTER_SIZE(0))
		return -EINVAL;
	if (f->numsrc > QPS_MSFILTER_MAX)
		return -ENOBUFS;
	if (len < QPS_MSFILTER_SIZE(f->numsrc) ||
	    (f->fmode != QPS_MCAST_INCLUDE && f->fmode != QPS_MCAST_EXCLUDE))
		return -EINVAL;
	ret = qps_filter_check(ep, f);
	if (ret < 0)
		return ret;
	n = f->numsrc;
	for (i = 0; i < n; i++)
		if (f->slist[i].s_addr == INADDR_ANY)
			return -EINVAL;
	/* INCLUDE nothing is no membership (RFC 3678). */
	if (f->fmode == QPS_MCAST_INCLUDE && n == 0) {
		struct qps_mreq mr = { .group = f->group };

		return qps_leave(ep, &mr, sizeof(mr));
	}
	m = n + (f->fmode == QPS_MCAST_EXCLUDE);
	run = calloc(m, sizeof(*run));
	if (!run)
		return -ENOMEM;
	for (i = 0; i < m; i++)
		run[i].ep = ep;
	for (i = 0; i < n; i++) {
		run[m - n + i].source = f->slist[i].s_addr;
		run[m - n + i].block = f->fmode == QPS_MCAST_EXCLUDE;
	}
	ctx = ep->ctx;
	pthread_mutex_lock(&ctx->ctl_lock);
	if (qps_ep_check(ep) < 0) {
		ret = -EBADF;
	} else {
		const struct qps_mc_rule *r =
			qps_mc_rule_of(ep, f->group.s_addr, &idx);

		/* A filter needs a membership first. */
		ret = !qps_mc_run(r, ep, &a, &b) ? -EINVAL :
		      qps_filter_replace(ep, idx, f->group.s_addr, run, m);
	}
	if (ret == 0)
		qps_stat_ep_publish_locked(ep);
	qps_retire_flush(ctx);
	pthread_mutex_unlock(&ctx->ctl_lock);
	free(run);
	return ret;
}

int qps_getfilter(struct qps_ep *ep, struct qps_msfilter *f, socklen_t *len)
{
	QPS_ERRNO_GUARD;
	uint32_t a = 0, b = 0, room, n = 0, mode = QPS_MCAST_INCLUDE;
	const struct qps_mc_rule *r;
	struct qps_ctx *ctx;
	int64_t idx;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!f || !len)
		return -EFAULT;
	if (*len < QPS_MSFILTER_SIZE(0))
		return -EINVAL;
	ret = qps_filter_check(ep, f);
	if (ret < 0)
		return ret;
	room = (uint32_t)((*len - QPS_MSFILTER_SIZE(0)) / sizeof(f->slist[0]));
	if (room > f->numsrc)
		room = f->numsrc;
	ctx = ep->ctx;
	pthread_mutex_lock(&ctx->ctl_lock);
	r = NULL;
	if (qps_ep_check(ep) < 0)
		ret = -EBADF;
	else
		r = qps_mc_rule_of(ep, f->group.s_addr, &idx);
	if (r && !qps_mc_run(r, ep, &a, &b))
		r = NULL;
	if (ret == 0 && !r)
		ret = -EADDRNOTAVAIL;
	if (r) {
		for (uint32_t i = a; i < b; i++) {
			if (!r->s[i].block && r->s[i].source == INADDR_ANY) {
				mode = QPS_MCAST_EXCLUDE;
				continue;
			}
			if (n < room)
				f->slist[n].s_addr = r->s[i].source;
			n++;
		}
	}
	pthread_mutex_unlock(&ctx->ctl_lock);
	if (ret < 0)
		return ret;
	f->fmode = mode;
	f->numsrc = n;
	*len = (socklen_t)QPS_MSFILTER_SIZE(n < room ? n : room);
	return 0;
}

int qps_mcast_init(struct qps_ctx *ctx)
{
	ctx->dmx.mc_tab = qps_mc_tab_new(QPS_MC_TAB_MIN);
	return ctx->dmx.mc_tab ? 0 : -ENOMEM;
}

/* Every endpoint is closed by now, so every rule is gone. */
void qps_mcast_fini(struct qps_ctx *ctx)
{
	free(ctx->dmx.mc_tab);
	ctx->dmx.mc_tab = NULL;
	free(ctx->dmx.mc_groups);
	ctx->dmx.mc_groups = NULL;
}
