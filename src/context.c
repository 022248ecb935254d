// SPDX-License-Identifier: MIT
/*
 * Context lifetime: open the device through its provider, create the
 * receive CQ and the send queues (sq.c: send QP 0 is also the receive QP),
 * the send-QP selector, install the port's steering rules (raw transport;
 * UD QPs are addressed by QPN and get the peer table and AH cache of
 * ud_addr.c instead), and set up the receive buffers and endpoint table.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "endpoint.h"
#include "rx.h"
#include "dump.h"
#include "sq.h"
#include "stat.h"
#include "tx_wait.h"
#include "ud.h"

_Static_assert(QPS_TX_POLICY_HASH == (int)QPS_TXQ_POLICY_HASH &&
	       QPS_TX_POLICY_CPU == (int)QPS_TXQ_POLICY_CPU &&
	       QPS_TX_POLICY_THREAD == (int)QPS_TXQ_POLICY_THREAD,
	       "public and internal pick policies agree");
_Static_assert(sizeof(((struct qps_ctx_info *)0)->provider) ==
	       sizeof(((struct qps_ctx *)0)->provider) &&
	       sizeof(((struct qps_ctx_info *)0)->dev) ==
	       sizeof(((struct qps_dev_info *)0)->name),
	       "qps_ctx_query copies these names whole");
_Static_assert(QPS_DEV_MODE_HOST_NETDEV == QPS_CTX_INFO_F_HOST_NETDEV &&
	       QPS_DEV_MODE_XDP_NATIVE == QPS_CTX_INFO_F_XDP_NATIVE &&
	       QPS_DEV_MODE_XDP_ZEROCOPY == QPS_CTX_INFO_F_XDP_ZEROCOPY &&
	       QPS_DEV_MODE_XDP_BUSY_POLL == QPS_CTX_INFO_F_XDP_BUSY_POLL &&
	       QPS_DEV_MODE_PACKET_RING == QPS_CTX_INFO_F_PACKET_RING,
	       "qps_ctx_query_ex reports a provider's mode as it is");

static const char *qps_pick_provider(const struct qps_ctx_attr *attr)
{
	const char *env;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_PROVIDER) && attr->provider)
		return attr->provider;
	env = getenv("QPS_PROVIDER");
	if (env && *env)
		return env;
	return "emu";
}

static int qps_depth(const struct qps_ctx_attr *attr, uint64_t bit,
		     uint32_t val, uint32_t *out)
{
	if (!attr || !(attr->comp_mask & bit)) {
		*out = QPS_DEFAULT_DEPTH;
		return 0;
	}
	if (val < 2 || val > QPS_MAX_DEPTH)
		return -EINVAL;
	*out = val;
	return 0;
}

uint32_t qps_fork_gen;
static pthread_once_t qps_fork_once = PTHREAD_ONCE_INIT;

/* Single-threaded in the child (only the forking thread exists). */
static void qps_fork_child(void)
{
	qps_fork_gen++;
}

static void qps_fork_hook(void)
{
	/* Cannot fail but for ENOMEM, and then no child can tell apart a
	 * context of its parent: nothing better to do than go on. */
	(void)pthread_atfork(NULL, NULL, qps_fork_child);
}

int qps_ctx_check(const struct qps_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	return qps_ctx_forked(ctx) ? -ECHILD : 0;
}

/* The send path: attr, else $QPS_TX_PATH, else auto; auto is direct
 * where the provider exposes an mlx4 send queue. */
