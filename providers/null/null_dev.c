// SPDX-License-Identifier: MIT
/*
 * Device handle of the null provider: open (the device string carries
 * the receive generator's settings), close, query, counters, memory
 * registration, next hops and the ops table.
 */
#include "null.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 198.18.0.1 (the benchmarking range) and a locally administered MAC. */
#define NULL_ADDR_DEFAULT 0xc6120001u
static const uint8_t null_mac[6] = { 0x02, 0x4e, 0x55, 0x4c, 0x00, 0x01 };
/* Every unicast next hop: the device sends nothing anywhere. */
static const uint8_t null_peer_mac[6] = { 0x02, 0x4e, 0x55, 0x4c, 0x00, 0x02 };

uint32_t qps_null_roundup_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static int parse_u32(const char *s, size_t n, uint32_t max, uint32_t *out)
{
	uint32_t v = 0;
	size_t i;

	if (!n)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint32_t)(s[i] - '0');
		if (v > max)
			return -EINVAL;
	}
	*out = v;
	return 0;
}

static bool key_is(const char *k, size_t klen, const char *name)
{
	return strlen(name) == klen && !memcmp(k, name, klen);
}

/* One "key=value" of the device string. */
static int parse_kv(const char *k, size_t klen, const char *v, size_t vlen,
		    struct qps_null_cfg *cfg)
{
	uint32_t u;
	int ret;

	if (key_is(k, klen, "rx")) {
		if (vlen == 3 && !memcmp(v, "off", 3))
			cfg->rx = QPS_NULL_RX_OFF;
		else if (vlen == 7 && !memcmp(v, "unicast", 7))
			cfg->rx = QPS_NULL_RX_UNICAST;
		else if (vlen == 5 && !memcmp(v, "mcast", 5))
			cfg->rx = QPS_NULL_RX_MCAST;
		else
			return -EINVAL;
		return 0;
	}
	if (key_is(k, klen, "port")) {
		ret = parse_u32(v, vlen, 65535, &u);
		if (ret < 0 || !u)
			return -EINVAL;
		cfg->port = (uint16_t)u;
		return 0;
	}
	if (key_is(k, klen, "len")) {
		ret = parse_u32(v, vlen, QPS_NULL_MTU - 28, &u);
		if (ret < 0 || u < 4)	/* room for the sequence number */
			return -EINVAL;
		cfg->len = u;
		return 0;
	}
	if (key_is(k, klen, "burst")) {
		ret = parse_u32(v, vlen, QPS_NULL_MAX_CQE, &u);
		if (ret < 0 || !u)
			return -EINVAL;
		cfg->burst = u;
		return 0;
	}
	if (key_is(k, klen, "csum")) {
		if (vlen == 3 && !memcmp(v, "off", 3))
			cfg->csum_off = true;
		else if (vlen == 2 && !memcmp(v, "on", 2))
			cfg->csum_off = false;
		else
			return -EINVAL;
		return 0;
	}
	if (key_is(k, klen, "group")) {
		struct in_addr a;
		char ip[16];

		if (vlen >= sizeof(ip))
			return -EINVAL;
		memcpy(ip, v, vlen);
		ip[vlen] = '\0';
		if (inet_pton(AF_INET, ip, &a) != 1 ||
		    !IN_MULTICAST(ntohl(a.s_addr)))
			return -EINVAL;
		cfg->group = a.s_addr;
		return 0;
	}
	return -EINVAL;
}

/*
 * "" or "null", else "key=value" pairs separated by ':' (rx, port, group,
 * len, burst, csum; docs/null.md). Generating needs a port, and mcast a group.
 */
