// SPDX-License-Identifier: MIT
/*
 * The perftest-style tools' shared code (tools/perf_*.c, compiled in):
 * every flag accepted and every bad value refused with a message naming
 * it; BW and latency statistics against hand-computed values; JSON lines
 * checked by a small validator; the parameter handshake, its mismatch
 * reasons, busy and refused TCP ports; -c (RAW / UD, connected types
 * refused) and the UD fields of the hello (transport, QPN, Q_Key).
 *
 * "test_tools --check-json FILE MIN" validates every line of FILE that
 * starts with '{' and wants at least MIN of them: the end-to-end test
 * (test_tools_e2e.sh) uses it on the tools' real output.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf_common.h"
#include "t_util.h"

#define ARGV_MAX 48

/* ---- a minimal JSON validator (RFC 8259 grammar, no semantics) ---- */

static void js_ws(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
		(*p)++;
}

static int js_value(const char **p, int depth);

static int js_string(const char **p)
{
	const char *s = *p;
	int i;

	if (*s++ != '"')
		return -1;
	while (*s != '"') {
		if ((unsigned char)*s < 0x20)
			return -1;
		if (*s++ != '\\')
			continue;
		if (strchr("\"\\/bfnrt", *s) && *s) {
			s++;
			continue;
		}
		if (*s++ != 'u')
			return -1;
		for (i = 0; i < 4; i++, s++)
			if (!strchr("0123456789abcdefABCDEF", *s) || !*s)
				return -1;
	}
	*p = s + 1;
	return 0;
}

static int js_number(const char **p)
{
	const char *s = *p;

	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return -1;
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return -1;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (*s < '0' || *s > '9')
			return -1;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	*p = s;
	return 0;
}

static int js_members(const char **p, int depth, char close, bool keys)
{
	(*p)++;
	js_ws(p);
	if (**p == close) {
		(*p)++;
		return 0;
	}
	for (;;) {
		js_ws(p);
		if (keys) {
			if (js_string(p))
				return -1;
			js_ws(p);
			if (*(*p)++ != ':')
				return -1;
		}
		if (js_value(p, depth + 1))
			return -1;
		js_ws(p);
		if (**p == ',') {
			(*p)++;
			continue;
		}
		if (*(*p)++ != close)
			return -1;
		return 0;
	}
}

static int js_value(const char **p, int depth)
{
	if (depth > 32)
		return -1;
	js_ws(p);
	switch (**p) {
	case '{':
		return js_members(p, depth, '}', true);
	case '[':
		return js_members(p, depth, ']', false);
	case '"':
		return js_string(p);
	case 't':
		return strncmp(*p, "true", 4) ? -1 : (*p += 4, 0);
	case 'f':
		return strncmp(*p, "false", 5) ? -1 : (*p += 5, 0);
	case 'n':
		return strncmp(*p, "null", 4) ? -1 : (*p += 4, 0);
	default:
		return js_number(p);
	}
}

/* 0 when @s is exactly one JSON object (surrounding blanks allowed). */
static int js_check(const char *s)
{
	js_ws(&s);
	if (*s != '{' || js_value(&s, 0))
		return -1;
	js_ws(&s);
	return *s ? -1 : 0;
}

static void test_json_validator(void)
{
	CU_ASSERT_EQUAL(js_check("{}"), 0);
	CU_ASSERT_EQUAL(js_check("{\"a\":[1,-2.5e3,true,null,\"x\\\"\\u00e9\"]}"), 0);
	CU_ASSERT_EQUAL(js_check("{\"a\":1,}"), -1);
	CU_ASSERT_EQUAL(js_check("{\"a\":01}"), -1);
	CU_ASSERT_EQUAL(js_check("{\"a\":1} x"), -1);
	CU_ASSERT_EQUAL(js_check("{\"a\":\"\x01\"}"), -1);
	CU_ASSERT_EQUAL(js_check("{\"a\":nan}"), -1);
	CU_ASSERT_EQUAL(js_check("[1]"), -1);
}

static void test_json_builder(void)
{
	struct perf_counters c;
	struct perf_json j;
	char buf[1024], small[24];
	int n;

	memset(&c, 0, sizeof(c));
	c.wqes = 100;
	c.doorbells = 10;
	c.dev_rx_drops = 3;
	c.rx_queue_full = 2;
	perf_json_begin(&j, buf, sizeof(buf));
	perf_json_str(&j, "name", "a\"b\\c\n");
	perf_json_u64(&j, "n", UINT64_MAX);
	perf_json_dbl(&j, "x", 1.5);
	perf_json_dbl(&j, "inf", INFINITY);
	perf_json_counters(&j, &c);
	perf_json_u64(&j, "after", 1);
	n = perf_json_end(&j);
	CU_ASSERT(n > 0);
	CU_ASSERT_EQUAL(js_check(buf), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"n\":18446744073709551615"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"inf\":null"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"doorbells\":10"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"drops\":5"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "},\"after\":1}"));

	/* Too small: refused, never cut into invalid JSON silently. */
	perf_json_begin(&j, small, sizeof(small));
	perf_json_str(&j, "name", "a long value that does not fit");
	CU_ASSERT_EQUAL(perf_json_end(&j), -ENOSPC);
}

/* ---- option parsing ---- */

struct parse_case {
	enum perf_test test;
	const char *args;	/* space separated */
	const char *err;	/* expected in the message; NULL = accepted */
};

