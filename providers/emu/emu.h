/* SPDX-License-Identifier: MIT */
/*
 * emu: a software ConnectX-3 (mlx4) behind the provider boundary.
 *
 * Internal to the provider and its tests; nothing here is installed.
 *
 * Split of state:
 *  - private to the process that owns a port: the device handle, send
 *    queues (ring, wr_id table, engine), MR table, heaps of the port's
 *    shared areas;
 *  - in the shared-memory wire (struct qps_emu_wire_hdr, then one
 *    struct qps_emu_shm_port + queue area + buffer pool per port): what
 *    other processes must reach to deliver a frame: the port's MAC filter,
 *    steering table, receive queues, completion queues and receive
 *    buffers. Peers treat all of it as untrusted.
 *
 * Every shared index is a free-running uint32_t; ring slots are index &
 * (size - 1). Shared fields are plain types accessed with the __atomic
 * builtins, so the layout stays a plain C struct.
 */
#ifndef QPS_EMU_H
#define QPS_EMU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/mlx4dv.h>

#include "prov_sw.h"
#include "provider.h"

/* Wire geometry: fixed at build time, recorded in the header and checked
 * by every process that attaches. */
#define QPS_EMU_MAGIC		0x716d752d34786c31ULL	/* "qmu-4xl1" */
/* 2: UD QP state, group table, counters */
#define QPS_EMU_VERSION		2u
#define QPS_EMU_MAX_PORTS	16u
#define QPS_EMU_POOL_SIZE	(8u << 20)	/* receive buffers, per port */
#define QPS_EMU_QAREA_SIZE	(2u << 20)	/* RQ and CQ rings, per port */
#define QPS_EMU_MAX_RQ		16u	/* receive queues per port */
#define QPS_EMU_MAX_CQ		32u	/* completion queues per port */
#define QPS_EMU_MAX_FLOWS	256u	/* steering rules per port */
#define QPS_EMU_MAX_MC		64u	/* multicast MAC filter entries */
#define QPS_EMU_MAX_QP		64u	/* QPs per port (device handle) */
#define QPS_EMU_MAX_MR		256u
#define QPS_EMU_MAX_WR		4096u	/* max_qp_wr, send and receive */
#define QPS_EMU_MAX_CQE		8192u
/* The device clock (emu_clock.c): ConnectX-3's hca_core_clock, and the
 * 48 bits a CQE keeps of it. */
#define QPS_EMU_CLOCK_HZ	427000000ull
#define QPS_EMU_CLOCK_MASK	((1ull << 48) - 1)
#define QPS_EMU_MTU_DEFAULT	1500u
#define QPS_EMU_MTU_MIN		68u
#define QPS_EMU_MTU_MAX		9000u
#define QPS_EMU_ETH_HLEN	14u
#define QPS_EMU_FRAME_MAX	(QPS_EMU_MTU_MAX + QPS_EMU_ETH_HLEN)
#define QPS_EMU_NAME_MAX	64u	/* wire name incl. NUL */
#define QPS_EMU_SHM_PREFIX	"/qpsock-emu-"

/* Send queue. The default stride keeps a WQE BlueFlame-sized. */
#define QPS_EMU_WQE_SHIFT	8
#define QPS_EMU_WQE_SHIFT_MAX	9
#define QPS_EMU_BF_SIZE		256u	/* one half of the BF register */
#define QPS_EMU_BF_LATCH	16u	/* BF writes latched in stepping mode */
#define QPS_EMU_STAMP		0xffffffffu
#define QPS_EMU_WQEBB		64u

/* Addresses: 198.18.0.1 .. 198.18.0.254 and 02:51:50:00:00:<port>. */
#define QPS_EMU_NET		0xc6120000u	/* host order */
#define QPS_EMU_MAC_OUI0	0x02
#define QPS_EMU_MAC_OUI1	0x51
#define QPS_EMU_MAC_OUI2	0x50

/* mlx4 receive CQE opcode for a SEND (libmlx4's MLX4_RECV_OPCODE_SEND;
 * mlx4dv.h does not carry the receive opcodes). */
#define QPS_EMU_RECV_OPCODE_SEND 0x01
#define QPS_EMU_RECV_OPCODE_SEND_IMM 0x02

/* mlx4 CQE status bits that mlx4dv.h does not carry (Linux's
 * include/linux/mlx4/cq.h has them in the status word's upper half). */
#define QPS_EMU_CQE_STATUS_IPV4F	(1u << 23)	/* IPv4 fragment */
#define QPS_EMU_CQE_STATUS_IPV4OPT	(1u << 25)	/* IPv4 options */
#define QPS_EMU_CQE_STATUS_UDP		(1u << 27)