int qps_null_parse_cfg(const char *s, struct qps_null_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->len = QPS_NULL_LEN_DEFAULT;
	cfg->burst = QPS_NULL_BURST_DEFAULT;
	if (!s || !*s || !strcmp(s, "null"))
		return 0;
	while (*s) {
		const char *end = strchr(s, ':');
		const char *eq;
		size_t n = end ? (size_t)(end - s) : strlen(s);
		int ret;

		eq = memchr(s, '=', n);
		if (!eq)
			return -EINVAL;
		ret = parse_kv(s, (size_t)(eq - s), eq + 1,
			       n - (size_t)(eq - s) - 1, cfg);
		if (ret < 0)
			return ret;
		s += n;
		if (*s)
			s++;
	}
	if (cfg->rx != QPS_NULL_RX_OFF && !cfg->port)
		return -EINVAL;
	if (cfg->rx == QPS_NULL_RX_MCAST && !cfg->group)
		return -EINVAL;
	return 0;
}

static void dev_free(struct qps_null_dev *dev)
{
	pthread_spin_destroy(&dev->bf.lock);
	free(dev->bf_reg);
	pthread_mutex_destroy(&dev->lock);
	qps_sw_mr_fini(&dev->mrs);
	free(dev);
}

static int null_open(const struct qps_dev_attr *attr, struct qps_dev **dev_out)
{
	struct qps_null_dev *dev;
	int ret;

	if (!dev_out)
		return -EINVAL;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	ret = qps_null_parse_cfg(attr ? attr->dev : NULL, &dev->cfg);
	if (ret < 0) {
		free(dev);
		return ret;
	}
	dev->base.ops = &qps_null_ops;
	pthread_mutex_init(&dev->lock, NULL);
	pthread_spin_init(&dev->bf.lock, PTHREAD_PROCESS_PRIVATE);
	qps_sw_mr_init(&dev->mrs, QPS_NULL_MAX_MR);
	dev->bf_reg = aligned_alloc(64, 2 * (size_t)QPS_NULL_BF_SIZE);
	if (!dev->bf_reg) {
		dev_free(dev);
		return -ENOMEM;
	}
	memset(dev->bf_reg, 0, 2 * (size_t)QPS_NULL_BF_SIZE);
	memcpy(dev->mac, null_mac, sizeof(dev->mac));
	dev->addr = attr && attr->addr_set ? attr->addr.s_addr :
		    htonl(NULL_ADDR_DEFAULT);
	memcpy(dev->name, "null", sizeof("null"));
	qps_null_rx_template(dev);
	qps_null_rx_update_locked(dev);	/* not shared yet */
	*dev_out = &dev->base;
	return 0;
}

static int null_close(struct qps_dev *d)
{
	struct qps_null_dev *dev = qps_null_dev(d);
	unsigned int i;

	for (i = 0; i < QPS_NULL_MAX_FLOWS; i++)
		if (dev->flow[i])
			qps_null_destroy_flow(&dev->flow[i]->base);
	for (i = 0; i < QPS_NULL_MAX_QP; i++)
		if (dev->qp[i])
			qps_null_destroy_qp(&dev->qp[i]->base);
	dev_free(dev);
	return 0;
}

static int null_query(struct qps_dev *d, struct qps_dev_info *info)
{
	struct qps_null_dev *dev = qps_null_dev(d);

	memset(info, 0, sizeof(*info));
	memcpy(info->name, dev->name, sizeof(dev->name));
	memcpy(info->mac, dev->mac, 6);
	info->addr.s_addr = dev->addr;
	info->mtu = QPS_NULL_MTU;
	info->max_qp_wr = QPS_NULL_MAX_WR;
	info->max_cqe = QPS_NULL_MAX_CQE;
	/* What a BlueFlame-sized stride holds (as mlx4): the first chunk
	 * loses the ctrl segment, every chunk an inline header. */
	info->max_inline = QPS_NULL_WQEBB - 16 - 4 +
		((1u << QPS_NULL_WQE_SHIFT) / QPS_NULL_WQEBB - 1) *
		(QPS_NULL_WQEBB - 4);
	info->caps = QPS_DEV_CAP_MLX4_SQ | QPS_DEV_CAP_FLOW;
	/* Nothing leaves, so nothing is summed on send; what it generates
	 * has right checksums and says so, as a NIC that checked them. */
	if (!dev->cfg.csum_off)
		info->caps |= QPS_DEV_CAP_CSUM;
	return 0;
}

