// SPDX-License-Identifier: MIT
/*
 * Suite "mcast": multicast membership, steering-rule refcounting, early
 * demux and fan-out, source filters, unicast demux paths, per-packet
 * metadata, and join/leave/close racing with traffic (run under TSan by
 * scripts/run-tests.sh), all on the emu provider.
 *
 * Every test opens its own wire, and destroys its contexts before
 * returning (also after a failed fatal assertion, at the next test or at
 * exit). Expected values come from what the test sent, never from the
 * library's own counters alone: payloads carry a sequence number and each
 * receiver checks every one exactly once. Internal state (emu rules, the
 * context's buffer references) is read through src/ and providers/.
 */
#include "t_traffic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu.h"
#include "qps_int.h"

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_C "198.18.0.3"
#define IP_D "198.18.0.4"
#define GRP1 "239.1.1.1"
#define GRP2 "239.1.1.2"
#define GRP3 "239.1.1.3"
#define GRP1_ALIAS "224.1.1.1"	/* same MAC as GRP1 (low 23 bits) */

#define PORT_G 7000
#define PORT_TX 7100

#define T_PIPE_MS 10000
#define T_CHILD_MS 20000

/* ------------------------------------------------------------------ */
/* Assertions that print both values.                                   */

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL

/* ------------------------------------------------------------------ */
/* emu internals (the traffic helpers are in t_traffic.c).              */

/* Steering rules installed on the emu port. */
static int emu_rules(struct qps_ctx *ctx)
{
	struct qps_emu_dev *dev = qps_emu_dev(ctx->dev);
	int i, n = 0;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < (int)QPS_EMU_MAX_FLOWS; i++)
		n += dev->flow[i] != NULL;
	pthread_mutex_unlock(&dev->lock);
	return n;
}

/* ------------------------------------------------------------------ */
/* Join and leave: arguments and errors.                                */

static void test_errors(void)
{
	char wire[64];
	struct qps_ctx *b;
	struct qps_ep *ep, *unbound, *uni, *grp;
	struct qps_mreq m;

	T_EXCLUDED_RETURN();
	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-err");
	b = t_suite_ctx(wire, IP_B);
	ep = t_mkep(b, "0.0.0.0", PORT_G, 0);
	unbound = t_mkep(b, NULL, 0, 0);
	uni = t_mkep(b, IP_B, PORT_G + 1, 0);
	grp = t_mkep(b, GRP2, PORT_G + 2, 0);

	m = t_mreq(GRP1, NULL);
	EQ(qps_join(NULL, &m, sizeof(m)), -EBADF);
	EQ(qps_join(ep, NULL, sizeof(m)), -EFAULT);
	EQ(qps_join(ep, &m, sizeof(m) - 1), -EINVAL);
	EQ(t_join(ep, "198.18.0.9", NULL), -EINVAL);	/* not multicast */
	EQ(t_join(ep, "255.255.255.255", NULL), -EINVAL);
	EQ(t_join(ep, GRP1, GRP2), -EINVAL);		/* source multicast */
	EQ(t_join(unbound, GRP1, NULL), -EINVAL);		/* no port */
	EQ(t_join(uni, GRP1, NULL), -EINVAL);		/* bound to unicast */
	EQ(t_join(grp, GRP1, NULL), -EINVAL);		/* bound to another */
	EQ(t_join(grp, GRP2, NULL), 0);			/* bound to it */
	m.iface.s_addr = t_ip4(IP_C);
	EQ(qps_join(ep, &m, sizeof(m)), -ENODEV);
	m.iface.s_addr = t_ip4(IP_B);
	m.ifindex = 7;
	EQ(qps_join(ep, &m, sizeof(m)), -ENODEV);
	m.ifindex = QPS_IFINDEX;
	EQ(qps_join(ep, &m, sizeof(m)), 0);	/* by address and index */
	EQ(t_join(ep, GRP1, NULL), -EADDRINUSE);
	EQ(t_join(ep, GRP1, IP_A), -EINVAL);		/* any-source joined */
	EQ(t_join(ep, GRP3, IP_A), 0);
	EQ(t_join(ep, GRP3, IP_A), -EADDRINUSE);
	EQ(t_join(ep, GRP3, IP_C), 0);			/* a second source */
	EQ(t_join(ep, GRP3, NULL), -EINVAL);		/* source-specific */

	EQ(t_leave(ep, GRP2, NULL), -EADDRNOTAVAIL);	/* never joined */
	EQ(t_leave(unbound, GRP1, NULL), -EADDRNOTAVAIL);
	EQ(t_leave(ep, GRP3, IP_B), -EADDRNOTAVAIL);	/* not that source */
	EQ(t_leave(ep, "10.0.0.1", NULL), -EINVAL);
	m = t_mreq(GRP1, NULL);
	EQ(qps_leave(ep, NULL, sizeof(m)), -EFAULT);
	EQ(qps_leave(ep, &m, 4), -EINVAL);
	EQ(t_leave(ep, GRP3, IP_A), 0);
	EQ(t_leave(ep, GRP3, IP_A), -EADDRNOTAVAIL);
	EQ(t_leave(ep, GRP3, NULL), 0);			/* drops IP_C too */
	EQ(t_leave(ep, GRP3, IP_C), -EADDRNOTAVAIL);
	EQ(t_leave(ep, GRP1, NULL), 0);
	EQ(t_leave(ep, GRP1, NULL), -EADDRNOTAVAIL);
	EQ(qps_ep_close(grp), 0);			/* leaves GRP2 */
	EQ(t_join(grp, GRP2, NULL), -EBADF);
	EQ(t_leave(grp, GRP2, NULL), -EBADF);
	EQ(t_ctx_stats(b).mc_rules, 0);
	EQ(t_ctx_stats(b).mc_rule_refs, 0);
	EQ(t_ctx_stats(b).mc_joins, t_ctx_stats(b).mc_leaves);
	EQ(t_emu_mac_refs(b), 0);
	t_suite_end();
}

