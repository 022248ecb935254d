// SPDX-License-Identifier: MIT
/*
 * qps_send_bw - ib_send_bw for qpsock datagram endpoints.
 *
 *   qps_send_bw [options]          server: receives and counts
 *   qps_send_bw [options] <host>   client: sends, prints perftest's BW table
 *
 * The client sends -n messages per QP (or for -D seconds) as fast as the
 * send queue takes them: -l N passes QPS_MSG_MORE on N-1 of every N sends
 * so a burst costs one doorbell, -Q N reaps completions (and samples the
 * completion time for the peak) once per N messages and is each
 * context's tx_signal (a CQE every N WQEs and for the last WQE of each
 * doorbell), --threads sending threads share the QPs. -c UD runs the
 * same on UD QPs (perf_qps.c). Datagrams are unreliable and nothing here adds
 * flow control, so the server counts what arrived; after the run the
 * client learns that count over the TCP connection and both sides print
 * sent / received / lost next to the table. The server's own row is its
 * delivered rate: received - 1 messages between the first and the last
 * arrival (perftest's server prints no peak either).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "perf_session.h"

#define BW_DRAIN_NS 200000000ull	/* quiet time before the server stops */
#define BW_OOB_CHECK 1024		/* idle polls between TCP checks */

struct bw_thread {
	struct perf_session *s;
	pthread_t tid;
	const int *go;			/* 0 wait, 1 run, -1 abort */
	uint32_t size;
	const uint8_t *buf;
	unsigned int nq;
	unsigned int qidx[PERF_MAX_QPS];
	uint64_t batches[PERF_MAX_QPS];	/* post-list bursts left per QP */
	uint64_t *tposted;		/* peak only: one per message */
	uint64_t *tcompleted;
	uint64_t t_stop, t_ws, t_we;	/* duration: stop, sample window */

	uint64_t sent[PERF_MAX_QPS];
	uint64_t total;
	uint64_t t_first, t_last;
	uint64_t ws_cnt, we_cnt, ws_t, we_t;
	bool ws_seen, we_seen;
	int err;
	const char *what;
};

/* Which QPs and how many bursts each thread owns; threads >= QPs share. */
static void bw_assign(struct bw_thread *th, unsigned int nthr,
		      unsigned int nqp, uint64_t bursts)
{
	unsigned int t, i, k, r;

	for (t = 0; t < nthr; t++) {
		th[t].nq = 0;
		if (nthr >= nqp) {
			i = t % nqp;
			k = nthr / nqp + (i < nthr % nqp);
			r = t / nqp;
			th[t].qidx[0] = i;
			th[t].batches[0] = bursts / k + (r < bursts % k);
			th[t].nq = 1;
			continue;
		}
		for (i = t; i < nqp; i += nthr) {
			th[t].qidx[th[t].nq] = i;
			th[t].batches[th[t].nq++] = bursts;
		}
	}
}

static void bw_window(struct bw_thread *th, uint64_t now)
{
	if (!th->ws_seen && now >= th->t_ws) {
		th->ws_seen = true;
		th->ws_cnt = th->total;
		th->ws_t = now;
	}
	if (!th->we_seen && now >= th->t_we) {
		th->we_seen = true;
		th->we_cnt = th->total;
		th->we_t = now;
	}
}