static int t_parse(enum perf_test test, const char *args, struct perf_opts *o,
		   char **msg)
{
	char *argv[ARGV_MAX], *copy, *tok, *save = NULL;
	size_t mlen = 0;
	FILE *err;
	int argc = 0, ret;

	copy = strdup(args);
	argv[argc++] = (char *)(test == PERF_TEST_BW ? "qps_send_bw" :
				"qps_send_lat");
	for (tok = strtok_r(copy, " ", &save); tok && argc < ARGV_MAX - 1;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = strcmp(tok, "''") ? tok : (char *)"";
	argv[argc] = NULL;
	*msg = NULL;
	err = open_memstream(msg, &mlen);
	ret = perf_parse(argc, argv, test, o, err);
	fclose(err);
	/* o->server and o->dev point into copy: keep it for the caller. */
	if (ret == 0 && (o->server || o->dev || o->provider))
		o->prog = copy;
	else
		free(copy);
	return ret;
}

static void t_parse_free(struct perf_opts *o, char *msg)
{
	if (o->prog && (o->server || o->dev || o->provider))
		free((char *)o->prog);
	free(msg);
}

static void test_parse_defaults(void)
{
	struct perf_opts o;
	char *msg;

	CU_ASSERT_EQUAL(t_parse(PERF_TEST_BW, "", &o, &msg), 0);
	CU_ASSERT_PTR_NULL(o.server);
	CU_ASSERT_EQUAL(o.port, 18515);
	CU_ASSERT_EQUAL(o.size, 65536);
	CU_ASSERT_EQUAL(o.iters, 1000);
	CU_ASSERT_EQUAL(o.num_qps, 1);
	CU_ASSERT_EQUAL(o.post_list, 1);
	CU_ASSERT_EQUAL(o.cq_mod, 100);
	CU_ASSERT_EQUAL(o.tx_depth, 128);
	CU_ASSERT_EQUAL(o.rx_depth, 1000);	/* UD rule: min(-n, 4096) */
	CU_ASSERT_EQUAL(o.inline_size, 0);
	CU_ASSERT_EQUAL(o.priority, -1);
	CU_ASSERT_EQUAL(o.threads, 1);
	CU_ASSERT(!o.all && !o.mcg && !o.json && !o.no_peak && !o.duration);
	CU_ASSERT_EQUAL(o.transport, QPS_TRANSPORT_RAW);
	t_parse_free(&o, msg);

	CU_ASSERT_EQUAL(t_parse(PERF_TEST_LAT, "", &o, &msg), 0);
	CU_ASSERT_EQUAL(o.size, 2);
	CU_ASSERT_EQUAL(o.tx_depth, 1);
	t_parse_free(&o, msg);
}

/* perftest's UD depth rules: no deeper than the run; -D keeps 512. */
static void test_parse_depth_rules(void)
{
	static const struct {
		const char *args;
		unsigned int tx, rx;
	} rows[] = {
		{ "-n 10000", 128, 4096 },
		{ "-n 50 -r 100", 50, 50 },
		{ "-n 100 -t 200 -r 64", 100, 64 },
		{ "-D 2", 128, 512 },
		{ "-D 2 -r 4096 -t 4096", 4096, 4096 },
	};
	struct perf_opts o;
	unsigned int i;
	char *msg;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(t_parse(PERF_TEST_BW, rows[i].args, &o,
					      &msg), 0);
		CU_ASSERT_EQUAL(o.tx_depth, rows[i].tx);
		CU_ASSERT_EQUAL(o.rx_depth, rows[i].rx);
		t_parse_free(&o, msg);
	}
}

