// SPDX-License-Identifier: MIT
/*
 * qps_soak: one worker process. It opens its contexts and endpoints on the
 * shared emu wire, waits for the parent's GO (every port attached, so
 * connect resolves), runs its threads until the deadline, flushes, reports
 * SENT, and after the parent's DRAIN (every process has flushed, so every
 * frame is on the wire: the emu engine places frames when the doorbell
 * rings) drains its endpoints and writes its results to the parent.
 *
 * Even threads use non-blocking endpoints, odd threads blocking ones.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qps_int.h"
#include "qps_soak.h"

#define SOAK_BATCH 32
#define SOAK_RX_BUDGET 64
#define SOAK_RX_BUF 2048
#define SOAK_SNDTIMEO_MS 5000

struct soak_w;

struct soak_thr {
	struct soak_w *w;
	unsigned int t;
	pthread_t tid;
	bool blocking;
	uint64_t rng;
	uint64_t attempted;	/* datagrams offered to send calls: pacing */
	unsigned int nf[SOAK_EP_KINDS], nd[SOAK_EP_KINDS];
	uint16_t flows[SOAK_EP_KINDS][SOAK_MAX_FLOWS / 4];
	uint16_t dflt[SOAK_EP_KINDS][SOAK_MAX_FLOWS / 4];
	uint16_t pending[SOAK_MAX_FLOWS];	/* seqs taken in this batch */
	uint64_t eagain, timeouts, send_errors, recv_errors;
	uint64_t mmsg_calls, more_runs, single_sends, blocking_recvs;
	unsigned int rx_turn;
	uint8_t txbuf[SOAK_BATCH][sizeof(struct soak_hdr) + SOAK_MAX_LEN];
	uint8_t rxbuf[SOAK_RX_BUF];
};

