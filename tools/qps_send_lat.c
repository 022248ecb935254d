// SPDX-License-Identifier: MIT
/*
 * qps_send_lat - ib_send_lat for qpsock datagram endpoints.
 *
 *   qps_send_lat [options]          server: echoes every message
 *   qps_send_lat [options] <host>   client: ping-pong, perftest's table
 *
 * Ping-pong as perftest's send_lat: the client stamps each send and sends
 * the next one only after the reply, so consecutive stamps are round
 * trips; the table reports half of them. Both sides busy-poll their
 * endpoint (qps_recv with QPS_MSG_DONTWAIT) as perftest polls its CQ, and
 * both print a table (the server's stamps are its reply sends). A lost
 * datagram stalls a ping-pong: after 5 s without the reply the client
 * stops with an error that names the message, and the drop counters
 * show where it went; the server sees the connection close. -c UD runs
 * it on UD QPs (perf_qps.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf_session.h"

#define LAT_TIMEOUT_NS 5000000000ull
#define LAT_CLOCK_EVERY 4096		/* idle polls between clock checks */

struct lat_run {
	struct perf_session *s;
	uint32_t size;
	uint8_t *buf;
	uint32_t cap;
	uint64_t *tposted;		/* iteration mode */
	uint64_t count;
	uint64_t wrong;
	uint64_t t_first, t_last;
	uint64_t ws_cnt, we_cnt, ws_t, we_t;	/* duration window */
};

/* Busy-poll for one datagram; -ETIMEDOUT after LAT_TIMEOUT_NS. A server
 * (@oob_fd >= 0) also returns 1 when the client wrote on the TCP
 * connection, which ends a duration run. */
static ssize_t lat_wait(struct lat_run *lr, int oob_fd)
{
	struct perf_qp *qp = &lr->s->qp[0];
	uint64_t start = 0, spins = 0;
	ssize_t n;
	int ret;

	for (;;) {
		n = qps_recv(qp->ep, lr->buf, lr->cap, QPS_MSG_DONTWAIT);
		if (n != -EAGAIN)
			return n;
		if (++spins % LAT_CLOCK_EVERY)
			continue;
		if (oob_fd >= 0) {
			ret = perf_oob_ready(oob_fd);
			if (ret != 0)
				return ret < 0 ? ret : -EINTR;
			continue;
		}
		if (!start)
			start = perf_now_ns();
		else if (perf_now_ns() - start > LAT_TIMEOUT_NS)
			return -ETIMEDOUT;
	}
}

static int lat_client_loop(struct lat_run *lr)
{
	const struct perf_opts *o = &lr->s->o;
	struct perf_qp *qp = &lr->s->qp[0];
	uint64_t now, t_stop = 0, t_ws = 0, t_we = 0, i;
	bool ws = false, we = false;
	ssize_t n;

	lr->t_first = perf_now_ns();
	if (o->duration) {
		t_stop = lr->t_first + (uint64_t)o->duration * 1000000000ull;
		t_ws = lr->t_first + (uint64_t)o->duration * 250000000ull;
		t_we = t_stop - (uint64_t)o->duration * 250000000ull;
	}
	for (i = 0; o->duration || i < o->iters; i++) {
		now = perf_now_ns();
		if (o->duration) {
			if (now >= t_stop)
				break;
			if (!ws && now >= t_ws) {
				ws = true;
				lr->ws_cnt = i;
				lr->ws_t = now;
			}
			if (!we && now >= t_we) {
				we = true;
				lr->we_cnt = i;
				lr->we_t = now;
			}
		} else {
			lr->tposted[i] = now;
		}
		n = perf_qp_send(qp, lr->buf, lr->size, 0);
		if (n < 0) {
			fprintf(stderr, "%s: qps_send #%llu: %s\n", o->prog,
				(unsigned long long)i, strerror((int)-n));
			return (int)n;
		}
		n = lat_wait(lr, -1);
		if (n == -ETIMEDOUT) {
			fprintf(stderr, "%s: no reply to message %llu within "
				"5 s: the datagram or its echo was lost\n",
				o->prog, (unsigned long long)i + 1);
			return (int)n;
		}
		if (n < 0) {
			fprintf(stderr, "%s: qps_recv #%llu: %s\n", o->prog,
				(unsigned long long)i, strerror((int)-n));
			return (int)n;
		}
		if ((uint64_t)n != lr->size)
			lr->wrong++;
	}
	lr->count = i;
	lr->t_last = perf_now_ns();
	return 0;
}

static int lat_server_loop(struct lat_run *lr)
{
	const struct perf_opts *o = &lr->s->o;
	struct perf_qp *qp = &lr->s->qp[0];
	uint64_t now;
	ssize_t n;

	for (lr->count = 0; o->duration || lr->count < o->iters;) {
		n = lat_wait(lr, lr->s->fd);
		if (n == -EINTR)
			break;		/* the client is done (duration) */
		if (n < 0) {
			fprintf(stderr, "%s: %s after %llu messages: %s\n",
				o->prog, n == -ECONNRESET ?
				"the client closed the connection" : "qps_recv",
				(unsigned long long)lr->count,
				strerror((int)-n));
			return (int)n;
		}
		if ((uint64_t)n != lr->size)
			lr->wrong++;
		now = perf_now_ns();
		if (!lr->count)
			lr->t_first = now;
		lr->t_last = now;
		if (lr->tposted)
			lr->tposted[lr->count] = now;
		n = perf_qp_send(qp, lr->buf, (size_t)n, 0);
		if (n < 0) {
			fprintf(stderr, "%s: qps_send: %s\n", o->prog,
				strerror((int)-n));
			return (int)n;
		}
		lr->count++;
	}
	return 0;
}

