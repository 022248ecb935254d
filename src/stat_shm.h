/* SPDX-License-Identifier: MIT */
/*
 * The layout of a context's stats segment (stat_seg.c writes it,
 * tools/qps_stat reads it): /dev/shm/qpsock-stat.<pid>.<ctx>, or
 * qpsock-stat.<pid>.<ctx>.<tag> when that name was taken (stat_file.c),
 * one per context, or the same layout in private memory when the context
 * does not publish.
 *
 *   header | rx block | snapshot block | send queue blocks | endpoint slots
 *
 * The counter blocks are where the counters live: the receive side's
 * (ctx->st) and each send queue's (sq->st) are written in place by their
 * single writers, under the lock that already orders them; the endpoint
 * slots likewise (rx.lock for the receive counters, the send queue's lock
 * for the send ones). A reader in another process copies them without any
 * lock and accepts a torn read of one counter, as ss(8) does. The
 * snapshot block (counters that other modules keep in their own atomics:
 * send-QP selection, bands, UD, device) and an endpoint's identity
 * (addresses, memberships) are written under a sequence count, so a
 * reader retries until it gets a consistent copy.
 */
#ifndef QPS_STAT_SHM_H
#define QPS_STAT_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <qpsock/qpsock.h>

#define QPS_STAT_DIR "/dev/shm"
#define QPS_STAT_PREFIX "qpsock-stat."
#define QPS_STAT_MAGIC 0x5441545350535150ull	/* "QPSPSTAT" */
/* 2: the writer's PID namespace in the header, owner-only mode.
 * 3: the capture request word (dump_req). */
#define QPS_STAT_LAYOUT 3
/* The library version a segment was written by: major << 16 | minor. */
#define QPS_STAT_VERSION (QPS_VERSION_MAJOR * 65536u + QPS_VERSION_MINOR)
#define QPS_STAT_ALIGN 64
/* Memberships an endpoint slot lists; more are counted in ngroups. */
#define QPS_STAT_EP_GROUPS QPS_EP_STATS_GROUPS
/* How often the snapshot block is refreshed. */
#define QPS_STAT_PERIOD_MS 100
/* The most send queues and endpoint slots a segment has (the library's
 * QPS_MAX_TXQ and QPS_MAX_EP): a reader refuses more. */
#define QPS_STAT_MAX_SQ 64u
#define QPS_STAT_MAX_EP 65536u

/* Why a send queue's doorbell was rung (struct qps_stats tx_flush_*). */
enum qps_txf {
	QPS_TXF_SEND,		/* end of a burst: nothing more followed */
	QPS_TXF_EXPLICIT,	/* qps_ctx_flush, qps_flush */
	QPS_TXF_POLL,		/* progress and receive calls */
	QPS_TXF_CLOSE,		/* endpoint close, context destroy */
	QPS_TXF_FULL,		/* send slots or send queue full mid-burst */
	QPS_TXF_TIMER,		/* the bounded delay expired */
	QPS_TXF_MAX
};

/* Send-path counters of one send queue (struct qps_stats tx_*). */
struct qps_sq_stats {
	uint64_t packets;
	uint64_t bytes;
	uint64_t errors;
	uint64_t wqes;
	uint64_t doorbells;
	uint64_t bf;
	uint64_t flush[QPS_TXF_MAX];	/* why the doorbell was rung */
	uint64_t qp_errors;		/* times the QP failed (qp_recover.c) */
	uint64_t qp_recoveries;		/* times it was brought back */
	uint64_t signaled;		/* WQEs that asked for a completion */
	uint64_t reaped;		/* WQEs completed, signalled or not */
	uint64_t frags;			/* fragment frames posted */
	uint64_t frag_partial;		/* datagrams cut short mid-fragments */
} __attribute__((aligned(QPS_STAT_ALIGN)));

/* struct qps_stat_ep flags */
#define QPS_STAT_EP_BOUND 1u
#define QPS_STAT_EP_CONNECTED 2u
#define QPS_STAT_EP_REUSEADDR 4u

#define QPS_STAT_EP_FREE 0u
#define QPS_STAT_EP_OPEN 1u

/*
 * One endpoint slot, indexed like the context's endpoint table. Three
 * parts on their own cache lines, one writer domain each.
 */
