/* SPDX-License-Identifier: MIT */
/*
 * verbs: real rdma-core devices through libibverbs (docs/verbs.md).
 *
 *   verbs_dev.c    device list, open/close, discovery (port, GIDs, the
 *                  netdev behind GID 0: MAC, IPv4, MTU), counters, ops
 *   verbs_qp.c     PD-scoped objects: MRs, CQs (completion channel), QPs
 *                  (raw packet in RTS; UD in RESET), post, poll, modify
 *   verbs_flow.c   steering rules (ibv_create_flow) and their errors
 *   verbs_ud.c     GIDs, address handles, UD multicast attach
 *   verbs_neigh.c  next-hop MAC through the netdev's kernel tables
 *                  (common/nl_neigh.c), IGMP membership through the kernel
 *                  (common/igmp.c)
 *   verbs_mlx4.c   the opt-in mlx4 direct send path (mlx4dv, dlopened)
 *
 * One port per context: attr->dev (default $QPS_DEV) is "device[:port]",
 * port 1 unless named. libibverbs reports failure as a positive
 * errno or as NULL/-1 with errno; everything here returns -errno.
 */
#ifndef QPS_VERBS_H
#define QPS_VERBS_H

#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "host_port.h"
#include "igmp.h"
#include "nl_neigh.h"
#include "provider.h"

#define QPS_VERBS_DEFAULT_PORT 1	/* "mlx4_0:2" picks port 2 */
#define QPS_VERBS_INLINE_PROBE 256	/* inline bytes asked of a probe QP */
#define QPS_VERBS_HINT \
	"use QPS_PROVIDER=emu (software ConnectX-3) or QPS_PROVIDER=packet " \
	"(AF_PACKET on a netdev)"

#define qps_verbs_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Port counters read from sysfs, as a baseline taken at open. */
enum {
	QPS_VERBS_SYS_RX_DISCARDS,	/* counters/port_rcv_discards */
	QPS_VERBS_SYS_TX_DISCARDS,	/* counters/port_xmit_discards */
	QPS_VERBS_SYS_OUT_OF_BUF,	/* hw_counters/out_of_buffer */
	QPS_VERBS_SYS_N,
};

struct qps_verbs_dev {
	struct qps_dev base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct qps_dev_info info;
	uint8_t port;
	uint8_t link_layer;		/* IBV_LINK_LAYER_* */
	int addr_gid;			/* GID index of info.addr, -1 = none */
	uint32_t addr_gid_type;		/* its IBV_GID_TYPE_* */

	int ifindex;			/* netdev behind GID 0, 0 = none */
	char ifname[IF_NAMESIZE];
	bool route_open;
	struct qps_nl_route route;	/* when ifindex */
	struct qps_host_ns ns;		/* when ifindex: common/host_port.h */

	pthread_mutex_t lock;		/* mcast list */
	struct qps_igmp_memb *mcast;	/* common/igmp.h */
	bool mcast_warned;		/* atomic: the no-IGMP warning is out */

	/* mlx4 direct path (verbs_mlx4.c) */
	void *mlx4_lib;
	int (*mlx4dv_init_obj)(void *obj, uint64_t type);

	uint64_t sys_base[QPS_VERBS_SYS_N];
	/* Observed by the wrappers (relaxed atomics). */
	uint64_t wqes, doorbells, tx_cqes, rx_cqes;
};

struct qps_verbs_qp;

struct qps_verbs_cq {
	struct qps_cq base;
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;		/* the same CQ, extended (verbs_ts.c) */
	bool is_send, is_recv;		/* some QP's send / receive CQ */
	/* The QP whose send completions this CQ carries for the direct
	 * path: their wr_id comes from our ring, not libmlx4's. */
	struct qps_verbs_qp *direct;
};

struct qps_verbs_qp {
	struct qps_qp base;
	struct ibv_qp *qp;
	/* Direct path (verbs_mlx4.c): the ring as mlx4dv_qp describes it,
	 * and the producer/consumer state libmlx4 does not expose. */
	bool direct;
	void *sq_buf;
	uint32_t wqe_cnt;
	int wqe_shift;
	uint64_t *wrid;
	uint32_t head;			/* written by the core (sq_mlx4.c) */
	uint32_t tail;			/* atomic: advanced by poll_cq */
	uint32_t *sdb;			/* UAR send doorbell register */
};

struct qps_verbs_mr {
	struct qps_mr base;
	struct ibv_mr *mr;
};

struct qps_verbs_flow {
	struct qps_flow base;
	struct ibv_flow *flow;
};

struct qps_verbs_ah {
	struct qps_ah base;
};

static inline struct qps_verbs_dev *qps_verbs_dev(struct qps_dev *d)
{
	return qps_verbs_container_of(d, struct qps_verbs_dev, base);
}

static inline struct qps_verbs_cq *qps_verbs_cq(struct qps_cq *c)
{
	return qps_verbs_container_of(c, struct qps_verbs_cq, base);
}

