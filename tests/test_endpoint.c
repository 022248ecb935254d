// SPDX-License-Identifier: MIT
/*
 * Suite "endpoint": UDP datagram semantics of qpsock endpoints on the emu
 * provider, written against include/qpsock/qpsock.h.
 *
 * Every test opens its own wire (t_wire_name) so parallel runs never share
 * one, and destroys its contexts before returning. Contexts are tracked so a
 * test that aborts on a fatal assertion still has its contexts destroyed by
 * the next test (or at exit). No context is ever open across fork(): the
 * multi-process tests fork first and each process opens its own context.
 * Every blocking receive runs under QPS_OPT_RCVTIMEO, every pipe read under
 * poll() and every waitpid() under a deadline, so nothing can hang (the
 * wake-up cases, which must block without a timeout, give up after 2 s
 * and unstick their sleeper with a datagram).
 */
#define _GNU_SOURCE	/* RUSAGE_THREAD */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_C "198.18.0.3"
#define IP_FOREIGN "198.18.0.200"	/* on the subnet, not on the wire */

#define T_RCVTIMEO 3000		/* ms: bound on every blocking receive */
#define T_PIPE_MS 10000		/* ms: bound on every pipe handshake */
#define T_CHILD_MS 20000	/* ms: bound on waiting for a child */

/* ------------------------------------------------------------------ */
/* Assertions that print what was expected and what came back.         */

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define LE T_LE
#define GE T_GE

/* ------------------------------------------------------------------ */
/* Context tracking and small helpers.                                  */

static void set_int(struct qps_ep *ep, int opt, int v)
{
	EQ(qps_setopt(ep, opt, &v, sizeof(v)), 0);
}

static int get_int(struct qps_ep *ep, int opt)
{
	int v = -12345;
	socklen_t len = sizeof(v);

	EQ(qps_getopt(ep, opt, &v, &len), 0);
	EQ(len, sizeof(int));
	return v;
}

/* A new endpoint with a receive timeout; bound to @ip:@port if @ip. */
static struct qps_ep *mkep(struct qps_ctx *ctx, const char *ip,
			   unsigned short port)
{
	struct qps_ep *ep = NULL;

	EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ep);
	set_int(ep, QPS_OPT_RCVTIMEO, T_RCVTIMEO);
	if (ip) {
		struct sockaddr_in sin = t_sin(ip, port);

		EQ_FATAL(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	}
	return ep;
}

static ssize_t send_to(struct qps_ep *ep, const void *buf, size_t len,
		       int flags, const char *ip, unsigned short port)
{
	struct sockaddr_in d = t_sin(ip, port);

	return qps_sendto(ep, buf, len, flags, (struct sockaddr *)&d,
			  sizeof(d));
}

static unsigned short sin_port(const struct sockaddr_in *s)
{
	return ntohs(s->sin_port);
}

static uint32_t ip_of(const char *ip)
{
	struct in_addr a;

	inet_pton(AF_INET, ip, &a);
	return a.s_addr;
}

static void fill(uint8_t *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31u + i * 7u + (i >> 8));
}

static struct qps_stats stats_of(struct qps_ctx *ctx)
{
	struct qps_stats st;

	memset(&st, 0, sizeof(st));
	EQ(qps_ctx_stats(ctx, &st, sizeof(st)), sizeof(st));
	return st;
}

/* Progress @ctx until it reports no more work (bounded). */
static void progress_idle(struct qps_ctx *ctx)
{
	for (int i = 0; i < 64; i++) {
		int n = qps_ctx_progress(ctx);

		GE(n, 0);
		if (n <= 0)
			break;
	}
}

/* Receive with QPS_MSG_DONTWAIT until -EAGAIN; returns the count. */
static int drain(struct qps_ep *ep)
{
	uint8_t buf[2048];
	int n = 0;
	ssize_t r;

	while ((r = qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT)) >= 0 &&
	       n < 10000)
		n++;
	EQ(r, -EAGAIN);
	return n;
}

/* --- fork helpers ------------------------------------------------- */

static int wait_byte(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	unsigned char c;
	int rc;

	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc <= 0)
		return -1;
	if (read(fd, &c, 1) != 1)
		return -1;
	return c;
}

static void put_byte(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		perror("write pipe");
}

#define CHILD_FAIL(code, ...) \
	do { \
		fprintf(stderr, "child: " __VA_ARGS__); \
		fprintf(stderr, " (exit %d)\n", (code)); \
		return (code); \
	} while (0)

/* ------------------------------------------------------------------ */
/* Two contexts in one process.                                        */

static void test_two_ctx_datagram(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *rx, *tx, *tx2;
	struct sockaddr_in src, me;
	socklen_t sl;
	uint8_t out[300], in[2048];
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-2ctx");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);

	rx = mkep(b, IP_B, 5000);
	tx = mkep(a, IP_A, 4000);

	fill(out, sizeof(out), 1);
	EQ(send_to(tx, out, sizeof(out), 0, IP_B, 5000), sizeof(out));

	memset(in, 0, sizeof(in));
	memset(&src, 0xff, sizeof(src));
	sl = sizeof(src);
	r = qps_recvfrom(rx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl);
	EQ(r, sizeof(out));
	CU_ASSERT(memcmp(in, out, sizeof(out)) == 0);
	EQ(sl, sizeof(struct sockaddr_in));
	EQ(src.sin_family, AF_INET);
	EQ(src.sin_addr.s_addr, ip_of(IP_A));
	EQ(sin_port(&src), 4000);

	/* Reply to where it came from: the other direction works too. */
	fill(out, 17, 2);
	EQ(qps_sendto(rx, out, 17, 0, (struct sockaddr *)&src, sl), 17);
	sl = sizeof(src);
	r = qps_recvfrom(tx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl);
	EQ(r, 17);
	CU_ASSERT(memcmp(in, out, 17) == 0);
	EQ(src.sin_addr.s_addr, ip_of(IP_B));
	EQ(sin_port(&src), 5000);

	/* An unbound sender is bound to an ephemeral port on first send,
	 * and the receiver sees that port as the source. */
	tx2 = mkep(a, NULL, 0);
	fill(out, 33, 3);
	EQ(send_to(tx2, out, 33, 0, IP_B, 5000), 33);
	sl = sizeof(src);
	r = qps_recvfrom(rx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl);
	EQ(r, 33);
	CU_ASSERT(memcmp(in, out, 33) == 0);
	EQ(src.sin_addr.s_addr, ip_of(IP_A));
	CU_ASSERT(sin_port(&src) != 0);
	sl = sizeof(me);
	EQ(qps_getsockname(tx2, (struct sockaddr *)&me, &sl), 0);
	EQ(sin_port(&me), sin_port(&src));

	/* A receiver bound to INADDR_ANY gets datagrams for the port too;
	 * recvfrom with a NULL source is allowed. */
	{
		struct qps_ep *any = mkep(b, "0.0.0.0", 5001);

		fill(out, 5, 4);
		EQ(send_to(tx, out, 5, 0, IP_B, 5001), 5);
		r = qps_recvfrom(any, in, sizeof(in), 0, NULL, NULL);
		EQ(r, 5);
		CU_ASSERT(memcmp(in, out, 5) == 0);
	}

	/* Nothing else arrived anywhere. */
	EQ(drain(rx), 0);
	EQ(drain(tx), 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Two processes.                                                      */

#define XP_N 32
#define XP_RX_PORT 6000
#define XP_TX_PORT 6100

static size_t xp_len(int i)
{
	return 8 + (size_t)((i * 37) % 200);
}

static void xp_fill(uint8_t *buf, int i)
{
	size_t len = xp_len(i);

	memcpy(buf, &i, sizeof(i));
	fill(buf + 4, len - 4, (unsigned int)i);
}

/* Child side of test_two_process: receive XP_N datagrams in order. */
static int xp_child(const char *wire, int wfd)
{
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	struct sockaddr_in sin = t_sin(IP_B, XP_RX_PORT), src;
	socklen_t sl;
	uint8_t want[256], in[2048];
	int rc, v = 5000;

	rc = t_ctx_emu(wire, IP_B, &ctx);
	if (rc)
		CHILD_FAIL(10, "ctx_create: %d", rc);
	rc = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (rc)
		CHILD_FAIL(11, "ep_create: %d", rc);
	rc = qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin));
	if (rc)
		CHILD_FAIL(12, "bind: %d", rc);
	rc = qps_setopt(ep, QPS_OPT_RCVTIMEO, &v, sizeof(v));
	if (rc)
		CHILD_FAIL(13, "setopt RCVTIMEO: %d", rc);
	put_byte(wfd, 'B');

	for (int i = 0; i < XP_N; i++) {
		ssize_t r;

		sl = sizeof(src);
		r = qps_recvfrom(ep, in, sizeof(in), 0,
				 (struct sockaddr *)&src, &sl);
		if (r < 0)
			CHILD_FAIL(20, "datagram %d: recvfrom %zd", i, r);
		if ((size_t)r != xp_len(i)) {
			int seq;

			memcpy(&seq, in, sizeof(seq));
			CHILD_FAIL(21, "datagram %d: len %zd want %zu (seq %d)",
				   i, r, xp_len(i), seq);
		}
		xp_fill(want, i);
		if (memcmp(in, want, (size_t)r) != 0)
			CHILD_FAIL(22, "datagram %d: content/order differs", i);
		if (src.sin_addr.s_addr != ip_of(IP_A) ||
		    ntohs(src.sin_port) != XP_TX_PORT)
			CHILD_FAIL(23, "datagram %d: source %08x:%u", i,
				   ntohl(src.sin_addr.s_addr),
				   ntohs(src.sin_port));
	}
	rc = (int)qps_recv(ep, in, sizeof(in), QPS_MSG_DONTWAIT);
	if (rc != -EAGAIN)
		CHILD_FAIL(24, "extra datagram: recv %d", rc);
	rc = qps_ctx_destroy(ctx);
	if (rc)
		CHILD_FAIL(30, "ctx_destroy: %d", rc);
	return 0;
}

