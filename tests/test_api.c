// SPDX-License-Identifier: MIT
/*
 * Suite "api": bad input to every public call returns its documented
 * -errno and never crashes, written against include/qpsock/qpsock.h.
 *
 * Where the header names the errno, that is what is asserted. Where it is
 * silent, the Linux socket errno was chosen and the choice is marked
 * "header silent" next to the assertion, for the implementers to align on.
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"

/* ------------------------------------------------------------------ */
/* Assertions that print what was expected and what came back.         */

/* got must be one of two values (header silent between them). */
static void t_eq2(long long got, long long w1, long long w2,
		  const char *expr, const char *file, unsigned int line)
{
	char msg[384];

	snprintf(msg, sizeof(msg), "%s: expected %lld or %lld, got %lld",
		 expr, w1, w2, got);
	CU_assertImplementation((got == w1 || got == w2) ? CU_TRUE : CU_FALSE,
				line, msg, file, "", CU_FALSE);
}

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define EQ2(got, w1, w2) \
	t_eq2((long long)(got), (long long)(w1), (long long)(w2), \
	      #got " in {" #w1 ", " #w2 "}", __FILE__, __LINE__)

/* ------------------------------------------------------------------ */
/* Context tracking: every test destroys its contexts; an aborted test's
 * leftovers are destroyed by the next test or at exit. */

/* The environment variables some tests set are cleared around each. */
static void env_clear(void)
{
	unsetenv("QPS_PROVIDER");
	unsetenv("QPS_DEV");
}

static void ctx_cleanup_atexit(void)
{
	t_suite_cleanup();
	env_clear();
}

static void t_begin(void)
{
	t_suite_begin();
	env_clear();
}

static void t_end(void)
{
	t_suite_end();
	env_clear();
}

static struct qps_ep *mkep(struct qps_ctx *ctx)
{
	struct qps_ep *ep = NULL;

	EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ep);
	return ep;
}

static uint32_t ip_of(const char *ip)
{
	struct in_addr a;

	inet_pton(AF_INET, ip, &a);
	return a.s_addr;
}

/* The attr t_ctx_emu would build, for tests that vary one field. */
static struct qps_ctx_attr emu_attr(const char *wire)
{
	struct qps_ctx_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV;
	attr.provider = "emu";
	attr.dev = wire;
	return attr;
}

/* Create with @attr; on unexpected success the context is tracked so the
 * wire is still cleaned. */