/* The device has room for a bounded number of group filters: the join
 * past it fails cleanly and leaves nothing behind. */
static void test_device_full(void)
{
	char wire[64], g[32];
	struct qps_ctx *b;
	struct qps_ep *ep;
	int i, ok = 0, rc = 0, base;

	T_EXCLUDED_RETURN();
	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-full");
	b = t_suite_ctx(wire, IP_B);
	ep = t_mkep(b, "0.0.0.0", PORT_G, 0);
	base = emu_rules(b);
	for (i = 0; i < 400; i++) {
		/* Distinct MACs: the third byte changes. */
		snprintf(g, sizeof(g), "239.%d.%d.1", 1 + i / 200, i % 200);
		rc = t_join(ep, g, NULL);
		if (rc < 0)
			break;
		ok++;
	}
	EQ(rc, -ENOBUFS);
	CU_ASSERT(ok >= 16);
	/* Each group: its port's rule and its own (fragments). */
	EQ(t_ctx_stats(b).mc_rules, 2 * ok);
	EQ(emu_rules(b), base + 2 * ok);
	EQ(qps_ep_close(ep), 0);
	EQ(t_ctx_stats(b).mc_rules, 0);
	EQ(emu_rules(b), base);
	EQ(t_emu_mac_refs(b), 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Refcounted rules.                                                    */

static void test_refcount(void)
{
	static const int orders[6][3] = {
		{ 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
		{ 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 },
	};
	char wire[64];
	struct qps_ctx *b;
	struct qps_ep *ep[3];
	struct qps_stats st;
	int o, k, base, created = 0;

	T_EXCLUDED_RETURN();
	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-ref");
	b = t_suite_ctx(wire, IP_B);
	for (k = 0; k < 3; k++)
		ep[k] = t_mkep(b, "0.0.0.0", PORT_G, 1);
	base = emu_rules(b);
	for (o = 0; o < 6; o++) {
		for (k = 0; k < 3; k++) {
			EQ(t_join(ep[k], GRP1, NULL), 0);
			EQ(t_ctx_stats(b).mc_rules, 2);
			EQ(t_ctx_stats(b).mc_rule_refs, k + 1);
			EQ(emu_rules(b), base + 2);
			EQ(t_emu_mac_refs(b), k + 1);
		}
		created += 2;
		for (k = 0; k < 3; k++) {
			EQ(t_leave(ep[orders[o][k]], GRP1, NULL), 0);
			EQ(t_leave(ep[orders[o][k]], GRP1, NULL),
			   -EADDRNOTAVAIL);
			EQ(t_ctx_stats(b).mc_rules, k < 2 ? 2 : 0);
			EQ(emu_rules(b), base + (k < 2 ? 2 : 0));
			EQ(t_emu_mac_refs(b), 2 - k);
		}
	}
	/* A second port is a second port rule, the group's own is shared;
	 * close drops memberships. */
	EQ(t_join(ep[0], GRP1, NULL), 0);
	ep[1] = t_mkep(b, "0.0.0.0", PORT_G + 1, 0);
	EQ(t_join(ep[1], GRP1, NULL), 0);
	EQ(emu_rules(b), base + 3);
	created += 3;
	EQ(qps_ep_close(ep[0]), 0);
	EQ(emu_rules(b), base + 2);
	EQ(qps_ep_close(ep[1]), 0);
	EQ(emu_rules(b), base);
	st = t_ctx_stats(b);
	EQ(st.mc_rules_created, created);
	EQ(st.mc_joins, 6 * 3 + 2);
	EQ(st.mc_leaves, 6 * 3 + 2);
	EQ(st.mc_rules, 0);
	EQ(st.mc_rule_refs, 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Delivery: early path, fan-out, source filters.                       */

#define N_PKT 100

static void test_early_and_fanout(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *r1, *r2, *other;
	uint8_t s1[N_PKT], s2[N_PKT];
	struct qps_stats st;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-path");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = t_mkep(a, IP_A, PORT_TX, 0);
	r1 = t_mkep(b, "0.0.0.0", PORT_G, 1);
	r2 = t_mkep(b, "0.0.0.0", PORT_G, 1);
	other = t_mkep(b, "0.0.0.0", PORT_G, 1);	/* bound, never joins */

	/* One subscriber: every datagram takes the early path. */
	EQ(t_join(r1, GRP1, NULL), 0);
	t_send_seq(tx, GRP1, PORT_G, 1, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_early, N_PKT);
	t_drain_all_once(r1, 1, N_PKT);
	EQ(t_drain(other, 1, s1, N_PKT), 0);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_early, N_PKT);
	EQ(st.rx_demux_fanout, 0);
	EQ(st.rx_fanout_deliveries, 0);
	t_all_buffers_home(b);

	/* Two: fan-out, each gets each datagram once, one buffer shared. */
	EQ(t_join(r2, GRP1, NULL), 0);
	t_send_seq(tx, GRP1, PORT_G, 2, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_fanout, N_PKT);
	memset(s1, 0, sizeof(s1));
	memset(s2, 0, sizeof(s2));
	EQ(t_drain(r1, 2, s1, N_PKT), N_PKT);
	EQ(t_drain(r2, 2, s2, N_PKT), N_PKT);
	t_all_once(s1, N_PKT);
	t_all_once(s2, N_PKT);
	EQ(t_drain(other, 2, s1, N_PKT), 0);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_early, N_PKT);
	EQ(st.rx_demux_fanout, N_PKT);
	EQ(st.rx_fanout_deliveries, 2 * N_PKT);
	EQ(st.rx_packets, 3 * N_PKT);
	t_all_buffers_home(b);

	/* Back to one: the early path again. */
	EQ(t_leave(r1, GRP1, NULL), 0);
	t_send_seq(tx, GRP1, PORT_G, 3, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_early, 2 * N_PKT);
	t_drain_all_once(r2, 3, N_PKT);
	EQ(t_drain(r1, 3, s1, N_PKT), 0);

	/* A group nobody joined never reaches the port (no filter). */
	t_send_seq(tx, GRP2, PORT_G, 4, 0, 10, 0);
	qps_ctx_progress(b);
	st = t_ctx_stats(b);
	EQ(st.rx_bad[QPS_RX_OK], 3 * N_PKT);
	EQ(st.rx_no_endpoint, 0);
	t_partition_holds(&st);
	t_all_buffers_home(b);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Group datagrams above the MTU: only the first fragment carries the    */
/* port, so the rest reach the context through the group's own rule.     */

static const uint32_t big_sizes[] = { 1473, 2048, 4000, 9000, 65507 };
#define N_BIG (sizeof(big_sizes) / sizeof(big_sizes[0]))

static void big_fill(uint8_t *buf, uint32_t len, uint32_t tag)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + len + tag);
}

static void big_send(struct qps_ep *tx, const char *ip, unsigned short port,
		     uint32_t tag)
{
	static uint8_t buf[65507];
	struct sockaddr_in to = t_sin(ip, port);
	unsigned int i;

	for (i = 0; i < N_BIG; i++) {
		big_fill(buf, big_sizes[i], tag);
		EQ(qps_sendto(tx, buf, big_sizes[i], 0, (struct sockaddr *)&to,
			      sizeof(to)), (ssize_t)big_sizes[i]);
	}
	qps_ctx_flush(tx->ctx);
}

static void test_above_mtu(void)
{
	static uint8_t want[65507], got[65508];
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *r, *r2;
	struct qps_stats st;
	unsigned int i;
	ssize_t n;

	T_EXCLUDED_RETURN();
	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-big");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = t_mkep(a, IP_A, PORT_TX, 0);
	r = t_mkep(b, "0.0.0.0", PORT_G, 0);
	r2 = t_mkep(b, "0.0.0.0", PORT_G + 1, 0);	/* bound, not joined */
	EQ(t_join(r, GRP1, NULL), 0);

	if (!(b->info.caps & QPS_DEV_CAP_MC_GROUP_RULE)) {
		/* verbs: the first fragments alone arrive (docs/verbs.md). */
		big_send(tx, GRP1, PORT_G, 1);
		qps_ctx_progress(b);
		EQ(t_ctx_stats(b).rx_reasm_ok, 0);
		EQ(qps_recv(r, got, sizeof(got), 0), -EAGAIN);
		t_suite_end();
		return;
	}
	big_send(tx, GRP1, PORT_G, 1);
	T_WAIT_STAT(b, rx_reasm_ok, N_BIG);
	for (i = 0; i < N_BIG; i++) {
		n = qps_recv(r, got, sizeof(got), 0);
		EQ_FATAL(n, (ssize_t)big_sizes[i]);
		big_fill(want, big_sizes[i], 1);
		CU_ASSERT(memcmp(got, want, big_sizes[i]) == 0);
	}
	EQ(qps_recv(r, got, sizeof(got), 0), -EAGAIN);

	/* The group's other port: whole, then dropped as nobody's; a
	 * group nobody joined never reaches the port. */
	big_send(tx, GRP1, PORT_G + 1, 2);
	T_WAIT_STAT(b, rx_reasm_ok, 2 * N_BIG);
	big_send(tx, GRP2, PORT_G, 3);
	qps_ctx_progress(b);
	st = t_ctx_stats(b);
	EQ(st.rx_no_endpoint, N_BIG);
	EQ(st.rx_reasm_ok, 2 * N_BIG);
	EQ(st.rx_reasm_bytes, 0);
	EQ(qps_recv(r, got, sizeof(got), 0), -EAGAIN);
	EQ(qps_recv(r2, got, sizeof(got), 0), -EAGAIN);

	/* After the leave, nothing of the group reaches the reassembly. */
	EQ(t_leave(r, GRP1, NULL), 0);
	EQ(t_ctx_stats(b).mc_rules, 0);
	big_send(tx, GRP1, PORT_G, 4);
	qps_ctx_progress(b);
	EQ(t_ctx_stats(b).rx_bad[QPS_RX_FRAGMENT], st.rx_bad[QPS_RX_FRAGMENT]);
	EQ(t_ctx_stats(b).rx_reasm_ok, 2 * N_BIG);
	t_all_buffers_home(b);
	t_suite_end();
}

/* Queued datagrams keep their buffer when the subscriber leaves, and
 * close releases what is still queued. */
static void test_release_on_close(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *r1, *r2;
	uint8_t s[N_PKT];

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-close");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = t_mkep(a, IP_A, PORT_TX, 0);
	r1 = t_mkep(b, "0.0.0.0", PORT_G, 1);
	r2 = t_mkep(b, "0.0.0.0", PORT_G, 1);
	EQ(t_join(r1, GRP1, NULL), 0);
	EQ(t_join(r2, GRP1, NULL), 0);
	t_send_seq(tx, GRP1, PORT_G, 1, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_fanout_deliveries, 2 * N_PKT);
	EQ(t_leave(r1, GRP1, NULL), 0);
	memset(s, 0, sizeof(s));
	EQ(t_drain(r1, 1, s, N_PKT), N_PKT);	/* queued before the leave */
	t_all_once(s, N_PKT);
	EQ(qps_ep_close(r2), 0);		/* N_PKT still queued */
	t_all_buffers_home(b);
	t_suite_end();
}

static void test_source_filter(void)
{
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *txa, *txc, *ssm, *asm_ep;
	struct qps_stats st;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-ssm");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	c = t_suite_ctx(wire, IP_C);
	txa = t_mkep(a, IP_A, PORT_TX, 0);
	txc = t_mkep(c, IP_C, PORT_TX, 0);
	ssm = t_mkep(b, "0.0.0.0", PORT_G, 1);
	asm_ep = t_mkep(b, "0.0.0.0", PORT_G, 1);

	/* Source-specific alone: the early path filters C out. */
	EQ(t_join(ssm, GRP1, IP_A), 0);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 2 * N_PKT);
	t_drain_all_once(ssm, 1, N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_early, N_PKT);
	EQ(st.rx_mc_filtered, N_PKT);
	EQ(st.rx_no_endpoint, N_PKT);

	/* With an any-source subscriber: fan-out, filter per subscriber. */
	EQ(t_join(asm_ep, GRP1, NULL), 0);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 4 * N_PKT);
	t_drain_all_once(ssm, 1, N_PKT);
	t_drain_two_once(asm_ep, 1, 3, N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_fanout, 2 * N_PKT);
	EQ(st.rx_fanout_deliveries, 3 * N_PKT);
	EQ(st.rx_mc_filtered, 2 * N_PKT);
	t_partition_holds(&st);
	t_all_buffers_home(b);
	t_suite_end();
}