struct soak_w {
	const struct soak_cfg *cfg;
	const struct soak_topo *topo;
	unsigned int p;
	unsigned int nctx;
	struct qps_ctx *ctx[SOAK_MAX_CTX];
	struct qps_ep *ep[SOAK_MAX_RXEP];
	unsigned int ep_owner[SOAK_MAX_RXEP];
	struct soak_rx *rx;		/* [nrxep][nflows] */
	struct soak_wres *res;
	struct soak_thr *thr;
	uint64_t deadline_ns;
	atomic_uint done_send;
	atomic_int drain;
	pthread_mutex_t fail_lock;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(unsigned int us)
{
	struct timespec ts = { .tv_sec = us / 1000000u,
			       .tv_nsec = (long)(us % 1000000u) * 1000 };

	nanosleep(&ts, NULL);
}

/* Resident kB, and in *@anon the part not shared (statm: size resident
 * shared ...). */
static uint64_t rss_kb(uint64_t *anon)
{
	unsigned long size, res = 0, shared = 0;
	uint64_t kb_per_page = (uint64_t)sysconf(_SC_PAGESIZE) / 1024u;
	FILE *f = fopen("/proc/self/statm", "r");

	*anon = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu %lu", &size, &res, &shared) != 3)
		res = shared = 0;
	fclose(f);
	*anon = (uint64_t)(res - shared) * kb_per_page;
	return (uint64_t)res * kb_per_page;
}

static struct soak_rx *rx_of(struct soak_w *w, unsigned int e, unsigned int f)
{
	return &w->rx[(size_t)e * w->topo->nflows + f];
}

/* Record the first failure of the process (any thread). */
static void fail(struct soak_w *w, int ret, const char *what)
{
	pthread_mutex_lock(&w->fail_lock);
	if (!w->res->status) {
		w->res->status = ret < 0 ? ret : -EIO;
		snprintf(w->res->why, sizeof(w->res->why), "%s: %s", what,
			 strerror(ret < 0 ? -ret : EIO));
	}
	pthread_mutex_unlock(&w->fail_lock);
}

static int failed(struct soak_w *w, int ret, const char *what)
{
	fail(w, ret, what);
	return ret;
}

/* --- sending -------------------------------------------------------- */

static struct qps_ep *src_ep(struct soak_w *w, unsigned int t,
			     unsigned int kind)
{
	return w->ep[soak_rxep_thread(t, kind)];
}

/* A send call's outcome for datagrams it did not accept. */
static void send_refused(struct soak_thr *th, ssize_t ret)
{
	if (ret == -EAGAIN || ret == -ETIMEDOUT) {
		if (th->blocking)
			th->timeouts++;
		else
			th->eagain++;
		return;
	}
	th->send_errors++;
	fail(th->w, (int)ret, "send");
}

static unsigned int pick(struct soak_thr *th, unsigned int n)
{
	return (unsigned int)(soak_rand(&th->rng) % n);
}

static ssize_t send_one(struct soak_thr *th, unsigned int kind, uint32_t f,
			int flags)
{
	struct soak_w *w = th->w;
	const struct soak_flow *fl = &w->topo->flow[f];
	struct qps_ep *ep = src_ep(w, th->t, kind);
	size_t len = soak_build(w->cfg, th->txbuf[0], f, w->res->sent[f]);
	ssize_t r;

	if (kind == SOAK_EP_UN)
		r = qps_sendto(ep, th->txbuf[0], len, flags,
			       (const struct sockaddr *)&fl->dst,
			       sizeof(fl->dst));
	else
		r = qps_send(ep, th->txbuf[0], len, flags);
	if (r == (ssize_t)len) {
		w->res->sent[f]++;
		return 1;
	}
	if (r >= 0) {
		fail(w, -EPROTO, "short send");
		return -EPROTO;
	}
	send_refused(th, r);
	return r;
}

/* The self-test fault, on a connected flow of thread 0 of process 0. */
static void inject(struct soak_thr *th)
{
	struct soak_w *w = th->w;
	uint32_t f = th->dflt[SOAK_EP_CN][0];
	struct qps_ep *ep = src_ep(w, th->t, SOAK_EP_CN);
	uint64_t seq = w->res->sent[f];
	size_t len;

	switch (w->cfg->inject) {
	case SOAK_INJ_LOSS:
		w->res->sent[f]++;
		return;
	case SOAK_INJ_DUP:
		len = soak_build(w->cfg, th->txbuf[0], f, seq);
		if (qps_send(ep, th->txbuf[0], len, 0) == (ssize_t)len &&
		    qps_send(ep, th->txbuf[0], len, 0) == (ssize_t)len)
			w->res->sent[f]++;
		return;
	case SOAK_INJ_REORDER:
		len = soak_build(w->cfg, th->txbuf[1], f, seq + 1);
		if (qps_send(ep, th->txbuf[1], len, 0) != (ssize_t)len)
			return;
		len = soak_build(w->cfg, th->txbuf[0], f, seq);
		if (qps_send(ep, th->txbuf[0], len, 0) == (ssize_t)len)
			w->res->sent[f] += 2;
		return;
	case SOAK_INJ_CORRUPT:
		len = soak_build(w->cfg, th->txbuf[0], f, seq);
		th->txbuf[0][len - 1] ^= 0x5a;
		if (qps_send(ep, th->txbuf[0], len, 0) == (ssize_t)len)
			w->res->sent[f]++;
		return;
	}
}

/* A run of sends with QPS_MSG_MORE on all but the last. If one is
 * refused, the earlier ones still wait for their doorbell: the library
 * must ring it (timer, progress) without loss. */
static unsigned int send_more_run(struct soak_thr *th, unsigned int kind,
				  unsigned int n)
{
	unsigned int i;

	th->more_runs++;
	for (i = 0; i < n; i++) {
		uint32_t f = th->dflt[kind][pick(th, th->nd[kind])];

		if (send_one(th, kind, f, i + 1 < n ? QPS_MSG_MORE : 0) < 0)
			break;
	}
	return i;
}

static unsigned int send_mmsg(struct soak_thr *th, unsigned int kind,
			      unsigned int n)
{
	struct soak_w *w = th->w;
	struct qps_msg msg[SOAK_BATCH];
	uint16_t fid[SOAK_BATCH];
	unsigned int i;
	int r;

	th->mmsg_calls++;
	for (i = 0; i < n; i++) {
		uint32_t f = th->flows[kind][pick(th, th->nf[kind])];
		const struct soak_flow *fl = &w->topo->flow[f];

		fid[i] = (uint16_t)f;
		msg[i].buf = th->txbuf[i];
		msg[i].len = soak_build(w->cfg, th->txbuf[i], f,
					w->res->sent[f] + th->pending[f]++);
		msg[i].dest = kind == SOAK_EP_UN ?
			      (const struct sockaddr *)&fl->dst : NULL;
		msg[i].dest_len = kind == SOAK_EP_UN ? sizeof(fl->dst) : 0;
		/* The default priority both ways: -1 and explicitly. */
		msg[i].priority = fl->dflt && (i & 1) ? -1 : fl->prio;
		msg[i].result = 0;
	}
	r = qps_sendmmsg(src_ep(w, th->t, kind), msg, n, 0);
	for (i = 0; i < n; i++)
		th->pending[fid[i]] = 0;
	if (r < 0) {
		send_refused(th, r);
		return 0;
	}
	/* The accepted prefix consumed its sequence numbers, in order. */
	for (i = 0; i < (unsigned int)r; i++) {
		if (msg[i].result != (ssize_t)msg[i].len) {
			fail(w, -EPROTO, "sendmmsg result");
			return i;
		}
		w->res->sent[fid[i]]++;
	}
	if ((unsigned int)r < n)
		send_refused(th, msg[r].result);
	return (unsigned int)r;
}

/* One send call of a random kind: single, a MORE run or sendmmsg. */
static unsigned int send_some(struct soak_thr *th, unsigned int n)
{
	unsigned int kind = pick(th, SOAK_EP_KINDS);

	switch (pick(th, 3)) {
	case 0:
		th->single_sends++;
		return send_one(th, kind,
				th->dflt[kind][pick(th, th->nd[kind])], 0) > 0;
	case 1:
		return send_more_run(th, kind, n);
	default:
		return send_mmsg(th, kind, n);
	}
}

/* --- receiving ------------------------------------------------------ */

static void note(struct soak_w *w, unsigned int e, const uint8_t *buf,
		 size_t len)
{
	uint64_t seq;
	int f = soak_check(buf, len, &seq);

	if (f < 0) {
		w->res->corrupt[e]++;
		return;
	}
	if ((unsigned int)f >= w->topo->nflows ||
	    !soak_expects(w->cfg, w->topo, (unsigned int)f, w->p, e)) {
		w->res->alien[e]++;
		return;
	}
	soak_rx_note(rx_of(w, e, (unsigned int)f), seq);
}

/* Up to @budget datagrams from endpoint @e; @flags 0 on a blocking
 * endpoint waits up to its RCVTIMEO. Returns the number received. */
static unsigned int recv_ep(struct soak_w *w, uint8_t *buf, unsigned int e,
			    int flags, unsigned int budget, uint64_t *errs)
{
	unsigned int n = 0;

	while (n < budget) {
		ssize_t r = qps_recv(w->ep[e], buf, SOAK_RX_BUF, flags);

		if (r == -EAGAIN || r == -ETIMEDOUT)
			break;
		if (r < 0) {
			(*errs)++;
			fail(w, (int)r, "recv");
			break;
		}
		note(w, e, buf, (size_t)r);
		n++;
		flags = QPS_MSG_DONTWAIT;
	}
	return n;
}

/* One pass over the thread's endpoints; on blocking endpoints one of them
 * (in turn) gets a blocking call. */
static unsigned int recv_round(struct soak_thr *th)
{
	struct soak_w *w = th->w;
	unsigned int e, n = 0, k = 0;

	for (e = 0; e < w->topo->nrxep; e++) {
		int flags = QPS_MSG_DONTWAIT;

		if (w->ep_owner[e] != th->t)
			continue;
		if (th->blocking && k++ == th->rx_turn) {
			flags = 0;
			th->blocking_recvs++;
		}
		n += recv_ep(w, th->rxbuf, e, flags, SOAK_RX_BUDGET,
			     &th->recv_errors);
	}
	th->rx_turn = (th->rx_turn + 1) % (k ? k : 1);
	return n;
}

static void *soak_thread(void *arg)
{
	struct soak_thr *th = arg;
	struct soak_w *w = th->w;
	const struct soak_cfg *cfg = w->cfg;
	uint64_t start = now_ns();
	bool sending = true, injected = !cfg->inject || w->p || th->t;

	while (!atomic_load_explicit(&w->drain, memory_order_acquire)) {
		unsigned int sent = 0, got;
		uint64_t now = now_ns();

		if (sending && now >= w->deadline_ns) {
			sending = false;
			/* Release: pairs with the main thread's acquire
			 * load; our sends are done before it flushes. */
			atomic_fetch_add_explicit(&w->done_send, 1,
						  memory_order_release);
		}
		if (sending) {
			unsigned int n = 1 + pick(th, SOAK_BATCH);
			uint64_t allowed = cfg->rate ?
				(now - start) / 1000u * cfg->rate / 1000000u :
				UINT64_MAX;

			if (!injected && now - start > 1000000000u) {
				inject(th);
				injected = true;
			}
			if (th->attempted + n <= allowed) {
				th->attempted += n;
				sent = send_some(th, n);
			}
		}
		got = recv_round(th);
		if (!sent && !got)
			sleep_us(50);
	}
	return NULL;
}

/* --- setup ---------------------------------------------------------- */

static int ctx_open(struct soak_w *w, unsigned int c)
{
	const struct soak_cfg *cfg = w->cfg;
	struct qps_ctx_attr a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
		      QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_RX_DEPTH;
	a.provider = "emu";
	a.dev = cfg->wire;
	a.addr = soak_ctx_addr(w->p, c);
	a.rx_depth = cfg->rx_depth;
	if (c) {
		/* Receive-only contexts: one small send queue. */
		a.comp_mask |= QPS_CTX_ATTR_NUM_TXQ | QPS_CTX_ATTR_TX_DEPTH;
		a.num_txq = 1;
		a.tx_depth = 64;
	}
	return qps_ctx_create(&a, &w->ctx[c]);
}

static int setopt_int(struct qps_ep *ep, int opt, int v)
{
	return qps_setopt(ep, opt, &v, sizeof(v));
}

static int ep_open(struct soak_w *w, unsigned int e, unsigned int c,
		   struct in_addr addr, unsigned int port, unsigned int owner)
{
	struct sockaddr_in sin;
	bool blocking = owner % 2;
	struct qps_ep *ep;
	int r;

