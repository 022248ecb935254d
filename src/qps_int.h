/* SPDX-License-Identifier: MIT */
/*
 * What every core file needs: struct qps_ctx (its parts are declared next
 * to the files that own them: rx.h, demux.h, endpoint.h, sq.h), the errno
 * guard, the constants and the log calls.
 */
#ifndef QPS_INT_H
#define QPS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <qpsock/qpsock.h>

#include "demux.h"
#include "endpoint.h"
#include "frames.h"
#include "provider.h"
#include "rx.h"
#include "stat.h"
#include "txq_select.h"

#define QPS_DEFAULT_DEPTH 256
#define QPS_MAX_DEPTH 4096
#define QPS_DB_DELAY_MAX_US 1000000	/* QPS_CTX_ATTR_DB_DELAY upper bound */
#define QPS_MAX_TXQ 64		/* send queues per context: a 64-bit mask */
#define QPS_RX_POLL_BATCH 32
#define QPS_ROUTE_SLOTS 64

#define QPS_CACHELINE 64

#define QPS_CTX_ATTR_ALL (QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV | \
			  QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_TX_DEPTH | \
			  QPS_CTX_ATTR_RX_DEPTH | QPS_CTX_ATTR_MAX_EP | \
			  QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_DB_DELAY | \
			  QPS_CTX_ATTR_NUM_TXQ | QPS_CTX_ATTR_TXQ_POLICY | \
			  QPS_CTX_ATTR_TXQ_FLOWS | QPS_CTX_ATTR_TX_SIGNAL | \
			  QPS_CTX_ATTR_TRANSPORT | QPS_CTX_ATTR_BUSY_POLL | \
			  QPS_CTX_ATTR_STATS | QPS_CTX_ATTR_IPFRAG | \
			  QPS_CTX_ATTR_THREAD_MODE)

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

struct qps_route_slot {
	uint32_t daddr;
	uint64_t gen;
	uint8_t mac[6];
	bool valid;
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
	/* The flusher's scheduling policy (SCHED_OTHER or SCHED_BATCH),
	 * applied when it starts; a measurement knob (qps_bench
	 * doorbell-delay), QPS_DB_SCHED_DEFAULT otherwise. */
	int policy;
};

struct qps_sq;	/* sq.h */
struct qps_sq_path;	/* sq_path.h */
struct qps_dump;	/* dump.c */

/*
 * A context, in parts by lock domain:
 *
 *   sq[i].lock  send queue i (sq.h)
 *   ctl_lock    the endpoint table (ept, endpoint.h) and the writers of
 *               the demux tables (dmx, demux.h): bind, connect, join,
 *               leave, close
 *   rx.lock     the receive side (rx, rx.h): the poller, the receive
 *               buffers, the endpoints' receive queues, and st
 *
 * Lock order: the send queues' locks in index order, then ctl_lock, then
 * rx.lock; the doorbell timer's lock (db_timer) comes after a send
 * queue's. The receive path reads the demux tables without ctl_lock,
 * inside an epoch section (demux.h).
 */
struct qps_ctx {
	struct qps_dev *dev;
	const struct qps_provider_ops *ops;
	uint32_t fork_gen;		/* qps_fork_gen at creation */
	struct qps_dev_info info;
	char provider[16];
	/* What a datagram may carry now: the MTU's, followed on a new route
	 * generation (route.c), never above max_payload_cap, the size the
	 * send slots and receive buffers were made for. Atomic. */
	uint32_t max_payload;
	uint32_t max_payload_cap;
	uint64_t mtu_gen;		/* atomic: the generation it was read in */
	/* The provider has no route generation: 0 for good (route.c). */
	bool routes_static;

	struct qps_qp *qp;		/* the receive QP: send queue 0's */
	struct qps_flow *flow_ucast;
	struct qps_flow *flow_bcast;
	int event_fd;		/* device completion channel, -1 if none */
	/* Senders asleep waiting for room (tx_wait.c): their count (atomic)
	 * and the eventfd that wakes them when someone else drained their
	 * events or closed their endpoint. */
	int txw_fd;
	uint32_t txw_sleepers;
	/* Some endpoint asked for transmit times (txts.c): send CQs are
	 * polled with stamps from then on. Atomic, never cleared. */
	bool txts_on;
	uint64_t ep_gen;		/* openings of endpoints, ctl_lock */

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
	/* The device computes the IPv4 and UDP checksums of what is sent
	 * and checks those received (QPS_DEV_CAP_CSUM, raw transport,
	 * unless $QPS_CSUM_OFFLOAD is off). */
	bool csum_offload;
	/* enum qps_alock_mode of the send queues' locks: the thread mode,
	 * as far as membarrier allows (alock.h). */
	uint8_t lock_mode;
	/* atomic: sends refused because their thread was already inside
	 * one (a signal handler's: tx.c qps_tx_enter) */
	uint64_t tx_nested;
	uint64_t db_delay_ns;		/* bound on a postponed doorbell */
	uint32_t busy_poll_us;		/* endpoints' QPS_OPT_BUSY_POLL */
	uint32_t ipfrag_mem;		/* reassembly cap, bytes (ipfrag.h) */
	uint32_t ipfrag_time_ms;	/* reassembly lifetime */
	uint32_t tx_signal;		/* completion every N WQEs (sq_*.c) */
	uint32_t transport;		/* enum qps_transport */
	struct qps_ud *ud;		/* UD transport state (ud.h), or NULL */
	struct qps_db_timer db_timer;