static void test_two_process(void)
{
	char wire[64];
	int c2p[2];
	pid_t pid;
	struct qps_ctx *a;
	struct qps_ep *tx;
	uint8_t out[256];
	int st;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-2proc");
	CU_ASSERT_FATAL(pipe(c2p) == 0);
	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(c2p[0]);
		_exit(xp_child(wire, c2p[1]));
	}
	close(c2p[1]);

	/* Only once the child is bound does the parent open its port. */
	if (wait_byte(c2p[0], T_PIPE_MS) != 'B') {
		CU_FAIL("child did not report bound");
		goto out;
	}
	a = t_suite_ctx(wire, IP_A);
	tx = mkep(a, IP_A, XP_TX_PORT);
	for (int i = 0; i < XP_N; i++) {
		xp_fill(out, i);
		EQ(send_to(tx, out, xp_len(i), 0, IP_B, XP_RX_PORT),
		   xp_len(i));
	}
out:
	st = t_wait_child(pid, T_CHILD_MS);
	EQ(st, 0);
	close(c2p[0]);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Sizes.                                                              */

static void test_sizes(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ctx_info info;
	struct qps_ep *rx, *tx, *ctx_ep;
	struct sockaddr_in src, d;
	socklen_t sl;
	static uint8_t out[70000], in[70000];
	uint32_t max;
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-sizes");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	memset(&info, 0, sizeof(info));
	EQ_FATAL(qps_ctx_query(a, &info), 0);
	EQ(info.max_payload, info.mtu - 28);
	EQ(info.max_payload, 1472);	/* emu: 1500-byte L3 MTU */
	max = info.max_payload;
	CU_ASSERT_FATAL(max > 1 && max < sizeof(out));

	rx = mkep(b, IP_B, 5000);
	tx = mkep(a, IP_A, 4000);
	fill(out, sizeof(out), 9);

	/* 0 bytes: a real, empty datagram. */
	EQ(send_to(tx, out, 0, 0, IP_B, 5000), 0);
	memset(in, 0xee, 16);
	sl = sizeof(src);
	r = qps_recvfrom(rx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl);
	EQ(r, 0);
	EQ(src.sin_addr.s_addr, ip_of(IP_A));
	EQ(sin_port(&src), 4000);
	EQ(in[0], 0xee);

	/* 1 byte. */
	EQ(send_to(tx, out, 1, 0, IP_B, 5000), 1);
	r = qps_recv(rx, in, sizeof(in), 0);
	EQ(r, 1);
	EQ(in[0], out[0]);

	/* Exactly the maximum payload. */
	EQ(send_to(tx, out, max, 0, IP_B, 5000), max);
	memset(in, 0, sizeof(in));
	r = qps_recv(rx, in, sizeof(in), 0);
	EQ(r, max);
	CU_ASSERT(memcmp(in, out, max) == 0);

	/* One more is fragmented, up to what IPv4 carries: each arrives
	 * whole, once. Past that, refused and nothing is sent. */
	EQ(send_to(tx, out, max + 1, 0, IP_B, 5000), max + 1);
	EQ(qps_recv(rx, in, sizeof(in), 0), max + 1);
	CU_ASSERT(memcmp(in, out, max + 1) == 0);
	EQ(send_to(tx, out + 3, 65507, 0, IP_B, 5000), 65507);
	EQ(qps_recv(rx, in, sizeof(in), 0), 65507);
	CU_ASSERT(memcmp(in, out + 3, 65507) == 0);
	EQ(send_to(tx, out, 65508, 0, IP_B, 5000), -EMSGSIZE);
	EQ(send_to(tx, out, sizeof(out), 0, IP_B, 5000), -EMSGSIZE);

	/* Same limits through a connected send. */
	ctx_ep = mkep(a, NULL, 0);
	d = t_sin(IP_B, 5000);
	EQ(qps_connect(ctx_ep, (struct sockaddr *)&d, sizeof(d)), 0);
	EQ(qps_send(ctx_ep, out, 65508, 0), -EMSGSIZE);
	EQ(qps_send(ctx_ep, out + 5, max + 9, 0), max + 9);
	EQ(qps_recv(rx, in, sizeof(in), 0), max + 9);
	CU_ASSERT(memcmp(in, out + 5, max + 9) == 0);
	EQ(qps_send(ctx_ep, out + 1, max, 0), max);
	r = qps_recv(rx, in, sizeof(in), 0);
	EQ(r, max);
	CU_ASSERT(memcmp(in, out + 1, max) == 0);

	/* The refused ones never arrived. */
	EQ(drain(rx), 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Message boundaries, truncation, peek.                               */

static void test_boundaries(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *rx, *tx;
	static const size_t lens[3] = { 100, 10, 500 };
	uint8_t out[3][512], in[2048];
	struct qps_stats s0, s1;
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-bound");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	rx = mkep(b, IP_B, 5000);
	tx = mkep(a, IP_A, 4000);

	for (int i = 0; i < 3; i++) {
		fill(out[i], lens[i], 20u + (unsigned int)i);
		EQ(send_to(tx, out[i], lens[i], 0, IP_B, 5000), lens[i]);
	}
	for (int i = 0; i < 3; i++) {
		memset(in, 0, sizeof(in));
		r = qps_recv(rx, in, sizeof(in), 0);
		EQ(r, lens[i]);
		CU_ASSERT(memcmp(in, out[i], lens[i]) == 0);
	}
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);

	/* Short buffer: the bytes copied are returned, the rest of that
	 * datagram is dropped, and the next recv gets the next datagram. */
	s0 = stats_of(b);
	EQ(send_to(tx, out[2], 200, 0, IP_B, 5000), 200);
	EQ(send_to(tx, out[1], 10, 0, IP_B, 5000), 10);
	EQ(send_to(tx, out[0], 100, 0, IP_B, 5000), 100);
	memset(in, 0x5a, sizeof(in));
	r = qps_recv(rx, in, 16, 0);
	EQ(r, 16);
	CU_ASSERT(memcmp(in, out[2], 16) == 0);
	EQ(in[16], 0x5a);	/* nothing written past the buffer */
	r = qps_recv(rx, in, sizeof(in), 0);
	EQ(r, 10);
	CU_ASSERT(memcmp(in, out[1], 10) == 0);

	/* QPS_MSG_TRUNC returns the datagram's full length. */
	memset(in, 0x5a, sizeof(in));
	r = qps_recv(rx, in, 16, QPS_MSG_TRUNC);
	EQ(r, 100);
	CU_ASSERT(memcmp(in, out[0], 16) == 0);
	EQ(in[16], 0x5a);

	/* Zero-length buffer: the datagram is consumed, 0 (or its length
	 * with QPS_MSG_TRUNC) is returned. */
	EQ(send_to(tx, out[0], 40, 0, IP_B, 5000), 40);
	EQ(send_to(tx, out[1], 7, 0, IP_B, 5000), 7);
	EQ(qps_recv(rx, in, 0, QPS_MSG_TRUNC), 40);
	EQ(qps_recv(rx, in, sizeof(in), 0), 7);

	s1 = stats_of(b);
	EQ(s1.rx_truncated - s0.rx_truncated, 3);

	/* Peek leaves the datagram queued. */
	EQ(send_to(tx, out[0], 60, 0, IP_B, 5000), 60);
	memset(in, 0, sizeof(in));
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_PEEK), 60);
	CU_ASSERT(memcmp(in, out[0], 60) == 0);
	EQ(get_int(rx, QPS_OPT_RXQ_LEN), 1);
	memset(in, 0, sizeof(in));
	EQ(qps_recv(rx, in, sizeof(in), 0), 60);
	CU_ASSERT(memcmp(in, out[0], 60) == 0);
	EQ(get_int(rx, QPS_OPT_RXQ_LEN), 0);

	EQ(drain(rx), 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Non-blocking and timeouts.                                          */

static void test_nonblock_timeout(void)
{
	char wire[64];
	struct qps_ctx *a;
	struct qps_ep *ep;
	uint8_t in[64];
	int64_t t0, dt;
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-nb");
	a = t_suite_ctx(wire, IP_A);
	ep = mkep(a, IP_A, 5000);

	EQ(qps_set_nonblock(ep, 1), 0);
	EQ(get_int(ep, QPS_OPT_NONBLOCK), 1);
	t0 = (int64_t)t_now_ms();
	EQ(qps_recv(ep, in, sizeof(in), 0), -EAGAIN);
	EQ(qps_recvfrom(ep, in, sizeof(in), 0, NULL, NULL), -EAGAIN);
	LE((int64_t)t_now_ms() - t0, 500);	/* did not wait for RCVTIMEO (3 s) */

	EQ(qps_set_nonblock(ep, 0), 0);
	EQ(get_int(ep, QPS_OPT_NONBLOCK), 0);
	EQ(qps_recv(ep, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);

	set_int(ep, QPS_OPT_NONBLOCK, 2);	/* any nonzero int is on */
	EQ(get_int(ep, QPS_OPT_NONBLOCK), 1);	/* and reads back 1 */
	EQ(qps_recv(ep, in, sizeof(in), 0), -EAGAIN);
	set_int(ep, QPS_OPT_NONBLOCK, 0);

	set_int(ep, QPS_OPT_RCVTIMEO, 100);
	EQ(get_int(ep, QPS_OPT_RCVTIMEO), 100);
	t0 = (int64_t)t_now_ms();
	r = qps_recv(ep, in, sizeof(in), 0);
	dt = (int64_t)t_now_ms() - t0;
	EQ(r, -ETIMEDOUT);
	GE(dt, 90);
	LE(dt, 1500);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Readiness fd with epoll.                                            */

static int epoll_on(struct qps_ep *ep)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd = qps_ep_fd(ep);
	int epfd;

	GE(fd, 0);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	CU_ASSERT_FATAL(epfd >= 0);
	ev.data.fd = fd;
	CU_ASSERT(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
	return epfd;
}

/*
 * Wait for one datagram the way the contract says: epoll_wait, then
 * qps_recv(DONTWAIT) until a datagram or -EAGAIN, bounded. Returns its
 * length or a negative value; *first_wait gets the first epoll_wait result.
 */
static ssize_t epoll_recv(int epfd, struct qps_ep *ep, void *buf, size_t len,
			  struct sockaddr_in *src, int *first_wait)
{
	struct epoll_event ev;

	*first_wait = -100;
	for (int iter = 0; iter < 50; iter++) {
		socklen_t sl = sizeof(*src);
		int n = epoll_wait(epfd, &ev, 1, 2000);
		ssize_t r;

		if (*first_wait == -100)
			*first_wait = n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			return -1000;	/* never became readable */
		r = qps_recvfrom(ep, buf, len, QPS_MSG_DONTWAIT,
				 (struct sockaddr *)src, &sl);
		if (r != -EAGAIN)
			return r;	/* the datagram, or an error */
	}
	return -1001;	/* readable 50 times, never a datagram */
}

static void test_epoll(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *rx, *tx;
	struct epoll_event ev;
	struct sockaddr_in src;
	uint8_t out[3][64], in[2048];
	int epfd, first;
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-epoll");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	rx = mkep(b, IP_B, 5000);
	tx = mkep(a, IP_A, 4000);
	epfd = epoll_on(rx);

	/* Idle: after a draining recv the fd is not readable. */
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(epoll_wait(epfd, &ev, 1, 0), 0);

	fill(out[0], 64, 40);
	EQ(send_to(tx, out[0], 64, 0, IP_B, 5000), 64);
	r = epoll_recv(epfd, rx, in, sizeof(in), &src, &first);
	EQ(first, 1);
	EQ(r, 64);
	CU_ASSERT(memcmp(in, out[0], 64) == 0);
	EQ(src.sin_addr.s_addr, ip_of(IP_A));
	EQ(sin_port(&src), 4000);

	/* Level semantics: readable while datagrams remain queued. */
	for (int i = 0; i < 3; i++) {
		fill(out[i], 64, 41u + (unsigned int)i);
		EQ(send_to(tx, out[i], 20u + (size_t)i, 0, IP_B, 5000),
		   20 + i);
	}
	r = epoll_recv(epfd, rx, in, sizeof(in), &src, &first);
	EQ(first, 1);
	EQ(r, 20);
	CU_ASSERT(memcmp(in, out[0], 20) == 0);
	EQ(epoll_wait(epfd, &ev, 1, 1000), 1);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 21);
	EQ(epoll_wait(epfd, &ev, 1, 1000), 1);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 22);
	CU_ASSERT(memcmp(in, out[2], 22) == 0);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(epoll_wait(epfd, &ev, 1, 0), 0);

	/* poll(2) sees the same. */
	{
		struct pollfd p = { .fd = qps_ep_fd(rx), .events = POLLIN };

		EQ(poll(&p, 1, 0), 0);
		EQ(send_to(tx, out[1], 9, 0, IP_B, 5000), 9);
		EQ(poll(&p, 1, 1000), 1);
		CU_ASSERT(p.revents & POLLIN);
		EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT) , 9);
	}
	close(epfd);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Sleep brackets: qps_ctx_arm, qps_ctx_disarm.                        */

