// SPDX-License-Identifier: MIT
/*
 * Resource exhaustion on the emu provider: out of memory and out of file
 * descriptors while creating a context or an endpoint, full send queues
 * (non-blocking and SNDTIMEO), no posted receive buffers, full endpoint
 * receive queues, and completion queue overruns. Each must end in a clear
 * -errno or a counter, leave nothing allocated behind, and the context
 * must carry on once the resource is back.
 *
 * Out of memory: the suite is linked with fault_inject.c, which fails the
 * Nth allocation call of the library (malloc, calloc, realloc,
 * aligned_alloc, posix_memalign, mmap) for N = 1, 2, ... until the
 * operation succeeds, so every allocation on the path fails once.
 * Leaks are checked three ways: the wrappers' live-block tally, the open
 * descriptors, and (in the ASan and valgrind runs) the leak checkers.
 */
#include "t_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu.h"
#include "fault_inject.h"
#include "endpoint.h"
#include "rx.h"
#include "qps_int.h"
#include "sq.h"

/* More allocation calls than any creation path makes: the loops stop at
 * the first N that injects nothing, this only bounds a runaway. */
#define FI_MAX_CALLS 4000

static char g_wire[64];

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own descriptor */
}

/* The lowest free descriptor number: a RLIMIT_NOFILE of this value lets
 * no new descriptor open, whatever holes lie above it. */
static int lowest_free_fd(void)
{
	int fd = fcntl(0, F_DUPFD, 0);

	if (fd >= 0)
		close(fd);
	return fd;
}

/* Lower the soft RLIMIT_NOFILE from @old to @cur; a refusal fails the
 * test and returns false. */
static bool fd_limit(const struct rlimit *old, int cur)
{
	struct rlimit lim = *old;

	lim.rlim_cur = (rlim_t)cur;
	if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
		CU_FAIL("setrlimit(RLIMIT_NOFILE) refused");
		return false;
	}
	return true;
}

/* A small context: several send queues and few buffers, so that every
 * kind of per-queue allocation is on the path. */
static struct qps_ctx_attr small_attr(const char *ip, uint32_t tx_depth,
				      uint32_t rx_depth, uint32_t num_txq)
{
	struct qps_ctx_attr attr = t_emu_attr(g_wire, ip);

	attr.comp_mask |= QPS_CTX_ATTR_TX_DEPTH | QPS_CTX_ATTR_RX_DEPTH |
			  QPS_CTX_ATTR_NUM_TXQ;
	attr.tx_depth = tx_depth;
	attr.rx_depth = rx_depth;
	attr.num_txq = num_txq;
	return attr;
}

static struct qps_ctx *ctx_small(const char *ip, uint32_t tx_depth,
				 uint32_t rx_depth, uint32_t num_txq)
{
	struct qps_ctx_attr attr = small_attr(ip, tx_depth, rx_depth, num_txq);
	struct qps_ctx *ctx = NULL;

	CU_ASSERT_FATAL(t_suite_ctxs.n < T_CTX_MAX);
	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	return ctx;
}

/*
 * One warm-up create/destroy, so that state the library sets up once per
 * process (provider registry, wire segment of this process) is not
 * mistaken for a leak of the first failing attempt.
 */
static void warm_up(void)
{
	struct qps_ctx_attr attr = small_attr("198.18.0.60", 16, 16, 2);
	struct qps_ctx *ctx = NULL;

	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	T_EQ(qps_ctx_destroy(ctx), 0);
}

