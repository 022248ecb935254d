/* SPDX-License-Identifier: MIT */
/*
 * IPv4 multicast membership through the kernel, for providers that sit
 * on a Linux netdev (packet, verbs): the NIC or the raw socket sends no
 * IGMP, so a kernel UDP socket joins the group on the netdev and the
 * kernel sends the reports and answers queries. See igmp.c.
 */
#ifndef QPS_IGMP_H
#define QPS_IGMP_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>

/* One (group, source) membership; source 0 = any-source join. */
struct qps_igmp_memb {
	struct qps_igmp_memb *next;
	struct in_addr group, source;
	unsigned int refs;
	int fd;			/* kernel socket holding it, -1 = none */
};

/* A list of memberships and the netdev they are made on. */
struct qps_igmp_netdev {
	struct qps_igmp_memb **list;
	pthread_mutex_t *lock;	/* the owner's, held around list changes */
	int ifindex;		/* 0: memberships are counted, none joined */
	const char *ifname;	/* SO_BINDTODEVICE; NULL: not bound */
	/* Optional link-layer half (a NIC MAC filter): called with add
	 * before the join, and with !add after the leave or a failed join.
	 * Returns 0 or -errno; a failed add refuses the membership. */
	int (*link)(void *arg, struct in_addr group, bool add);
	void *arg;
};

/* @nd for the owner's @list under @lock on @ifindex / @ifname, without a
 * link-layer half. */
void qps_igmp_netdev_init(struct qps_igmp_netdev *nd,
			  struct qps_igmp_memb **list, pthread_mutex_t *lock,
			  int ifindex, const char *ifname);

/*
 * attach: 1 when it made a new membership, 0 when it counted one more
 * reference, -EINVAL for a group that is not multicast, -ENOMEM, or the
 * -errno of the socket or the join. detach: 0 or -ENOENT; the last
 * reference leaves. close: leaves everything on the list. Each holds
 * nd->lock while it runs.
 */
int qps_igmp_attach(const struct qps_igmp_netdev *nd, struct in_addr group,
		    struct in_addr source);
int qps_igmp_detach(const struct qps_igmp_netdev *nd, struct in_addr group,
		    struct in_addr source);
void qps_igmp_close(const struct qps_igmp_netdev *nd);

#endif /* QPS_IGMP_H */
