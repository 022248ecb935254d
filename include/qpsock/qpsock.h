/* SPDX-License-Identifier: MIT */
/*
 * qpsock - socket-like datagram endpoints over RDMA verbs queue pairs.
 *
 * Conventions, for every call in this header:
 *  - a call returns 0, a count, or a negative errno value (-EINVAL, ...);
 *  - no call reads or writes the thread's errno;
 *  - handles are opaque; like a file descriptor, an endpoint handle must
 *    not be used after it is closed: it returns -EBADF until its slot is
 *    reused (closed slots are reused last), and may then name a new
 *    endpoint. Endpoint memory stays owned by its context, so a stale
 *    handle is never a use-after-free while the context lives;
 *  - a context belongs to the process that created it: in a child made by
 *    fork(), every call on an inherited context or its endpoints returns
 *    -ECHILD and touches nothing (the child creates its own).
 *
 * The reference for each call is docs/api.md.
 */
#ifndef QPSOCK_QPSOCK_H
#define QPSOCK_QPSOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QPS_VERSION_MAJOR 0
#define QPS_VERSION_MINOR 7

struct qps_ctx;
struct qps_ep;

/*
 * Context: one device port opened through one provider.
 */

enum qps_ctx_attr_mask {
	QPS_CTX_ATTR_PROVIDER = 1 << 0,
	QPS_CTX_ATTR_DEV = 1 << 1,
	QPS_CTX_ATTR_ADDR = 1 << 2,
	QPS_CTX_ATTR_TX_DEPTH = 1 << 3,
	QPS_CTX_ATTR_RX_DEPTH = 1 << 4,
	QPS_CTX_ATTR_MAX_EP = 1 << 5,
	QPS_CTX_ATTR_TX_PATH = 1 << 6,
	QPS_CTX_ATTR_DB_DELAY = 1 << 7,
	QPS_CTX_ATTR_NUM_TXQ = 1 << 8,
	QPS_CTX_ATTR_TXQ_POLICY = 1 << 9,
	QPS_CTX_ATTR_TXQ_FLOWS = 1 << 10,
	QPS_CTX_ATTR_TX_SIGNAL = 1 << 11,
	QPS_CTX_ATTR_TRANSPORT = 1 << 12,
	QPS_CTX_ATTR_BUSY_POLL = 1 << 13,
	QPS_CTX_ATTR_STATS = 1 << 14,
	QPS_CTX_ATTR_IPFRAG = 1 << 15,	/* ipfrag_mem and ipfrag_time_ms */
	QPS_CTX_ATTR_THREAD_MODE = 1 << 16,
};

/*
 * What a context's queue pairs carry (struct qps_ctx_attr transport).
 * RAW: raw-packet QPs, whole Ethernet/IPv4/UDP frames built by qpsock and
 * steered by flow rules. UD: unreliable-datagram QPs over RoCE v2 (or IB);
 * the device adds the transport headers, qpsock adds a 12-byte header with
 * the UDP ports, and a peer is found by (GID, QPN, Q_Key): see "UD
 * transport" below and docs/verbs.md.
 */
enum qps_transport {
	QPS_TRANSPORT_RAW = 0,
	QPS_TRANSPORT_UD = 1,
};

/*
 * How a context picks the send QP of a flow (struct qps_ctx_attr
 * txq_policy). A connected endpoint keeps its pick until its destination
 * is reset; an unconnected flow follows the policy only once its packets
 * on the old QP have completed, so a change of pick never reorders it.
 */
enum qps_tx_policy {
	QPS_TX_POLICY_HASH = 0,	/* flow hash over the send QPs */
	QPS_TX_POLICY_CPU = 1,	/* the sender's current CPU (like XPS) */
	QPS_TX_POLICY_THREAD = 2, /* one QP per sending thread, round-robin */
};

/*
 * Who may call into a context at once (struct qps_ctx_attr thread_mode).
 * MULTI lets any threads in at once; each send queue's lock leans to the
 * thread that sends alone on it (a run of calls with no other thread
 * between), which then takes it with no atomic instruction until another
 * thread comes (that one pays membarrier(2) once). SINGLE is a promise
 * by the application, as VMA_THREAD_MODE=0 or rdma-core's
 * MLX5_SINGLE_THREADED: no two of its threads are ever in calls on the
 * context or its endpoints at the same time (a thread may hand the context
 * to another through its own locks). Any thread then takes the send
 * queues with no atomic instruction; qpsock's own threads (the doorbell
 * flusher) pay with membarrier(2) at each entry. Breaking the promise
 * corrupts the send queues. MUTEX is MULTI without the leaning: a plain
 * lock. docs/api.md "Thread mode".
 */
enum qps_thread_mode {
	QPS_THREAD_MODE_MULTI = 0,	/* any threads at once (default) */
	QPS_THREAD_MODE_SINGLE = 1,	/* one application thread at a time */
	QPS_THREAD_MODE_MUTEX = 2,	/* any threads, plain locks */
};

/* struct qps_ctx_attr stats: who may read a context's counters. */
enum qps_stats_mode {
	QPS_STATS_OFF = 0,		/* private memory, no segment */
	QPS_STATS_OWNER = 1,		/* a segment of mode 0600 (default) */
	QPS_STATS_ALL_USERS = 2,	/* a segment of mode 0644 */
};

