/* SPDX-License-Identifier: MIT */
/*
 * The provider boundary (not installed). The core speaks verbs across it:
 * WR chains in, struct ibv_wc out, struct ibv_flow_attr for steering. A WR
 * chain posted in one call is one doorbell on every provider.
 *
 * Error convention differs from libibverbs on purpose: every op returns 0,
 * a count, or -errno, like the rest of qpsock.
 *
 * Objects are small base structs that a provider embeds at the start of its
 * own (container_of); the core only reads the base fields.
 */
#ifndef QPS_PROVIDER_H
#define QPS_PROVIDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>

#include "udma.h"

struct qps_provider_ops;

struct qps_dev {
	/* The filled table from qps_provider_find (never a NULL op). The core
	 * sets it right after ops->open() succeeds; a provider leaves it. */
	const struct qps_provider_ops *ops;
};

struct qps_cq {
	struct qps_dev *dev;
	int cqe; /* usable entries */
};

struct qps_qp {
	struct qps_dev *dev;
	uint32_t qp_num;
	enum ibv_qp_type qp_type;
	struct qps_cq *send_cq;
	struct qps_cq *recv_cq;
	struct ibv_qp_cap cap; /* as granted */
};

struct qps_mr {
	struct qps_dev *dev;
	void *addr;
	size_t length;
	uint32_t lkey;
};

struct qps_flow {
	struct qps_qp *qp;
};

/* A UD address handle. A UD send WR carries @ibv in wr.ud.ah: on verbs
 * the driver's AH; a software provider points it at a struct ibv_ah
 * inside its own object and finds that object with container_of. */
struct qps_ah {
	struct ibv_ah *ibv;
	struct qps_dev *dev;
};

struct qps_dev_attr {
	const char *dev;	/* wire / netdev / RDMA device; NULL = default */
	bool addr_set;
	struct in_addr addr;	/* requested local IPv4 address */
};

enum qps_dev_caps {
	QPS_DEV_CAP_MLX4_SQ = 1 << 0,	/* mlx4_sq op works: direct WQE path */
	QPS_DEV_CAP_FLOW = 1 << 1,	/* create_flow with ETH/IPv4/UDP specs */
	QPS_DEV_CAP_UD = 1 << 2,	/* IBV_QPT_UD over RoCE v2, AHs, GIDs */
	/* An error completion means the QP is in the error state (verbs
	 * semantics) and modify_qp brings it back through RESET. Without
	 * it (packet) an error fails only its own WQE. */
	QPS_DEV_CAP_QP_ERR = 1 << 3,
	/* The device hands a multicast frame it sends back to its own port
	 * when the port's steering takes the group (emu; mlx4 unless a QP
	 * blocks self-multicast loopback), and on a shared netdev to the
	 * host's stack too. */
	QPS_DEV_CAP_MC_LOOP = 1 << 4,
	/* Checksum offload on raw-packet QPs, as ConnectX-3 does it. Send:
	 * a WQE with MLX4_WQE_CTRL_IP_HDR_CSUM (TCP_UDP_CSUM) in its ctrl
	 * segment, or a WR with IBV_SEND_IP_CSUM (both), leaves with the
	 * IPv4 header (UDP) checksum computed by the device over the frame
	 * as it is, whatever the checksum field held; the core leaves the
	 * fields 0. The UDP checksum is computed only for a whole datagram,
	 * never for a fragment. Receive: a completion whose frame is IPv4
	 * with a right header checksum and a UDP datagram with a right,
	 * non-zero checksum carries IBV_WC_IP_CSUM_OK (mlx4: CQE status
	 * IPV4 | IP_HDR_CSUM_OK | TCP_UDP_CSUM_OK). */
	QPS_DEV_CAP_CSUM = 1 << 5,
	/* A steering rule on a group's address alone (ETH + IPv4, no UDP)
	 * takes nothing from the host: the device hands the context a copy
	 * (packet: AF_PACKET is a tap) or has no host stack behind it (emu).
	 * The core then adds one per joined group, so that the fragments
	 * after a group datagram's first reach the reassembly. Not on mlx4:
	 * there the rule would take every port of the group from the
	 * host's kernel sockets. */
	QPS_DEV_CAP_MC_GROUP_RULE = 1 << 6,
};

/* The choices a provider made at open, said once in its log too. The
 * values are the public QPS_CTX_INFO_F_* ones (context.c asserts it). */
