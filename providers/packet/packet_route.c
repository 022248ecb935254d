// SPDX-License-Identifier: MIT
/*
 * Destination IPv4 -> next-hop MAC through the kernel's tables, with
 * libnl-route-3:
 *   1. route lookup (RTM_GETROUTE, as `ip route get`): the route must
 *      leave through our interface; its gateway, or else the destination
 *      itself, is the next hop; a directed broadcast maps to ff:ff:...;
 *   2. neighbour lookup (RTM_GETNEIGH for that one entry);
 *   3. an unknown or failed neighbour is resolved by the kernel: a
 *      RTM_NEWNEIGH with NTF_USE starts ARP (needs CAP_NET_ADMIN); without
 *      that right a zero-length UDP datagram to the next hop's discard
 *      port does. The answer is awaited for up to QPS_PACKET_RESOLVE_MS
 *      (or until ARP declares the entry FAILED): -EHOSTUNREACH.
 * The core caches the answer while route_gen() is unchanged.
 *
 * Invalidation: a non-blocking netlink socket subscribed to neighbour,
 * IPv4 route, IPv4 address and link events is drained at most once per
 * millisecond from route_gen() (which the core calls on every send) and
 * on every resolve. A route, address or link change on our interface
 * bumps the generation; a neighbour event bumps it only when a next hop
 * we handed out changes its MAC or stops being valid, so ARP's routine
 * state changes cost nothing. A netlink overrun bumps it too.
 *
 * Our traffic bypasses the kernel, so the kernel never confirms these
 * neighbours itself: an entry goes STALE and keeps its MAC until ARP
 * traffic of the kernel or an admin changes it, and those changes are
 * what the events deliver.
 */
#include "packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PKT_NH_PROBES 8
#define PKT_DISCARD_PORT 9
/* The kernel's NUD_VALID (not in the uapi): states with a usable MAC. */
#define PKT_NUD_VALID (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | \
		       NUD_PROBE | NUD_STALE | NUD_DELAY)

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int nl_to_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_NOADDR:
		return -EADDRNOTAVAIL;
	default:
		return -EIO;
	}
}

/* route.lock held from here on, unless said otherwise. */
static void reset_all(struct qps_packet_dev *dev)
{
	struct qps_packet_route *r = &dev->route;

	memset(r->nh, 0, sizeof(r->nh));
	r->nh_overflow = false;
	r->resets++;
	/* Release: pairs with the acquire in qps_packet_route_gen(); a
	 * reader of the new generation also sees the cleared table. */
	__atomic_add_fetch(&r->gen, 1, __ATOMIC_RELEASE);
}

static struct qps_packet_nh *nh_find(struct qps_packet_route *r,
				     uint32_t addr)
{
	uint32_t h = ntohl(addr) * 2654435761u, i;

	for (i = 0; i < PKT_NH_PROBES; i++) {
		struct qps_packet_nh *e = &r->nh[(h + i) % QPS_PACKET_NH_SLOTS];

		if (e->addr == addr)
			return e;
	}
	return NULL;
}

static void nh_remember(struct qps_packet_route *r, uint32_t addr,
			const uint8_t mac[6])
{
	uint32_t h = ntohl(addr) * 2654435761u, i;
	struct qps_packet_nh *e = nh_find(r, addr);

	for (i = 0; !e && i < PKT_NH_PROBES; i++) {
		struct qps_packet_nh *c = &r->nh[(h + i) % QPS_PACKET_NH_SLOTS];

		if (!c->addr)
			e = c;
	}
	if (!e) {
		/* Forgotten entries can no longer be checked one by one:
		 * from now on every neighbour event resets. */
		e = &r->nh[h % QPS_PACKET_NH_SLOTS];
		r->nh_overflow = true;
	}
	e->addr = addr;
	memcpy(e->mac, mac, 6);
}

static bool lladdr_mac(struct rtnl_neigh *n, uint8_t mac[6])
{
	struct nl_addr *ll = rtnl_neigh_get_lladdr(n);

	if (!ll || nl_addr_get_len(ll) != 6)
		return false;
	memcpy(mac, nl_addr_get_binary_addr(ll), 6);
	return true;
}