/**
 * struct qps_ctx_attr - how to open a context; only fields whose bit is set
 * in @comp_mask are read, the rest take their defaults.
 * @provider: "emu" (default), "packet" or "verbs" ("null": measurement
 *	only, docs/null.md); the environment variable
 *	QPS_PROVIDER overrides the default but not an explicit value.
 * @dev: emu: wire name (default $QPS_DEV or "qps0"); packet: netdev name;
 *	verbs: RDMA device name; null: receive generator settings.
 * @addr: local IPv4 address. emu: default is the first free address of the
 *	wire's 198.18.0.0/24 (the benchmarking range; nothing leaves the wire).
 * @tx_depth: depth of each send queue in WQEs (default 256, max 4096).
 * @rx_depth: receive buffers kept posted (default 256, max 4096).
 * @max_ep: endpoints the context can hold at once (default 1024).
 * @tx_path: enum qps_tx_path (default QPS_TX_PATH_AUTO, or $QPS_TX_PATH).
 * @db_delay_us: the longest a postponed doorbell waits in us (default
 *	QPS_DB_DELAY_DEFAULT_US; 0 = never past the end of a send call).
 * @num_txq: send QPs, a power of two 1..64 (default: the number of CPUs
 *	rounded down to a power of two, at most 8). Each has @tx_depth WQEs.
 * @txq_policy: enum qps_tx_policy (default QPS_TX_POLICY_HASH).
 * @txq_flows: flow table entries for unconnected sends, a power of two up
 *	to 2^24 (default 4096).
 * @tx_signal: completion moderation: a send WQE asks for a completion every
 *	@tx_signal WQEs, and the last WQE before each doorbell always does,
 *	so nothing stays unreaped once a burst is out (1..tx_depth; default
 *	QPS_TX_SIGNAL_DEFAULT; 1 = every WQE).
 * @transport: enum qps_transport (default QPS_TRANSPORT_RAW); UD needs a
 *	provider with UD QPs (emu, verbs) and the generic send path.
 * @busy_poll_us: how long a blocking receive spins (progressing the device)
 *	before it sleeps, the endpoints' default for QPS_OPT_BUSY_POLL, as
 *	SO_BUSY_POLL (default $QPS_BUSY_POLL, else QPS_BUSY_POLL_DEFAULT_US;
 *	at most QPS_BUSY_POLL_MAX_US; 0 = sleep at once).
 * @stats: enum qps_stats_mode: publish the counters in /dev/shm for
 *	qps_stat, readable by the process's user only (QPS_STATS_OWNER, the
 *	default) or by every local user (QPS_STATS_ALL_USERS), or keep them
 *	private (QPS_STATS_OFF); without the attribute, $QPS_STATS "0", "1"
 *	or "2" chooses.
 * @ipfrag_mem: raw transport: bytes IPv4 reassembly may hold, as
 *	net.ipv4.ipfrag_high_thresh (default QPS_IPFRAG_MEM_DEFAULT, at most
 *	QPS_IPFRAG_MEM_MAX; 0 = fragments are dropped, counted).
 * @ipfrag_time_ms: how long an incomplete datagram's fragments are kept,
 *	as net.ipv4.ipfrag_time (default QPS_IPFRAG_TIME_DEFAULT_MS,
 *	1..QPS_IPFRAG_TIME_MAX_MS).
 * @thread_mode: enum qps_thread_mode (default QPS_THREAD_MODE_MULTI, or
 *	$QPS_THREAD_MODE "multi" / "single" / "mutex"). Where membarrier(2)
 *	is unavailable every mode runs as MUTEX: qps_stats.thread_single
 *	and tx_lock_biased say what the context got.
 */
struct qps_ctx_attr {
	uint64_t comp_mask;
	const char *provider;
	const char *dev;
	struct in_addr addr;
	uint32_t tx_depth;
	uint32_t rx_depth;
	uint32_t max_ep;
	uint32_t tx_path;
	uint32_t db_delay_us;
	uint32_t num_txq;
	uint32_t txq_policy;
	uint32_t txq_flows;
	uint32_t tx_signal;
	uint32_t transport;
	uint32_t busy_poll_us;
	uint32_t stats;
	uint32_t ipfrag_mem;
	uint32_t ipfrag_time_ms;
	uint32_t thread_mode;
};

#define QPS_TX_SIGNAL_DEFAULT 16
#define QPS_IPFRAG_MEM_DEFAULT (4u << 20)
#define QPS_IPFRAG_MEM_MAX (1u << 30)
#define QPS_IPFRAG_TIME_DEFAULT_MS 30000u
#define QPS_IPFRAG_TIME_MAX_MS 3600000u
#define QPS_BUSY_POLL_DEFAULT_US 50
#define QPS_BUSY_POLL_MAX_US 1000000

/**
 * qps_ctx_create - open a device; @attr may be NULL for all defaults.
 * -EINVAL for unknown @comp_mask bits, a depth out of range or a NULL
 * provider name; -ENOENT for an unknown provider; -ENODEV when the
 * provider finds no device; -EADDRINUSE when @addr is taken on the wire.
 */
int qps_ctx_create(const struct qps_ctx_attr *attr, struct qps_ctx **ctx_out);

/** qps_ctx_destroy - close every endpoint, flush, and release the device. */
int qps_ctx_destroy(struct qps_ctx *ctx);

/**
 * qps_ctx_progress - poll the device's completion queues once: reap send
 * completions, deliver received datagrams to their endpoints, ring any
 * postponed doorbell. Returns the number of completions handled (>= 0).
 */
int qps_ctx_progress(struct qps_ctx *ctx);

/**
 * qps_ctx_fd - a descriptor that becomes readable when the device has new
 * receive completions (the verbs completion channel). Call
 * qps_ctx_progress() when it is readable.
 */
int qps_ctx_fd(struct qps_ctx *ctx);

/**
 * qps_ctx_arm, qps_ctx_disarm - bracket a sleep on qps_ctx_fd() or
 * qps_ep_fd() descriptors in the caller's own poll or epoll.
 * qps_ctx_arm() progresses the device and arms its completion event, so
 * that the next completion wakes the sleeper; qps_ctx_disarm() after the
 * sleep. Once a context was armed this way, its event is armed only
 * between the two calls (and while a blocking receive sleeps), so a
 * thread that busy-polls costs no system call per datagram; before,
 * qps_ctx_fd() and qps_ep_fd() keep it armed from their first call on.
 * qps_ctx_arm() returns the completions it handled (> 0: a descriptor
 * may be readable already), or a negative errno value; each successful
 * qps_ctx_arm() takes one qps_ctx_disarm().
 */
int qps_ctx_arm(struct qps_ctx *ctx);
int qps_ctx_disarm(struct qps_ctx *ctx);

#define QPS_NAME_MAX 64

/** struct qps_ctx_info - what a context is bound to. */
struct qps_ctx_info {
	char provider[16];
	char dev[QPS_NAME_MAX];
	uint8_t mac[6];
	struct in_addr addr;
	uint32_t mtu;		/* L3 MTU of the port, bytes */
	uint32_t max_payload;	/* largest UDP payload: mtu - 28 */
	uint32_t tx_depth;
	uint32_t rx_depth;
};

/**
 * qps_ctx_query - fill @info; its size is fixed for good, so what was
 * added since is reported by qps_ctx_query_ex() only.
 */
