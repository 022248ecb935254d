// SPDX-License-Identifier: MIT
/*
 * qps_bench core [--json] [--ms M] [--rounds R] [--case NAME]
 *                [--path auto|generic|direct] [--csum hw|sw|both]
 *
 * What qpsock's core costs per datagram, with the device's work at zero:
 * every case runs on the null provider (docs/null.md), 64-byte payloads,
 * one send queue. Each case is warmed up, then timed in R rounds of M/R
 * ms; ns_per_dgram is the best round (the least disturbed by the rest of
 * the machine), ns_median the median. cpu_ns_per_dgram (and its median)
 * divides the measuring threads' CPU time instead of the wall clock, so
 * time the thread spent preempted by other work on a loaded machine is
 * not counted (its cache misses still are). cycles_per_dgram counts
 * user-space cycles of the measuring thread(s) where perf_event_open
 * works (null otherwise). The 1-minute load average is printed with each
 * result: absolute times on a shared machine mean little without it.
 * dgrams_all counts the warm-up round too: everything bc_loop() did, for
 * an instruction count per datagram under callgrind
 * (--toggle-collect=bc_loop), which no other load on the machine moves.
 *
 * Cases: send_connected_b1 (qps_send), send_connected_b32 (31 sends with
 * QPS_MSG_MORE and one without), sendto_b1 (qps_sendto, unconnected:
 * the flow table), sendmmsg_b32 (qps_sendmmsg of 32, unconnected),
 * sendmmsg_connected_b32 (qps_sendmmsg of 32 to the connected peer),
 * send_bands_2thr (two threads, one connected endpoint each at different
 * priorities, on one send queue: its bands contended; ns per datagram of
 * both together), recv_unicast (bound port), recv_mcast_1 and
 * recv_mcast_4 (a group with 1 or 4 members; ns per datagram the device
 * delivered, each of which reaches every member). device_floor_b1 and
 * device_floor_b32 are no core path but what any send path pays at least
 * on this machine and device: 1 or 32 prebuilt frames written as WQEs
 * straight into the null device's mlx4 ring (qps_sq_mlx4_write), one
 * ring (BlueFlame for the last WQE), the device's consumption and the
 * one completion reaped; a send case's ns over its floor is the core's
 * share. device_floor_b32_locks is device_floor_b32 with each WQE
 * written inside its own round of sq->lock and the bands' transmitter,
 * as a bypassed QPS_MSG_MORE send takes them: its ns over
 * device_floor_b32 is what that synchronisation costs per datagram.
 * A case whose name ends in _single runs the same on a context opened
 * with QPS_THREAD_MODE_SINGLE (docs/api.md "Thread mode"); each result
 * says which mode the context ran ("thread_mode", from
 * qps_stats.thread_single) and how many of its send queues leaned to one
 * thread at the end ("tx_lock_biased": a multi-threaded context's biased
 * locks; 0 with QPS_THREAD_MODE=mutex) and the barriers its send queue
 * locks paid ("tx_lock_barriers").
 *
 * Checksums: with hw the null device offloads them (QPS_DEV_CAP_CSUM: the
 * core leaves the fields 0 on send and skips verifying what the device
 * marked good on receive), with sw it does not (null's csum=off) and the
 * core computes and verifies them all; both (the default) runs each case
 * both ways. Each result says which it measured ("csum"), as the
 * context reported it (qps_stats.csum_offload).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/mlx4dv.h>
#include <qpsock/qpsock.h>

#include "frames.h"
#include "qps_bench.h"
#include "sq.h"

#define BC_PAYLOAD 64
#define BC_PORT 9000
#define BC_PEER "198.18.0.2"
#define BC_GROUP "239.4.3.2"
#define BC_BATCH 32
#define BC_MAX_EPS 4
#define BC_MAX_ROUNDS 16
/* Steps between clock reads: the clock stays out of the measurement. */
#define BC_STEPS 64

struct bc_opts {
	int json;
	unsigned int ms;
	unsigned int rounds;
	const char *only;
	uint32_t path;
	unsigned int csum;	/* BC_CSUM_* bits: the modes to run */
};

#define BC_CSUM_HW 1u
#define BC_CSUM_SW 2u