static int try_create(const struct qps_ctx_attr *attr)
{
	struct qps_ctx *ctx = NULL;
	int rc = qps_ctx_create(attr, &ctx);

	if (rc == 0)
		t_ctxs_add(&t_suite_ctxs, ctx);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Contexts.                                                           */

static void check_default_info(struct qps_ctx *ctx, const char *wire)
{
	struct qps_ctx_info info;
	uint32_t addr;

	memset(&info, 0xa5, sizeof(info));
	EQ_FATAL(qps_ctx_query(ctx, &info), 0);
	CU_ASSERT_STRING_EQUAL(info.provider, "emu");
	CU_ASSERT_STRING_EQUAL(info.dev, wire);
	addr = ntohl(info.addr.s_addr);
	/* 198.18.0.0/24, a host address. */
	EQ(addr >> 8, 0xc61200);
	CU_ASSERT((addr & 0xff) != 0 && (addr & 0xff) != 0xff);
	EQ(info.max_payload, info.mtu - 28);
	EQ(info.tx_depth, 256);
	EQ(info.rx_depth, 256);
	EQ(info.mac[0] & 1, 0);	/* unicast MAC */
	CU_ASSERT((info.mac[0] | info.mac[1] | info.mac[2] | info.mac[3] |
		   info.mac[4] | info.mac[5]) != 0);
}

static void test_ctx_defaults(void)
{
	char wire[64];
	struct qps_ctx *c1 = NULL, *c2 = NULL;
	struct qps_ctx_attr attr;
	struct qps_ctx_info i1, i2;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-def");

	/* NULL attr: emu on $QPS_DEV, first free address. */
	CU_ASSERT_FATAL(setenv("QPS_DEV", wire, 1) == 0);
	EQ_FATAL(qps_ctx_create(NULL, &c1), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c1);
	t_ctxs_add(&t_suite_ctxs, c1);
	check_default_info(c1, wire);

	/* comp_mask 0: all defaults as well; a second port on the same wire
	 * gets another address and another MAC. */
	memset(&attr, 0, sizeof(attr));
	EQ_FATAL(qps_ctx_create(&attr, &c2), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c2);
	t_ctxs_add(&t_suite_ctxs, c2);
	check_default_info(c2, wire);
	unsetenv("QPS_DEV");

	EQ(qps_ctx_query(c1, &i1), 0);
	EQ(qps_ctx_query(c2, &i2), 0);
	CU_ASSERT(i1.addr.s_addr != i2.addr.s_addr);
	CU_ASSERT(memcmp(i1.mac, i2.mac, 6) != 0);

	/* fd and progress on an idle context. */
	CU_ASSERT(qps_ctx_fd(c1) >= 0);
	EQ(qps_ctx_progress(c1), 0);
	t_end();
}

static void test_ctx_attr(void)
{
	char wire[64];
	struct qps_ctx_attr attr;
	struct qps_ctx_info info;
	struct qps_ctx *ctx = NULL;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-attr");

	/* Explicit address and depths are honoured. */
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_TX_DEPTH |
			  QPS_CTX_ATTR_RX_DEPTH;
	inet_pton(AF_INET, "198.18.0.77", &attr.addr);
	attr.tx_depth = 64;
	attr.rx_depth = 128;
	EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	EQ(qps_ctx_query(ctx, &info), 0);
	EQ(info.addr.s_addr, ip_of("198.18.0.77"));
	CU_ASSERT(info.tx_depth >= 64 && info.tx_depth <= 4096);
	CU_ASSERT(info.rx_depth >= 128 && info.rx_depth <= 4096);

	/* Max depth is accepted, beyond it is not. */
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_TX_DEPTH | QPS_CTX_ATTR_RX_DEPTH;
	attr.tx_depth = 4096;
	attr.rx_depth = 4096;
	EQ(try_create(&attr), 0);

	/* header: "max 4096"; the errno is silent -> -EINVAL. */
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_TX_DEPTH;
	attr.tx_depth = 4097;
	EQ(try_create(&attr), -EINVAL);
	attr.tx_depth = 0;	/* header silent -> -EINVAL */
	EQ(try_create(&attr), -EINVAL);
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_RX_DEPTH;
	attr.rx_depth = 4097;
	EQ(try_create(&attr), -EINVAL);
	attr.rx_depth = 0;	/* header silent -> -EINVAL */
	EQ(try_create(&attr), -EINVAL);
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_MAX_EP;
	attr.max_ep = 0;	/* header silent -> -EINVAL */
	EQ(try_create(&attr), -EINVAL);

	/* Unknown comp_mask bits: header silent -> -EINVAL (as verbs' *_ex
	 * calls reject unknown comp_mask bits). */
	attr = emu_attr(wire);
	attr.comp_mask |= 1u << 20;
	EQ(try_create(&attr), -EINVAL);

	/* The provider bit with a NULL name: header silent -> -EINVAL. */
	attr = emu_attr(wire);
	attr.provider = NULL;
	EQ(try_create(&attr), -EINVAL);

	/* An address another port of the wire already has: header silent
	 * -> -EADDRINUSE (as bind(2) for a taken address). */
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_ADDR;
	inet_pton(AF_INET, "198.18.0.77", &attr.addr);
	EQ(try_create(&attr), -EADDRINUSE);
	t_end();
}

static void test_ctx_bad(void)
{
	char wire[64];
	struct qps_ctx_attr attr;
	struct qps_ctx_info info;
	struct qps_stats st;
	struct qps_ctx *ctx;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-ctxbad");

	/* NULL ctx_out: header silent -> -EINVAL. */
	attr = emu_attr(wire);
	EQ(qps_ctx_create(&attr, NULL), -EINVAL);
	EQ(qps_ctx_create(NULL, NULL), -EINVAL);

	/* Unknown provider: header silent; the provider lookup
	 * (src/provider.h) says -ENOENT. */
	attr = emu_attr(wire);
	attr.provider = "nosuch";
	EQ(try_create(&attr), -ENOENT);
	attr.provider = "";
	EQ(try_create(&attr), -ENOENT);
	attr.provider = "emuX";
	EQ(try_create(&attr), -ENOENT);

	/* NULL ctx to every ctx call: header silent -> -EINVAL. */
	EQ(qps_ctx_destroy(NULL), -EINVAL);
	EQ(qps_ctx_progress(NULL), -EINVAL);
	EQ(qps_ctx_fd(NULL), -EINVAL);
	EQ(qps_ctx_query(NULL, &info), -EINVAL);
	EQ(qps_ctx_stats(NULL, &st, sizeof(st)), -EINVAL);
	{
		struct qps_ep *ep = (struct qps_ep *)0x1;

		EQ(qps_ep_create(NULL, QPS_EP_DGRAM, &ep), -EINVAL);
	}

	/* NULL out-pointers on a good context: header silent; -EINVAL or
	 * -EFAULT (Linux's for a bad user pointer) are both accepted. */
	ctx = t_suite_ctx(wire, IP_A);
	EQ2(qps_ctx_query(ctx, NULL), -EINVAL, -EFAULT);
	EQ2(qps_ctx_stats(ctx, NULL, sizeof(st)), -EINVAL, -EFAULT);
	/* ... but size 0 copies nothing, so NULL is fine there. */
	EQ(qps_ctx_stats(ctx, NULL, 0), 0);
	t_end();
}

static void test_provider_env(void)
{
	char wire[64];
	struct qps_ctx_attr attr;
	struct qps_ctx_info info;
	struct qps_ctx *ctx = NULL;
	int rc;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-env");

	/* QPS_PROVIDER picks the provider when attr does not. */
	CU_ASSERT_FATAL(setenv("QPS_PROVIDER", "nosuch", 1) == 0);
	memset(&attr, 0, sizeof(attr));
	attr.comp_mask = QPS_CTX_ATTR_DEV;
	attr.dev = wire;
	rc = try_create(&attr);
	EQ(rc, -ENOENT);
	CU_ASSERT_FATAL(setenv("QPS_DEV", wire, 1) == 0);
	rc = try_create(NULL);
	EQ(rc, -ENOENT);

	/* ... but not an explicit provider. */
	attr = emu_attr(wire);
	rc = qps_ctx_create(&attr, &ctx);
	EQ(rc, 0);
	if (rc == 0) {
		t_ctxs_add(&t_suite_ctxs, ctx);
		EQ(qps_ctx_query(ctx, &info), 0);
		CU_ASSERT_STRING_EQUAL(info.provider, "emu");
	}

	/* QPS_PROVIDER=emu works with NULL attr. */
	CU_ASSERT_FATAL(setenv("QPS_PROVIDER", "emu", 1) == 0);
	ctx = NULL;
	rc = qps_ctx_create(NULL, &ctx);
	EQ(rc, 0);
	if (rc == 0) {
		t_ctxs_add(&t_suite_ctxs, ctx);
		EQ(qps_ctx_query(ctx, &info), 0);
		CU_ASSERT_STRING_EQUAL(info.provider, "emu");
		CU_ASSERT_STRING_EQUAL(info.dev, wire);
	}
	unsetenv("QPS_PROVIDER");
	unsetenv("QPS_DEV");
	CU_ASSERT(getenv("QPS_PROVIDER") == NULL);
	t_end();
}

/* ------------------------------------------------------------------ */
/* Endpoints: handles.                                                 */

static void test_ep_create_bad(void)
{
	char wire[64];
	struct qps_ctx *ctx;
	struct qps_ctx_attr attr;
	struct qps_ep *ep = NULL, *eps[3];
	int rc;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-epc");
	ctx = t_suite_ctx(wire, IP_A);

	/* Bad type: header silent -> -EINVAL (socket(2) with a bad type). */
	EQ(qps_ep_create(ctx, 0, &ep), -EINVAL);
	EQ(qps_ep_create(ctx, 2, &ep), -EINVAL);
	EQ(qps_ep_create(ctx, -1, &ep), -EINVAL);
	EQ(qps_ep_create(ctx, 0x7fffffff, &ep), -EINVAL);
	/* NULL ep_out: header silent -> -EINVAL. */
	EQ(qps_ep_create(ctx, QPS_EP_DGRAM, NULL), -EINVAL);

	/* max_ep is a hard limit: header silent -> -EMFILE (socket(2) at the
	 * per-process limit); closing one frees its slot. */
	attr = emu_attr(wire);
	attr.comp_mask |= QPS_CTX_ATTR_MAX_EP;
	attr.max_ep = 2;
	{
		struct qps_ctx *small = NULL;

		EQ_FATAL(qps_ctx_create(&attr, &small), 0);
		t_ctxs_add(&t_suite_ctxs, small);
		EQ(qps_ep_create(small, QPS_EP_DGRAM, &eps[0]), 0);
		EQ(qps_ep_create(small, QPS_EP_DGRAM, &eps[1]), 0);
		rc = qps_ep_create(small, QPS_EP_DGRAM, &eps[2]);
		EQ(rc, -EMFILE);
		EQ(qps_ep_close(eps[0]), 0);
		rc = qps_ep_create(small, QPS_EP_DGRAM, &eps[2]);
		EQ(rc, 0);
		/* destroy closes the endpoints still open */
	}
	t_end();
}

/* Every endpoint call on @ep must return -EBADF. */
static void all_ep_calls_ebadf(struct qps_ep *ep, const char *what)
{
	struct sockaddr_in sin = t_sin(IP_A, 9000);
	struct sockaddr_in got;
	socklen_t sl = sizeof(got);
	char buf[16] = "x";
	int v = 1;
	socklen_t vl = sizeof(v);

	fprintf(stderr, "  [%s]\n", what);
	EQ(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)), -EBADF);
	EQ(qps_connect(ep, (struct sockaddr *)&sin, sizeof(sin)), -EBADF);
	EQ(qps_getsockname(ep, (struct sockaddr *)&got, &sl), -EBADF);
	sl = sizeof(got);
	EQ(qps_getpeername(ep, (struct sockaddr *)&got, &sl), -EBADF);
	EQ(qps_send(ep, buf, 1, 0), -EBADF);
	EQ(qps_sendto(ep, buf, 1, 0, (struct sockaddr *)&sin, sizeof(sin)),
	   -EBADF);
	EQ(qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT), -EBADF);
	EQ(qps_recv(ep, buf, sizeof(buf), 0), -EBADF);
	sl = sizeof(got);
	EQ(qps_recvfrom(ep, buf, sizeof(buf), 0, (struct sockaddr *)&got, &sl),
	   -EBADF);
	EQ(qps_setopt(ep, QPS_OPT_NONBLOCK, &v, sizeof(v)), -EBADF);
	EQ(qps_getopt(ep, QPS_OPT_NONBLOCK, &v, &vl), -EBADF);
	EQ(qps_set_nonblock(ep, 1), -EBADF);
	EQ(qps_ep_fd(ep), -EBADF);
	EQ(qps_ep_close(ep), -EBADF);
}

