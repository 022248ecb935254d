/* SPDX-License-Identifier: MIT */
/*
 * xdp: qpsock's verbs semantics on a Linux netdev through AF_XDP.
 *
 *   program      xdp_prog.bpf.c, built with clang's BPF target and linked
 *                into the library (xdp_obj.c); attached with a bpf_link,
 *                so the kernel detaches it when the process dies
 *   steering     BPF map entries behind create_flow (xdp_flow.c); the
 *                program redirects what they match to the XSK of the
 *                frame's queue, passes the rest to the kernel; user space
 *                picks the strongest matching rule again (its QP)
 *   UMEM         one per device, made of 4 KiB frames: the receive
 *                side's, split between the receive queues (each queue's
 *                fill ring kept shallow, the rest on its stack), then the
 *                send side's (xdp_umem.c)
 *   queues       an XSK per receive queue (up to QPS_XDP_MAX_QUEUES),
 *                all on the one UMEM; sends go through queue 0's
 *   send QP      a software SQ; a WR chain copies each frame into a UMEM
 *                frame, fills the TX ring, and ends with at most one kick
 *                (sendto, when the ring needs a wakeup): the doorbell
 *   CQs          software, as packet's: polling reaps the completion ring
 *                and moves RX ring frames into posted buffers
 *   routing,     as packet: libnl (common/nl_neigh.c), the kernel's IGMP
 *   multicast,   (common/igmp.c), a kernel socket per bound port
 *   ports        (common/host_port.c), marked so the program knows it
 *
 * Internal to providers/xdp (and the tests).
 */
#ifndef QPS_XDP_H
#define QPS_XDP_H

#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xdp/xsk.h>

#include "host_dev.h"
#include "host_port.h"
#include "igmp.h"
#include "nl_neigh.h"
#include "provider.h"
#include "prov_sw.h"
#include "xdp_maps.h"

#define QPS_XDP_MAX_WR 4096
#define QPS_XDP_MAX_CQE 65536
#define QPS_XDP_MAX_FLOWS 64
#define QPS_XDP_MAX_MR 64
#define QPS_XDP_ETH_HLEN 14
#define QPS_XDP_FRAME_SIZE 4096u
/* Frames per ring, the send side's frames, and the receive side's when
 * the interface has one queue. */
#define QPS_XDP_RING 2048u
/* Receive frames per queue at the least, however many queues share. */
#define QPS_XDP_RXQ_MIN_FRAMES 256u
/* In copy mode the kernel writes a received frame after this much
 * headroom (XDP_PACKET_HEADROOM), so a frame holds this much less. */
#define QPS_XDP_RX_HEADROOM 256u

/* A send WR as the software SQ keeps it until it is completed. */
struct qps_xdp_swqe {
	uint64_t wr_id;
	uint32_t byte_len;
	uint8_t status;		/* enum ibv_wc_status */
	bool in_ring;		/* its frame is the kernel's until done */
	bool done;
	bool signaled;
};

struct qps_xdp_qp {
	struct qps_qp base;
	struct qps_xdp_qp *next;	/* dev->qps, under dev->lock */
	bool sq_sig_all;

	/* Send side, under dev->tx_lock. */
	struct qps_xdp_swqe *sq;
	uint32_t sq_cnt;		/* power of two */
	uint32_t sq_head, sq_tail;	/* free-running */

	/* Receive side, under rq.lock: posted buffers, and the completions
	 * a poll of another CQ made for this QP (wc_cnt = rq.cnt). */
	struct qps_sw_rq rq;
	struct ibv_wc *wcs;
	uint32_t wc_head, wc_tail;
	unsigned int nflows;

	/* Send counters: written under dev->tx_lock. */
	struct qps_sw_sq_stats sq_stats;
	/* Receive counters: written under rq.lock. */
	uint64_t rx_cqes, rx_no_buf, rx_len_err;
};

struct qps_xdp_flow {
	struct qps_flow base;
	struct qps_xdp_flow *next;	/* dev->flows, strongest first */
	struct qps_flow_rule rule;
};

/* Which frame of the send half belongs to which WR. */
struct qps_xdp_tx_owner {
	struct qps_xdp_qp *qp;
	uint32_t sq_idx;
	uint32_t len;
	bool busy;		/* on the TX ring: the kernel's */
	bool requeue;		/* dropped at the device: send again */
	bool failed;		/* dropped at the device: an error */
};