struct late_send {
	pthread_t th;
	struct qps_ep *tx;
	int ms;
};

static void *late_send_run(void *arg)
{
	struct late_send *ls = arg;
	static const char msg[] = "late";

	usleep((useconds_t)ls->ms * 1000);
	send_to(ls->tx, msg, sizeof(msg), 0, IP_B, 5100);
	return NULL;
}

static void test_arm(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *rx, *tx;
	struct pollfd pc = { .events = POLLIN }, pe = { .events = POLLIN };
	struct late_send ls;
	uint8_t in[256];
	int64_t t0, dt;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-arm");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	rx = mkep(b, IP_B, 5100);
	tx = mkep(a, IP_A, 4100);
	pc.fd = qps_ctx_fd(b);
	pe.fd = qps_ep_fd(rx);
	GE(pc.fd, 0);
	GE(pe.fd, 0);
	EQ(qps_ctx_arm(NULL), -EINVAL);
	EQ(qps_ctx_disarm(NULL), -EINVAL);
	EQ(qps_ctx_disarm(b), -EINVAL);

	/* Before any bracket: the device wakes on every completion. */
	EQ(send_to(tx, "one", 3, 0, IP_B, 5100), 3);
	EQ(poll(&pc, 1, 1000), 1);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 3);
	EQ(send_to(tx, "two", 3, 0, IP_B, 5100), 3);
	EQ(poll(&pc, 1, 1000), 1);
	EQ(poll(&pe, 1, 1000), 1);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 3);

	/* Bracketed from now on. An arm the device has not used up yet may
	 * still fire once; the drain after it arms nothing. */
	GE(qps_ctx_arm(b), 0);
	EQ(qps_ctx_disarm(b), 0);
	EQ(qps_ctx_disarm(b), -EINVAL);
	EQ(send_to(tx, "three", 5, 0, IP_B, 5100), 5);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 5);
	EQ(send_to(tx, "four", 4, 0, IP_B, 5100), 4);
	/* Nobody sleeps: no wake-up, the completion waits unprocessed. */
	EQ(poll(&pc, 1, 100), 0);
	EQ(poll(&pe, 1, 0), 0);
	/* The arm handles it: the endpoint's descriptor is readable. */
	GE(qps_ctx_arm(b), 1);
	EQ(poll(&pe, 1, 1000), 1);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 4);
	EQ(qps_ctx_disarm(b), 0);

	/* Armed, a sleeper wakes for a datagram that comes later. */
	GE(qps_ctx_arm(b), 0);
	ls = (struct late_send){ .tx = tx, .ms = 50 };
	EQ_FATAL(pthread_create(&ls.th, NULL, late_send_run, &ls), 0);
	EQ(poll(&pe, 1, 2000), 1);
	pthread_join(ls.th, NULL);
	EQ(qps_ctx_disarm(b), 0);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 5);

	/* A blocking receive still arms for its own sleep. */
	set_int(rx, QPS_OPT_BUSY_POLL, 0);
	set_int(rx, QPS_OPT_RCVTIMEO, 3000);
	ls = (struct late_send){ .tx = tx, .ms = 50 };
	EQ_FATAL(pthread_create(&ls.th, NULL, late_send_run, &ls), 0);
	t0 = (int64_t)t_now_ms();
	EQ(qps_recv(rx, in, sizeof(in), 0), 5);
	dt = (int64_t)t_now_ms() - t0;
	pthread_join(ls.th, NULL);
	LE(dt, 1500);
	/* ... and only for it. */
	EQ(send_to(tx, "five", 4, 0, IP_B, 5100), 4);
	EQ(send_to(tx, "six", 3, 0, IP_B, 5100), 3);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 4);
	EQ(send_to(tx, "seven", 5, 0, IP_B, 5100), 5);
	EQ(poll(&pc, 1, 100), 0);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 3);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), 5);
	t_suite_end();
}

#define EPX_PORT 7000

/* Child side of test_epoll_process: send once the parent is ready. */
static int epx_child(const char *wire, int rfd, int wfd)
{
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	struct sockaddr_in d = t_sin(IP_A, EPX_PORT);
	static const char msg[] = "ping from another process";
	ssize_t r;
	int rc;

	if (wait_byte(rfd, T_PIPE_MS) != 'R')
		CHILD_FAIL(40, "parent not ready");
	rc = t_ctx_emu(wire, IP_B, &ctx);
	if (rc)
		CHILD_FAIL(41, "ctx_create: %d", rc);
	rc = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (rc)
		CHILD_FAIL(42, "ep_create: %d", rc);
	r = qps_sendto(ep, msg, sizeof(msg), 0, (struct sockaddr *)&d,
		       sizeof(d));
	if (r != (ssize_t)sizeof(msg))
		CHILD_FAIL(43, "sendto: %zd", r);
	put_byte(wfd, 'S');
	/* Keep the port until the parent has the datagram. */
	if (wait_byte(rfd, T_PIPE_MS) != 'D')
		CHILD_FAIL(44, "parent did not finish");
	rc = qps_ctx_destroy(ctx);
	if (rc)
		CHILD_FAIL(45, "ctx_destroy: %d", rc);
	return 0;
}