	r = qps_ep_create(w->ctx[c], QPS_EP_DGRAM, &ep);
	if (r < 0)
		return r;
	w->ep[e] = ep;
	w->ep_owner[e] = owner;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr = addr;
	sin.sin_port = htons((uint16_t)port);
	if (c && (r = setopt_int(ep, QPS_OPT_REUSEADDR, 1)) < 0)
		return r;
	if ((r = qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin))) < 0 ||
	    (r = setopt_int(ep, QPS_OPT_NONBLOCK, !blocking)) < 0 ||
	    (r = setopt_int(ep, QPS_OPT_RCVBUF, (int)w->cfg->rcvbuf)) < 0)
		return r;
	if (blocking &&
	    ((r = setopt_int(ep, QPS_OPT_RCVTIMEO, 1)) < 0 ||
	     (r = setopt_int(ep, QPS_OPT_SNDTIMEO, SOAK_SNDTIMEO_MS)) < 0))
		return r;
	return 0;
}

/* The thread's flow lists and its endpoints' default priorities. */
static int thread_flows(struct soak_w *w, struct soak_thr *th)
{
	const struct soak_topo *topo = w->topo;
	unsigned int f;
	int r;

	for (f = 0; f < topo->nflows; f++) {
		const struct soak_flow *fl = &topo->flow[f];
		unsigned int k = fl->src_kind;

		if (fl->src_p != w->p || fl->src_t != th->t)
			continue;
		th->flows[k][th->nf[k]++] = (uint16_t)f;
		if (!fl->dflt)
			continue;
		th->dflt[k][th->nd[k]++] = (uint16_t)f;
		r = setopt_int(src_ep(w, th->t, k), QPS_OPT_PRIORITY, fl->prio);
		if (r < 0)
			return r;
	}
	return 0;
}

