// SPDX-License-Identifier: MIT
/*
 * qps_bench doorbell-delay [--json] [--n N] [--gap-us G] [--delays 10,30,100]:
 * how long a postponed doorbell really waits. A sender sends one 64-byte
 * datagram with QPS_MSG_MORE, carrying its send time, then does nothing
 * for G us (default 1000), so only the flusher can ring it; a receiver
 * thread on the same emu wire busy-polls and stamps each arrival. The
 * delay is arrival - send: the flusher's wait past db_delay_us, its
 * wake-up and emu's delivery (a memcpy in the ringing thread). For each
 * db_delay_us and each flusher policy (SCHED_BATCH, SCHED_OTHER) side by
 * side, N datagrams (default 500): p50, p99 and max, one JSON object per
 * setting with "bench":"doorbell_delay".
 *
 * Beside each setting, the floor any sleeping flusher stands on: a thread
 * of the same policy sleeps until a deadline db_delay_us ahead
 * (clock_nanosleep, TIMER_ABSTIME, the flusher's timer slack), G us
 * apart, while another thread spins as the receiver does; how late it
 * wakes is "bench":"doorbell_delay_floor" (p50, p99, max of the wake-up
 * past the deadline).
 *
 * --thread-mode single|multi|both (default multi): the contexts'
 * QPS_CTX_ATTR_THREAD_MODE. On a single-threaded context the flusher
 * enters the send queue through membarrier(2), which interrupts the
 * receiver's busy CPU too (on a multi-threaded one only while the queue
 * leans to the sender, which one datagram a round never makes it do);
 * "both" runs each setting both ways side by side, and each result says
 * which mode the sender's context ran ("thread_mode", from
 * qps_stats.thread_single) and how many of the flusher's entries paid a
 * barrier ("barriers").
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "qps_bench.h"
#include "qps_int.h"

#define DD_MAX_N 20000
#define DD_MAX_DELAYS 8
#define DD_PORT 9600

struct dd_msg {
	uint64_t seq;
	uint64_t sent_ns;
	uint8_t pad[48];
};

struct dd_rx {
	struct qps_ep *ep;
	uint64_t *delay_ns;	/* per seq; 0 = not yet */
	unsigned int n;
	unsigned int got;
	int stop;		/* atomic */
};

static uint64_t dd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *dd_receiver(void *arg)
{
	struct dd_rx *rx = arg;
	struct dd_msg m;

	while (!__atomic_load_n(&rx->stop, __ATOMIC_ACQUIRE)) {
		ssize_t r = qps_recv(rx->ep, &m, sizeof(m), QPS_MSG_DONTWAIT);
		uint64_t now = dd_now();

		if (r != (ssize_t)sizeof(m) || m.seq >= rx->n)
			continue;
		rx->delay_ns[m.seq] = now - m.sent_ns;
		rx->got++;
	}
	return NULL;
}

static int dd_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int dd_ctx(const char *wire, const char *ip, uint32_t delay_us,
		  bool single, struct qps_ctx **ctx)
{
	struct qps_ctx_attr a = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_DB_DELAY |
			     QPS_CTX_ATTR_NUM_TXQ | QPS_CTX_ATTR_THREAD_MODE,
		.provider = "emu",
		.dev = wire,
		.db_delay_us = delay_us,
		.num_txq = 1,
		.thread_mode = single ? QPS_THREAD_MODE_SINGLE :
					QPS_THREAD_MODE_MULTI,
	};

	inet_pton(AF_INET, ip, &a.addr);
	return qps_ctx_create(&a, ctx);
}

/* What one setting measured. */
struct dd_result {
	double p50, p99, max;	/* us */
	unsigned int lost;
	bool single;		/* the sender's context ran single-threaded */
	uint64_t barriers;	/* its tx_lock_barriers */
};

