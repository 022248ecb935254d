/* SPDX-License-Identifier: MIT */
/*
 * Endpoints and the endpoint table of a context (endpoint.c). The table
 * and the endpoints' bind, connect and membership state are under
 * ctx->ctl_lock, an endpoint's receive queue under ctx->rx.lock (rx.h);
 * the lock order is said once, at struct qps_ctx (qps_int.h).
 */
#ifndef QPS_ENDPOINT_H
#define QPS_ENDPOINT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "txq_select.h"

#define QPS_DEFAULT_MAX_EP 1024
#define QPS_MAX_EP 65536u	/* the largest max_ep */
#define QPS_IP_TTL_DEFAULT 64	/* Linux's net.ipv4.ip_default_ttl */
#define QPS_IP_MC_TTL_DEFAULT 1	/* IP_MULTICAST_TTL's default */
/* QPS_OPT_TIMESTAMP's receive and transmit flags. */
#define QPS_TS_RX_MASK (QPS_TS_RX_SOFTWARE | QPS_TS_RX_DEVICE)
#define QPS_TS_TX_MASK (QPS_TS_TX_SOFTWARE | QPS_TS_TX_DEVICE)
#define QPS_EPHEMERAL_LO 32768
#define QPS_EPHEMERAL_HI 60999

struct qps_conn;
struct qps_ctx;
struct qps_ep_mc;
struct qps_rxd;
struct qps_stat_ep;

/* A MAC address in the first 6 bytes of a word (the other two zero), so
 * that it can be loaded and stored whole (struct qps_ep peer_mac48). */
static inline uint64_t qps_mac48_pack(const uint8_t mac[6])
{
	uint64_t v = 0;

	memcpy(&v, mac, 6);
	return v;
}

static inline void qps_mac48_unpack(uint64_t v, uint8_t mac[6])
{
	memcpy(mac, &v, 6);
}

enum qps_ep_state {
	QPS_EP_FREE = 0,
	QPS_EP_OPEN,
	QPS_EP_CLOSED,
};

struct qps_ep {
	struct qps_ctx *ctx;
	enum qps_ep_state state;

	bool nonblock;
	bool reuseaddr;
	bool reuseport;
	/* The kernel socket holding the bound port on the host's stack
	 * (provider.h hold_port), or -1. Under ctl_lock. */
	int kfd;
	/* The caller's socket to hold the port with (qps_ep_adopt_fd), or
	 * -1: never closed here. Under ctl_lock. */
	int adopt_fd;
	bool pktinfo;
	bool bound;
	bool connected;
	int priority;
	int rcvtimeo_ms;
	int busy_poll_us;	/* QPS_OPT_BUSY_POLL */
	/* IPv4 header fields (QPS_OPT_TTL, _MULTICAST_TTL, _TOS): set
	 * without a lock, read by senders (relaxed bytes). */
	uint8_t ttl;
	uint8_t mc_ttl;
	uint8_t tos;
	uint8_t mc_loop;	/* QPS_OPT_MULTICAST_LOOP, the same way */
	int sndtimeo_ms;
	int error;
	uint32_t rcvbuf;

	/* peer, connected and txq_tuple are written by connect holding every
	 * send queue's lock (and ctl_lock); senders read them under the lock
	 * of the send queue they use. */
	struct sockaddr_in local;
	struct sockaddr_in peer;
	/* The peer's MAC (qps_mac48_pack) and the route
	 * generation it was resolved under, published as one update by
	 * qps_ep_peer_mac_store (under peer_lock) and read without a lock
	 * by qps_ep_peer_mac_load. */
	uint64_t peer_mac48;
	uint64_t peer_route_gen;
	uint8_t peer_lock;
	/* Send-QP selection (txq_select.h): the cached pick of a connected
	 * endpoint and the 4-tuple it hashes. */
	struct qps_txq_cache txq_cache;
	struct qps_txq_tuple txq_tuple;

