/* SPDX-License-Identifier: MIT */
/*
 * null: a device that does no device work, for measuring the core alone
 * (as DPDK's net_null). Measurement only, never a default; docs/null.md.
 *
 * Send: every WQE is taken at once, from a WR chain (post_send) or from
 * the mlx4 ring the core writes (mlx4_sq: doorbell or BlueFlame), and a
 * signalled one completes at once. Nothing is transmitted and the data is
 * not read. Receive: posted buffers wait; on request (the device string,
 * "rx=unicast:port=N" or "rx=mcast:group=G:port=N") the receive CQ
 * produces a burst of datagrams from a template frame each time its
 * poller has found it empty, as fast as the poller drains them, through
 * the steering rules the core installed.
 *
 * Locks: per QP, `lock` serialises the device side of its send queue
 * (the consumer index, the counters) and `rq_lock` the producers of its
 * receive queue; per CQ, `lock` its ring; per device, `lock` the QP,
 * flow and multicast tables, and where the template is steered. Order:
 * a QP's lock, then a CQ's; the device's lock is never taken under
 * either (the receive path reads the steering decision with atomics).
 */
#ifndef QPS_NULL_H
#define QPS_NULL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/mlx4dv.h>

#include "prov_sw.h"
#include "provider.h"

#define QPS_NULL_MAX_QP		64u
#define QPS_NULL_MAX_FLOWS	256u
#define QPS_NULL_MAX_MC		64u
#define QPS_NULL_MAX_MR		256u
#define QPS_NULL_MAX_WR		4096u
#define QPS_NULL_MAX_CQE	8192u
#define QPS_NULL_MTU		1500u
#define QPS_NULL_ETH_HLEN	14u
#define QPS_NULL_HDRS		42u	/* Ethernet + IPv4 + UDP */
#define QPS_NULL_WQEBB		64u
#define QPS_NULL_WQE_SHIFT	8	/* a WQE fits BlueFlame */
#define QPS_NULL_BF_SIZE	256u
#define QPS_NULL_BURST_DEFAULT	32u
#define QPS_NULL_LEN_DEFAULT	64u
#define QPS_NULL_FLOW_MAX_PRIO	0xfffu

/* What the receive generator sends, from the device string. */
enum qps_null_rx_mode {
	QPS_NULL_RX_OFF = 0,
	QPS_NULL_RX_UNICAST = 1,	/* to our MAC and address */
	QPS_NULL_RX_MCAST = 2,		/* to a group */
};

struct qps_null_cfg {
	enum qps_null_rx_mode rx;
	uint16_t port;		/* destination UDP port, host order */
	uint32_t group;		/* network order */
	uint32_t len;		/* payload bytes */
	uint32_t burst;		/* frames per arrival */
	bool csum_off;		/* csum=off: no checksum offload */
};

/* A completion waiting in a CQ: wr_id and index as the device saw them. */
struct qps_null_cqe {
	uint64_t wr_id;
	struct qps_null_qp *qp;	/* NULL: cleaned, skipped */
	uint32_t idx;		/* send: WQE index, completes up to it */
	uint32_t byte_len;
	uint8_t status;		/* enum ibv_wc_status */
	uint8_t opcode;		/* enum ibv_wc_opcode */
};

struct qps_null_cq {
	struct qps_cq base;
	pthread_spinlock_t lock;
	uint32_t cnt;		/* ring entries, a power of two */
	uint32_t prod, cons;	/* under lock */
	struct qps_null_cqe *ring;
	bool overrun;		/* a CQE was lost; reported once drained */
	bool rx_due;		/* the poller saw it empty: frames arrive */
	uint32_t users;		/* QPs naming it; under the device's lock */
	/* QPs with a receive queue completing here: only such a CQ gets
	 * frames. Written under the device's lock, read atomically. */
	uint32_t rx_users;
	uint64_t overruns;	/* one writer: holder of lock */
};

/* Per-QP counters: one writer each (the holder of the lock named). */
struct qps_null_qp_stats {
	uint64_t wqes;		/* qp->lock */
	uint64_t doorbells;	/* qp->lock */
	uint64_t bf_writes;	/* qp->lock */
	uint64_t tx_cqes;	/* qp->lock */
	uint64_t tx_drops;	/* qp->lock: WQEs refused by the device */
	uint64_t bad_writes;	/* qp->lock: a register write for another QP */
	uint64_t rx_cqes;	/* recv CQ lock */
	uint64_t rx_no_buf;	/* recv CQ lock */
};

struct qps_null_rq_ent {
	uint64_t wr_id;
	uintptr_t addr;
	uint32_t len;
};

struct qps_null_qp {
	struct qps_qp base;
	pthread_spinlock_t lock;	/* device side of the send queue */
	pthread_spinlock_t rq_lock;	/* post_recv */
	unsigned int idx;		/* in dev->qp[] */
	bool sq_sig_all;
	/* Send ring in mlx4 layout: the core writes it on the direct path;
	 * post_send never touches it. */
	uint8_t *sq_buf;
	uint32_t wqe_cnt, spare, max_post, max_inline;
	int wqe_shift;
	uint32_t doorbell_qpn;		/* big-endian qpn << 8 */
	uint64_t *wrid;
	uint32_t sq_head;	/* producer: post_send, or the core */
	uint32_t sq_tail;	/* completed: poll_cq, release */
	uint32_t sq_ci;		/* next WQE the device takes; lock */
	/* Receive queue: producer post_recv, consumer the generator. */
	bool has_rq;
	uint32_t rq_cnt;
	struct qps_null_rq_ent *rq;
	uint32_t rq_head, rq_tail;
	uint32_t nflows;	/* under the device's lock */
	struct qps_null_qp_stats st;
};