static void test_ctx_create_oom(void)
{
	struct qps_ctx_attr attr = small_attr("198.18.0.61", 16, 16, 2);
	struct qps_ctx *ctx = NULL;
	long live0;
	unsigned long n;
	int fds0, ret, failed = 0, fell_back = 0;
	bool fired;

	warm_up();
	live0 = t_fi_live();
	fds0 = count_fds();
	for (n = 1; n <= FI_MAX_CALLS; n++) {
		ctx = NULL;
		t_fi_arm(n);
		ret = qps_ctx_create(&attr, &ctx);
		fired = t_fi_disarm();
		if (!fired) {
			/* Every allocation has failed once: this one went
			 * through, on the same address (no port leaked). */
			T_EQ(ret, 0);
			break;
		}
		failed++;
		if (ret == 0 && ctx && !ctx->stat.shm) {
			/* The stats segment's mapping: the context keeps
			 * its counters in private memory instead (stat.md). */
			fell_back++;
			T_EQ(qps_ctx_destroy(ctx), 0);
		} else {
			T_EQ(ret, -ENOMEM);
			CU_ASSERT_PTR_NULL(ctx);
			if (ret == 0 && ctx)
				qps_ctx_destroy(ctx);
		}
		T_EQ(t_fi_live(), live0);
		T_EQ(count_fds(), fds0);
	}
	/* Exactly one allocation is the segment's. */
	T_EQ(fell_back, 1);
	CU_ASSERT(n <= FI_MAX_CALLS);
	printf("\n    ctx_create: %d allocation calls failed in turn, "
	       "each -ENOMEM but the stats segment's (private counters), "
	       "nothing left behind\n", failed);
	T_GE(failed, 10);
	if (ctx)
		T_EQ(qps_ctx_destroy(ctx), 0);
	T_EQ(t_fi_live(), live0);
	T_EQ(count_fds(), fds0);
}

/*
 * An endpoint's whole set-up: create, options that allocate (PKTINFO's
 * timestamps), bind, its descriptor, a group. Returns the first error.
 */
static int ep_setup(struct qps_ctx *ctx, struct qps_ep **out)
{
	/* Bound to the wildcard: a group needs it (or the group address). */
	struct sockaddr_in sin = t_sin("0.0.0.0", 7000);
	struct qps_mreq mreq;
	int one = 1, ret;

	ret = qps_ep_create(ctx, QPS_EP_DGRAM, out);
	if (ret < 0)
		return ret;
	ret = qps_setopt(*out, QPS_OPT_PKTINFO, &one, sizeof(one));
	if (ret < 0)
		return ret;
	ret = qps_bind(*out, (struct sockaddr *)&sin, sizeof(sin));
	if (ret < 0)
		return ret;
	ret = qps_ep_fd(*out);
	if (ret < 0)
		return ret;
	memset(&mreq, 0, sizeof(mreq));
	mreq.group = t_sin("239.1.2.3", 7000).sin_addr;
	return qps_join(*out, &mreq, sizeof(mreq));
}

static void test_ep_create_oom(void)
{
	struct qps_ctx_attr attr = small_attr("198.18.0.62", 16, 16, 1);
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	long live0;
	unsigned long n;
	int fds0, ret, failed = 0;
	bool fired;

	warm_up();
	live0 = t_fi_live();
	fds0 = count_fds();
	for (n = 1; n <= FI_MAX_CALLS; n++) {
		ctx = NULL;
		ep = NULL;
		T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
		t_fi_arm(n);
		ret = ep_setup(ctx, &ep);
		fired = t_fi_disarm();
		if (fired) {
			failed++;
			T_EQ(ret, -ENOMEM);
		} else {
			T_EQ(ret, 0);
		}
		if (ep)
			T_EQ(qps_ep_close(ep), 0);
		T_EQ(qps_ctx_destroy(ctx), 0);
		T_EQ(t_fi_live(), live0);
		T_EQ(count_fds(), fds0);
		if (!fired)
			break;
	}
	CU_ASSERT(n <= FI_MAX_CALLS);
	printf("\n    endpoint set-up: %d allocation calls failed in turn\n",
	       failed);
	T_GE(failed, 3);
}

/* Too few descriptors for a context: -EMFILE, nothing left open. */
static void test_ctx_create_no_fds(void)
{
	struct qps_ctx_attr attr = small_attr("198.18.0.63", 16, 16, 2);
	struct qps_ctx *ctx = NULL;
	struct rlimit old;
	int fds0, base, extra, ret = -1, failed = 0;
	long live0;

	warm_up();
	T_EQ_FATAL(getrlimit(RLIMIT_NOFILE, &old), 0);
	live0 = t_fi_live();
	fds0 = count_fds();
	base = lowest_free_fd();
	T_GE(base, 0);
	for (extra = 0; extra < 64; extra++) {
		if (!fd_limit(&old, base + extra))
			break;
		ctx = NULL;
		ret = qps_ctx_create(&attr, &ctx);
		setrlimit(RLIMIT_NOFILE, &old);
		if (ret == 0)
			break;
		failed++;
		CU_ASSERT(ret == -EMFILE || ret == -ENFILE);
		if (ret != -EMFILE && ret != -ENFILE)
			printf("\n    %d spare descriptors: %s\n", extra,
			       strerror(-ret));
		T_EQ(t_fi_live(), live0);
		T_EQ(count_fds(), fds0);
	}
	T_EQ(ret, 0);
	printf("\n    ctx_create: refused with -EMFILE at %d descriptor "
	       "limits, then opened\n", failed);
	if (ret == 0 && ctx)
		T_EQ(qps_ctx_destroy(ctx), 0);
	T_EQ(count_fds(), fds0);
	T_EQ(t_fi_live(), live0);
}