static int qps_ctx_tx_path(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	uint32_t path = QPS_TX_PATH_AUTO;
	const char *env;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_TX_PATH)) {
		path = attr->tx_path;
	} else if ((env = getenv("QPS_TX_PATH")) && *env) {
		if (!strcmp(env, "generic"))
			path = QPS_TX_PATH_GENERIC;
		else if (!strcmp(env, "direct"))
			path = QPS_TX_PATH_DIRECT;
		else if (strcmp(env, "auto") != 0)
			return -EINVAL;
	}
	if (path > QPS_TX_PATH_DIRECT)
		return -EINVAL;
	/* UD goes through WRs only: an mlx4 UD WQE carries an address
	 * vector (datagram segment) that sq_mlx4.c does not write. */
	if (path == QPS_TX_PATH_AUTO)
		path = (ctx->info.caps & QPS_DEV_CAP_MLX4_SQ) &&
		       ctx->transport == QPS_TRANSPORT_RAW ?
		       QPS_TX_PATH_DIRECT : QPS_TX_PATH_GENERIC;
	if (path == QPS_TX_PATH_DIRECT &&
	    (!(ctx->info.caps & QPS_DEV_CAP_MLX4_SQ) ||
	     ctx->transport != QPS_TRANSPORT_RAW))
		return -EOPNOTSUPP;
	ctx->tx_path = path;
	ctx->tx_ops = path == QPS_TX_PATH_DIRECT ? &qps_sq_path_mlx4 :
						   &qps_sq_path_generic;
	return 0;
}

/* Checksum offload where the device has it, unless $QPS_CSUM_OFFLOAD
 * says off. UD frames are the device's to build whole. */
static int qps_ctx_csum(struct qps_ctx *ctx)
{
	const char *env = getenv("QPS_CSUM_OFFLOAD");
	bool on = true;

	if (env && *env) {
		if (!strcmp(env, "off") || !strcmp(env, "0"))
			on = false;
		else if (strcmp(env, "on") != 0 && strcmp(env, "1") != 0)
			return -EINVAL;
	}
	ctx->csum_offload = on && (ctx->info.caps & QPS_DEV_CAP_CSUM) &&
			    ctx->transport == QPS_TRANSPORT_RAW;
	return 0;
}

static int qps_ctx_db_delay(struct qps_ctx *ctx,
			    const struct qps_ctx_attr *attr)
{
	uint32_t us = QPS_DB_DELAY_DEFAULT_US;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_DB_DELAY)) {
		if (attr->db_delay_us > QPS_DB_DELAY_MAX_US)
			return -EINVAL;
		us = attr->db_delay_us;
	}
	ctx->db_delay_ns = (uint64_t)us * 1000u;
	return 0;
}

/* The endpoints' busy-poll budget: attr, else $QPS_BUSY_POLL, else the
 * default. A malformed variable is refused like a bad attribute. */
static int qps_ctx_busy_poll(struct qps_ctx *ctx,
			     const struct qps_ctx_attr *attr)
{
	unsigned long us = QPS_BUSY_POLL_DEFAULT_US;
	const char *env = getenv("QPS_BUSY_POLL");

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_BUSY_POLL)) {
		us = attr->busy_poll_us;
	} else if (env && *env) {
		char *end;

		us = strtoul(env, &end, 10);
		if (*end || env[0] == '-')
			return -EINVAL;
	}
	if (us > QPS_BUSY_POLL_MAX_US)
		return -EINVAL;
	ctx->busy_poll_us = (uint32_t)us;
	return 0;
}

/* attr, else $QPS_THREAD_MODE, else multi; the send queues' locks then
 * get what membarrier allows (alock.h). */
static int qps_ctx_thread_mode(struct qps_ctx *ctx,
			       const struct qps_ctx_attr *attr)
{
	uint32_t mode = QPS_THREAD_MODE_MULTI;
	const char *env = getenv("QPS_THREAD_MODE");
	int asym;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_THREAD_MODE)) {
		mode = attr->thread_mode;
	} else if (env && *env) {
		if (!strcmp(env, "single"))
			mode = QPS_THREAD_MODE_SINGLE;
		else if (!strcmp(env, "mutex"))
			mode = QPS_THREAD_MODE_MUTEX;
		else if (strcmp(env, "multi") != 0)
			return -EINVAL;
	}
	if (mode > QPS_THREAD_MODE_MUTEX)
		return -EINVAL;
	ctx->lock_mode = QPS_ALOCK_MUTEX;
	if (mode == QPS_THREAD_MODE_MUTEX)
		return 0;
	asym = qps_alock_asym_check();
	if (asym == 0)
		ctx->lock_mode = mode == QPS_THREAD_MODE_SINGLE ?
				 QPS_ALOCK_SINGLE : QPS_ALOCK_BIASED;
	else if (asym != -ENOTSUP)
		qps_log_err("membarrier refused (%d): send queue locks are "
			    "plain mutexes", asym);
	return 0;
}