struct qps_stat_ep {
	/* Identity: written under ctl_lock inside a sequence count (odd
	 * while it changes). */
	_Atomic uint32_t seq;
	uint32_t state;			/* QPS_STAT_EP_FREE, _OPEN */
	uint32_t opens;			/* times the slot was opened */
	uint32_t flags;			/* QPS_STAT_EP_* */
	uint32_t laddr;			/* network order */
	uint32_t paddr;
	uint16_t lport;
	uint16_t pport;
	uint32_t ngroups;		/* memberships held */
	struct {
		uint32_t group;
		uint32_t source;
	} mc[QPS_STAT_EP_GROUPS];
	/* Set by qps_setopt without a lock: one aligned word. */
	_Atomic int32_t priority;

	/* Receive side: under rx.lock. */
	uint64_t rx_packets __attribute__((aligned(QPS_STAT_ALIGN)));
	uint64_t rx_bytes;
	uint64_t rx_queue_full;
	uint64_t rx_truncated;
	uint64_t rx_filtered;
	uint32_t rxq_depth;
	uint32_t rxq_hwm;
	uint32_t rcvbuf;

	/* Send side: under the lock of the send queue the datagram took. */
	uint64_t tx_packets __attribute__((aligned(QPS_STAT_ALIGN)));
	uint64_t tx_bytes;
	uint64_t tx_drops;
	int32_t txq;			/* send queue of the last send, -1 */
} __attribute__((aligned(QPS_STAT_ALIGN)));

/*
 * The header. magic is stored last (release) once everything else is
 * set, so a reader that sees it sees a complete header. A reader checks
 * layout and the four sizes: a segment written by another build of the
 * library does not match and is refused, never misread.
 */
struct qps_stat_hdr {
	_Atomic uint64_t magic;
	uint32_t layout;		/* QPS_STAT_LAYOUT */
	uint32_t hdr_size;		/* sizeof(struct qps_stat_hdr) */
	uint32_t stats_size;		/* sizeof(struct qps_stats) */
	uint32_t sq_size;		/* sizeof(struct qps_sq_stats) */
	uint32_t ep_size;		/* sizeof(struct qps_stat_ep) */
	uint32_t version;		/* QPS_STAT_VERSION */
	uint64_t size;			/* bytes of the segment */
	int32_t pid;
	uint32_t ctx_id;		/* per process, from 0 */
	uint64_t start_ticks;		/* /proc/<pid>/stat starttime */
	uint64_t created_ns;		/* CLOCK_REALTIME */
	/* st_dev and st_ino of the writer's /proc/self/ns/pid: pid is a
	 * number in that namespace only (0: unknown). */
	uint64_t pidns_dev;
	uint64_t pidns_ino;
	char comm[16];
	char provider[16];
	char dev[QPS_NAME_MAX];
	uint8_t mac[6];
	uint16_t reserved;
	uint32_t addr;			/* network order */
	uint32_t transport;		/* enum qps_transport */
	uint32_t tx_path;		/* enum qps_tx_path */
	uint32_t nsq;
	uint32_t max_ep;
	uint32_t tx_depth;
	uint32_t rx_depth;
	uint64_t off_rx;		/* struct qps_stats: ctx->st */
	uint64_t off_snap;		/* struct qps_stats: snapshot */
	uint64_t off_sq;		/* struct qps_sq_stats[nsq] */
	uint64_t off_ep;		/* struct qps_stat_ep[max_ep] */
	/* The snapshot: sequence count (odd while written), when. */
	_Atomic uint32_t snap_seq;
	uint32_t reserved2;
	_Atomic uint64_t snap_ns;	/* CLOCK_REALTIME of the last one */
	/* The capture ring a dumper asks this context to write into
	 * (dump_shm.h), 0 for none: written by qps_dump (release, after
	 * the ring is complete), read by the context on its stats tick
	 * (acquire). Only who may open the segment read-write (its owner,
	 * root) can ask. */
	_Atomic uint64_t dump_req;
} __attribute__((aligned(QPS_STAT_ALIGN)));

static inline size_t qps_stat_align(size_t v)
{
	return (v + QPS_STAT_ALIGN - 1) & ~(size_t)(QPS_STAT_ALIGN - 1);
}

/* Where each block of a segment starts, and its size. */
struct qps_stat_geom {
	uint64_t off_rx;
	uint64_t off_snap;
	uint64_t off_sq;
	uint64_t off_ep;
	uint64_t size;
};

/*
 * The one layout for @nsq send queues and @max_ep endpoints: the writer
 * places the blocks by it and a reader accepts a header only when every
 * offset equals it. Both counts are at most QPS_STAT_MAX_SQ and
 * QPS_STAT_MAX_EP (a reader checks before it calls), so nothing wraps.
 */