static void neigh_event(struct qps_packet_dev *dev, struct nlmsghdr *nlh)
{
	struct qps_packet_route *r = &dev->route;
	struct rtnl_neigh *n = NULL;
	struct qps_packet_nh *e;
	struct nl_addr *dst;
	uint8_t mac[6];
	uint32_t addr;

	if (rtnl_neigh_parse(nlh, &n) < 0)
		return;
	dst = rtnl_neigh_get_dst(n);
	if (rtnl_neigh_get_family(n) != AF_INET ||
	    rtnl_neigh_get_ifindex(n) != dev->ifindex || !dst ||
	    nl_addr_get_len(dst) != 4)
		goto out;
	memcpy(&addr, nl_addr_get_binary_addr(dst), 4);
	e = nh_find(r, addr);
	if (!e) {
		if (r->nh_overflow)
			reset_all(dev);
		goto out;
	}
	if (nlh->nlmsg_type == RTM_DELNEIGH ||
	    !(rtnl_neigh_get_state(n) & PKT_NUD_VALID) || !lladdr_mac(n, mac) ||
	    memcmp(mac, e->mac, 6))
		reset_all(dev);
out:
	rtnl_neigh_put(n);
}

static int ev_cb(struct nl_msg *msg, void *arg)
{
	struct qps_packet_dev *dev = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(msg);

	dev->route.events++;
	switch (nlh->nlmsg_type) {
	case RTM_NEWNEIGH:
	case RTM_DELNEIGH:
		neigh_event(dev, nlh);
		break;
	case RTM_NEWROUTE:
	case RTM_DELROUTE:
	case RTM_NEWADDR:
	case RTM_DELADDR:
		/* Subscribed to the IPv4 groups only. */
		reset_all(dev);
		break;
	case RTM_NEWLINK:
	case RTM_DELLINK:
		if (nlmsg_datalen(nlh) >= (int)sizeof(struct ifinfomsg) &&
		    ((struct ifinfomsg *)nlmsg_data(nlh))->ifi_index ==
		    dev->ifindex)
			reset_all(dev);
		break;
	default:
		break;
	}
	return NL_OK;
}

static int ev_seq_ok(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	return NL_OK;	/* events carry no sequence number of ours */
}

static void drain_events(struct qps_packet_dev *dev)
{
	struct qps_packet_route *r = &dev->route;
	int n;

	if (!r->ev || !r->ev_cb)
		return;
	do {
		n = nl_recvmsgs_report(r->ev, r->ev_cb);
	} while (n > 0);
	/* Anything but "nothing left" (an overrun above all) may have lost
	 * an event: assume everything changed. */
	if (n < 0 && n != -NLE_AGAIN)
		reset_all(dev);
}

int qps_packet_route_open(struct qps_packet_dev *dev)
{
	struct qps_packet_route *r = &dev->route;
	const char *env = getenv("QPS_PACKET_RESOLVE_MS");
	int ret;

	r->gen = 1;
	r->resolve_ms = QPS_PACKET_RESOLVE_MS;
	if (env && *env)
		r->resolve_ms = (uint32_t)strtoul(env, NULL, 10);
	r->cmd = nl_socket_alloc();
	r->ev = nl_socket_alloc();
	r->ev_cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!r->cmd || !r->ev || !r->ev_cb)
		return -ENOMEM;
	nl_cb_set(r->ev_cb, NL_CB_VALID, NL_CB_CUSTOM, ev_cb, dev);
	nl_cb_set(r->ev_cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, ev_seq_ok, NULL);
	/* Queries read exactly their reply; only the trigger asks for an
	 * acknowledgement. */
	nl_socket_disable_auto_ack(r->cmd);
	ret = nl_connect(r->cmd, NETLINK_ROUTE);
	if (ret < 0)
		return nl_to_errno(ret);
	nl_socket_disable_seq_check(r->ev);
	ret = nl_connect(r->ev, NETLINK_ROUTE);
	if (!ret)
		ret = nl_socket_add_memberships(r->ev, RTNLGRP_NEIGH,
						RTNLGRP_IPV4_ROUTE,
						RTNLGRP_IPV4_IFADDR,
						RTNLGRP_LINK, 0);
	if (!ret)
		ret = nl_socket_set_nonblocking(r->ev);
	if (!ret)
		ret = nl_socket_set_buffer_size(r->ev, 1 << 20, 0);
	return ret < 0 ? nl_to_errno(ret) : 0;
}