static void test_parse_every_flag(void)
{
	struct perf_opts o;
	char *msg;
	char ip[INET_ADDRSTRLEN];

	CU_ASSERT_EQUAL_FATAL(t_parse(PERF_TEST_BW,
		"-s 64 -n 4000 -q 2 -l 8 -Q 16 -t 64 -r 1024 -I 32 "
		"-F --report_gbits -N -p 20000 --provider emu -d w1 "
		"--priority 3 --threads 4 --json 10.0.0.1", &o, &msg), 0);
	CU_ASSERT_EQUAL(o.size, 64);
	CU_ASSERT(o.size_set);
	CU_ASSERT_EQUAL(o.iters, 4000);
	CU_ASSERT_EQUAL(o.num_qps, 2);
	CU_ASSERT_EQUAL(o.post_list, 8);
	CU_ASSERT_EQUAL(o.cq_mod, 16);
	CU_ASSERT_EQUAL(o.tx_depth, 64);
	CU_ASSERT_EQUAL(o.rx_depth, 1024);
	CU_ASSERT_EQUAL(o.inline_size, 32);
	CU_ASSERT(o.inline_set);
	CU_ASSERT(!o.mcg);
	CU_ASSERT(o.cpu_freq_f && o.report_gbits && o.no_peak && o.json);
	CU_ASSERT_EQUAL(o.port, 20000);
	CU_ASSERT_STRING_EQUAL(o.provider, "emu");
	CU_ASSERT_STRING_EQUAL(o.dev, "w1");
	CU_ASSERT_EQUAL(o.priority, 3);
	CU_ASSERT_EQUAL(o.threads, 4);
	CU_ASSERT_STRING_EQUAL(o.server, "10.0.0.1");
	t_parse_free(&o, msg);

	/* Long forms, -g with its default group, -a, -D. */
	CU_ASSERT_EQUAL_FATAL(t_parse(PERF_TEST_BW,
		"--all --qp=1 --post_list=2 --cq-mod=4 --tx-depth=8 "
		"--rx-depth=16 --inline_size=0 --mcg --CPU-freq --noPeak "
		"--port=1 --provider=verbs --dev=mlx4_0 --priority=15 "
		"--threads=64 --iters=10", &o, &msg), 0);
	CU_ASSERT(o.all && o.mcg && o.cpu_freq_f && o.no_peak);
	inet_ntop(AF_INET, &o.mcg_addr, ip, sizeof(ip));
	CU_ASSERT_STRING_EQUAL(ip, PERF_DEF_MCG);
	CU_ASSERT_EQUAL(o.iters, 10);
	CU_ASSERT_EQUAL(o.post_list, 2);
	CU_ASSERT_EQUAL(o.cq_mod, 4);
	CU_ASSERT_EQUAL(o.port, 1);
	CU_ASSERT_STRING_EQUAL(o.provider, "verbs");
	CU_ASSERT_STRING_EQUAL(o.dev, "mlx4_0");
	CU_ASSERT_EQUAL(o.threads, 64);
	t_parse_free(&o, msg);

	CU_ASSERT_EQUAL(t_parse(PERF_TEST_BW, "-D 3 --size=1472 --provider packet "
				"-M 239.1.2.3", &o, &msg), 0);
	CU_ASSERT_EQUAL(o.duration, 3);
	CU_ASSERT(o.mcg);
	inet_ntop(AF_INET, &o.mcg_addr, ip, sizeof(ip));
	CU_ASSERT_STRING_EQUAL(ip, "239.1.2.3");
	CU_ASSERT_EQUAL(o.size, 1472);
	CU_ASSERT_STRING_EQUAL(o.provider, "packet");
	t_parse_free(&o, msg);

	/* perftest: without -Q the post list moderates completions, and
	 * moderation is capped to the TX depth. */
	CU_ASSERT_EQUAL(t_parse(PERF_TEST_BW, "-l 4 -n 1000", &o, &msg), 0);
	CU_ASSERT_EQUAL(o.cq_mod, 4);
	t_parse_free(&o, msg);
	CU_ASSERT_EQUAL(t_parse(PERF_TEST_BW, "-t 32", &o, &msg), 0);
	CU_ASSERT_EQUAL(o.cq_mod, 32);
	t_parse_free(&o, msg);

	CU_ASSERT_EQUAL(t_parse(PERF_TEST_LAT, "-s 1472 -n 5 -t 4 -r 8 -I 188 "
				"-F -N --json host", &o, &msg), 0);
	CU_ASSERT_EQUAL(o.size, 1472);
	CU_ASSERT_EQUAL(o.iters, 5);
	CU_ASSERT_STRING_EQUAL(o.server, "host");
	t_parse_free(&o, msg);

	CU_ASSERT_EQUAL(t_parse(PERF_TEST_BW, "-h", &o, &msg), 1);
	t_parse_free(&o, msg);
}

/* -c: perftest's name and spellings; the last one given wins. */
static void test_parse_connection(void)
{
	static const struct {
		enum perf_test test;
		const char *args;
		uint32_t transport;
		const char *name;
	} rows[] = {
		{ PERF_TEST_BW, "-c UD", QPS_TRANSPORT_UD, "UD" },
		{ PERF_TEST_BW, "--connection=ud", QPS_TRANSPORT_UD, "UD" },
		{ PERF_TEST_BW, "-c RAW", QPS_TRANSPORT_RAW, "RAW" },
		{ PERF_TEST_BW, "-c RawEth", QPS_TRANSPORT_RAW, "RAW" },
		{ PERF_TEST_BW, "-c UD -c raw", QPS_TRANSPORT_RAW, "RAW" },
		{ PERF_TEST_LAT, "--connection UD -s 1012", QPS_TRANSPORT_UD,
		  "UD" },
	};
	struct perf_opts o;
	unsigned int i;
	char *msg;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(t_parse(rows[i].test, rows[i].args, &o,
					      &msg), 0);
		CU_ASSERT_EQUAL(o.transport, rows[i].transport);
		CU_ASSERT_STRING_EQUAL(perf_conn_name(o.transport),
				       rows[i].name);
		t_parse_free(&o, msg);
	}
	/* -Q is kept for the context's tx_signal, within -t. */
	CU_ASSERT_EQUAL_FATAL(t_parse(PERF_TEST_BW, "-c UD -Q 16 -l 16 -n 4096",
				      &o, &msg), 0);
	CU_ASSERT_EQUAL(o.cq_mod, 16);
	CU_ASSERT(o.cq_mod <= o.tx_depth);
	t_parse_free(&o, msg);
}

