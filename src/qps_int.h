/* SPDX-License-Identifier: MIT */
/* Core internals shared by context.c, endpoint.c, tx.c, rx.c and route.c. */
#ifndef QPS_INT_H
#define QPS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <qpsock/qpsock.h>

#include "demux.h"
#include "frames.h"
#include "provider.h"
#include "txq_select.h"

#define QPS_DEFAULT_DEPTH 256
#define QPS_MAX_DEPTH 4096
#define QPS_DEFAULT_MAX_EP 1024
#define QPS_DB_DELAY_MAX_US 1000000	/* QPS_CTX_ATTR_DB_DELAY upper bound */
#define QPS_MAX_TXQ 64		/* send queues per context: a 64-bit mask */
#define QPS_RX_POLL_BATCH 32
#define QPS_BIND_BUCKETS 256
#define QPS_ROUTE_SLOTS 64
#define QPS_EPHEMERAL_LO 32768
#define QPS_EPHEMERAL_HI 60999

#define QPS_CACHELINE 64

#define QPS_CTX_ATTR_ALL (QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV | \
			  QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_TX_DEPTH | \
			  QPS_CTX_ATTR_RX_DEPTH | QPS_CTX_ATTR_MAX_EP | \
			  QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_DB_DELAY | \
			  QPS_CTX_ATTR_NUM_TXQ | QPS_CTX_ATTR_TXQ_POLICY | \
			  QPS_CTX_ATTR_TXQ_FLOWS | QPS_CTX_ATTR_TX_SIGNAL | \
			  QPS_CTX_ATTR_TRANSPORT)

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/*
 * The API never changes the caller's errno, but the syscalls underneath
 * (eventfd, poll, shm_open, sendto...) do. Every public entry point starts
 * with QPS_ERRNO_GUARD; the cleanup handler puts errno back on return.
 * Only that handler reads the variable: "unused" says so to the tools
 * (cppcheck) that do not model cleanup handlers.
 */
static inline void qps_errno_restore(const int *saved)
{
	errno = *saved;
}

#define QPS_ERRNO_GUARD \
	const int qps_saved_errno \
		__attribute__((cleanup(qps_errno_restore), unused)) = errno

/* A MAC address in the low 48 bits of a word, so that it can be loaded and
 * stored whole (struct qps_ep peer_mac48). */
static inline uint64_t qps_mac48_pack(const uint8_t mac[6])
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 6; i++)
		v |= (uint64_t)mac[i] << (8 * i);
	return v;
}

static inline void qps_mac48_unpack(uint64_t v, uint8_t mac[6])
{
	int i;

	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)(v >> (8 * i));
}

enum qps_ep_state {
	QPS_EP_FREE = 0,
	QPS_EP_OPEN,
	QPS_EP_CLOSED,
};

/* A datagram waiting in an endpoint's receive queue: a reference on one
 * receive buffer plus what recvfrom needs (16 bytes). */
struct qps_rxd {
	uint32_t buf;
	uint16_t off;
	uint16_t len;
	uint32_t saddr;
	uint16_t sport;
	uint16_t meta;		/* 1: ep->rxts holds its timestamp */
};

struct qps_route_slot {
	uint32_t daddr;
	uint64_t gen;
	uint8_t mac[6];
	bool valid;
};

/* Why the send queue's doorbell was rung (struct qps_stats tx_flush_*). */
enum qps_txf {
	QPS_TXF_SEND,		/* end of a burst: nothing more followed */
	QPS_TXF_EXPLICIT,	/* qps_ctx_flush, qps_flush */
	QPS_TXF_POLL,		/* progress and receive calls */
	QPS_TXF_CLOSE,		/* endpoint close, context destroy */
	QPS_TXF_FULL,		/* send slots or send queue full mid-burst */
	QPS_TXF_TIMER,		/* the bounded delay expired */
	QPS_TXF_MAX
};

/*
 * The bounded-delay flusher (doorbell.c): one thread per context, started
 * on the first postponed doorbell of any send queue, asleep while nothing
 * is pending. Lock order: a send queue's lock, then this lock; the flusher
 * never holds this lock while it takes a send queue's.
 */