/* UD over RoCE v2 (emu_ud_*.c, docs/emu.md "UD QPs"). */
#define QPS_EMU_ROCE_PORT	4791u	/* IANA UDP port of RoCE v2 */
#define QPS_EMU_GRH_LEN		40u	/* GRH before a UD receive */
#define QPS_EMU_ROCE_OVERHEAD	96u	/* see qps_emu_ib_mtu() */
#define QPS_EMU_QKEY_OWN	0x80000000u /* remote_qkey: use the QP's */
#define QPS_EMU_MC_QPN		0xffffffu
#define QPS_EMU_PKEY_DEFAULT	0xffffu
#define QPS_EMU_MAX_MCG		64u	/* UD groups per port */
#define QPS_EMU_AH_MAGIC	0x41486d75u

enum { QPS_EMU_SLOT_FREE = 0, QPS_EMU_SLOT_ACTIVE = 1 };

/* --- shared memory ---------------------------------------------------- */

struct qps_emu_wire_hdr {
	uint64_t magic;		/* release-stored last by the creator */
	uint32_t version;
	uint32_t max_ports;
	uint32_t hdr_size;
	uint32_t port_ctl_size;
	uint32_t qarea_size;
	uint32_t pool_size;
	uint64_t port_stride;
	uint64_t size;
	uint32_t mtu;		/* L3 MTU of the wire */
	int32_t creator_pid;	/* written first, for a crashed creator */
	uint32_t unlinked;	/* under lock: the name is gone, re-attach */
	uint32_t nports;	/* under lock */
	uint64_t route_gen;	/* bumped under lock, read atomically */
	pthread_mutex_t lock;	/* robust: ports, addresses, unlink */
};

/* Multicast MAC filter entry; refcnt 0 = free. Under the port rx_lock. */
struct qps_emu_shm_mc {
	uint8_t mac[6];
	uint16_t pad;
	uint32_t refcnt;
};

enum qps_emu_flow_tier { /* lower tier wins before priority */
	QPS_EMU_TIER_NORMAL = 0,
	QPS_EMU_TIER_MC_DEFAULT = 1,
	QPS_EMU_TIER_ALL_DEFAULT = 2,
};

#define QPS_EMU_FLOW_IP		(1u << 0)	/* frame must be IPv4 */
#define QPS_EMU_FLOW_UDP	(1u << 1)	/* frame must be UDP */

/* A steering rule; values are pre-masked, fields in network order. */
struct qps_emu_shm_flow {
	uint32_t used;
	uint32_t tier;
	uint32_t prio;
	uint32_t seq;		/* creation order: ties go to the earlier */
	uint32_t rq;		/* RQ slot of the target QP */
	uint32_t need;		/* QPS_EMU_FLOW_* */
	uint8_t mac[6], mac_mask[6];
	uint32_t sip, sip_mask, dip, dip_mask;
	uint16_t sport, sport_mask, dport, dport_mask;
};

/* A receive queue: ring of struct mlx4_wqe_data_seg in the queue area,
 * addr = offset into the port's pool. The owner produces (head), peers
 * consume under rx_lock (tail). */
struct qps_emu_shm_rq {
	uint32_t state;
	uint32_t qpn;
	uint32_t cq;		/* CQ slot for its completions */
	uint32_t wqe_cnt;	/* power of two */
	uint64_t ring_off;	/* offset in the queue area */
	uint32_t head;		/* posted; owner release-stores */
	uint32_t tail;		/* consumed; under rx_lock */
	uint64_t cqes;		/* receive CQEs written for this RQ */
	uint64_t no_buf;	/* frames steered here with nothing posted */
	uint32_t qp_type;	/* enum ibv_qp_type of the QP */
	uint32_t qp_state;	/* enum ibv_qp_state; delivery needs >= RTR */
	uint32_t qkey;		/* UD: a datagram must carry it */
	uint32_t pad;
};

/* UD multicast attachments: the QPs (bitmask of RQ slots) that receive
 * what is sent to @group (IPv4, network order). rqs 0 = free. Only the
 * owner edits it, under rx_lock. */
struct qps_emu_shm_mcg {
	uint32_t group;
	uint32_t rqs;
};

/* A completion queue: ring of struct mlx4_cqe in the queue area. Every
 * producer (peers delivering, the owner's send engine) writes under the
 * port's rx_lock; the owner consumes and publishes cons. */
struct qps_emu_shm_cq {
	uint32_t state;
	uint32_t cqe_cnt;	/* power of two */
	uint64_t ring_off;
	uint32_t prod;		/* under rx_lock */
	uint32_t cons;		/* owner release-stores after reading */
	uint32_t armed;		/* req_notify_cq: 1, the next CQE clears it */
	uint32_t overrun;	/* a CQE was dropped: poll_cq reports -EIO */
};