/* The XSK of one receive queue and its share of the UMEM's receive
 * frames. Rings and frames under dev->rx_lock; @in_ep under dev->lock. */
struct qps_xdp_rxq {
	struct xsk_socket *xsk;
	int fd;
	bool in_ep;		/* on dev->epfd (xdp_event.c) */
	struct xsk_ring_prod fq;
	struct xsk_ring_cons rx;
	/* Its own completion ring, which the kernel requires of an XSK on
	 * a shared UMEM; only queue 0's (dev->cq) sees sent frames. */
	struct xsk_ring_cons cq;
	/* Frames of the queue's share on neither ring (a stack: the last
	 * one back is the first to go to the fill ring again). */
	uint64_t *free;
	uint32_t nfree;
	uint32_t nframes;	/* the share */
	uint32_t fill_target;	/* frames the fill ring is kept at */
	uint32_t fill_calm;	/* frames since the kernel last drew deep */
	uint64_t frames;	/* read out of the RX ring */
};

struct qps_xdp_dev {
	struct qps_dev base;
	struct qps_dev_info info;
	int ifindex;
	int epfd;		/* event fd: the XSKs and @evfd */
	int evfd;		/* readable while a QP holds completions */

	/* The program and its maps (xdp_obj.c). */
	struct bpf_object *obj;
	int link_fd;
	int xsks_fd, rules_fd, cfg_fd;
	struct qps_xdp_cfg cfg;	/* as written to the map, under lock */
	bool native;		/* driver mode, not generic (SKB) */

	/* UMEM and the XSKs (xdp_umem.c): frames [0, rx_frames) are the
	 * receive queues', the QPS_XDP_RING after them the send side's. */
	void *area;
	size_t area_len;
	struct xsk_umem *umem;
	int xsk_fd;		/* queue 0's: sends and their kicks */
	bool zerocopy;
	bool busy_poll;
	uint32_t rx_frames;

	struct xsk_ring_prod tx;	/* queue 0's */
	struct xsk_ring_cons cq;

	/* Receive side, under rx_lock: every queue's RX and fill rings and
	 * free frames; the queue a poll starts at. */
	pthread_mutex_t rx_lock;
	struct qps_xdp_rxq *rxq;
	uint32_t nrxq;
	uint32_t rx_next;
	uint64_t rx_no_rule, rx_csum_fixed, rx_xsk_drops;

	/* Send side, under tx_lock: the TX and completion rings, the free
	 * frames of the send half, every QP's SQ. */
	pthread_mutex_t tx_lock;
	uint64_t *tx_free;
	uint32_t tx_nfree;
	struct qps_xdp_tx_owner *tx_owner;	/* per send-half frame */
	bool kick_pending;
	bool down_said;		/* the interface-down message was given */
	bool carrier_wait;	/* the device drops: kick once it has one */
	uint64_t carrier_ns;	/* last look at the carrier */
	int carrier_fd;		/* for ETHTOOL_GLINK, or -1 */
	uint64_t rekicks;

	pthread_mutex_t lock;	/* lists below; lock order: before the others */
	/* Why the XSKs are on @epfd; whether a thread spins on the
	 * receive CQ (xdp_event.c). */
	bool xsk_armed, rx_spinning;
	uint32_t unarmed_polls;
	struct qps_xdp_qp *qps;
	struct qps_xdp_flow *flows;
	unsigned int nflows;
	uint32_t flow_seq;
	uint32_t qp_seq;
	struct qps_igmp_memb *mcast;	/* common/igmp.h */

	struct qps_sw_mr_table mrs;
	struct qps_nl_route route;	/* common/nl_neigh.h */
	struct qps_host_ns ns;		/* common/host_port.h */

	/* Counters of destroyed QPs (under lock). */
	struct qps_dev_counters retired;
};

static inline struct qps_xdp_dev *qps_xdp_dev(struct qps_dev *d)
{
	return qps_sw_container_of(d, struct qps_xdp_dev, base);
}

static inline struct qps_xdp_qp *qps_xdp_qp(struct qps_qp *q)
{
	return qps_sw_container_of(q, struct qps_xdp_qp, base);
}

static inline uint32_t qps_xdp_mtu(const struct qps_xdp_dev *dev)
{
	return qps_host_dev_mtu(&dev->info, &dev->route);
}

