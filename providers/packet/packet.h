/* SPDX-License-Identifier: MIT */
/*
 * packet: qpsock's verbs semantics on a Linux netdev through AF_PACKET.
 *
 *   send QP      one TPACKET_V2 TX ring (protocol 0, QDISC_BYPASS, LOSS);
 *                a WR chain fills slots and ends with one kick, the
 *                doorbell: send(fd, NULL, 0, MSG_DONTWAIT)
 *   steering     one AF_PACKET socket per rule, bound to ETH_P_IP, with a
 *                classic BPF program generated from the rule (and from the
 *                stronger rules it must not take frames from), TPACKET_V2
 *                RX ring
 *   CQs          software: polling a CQ reaps TX ring slots and copies ring
 *                frames into posted receive buffers; the event fd is an
 *                epoll set of the RX ring sockets
 *   routing      libnl-route-3: route lookup, neighbour table, netlink
 *                events bump route_gen
 *   multicast    PACKET_ADD_MEMBERSHIP + a kernel UDP socket's
 *                MCAST_JOIN_GROUP so the kernel speaks IGMP (common/igmp.c)
 *
 * Internal to providers/packet (and the tests).
 */
#ifndef QPS_PACKET_H
#define QPS_PACKET_H

#include <linux/filter.h>
#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host_dev.h"
#include "host_port.h"
#include "igmp.h"
#include "nl_neigh.h"
#include "provider.h"
#include "prov_sw.h"

#define QPS_PACKET_MAX_WR 4096
#define QPS_PACKET_MAX_CQE 65536
#define QPS_PACKET_MAX_FLOWS 64
#define QPS_PACKET_MAX_MR 64
#define QPS_PACKET_RX_FRAMES_MIN 256
#define QPS_PACKET_ETH_HLEN 14

/* Enough for every rule of a device in one program: each block is at most
 * QPS_PACKET_BPF_BLOCK_MAX instructions. */
#define QPS_PACKET_BPF_BLOCK_MAX 48
#define QPS_PACKET_BPF_MAX \
	(QPS_PACKET_MAX_FLOWS * QPS_PACKET_BPF_BLOCK_MAX + 1)
#define QPS_PACKET_BPF_ACCEPT 0x40000u	/* bytes to keep: all */

/* qps_flow_parse plus what a ring of untagged IPv4 frames can match. */
int qps_packet_rule_parse(const struct ibv_flow_attr *attr,
			  struct qps_flow_rule *r);
bool qps_packet_rule_disjoint(const struct qps_flow_rule *a,
			      const struct qps_flow_rule *b);
int qps_packet_bpf_build(const struct qps_flow_rule *self,
			 const struct qps_flow_rule *const *stronger,
			 unsigned int nstronger, struct sock_filter *prog,
			 unsigned int max);

struct qps_packet_dev;

/* A send WR as the software SQ keeps it until it is completed. */
struct qps_packet_swqe {
	uint64_t wr_id;
	uint32_t byte_len;
	uint32_t slot;		/* TX ring frame, when in_ring */
	uint8_t status;		/* enum ibv_wc_status when !in_ring */
	bool in_ring;
	bool signaled;
};

struct qps_packet_ring {
	uint8_t *map;
	size_t map_len;
	uint32_t frame_size;
	uint32_t frame_nr;
};

struct qps_packet_qp {
	struct qps_qp base;
	struct qps_packet_qp *next;	/* dev->qps, under dev->lock */
	bool sq_sig_all;

	/* Send side, under sq_lock. */
	pthread_mutex_t sq_lock;
	int tx_fd;
	struct qps_packet_ring tx;
	struct qps_packet_swqe *sq;
	uint32_t sq_cnt;		/* power of two */
	uint32_t sq_head, sq_tail;	/* free-running */
	uint32_t tx_prod, tx_cons;	/* ring frames, free-running */
	bool kick_pending;		/* SEND_REQUEST frames not yet taken */

	/* Receive side, under rq.lock. */
	struct qps_sw_rq rq;
	unsigned int nflows;
	unsigned int rr;		/* flow to poll first */

	/* Send counters: written under sq_lock. */
	struct qps_sw_sq_stats sq_stats;
	uint64_t rekicks;
};

struct qps_packet_flow {
	struct qps_flow base;
	struct qps_packet_flow *next;	/* dev->flows, strongest first */
	struct qps_flow_rule rule;
	int fd;
	struct qps_packet_ring rx;
	uint32_t head;			/* next ring frame to read */
	bool mc_member;
	/* Receive counters: written under the QP's rq.lock. */
	uint64_t rx_cqes, rx_no_buf, rx_len_err, rx_vlan, rx_csum_fixed;
	uint64_t ring_drops;		/* PACKET_STATISTICS tp_drops */
};