struct bc_run {
	const struct bc_opts *o;
	struct qps_ctx *ctx;
	struct qps_ep *ep[BC_MAX_EPS];
	unsigned int neps;
	struct sockaddr_in to;
	struct qps_msg msgs[BC_BATCH];
	uint8_t buf[BC_PAYLOAD];
	bool csum_sw;		/* the device must not offload checksums */
	uint8_t frame[QPS_HDRS_LEN + BC_PAYLOAD];	/* device_floor_* */
	uint32_t frame_len;
};

struct bc_case {
	const char *name;
	const char *dev;	/* the null device string */
	unsigned int neps;
	int (*setup)(struct bc_run *r);
	/* One step: returns datagrams done (sent, or delivered by the
	 * device), or -errno. */
	int (*step)(struct bc_run *r);
	unsigned int threads;	/* 2: send_bands_2thr's own runner */
	bool single;		/* QPS_THREAD_MODE_SINGLE */
};

static uint64_t bc_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t bc_now(void)
{
	return bc_clock(CLOCK_MONOTONIC);
}

static int bc_ctx(struct bc_run *r, const char *dev, bool single)
{
	struct qps_ctx_attr a;
	char d[128];

	if (r->csum_sw) {
		snprintf(d, sizeof(d), "%s%scsum=off", dev ? dev : "",
			 dev ? ":" : "");
		dev = d;
	}
	memset(&a, 0, sizeof(a));
	a.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_NUM_TXQ |
		      QPS_CTX_ATTR_TX_PATH;
	a.provider = "null";
	a.num_txq = 1;
	a.tx_path = r->o->path;
	if (single) {
		a.comp_mask |= QPS_CTX_ATTR_THREAD_MODE;
		a.thread_mode = QPS_THREAD_MODE_SINGLE;
	}
	if (dev) {
		a.comp_mask |= QPS_CTX_ATTR_DEV;
		a.dev = dev;
	}
	return qps_ctx_create(&a, &r->ctx);
}