static void test_ep_null(void)
{
	t_begin();
	all_ep_calls_ebadf(NULL, "NULL endpoint");
	t_end();
}

static void test_ep_closed(void)
{
	char wire[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep, *bound, *again, *other;
	struct sockaddr_in sin = t_sin(IP_A, 9100);

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-closed");
	ctx = t_suite_ctx(wire, IP_A);

	ep = mkep(ctx);
	EQ(qps_ep_close(ep), 0);
	all_ep_calls_ebadf(ep, "closed endpoint");	/* includes 2nd close */
	EQ(qps_ep_close(ep), -EBADF);			/* and a 3rd */

	/* A closed bound endpoint releases its port. */
	bound = mkep(ctx);
	EQ(qps_bind(bound, (struct sockaddr *)&sin, sizeof(sin)), 0);
	EQ(qps_ep_close(bound), 0);
	all_ep_calls_ebadf(bound, "closed bound endpoint");
	again = mkep(ctx);
	EQ(qps_bind(again, (struct sockaddr *)&sin, sizeof(sin)), 0);

	/* A stale handle does not act on a newer endpoint while its slot
	 * waits behind every other free one. */
	other = mkep(ctx);
	CU_ASSERT(other != ep && other != bound && again != ep &&
		  again != bound);
	EQ(qps_ep_close(ep), -EBADF);
	EQ(qps_getsockname(other, (struct sockaddr *)&sin,
			   &(socklen_t){ sizeof(sin) }), 0);
	EQ(qps_ep_close(other), 0);
	EQ(qps_ep_close(again), 0);
	EQ(qps_ep_close(again), -EBADF);
	t_end();
}

/* api.md: a closed slot is reused first-closed first-reused, after every
 * other free slot; only then may the old handle name a new endpoint. */
static void test_ep_reuse_order(void)
{
	struct qps_ctx_attr attr;
	struct qps_ctx *ctx = NULL;
	struct qps_ep *a, *b, *c, *d, *e;
	char wire[64];

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-reuse");
	attr = t_emu_attr(wire, IP_A);
	attr.comp_mask |= QPS_CTX_ATTR_MAX_EP;
	attr.max_ep = 4;
	EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	a = mkep(ctx);
	b = mkep(ctx);
	EQ(qps_ep_close(a), 0);
	c = mkep(ctx);			/* max_ep - 2 - 1 = 1 never-used slot */
	EQ(qps_ep_close(a), -EBADF);
	d = mkep(ctx);			/* ... and one more free before it */
	EQ(qps_ep_close(a), -EBADF);
	CU_ASSERT(c != a && d != a);
	e = mkep(ctx);			/* the only free slot left: a's */
	CU_ASSERT(e == a);
	EQ(qps_ep_close(e), 0);
	EQ(qps_ep_close(d), 0);
	EQ(qps_ep_close(c), 0);
	EQ(qps_ep_close(b), 0);
	CU_ASSERT(mkep(ctx) == e);	/* first closed, first reused */
	t_end();
}

/* api.md, fork(): in a child every call on the parent's context and
 * endpoints is -ECHILD and touches nothing; the child's own context works;
 * the parent goes on as before. The child reports the first mismatch as
 * its exit status (the line number). */
#define CHILD_EQ(got, want) \
	do { if ((long long)(got) != (long long)(want)) _exit(__LINE__ % 250 + 1); } while (0)

static void fork_child(struct qps_ctx *ctx, struct qps_ep *ep,
		       const char *wire)
{
	struct sockaddr_in sin = t_sin(IP_A, 9400), got;
	socklen_t sl = sizeof(got);
	struct qps_ctx_attr attr = t_emu_attr(wire, IP_B);
	struct qps_ctx *mine = NULL;
	struct qps_ep *e = NULL;
	struct qps_stats st;
	char buf[8];
	int v = 1;

	CHILD_EQ(qps_send(ep, "x", 1, 0), -ECHILD);
	CHILD_EQ(qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&sin,
			    sizeof(sin)), -ECHILD);
	CHILD_EQ(qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT), -ECHILD);
	CHILD_EQ(qps_getsockname(ep, (struct sockaddr *)&got, &sl), -ECHILD);
	CHILD_EQ(qps_setopt(ep, QPS_OPT_NONBLOCK, &v, sizeof(v)), -ECHILD);
	CHILD_EQ(qps_ep_fd(ep), -ECHILD);
	CHILD_EQ(qps_flush(ep), -ECHILD);
	CHILD_EQ(qps_ep_close(ep), -ECHILD);
	CHILD_EQ(qps_ctx_progress(ctx), -ECHILD);
	CHILD_EQ(qps_ctx_arm(ctx), -ECHILD);
	CHILD_EQ(qps_ctx_disarm(ctx), -ECHILD);
	CHILD_EQ(qps_ctx_flush(ctx), -ECHILD);
	CHILD_EQ(qps_ctx_stats(ctx, &st, sizeof(st)), -ECHILD);
	CHILD_EQ(qps_ep_create(ctx, QPS_EP_DGRAM, &e), -ECHILD);
	CHILD_EQ(qps_ctx_destroy(ctx), -ECHILD);
	/* Its own context on the same wire works. */
	CHILD_EQ(qps_ctx_create(&attr, &mine), 0);
	CHILD_EQ(qps_ep_create(mine, QPS_EP_DGRAM, &e), 0);
	CHILD_EQ(qps_sendto(e, "child", 5, 0, (struct sockaddr *)&sin,
			    sizeof(sin)), 5);
	CHILD_EQ(qps_ctx_destroy(mine), 0);
	_exit(0);
}

