// SPDX-License-Identifier: MIT
/*
 * The stats segment of a context: created in /dev/shm as
 * qpsock-stat.<pid>.<n> (n counts the process's contexts; stat_file.c
 * makes the file) unless the context opts out (QPS_CTX_ATTR_STATS, or
 * QPS_STATS=0 in the environment) or cannot have one, else the same
 * layout in private memory, so the counters' writers never ask which.
 * The counter blocks live in it (stat_shm.h);
 * one thread per published context refreshes the snapshot block, the
 * counters other modules keep in their own atomics, every
 * QPS_STAT_PERIOD_MS. qps_ctx_destroy unlinks the segment, and so does
 * exit() for the contexts still open then; a segment whose process died
 * otherwise (a signal, _exit) is found and removed by qps_stat.
 */
#define _GNU_SOURCE	/* pthread_setname_np, strerrordesc_np */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "sq.h"
#include "proc_start.h"
#include "stat.h"
#include "ud.h"

/* A reader refuses a segment with more than it expects. */
_Static_assert(QPS_MAX_TXQ <= QPS_STAT_MAX_SQ, "send queues of a segment");
_Static_assert(QPS_MAX_EP <= QPS_STAT_MAX_EP, "endpoint slots of a segment");

static _Atomic uint32_t qps_stat_ctx_next;

/* The published segments of this process, for the exit-time unlink. */
static pthread_mutex_t qps_stat_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct qps_stat *qps_stat_live;

static void qps_stat_live_add(struct qps_stat *s)
{
	pthread_mutex_lock(&qps_stat_live_lock);
	s->live_next = qps_stat_live;
	qps_stat_live = s;
	pthread_mutex_unlock(&qps_stat_live_lock);
}

static void qps_stat_live_del(struct qps_stat *s)
{
	struct qps_stat **pp;

	pthread_mutex_lock(&qps_stat_live_lock);
	for (pp = &qps_stat_live; *pp; pp = &(*pp)->live_next) {
		if (*pp == s) {
			*pp = s->live_next;
			break;
		}
	}
	pthread_mutex_unlock(&qps_stat_live_lock);
}

/* exit() with contexts open: their names go; the mappings stay valid for
 * whatever still runs (other destructors, threads). */
__attribute__((destructor)) static void qps_stat_atexit(void)
{
	const struct qps_stat *s;

	pid_t self = getpid();

	pthread_mutex_lock(&qps_stat_live_lock);
	/* A forked child that exits leaves its parent's segments alone. */
	for (s = qps_stat_live; s; s = s->live_next)
		if (s->hdr && s->hdr->pid == self)
			shm_unlink(s->name);
	qps_stat_live = NULL;
	pthread_mutex_unlock(&qps_stat_live_lock);
}

static uint64_t qps_stat_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void qps_stat_comm(char *out, size_t len)
{
	ssize_t n = 0;
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, out, len - 1);
		close(fd);
	}
	if (n < 0)
		n = 0;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* The segment's mode, 0 for none: the attribute, else QPS_STATS. */
static int qps_stat_wanted(const struct qps_ctx_attr *attr, mode_t *mode)
{
	static const mode_t modes[] = {
		[QPS_STATS_OFF] = 0,
		[QPS_STATS_OWNER] = 0600,
		[QPS_STATS_ALL_USERS] = 0644,
	};
	uint32_t v = QPS_STATS_OWNER;
	const char *env;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_STATS)) {
		if (attr->stats > QPS_STATS_ALL_USERS)
			return -EINVAL;
		v = attr->stats;
	} else if ((env = getenv("QPS_STATS")) != NULL) {
		if (!strcmp(env, "0"))
			v = QPS_STATS_OFF;
		else if (!strcmp(env, "2"))
			v = QPS_STATS_ALL_USERS;
	}
	*mode = modes[v];
	return 0;
}

/* The PID namespace getpid() is a number in, so that a reader in another
 * one never takes our pid for one of its own. */
static void qps_stat_pidns(struct qps_stat_hdr *h)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) == 0) {
		h->pidns_dev = st.st_dev;
		h->pidns_ino = st.st_ino;
	}
}

static void qps_stat_hdr_fill(struct qps_ctx *ctx, struct qps_stat_hdr *h,
			      uint32_t id)
{
	struct qps_stat_geom g;

	qps_stat_geom(ctx->nsq, ctx->ept.max, &g);
	h->layout = QPS_STAT_LAYOUT;
	h->hdr_size = sizeof(*h);
	h->stats_size = sizeof(struct qps_stats);
	h->sq_size = sizeof(struct qps_sq_stats);
	h->ep_size = sizeof(struct qps_stat_ep);
	h->version = QPS_STAT_VERSION;
	h->size = ctx->stat.size;
	h->pid = (int32_t)getpid();
	h->ctx_id = id;
	h->start_ticks = qps_proc_start_ticks("/proc/self/stat");
	h->created_ns = qps_stat_realtime_ns();
	qps_stat_pidns(h);
	qps_stat_comm(h->comm, sizeof(h->comm));
	memcpy(h->provider, ctx->provider, sizeof(h->provider));
	memcpy(h->dev, ctx->info.name, sizeof(h->dev));
	h->dev[sizeof(h->dev) - 1] = '\0';
	memcpy(h->mac, ctx->info.mac, 6);
	h->addr = ctx->info.addr.s_addr;
	h->transport = ctx->transport;
	h->tx_path = ctx->tx_path;
	h->nsq = ctx->nsq;
	h->max_ep = ctx->ept.max;
	h->tx_depth = ctx->tx_depth;
	h->rx_depth = ctx->rx.depth;
	h->off_rx = g.off_rx;
	h->off_snap = g.off_snap;
	h->off_sq = g.off_sq;
	h->off_ep = g.off_ep;
}