int qps_ctx_query(struct qps_ctx *ctx, struct qps_ctx_info *info);

/*
 * How the context drives its device (qps_ctx_info_ex.flags): the choices
 * a provider made at open, which are also said once on stderr. A flag
 * that does not apply to the provider is clear.
 */
/* The device is a netdev the host's kernel also serves (packet, xdp,
 * verbs on a RoCE port): bound ports are held in the kernel too. */
#define QPS_CTX_INFO_F_HOST_NETDEV	(1u << 0)
/* xdp: the program runs in the driver (native), not generic (SKB). */
#define QPS_CTX_INFO_F_XDP_NATIVE	(1u << 1)
/* xdp: the AF_XDP socket is bound zero-copy, not in copy mode. */
#define QPS_CTX_INFO_F_XDP_ZEROCOPY	(1u << 2)
/* xdp: the kernel busy-polls the queue for the socket
 * (SO_PREFER_BUSY_POLL, $QPS_XDP_BUSY_POLL=1); not the library's own
 * spin before a blocking receive sleeps (QPS_OPT_BUSY_POLL). */
#define QPS_CTX_INFO_F_XDP_BUSY_POLL	(1u << 3)
/* packet: frames go through mmap'ed TPACKET rings, not one system call
 * per frame. */
#define QPS_CTX_INFO_F_PACKET_RING	(1u << 4)
/* Sends write mlx4 WQEs straight into the send ring (QPS_TX_PATH_DIRECT)
 * rather than posting work requests. */
#define QPS_CTX_INFO_F_TX_DIRECT	(1u << 5)
/* With QPS_CTX_INFO_F_TX_DIRECT: a WQE that fits is written through the
 * BlueFlame register, sparing the device a fetch from memory. */
#define QPS_CTX_INFO_F_BLUEFLAME	(1u << 6)

/**
 * struct qps_ctx_info_ex - what a context is bound to, and how it drives
 * its device. @base is what qps_ctx_query() reports; fields are only ever
 * added at the end, so a caller built against an older header passes its
 * smaller size and keeps working.
 */
struct qps_ctx_info_ex {
	struct qps_ctx_info base;
	uint32_t flags;		/* QPS_CTX_INFO_F_* */
	/* Device receive queues the context reads: @rx_queues of them from
	 * @rx_queue on (xdp: the XSK's queue). @rx_queues 0: not bound to
	 * queues, the device steers the context's traffic from any. */
	uint32_t rx_queue;
	uint32_t rx_queues;
	/* Largest frame a send carries inline in its WQE, bytes; 0: none. */
	uint32_t max_inline;
};

/**
 * qps_ctx_query_ex - fill up to @size bytes of @info, as ibv_query_device_ex
 * does: the caller passes sizeof the struct it was built with. Nothing
 * beyond @size is written; bytes beyond what this library knows, up to
 * @size, are zeroed (a newer field then reads as not reported). Returns
 * the number of bytes filled with what this library knows (<= @size).
 * -EINVAL: @ctx NULL or @size below sizeof(struct qps_ctx_info);
 * -EFAULT: @info NULL.
 */
int qps_ctx_query_ex(struct qps_ctx *ctx, struct qps_ctx_info_ex *info,
		     size_t size);

/* Reasons a received frame is rejected by the parser (stats.rx_bad[]). */
enum qps_rx_reason {
	QPS_RX_OK = 0,
	QPS_RX_SHORT_ETH,	/* shorter than an Ethernet header */
	QPS_RX_NOT_IPV4,	/* EtherType is not IPv4 */
	QPS_RX_SHORT_IP,	/* shorter than a minimal IPv4 header */
	QPS_RX_BAD_VERSION,	/* IP version field is not 4 */
	QPS_RX_BAD_IHL,		/* IHL < 5 or header beyond the frame */
	QPS_RX_BAD_TOTLEN,	/* total length < header or beyond the frame */
	QPS_RX_FRAGMENT,	/* a fragment, handed to reassembly */
	QPS_RX_BAD_IP_CSUM,	/* IPv4 header checksum mismatch */
	QPS_RX_NOT_UDP,		/* protocol is not UDP */
	QPS_RX_SHORT_UDP,	/* no room for the UDP header */
	QPS_RX_BAD_UDP_LEN,	/* UDP length < 8 or not equal to IP payload */
	QPS_RX_BAD_UDP_CSUM,	/* non-zero UDP checksum that does not verify */
	QPS_RX_BAD_SADDR,	/* source is multicast, broadcast or zero */
	QPS_RX_REASON_MAX
};

/**
 * struct qps_stats - counters of a context; totals since creation.
 * Device counters (wqes .. dev_rx_drops) come from the provider.
 */
