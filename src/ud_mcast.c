// SPDX-License-Identifier: MIT
/*
 * Group membership of a UD context's receiving QP (send queue 0's).
 *
 * A UD datagram to a group carries QPN 0xffffff and reaches every QP
 * attached to the group's GID (::ffff:group, as RoCE v2 maps IPv4), so a
 * group is attached once, whatever the ports its endpoints are bound to:
 * the ports are told apart in software from qpsock's UD header. mcast.c
 * calls these for the first and the last (group, port) of a group.
 *
 * Two device objects make a membership: the QP's entry in the group
 * (attach_mcast) and the port's L2 filter / IGMP report (mcast_attach,
 * reference counted by the provider). The providers in the tree take the
 * second inside the first as well; asking for it here too costs one
 * reference and keeps a provider that does not correct.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "ud.h"

static void group_gid(uint32_t group, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &group, 4);
}

/* The device has no room for another group: to the application that is
 * the membership limit, -ENOBUFS as IP_ADD_MEMBERSHIP says it (the raw
 * path maps its steering rules' -ENOSPC the same way). */
static int dev_err(int ret)
{
	return ret == -ENOSPC ? -ENOBUFS : ret;
}

int qps_ud_group_attach(struct qps_ctx *ctx, uint32_t group)
{
	struct in_addr g = { .s_addr = group }, any = { .s_addr = 0 };
	union ibv_gid gid;
	bool l2;
	int ret;

	if (!IN_MULTICAST(ntohl(group)))
		return -EINVAL;
	ret = ctx->ops->mcast_attach(ctx->dev, g, any);
	if (ret < 0 && ret != -EOPNOTSUPP)
		return dev_err(ret);
	l2 = ret == 0;
	group_gid(group, &gid);
	/* RoCE has no LIDs: 0. */
	ret = ctx->ops->attach_mcast(ctx->qp, &gid, 0);
	if (ret < 0) {
		if (l2)
			ctx->ops->mcast_detach(ctx->dev, g, any);
		return dev_err(ret);
	}
	return 0;
}

/* The reverse of qps_ud_group_attach: the QP leaves first, so nothing
 * arrives for a group the port no longer filters for. */
int qps_ud_group_detach(struct qps_ctx *ctx, uint32_t group)
{
	struct in_addr g = { .s_addr = group }, any = { .s_addr = 0 };
	union ibv_gid gid;
	int ret, ret2;

	if (!IN_MULTICAST(ntohl(group)))
		return -EINVAL;
	group_gid(group, &gid);
	ret = ctx->ops->detach_mcast(ctx->qp, &gid, 0);
	ret2 = ctx->ops->mcast_detach(ctx->dev, g, any);
	if (ret2 == -EOPNOTSUPP)
		ret2 = 0;
	return ret < 0 ? ret : ret2;
}