static void test_fork(void)
{
	struct sockaddr_in sin = t_sin(IP_A, 9400);
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	char wire[64], buf[8];
	int status = -1, tmo = 2000;
	pid_t pid;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-fork");
	ctx = t_suite_ctx(wire, IP_A);
	ep = mkep(ctx);
	EQ_FATAL(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	EQ_FATAL(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)), 0);
	EQ(qps_sendto(ep, "p1", 2, 0, (struct sockaddr *)&sin, sizeof(sin)),
	   2);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		fork_child(ctx, ep, wire);
	EQ(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status));
	EQ(WEXITSTATUS(status), 0);
	/* The parent's context and endpoint are untouched: the datagram
	 * queued before the fork, the child's, and a new one. */
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 2);
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 5);
	EQ(qps_sendto(ep, "p2", 2, 0, (struct sockaddr *)&sin, sizeof(sin)),
	   2);
	EQ(qps_recv(ep, buf, sizeof(buf), 0), 2);
	t_end();
}

/* ------------------------------------------------------------------ */
/* Buffers and addresses.                                              */

static void test_buffers(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *ep, *rx, *cx;
	struct sockaddr_in d = t_sin(IP_B, 9200), src;
	socklen_t sl;
	char buf[64];

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-buf");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	ep = mkep(a);
	rx = mkep(b);
	EQ(qps_bind(rx, (struct sockaddr *)&d, sizeof(d)), 0);
	cx = mkep(a);
	EQ(qps_connect(cx, (struct sockaddr *)&d, sizeof(d)), 0);

	/* NULL buffer with len > 0: header silent -> -EFAULT, checked with
	 * the arguments (before looking at the queue or waiting). */
	EQ(qps_sendto(ep, NULL, 10, 0, (struct sockaddr *)&d, sizeof(d)),
	   -EFAULT);
	EQ(qps_send(cx, NULL, 10, 0), -EFAULT);
	EQ(qps_recv(rx, NULL, 10, QPS_MSG_DONTWAIT), -EFAULT);
	EQ(qps_recvfrom(rx, NULL, 10, QPS_MSG_DONTWAIT, NULL, NULL), -EFAULT);

	/* NULL with len 0 is an empty datagram, as in Linux. */
	EQ(qps_sendto(ep, NULL, 0, 0, (struct sockaddr *)&d, sizeof(d)), 0);
	EQ(qps_send(cx, NULL, 0, 0), 0);
	{
		int v = 2000;

		EQ(qps_setopt(rx, QPS_OPT_RCVTIMEO, &v, sizeof(v)), 0);
	}
	sl = sizeof(src);
	EQ(qps_recvfrom(rx, buf, sizeof(buf), 0, (struct sockaddr *)&src, &sl),
	   0);
	EQ(src.sin_addr.s_addr, ip_of(IP_A));
	EQ(qps_recv(rx, NULL, 0, 0), 0);

	/* recvfrom: a source buffer with a NULL length: header silent ->
	 * -EINVAL or -EFAULT. */
	EQ2(qps_recvfrom(rx, buf, sizeof(buf), QPS_MSG_DONTWAIT,
			 (struct sockaddr *)&src, NULL), -EINVAL, -EFAULT);
	t_end();
}