static void *bw_sender(void *arg)
{
	struct bw_thread *th = arg;
	const struct perf_opts *o = &th->s->o;
	unsigned int l = o->post_list, q = 0, m, left = th->nq;
	uint64_t before, now = 0, j;
	struct perf_qp *qp;
	ssize_t r;
	int ret;

	/* Acquire pairs with the release store of *go in bw_client_size():
	 * t_stop and the window bounds written before it are visible. */
	while (!__atomic_load_n(th->go, __ATOMIC_ACQUIRE))
		sched_yield();
	if (__atomic_load_n(th->go, __ATOMIC_ACQUIRE) < 0)
		return NULL;
	th->t_first = perf_now_ns();
	while (left) {
		while (!th->batches[q])
			q = (q + 1) % th->nq;
		qp = &th->s->qp[th->qidx[q]];
		if (o->duration || th->tposted) {
			now = perf_now_ns();
			if (o->duration) {
				if (now >= th->t_stop)
					break;
				bw_window(th, now);
			}
		}
		if (th->tposted)
			th->tposted[th->total] = now;
		for (m = 0; m < l; m++) {
			r = perf_qp_send(qp, th->buf, th->size,
				     m + 1 < l ? QPS_MSG_MORE : 0);
			if (r < 0) {
				th->err = (int)r;
				th->what = "qps_send";
				goto out;
			}
		}
		before = th->total;
		th->total += l;
		th->sent[th->qidx[q]] += l;
		if (!--th->batches[q])
			left--;
		/* One completion check per -Q messages, as perftest
		 * signals one WR in cq_mod. */
		if (th->total / o->cq_mod != before / o->cq_mod) {
			ret = qps_ctx_progress(qp->ctx);
			if (ret < 0) {
				th->err = ret;
				th->what = "qps_ctx_progress";
				goto out;
			}
			if (th->tcompleted) {
				now = perf_now_ns();
				for (j = before; j < th->total; j++)
					if ((j + 1) % o->cq_mod == 0)
						th->tcompleted[j] = now;
			}
		}
		q = (q + 1) % th->nq;
	}
out:
	for (m = 0; m < th->nq; m++) {
		ret = qps_ctx_progress(th->s->qp[th->qidx[m]].ctx);
		if (ret < 0 && !th->err) {
			th->err = ret;
			th->what = "qps_ctx_progress";
		}
	}
	th->t_last = perf_now_ns();
	if (th->tcompleted && th->total)
		th->tcompleted[th->total - 1] = th->t_last;
	return NULL;
}

static void bw_print_counts(const struct perf_session *s, uint64_t sent,
			    uint64_t received, uint64_t bad,
			    const struct perf_counters *c)
{
	uint64_t lost = sent > received ? sent - received : 0;

	printf("   sent %llu, received %llu, lost %llu (%.2f%%), wrong size %llu;"
	       " %s wqes %llu, doorbells %llu, bf_writes %llu, drops %llu,"
	       " tx_signaled %llu (%.4f per WQE), tx_reaped %llu\n",
	       (unsigned long long)sent, (unsigned long long)received,
	       (unsigned long long)lost,
	       sent ? 100.0 * (double)lost / (double)sent : 0.0,
	       (unsigned long long)bad, s->o.server ? "client" : "server",
	       (unsigned long long)c->wqes, (unsigned long long)c->doorbells,
	       (unsigned long long)c->bf_writes,
	       (unsigned long long)perf_counters_drops(c),
	       (unsigned long long)c->tx_signaled, perf_counters_signaled(c),
	       (unsigned long long)c->tx_reaped);
}

static int bw_json(const struct perf_session *s,
		   const struct perf_bw_result *r, uint64_t sent,
		   uint64_t received, uint64_t bad, double delivered,
		   const struct perf_counters *c)
{
	char buf[2048];
	struct perf_json j;

	perf_session_json_head(s, &j, buf, sizeof(buf));
	perf_json_u64(&j, "bytes", r->size);
	perf_json_u64(&j, "iterations", r->iters);
	perf_json_str(&j, "units", s->o.report_gbits ? "Gb/sec" : "MB/sec");
	perf_json_dbl(&j, "bw_peak", r->bw_peak);
	perf_json_dbl(&j, "bw_average", r->bw_avg);
	perf_json_dbl(&j, "msg_rate_mpps", r->msg_rate);
	perf_json_dbl(&j, "delivered_mpps", delivered);
	perf_json_u64(&j, "sent", sent);
	perf_json_u64(&j, "received", received);
	perf_json_u64(&j, "lost", sent > received ? sent - received : 0);
	perf_json_u64(&j, "wrong_size", bad);
	perf_json_counters(&j, c);
	return perf_session_json_print(&j);
}

static double bw_delivered(uint64_t received, uint64_t span_ns)
{
	if (received < 2 || !span_ns)
		return 0;
	return (double)(received - 1) / ((double)span_ns / 1e9) / 1e6;
}