struct qps_stats {
	uint64_t tx_packets;
	uint64_t tx_bytes;
	uint64_t tx_errors;		/* send completions with an error */
	uint64_t rx_packets;		/* datagrams delivered to endpoints */
	uint64_t rx_bytes;
	uint64_t rx_bad[QPS_RX_REASON_MAX]; /* [0] counts frames parsed OK
					     * (UD: valid datagrams) */
	uint64_t rx_no_endpoint;	/* valid datagram, nobody bound */
	uint64_t rx_queue_full;		/* endpoint receive queue full */
	uint64_t rx_truncated;		/* datagrams cut by a short recv buffer */
	uint64_t rx_errors;		/* receive completions with an error */
	/* device */
	uint64_t wqes;			/* send WQEs written */
	uint64_t doorbells;		/* device rung: doorbell + BlueFlame */
	uint64_t bf_writes;		/* of those, BlueFlame writes */
	uint64_t tx_cqes;
	uint64_t rx_cqes;
	uint64_t dev_tx_drops;		/* frames the device could not send */
	uint64_t dev_rx_drops;		/* frames the device could not place */
	/* send path: doorbells and flushes */
	uint64_t tx_wqes;		/* WQEs written (direct) or WRs chained */
	uint64_t tx_doorbells;		/* rings: doorbell + BlueFlame writes */
	uint64_t tx_bf;			/* rings that were BlueFlame writes */
	uint64_t tx_db_ppm;		/* tx_doorbells per million tx_wqes */
	uint64_t tx_flush_send;		/* rung by a send without MORE */
	uint64_t tx_flush_explicit;	/* forced: qps_ctx_flush, qps_flush */
	uint64_t tx_flush_poll;		/* forced: progress, receive calls */
	uint64_t tx_flush_close;	/* forced: endpoint close, destroy */
	uint64_t tx_flush_full;		/* forced: send queue full mid-burst */
	uint64_t tx_flush_timer;	/* forced: bounded delay expired */
	/* send path: send-QP selection */
	uint64_t tx_queues;		/* gauge: send QPs of the context */
	uint64_t txq_picks_cached;	/* connected send: the cached QP */
	uint64_t txq_picks_computed;	/* QP computed: hash and policy */
	uint64_t txq_flows_new;		/* flow table: new flow placed */
	uint64_t txq_flow_moves;	/* flow moved: old QP had drained */
	uint64_t txq_flow_deferred;	/* move refused: packets in flight */
	uint64_t txq_resets_connect;	/* cached QP dropped: (re/dis)connect */
	uint64_t txq_resets_route;	/* cached QP dropped: route change */
	uint64_t txq_resets_qp;		/* cached QP dropped: QP error */
	/* send path: priority bands, [band] by prio2band, summed over the
	 * send QPs (docs/prio_queues.md) */
	uint64_t tx_band_enqueued[3];	/* parked for the band owner */
	uint64_t tx_band_bypassed[3];	/* posted at once, bands empty */
	uint64_t tx_band_drops[3];	/* -EAGAIN: band full, not sent */
	uint64_t tx_band_depth[3];	/* gauge: datagrams parked now */
	uint64_t tx_band_bytes[3];	/* gauge: payload bytes parked now */
	/* multicast and demultiplexing: each valid datagram (rx_bad[0]) is
	 * counted once, in rx_demux_* or in rx_no_endpoint */
	uint64_t rx_demux_early;	/* group rule with one subscriber */
	uint64_t rx_demux_fanout;	/* group rule with several, broadcast */
	uint64_t rx_demux_connected;	/* unicast: first 4-tuple entry */
	uint64_t rx_demux_bound;	/* unicast: bound endpoint lookup */
	uint64_t rx_fanout_deliveries;	/* queued by fan-out, per endpoint */
	uint64_t rx_mc_filtered;	/* subscribers skipped: source filter */
	uint64_t rx_pktinfo;		/* queued with metadata (PKTINFO) */
	uint64_t mc_joins;		/* memberships added */
	uint64_t mc_leaves;		/* memberships dropped (leave, close) */
	uint64_t mc_rules_created;	/* steering rules (UD: groups attached),
					 * total */
	uint64_t mc_rules;		/* gauge: the same, now */
	uint64_t mc_rule_refs;		/* gauge: memberships holding them */
	/* send path: completion moderation */
	uint64_t tx_signaled;		/* WQEs that asked for a completion */
	uint64_t tx_reaped;		/* WQEs completed (signalled or not) */
	/* UD transport */
	uint64_t ud_ah_created;		/* address handles created */
	uint64_t ud_ah_reused;		/* sends that reused a cached AH */
	uint64_t ud_ah_live;		/* gauge: address handles held now */
	uint64_t ud_peers_learned;	/* (address -> QPN) learned on receive */
	uint64_t ud_tx_no_peer;		/* -EHOSTUNREACH: no QPN for the peer */
	uint64_t rx_ud_bad_grh;		/* GRH missing or not IPv4 (mapped) */
	uint64_t rx_ud_bad_hdr;		/* qpsock UD header short or invalid */
	/* QP errors: a QP that failed is brought back through RESET at the
	 * next progress call; what it held completes as tx_errors */
	uint64_t qp_errors;		/* QPs that entered the error state */
	uint64_t qp_recoveries;		/* QPs brought back up */
	/* IPv4 fragments (raw transport, docs/packet.md "Fragments"): each
	 * fragment received counts in rx_bad[QPS_RX_FRAGMENT]; a datagram
	 * reassembled from them is then parsed as one (rx_bad[]) */
	uint64_t rx_reasm_ok;		/* datagrams reassembled */
	uint64_t rx_reasm_timeout;	/* dropped incomplete: ipfrag_time_ms */
	uint64_t rx_reasm_overlap;	/* dropped: overlapping fragments */
	uint64_t rx_reasm_dup;		/* duplicate fragments ignored */
	uint64_t rx_reasm_mem;		/* dropped: ipfrag_mem cap reached */
	uint64_t rx_reasm_bad;		/* malformed fragments dropped */
	uint64_t rx_reasm_bytes;	/* gauge: bytes held for reassembly */
	uint64_t tx_frags;		/* fragments sent (datagrams > MTU) */
	uint64_t tx_frag_partial;	/* datagrams cut short: some of their
					 * fragments queued, then refused */
	/* multicast loopback (QPS_OPT_MULTICAST_LOOP) */
	uint64_t tx_mc_loops;		/* datagrams looped to the context's
					 * subscribers by qpsock (a device
					 * that does not loop: packet) */
	uint64_t tx_mc_loop_errors;	/* of those, not looped: no memory */
	uint64_t rx_mc_loop_off;	/* own multicast the device looped
					 * back, dropped: its sender has
					 * QPS_OPT_MULTICAST_LOOP 0 */
	/* checksum offload (docs/api.md "Checksum offload") */
	uint64_t csum_offload;		/* gauge: 1 when the device computes
					 * the IPv4 and UDP checksums sent
					 * and checks those received */
	/* thread mode (docs/api.md "Thread mode") */
	uint64_t thread_single;		/* gauge: 1 when the context runs
					 * QPS_THREAD_MODE_SINGLE */
	uint64_t tx_lock_barriers;	/* send queue entries that paid a
					 * membarrier: qpsock's own threads
					 * in a single-threaded context,
					 * and any thread that found a
					 * queue leaning to another */
	uint64_t tx_lock_biased;	/* gauge: send queues whose lock
					 * leans to one thread now */
	uint64_t tx_nested;		/* sends refused (-EWOULDBLOCK):
					 * their thread was inside a send
					 * already (a signal handler's) */
};

/**
 * qps_ctx_stats - copy up to @size bytes of struct qps_stats into @st;
 * returns the number of bytes written (older callers pass a smaller size).
 */
int qps_ctx_stats(struct qps_ctx *ctx, struct qps_stats *st, size_t size);

/*
 * Endpoints: UDP datagram semantics over the context's queue pairs.
 */

#define QPS_EP_DGRAM 1

