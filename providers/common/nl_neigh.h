/* SPDX-License-Identifier: MIT */
/*
 * IPv4 destination -> next-hop MAC through the kernel's route and
 * neighbour tables (rtnetlink, libnl-route-3), for providers that sit on
 * a Linux netdev: packet (AF_PACKET) and verbs (the RoCE netdev behind a
 * port). One struct qps_nl_route per netdev; see nl_neigh.c.
 */
#ifndef QPS_NL_NEIGH_H
#define QPS_NL_NEIGH_H

#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define QPS_NL_NH_SLOTS 256
#define QPS_NL_RESOLVE_MS 3000		/* ARP gives up after ~3 s too */
#define QPS_NL_EV_PERIOD_NS 1000000	/* netlink events drained per ms */
#define QPS_NL_REFUSED_SLOTS 64

struct nl_sock;
struct nl_cb;

struct qps_nl_nh {
	uint32_t addr;		/* next hop, network order; 0 = free */
	uint8_t mac[6];
};

/* A destination refused, and said why, in generation @gen (0: none). */
struct qps_nl_refused {
	uint32_t addr;		/* network order */
	uint64_t gen;
};

struct qps_nl_route {
	/* Everything below but gen and next_ns. The owner initialises and
	 * destroys it (it may outlive a failed open); the functions here
	 * take it themselves. */
	pthread_mutex_t lock;
	struct nl_sock *cmd;		/* queries, blocking */
	struct nl_sock *ev;		/* events, non-blocking */
	struct nl_cb *ev_cb;		/* their handler */
	uint64_t gen;			/* atomic */
	/* The netdev's MTU as the last link event (or the owner, at open)
	 * gave it; 0 = not known. Atomic. */
	uint32_t mtu;
	uint64_t next_ns;		/* atomic: next event drain */
	struct qps_nl_nh nh[QPS_NL_NH_SLOTS];
	bool nh_overflow;		/* an entry was evicted */
	uint32_t resolve_ms;
	uint64_t events, resets;
	int ifindex;
	char ifname[IF_NAMESIZE];
	const char *tag;		/* provider name, for messages */
	/* A destination that is an address of this host resolves to the
	 * MAC of the Ethernet netdev holding it (another RDMA port of this
	 * host, reached over the wire), instead of -EHOSTUNREACH. Set by
	 * the owner after open; the packet provider leaves it off, since
	 * frames it sends never reach local sockets. */
	bool local_ok;
	/* Why a destination is refused is printed once per destination
	 * and generation, not on every send of an outage. */
	struct qps_nl_refused refused[QPS_NL_REFUSED_SLOTS];
	bool quiet;			/* this resolve's refusal was said */
};

/*
 * qps_nl_route_open - connect the query and event sockets for the netdev
 * @ifindex/@ifname; @resolve_env names an environment variable that
 * overrides QPS_NL_RESOLVE_MS (NULL: none). 0 or -errno (-ENAMETOOLONG:
 * @ifname does not fit IF_NAMESIZE); on failure qps_nl_route_close()
 * releases what was set up.
 */
int qps_nl_route_open(struct qps_nl_route *r, int ifindex, const char *ifname,
		      const char *tag, const char *resolve_env);
void qps_nl_route_close(struct qps_nl_route *r);

/* The generation: lock-free, drains pending events at most once per
 * QPS_NL_EV_PERIOD_NS. Resolutions handed out under an older generation
 * may be stale. */
uint64_t qps_nl_route_gen(struct qps_nl_route *r);

/*
 * qps_nl_resolve - the MAC of @dst's next hop: the route must leave
 * through our netdev; a directed broadcast gives ff:ff:ff:ff:ff:ff; an
 * unknown neighbour is resolved by the kernel (ARP), waited for at most
 * resolve_ms. -EHOSTUNREACH when there is no usable route or no answer.
 */
int qps_nl_resolve(struct qps_nl_route *r, struct in_addr dst,
		   uint8_t mac_out[6]);
/* As qps_nl_resolve, but never waits: an unknown neighbour has the
 * kernel start ARP and gives -EAGAIN (a later call finds it). */
int qps_nl_resolve_nowait(struct qps_nl_route *r, struct in_addr dst,
			  uint8_t mac_out[6]);

#endif /* QPS_NL_NEIGH_H */