static void test_addresses(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *ep, *rx;
	struct sockaddr_in d = t_sin(IP_B, 9300), got;
	struct sockaddr_in6 s6;
	socklen_t sl;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-addr");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	ep = mkep(a);
	rx = mkep(b);
	EQ(qps_bind(rx, (struct sockaddr *)&d, sizeof(d)), 0);

	/* NULL address / short length: -EINVAL (header silent; the brief's
	 * choice, Linux says -EFAULT for NULL and -EINVAL for short). */
	EQ(qps_bind(ep, NULL, sizeof(d)), -EINVAL);
	EQ(qps_bind(ep, (struct sockaddr *)&d, sizeof(d) - 1), -EINVAL);
	EQ(qps_bind(ep, (struct sockaddr *)&d, 0), -EINVAL);
	EQ(qps_connect(ep, NULL, sizeof(d)), -EINVAL);
	EQ(qps_connect(ep, (struct sockaddr *)&d, 4), -EINVAL);
	EQ(qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&d, 4), -EINVAL);
	EQ(qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&d, 0), -EINVAL);
	/* NULL destination on an unconnected endpoint: header silent ->
	 * -EDESTADDRREQ, as Linux UDP (sendto without an address = send). */
	EQ(qps_sendto(ep, "x", 1, 0, NULL, 0), -EDESTADDRREQ);

	/* Wrong family: header silent -> -EAFNOSUPPORT (Linux AF_INET UDP). */
	memset(&s6, 0, sizeof(s6));
	s6.sin6_family = AF_INET6;
	s6.sin6_port = htons(9300);
	s6.sin6_addr = in6addr_loopback;
	EQ(qps_bind(ep, (struct sockaddr *)&s6, sizeof(s6)), -EAFNOSUPPORT);
	EQ(qps_connect(ep, (struct sockaddr *)&s6, sizeof(s6)), -EAFNOSUPPORT);
	EQ(qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&s6, sizeof(s6)),
	   -EAFNOSUPPORT);
	{
		struct sockaddr_in bad = d;

		bad.sin_family = AF_UNIX;
		EQ(qps_bind(ep, (struct sockaddr *)&bad, sizeof(bad)),
		   -EAFNOSUPPORT);
		EQ(qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&bad,
			      sizeof(bad)), -EAFNOSUPPORT);
	}

	/* None of the failures bound or connected it. */
	sl = sizeof(got);
	EQ(qps_getpeername(ep, (struct sockaddr *)&got, &sl), -ENOTCONN);
	EQ(qps_send(ep, "x", 1, 0), -EDESTADDRREQ);
	{
		struct sockaddr_in s = t_sin(IP_A, 9301);

		EQ(qps_bind(ep, (struct sockaddr *)&s, sizeof(s)), 0);
	}

	/* getsockname/getpeername with NULL pointers: header silent ->
	 * -EINVAL or -EFAULT. */
	sl = sizeof(got);
	EQ2(qps_getsockname(ep, NULL, &sl), -EINVAL, -EFAULT);
	EQ2(qps_getsockname(ep, (struct sockaddr *)&got, NULL), -EINVAL,
	    -EFAULT);
	EQ(qps_connect(ep, (struct sockaddr *)&d, sizeof(d)), 0);
	EQ2(qps_getpeername(ep, NULL, &sl), -EINVAL, -EFAULT);
	EQ2(qps_getpeername(ep, (struct sockaddr *)&got, NULL), -EINVAL,
	    -EFAULT);
	t_end();
}

/* ------------------------------------------------------------------ */
/* Options.                                                            */