/** qps_ep_create - a new unbound endpoint of @type QPS_EP_DGRAM. */
int qps_ep_create(struct qps_ctx *ctx, int type, struct qps_ep **ep_out);

/**
 * qps_ep_close - release an endpoint; datagrams it queued for sending are
 * flushed to the device first. A second close returns -EBADF.
 */
int qps_ep_close(struct qps_ep *ep);

/**
 * qps_bind - bind to a local struct sockaddr_in. Address INADDR_ANY, the
 * context's address or a multicast group; port 0 picks an ephemeral port.
 * -EADDRINUSE when the port is taken (unless both set QPS_OPT_REUSEADDR or
 * both QPS_OPT_REUSEPORT; on a host netdev, by any socket of the host),
 * -EADDRNOTAVAIL for a foreign address, -EINVAL when already bound.
 */
int qps_bind(struct qps_ep *ep, const struct sockaddr *addr, socklen_t len);

/**
 * qps_ep_adopt_fd - before qps_bind, make @fd (the caller's AF_INET
 * SOCK_DGRAM kernel socket) the one that holds the endpoint's port in the
 * kernel, where the provider holds ports there (packet, verbs): the bind
 * binds @fd instead of a socket of its own. The caller keeps @fd open
 * until qps_ep_close and closes it. -EINVAL when already bound or @fd is
 * not an IPv4 UDP socket, -ENOTSOCK, -EBADF.
 */
int qps_ep_adopt_fd(struct qps_ep *ep, int fd);

/**
 * qps_connect - set the default destination and accept datagrams only from
 * it; AF_UNSPEC disconnects. Binds to an ephemeral port if unbound.
 * -EHOSTUNREACH when the destination cannot be resolved.
 */
int qps_connect(struct qps_ep *ep, const struct sockaddr *addr,
		socklen_t len);

/** qps_getsockname - the bound local address. */
int qps_getsockname(struct qps_ep *ep, struct sockaddr *addr, socklen_t *len);

/** qps_getpeername - the connected peer; -ENOTCONN if not connected. */
int qps_getpeername(struct qps_ep *ep, struct sockaddr *addr, socklen_t *len);

/**
 * qps_shutdown - as shutdown(2) on a UDP socket. @how SHUT_RD: receives
 * return what is queued, then 0 at once, and threads asleep in one wake;
 * SHUT_WR: sends fail from now on; SHUT_RDWR: both. As on Linux an
 * endpoint that is not connected gets -ENOTCONN, and the shutdown is done
 * anyway. -EINVAL for another @how.
 */
int qps_shutdown(struct qps_ep *ep, int how);

/* Flags for send and receive calls (values match Linux's MSG_*). */
#define QPS_MSG_PEEK 0x02
#define QPS_MSG_TRUNC 0x20
#define QPS_MSG_DONTWAIT 0x40
#define QPS_MSG_MORE 0x8000

/**
 * qps_send - send one datagram to the connected peer. Returns @len.
 * -EDESTADDRREQ if not connected, -EMSGSIZE above the port's max payload,
 * -EAGAIN when the send queue is full and the call must not wait (or
 * QPS_OPT_SNDTIMEO expired; a blocking send sleeps on the send completion
 * event after its busy-poll budget), -EINTR when a signal handler ran
 * while it slept, -EBADF when another thread closed the endpoint,
 * -ENETDOWN when its send QP failed and could not be brought back,
 * -EPIPE after qps_shutdown(SHUT_WR).
 * QPS_MSG_MORE: more datagrams follow immediately; the doorbell may be
 * postponed until a send without it, a flush or progress call, or at most
 * db_delay_us (see "Batched sends and doorbells").
 */
ssize_t qps_send(struct qps_ep *ep, const void *buf, size_t len, int flags);

/** qps_sendto - send one datagram to @dest (struct sockaddr_in). */
ssize_t qps_sendto(struct qps_ep *ep, const void *buf, size_t len, int flags,
		   const struct sockaddr *dest, socklen_t dest_len);

/**
 * qps_recv - receive one datagram. Returns its length, or with a short
 * buffer the bytes copied (the rest is dropped; QPS_MSG_TRUNC returns the
 * full length instead). -EAGAIN when nothing is queued and the endpoint is
 * non-blocking or QPS_MSG_DONTWAIT is set; -ETIMEDOUT after
 * QPS_OPT_RCVTIMEO; -EINTR when a signal handler ran while it slept;
 * -EBADF when another thread closed the endpoint (it wakes); 0 at once
 * after qps_shutdown(SHUT_RD) once the queue is empty.
 */
ssize_t qps_recv(struct qps_ep *ep, void *buf, size_t len, int flags);

/** qps_recvfrom - as qps_recv, and store the sender in @src if not NULL. */
ssize_t qps_recvfrom(struct qps_ep *ep, void *buf, size_t len, int flags,
		     struct sockaddr *src, socklen_t *src_len);

/* Options for qps_setopt / qps_getopt; values are int unless noted. A 0/1
 * option takes any int (nonzero is on) and reads back 0 or 1, as Linux's
 * boolean socket options do. */
enum qps_opt {
	QPS_OPT_NONBLOCK = 1,	/* 0/1: calls never wait */
	QPS_OPT_RCVBUF,		/* max datagrams queued for qps_recv, up to
				 * QPS_RCVBUF_MAX */
	QPS_OPT_REUSEADDR,	/* 0/1: share a bound port */
	QPS_OPT_PRIORITY,	/* 0..15, as SO_PRIORITY */
	QPS_OPT_RCVTIMEO,	/* blocking receive timeout, ms; 0 = forever */
	QPS_OPT_SNDTIMEO,	/* blocking send timeout, ms; 0 = forever */
	QPS_OPT_PKTINFO,	/* 0/1: fill per-packet metadata */
	QPS_OPT_ERROR,		/* get only: pending error, cleared on read */
	QPS_OPT_RXQ_LEN,	/* get only: datagrams queued now */
	QPS_OPT_REUSEPORT,	/* 0/1: share a bound port, as SO_REUSEPORT */
	QPS_OPT_BUSY_POLL,	/* us a blocking receive spins, as SO_BUSY_POLL */
	QPS_OPT_TTL,		/* 1..255: unicast TTL, as IP_TTL (64) */
	QPS_OPT_MULTICAST_TTL,	/* 1..255: as IP_MULTICAST_TTL (1) */
	QPS_OPT_TOS,		/* 0..255: DSCP/ECN byte, as IP_TOS (0) */
	QPS_OPT_MULTICAST_LOOP,	/* 0/1: as IP_MULTICAST_LOOP (1) */
	QPS_OPT_TIMESTAMP,	/* QPS_TS_* flags, as SO_TIMESTAMPING (0) */
	QPS_OPT_HOST_RX,	/* 0/1, before bind: the adopted socket also
				 * receives what reaches the host elsewhere */
	QPS_OPT_RCVBUF_BYTES,	/* bytes queued for qps_recv, counted as
				 * QPS_RX_TRUESIZE; 0 = no byte bound (0) */
};

