/* SPDX-License-Identifier: MIT */
/*
 * ibvemu: a libibverbs.so.1 whose one device, qpsemu0, is an emu port.
 *
 * The application sees libibverbs' public structs; each is the first
 * member of an ibvemu object that holds the emu object behind it. Verbs
 * errors follow libibverbs (positive errno returns, NULL or -1 with errno
 * set), converted from emu's -errno at the call.
 *
 * Receive buffers: emu places frames only into its port's shared pool,
 * because the sender is another process. Each QP therefore owns a ring of
 * pool slots ("bounce slots"): post_recv posts a slot in place of the
 * user's SGEs and remembers them; poll_cq copies the frame into them and
 * hands back the user's wr_id.
 */
#ifndef QPS_IBVEMU_H
#define QPS_IBVEMU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ibvemu_names.h"
#include <infiniband/verbs.h>

#include "provider.h"

#define QPS_IBVEMU_DEV_NAME	"qpsemu0"
#define QPS_IBVEMU_MAX_QP	64u
#define QPS_IBVEMU_MAX_RECV_SGE	4u
#define QPS_IBVEMU_ASYNC_MAX	64u
#define QPS_IBVEMU_GRH_LEN	40u
/* ConnectX-3, as perftest and libmlx4 identify it. */
#define QPS_IBVEMU_VENDOR_ID	0x02c9u
#define QPS_IBVEMU_PART_ID	4099u

struct qps_ibvemu_qp;

struct qps_ibvemu_ctx {
	struct verbs_context vctx;	/* context is its last member */
	struct qps_dev *dev;
	const struct qps_provider_ops *ops;
	struct qps_dev_info info;
	int ifindex;			/* $QPS_IBV_EMU_NETDEV, 0 = none */
	bool neigh;			/* our neighbour entry was added */

	pthread_mutex_t lock;		/* qp[], ah list, cq list */
	struct qps_ibvemu_qp *qp[QPS_IBVEMU_MAX_QP];
	struct qps_ibvemu_ah *ahs;
	struct qps_ibvemu_cq *cqs;

	/* Async events: a ring under async_lock, one byte per event in the
	 * pipe whose read end is context.async_fd. */
	pthread_mutex_t async_lock;
	struct ibv_async_event async[QPS_IBVEMU_ASYNC_MAX];
	unsigned int async_head, async_tail;
	uint64_t async_lost;
	int async_wr;
};

struct qps_ibvemu_cq {
	/* An extended CQ (ibv_create_cq_ex) starts as a plain one does. */
	union {
		struct ibv_cq ibv;
		struct ibv_cq_ex ibvx;
	};
	struct qps_cq *qcq;
	/* Extended polling: the completion start_poll/next_poll took, and
	 * the device clock's stamp of it; under the polling thread. */
	struct ibv_wc cur;
	uint64_t cur_ts;
	struct qps_ibvemu_cq *next;	/* in ctx->cqs, under ctx->lock */
	pthread_mutex_t poll_lock;
	/* Set by req_notify_cq, cleared by get_cq_event once the device
	 * disarmed the CQ; atomic. */
	int armed;
};

struct qps_ibvemu_rslot {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge sge[QPS_IBVEMU_MAX_RECV_SGE];
};

struct qps_ibvemu_qp {
	struct ibv_qp ibv;
	struct qps_qp *qqp;
	pthread_mutex_t lock;		/* state, attrs, receive slots */
	struct ibv_qp_attr attr;	/* what query_qp reports */
	bool sq_sig_all;

	uint8_t *bounce;		/* nslots * slot_size in the pool */
	uint32_t slot_size;
	uint32_t nslots;		/* power of two, 0 without RQ */
	uint32_t rhead, rtail;		/* posted / completed slots */
	struct qps_ibvemu_rslot *rslot;
};

struct qps_ibvemu_ah {
	struct qps_ah *qah;		/* qah->ibv is what the app holds */
	struct qps_ibvemu_ah *next;
};

