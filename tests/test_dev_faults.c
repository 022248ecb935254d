// SPDX-License-Identifier: MIT
/*
 * Device faults other than a failed QP (test_qp_error.c has those),
 * injected through the device: a steering rule the device refuses, and a
 * receive CQ that overruns. Each must reach the application as its -errno
 * (or a counter), cost nothing else, and leave the context working; the
 * overrun lost completions, and their buffers with them, so the receiving
 * QP is reset to get them back (qp_recover.c). On emu
 * the faults come from emu's injection hooks; on the verbs provider
 * (tests/verbs/run-on-shim.sh) from the libibverbs test double, as a real
 * device's errors would: QPS_IBV_EMU_FLOW_ERR fails ibv_create_flow,
 * QPS_IBV_EMU_CQE_MAX grants CQs fewer entries than asked.
 */
#include "t_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"
#include "qps_int.h"

#define IP_TX "198.18.0.93"
#define IP_RX "198.18.0.94"
#define PORT_RX 9200
#define PORT_TX 9201
#define GROUP "239.9.2.1"
#define RX_DEPTH 32
#define CQ_SMALL 4

static char g_wire[64];

static struct qps_ctx *ctx_open(const char *ip)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	a.comp_mask |= QPS_CTX_ATTR_RX_DEPTH;
	a.rx_depth = RX_DEPTH;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	return ctx;
}

/* Receive up to @want datagrams on @ep within a second. */
static int drain(struct qps_ep *ep, int want)
{
	uint64_t end = t_now_ms() + 1000;
	char buf[64];
	int got = 0;

	while (got < want && t_now_ms() < end) {
		if (qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT) >= 0)
			got++;
		else
			usleep(200);
	}
	return got;
}

static int send_to(struct qps_ep *ep, const char *ip, unsigned short port,
		   int n)
{
	struct sockaddr_in to = t_sin(ip, port);
	int i, ok = 0;

	for (i = 0; i < n; i++)
		ok += qps_sendto(ep, "f", 1, QPS_MSG_MORE,
				 (struct sockaddr *)&to, sizeof(to)) == 1;
	qps_ctx_flush(ep->ctx);
	return ok;
}

/* The device refuses the next rule with @err (emu: the next create_flow;
 * the double: every ibv_create_flow until cleared, err 0). */
static void flow_refuse(struct qps_ctx *ctx, int err)
{
	char v[16];

	if (t_provider_is("verbs")) {
		if (!err) {
			unsetenv("QPS_IBV_EMU_FLOW_ERR");
			return;
		}
		snprintf(v, sizeof(v), "%d", err);
		setenv("QPS_IBV_EMU_FLOW_ERR", v, 1);
	} else {
		T_EQ(qps_emu_inject_flow_err(ctx->dev, -err), 0);
	}
}

/* A join whose rule the device refuses fails with its -errno (full:
 * -ENOBUFS, as IP_ADD_MEMBERSHIP says it), installs nothing, and the
 * same join succeeds once the device takes rules again. */
static void test_flow_refused(void)
{
	static const struct { int err, want; } cases[] = {
		{ ENOSPC, -ENOBUFS },
		{ ENOMEM, -ENOMEM },
		{ EPERM, -EPERM },
	};
	struct qps_mreq m = { .group.s_addr = t_ip4(GROUP) };
	struct qps_ctx *tx, *rx;
	struct qps_ep *member, *out;
	struct qps_stats st;
	unsigned int i;

	t_suite_begin();
	tx = ctx_open(IP_TX);
	rx = ctx_open(IP_RX);
	member = t_ep_bound(rx, "0.0.0.0", PORT_RX, 2000);
	out = t_ep_bound(tx, IP_TX, PORT_TX, 2000);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		flow_refuse(rx, cases[i].err);
		T_EQ(qps_join(member, &m, sizeof(m)), cases[i].want);
		flow_refuse(rx, 0);
		st = t_ctx_stats(rx);
		T_EQ(st.mc_rules, 0);
		T_EQ(st.mc_joins, 0);
	}
	T_EQ(send_to(out, GROUP, PORT_RX, 4), 4);
	T_EQ(drain(member, 4), 0);
	T_EQ(qps_join(member, &m, sizeof(m)), 0);
	T_EQ(send_to(out, GROUP, PORT_RX, 4), 4);
	T_EQ(drain(member, 4), 4);
	st = t_ctx_stats(rx);
	/* The port's rule, and the group's own where the device takes it. */
	T_EQ(st.mc_rules, (rx->info.caps & QPS_DEV_CAP_MC_GROUP_RULE) ? 2 : 1);
	T_EQ(st.mc_joins, 1);
	t_suite_end();
}

/* The receive CQ overruns (completions lost): the call that finds it
 * says -EIO once, what did arrive is delivered, and later datagrams
 * arrive. */
static void test_cq_overrun(void)
{
	struct qps_ctx *tx, *rx;
	struct qps_ep *in, *out;
	struct qps_stats st;
	int ret, eio = 0, got, i;

	t_suite_begin();
	tx = ctx_open(IP_TX);
	if (t_provider_is("verbs"))
		setenv("QPS_IBV_EMU_CQE_MAX", "4", 1);
	rx = ctx_open(IP_RX);
	unsetenv("QPS_IBV_EMU_CQE_MAX");
	in = t_ep_bound(rx, IP_RX, PORT_RX, 2000);
	out = t_ep_bound(tx, IP_TX, PORT_TX, 2000);
	if (t_provider_is("verbs")) {
		/* More than the CQ holds, before the receiver polls. */
		T_EQ(send_to(out, IP_RX, PORT_RX, 3 * CQ_SMALL),
		     3 * CQ_SMALL);
		usleep(20000);
	} else {
		T_EQ(send_to(out, IP_RX, PORT_RX, CQ_SMALL), CQ_SMALL);
		usleep(20000);
		qps_emu_inject_cq_overrun(rx->rx.cq);
	}
	for (i = 0; i < 4; i++) {
		ret = qps_ctx_progress(rx);
		if (ret == -EIO)
			eio++;
		else
			T_GE(ret, 0);
	}
	T_EQ(eio, 1);
	got = drain(in, CQ_SMALL);
	T_EQ(got, CQ_SMALL);
	/* The receiving QP was reset once (the buffers whose completions
	 * were lost are posted again: test_qp_error checks a whole ring),
	 * and no further overrun follows: a ring's worth arrives, in
	 * bursts the CQ holds. */
	st = t_ctx_stats(rx);
	T_EQ(st.qp_recoveries, 1);
	for (i = 0; i < RX_DEPTH / CQ_SMALL; i++) {
		T_EQ(send_to(out, IP_RX, PORT_RX, CQ_SMALL), CQ_SMALL);
		got = drain(in, CQ_SMALL);
		T_EQ(got, CQ_SMALL);
		if (got != CQ_SMALL)
			break;
	}
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "a refused steering rule: -errno, nothing installed",
		  test_flow_refused },
		{ "receive CQ overrun: -EIO once, traffic goes on",
		  test_cq_overrun },
		CU_TEST_INFO_NULL,
	};

	t_wire_name(g_wire, sizeof(g_wire), "devf");
	atexit(t_suite_cleanup);
	return t_run("test_dev_faults", tests);
}
