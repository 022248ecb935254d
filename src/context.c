// SPDX-License-Identifier: MIT
/*
 * Context lifetime: open the device through its provider, create the QP
 * with its send and receive CQs, install the port's steering rules, and set
 * up the send slots, receive buffers and endpoint table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qps_int.h"

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

int qps_ctx_check(struct qps_ctx *ctx)
{
	return ctx ? 0 : -EINVAL;
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
		else if (strcmp(env, "auto"))
			return -EINVAL;
	}
	if (path > QPS_TX_PATH_DIRECT)
		return -EINVAL;
	if (path == QPS_TX_PATH_AUTO)
		path = (ctx->info.caps & QPS_DEV_CAP_MLX4_SQ) ?
		       QPS_TX_PATH_DIRECT : QPS_TX_PATH_GENERIC;
	if (path == QPS_TX_PATH_DIRECT &&
	    !(ctx->info.caps & QPS_DEV_CAP_MLX4_SQ))
		return -EOPNOTSUPP;
	ctx->tx_path = path;
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
	qps_tx_fini(ctx);
	if (ctx->qp)
		ops->destroy_qp(ctx->qp);
	if (ctx->rx_cq)
		ops->destroy_cq(ctx->rx_cq);
	if (ctx->tx_cq)
		ops->destroy_cq(ctx->tx_cq);
	if (ctx->dev)
		ops->close(ctx->dev);
	free(ctx->eps);
	pthread_mutex_destroy(&ctx->tx_lock);
	pthread_mutex_destroy(&ctx->rx_lock);
	free(ctx);
}

static int qps_ctx_open_dev(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	struct qps_dev_attr da;
	const char *name = qps_pick_provider(attr);
	int ret;

	ret = qps_provider_find(name, &ctx->ops);
	if (ret < 0) {
		qps_log_err("unknown provider '%s' (built: emu%s)", name,
#ifdef QPS_HAVE_VERBS
			    ", verbs"
#else
			    ""
#endif
		);
		return ret;
	}
	snprintf(ctx->provider, sizeof(ctx->provider), "%s", ctx->ops->name);

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

static int qps_ctx_queues(struct qps_ctx *ctx)
{
	struct qps_qp_init_attr qa;
	int ret;

	ret = ctx->ops->create_cq(ctx->dev, ctx->tx_depth, &ctx->tx_cq);
	if (ret < 0)
		return ret;
	ret = ctx->ops->create_cq(ctx->dev, ctx->rx_depth, &ctx->rx_cq);
	if (ret < 0)
		return ret;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.send_cq = ctx->tx_cq;
	qa.recv_cq = ctx->rx_cq;
	qa.cap.max_send_wr = ctx->tx_depth;
	qa.cap.max_recv_wr = ctx->rx_depth;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = ctx->info.max_inline;
	return ctx->ops->create_qp(ctx->dev, &qa, &ctx->qp);
}

static int qps_ctx_eps(struct qps_ctx *ctx, const struct qps_ctx_attr *attr)
{
	uint32_t i;

	ctx->max_ep = QPS_DEFAULT_MAX_EP;
	if (attr && (attr->comp_mask & QPS_CTX_ATTR_MAX_EP)) {
		if (attr->max_ep == 0 || attr->max_ep > 65536)
			return -EINVAL;
		ctx->max_ep = attr->max_ep;
	}
	ctx->eps = calloc(ctx->max_ep, sizeof(*ctx->eps));
	if (!ctx->eps)
		return -ENOMEM;
	for (i = 0; i < ctx->max_ep; i++) {
		ctx->eps[i].ctx = ctx;
		ctx->eps[i].efd = -1;
		ctx->eps[i].epfd = -1;
		ctx->eps[i].free_next = i + 1 < ctx->max_ep ?
					&ctx->eps[i + 1] : NULL;
	}
	ctx->free_head = &ctx->eps[0];
	ctx->free_tail = &ctx->eps[ctx->max_ep - 1];
	return 0;
}

int qps_ctx_create(const struct qps_ctx_attr *attr, struct qps_ctx **ctx_out)
{
	QPS_ERRNO_GUARD;
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

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	pthread_mutex_init(&ctx->tx_lock, NULL);
	pthread_mutex_init(&ctx->rx_lock, NULL);
	ctx->event_fd = -1;
	ctx->eph_next = QPS_EPHEMERAL_LO + (getpid() % 1000);

	ret = qps_depth(attr, QPS_CTX_ATTR_TX_DEPTH,
			attr ? attr->tx_depth : 0, &ctx->tx_depth);
	if (!ret)
		ret = qps_depth(attr, QPS_CTX_ATTR_RX_DEPTH,
				attr ? attr->rx_depth : 0, &ctx->rx_depth);
	if (!ret)
		ret = qps_ctx_db_delay(ctx, attr);
	if (!ret)
		ret = qps_ctx_eps(ctx, attr);
	if (!ret)
		ret = qps_ctx_open_dev(ctx, attr);
	if (!ret)
		ret = qps_ctx_tx_path(ctx, attr);
	if (ret < 0)
		goto err;
	if (ctx->info.mtu < QPS_IP_HLEN + QPS_UDP_HLEN) {
		ret = -EINVAL;
		goto err;
	}
	ctx->max_payload = ctx->info.mtu - QPS_IP_HLEN - QPS_UDP_HLEN;
	if (ctx->tx_depth > ctx->info.max_qp_wr)
		ctx->tx_depth = ctx->info.max_qp_wr;
	if (ctx->rx_depth > ctx->info.max_qp_wr)
		ctx->rx_depth = ctx->info.max_qp_wr;

	ret = qps_ctx_queues(ctx);
	if (ret < 0)
		goto err;
	ret = qps_tx_init(ctx);
	if (ret < 0)
		goto err;
	ret = qps_rx_init(ctx);
	if (ret < 0)
		goto err;
	ret = qps_ctx_flows(ctx);
	if (ret < 0)
		goto err;

	ret = ctx->ops->get_event_fd(ctx->dev);
	ctx->event_fd = ret >= 0 ? ret : -1;
	ctx->ops->req_notify_cq(ctx->rx_cq);

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
	qps_ep_release_all(ctx);
	qps_db_stop(ctx);
	pthread_mutex_lock(&ctx->tx_lock);
	qps_db_ring_locked(ctx, QPS_TXF_CLOSE);
	qps_tx_reap_locked(ctx);
	pthread_mutex_unlock(&ctx->tx_lock);
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
	pthread_mutex_lock(&ctx->tx_lock);
	qps_db_ring_locked(ctx, QPS_TXF_POLL);
	n = qps_tx_reap_locked(ctx);
	pthread_mutex_unlock(&ctx->tx_lock);
	if (n < 0)
		return n;

	pthread_mutex_lock(&ctx->rx_lock);
	ret = qps_rx_progress_locked(ctx);
	pthread_mutex_unlock(&ctx->rx_lock);
	return ret < 0 ? ret : n + ret;
}

int qps_ctx_fd(struct qps_ctx *ctx)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	return ctx->event_fd >= 0 ? ctx->event_fd : -EOPNOTSUPP;
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
	snprintf(info->provider, sizeof(info->provider), "%s", ctx->provider);
	snprintf(info->dev, sizeof(info->dev), "%s", ctx->info.name);
	memcpy(info->mac, ctx->info.mac, 6);
	info->addr = ctx->info.addr;
	info->mtu = ctx->info.mtu;
	info->max_payload = ctx->max_payload;
	info->tx_depth = ctx->tx_depth;
	info->rx_depth = ctx->rx_depth;
	return 0;
}

int qps_ctx_stats(struct qps_ctx *ctx, struct qps_stats *st, size_t size)
{
	QPS_ERRNO_GUARD;
	struct qps_dev_counters dc;
	struct qps_stats all;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (!st && size)
		return -EFAULT;

	pthread_mutex_lock(&ctx->tx_lock);
	pthread_mutex_lock(&ctx->rx_lock);
	all = ctx->st;
	pthread_mutex_unlock(&ctx->rx_lock);
	pthread_mutex_unlock(&ctx->tx_lock);

	memset(&dc, 0, sizeof(dc));
	if (ctx->ops->counters(ctx->dev, &dc) == 0) {
		all.wqes = dc.wqes;
		/* A BlueFlame write rings the device too (it is how the
		 * direct path rings a small last WQE). */
		all.doorbells = dc.doorbells + dc.bf_writes;
		all.bf_writes = dc.bf_writes;
		all.tx_cqes = dc.tx_cqes;
		all.rx_cqes = dc.rx_cqes;
		all.dev_tx_drops = dc.tx_drops;
		all.dev_rx_drops = dc.rx_drops;
	}
	if (all.tx_wqes)
		all.tx_db_ppm = all.tx_doorbells * 1000000u / all.tx_wqes;
	if (size > sizeof(all))
		size = sizeof(all);
	if (size)
		memcpy(st, &all, size);
	return (int)size;
}