static const struct parse_case bad_cases[] = {
	{ PERF_TEST_BW, "-H", "-H is for latency tests" },
	{ PERF_TEST_LAT, "-H -D 2", "-H needs samples" },
	{ PERF_TEST_BW, "-s 0", "-s" },
	{ PERF_TEST_BW, "-s 8388609", "-s" },
	{ PERF_TEST_BW, "-s abc", "-s" },
	{ PERF_TEST_BW, "-s -1", "-s" },
	{ PERF_TEST_BW, "-s 12k", "-s" },
	{ PERF_TEST_BW, "-s", "needs a value" },
	{ PERF_TEST_BW, "-n 4", "-n" },
	{ PERF_TEST_BW, "-n 1e3", "-n" },
	{ PERF_TEST_BW, "-n 100000001", "-n" },
	{ PERF_TEST_BW, "-D 0", "-D" },
	{ PERF_TEST_BW, "-D 3601", "-D" },
	{ PERF_TEST_BW, "-q 0", "-q" },
	{ PERF_TEST_BW, "-q 17", "-q" },
	{ PERF_TEST_BW, "-l 0", "-l" },
	{ PERF_TEST_BW, "-l 1025", "-l" },
	{ PERF_TEST_BW, "-l 3", "multiple of -l" },
	{ PERF_TEST_BW, "-l 256 -n 1024", "TX depth" },
	{ PERF_TEST_BW, "-Q 0", "-Q" },
	{ PERF_TEST_BW, "-Q 1025", "-Q" },
	{ PERF_TEST_BW, "-Q 64 -t 32", "-Q 64 exceeds" },
	{ PERF_TEST_BW, "-t 0", "-t" },
	{ PERF_TEST_BW, "-t 4097", "-t" },
	{ PERF_TEST_BW, "-r 1", "-r" },
	{ PERF_TEST_BW, "-r 4097", "-r" },
	{ PERF_TEST_BW, "-I 913", "-I" },
	{ PERF_TEST_BW, "-M 10.0.0.1", "-M" },
	{ PERF_TEST_BW, "-M nope", "-M" },
	{ PERF_TEST_BW, "-g -q 2", "one QP" },
	{ PERF_TEST_BW, "-p 0", "-p" },
	{ PERF_TEST_BW, "-p 65536", "-p" },
	{ PERF_TEST_BW, "--provider foo", "--provider" },
	{ PERF_TEST_BW, "--dev ''", "--dev" },
	{ PERF_TEST_BW, "--dev a/b", "--dev" },
	{ PERF_TEST_BW, "--priority 16", "--priority" },
	{ PERF_TEST_BW, "--priority -1", "--priority" },
	{ PERF_TEST_BW, "--threads 0", "--threads" },
	{ PERF_TEST_BW, "--threads 65", "--threads" },
	{ PERF_TEST_BW, "-a -s 64", "exclude" },
	{ PERF_TEST_BW, "-D 2 -n 100", "exclude" },
	{ PERF_TEST_BW, "-D 2 -a", "-D" },
	{ PERF_TEST_BW, "-x", "unknown option '-x'" },
	{ PERF_TEST_BW, "--bogus", "unknown option" },
	{ PERF_TEST_BW, "h1 h2", "unexpected argument 'h2'" },
	{ PERF_TEST_BW, "''", "empty server" },
	{ PERF_TEST_LAT, "-l 2", "BW tests" },
	{ PERF_TEST_LAT, "-Q 2", "BW tests" },
	{ PERF_TEST_LAT, "--threads 2", "BW tests" },
	{ PERF_TEST_LAT, "-q 2", "one QP" },
	{ PERF_TEST_BW, "-c RC", "qpsock is datagram-only" },
	{ PERF_TEST_BW, "-c UC", "qpsock is datagram-only" },
	{ PERF_TEST_BW, "-c XRC", "qpsock is datagram-only" },
	{ PERF_TEST_BW, "-c DC", "qpsock is datagram-only" },
	{ PERF_TEST_BW, "--connection=SRD", "qpsock is datagram-only" },
	{ PERF_TEST_LAT, "-c rc", "bad -c 'rc': qpsock is datagram-only" },
	{ PERF_TEST_BW, "-c UDP", "one of RAW, UD" },
	{ PERF_TEST_BW, "-c ''", "one of RAW, UD" },
	{ PERF_TEST_BW, "-c", "needs a value" },
};

static void test_parse_bad_values(void)
{
	struct perf_opts o;
	unsigned int i;
	char *msg;
	int ret;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		ret = t_parse(bad_cases[i].test, bad_cases[i].args, &o, &msg);
		if (ret != -EINVAL || !msg ||
		    !strstr(msg, bad_cases[i].err))
			fprintf(stderr, "case '%s': ret %d, message '%s'\n",
				bad_cases[i].args, ret, msg ? msg : "");
		CU_ASSERT_EQUAL(ret, -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(msg);
		if (msg)
			CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad_cases[i].err));
		free(msg);
	}
}

/* ---- statistics, against values computed by hand ---- */

static void test_bw_peak_average(void)
{
	/* 4 messages of 1 MiB, -l 1, -Q 2: completions at 1 and 3. Best
	 * window: posted at 100, completed at 150, one message: 50 ns. */
	uint64_t tp[4] = { 0, 100, 200, 300 };
	uint64_t tc[4] = { 0, 150, 0, 500 };
	struct perf_bw_result r;

	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 4, 1, 2, 1048576, false,
					false, &r), 0);
	CU_ASSERT_EQUAL(r.iters, 4);
	CU_ASSERT_EQUAL(r.size, 1048576);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_peak, 2e7, 1e-3);	/* 1 MiB / 50 ns */
	CU_ASSERT_DOUBLE_EQUAL(r.bw_avg, 8e6, 1e-3);	/* 4 MiB / 500 ns */
	CU_ASSERT_DOUBLE_EQUAL(r.msg_rate, 8.0, 1e-9);	/* 4 / 500 ns */

	/* -N: no peak, same average. */
	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 4, 1, 2, 1048576, true,
					false, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_peak, 0.0, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_avg, 8e6, 1e-3);
}

