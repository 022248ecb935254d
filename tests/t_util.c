// SPDX-License-Identifier: MIT
#include "t_util.h"

#include <CUnit/Basic.h>
#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int t_run(const char *suite, CU_TestInfo *tests)
{
	CU_SuiteInfo suites[] = {
		{ .pName = suite, .pTests = tests },
		CU_SUITE_INFO_NULL,
	};
	unsigned int failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (CU_register_suites(suites) != CUE_SUCCESS) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() +
		 CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}

void t_wire_name(char *buf, size_t len, const char *tag)
{
	snprintf(buf, len, "t-%s-%d", tag, (int)getpid());
}

/* Taken once at start: suites change QPS_PROVIDER to test it. */
static char g_provider[16] = "emu";

__attribute__((constructor)) static void t_provider_init(void)
{
	const char *env = getenv("QPS_PROVIDER");

	if (env && *env)
		snprintf(g_provider, sizeof(g_provider), "%s", env);
}

const char *t_provider(void)
{
	return g_provider;
}

int t_provider_is(const char *name)
{
	return !strcmp(g_provider, name);
}

struct qps_ctx_attr t_emu_attr(const char *wire, const char *ip)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV,
		.provider = "emu",
		.dev = wire,
	};

	if (ip) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		inet_pton(AF_INET, ip, &attr.addr);
	}
	if (t_provider_is("verbs")) {
		/* The double's next ibv_open_device reads these: the wire
		 * its emu port joins, and that port's address (the "ip addr
		 * add" of its netdev). The verbs provider then finds the
		 * address in the GID table. */
		attr.provider = "verbs";
		attr.comp_mask &= ~(uint64_t)QPS_CTX_ATTR_DEV;
		attr.dev = NULL;
		if (wire)
			setenv("QPS_EMU_WIRE", wire, 1);
		else
			unsetenv("QPS_EMU_WIRE");
		if (ip)
			setenv("QPS_IBV_EMU_ADDR", ip, 1);
		else
			unsetenv("QPS_IBV_EMU_ADDR");
	}
	return attr;
}

int t_ctx_emu(const char *wire, const char *ip, struct qps_ctx **out)
{
	struct qps_ctx_attr attr = t_emu_attr(wire, ip);

	return qps_ctx_create(&attr, out);
}

struct sockaddr_in t_sin(const char *ip, unsigned short port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}

void t_eq(long long got, long long want, const char *expr, const char *file,
	  unsigned int line, int fatal)
{
	char msg[384];

	if (got < 0 && got > -4096)
		snprintf(msg, sizeof(msg), "%s: expected %lld, got %lld (%s)",
			 expr, want, got, strerror((int)-got));
	else
		snprintf(msg, sizeof(msg), "%s: expected %lld, got %lld",
			 expr, want, got);
	CU_assertImplementation(got == want ? CU_TRUE : CU_FALSE, line, msg,
				file, "", fatal ? CU_TRUE : CU_FALSE);
}

void t_cmp(long long a, long long b, int le, const char *expr,
	   const char *file, unsigned int line)
{
	char msg[384];
	int ok = le ? a <= b : a >= b;

	snprintf(msg, sizeof(msg), "%s (values %lld, %lld)", expr, a, b);
	CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, line, msg, file, "",
				CU_FALSE);
}

struct qps_stats t_ctx_stats(struct qps_ctx *ctx)
{
	struct qps_stats st;

	memset(&st, 0, sizeof(st));
	T_EQ(qps_ctx_stats(ctx, &st, sizeof(st)), sizeof(st));
	return st;
}

void t_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

uint64_t t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t t_ip4(const char *s)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		return 0;
	return a.s_addr;
}

void t_ctxs_add(struct t_ctxs *s, struct qps_ctx *ctx)
{
	if (ctx && s->n < T_CTX_MAX)
		s->ctx[s->n++] = ctx;
}

void t_ctxs_destroy(struct t_ctxs *s, int check)
{
	while (s->n > 0) {
		int rc = qps_ctx_destroy(s->ctx[--s->n]);

		if (check)
			T_EQ(rc, 0);
	}
}

struct qps_ctx *t_ctxs_emu(struct t_ctxs *s, const char *wire,
			   const char *ip)
{
	struct qps_ctx *ctx = NULL;

	CU_ASSERT_FATAL(s->n < T_CTX_MAX);
	T_EQ_FATAL(t_ctx_emu(wire, ip, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	t_ctxs_add(s, ctx);
	return ctx;
}

int t_wait_child(int pid, int timeout_ms)
{
	uint64_t end = t_now_ms() + (uint64_t)timeout_ms;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -2;
		if (t_now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			fprintf(stderr, "child %d killed after %d ms\n", pid,
				timeout_ms);
			return -1;
		}
		usleep(5000);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -3;
}

struct t_ctxs t_suite_ctxs;

void t_suite_begin(void)
{
	t_ctxs_destroy(&t_suite_ctxs, 0);
}

void t_suite_end(void)
{
	t_ctxs_destroy(&t_suite_ctxs, 1);
}

void t_suite_cleanup(void)
{
	t_ctxs_destroy(&t_suite_ctxs, 0);
}

struct qps_ctx *t_suite_ctx(const char *wire, const char *ip)
{
	return t_ctxs_emu(&t_suite_ctxs, wire, ip);
}

uint64_t t_check_delivery(struct qps_ctx *tx, struct qps_ctx *rx,
			  uint64_t sent, uint64_t received,
			  struct qps_stats *tx_st, struct qps_stats *rx_st)
{
	uint64_t drops;

	*tx_st = t_ctx_stats(tx);
	*rx_st = t_ctx_stats(rx);
	drops = tx_st->tx_errors + tx_st->dev_tx_drops + rx_st->dev_rx_drops +
		rx_st->rx_queue_full + rx_st->rx_no_endpoint;
	T_EQ(tx_st->tx_packets, sent);
	T_EQ(received + drops, sent);
	return drops;
}

void t_threads_run(void *(*fn)(void *), void *args, size_t size,
		   unsigned int n)
{
	pthread_t *t = calloc(n, sizeof(*t));
	unsigned int k, started = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	for (k = 0; k < n; k++) {
		int rc = pthread_create(&t[k], NULL, fn,
					(char *)args + k * size);

		T_EQ(rc, 0);
		if (rc)
			break;
		started++;
	}
	/* Join what did start before a failure ends the test, so no thread
	 * outlives the structs it was given. */
	for (k = 0; k < started; k++)
		pthread_join(t[k], NULL);
	free(t);
	CU_ASSERT_FATAL(started == n);
}

void t_thread_stop(pthread_t t, int *stop)
{
	__atomic_store_n(stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
}

struct qps_ep *t_ep_bound(struct qps_ctx *ctx, const char *ip,
			  unsigned short port, int timeout_ms)
{
	struct sockaddr_in sin = t_sin(ip, port);
	struct qps_ep *ep = NULL;

	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ_FATAL(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)), 0);
	T_EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &timeout_ms, sizeof(timeout_ms)),
	     0);
	return ep;
}

