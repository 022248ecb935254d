// SPDX-License-Identifier: MIT
/*
 * Destination IPv4 -> next-hop MAC through the kernel's tables, with
 * libnl-route-3, for the providers that sit on a Linux netdev (packet:
 * the AF_PACKET interface; verbs: the RoCE netdev behind the port):
 *   1. route lookup (RTM_GETROUTE, as `ip route get`): the route must
 *      leave through our interface; its gateway, or else the destination
 *      itself, is the next hop; a directed broadcast maps to ff:ff:...;
 *   2. neighbour lookup (RTM_GETNEIGH for that one entry);
 *   3. an unknown or failed neighbour is resolved by the kernel: a
 *      RTM_NEWNEIGH with NTF_USE starts ARP (needs CAP_NET_ADMIN); without
 *      that right a zero-length UDP datagram to the next hop's discard
 *      port, from a socket bound to the netdev, does. The answer is
 *      awaited for up to resolve_ms (or until ARP declares the entry
 *      FAILED): -EHOSTUNREACH.
 * The core caches the answer while the generation is unchanged.
 *
 * Invalidation: a non-blocking netlink socket subscribed to neighbour,
 * IPv4 route, IPv4 address and link events is drained at most once per
 * millisecond from qps_nl_route_gen() (which the core calls on every
 * send, through the provider's route_gen) and on every resolve. A route,
 * address or link change on our interface bumps the generation; a
 * neighbour event bumps it only when a next hop we handed out changes its
 * MAC or stops being valid, so ARP's routine state changes cost nothing.
 * A netlink overrun bumps it too.
 *
 * Our traffic bypasses the kernel, so the kernel never confirms these
 * neighbours itself: an entry goes STALE and keeps its MAC until ARP
 * traffic of the kernel or an admin changes it, and those changes are
 * what the events deliver.
 */
#include "nl_neigh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if_arp.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NL_NH_PROBES 8
#define NL_DISCARD_PORT 9
/* The kernel's NUD_VALID (not in the uapi): states with a usable MAC. */
#define NL_NUD_VALID (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | \
		       NUD_PROBE | NUD_STALE | NUD_DELAY)