static void test_options(void)
{
	char wire[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int v;
	short sv = 1;
	socklen_t vl;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-opt");
	ctx = t_suite_ctx(wire, IP_A);
	ep = mkep(ctx);

	/* Unknown option: -ENOPROTOOPT (header). */
	v = 1;
	EQ(qps_setopt(ep, 0, &v, sizeof(v)), -ENOPROTOOPT);
	EQ(qps_setopt(ep, 999, &v, sizeof(v)), -ENOPROTOOPT);
	EQ(qps_setopt(ep, -1, &v, sizeof(v)), -ENOPROTOOPT);
	vl = sizeof(v);
	EQ(qps_getopt(ep, 999, &v, &vl), -ENOPROTOOPT);
	/* Get-only options cannot be set: header silent -> -ENOPROTOOPT
	 * (Linux setsockopt(SO_ERROR)). */
	EQ(qps_setopt(ep, QPS_OPT_ERROR, &v, sizeof(v)), -ENOPROTOOPT);
	EQ(qps_setopt(ep, QPS_OPT_RXQ_LEN, &v, sizeof(v)), -ENOPROTOOPT);

	/* Bad length: -EINVAL (header). */
	EQ(qps_setopt(ep, QPS_OPT_NONBLOCK, &sv, sizeof(sv)), -EINVAL);
	EQ(qps_setopt(ep, QPS_OPT_PRIORITY, &v, 0), -EINVAL);
	EQ(qps_setopt(ep, QPS_OPT_RCVBUF, &v, 3), -EINVAL);
	/* NULL value: -EFAULT (header). */
	EQ(qps_setopt(ep, QPS_OPT_NONBLOCK, NULL, sizeof(int)), -EFAULT);

	/* getopt with a short length: -EINVAL (brief; header silent). */
	vl = 2;
	EQ(qps_getopt(ep, QPS_OPT_PRIORITY, &v, &vl), -EINVAL);
	vl = 0;
	EQ(qps_getopt(ep, QPS_OPT_RCVBUF, &v, &vl), -EINVAL);
	/* NULL value / length: header silent -> -EFAULT (getsockopt(2)). */
	vl = sizeof(v);
	EQ(qps_getopt(ep, QPS_OPT_PRIORITY, NULL, &vl), -EFAULT);
	EQ(qps_getopt(ep, QPS_OPT_PRIORITY, &v, NULL), -EFAULT);
	/* A longer buffer is fine; the length comes back as sizeof(int). */
	{
		long long big = -1;

		vl = sizeof(big);
		EQ(qps_getopt(ep, QPS_OPT_PRIORITY, &big, &vl), 0);
		EQ(vl, sizeof(int));
	}

	/* Bad values: -EINVAL (header). */
	v = 16;
	EQ(qps_setopt(ep, QPS_OPT_PRIORITY, &v, sizeof(v)), -EINVAL);
	v = -1;
	EQ(qps_setopt(ep, QPS_OPT_PRIORITY, &v, sizeof(v)), -EINVAL);
	EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &v, sizeof(v)), -EINVAL);
	EQ(qps_setopt(ep, QPS_OPT_SNDTIMEO, &v, sizeof(v)), -EINVAL);
	EQ(qps_setopt(ep, QPS_OPT_RCVBUF, &v, sizeof(v)), -EINVAL);

	/* Good values read back. */
	v = 15;
	EQ(qps_setopt(ep, QPS_OPT_PRIORITY, &v, sizeof(v)), 0);
	v = -7;
	vl = sizeof(v);
	EQ(qps_getopt(ep, QPS_OPT_PRIORITY, &v, &vl), 0);
	EQ(v, 15);
	EQ(vl, sizeof(int));
	v = 0;
	EQ(qps_setopt(ep, QPS_OPT_PRIORITY, &v, sizeof(v)), 0);
	v = 250;
	EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &v, sizeof(v)), 0);
	v = 0;
	vl = sizeof(v);
	EQ(qps_getopt(ep, QPS_OPT_RCVTIMEO, &v, &vl), 0);
	EQ(v, 250);
	EQ(qps_set_nonblock(ep, 1), 0);
	vl = sizeof(v);
	EQ(qps_getopt(ep, QPS_OPT_NONBLOCK, &v, &vl), 0);
	EQ(v, 1);
	/* Get-only options on a fresh endpoint. */
	v = -1;
	vl = sizeof(v);
	EQ(qps_getopt(ep, QPS_OPT_ERROR, &v, &vl), 0);
	EQ(v, 0);
	v = -1;
	vl = sizeof(v);
	EQ(qps_getopt(ep, QPS_OPT_RXQ_LEN, &v, &vl), 0);
	EQ(v, 0);
	t_end();
}

/* ------------------------------------------------------------------ */
/* Flags.                                                              */

static void test_flags(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx, *cx;
	struct sockaddr_in d = t_sin(IP_B, 9400);
	static const int bad[] = { 0x1, 0x4, 0x10000000, (int)0x80000000 };
	char buf[64];

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-flags");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(a);
	rx = mkep(b);
	EQ(qps_bind(rx, (struct sockaddr *)&d, sizeof(d)), 0);
	cx = mkep(a);
	EQ(qps_connect(cx, (struct sockaddr *)&d, sizeof(d)), 0);

	/* Unknown flag bits: -EINVAL (brief; header silent). */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fl = bad[i];

		EQ(qps_sendto(tx, "x", 1, fl, (struct sockaddr *)&d, sizeof(d)),
		   -EINVAL);
		EQ(qps_send(cx, "x", 1, fl), -EINVAL);
		EQ(qps_recv(rx, buf, sizeof(buf), fl | QPS_MSG_DONTWAIT),
		   -EINVAL);
		EQ(qps_recvfrom(rx, buf, sizeof(buf), fl | QPS_MSG_DONTWAIT,
				NULL, NULL), -EINVAL);
	}
	/* ... and nothing was sent by the rejected calls. */
	EQ(qps_recv(rx, buf, sizeof(buf), QPS_MSG_DONTWAIT), -EAGAIN);

	/* The documented flags are accepted. */
	EQ(qps_sendto(tx, "ab", 2, QPS_MSG_DONTWAIT, (struct sockaddr *)&d,
		      sizeof(d)), 2);
	EQ(qps_send(cx, "cd", 2, QPS_MSG_MORE), 2);
	EQ(qps_send(cx, "ef", 2, 0), 2);
	{
		int v = 2000;

		EQ(qps_setopt(rx, QPS_OPT_RCVTIMEO, &v, sizeof(v)), 0);
	}
	EQ(qps_recv(rx, buf, sizeof(buf), QPS_MSG_PEEK), 2);
	EQ(qps_recv(rx, buf, 1, QPS_MSG_TRUNC), 2);
	EQ(qps_recv(rx, buf, sizeof(buf), QPS_MSG_PEEK | QPS_MSG_TRUNC), 2);
	EQ(qps_recv(rx, buf, sizeof(buf), 0), 2);
	EQ(qps_recv(rx, buf, sizeof(buf), 0), 2);
	EQ(memcmp(buf, "ef", 2), 0);
	t_end();
}