/* The most datagrams QPS_OPT_RCVBUF may ask for. */
#define QPS_RCVBUF_MAX 65536
/* What a queued datagram of @len payload bytes counts against
 * QPS_OPT_RCVBUF_BYTES: its frame in 64-byte units plus the bookkeeping a
 * kernel socket buffer charges, so that SO_RCVBUF's bytes mean about as
 * many datagrams as on the kernel. */
#define QPS_RX_TRUESIZE(len) ((((size_t)(len) + 42 + 63) & ~(size_t)63) + 576)

/* QPS_OPT_TIMESTAMP flags, as SOF_TIMESTAMPING_*: which times to keep. */
#define QPS_TS_RX_SOFTWARE 0x1	/* receive: the host's time on arrival */
#define QPS_TS_RX_DEVICE 0x2	/* receive: the device's stamp */
#define QPS_TS_TX_SOFTWARE 0x4	/* transmit: when its WQE was posted */
#define QPS_TS_TX_DEVICE 0x8	/* transmit: the device's completion stamp */

/**
 * qps_setopt - set an option. -ENOPROTOOPT for an unknown or get-only option,
 * -EINVAL for a bad length or value, -EFAULT for a NULL value.
 */
int qps_setopt(struct qps_ep *ep, int opt, const void *val, socklen_t len);

/** qps_getopt - read an option; *@len is in/out as in getsockopt. */
int qps_getopt(struct qps_ep *ep, int opt, void *val, socklen_t *len);

/** qps_set_nonblock - shorthand for QPS_OPT_NONBLOCK. */
int qps_set_nonblock(struct qps_ep *ep, int on);

/**
 * qps_ep_fd - a descriptor that is readable (POLLIN/EPOLLIN) while the
 * endpoint has a datagram queued or the device has unprocessed receive
 * completions. Add it to epoll or poll; on readiness call qps_recv with
 * QPS_MSG_DONTWAIT (which progresses the device) until nothing is left.
 * Owned by the endpoint; closed by qps_ep_close.
 */
int qps_ep_fd(struct qps_ep *ep);

/**
 * qps_ep_wait - wait until @ep has a datagram to receive: busy-poll for
 * its QPS_OPT_BUSY_POLL budget, then sleep, for at most @timeout_ms
 * (-1: no limit, 0: only look). Returns 1 when a receive will not wait
 * (a datagram is queued, or the endpoint is shut down for reading), 0 on
 * timeout; -EINTR when a signal handler ran; -EBADF when @ep is closed,
 * also by another thread meanwhile. Waits even on a non-blocking endpoint.
 */
int qps_ep_wait(struct qps_ep *ep, int timeout_ms);

/*
 * Batched sends and doorbells.
 *
 * While more datagrams are known to follow (QPS_MSG_MORE, the rest of a
 * qps_sendmmsg batch), frames are written to the send queue without
 * ringing its doorbell; the last one rings it once for the whole burst. A
 * postponed doorbell is rung at the latest by the next send without
 * QPS_MSG_MORE, a flush, progress or receive call, close, a full send
 * queue, or when db_delay_us has passed, even if the application stops
 * calling. The stats lines "send path" count it.
 */

/* Which send path a context uses (struct qps_ctx_attr.tx_path). */
enum qps_tx_path {
	QPS_TX_PATH_AUTO = 0,	/* direct when the provider allows it */
	QPS_TX_PATH_GENERIC = 1, /* verbs WR chains: one post per burst */
	QPS_TX_PATH_DIRECT = 2,	/* mlx4 WQEs written by qpsock, BlueFlame */
};

#define QPS_DB_DELAY_DEFAULT_US 30

/**
 * struct qps_msg - one datagram of qps_sendmmsg().
 * @buf, @len: the payload.
 * @dest, @dest_len: a struct sockaddr_in, or NULL for the connected peer.
 * @priority: 0..15 as QPS_OPT_PRIORITY, or -1 for the endpoint's.
 * @result: out: @len once accepted, or the -errno of the message that
 *	stopped the batch, or -ECANCELED for those after it (not tried).
 */
struct qps_msg {
	const void *buf;
	size_t len;
	const struct sockaddr *dest;
	socklen_t dest_len;
	int priority;
	ssize_t result;
};

/**
 * qps_sendmmsg - send @n datagrams in order, ringing the doorbell of each
 * send queue they went to once (plus once each time a send queue fills);
 * each flow keeps its order. Stops at the first message
 * that fails. Returns the number accepted, or that message's -errno when
 * it is the first. @flags: QPS_MSG_DONTWAIT, QPS_MSG_MORE (the doorbell of
 * the last message is postponed too). -EINVAL for other flags or @n above
 * INT_MAX, -EFAULT for NULL @msgs with @n > 0.
 */
int qps_sendmmsg(struct qps_ep *ep, struct qps_msg *msgs, unsigned int n,
		 int flags);

/**
 * qps_ctx_flush - ring the context's postponed doorbells (every send queue)
 * now. Returns the number of datagrams released (0 when none was waiting).
 */
int qps_ctx_flush(struct qps_ctx *ctx);

/** qps_flush - qps_ctx_flush() for the endpoint's context. */
int qps_flush(struct qps_ep *ep);

/*
 * Multicast membership and per-packet metadata.
 *
 * An endpoint receives a group's datagrams once it has joined the group
 * (IP_MULTICAST_ALL off): each joined (group, bound port) is one steering
 * rule on the device, shared by every endpoint of the context that joined
 * it. A context is one interface: its index is QPS_IFINDEX.
 */

#define QPS_IFINDEX 1