struct qps_db_timer {
	pthread_t thread;
	pthread_mutex_t lock;	/* guards the sleep and the start */
	pthread_cond_t cond;
	bool ready;		/* lock and cond initialised */
	bool started;		/* written under lock (release), read atomically */
	bool failed;		/* could not start: ring at the end of calls */
	bool stop;		/* under lock */
	bool idle;		/* atomic: waiting without a deadline */
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

	/* peer, connected and txq_tuple are written by connect holding every
	 * send queue's lock (and ctl_lock); senders read them under the lock
	 * of the send queue they use. */
	struct sockaddr_in local;
	struct sockaddr_in peer;
	/* The peer's MAC (6 bytes in the low 48 bits) and the route
	 * generation it was resolved under. Senders on different send queues
	 * may refresh them at once: both atomic, generation stored last
	 * (release) and loaded first (acquire), see tx.c. */
	uint64_t peer_mac48;
	uint64_t peer_route_gen;
	/* Send-QP selection (txq_select.h): the cached pick of a connected
	 * endpoint and the 4-tuple it hashes. */
	struct qps_txq_cache txq_cache;
	struct qps_txq_tuple txq_tuple;

	/* Receive queue; ring of rxq_cap, guarded by ctx->rx_lock, as are
	 * pktinfo, rxts and the eventfd state. */
	struct qps_rxd *rxq;
	uint32_t rxq_cap;
	uint32_t rxq_head;	/* next to pop */
	uint32_t rxq_count;
	uint64_t *rxts;		/* receive timestamps, allocated by PKTINFO */
	bool efd_armed;		/* someone may wait on efd: signal it */
	bool efd_on;		/* efd is signalled */

	int efd;		/* eventfd: readable while rxq is non-empty */
	int epfd;		/* epoll set {efd, device event fd} */

	/* Demux tables (demux.h): written under ctl_lock, read by the
	 * receive path inside an epoch section. */
	struct qps_ep *bind_next;	/* RCU: bind bucket chain */
	struct qps_conn *conn;		/* RCU: 4-tuple while connected */
	struct qps_ep_mc *mc;		/* memberships, under ctl_lock */
	uint32_t nmc;
	uint32_t mc_cap;
	struct qps_ep *free_next;	/* FIFO of reusable slots, ctl_lock */
};

struct qps_sq;	/* sq.h */
struct qps_sq_path;	/* sq_path.h */

struct qps_ctx {
	struct qps_dev *dev;
	const struct qps_provider_ops *ops;
	struct qps_dev_info info;
	char provider[16];
	uint32_t max_payload;

	struct qps_cq *rx_cq;
	struct qps_qp *qp;		/* the receive QP: send queue 0's */
	struct qps_flow *flow_ucast;
	struct qps_flow *flow_bcast;
	int event_fd;		/* device completion channel, -1 if none */

	/*
	 * Send side: nsq send queues (sq.h), each a send QP with its CQ, its
	 * own registered slots (a slice of tx_buf) and doorbell state, under
	 * its own lock. txq (txq_select.h) picks the send queue of each
	 * datagram. Fixed after creation, so read without a lock.
	 */
	struct qps_sq *sq;
	uint32_t nsq;
	struct qps_txq_sel *txq;
	uint32_t tx_depth;		/* per send queue */
	uint32_t tx_slot_size;
	uint8_t *tx_buf;		/* nsq * tx_depth slots */
	struct qps_mr *tx_mr;
	uint32_t tx_path;		/* QPS_TX_PATH_GENERIC or _DIRECT */
	const struct qps_sq_path *tx_ops;	/* its table (sq_path.h) */
	uint64_t db_delay_ns;		/* bound on a postponed doorbell */
	uint32_t tx_signal;		/* completion every N WQEs (sq_*.c) */
	uint32_t transport;		/* enum qps_transport */
	struct qps_ud *ud;		/* UD transport state (ud.h), or NULL */
	struct qps_db_timer db_timer;
	uint16_t eph_next;		/* under ctl_lock */