struct qps_packet_dev {
	struct qps_dev base;
	struct qps_dev_info info;
	int ifindex;
	int epfd;		/* event fd: epoll set of every RX ring socket */
	int mc_fd;		/* AF_PACKET socket holding device-level MACs */
	bool rx_empty;		/* atomic: the last receive CQ poll was empty */
	uint64_t err_check_ns;	/* atomic: last socket error check */
	uint64_t link_errors;	/* atomic: socket errors read (ENETDOWN) */

	pthread_mutex_t lock;	/* lists below, lock order: before a QP's */
	struct qps_packet_qp *qps;
	struct qps_packet_flow *flows;
	unsigned int nflows;
	uint32_t flow_seq;
	uint32_t qp_seq;
	struct qps_igmp_memb *mcast;	/* common/igmp.h */

	struct qps_sw_mr_table mrs;

	struct qps_nl_route route;	/* common/nl_neigh.h */
	struct qps_host_ns ns;		/* common/host_port.h */

	/* Counters of destroyed QPs and flows (under lock). */
	struct qps_dev_counters retired;
};

static inline struct qps_packet_dev *qps_packet_dev(struct qps_dev *d)
{
	return qps_sw_container_of(d, struct qps_packet_dev, base);
}

static inline uint32_t qps_packet_mtu(const struct qps_packet_dev *dev)
{
	return qps_host_dev_mtu(&dev->info, &dev->route);
}

static inline struct qps_packet_qp *qps_packet_qp(struct qps_qp *q)
{
	return qps_sw_container_of(q, struct qps_packet_qp, base);
}

/* A message on stderr, named for the provider (common/host_dev.c). */
#define qps_packet_log(...) qps_host_log("packet", __VA_ARGS__)

/* packet_ring.c: TPACKET_V2 ring setup shared by TX and RX */
int qps_packet_ring_setup(int fd, int which, uint32_t frame_size,
			  uint32_t frame_nr, struct qps_packet_ring *ring);
void qps_packet_ring_unmap(struct qps_packet_ring *ring);
uint32_t qps_packet_frame_size(uint32_t bytes);

/* packet_tx.c */
int qps_packet_tx_open(struct qps_packet_dev *dev, struct qps_packet_qp *qp);
void qps_packet_tx_close(struct qps_packet_qp *qp);
int qps_packet_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
int qps_packet_tx_poll(struct qps_packet_qp *qp, int num, struct ibv_wc *wc);

/* packet_rx.c */
int qps_packet_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
int qps_packet_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			   struct qps_flow **flow_out);
int qps_packet_destroy_flow(struct qps_flow *flow);
/* @ts, when not NULL: each completion's stamp (the ring header's time). */
int qps_packet_rx_poll(struct qps_packet_dev *dev, struct qps_packet_qp *qp,
		       int num, struct ibv_wc *wc, struct qps_wc_ts *ts);
void qps_packet_flow_stats(struct qps_packet_flow *fl);

/* packet_qp.c */
int qps_packet_create_qp(struct qps_dev *dev,
			 const struct qps_qp_init_attr *attr,
			 struct qps_qp **qp_out);
int qps_packet_destroy_qp(struct qps_qp *qp);

/* packet_cq.c */
int qps_packet_create_cq(struct qps_dev *dev, int cqe, struct qps_cq **cq_out);
int qps_packet_destroy_cq(struct qps_cq *cq);
int qps_packet_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc);
int qps_packet_get_event_fd(struct qps_dev *dev);
int qps_packet_ack_events(struct qps_dev *dev);
int qps_packet_poll_cq_ts(struct qps_cq *cq, int num, struct ibv_wc *wc,
			  struct qps_wc_ts *ts);

/* packet_route.c */
int qps_packet_route_open(struct qps_packet_dev *dev);
void qps_packet_route_close(struct qps_packet_dev *dev);
int qps_packet_resolve(struct qps_dev *dev, struct in_addr dst,
		       uint8_t mac_out[6]);
int qps_packet_resolve_nowait(struct qps_dev *dev, struct in_addr dst,
			      uint8_t mac_out[6]);
uint64_t qps_packet_route_gen(struct qps_dev *dev);

/* packet_mcast.c */
int qps_packet_mcast_attach(struct qps_dev *dev, struct in_addr group,
			    struct in_addr source);
int qps_packet_mcast_detach(struct qps_dev *dev, struct in_addr group,
			    struct in_addr source);
void qps_packet_mcast_close(struct qps_packet_dev *dev);
int qps_packet_mac_member(int fd, int ifindex, const uint8_t mac[6], bool add);

#endif /* QPS_PACKET_H */