void qps_packet_route_close(struct qps_packet_dev *dev)
{
	if (dev->route.cmd)
		nl_socket_free(dev->route.cmd);
	if (dev->route.ev)
		nl_socket_free(dev->route.ev);
	if (dev->route.ev_cb)
		nl_cb_put(dev->route.ev_cb);
	dev->route.cmd = dev->route.ev = NULL;
	dev->route.ev_cb = NULL;
}

/* Lock-free, called on every send: drains events once per period. */
uint64_t qps_packet_route_gen(struct qps_dev *d)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct qps_packet_route *r = &dev->route;
	uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);

	if (now >= __atomic_load_n(&r->next_ns, __ATOMIC_RELAXED) &&
	    !pthread_mutex_trylock(&r->lock)) {
		drain_events(dev);
		__atomic_store_n(&r->next_ns, now + QPS_PACKET_EV_PERIOD_NS,
				 __ATOMIC_RELAXED);
		pthread_mutex_unlock(&r->lock);
	}
	/* Acquire: pairs with the release in reset_all(). */
	return __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
}

enum route_kind { ROUTE_NEXTHOP, ROUTE_BROADCAST };

static int lookup_route(struct qps_packet_dev *dev, struct in_addr dst,
			uint32_t *nh, enum route_kind *kind)
{
	struct rtnl_route *route = NULL;
	struct rtnl_nexthop *hop;
	struct nl_addr *a, *gw;
	char buf[INET_ADDRSTRLEN];
	int ret, type, oif;

	a = nl_addr_build(AF_INET, &dst, 4);
	if (!a)
		return -ENOMEM;
	ret = rtnl_route_lookup(dev->route.cmd, a, &route);
	nl_addr_put(a);
	inet_ntop(AF_INET, &dst, buf, sizeof(buf));
	if (ret < 0 || !route) {
		qps_packet_log("no route to %s", buf);
		return -EHOSTUNREACH;
	}
	type = rtnl_route_get_type(route);
	hop = rtnl_route_get_nnexthops(route) > 0 ?
	      rtnl_route_nexthop_n(route, 0) : NULL;
	oif = hop ? rtnl_route_nh_get_ifindex(hop) : 0;
	gw = hop ? rtnl_route_nh_get_gateway(hop) : NULL;
	ret = -EHOSTUNREACH;
	if (type == RTN_LOCAL) {
		qps_packet_log("%s is an address of this host: frames from %s "
			       "go to the wire, not to local sockets", buf,
			       dev->info.name);
	} else if (type != RTN_UNICAST && type != RTN_BROADCAST) {
		qps_packet_log("the route to %s is not unicast (type %d)", buf,
			       type);
	} else if (oif != dev->ifindex) {
		qps_packet_log("the route to %s leaves through interface #%d, "
			       "not %s", buf, oif, dev->info.name);
	} else if (type == RTN_BROADCAST) {
		*kind = ROUTE_BROADCAST;
		ret = 0;
	} else {
		*kind = ROUTE_NEXTHOP;
		*nh = dst.s_addr;
		if (gw && nl_addr_get_family(gw) == AF_INET &&
		    nl_addr_get_len(gw) == 4)
			memcpy(nh, nl_addr_get_binary_addr(gw), 4);
		ret = 0;
	}
	rtnl_route_put(route);
	return ret;
}

struct neigh_reply {
	int state;
	bool has_mac;
	uint8_t mac[6];
};

static int neigh_reply_cb(struct nl_msg *msg, void *arg)
{
	struct neigh_reply *out = arg;
	struct rtnl_neigh *n = NULL;

	if (rtnl_neigh_parse(nlmsg_hdr(msg), &n) < 0)
		return NL_SKIP;
	out->state = rtnl_neigh_get_state(n);
	out->has_mac = lladdr_mac(n, out->mac);
	rtnl_neigh_put(n);
	return NL_OK;
}

/* The kernel's entry for @nh on our interface; state NUD_NONE if none. */
static int neigh_get(struct qps_packet_dev *dev, uint32_t nh,
		     struct neigh_reply *out)
{
	struct ndmsg ndm = { .ndm_family = AF_INET,
			     .ndm_ifindex = dev->ifindex };
	struct nl_msg *msg;
	struct nl_cb *cb;
	int ret;

