/* SPDX-License-Identifier: MIT */
/*
 * Opening a netdev the host's IP stack also serves, for the providers on
 * one (packet, xdp): which interface, its link and its IPv4 address, and
 * the messages that explain a failed open. See host_dev.c.
 */
#ifndef QPS_HOST_DEV_H
#define QPS_HOST_DEV_H

#include "nl_neigh.h"
#include "provider.h"

/* "qpsock @who: " and the message, on stderr. */
void qps_host_log(const char *who, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* attr->dev, else $QPS_DEV; NULL (said on stderr) when neither names one. */
const char *qps_host_dev_name(const char *who,
			      const struct qps_dev_attr *attr);

/* @name's ifindex, and into @info its name, MAC and MTU; 0, -ENODEV (no
 * such interface), -ENETDOWN, -EOPNOTSUPP (not Ethernet) or -errno. */
int qps_host_dev_link(const char *who, const char *name,
		      struct qps_dev_info *info, int *ifindex);

/* Into info->addr: attr->addr when it is one of @name's IPv4 addresses,
 * else the first; 0, -EADDRNOTAVAIL or -errno. */
int qps_host_dev_addr(const char *who, const char *name,
		      const struct qps_dev_attr *attr,
		      struct qps_dev_info *info);

/* The MTU frames are checked against now: the netdev's, as the last link
 * event gave it, but never above the one at open (@info), which sized the
 * provider's buffers. */
static inline uint32_t qps_host_dev_mtu(const struct qps_dev_info *info,
					const struct qps_nl_route *route)
{
	uint32_t now = __atomic_load_n(&route->mtu, __ATOMIC_RELAXED);

	return now && now < info->mtu ? now : info->mtu;
}

/* The query op: @info as at open, with the MTU of now. */
int qps_host_dev_query(const struct qps_dev_info *info,
		       const struct qps_nl_route *route,
		       struct qps_dev_info *out);

#endif /* QPS_HOST_DEV_H */