/**
 * struct qps_mreq - a membership, as struct ip_mreq_source / ip_mreqn.
 * @group: multicast group (224.0.0.0/4), network order.
 * @source: INADDR_ANY: any source (IP_ADD_MEMBERSHIP); otherwise the one
 *	source accepted (IP_ADD_SOURCE_MEMBERSHIP; repeat for more).
 * @iface: INADDR_ANY or the context's address.
 * @ifindex: 0 or QPS_IFINDEX.
 */
struct qps_mreq {
	struct in_addr group;
	struct in_addr source;
	struct in_addr iface;
	int ifindex;
};

/**
 * qps_join - join @mreq->group on the endpoint's bound port.
 * -EINVAL: @len < sizeof(struct qps_mreq), group not multicast, source
 * multicast or broadcast, endpoint not bound or bound to another address,
 * any-source and source-specific mixed on one group; -ENODEV: @iface or
 * @ifindex is not this context's; -EADDRINUSE: already joined (same
 * source); -ENOBUFS: the device has no room for another rule or filter;
 * -EFAULT: @mreq NULL.
 */
int qps_join(struct qps_ep *ep, const struct qps_mreq *mreq, socklen_t len);

/**
 * qps_leave - drop a membership; source INADDR_ANY drops every membership
 * of the group. The last endpoint to leave removes the rule.
 * -EADDRNOTAVAIL: no such membership; otherwise as qps_join.
 */
int qps_leave(struct qps_ep *ep, const struct qps_mreq *mreq, socklen_t len);

#define QPS_MCAST_EXCLUDE 0	/* as MCAST_EXCLUDE */
#define QPS_MCAST_INCLUDE 1	/* as MCAST_INCLUDE */
#define QPS_MSFILTER_MAX 64	/* sources in one filter */

/**
 * struct qps_msfilter - the source filter of a membership, as struct
 * ip_msfilter.
 * @group, @iface, @ifindex: as in struct qps_mreq.
 * @fmode: QPS_MCAST_INCLUDE: only the sources in @slist are received (the
 *	source-specific joins); QPS_MCAST_EXCLUDE: every source but those
 *	(an any-source join, @slist the sources it blocks).
 * @numsrc: the entries of @slist. qps_getfilter: in, the room in @slist;
 *	out, the number of sources the filter has.
 * @slist: the sources, network order: @numsrc of them, as many as the
 *	buffer holds (one entry declared, as struct ip_msfilter does, so
 *	that the header stays valid C++).
 */
struct qps_msfilter {
	struct in_addr group;
	struct in_addr iface;
	int ifindex;
	uint32_t fmode;
	uint32_t numsrc;
	struct in_addr slist[1];
};

#define QPS_MSFILTER_SIZE(n) \
	(offsetof(struct qps_msfilter, slist) + \
	 (size_t)(n) * sizeof(struct in_addr))

/**
 * qps_setfilter - replace the source filter of the endpoint's membership
 * of @f->group, at once: datagrams from a source both filters accept keep
 * arriving. QPS_MCAST_INCLUDE with no source leaves the group. A datagram
 * the filter refuses is counted in rx_mc_filtered and rx_filtered.
 * -EINVAL: @len < QPS_MSFILTER_SIZE(@f->numsrc), group not multicast,
 * @fmode neither mode, a source INADDR_ANY, no membership of the group;
 * -EADDRNOTAVAIL: INCLUDE nothing without a membership; -ENOBUFS: more
 * than QPS_MSFILTER_MAX sources, or no room on the device; -ENODEV,
 * -EFAULT: as qps_join.
 */
int qps_setfilter(struct qps_ep *ep, const struct qps_msfilter *f,
		  socklen_t len);

/**
 * qps_getfilter - the source filter of the endpoint's membership of
 * @f->group: @fmode, @numsrc and the first sources that fit both
 * @f->numsrc and *@len bytes; *@len becomes the bytes written.
 * -EADDRNOTAVAIL: no membership of the group; -EINVAL: *@len <
 * QPS_MSFILTER_SIZE(0), group not multicast; -ENODEV, -EFAULT: as qps_join.
 */
int qps_getfilter(struct qps_ep *ep, struct qps_msfilter *f, socklen_t *len);

#define QPS_RXMSG_PKTINFO 0x1	/* dst, ifindex and ts_ns are filled */
#define QPS_RXMSG_TRUNC 0x2	/* the datagram was longer than @len */
#define QPS_RXMSG_TS_SOFTWARE 0x4	/* ts_ns: a software stamp */
#define QPS_RXMSG_TS_DEVICE 0x8	/* ts_ns: the device's stamp */

/**
 * struct qps_rxmsg - one datagram for qps_recvmsg().
 * @buf, @len: in: where to copy the payload.
 * @src: out: the sender.
 * @dst: out, with QPS_RXMSG_PKTINFO: the datagram's destination address
 *	and port (the group for multicast), as IP_PKTINFO's ipi_addr.
 * @ifindex: out, with QPS_RXMSG_PKTINFO: QPS_IFINDEX.
 * @flags: out: QPS_RXMSG_*.
 * @ts_ns: out: CLOCK_REALTIME in ns. With QPS_RXMSG_TS_DEVICE the
 *	device's receive stamp, with QPS_RXMSG_TS_SOFTWARE the host's
 *	(QPS_OPT_TIMESTAMP); else, with QPS_RXMSG_PKTINFO, when the datagram
 *	was demultiplexed. The struct's size and layout are those of 0.3.
 */
struct qps_rxmsg {
	void *buf;
	size_t len;
	struct sockaddr_in src;
	struct sockaddr_in dst;
	int ifindex;
	uint32_t flags;
	uint64_t ts_ns;
};

/**
 * qps_recvmsg - as qps_recvfrom, with per-packet metadata: filled only for
 * datagrams queued while QPS_OPT_PKTINFO was on (stats.rx_pktinfo counts
 * them). Returns the bytes copied (the full length with QPS_MSG_TRUNC).
 * -EFAULT: @msg NULL, or @msg->buf NULL with @msg->len > 0.
 */
ssize_t qps_recvmsg(struct qps_ep *ep, struct qps_rxmsg *msg, int flags);

/**
 * qps_ep_requeue - queue on @ep's context, as if its device had just
 * received it, the datagram @m describes (@m->buf, @m->len from @m->src to
 * @m->dst; a zero @m->dst is @ep's own name): it goes through the demux
 * and @ep's filters like any other. For handing a socket's queued
 * datagrams from one process to another. -EINVAL when @ep is not bound,
 * -EMSGSIZE over 65507 bytes, -EAFNOSUPPORT, -EOPNOTSUPP on a UD context,
 * -EFAULT, -ENOMEM.
 */
