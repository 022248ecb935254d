// SPDX-License-Identifier: MIT
/*
 * Steering rules: parsed as packet parses them (common/flow_parse.c),
 * kept strongest first for the receive path (xdp_rx.c), and turned into
 * the XDP program's map entries (xdp_maps.h) so that it redirects what
 * they ask for and nothing the kernel's own sockets expect:
 *
 *   UDP dst port (with or without address)   rules[(addr|0, port)] EXACT
 *   IPv4 address, no port                    rules[(addr, 0)] HELD: the
 *       ports of the context's address that its own kernel sockets hold
 *       (the context's address rule takes its bound ports; a group's
 *       address rule the group's datagrams to those ports)
 *   MAC only: broadcast                      cfg C_BCAST (held ports)
 *             group MAC, MC_DEFAULT          cfg C_MC_ALL
 *             anything else, ALL_DEFAULT     cfg C_ALL
 *
 * The maps are coarser than the rules (no source address or port), so
 * the receive path decides again; a rule the maps cannot express (a
 * partial address or port mask, a VLAN, another EtherType) is refused.
 *
 * The list and the maps change together under dev->lock, which the
 * receive path holds while it matches frames: a frame already on the RX
 * ring when its rule goes finds none and is counted in rx_no_rule.
 */
#include "xdp.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XDP_FLOW_MAX_PRIO 0xfffu	/* as mlx4 */

static int rule_parse(const struct ibv_flow_attr *a, struct qps_flow_rule *r)
{
	int ret = qps_flow_parse(a, XDP_FLOW_MAX_PRIO, r);

	if (ret)
		return ret;
	if (r->vlan_mask)
		return -EOPNOTSUPP;
	if (r->ether_type &&
	    r->ether_type != (htons(0x0800) & r->ether_type_mask))
		return -EOPNOTSUPP;
	if ((r->dip_mask && r->dip_mask != UINT32_MAX) ||
	    (r->dport_mask && r->dport_mask != UINT16_MAX))
		return -EOPNOTSUPP;
	return 0;
}

/* The map entry of @r: true with *@k and *@v set, or false with the
 * catch-all flags it needs in *@c. */
static bool rule_entry(const struct qps_flow_rule *r, struct qps_xdp_key *k,
		       uint32_t *v, uint32_t *c)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	memset(k, 0, sizeof(*k));
	if (r->tier == QPS_FLOW_TIER_NORMAL && r->dport_mask) {
		k->addr = r->dip;
		k->port = r->dport;
		*v = QPS_XDP_R_EXACT;
		return true;
	}
	if (r->tier == QPS_FLOW_TIER_NORMAL && r->dip_mask) {
		k->addr = r->dip;
		*v = QPS_XDP_R_HELD;
		return true;
	}
	if (r->tier == QPS_FLOW_TIER_NORMAL &&
	    memcmp(r->mac_mask, bcast, 6) == 0 && memcmp(r->mac, bcast, 6) == 0)
		*c |= QPS_XDP_C_BCAST;
	else if (r->tier == QPS_FLOW_TIER_MC_DEFAULT ||
		 ((r->mac_mask[0] & 1) && (r->mac[0] & 1)))
		*c |= QPS_XDP_C_MC_ALL;
	else
		*c |= QPS_XDP_C_ALL;
	return false;
}

/* The value @k must have now: the OR over the rules. dev->lock held. */
static uint32_t key_value(struct qps_xdp_dev *dev, const struct qps_xdp_key *k)
{
	struct qps_xdp_flow *fl;
	uint32_t v = 0, c = 0;

	for (fl = dev->flows; fl; fl = fl->next) {
		struct qps_xdp_key fk;
		uint32_t fv = 0;

		if (rule_entry(&fl->rule, &fk, &fv, &c) &&
		    memcmp(&fk, k, sizeof(fk)) == 0)
			v |= fv;
	}
	return v;
}