/* Receive-side counters of a port, written by whichever process
 * delivers (under rx_lock), read by the owner. */
struct qps_emu_shm_stats {
	uint64_t rx_frames;	/* frames that reached this port's filter */
	uint64_t rx_cqes;
	uint64_t rx_drops;	/* every frame not placed, whatever the cause */
	uint64_t rx_no_rule;
	uint64_t rx_no_buf;
	uint64_t rx_cq_overrun;
	uint64_t rx_len_err;	/* receive buffer too small: error CQE */
	uint64_t rx_corrupt;	/* shared state that failed validation */
	uint64_t lock_recovered; /* rx_lock taken over from a dead owner */
	uint64_t rx_qp_state;	/* target QP not in RTR/RTS */
	uint64_t rx_roce;	/* RoCE v2 frames (UDP 4791 to us) */
	uint64_t rx_roce_bad;	/* malformed: lengths, IPv4 sum, pad */
	uint64_t rx_icrc_bad;	/* ICRC mismatch */
	uint64_t rx_bth_bad;	/* opcode, transport version or P_Key */
	uint64_t rx_qpn_bad;	/* no UD QP with that number here */
	uint64_t rx_qkey_bad;	/* Q_Key differs from the QP's */
	uint64_t rx_mcg_none;	/* group datagram, no QP attached */
};

struct qps_emu_shm_port {
	pthread_mutex_t rx_lock; /* robust; everything below except st */
	uint32_t state;		/* QPS_EMU_SLOT_*, release-stored */
	int32_t pid;
	uint32_t gen;		/* bumped on every attach of this slot */
	uint32_t addr;		/* IPv4, network order */
	uint8_t mac[6];
	uint16_t pad;
	uint32_t flow_seq;
	uint32_t flow_hi;	/* rules live below this slot */
	struct qps_emu_shm_stats st;
	struct qps_emu_shm_mc mc[QPS_EMU_MAX_MC];
	struct qps_emu_shm_flow flow[QPS_EMU_MAX_FLOWS];
	struct qps_emu_shm_rq rq[QPS_EMU_MAX_RQ];
	struct qps_emu_shm_cq cq[QPS_EMU_MAX_CQ];
	struct qps_emu_shm_mcg mcg[QPS_EMU_MAX_MCG];
};

/* --- private state ---------------------------------------------------- */

/* First-fit extent allocator over one shared area of a port. Only the
 * owning process allocates, so the free list stays private. */
#define QPS_EMU_HEAP_EXT 256u
struct qps_emu_heap {
	uint64_t size;
	unsigned int n;
	struct {
		uint64_t off, len;
	} ext[QPS_EMU_HEAP_EXT];
};

struct qps_emu_wire {
	void *base;
	size_t size;
	struct qps_emu_wire_hdr *hdr;
	char name[QPS_EMU_NAME_MAX];
};

/* Send-side counters of one QP; the engine is the only writer. */
struct qps_emu_qp_stats {
	uint64_t wqes;
	uint64_t doorbells;
	uint64_t bf_writes;
	uint64_t tx_cqes;
	uint64_t tx_drops;	/* WQEs that did not put a frame on the wire */
	uint64_t tx_no_dest;	/* unicast to a MAC no port has */
	uint64_t malformed;	/* stamped chunk, bad size or segment */
	uint64_t tx_cq_overrun;
	uint64_t bf_bad;	/* BF writes ignored or reduced to a doorbell */
	uint64_t db_bad;	/* doorbell or BF with another QP's number */
	uint64_t flushed;	/* WQEs completed with WR_FLUSH_ERR */
};

struct qps_emu_cq {
	struct qps_cq base;
	unsigned int slot;
	uint32_t cqe_cnt;
	struct mlx4_cqe *ring;
	uint64_t ring_off;
	pthread_mutex_t poll_lock;
	uint32_t cons;		/* private copy of the consumer index */
	unsigned int users;	/* QPs that use it; under dev->lock */
};

struct qps_emu_bf_latch {
	uint32_t len;
	uint8_t wqe[QPS_EMU_BF_SIZE];
};

struct qps_emu_qp {
	struct qps_qp base;
	unsigned int idx;	/* in dev->qp[] */
	bool sq_sig_all;

	/* Send queue, mlx4 layout; written by post_send or the core. */
	pthread_mutex_t sq_lock;
	uint8_t *sq_buf;
	uint32_t wqe_cnt;
	int wqe_shift;
	uint32_t spare;
	uint32_t max_post;
	uint32_t max_inline;
	uint32_t max_sge;
	uint32_t doorbell_qpn;	/* big endian, qpn << 8 */
	uint64_t *wrid;
	uint32_t sq_head;	/* producer index */
	uint32_t sq_tail;	/* completed index: poll_cq release-stores */
	bool keep_sq_index;	/* test hook: RESET leaves sq_head/sq_tail */