/* Too few descriptors for an endpoint's set-up (its eventfd and epoll
 * descriptor): -EMFILE, nothing left open, the context still works. */
static void test_ep_setup_no_fds(void)
{
	struct qps_ctx_attr attr = small_attr("198.18.0.64", 16, 16, 1);
	struct qps_ctx *ctx = NULL;
	struct qps_ep *ep;
	struct rlimit old;
	int fds0, base, extra, ret = -1, failed = 0;

	T_EQ_FATAL(getrlimit(RLIMIT_NOFILE, &old), 0);
	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	fds0 = count_fds();
	base = lowest_free_fd();
	T_GE(base, 0);
	for (extra = 0; extra < 16; extra++) {
		if (!fd_limit(&old, base + extra))
			break;
		ep = NULL;
		ret = ep_setup(ctx, &ep);
		setrlimit(RLIMIT_NOFILE, &old);
		if (ep)
			T_EQ(qps_ep_close(ep), 0);
		T_EQ(count_fds(), fds0);
		if (ret == 0)
			break;
		failed++;
		CU_ASSERT(ret == -EMFILE || ret == -ENFILE);
	}
	T_EQ(ret, 0);
	T_GE(failed, 1);
	printf("\n    endpoint set-up: -EMFILE at %d descriptor limits\n",
	       failed);
	t_suite_end();
}

/* A receiving endpoint on its own context. */
static struct qps_ep *receiver(struct qps_ctx **rx, const char *ip,
			       uint32_t rx_depth)
{
	*rx = ctx_small(ip, 16, rx_depth, 1);
	return t_ep_bound(*rx, ip, 9000, 2000);
}

/* A sending endpoint on its own context, connected to @dst. */
static struct qps_ep *sender(struct qps_ctx **tx, const char *ip,
			     uint32_t tx_depth, const struct sockaddr_in *dst)
{
	struct qps_ep *ep;

	*tx = ctx_small(ip, tx_depth, 16, 1);
	ep = t_ep_bound(*tx, ip, 9001, 2000);
	T_EQ(qps_connect(ep, (const struct sockaddr *)dst, sizeof(*dst)), 0);
	return ep;
}

static int recv_all(struct qps_ep *ep)
{
	char buf[64];
	int n = 0;

	while (qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT) >= 0)
		n++;
	return n;
}

/* @n one-byte datagrams @c from @out, then the doorbell; returns how many
 * were accepted. */
static int send_flush(struct qps_ep *out, const char *c, int n)
{
	int i, ok = 0;

	for (i = 0; i < n; i++)
		ok += qps_send(out, c, 1, 0) == 1;
	T_GE(qps_ctx_flush(out->ctx), 0);
	return ok;
}

#define TX_DEPTH 16

/* Send queue full, device stopped: a non-blocking sender gets -EAGAIN
 * for each datagram that finds no slot, and nothing it was told was sent
 * goes missing once the device runs again. */
static void test_sq_full_nonblock(void)
{
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct sockaddr_in dst = t_sin("198.18.0.71", 9000);
	struct qps_stats ts, rs;
	int i, ok = 0, again = 0, other = 0, got;
	ssize_t r;

	in = receiver(&rx, "198.18.0.71", 256);
	out = sender(&tx, "198.18.0.70", TX_DEPTH, &dst);
	T_EQ(qps_set_nonblock(out, 1), 0);

	qps_emu_set_stepping(tx->dev, true);
	for (i = 0; i < 4 * TX_DEPTH; i++) {
		r = qps_send(out, "x", 1, 0);
		if (r == 1)
			ok++;
		else if (r == -EAGAIN)
			again++;
		else
			other++;
	}
	printf("\n    device stopped: %d sent, %d -EAGAIN\n", ok, again);
	T_EQ(other, 0);
	T_GE(again, 2 * TX_DEPTH);
	T_LE(ok, 2 * TX_DEPTH);
	T_GE(ok, 1);

	/* Device runs again: the backlog drains, sends succeed again. */
	qps_emu_set_stepping(tx->dev, false);
	T_GE(qps_ctx_flush(tx), 0);
	T_GE(qps_ctx_progress(tx), 0);
	T_EQ(qps_send(out, "y", 1, 0), 1);
	ok++;
	T_GE(qps_ctx_flush(tx), 0);
	got = recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)ok, (uint64_t)got, &ts, &rs);
	T_EQ(got, ok);
	t_suite_end();
}