/* A message on stderr, named for the provider (common/host_dev.c). */
#define qps_xdp_log(...) qps_host_log("xdp", __VA_ARGS__)

/* xdp_obj.c: the embedded program, attached to the device */
int qps_xdp_obj_attach(struct qps_xdp_dev *dev);
void qps_xdp_obj_detach(struct qps_xdp_dev *dev);
int qps_xdp_cfg_write(struct qps_xdp_dev *dev);

/* xdp_umem.c */
int qps_xdp_umem_open(struct qps_xdp_dev *dev);
void qps_xdp_umem_close(struct qps_xdp_dev *dev);
void qps_xdp_umem_stats(struct qps_xdp_dev *dev);
/* @n frames read out of @q's RX ring are ours again: on its free stack,
 * and its fill ring topped up to its target. rx_lock and dev->lock
 * held. */
void qps_xdp_fill_return(struct qps_xdp_dev *dev, struct qps_xdp_rxq *q,
			 const uint64_t *addr, uint32_t n);
/* Nobody spins: every free receive frame of each queue to its fill ring.
 * rx_lock held. */
void qps_xdp_fill_deep(struct qps_xdp_dev *dev);

/* xdp_tx.c */
int qps_xdp_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int qps_xdp_tx_poll(struct qps_xdp_dev *dev, struct qps_xdp_qp *qp, int num,
		    struct ibv_wc *wc);
/* The QP is going: its frames in flight stop naming it. tx_lock held. */
void qps_xdp_tx_forget(struct qps_xdp_dev *dev, const struct qps_xdp_qp *qp);

/* xdp_rx.c */
int qps_xdp_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
/* Move RX ring frames into posted buffers: those of @cq's QPs into @wc
 * (at most @num), others into their QP's completions. dev->lock held. */
int qps_xdp_rx_poll(struct qps_xdp_dev *dev, struct qps_cq *cq, int num,
		    struct ibv_wc *wc);
bool qps_xdp_rule_match(const struct qps_flow_rule *r, const uint8_t *f,
			uint32_t len);

/* xdp_flow.c */
int qps_xdp_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			struct qps_flow **flow_out);
int qps_xdp_destroy_flow(struct qps_flow *flow);

/* xdp_qp.c */
int qps_xdp_create_qp(struct qps_dev *dev,
		      const struct qps_qp_init_attr *attr,
		      struct qps_qp **qp_out);
int qps_xdp_destroy_qp(struct qps_qp *qp);

/* xdp_cq.c */
int qps_xdp_create_cq(struct qps_dev *dev, int cqe, struct qps_cq **cq_out);
int qps_xdp_destroy_cq(struct qps_cq *cq);
int qps_xdp_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc);
int qps_xdp_poll_cq_ts(struct qps_cq *cq, int num, struct ibv_wc *wc,
		       struct qps_wc_ts *ts);
int qps_xdp_get_event_fd(struct qps_dev *dev);
int qps_xdp_req_notify_cq(struct qps_cq *cq);
int qps_xdp_ack_events(struct qps_dev *dev);

/* xdp_event.c: the XSKs on the event fd only while armed; dev->lock
 * held */
int qps_xdp_ev_arm(struct qps_xdp_dev *dev);
void qps_xdp_ev_drained(struct qps_xdp_dev *dev);
void qps_xdp_ev_polled(struct qps_xdp_dev *dev);

/* xdp_net.c: routes, neighbours, multicast membership */
int qps_xdp_route_open(struct qps_xdp_dev *dev);
void qps_xdp_route_close(struct qps_xdp_dev *dev);
int qps_xdp_resolve(struct qps_dev *dev, struct in_addr dst,
		    uint8_t mac_out[6]);
int qps_xdp_resolve_nowait(struct qps_dev *dev, struct in_addr dst,
			   uint8_t mac_out[6]);
uint64_t qps_xdp_route_gen(struct qps_dev *dev);
int qps_xdp_mcast_attach(struct qps_dev *dev, struct in_addr group,
			 struct in_addr source);
int qps_xdp_mcast_detach(struct qps_dev *dev, struct in_addr group,
			 struct in_addr source);
void qps_xdp_mcast_close(struct qps_xdp_dev *dev);

#endif /* QPS_XDP_H */