/* A filter of GRP1 with @n sources of @ips, set with qps_setfilter. */
static int t_setfilter(struct qps_ep *ep, uint32_t mode, const char *const *ips,
		       uint32_t n)
{
	union {
		struct qps_msfilter f;
		char b[QPS_MSFILTER_SIZE(4)];
	} u;
	uint32_t i;

	memset(&u, 0, sizeof(u));
	inet_pton(AF_INET, GRP1, &u.f.group);
	u.f.fmode = mode;
	u.f.numsrc = n;
	for (i = 0; i < n; i++)
		inet_pton(AF_INET, ips[i], &u.f.slist[i]);
	return qps_setfilter(ep, &u.f, (socklen_t)QPS_MSFILTER_SIZE(n));
}

/* GRP1's filter: its mode, and its one source (0.0.0.0 when none). */
static int t_getfilter(struct qps_ep *ep, uint32_t *mode, uint32_t *n,
		       struct in_addr *first)
{
	union {
		struct qps_msfilter f;
		char b[QPS_MSFILTER_SIZE(1)];
	} u;
	socklen_t len = sizeof(u);
	int ret;

	memset(&u, 0, sizeof(u));
	inet_pton(AF_INET, GRP1, &u.f.group);
	u.f.numsrc = 1;
	ret = qps_getfilter(ep, &u.f, &len);
	*mode = u.f.fmode;
	*n = u.f.numsrc;
	*first = u.f.slist[0];
	return ret;
}

