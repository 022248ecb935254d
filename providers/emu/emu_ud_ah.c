// SPDX-License-Identifier: MIT
/*
 * UD addressing on emu's RoCE port: the GID table, address handles and
 * per-QP multicast attachments.
 *
 * GIDs are what mlx4 derives from its netdev: index 0 the RoCE v1
 * link-local GID (fe80::EUI-64 of the MAC), index 1 the RoCE v2 GID of
 * the IPv4 address (::ffff:a.b.c.d). Only RoCE v2 over IPv4 is sent, so
 * an AH must use sgid_index 1 and an IPv4-mapped destination GID.
 *
 * An AH resolves its next-hop MAC once, at creation, as the kernel does
 * for a RoCE AH; a port that leaves the wire later makes sends through
 * it reach no one (tx_no_dest), like a stale neighbour entry.
 */
#include "emu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				       0xff, 0xff };

/* The IPv4 address (network order) of an IPv4-mapped GID, or 0. */
static uint32_t gid_v4(const uint8_t *gid)
{
	uint32_t a;

	if (memcmp(gid, v4_prefix, sizeof(v4_prefix)) != 0)
		return 0;
	memcpy(&a, gid + 12, 4);
	return a;
}

static bool v4_mcast(uint32_t a)
{
	return (ntohl(a) >> 28) == 0xe;
}

int qps_emu_query_gid(struct qps_dev *d, int index, union ibv_gid *gid)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	uint8_t mac[6];
	uint32_t addr;

	if (!gid)
		return -EINVAL;
	memset(gid, 0, sizeof(*gid));
	switch (index) {
	case QPS_GID_ROCE_V1_LL:
		qps_emu_port_mac(dev->port, mac);
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
		/* EUI-64: universal/local bit flipped, ff:fe in the middle. */
		gid->raw[8] = mac[0] ^ 0x02;
		gid->raw[9] = mac[1];
		gid->raw[10] = mac[2];
		gid->raw[11] = 0xff;
		gid->raw[12] = 0xfe;
		gid->raw[13] = mac[3];
		gid->raw[14] = mac[4];
		gid->raw[15] = mac[5];
		return 0;
	case QPS_GID_ROCE_V2_IPV4:
		addr = dev->sp->addr;
		memcpy(gid->raw, v4_prefix, sizeof(v4_prefix));
		memcpy(gid->raw + 12, &addr, 4);
		return 0;
	default:
		return -EINVAL;
	}
}

int qps_emu_create_ah(struct qps_dev *d, struct ibv_ah_attr *attr,
		      struct qps_ah **ah_out)
{
	struct qps_emu_ah *ah;
	struct in_addr dst;
	uint8_t mac[6];
	int r;

	if (!attr || !ah_out || !attr->is_global || attr->port_num > 1 ||
	    attr->grh.sgid_index != QPS_GID_ROCE_V2_IPV4)
		return -EINVAL;
	dst.s_addr = gid_v4(attr->grh.dgid.raw);
	if (!dst.s_addr || dst.s_addr == INADDR_BROADCAST)
		return -EINVAL;
	/* Multicast maps to 01:00:5e:..., unicast asks the wire. */
	r = qps_emu_resolve(d, dst, mac);
	if (r)
		return r;
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ah->base.ibv = &ah->ibv;
	ah->base.dev = d;
	memcpy(ah->mac, mac, 6);
	memcpy(ah->dgid, attr->grh.dgid.raw, 16);
	ah->hop_limit = attr->grh.hop_limit;
	ah->tclass = attr->grh.traffic_class;
	ah->sl = attr->sl;
	ah->flow_label = attr->grh.flow_label & 0xfffff;
	ah->magic = QPS_EMU_AH_MAGIC;
	*ah_out = &ah->base;
	return 0;
}

int qps_emu_destroy_ah(struct qps_ah *a)
{
	struct qps_emu_ah *ah;

	if (!a)
		return -EINVAL;
	ah = qps_emu_container_of(a, struct qps_emu_ah, base);
	if (ah->magic != QPS_EMU_AH_MAGIC)
		return -EINVAL;
	ah->magic = 0;
	free(ah);
	return 0;
}

struct qps_emu_ah *qps_emu_ah_of(struct qps_emu_dev *dev, struct ibv_ah *ibv)
{
	struct qps_emu_ah *ah;