/* IPv4 reassembly limits (ipfrag.c), the kernel's sysctl defaults. */
static int qps_ctx_ipfrag(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	ctx->ipfrag_mem = QPS_IPFRAG_MEM_DEFAULT;
	ctx->ipfrag_time_ms = QPS_IPFRAG_TIME_DEFAULT_MS;
	if (!attr || !(attr->comp_mask & QPS_CTX_ATTR_IPFRAG))
		return 0;
	if (attr->ipfrag_mem > QPS_IPFRAG_MEM_MAX || !attr->ipfrag_time_ms ||
	    attr->ipfrag_time_ms > QPS_IPFRAG_TIME_MAX_MS)
		return -EINVAL;
	ctx->ipfrag_mem = attr->ipfrag_mem;
	ctx->ipfrag_time_ms = attr->ipfrag_time_ms;
	return 0;
}

/* Completion moderation (tx.c): 1..tx_depth, after tx_depth is known. */
static int qps_ctx_tx_signal(struct qps_ctx *ctx,
			     const struct qps_ctx_attr *attr)
{
	uint32_t n = QPS_TX_SIGNAL_DEFAULT;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_TX_SIGNAL)) {
		if (!attr->tx_signal || attr->tx_signal > ctx->tx_depth)
			return -EINVAL;
		n = attr->tx_signal;
	}
	ctx->tx_signal = n < ctx->tx_depth ? n : ctx->tx_depth;
	return 0;
}

/* The transport asked for; whether the device has it is checked once it
 * is open (qps_ctx_ud_check). */
static int qps_ctx_transport(struct qps_ctx *ctx,
			     const struct qps_ctx_attr *attr)
{
	uint32_t t = QPS_TRANSPORT_RAW;

	if (attr && (attr->comp_mask & QPS_CTX_ATTR_TRANSPORT))
		t = attr->transport;
	if (t != QPS_TRANSPORT_RAW && t != QPS_TRANSPORT_UD)
		return -EINVAL;
	ctx->transport = t;
	return 0;
}

/* UD needs UD QPs and a UD MTU with room for qpsock's header. */
static int qps_ctx_ud_check(struct qps_ctx *ctx)
{
	if (ctx->transport != QPS_TRANSPORT_UD)
		return 0;
	if (!(ctx->info.caps & QPS_DEV_CAP_UD) ||
	    ctx->info.ud_mtu <= QPS_UD_HDR_LEN) {
		qps_log_err("provider %s (%s) has no UD QPs: use the raw "
			    "transport", ctx->provider, ctx->info.name);
		return -EOPNOTSUPP;
	}
	return 0;
}

static bool qps_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* Send QPs, pick policy and flow table size; the selector itself is
 * created once the QPs exist. */