	/* Receive queue; ring of rxq_cap, guarded by ctx->rx.lock, as are
	 * pktinfo, rxts and the eventfd state. */
	struct qps_rxd *rxq;
	uint32_t rxq_cap;	/* grows up to rcvbuf when it is larger */
	uint32_t rxq_head;	/* next to pop */
	uint32_t rxq_count;
	uint32_t rxq_ring;	/* of them, in the device's receive buffers */
	uint64_t rxq_bytes;	/* QPS_RX_TRUESIZE of each */
	uint64_t rcvbuf_bytes;	/* QPS_OPT_RCVBUF_BYTES; 0 = none */
	uint64_t *rxts;		/* receive times, allocated by PKTINFO or
				 * QPS_OPT_TIMESTAMP */
	uint32_t ts_flags;	/* QPS_OPT_TIMESTAMP */
	/* Transmit reports (txts.c): a ring under rx.lock; the next
	 * datagram's number (atomic: senders take it); which opening of
	 * this slot the endpoint is, so that reports of a closed one's
	 * datagrams find no queue. */
	struct qps_txts *txts;
	uint32_t txts_cap;
	uint32_t txts_head;
	uint32_t txts_count;
	uint32_t txts_next_id;
	uint64_t gen;
	/* Reasons to signal efd (rx.c "Arming"): qps_ep_fd() handed it out,
	 * threads about to sleep on it. */
	bool efd_out;
	uint32_t efd_refs;
	bool efd_on;		/* efd is signalled */
	/* Threads asleep in a receive on this endpoint: close waits for
	 * them to leave before the descriptors they poll go away. */
	uint32_t waiters;
	bool rd_shut;		/* qps_shutdown(SHUT_RD): receives end */
	bool wr_shut;		/* qps_shutdown(SHUT_WR): sends refused */

	int efd;		/* eventfd: readable while rxq is non-empty */
	int epfd;		/* epoll set {efd, device event fd, hrx_fd} */
	/* QPS_OPT_HOST_RX (rx_host.c): the adopted socket, bound where the
	 * endpoint is, queues what reaches the host through other
	 * interfaces; -1 when not. Set under ctl_lock, read by the
	 * receive path (atomic); hrx_tick under rx.lock. */
	bool host_rx;
	int hrx_fd;
	uint32_t hrx_tick;

	/* Demux tables (demux.h): written under ctl_lock, read by the
	 * receive path inside an epoch section. */
	struct qps_ep *bind_next;	/* RCU: bind bucket chain */
	struct qps_conn *conn;		/* RCU: 4-tuple while connected */
	struct qps_ep_mc *mc;		/* memberships, under ctl_lock */
	uint32_t nmc;
	uint32_t mc_cap;
	struct qps_ep *free_next;	/* FIFO of reusable slots, ctl_lock */
	/* Its slot in the stats segment (stat_shm.h): fixed for the
	 * context's lifetime, so it survives the memset of a reused slot
	 * only by being set again in qps_ep_create. */
	struct qps_stat_ep *sb;
};

/*
 * The slab every endpoint of a context lives in, for the context's
 * lifetime. max and eps are fixed after creation; the rest is under
 * ctx->ctl_lock. A closed slot goes to the tail of the free list, so a
 * stale handle reads "closed" for as long as possible.
 */
struct qps_ep_tab {
	uint32_t max;
	struct qps_ep *eps;
	struct qps_ep *free_head;
	struct qps_ep *free_tail;
	uint32_t nused;			/* slots taken */
	uint16_t eph_next;		/* next ephemeral port to try */
};

int qps_ep_check(struct qps_ep *ep);
int qps_sin_check(const struct sockaddr *addr, socklen_t len,
		  const struct sockaddr_in **sin_out);
int qps_ep_autobind(struct qps_ep *ep);
void qps_ep_release_all(struct qps_ctx *ctx);

/* endpoint.c: the connected peer's MAC, see struct qps_ep. */
void qps_ep_peer_mac_store(struct qps_ep *ep, uint64_t gen,
			   const uint8_t mac[6], bool force);
bool qps_ep_peer_mac_load(struct qps_ep *ep, uint64_t gen, uint8_t mac[6]);

#endif /* QPS_ENDPOINT_H */