int qps_ep_requeue(struct qps_ep *ep, const struct qps_rxmsg *m);

#define QPS_TXTS_SOFTWARE 0x1	/* @sw_ns is set */
#define QPS_TXTS_DEVICE 0x2	/* @dev_ns is set */
#define QPS_TXTS_FAILED 0x4	/* the device did not send it */

/**
 * struct qps_txts - the transmit times of one datagram (QPS_TS_TX_*).
 * @id: its number: the endpoint's datagrams sent with transmit
 *	timestamps on are numbered 0, 1, ... as with SOF_TIMESTAMPING_OPT_ID.
 * @flags: QPS_TXTS_*.
 * @sw_ns: CLOCK_REALTIME ns when its WQE was posted.
 * @dev_ns: the device's completion stamp, on CLOCK_REALTIME.
 */
struct qps_txts {
	uint32_t id;
	uint32_t flags;
	uint64_t sw_ns;
	uint64_t dev_ns;
};

/**
 * qps_recv_txts - take up to @n transmit reports of @ep, oldest first,
 * as recvmsg(MSG_ERRQUEUE) does; never waits (it reaps send completions
 * first). Returns how many; -EAGAIN when none is waiting; -EINVAL for
 * @flags other than 0 or QPS_MSG_DONTWAIT; -EFAULT: @ts NULL with @n > 0.
 */
int qps_recv_txts(struct qps_ep *ep, struct qps_txts *ts, unsigned int n,
		  int flags);

/*
 * Endpoint counters (also published for qps_stat: docs/stat.md).
 */

#define QPS_EP_STATS_GROUPS 8

/**
 * struct qps_ep_counters - one endpoint: what it is bound to and its
 * counters since qps_ep_create().
 * @local: the bound address; sin_family AF_UNSPEC while unbound.
 * @peer: the connected peer; sin_family AF_UNSPEC unless connected.
 * @priority, @band: QPS_OPT_PRIORITY and the priority band it maps to.
 * @txq: the send queue of its last send (a connected endpoint's cached
 *	pick), -1 before the first.
 * @rcvbuf: QPS_OPT_RCVBUF; @rxq_depth: datagrams queued now; @rxq_hwm: the
 *	most ever queued at once.
 * @ngroups: memberships held; the first QPS_EP_STATS_GROUPS in @groups
 *	(group, source; iface and ifindex are 0).
 * @rx_packets, @rx_bytes: datagrams (payload bytes) queued for it.
 * @rx_queue_full: dropped, its receive queue full; @rx_truncated: cut by
 *	a short receive buffer; @rx_filtered: datagrams of a group it joined
 *	that its source filter or connected peer refused.
 * @tx_packets, @tx_bytes: datagrams (payload bytes) accepted by its send
 *	calls; @tx_drops: refused after the frame was built (-EAGAIN: band
 *	full).
 */
struct qps_ep_counters {
	struct sockaddr_in local;
	struct sockaddr_in peer;
	int32_t priority;
	uint32_t band;
	int32_t txq;
	uint32_t rcvbuf;
	uint32_t rxq_depth;
	uint32_t rxq_hwm;
	uint32_t ngroups;
	uint32_t reserved;
	uint64_t rx_packets;
	uint64_t rx_bytes;
	uint64_t rx_queue_full;
	uint64_t rx_truncated;
	uint64_t rx_filtered;
	uint64_t tx_packets;
	uint64_t tx_bytes;
	uint64_t tx_drops;
	struct qps_mreq groups[QPS_EP_STATS_GROUPS];
};

/**
 * qps_ep_stats - copy up to @size bytes of struct qps_ep_counters into @st;
 * returns the number of bytes written, as qps_ctx_stats.
 * -EBADF: @ep NULL or closed; -EFAULT: @st NULL with @size > 0.
 */
int qps_ep_stats(struct qps_ep *ep, struct qps_ep_counters *st, size_t size);

/*
 * UD transport (QPS_TRANSPORT_UD).
 *
 * A context has one receiving UD QP; its endpoints share it and are told
 * apart by the ports in qpsock's UD header, as on the raw path by the UDP
 * header. A peer is the triple (GID, QPN, Q_Key): the GID is the
 * IPv4-mapped address ::ffff:a.b.c.d (RoCE v2), the Q_Key QPS_UD_QKEY
 * unless set, and the QPN is learned from every datagram received (the
 * header names the sender's receiving QP) or set with qps_ud_peer_set()
 * from an exchange out of band, as perftest exchanges it. Multicast needs
 * no QPN: group ::ffff:group, QPN 0xffffff. A send to a unicast address
 * with no QPN known fails with -EHOSTUNREACH (stats.ud_tx_no_peer).
 */

/* rdma_cm's Q_Key for RDMA_PS_UDP, so that a later SIDR resolution
 * (docs/verbs.md) finds the same QPs. */
#define QPS_UD_QKEY 0x01234567u
#define QPS_UD_HDR_LEN 12

/** struct qps_ud_addr - where a UD context receives: its IPv4 address (the
 * GID is ::ffff:@addr), the QPN of its receiving QP and its Q_Key. */
struct qps_ud_addr {
	struct in_addr addr;
	uint32_t qpn;
	uint32_t qkey;
};

/** qps_ud_local - this context's UD address, to hand to peers.
 * -EOPNOTSUPP on a raw-transport context. */
int qps_ud_local(struct qps_ctx *ctx, struct qps_ud_addr *out);

/**
 * qps_ud_peer_set - where @peer->addr receives: its QPN and Q_Key (0 means
 * QPS_UD_QKEY); replaces what was set or learned. @peer->qpn 0 forgets
 * the address. -EINVAL: a QPN of 0xffffff (the multicast QPN) or above, a
 * multicast, broadcast or zero address; -EFAULT: NULL; -EOPNOTSUPP on a
 * raw-transport context; -ENOSPC when the peer table is full.
 */
int qps_ud_peer_set(struct qps_ctx *ctx, const struct qps_ud_addr *peer);

#ifdef __cplusplus
}
#endif

#endif /* QPSOCK_QPSOCK_H */