static void test_epoll_process(void)
{
	static const char msg[] = "ping from another process";
	char wire[64];
	int p2c[2], c2p[2], epfd = -1, first;
	pid_t pid;
	struct qps_ctx *a;
	struct qps_ep *rx;
	struct epoll_event ev;
	struct sockaddr_in src;
	uint8_t in[2048];
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-epollx");
	CU_ASSERT_FATAL(pipe(p2c) == 0);
	CU_ASSERT_FATAL(pipe(c2p) == 0);
	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(epx_child(wire, p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);

	/* The parent opens its context only after the fork. */
	a = t_suite_ctx(wire, IP_A);
	rx = mkep(a, IP_A, EPX_PORT);
	epfd = epoll_on(rx);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(epoll_wait(epfd, &ev, 1, 0), 0);
	put_byte(p2c[1], 'R');

	r = epoll_recv(epfd, rx, in, sizeof(in), &src, &first);
	EQ(first, 1);
	EQ(r, sizeof(msg));
	CU_ASSERT(r == (ssize_t)sizeof(msg) && memcmp(in, msg, sizeof(msg)) == 0);
	EQ(src.sin_addr.s_addr, ip_of(IP_B));
	CU_ASSERT(sin_port(&src) != 0);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(epoll_wait(epfd, &ev, 1, 0), 0);
	EQ(wait_byte(c2p[0], T_PIPE_MS), 'S');

	put_byte(p2c[1], 'D');
	EQ(t_wait_child(pid, T_CHILD_MS), 0);
	close(epfd);
	close(p2c[1]);
	close(c2p[0]);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* connect.                                                            */

static void test_connect(void)
{
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *rx, *s1, *s2, *s3, *cx;
	struct sockaddr_in d, got, src, unspec;
	socklen_t sl;
	uint8_t in[256];
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-conn");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	c = t_suite_ctx(wire, IP_C);
	rx = mkep(a, IP_A, 5000);
	s1 = mkep(b, IP_B, 6000);
	s2 = mkep(b, IP_B, 6001);
	s3 = mkep(c, IP_C, 6000);

	/* Not connected yet. */
	sl = sizeof(got);
	EQ(qps_getpeername(s1, (struct sockaddr *)&got, &sl), -ENOTCONN);
	EQ(qps_send(s1, "x", 1, 0), -EDESTADDRREQ);

	/* A connected sender reaches its peer with send(). */
	d = t_sin(IP_A, 5000);
	EQ(qps_connect(s1, (struct sockaddr *)&d, sizeof(d)), 0);
	sl = sizeof(got);
	memset(&got, 0, sizeof(got));
	EQ(qps_getpeername(s1, (struct sockaddr *)&got, &sl), 0);
	EQ(sl, sizeof(struct sockaddr_in));
	EQ(got.sin_family, AF_INET);
	EQ(got.sin_addr.s_addr, ip_of(IP_A));
	EQ(sin_port(&got), 5000);
	sl = sizeof(got);
	memset(&got, 0, sizeof(got));
	EQ(qps_getsockname(s1, (struct sockaddr *)&got, &sl), 0);
	EQ(sl, sizeof(struct sockaddr_in));
	EQ(got.sin_family, AF_INET);
	EQ(got.sin_addr.s_addr, ip_of(IP_B));
	EQ(sin_port(&got), 6000);

	for (int i = 0; i < 3; i++) {
		char m[16];
		int n = snprintf(m, sizeof(m), "conn-%d", i);

		EQ(qps_send(s1, m, (size_t)n, 0), n);
		sl = sizeof(src);
		r = qps_recvfrom(rx, in, sizeof(in), 0,
				 (struct sockaddr *)&src, &sl);
		EQ(r, n);
		CU_ASSERT(r == n && memcmp(in, m, (size_t)n) == 0);
		EQ(src.sin_addr.s_addr, ip_of(IP_B));
		EQ(sin_port(&src), 6000);
	}
	/* Connecting an unbound endpoint binds it to an ephemeral port;
	 * as on Linux it then names the address its datagrams leave from. */
	cx = mkep(b, NULL, 0);
	EQ(qps_connect(cx, (struct sockaddr *)&d, sizeof(d)), 0);
	sl = sizeof(got);
	memset(&got, 0, sizeof(got));
	EQ(qps_getsockname(cx, (struct sockaddr *)&got, &sl), 0);
	EQ(got.sin_family, AF_INET);
	EQ(got.sin_addr.s_addr, ip_of(IP_B));
	CU_ASSERT(sin_port(&got) != 0);
	EQ(qps_send(cx, "eph", 3, 0), 3);
	sl = sizeof(src);
	EQ(qps_recvfrom(rx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl),
	   3);
	EQ(sin_port(&src), sin_port(&got));
	memset(&unspec, 0, sizeof(unspec));
	unspec.sin_family = AF_UNSPEC;
	EQ(qps_connect(cx, (struct sockaddr *)&unspec, sizeof(unspec)), 0);
	sl = sizeof(got);
	EQ(qps_getsockname(cx, (struct sockaddr *)&got, &sl), 0);
	EQ(got.sin_addr.s_addr, INADDR_ANY);	/* wildcard again */

	/* A connected receiver takes datagrams only from its peer:
	 * same address other port (s2) and other address same port (s3)
	 * are ignored; the peer's (s1) arrives. */
	d = t_sin(IP_B, 6000);
	EQ(qps_connect(rx, (struct sockaddr *)&d, sizeof(d)), 0);
	EQ(send_to(s2, "bad-port", 8, 0, IP_A, 5000), 8);
	EQ(send_to(s3, "bad-addr", 8, 0, IP_A, 5000), 8);
	EQ(qps_send(s1, "good", 4, 0), 4);
	sl = sizeof(src);
	memset(in, 0, sizeof(in));
	r = qps_recvfrom(rx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl);
	EQ(r, 4);
	CU_ASSERT(memcmp(in, "good", 4) == 0);
	EQ(src.sin_addr.s_addr, ip_of(IP_B));
	EQ(sin_port(&src), 6000);
	progress_idle(a);
	EQ(qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);

	/* AF_UNSPEC disconnects: send needs a destination again, the peer
	 * is gone, and datagrams from anyone are accepted. */
	memset(&unspec, 0, sizeof(unspec));
	unspec.sin_family = AF_UNSPEC;
	EQ(qps_connect(s1, (struct sockaddr *)&unspec, sizeof(unspec)), 0);
	EQ(qps_send(s1, "x", 1, 0), -EDESTADDRREQ);
	sl = sizeof(got);
	EQ(qps_getpeername(s1, (struct sockaddr *)&got, &sl), -ENOTCONN);
	/* It stays bound where it was. */
	sl = sizeof(got);
	EQ(qps_getsockname(s1, (struct sockaddr *)&got, &sl), 0);
	EQ(sin_port(&got), 6000);

	EQ(qps_connect(rx, (struct sockaddr *)&unspec, sizeof(unspec)), 0);
	EQ(send_to(s2, "any-port", 8, 0, IP_A, 5000), 8);
	sl = sizeof(src);
	r = qps_recvfrom(rx, in, sizeof(in), 0, (struct sockaddr *)&src, &sl);
	EQ(r, 8);
	CU_ASSERT(memcmp(in, "any-port", 8) == 0);
	EQ(sin_port(&src), 6001);

	/* Reconnect to another peer works. */
	d = t_sin(IP_C, 6000);
	EQ(qps_connect(s1, (struct sockaddr *)&d, sizeof(d)), 0);
	EQ(qps_send(s1, "re", 2, 0), 2);
	sl = sizeof(src);
	EQ(qps_recvfrom(s3, in, sizeof(in), 0, (struct sockaddr *)&src, &sl),
	   2);
	EQ(src.sin_addr.s_addr, ip_of(IP_B));
	EQ(sin_port(&src), 6000);

	EQ(drain(rx), 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Broadcast.                                                          */

/* Limited and (on emu, whose wire is one /24) directed broadcast reach
 * every wildcard-bound endpoint of the port, on every context, once;
 * an endpoint bound to its unicast address does not take them. */
static void test_broadcast(void)
{
	const char *dsts[] = { "255.255.255.255", "198.18.0.255" };
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *tx, *b1, *b2, *bu, *c1;
	uint8_t in[64];
	unsigned int i, n = t_provider_is("emu") ? 2 : 1;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-bcast");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	c = t_suite_ctx(wire, IP_C);
	tx = mkep(a, IP_A, 4000);
	EQ_FATAL(qps_ep_create(b, QPS_EP_DGRAM, &b1), 0);
	EQ_FATAL(qps_ep_create(b, QPS_EP_DGRAM, &b2), 0);
	set_int(b1, QPS_OPT_REUSEADDR, 1);
	set_int(b2, QPS_OPT_REUSEADDR, 1);
	{
		struct sockaddr_in any = t_sin("0.0.0.0", 6100);

		EQ_FATAL(qps_bind(b1, (struct sockaddr *)&any, sizeof(any)), 0);
		EQ_FATAL(qps_bind(b2, (struct sockaddr *)&any, sizeof(any)), 0);
	}
	set_int(b1, QPS_OPT_RCVTIMEO, T_RCVTIMEO);
	set_int(b2, QPS_OPT_RCVTIMEO, T_RCVTIMEO);
	bu = mkep(b, IP_B, 6101);
	c1 = mkep(c, "0.0.0.0", 6100);

	for (i = 0; i < n; i++) {
		EQ(send_to(tx, dsts[i], 3, 0, dsts[i], 6100), 3);
		EQ(send_to(tx, "bu", 2, 0, dsts[i], 6101), 2);
		EQ(qps_recv(b1, in, sizeof(in), 0), 3);
		EQ(qps_recv(b2, in, sizeof(in), 0), 3);
		EQ(qps_recv(c1, in, sizeof(in), 0), 3);
		progress_idle(b);
		EQ(drain(b1), 0);
		EQ(drain(b2), 0);
		EQ(drain(c1), 0);
		EQ(drain(bu), 0);
	}
	/* Unicast to b's address still goes to one endpoint only. */
	EQ(send_to(tx, "uni", 3, 0, IP_B, 6100), 3);
	progress_idle(b);
	EQ(drain(b1) + drain(b2), 1);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Wake-ups of a blocked receive (no timeout, no traffic).             */

/* The bound on a wake-up, ms: 10 (api.md: a sleeper is woken at once);
 * the sanitizer and valgrind runs raise it with QPS_TEST_WAKE_MS. */
static uint64_t wake_ms(void)
{
	const char *e = getenv("QPS_TEST_WAKE_MS");

	return e && *e ? strtoull(e, NULL, 10) : 10;
}
#define WAKE_MS wake_ms()

struct sleeper {
	struct qps_ep *ep;
	pthread_t th;
	ssize_t ret;
	uint64_t done_us;
	int done;
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

static void *sleeper_run(void *arg)
{
	struct sleeper *sl = arg;
	char buf[64];

	sl->ret = qps_recv(sl->ep, buf, sizeof(buf), 0);
	sl->done_us = now_us();
	__atomic_store_n(&sl->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Start a thread blocked in qps_recv(@ep) and give it time to fall
 * asleep. */
static void sleeper_start(struct sleeper *sl, struct qps_ep *ep)
{
	memset(sl, 0, sizeof(*sl));
	sl->ep = ep;
	EQ_FATAL(pthread_create(&sl->th, NULL, sleeper_run, sl), 0);
	t_sleep_ms(50);
	EQ(__atomic_load_n(&sl->done, __ATOMIC_ACQUIRE), 0);
}

/* Wait for the sleeper, at most 2 s; @unstick: a datagram that wakes
 * a sleeper the fix under test failed to wake, so the suite goes on. */
static uint64_t sleeper_join(struct sleeper *sl, struct qps_ep *unstick,
			     const char *ip, unsigned short port, uint64_t t0)
{
	uint64_t end = now_us() + 2000000;

	while (!__atomic_load_n(&sl->done, __ATOMIC_ACQUIRE) && now_us() < end)
		t_sleep_ms(1);
	if (!__atomic_load_n(&sl->done, __ATOMIC_ACQUIRE)) {
		CU_FAIL("the blocked receive was not woken within 2 s");
		if (unstick)
			send_to(unstick, "x", 1, 0, ip, port);
	}
	pthread_join(sl->th, NULL);
	return sl->done_us > t0 ? (sl->done_us - t0) / 1000 : 0;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void test_wakeups(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	char wire[64], buf[16];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *ep, *tx;
	struct sleeper sl;
	uint64_t t0, ms;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-wake");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(b, IP_B, 4000);

	/* Close from another thread: -EBADF at once. */
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &ep), 0);
	sleeper_start(&sl, ep);
	t0 = now_us();
	EQ(qps_ep_close(ep), 0);
	ms = sleeper_join(&sl, tx, IP_A, 1, t0);
	EQ(sl.ret, -EBADF);
	LE(ms, WAKE_MS);
	printf("\n    woken by close after %llu ms", (unsigned long long)ms);

	/* shutdown(SHUT_RD): what is queued, then 0, without sleeping;
	 * unconnected, so -ENOTCONN as Linux says, done all the same. */
	ep = mkep(a, IP_A, 5001);
	set_int(ep, QPS_OPT_RCVTIMEO, 0);
	EQ(send_to(tx, "q", 1, 0, IP_A, 5001), 1);
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 1);
	sleeper_start(&sl, ep);
	t0 = now_us();
	EQ(qps_shutdown(ep, SHUT_RD), -ENOTCONN);
	ms = sleeper_join(&sl, tx, IP_A, 5001, t0);
	EQ(sl.ret, 0);
	LE(ms, WAKE_MS);
	printf(", shutdown after %llu ms", (unsigned long long)ms);
	EQ(send_to(tx, "late", 4, 0, IP_A, 5001), 4);
	progress_idle(a);
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 4);	/* still queued */
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 0);	/* then EOF */
	EQ(qps_shutdown(ep, 7), -EINVAL);
	EQ(qps_shutdown(ep, SHUT_WR), -ENOTCONN);
	EQ(send_to(ep, "w", 1, 0, IP_B, 4000), -EPIPE);
	EQ(qps_ep_close(ep), 0);
	EQ(qps_shutdown(ep, SHUT_RD), -EBADF);

	/* A signal handler ran: -EINTR, whatever SA_RESTART says. */
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	EQ_FATAL(sigaction(SIGUSR1, &sa, &old), 0);
	ep = mkep(a, IP_A, 5002);
	set_int(ep, QPS_OPT_RCVTIMEO, 0);
	sleeper_start(&sl, ep);
	t0 = now_us();
	EQ(pthread_kill(sl.th, SIGUSR1), 0);
	ms = sleeper_join(&sl, tx, IP_A, 5002, t0);
	EQ(sl.ret, -EINTR);
	LE(ms, WAKE_MS);
	printf(", signal after %llu ms", (unsigned long long)ms);
	sigaction(SIGUSR1, &old, NULL);

	/* qps_ep_wait: 0 on timeout, 1 once a datagram is queued (taking
	 * nothing), even on a non-blocking endpoint; woken by close. */
	ep = mkep(a, IP_A, 5004);
	EQ(qps_set_nonblock(ep, 1), 0);
	EQ(qps_ep_wait(ep, 0), 0);
	EQ(qps_ep_wait(ep, 20), 0);
	EQ(send_to(tx, "w", 1, 0, IP_A, 5004), 1);
	EQ(qps_ep_wait(ep, 1000), 1);
	EQ(qps_ep_wait(ep, -1), 1);
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 1);
	EQ(qps_ep_wait(ep, 0), 0);
	EQ(qps_ep_close(ep), 0);
	EQ(qps_ep_wait(ep, 0), -EBADF);
	EQ(qps_ep_wait(NULL, 0), -EBADF);

	/* The context destroyed: every sleeper leaves before it is freed,
	 * also one still spinning in its busy-poll budget (ASan would see
	 * the destroyed context used otherwise). */
	c = NULL;
	EQ_FATAL(t_ctx_emu(wire, IP_C, &c), 0);
	ep = mkep(c, IP_C, 5003);
	set_int(ep, QPS_OPT_RCVTIMEO, 0);
	set_int(ep, QPS_OPT_BUSY_POLL, 500000);
	sleeper_start(&sl, ep);
	t0 = now_us();
	EQ(qps_ctx_destroy(c), 0);
	ms = sleeper_join(&sl, NULL, NULL, 0, t0);
	EQ(sl.ret, -EBADF);
	/* A sleeper that spins is woken by no system call, which would give
	 * it the CPU early: it sees the destroy when it next runs, and with
	 * two cores busy (ctest -j2) that can be a scheduling period away.
	 * Still far below its budget (500 ms), which a destroy that did not
	 * wake it would have it spend first. */
	LE(ms, 5 * WAKE_MS);
	printf(", destroy after %llu ms\n", (unsigned long long)ms);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Busy-poll budget.                                                   */

static uint64_t thread_cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* CPU ms of a blocking receive that waits @wait_ms for nothing. */
static uint64_t idle_recv_cpu(struct qps_ep *ep, int wait_ms)
{
	char buf[16];
	uint64_t c0;

	set_int(ep, QPS_OPT_RCVTIMEO, wait_ms);
	c0 = thread_cpu_ms();
	EQ(qps_recv(ep, buf, sizeof(buf), 0), -ETIMEDOUT);
	return thread_cpu_ms() - c0;
}

/*
 * A blocking receive spins (progressing the device) for its budget, then
 * sleeps: idle for 1 s with a 100 ms budget it burns about 100 ms of CPU,
 * not more than 2% of the second above it; with 0, almost nothing. The
 * context default comes from the attribute or $QPS_BUSY_POLL.
 */
static void test_busy_poll(void)
{
	struct qps_ctx_attr attr;
	struct qps_ctx *a, *c = NULL;
	struct qps_ep *ep, *e2 = NULL;
	char wire[64];
	uint64_t spun, slept;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-busy");
	a = t_suite_ctx(wire, IP_A);
	ep = mkep(a, IP_A, 5100);
	EQ(get_int(ep, QPS_OPT_BUSY_POLL), QPS_BUSY_POLL_DEFAULT_US);

	set_int(ep, QPS_OPT_BUSY_POLL, 100000);
	EQ(get_int(ep, QPS_OPT_BUSY_POLL), 100000);
	spun = idle_recv_cpu(ep, 1000);
	set_int(ep, QPS_OPT_BUSY_POLL, 0);
	slept = idle_recv_cpu(ep, 1000);
	printf("\n    idle 1 s: %llu ms CPU with a 100 ms budget, %llu ms "
	       "with none\n", (unsigned long long)spun,
	       (unsigned long long)slept);
	/* Spinning is on CPU only while the thread is scheduled: under load
	 * less than the budget is spent, never more (plus 2% of the wait). */
	GE(spun, 25);
	LE(spun, 100 + 20);
	LE(slept, 20);

	{
		int bad = -1, big = QPS_BUSY_POLL_MAX_US + 1;

		EQ(qps_setopt(ep, QPS_OPT_BUSY_POLL, &bad, sizeof(bad)),
		   -EINVAL);
		EQ(qps_setopt(ep, QPS_OPT_BUSY_POLL, &big, sizeof(big)),
		   -EINVAL);
	}

	/* The context default: attribute, then environment. */
	attr = t_emu_attr(wire, IP_B);
	attr.comp_mask |= QPS_CTX_ATTR_BUSY_POLL;
	attr.busy_poll_us = 7;
	EQ_FATAL(qps_ctx_create(&attr, &c), 0);
	EQ_FATAL(qps_ep_create(c, QPS_EP_DGRAM, &e2), 0);
	EQ(get_int(e2, QPS_OPT_BUSY_POLL), 7);
	EQ(qps_ctx_destroy(c), 0);
	attr.busy_poll_us = QPS_BUSY_POLL_MAX_US + 1;
	EQ(qps_ctx_create(&attr, &c), -EINVAL);
	attr = t_emu_attr(wire, IP_B);
	setenv("QPS_BUSY_POLL", "9", 1);
	EQ_FATAL(qps_ctx_create(&attr, &c), 0);
	EQ_FATAL(qps_ep_create(c, QPS_EP_DGRAM, &e2), 0);
	EQ(get_int(e2, QPS_OPT_BUSY_POLL), 9);
	EQ(qps_ctx_destroy(c), 0);
	setenv("QPS_BUSY_POLL", "9x", 1);
	EQ(qps_ctx_create(&attr, &c), -EINVAL);
	unsetenv("QPS_BUSY_POLL");
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Timestamps.                                                         */

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The error a conversion of device stamps to CLOCK_REALTIME may add. */
#define TS_SLACK_NS 1000000u

/* Receive one datagram with its metadata; returns msg->flags. */
static uint32_t recv_ts(struct qps_ep *ep, uint64_t *ts)
{
	char buf[64];
	struct qps_rxmsg m = { .buf = buf, .len = sizeof(buf) };

	GE(qps_recvmsg(ep, &m, 0), 0);
	*ts = m.ts_ns;
	return m.flags;
}

/* Collect @n transmit reports of @ep (bounded), checking their order. */
static int txts_collect(struct qps_ep *ep, struct qps_txts *r, int n)
{
	int got = 0, tries;

	for (tries = 0; got < n && tries < 1000; tries++) {
		int k = qps_recv_txts(ep, r + got, (unsigned int)(n - got), 0);

		if (k == -EAGAIN) {
			t_sleep_ms(1);
			continue;
		}
		GE(k, 1);
		if (k < 0)
			break;
		got += k;
	}
	return got;
}

/*
 * QPS_OPT_TIMESTAMP on emu (and on verbs over the test double, whose
 * extended CQs carry emu's clock): receive stamps come from the device's
 * clock (on a provider without one: the host's, as asked for too),
 * flagged so, rise datagram by datagram (one at a time and in a burst
 * polled as one batch), and lie between the send and the receive by
 * CLOCK_REALTIME; software stamps when only those are asked for; none
 * when off. Every datagram sent with transmit stamps on is reported
 * once, numbered in send order, with both times.
 */
static void test_timestamps(void)
{
	enum { N = 64, BURST = 24 };
	struct qps_txts rep[N + 1];
	struct qps_ctx *a, *b;
	struct qps_ep *rx, *tx;
	uint64_t t0, t1, ts, last = 0, worst = 0, start, lat[N], med;
	/* Which receive flag, which transmit times. */
	const bool dev = t_provider_is("emu") || t_provider_is("verbs");
	const uint32_t rxf = dev ? QPS_RXMSG_TS_DEVICE : QPS_RXMSG_TS_SOFTWARE;
	const uint32_t txf = QPS_TXTS_SOFTWARE | (dev ? QPS_TXTS_DEVICE : 0);
	char wire[64];
	int i, bad = 0x10, got;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-ts");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	rx = mkep(a, IP_A, 5200);
	tx = mkep(b, IP_B, 5201);

	EQ(get_int(rx, QPS_OPT_TIMESTAMP), 0);
	EQ(qps_setopt(rx, QPS_OPT_TIMESTAMP, &bad, sizeof(bad)), -EINVAL);
	set_int(rx, QPS_OPT_TIMESTAMP, QPS_TS_RX_DEVICE | QPS_TS_RX_SOFTWARE);
	EQ(get_int(rx, QPS_OPT_TIMESTAMP),
	   QPS_TS_RX_DEVICE | QPS_TS_RX_SOFTWARE);
	set_int(tx, QPS_OPT_TIMESTAMP, QPS_TS_TX_SOFTWARE | QPS_TS_TX_DEVICE);

	/* One at a time: each stamp between its send and its receive. */
	start = realtime_ns();
	for (i = 0; i < N; i++) {
		uint32_t f;

		t0 = realtime_ns();
		EQ(send_to(tx, &i, sizeof(i), 0, IP_A, 5200), sizeof(i));
		f = recv_ts(rx, &ts);
		t1 = realtime_ns();
		EQ(f & (QPS_RXMSG_TS_DEVICE | QPS_RXMSG_TS_SOFTWARE |
			QPS_RXMSG_PKTINFO), rxf);
		GE(ts + TS_SLACK_NS, t0);
		LE(ts, t1 + TS_SLACK_NS);
		GE(ts, last);
		lat[i] = ts > t0 ? ts - t0 : 0;
		if (ts > t1 && ts - t1 > worst)
			worst = ts - t1;
		if (ts < t0 && t0 - ts > worst)
			worst = t0 - ts;
		last = ts;
	}
	qsort(lat, N, sizeof(lat[0]), cmp_u64);
	med = lat[N / 2];
	printf("\n    %d %s stamps within their send..receive window "
	       "(worst outside: %llu ns), median %llu ns after the send "
	       "began", N, dev ? "device" : "software",
	       (unsigned long long)worst, (unsigned long long)med);
	/* The device stamps a datagram as the sender's doorbell delivers
	 * it: within 50 us of the send (issue 18), scaled like the
	 * wake-up bound for instrumented runs. */
	if (dev)
		LE(med, 50000u * WAKE_MS / 10);

	/* A burst polled together: still rising. */
	for (i = 0; i < BURST; i++)
		EQ(send_to(tx, &i, sizeof(i), 0, IP_A, 5200), sizeof(i));
	for (i = 0; i < BURST; i++) {
		EQ(recv_ts(rx, &ts) & rxf, rxf);
		GE(ts, last);
		last = ts;
	}

	/* Transmit: one report per datagram, in order, both times. */
	got = txts_collect(tx, rep, N);
	EQ(got, N);
	for (i = 0; i < got; i++) {
		EQ(rep[i].id, (uint32_t)i);
		EQ(rep[i].flags, txf);
		GE(rep[i].sw_ns, start);
		if (!dev)
			continue;
		GE(rep[i].dev_ns + TS_SLACK_NS, rep[i].sw_ns);
		LE(rep[i].dev_ns, realtime_ns() + TS_SLACK_NS);
	}
	got = txts_collect(tx, rep, BURST);
	EQ(got, BURST);
	for (i = 0; i < got; i++)
		EQ(rep[i].id, (uint32_t)(N + i));
	EQ(qps_recv_txts(tx, rep, 4, QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_recv_txts(tx, rep, 0, 0), 0);
	EQ(qps_recv_txts(tx, rep, 1, 0x1000), -EINVAL);
	EQ(qps_recv_txts(tx, NULL, 1, 0), -EFAULT);
	EQ(qps_recv_txts(NULL, rep, 1, 0), -EBADF);

	/* Software only: the host's time, flagged so. */
	set_int(rx, QPS_OPT_TIMESTAMP, QPS_TS_RX_SOFTWARE);
	t0 = realtime_ns();
	EQ(send_to(tx, "s", 1, 0, IP_A, 5200), 1);
	EQ(recv_ts(rx, &ts) & (QPS_RXMSG_TS_DEVICE | QPS_RXMSG_TS_SOFTWARE),
	   QPS_RXMSG_TS_SOFTWARE);
	GE(ts, t0);
	LE(ts, realtime_ns());

	/* Off: nothing; PKTINFO alone keeps its demultiplexing time. */
	set_int(rx, QPS_OPT_TIMESTAMP, 0);
	EQ(send_to(tx, "o", 1, 0, IP_A, 5200), 1);
	EQ(recv_ts(rx, &ts), 0);
	EQ(ts, 0);
	set_int(rx, QPS_OPT_PKTINFO, 1);
	EQ(send_to(tx, "p", 1, 0, IP_A, 5200), 1);
	EQ(recv_ts(rx, &ts), QPS_RXMSG_PKTINFO);
	GE(ts, t0);

	/* Reports still due when the sender closes go nowhere. */
	EQ(send_to(tx, "c", 1, 0, IP_A, 5200), 1);
	EQ(qps_ep_close(tx), 0);
	EQ(qps_recv_txts(tx, rep, 1, 0), -EBADF);
	printf("\n");
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* bind.                                                               */

static void test_bind(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *e0, *e0b, *e1, *e2, *r1, *r2, *r3, *f, *tx;
	struct sockaddr_in s, got, got2;
	socklen_t sl;
	uint8_t in[64];

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-bind");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);

	/* Port 0: an ephemeral port, different for two endpoints. */
	e0 = mkep(a, IP_A, 0);
	e0b = mkep(a, "0.0.0.0", 0);
	sl = sizeof(got);
	memset(&got, 0, sizeof(got));
	EQ(qps_getsockname(e0, (struct sockaddr *)&got, &sl), 0);
	EQ(sl, sizeof(struct sockaddr_in));
	EQ(got.sin_family, AF_INET);
	EQ(got.sin_addr.s_addr, ip_of(IP_A));
	CU_ASSERT(sin_port(&got) != 0);
	sl = sizeof(got2);
	memset(&got2, 0, sizeof(got2));
	EQ(qps_getsockname(e0b, (struct sockaddr *)&got2, &sl), 0);
	CU_ASSERT(sin_port(&got2) != 0);
	CU_ASSERT(sin_port(&got2) != sin_port(&got));
	/* The ephemeral port receives. */
	tx = mkep(b, IP_B, 4000);
	EQ(send_to(tx, "eph", 3, 0, IP_A, sin_port(&got)), 3);
	EQ(qps_recv(e0, in, sizeof(in), 0), 3);

	/* Binding twice. */
	s = t_sin(IP_A, 7100);
	EQ(qps_bind(e0, (struct sockaddr *)&s, sizeof(s)), -EINVAL);

	/* A taken port. */
	e1 = mkep(a, IP_A, 7000);
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &e2), 0);
	s = t_sin(IP_A, 7000);
	EQ(qps_bind(e2, (struct sockaddr *)&s, sizeof(s)), -EADDRINUSE);
	s = t_sin("0.0.0.0", 7000);
	EQ(qps_bind(e2, (struct sockaddr *)&s, sizeof(s)), -EADDRINUSE);
	/* A failed bind leaves the endpoint unbound: it can bind elsewhere. */
	s = t_sin(IP_A, 7001);
	EQ(qps_bind(e2, (struct sockaddr *)&s, sizeof(s)), 0);

	/* Closing frees the port. */
	EQ(qps_ep_close(e1), 0);
	e1 = mkep(a, IP_A, 7000);

	/* QPS_OPT_REUSEADDR on both: shared; on only one: refused. */
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &r1), 0);
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &r2), 0);
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &r3), 0);
	set_int(r1, QPS_OPT_REUSEADDR, 1);
	set_int(r2, QPS_OPT_REUSEADDR, 1);
	EQ(get_int(r1, QPS_OPT_REUSEADDR), 1);
	EQ(get_int(r3, QPS_OPT_REUSEADDR), 0);
	s = t_sin(IP_A, 7200);
	EQ(qps_bind(r1, (struct sockaddr *)&s, sizeof(s)), 0);
	EQ(qps_bind(r2, (struct sockaddr *)&s, sizeof(s)), 0);
	EQ(qps_bind(r3, (struct sockaddr *)&s, sizeof(s)), -EADDRINUSE);
	/* ... and a reuse endpoint on a port held without reuse: refused. */
	s = t_sin(IP_A, 7000);
	EQ(qps_bind(r3, (struct sockaddr *)&s, sizeof(s)), -EADDRINUSE);
	set_int(r3, QPS_OPT_REUSEADDR, 1);
	EQ(qps_bind(r3, (struct sockaddr *)&s, sizeof(s)), -EADDRINUSE);

	/* Foreign addresses. */
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &f), 0);
	s = t_sin(IP_FOREIGN, 7300);
	EQ(qps_bind(f, (struct sockaddr *)&s, sizeof(s)), -EADDRNOTAVAIL);
	s = t_sin(IP_B, 7300);	/* another port's address on this wire */
	EQ(qps_bind(f, (struct sockaddr *)&s, sizeof(s)), -EADDRNOTAVAIL);
	s = t_sin("10.9.8.7", 7300);
	EQ(qps_bind(f, (struct sockaddr *)&s, sizeof(s)), -EADDRNOTAVAIL);
	/* Still unbound after the failures. */
	s = t_sin(IP_A, 7300);
	EQ(qps_bind(f, (struct sockaddr *)&s, sizeof(s)), 0);

	/* Same port number on another context is independent. */
	{
		struct qps_ep *ob = mkep(b, IP_B, 7000);

		CU_ASSERT_PTR_NOT_NULL(ob);
	}
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Unreachable destinations.                                           */