static int qps_ctx_txq_attr(struct qps_ctx *ctx,
			    const struct qps_ctx_attr *attr,
			    struct qps_txq_attr *ta)
{
	memset(ta, 0, sizeof(*ta));
	ta->nqp = (uint32_t)qps_txq_default_nqp();
	ta->policy = QPS_TXQ_POLICY_HASH;
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_NUM_TXQ)) {
		if (!qps_pow2(attr->num_txq) || attr->num_txq > QPS_MAX_TXQ)
			return -EINVAL;
		ta->nqp = attr->num_txq;
	}
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_TXQ_POLICY)) {
		if (attr->txq_policy >= QPS_TXQ_POLICY_MAX)
			return -EINVAL;
		ta->policy = (enum qps_txq_policy)attr->txq_policy;
	}
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_TXQ_FLOWS)) {
		if (!qps_pow2(attr->txq_flows) ||
		    attr->txq_flows > QPS_TXQ_MAX_FLOWS)
			return -EINVAL;
		ta->flow_entries = attr->txq_flows;
	}
	if (ta->nqp > QPS_MAX_TXQ)
		ta->nqp = QPS_MAX_TXQ;
	ctx->nsq = ta->nqp;
	return 0;
}

static int qps_ctx_flows(struct qps_ctx *ctx)
{
	uint8_t buf[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	struct qps_flow_match m;
	int ret;

	/* Unicast to our MAC and IPv4 address; broadcast below it. */
	memset(&m, 0, sizeof(m));
	memcpy(m.dst_mac, ctx->info.mac, 6);
	m.match_mac = true;
	m.dst_ip = ctx->info.addr.s_addr;
	m.priority = 1;
	m.type = IBV_FLOW_ATTR_NORMAL;
	ret = ctx->ops->create_flow(ctx->qp, qps_flow_attr_build(buf, &m),
				    &ctx->flow_ucast);
	if (ret < 0)
		return ret;

	memset(&m, 0, sizeof(m));
	memset(m.dst_mac, 0xff, 6);
	m.match_mac = true;
	m.priority = 2;
	m.type = IBV_FLOW_ATTR_NORMAL;
	return ctx->ops->create_flow(ctx->qp, qps_flow_attr_build(buf, &m),
				     &ctx->flow_bcast);
}

static void qps_ctx_teardown(struct qps_ctx *ctx)
{
	const struct qps_provider_ops *ops = ctx->ops;

	if (ctx->flow_bcast)
		ops->destroy_flow(ctx->flow_bcast);
	if (ctx->flow_ucast)
		ops->destroy_flow(ctx->flow_ucast);
	qps_rx_fini(ctx);
	qps_db_fini(ctx);
	qps_sqs_destroy(ctx);
	/* After the QPs: a WR still in flight may name an AH. */
	qps_ud_fini(ctx);
	if (ctx->rx.cq)
		ops->destroy_cq(ctx->rx.cq);
	if (ctx->txq)
		qps_txq_destroy(ctx->txq);
	if (ctx->dev)
		ops->close(ctx->dev);
	/* Last: every counter block lives in it. */
	qps_stat_close(ctx);
	qps_txw_close(ctx);
	free(ctx->ept.eps);
	free(ctx);
}

static int qps_ctx_open_dev(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	struct qps_dev_attr da;
	const char *name = qps_pick_provider(attr);
	int ret;

	ret = qps_provider_find(name, &ctx->ops);
	if (ret == 0)
		ctx->routes_static = qps_provider_routes_static(ctx->ops);
	if (ret < 0) {
		qps_log_err("unknown provider '%s' (built: emu%s%s%s%s)", name,
#ifdef QPS_HAVE_PACKET
			    ", packet",
#else
			    "",
#endif
#ifdef QPS_HAVE_XDP
			    ", xdp",
#else
			    "",
#endif
#ifdef QPS_HAVE_VERBS
			    ", verbs",
#else
			    "",
#endif
#ifdef QPS_HAVE_NULL
			    ", null"
#else
			    ""
#endif
		);
		return ret;
	}
	/* Cannot truncate: qps_provider_fill admits only names that fit. */
	(void)snprintf(ctx->provider, sizeof(ctx->provider), "%s",
		       ctx->ops->name);

	memset(&da, 0, sizeof(da));
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_DEV))
		da.dev = attr->dev;
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_ADDR)) {
		da.addr_set = true;
		da.addr = attr->addr;
	}
	ret = ctx->ops->open(&da, &ctx->dev);
	if (ret < 0)
		return ret;
	/* Providers do not see the filled table; the core installs it. */
	ctx->dev->ops = ctx->ops;
	return ctx->ops->query(ctx->dev, &ctx->info);
}