	/* The device side of the SQ: runs in whichever thread rings. */
	pthread_mutex_t eng_lock;
	uint32_t ci;		/* next WQE to execute; release-stored */
	bool db_pending;	/* doorbell latched, not fully executed */
	unsigned int bf_first, bf_n;
	struct qps_emu_bf_latch bf_q[QPS_EMU_BF_LATCH];
	uint8_t *frame;		/* engine scratch: QPS_EMU_FRAME_MAX */
	struct qps_emu_qp_stats st;

	/* Receive queue: ring in shared memory, wr_ids here. */
	/* QP state (enum ibv_qp_state): stored under sq_lock + rq_lock +
	 * eng_lock, so any one of them gives a stable value; atomic
	 * loads elsewhere. */
	uint32_t state;
	bool ud;
	uint32_t qkey;		/* UD, from modify_qp */
	uint32_t psn;		/* UD: next PSN; engine */
	unsigned int ngroups;	/* UD groups attached; under dev->lock */
	uint32_t groups[QPS_EMU_MAX_MCG];

	bool has_rq;
	unsigned int rq_slot;
	pthread_mutex_t rq_lock;
	struct mlx4_wqe_data_seg *rq_ring;
	uint64_t rq_off;
	uint32_t rq_cnt;
	uint32_t rq_head;	/* posted */
	uint32_t rq_done;	/* completions polled; poll_cq release-stores */
	uint64_t *rq_wrid;
	uint32_t *rq_len;
	uint64_t rq_flushed;	/* atomic: receive WQEs flushed */
	unsigned int nflows;	/* under dev->lock */
};

struct qps_emu_flow {
	struct qps_flow base;
	unsigned int slot;
	uint32_t seq;
};

struct qps_emu_dev {
	struct qps_dev base;
	struct qps_emu_wire wire;
	unsigned int port;
	uint32_t gen;
	uint32_t mtu;
	struct qps_emu_shm_port *sp;
	uint8_t *qarea;
	uint8_t *pool;
	int evfd;		/* bound AF_UNIX datagram socket */
	int32_t pid;		/* the process that opened it */

	pthread_mutex_t lock;	/* object tables and heaps */
	struct qps_emu_heap pool_heap;
	struct qps_emu_heap qarea_heap;
	struct qps_emu_qp *qp[QPS_EMU_MAX_QP];
	struct qps_emu_cq *cq[QPS_EMU_MAX_CQ];
	struct qps_emu_flow *flow[QPS_EMU_MAX_FLOWS];
	uint32_t qp_seq;

	/* Locked, not lock-free: the engine takes the lock per data
	 * segment. */
	struct qps_sw_mr_table mrs;

	/* The BlueFlame register: one per device context, as on mlx4 (one
	 * per UAR page), shared by every QP, and the state that serialises
	 * writes to it (provider.h). A write names its QP in bf_qpn. */
	uint8_t *bf_reg;	/* 2 * QPS_EMU_BF_SIZE, 64-byte aligned */
	struct qps_mlx4_bf_state bf;

	bool stepping;		/* atomic: doorbells only latch */
	uint32_t cost_db_ns;	/* atomic: cost model, per doorbell write */
	uint32_t cost_bf_ns;	/* atomic: cost model, per BlueFlame write */
	uint64_t cqe_corrupt;	/* atomic: CQEs poll_cq refused */
	uint64_t db_bad;	/* atomic: doorbells for unknown QPs */
	int flow_err;		/* atomic: fail the next create_flow */
	/* Test hook: sees every frame the engine puts on the wire. */
	void (*tap)(void *arg, const uint8_t *frame, uint32_t len);
	void *tap_arg;
	struct qps_emu_qp_stats retired; /* destroyed QPs; under lock */
};

/* One QP: its send side, and its receive queue as deliverers count it. */
struct qps_emu_qp_counters {
	struct qps_emu_qp_stats tx;
	uint64_t rx_cqes;
	uint64_t rx_no_buf;
	uint64_t rx_flushed;	/* receive WQEs flushed (ERR) */
};

/* Everything the provider counts, for tests and docs/emu.md. */
struct qps_emu_counters {
	struct qps_dev_counters dev;
	uint64_t tx_no_dest;
	uint64_t malformed;
	uint64_t tx_cq_overrun;
	uint64_t bf_bad;
	uint64_t db_bad;
	uint64_t rx_frames;
	uint64_t rx_len_err;
	uint64_t rx_corrupt;
	uint64_t cqe_corrupt;
	uint64_t lock_recovered;
	uint64_t flushed;	/* send WQEs flushed */
	uint64_t rx_qp_state;
	uint64_t rx_roce;
	uint64_t rx_roce_bad;
	uint64_t rx_icrc_bad;
	uint64_t rx_bth_bad;
	uint64_t rx_qpn_bad;
	uint64_t rx_qkey_bad;
	uint64_t rx_mcg_none;
};