struct qps_ibvemu_flow {
	struct ibv_flow ibv;
	struct qps_flow *qf;
	bool mc;			/* holds an L2 multicast membership */
	struct in_addr group;
};

#define qps_ibvemu_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline struct qps_ibvemu_ctx *qps_ibvemu_ctx(struct ibv_context *c)
{
	return qps_ibvemu_of(c, struct qps_ibvemu_ctx, vctx.context);
}

static inline struct qps_ibvemu_cq *qps_ibvemu_cq(struct ibv_cq *c)
{
	return qps_ibvemu_of(c, struct qps_ibvemu_cq, ibv);
}

static inline struct qps_ibvemu_qp *qps_ibvemu_qp(struct ibv_qp *q)
{
	return qps_ibvemu_of(q, struct qps_ibvemu_qp, ibv);
}

/* The two verbs of ibvemu_names.h that verbs.h also defines as macros. */
#undef ibv_query_port
#undef ibv_reg_mr
int qps_ibvemu_query_port(struct ibv_context *ctx, uint8_t port,
			  struct _compat_ibv_port_attr *attr);
struct ibv_mr *qps_ibvemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				 int access);

/* After the definition of a verb of ibvemu_names.h: its default version. */
#define QPS_IBVEMU_DEFAULT(name) \
	__asm__(".symver qps_ibvemu_" #name ", ibv_" #name "@@IBVERBS_1.1")

/* ibvemu_device.c */
bool qps_ibvemu_is_ours(struct ibv_context *ctx);
int qps_ibvemu_query_port_ex(struct ibv_context *ctx, uint8_t port,
			     struct ibv_port_attr *attr, size_t len);
int qps_ibvemu_gid(struct qps_ibvemu_ctx *c, unsigned int index,
		   union ibv_gid *gid);
void qps_ibvemu_async(struct qps_ibvemu_ctx *c, enum ibv_event_type type,
		      void *obj);

/* ibvemu_neigh.c: a permanent IPv4 neighbour on @ifindex. */
int qps_ibvemu_neigh(int ifindex, struct in_addr ip, const uint8_t mac[6],
		     bool add);

/* ibvemu_cq.c */
int qps_ibvemu_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
struct ibv_cq_ex *qps_ibvemu_create_cq_ex(struct ibv_context *ctx,
					  struct ibv_cq_init_attr_ex *attr);
int qps_ibvemu_query_rt_values(struct ibv_context *ctx,
			       struct ibv_values_ex *values);
int qps_ibvemu_req_notify_cq(struct ibv_cq *cq, int solicited_only);

/* ibvemu_qp.c */
int qps_ibvemu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
int qps_ibvemu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
struct ibv_qp *qps_ibvemu_create_qp_ex(struct ibv_context *ctx,
				       struct ibv_qp_init_attr_ex *attr);
struct ibv_flow *qps_ibvemu_create_flow(struct ibv_qp *qp,
					struct ibv_flow_attr *attr);
int qps_ibvemu_destroy_flow(struct ibv_flow *flow);
/* Under ctx->lock: the QP of @qpn, or NULL. */
struct qps_ibvemu_qp *qps_ibvemu_qp_by_num(struct qps_ibvemu_ctx *c,
					   uint32_t qpn);
/* A receive completion of the device: copy the slot into the user's
 * SGEs and put the user's wr_id in @wc. false: drop @wc (not a slot
 * this QP has posted: emu emptied the queue on RESET). */
bool qps_ibvemu_recv_done(struct qps_ibvemu_qp *qp, struct ibv_wc *wc);
/* A WQE of the QP failed (error completion): move the QP to ERR, as the
 * HCA does, and raise IBV_EVENT_QP_FATAL. ctx->lock held. */
void qps_ibvemu_qp_fatal(struct qps_ibvemu_qp *qp);

#endif /* QPS_IBVEMU_H */