/* One setting: N timed MORE sends. */
static int dd_run(unsigned int n, unsigned int gap_us, uint32_t delay_us,
		  int policy, bool single, struct dd_result *res)
{
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(DD_PORT) };
	struct sockaddr_in any = dst;
	struct timespec gap = { .tv_nsec = (long)gap_us * 1000 };
	struct qps_ctx *a = NULL, *b = NULL;
	struct qps_ep *tx = NULL;
	struct dd_rx rx = { .n = n };
	struct qps_stats st;
	struct dd_msg m;
	pthread_t th;
	char wire[64];
	unsigned int i, k = 0;
	int ret;

	snprintf(wire, sizeof(wire), "qpsdd-%d", (int)getpid());
	rx.delay_ns = calloc(n, sizeof(*rx.delay_ns));
	if (!rx.delay_ns)
		return -ENOMEM;
	ret = dd_ctx(wire, "198.18.0.21", delay_us, single, &a);
	if (!ret)
		ret = dd_ctx(wire, "198.18.0.22", delay_us, single, &b);
	if (!ret)
		ret = qps_ep_create(b, QPS_EP_DGRAM, &rx.ep);
	any.sin_addr.s_addr = 0;
	if (!ret)
		ret = qps_bind(rx.ep, (struct sockaddr *)&any, sizeof(any));
	inet_pton(AF_INET, "198.18.0.22", &dst.sin_addr);
	if (!ret)
		ret = qps_ep_create(a, QPS_EP_DGRAM, &tx);
	if (!ret)
		ret = qps_connect(tx, (struct sockaddr *)&dst, sizeof(dst));
	if (ret < 0)
		goto out;
	a->db_timer.policy = policy;
	ret = -pthread_create(&th, NULL, dd_receiver, &rx);
	if (ret < 0)
		goto out;
	memset(&m, 0, sizeof(m));
	for (i = 0; i < n; i++) {
		m.seq = i;
		m.sent_ns = dd_now();
		if (qps_send(tx, &m, sizeof(m), QPS_MSG_MORE) < 0)
			break;
		nanosleep(&gap, NULL);
	}
	/* The last ones' doorbells, however late: lost means > 100 ms. */
	nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	__atomic_store_n(&rx.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	for (i = 0; i < n; i++)
		if (rx.delay_ns[i])
			rx.delay_ns[k++] = rx.delay_ns[i];
	res->lost = n - k;
	if (!k) {
		ret = -EIO;
		goto out;
	}
	qsort(rx.delay_ns, k, sizeof(uint64_t), dd_cmp);
	res->p50 = (double)rx.delay_ns[k / 2] / 1e3;
	res->p99 = (double)rx.delay_ns[(k * 99) / 100] / 1e3;
	res->max = (double)rx.delay_ns[k - 1] / 1e3;
	ret = qps_ctx_stats(a, &st, sizeof(st));
	if (ret >= 0) {
		res->single = st.thread_single != 0;
		res->barriers = st.tx_lock_barriers;
		ret = 0;
	}
out:
	if (a)
		qps_ctx_destroy(a);
	if (b)
		qps_ctx_destroy(b);
	free(rx.delay_ns);
	return ret;
}

struct dd_floor {
	unsigned int n, gap_us;
	uint32_t delay_us;
	int policy;
	uint64_t *late_ns;
	int stop;		/* atomic: the spinner's */
};

static void *dd_spinner(void *arg)
{
	struct dd_floor *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED))
		__asm__ __volatile__("" ::: "memory");
	return NULL;
}

static void *dd_sleeper(void *arg)
{
	struct dd_floor *f = arg;
	struct sched_param sp = { .sched_priority = 0 };
	unsigned int i;

	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	if (f->policy != SCHED_OTHER)
		pthread_setschedparam(pthread_self(), f->policy, &sp);
	for (i = 0; i < f->n; i++) {
		uint64_t due = dd_now() + (uint64_t)f->delay_us * 1000u;
		struct timespec ts = {
			.tv_sec = (time_t)(due / 1000000000u),
			.tv_nsec = (long)(due % 1000000000u),
		};

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
				       NULL) == EINTR)
			;
		f->late_ns[i] = dd_now() - due;
		usleep(f->gap_us);
	}
	return NULL;
}

/* The floor of one setting; fills p50/p99/max in us. */
static int dd_floor(unsigned int n, unsigned int gap_us, uint32_t delay_us,
		    int policy, double *p50, double *p99, double *max)
{
	struct dd_floor f = { .n = n, .gap_us = gap_us, .delay_us = delay_us,
			      .policy = policy };
	pthread_t spin, sleeper;
	int ret;

	f.late_ns = calloc(n, sizeof(*f.late_ns));
	if (!f.late_ns)
		return -ENOMEM;
	ret = -pthread_create(&spin, NULL, dd_spinner, &f);
	if (ret) {
		free(f.late_ns);
		return ret;
	}
	ret = -pthread_create(&sleeper, NULL, dd_sleeper, &f);
	if (!ret)
		pthread_join(sleeper, NULL);
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELAXED);
	pthread_join(spin, NULL);
	if (!ret) {
		qsort(f.late_ns, n, sizeof(*f.late_ns), dd_cmp);
		*p50 = (double)f.late_ns[n / 2] / 1e3;
		*p99 = (double)f.late_ns[(size_t)n * 99 / 100] / 1e3;
		*max = (double)f.late_ns[n - 1] / 1e3;
	}
	free(f.late_ns);
	return ret;
}

