// SPDX-License-Identifier: MIT
/*
 * Flow steering, as mlx4 under device-managed flow steering: rules of
 * ETH / IPv4 / UDP specs (value + mask) that send matching frames to a
 * QP's receive queue. The ETH spec matches the destination MAC only
 * (mlx4 ignores src_mac and ether_type). Choice: NORMAL rules first, then
 * MC_DEFAULT (multicast frames nothing else steered), then ALL_DEFAULT;
 * within a tier the lower priority value wins, ties go to the older rule.
 *
 * The table lives in the port's shared memory (peers steer while they
 * deliver); only the owner edits it, under rx_lock.
 */
#include "emu.h"
#include "prov_sw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMU_FLOW_MAX_PRIO 0xfffu	/* MLX4_IB_FLOW_MAX_PRIO */
#define EMU_ETH_P_IP 0x0800
#define EMU_IPPROTO_UDP 17

/* The shm rule carries the tier as is (peers read it in their matcher). */
_Static_assert(QPS_EMU_TIER_NORMAL == (int)QPS_FLOW_TIER_NORMAL &&
	       QPS_EMU_TIER_MC_DEFAULT == (int)QPS_FLOW_TIER_MC_DEFAULT &&
	       QPS_EMU_TIER_ALL_DEFAULT == (int)QPS_FLOW_TIER_ALL_DEFAULT,
	       "emu tiers follow enum qps_flow_tier");

static int parse_flow(const struct ibv_flow_attr *a, struct qps_emu_shm_flow *f)
{
	struct qps_flow_rule r;
	int ret;

	memset(f, 0, sizeof(*f));
	ret = qps_flow_parse(a, EMU_FLOW_MAX_PRIO, &r);
	if (ret)
		return ret;
	/* Frames on the wire are untagged; ether_type is ignored as mlx4
	 * ignores it. */
	if (r.vlan_mask)
		return -EOPNOTSUPP;
	f->tier = r.tier;
	f->prio = r.prio;
	f->need = (r.need_ip ? QPS_EMU_FLOW_IP : 0) |
		  (r.need_udp ? QPS_EMU_FLOW_UDP : 0);
	memcpy(f->mac, r.mac, sizeof(f->mac));
	memcpy(f->mac_mask, r.mac_mask, sizeof(f->mac_mask));
	f->sip = r.sip;
	f->sip_mask = r.sip_mask;
	f->dip = r.dip;
	f->dip_mask = r.dip_mask;
	f->sport = r.sport;
	f->sport_mask = r.sport_mask;
	f->dport = r.dport;
	f->dport_mask = r.dport_mask;
	return 0;
}

static void update_flow_hi(struct qps_emu_shm_port *sp)
{
	uint32_t hi = QPS_EMU_MAX_FLOWS;

	while (hi && !sp->flow[hi - 1].used)
		hi--;
	sp->flow_hi = hi;
}

int qps_emu_create_flow(struct qps_qp *q, struct ibv_flow_attr *attr,
			struct qps_flow **flow_out)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	struct qps_emu_dev *dev = qps_emu_dev(q->dev);
	struct qps_emu_shm_port *sp = dev->sp;
	struct qps_emu_shm_flow f;
	struct qps_emu_flow *fl;
	unsigned int slot;
	int r;

	if (!attr || !flow_out || !qp->has_rq || qp->ud)
		return -EINVAL;
	/* Test hook: an injected failure is taken once. */
	r = __atomic_exchange_n(&dev->flow_err, 0, __ATOMIC_RELAXED);
	if (r)
		return r;
	r = parse_flow(attr, &f);
	if (r)
		return r;
	f.rq = qp->rq_slot;
	fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	pthread_mutex_lock(&dev->lock);
	for (slot = 0; slot < QPS_EMU_MAX_FLOWS && dev->flow[slot]; slot++)
		;
	r = -ENOSPC;
	if (slot == QPS_EMU_MAX_FLOWS)
		goto err;
	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		goto err;
	f.seq = ++sp->flow_seq;
	f.used = 1;
	sp->flow[slot] = f;
	update_flow_hi(sp);
	qps_emu_unlock(&sp->rx_lock);
	fl->base.qp = q;
	fl->slot = slot;
	fl->seq = f.seq;
	dev->flow[slot] = fl;
	qp->nflows++;
	pthread_mutex_unlock(&dev->lock);
	*flow_out = &fl->base;
	return 0;
err:
	pthread_mutex_unlock(&dev->lock);
	free(fl);
	return r;
}