static void test_unreachable(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx, *cx;
	struct sockaddr_in d;
	uint8_t in[64];
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-unreach");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(a, IP_A, 4000);
	rx = mkep(b, IP_B, 5000);

	EQ(send_to(tx, "lost", 4, 0, IP_FOREIGN, 5000), -EHOSTUNREACH);
	EQ(send_to(tx, "lost", 4, QPS_MSG_DONTWAIT, IP_FOREIGN, 5000),
	   -EHOSTUNREACH);
	/* Off the subnet with nothing beyond the wire. Header: "cannot be
	 * resolved" -> -EHOSTUNREACH; Linux would say -ENETUNREACH for "no
	 * route", which is accepted too. */
	r = send_to(tx, "lost", 4, 0, "10.1.2.3", 5000);
	CU_ASSERT(r == -EHOSTUNREACH || r == -ENETUNREACH);
	if (!(r == -EHOSTUNREACH || r == -ENETUNREACH))
		fprintf(stderr, "  sendto 10.1.2.3: %zd\n", r);

	cx = mkep(a, NULL, 0);
	d = t_sin(IP_FOREIGN, 5000);
	EQ(qps_connect(cx, (struct sockaddr *)&d, sizeof(d)), -EHOSTUNREACH);
	/* A failed connect leaves it unconnected. */
	EQ(qps_send(cx, "x", 1, 0), -EDESTADDRREQ);

	/* The endpoint still works afterwards. */
	EQ(send_to(tx, "ok", 2, 0, IP_B, 5000), 2);
	EQ(qps_recv(rx, in, sizeof(in), 0), 2);
	EQ(drain(rx), 0);

	/* A port that leaves the wire becomes unreachable. */
	{
		struct qps_ctx *c = t_suite_ctx(wire, IP_C);
		struct qps_ep *rc_ep = mkep(c, IP_C, 5000);

		EQ(send_to(tx, "hi", 2, 0, IP_C, 5000), 2);
		EQ(qps_recv(rc_ep, in, sizeof(in), 0), 2);
		/* destroy C (last tracked) */
		t_suite_ctxs.n--;
		EQ(qps_ctx_destroy(c), 0);
		/* Off emu the news comes as kernel neighbour events, read
		 * at most once per (coarse-clock) millisecond. */
		if (!t_provider_is("emu"))
			t_sleep_ms(20);
		EQ(send_to(tx, "gone", 4, 0, IP_C, 5000), -EHOSTUNREACH);
	}
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Statistics.                                                         */

static void test_stats(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	struct qps_stats a0, b0, a1, b1;
	uint8_t out[200], in[2048];
	const int n1 = 10, n2 = 6;
	uint64_t bytes = 0;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-stats");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(a, IP_A, 4000);
	rx = mkep(b, IP_B, 5000);
	a0 = stats_of(a);
	b0 = stats_of(b);
	EQ(a0.tx_packets, 0);
	EQ(b0.rx_packets, 0);

	for (int i = 0; i < n1; i++) {
		fill(out, sizeof(out), (unsigned int)i);
		EQ(send_to(tx, out, 100, 0, IP_B, 5000), 100);
		bytes += 100;
	}
	/* A burst under QPS_MSG_MORE, closed by a send without it. */
	for (int i = 0; i < n2; i++) {
		int fl = i < n2 - 1 ? QPS_MSG_MORE : 0;

		fill(out, sizeof(out), 100u + (unsigned int)i);
		EQ(send_to(tx, out, 50, fl, IP_B, 5000), 50);
		bytes += 50;
	}
	for (int i = 0; i < n1; i++) {
		fill(out, sizeof(out), (unsigned int)i);
		EQ(qps_recv(rx, in, sizeof(in), 0), 100);
		CU_ASSERT(memcmp(in, out, 100) == 0);
	}
	for (int i = 0; i < n2; i++) {
		fill(out, sizeof(out), 100u + (unsigned int)i);
		EQ(qps_recv(rx, in, sizeof(in), 0), 50);
		CU_ASSERT(memcmp(in, out, 50) == 0);
	}
	progress_idle(a);
	progress_idle(b);
	a1 = stats_of(a);
	b1 = stats_of(b);

	EQ(a1.tx_packets - a0.tx_packets, n1 + n2);
	GE(a1.tx_bytes - a0.tx_bytes, bytes);
	EQ(a1.tx_errors, 0);
	EQ(a1.rx_packets, 0);
	GE(a1.wqes - a0.wqes, a1.tx_packets - a0.tx_packets);
	GE(a1.doorbells, 1);
	LE(a1.doorbells, a1.wqes);
	EQ(a1.dev_tx_drops, 0);

	EQ(b1.rx_packets - b0.rx_packets, n1 + n2);
	GE(b1.rx_bytes - b0.rx_bytes, bytes);
	GE(b1.rx_bad[QPS_RX_OK], b1.rx_packets);
	for (int i = 1; i < QPS_RX_REASON_MAX; i++)
		EQ(b1.rx_bad[i], 0);
	GE(b1.rx_cqes - b0.rx_cqes, n1 + n2);
	EQ(b1.rx_queue_full, 0);
	EQ(b1.rx_no_endpoint, 0);
	EQ(b1.rx_errors, 0);
	EQ(b1.tx_packets, 0);

	/* A datagram for a port nobody bound counts as rx_no_endpoint. */
	EQ(send_to(tx, out, 10, 0, IP_B, 5999), 10);
	{
		struct qps_stats bb = b1;

		for (int i = 0; i < 200 && bb.rx_no_endpoint == b1.rx_no_endpoint;
		     i++) {
			qps_ctx_progress(b);
			bb = stats_of(b);
			if (bb.rx_no_endpoint == b1.rx_no_endpoint)
				usleep(5000);
		}
		EQ(bb.rx_no_endpoint - b1.rx_no_endpoint, 1);
		EQ(bb.rx_packets, b1.rx_packets);
	}
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Receive queue limit.                                                */

static void test_rcvbuf(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	struct qps_stats b0, b1;
	uint8_t out[64], in[2048];
	const int sent = 10;
	int received = 0;
	uint64_t acc = 0, drops;
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-rcvbuf");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(a, IP_A, 4000);
	rx = mkep(b, IP_B, 5000);
	set_int(rx, QPS_OPT_RCVBUF, 4);
	EQ(get_int(rx, QPS_OPT_RCVBUF), 4);
	b0 = stats_of(b);

	for (int i = 0; i < sent; i++) {
		fill(out, sizeof(out), (unsigned int)i);
		EQ(send_to(tx, out, 32, 0, IP_B, 5000), 32);
	}
	progress_idle(a);
	/* Let the receiving context handle everything that was sent, without
	 * receiving: queued + queue-full + device drops reaches 10. */
	for (int i = 0; i < 400; i++) {
		qps_ctx_progress(b);
		b1 = stats_of(b);
		acc = (uint64_t)get_int(rx, QPS_OPT_RXQ_LEN) +
		      (b1.rx_queue_full - b0.rx_queue_full) +
		      (b1.dev_rx_drops - b0.dev_rx_drops);
		if (acc >= (uint64_t)sent)
			break;
		usleep(5000);
	}
	EQ(acc, sent);
	LE(get_int(rx, QPS_OPT_RXQ_LEN), 4);

	while ((r = qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT)) >= 0 &&
	       received < 100) {
		EQ(r, 32);
		fill(out, sizeof(out), (unsigned int)received);
		/* The first four sent are the ones queued. */
		CU_ASSERT(memcmp(in, out, 32) == 0);
		received++;
	}
	EQ(r, -EAGAIN);
	b1 = stats_of(b);
	drops = (b1.rx_queue_full - b0.rx_queue_full) +
		(b1.dev_rx_drops - b0.dev_rx_drops);
	LE(received, 4);
	GE(received, 1);
	EQ((uint64_t)received + drops, sent);
	if (b1.dev_rx_drops == b0.dev_rx_drops) {
		/* The device placed all ten: the queue limit alone decided. */
		EQ(received, 4);
		EQ(b1.rx_queue_full - b0.rx_queue_full, sent - 4);
	}
	/* Datagrams counted as delivered are the ones the app received. */
	EQ(b1.rx_packets - b0.rx_packets, received);

	/* The queue accepts again once drained. */
	EQ(send_to(tx, "again", 5, 0, IP_B, 5000), 5);
	EQ(qps_recv(rx, in, sizeof(in), 0), 5);
	t_suite_end();
}

/* Received datagrams of @ctx so far: queued, refused by a full queue or
 * dropped by the device. */
static uint64_t rx_handled(struct qps_ctx *ctx)
{
	struct qps_stats st = stats_of(ctx);

	return st.rx_packets + st.rx_queue_full + st.dev_rx_drops;
}

/*
 * QPS_OPT_RCVBUF_BYTES: the queue holds what its bytes allow, well past
 * the device's 256 receive buffers (the deep part in copies, so the
 * device and the context's other endpoints keep theirs), one datagram
 * over the budget as the kernel admits it, and then refuses.
 */
static void test_rcvbuf_bytes(void)
{
	const unsigned int depth = 256, len = 100, n = 3 * depth;
	const int bytes = (int)(n * QPS_RX_TRUESIZE(len));
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx, *other;
	struct qps_stats b0, b1;
	uint8_t out[128], in[2048];
	unsigned int i, sent = 0, got = 0;
	uint64_t want;
	ssize_t r;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-rcvbytes");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(a, IP_A, 4100);
	rx = mkep(b, IP_B, 5100);
	other = mkep(b, IP_B, 5101);
	set_int(rx, QPS_OPT_RCVBUF, QPS_RCVBUF_MAX + 1);
	EQ(get_int(rx, QPS_OPT_RCVBUF), QPS_RCVBUF_MAX);
	EQ(get_int(rx, QPS_OPT_RCVBUF_BYTES), 0);
	set_int(rx, QPS_OPT_RCVBUF_BYTES, bytes);
	EQ(get_int(rx, QPS_OPT_RCVBUF_BYTES), bytes);
	EQ(qps_setopt(rx, QPS_OPT_RCVBUF_BYTES, &(int){ -1 }, sizeof(int)),
	   -EINVAL);
	b0 = stats_of(b);

	/* A quarter of the ring at a time, each handled before the next:
	 * the device never runs short on its own. */
	while (sent < n + 16) {
		for (i = 0; i < depth / 4 && sent < n + 16; i++, sent++) {
			fill(out, len, sent);
			EQ(send_to(tx, out, len, 0, IP_B, 5100), (ssize_t)len);
		}
		progress_idle(a);
		want = rx_handled(b) - (b0.rx_packets + b0.rx_queue_full +
					b0.dev_rx_drops);
		/* Up to 5 s: a loaded machine delays the wire. */
		for (i = 0; i < 5000 && want < sent; i++) {
			qps_ctx_progress(b);
			want = rx_handled(b) - (b0.rx_packets +
						b0.rx_queue_full +
						b0.dev_rx_drops);
			if (want < sent)
				usleep(1000);
		}
		EQ(want, sent);
	}
	b1 = stats_of(b);
	EQ(b1.dev_rx_drops - b0.dev_rx_drops, 0);
	EQ(get_int(rx, QPS_OPT_RXQ_LEN), n + 1);
	EQ(b1.rx_queue_full - b0.rx_queue_full, sent - (n + 1));

	/* The device still has buffers for the context's other endpoints. */
	EQ(send_to(tx, "other", 5, 0, IP_B, 5101), 5);
	EQ(qps_recv(other, in, sizeof(in), 0), 5);

	while ((r = qps_recv(rx, in, sizeof(in), QPS_MSG_DONTWAIT)) >= 0) {
		EQ(r, (ssize_t)len);
		fill(out, len, got);
		CU_ASSERT(memcmp(in, out, len) == 0);
		got++;
	}
	EQ(r, -EAGAIN);
	EQ(got, n + 1);
	/* Drained: the whole budget again. */
	EQ(send_to(tx, "again", 5, 0, IP_B, 5100), 5);
	EQ(qps_recv(rx, in, sizeof(in), 0), 5);
	t_suite_end();
}

/* QPS_OPT_HOST_RX: the adopted socket receives what reaches the host
 * elsewhere (here loopback), into the endpoint's queue and readiness. */
static void test_host_rx(void)
{
	char wire[64], in[64];
	struct qps_ctx *a;
	struct qps_ctx_info info;
	struct qps_ep *ep;
	struct sockaddr_in any = t_sin("0.0.0.0", 0), lo, from;
	socklen_t fl = sizeof(from), ll = sizeof(lo);
	int one = 1, kfd, cfd;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-hostrx");
	a = t_suite_ctx(wire, IP_A);
	EQ_FATAL(qps_ctx_query(a, &info), 0);
	/* emu: the host has the port; elsewhere the device's netdev
	 * decides (test_packet, test_preload_programs). */
	if (strcmp(info.provider, "emu") != 0) {
		t_suite_end();
		return;
	}
	kfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(kfd >= 0 && cfd >= 0);
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &ep), 0);
	EQ(qps_ep_adopt_fd(ep, kfd), 0);
	EQ(qps_setopt(ep, QPS_OPT_HOST_RX, &one, sizeof(one)), 0);
	set_int(ep, QPS_OPT_RCVTIMEO, T_RCVTIMEO);
	EQ_FATAL(qps_bind(ep, (struct sockaddr *)&any, sizeof(any)), 0);
	EQ(qps_setopt(ep, QPS_OPT_HOST_RX, &one, sizeof(one)), -EISCONN);
	EQ(getsockname(kfd, (struct sockaddr *)&lo, &ll), 0);
	CU_ASSERT(lo.sin_port != 0);
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Readiness wakes for it, then the receive takes it, once. */
	EQ(sendto(cfd, "local", 5, 0, (struct sockaddr *)&lo, sizeof(lo)), 5);
	EQ(qps_ep_wait(ep, 2000), 1);
	EQ(qps_recvfrom(ep, in, sizeof(in), 0, (struct sockaddr *)&from, &fl),
	   5);
	CU_ASSERT(memcmp(in, "local", 5) == 0);
	EQ(from.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	EQ(qps_recv(ep, in, sizeof(in), QPS_MSG_DONTWAIT), -EAGAIN);
	/* A blocking receive sleeping when it comes is woken. */
	if (fork() == 0) {
		usleep(100000);
		(void)sendto(cfd, "later", 5, 0, (struct sockaddr *)&lo,
			     sizeof(lo));
		_exit(0);
	}
	EQ(qps_recv(ep, in, sizeof(in), 0), 5);
	CU_ASSERT(memcmp(in, "later", 5) == 0);
	(void)wait(NULL);
	EQ(qps_ep_close(ep), 0);
	close(kfd);
	close(cfd);
	t_suite_end();
}