int qps_stat_open(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	struct qps_stat *s = &ctx->stat;
	struct qps_stat_hdr *h;
	uint32_t id, i;
	mode_t mode;
	int ret;

	ret = qps_stat_wanted(attr, &mode);
	if (ret < 0)
		return ret;
	s->size = qps_stat_size(ctx->nsq, ctx->ept.max);
	id = atomic_fetch_add_explicit(&qps_stat_ctx_next, 1,
				       memory_order_relaxed);
	if (mode) {
		/* The counters work either way: a segment that cannot be
		 * had costs qps_stat its view, never the context. */
		ret = qps_stat_file_create(s, id, s->size, mode);
		s->shm = ret == 0;
		if (ret < 0)
			qps_log_err("stats segment %s%s: %s: counters stay "
				    "private (qps_stat cannot see them)",
				    QPS_STAT_DIR, s->name,
				    strerrordesc_np(-ret));
	}
	if (!s->base) {
		s->base = aligned_alloc(QPS_STAT_ALIGN, s->size);
		if (!s->base)
			return -ENOMEM;
		memset(s->base, 0, s->size);
	}
	h = s->base;
	qps_stat_hdr_fill(ctx, h, id);
	ctx->st = (struct qps_stats *)((char *)s->base + h->off_rx);
	s->snap = (struct qps_stats *)((char *)s->base + h->off_snap);
	s->sq = (struct qps_sq_stats *)((char *)s->base + h->off_sq);
	s->eps = (struct qps_stat_ep *)((char *)s->base + h->off_ep);
	for (i = 0; i < ctx->ept.max; i++) {
		ctx->ept.eps[i].sb = &s->eps[i];
		s->eps[i].txq = -1;
	}
	s->hdr = h;
	if (s->shm)
		qps_stat_live_add(s);
	/* Release: the header is complete before a reader sees the magic;
	 * pairs with the acquire load in sr_check (tools/stat_read.c). */
	atomic_store_explicit(&h->magic, QPS_STAT_MAGIC, memory_order_release);
	return 0;
}

void qps_stat_mods(struct qps_ctx *ctx, struct qps_stats *m)
{
	struct qps_dev_counters dc;
	struct qps_prio_stats ps;
	struct qps_txq_stats t;
	unsigned int b;
	uint32_t i;

	m->tx_queues = ctx->nsq;
	m->csum_offload = ctx->csum_offload;
	m->thread_single = ctx->lock_mode == QPS_ALOCK_SINGLE;
	/* Relaxed: a counter. */
	m->tx_nested = __atomic_load_n(&ctx->tx_nested, __ATOMIC_RELAXED);
	for (i = 0; i < ctx->nsq; i++) {
		m->tx_lock_barriers += __atomic_load_n(
			&ctx->sq[i].lock.lib_entries, __ATOMIC_RELAXED);
		m->tx_lock_biased += qps_alock_biased(&ctx->sq[i].lock);
	}
	if (qps_txq_stats(ctx->txq, &t) == 0) {
		m->txq_picks_cached = t.picks_cached;
		m->txq_picks_computed = t.picks_computed;
		m->txq_flows_new = t.flow_new;
		m->txq_flow_moves = t.flow_moves;
		m->txq_flow_deferred = t.flow_deferred;
		m->txq_resets_connect = t.resets[QPS_TXQ_RESET_CONNECT];
		m->txq_resets_route = t.resets[QPS_TXQ_RESET_ROUTE];
		m->txq_resets_qp = t.resets[QPS_TXQ_RESET_QP];
	}
	/* Bands: snapshots, approximate while threads send. */
	for (i = 0; i < ctx->nsq; i++) {
		if (qps_prio_stats(ctx->sq[i].prio, &ps) < 0)
			continue;
		for (b = 0; b < QPS_PRIO_BANDS; b++) {
			m->tx_band_enqueued[b] += ps.band[b].enqueued;
			m->tx_band_bypassed[b] += ps.band[b].bypassed;
			m->tx_band_drops[b] += ps.band[b].drops;
			m->tx_band_depth[b] += ps.band[b].depth;
			m->tx_band_bytes[b] += ps.band[b].bytes;
		}
	}
	qps_ud_stats(ctx, m);
	memset(&dc, 0, sizeof(dc));
	if (ctx->ops->counters(ctx->dev, &dc) == 0) {
		m->wqes = dc.wqes;
		/* A BlueFlame write rings the device too (it is how the
		 * direct path rings a small last WQE). */
		m->doorbells = dc.doorbells + dc.bf_writes;
		m->bf_writes = dc.bf_writes;
		m->tx_cqes = dc.tx_cqes;
		m->rx_cqes = dc.rx_cqes;
		m->dev_tx_drops = dc.tx_drops;
		m->dev_rx_drops = dc.rx_drops;
	}
}