static void nl_log(const struct qps_nl_route *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void nl_log(const struct qps_nl_route *r, const char *fmt, ...)
{
	va_list ap;

	if (r->quiet)
		return;
	fprintf(stderr, "qpsock %s: ", r->tag ? r->tag : "route");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

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

/* r->lock held from here on, unless said otherwise. */
static void reset_all(struct qps_nl_route *r)
{

	memset(r->nh, 0, sizeof(r->nh));
	r->nh_overflow = false;
	r->resets++;
	/* Release: pairs with the acquire in qps_nl_route_gen(); a
	 * reader of the new generation also sees the cleared table. */
	__atomic_add_fetch(&r->gen, 1, __ATOMIC_RELEASE);
}

static struct qps_nl_nh *nh_find(struct qps_nl_route *r,
				     uint32_t addr)
{
	uint32_t h = ntohl(addr) * 2654435761u, i;

	for (i = 0; i < NL_NH_PROBES; i++) {
		struct qps_nl_nh *e = &r->nh[(h + i) % QPS_NL_NH_SLOTS];

		if (e->addr == addr)
			return e;
	}
	return NULL;
}

static void nh_remember(struct qps_nl_route *r, uint32_t addr,
			const uint8_t mac[6])
{
	uint32_t h = ntohl(addr) * 2654435761u, i;
	struct qps_nl_nh *e = nh_find(r, addr);

	for (i = 0; !e && i < NL_NH_PROBES; i++) {
		struct qps_nl_nh *c = &r->nh[(h + i) % QPS_NL_NH_SLOTS];

		if (!c->addr)
			e = c;
	}
	if (!e) {
		/* Forgotten entries can no longer be checked one by one:
		 * from now on every neighbour event resets. */
		e = &r->nh[h % QPS_NL_NH_SLOTS];
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

static void neigh_event(struct qps_nl_route *r, struct nlmsghdr *nlh)
{
	struct rtnl_neigh *n = NULL;
	struct qps_nl_nh *e;
	struct nl_addr *dst;
	uint8_t mac[6];
	uint32_t addr;

	if (rtnl_neigh_parse(nlh, &n) < 0)
		return;
	dst = rtnl_neigh_get_dst(n);
	if (rtnl_neigh_get_family(n) != AF_INET ||
	    rtnl_neigh_get_ifindex(n) != r->ifindex || !dst ||
	    nl_addr_get_len(dst) != 4)
		goto out;
	memcpy(&addr, nl_addr_get_binary_addr(dst), 4);
	e = nh_find(r, addr);
	if (!e) {
		if (r->nh_overflow)
			reset_all(r);
		goto out;
	}
	if (nlh->nlmsg_type == RTM_DELNEIGH ||
	    !(rtnl_neigh_get_state(n) & NL_NUD_VALID) || !lladdr_mac(n, mac) ||
	    memcmp(mac, e->mac, 6) != 0)
		reset_all(r);
out:
	rtnl_neigh_put(n);
}

/* A link event of our netdev: its MTU now (RTM_NEWLINK carries IFLA_MTU),
 * stored before the generation moves (reset_all's release). */
static void link_mtu(struct qps_nl_route *r, struct nlmsghdr *nlh)
{
	struct nlattr *tb[IFLA_MAX + 1];

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    nlmsg_parse(nlh, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL) < 0 ||
	    !tb[IFLA_MTU] || nla_len(tb[IFLA_MTU]) < (int)sizeof(uint32_t))
		return;
	__atomic_store_n(&r->mtu, nla_get_u32(tb[IFLA_MTU]), __ATOMIC_RELAXED);
}

static int ev_cb(struct nl_msg *msg, void *arg)
{
	struct qps_nl_route *r = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(msg);

	r->events++;
	switch (nlh->nlmsg_type) {
	case RTM_NEWNEIGH:
	case RTM_DELNEIGH:
		neigh_event(r, nlh);
		break;
	case RTM_NEWROUTE:
	case RTM_DELROUTE:
	case RTM_NEWADDR:
	case RTM_DELADDR:
		/* Subscribed to the IPv4 groups only. */
		reset_all(r);
		break;
	case RTM_NEWLINK:
	case RTM_DELLINK:
		if (nlmsg_datalen(nlh) >= (int)sizeof(struct ifinfomsg) &&
		    ((struct ifinfomsg *)nlmsg_data(nlh))->ifi_index ==
		    r->ifindex) {
			link_mtu(r, nlh);
			reset_all(r);
		}
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

static void drain_events(struct qps_nl_route *r)
{
	int n;

	if (!r->ev || !r->ev_cb)
		return;
	do {
		n = nl_recvmsgs_report(r->ev, r->ev_cb);
	} while (n > 0);
	/* Anything but "nothing left" (an overrun above all) may have lost
	 * an event: assume everything changed. */
	if (n < 0 && n != -NLE_AGAIN)
		reset_all(r);
}

int qps_nl_route_open(struct qps_nl_route *r, int ifindex, const char *ifname,
		      const char *tag, const char *resolve_env)
{
	const char *env = resolve_env ? getenv(resolve_env) : NULL;
	int ret;

	/* SO_BINDTODEVICE takes the name: a truncated one is another
	 * interface, or none. */
	ret = snprintf(r->ifname, sizeof(r->ifname), "%s", ifname);
	if (ret < 0 || (size_t)ret >= sizeof(r->ifname))
		return -ENAMETOOLONG;
	r->ifindex = ifindex;
	r->tag = tag;
	r->gen = 1;
	r->resolve_ms = QPS_NL_RESOLVE_MS;
	if (env && *env)
		r->resolve_ms = (uint32_t)strtoul(env, NULL, 10);
	r->cmd = nl_socket_alloc();
	r->ev = nl_socket_alloc();
	r->ev_cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!r->cmd || !r->ev || !r->ev_cb)
		return -ENOMEM;
	nl_cb_set(r->ev_cb, NL_CB_VALID, NL_CB_CUSTOM, ev_cb, r);
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

void qps_nl_route_close(struct qps_nl_route *r)
{
	if (r->cmd)
		nl_socket_free(r->cmd);
	if (r->ev)
		nl_socket_free(r->ev);
	if (r->ev_cb)
		nl_cb_put(r->ev_cb);
	r->cmd = r->ev = NULL;
	r->ev_cb = NULL;
}

/* Lock-free, called on every send: drains events once per period. */
uint64_t qps_nl_route_gen(struct qps_nl_route *r)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);

	if (now >= __atomic_load_n(&r->next_ns, __ATOMIC_RELAXED) &&
	    !pthread_mutex_trylock(&r->lock)) {
		drain_events(r);
		__atomic_store_n(&r->next_ns, now + QPS_NL_EV_PERIOD_NS,
				 __ATOMIC_RELAXED);
		pthread_mutex_unlock(&r->lock);
	}
	/* Acquire: pairs with the release in reset_all(). */
	return __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
}

enum route_kind { ROUTE_NEXTHOP, ROUTE_BROADCAST, ROUTE_LOCAL };

static int lookup_route(struct qps_nl_route *r, struct in_addr dst,
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
	ret = rtnl_route_lookup(r->cmd, a, &route);
	nl_addr_put(a);
	inet_ntop(AF_INET, &dst, buf, sizeof(buf));
	if (ret < 0 || !route) {
		nl_log(r, "no route to %s", buf);
		return -EHOSTUNREACH;
	}
	type = rtnl_route_get_type(route);
	hop = rtnl_route_get_nnexthops(route) > 0 ?
	      rtnl_route_nexthop_n(route, 0) : NULL;
	oif = hop ? rtnl_route_nh_get_ifindex(hop) : 0;
	gw = hop ? rtnl_route_nh_get_gateway(hop) : NULL;
	ret = -EHOSTUNREACH;
	if (type == RTN_LOCAL && r->local_ok) {
		*kind = ROUTE_LOCAL;
		ret = 0;
	} else if (type == RTN_LOCAL) {
		nl_log(r, "%s is an address of this host: frames from %s go "
		       "to the wire, not to local sockets", buf, r->ifname);
	} else if (type != RTN_UNICAST && type != RTN_BROADCAST) {
		nl_log(r, "the route to %s is not unicast (type %d)", buf,
		       type);
	} else if (oif != r->ifindex) {
		nl_log(r, "the route to %s leaves through interface #%d, "
		       "not %s", buf, oif, r->ifname);
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
static int neigh_get(struct qps_nl_route *r, uint32_t nh,
		     struct neigh_reply *out)
{
	struct ndmsg ndm = { .ndm_family = AF_INET,
			     .ndm_ifindex = r->ifindex };
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
		ret = nl_send_auto(r->cmd, msg);
	nlmsg_free(msg);
	if (ret < 0)
		return nl_to_errno(ret);
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return -ENOMEM;
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, neigh_reply_cb, out);
	ret = nl_recvmsgs(r->cmd, cb);
	nl_cb_put(cb);
	if (ret == -NLE_OBJ_NOTFOUND)
		return 0;	/* no entry: NUD_NONE */
	return ret < 0 ? nl_to_errno(ret) : 0;
}

/* Ask the kernel to resolve @nh: NTF_USE, else a datagram. */
static void neigh_trigger(struct qps_nl_route *r, uint32_t nh)
{
	struct ndmsg ndm = { .ndm_family = AF_INET,
			     .ndm_ifindex = r->ifindex,
			     .ndm_flags = NTF_USE };
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(NL_DISCARD_PORT),
				   .sin_addr.s_addr = nh };
	struct nl_msg *msg;
	int ret = -ENOMEM, fd;

	msg = nlmsg_alloc_simple(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_ACK);
	if (msg) {
		ret = nlmsg_append(msg, &ndm, sizeof(ndm), NLMSG_ALIGNTO);
		if (!ret)
			ret = nla_put(msg, NDA_DST, 4, &nh);
		if (!ret)
			ret = nl_send_auto(r->cmd, msg);
		if (ret >= 0)
			ret = nl_wait_for_ack(r->cmd);
		nlmsg_free(msg);
	}
	if (ret >= 0)
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	/* Bound to the netdev, so the kernel resolves on that link even
	 * where its own route would pick another; connect() chooses the
	 * source address, send() needs the neighbour and starts ARP. */
	(void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, r->ifname,
			 (socklen_t)strlen(r->ifname));
	/* An empty datagram: any buffer will do, none is read. */
	if (!connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		(void)send(fd, &nh, 0, MSG_DONTWAIT);
	close(fd);
}

/* @wait false: one look, ARP started, -EAGAIN while it runs. */
static int neigh_wait(struct qps_nl_route *r, uint32_t nh,
		      uint8_t mac[6], bool wait)
{
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) +
			    (uint64_t)r->resolve_ms * 1000000u;
	struct timespec nap = { 0, 500000 };
	bool triggered = false, incomplete = false;
	struct neigh_reply nr;
	char buf[INET_ADDRSTRLEN];

	for (;;) {
		int ret = neigh_get(r, nh, &nr);

		if (ret < 0)
			return ret;
		if ((nr.state & NL_NUD_VALID) && nr.has_mac) {
			memcpy(mac, nr.mac, 6);
			return 0;
		}
		if (!wait) {
			/* ARP asked again, as the kernel's next datagram to
			 * it would; one that failed is unreachable until it
			 * answers. */
			if (!(nr.state & NUD_INCOMPLETE))
				neigh_trigger(r, nh);
			return (nr.state & NUD_FAILED) ? -EHOSTUNREACH :
			       -EAGAIN;
		}
		if (!triggered) {
			neigh_trigger(r, nh);
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
	nl_log(r, "%s did not answer ARP on %s",
	       inet_ntop(AF_INET, &nh, buf, sizeof(buf)), r->ifname);
	return -EHOSTUNREACH;
}

/* The MAC of the Ethernet netdev that holds local address @dst. */
static int local_mac(const struct qps_nl_route *r, struct in_addr dst,
		     uint8_t mac[6])
{
	struct ifaddrs *ifa, *it;
	struct ifreq ifr;
	int ret = -EHOSTUNREACH, fd;

	if (getifaddrs(&ifa))
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	for (it = ifa; it; it = it->ifa_next) {
		const struct sockaddr_in *sin = (const void *)it->ifa_addr;

		if (sin && sin->sin_family == AF_INET &&
		    sin->sin_addr.s_addr == dst.s_addr) {
			int n = snprintf(ifr.ifr_name, sizeof(ifr.ifr_name),
					 "%s", it->ifa_name);

			/* The kernel's names fit; one that did not would
			 * name another netdev: none then. */
			if (n < 0 || (size_t)n >= sizeof(ifr.ifr_name))
				ifr.ifr_name[0] = '\0';
			break;
		}
	}
	freeifaddrs(ifa);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (ifr.ifr_name[0] && fd >= 0 && !ioctl(fd, SIOCGIFHWADDR, &ifr) &&
	    ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER) {
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
		ret = 0;
	}
	if (fd >= 0)
		close(fd);
	if (ret) {
		char buf[INET_ADDRSTRLEN];

		nl_log(r, "%s is an address of this host, not on an Ethernet "
		       "netdev", inet_ntop(AF_INET, &dst, buf, sizeof(buf)));
	}
	return ret;
}

/*
 * The slot of @dst among the refusals said. Direct-mapped: destinations
 * sharing a slot may be reported again, the cost of a fixed table.
 */
static struct qps_nl_refused *refused_slot(struct qps_nl_route *r,
					   struct in_addr dst)
{
	uint32_t h = ntohl(dst.s_addr) * 2654435761u;

	return &r->refused[(h >> 16) % QPS_NL_REFUSED_SLOTS];
}

static int nl_resolve(struct qps_nl_route *r, struct in_addr dst,
		      uint8_t mac_out[6], bool wait)
{
	enum route_kind kind = ROUTE_NEXTHOP;
	struct qps_nl_refused *said;
	uint32_t nh = 0;
	uint64_t gen;
	int ret;

	if (!mac_out)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	drain_events(r);
	/* Relaxed: every writer of gen holds r->lock, as we do. */
	gen = __atomic_load_n(&r->gen, __ATOMIC_RELAXED);
	said = refused_slot(r, dst);
	/* A refusal of @dst already said in this generation is not said
	 * again; the caller gets its -errno all the same. */
	r->quiet = said->addr == dst.s_addr && said->gen == gen;
	ret = lookup_route(r, dst, &nh, &kind);
	if (!ret && kind == ROUTE_BROADCAST)
		memset(mac_out, 0xff, 6);
	else if (!ret && kind == ROUTE_LOCAL)
		ret = local_mac(r, dst, mac_out);
	else if (!ret && !wait && r->quiet)
		ret = -EHOSTUNREACH;	/* refused in this generation */
	else if (!ret)
		ret = neigh_wait(r, nh, mac_out, wait);
	if (!ret && kind == ROUTE_NEXTHOP)
		nh_remember(r, nh, mac_out);
	if (ret == -EHOSTUNREACH) {	/* what every refusal said */
		said->addr = dst.s_addr;
		said->gen = gen;
	} else if (said->addr == dst.s_addr) {
		said->gen = 0;	/* a later refusal is news */
	}
	r->quiet = false;
	pthread_mutex_unlock(&r->lock);
	return ret;
}

int qps_nl_resolve(struct qps_nl_route *r, struct in_addr dst,
		   uint8_t mac_out[6])
{
	return nl_resolve(r, dst, mac_out, true);
}

int qps_nl_resolve_nowait(struct qps_nl_route *r, struct in_addr dst,
			  uint8_t mac_out[6])
{
	return nl_resolve(r, dst, mac_out, false);
}