/* The receive CQ, the send queues (QP 0 receives too) and the selector
 * that spreads datagrams over them. */
static int qps_ctx_queues(struct qps_ctx *ctx, struct qps_txq_attr *ta)
{
	int ret;

	ret = ctx->ops->create_cq(ctx->dev, (int)ctx->rx.depth, &ctx->rx.cq);
	if (ret < 0)
		return ret;
	ret = qps_sqs_create(ctx);
	if (ret < 0)
		return ret;
	return qps_txq_create(ta, &ctx->txq);
}

static int qps_ctx_eps(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	uint32_t i;

	ctx->ept.max = QPS_DEFAULT_MAX_EP;
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_MAX_EP)) {
		if (attr->max_ep == 0 || attr->max_ep > QPS_MAX_EP)
			return -EINVAL;
		ctx->ept.max = attr->max_ep;
	}
	ctx->ept.eps = calloc(ctx->ept.max, sizeof(*ctx->ept.eps));
	if (!ctx->ept.eps)
		return -ENOMEM;
	for (i = 0; i < ctx->ept.max; i++) {
		ctx->ept.eps[i].ctx = ctx;
		ctx->ept.eps[i].efd = -1;
		ctx->ept.eps[i].epfd = -1;
		ctx->ept.eps[i].free_next = i + 1 < ctx->ept.max ?
					     &ctx->ept.eps[i + 1] : NULL;
	}
	ctx->ept.free_head = &ctx->ept.eps[0];
	ctx->ept.free_tail = &ctx->ept.eps[ctx->ept.max - 1];
	return 0;
}

int qps_ctx_create(const struct qps_ctx_attr *attr, struct qps_ctx **ctx_out)
{
	QPS_ERRNO_GUARD;
	struct qps_txq_attr ta;
	struct qps_ctx *ctx;
	int ret;

	if (!ctx_out)
		return -EINVAL;
	*ctx_out = NULL;
	if (attr && (attr->comp_mask & ~(uint64_t)QPS_CTX_ATTR_ALL))
		return -EINVAL;
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_PROVIDER) &&
	    !attr->provider)
		return -EINVAL;

	pthread_once(&qps_fork_once, qps_fork_hook);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->fork_gen = qps_fork_gen;
	qps_mutex_init(&ctx->rx.lock);
	ctx->event_fd = -1;
	ctx->txw_fd = -1;
	ctx->ept.eph_next = QPS_EPHEMERAL_LO + (getpid() % 1000);

	ret = qps_depth(attr, QPS_CTX_ATTR_TX_DEPTH,
			attr ? attr->tx_depth : 0, &ctx->tx_depth);
	if (!ret)
		ret = qps_depth(attr, QPS_CTX_ATTR_RX_DEPTH,
				attr ? attr->rx_depth : 0, &ctx->rx.depth);
	if (!ret)
		ret = qps_ctx_db_delay(ctx, attr);
	if (!ret)
		ret = qps_ctx_busy_poll(ctx, attr);
	if (!ret)
		ret = qps_ctx_thread_mode(ctx, attr);
	if (!ret)
		ret = qps_ctx_ipfrag(ctx, attr);
	if (!ret)
		ret = qps_ctx_tx_signal(ctx, attr);
	if (!ret)
		ret = qps_ctx_transport(ctx, attr);
	if (!ret)
		ret = qps_ctx_txq_attr(ctx, attr, &ta);
	if (!ret)
		ret = qps_ctx_eps(ctx, attr);
	if (!ret)
		ret = qps_txw_open(ctx);
	if (!ret)
		ret = qps_ctx_open_dev(ctx, attr);
	if (!ret)
		ret = qps_ctx_ud_check(ctx);
	if (!ret)
		ret = qps_ctx_tx_path(ctx, attr);
	if (!ret)
		ret = qps_ctx_csum(ctx);
	if (!ret)
		ret = qps_stat_open(ctx, attr);
	if (ret < 0)
		goto err;
	if (ctx->info.mtu < QPS_IP_HLEN + QPS_UDP_HLEN) {
		ret = -EINVAL;
		goto err;
	}
	/* UD: one message of the UD MTU holds qpsock's header and the
	 * payload (the device adds the rest). */
	if (ctx->transport == QPS_TRANSPORT_UD)
		ctx->max_payload = ctx->info.ud_mtu - QPS_UD_HDR_LEN;
	else
		ctx->max_payload = ctx->info.mtu - QPS_IP_HLEN - QPS_UDP_HLEN;
	ctx->max_payload_cap = ctx->max_payload;
	if (ctx->tx_depth > ctx->info.max_qp_wr)
		ctx->tx_depth = ctx->info.max_qp_wr;
	if (ctx->tx_signal > ctx->tx_depth)
		ctx->tx_signal = ctx->tx_depth;
	if (ctx->rx.depth > ctx->info.max_qp_wr)
		ctx->rx.depth = ctx->info.max_qp_wr;
	if (ctx->transport == QPS_TRANSPORT_UD) {
		ret = qps_ud_init(ctx);
		if (ret < 0)
			goto err;
	}

	ret = qps_db_init(ctx);
	if (ret < 0)
		goto err;
	ret = qps_ctx_queues(ctx, &ta);
	if (ret < 0)
		goto err;
	ret = qps_rx_init(ctx);
	if (ret < 0)
		goto err;
	/* UD needs no rules: the QPN addresses the QP. */
	ret = ctx->ud ? 0 : qps_ctx_flows(ctx);
	if (ret < 0)
		goto err;

	ret = ctx->ops->get_event_fd(ctx->dev);
	ctx->event_fd = ret >= 0 ? ret : -1;
	/* Before the stats thread: it runs the ticks from then on. */
	qps_dump_start_wait(ctx);
	qps_stat_start(ctx);

	*ctx_out = ctx;
	return 0;