static int setup(struct soak_w *w)
{
	const struct soak_cfg *cfg = w->cfg;
	unsigned int c, t, g, j;
	int r;

	w->nctx = 1 + cfg->groups;
	for (c = 0; c < w->nctx; c++)
		if ((r = ctx_open(w, c)) < 0)
			return failed(w, r, "qps_ctx_create");
	for (t = 0; t < cfg->threads; t++) {
		struct in_addr a = soak_ctx_addr(w->p, 0);

		if ((r = ep_open(w, soak_rxep_thread(t, SOAK_EP_CN), 0, a,
				 SOAK_PORT_C + 2 * t, t)) < 0 ||
		    (r = ep_open(w, soak_rxep_thread(t, SOAK_EP_CP), 0, a,
				 SOAK_PORT_C + 2 * t + 1, t)) < 0 ||
		    (r = ep_open(w, soak_rxep_thread(t, SOAK_EP_UN), 0, a,
				 SOAK_PORT_U + t, t)) < 0)
			return failed(w, r, "endpoint");
	}
	for (g = 0; g < cfg->groups; g++) {
		struct qps_mreq mr;

		memset(&mr, 0, sizeof(mr));
		mr.group = soak_group(g);
		for (j = 0; j < soak_group_k(cfg, g); j++) {
			unsigned int e = soak_rxep_group(cfg, g, j);
			struct in_addr any = { .s_addr = INADDR_ANY };

			r = ep_open(w, e, 1 + g, any, SOAK_PORT_MC,
				    (g + j) % cfg->threads);
			if (r < 0)
				return failed(w, r, "group endpoint");
			r = qps_join(w->ep[e], &mr, sizeof(mr));
			if (r < 0)
				return failed(w, r, "qps_join");
		}
	}
	return 0;
}