static int bc_eps(struct bc_run *r, unsigned int n)
{
	struct sockaddr_in sin;
	unsigned int i;
	int one = 1, ret;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(BC_PORT);
	for (i = 0; i < n; i++) {
		ret = qps_ep_create(r->ctx, QPS_EP_DGRAM, &r->ep[i]);
		if (ret < 0)
			return ret;
		r->neps++;
		ret = qps_setopt(r->ep[i], QPS_OPT_REUSEADDR, &one,
				 sizeof(one));
		if (ret == 0)
			ret = qps_bind(r->ep[i], (struct sockaddr *)&sin,
				       sizeof(sin));
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int bc_setup_connected(struct bc_run *r)
{
	unsigned int i;
	int ret;

	for (i = 0; i < r->neps; i++) {
		ret = qps_connect(r->ep[i], (struct sockaddr *)&r->to,
				  sizeof(r->to));
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int bc_setup_unconnected(struct bc_run *r)
{
	unsigned int i;

	for (i = 0; i < BC_BATCH; i++)
		r->msgs[i] = (struct qps_msg){
			.buf = r->buf, .len = BC_PAYLOAD,
			.dest = (struct sockaddr *)&r->to,
			.dest_len = sizeof(r->to), .priority = -1,
		};
	return 0;
}

/* A batch to the connected peer: no address in any message. */
static int bc_setup_connected_msgs(struct bc_run *r)
{
	unsigned int i;

	for (i = 0; i < BC_BATCH; i++)
		r->msgs[i] = (struct qps_msg){
			.buf = r->buf, .len = BC_PAYLOAD, .priority = -1,
		};
	return bc_setup_connected(r);
}

static int bc_setup_join(struct bc_run *r)
{
	struct qps_mreq mr;
	unsigned int i;
	int ret;

	memset(&mr, 0, sizeof(mr));
	mr.group.s_addr = inet_addr(BC_GROUP);
	for (i = 0; i < r->neps; i++) {
		ret = qps_join(r->ep[i], &mr, sizeof(mr));
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int bc_send_b1(struct bc_run *r)
{
	ssize_t n = qps_send(r->ep[0], r->buf, BC_PAYLOAD, 0);

	return n < 0 ? (int)n : 1;
}

static int bc_send_b32(struct bc_run *r)
{
	unsigned int i;

	for (i = 0; i < BC_BATCH; i++) {
		ssize_t n = qps_send(r->ep[0], r->buf, BC_PAYLOAD,
				     i + 1 < BC_BATCH ? QPS_MSG_MORE : 0);

		if (n < 0)
			return (int)n;
	}
	return BC_BATCH;
}

static int bc_sendto_b1(struct bc_run *r)
{
	ssize_t n = qps_sendto(r->ep[0], r->buf, BC_PAYLOAD, 0,
			       (struct sockaddr *)&r->to, sizeof(r->to));

	return n < 0 ? (int)n : 1;
}

static int bc_sendmmsg_b32(struct bc_run *r)
{
	return qps_sendmmsg(r->ep[0], r->msgs, BC_BATCH, 0);
}

/* BC_BATCH receives on every member, in turn; returns the datagrams
 * member 0 got (each the device delivered reaches every member). The
 * device makes a burst whenever a receive found its queue empty. */
static int bc_recv(struct bc_run *r)
{
	uint8_t b[BC_PAYLOAD];
	unsigned int i, k;
	int got = 0;

	for (k = 0; k < BC_BATCH; k++) {
		for (i = 0; i < r->neps; i++) {
			ssize_t n = qps_recv(r->ep[i], b, sizeof(b),
					     QPS_MSG_DONTWAIT);

			if (n < 0 && n != -EAGAIN)
				return (int)n;
			if (n > 0 && i == 0)
				got++;
		}
	}
	return got;
}

/* A frame from BC_PEER's side of the bench, built once. */
static int bc_setup_floor(struct bc_run *r)
{
	struct qps_frame_hdr h;
	int len;

	if (r->ctx->tx_ops != &qps_sq_path_mlx4)
		return -EOPNOTSUPP;
	memset(&h, 0, sizeof(h));
	memcpy(h.dst_mac, "\x02\0\0\0\0\x02", 6);
	memcpy(h.src_mac, r->ctx->info.mac, 6);
	h.saddr = r->ctx->info.addr.s_addr;
	h.daddr = r->to.sin_addr.s_addr;
	h.sport = h.dport = r->to.sin_port;
	h.ttl = 64;
	memcpy(r->frame + QPS_HDRS_LEN, r->buf, BC_PAYLOAD);
	len = qps_frame_build_hw(r->frame, &h, BC_PAYLOAD);
	if (len < 0)
		return len;
	r->frame_len = (uint32_t)len;
	return 0;
}

/* Prebuilt frame @i of a burst as a WQE; wr_ids at and above tx_depth
 * name no slot of the core's. */
static int bc_floor_write(struct bc_run *r, struct qps_sq *sq,
			  unsigned int i, bool last)
{
	return qps_sq_mlx4_write(&sq->mlx4, r->frame, r->frame_len,
				 r->ctx->tx_mr->lkey, r->ctx->tx_depth + i,
				 last, MLX4_WQE_CTRL_IP_HDR_CSUM |
				 MLX4_WQE_CTRL_TCP_UDP_CSUM);
}

/* Ring what was written (BlueFlame for a last WQE that fits) and wait
 * for its one completion; 0 when nothing was written. */
static int bc_floor_reap(struct bc_run *r, struct qps_sq *sq,
			 struct ibv_wc wc[4])
{
	int got = 0;

	if (qps_sq_mlx4_ring(&sq->mlx4) == QPS_SQ_RANG_NONE)
		return 0;
	do
		got = r->ctx->ops->poll_cq(sq->cq, 4, wc);
	while (got == 0);
	return got;
}

static int bc_floor_result(int ret, int got, const struct ibv_wc *wc,
			   unsigned int n)
{
	if (ret < 0 || got < 0)
		return ret < 0 ? ret : got;
	return got == 1 && wc[0].status == IBV_WC_SUCCESS ? (int)n : -EIO;
}

/* The queue's lock is held as a send path would hold it. One ring for @n
 * WQEs: for one, the BlueFlame write a single send makes. */
static int bc_floor(struct bc_run *r, unsigned int n)
{
	struct qps_sq *sq = &r->ctx->sq[0];
	struct ibv_wc wc[4];
	unsigned int i;
	int ret = 0, got;

	qps_alock_lock(&sq->lock);
	for (i = 0; i < n && ret == 0; i++)
		ret = bc_floor_write(r, sq, i, i + 1 == n);
	got = bc_floor_reap(r, sq, wc);
	qps_alock_unlock(&sq->lock);
	return bc_floor_result(ret, got, wc, n);
}

static int bc_floor_b1(struct bc_run *r)
{
	return bc_floor(r, 1);
}

static int bc_floor_b32(struct bc_run *r)
{
	return bc_floor(r, BC_BATCH);
}

/* bc_floor for a burst, each WQE written inside its own round of what a
 * bypassed QPS_MSG_MORE send takes and gives back: sq->lock, and the
 * look at the bands' transmitter. Over device_floor_b32, that is what
 * the lock's two locked read-modify-writes cost per datagram. */
static int bc_floor_b32_locks(struct bc_run *r)
{
	struct qps_ctx *ctx = r->ctx;
	struct qps_sq *sq = &ctx->sq[0];
	struct ibv_wc wc[4];
	unsigned int i;
	int ret = 0, got = 0;

	for (i = 0; i < BC_BATCH && ret == 0; i++) {
		bool last = i + 1 == BC_BATCH;

		qps_alock_lock(&sq->lock);
		/* Nobody else sends on this queue: the bands are idle. */
		ret = qps_prio_bypass_locked(sq->prio) ?
		      bc_floor_write(r, sq, i, last) : -EBUSY;
		if (last || ret < 0)
			got = bc_floor_reap(r, sq, wc);
		qps_alock_unlock(&sq->lock);
	}
	return bc_floor_result(ret, got, wc, BC_BATCH);
}

static const struct bc_case bc_cases[] = {
	{ "send_connected_b1", NULL, 1, bc_setup_connected, bc_send_b1, 1,
	  false },
	{ "send_connected_b32", NULL, 1, bc_setup_connected, bc_send_b32, 1,
	  false },
	{ "sendto_b1", NULL, 1, bc_setup_unconnected, bc_sendto_b1, 1, false },
	{ "sendmmsg_b32", NULL, 1, bc_setup_unconnected, bc_sendmmsg_b32, 1,
	  false },
	{ "sendmmsg_connected_b32", NULL, 1, bc_setup_connected_msgs,
	  bc_sendmmsg_b32, 1, false },
	{ "send_bands_2thr", NULL, 2, bc_setup_connected, bc_send_b1, 2,
	  false },
	{ "recv_unicast", "rx=unicast:port=9000", 1, NULL, bc_recv, 1, false },
	{ "recv_mcast_1", "rx=mcast:group=" BC_GROUP ":port=9000", 1,
	  bc_setup_join, bc_recv, 1, false },
	{ "recv_mcast_4", "rx=mcast:group=" BC_GROUP ":port=9000", 4,
	  bc_setup_join, bc_recv, 1, false },
	{ "device_floor_b1", NULL, 1, bc_setup_floor, bc_floor_b1, 1, false },
	{ "device_floor_b32", NULL, 1, bc_setup_floor, bc_floor_b32, 1,
	  false },
	{ "device_floor_b32_locks", NULL, 1, bc_setup_floor,
	  bc_floor_b32_locks, 1, false },
	{ "send_connected_b1_single", NULL, 1, bc_setup_connected, bc_send_b1,
	  1, true },
	{ "send_connected_b32_single", NULL, 1, bc_setup_connected,
	  bc_send_b32, 1, true },
	{ "sendto_b1_single", NULL, 1, bc_setup_unconnected, bc_sendto_b1, 1,
	  true },
	{ "sendmmsg_b32_single", NULL, 1, bc_setup_unconnected,
	  bc_sendmmsg_b32, 1, true },
	{ "device_floor_b32_locks_single", NULL, 1, bc_setup_floor,
	  bc_floor_b32_locks, 1, true },
	{ NULL, NULL, 0, NULL, NULL, 0, false },
};

/* What one thread did in one round. */
struct bc_round {
	uint64_t dgrams;
	uint64_t ns;
	uint64_t cpu_ns;	/* the thread's CPU time: no preemption */
	uint64_t cycles;
	int err;
};

/* Run @c's step for @ns on this thread. */
static void bc_loop(const struct bc_case *c, struct bc_run *r, uint64_t ns,
		    int cyc_fd, struct bc_round *out)
{
	uint64_t t0 = bc_now(), c0 = qps_bench_cycles_read(cyc_fd), t;
	uint64_t cpu0 = bc_clock(CLOCK_THREAD_CPUTIME_ID);
	unsigned int k;

	memset(out, 0, sizeof(*out));
	do {
		for (k = 0; k < BC_STEPS; k++) {
			int n = c->step(r);

			if (n < 0) {
				out->err = n;
				return;
			}
			out->dgrams += (uint64_t)n;
		}
		t = bc_now();
	} while (t - t0 < ns);
	out->ns = t - t0;
	out->cpu_ns = bc_clock(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	out->cycles = qps_bench_cycles_read(cyc_fd) - c0;
}

/* send_bands_2thr: each thread sends on its own endpoint, both on the
 * one send queue, at priorities in different bands. */
struct bc_thr {
	const struct bc_case *c;
	struct bc_run run;
	uint64_t ns;
	unsigned int rounds;
	struct bc_round round[BC_MAX_ROUNDS + 1];
	pthread_barrier_t *bar;
};

static void *bc_thr_main(void *arg)
{
	struct bc_thr *t = arg;
	int fd = qps_bench_cycles_open();
	unsigned int i;

	for (i = 0; i <= t->rounds; i++) {
		pthread_barrier_wait(t->bar);
		bc_loop(t->c, &t->run, t->ns, fd, &t->round[i]);
	}
	qps_bench_cycles_close(fd);
	return NULL;
}

static int bc_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct bc_result {
	double ns_best, ns_median, cycles;	/* cycles < 0: none */
	double cpu_best, cpu_median;
	uint64_t dgrams;
	uint64_t dgrams_all;	/* the warm-up round's too */
	bool csum_hw;		/* the context offloaded checksums */
	bool single;		/* the context ran QPS_THREAD_MODE_SINGLE */
	uint64_t biased;	/* its send queues leaning to one thread */
	uint64_t barriers;	/* its tx_lock_barriers */
};

/* Rounds 1..n of @rd (round 0 is the warm-up), per datagram. */
static void bc_summarise(const struct bc_round *rd, unsigned int n,
			 bool have_cycles, struct bc_result *res)
{
	uint64_t ps[BC_MAX_ROUNDS], cps[BC_MAX_ROUNDS];
	double best_cyc = -1;
	unsigned int i;

	memset(res, 0, sizeof(*res));
	for (i = 0; i <= n; i++)
		res->dgrams_all += rd[i].dgrams;
	for (i = 0; i < n; i++) {
		const struct bc_round *x = &rd[i + 1];

		/* Picoseconds per datagram, so the sort keeps precision. */
		ps[i] = x->dgrams ? x->ns * 1000 / x->dgrams : UINT64_MAX;
		cps[i] = x->dgrams ? x->cpu_ns * 1000 / x->dgrams : UINT64_MAX;
		res->dgrams += x->dgrams;
		if (x->dgrams && (best_cyc < 0 ||
				  (double)x->cycles / (double)x->dgrams <
				  best_cyc))
			best_cyc = (double)x->cycles / (double)x->dgrams;
	}
	qsort(ps, n, sizeof(ps[0]), bc_cmp_u64);
	res->ns_best = (double)ps[0] / 1000.0;
	res->ns_median = (double)ps[n / 2] / 1000.0;
	qsort(cps, n, sizeof(cps[0]), bc_cmp_u64);
	res->cpu_best = (double)cps[0] / 1000.0;
	res->cpu_median = (double)cps[n / 2] / 1000.0;
	res->cycles = have_cycles ? best_cyc : -1;
}

static int bc_run_threads(const struct bc_case *c, struct bc_run *r,
			  uint64_t ns, struct bc_result *res)
{
	struct bc_thr t[2];
	struct bc_round sum[BC_MAX_ROUNDS + 1];
	pthread_barrier_t bar;
	pthread_t th[2];
	unsigned int i, k, rounds = r->o->rounds;
	int fd = qps_bench_cycles_open();
	bool cyc = fd >= 0;
	int prio[2] = { 0, 6 };	/* bands 1 and 0 (prio2band) */

	qps_bench_cycles_close(fd);
	pthread_barrier_init(&bar, NULL, 2);
	for (i = 0; i < 2; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].c = c;
		t[i].run = *r;
		t[i].run.ep[0] = r->ep[i];
		t[i].run.neps = 1;
		t[i].ns = ns;
		t[i].rounds = rounds;
		t[i].bar = &bar;
		qps_setopt(r->ep[i], QPS_OPT_PRIORITY, &prio[i],
			   sizeof(prio[i]));
	}
	for (i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, bc_thr_main, &t[i]))
			return -EAGAIN;
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	/* Both threads' datagrams over the longer thread's time: the rate
	 * of the pair, as one core would see it. */
	for (k = 0; k <= rounds; k++) {
		memset(&sum[k], 0, sizeof(sum[k]));
		for (i = 0; i < 2; i++) {
			if (t[i].round[k].err)
				return t[i].round[k].err;
			sum[k].dgrams += t[i].round[k].dgrams;
			sum[k].cycles += t[i].round[k].cycles;
			sum[k].cpu_ns += t[i].round[k].cpu_ns;
			if (t[i].round[k].ns > sum[k].ns)
				sum[k].ns = t[i].round[k].ns;
		}
	}
	bc_summarise(sum, rounds, cyc, res);
	return 0;
}

static int bc_run_case(const struct bc_case *c, const struct bc_opts *o,
		       bool csum_sw, struct bc_result *res)
{
	struct bc_run r;
	struct bc_round rd[BC_MAX_ROUNDS + 1];
	struct qps_stats st;
	uint64_t ns = (uint64_t)o->ms * 1000000u / o->rounds;
	unsigned int i;
	int fd, ret;

	memset(&r, 0, sizeof(r));
	r.o = o;
	r.csum_sw = csum_sw;
	r.to.sin_family = AF_INET;
	r.to.sin_port = htons(9999);
	r.to.sin_addr.s_addr = inet_addr(BC_PEER);
	memset(r.buf, 0x5a, sizeof(r.buf));
	ret = bc_ctx(&r, c->dev, c->single);
	if (ret < 0)
		return ret;
	ret = bc_eps(&r, c->neps);
	if (ret == 0 && c->setup)
		ret = c->setup(&r);
	if (ret == 0 && c->threads == 2) {
		ret = bc_run_threads(c, &r, ns, res);
	} else if (ret == 0) {
		fd = qps_bench_cycles_open();
		for (i = 0; i <= o->rounds && ret == 0; i++) {
			bc_loop(c, &r, ns, fd, &rd[i]);
			ret = rd[i].err;
		}
		if (ret == 0)
			bc_summarise(rd, o->rounds, fd >= 0, res);
		qps_bench_cycles_close(fd);
	}
	memset(&st, 0, sizeof(st));
	if (ret == 0 && qps_ctx_stats(r.ctx, &st, sizeof(st)) < 0)
		ret = -EIO;
	res->csum_hw = st.csum_offload != 0;
	res->single = st.thread_single != 0;
	res->biased = st.tx_lock_biased;
	res->barriers = st.tx_lock_barriers;
	for (i = 0; i < r.neps; i++)
		qps_ep_close(r.ep[i]);
	qps_ctx_destroy(r.ctx);
	return ret;
}

static const char *bc_path_name(uint32_t p)
{
	return p == QPS_TX_PATH_GENERIC ? "generic" :
	       p == QPS_TX_PATH_DIRECT ? "direct" : "auto";
}

static void bc_print(const struct bc_opts *o, const char *name,
		     const struct bc_result *res, double load)
{
	char cyc[32];

	if (res->cycles >= 0)
		snprintf(cyc, sizeof(cyc), "%.1f", res->cycles);
	else
		snprintf(cyc, sizeof(cyc), "null");
	if (o->json) {
		printf("{\"bench\":\"core\",\"case\":\"%s\",\"provider\":"
		       "\"null\",\"tx_path\":\"%s\",\"csum\":\"%s\","
		       "\"thread_mode\":\"%s\",\"tx_lock_biased\":%llu,"
		       "\"tx_lock_barriers\":%llu,\"payload\":%d,"
		       "\"dgrams\":%llu,\"dgrams_all\":%llu,"
		       "\"ns_per_dgram\":%.1f,"
		       "\"ns_median\":%.1f,\"cpu_ns_per_dgram\":%.1f,"
		       "\"cpu_ns_median\":%.1f,\"cycles_per_dgram\":%s,"
		       "\"loadavg\":%.2f}\n", name, bc_path_name(o->path),
		       res->csum_hw ? "hw" : "sw",
		       res->single ? "single" : "multi",
		       (unsigned long long)res->biased,
		       (unsigned long long)res->barriers, BC_PAYLOAD,
		       (unsigned long long)res->dgrams,
		       (unsigned long long)res->dgrams_all, res->ns_best,
		       res->ns_median, res->cpu_best, res->cpu_median, cyc,
		       load);
		return;
	}
	printf("%-29s %4s %10.1f %10.1f %10.1f %10s %12llu\n", name,
	       res->csum_hw ? "hw" : "sw", res->ns_best, res->ns_median,
	       res->cpu_best, cyc, (unsigned long long)res->dgrams);
}

static int bc_usage(void)
{
	fprintf(stderr, "usage: qps_bench core [--json] [--ms M] "
		"[--rounds R] [--case NAME] [--path auto|generic|direct] "
		"[--csum hw|sw|both]\n");
	return 2;
}

static int bc_opts_parse(int argc, char **argv, struct bc_opts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->ms = 1500;
	o->rounds = 5;
	o->path = QPS_TX_PATH_AUTO;
	o->csum = BC_CSUM_HW | BC_CSUM_SW;
	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--json")) {
			o->json = 1;
			continue;
		}
		if (!v)
			return -1;
		if (!strcmp(argv[i], "--ms"))
			o->ms = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(argv[i], "--rounds"))
			o->rounds = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(argv[i], "--case"))
			o->only = v;
		else if (!strcmp(argv[i], "--path") && !strcmp(v, "generic"))
			o->path = QPS_TX_PATH_GENERIC;
		else if (!strcmp(argv[i], "--path") && !strcmp(v, "direct"))
			o->path = QPS_TX_PATH_DIRECT;
		else if (!strcmp(argv[i], "--path") && !strcmp(v, "auto"))
			o->path = QPS_TX_PATH_AUTO;
		else if (!strcmp(argv[i], "--csum") && !strcmp(v, "hw"))
			o->csum = BC_CSUM_HW;
		else if (!strcmp(argv[i], "--csum") && !strcmp(v, "sw"))
			o->csum = BC_CSUM_SW;
		else if (!strcmp(argv[i], "--csum") && !strcmp(v, "both"))
			o->csum = BC_CSUM_HW | BC_CSUM_SW;
		else
			return -1;
		i++;
	}
	if (!o->ms || !o->rounds || o->rounds > BC_MAX_ROUNDS)
		return -1;
	return 0;
}

int qps_bench_core(int argc, char **argv)
{
	struct bc_opts o;
	struct bc_result res;
	unsigned int i, ran = 0;
	double load[1];
	int ret;

	if (bc_opts_parse(argc, argv, &o))
		return bc_usage();
	if (!o.json)
		printf("%-29s %4s %10s %10s %10s %10s %12s\n", "case", "csum",
		       "ns/dgram", "median", "cpu ns", "cyc/dgram",
		       "datagrams");
	for (i = 0; bc_cases[i].name; i++) {
		const struct bc_case *c = &bc_cases[i];
		unsigned int m;

		if (o.only && strcmp(o.only, c->name) != 0)
			continue;
		for (m = BC_CSUM_HW; m <= BC_CSUM_SW; m <<= 1) {
			if (!(o.csum & m))
				continue;
			ret = bc_run_case(c, &o, m == BC_CSUM_SW, &res);
			if (ret == -ENOENT) {
				fprintf(stderr, "qps_bench core: no null "
					"provider in this build "
					"(QPS_WITH_NULL)\n");
				return 77;
			}
			if (ret < 0) {
				fprintf(stderr, "qps_bench core: %s: %s\n",
					c->name, strerror(-ret));
				return 1;
			}
			if (getloadavg(load, 1) != 1)
				load[0] = -1;
			bc_print(&o, c->name, &res, load[0]);
			fflush(stdout);
		}
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "qps_bench core: no case '%s'\n", o.only);
		return 2;
	}
	return 0;
}