#define qps_emu_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline struct qps_emu_dev *qps_emu_dev(struct qps_dev *d)
{
	return qps_emu_container_of(d, struct qps_emu_dev, base);
}

static inline struct qps_emu_qp *qps_emu_qp(struct qps_qp *q)
{
	return qps_emu_container_of(q, struct qps_emu_qp, base);
}

static inline struct qps_emu_cq *qps_emu_cq(struct qps_cq *c)
{
	return qps_emu_container_of(c, struct qps_emu_cq, base);
}

/* Only the process that opened a device changes its port's shared state
 * on destroy/close; a forked child's copy just frees its memory. */
bool qps_emu_owner(const struct qps_emu_dev *dev);

static inline void qps_emu_count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline uint64_t qps_emu_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static inline bool qps_emu_is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

uint32_t qps_emu_roundup_pow2(uint32_t v);

/* --- emu_wire.c: segment, ports, locks, addresses --------------------- */

int qps_emu_lock(pthread_mutex_t *m);
void qps_emu_unlock(pthread_mutex_t *m);
int qps_emu_mutex_init_shared(pthread_mutex_t *m);
int qps_emu_wire_attach(const char *name, struct qps_emu_wire *w);
void qps_emu_wire_detach(struct qps_emu_wire *w);
struct qps_emu_shm_port *qps_emu_port_ctl(const struct qps_emu_wire *w,
					  unsigned int port);
uint8_t *qps_emu_port_qarea(const struct qps_emu_wire *w, unsigned int port);
uint8_t *qps_emu_port_pool(const struct qps_emu_wire *w, unsigned int port);
int qps_emu_port_attach(struct qps_emu_dev *dev,
			const struct qps_dev_attr *attr);
void qps_emu_port_detach(struct qps_emu_dev *dev);
void qps_emu_port_mac(unsigned int port, uint8_t mac[6]);
/* Put a frame on the wire; returns the number of ports it reached. */
unsigned int qps_emu_wire_tx(struct qps_emu_dev *dev, const uint8_t *frame,
			     uint32_t len);
int qps_emu_mcast_attach(struct qps_dev *dev, struct in_addr group,
			 struct in_addr source);
int qps_emu_mcast_detach(struct qps_dev *dev, struct in_addr group,
			 struct in_addr source);
int qps_emu_resolve(struct qps_dev *dev, struct in_addr dst,
		    uint8_t mac_out[6]);
uint64_t qps_emu_route_gen(struct qps_dev *dev);

/* --- emu_pool.c: shared-area heaps, alloc_buf ------------------------- */

void qps_emu_heap_init(struct qps_emu_heap *h, uint64_t size);
int qps_emu_heap_alloc(struct qps_emu_heap *h, uint64_t len, uint64_t align,
		       uint64_t *off_out);
int qps_emu_heap_free(struct qps_emu_heap *h, uint64_t off, uint64_t len);
int qps_emu_alloc_buf(struct qps_dev *dev, size_t len, void **addr_out);
int qps_emu_free_buf(struct qps_dev *dev, void *addr, size_t len);

/* --- emu_dev.c -------------------------------------------------------- */

extern const struct qps_provider_ops qps_emu_ops;
/* Copy out the lkey's range; 0 or -EINVAL. */
int qps_emu_mr_lookup(struct qps_emu_dev *dev, uint32_t lkey, uintptr_t *addr,
		      size_t *len);
int qps_emu_counters_all(struct qps_dev *dev, struct qps_emu_counters *out);
int qps_emu_qp_counters(struct qps_qp *qp, struct qps_emu_qp_counters *out);

/* --- emu_qp.c --------------------------------------------------------- */

int qps_emu_create_qp(struct qps_dev *dev, const struct qps_qp_init_attr *attr,
		      struct qps_qp **qp_out);
/* Turn @qpn's CQEs still in @cq into no-ops (libmlx4's CQ clean). */
void qps_emu_cq_clean(struct qps_emu_dev *dev, struct qps_emu_cq *cq,
		      uint32_t qpn);
int qps_emu_destroy_qp(struct qps_qp *qp);
int qps_emu_mlx4_sq(struct qps_qp *qp, struct qps_mlx4_sq *out);
struct qps_emu_qp *qps_emu_qp_by_qpn(struct qps_emu_dev *dev, uint32_t qpn);

/* --- emu_sq.c: send queue, doorbell and BlueFlame registers ----------- */