static int connect_all(struct soak_w *w)
{
	const struct soak_topo *topo = w->topo;
	unsigned int f;
	int r;

	for (f = 0; f < topo->nflows; f++) {
		const struct soak_flow *fl = &topo->flow[f];

		if (fl->src_p != w->p || fl->src_kind == SOAK_EP_UN ||
		    !fl->dflt)
			continue;
		r = qps_connect(src_ep(w, fl->src_t, fl->src_kind),
				(const struct sockaddr *)&fl->dst,
				sizeof(fl->dst));
		if (r < 0)
			return failed(w, r, "qps_connect");
	}
	return 0;
}

/* After every process flushed: take in what is still on the wire or in
 * endpoint queues until several passes find nothing. */
static void drain(struct soak_w *w, uint8_t *buf)
{
	unsigned int idle = 0, e, c;
	uint64_t errs = 0;

	while (idle < 5) {
		int busy = 0;

		for (c = 0; c < w->nctx; c++) {
			int r = qps_ctx_progress(w->ctx[c]);

			if (r > 0)
				busy += r;
		}
		for (e = 0; e < w->topo->nrxep; e++)
			busy += (int)recv_ep(w, buf, e, QPS_MSG_DONTWAIT,
					     UINT32_MAX, &errs);
		idle = busy ? 0 : idle + 1;
		if (!busy)
			sleep_us(2000);
	}
	w->res->recv_errors += errs;
}