/* Exclude mode: an any-source membership that blocks sources, and the
 * filter replaced whole (INCLUDE, EXCLUDE) with the membership kept. */
static void test_source_exclude(void)
{
	static const char *const a_only[] = { IP_A }, *const bad[] = { "0.0.0.0" };
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *txa, *txc, *ex;
	struct qps_ep_counters ec;
	struct qps_stats st;
	struct in_addr first;
	uint32_t mode, n, sent = 0;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-excl");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	c = t_suite_ctx(wire, IP_C);
	txa = t_mkep(a, IP_A, PORT_TX, 0);
	txc = t_mkep(c, IP_C, PORT_TX, 0);
	ex = t_mkep(b, "0.0.0.0", PORT_G, 1);

	/* A filter needs a membership; INCLUDE nothing is a leave. */
	EQ(t_setfilter(ex, QPS_MCAST_EXCLUDE, a_only, 1), -EINVAL);
	EQ(t_setfilter(ex, QPS_MCAST_INCLUDE, NULL, 0), -EADDRNOTAVAIL);
	EQ(t_getfilter(ex, &mode, &n, &first), -EADDRNOTAVAIL);

	EQ(t_join(ex, GRP1, NULL), 0);
	EQ(t_getfilter(ex, &mode, &n, &first), 0);
	EQ(mode, QPS_MCAST_EXCLUDE);
	EQ(n, 0);
	EQ(t_setfilter(ex, 2, a_only, 1), -EINVAL);
	EQ(t_setfilter(ex, QPS_MCAST_EXCLUDE, bad, 1), -EINVAL);

	/* A blocked: only C's datagrams, A's counted as filtered. */
	EQ(t_setfilter(ex, QPS_MCAST_EXCLUDE, a_only, 1), 0);
	EQ(t_getfilter(ex, &mode, &n, &first), 0);
	EQ(mode, QPS_MCAST_EXCLUDE);
	EQ(n, 1);
	EQ(first.s_addr, inet_addr(IP_A));
	EQ(t_join(ex, GRP1, NULL), -EADDRINUSE);
	EQ(t_join(ex, GRP1, IP_C), -EINVAL);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	sent += 2 * N_PKT;
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], sent);
	t_drain_all_once(ex, 3, N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_mc_filtered, N_PKT);
	EQ(qps_ep_stats(ex, &ec, sizeof(ec)), (int)sizeof(ec));
	EQ(ec.rx_filtered, N_PKT);
	EQ(ec.ngroups, 1);

	/* INCLUDE A: the same membership, now only A. */
	EQ(t_setfilter(ex, QPS_MCAST_INCLUDE, a_only, 1), 0);
	EQ(t_getfilter(ex, &mode, &n, &first), 0);
	EQ(mode, QPS_MCAST_INCLUDE);
	EQ(n, 1);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	sent += 2 * N_PKT;
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], sent);
	t_drain_all_once(ex, 1, N_PKT);

	/* EXCLUDE nothing: every source again. */
	EQ(t_setfilter(ex, QPS_MCAST_EXCLUDE, NULL, 0), 0);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	sent += 2 * N_PKT;
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], sent);
	t_drain_two_once(ex, 1, 3, N_PKT);

	/* The blocked sources go with the membership: no rule is left. */
	EQ(t_setfilter(ex, QPS_MCAST_EXCLUDE, a_only, 1), 0);
	EQ(t_leave(ex, GRP1, NULL), 0);
	EQ(t_ctx_stats(b).mc_rules, 0);
	EQ(t_ctx_stats(b).mc_rule_refs, 0);
	EQ(t_getfilter(ex, &mode, &n, &first), -EADDRNOTAVAIL);
	st = t_ctx_stats(b);
	t_partition_holds(&st);
	t_all_buffers_home(b);
	t_suite_end();
}