int qps_emu_destroy_flow(struct qps_flow *flow)
{
	struct qps_emu_flow *fl = qps_emu_container_of(flow, struct qps_emu_flow,
						       base);
	struct qps_emu_qp *qp = qps_emu_qp(flow->qp);
	struct qps_emu_dev *dev = qps_emu_dev(flow->qp->dev);
	struct qps_emu_shm_port *sp = dev->sp;

	pthread_mutex_lock(&dev->lock);
	if (fl->slot >= QPS_EMU_MAX_FLOWS || dev->flow[fl->slot] != fl) {
		pthread_mutex_unlock(&dev->lock);
		return -EINVAL;
	}
	if (qps_emu_owner(dev) && qps_emu_lock(&sp->rx_lock) >= 0) {
		memset(&sp->flow[fl->slot], 0, sizeof(sp->flow[fl->slot]));
		update_flow_hi(sp);
		qps_emu_unlock(&sp->rx_lock);
	}
	dev->flow[fl->slot] = NULL;
	qp->nflows--;
	pthread_mutex_unlock(&dev->lock);
	free(fl);
	return 0;
}

struct frame_keys {
	bool mc, ip, udp;
	uint32_t sip, dip;
	uint16_t sport, dport;
};

static void frame_keys(const uint8_t *f, uint32_t len, struct frame_keys *k)
{
	uint32_t ihl;

	memset(k, 0, sizeof(*k));
	k->mc = f[0] & 1;
	if (len < QPS_EMU_ETH_HLEN + 20 ||
	    ((uint32_t)f[12] << 8 | f[13]) != EMU_ETH_P_IP ||
	    (f[14] >> 4) != 4)
		return;
	ihl = (uint32_t)(f[14] & 0xf) * 4;
	if (ihl < 20 || len < QPS_EMU_ETH_HLEN + ihl)
		return;
	k->ip = true;
	memcpy(&k->sip, f + 26, 4);
	memcpy(&k->dip, f + 30, 4);
	/* Only a first (or the only) fragment carries the UDP header. */
	if (f[23] != EMU_IPPROTO_UDP || (((uint32_t)f[20] << 8 | f[21]) & 0x1fff) ||
	    len < QPS_EMU_ETH_HLEN + ihl + 8)
		return;
	k->udp = true;
	memcpy(&k->sport, f + QPS_EMU_ETH_HLEN + ihl, 2);
	memcpy(&k->dport, f + QPS_EMU_ETH_HLEN + ihl + 2, 2);
}

static bool rule_matches(const struct qps_emu_shm_flow *r, const uint8_t *dst,
			 const struct frame_keys *k)
{
	unsigned int i;

	for (i = 0; i < 6; i++)
		if ((dst[i] & r->mac_mask[i]) != (r->mac[i] & r->mac_mask[i]))
			return false;
	if ((r->need & QPS_EMU_FLOW_IP) &&
	    (!k->ip || (k->sip & r->sip_mask) != (r->sip & r->sip_mask) ||
	     (k->dip & r->dip_mask) != (r->dip & r->dip_mask)))
		return false;
	if ((r->need & QPS_EMU_FLOW_UDP) &&
	    (!k->udp ||
	     (k->sport & r->sport_mask) != (r->sport & r->sport_mask) ||
	     (k->dport & r->dport_mask) != (r->dport & r->dport_mask)))
		return false;
	return true;
}

int qps_emu_flow_match(const struct qps_emu_shm_port *sp,
		       const uint8_t *frame, uint32_t len)
{
	const struct qps_emu_shm_flow *best = NULL;
	struct frame_keys k;
	uint32_t i, hi = sp->flow_hi;

	if (hi > QPS_EMU_MAX_FLOWS)
		hi = QPS_EMU_MAX_FLOWS;
	frame_keys(frame, len, &k);
	for (i = 0; i < hi; i++) {
		const struct qps_emu_shm_flow *r = &sp->flow[i];

		if (!r->used || r->tier > QPS_EMU_TIER_ALL_DEFAULT)
			continue;
		if (r->tier == QPS_EMU_TIER_MC_DEFAULT && !k.mc)
			continue;
		if (!rule_matches(r, frame, &k))
			continue;
		if (!best || r->tier < best->tier ||
		    (r->tier == best->tier &&
		     (r->prio < best->prio ||
		      (r->prio == best->prio && r->seq < best->seq))))
			best = r;
	}
	if (!best)
		return -1;
	return best->rq < QPS_EMU_MAX_RQ ? (int)best->rq : -2;
}
