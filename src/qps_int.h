/* SPDX-License-Identifier: MIT */
/* Core internals shared by context.c, endpoint.c, tx.c, rx.c and route.c. */
#ifndef QPS_INT_H
#define QPS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <qpsock/qpsock.h>

#include "frames.h"
#include "provider.h"

#define QPS_DEFAULT_DEPTH 256
#define QPS_MAX_DEPTH 4096
#define QPS_DEFAULT_MAX_EP 1024
#define QPS_TX_BATCH_MAX 32	/* WRs chained under MSG_MORE before a post */
#define QPS_RX_POLL_BATCH 32
#define QPS_BIND_BUCKETS 256
#define QPS_ROUTE_SLOTS 64
#define QPS_EPHEMERAL_LO 32768
#define QPS_EPHEMERAL_HI 60999

#define QPS_CACHELINE 64

#define QPS_CTX_ATTR_ALL (QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV | \
			  QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_TX_DEPTH | \
			  QPS_CTX_ATTR_RX_DEPTH | QPS_CTX_ATTR_MAX_EP)

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/*
 * The API never changes the caller's errno, but the syscalls underneath
 * (eventfd, poll, shm_open, sendto...) do. Every public entry point starts
 * with QPS_ERRNO_GUARD; the cleanup handler puts errno back on return.
 */
static inline void qps_errno_restore(const int *saved)
{
	errno = *saved;
}

#define QPS_ERRNO_GUARD \
	const int qps_saved_errno __attribute__((cleanup(qps_errno_restore))) = errno

enum qps_ep_state {
	QPS_EP_FREE = 0,
	QPS_EP_OPEN,
	QPS_EP_CLOSED,
};

/* A datagram waiting in an endpoint's receive queue: a reference on one
 * receive buffer plus what recvfrom needs. */
struct qps_rxd {
	uint32_t buf;
	uint16_t off;
	uint16_t len;
	uint32_t saddr;
	uint16_t sport;
};

struct qps_route_slot {
	uint32_t daddr;
	uint64_t gen;
	uint8_t mac[6];
	bool valid;
};

struct qps_ep {
	struct qps_ctx *ctx;
	enum qps_ep_state state;

	bool nonblock;
	bool reuseaddr;
	bool pktinfo;
	bool bound;
	bool connected;
	int priority;
	int rcvtimeo_ms;
	int sndtimeo_ms;
	int error;
	uint32_t rcvbuf;

	struct sockaddr_in local;
	struct sockaddr_in peer;
	uint8_t peer_mac[6];
	uint64_t peer_route_gen;

	/* Receive queue; ring of rxq_cap, guarded by ctx->rx_lock. */
	struct qps_rxd *rxq;
	uint32_t rxq_cap;
	uint32_t rxq_head;	/* next to pop */
	uint32_t rxq_count;

	int efd;		/* eventfd: readable while rxq is non-empty */
	int epfd;		/* epoll set {efd, device event fd} */

	struct qps_ep *bind_next;	/* bucket chain, under rx_lock */
	struct qps_ep *free_next;	/* FIFO of reusable slots */
};

struct qps_ctx {
	struct qps_dev *dev;
	const struct qps_provider_ops *ops;
	struct qps_dev_info info;
	char provider[16];
	uint32_t max_payload;

	struct qps_cq *tx_cq;
	struct qps_cq *rx_cq;
	struct qps_qp *qp;
	struct qps_flow *flow_ucast;
	struct qps_flow *flow_bcast;
	int event_fd;		/* device completion channel, -1 if none */

	/*
	 * Send side, under tx_lock. Frames are built in registered slots;
	 * a slot returns to the free stack when its send completes.
	 * WRs written under QPS_MSG_MORE wait in a chain that is posted in
	 * one call (= one doorbell) by the next send without MORE, by
	 * progress, or by close.
	 */
	pthread_mutex_t tx_lock;
	uint32_t tx_depth;
	uint32_t tx_slot_size;
	uint8_t *tx_buf;
	struct qps_mr *tx_mr;
	uint32_t *tx_free;
	uint32_t tx_nfree;
	uint32_t tx_inflight;		/* posted, not completed */
	struct ibv_send_wr *tx_wr;	/* one WR + SGE per slot */
	struct ibv_sge *tx_sge;
	struct ibv_send_wr *pend_head;
	struct ibv_send_wr *pend_tail;
	uint32_t pend_n;
	uint16_t ip_id;
	uint16_t eph_next;
	struct qps_route_slot route[QPS_ROUTE_SLOTS];

	/* Receive side and the endpoint tables, under rx_lock. */
	pthread_mutex_t rx_lock;
	uint32_t rx_depth;
	uint32_t rx_buf_size;
	uint8_t *rx_buf;
	bool rx_buf_dev;		/* from ops->alloc_buf */
	struct qps_mr *rx_mr;
	uint16_t *rx_ref;		/* endpoints holding each buffer */
	struct qps_ep *bind_tab[QPS_BIND_BUCKETS];

	uint32_t max_ep;
	struct qps_ep *eps;
	struct qps_ep *free_head;
	struct qps_ep *free_tail;
	uint32_t nep;

	/* Counters: tx_* under tx_lock, rx_* under rx_lock. */
	struct qps_stats st;
};

/* context.c */
int qps_ctx_check(struct qps_ctx *ctx);

/* endpoint.c */
int qps_ep_check(struct qps_ep *ep);
int qps_sin_check(const struct sockaddr *addr, socklen_t len,
		  const struct sockaddr_in **sin_out);
int qps_ep_autobind(struct qps_ep *ep);
void qps_ep_release_all(struct qps_ctx *ctx);

/* tx.c */
int qps_tx_init(struct qps_ctx *ctx);
void qps_tx_fini(struct qps_ctx *ctx);
int qps_tx_flush_locked(struct qps_ctx *ctx);
int qps_tx_reap_locked(struct qps_ctx *ctx);

/* rx.c */
int qps_rx_init(struct qps_ctx *ctx);
void qps_rx_fini(struct qps_ctx *ctx);
int qps_rx_progress_locked(struct qps_ctx *ctx);
void qps_rx_buf_put_locked(struct qps_ctx *ctx, uint32_t buf);
void qps_rxq_drain_locked(struct qps_ep *ep);

/* route.c */
int qps_route_resolve(struct qps_ctx *ctx, uint32_t daddr, uint8_t mac[6]);
uint64_t qps_route_gen(struct qps_ctx *ctx);

/* log.c */
void qps_log_err(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
void qps_log_dbg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif /* QPS_INT_H */