int qps_emu_sq_init(struct qps_emu_qp *qp, const struct ibv_qp_cap *cap);
/* Empty the send ring as at creation (RESET); sq_lock and eng_lock held. */
void qps_emu_sq_reset(struct qps_emu_qp *qp);
void qps_emu_sq_fini(struct qps_emu_qp *qp);
int qps_emu_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
void qps_emu_db_write(struct qps_qp *qp, uint32_t be_val);
void qps_emu_bf_copy(struct qps_qp *qp, void *dst, const void *src,
		     size_t len);

/* --- emu_engine.c: executes WQEs -------------------------------------- */

/* Run the engine of @qp for up to @budget WQEs; eng_lock held. */
unsigned int qps_emu_engine_run(struct qps_emu_qp *qp, unsigned int budget);

/*
 * Stepping mode (tests): doorbells and BlueFlame writes only latch; WQEs
 * run in qps_emu_step(). Switching it off runs whatever is latched.
 */
void qps_emu_set_stepping(struct qps_dev *dev, bool on);
/* Execute up to @max_wqes latched WQEs (0 = all); returns how many ran. */
int qps_emu_step(struct qps_dev *dev, unsigned int max_wqes);

/*
 * Cost model (off by default): the CPU time a doorbell write and a
 * BlueFlame write cost the writer on hardware, spun in the writing thread
 * before the register acts. Set at open from $QPS_EMU_DB_NS and
 * $QPS_EMU_BF_NS (0..QPS_EMU_COST_MAX_NS), or here; read back with get.
 */
#define QPS_EMU_COST_MAX_NS 1000000u
int qps_emu_set_cost(struct qps_dev *dev, uint32_t db_ns, uint32_t bf_ns);
void qps_emu_get_cost(struct qps_dev *dev, uint32_t *db_ns, uint32_t *bf_ns);

/* --- emu_cq.c --------------------------------------------------------- */

struct qps_emu_cqe_info {
	uint32_t qpn;
	uint32_t byte_cnt;
	uint16_t wqe_index;
	uint8_t opcode;		/* mlx4 CQE opcode, or MLX4_CQE_OPCODE_ERROR */
	uint8_t syndrome;	/* error CQEs */
	bool is_send;
	bool grh;		/* UD receive: a GRH leads the buffer */
	uint32_t src_qp;	/* UD receive */
	uint32_t imm;		/* network order, with RECV_OPCODE_SEND_IMM */
	uint32_t status;	/* receive: mlx4 CQE status (emu_csum.c) */
	uint16_t checksum;	/* receive: the CQE's checksum field */
};

enum qps_emu_cqe_res {
	QPS_EMU_CQE_OK,
	QPS_EMU_CQE_NOTIFY,	/* written and the CQ was armed */
	QPS_EMU_CQE_FULL,	/* not written: would overwrite */
	QPS_EMU_CQE_CORRUPT,	/* CQ state failed validation */
};

/* Check that CQ @slot of @sp can take one CQE; rx_lock held. */
enum qps_emu_cqe_res qps_emu_cq_room(struct qps_emu_shm_port *sp,
				     unsigned int slot);
/* Write one CQE into CQ @slot of the port; rx_lock held. */
enum qps_emu_cqe_res qps_emu_cq_write(struct qps_emu_shm_port *sp,
				      uint8_t *qarea, unsigned int slot,
				      const struct qps_emu_cqe_info *ci);
int qps_emu_event_open(struct qps_emu_dev *dev);
void qps_emu_notify(struct qps_emu_dev *dev, unsigned int port, uint32_t gen);
int qps_emu_create_cq(struct qps_dev *dev, int cqe, struct qps_cq **cq_out);
int qps_emu_destroy_cq(struct qps_cq *cq);
int qps_emu_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc);
int qps_emu_req_notify_cq(struct qps_cq *cq);
int qps_emu_get_event_fd(struct qps_dev *dev);
int qps_emu_ack_events(struct qps_dev *dev);
int qps_emu_get_cq_event_fd(struct qps_cq *cq);
int qps_emu_poll_cq_ts(struct qps_cq *cq, int num, struct ibv_wc *wc,
		       struct qps_wc_ts *ts);

/* emu_clock.c: the device's free-running clock, in cycles. */
uint64_t qps_emu_clock_now(void);
int qps_emu_read_clock(struct qps_dev *dev, uint64_t *cycles);

/* --- emu_csum.c ------------------------------------------------------- */

/* Compute the checksums @srcrb (a WQE's ctrl flags, host order) asks
 * for into the raw frame @f. */
void qps_emu_csum_tx(uint8_t *f, uint32_t len, uint32_t srcrb);
/* The mlx4 CQE status bits (host order) of a received frame, and its
 * checksum field. */