	struct qps_rx rx;

	/* ctl_lock guards both ept and the writers of dmx: one lock, so that
	 * an endpoint's slot and its table entries change together. */
	pthread_mutex_t ctl_lock;
	bool ctl_init;			/* ctl_lock and the tables exist */
	struct qps_ep_tab ept;
	struct qps_demux dmx;

	/* Counters: rx_* and mc_* under rx.lock, in the stats segment
	 * (stat.h). The send path counts in its send queues (sq->st, in the
	 * segment too) and in txq; qps_ctx_stats adds them. */
	struct qps_stats *st;
	struct qps_stat stat;
	/* The capture ring qps_dump attached (dump.h), NULL for none:
	 * published by the stats tick (release), read by the writers under
	 * their locks. */
	struct qps_dump *dump;
};

/* context.c */
/* Bumped in a child after fork(): a context made before belongs to the
 * parent (its device state, its threads, its locks' holders), and every
 * call on it or its endpoints from the child returns -ECHILD. */
extern uint32_t qps_fork_gen;

static inline bool qps_ctx_forked(const struct qps_ctx *ctx)
{
	return ctx->fork_gen != qps_fork_gen;
}

int qps_ctx_check(const struct qps_ctx *ctx);

/* sq.c: every send queue's lock, in index order (connect, close: what
 * senders read under the lock of the queue they use). */
void qps_sq_lock_all(struct qps_ctx *ctx);
void qps_sq_unlock_all(struct qps_ctx *ctx);

struct qps_frame_hdr;

/* mc_loop.c: after a send to @to, a group, by @ep (no lock held). */
void qps_mc_loop(struct qps_ep *ep, const struct sockaddr_in *to,
		 const void *buf, size_t len);
/* In the demux: a frame of ours looped back by the device, to drop. */
bool qps_mc_loop_off(struct qps_ctx *ctx, const struct qps_frame_hdr *h);

/* tx.c (the per-send-queue functions are in sq.h) */
/* The IPv4 and UDP fields of a datagram of @ep to @to, but its IP ID and
 * destination MAC: the endpoint's options as senders read them. */
void qps_tx_hdr(const struct qps_ep *ep, const struct sockaddr_in *to,
		struct qps_frame_hdr *h);
/* Every send queue in turn: ring a postponed doorbell for @cause, reap
 * completions. Returns the completions reaped or -errno. */
int qps_tx_poll(struct qps_ctx *ctx, enum qps_txf cause);
/* The same for a receive call, which needs only its own postponed
 * doorbells rung: a send queue with nothing unrung, nothing in flight and
 * no failed QP is skipped without its lock. */
int qps_tx_poll_rx(struct qps_ctx *ctx);
/* Whether qps_tx_poll_rx would skip every send queue (the same hint). */
bool qps_tx_idle_all(const struct qps_ctx *ctx);

/* doorbell.c: the bounded-delay flusher (per send queue: sq.h) */
int qps_db_init(struct qps_ctx *ctx);
void qps_db_stop(struct qps_ctx *ctx);
void qps_db_fini(struct qps_ctx *ctx);

/* clock.c: CLOCK_MONOTONIC and CLOCK_REALTIME, ns. */
uint64_t qps_now_ns(void);
uint64_t qps_realtime_ns(void);

/* route.c: @cache is QPS_ROUTE_SLOTS entries owned by the caller (a send
 * queue's, under its lock), or NULL to ask the provider every time.
 * @nowait: a neighbour not known yet gives -EAGAIN (its resolution
 * started) rather than a wait. */
int qps_route_resolve(struct qps_ctx *ctx, struct qps_route_slot *cache,
		      uint32_t daddr, uint8_t mac[6], bool nowait);
uint64_t qps_route_gen_ask(struct qps_ctx *ctx);

/* The provider's route generation; asked on every datagram, so a
 * provider whose routes never change costs no call. */
static inline uint64_t qps_route_gen(struct qps_ctx *ctx)
{
	if (ctx->routes_static)
		return 0;	/* what the stub would say */
	return qps_route_gen_ask(ctx);
}

/* log.c */
void qps_log_err(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
void qps_log_dbg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif /* QPS_INT_H */
