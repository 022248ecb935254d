// SPDX-License-Identifier: MIT
/*
 * Flow steering of the null device, as mlx4 under device-managed flow
 * steering (the same rules emu keeps): ETH (destination MAC), IPv4 and
 * UDP specs, value and mask; NORMAL rules first, then MC_DEFAULT (a
 * multicast frame nothing else steered), then ALL_DEFAULT; within a tier
 * the lower priority value wins, ties go to the older rule. The only
 * frame the device ever receives is its template, so the rules are
 * applied to that.
 */
#include "null.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int qps_null_create_flow(struct qps_qp *q, struct ibv_flow_attr *attr,
			 struct qps_flow **flow_out)
{
	struct qps_null_qp *qp = qps_null_qp(q);
	struct qps_null_dev *dev = qps_null_dev(q->dev);
	struct qps_null_flow *fl;
	unsigned int slot;
	int ret;

	if (!attr || !flow_out || !qp->has_rq)
		return -EINVAL;
	fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	ret = qps_flow_parse(attr, QPS_NULL_FLOW_MAX_PRIO, &fl->rule);
	/* Frames are untagged; ether_type is ignored as mlx4 ignores it. */
	if (!ret && fl->rule.vlan_mask)
		ret = -EOPNOTSUPP;
	if (ret) {
		free(fl);
		return ret;
	}
	pthread_mutex_lock(&dev->lock);
	for (slot = 0; slot < QPS_NULL_MAX_FLOWS && dev->flow[slot]; slot++)
		;
	if (slot == QPS_NULL_MAX_FLOWS) {
		pthread_mutex_unlock(&dev->lock);
		free(fl);
		return -ENOSPC;
	}
	fl->rule.seq = ++dev->flow_seq;
	fl->base.qp = q;
	fl->slot = slot;
	dev->flow[slot] = fl;
	qp->nflows++;
	qps_null_rx_update_locked(dev);
	pthread_mutex_unlock(&dev->lock);
	*flow_out = &fl->base;
	return 0;
}

int qps_null_destroy_flow(struct qps_flow *flow)
{
	struct qps_null_flow *fl = qps_null_container_of(flow,
					struct qps_null_flow, base);
	struct qps_null_dev *dev = qps_null_dev(flow->qp->dev);

	pthread_mutex_lock(&dev->lock);
	if (fl->slot >= QPS_NULL_MAX_FLOWS || dev->flow[fl->slot] != fl) {
		pthread_mutex_unlock(&dev->lock);
		return -EINVAL;
	}
	dev->flow[fl->slot] = NULL;
	qps_null_qp(flow->qp)->nflows--;
	qps_null_rx_update_locked(dev);
	pthread_mutex_unlock(&dev->lock);
	free(fl);
	return 0;
}

/* The template is IPv4/UDP; its keys sit at fixed offsets. */
static bool rule_matches(const struct qps_flow_rule *r, const uint8_t *f)
{
	uint32_t sip, dip;
	uint16_t sport, dport;
	unsigned int i;

	for (i = 0; i < 6; i++)
		if ((f[i] & r->mac_mask[i]) != r->mac[i])
			return false;
	memcpy(&sip, f + 26, 4);
	memcpy(&dip, f + 30, 4);
	memcpy(&sport, f + 34, 2);
	memcpy(&dport, f + 36, 2);
	if (r->need_ip && ((sip & r->sip_mask) != r->sip ||
			   (dip & r->dip_mask) != r->dip))
		return false;
	if (r->need_udp && ((sport & r->sport_mask) != r->sport ||
			    (dport & r->dport_mask) != r->dport))
		return false;
	return true;
}

struct qps_null_qp *qps_null_steer_locked(struct qps_null_dev *dev)
{
	const struct qps_null_flow *best = NULL;
	bool mc = dev->frame[0] & 1;
	unsigned int i;

	for (i = 0; i < QPS_NULL_MAX_FLOWS; i++) {
		const struct qps_null_flow *fl = dev->flow[i];
		const struct qps_flow_rule *r;

		if (!fl)
			continue;
		r = &fl->rule;
		if (r->tier == QPS_FLOW_TIER_MC_DEFAULT && !mc)
			continue;
		if (!rule_matches(r, dev->frame))
			continue;
		if (!best || r->tier < best->rule.tier ||
		    (r->tier == best->rule.tier &&
		     (r->prio < best->rule.prio ||
		      (r->prio == best->rule.prio &&
		       r->seq < best->rule.seq))))
			best = fl;
	}
	return best ? qps_null_qp(best->base.qp) : NULL;
}