/* An endpoint joined to two sources of a group is one subscriber: the
 * early path, nothing filtered, and a third sender filtered once. */
static void test_two_sources_one_subscriber(void)
{
	char wire[64];
	struct qps_ctx *a, *b, *c, *d;
	struct qps_ep *txa, *txc, *txd, *r, *r2;
	struct qps_stats st;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-2src");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	c = t_suite_ctx(wire, IP_C);
	d = t_suite_ctx(wire, IP_D);
	txa = t_mkep(a, IP_A, PORT_TX, 0);
	txc = t_mkep(c, IP_C, PORT_TX, 0);
	txd = t_mkep(d, IP_D, PORT_TX, 0);
	r = t_mkep(b, "0.0.0.0", PORT_G, 1);
	r2 = t_mkep(b, "0.0.0.0", PORT_G, 1);

	EQ(t_join(r, GRP1, IP_A), 0);
	EQ(t_join(r2, GRP2, NULL), 0);	/* a rule before r's second source */
	EQ(t_join(r, GRP1, IP_C), 0);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	t_send_seq(txd, GRP1, PORT_G, 4, 0, 10, 0);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 2 * N_PKT + 10);
	t_drain_two_once(r, 1, 3, N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_early, 2 * N_PKT);
	EQ(st.rx_demux_fanout, 0);
	EQ(st.rx_mc_filtered, 10);
	EQ(st.rx_no_endpoint, 10);

	/* A second subscriber joins between r's two sources: fan-out, one
	 * delivery to each, r's sources still decided together. */
	EQ(t_join(r2, GRP1, NULL), 0);
	EQ(t_leave(r, GRP1, IP_A), 0);
	EQ(t_join(r, GRP1, IP_A), 0);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_send_seq(txd, GRP1, PORT_G, 4, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 4 * N_PKT + 10);
	t_drain_all_once(r, 1, N_PKT);
	t_drain_two_once(r2, 1, 4, N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_fanout, 2 * N_PKT);
	EQ(st.rx_fanout_deliveries, 3 * N_PKT);
	EQ(st.rx_mc_filtered, N_PKT + 10);

	/* r leaves one source, then the other: r2 alone takes the early path. */
	EQ(t_leave(r, GRP1, IP_C), 0);
	EQ(t_leave(r, GRP1, IP_A), 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_early, 3 * N_PKT);
	t_drain_all_once(r2, 3, N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_fanout, 2 * N_PKT);
	t_partition_holds(&st);
	t_all_buffers_home(b);
	t_suite_end();
}

/* A connected subscriber takes a group's datagrams only from its peer. */
static void test_connected_subscriber(void)
{
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *txa, *txc, *r;
	struct sockaddr_in peer = t_sin(IP_A, PORT_TX);

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-conn");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	c = t_suite_ctx(wire, IP_C);
	txa = t_mkep(a, IP_A, PORT_TX, 0);
	txc = t_mkep(c, IP_C, PORT_TX, 0);
	r = t_mkep(b, "0.0.0.0", PORT_G, 0);
	EQ(t_join(r, GRP1, NULL), 0);
	EQ(qps_connect(r, (struct sockaddr *)&peer, sizeof(peer)), 0);
	t_send_seq(txc, GRP1, PORT_G, 3, 0, 10, 0);
	t_send_seq(txa, GRP1, PORT_G, 1, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], N_PKT + 10);
	t_drain_all_once(r, 1, N_PKT);
	EQ(t_ctx_stats(b).rx_mc_filtered, 10);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* IP_MULTICAST_LOOP on a device that loops (emu, as mlx4).             */

/*
 * The device hands a context its own group frames back, so a subscriber
 * of the sending context gets them, the sender too when it joined; with
 * QPS_OPT_MULTICAST_LOOP 0 on the sender the demux drops them (counted),
 * while another host on the wire still gets every one.
 */