enum qps_dev_mode {
	/* A netdev the host's kernel serves too: hold_port holds ports. */
	QPS_DEV_MODE_HOST_NETDEV = 1 << 0,
	QPS_DEV_MODE_XDP_NATIVE = 1 << 1,	/* driver mode, not SKB */
	QPS_DEV_MODE_XDP_ZEROCOPY = 1 << 2,	/* XSK bound zero-copy */
	QPS_DEV_MODE_XDP_BUSY_POLL = 1 << 3,	/* SO_PREFER_BUSY_POLL on */
	QPS_DEV_MODE_PACKET_RING = 1 << 4,	/* TPACKET rings */
};

/* GID table of a RoCE port, as mlx4 fills it from its netdev: index 0 is
 * the RoCE v1 link-local GID (fe80::EUI-64 of the MAC), index 1 the RoCE
 * v2 GID of the IPv4 address (::ffff:a.b.c.d). */
enum {
	QPS_GID_ROCE_V1_LL = 0,
	QPS_GID_ROCE_V2_IPV4 = 1,
	QPS_GID_TABLE_LEN = 2,
};

struct qps_dev_info {
	char name[64];
	uint8_t mac[6];
	struct in_addr addr;
	uint32_t mtu;		/* L3 MTU */
	uint32_t max_qp_wr;
	uint32_t max_cqe;
	uint32_t max_inline;	/* bytes of inline data per send WQE */
	uint32_t caps;		/* enum qps_dev_caps */
	/* Bytes of one UD message (the path MTU of a UD QP: an IB MTU,
	 * 256..4096, GRH not counted); 0 without QPS_DEV_CAP_UD. */
	uint32_t ud_mtu;
	/* The device's free-running clock, which stamps completions
	 * (QPS_WC_TS_DEV): its frequency, as ibv_device_attr_ex's
	 * hca_core_clock (in Hz here), 0 when it has none; and the bits a
	 * stamp keeps (it wraps at @clock_mask + 1). */
	uint64_t clock_hz;
	uint64_t clock_mask;
	/* How the provider drives the device, as it chose at open (enum
	 * qps_dev_mode), and the receive queues it reads (0 queues: not
	 * bound to any): what qps_ctx_query_ex reports. */
	uint32_t mode;
	uint32_t rx_queue;
	uint32_t rx_queues;
};

/* Which clock stamped a completion (poll_cq_ts). */
enum qps_wc_ts_clock {
	QPS_WC_TS_NONE = 0,
	/* The device's clock in cycles (info.clock_hz, clock_mask): the core
	 * places it against CLOCK_REALTIME with read_clock, as
	 * ibv_query_rt_values_ex lets an application do. */
	QPS_WC_TS_DEV,
	/* CLOCK_REALTIME ns, taken by the host's kernel as the frame
	 * arrived (SOF_TIMESTAMPING_RX_SOFTWARE). */
	QPS_WC_TS_SW,
	/* ns of the NIC's own clock, as the kernel reports it
	 * (SOF_TIMESTAMPING_RAW_HARDWARE): not converted. */
	QPS_WC_TS_HW,
};

struct qps_wc_ts {
	uint64_t val;
	uint32_t clock;		/* enum qps_wc_ts_clock */
};

struct qps_qp_init_attr {
	enum ibv_qp_type qp_type;	/* RAW_PACKET; UD with QPS_DEV_CAP_UD */
	struct qps_cq *send_cq;
	struct qps_cq *recv_cq;
	struct ibv_qp_cap cap;
	bool sq_sig_all;
};

/* Device counters; providers add to what they can observe, 0 otherwise. */
struct qps_dev_counters {
	uint64_t wqes;		/* send WQEs consumed by the device */
	uint64_t doorbells;	/* doorbell register writes (or kicks) */
	uint64_t bf_writes;	/* BlueFlame register writes */
	uint64_t tx_cqes;
	uint64_t rx_cqes;
	uint64_t tx_drops;	/* frames the device could not send */
	uint64_t rx_drops;	/* frames the device could not place */
	uint64_t rx_no_rule;	/* no steering rule matched */
	uint64_t rx_no_buf;	/* no receive WQE posted */
	uint64_t rx_cq_overrun;	/* receive CQ full */
};

/*
 * A device context's BlueFlame register state. On mlx4 the register is
 * one per device context (per UAR page), not per QP: every send queue of
 * the context writes the same two halves, each send queue under its own
 * lock, so two of them writing at once would interleave their 64-byte
 * stores in one write-combining buffer and the device would take a WQE
 * made of both. Writes are therefore serialised per context, as libmlx4
 * does with its bf_lock: @lock is held around choosing the half, the WC
 * copy and its flush. The provider owns it (one per device context, the
 * lock initialised at open) and hands the same one to every QP.
 */