static int bw_client_size(struct perf_session *s, uint32_t size)
{
	const struct perf_opts *o = &s->o;
	unsigned int nthr = o->threads, nqp = o->num_qps, t, i;
	uint64_t total_iters = o->duration ? 0 : o->iters * nqp;
	bool peak = !o->no_peak && !o->duration && nthr == 1 &&
		    total_iters <= PERF_NOPEAK_ITERS;
	struct bw_thread *th;
	struct perf_counters c0, c1, cd;
	struct perf_bw_result r;
	int go = 0;
	uint64_t v[PERF_MAX_QPS + 1], res[3], peer, sent = 0;
	uint64_t first = UINT64_MAX, last = 0, wcnt = 0, ws = UINT64_MAX;
	uint64_t we = 0, t0;
	uint8_t *buf;
	int ret;

	ret = perf_oob_sync(s->fd, true, size, &peer);
	if (ret < 0)
		return ret;
	th = calloc(nthr, sizeof(*th));
	buf = malloc(size ? size : 1);
	if (!th || !buf) {
		free(th);
		free(buf);
		return -ENOMEM;
	}
	memset(buf, 0xa5, size ? size : 1);
	bw_assign(th, nthr, nqp, o->duration ? UINT64_MAX :
		  o->iters / o->post_list);
	if (peak) {
		th[0].tposted = calloc(total_iters, sizeof(uint64_t));
		th[0].tcompleted = calloc(total_iters, sizeof(uint64_t));
		if (!th[0].tposted || !th[0].tcompleted) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = perf_qps_counters(s->qp, nqp, &c0);
	if (ret < 0)
		goto out;
	for (t = 0; t < nthr; t++) {
		th[t].s = s;
		th[t].go = &go;
		th[t].size = size;
		th[t].buf = buf;
		ret = -pthread_create(&th[t].tid, NULL, bw_sender, &th[t]);
		if (ret < 0) {
			fprintf(stderr, "%s: pthread_create: %s\n", o->prog,
				strerror(-ret));
			break;
		}
	}
	t0 = perf_now_ns();
	for (i = 0; i < nthr; i++) {
		th[i].t_stop = t0 + (uint64_t)o->duration * 1000000000ull;
		/* perftest: margin = D/4 on each side, sample the middle. */
		th[i].t_ws = t0 + (uint64_t)o->duration * 250000000ull;
		th[i].t_we = th[i].t_stop - (uint64_t)o->duration * 250000000ull;
	}
	/* Release pairs with the acquire loads in bw_sender(). */
	__atomic_store_n(&go, ret < 0 ? -1 : 1, __ATOMIC_RELEASE);
	for (i = 0; i < t; i++)
		pthread_join(th[i].tid, NULL);
	if (ret < 0)
		goto out;

	ret = 0;
	for (t = 0; t < nthr; t++) {
		if (th[t].err && !ret) {
			fprintf(stderr, "%s: thread %u: %s: %s\n", o->prog, t,
				th[t].what, strerror(-th[t].err));
			ret = th[t].err;
		}
		first = th[t].t_first < first ? th[t].t_first : first;
		last = th[t].t_last > last ? th[t].t_last : last;
		if (th[t].ws_seen && th[t].we_seen) {
			wcnt += th[t].we_cnt - th[t].ws_cnt;
			ws = th[t].ws_t < ws ? th[t].ws_t : ws;
			we = th[t].we_t > we ? th[t].we_t : we;
		}
	}
	if (ret < 0)
		goto out;
	v[0] = 0;
	for (i = 0; i < nqp; i++) {
		v[i + 1] = 0;
		for (t = 0; t < nthr; t++)
			v[i + 1] += th[t].sent[i];
		v[0] += v[i + 1];
	}
	sent = v[0];
	/* DONE: what we sent; the server answers with what arrived. */
	ret = perf_oob_put_u64s(s->fd, v, nqp + 1);
	if (ret == 0)
		ret = perf_oob_get_u64s(s->fd, res, 3);
	if (ret < 0)
		goto out;
	ret = perf_qps_counters(s->qp, nqp, &c1);
	if (ret < 0)
		goto out;
	perf_counters_delta(&c0, &c1, &cd);

	if (o->duration)
		ret = perf_bw_from_span(wcnt, size, we > ws ? we - ws : 0,
					o->report_gbits, &r);
	else if (peak)
		ret = perf_bw_compute(th[0].tposted, th[0].tcompleted, sent,
				      o->post_list, o->cq_mod, size, false,
				      o->report_gbits, &r);
	else
		ret = perf_bw_from_span(sent, size, last - first,
					o->report_gbits, &r);
	if (ret < 0)
		goto out;
	perf_print_bw_row(stdout, &r, o->report_gbits);
	bw_print_counts(s, sent, res[0], res[2], &cd);
	if (o->json)
		ret = bw_json(s, &r, sent, res[0], res[2],
			      bw_delivered(res[0], res[1]), &cd);
out:
	free(th[0].tposted);
	free(th[0].tcompleted);
	free(th);
	free(buf);
	return ret;
}

static int bw_server_size(struct perf_session *s, uint32_t size)
{
	const struct perf_opts *o = &s->o;
	unsigned int nqp = o->num_qps, i, idle = 0;
	uint32_t cap = s->mine.max_payload ? s->mine.max_payload : 65536;
	uint64_t v[PERF_MAX_QPS + 1] = { 0 }, res[3], peer, received = 0;
	uint64_t bad = 0;
	uint64_t first = 0, last = 0, quiet = 0, now;
	struct perf_counters c0, c1, cd;
	struct perf_bw_result r;
	bool done = false, got;
	uint8_t *buf;
	ssize_t n;
	int ret;

	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	ret = perf_qps_counters(s->qp, nqp, &c0);
	if (ret == 0)
		ret = perf_oob_sync(s->fd, false, size, &peer);
	if (ret == 0 && peer != size) {
		fprintf(stderr, "%s: the client runs size %llu, we expect %u\n",
			o->prog, (unsigned long long)peer, size);
		ret = -EPROTO;
	}
	while (ret == 0) {
		got = false;
		for (i = 0; i < nqp; i++) {
			n = qps_recv(s->qp[i].ep, buf, cap, QPS_MSG_DONTWAIT);
			if (n == -EAGAIN)
				continue;
			if (n < 0) {
				fprintf(stderr, "%s: qps_recv: %s\n", o->prog,
					strerror((int)-n));
				ret = (int)n;
				break;
			}
			got = true;
			last = perf_now_ns();
			if (!received++)
				first = last;
			if ((size_t)n != size)
				bad++;
		}
		if (got) {
			idle = 0;
			if (done && received >= v[0])
				break;
			continue;
		}
		if (!done && ++idle % BW_OOB_CHECK)
			continue;
		if (!done) {
			ret = perf_oob_ready(s->fd);
			if (ret <= 0)
				continue;
			ret = perf_oob_get_u64s(s->fd, v, nqp + 1);
			done = true;
			quiet = perf_now_ns();
			if (ret < 0 || received >= v[0])
				break;
			continue;
		}
		now = perf_now_ns();
		if (now - quiet > BW_DRAIN_NS)
			break;
	}
	if (ret < 0) {
		if (ret == -ECONNRESET)
			fprintf(stderr, "%s: the client closed the connection\n",
				o->prog);
		free(buf);
		return ret;
	}
	res[0] = received;
	res[1] = last - first;
	res[2] = bad;
	ret = perf_oob_put_u64s(s->fd, res, 3);
	if (ret == 0)
		ret = perf_qps_counters(s->qp, nqp, &c1);
	free(buf);
	if (ret < 0)
		return ret;
	perf_counters_delta(&c0, &c1, &cd);
	ret = perf_bw_from_span(received > 1 ? received - 1 : 0, size,
				last - first, o->report_gbits, &r);
	r.iters = received;
	perf_print_bw_row(stdout, &r, o->report_gbits);
	bw_print_counts(s, v[0], received, bad, &cd);
	if (o->json)
		ret = bw_json(s, &r, v[0], received, bad, r.msg_rate, &cd);
	return ret;
}

/* o.server is the host this side connected to: set on the client. */
static int bw_size(struct perf_session *s, uint32_t size)
{
	return s->o.server ? bw_client_size(s, size) : bw_server_size(s, size);
}

static void bw_head(const struct perf_session *s)
{
	perf_print_bw_head(stdout, s->o.report_gbits);
}

int main(int argc, char **argv)
{
	return perf_session_main(argc, argv, PERF_TEST_BW, bw_head, bw_size);
}