	if (!ibv)
		return NULL;
	/* Callers pass the ibv_ah create_ah gave them (provider.h). */
	ah = qps_emu_container_of(ibv, struct qps_emu_ah, ibv);
	if (ah->magic != QPS_EMU_AH_MAGIC || ah->base.dev != &dev->base)
		return NULL;
	return ah;
}

/* The group of a multicast GID, or 0. */
static uint32_t mcast_group(const union ibv_gid *gid)
{
	uint32_t g = gid ? gid_v4(gid->raw) : 0;

	return g && v4_mcast(g) ? g : 0;
}

static int find_group(const struct qps_emu_qp *qp, uint32_t g)
{
	unsigned int i;

	for (i = 0; i < qp->ngroups; i++)
		if (qp->groups[i] == g)
			return (int)i;
	return -1;
}

/* Set or clear @qp's bit in the port's entry for @g; rx_lock taken
 * here. -ENOSPC when the port's table is full. */
static int mcg_update(struct qps_emu_dev *dev, struct qps_emu_qp *qp,
		      uint32_t g, bool on)
{
	struct qps_emu_shm_port *sp = dev->sp;
	struct qps_emu_shm_mcg *e = NULL, *free_e = NULL;
	uint32_t bit = 1u << qp->rq_slot;
	unsigned int i;
	int r;

	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		return r;
	for (i = 0; i < QPS_EMU_MAX_MCG; i++) {
		if (sp->mcg[i].rqs && sp->mcg[i].group == g)
			e = &sp->mcg[i];
		else if (!sp->mcg[i].rqs && !free_e)
			free_e = &sp->mcg[i];
	}
	r = 0;
	if (on) {
		if (!e && free_e) {
			e = free_e;
			e->group = g;
		}
		if (e)
			e->rqs |= bit;
		else
			r = -ENOSPC;
	} else if (e) {
		e->rqs &= ~bit;
	}
	qps_emu_unlock(&sp->rx_lock);
	return r;
}

int qps_emu_attach_mcast(struct qps_qp *q, const union ibv_gid *gid,
			 uint16_t lid)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	struct qps_emu_dev *dev = qps_emu_dev(q->dev);
	uint32_t g = mcast_group(gid);
	struct in_addr grp = { .s_addr = g }, any = { 0 };
	int r;

	(void)lid;	/* RoCE has no LIDs: ignored, as on mlx4 */
	if (!g || !qp->ud || !qp->has_rq)
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	/* Attaching twice is not an error (mlx4 answers 0 too) and takes
	 * no second reference: one detach undoes it. */
	if (find_group(qp, g) >= 0) {
		pthread_mutex_unlock(&dev->lock);
		return 0;
	}
	r = -ENOSPC;
	if (qp->ngroups == QPS_EMU_MAX_MCG)
		goto out;
	/* The L2 filter entry, shared with the device-level mcast_attach. */
	r = qps_emu_mcast_attach(q->dev, grp, any);
	if (r)
		goto out;
	r = mcg_update(dev, qp, g, true);
	if (r) {
		qps_emu_mcast_detach(q->dev, grp, any);
		goto out;
	}
	qp->groups[qp->ngroups++] = g;
out:
	pthread_mutex_unlock(&dev->lock);
	return r;
}

/* dev->lock held. */
static void detach_one(struct qps_emu_dev *dev, struct qps_emu_qp *qp,
		       unsigned int i)
{
	struct in_addr grp = { .s_addr = qp->groups[i] }, any = { 0 };

	if (qps_emu_owner(dev)) {
		mcg_update(dev, qp, grp.s_addr, false);
		qps_emu_mcast_detach(&dev->base, grp, any);
	}
	qp->groups[i] = qp->groups[--qp->ngroups];
}

int qps_emu_detach_mcast(struct qps_qp *q, const union ibv_gid *gid,
			 uint16_t lid)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	struct qps_emu_dev *dev = qps_emu_dev(q->dev);
	uint32_t g = mcast_group(gid);
	int i;

	(void)lid;
	if (!g || !qp->ud)
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	i = find_group(qp, g);
	if (i >= 0)
		detach_one(dev, qp, (unsigned int)i);
	pthread_mutex_unlock(&dev->lock);
	return i >= 0 ? 0 : -EINVAL;
}

void qps_emu_ud_detach_all(struct qps_emu_qp *qp)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);

	while (qp->ngroups)
		detach_one(dev, qp, qp->ngroups - 1);
}