err:
	qps_ctx_teardown(ctx);
	return ret;
}

int qps_ctx_destroy(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	/* Sleepers are woken first; the publisher reads what teardown
	 * frees, so it stops before that. */
	qps_ep_release_all(ctx);
	/* Every endpoint is closed: receive calls still inside (spinning,
	 * or woken and leaving) see it and go; wait for them, with no lock
	 * held that they might need on the way out. */
	qps_mutex_lock(&ctx->rx.lock);
	while (ctx->rx.inside) {
		qps_mutex_unlock(&ctx->rx.lock);
		sched_yield();
		qps_mutex_lock(&ctx->rx.lock);
	}
	qps_mutex_unlock(&ctx->rx.lock);
	qps_stat_stop(ctx);
	qps_db_stop(ctx);
	qps_tx_poll(ctx, QPS_TXF_CLOSE);
	qps_ctx_teardown(ctx);
	return 0;
}

int qps_ctx_progress(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);
	int n;

	if (ret < 0)
		return ret;
	n = qps_tx_poll(ctx, QPS_TXF_POLL);
	if (n < 0)
		return n;

	qps_mutex_lock(&ctx->rx.lock);
	ret = qps_rx_progress_locked(ctx);
	qps_mutex_unlock(&ctx->rx.lock);
	return ret < 0 ? ret : n + ret;
}

int qps_ctx_fd(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (ctx->event_fd < 0)
		return -EOPNOTSUPP;
	/* The application may now sleep on it: keep the CQ armed, unless
	 * it says when it sleeps (qps_ctx_arm). */
	qps_mutex_lock(&ctx->rx.lock);
	ctx->rx.arm_sticky = true;
	if (!ctx->rx.arm_explicit)
		qps_rx_arm_locked(ctx);
	qps_mutex_unlock(&ctx->rx.lock);
	return ctx->event_fd;
}