struct restarter {
	struct qps_ctx *ctx;
	unsigned int after_ms;
};

static void *restart_device(void *arg)
{
	struct restarter *r = arg;

	t_sleep_ms(r->after_ms);
	qps_emu_set_stepping(r->ctx->dev, false);
	return NULL;
}

/* Send queue full, blocking sender: SNDTIMEO bounds the wait with
 * -EAGAIN; without it the send waits until the device frees a slot. */
static void test_sq_full_sndtimeo(void)
{
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct sockaddr_in dst = t_sin("198.18.0.73", 9000);
	struct restarter rs;
	struct qps_stats a, b;
	pthread_t t;
	uint64_t t0, el;
	int ms = 100, zero = 0, ok = 0, got;
	ssize_t r;

	in = receiver(&rx, "198.18.0.73", 256);
	out = sender(&tx, "198.18.0.72", TX_DEPTH, &dst);

	qps_emu_set_stepping(tx->dev, true);
	while ((r = qps_send(out, "x", 1, QPS_MSG_DONTWAIT)) == 1)
		ok++;
	T_EQ(r, -EAGAIN);

	T_EQ(qps_setopt(out, QPS_OPT_SNDTIMEO, &ms, sizeof(ms)), 0);
	t0 = t_now_ms();
	r = qps_send(out, "x", 1, 0);
	el = t_now_ms() - t0;
	printf("\n    SNDTIMEO %d ms: -EAGAIN after %llu ms\n", ms,
	       (unsigned long long)el);
	T_EQ(r, -EAGAIN);
	T_GE(el, (uint64_t)ms);
	T_LE(el, (uint64_t)ms + 2000);

	/* No timeout: the send waits for the device, however long. */
	T_EQ(qps_setopt(out, QPS_OPT_SNDTIMEO, &zero, sizeof(zero)), 0);
	rs.ctx = tx;
	rs.after_ms = 150;
	T_EQ_FATAL(pthread_create(&t, NULL, restart_device, &rs), 0);
	t0 = t_now_ms();
	r = qps_send(out, "z", 1, 0);
	el = t_now_ms() - t0;
	pthread_join(t, NULL);
	printf("    SNDTIMEO 0: waited %llu ms for the device\n",
	       (unsigned long long)el);
	T_EQ(r, 1);
	ok++;
	T_GE(el, 100);
	T_GE(qps_ctx_flush(tx), 0);
	got = recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)ok, (uint64_t)got, &a, &b);
	T_EQ(got, ok);
	t_suite_end();
}

/* Burst into a receiver that polls nothing: once its posted buffers are
 * used up the device drops and counts (rx_no_buf, dev_rx_drops); after
 * a receive reposts them, traffic flows again. */
static void test_rx_no_buffers(void)
{
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct sockaddr_in dst = t_sin("198.18.0.75", 9000);
	struct qps_emu_counters ec;
	struct qps_stats ts, rs;
	const int rx_depth = 16, burst = 48;
	int i, sent = 0, got;

	in = receiver(&rx, "198.18.0.75", (uint32_t)rx_depth);
	out = sender(&tx, "198.18.0.74", 64, &dst);
	for (i = 0; i < burst; i++)
		if (qps_send(out, "x", 1, 0) == 1)
			sent++;
	T_EQ(sent, burst);
	T_GE(qps_ctx_flush(tx), 0);
	T_GE(qps_ctx_progress(tx), 0);

	got = recv_all(in);
	T_EQ(qps_emu_counters_all(rx->dev, &ec), 0);
	printf("\n    %d sent, %d received, rx_no_buf %llu\n", sent, got,
	       (unsigned long long)ec.dev.rx_no_buf);
	T_EQ(got, rx_depth);
	T_EQ(ec.dev.rx_no_buf, (uint64_t)(burst - rx_depth));
	t_check_delivery(tx, rx, (uint64_t)sent, (uint64_t)got, &ts, &rs);
	T_EQ(rs.dev_rx_drops, (uint64_t)(burst - rx_depth));

	/* Buffers are back: a second, smaller burst arrives whole. */
	for (i = 0; i < rx_depth / 2; i++)
		T_EQ(qps_send(out, "y", 1, 0), 1);
	sent += rx_depth / 2;
	T_GE(qps_ctx_flush(tx), 0);
	got += recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)sent, (uint64_t)got, &ts, &rs);
	T_EQ(got, rx_depth + rx_depth / 2);
	t_suite_end();
}