static void collect(struct soak_w *w)
{
	struct soak_wres *res = w->res;
	unsigned int c, e, f, t;

	for (t = 0; t < w->cfg->threads; t++) {
		struct soak_thr *th = &w->thr[t];

		res->eagain += th->eagain;
		res->timeouts += th->timeouts;
		res->send_errors += th->send_errors;
		res->recv_errors += th->recv_errors;
		res->mmsg_calls += th->mmsg_calls;
		res->more_runs += th->more_runs;
		res->single_sends += th->single_sends;
		res->blocking_recvs += th->blocking_recvs;
	}
	for (e = 0; e < w->topo->nrxep; e++)
		for (f = 0; f < w->topo->nflows; f++) {
			struct soak_rx *rx = rx_of(w, e, f);

			res->rx[e][f].recv = rx->recv;
			res->rx[e][f].dup = rx->dup;
			res->rx[e][f].late = rx->late;
			res->rx[e][f].old = rx->old;
		}
	res->nctx = w->nctx;
	for (c = 0; c < w->nctx; c++) {
		struct soak_ctx_res *cr = &res->ctx[c];
		struct qps_dev_counters dc;
		struct qps_ctx *ctx = w->ctx[c];

		qps_ctx_stats(ctx, &cr->st, sizeof(cr->st));
		memset(&dc, 0, sizeof(dc));
		/* The reasons behind dev_rx_drops; not in struct qps_stats. */
		if (ctx->ops->counters(ctx->dev, &dc) == 0) {
			cr->dev_rx_no_rule = dc.rx_no_rule;
			cr->dev_rx_no_buf = dc.rx_no_buf;
			cr->dev_rx_cq_overrun = dc.rx_cq_overrun;
		}
		cr->k = c ? soak_group_k(w->cfg, c - 1) : 1;
	}
}

/* Sample RSS every second until every thread has stopped sending. */
static void sample_rss(struct soak_w *w, uint64_t start)
{
	const struct soak_cfg *cfg = w->cfg;
	struct soak_wres *res = w->res;
	uint64_t warm = start + (uint64_t)cfg->warmup * 1000000000u;
	uint64_t quarter = (w->deadline_ns - warm) / 4 + 1;

	/* Acquire: pairs with each thread's release increment. */
	while (atomic_load_explicit(&w->done_send, memory_order_acquire) <
	       cfg->threads) {
		uint64_t anon, kb = rss_kb(&anon), now = now_ns();

		res->rss_samples++;
		if (now >= warm) {
			uint64_t q = (now - warm) / quarter;

			if (!res->rss_base_kb) {
				res->rss_base_kb = kb;
				res->anon_base_kb = anon;
			}
			if (kb > res->rss_max_kb)
				res->rss_max_kb = kb;
			if (anon > res->anon_max_kb)
				res->anon_max_kb = anon;
			res->rss_quarter_kb[q < 4 ? q : 3] = kb;
		}
		sleep_us(200000);
	}
}

/* The parent's next command; 0 when it is gone. */
static char wait_cmd(int fd)
{
	char c = 0;

	if (soak_read_all(fd, &c, 1) < 0)
		return 0;
	return c;
}

static int report(struct soak_w *w, int fd, char msg)
{
	if (soak_write_all(fd, &msg, 1) < 0 ||
	    (msg == SOAK_MSG_RESULT &&
	     soak_write_all(fd, w->res, sizeof(*w->res)) < 0))
		return -EPIPE;
	return 0;
}