static void test_bw_peak_tail_and_gbits(void)
{
	/* 5 messages, -Q 2: completions at 1, 3 and the last (4). Windows
	 * per message: i=0: 30/2=15, 80/4=20, 100/5=20; i=1: 20, 23.3,
	 * 22.5; i=2: 30, 26.7; i=3: 50, 35; i=4: 60. Best 15 ns. */
	uint64_t tp[5] = { 0, 10, 20, 30, 40 };
	uint64_t tc[5] = { 0, 30, 0, 80, 100 };
	struct perf_bw_result r;

	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 5, 1, 2, 1000, false, true,
					&r), 0);
	/* 1000 B / 15 ns = 66.67e9 B/s; Gb = 1.25e8 B. */
	CU_ASSERT_DOUBLE_EQUAL(r.bw_peak, 1000.0 / 15e-9 / 1.25e8, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_avg, 5000.0 / 100e-9 / 1.25e8, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(r.msg_rate, 50.0, 1e-9);
}

static void test_bw_post_list_windows(void)
{
	/* -l 2: only tposted[0] and [2] are posts. tposted[1] = 140 would
	 * give a 10 ns window if it were (wrongly) used. */
	uint64_t tp[4] = { 0, 140, 100, 0 };
	uint64_t tc[4] = { 0, 150, 0, 300 };
	struct perf_bw_result r;

	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 4, 2, 2, 1048576, false,
					false, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_peak, 1e9 / 75.0, 1e-3);

	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 0, 1, 1, 1, false, false,
					&r), -EINVAL);
	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 4, 0, 1, 1, false, false,
					&r), -EINVAL);
	CU_ASSERT_EQUAL(perf_bw_compute(NULL, tc, 4, 1, 1, 1, false, false,
					&r), -EFAULT);
	tp[0] = 5;
	tc[3] = 0;
	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 4, 2, 2, 1, false, false,
					&r), -ERANGE);
	/* A completion stamped before a later post is skipped, not taken
	 * as a negative (best) window. */
	tp[0] = 0;
	tc[3] = 300;
	tc[1] = 50;
	CU_ASSERT_EQUAL(perf_bw_compute(tp, tc, 4, 2, 2, 1048576, false,
					false, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_peak, 1e9 / 25.0, 1e-3);
}