static void add_stats(struct qps_null_qp_stats *sum,
		      const struct qps_null_qp_stats *s)
{
	sum->wqes += qps_null_read(&s->wqes);
	sum->doorbells += qps_null_read(&s->doorbells);
	sum->bf_writes += qps_null_read(&s->bf_writes);
	sum->tx_cqes += qps_null_read(&s->tx_cqes);
	sum->tx_drops += qps_null_read(&s->tx_drops);
	sum->bad_writes += qps_null_read(&s->bad_writes);
	sum->rx_cqes += qps_null_read(&s->rx_cqes);
	sum->rx_no_buf += qps_null_read(&s->rx_no_buf);
}

int qps_null_counters_all(struct qps_dev *d, struct qps_null_counters *out)
{
	struct qps_null_dev *dev = qps_null_dev(d);
	struct qps_null_qp_stats s;
	unsigned int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&dev->lock);
	s = dev->retired;
	for (i = 0; i < QPS_NULL_MAX_QP; i++) {
		if (!dev->qp[i])
			continue;
		add_stats(&s, &dev->qp[i]->st);
		out->tx_cq_overrun += qps_null_read(
			&qps_null_cq(dev->qp[i]->base.send_cq)->overruns);
	}
	pthread_mutex_unlock(&dev->lock);
	out->dev.wqes = s.wqes;
	out->dev.doorbells = s.doorbells;
	out->dev.bf_writes = s.bf_writes;
	out->dev.tx_cqes = s.tx_cqes;
	out->dev.tx_drops = s.tx_drops;
	out->dev.rx_cqes = s.rx_cqes;
	out->dev.rx_no_buf = s.rx_no_buf;
	out->dev.rx_no_rule = qps_null_read(&dev->rx_no_rule);
	out->dev.rx_drops = qps_null_read(&dev->rx_drops);
	out->bad_writes = s.bad_writes;
	return 0;
}

static int null_counters(struct qps_dev *d, struct qps_dev_counters *out)
{
	struct qps_null_counters c;
	int ret = qps_null_counters_all(d, &c);

	if (!ret)
		*out = c.dev;
	return ret;
}

static int null_reg_mr(struct qps_dev *d, void *addr, size_t len,
		       struct qps_mr **mr_out)
{
	return qps_sw_mr_reg(&qps_null_dev(d)->mrs, d, addr, len, mr_out);
}

static int null_dereg_mr(struct qps_mr *m)
{
	return qps_sw_mr_dereg(&qps_null_dev(m->dev)->mrs, m);
}

static int null_resolve(struct qps_dev *d, struct in_addr dst,
			uint8_t mac_out[6])
{
	(void)d;
	if (!dst.s_addr)
		return -EHOSTUNREACH;
	memcpy(mac_out, null_peer_mac, 6);
	return 0;
}

const struct qps_provider_ops qps_null_ops = {
	.size = sizeof(struct qps_provider_ops),
	.name = "null",
	.open = null_open,
	.close = null_close,
	.query = null_query,
	.counters = null_counters,
	.reg_mr = null_reg_mr,
	.dereg_mr = null_dereg_mr,
	.create_cq = qps_null_create_cq,
	.destroy_cq = qps_null_destroy_cq,
	.poll_cq = qps_null_poll_cq,
	.create_qp = qps_null_create_qp,
	.destroy_qp = qps_null_destroy_qp,
	.post_send = qps_null_post_send,
	.post_recv = qps_null_post_recv,
	.mlx4_sq = qps_null_mlx4_sq,
	.create_flow = qps_null_create_flow,
	.destroy_flow = qps_null_destroy_flow,
	.mcast_attach = qps_null_mcast_attach,
	.mcast_detach = qps_null_mcast_detach,
	.resolve = null_resolve,
};
