// SPDX-License-Identifier: MIT
/*
 * Neighbour publishing: a real RoCE NIC sits on a netdev whose ARP table
 * holds its peers, and the verbs provider resolves next hops there. The
 * emulated port has no netdev, so open adds a permanent entry (this
 * port's IPv4 -> its MAC) on $QPS_IBV_EMU_NETDEV and close removes it:
 * every context on the wire is then a resolved neighbour of every other.
 */
#include "ibvemu.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

struct neigh_req {
	struct nlmsghdr nh;
	struct ndmsg ndm;
	char attrs[64];
};

static void add_attr(struct neigh_req *r, unsigned short type,
		     const void *data, unsigned short len)
{
	struct rtattr *a = (struct rtattr *)(void *)
		((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Send @r and wait for the kernel's ack: 0 or its -errno. */
static int nl_talk(struct neigh_req *r)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	char buf[512];
	struct nlmsghdr *h = (struct nlmsghdr *)(void *)buf;
	ssize_t n;
	int fd, ret;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, r, r->nh.nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0) {
		ret = -errno;
		goto out;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	ret = -EPROTO;
	if (NLMSG_OK(h, (size_t)n) && h->nlmsg_type == NLMSG_ERROR &&
	    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
		struct nlmsgerr *e = NLMSG_DATA(h);

		ret = e->error;	/* already negative, 0 = ack */
	}
out:
	close(fd);
	return ret;
}

int qps_ibvemu_neigh(int ifindex, struct in_addr ip, const uint8_t mac[6],
		     bool add)
{
	struct neigh_req r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	r.nh.nlmsg_type = add ? RTM_NEWNEIGH : RTM_DELNEIGH;
	r.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	if (add)
		r.nh.nlmsg_flags |= NLM_F_CREATE | NLM_F_REPLACE;
	r.nh.nlmsg_seq = 1;
	r.ndm.ndm_family = AF_INET;
	r.ndm.ndm_ifindex = ifindex;
	r.ndm.ndm_state = NUD_PERMANENT;
	add_attr(&r, NDA_DST, &ip.s_addr, 4);
	if (add)
		add_attr(&r, NDA_LLADDR, mac, 6);
	ret = nl_talk(&r);
	/* Gone already (the netdev was deleted first): nothing to undo. */
	if (!add && (ret == -ENOENT || ret == -ENODEV))
		ret = 0;
	return ret;
}