static void test_bw_span(void)
{
	struct perf_bw_result r;

	/* 2,000,000 messages of 64 B in 1 s: 2 Mpps, 122.07 MB/s. */
	CU_ASSERT_EQUAL(perf_bw_from_span(2000000, 64, 1000000000ull, false,
					  &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.msg_rate, 2.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_avg, 128e6 / 1048576.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.bw_peak, 0.0, 1e-12);
	CU_ASSERT_EQUAL(perf_bw_from_span(10, 64, 0, false, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.msg_rate, 0.0, 1e-12);
}

static void test_lat_odd(void)
{
	/* Round trips (us): 10 20 10 30 10 1000 10 -> sorted 10 10 10 10
	 * 20 | 30 1000; the two largest dropped, 5 kept. Half RTT: min 5,
	 * max 15 (2nd largest), median 5, mean 6, stdev 2, 99% and 99.9%
	 * at ceil(4.95) = ceil(4.995) = 5 -> 15. */
	uint64_t tp[8] = { 0, 10000, 30000, 40000, 70000, 80000, 1080000,
			   1090000 };
	uint64_t scratch[7];
	struct perf_lat_result r;

	CU_ASSERT_EQUAL(perf_lat_compute(tp, 8, 2, scratch, &r), 0);
	CU_ASSERT_EQUAL(r.iters, 8);
	CU_ASSERT_EQUAL(r.size, 2);
	CU_ASSERT_DOUBLE_EQUAL(r.t_min, 5.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_max, 15.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_typical, 5.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_avg, 6.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_stdev, 2.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.p99, 15.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.p999, 15.0, 1e-9);
}

static void test_lat_even_median(void)
{
	/* Round trips (us) 8 2 12 200 4 10 6 100: kept 2 4 6 8 10 12, the
	 * median is the mean of 6 and 8 -> 3.5 us half RTT. */
	uint64_t rtt[8] = { 8, 2, 12, 200, 4, 10, 6, 100 };
	uint64_t tp[9], scratch[8];
	struct perf_lat_result r;
	unsigned int i;

	tp[0] = 5000;
	for (i = 0; i < 8; i++)
		tp[i + 1] = tp[i] + rtt[i] * 1000;
	CU_ASSERT_EQUAL(perf_lat_compute(tp, 9, 64, scratch, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.t_min, 1.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_typical, 3.5, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_avg, 3.5, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_max, 50.0, 1e-9);

	CU_ASSERT_EQUAL(perf_lat_compute(tp, 4, 64, scratch, &r), -EINVAL);
	tp[3] = 0;
	CU_ASSERT_EQUAL(perf_lat_compute(tp, 9, 64, scratch, &r), -ERANGE);
}

static void test_lat_percentiles(void)
{
	/* 1003 stamps: two round trips of 10 ms, then 1000..1 us. Sorted:
	 * 1..1000 us, 10 ms, 10 ms; kept = 1000. 99% = sorted[990] = 991
	 * us -> 495.5 half RTT; 99.9% = sorted[999] = 1000 us -> 500;
	 * t_max = sorted[1000], the 2nd largest (10 ms -> 5000). */
	const uint64_t n = 1003;
	uint64_t *tp = calloc(n, sizeof(*tp));
	uint64_t *scratch = calloc(n, sizeof(*scratch));
	struct perf_lat_result r;
	uint64_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(tp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scratch);
	for (i = 1; i < n; i++)
		tp[i] = tp[i - 1] + (i <= 2 ? 10000000 : (1001 - (i - 2)) * 1000);
	CU_ASSERT_EQUAL(perf_lat_compute(tp, n, 2, scratch, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.t_min, 0.5, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.p99, 495.5, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.p999, 500.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_max, 5000.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_typical, (500.0 + 501.0) / 2 / 2, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(r.t_avg, 500.5 / 2, 1e-9);
	{
		/* -H: the kept samples, half trips, sorted, with a header. */
		char *out = NULL;
		size_t olen = 0;
		FILE *f = open_memstream(&out, &olen);

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		perf_print_lat_samples(f, scratch, 1000);
		fclose(f);
		CU_ASSERT(strncmp(out, "#, usec\n1, 0.500\n2, 1.000\n", 26) == 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n1000, 500.000\n"));
		CU_ASSERT_PTR_NULL(strstr(out, "1001, "));
		free(out);
	}

	/* perftest's note: with 1000 iterations 99.9% is t_max. */
	for (i = 1; i < 1000; i++)
		tp[i] = tp[i - 1] + i * 1000;
	CU_ASSERT_EQUAL(perf_lat_compute(tp, 1000, 2, scratch, &r), 0);
	CU_ASSERT_DOUBLE_EQUAL(r.p999, r.t_max, 1e-12);
	CU_ASSERT(r.p99 < r.t_max);
	free(tp);
	free(scratch);
}

static void test_lat_duration(void)
{
	struct perf_lat_dur_result d;

	/* 1000 round trips in 2 ms: 1 us half RTT, 500000 per second. */
	CU_ASSERT_EQUAL(perf_lat_dur_compute(1000, 2, 2000000, &d), 0);
	CU_ASSERT_DOUBLE_EQUAL(d.t_avg, 1.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(d.tps, 500000.0, 1e-6);
	CU_ASSERT_EQUAL(perf_lat_dur_compute(0, 2, 0, &d), 0);
	CU_ASSERT_DOUBLE_EQUAL(d.tps, 0.0, 1e-12);
}

/* The table rows are perftest's: column count and the values printed. */
static void test_table_rows(void)
{
	struct perf_bw_result b = { 64, 1000, 12.5, 10.25, 0.167936 };
	struct perf_lat_result l = { 2, 1000, 0.92, 4.89, 0.97, 1.01, 0.25,
				     1.92, 4.89 };
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	unsigned long sz, it;
	double v[7];

	perf_print_bw_row(f, &b, false);
	perf_print_lat_row(f, &l);
	perf_print_bw_head(f, true);
	fclose(f);
	CU_ASSERT_EQUAL(sscanf(out, " %lu %lu %lf %lf %lf", &sz, &it, &v[0],
			       &v[1], &v[2]), 5);
	CU_ASSERT_EQUAL(sz, 64);
	CU_ASSERT_EQUAL(it, 1000);
	CU_ASSERT_DOUBLE_EQUAL(v[1], 10.25, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(v[2], 0.167936, 1e-9);
	CU_ASSERT_EQUAL(sscanf(strchr(out, '\n') + 1,
			       " %lu %lu %lf %lf %lf %lf %lf %lf %lf", &sz, &it,
			       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
			       &v[6]), 9);
	CU_ASSERT_DOUBLE_EQUAL(v[6], 4.89, 1e-9);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "BW peak[Gb/sec]    BW average[Gb/sec]"));
	free(out);
}

/* ---- parameters, hello, TCP ---- */

static void t_params(struct perf_opts *o, struct perf_params *p)
{
	perf_params_from_opts(o, "emu", "w", p);
}

static void test_params_compare(void)
{
	static const struct {
		const char *client, *server, *why;
	} rows[] = {
		{ "-n 1000", "-n 2000", "-n (iterations): client 1000, server 2000" },
		{ "-s 64", "-s 128", "-s (size): client 64, server 128" },
		{ "-a", "-s 64", "-a" },
		{ "-D 2", "-D 3", "-D (duration)" },
		{ "-q 2", "-q 1", "-q (QPs)" },
		{ "-g", "", "multicast" },
		{ "-M 239.0.0.2", "-M 239.0.0.3", "multicast" },
		{ "-c UD", "", "-c (connection): client UD, server RAW" },
		{ "-c RAW", "-c UD", "-c (connection): client RAW, server UD" },
	};
	struct perf_opts oc, os;
	struct perf_params pc, ps;
	char why[PERF_REASON_MAX], *m1, *m2;
	unsigned int i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(t_parse(PERF_TEST_BW, rows[i].client, &oc,
					      &m1), 0);
		CU_ASSERT_EQUAL_FATAL(t_parse(PERF_TEST_BW, rows[i].server, &os,
					      &m2), 0);
		t_params(&oc, &pc);
		t_params(&os, &ps);
		CU_ASSERT_EQUAL(perf_params_compare(&pc, &ps, why, sizeof(why)),
				-EPROTO);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, rows[i].why));
		CU_ASSERT_EQUAL(perf_params_compare(&pc, &pc, why, sizeof(why)), 0);
		t_parse_free(&oc, m1);
		t_parse_free(&os, m2);
	}

	/* Client-only options never conflict; test kind and wire do. */
	t_parse(PERF_TEST_BW, "-l 4 -Q 8 -t 64 --threads 2 -N host", &oc, &m1);
	t_parse(PERF_TEST_BW, "-r 1024 --report_gbits", &os, &m2);
	t_params(&oc, &pc);
	t_params(&os, &ps);
	CU_ASSERT_EQUAL(perf_params_compare(&pc, &ps, why, sizeof(why)), 0);
	strcpy(ps.dev, "other");
	CU_ASSERT_EQUAL(perf_params_compare(&pc, &ps, why, sizeof(why)), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "emu wire"));
	strcpy(pc.provider, "verbs");
	strcpy(ps.provider, "verbs");
	CU_ASSERT_EQUAL(perf_params_compare(&pc, &ps, why, sizeof(why)), 0);
	ps.test = PERF_TEST_LAT;
	CU_ASSERT_EQUAL(perf_params_compare(&pc, &ps, why, sizeof(why)), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "client runs send_bw, server send_lat"));
	t_parse_free(&oc, m1);
	t_parse_free(&os, m2);
}

static void test_hello_pack(void)
{
	uint8_t buf[PERF_HELLO_WIRE_SIZE];
	struct perf_hello h, g;

	memset(&h, 0, sizeof(h));
	h.params.test = PERF_TEST_LAT;
	h.params.size = 1472;
	h.params.iters = 0x123456789ull;
	h.params.num_qps = 3;
	h.params.mcg_addr = htonl(0xef000001);
	strcpy(h.params.provider, "emu");
	strcpy(h.params.dev, "wire-x");
	h.max_payload = 1472;
	h.n_addr = 3;
	h.addr[2].addr = htonl(0xc6120005);
	h.addr[2].port = htons(18515);
	h.addr[2].mac[5] = 7;
	h.params.transport = QPS_TRANSPORT_UD;
	h.addr[2].qpn = 0xabcdef;
	h.addr[2].qkey = QPS_UD_QKEY;
	CU_ASSERT_EQUAL(perf_hello_pack(&h, buf), PERF_HELLO_WIRE_SIZE);
	CU_ASSERT_EQUAL(perf_hello_unpack(buf, sizeof(buf), &g), 0);
	CU_ASSERT_EQUAL(memcmp(&h, &g, sizeof(h)), 0);
	CU_ASSERT_EQUAL(g.params.transport, QPS_TRANSPORT_UD);
	CU_ASSERT_EQUAL(g.addr[2].qpn, 0xabcdef);
	CU_ASSERT_EQUAL(g.addr[2].qkey, QPS_UD_QKEY);
	/* Network order on the wire: iters' low byte last. */
	CU_ASSERT_EQUAL(buf[8 + 4 * 4 + 7], 0x89);
	/* The third address's QPN: its high byte first, after 2 addresses,
	 * its IP, port and MAC. */
	CU_ASSERT_EQUAL(buf[PERF_HELLO_WIRE_SIZE - (PERF_MAX_QPS - 2) * 20 +
			    12 + 1], 0xab);

	/* A transport this version does not know is refused. */
	h.params.transport = 7;
	perf_hello_pack(&h, buf);
	CU_ASSERT_EQUAL(perf_hello_unpack(buf, sizeof(buf), &g), -EPROTO);
	h.params.transport = QPS_TRANSPORT_UD;
	perf_hello_pack(&h, buf);

	CU_ASSERT_EQUAL(perf_hello_unpack(buf, sizeof(buf) - 1, &g), -EPROTO);
	buf[3] ^= 1;
	CU_ASSERT_EQUAL(perf_hello_unpack(buf, sizeof(buf), &g), -EPROTO);
	buf[3] ^= 1;
	h.n_addr = PERF_MAX_QPS + 1;
	perf_hello_pack(&h, buf);
	CU_ASSERT_EQUAL(perf_hello_unpack(buf, sizeof(buf), &g), -EPROTO);
}

struct t_srv {
	int fd;
	struct perf_hello mine, theirs;
	char why[PERF_REASON_MAX];
	int ret;
	uint64_t got;
};

static void *t_server(void *arg)
{
	struct t_srv *s = arg;

	s->ret = perf_oob_hello_server(s->fd, &s->mine, &s->theirs, s->why,
				       sizeof(s->why));
	if (s->ret == 0)
		s->ret = perf_oob_sync(s->fd, false, 77, &s->got);
	return NULL;
}

static void t_hello(struct perf_hello *h, uint64_t iters)
{
	memset(h, 0, sizeof(*h));
	h->params.test = PERF_TEST_BW;
	h->params.iters = iters;
	h->params.num_qps = 1;
	strcpy(h->params.provider, "emu");
	strcpy(h->params.dev, "w");
	h->n_addr = 1;
	h->addr[0].port = htons(9);
}

static void test_oob_handshake(void)
{
	struct perf_hello mine, theirs;
	struct t_srv srv;
	char why[PERF_REASON_MAX];
	pthread_t tid;
	uint64_t got;
	int sv[2];

	/* Agreeing sides, then a barrier carrying a value each way. */
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&srv, 0, sizeof(srv));
	srv.fd = sv[1];
	t_hello(&srv.mine, 1000);
	srv.mine.addr[0].port = htons(10);
	t_hello(&mine, 1000);
	pthread_create(&tid, NULL, t_server, &srv);
	CU_ASSERT_EQUAL(perf_oob_hello_client(sv[0], &mine, &theirs, why,
					      sizeof(why)), 0);
	CU_ASSERT_EQUAL(ntohs(theirs.addr[0].port), 10);
	CU_ASSERT_EQUAL(perf_oob_sync(sv[0], true, 42, &got), 0);
	pthread_join(tid, NULL);
	CU_ASSERT_EQUAL(srv.ret, 0);
	CU_ASSERT_EQUAL(got, 77);
	CU_ASSERT_EQUAL(srv.got, 42);
	CU_ASSERT_EQUAL(ntohs(srv.theirs.addr[0].port), 9);
	close(sv[0]);
	close(sv[1]);

	/* A mismatch: both sides get -EPROTO and the same reason. */
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&srv, 0, sizeof(srv));
	srv.fd = sv[1];
	t_hello(&srv.mine, 2000);
	pthread_create(&tid, NULL, t_server, &srv);
	CU_ASSERT_EQUAL(perf_oob_hello_client(sv[0], &mine, &theirs, why,
					      sizeof(why)), -EPROTO);
	pthread_join(tid, NULL);
	CU_ASSERT_EQUAL(srv.ret, -EPROTO);
	CU_ASSERT_STRING_EQUAL(why, srv.why);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "client 1000, server 2000"));
	close(sv[0]);
	close(sv[1]);

	/* The peer goes away mid-exchange. */
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	CU_ASSERT_EQUAL(perf_oob_get_u64s(sv[0], &got, 1), -ECONNRESET);
	close(sv[0]);
}