/* An endpoint receive queue (RCVBUF) full: counted in rx_queue_full, the
 * buffers go back to the device, later datagrams are queued again. */
static void test_rxq_full(void)
{
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct sockaddr_in dst = t_sin("198.18.0.77", 9000);
	struct qps_stats ts, rs;
	int rcvbuf = 4, sent = 0, got;

	in = receiver(&rx, "198.18.0.77", 64);
	T_EQ(qps_setopt(in, QPS_OPT_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	out = sender(&tx, "198.18.0.76", 64, &dst);
	sent += send_flush(out, "x", 16);
	T_GE(qps_ctx_progress(rx), 0);
	got = recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)sent, (uint64_t)got, &ts, &rs);
	T_EQ(got, rcvbuf);
	T_EQ(rs.rx_queue_full, (uint64_t)(sent - rcvbuf));

	/* Every buffer was returned: a full ring's worth still arrives. */
	sent += send_flush(out, "y", rcvbuf);
	got += recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)sent, (uint64_t)got, &ts, &rs);
	T_EQ(got, 2 * rcvbuf);
	t_suite_end();
}

/*
 * A completion queue overrun (completions lost: injected, since emu sizes
 * its CQs so that it cannot happen by itself): the call that finds it
 * reports -EIO once, what did arrive is still delivered, and the context
 * keeps working.
 */
static void test_cq_overrun(void)
{
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct sockaddr_in dst = t_sin("198.18.0.79", 9000);
	struct qps_stats ts, rs;
	int i, sent = 0, got = 0, ret, eio = 0;
	ssize_t r;

	in = receiver(&rx, "198.18.0.79", 64);
	out = sender(&tx, "198.18.0.78", 64, &dst);

	/* Receive CQ. */
	sent += send_flush(out, "x", 4);
	qps_emu_inject_cq_overrun(rx->rx.cq);
	ret = qps_ctx_progress(rx);
	printf("\n    receive CQ overrun: progress %d (%s)\n", ret,
	       ret < 0 ? strerror(-ret) : "ok");
	T_EQ(ret, -EIO);
	got += recv_all(in);
	T_EQ(got, 4);
	T_GE(qps_ctx_progress(rx), 0);
	sent += send_flush(out, "y", 4);
	got += recv_all(in);
	T_EQ(got, 8);
	/* Found by qps_ctx_arm() instead: -EIO, and nothing left armed. */
	sent += send_flush(out, "w", 4);
	qps_emu_inject_cq_overrun(rx->rx.cq);
	T_EQ(qps_ctx_arm(rx), -EIO);
	T_EQ(qps_ctx_disarm(rx), -EINVAL);
	got += recv_all(in);
	T_EQ(got, 12);

	/* Send CQ: reported once, by the first send or progress call that
	 * polls the CQ empty (emu holds the error back until what did
	 * arrive is reaped); sending goes on (three rings' worth). */
	qps_emu_inject_cq_overrun(tx->sq[0].cq);
	for (i = 0; i < 3 * 64; i++) {
		r = qps_send(out, "z", 1, 0);
		if (r == 1)
			sent++;
		else if (r == -EIO)
			eio++;
		else
			T_EQ(r, 1);
		if (i % 8 == 7) {
			ret = qps_ctx_progress(tx);
			eio += ret == -EIO;
			if (ret != -EIO)
				T_GE(ret, 0);
			got += recv_all(in);
		}
	}
	T_GE(qps_ctx_flush(tx), 0);
	for (i = 0; i < 2; i++) {
		ret = qps_ctx_progress(tx);
		eio += ret == -EIO;
	}
	printf("    send CQ overrun: reported %d time(s)\n", eio);
	T_EQ(eio, 1);
	T_GE(qps_ctx_progress(tx), 0);
	got += recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)sent, (uint64_t)got, &ts, &rs);
	T_EQ(got, sent);
	t_suite_end();
}