/* Stop the @started threads, close the contexts (so the ports, and with
 * the last one the wire, are released even when the parent is gone) and
 * exit with @code. */
static _Noreturn void quit(struct soak_w *w, unsigned int started,
			    int code)
{
	unsigned int t, c;

	/* Release: pairs with the threads' acquire load of drain. */
	atomic_store_explicit(&w->drain, 1, memory_order_release);
	for (t = 0; t < started; t++)
		pthread_join(w->thr[t].tid, NULL);
	for (c = 0; c < SOAK_MAX_CTX; c++)
		if (w->ctx[c])
			qps_ctx_destroy(w->ctx[c]);
	_exit(code);
}

void soak_worker(const struct soak_cfg *cfg, const struct soak_topo *topo,
		 unsigned int p, int cmd_fd, int res_fd)
{
	struct soak_w w;
	unsigned int t, c, started = 0;
	uint64_t start, anon_end;
	uint8_t *buf;

	memset(&w, 0, sizeof(w));
	w.cfg = cfg;
	w.topo = topo;
	w.p = p;
	pthread_mutex_init(&w.fail_lock, NULL);
	w.res = calloc(1, sizeof(*w.res));
	w.rx = calloc((size_t)topo->nrxep * topo->nflows, sizeof(*w.rx));
	w.thr = calloc(cfg->threads, sizeof(*w.thr));
	buf = malloc(SOAK_RX_BUF);
	if (!w.res || !w.rx || !w.thr || !buf)
		_exit(2);
	w.res->p = (int32_t)p;
	if (setup(&w) < 0) {
		report(&w, res_fd, SOAK_MSG_RESULT);
		quit(&w, 0, 1);
	}
	for (t = 0; t < cfg->threads; t++) {
		w.thr[t].w = &w;
		w.thr[t].t = t;
		w.thr[t].blocking = t % 2;
		w.thr[t].rng = cfg->seed ^ (p * 1000003ull + t + 1);
		if (thread_flows(&w, &w.thr[t]) < 0) {
			fail(&w, -EINVAL, "QPS_OPT_PRIORITY");
			report(&w, res_fd, SOAK_MSG_RESULT);
			quit(&w, 0, 1);
		}
	}
	if (report(&w, res_fd, SOAK_MSG_READY) < 0)
		quit(&w, 0, 3);
	c = (unsigned char)wait_cmd(cmd_fd);
	if (c != SOAK_CMD_GO || connect_all(&w) < 0) {
		report(&w, res_fd, SOAK_MSG_RESULT);
		quit(&w, 0, c ? 1 : 3);
	}
	start = now_ns();
	w.deadline_ns = start + (uint64_t)cfg->seconds * 1000000000u;
	for (t = 0; t < cfg->threads; t++) {
		if (pthread_create(&w.thr[t].tid, NULL, soak_thread,
				   &w.thr[t]) != 0) {
			fail(&w, -EAGAIN, "pthread_create");
			break;
		}
		started++;
	}
	if (started < cfg->threads)
		atomic_fetch_add(&w.done_send, cfg->threads - started);
	sample_rss(&w, start);
	for (c = 0; c < w.nctx; c++)
		qps_ctx_flush(w.ctx[c]);
	if (report(&w, res_fd, SOAK_MSG_SENT) < 0 ||
	    wait_cmd(cmd_fd) != SOAK_CMD_DRAIN)
		quit(&w, started, 3);	/* the parent is gone */
	/* Release: pairs with the threads' acquire load of drain. */
	atomic_store_explicit(&w.drain, 1, memory_order_release);
	for (t = 0; t < started; t++)
		pthread_join(w.thr[t].tid, NULL);
	drain(&w, buf);
	w.res->rss_end_kb = rss_kb(&anon_end);
	collect(&w);
	report(&w, res_fd, SOAK_MSG_RESULT);
	quit(&w, 0, w.res->status ? 1 : 0);
}