static void test_mc_loop(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *sub, *far;
	struct qps_stats s0, s1;
	int v = 0;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-loop");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = t_mkep(a, IP_A, PORT_TX, 0);
	sub = t_mkep(a, "0.0.0.0", PORT_G, 0);
	far = t_mkep(b, "0.0.0.0", PORT_G, 0);
	EQ(t_join(sub, GRP1, NULL), 0);
	EQ(t_join(far, GRP1, NULL), 0);
	s0 = t_ctx_stats(a);
	t_send_seq(tx, GRP1, PORT_G, 1, 0, N_PKT, 0);
	t_drain_all_once(sub, 1, N_PKT);
	t_drain_all_once(far, 1, N_PKT);

	EQ(qps_setopt(tx, QPS_OPT_MULTICAST_LOOP, &v, sizeof(v)), 0);
	t_send_seq(tx, GRP1, PORT_G, 2, 0, N_PKT, 0);
	t_drain_all_once(far, 2, N_PKT);
	T_WAIT_STAT(a, rx_mc_loop_off, s0.rx_mc_loop_off + N_PKT);
	EQ(qps_recv(sub, &v, sizeof(v), QPS_MSG_DONTWAIT), -EAGAIN);
	s1 = t_ctx_stats(a);
	EQ(s1.rx_mc_loop_off - s0.rx_mc_loop_off, N_PKT);
	/* Nothing is looped by qpsock itself: the device did it. */
	EQ(s1.tx_mc_loops - s0.tx_mc_loops, 0);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* A second process gets only the groups it joined.                     */

#define XP_N 50

static int xp_child(const char *wire, int wfd, int rfd)
{
	struct qps_ctx *ctx = NULL;
	struct qps_ep *ep = NULL, *ep2 = NULL;
	struct sockaddr_in any = t_sin("0.0.0.0", PORT_G);
	struct sockaddr_in any2 = t_sin("0.0.0.0", PORT_G + 1);
	struct qps_mreq m = t_mreq(GRP1, NULL);
	struct qps_stats st;
	struct t_pkt p;
	int got = 0, bad = 0, rc = 0;
	uint64_t other;
	int64_t end;
	ssize_t r;

	if (t_ctx_emu(wire, IP_B, &ctx) != 0)
		return 10;
	if (qps_ep_create(ctx, QPS_EP_DGRAM, &ep) ||
	    qps_bind(ep, (struct sockaddr *)&any, sizeof(any)) ||
	    qps_join(ep, &m, sizeof(m)) || qps_set_nonblock(ep, 1))
		rc = 11;
	/* GRP2 joined on another port only. */
	m = t_mreq(GRP2, NULL);
	if (!rc && (qps_ep_create(ctx, QPS_EP_DGRAM, &ep2) ||
		    qps_bind(ep2, (struct sockaddr *)&any2, sizeof(any2)) ||
		    qps_join(ep2, &m, sizeof(m)) || qps_set_nonblock(ep2, 1)))
		rc = 12;
	if (write(wfd, rc ? "E" : "J", 1) != 1)
		rc = 13;
	/* The parent says when it has sent everything. */
	if (!rc) {
		struct pollfd pf = { .fd = rfd, .events = POLLIN };

		if (poll(&pf, 1, T_PIPE_MS) != 1)
			rc = 14;
	}
	end = (int64_t)t_now_ms() + T_WAIT_MS;
	while (!rc && got < XP_N && (int64_t)t_now_ms() < end) {
		r = qps_recv(ep, &p, sizeof(p), 0);
		if (r == -EAGAIN)
			continue;
		if (r != sizeof(p) || p.tag != 1)
			bad++;
		got++;
	}
	qps_ctx_progress(ctx);
	if (!rc && qps_recv(ep2, &p, sizeof(p), 0) != -EAGAIN)
		bad++;
	qps_ctx_stats(ctx, &st, sizeof(st));
	if (!rc && (got != XP_N || bad))
		rc = 15;
	/* GRP1:PORT_G datagrams were delivered; GRP2's rule on its address
	 * (for fragments), where the device takes one, brought its other
	 * port too, dropped as no endpoint's; nothing else was
	 * demultiplexed here. */
	other = (ctx->info.caps & QPS_DEV_CAP_MC_GROUP_RULE) ? XP_N : 0;
	if (!rc && (st.rx_bad[QPS_RX_OK] != XP_N + other ||
		    st.rx_no_endpoint != other))
		rc = 16;
	if (!rc && st.rx_demux_early != XP_N)
		rc = 17;
	qps_ctx_destroy(ctx);
	return rc;
}

static void test_two_process(void)
{
	char wire[64];
	int c2p[2], p2c[2], st;
	struct qps_ctx *a;
	struct qps_ep *tx;
	struct pollfd pf;
	char c = 0;
	pid_t pid;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-2proc");
	CU_ASSERT_FATAL(pipe(c2p) == 0 && pipe(p2c) == 0);
	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(c2p[0]);
		close(p2c[1]);
		_exit(xp_child(wire, c2p[1], p2c[0]));
	}
	close(c2p[1]);
	close(p2c[0]);
	pf.fd = c2p[0];
	pf.events = POLLIN;
	if (poll(&pf, 1, T_PIPE_MS) != 1 || read(c2p[0], &c, 1) != 1 ||
	    c != 'J') {
		CU_FAIL("child did not join");
		goto out;
	}
	a = t_suite_ctx(wire, IP_A);
	tx = t_mkep(a, IP_A, PORT_TX, 0);
	t_send_seq(tx, GRP2, PORT_G, 2, 0, XP_N, 0);	/* joined, other port */
	t_send_seq(tx, GRP3, PORT_G, 3, 0, XP_N, 0);	/* not joined */
	t_send_seq(tx, GRP1_ALIAS, PORT_G, 4, 0, XP_N, 0); /* GRP1's MAC */
	t_send_seq(tx, GRP1, PORT_G, 1, 0, XP_N, 0);
	EQ(write(p2c[1], "S", 1), 1);
out:
	st = t_wait_child(pid, T_CHILD_MS);
	EQ(st, 0);
	close(c2p[0]);
	close(p2c[1]);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Unicast: the connected fast path checks the first bucket entry only.  */

static void test_unicast_paths(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx1, *tx2, *bound, *c1, *c2;
	struct sockaddr_in p1, p2;
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	uint16_t port1 = 0, port2 = 0, rport = PORT_G, sport, h1;
	uint8_t s[N_PKT];
	struct qps_stats st;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-uni");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);

	/* Two peers of A whose 4-tuples share a bucket on B. */
	h1 = (uint16_t)(qps_conn_hash(t_ip4(IP_A), htons(20000),
				      htons(rport)) & b->dmx.conn_mask);
	port1 = 20000;
	for (sport = 20001; sport < 60000; sport++)
		if ((qps_conn_hash(t_ip4(IP_A), htons(sport), htons(rport)) &
		     b->dmx.conn_mask) == h1) {
			port2 = sport;
			break;
		}
	CU_ASSERT_FATAL(port2 != 0);
	tx1 = t_mkep(a, IP_A, port1, 0);
	tx2 = t_mkep(a, IP_A, port2, 0);

	p1 = t_sin(IP_A, port1);
	p2 = t_sin(IP_A, port2);

	/* Unconnected: the bound lookup. */
	bound = t_mkep(b, "0.0.0.0", rport, 1);
	t_send_seq(tx1, IP_B, rport, 1, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_bound, N_PKT);
	t_drain_all_once(bound, 1, N_PKT);
	c1 = t_mkep(b, "0.0.0.0", rport, 1);
	c2 = t_mkep(b, "0.0.0.0", rport, 1);

	/* c1 connected to tx1: first in its bucket, the fast path. */
	EQ(qps_connect(c1, (struct sockaddr *)&p1, sizeof(p1)), 0);
	t_send_seq(tx1, IP_B, rport, 1, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_connected, N_PKT);
	t_drain_all_once(c1, 1, N_PKT);

	/* c2 connected to tx2 lands first in the same bucket: c1's
	 * datagrams now miss the fast path and still reach c1. */
	EQ(qps_connect(c2, (struct sockaddr *)&p2, sizeof(p2)), 0);
	t_send_seq(tx1, IP_B, rport, 1, 0, N_PKT, 0);
	t_send_seq(tx2, IP_B, rport, 2, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 4 * N_PKT);
	t_drain_all_once(c1, 1, N_PKT);
	t_drain_all_once(c2, 2, N_PKT);
	EQ(t_drain(bound, 1, s, N_PKT), 0);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_connected, 2 * N_PKT);
	EQ(st.rx_demux_bound, 2 * N_PKT);

	/* Disconnected: back to the bound lookup (most specific = none,
	 * so the first bound endpoint in the chain takes them). */
	EQ(qps_connect(c2, &unspec, sizeof(unspec)), 0);
	t_send_seq(tx2, IP_B, rport, 2, 0, N_PKT, 0);
	T_WAIT_STAT(b, rx_demux_bound, 3 * N_PKT);
	st = t_ctx_stats(b);
	EQ(st.rx_demux_connected, 2 * N_PKT);
	EQ(st.rx_pktinfo, 0);
	t_partition_holds(&st);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Per-packet metadata only when asked for.                             */

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_pktinfo(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *r1, *r2, *u;
	struct qps_rxmsg m;
	struct t_pkt p;
	uint64_t t0, t1;
	int on = 1, i;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-info");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	tx = t_mkep(a, IP_A, PORT_TX, 0);
	r1 = t_mkep(b, "0.0.0.0", PORT_G, 1);
	r2 = t_mkep(b, "0.0.0.0", PORT_G, 1);
	u = t_mkep(b, IP_B, PORT_G + 5, 0);
	EQ(t_join(r1, GRP1, NULL), 0);

	/* Off: nothing filled, the counter stays 0. */
	t_send_seq(tx, GRP1, PORT_G, 1, 0, 10, 0);
	T_WAIT_STAT(b, rx_demux_early, 10);
	for (i = 0; i < 10; i++) {
		memset(&m, 0xa5, sizeof(m));
		m.buf = &p;
		m.len = sizeof(p);
		EQ(qps_recvmsg(r1, &m, 0), sizeof(p));
		EQ(m.flags, 0);
		EQ(m.ifindex, 0);
		EQ(m.ts_ns, 0);
		EQ(m.dst.sin_addr.s_addr, 0);
		EQ(m.src.sin_addr.s_addr, t_ip4(IP_A));
		EQ(ntohs(m.src.sin_port), PORT_TX);
		EQ(p.seq, i);
	}
	EQ(t_ctx_stats(b).rx_pktinfo, 0);

	/* On for r2 only; fan-out fills it for r2's copies alone. */
	EQ(qps_setopt(r2, QPS_OPT_PKTINFO, &on, sizeof(on)), 0);
	EQ(t_join(r2, GRP1, NULL), 0);
	t0 = real_ns();
	t_send_seq(tx, GRP1, PORT_G, 1, 0, 10, 0);
	T_WAIT_STAT(b, rx_fanout_deliveries, 20);
	t1 = real_ns();
	EQ(t_ctx_stats(b).rx_pktinfo, 10);
	for (i = 0; i < 10; i++) {
		memset(&m, 0, sizeof(m));
		m.buf = &p;
		m.len = sizeof(p);
		EQ(qps_recvmsg(r2, &m, 0), sizeof(p));
		EQ(m.flags, QPS_RXMSG_PKTINFO);
		EQ(m.ifindex, QPS_IFINDEX);
		EQ(m.dst.sin_addr.s_addr, t_ip4(GRP1));
		EQ(ntohs(m.dst.sin_port), PORT_G);
		CU_ASSERT(m.ts_ns >= t0 && m.ts_ns <= t1);
		memset(&m, 0, sizeof(m));
		m.buf = &p;
		m.len = sizeof(p);
		EQ(qps_recvmsg(r1, &m, 0), sizeof(p));
		EQ(m.flags, 0);
	}

	/* Unicast: the destination is our address; a short buffer says
	 * TRUNC. */
	EQ(qps_setopt(u, QPS_OPT_PKTINFO, &on, sizeof(on)), 0);
	t_send_seq(tx, IP_B, PORT_G + 5, 1, 0, 1, 0);
	T_WAIT_STAT(b, rx_pktinfo, 11);
	memset(&m, 0, sizeof(m));
	m.buf = &p;
	m.len = 4;
	EQ(qps_recvmsg(u, &m, QPS_MSG_PEEK), 4);
	EQ(m.flags, QPS_RXMSG_PKTINFO | QPS_RXMSG_TRUNC);
	EQ(m.dst.sin_addr.s_addr, t_ip4(IP_B));
	EQ(ntohs(m.dst.sin_port), PORT_G + 5);
	EQ(qps_recvmsg(u, &m, QPS_MSG_TRUNC), sizeof(p));
	EQ(qps_recvmsg(u, NULL, 0), -EFAULT);
	m.buf = NULL;
	EQ(qps_recvmsg(u, &m, 0), -EFAULT);
	m.buf = &p;
	EQ(qps_recvmsg(u, &m, 0x1), -EINVAL);
	EQ(qps_recvmsg(NULL, &m, 0), -EBADF);
	EQ(qps_recvmsg(u, &m, 0), -EAGAIN);
	on = 0;
	EQ(qps_setopt(u, QPS_OPT_PKTINFO, &on, sizeof(on)), 0);
	t_send_seq(tx, IP_B, PORT_G + 5, 1, 0, 1, 0);
	T_WAIT_STAT(b, rx_demux_bound, 2);
	m.len = sizeof(p);
	EQ(qps_recvmsg(u, &m, 0), sizeof(p));
	EQ(m.flags, 0);
	EQ(t_ctx_stats(b).rx_pktinfo, 11);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Join, leave and close racing with traffic in other threads.          */

struct race {
	struct qps_ctx *a, *b;
	struct qps_ep *tx;
	struct qps_ep *steady;	/* joined for the whole run, read by rx */
	int stop;		/* atomic */
	uint64_t sent;
	uint64_t steady_got;
	uint32_t steady_bad;
};

static void *race_tx(void *arg)
{
	struct race *r = arg;
	struct sockaddr_in g = t_sin(GRP1, PORT_G);
	struct sockaddr_in g2 = t_sin(GRP2, PORT_G);
	struct t_pkt p = { .tag = 1 };

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		p.seq++;
		if (qps_sendto(r->tx, &p, sizeof(p), 0,
			       (struct sockaddr *)(p.seq & 3 ? &g : &g2),
			       sizeof(g)) == sizeof(p))
			r->sent++;
		if (!(p.seq & 15))
			qps_ctx_progress(r->a);	/* reap send slots */
	}
	return NULL;
}

/* Receives on the steady subscriber: its sequence must only go up. */
static void *race_rx(void *arg)
{
	struct race *r = arg;
	struct t_pkt p;
	uint32_t last = 0;
	ssize_t n;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		n = qps_recv(r->steady, &p, sizeof(p), QPS_MSG_DONTWAIT);
		if (n == -EAGAIN) {
			qps_ctx_progress(r->b);
			continue;
		}
		if (n != sizeof(p) || p.seq <= last)
			r->steady_bad++;
		last = p.seq;
		r->steady_got++;
	}
	return NULL;
}