/*
 * A receive buffer's reference count at its limit: the poller's hold plus
 * every one of QPS_MAX_EP endpoints (a broadcast to a full context). The
 * buffer must not go back to the device before the last release. A real
 * fan-out that size needs two descriptors per endpoint, more than this
 * machine's RLIMIT_NOFILE allows, so the count is driven here directly,
 * with the receive path's own release.
 */
static void test_rx_ref_limit(void)
{
	struct qps_ctx *rx = ctx_small("198.18.0.90", 16, 2, 1);
	uint64_t errs;
	uint32_t i, buf = 0, early = 0;

	qps_mutex_lock(&rx->rx.lock);
	errs = rx->st->rx_errors;
	rx->rx.ref[buf] = 1;			/* the poller */
	for (i = 0; i < QPS_MAX_EP; i++)	/* every endpoint */
		rx->rx.ref[buf]++;
	for (i = 0; i < QPS_MAX_EP; i++) {
		qps_rx_buf_put_locked(rx, buf);
		early += rx->rx.ref[buf] == 0;
	}
	T_EQ(early, 0);
	T_EQ(rx->rx.ref[buf], 1);
	/* The buffer sat posted on the device all along (the test only
	 * borrowed its count): give it back its posted state. */
	rx->rx.ref[buf] = 0;
	T_EQ(rx->st->rx_errors, errs);	/* no repost was attempted */
	qps_mutex_unlock(&rx->rx.lock);
	t_suite_end();
}

static void cleanup(void)
{
	t_suite_cleanup();
}

/* ------------------------------------------------------------------ */
/* A blocked sender sleeps (issue 18 item 2).                          */

struct blocked {
	struct qps_ep *ep;
	pthread_t th;
	ssize_t ret;
	uint64_t cpu_us;	/* the sender thread's CPU time in the call */
	uint64_t wall_us;
	int done;
};

static uint64_t clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

static void *blocked_run(void *arg)
{
	struct blocked *b = arg;
	uint64_t c0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
	uint64_t w0 = clock_us(CLOCK_MONOTONIC);

	b->ret = qps_send(b->ep, "b", 1, 0);
	b->cpu_us = clock_us(CLOCK_THREAD_CPUTIME_ID) - c0;
	b->wall_us = clock_us(CLOCK_MONOTONIC) - w0;
	__atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Start a sender on @ep, whose send queue is full, and let it block for
 * @ms; it must still be in the call. */
static void blocked_start(struct blocked *b, struct qps_ep *ep, int ms)
{
	memset(b, 0, sizeof(*b));
	b->ep = ep;
	T_EQ_FATAL(pthread_create(&b->th, NULL, blocked_run, b), 0);
	t_sleep_ms((unsigned int)ms);
	T_EQ(__atomic_load_n(&b->done, __ATOMIC_ACQUIRE), 0);
}

/* Wait for the sender at most 2 s after @what happened at @t0 (us);
 * returns how long it took to leave, ms. A sender still blocked then is
 * unstuck by running the device. */
static uint64_t blocked_join(struct blocked *b, struct qps_ctx *tx,
			     uint64_t t0)
{
	uint64_t end = clock_us(CLOCK_MONOTONIC) + 2000000, left;

	while (!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) &&
	       clock_us(CLOCK_MONOTONIC) < end)
		t_sleep_ms(1);
	if (!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE)) {
		CU_FAIL("the blocked sender was not woken within 2 s");
		qps_emu_set_stepping(tx->dev, false);
	}
	pthread_join(b->th, NULL);
	left = clock_us(CLOCK_MONOTONIC);
	return left > t0 ? (left - t0) / 1000 : 0;
}

/* Fill @out's send queue with the device stopped; returns the count. */
static int fill_sq(struct qps_ep *out)
{
	int ok = 0;

	while (qps_send(out, "x", 1, QPS_MSG_DONTWAIT) == 1)
		ok++;
	return ok;
}

static void on_usr1(int sig)
{
	(void)sig;
}