int qps_ctx_arm(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);
	int n;

	if (ret < 0)
		return ret;
	if (ctx->event_fd < 0)
		return -EOPNOTSUPP;
	/* A postponed doorbell must not wait for the caller's sleep. */
	n = qps_tx_poll(ctx, QPS_TXF_POLL);
	if (n < 0)
		return n;

	qps_mutex_lock(&ctx->rx.lock);
	ctx->rx.arm_explicit = true;
	ctx->rx.arm_refs++;
	ctx->rx.arm_calls++;
	/* Drains, then arms (a reason is counted) and polls once more. */
	ret = qps_rx_progress_locked(ctx);
	if (ret < 0) {
		ctx->rx.arm_refs--;
		ctx->rx.arm_calls--;
	}
	qps_mutex_unlock(&ctx->rx.lock);
	return ret < 0 ? ret : n + ret;
}

int qps_ctx_disarm(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	qps_mutex_lock(&ctx->rx.lock);
	if (ctx->rx.arm_calls) {
		ctx->rx.arm_calls--;
		ctx->rx.arm_refs--;
	} else {
		ret = -EINVAL;
	}
	qps_mutex_unlock(&ctx->rx.lock);
	return ret;
}

int qps_ctx_query(struct qps_ctx *ctx, struct qps_ctx_info *info)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (!info)
		return -EFAULT;
	memset(info, 0, sizeof(*info));
	/* Both copied whole: the arrays have the same sizes (asserted). */
	memcpy(info->provider, ctx->provider, sizeof(info->provider));
	memcpy(info->dev, ctx->info.name, sizeof(info->dev));
	memcpy(info->mac, ctx->info.mac, 6);
	info->addr = ctx->info.addr;
	/* The MTU now (route.c follows it), and what fits in it. */
	qps_route_gen(ctx);
	info->mtu = __atomic_load_n(&ctx->info.mtu, __ATOMIC_RELAXED);
	info->max_payload = __atomic_load_n(&ctx->max_payload,
					    __ATOMIC_RELAXED);
	info->tx_depth = ctx->tx_depth;
	info->rx_depth = ctx->rx.depth;
	return 0;
}

/* The send path's part of the flags, and what it carries inline: the
 * direct path's first send queue speaks for all (they are made alike). */
static void qps_ctx_query_tx(struct qps_ctx *ctx, struct qps_ctx_info_ex *x)
{
	struct qps_sq *sq = &ctx->sq[0];

	x->max_inline = ctx->info.max_inline;
	if (ctx->tx_path != QPS_TX_PATH_DIRECT || !ctx->nsq)
		return;
	x->flags |= QPS_CTX_INFO_F_TX_DIRECT;
	qps_alock_lock(&sq->lock);
	if (sq->mlx4.bf)
		x->flags |= QPS_CTX_INFO_F_BLUEFLAME;
	x->max_inline = sq->mlx4.max_inline;
	qps_alock_unlock(&sq->lock);
}

int qps_ctx_query_ex(struct qps_ctx *ctx, struct qps_ctx_info_ex *info,
		     size_t size)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx_info_ex x;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (size < sizeof(x.base))
		return -EINVAL;
	if (!info)
		return -EFAULT;
	memset(&x, 0, sizeof(x));
	ret = qps_ctx_query(ctx, &x.base);
	if (ret < 0)
		return ret;
	x.flags = ctx->info.mode;
	x.rx_queue = ctx->info.rx_queue;
	x.rx_queues = ctx->info.rx_queues;
	qps_ctx_query_tx(ctx, &x);
	/* A caller built against a newer header: what this library does
	 * not know reads as 0, never as the caller's stack. */
	if (size > sizeof(x)) {
		memset((char *)info + sizeof(x), 0, size - sizeof(x));
		size = sizeof(x);
	}
	memcpy(info, &x, size);
	return (int)size;
}