/*
 * The exclusions: tests that cannot run on a provider, and why. The same
 * table is in docs/verbs.md; keep the two together.
 */
struct t_exclusion {
	const char *provider;
	const char *file;	/* basename of the test's source */
	const char *func;
	const char *why;
};

#define T_EMU_INTERNALS "reads emu device internals (providers/emu/emu.h)"
#define T_NO_DROPS "closes the delivery count with the device's drop " \
	"counters, which the double's emu port does not expose through verbs"
#define T_NO_MLX4 "the direct path needs a ConnectX-3 (mlx4dv); the " \
	"test double is not one"

static const struct t_exclusion t_exclusions[] = {
	{ "verbs", "test_mcast.c", "test_errors",
	  "counts the emu port's MAC filter references" },
	{ "verbs", "test_mcast.c", "test_device_full",
	  "counts the emu port's steering rules" },
	{ "verbs", "test_mcast.c", "test_refcount",
	  "counts the emu port's steering rules and MAC filters" },
	{ "verbs", "test_doorbell.c", "counts_generic",
	  "compares with the emu device's register-write counters" },
	{ "verbs", "test_doorbell.c", "counts_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "e2e_generic",
	  "compares with the emu device's register-write counters" },
	{ "verbs", "test_doorbell.c", "e2e_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "stranding_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "flush_points_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "full_mid_burst_generic",
	  "stops the emu engine (qps_emu_set_stepping)" },
	{ "verbs", "test_doorbell.c", "full_mid_burst_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "moderation_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "moderation_error_generic",
	  "stops the emu engine (qps_emu_set_stepping)" },
	{ "verbs", "test_doorbell.c", "moderation_error_direct", T_NO_MLX4 },
	{ "verbs", "test_doorbell.c", "blueflame",
	  "opens emu directly and reads its per-QP counters" },
	{ "verbs", "test_doorbell.c", "same_wqe_bytes",
	  "opens emu directly and compares its rings byte for byte" },
	{ "verbs", "test_doorbell.c", "cost_model", T_EMU_INTERNALS },
	{ "verbs", "test_prio_e2e.c", "strict_direct", T_NO_MLX4 },
	{ "verbs", "test_prio_e2e.c", "full_band_direct", T_NO_MLX4 },
	{ "verbs", "test_prio_e2e.c", "refused_last_direct", T_NO_MLX4 },
	{ "verbs", "test_prio_e2e.c", "more_tail_direct", T_NO_MLX4 },
	{ "verbs", "test_prio_e2e.c", "concurrent_generic", T_NO_DROPS },
	{ "verbs", "test_prio_e2e.c", "concurrent_direct", T_NO_MLX4 },
	{ "verbs", "test_txq_e2e.c", "connected_once_generic",
	  "expects the route generation to move when any port joins; the "
	  "kernel's tables move it only when a next hop in use changes" },
	{ "verbs", "test_txq_e2e.c", "connected_once_direct", T_NO_MLX4 },
	{ "verbs", "test_txq_e2e.c", "flows_direct", T_NO_MLX4 },
	{ "verbs", "test_txq_e2e.c", "reorder_cpu_direct", T_NO_MLX4 },
	{ "verbs", "test_txq_e2e.c", "test_concurrent", T_NO_DROPS },
	{ NULL, NULL, NULL, NULL },
};

int t_excluded(const char *file, const char *func)
{
	const char *base = strrchr(file, '/');
	const struct t_exclusion *e;

	base = base ? base + 1 : file;
	for (e = t_exclusions; e->provider; e++) {
		if (strcmp(e->provider, g_provider) || strcmp(e->file, base) ||
		    strcmp(e->func, func))
			continue;
		printf("\n    SKIP %s on %s: %s ", func, g_provider, e->why);
		fflush(stdout);
		return 1;
	}
	return 0;
}

int t_stat_reap(int pid)
{
	char prefix[64], path[384];
	struct dirent *e;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	if (!d)
		return 0;
	snprintf(prefix, sizeof(prefix), "qpsock-stat.%d.", pid);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		if (unlink(path) == 0)
			n++;
	}
	closedir(d);
	return n;
}

int t_under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload") != NULL;
}