/*
 * A blocking send on a full send queue spins for its busy-poll budget and
 * then sleeps on the send CQ's completion event: blocked for 300 ms it
 * uses a small fraction of that in CPU time, and returns once the device
 * completes sends. It leaves with -EAGAIN after SNDTIMEO, -EINTR when a
 * signal handler ran, -EBADF when another thread closes the endpoint;
 * every datagram it accepted is delivered.
 */
static void test_sq_full_sleeps(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct sockaddr_in dst = t_sin("198.18.0.77", 9000);
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct qps_stats a, c;
	struct blocked b;
	uint64_t t0, ms;
	int ok, got, tmo = 100, zero = 0;

	in = receiver(&rx, "198.18.0.77", 256);
	out = sender(&tx, "198.18.0.76", TX_DEPTH, &dst);
	qps_emu_set_stepping(tx->dev, true);
	ok = fill_sq(out);
	T_GE(ok, 1);

	/* Blocked 300 ms, then the device runs the queue (in this thread:
	 * the engine writes the send CQEs and raises the armed CQ's event). */
	blocked_start(&b, out, 300);
	t0 = clock_us(CLOCK_MONOTONIC);
	T_GE(qps_emu_step(tx->dev, 4 * TX_DEPTH), 1);
	ms = blocked_join(&b, tx, t0);
	printf("\n    blocked %llu ms: %llu us CPU; woken %llu ms after "
	       "room", (unsigned long long)(b.wall_us / 1000),
	       (unsigned long long)b.cpu_us, (unsigned long long)ms);
	T_EQ(b.ret, 1);
	ok++;
	T_GE(b.wall_us, 250000);
	/* Far below the wall time: the budget (50 us) and a few wake-ups,
	 * not a spin (the bound leaves room for sanitizer runs). */
	T_LE(b.cpu_us * 10, b.wall_us);
	T_LE(ms, 1000);

	/* SNDTIMEO: -EAGAIN once it expires, asleep meanwhile too. */
	ok += fill_sq(out);
	T_EQ(qps_setopt(out, QPS_OPT_SNDTIMEO, &tmo, sizeof(tmo)), 0);
	blocked_start(&b, out, 0);
	blocked_join(&b, tx, clock_us(CLOCK_MONOTONIC));
	printf(", SNDTIMEO %d ms: after %llu ms, %llu us CPU", tmo,
	       (unsigned long long)(b.wall_us / 1000),
	       (unsigned long long)b.cpu_us);
	T_EQ(b.ret, -EAGAIN);
	T_GE(b.wall_us, (uint64_t)tmo * 1000);
	T_LE(b.cpu_us * 5, b.wall_us);
	T_EQ(qps_setopt(out, QPS_OPT_SNDTIMEO, &zero, sizeof(zero)), 0);

	/* A signal handler ran: -EINTR, whatever SA_RESTART says. */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	T_EQ_FATAL(sigaction(SIGUSR1, &sa, &old), 0);
	blocked_start(&b, out, 50);
	t0 = clock_us(CLOCK_MONOTONIC);
	T_EQ(pthread_kill(b.th, SIGUSR1), 0);
	ms = blocked_join(&b, tx, t0);
	sigaction(SIGUSR1, &old, NULL);
	printf(", signal: %llu ms", (unsigned long long)ms);
	T_EQ(b.ret, -EINTR);
	T_LE(ms, 1000);

	/* Another thread closes the endpoint: -EBADF. The close sends
	 * what was queued; the device then runs it all. */
	blocked_start(&b, out, 50);
	t0 = clock_us(CLOCK_MONOTONIC);
	T_EQ(qps_ep_close(out), 0);
	ms = blocked_join(&b, tx, t0);
	printf(", close: %llu ms\n", (unsigned long long)ms);
	T_EQ(b.ret, -EBADF);
	T_LE(ms, 1000);

	qps_emu_set_stepping(tx->dev, false);
	T_GE(qps_ctx_flush(tx), 0);
	T_GE(qps_ctx_progress(tx), 0);
	got = recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)ok, (uint64_t)got, &a, &c);
	T_EQ(got, ok);
	t_suite_end();
}

struct drainer {
	struct qps_ep *ep;
	pthread_t th;
	int stop;
};

/* A blocking receive on the senders' context, round after round: it
 * drains the device's event, which the sleeping senders' CQ shares. */
static void *drain_run(void *arg)
{
	struct drainer *d = arg;
	char buf[64];

	while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE))
		(void)qps_recv(d->ep, buf, sizeof(buf), 0);
	return NULL;
}

