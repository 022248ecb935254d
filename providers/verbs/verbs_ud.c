// SPDX-License-Identifier: MIT
/*
 * UD on verbs: the GID table, address handles and QP multicast, passed
 * through. On RoCE an AH must carry a GRH (is_global) and the source GID
 * index of our address; the kernel resolves the destination MAC when the
 * AH is created (ib_resolve_eth_dmac), so the AH is the cached
 * destination. A UD multicast attach also joins the IPv4 group in the
 * kernel (verbs_neigh.c), since the NIC sends no IGMP itself.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

int qps_verbs_query_gid(struct qps_dev *dev, int index, union ibv_gid *gid)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);

	if (index < 0 || !gid)
		return -EINVAL;
	if (ibv_query_gid(vd->ctx, vd->port, index, gid))
		return -EINVAL;	/* beyond the table, or an empty slot */
	return 0;
}

/* cppcheck-suppress constParameter ; the type of qps_provider_ops.create_ah */
int qps_verbs_create_ah(struct qps_dev *dev, struct ibv_ah_attr *attr,
			struct qps_ah **ah_out)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct qps_verbs_ah *va;
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	if (!attr || !ah_out)
		return -EINVAL;
	if (!(vd->info.caps & QPS_DEV_CAP_UD))
		return -EOPNOTSUPP;
	a = *attr;
	if (vd->link_layer == IBV_LINK_LAYER_ETHERNET) {
		/* RoCE addresses by GID only. */
		if (!a.is_global)
			return -EINVAL;
		if (!a.grh.sgid_index && vd->addr_gid > 0)
			a.grh.sgid_index = (uint8_t)vd->addr_gid;
		if (!a.grh.hop_limit)
			a.grh.hop_limit = 64;
	}
	if (!a.port_num)
		a.port_num = vd->port;
	va = calloc(1, sizeof(*va));
	if (!va)
		return -ENOMEM;
	ah = ibv_create_ah(vd->pd, &a);
	if (!ah) {
		int ret = qps_verbs_errno();

		free(va);
		if (ret == -EHOSTUNREACH || ret == -ENODATA ||
		    ret == -ETIMEDOUT)
			ret = -EHOSTUNREACH;	/* no neighbour for the GID */
		return ret;
	}
	va->base.ibv = ah;
	va->base.dev = dev;
	*ah_out = &va->base;
	return 0;
}

int qps_verbs_destroy_ah(struct qps_ah *ah)
{
	struct qps_verbs_ah *va;
	int ret;

	if (!ah)
		return -EINVAL;
	va = qps_verbs_container_of(ah, struct qps_verbs_ah, base);
	ret = ibv_destroy_ah(ah->ibv);
	if (ret)
		return qps_verbs_ret(ret);
	free(va);
	return 0;
}

/* ::ffff:a.b.c.d with a multicast a.b.c.d: the IPv4 group to join. */
static bool gid_group(const union ibv_gid *gid, struct in_addr *group)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	if (memcmp(gid->raw, pfx, sizeof(pfx)) != 0)
		return false;
	memcpy(&group->s_addr, &gid->raw[12], 4);
	return IN_MULTICAST(ntohl(group->s_addr));
}

int qps_verbs_attach_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			   uint16_t lid)
{
	struct in_addr group, any = { 0 };
	bool ip;
	int ret;

	if (!gid || qp->qp_type != IBV_QPT_UD)
		return -EINVAL;
	ip = gid_group(gid, &group);
	if (ip) {
		ret = qps_verbs_mcast_attach(qp->dev, group, any);
		if (ret)
			return ret;
	}
	ret = qps_verbs_ret(ibv_attach_mcast(qps_verbs_qp(qp)->qp, gid, lid));
	if (ret && ip)
		qps_verbs_mcast_detach(qp->dev, group, any);
	return ret;
}

int qps_verbs_detach_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			   uint16_t lid)
{
	struct in_addr group, any = { 0 };
	int ret;

	if (!gid || qp->qp_type != IBV_QPT_UD)
		return -EINVAL;
	ret = qps_verbs_ret(ibv_detach_mcast(qps_verbs_qp(qp)->qp, gid, lid));
	if (!ret && gid_group(gid, &group))
		qps_verbs_mcast_detach(qp->dev, group, any);
	return ret;
}