static void test_race(void)
{
	char wire[64];
	struct race r;
	pthread_t ttx, trx;
	struct qps_ep *ep[4] = { NULL };
	struct qps_stats st;
	struct t_pkt p;
	int64_t end;
	int i, k, churn = 0;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "mc-race");
	memset(&r, 0, sizeof(r));
	r.a = t_suite_ctx(wire, IP_A);
	r.b = t_suite_ctx(wire, IP_B);
	r.tx = t_mkep(r.a, IP_A, PORT_TX, 0);
	r.steady = t_mkep(r.b, "0.0.0.0", PORT_G, 1);
	EQ_FATAL(t_join(r.steady, GRP1, NULL), 0);
	CU_ASSERT_FATAL(pthread_create(&ttx, NULL, race_tx, &r) == 0);
	CU_ASSERT_FATAL(pthread_create(&trx, NULL, race_rx, &r) == 0);

	/* Churn: subscribers come and go, by leave and by close, while
	 * datagrams are being demultiplexed to them. */
	end = (int64_t)t_now_ms() + 1500;
	for (i = 0; (int64_t)t_now_ms() < end; i++) {
		k = i & 3;
		if (!ep[k]) {
			ep[k] = t_mkep(r.b, "0.0.0.0", PORT_G, 1);
			EQ(t_join(ep[k], GRP1, NULL), 0);
			if (k & 1)
				EQ(t_join(ep[k], GRP2, NULL), 0);
		} else if (i & 4) {
			while (qps_recv(ep[k], &p, sizeof(p),
					QPS_MSG_DONTWAIT) > 0)
				;
			EQ(t_leave(ep[k], GRP1, NULL), 0);
			EQ(qps_ep_close(ep[k]), 0);
			ep[k] = NULL;
		} else {
			EQ(qps_ep_close(ep[k]), 0);	/* queue still full */
			ep[k] = NULL;
		}
		churn++;
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(ttx, NULL);
	pthread_join(trx, NULL);
	for (k = 0; k < 4; k++)
		if (ep[k])
			EQ(qps_ep_close(ep[k]), 0);
	/* Let the last frames in, then give the steady queue back. */
	for (i = 0; i < 20; i++) {
		qps_ctx_progress(r.a);
		qps_ctx_progress(r.b);
		usleep(1000);
	}
	while (qps_recv(r.steady, &p, sizeof(p), QPS_MSG_DONTWAIT) > 0)
		r.steady_got++;
	EQ(qps_ep_close(r.steady), 0);
	t_all_buffers_home(r.b);
	st = t_ctx_stats(r.b);
	t_partition_holds(&st);
	EQ(st.mc_rules, 0);
	EQ(st.mc_rule_refs, 0);
	EQ(st.mc_joins, st.mc_leaves);
	EQ(r.steady_bad, 0);
	CU_ASSERT(r.sent > 0);
	CU_ASSERT(r.steady_got > 0);
	CU_ASSERT(churn > 10);
	printf("\n    race: %d membership changes, %llu sent, %llu to the "
	       "steady subscriber, early %llu fan-out %llu\n", churn,
	       (unsigned long long)r.sent, (unsigned long long)r.steady_got,
	       (unsigned long long)st.rx_demux_early,
	       (unsigned long long)st.rx_demux_fanout);
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "join/leave errors", test_errors },
		{ "device full: -ENOBUFS", test_device_full },
		{ "3 endpoints, 1 rule, every leave order", test_refcount },
		{ "early path and fan-out", test_early_and_fanout },
		{ "group datagrams above the MTU", test_above_mtu },
		{ "leave and close release buffers", test_release_on_close },
		{ "source-specific joins", test_source_filter },
		{ "exclude mode, filters set whole", test_source_exclude },
		{ "two sources, one subscriber", test_two_sources_one_subscriber },
		{ "connected subscriber", test_connected_subscriber },
		{ "multicast loop on a looping device", test_mc_loop },
		{ "second process: only joined groups", test_two_process },
		{ "unicast: connected first entry, bound", test_unicast_paths },
		{ "metadata only with PKTINFO", test_pktinfo },
		{ "join/leave/close racing with traffic", test_race },
		CU_TEST_INFO_NULL,
	};

	atexit(t_suite_cleanup);
	signal(SIGPIPE, SIG_IGN);
	return t_run("mcast", tests);
}