struct qps_null_flow {
	struct qps_flow base;
	unsigned int slot;
	struct qps_flow_rule rule;
};

struct qps_null_mc {
	uint32_t group;		/* network order */
	uint32_t refs;
};

struct qps_null_dev {
	struct qps_dev base;
	pthread_mutex_t lock;
	struct qps_null_cfg cfg;
	char name[64];
	uint8_t mac[6];
	uint32_t addr;		/* network order */
	struct qps_sw_mr_table mrs;
	struct qps_null_qp *qp[QPS_NULL_MAX_QP];
	uint32_t qp_seq;
	struct qps_null_flow *flow[QPS_NULL_MAX_FLOWS];
	uint32_t flow_seq;
	struct qps_null_mc mc[QPS_NULL_MAX_MC];
	uint8_t *bf_reg;		/* both halves */
	struct qps_mlx4_bf_state bf;
	/* The receive template and its state; generator under the CQ lock. */
	uint8_t frame[QPS_NULL_HDRS + QPS_NULL_MTU];
	uint32_t frame_len;
	uint16_t udp_csum0;	/* UDP checksum with sequence number 0 */
	uint32_t rx_seq;	/* written into each frame's payload */
	/* Where the template goes, decided when a rule or a membership
	 * changes (qps_null_rx_update_locked), not per frame: the QP, or
	 * NULL and why not. */
	struct qps_null_qp *rx_qp;
	uint32_t rx_why;	/* enum qps_null_rx_why */
	/* Device-wide receive counters; writer: holder of the rx CQ lock. */
	uint64_t rx_no_rule;
	uint64_t rx_drops;
	/* Counters of destroyed QPs; under lock. */
	struct qps_null_qp_stats retired;
};

#define qps_null_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline struct qps_null_dev *qps_null_dev(struct qps_dev *d)
{
	return qps_null_container_of(d, struct qps_null_dev, base);
}

static inline struct qps_null_qp *qps_null_qp(struct qps_qp *q)
{
	return qps_null_container_of(q, struct qps_null_qp, base);
}

static inline struct qps_null_cq *qps_null_cq(struct qps_cq *c)
{
	return qps_null_container_of(c, struct qps_null_cq, base);
}

/* One writer per counter: a relaxed add that readers see whole. */
static inline void qps_null_count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline uint64_t qps_null_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

extern const struct qps_provider_ops qps_null_ops;

uint32_t qps_null_roundup_pow2(uint32_t v);

/* null_dev.c */
int qps_null_parse_cfg(const char *s, struct qps_null_cfg *cfg);

/* null_cq.c */
int qps_null_create_cq(struct qps_dev *d, int cqe, struct qps_cq **cq_out);
int qps_null_destroy_cq(struct qps_cq *c);
int qps_null_poll_cq(struct qps_cq *c, int num, struct ibv_wc *wc);
/* Queue a completion; under @cq's lock. A full CQ loses it (overrun). */
void qps_null_cq_push_locked(struct qps_null_cq *cq,
			     const struct qps_null_cqe *e);
void qps_null_cq_clean(struct qps_null_cq *cq, const struct qps_null_qp *qp);

/* null_qp.c */
int qps_null_create_qp(struct qps_dev *d, const struct qps_qp_init_attr *attr,
		       struct qps_qp **qp_out);
int qps_null_destroy_qp(struct qps_qp *q);
int qps_null_post_send(struct qps_qp *q, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr);
int qps_null_post_recv(struct qps_qp *q, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr);
int qps_null_mlx4_sq(struct qps_qp *q, struct qps_mlx4_sq *out);
void qps_null_db_write(struct qps_qp *q, uint32_t be_val);
void qps_null_bf_copy(struct qps_qp *q, void *dst, const void *src,
		      size_t len);
/* Send completions polled: the slots up to @idx are free again. */
void qps_null_sq_completed(struct qps_null_qp *qp, uint32_t idx);

/* null_flow.c */
int qps_null_create_flow(struct qps_qp *q, struct ibv_flow_attr *attr,
			 struct qps_flow **flow_out);
int qps_null_destroy_flow(struct qps_flow *flow);
/* The QP the template frame is steered to, NULL for none; under the
 * device's lock. */
struct qps_null_qp *qps_null_steer_locked(struct qps_null_dev *dev);

/* null_rx.c */
enum qps_null_rx_why {
	QPS_NULL_RX_STEERED = 0,
	QPS_NULL_RX_NO_RULE = 1,
	QPS_NULL_RX_NOT_MEMBER = 2,
};

void qps_null_rx_template(struct qps_null_dev *dev);
/* Steer the template again after a rule or membership changed; under
 * the device's lock. */
void qps_null_rx_update_locked(struct qps_null_dev *dev);
/* Up to @num generated receive completions into @wc; under @cq's lock. */
int qps_null_rx_generate(struct qps_null_cq *cq, int num, struct ibv_wc *wc);
int qps_null_mcast_attach(struct qps_dev *d, struct in_addr group,
			  struct in_addr source);
int qps_null_mcast_detach(struct qps_dev *d, struct in_addr group,
			  struct in_addr source);

/* For tests: what the device consumed and produced (struct
 * qps_dev_counters) plus the register writes it refused. */
struct qps_null_counters {
	struct qps_dev_counters dev;
	uint64_t bad_writes;
	uint64_t tx_cq_overrun;
};

int qps_null_counters_all(struct qps_dev *d, struct qps_null_counters *out);

#endif /* QPS_NULL_H */