static int lat_report(struct lat_run *lr, const struct perf_counters *c)
{
	const struct perf_session *s = lr->s;
	const struct perf_opts *o = &s->o;
	struct perf_lat_dur_result d;
	struct perf_lat_result r;
	struct perf_json j;
	char buf[2048];
	uint64_t *scratch = NULL;
	int ret;

	if (o->duration) {
		if (o->server)
			ret = perf_lat_dur_compute(lr->we_cnt - lr->ws_cnt,
						   lr->size, lr->we_t - lr->ws_t,
						   &d);
		else
			ret = perf_lat_dur_compute(lr->count, lr->size,
						   lr->t_last - lr->t_first, &d);
		if (ret < 0)
			return ret;
		perf_print_lat_dur_row(stdout, &d);
	} else {
		scratch = calloc(lr->count, sizeof(*scratch));
		if (!scratch)
			return -ENOMEM;
		ret = perf_lat_compute(lr->tposted, lr->count, lr->size,
				       scratch, &r);
		if (ret == 0 && o->histogram)
			perf_print_lat_samples(stdout, scratch,
					       lr->count - 1 - PERF_LAT_TAIL);
		free(scratch);
		if (ret < 0)
			return ret;
		perf_print_lat_row(stdout, &r);
	}
	printf("   round trips %llu, wrong size %llu; %s wqes %llu, "
	       "doorbells %llu, bf_writes %llu, drops %llu, tx_signaled %llu, "
	       "tx_reaped %llu\n",
	       (unsigned long long)lr->count, (unsigned long long)lr->wrong,
	       o->server ? "client" : "server", (unsigned long long)c->wqes,
	       (unsigned long long)c->doorbells,
	       (unsigned long long)c->bf_writes,
	       (unsigned long long)perf_counters_drops(c),
	       (unsigned long long)c->tx_signaled,
	       (unsigned long long)c->tx_reaped);
	if (!o->json)
		return 0;
	perf_session_json_head(s, &j, buf, sizeof(buf));
	if (o->duration) {
		perf_json_u64(&j, "bytes", d.size);
		perf_json_u64(&j, "iterations", d.iters);
		perf_json_dbl(&j, "t_avg", d.t_avg);
		perf_json_dbl(&j, "tps_average", d.tps);
	} else {
		perf_json_u64(&j, "bytes", r.size);
		perf_json_u64(&j, "iterations", r.iters);
		perf_json_dbl(&j, "t_min", r.t_min);
		perf_json_dbl(&j, "t_max", r.t_max);
		perf_json_dbl(&j, "t_typical", r.t_typical);
		perf_json_dbl(&j, "t_avg", r.t_avg);
		perf_json_dbl(&j, "t_stdev", r.t_stdev);
		perf_json_dbl(&j, "p99", r.p99);
		perf_json_dbl(&j, "p99_9", r.p999);
	}
	perf_json_u64(&j, "round_trips", lr->count);
	perf_json_u64(&j, "wrong_size", lr->wrong);
	perf_json_counters(&j, c);
	return perf_session_json_print(&j);
}

static int lat_size(struct perf_session *s, uint32_t size)
{
	const struct perf_opts *o = &s->o;
	bool client = o->server != NULL;
	struct perf_counters c0, c1, cd;
	struct lat_run lr;
	uint64_t peer;
	int ret;

	memset(&lr, 0, sizeof(lr));
	lr.s = s;
	lr.size = size;
	lr.cap = s->mine.max_payload ? s->mine.max_payload : 65536;
	lr.buf = malloc(lr.cap);
	if (!o->duration)
		lr.tposted = calloc(o->iters, sizeof(uint64_t));
	if (!lr.buf || (!o->duration && !lr.tposted)) {
		ret = -ENOMEM;
		goto out;
	}
	memset(lr.buf, 0x5a, lr.cap);
	ret = perf_qps_counters(s->qp, 1, &c0);
	if (ret == 0)
		ret = perf_oob_sync(s->fd, client, size, &peer);
	if (ret == 0 && peer != size) {
		fprintf(stderr, "%s: the peer runs size %llu, we expect %u\n",
			o->prog, (unsigned long long)peer, size);
		ret = -EPROTO;
	}
	if (ret == 0)
		ret = client ? lat_client_loop(&lr) : lat_server_loop(&lr);
	/* End of the size: both sides exchange their round-trip counts. */
	if (ret == 0)
		ret = perf_oob_sync(s->fd, client, lr.count, &peer);
	if (ret == 0)
		ret = perf_qps_counters(s->qp, 1, &c1);
	if (ret < 0)
		goto out;
	perf_counters_delta(&c0, &c1, &cd);
	if (!o->duration && lr.count < PERF_MIN_ITERS) {
		fprintf(stderr, "%s: only %llu round trips\n", o->prog,
			(unsigned long long)lr.count);
		ret = -EIO;
		goto out;
	}
	ret = lat_report(&lr, &cd);
out:
	free(lr.buf);
	free(lr.tposted);
	return ret;
}

static void lat_head(const struct perf_session *s)
{
	perf_print_lat_head(stdout, s->o.duration != 0);
}

int main(int argc, char **argv)
{
	return perf_session_main(argc, argv, PERF_TEST_LAT, lat_head,
				 lat_size);
}