/* ------------------------------------------------------------------ */
/* Stats with partial sizes.                                           */

static void test_stats_size(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	struct sockaddr_in d = t_sin(IP_B, 9500);
	struct qps_stats full;
	unsigned char raw[sizeof(struct qps_stats) + 64];
	char buf[16];
	int v = 2000;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-stats");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = mkep(a);
	rx = mkep(b);
	EQ(qps_bind(rx, (struct sockaddr *)&d, sizeof(d)), 0);
	EQ(qps_setopt(rx, QPS_OPT_RCVTIMEO, &v, sizeof(v)), 0);
	/* Some traffic so the first counter is not zero. */
	for (int i = 0; i < 3; i++)
		EQ(qps_sendto(tx, "abc", 3, 0, (struct sockaddr *)&d,
			      sizeof(d)), 3);
	for (int i = 0; i < 3; i++)
		EQ(qps_recv(rx, buf, sizeof(buf), 0), 3);
	qps_ctx_progress(a);
	memset(&full, 0, sizeof(full));
	EQ(qps_ctx_stats(a, &full, sizeof(full)), sizeof(full));
	EQ(full.tx_packets, 3);

	/* size 0: returns 0, writes nothing. */
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_stats(a, (struct qps_stats *)(void *)raw, 0), 0);
	EQ(raw[0], 0xab);

	/* 8 bytes: only tx_packets. */
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_stats(a, (struct qps_stats *)(void *)raw, 8), 8);
	{
		uint64_t tp;

		memcpy(&tp, raw, 8);
		EQ(tp, 3);
	}
	for (size_t i = 8; i < sizeof(raw); i++)
		if (raw[i] != 0xab) {
			CU_FAIL("qps_ctx_stats(8) wrote past 8 bytes");
			break;
		}

	/* 5 bytes: up to @size, so 5. */
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_stats(a, (struct qps_stats *)(void *)raw, 5), 5);
	EQ(raw[5], 0xab);
	CU_ASSERT(memcmp(raw, &full.tx_packets, 5) == 0);

	/* Larger than the struct: the struct's size, nothing beyond. */
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_stats(a, (struct qps_stats *)(void *)raw, sizeof(raw)),
	   sizeof(struct qps_stats));
	EQ(raw[sizeof(struct qps_stats)], 0xab);
	EQ(raw[sizeof(raw) - 1], 0xab);
	t_end();
}

/* The first @n bytes of @p all hold @v. */
static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static struct qps_ctx *query_ex_ctx(const char *wire, const char *ip,
				    uint32_t tx_path)
{
	struct qps_ctx_attr attr = emu_attr(wire);
	struct qps_ctx *ctx = NULL;

	attr.comp_mask |= QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_TX_PATH;
	inet_pton(AF_INET, ip, &attr.addr);
	attr.tx_path = tx_path;
	EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	return ctx;
}

/*
 * qps_ctx_query_ex: a size below the base is refused, nothing beyond
 * @size is written, a larger size zero-fills what this library does not
 * know and returns what it does; emu reports its send path and nothing
 * of a host netdev.
 */
static void test_query_ex(void)
{
	const size_t base = sizeof(struct qps_ctx_info);
	const size_t full = sizeof(struct qps_ctx_info_ex);
	unsigned char raw[sizeof(struct qps_ctx_info_ex) + 64];
	struct qps_ctx_info_ex x;
	struct qps_ctx_info info;
	struct qps_ctx *d, *g;
	char wire[64];

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-qex");
	d = query_ex_ctx(wire, IP_A, QPS_TX_PATH_DIRECT);
	g = query_ex_ctx(wire, IP_B, QPS_TX_PATH_GENERIC);

	EQ(qps_ctx_query_ex(NULL, &x, sizeof(x)), -EINVAL);
	EQ(qps_ctx_query_ex(d, NULL, sizeof(x)), -EFAULT);
	EQ(qps_ctx_query_ex(d, &x, 0), -EINVAL);
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_query_ex(d, (void *)raw, base - 1), -EINVAL);
	CU_ASSERT(all_bytes(raw, sizeof(raw), 0xab));

	/* Base only: what qps_ctx_query says, and not a byte more. */
	EQ_FATAL(qps_ctx_query(d, &info), 0);
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_query_ex(d, (void *)raw, base), base);
	CU_ASSERT(memcmp(raw, &info, base) == 0);
	CU_ASSERT(all_bytes(raw + base, sizeof(raw) - base, 0xab));

	/* Mid-field: up to @size, as qps_ctx_stats. */
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_query_ex(d, (void *)raw, base + 2), base + 2);
	CU_ASSERT(all_bytes(raw + base + 2, sizeof(raw) - base - 2, 0xab));

	/* The whole struct. */
	memset(&x, 0xab, sizeof(x));
	EQ(qps_ctx_query_ex(d, &x, sizeof(x)), sizeof(x));
	CU_ASSERT(memcmp(&x.base, &info, base) == 0);
	EQ(x.flags, QPS_CTX_INFO_F_TX_DIRECT | QPS_CTX_INFO_F_BLUEFLAME);
	EQ(x.rx_queue, 0);
	EQ(x.rx_queues, 0);
	CU_ASSERT(x.max_inline > 0 && x.max_inline <= info.mtu + 14);

	/* A newer caller's larger struct: the tail up to its size reads 0,
	 * the return says how much this library filled. */
	memset(raw, 0xab, sizeof(raw));
	EQ(qps_ctx_query_ex(d, (void *)raw, sizeof(raw) - 8), full);
	CU_ASSERT(memcmp(raw, &x, full) == 0);
	CU_ASSERT(all_bytes(raw + full, sizeof(raw) - 8 - full, 0));
	CU_ASSERT(all_bytes(raw + sizeof(raw) - 8, 8, 0xab));

	/* The generic path: no send-path flags; emu is no host netdev. */
	memset(&x, 0xab, sizeof(x));
	EQ(qps_ctx_query_ex(g, &x, sizeof(x)), sizeof(x));
	EQ(x.flags, 0);
	EQ(x.rx_queues, 0);
	CU_ASSERT_STRING_EQUAL(x.base.provider, "emu");
	t_end();
}