	memset(out, 0, sizeof(*out));
	msg = nlmsg_alloc_simple(RTM_GETNEIGH, 0);
	if (!msg)
		return -ENOMEM;
	ret = nlmsg_append(msg, &ndm, sizeof(ndm), NLMSG_ALIGNTO);
	if (!ret)
		ret = nla_put(msg, NDA_DST, 4, &nh);
	if (!ret)
		ret = nl_send_auto(dev->route.cmd, msg);
	nlmsg_free(msg);
	if (ret < 0)
		return nl_to_errno(ret);
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return -ENOMEM;
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, neigh_reply_cb, out);
	ret = nl_recvmsgs(dev->route.cmd, cb);
	nl_cb_put(cb);
	if (ret == -NLE_OBJ_NOTFOUND)
		return 0;	/* no entry: NUD_NONE */
	return ret < 0 ? nl_to_errno(ret) : 0;
}

/* Ask the kernel to resolve @nh: NTF_USE, else a datagram. */
static void neigh_trigger(struct qps_packet_dev *dev, uint32_t nh)
{
	struct ndmsg ndm = { .ndm_family = AF_INET,
			     .ndm_ifindex = dev->ifindex,
			     .ndm_flags = NTF_USE };
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(PKT_DISCARD_PORT),
				   .sin_addr.s_addr = nh };
	struct nl_msg *msg;
	int ret = -ENOMEM, fd;

	msg = nlmsg_alloc_simple(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_ACK);
	if (msg) {
		ret = nlmsg_append(msg, &ndm, sizeof(ndm), NLMSG_ALIGNTO);
		if (!ret)
			ret = nla_put(msg, NDA_DST, 4, &nh);
		if (!ret)
			ret = nl_send_auto(dev->route.cmd, msg);
		if (ret >= 0)
			ret = nl_wait_for_ack(dev->route.cmd);
		nlmsg_free(msg);
	}
	if (ret >= 0)
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev->info.name,
			 (socklen_t)strlen(dev->info.name));
	(void)sendto(fd, NULL, 0, MSG_DONTWAIT, (struct sockaddr *)&sin,
		     sizeof(sin));
	close(fd);
}

static int neigh_wait(struct qps_packet_dev *dev, uint32_t nh,
		      uint8_t mac[6])
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) +
			    (uint64_t)dev->route.resolve_ms * 1000000u;
	struct timespec nap = { 0, 500000 };
	bool triggered = false, incomplete = false;
	struct neigh_reply nr;
	char buf[INET_ADDRSTRLEN];
	int ret;

	for (;;) {
		ret = neigh_get(dev, nh, &nr);
		if (ret < 0)
			return ret;
		if ((nr.state & PKT_NUD_VALID) && nr.has_mac) {
			memcpy(mac, nr.mac, 6);
			return 0;
		}
		if (!triggered) {
			neigh_trigger(dev, nh);
			triggered = true;
		} else if (nr.state & NUD_INCOMPLETE) {
			incomplete = true;
		} else if ((nr.state & NUD_FAILED) && incomplete) {
			break;	/* ARP gave up */
		}
		if (now_ns(CLOCK_MONOTONIC) >= deadline)
			break;
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 16000000)
			nap.tv_nsec *= 2;
	}
	qps_packet_log("%s did not answer ARP on %s",
		       inet_ntop(AF_INET, &nh, buf, sizeof(buf)),
		       dev->info.name);
	return -EHOSTUNREACH;
}

int qps_packet_resolve(struct qps_dev *d, struct in_addr dst,
		       uint8_t mac_out[6])
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	enum route_kind kind = ROUTE_NEXTHOP;
	uint32_t nh = 0;
	int ret;

	if (!mac_out)
		return -EINVAL;
	pthread_mutex_lock(&dev->route.lock);
	drain_events(dev);
	ret = lookup_route(dev, dst, &nh, &kind);
	if (!ret && kind == ROUTE_BROADCAST)
		memset(mac_out, 0xff, 6);
	else if (!ret)
		ret = neigh_wait(dev, nh, mac_out);
	if (!ret && kind == ROUTE_NEXTHOP)
		nh_remember(&dev->route, nh, mac_out);
	pthread_mutex_unlock(&dev->route.lock);
	return ret;
}