static void qps_stat_snap(struct qps_ctx *ctx)
{
	struct qps_stat *s = &ctx->stat;
	struct qps_stats m;
	uint32_t seq;

	memset(&m, 0, sizeof(m));
	qps_stat_mods(ctx, &m);
	seq = qps_stat_write_begin(&s->hdr->snap_seq);
	memcpy(s->snap, &m, sizeof(m));
	qps_stat_write_end(&s->hdr->snap_seq, seq);
	atomic_store_explicit(&s->hdr->snap_ns, qps_stat_realtime_ns(),
			      memory_order_relaxed);
}

static void *qps_stat_main(void *arg)
{
	struct qps_ctx *ctx = arg;
	struct qps_stat *s = &ctx->stat;
	struct timespec ts;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		pthread_mutex_unlock(&s->lock);
		qps_stat_snap(ctx);
		qps_dump_tick(ctx);
		pthread_mutex_lock(&s->lock);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += QPS_STAT_PERIOD_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (!s->stop)
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

void qps_stat_start(struct qps_ctx *ctx)
{
	struct qps_stat *s = &ctx->stat;
	pthread_condattr_t ca;
	sigset_t all, old;
	int ret;

	if (!s->shm)
		return;
	/* The first snapshot now: a reader never sees an empty one. */
	qps_stat_snap(ctx);
	if (pthread_condattr_init(&ca))
		return;
	ret = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!ret)
		ret = pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (ret)
		return;
	pthread_mutex_init(&s->lock, NULL);
	s->lock_init = true;
	/* The application's signals are not for this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&s->thread, NULL, qps_stat_main, ctx);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		qps_log_err("stats thread not started: the snapshot in %s "
			    "stays as at creation", s->name);
		return;
	}
	pthread_setname_np(s->thread, "qps-stat");
	s->running = true;
}

void qps_stat_stop(struct qps_ctx *ctx)
{
	struct qps_stat *s = &ctx->stat;

	if (!s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	s->running = false;
}

void qps_stat_close(struct qps_ctx *ctx)
{
	struct qps_stat *s = &ctx->stat;

	qps_stat_stop(ctx);
	qps_dump_close(ctx);
	if (s->lock_init) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		s->lock_init = false;
	}
	if (!s->base)
		return;
	if (s->shm) {
		qps_stat_live_del(s);
		shm_unlink(s->name);
		munmap(s->base, s->size);
	} else {
		free(s->base);
	}
	s->base = NULL;
	ctx->st = NULL;
}

void qps_stat_ep_publish_locked(struct qps_ep *ep)
{
	struct qps_stat_ep *b = ep->sb;
	uint32_t seq, i;

	seq = qps_stat_write_begin(&b->seq);
	if (qps_ep_check(ep) == 0 && b->state == QPS_STAT_EP_FREE)
		b->opens++;
	b->state = qps_ep_check(ep) == 0 ? QPS_STAT_EP_OPEN : QPS_STAT_EP_FREE;
	b->flags = (ep->bound ? QPS_STAT_EP_BOUND : 0) |
		   (ep->connected ? QPS_STAT_EP_CONNECTED : 0) |
		   (ep->reuseaddr ? QPS_STAT_EP_REUSEADDR : 0);
	b->laddr = ep->bound ? ep->local.sin_addr.s_addr : 0;
	b->lport = ep->bound ? ep->local.sin_port : 0;
	b->paddr = ep->connected ? ep->peer.sin_addr.s_addr : 0;
	b->pport = ep->connected ? ep->peer.sin_port : 0;
	b->ngroups = ep->nmc;
	memset(b->mc, 0, sizeof(b->mc));
	for (i = 0; i < ep->nmc && i < QPS_STAT_EP_GROUPS; i++) {
		b->mc[i].group = ep->mc[i].group;
		b->mc[i].source = ep->mc[i].source;
	}
	qps_stat_write_end(&b->seq, seq);
}

void qps_stat_ep_open_locked(struct qps_ep *ep)
{
	struct qps_stat_ep *b = ep->sb;

	/* Nothing writes the counters of a closed slot: no receive path
	 * reaches it after close's grace period, no sender passes
	 * qps_ep_check. */
	memset(&b->rx_packets, 0,
	       sizeof(*b) - offsetof(struct qps_stat_ep, rx_packets));
	b->rcvbuf = ep->rcvbuf;
	b->txq = -1;
	atomic_store_explicit(&b->priority, ep->priority,
			      memory_order_relaxed);
	qps_stat_ep_publish_locked(ep);
}