struct qps_mlx4_bf_state {
	pthread_spinlock_t lock;
	uint32_t off;		/* the half for the next write; under lock */
};

/*
 * The mlx4 direct path: what mlx4dv_init_obj gives for a QP, plus the two
 * register writes. The core writes WQEs into @buf with the
 * infiniband/mlx4dv.h helpers, owner word last, then rings. Who issues
 * which barrier:
 *  - @db_write (hardware: one 32-bit store of @be_val to UAR +
 *    MLX4_SEND_DOORBELL, qps_mmio_write32_be). The core issues
 *    qps_udma_to_device_barrier() before the call (WQE stores reach
 *    memory before the register store); the provider issues none inside,
 *    and an uncached store needs no flush after.
 *  - @bf_copy (hardware: 64-byte-granular stores of @len bytes into the
 *    write-combining register half @dst). The core issues
 *    qps_udma_to_device_barrier() before, then takes @bf_state->lock and
 *    issues qps_mmio_wc_start(); the provider does the WC stores inside;
 *    the core issues qps_mmio_flush_writes() after, toggles the half and
 *    unlocks, so the next writer's stores never share the buffer.
 * On emu both are the device's register handlers. After a RESET the
 * device starts again at WQE 0: the provider then reports *@head ==
 * *@tail == 0 (restarting its own indices, as libmlx4 does), and the core
 * refuses a ring that did not restart (-EPROTO).
 */
struct qps_mlx4_sq {
	void *buf;		/* SQ ring: wqe_cnt WQEBBs of 1 << wqe_shift */
	uint32_t wqe_cnt;	/* power of two */
	int wqe_shift;		/* >= 6 */
	uint32_t spare_wqes;	/* prefetch headroom: (2048 >> shift) + 1 */
	uint32_t max_post;	/* wqe_cnt - spare_wqes */
	uint32_t doorbell_qpn;	/* big-endian qpn << 8, as mlx4dv_qp */
	uint64_t *wrid;		/* wr_id per WQE index, reported in ibv_wc */
	uint32_t *head;		/* producer index shared with post_send */
	const uint32_t *tail;	/* completion index, advanced by poll_cq */
	void (*db_write)(struct qps_qp *qp, uint32_t be_val);
	/* The device context's BlueFlame register (both halves), NULL if
	 * none; the same for every QP of the context, as is @bf_state. */
	void *bf_reg;
	uint32_t bf_buf_size;	/* half of the register: 256 on ConnectX-3 */
	struct qps_mlx4_bf_state *bf_state;
	void (*bf_copy)(struct qps_qp *qp, void *dst, const void *src,
			size_t len);
};

struct qps_provider_ops {
	size_t size;		/* sizeof the provider's table */
	const char *name;

	int (*open)(const struct qps_dev_attr *attr, struct qps_dev **dev_out);
	int (*close)(struct qps_dev *dev);
	int (*query)(struct qps_dev *dev, struct qps_dev_info *info);
	int (*counters)(struct qps_dev *dev, struct qps_dev_counters *out);

	/* Memory the device can write into (receive buffers). Providers
	 * without special memory leave these unset; the core then uses
	 * aligned heap memory. */
	int (*alloc_buf)(struct qps_dev *dev, size_t len, void **addr_out);
	int (*free_buf)(struct qps_dev *dev, void *addr, size_t len);
	int (*reg_mr)(struct qps_dev *dev, void *addr, size_t len,
		      struct qps_mr **mr_out);
	int (*dereg_mr)(struct qps_mr *mr);

	int (*create_cq)(struct qps_dev *dev, int cqe, struct qps_cq **cq_out);
	int (*destroy_cq)(struct qps_cq *cq);
	/* -EIO: completions were lost to a CQ overrun (emu: once, after
	 * what did arrive has been returned). */
	int (*poll_cq)(struct qps_cq *cq, int num, struct ibv_wc *wc);
	/* Arm: the next CQE makes get_event_fd readable. */
	int (*req_notify_cq)(struct qps_cq *cq);
	int (*get_event_fd)(struct qps_dev *dev);
	/* Drain the event fd; returns the number of events consumed. */
	int (*ack_events)(struct qps_dev *dev);