static void test_oob_ports(void)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	unsigned int port;
	int lfd, lfd2, fd, afd;

	/* Port 0: the kernel picks one; then it is busy for a second
	 * listener, refused once closed. */
	CU_ASSERT_EQUAL_FATAL(perf_oob_listen(0, &lfd), 0);
	CU_ASSERT_EQUAL_FATAL(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	port = ntohs(sin.sin_port);
	CU_ASSERT_EQUAL(perf_oob_listen(port, &lfd2), -EADDRINUSE);
	CU_ASSERT_EQUAL(perf_oob_connect("127.0.0.1", port, &fd), 0);
	CU_ASSERT_EQUAL(perf_oob_accept(lfd, &afd), 0);
	CU_ASSERT_EQUAL(perf_oob_ready(afd), 0);
	CU_ASSERT_EQUAL(perf_oob_write(fd, "x", 1), 0);
	CU_ASSERT_EQUAL(perf_oob_ready(afd), 1);
	close(fd);
	close(afd);
	close(lfd);
	CU_ASSERT_EQUAL(perf_oob_connect("127.0.0.1", port, &fd),
			-ECONNREFUSED);
	CU_ASSERT(perf_oob_connect("no-such-host.invalid", port, &fd) < 0);
}

static CU_TestInfo tools_tests[] = {
	{ "json validator", test_json_validator },
	{ "json builder", test_json_builder },
	{ "parse defaults", test_parse_defaults },
	{ "parse depth rules", test_parse_depth_rules },
	{ "parse every flag", test_parse_every_flag },
	{ "parse bad values", test_parse_bad_values },
	{ "parse connection", test_parse_connection },
	{ "bw peak and average", test_bw_peak_average },
	{ "bw peak tail window, Gb/s", test_bw_peak_tail_and_gbits },
	{ "bw post list windows", test_bw_post_list_windows },
	{ "bw from a span", test_bw_span },
	{ "lat odd count", test_lat_odd },
	{ "lat even median", test_lat_even_median },
	{ "lat percentiles", test_lat_percentiles },
	{ "lat duration", test_lat_duration },
	{ "table rows", test_table_rows },
	{ "params compare", test_params_compare },
	{ "hello pack", test_hello_pack },
	{ "oob handshake", test_oob_handshake },
	{ "oob ports", test_oob_ports },
	CU_TEST_INFO_NULL,
};

/* --check-json FILE MIN: every '{' line valid, at least MIN of them. */
static int check_json_file(const char *path, const char *min_s)
{
	char *line = NULL;
	size_t cap = 0;
	long n = 0, bad = 0, min = strtol(min_s, NULL, 10);
	FILE *f = fopen(path, "r");

	if (!f) {
		perror(path);
		return 1;
	}
	while (getline(&line, &cap, f) > 0) {
		if (line[0] != '{')
			continue;
		n++;
		if (js_check(line)) {
			fprintf(stderr, "invalid JSON: %s", line);
			bad++;
		}
	}
	free(line);
	fclose(f);
	printf("%s: %ld JSON lines, %ld invalid (want >= %ld)\n", path, n, bad,
	       min);
	return bad || n < min ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--check-json"))
		return check_json_file(argv[2], argv[3]);
	return t_run("tools", tools_tests);
}