static inline struct qps_verbs_qp *qps_verbs_qp(struct qps_qp *q)
{
	return qps_verbs_container_of(q, struct qps_verbs_qp, base);
}

/* libibverbs reports failure as NULL or -1 with errno; some paths forget
 * to set it, and 0 must not turn a failure into success. */
static inline int qps_verbs_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/* Verbs calls that return an errno: positive as documented, negative in
 * a few older paths. */
static inline int qps_verbs_ret(int ret)
{
	if (ret > 0)
		return -ret;
	return ret < 0 ? (ret > -4096 ? ret : -EIO) : 0;
}

static inline void qps_verbs_count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

void qps_verbs_log(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* The text of a positive errno, thread safe (strerror is not). */
const char *qps_verbs_strerror(int err);

/* verbs_dev.c */
extern const struct qps_provider_ops qps_verbs_ops;

/* verbs_qp.c */
int qps_verbs_reg_mr(struct qps_dev *dev, void *addr, size_t len,
		     struct qps_mr **mr_out);
int qps_verbs_dereg_mr(struct qps_mr *mr);
int qps_verbs_create_cq(struct qps_dev *dev, int cqe, struct qps_cq **cq_out);
int qps_verbs_destroy_cq(struct qps_cq *cq);
int qps_verbs_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc);
/* After a poll of @n completions of @vc: the direct path's and the
 * counters' share. */
void qps_verbs_cq_polled(struct qps_verbs_cq *vc, struct ibv_wc *wc, int n);

/* verbs_ts.c */
void qps_verbs_ts_open(struct qps_verbs_dev *vd);
/* An extended CQ with completion timestamps, or NULL (then a plain one). */
struct ibv_cq *qps_verbs_ts_create_cq(struct qps_verbs_dev *vd,
				      struct qps_verbs_cq *vc, int cqe);
int qps_verbs_poll_cq_ts(struct qps_cq *cq, int num, struct ibv_wc *wc,
			 struct qps_wc_ts *ts);
int qps_verbs_read_clock(struct qps_dev *dev, uint64_t *cycles);
int qps_verbs_req_notify_cq(struct qps_cq *cq);
int qps_verbs_get_event_fd(struct qps_dev *dev);
int qps_verbs_ack_events(struct qps_dev *dev);
int qps_verbs_get_cq_event_fd(struct qps_cq *cq);
int qps_verbs_create_qp(struct qps_dev *dev,
			const struct qps_qp_init_attr *attr,
			struct qps_qp **qp_out);
int qps_verbs_destroy_qp(struct qps_qp *qp);
int qps_verbs_modify_qp(struct qps_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask);
int qps_verbs_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr);
int qps_verbs_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);
int qps_verbs_probe_inline(struct qps_verbs_dev *vd, uint32_t *max_inline);

/* verbs_flow.c */
int qps_verbs_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			  struct qps_flow **flow_out);
int qps_verbs_destroy_flow(struct qps_flow *flow);

/* verbs_ud.c */
int qps_verbs_query_gid(struct qps_dev *dev, int index, union ibv_gid *gid);
int qps_verbs_create_ah(struct qps_dev *dev, struct ibv_ah_attr *attr,
			struct qps_ah **ah_out);
int qps_verbs_destroy_ah(struct qps_ah *ah);
int qps_verbs_attach_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			   uint16_t lid);
int qps_verbs_detach_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			   uint16_t lid);

/* verbs_neigh.c */
int qps_verbs_route_open(struct qps_verbs_dev *vd);
void qps_verbs_route_close(struct qps_verbs_dev *vd);
int qps_verbs_hold_port(struct qps_dev *dev, int fd, struct in_addr addr,
			uint16_t *port, unsigned int flags);
int qps_verbs_resolve(struct qps_dev *dev, struct in_addr dst,
		      uint8_t mac_out[6]);
int qps_verbs_resolve_nowait(struct qps_dev *dev, struct in_addr dst,
			     uint8_t mac_out[6]);
uint64_t qps_verbs_route_gen(struct qps_dev *dev);
int qps_verbs_mcast_attach(struct qps_dev *dev, struct in_addr group,
			   struct in_addr source);
int qps_verbs_mcast_detach(struct qps_dev *dev, struct in_addr group,
			   struct in_addr source);
void qps_verbs_mcast_close(struct qps_verbs_dev *vd);

/* verbs_mlx4.c */
void qps_verbs_mlx4_open(struct qps_verbs_dev *vd,
			 const struct ibv_device_attr *dattr);
void qps_verbs_mlx4_close(struct qps_verbs_dev *vd);
int qps_verbs_mlx4_sq(struct qps_qp *qp, struct qps_mlx4_sq *out);
/* Completion side of the direct path: fix up @n send completions. */
/* After a transition to RESET: the ring restarts at WQE 0, as the HCA
 * does (libmlx4 zeroes its own indices then). */
void qps_verbs_mlx4_reset(struct qps_verbs_qp *vq);
void qps_verbs_mlx4_complete(struct qps_verbs_qp *vq, struct ibv_wc *wc,
			     int n);

#endif /* QPS_VERBS_H */