	int (*create_qp)(struct qps_dev *dev,
			 const struct qps_qp_init_attr *attr,
			 struct qps_qp **qp_out);
	int (*destroy_qp)(struct qps_qp *qp);
	int (*post_send)(struct qps_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	int (*post_recv)(struct qps_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*mlx4_sq)(struct qps_qp *qp, struct qps_mlx4_sq *out);

	int (*create_flow)(struct qps_qp *qp, struct ibv_flow_attr *attr,
			   struct qps_flow **flow_out);
	int (*destroy_flow)(struct qps_flow *flow);
	/* L2 multicast membership (and IGMP where there is a kernel). */
	int (*mcast_attach)(struct qps_dev *dev, struct in_addr group,
			    struct in_addr source);
	int (*mcast_detach)(struct qps_dev *dev, struct in_addr group,
			    struct in_addr source);

	/* Next-hop MAC for an IPv4 destination on this port. */
	int (*resolve)(struct qps_dev *dev, struct in_addr dst,
		       uint8_t mac_out[6]);
	/* Changes when any resolution may have changed (port left, address
	 * moved): cached destinations are stale once it differs. It only
	 * grows: a larger value is a newer state. */
	uint64_t (*route_gen)(struct qps_dev *dev);

	/*
	 * UD (QPS_DEV_CAP_UD). A UD QP is created in RESET and brought up
	 * with modify_qp (INIT with pkey_index, port and qkey; RTR; RTS with
	 * sq_psn), as with verbs; modify_qp to IBV_QPS_ERR flushes both
	 * queues with IBV_WC_WR_FLUSH_ERR. Raw-packet QPs are created in RTS
	 * and accept modify_qp only to ERR and RESET (and back up from
	 * RESET). A missing or unexpected attribute for a transition is
	 * -EINVAL. Sends before RTS, receives before INIT: -EINVAL.
	 *
	 * A UD send WR: IBV_WR_SEND or IBV_WR_SEND_WITH_IMM, wr.ud.ah = the
	 * @ibv of an AH from create_ah on this device (a software provider
	 * recovers its AH from it), remote_qpn, remote_qkey (bit 31 set:
	 * use the QP's Q_Key). A payload over the path MTU completes with
	 * IBV_WC_LOC_LEN_ERR. A UD receive buffer gets a 40-byte GRH before
	 * the payload (byte_len counts it, IBV_WC_GRH).
	 */
	int (*modify_qp)(struct qps_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	int (*query_gid)(struct qps_dev *dev, int index, union ibv_gid *gid);
	/* @attr->grh.dgid addresses the peer (is_global must be set: RoCE);
	 * the provider resolves the next-hop MAC once, here. */
	int (*create_ah)(struct qps_dev *dev, struct ibv_ah_attr *attr,
			 struct qps_ah **ah_out);
	int (*destroy_ah)(struct qps_ah *ah);
	/* UD multicast: the QP receives what is sent to @gid (::ffff:group);
	 * per QP, reference counted per device for the L2 membership. */
	int (*attach_mcast)(struct qps_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	int (*detach_mcast)(struct qps_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);

	/*
	 * The host's own IP stack (a provider whose device is a netdev the
	 * kernel also serves: packet, verbs on a RoCE port). Hold UDP
	 * @addr:*@port (network order; *@port 0: the kernel's ephemeral
	 * choice, written back) in the kernel's port table, as the kernel
	 * socket behind the endpoint: the kernel then neither answers the
	 * port with ICMP port-unreachable nor gives it to another socket.
	 * The socket receives nothing. Returns its descriptor (the core
	 * closes it to release the port), -EADDRINUSE, or -EOPNOTSUPP where
	 * the device is not the host's (emu): the core's table alone holds
	 * the port then. @flags: QPS_HOLD_REUSEADDR, QPS_HOLD_REUSEPORT.
	 * @fd >= 0: the endpoint adopted that socket (qps_ep_adopt_fd): bind
	 * it instead of opening one, and return it; it stays the caller's,
	 * open on failure too.
	 */
	int (*hold_port)(struct qps_dev *dev, int fd, struct in_addr addr,
			 uint16_t *port, unsigned int flags);

	/*
	 * A descriptor that turns readable once @cq, armed with
	 * req_notify_cq, gets a completion: what a sender waiting for a
	 * send slot sleeps on. It may be the device's event fd, shared
	 * with every other CQ (emu, verbs), drained with ack_events.
	 * -EOPNOTSUPP where @cq raises no event (packet's send CQs: the
	 * kernel frees TX ring frames without telling): the core then
	 * sleeps in short steps.
	 */
	int (*get_cq_event_fd)(struct qps_cq *cq);

	/*
	 * Timestamps. poll_cq_ts is poll_cq that also says when each
	 * completion happened: @ts[i] for @wc[i], clock QPS_WC_TS_NONE where
	 * nothing stamped it. read_clock reads the device's clock now
	 * (cycles, as ibv_query_rt_values_ex's raw_clock), for providers
	 * with info.clock_hz.
	 */
	int (*poll_cq_ts)(struct qps_cq *cq, int num, struct ibv_wc *wc,
			  struct qps_wc_ts *ts);
	int (*read_clock)(struct qps_dev *dev, uint64_t *cycles);
	/* As resolve, for a caller that must not wait (a non-blocking
	 * send or connect): a neighbour not known yet has its resolution
	 * started and gives -EAGAIN. The stub's -EOPNOTSUPP means resolve
	 * never waits on this device. */
	int (*resolve_nowait)(struct qps_dev *dev, struct in_addr dst,
			      uint8_t mac_out[6]);

	/*
	 * The endpoint that held @fd's port through hold_port lets go of
	 * it, and the socket lives on: it was adopted (qps_ep_adopt_fd),
	 * and its owner may hand it to another process or context. Undo
	 * whatever hold_port did to the socket that makes the device take
	 * its traffic (xdp's mark), so that what arrives for the port is
	 * the kernel socket's until someone holds it again. A socket the
	 * core opened itself is closed instead; the stub does nothing.
	 */
	void (*release_port)(struct qps_dev *dev, int fd);
};

#define QPS_HOLD_REUSEADDR (1u << 0)	/* SO_REUSEADDR */
#define QPS_HOLD_REUSEPORT (1u << 1)	/* SO_REUSEPORT */
/* The socket receives what reaches the host other than through the
 * device (a filter on the interface it arrived on), with IP_PKTINFO:
 * QPS_OPT_HOST_RX. */
#define QPS_HOLD_HOST_RX (1u << 2)

/* In-tree providers; a provider not built is simply absent. */
extern const struct qps_provider_ops qps_emu_ops;
#ifdef QPS_HAVE_VERBS
extern const struct qps_provider_ops qps_verbs_ops;
#endif
#ifdef QPS_HAVE_PACKET
extern const struct qps_provider_ops qps_packet_ops;
#endif
#ifdef QPS_HAVE_XDP
extern const struct qps_provider_ops qps_xdp_ops;
#endif
/* Measurement only (docs/null.md): never picked unless named. */
#ifdef QPS_HAVE_NULL
extern const struct qps_provider_ops qps_null_ops;
#endif

/*
 * qps_provider_find - the filled ops table of the provider called @name:
 * every op the provider left NULL (or that lies beyond its @size) is a stub
 * returning -EOPNOTSUPP. -ENOENT for an unknown name.
 */
int qps_provider_find(const char *name, const struct qps_provider_ops **ops);
/* @ops (filled) keeps the stub route_gen: its routes never change, the
 * generation is 0 for good. */
bool qps_provider_routes_static(const struct qps_provider_ops *ops);

/*
 * qps_provider_fill - copy the first @raw->size bytes of @raw into @out and
 * replace every op that is NULL or not wholly within them by its stub; sets
 * @out->size to sizeof(*out). -EINVAL when @raw has no name. The registry
 * uses it for each provider; tests use it on their own tables.
 */
int qps_provider_fill(const struct qps_provider_ops *raw,
		      struct qps_provider_ops *out);

/* Pack ETH/IPv4/UDP specs into @buf (>= QPS_FLOW_ATTR_MAX bytes, aligned
 * for struct ibv_flow_attr). ETH is always present (dst_mac masked only
 * with match_mac), IPv4 when an address or port is set, UDP when a port is
 * set; a zero address or port has a zero mask (wildcard). The layout is
 * described in flow_attr.c. Returns the attr, at the start of @buf. */
#define QPS_FLOW_ATTR_MAX 256

struct qps_flow_match {
	uint8_t dst_mac[6];
	bool match_mac;
	uint32_t dst_ip, src_ip;	/* network order, 0 = any */
	uint16_t dst_port, src_port;	/* network order, 0 = any */
	uint16_t priority;		/* lower = stronger */
	enum ibv_flow_attr_type type;	/* NORMAL, MC_DEFAULT, ALL_DEFAULT */
};

struct ibv_flow_attr *qps_flow_attr_build(void *buf,
					  const struct qps_flow_match *m);

#endif /* QPS_PROVIDER_H */