uint32_t qps_emu_csum_rx(const uint8_t *frame, uint32_t len,
			 uint16_t *checksum);

/* --- emu_rq.c --------------------------------------------------------- */

int qps_emu_rq_init(struct qps_emu_qp *qp, const struct ibv_qp_cap *cap);
void qps_emu_rq_fini(struct qps_emu_qp *qp);
int qps_emu_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
struct qps_emu_rx_result;

/* Flush the posted receive WQEs with WR_FLUSH_ERR CQEs (QP in ERR), as
 * many as the CQ takes; the rest stay posted and go on the next flush. */
void qps_emu_rq_flush(struct qps_emu_qp *qp);
/* Empty the RQ and set the shared state (RESET, or any state). */
void qps_emu_rq_set_state(struct qps_emu_qp *qp, uint32_t state, bool empty);

/* Validated RQ @slot of a port, or NULL; rx_lock held. */
struct qps_emu_shm_rq *qps_emu_rq_checked(struct qps_emu_shm_port *sp,
					  int slot);

/* A piece of what lands in a receive buffer. */
struct qps_emu_piece {
	const void *p;
	uint32_t len;
};

/* Take the next posted buffer of RQ @slot, copy @pc[0..npc) into it and
 * write the CQE described by @ci (qpn and wqe_index are filled here);
 * counts every outcome. rx_lock held. */
void qps_emu_rq_deliver(struct qps_emu_shm_port *sp, uint8_t *qarea,
			uint8_t *pool, int slot, const struct qps_emu_piece *pc,
			unsigned int npc, struct qps_emu_cqe_info *ci,
			struct qps_emu_rx_result *res);

struct qps_emu_rx_result {
	bool notify;		/* a CQ of the port was armed */
	uint32_t gen;		/* port generation, for the event address */
};

/* Deliver a frame into @port if its MAC filter takes it (own MAC,
 * broadcast, or a joined group). Returns true when the port took the frame
 * for steering, whatever happened next. */
bool qps_emu_port_rx(struct qps_emu_wire *w, unsigned int port,
		     const uint8_t *frame, uint32_t len,
		     struct qps_emu_rx_result *res);

/* --- emu_flow.c ------------------------------------------------------- */

int qps_emu_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			struct qps_flow **flow_out);
int qps_emu_destroy_flow(struct qps_flow *flow);
/* Best rule's RQ slot for a frame, or -1; rx_lock held. */
int qps_emu_flow_match(const struct qps_emu_shm_port *sp,
		       const uint8_t *frame, uint32_t len);

/* --- emu_ud_roce.c: RoCE v2 frames (pure functions) ------------------ */

/* The largest IB MTU (256..4096) a RoCE v2 packet fits into on a port
 * of L3 MTU @mtu (IPv4/UDP/BTH/ICRC and the largest extension headers
 * taken off first, as Linux's iboe_get_mtu); 0 when none fits. */
uint32_t qps_emu_ib_mtu(uint32_t mtu);

/* What goes into, or came out of, a RoCE v2 UD datagram. */
struct qps_emu_roce {
	uint8_t dmac[6], smac[6];
	uint32_t sip, dip;	/* network order */
	uint8_t tos, ttl;
	uint16_t sport;		/* UDP source port, host order */
	uint8_t opcode;		/* QPS_EMU_BTH_UD_SEND[_IMM] */
	bool se;		/* solicited event */
	uint16_t pkey;
	uint32_t dqpn, psn, qkey, sqpn;
	uint32_t imm;		/* network order, with ..._SEND_IMM */
	/* parse only */
	const uint8_t *ip;	/* the IPv4 header in the frame */
	const uint8_t *payload;
	uint32_t payload_len;	/* without the pad */
};

#define QPS_EMU_BTH_UD_SEND	0x64	/* UD SEND Only */
#define QPS_EMU_BTH_UD_SEND_IMM	0x65	/* ... with Immediate */

/* Headers from Ethernet to ImmDt for @r (62, or 66 with immediate). */
uint32_t qps_emu_roce_hdr_len(bool imm);
/* Build the frame whose @payload_len bytes already sit at
 * f + qps_emu_roce_hdr_len(): headers, pad, ICRC. Returns its length. */
uint32_t qps_emu_roce_build(uint8_t *f, const struct qps_emu_roce *r,
			    uint32_t payload_len);
/* ICRC of the packet whose IPv4 header is at @ip, over @len bytes (IPv4
 * header to the end of the pad, ICRC excluded): CRC-32 of 8 bytes of
 * 0xff, then the bytes with the variant fields masked to 1s. */
uint32_t qps_emu_roce_icrc(const uint8_t *ip, uint32_t len);