/* Bring the maps in line with the rules for @r's entry. dev->lock held. */
static int maps_sync(struct qps_xdp_dev *dev, const struct qps_flow_rule *r)
{
	struct qps_xdp_flow *fl;
	struct qps_xdp_key k;
	uint32_t v = 0, c = 0;

	if (rule_entry(r, &k, &v, &c)) {
		v = key_value(dev, &k);
		if (!v)
			return bpf_map_delete_elem(dev->rules_fd, &k) < 0 &&
			       errno != ENOENT ? -errno : 0;
		return bpf_map_update_elem(dev->rules_fd, &k, &v, BPF_ANY) < 0 ?
		       -errno : 0;
	}
	c = 0;
	for (fl = dev->flows; fl; fl = fl->next)
		(void)rule_entry(&fl->rule, &k, &v, &c);
	if (c == dev->cfg.flags)
		return 0;
	dev->cfg.flags = c;
	return qps_xdp_cfg_write(dev);
}

static void flow_unlink(struct qps_xdp_dev *dev, struct qps_xdp_flow *fl)
{
	struct qps_xdp_flow **pp;

	for (pp = &dev->flows; *pp; pp = &(*pp)->next)
		if (*pp == fl) {
			*pp = fl->next;
			dev->nflows--;
			return;
		}
}

static void flow_link(struct qps_xdp_dev *dev, struct qps_xdp_flow *fl)
{
	struct qps_xdp_flow **pp = &dev->flows;

	while (*pp && qps_flow_rule_before(&(*pp)->rule, &fl->rule))
		pp = &(*pp)->next;
	fl->next = *pp;
	*pp = fl;
	dev->nflows++;
}

int qps_xdp_create_flow(struct qps_qp *q, struct ibv_flow_attr *attr,
			struct qps_flow **flow_out)
{
	struct qps_xdp_qp *qp = qps_xdp_qp(q);
	struct qps_xdp_dev *dev = qps_xdp_dev(q->dev);
	struct qps_xdp_flow *fl;
	struct qps_flow_rule r;
	int ret;

	if (!attr || !flow_out || !qp->rq.cnt)
		return -EINVAL;
	ret = rule_parse(attr, &r);
	if (ret < 0)
		return ret;
	fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	fl->base.qp = q;
	pthread_mutex_lock(&dev->lock);
	if (dev->nflows >= QPS_XDP_MAX_FLOWS) {
		pthread_mutex_unlock(&dev->lock);
		free(fl);
		return -ENOSPC;
	}
	r.seq = ++dev->flow_seq;
	fl->rule = r;
	flow_link(dev, fl);
	ret = maps_sync(dev, &fl->rule);
	if (ret < 0) {
		flow_unlink(dev, fl);
		(void)maps_sync(dev, &r);
		pthread_mutex_unlock(&dev->lock);
		free(fl);
		return ret;
	}
	pthread_mutex_lock(&qp->rq.lock);
	qp->nflows++;
	pthread_mutex_unlock(&qp->rq.lock);
	pthread_mutex_unlock(&dev->lock);
	*flow_out = &fl->base;
	return 0;
}

int qps_xdp_destroy_flow(struct qps_flow *flow)
{
	struct qps_xdp_flow *fl = qps_sw_container_of(flow,
						       struct qps_xdp_flow,
						       base);
	struct qps_xdp_qp *qp = qps_xdp_qp(flow->qp);
	struct qps_xdp_dev *dev = qps_xdp_dev(flow->qp->dev);
	int ret;

	pthread_mutex_lock(&dev->lock);
	flow_unlink(dev, fl);
	ret = maps_sync(dev, &fl->rule);
	if (ret < 0)
		qps_xdp_log("cannot remove a steering rule from the XDP maps "
			    "(%d); its frames reach the context, which drops "
			    "them (rx_no_rule)", ret);
	pthread_mutex_lock(&qp->rq.lock);
	qp->nflows--;
	pthread_mutex_unlock(&qp->rq.lock);
	pthread_mutex_unlock(&dev->lock);
	free(fl);
	return 0;
}