	/* Receive side under rx_lock: the poller, buffers, endpoint queues. */
	pthread_mutex_t rx_lock;
	uint32_t rx_depth;
	uint32_t rx_buf_size;
	uint8_t *rx_buf;
	bool rx_buf_dev;		/* from ops->alloc_buf */
	struct qps_mr *rx_mr;
	uint16_t *rx_ref;		/* endpoints holding each buffer */
	struct qps_epoch rx_epoch;	/* the poller's reader slot */
	bool cq_armed;			/* req_notify_cq since the last drain */
	bool cq_arm_always;		/* an fd was handed out: keep armed */
	bool rx_qp_err;			/* receive QP failed: see qp_recover.c */

	/*
	 * Endpoint table and demux tables under ctl_lock (lock order: the
	 * send queues' locks in index order, ctl_lock, rx_lock). The receive path reads the tables
	 * without it (demux.h); what a writer unlinks is freed after a
	 * grace period (retired, epoch.c).
	 */
	pthread_mutex_t ctl_lock;
	bool ctl_init;			/* ctl_lock and tables exist */
	struct qps_ep *bind_tab[QPS_BIND_BUCKETS];	/* RCU */
	struct qps_conn **conn_tab;	/* RCU buckets */
	uint32_t conn_mask;
	struct qps_mc_tab *mc_tab;	/* RCU */
	struct qps_mc_groups *mc_groups; /* UD: groups attached (mcast.c) */
	void **retired;
	uint32_t retired_n;
	uint32_t retired_cap;

	uint32_t max_ep;
	struct qps_ep *eps;
	struct qps_ep *free_head;
	struct qps_ep *free_tail;
	uint32_t nep;

	/* Counters: rx_* and mc_* under rx_lock. The send path counts in
	 * its send queues (sq->st) and in txq; qps_ctx_stats adds them. */
	struct qps_stats st;
};

/* context.c */
int qps_ctx_check(const struct qps_ctx *ctx);

/* endpoint.c */
int qps_ep_check(struct qps_ep *ep);
int qps_sin_check(const struct sockaddr *addr, socklen_t len,
		  const struct sockaddr_in **sin_out);
int qps_ep_autobind(struct qps_ep *ep);
void qps_ep_release_all(struct qps_ctx *ctx);

/* sq.c: every send queue's lock, in index order (connect, close: what
 * senders read under the lock of the queue they use). */
void qps_sq_lock_all(struct qps_ctx *ctx);
void qps_sq_unlock_all(struct qps_ctx *ctx);

/* tx.c (the per-send-queue functions are in sq.h) */
/* Every send queue in turn: ring a postponed doorbell for @cause, reap
 * completions. Returns the completions reaped or -errno. */
int qps_tx_poll(struct qps_ctx *ctx, enum qps_txf cause);

/* doorbell.c: the bounded-delay flusher (per send queue: sq.h) */
int qps_db_init(struct qps_ctx *ctx);
void qps_db_stop(struct qps_ctx *ctx);
void qps_db_fini(struct qps_ctx *ctx);
uint64_t qps_now_ns(void);

/* rx.c */
int qps_rx_init(struct qps_ctx *ctx);
void qps_rx_fini(struct qps_ctx *ctx);
int qps_rx_progress_locked(struct qps_ctx *ctx);
int qps_rx_arm_locked(struct qps_ctx *ctx);
void qps_rx_buf_put_locked(struct qps_ctx *ctx, uint32_t buf);
/* Post every buffer no endpoint holds (the receive QP is back up). */
int qps_rx_refill_locked(struct qps_ctx *ctx);
void qps_rxq_drain_locked(struct qps_ep *ep);
bool qps_rxq_push_locked(struct qps_ep *ep, uint32_t buf,
			 const struct qps_frame_info *fi, uint64_t *ts);
void qps_ep_arm_locked(struct qps_ep *ep);

/* route.c: @cache is QPS_ROUTE_SLOTS entries owned by the caller (a send
 * queue's, under its lock), or NULL to ask the provider every time. */
int qps_route_resolve(struct qps_ctx *ctx, struct qps_route_slot *cache,
		      uint32_t daddr, uint8_t mac[6]);
uint64_t qps_route_gen(struct qps_ctx *ctx);

/* log.c */
void qps_log_err(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
void qps_log_dbg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif /* QPS_INT_H */