static inline void qps_stat_geom(uint32_t nsq, uint32_t max_ep,
				 struct qps_stat_geom *g)
{
	g->off_rx = qps_stat_align(sizeof(struct qps_stat_hdr));
	g->off_snap = g->off_rx + qps_stat_align(sizeof(struct qps_stats));
	g->off_sq = g->off_snap + qps_stat_align(sizeof(struct qps_stats));
	g->off_ep = g->off_sq + (uint64_t)nsq * sizeof(struct qps_sq_stats);
	g->size = g->off_ep + (uint64_t)max_ep * sizeof(struct qps_stat_ep);
}

/* Bytes of a segment for @nsq send queues and @max_ep endpoints. */
static inline size_t qps_stat_size(uint32_t nsq, uint32_t max_ep)
{
	struct qps_stat_geom g;

	qps_stat_geom(nsq, max_ep, &g);
	return (size_t)g.size;
}

/* One send queue's counters into the context's totals. */
static inline void qps_stat_sq_fold(const struct qps_sq_stats *s,
				    struct qps_stats *all)
{
	all->tx_packets += s->packets;
	all->tx_bytes += s->bytes;
	all->tx_errors += s->errors;
	all->tx_wqes += s->wqes;
	all->tx_doorbells += s->doorbells;
	all->tx_bf += s->bf;
	all->tx_flush_send += s->flush[QPS_TXF_SEND];
	all->tx_flush_explicit += s->flush[QPS_TXF_EXPLICIT];
	all->tx_flush_poll += s->flush[QPS_TXF_POLL];
	all->tx_flush_close += s->flush[QPS_TXF_CLOSE];
	all->tx_flush_full += s->flush[QPS_TXF_FULL];
	all->tx_flush_timer += s->flush[QPS_TXF_TIMER];
	all->tx_signaled += s->signaled;
	all->tx_reaped += s->reaped;
	all->qp_errors += s->qp_errors;
	all->qp_recoveries += s->qp_recoveries;
	all->tx_frags += s->frags;
	all->tx_frag_partial += s->frag_partial;
}

_Static_assert(sizeof(struct qps_stats) % sizeof(uint64_t) == 0,
	       "struct qps_stats is an array of counters");

/*
 * Add the snapshot block to the receive block: the two fill disjoint
 * fields (each is zero in the other), so adding is merging.
 */
static inline void qps_stat_merge(struct qps_stats *all,
				  const struct qps_stats *snap)
{
	uint64_t a[sizeof(struct qps_stats) / sizeof(uint64_t)];
	uint64_t b[sizeof(struct qps_stats) / sizeof(uint64_t)];
	size_t i;

	memcpy(a, all, sizeof(a));
	memcpy(b, snap, sizeof(b));
	for (i = 0; i < sizeof(a) / sizeof(a[0]); i++)
		a[i] += b[i];
	memcpy(all, a, sizeof(a));
}

/* The derived field, once every other one is summed. */
static inline void qps_stat_finish(struct qps_stats *all)
{
	all->tx_db_ppm = all->tx_wqes ?
			 all->tx_doorbells * 1000000u / all->tx_wqes : 0;
}

/* Sequence counts: one writer (its lock orders writers), readers retry. */
static inline uint32_t qps_stat_write_begin(_Atomic uint32_t *seq)
{
	uint32_t s = atomic_load_explicit(seq, memory_order_relaxed);

	atomic_store_explicit(seq, s + 1, memory_order_relaxed);
	/* Release fence: the odd count is visible before the data changes;
	 * pairs with the acquire fence in qps_stat_read_retry(). */
	atomic_thread_fence(memory_order_release);
	return s + 2;
}

static inline void qps_stat_write_end(_Atomic uint32_t *seq, uint32_t s)
{
	/* Release: the data is visible before the even count; pairs with
	 * the acquire load in qps_stat_read_begin(). */
	atomic_store_explicit(seq, s, memory_order_release);
}

static inline uint32_t qps_stat_read_begin(_Atomic uint32_t *seq)
{
	/* Acquire: pairs with the release in qps_stat_write_end(). */
	return atomic_load_explicit(seq, memory_order_acquire);
}

/* True when the copy made since @s must be taken again. */
static inline int qps_stat_read_retry(_Atomic uint32_t *seq, uint32_t s)
{
	/* Acquire fence: the copy is complete before the count is read
	 * again; pairs with the release fence in qps_stat_write_begin(). */
	atomic_thread_fence(memory_order_acquire);
	return (s & 1) || atomic_load_explicit(seq, memory_order_relaxed) != s;
}

#endif /* QPS_STAT_SHM_H */