#define N_BLOCKED 4
#define N_ROUNDS 30

/*
 * Four senders asleep on one full send queue, a receiver on the same
 * context draining the shared completion event, then the device completes
 * every send and stops: each sender takes a freed slot and returns before
 * its SNDTIMEO. A wake-up lost among them (a sender asleep with its CQ
 * disarmed) shows as -EAGAIN at the timeout.
 */
static void test_sq_full_many_blocked(void)
{
	struct sockaddr_in dst = t_sin("198.18.0.79", 9000);
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
	struct qps_stats a, c;
	struct blocked b[N_BLOCKED];
	struct drainer d = { .stop = 0 };
	uint64_t t0, ms, worst = 0;
	int ok, got = 0, i, round, tmo = 1500, rtmo = 100;

	in = receiver(&rx, "198.18.0.79", 256);
	out = sender(&tx, "198.18.0.78", TX_DEPTH, &dst);
	T_EQ(qps_setopt(out, QPS_OPT_RCVTIMEO, &rtmo, sizeof(rtmo)), 0);
	qps_emu_set_stepping(tx->dev, true);
	ok = fill_sq(out);
	T_EQ(qps_setopt(out, QPS_OPT_SNDTIMEO, &tmo, sizeof(tmo)), 0);
	d.ep = out;
	T_EQ_FATAL(pthread_create(&d.th, NULL, drain_run, &d), 0);
	for (round = 0; round < N_ROUNDS; round++) {
		if (round)
			ok += fill_sq(out);
		for (i = 0; i < N_BLOCKED; i++)
			blocked_start(&b[i], out, 0);
		t_sleep_ms(50);
		for (i = 0; i < N_BLOCKED; i++)
			T_EQ(__atomic_load_n(&b[i].done, __ATOMIC_ACQUIRE), 0);
		t0 = clock_us(CLOCK_MONOTONIC);
		T_GE(qps_emu_step(tx->dev, 4 * TX_DEPTH), 1);
		for (i = 0; i < N_BLOCKED; i++) {
			ms = blocked_join(&b[i], tx, t0);
			worst = ms > worst ? ms : worst;
			T_EQ(b[i].ret, 1);
			ok += b[i].ret == 1;
		}
		/* Within the receiver's 256 buffers each round. */
		t_sleep_ms(5);
		got += recv_all(in);
	}
	printf("\n    %d rounds of %d: the last woken %llu ms after room",
	       N_ROUNDS, N_BLOCKED, (unsigned long long)worst);
	printf("\n");
	__atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
	pthread_join(d.th, NULL);
	qps_emu_set_stepping(tx->dev, false);
	T_GE(qps_ctx_flush(tx), 0);
	T_GE(qps_ctx_progress(tx), 0);
	t_sleep_ms(20);
	got += recv_all(in);
	t_check_delivery(tx, rx, (uint64_t)ok, (uint64_t)got, &a, &c);
	T_EQ(got, ok);
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "ctx_create: every allocation fails once",
		  test_ctx_create_oom },
		{ "endpoint set-up: every allocation fails once",
		  test_ep_create_oom },
		{ "ctx_create: out of descriptors", test_ctx_create_no_fds },
		{ "endpoint set-up: out of descriptors",
		  test_ep_setup_no_fds },
		{ "send queue full: non-blocking -EAGAIN",
		  test_sq_full_nonblock },
		{ "send queue full: SNDTIMEO bounds the wait",
		  test_sq_full_sndtimeo },
		{ "send queue full: the blocked sender sleeps",
		  test_sq_full_sleeps },
		{ "send queue full: four blocked senders all wake",
		  test_sq_full_many_blocked },
		{ "no posted receive buffers", test_rx_no_buffers },
		{ "endpoint receive queue full", test_rxq_full },
		{ "CQ overrun: reported once, recovers", test_cq_overrun },
		{ "a receive buffer held by max_ep endpoints",
		  test_rx_ref_limit },
		CU_TEST_INFO_NULL,
	};

	if (!t_provider_is("emu")) {
		printf("test_exhaust: SKIP: drives emu test hooks "
		       "(QPS_PROVIDER=%s)\n", t_provider());
		return T_EXIT_SKIP;
	}
	t_wire_name(g_wire, sizeof(g_wire), "exh");
	atexit(cleanup);
	return t_run("exhaust", tests);
}