enum qps_emu_roce_res {
	QPS_EMU_ROCE_OK,
	QPS_EMU_ROCE_NOT,	/* not RoCE v2: leave it to steering */
	QPS_EMU_ROCE_BAD,	/* malformed */
	QPS_EMU_ROCE_ICRC,	/* ICRC mismatch */
	QPS_EMU_ROCE_BTH,	/* opcode, version or P_Key not ours */
};

/* Classify and parse @frame; fills @r unless NOT. @local: our address
 * (network order); multicast destinations are RoCE too. */
enum qps_emu_roce_res qps_emu_roce_parse(const uint8_t *frame, uint32_t len,
					 uint32_t local,
					 struct qps_emu_roce *r);

/* --- emu_ud_qp.c: QP states, modify_qp, flushing ---------------------- */

int qps_emu_modify_qp(struct qps_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask);
/* Atomic read of qp->state. */
uint32_t qps_emu_qp_state(const struct qps_emu_qp *qp);

/* --- emu_ud_ah.c: GIDs, address handles, UD multicast ----------------- */

/* A software AH: @ibv is what UD WRs carry (wr.ud.ah). */
struct qps_emu_ah {
	struct qps_ah base;
	struct ibv_ah ibv;
	uint32_t magic;		/* QPS_EMU_AH_MAGIC while alive */
	uint8_t mac[6];		/* next hop, resolved at creation */
	uint8_t dgid[16];
	uint8_t hop_limit;
	uint8_t tclass;
	uint8_t sl;
	uint32_t flow_label;
};

int qps_emu_query_gid(struct qps_dev *dev, int index, union ibv_gid *gid);
int qps_emu_create_ah(struct qps_dev *dev, struct ibv_ah_attr *attr,
		      struct qps_ah **ah_out);
int qps_emu_destroy_ah(struct qps_ah *ah);
/* The AH behind a WR's ibv_ah, or NULL when it is not one of @dev's. */
struct qps_emu_ah *qps_emu_ah_of(struct qps_emu_dev *dev, struct ibv_ah *ibv);
int qps_emu_attach_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
int qps_emu_detach_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
/* Detach @qp from every group (destroy); dev->lock held. */
void qps_emu_ud_detach_all(struct qps_emu_qp *qp);

/* --- emu_ud_tx.c / emu_ud_rx.c ---------------------------------------- */

/* Engine: turn the UD WQE @w (@size bytes, private copy) whose payload
 * was gathered at qp->frame + hdr into a RoCE v2 frame; *len is hdr +
 * payload on entry, the frame length on return. 0 or a CQE syndrome. */
uint8_t qps_emu_ud_frame(struct qps_emu_qp *qp, const uint8_t *w,
			 uint32_t hdr, uint32_t *len);
/* Delivery: true when @frame is RoCE v2 for this port and was handled
 * (placed or counted as dropped); false leaves it to steering. rx_lock
 * held. */
bool qps_emu_ud_rx(struct qps_emu_shm_port *sp, uint8_t *qarea,
		   uint8_t *pool, const uint8_t *frame, uint32_t len,
		   struct qps_emu_rx_result *res);

/* --- error injection (tests, the verbs test double) ------------------- */

/* The next create_flow on @dev fails with @neg_errno (< 0); 0 cancels. */
int qps_emu_inject_flow_err(struct qps_dev *dev, int neg_errno);
/* Mark @cq as overrun, as if a CQE had been dropped: the next poll_cq
 * that finds it empty returns -EIO. */
void qps_emu_inject_cq_overrun(struct qps_cq *cq);

/* --- test hooks ------------------------------------------------------- */

/* The shared producer index of @qp's receive queue (NULL without RQ). */
uint32_t *qps_emu_test_rq_head(struct qps_qp *qp);
/* The shared state of @qp's RQ / of @cq, as peers see them. */
struct qps_emu_shm_rq *qps_emu_test_shm_rq(struct qps_qp *qp);
struct qps_emu_shm_cq *qps_emu_test_shm_cq(struct qps_cq *cq);
/* @on: RESET leaves @qp's producer and completion indices where they
 * were while the device restarts at WQE 0 (a provider that forgets its
 * own indices on RESET, as the verbs direct path once did). Under no
 * lock: set it while the QP is idle. */
void qps_emu_test_keep_sq_index(struct qps_qp *qp, bool on);
/* The port index of @dev on its wire. */
unsigned int qps_emu_test_port(struct qps_dev *dev);
/* Call @fn for every frame @dev's send engine puts on the wire, in the
 * engine's thread, before delivery (NULL removes it). Set it while no
 * send is in flight. */
void qps_emu_test_set_tap(struct qps_dev *dev,
			  void (*fn)(void *arg, const uint8_t *frame,
				     uint32_t len),
			  void *arg);

#endif /* QPS_EMU_H */
