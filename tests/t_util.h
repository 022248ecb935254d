/* SPDX-License-Identifier: MIT */
/* Shared helpers for the CUnit suites. */
#ifndef QPS_T_UTIL_H
#define QPS_T_UTIL_H

#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <qpsock/qpsock.h>

#define T_EXIT_SKIP 77

/* Register one suite made of @tests (NULL-terminated CU_TestInfo array),
 * run it verbosely and return the process exit code: 0 all passed, 1 any
 * failure. */
int t_run(const char *suite, CU_TestInfo *tests);

/* A wire name unique to this process and @tag, so suites run in parallel
 * never share an emu wire. */
void t_wire_name(char *buf, size_t len, const char *tag);

/* Attributes for an emu context on @wire with local address @ip (NULL =
 * allocated); callers add their own attributes to comp_mask. When the
 * suite runs on verbs (t_provider), they open the verbs provider on the
 * libibverbs test double instead, whose next ibv_open_device attaches to
 * the same wire and address (tests/verbs/run-on-shim.sh). */
struct qps_ctx_attr t_emu_attr(const char *wire, const char *ip);

/* Open an emu context on @wire with local address @ip (NULL = allocated). */
int t_ctx_emu(const char *wire, const char *ip, struct qps_ctx **out);

/* A datagram endpoint on @ctx bound to @ip:@port, with a @timeout_ms
 * receive timeout so a lost datagram fails the test instead of hanging it;
 * failing to create or bind ends the test. */
struct qps_ep *t_ep_bound(struct qps_ctx *ctx, const char *ip,
			  unsigned short port, int timeout_ms);

/* A struct sockaddr_in for @ip:@port. */
struct sockaddr_in t_sin(const char *ip, unsigned short port);

/* Assert @got == @want; on failure the message shows both values (and the
 * errno name when @got looks like a negative error code), which a bare
 * CU_ASSERT_EQUAL does not. @fatal as for CU_assertImplementation. */
void t_eq(long long got, long long want, const char *expr, const char *file,
	  unsigned int line, int fatal);

/* Assert @a <= @b (@le) or @a >= @b (!@le); the message shows both. A
 * function, not a macro, so each operand (often a call with side effects
 * such as qps_ctx_progress) is evaluated exactly once. */
void t_cmp(long long a, long long b, int le, const char *expr,
	   const char *file, unsigned int line);

#define T_EQ(got, want) \
	t_eq((long long)(got), (long long)(want), #got " == " #want, \
	     __FILE__, __LINE__, 0)
#define T_EQ_FATAL(got, want) \
	t_eq((long long)(got), (long long)(want), #got " == " #want, \
	     __FILE__, __LINE__, 1)
#define T_GE(a, b) \
	t_cmp((long long)(a), (long long)(b), 0, #a " >= " #b, __FILE__, \
	      __LINE__)
#define T_LE(a, b) \
	t_cmp((long long)(a), (long long)(b), 1, #a " <= " #b, __FILE__, \
	      __LINE__)

/* The contexts a suite has open, so the end of each test (and an atexit
 * handler after an aborted one) can destroy them and leave the wire clean.
 * The set lives in the suite; these helpers keep no state of their own. */
#define T_CTX_MAX 8
struct t_ctxs {
	struct qps_ctx *ctx[T_CTX_MAX];
	int n;
};

/* Track @ctx; NULL or a full set is ignored (the caller asserts room). */
void t_ctxs_add(struct t_ctxs *s, struct qps_ctx *ctx);

/* Destroy every tracked context, newest first; with @check, assert each
 * destroy returns 0 (off after an aborted test, whose state is unknown). */
void t_ctxs_destroy(struct t_ctxs *s, int check);

/* An emu context on @wire with address @ip (see t_ctx_emu), tracked in @s;
 * any failure, including a full set, ends the test. */
struct qps_ctx *t_ctxs_emu(struct t_ctxs *s, const char *wire,
			   const char *ip);

/* The set most suites use, one per test program, with the calls each
 * test makes: t_suite_begin() first (destroys what an aborted test left
 * behind), t_suite_end() last (destroys and checks, cleaning the wire);
 * t_suite_cleanup is the atexit handler for an aborted run. */
extern struct t_ctxs t_suite_ctxs;
void t_suite_begin(void);
void t_suite_end(void);
void t_suite_cleanup(void);
/* t_ctxs_emu on t_suite_ctxs. */
struct qps_ctx *t_suite_ctx(const char *wire, const char *ip);

/* The context's counters, asserting the whole struct was filled. */
struct qps_stats t_ctx_stats(struct qps_ctx *ctx);

/* Check that @tx's context counted @sent transmits and that each of them
 * was either received (@received) or counted as dropped on the way to @rx's
 * context: send errors, device drops on either side, a full receive queue,
 * no endpoint. Fills @tx_st and @rx_st for further checks; returns the
 * drops. */
uint64_t t_check_delivery(struct qps_ctx *tx, struct qps_ctx *rx,
			  uint64_t sent, uint64_t received,
			  struct qps_stats *tx_st, struct qps_stats *rx_st);

/* Start @n threads running @fn, the k-th on @args + k * @size (an array of
 * per-thread structs), and wait for all of them; a thread that cannot be
 * started ends the test. */
void t_threads_run(void *(*fn)(void *), void *args, size_t size,
		   unsigned int n);

/* Ask thread @t to end by setting *@stop (it reads it with acquire
 * semantics), then wait for it. */
void t_thread_stop(pthread_t t, int *stop);

/* Sleep @ms milliseconds (tests let in-flight traffic settle). */
void t_sleep_ms(unsigned int ms);

/* CLOCK_MONOTONIC in milliseconds, for test deadlines. */
uint64_t t_now_ms(void);

/* Exit status of child @pid: 0..255 its exit code, 128+sig when a signal
 * ended it, -1 when it outlived @timeout_ms and was killed (said on
 * stderr), -2 when waitpid failed. */
int t_wait_child(int pid, int timeout_ms);

/* Remove the stats segments (/dev/shm/qpsock-stat.<pid>.*) of a process
 * the test killed; returns how many there were. */
int t_stat_reap(int pid);

/* The IPv4 address @s (dotted quad) in network order; 0 if malformed. */
uint32_t t_ip4(const char *s);

/* The provider the suite runs on: $QPS_PROVIDER ("verbs" under
 * tests/verbs/run-on-shim.sh), else "emu". */
const char *t_provider(void);
int t_provider_is(const char *name);

/* Whether the test runs under valgrind, whose core does not model some
 * calls (membarrier, seccomp's effect on them, mount): tests of those
 * skip there with a message. */
int t_under_valgrind(void);

/*
 * Per-provider exclusions, listed in one table in t_util.c (and in
 * docs/verbs.md) with their reason: true, after printing the reason, when
 * test @func of @file cannot run on the current provider. Tests start
 * with T_EXCLUDED_RETURN().
 */
int t_excluded(const char *file, const char *func);
#define T_EXCLUDED_RETURN() \
	do { \
		if (t_excluded(__FILE__, __func__)) \
			return; \
	} while (0)

#endif