/* ------------------------------------------------------------------ */
/* errno is never touched.                                             */

/* Run @call with errno = 4242 and assert it returned @want and left
 * errno alone. */
#define KEEPS_ERRNO(call, want) \
	do { \
		long long _r; \
		errno = 4242; \
		_r = (long long)(call); \
		t_eq(errno, 4242, "errno after " #call, __FILE__, __LINE__, 0); \
		t_eq(_r, (want), #call, __FILE__, __LINE__, 0); \
	} while (0)

static void test_errno_untouched(void)
{
	char wire[64];
	struct qps_ctx *ctx = NULL, *ctx2 = NULL;
	struct qps_ctx_attr attr;
	struct qps_ep *ep = NULL, *rx = NULL;
	struct sockaddr_in s, d = t_sin(IP_B, 9600);
	char buf[8];
	int v = 50;

	t_begin();
	t_wire_name(wire, sizeof(wire), "api-errno");

	attr = emu_attr(wire);
	attr.provider = "nosuch";
	KEEPS_ERRNO(try_create(&attr), -ENOENT);
	KEEPS_ERRNO(t_ctx_emu(wire, IP_A, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	t_ctxs_add(&t_suite_ctxs, ctx);
	KEEPS_ERRNO(t_ctx_emu(wire, IP_B, &ctx2), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx2);
	t_ctxs_add(&t_suite_ctxs, ctx2);
	KEEPS_ERRNO(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	KEEPS_ERRNO(qps_ep_create(ctx2, QPS_EP_DGRAM, &rx), 0);
	CU_ASSERT_FATAL(ep != NULL && rx != NULL);
	KEEPS_ERRNO(qps_bind(rx, (struct sockaddr *)&d, sizeof(d)), 0);
	s = t_sin("198.18.0.200", 1);
	KEEPS_ERRNO(qps_bind(ep, (struct sockaddr *)&s, sizeof(s)),
		    -EADDRNOTAVAIL);
	KEEPS_ERRNO(qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&s,
			       sizeof(s)), -EHOSTUNREACH);
	KEEPS_ERRNO(qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT), -EAGAIN);
	KEEPS_ERRNO(qps_setopt(rx, QPS_OPT_RCVTIMEO, &v, sizeof(v)), 0);
	KEEPS_ERRNO(qps_recv(rx, buf, sizeof(buf), 0), -ETIMEDOUT);
	KEEPS_ERRNO(qps_sendto(ep, "y", 1, 0, (struct sockaddr *)&d,
			       sizeof(d)), 1);
	errno = 4242;
	CU_ASSERT(qps_ctx_progress(ctx) >= 0);
	t_eq(errno, 4242, "errno after qps_ctx_progress", __FILE__, __LINE__,
	     0);
	KEEPS_ERRNO(qps_recv(rx, buf, sizeof(buf), 0), 1);
	KEEPS_ERRNO(qps_recv(rx, buf, sizeof(buf), QPS_MSG_DONTWAIT), -EAGAIN);
	{
		struct qps_ctx_info_ex x;

		KEEPS_ERRNO(qps_ctx_query_ex(ctx, &x, 1), -EINVAL);
		KEEPS_ERRNO(qps_ctx_query_ex(ctx, &x, sizeof(x)),
			    (int)sizeof(x));
	}
	KEEPS_ERRNO(qps_ep_close(ep), 0);
	KEEPS_ERRNO(qps_ep_close(ep), -EBADF);
	t_suite_ctxs.n = 0;
	KEEPS_ERRNO(qps_ctx_destroy(ctx2), 0);
	KEEPS_ERRNO(qps_ctx_destroy(ctx), 0);
	t_end();
}

/* ------------------------------------------------------------------ */

static CU_TestInfo tests[] = {
	{ "context defaults (NULL attr, QPS_DEV)", test_ctx_defaults },
	{ "context attributes", test_ctx_attr },
	{ "context bad input", test_ctx_bad },
	{ "QPS_PROVIDER environment", test_provider_env },
	{ "endpoint create bad input", test_ep_create_bad },
	{ "NULL endpoint", test_ep_null },
	{ "closed endpoint", test_ep_closed },
	{ "closed slots reused last, in order", test_ep_reuse_order },
	{ "fork: the child gets -ECHILD, the parent goes on", test_fork },
	{ "NULL buffers", test_buffers },
	{ "bad addresses", test_addresses },
	{ "options", test_options },
	{ "flags", test_flags },
	{ "stats size", test_stats_size },
	{ "qps_ctx_query_ex sizes, emu's flags", test_query_ex },
	{ "errno untouched", test_errno_untouched },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	atexit(ctx_cleanup_atexit);
	return t_run("api", tests);
}