static void dd_print(int json, uint32_t delay_us, const char *policy,
		     unsigned int n, const struct dd_result *r)
{
	const char *mode = r->single ? "single" : "multi";
	double over = delay_us ? r->p99 / delay_us : 0;

	if (json)
		printf("{\"bench\":\"doorbell_delay\",\"db_delay_us\":%u,"
		       "\"policy\":\"%s\",\"thread_mode\":\"%s\","
		       "\"n\":%u,\"lost\":%u,\"p50_us\":%.1f,"
		       "\"p99_us\":%.1f,\"max_us\":%.1f,"
		       "\"p99_over_delay\":%.2f,\"barriers\":%llu}\n",
		       delay_us, policy, mode, n, r->lost, r->p50, r->p99,
		       r->max, over, (unsigned long long)r->barriers);
	else
		printf("db_delay %4u us  %-5s %-6s  p50 %7.1f  p99 %7.1f  "
		       "max %8.1f us  (p99/delay %.2f, lost %u, barriers "
		       "%llu)\n", delay_us, policy, mode, r->p50, r->p99,
		       r->max, over, r->lost, (unsigned long long)r->barriers);
}

static int dd_usage(void)
{
	fprintf(stderr, "usage: qps_bench doorbell-delay [--json] [--n N] "
		"[--gap-us G] [--delays 10,30,100] "
		"[--thread-mode single|multi|both]\n");
	return 2;
}

int qps_bench_doorbell_delay(int argc, char **argv)
{
	static const struct { int policy; const char *name; } pol[] = {
		{ SCHED_BATCH, "batch" }, { SCHED_OTHER, "other" },
	};
	uint32_t delay[DD_MAX_DELAYS] = { 10, 30, 100 };
	unsigned int nd = 3, n = 500, gap = 1000, d, p, t;
	bool modes[2] = { true, false };	/* multi, single */
	int json = 0, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
			n = (unsigned int)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--thread-mode") && i + 1 < argc) {
			const char *v = argv[++i];

			modes[0] = !strcmp(v, "multi") || !strcmp(v, "both");
			modes[1] = !strcmp(v, "single") || !strcmp(v, "both");
			if (!modes[0] && !modes[1])
				return dd_usage();
		} else if (!strcmp(argv[i], "--gap-us") && i + 1 < argc) {
			gap = (unsigned int)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--delays") && i + 1 < argc) {
			char *s = argv[++i], *end;

			for (nd = 0; nd < DD_MAX_DELAYS && *s; nd++) {
				delay[nd] = (uint32_t)strtoul(s, &end, 10);
				s = *end == ',' ? end + 1 : end;
				if (end == s && *s)
					return dd_usage();
			}
		} else {
			return dd_usage();
		}
	}
	if (!n || n > DD_MAX_N || !gap || gap >= 1000000 || !nd)
		return dd_usage();
	for (d = 0; d < nd; d++) {
		for (p = 0; p < 2; p++) {
			double f50 = 0, f99 = 0, fmax = 0;
			int ret = dd_floor(n, gap, delay[d], pol[p].policy, &f50,
					   &f99, &fmax);

			if (ret < 0) {
				fprintf(stderr, "doorbell-delay: floor: %s\n",
					strerror(-ret));
				return 1;
			}
			if (json)
				printf("{\"bench\":\"doorbell_delay_floor\","
				       "\"sleep_us\":%u,\"policy\":\"%s\","
				       "\"n\":%u,\"p50_late_us\":%.1f,"
				       "\"p99_late_us\":%.1f,"
				       "\"max_late_us\":%.1f}\n",
				       delay[d], pol[p].name, n, f50, f99,
				       fmax);
			else
				printf("floor    %4u us  %-5s         late p50 "
				       "%7.1f  p99 %7.1f  max %8.1f us\n",
				       delay[d], pol[p].name, f50, f99, fmax);
			for (t = 0; t < 2; t++) {
				struct dd_result r;

				if (!modes[t])
					continue;
				memset(&r, 0, sizeof(r));
				ret = dd_run(n, gap, delay[d], pol[p].policy,
					     t == 1, &r);
				if (ret < 0) {
					fprintf(stderr, "doorbell-delay: %s\n",
						strerror(-ret));
					return 1;
				}
				dd_print(json, delay[d], pol[p].name, n, &r);
			}
		}
	}
	return 0;
}