/* qps_ep_requeue: a datagram another context received, queued as if
 * this one's device had delivered it, through the endpoint's filters. */
static void test_requeue(void)
{
	char wire[64], in[128], big[65508];
	struct qps_ctx *a;
	struct qps_ep *rx, *unbound;
	struct qps_rxmsg m = { 0 }, got = { 0 };
	struct sockaddr_in peer = t_sin(IP_B, 7777);
	struct sockaddr_in other = t_sin("10.0.0.8", 7777);

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ep-requeue");
	a = t_suite_ctx(wire, IP_A);
	/* The peer's address resolves for connect. */
	(void)t_suite_ctx(wire, IP_B);
	rx = mkep(a, IP_A, 4100);
	EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &unbound), 0);

	m.buf = "handed on";
	m.len = 9;
	m.src = peer;
	EQ(qps_ep_requeue(unbound, &m), -EINVAL);
	EQ(qps_ep_requeue(rx, NULL), -EFAULT);
	EQ(qps_ep_requeue(NULL, &m), -EBADF);
	m.buf = big;
	m.len = sizeof(big);
	EQ(qps_ep_requeue(rx, &m), -EMSGSIZE);
	m.buf = "handed on";
	m.len = 9;
	m.src.sin_family = AF_INET6;
	EQ(qps_ep_requeue(rx, &m), -EAFNOSUPPORT);
	m.src = peer;

	/* A zero destination is the endpoint's own name. */
	EQ(qps_ep_requeue(rx, &m), 0);
	got.buf = in;
	got.len = sizeof(in);
	EQ(qps_recvmsg(rx, &got, QPS_MSG_DONTWAIT), 9);
	CU_ASSERT(memcmp(in, "handed on", 9) == 0);
	EQ(got.src.sin_addr.s_addr, peer.sin_addr.s_addr);
	EQ(got.src.sin_port, peer.sin_port);

	/* Connected: what the endpoint would refuse, it refuses. */
	EQ(qps_connect(rx, (struct sockaddr *)&peer, sizeof(peer)), 0);
	m.src = other;
	EQ(qps_ep_requeue(rx, &m), 0);
	m.src = peer;
	m.buf = "second";
	m.len = 6;
	EQ(qps_ep_requeue(rx, &m), 0);
	memset(&got, 0, sizeof(got));
	got.buf = in;
	got.len = sizeof(in);
	EQ(qps_recvmsg(rx, &got, QPS_MSG_DONTWAIT), 6);
	CU_ASSERT(memcmp(in, "second", 6) == 0);
	EQ(qps_recvmsg(rx, &got, QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_ep_close(unbound), 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */

static CU_TestInfo tests[] = {
	{ "two contexts, one process", test_two_ctx_datagram },
	{ "two processes, order and content", test_two_process },
	{ "sizes 0, 1, max, max+1", test_sizes },
	{ "message boundaries and truncation", test_boundaries },
	{ "non-blocking and RCVTIMEO", test_nonblock_timeout },
	{ "readiness fd with epoll", test_epoll },
	{ "readiness fd, sender in another process", test_epoll_process },
	{ "sleep brackets: qps_ctx_arm, qps_ctx_disarm", test_arm },
	{ "connect, disconnect, names", test_connect },
	{ "bind rules", test_bind },
	{ "limited and directed broadcast", test_broadcast },
	{ "wake-ups: close, shutdown, signal, destroy", test_wakeups },
	{ "busy-poll budget", test_busy_poll },
	{ "timestamps: device, software, transmit", test_timestamps },
	{ "unreachable destinations", test_unreachable },
	{ "stats", test_stats },
	{ "RCVBUF limit and drop accounting", test_rcvbuf },
	{ "RCVBUF_BYTES: a queue deeper than the ring", test_rcvbuf_bytes },
	{ "qps_ep_requeue", test_requeue },
	{ "QPS_OPT_HOST_RX: the host's other interfaces", test_host_rx },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	atexit(t_suite_cleanup);
	return t_run("endpoint", tests);
}
