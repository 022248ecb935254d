// SPDX-License-Identifier: MIT
/*
 * Device handle: open (attach a wire, take a port), close, query,
 * counters, memory registration and the ops table.
 */
#include "emu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EMU_OPEN_TRIES 8

static const char *wire_name(const struct qps_dev_attr *attr)
{
	const char *s;

	if (attr && attr->dev && *attr->dev)
		return attr->dev;
	s = getenv("QPS_DEV");
	return s && *s ? s : "qps0";
}

/* Cost model from the environment: unset = 0 (off); malformed is an
 * error rather than silently off. */
static int env_cost(const char *name, uint32_t *out)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	*out = 0;
	if (!s || !*s)
		return 0;
	v = strtoul(s, &end, 10);
	if (*end || v > QPS_EMU_COST_MAX_NS)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static void dev_free(struct qps_emu_dev *dev)
{
	pthread_spin_destroy(&dev->bf.lock);
	free(dev->bf_reg);
	pthread_mutex_destroy(&dev->lock);
	qps_sw_mr_fini(&dev->mrs);
	free(dev);
}

static int emu_open(const struct qps_dev_attr *attr, struct qps_dev **dev_out)
{
	struct qps_emu_dev *dev;
	int tries, r = -EAGAIN;

	if (!dev_out)
		return -EINVAL;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	if (env_cost("QPS_EMU_DB_NS", &dev->cost_db_ns) ||
	    env_cost("QPS_EMU_BF_NS", &dev->cost_bf_ns)) {
		free(dev);
		return -EINVAL;
	}
	dev->base.ops = &qps_emu_ops;
	dev->evfd = -1;
	dev->pid = (int32_t)getpid();
	pthread_mutex_init(&dev->lock, NULL);
	pthread_spin_init(&dev->bf.lock, PTHREAD_PROCESS_PRIVATE);
	qps_sw_mr_init(&dev->mrs, QPS_EMU_MAX_MR);
	dev->bf_reg = aligned_alloc(64, 2 * (size_t)QPS_EMU_BF_SIZE);
	if (!dev->bf_reg) {
		dev_free(dev);
		return -ENOMEM;
	}
	memset(dev->bf_reg, 0, 2 * (size_t)QPS_EMU_BF_SIZE);
	for (tries = 0; tries < EMU_OPEN_TRIES && r == -EAGAIN; tries++) {
		r = qps_emu_wire_attach(wire_name(attr), &dev->wire);
		if (r)
			break;
		r = qps_emu_port_attach(dev, attr);
		if (r) {
			/* -EAGAIN: the last port left and unlinked the name
			 * while we were attaching; start over. */
			qps_emu_wire_detach(&dev->wire);
			if (dev->evfd >= 0)
				close(dev->evfd);
			dev->evfd = -1;
		}
	}
	if (r) {
		dev_free(dev);
		return r;
	}
	/* This build's sizes, not the header's: a peer can rewrite it. */
	qps_emu_heap_init(&dev->pool_heap, QPS_EMU_POOL_SIZE);
	qps_emu_heap_init(&dev->qarea_heap, QPS_EMU_QAREA_SIZE);
	*dev_out = &dev->base;
	return 0;
}

bool qps_emu_owner(const struct qps_emu_dev *dev)
{
	return dev->pid == (int32_t)getpid();
}

static int emu_close(struct qps_dev *d)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	unsigned int i;

	for (i = 0; i < QPS_EMU_MAX_FLOWS; i++)
		if (dev->flow[i])
			qps_emu_destroy_flow(&dev->flow[i]->base);
	for (i = 0; i < QPS_EMU_MAX_QP; i++)
		if (dev->qp[i])
			qps_emu_destroy_qp(&dev->qp[i]->base);
	for (i = 0; i < QPS_EMU_MAX_CQ; i++)
		if (dev->cq[i])
			qps_emu_destroy_cq(&dev->cq[i]->base);
	qps_emu_port_detach(dev);
	if (dev->evfd >= 0)
		close(dev->evfd);
	qps_emu_wire_detach(&dev->wire);
	dev_free(dev);
	return 0;
}

static int emu_query(struct qps_dev *d, struct qps_dev_info *info)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);

	/* The wire name is NUL-terminated and fits whole. */
	_Static_assert(sizeof(info->name) >= sizeof(dev->wire.name),
		       "qps_dev_info.name cannot hold a wire name");
	memset(info, 0, sizeof(*info));
	memcpy(info->name, dev->wire.name, sizeof(dev->wire.name));
	qps_emu_port_mac(dev->port, info->mac);
	info->addr.s_addr = dev->sp->addr;
	info->mtu = dev->mtu;
	info->max_qp_wr = QPS_EMU_MAX_WR;
	info->max_cqe = QPS_EMU_MAX_CQE;
	/* What the default, BlueFlame-sized stride holds. */
	info->max_inline = QPS_EMU_WQEBB - 16 - 4 +
		((1u << QPS_EMU_WQE_SHIFT) / QPS_EMU_WQEBB - 1) *
		(QPS_EMU_WQEBB - 4);
	info->caps = QPS_DEV_CAP_MLX4_SQ | QPS_DEV_CAP_FLOW | QPS_DEV_CAP_UD |
		     QPS_DEV_CAP_QP_ERR | QPS_DEV_CAP_MC_LOOP |
		     QPS_DEV_CAP_CSUM | QPS_DEV_CAP_MC_GROUP_RULE;
	/* What emu_ud_tx.c lets through: the port's RoCE path MTU. */
	info->ud_mtu = qps_emu_ib_mtu(dev->mtu);
	info->clock_hz = QPS_EMU_CLOCK_HZ;
	info->clock_mask = QPS_EMU_CLOCK_MASK;
	return 0;
}

static void add_qp_stats(struct qps_emu_qp_stats *sum,
			 const struct qps_emu_qp_stats *s)
{
	sum->wqes += qps_emu_read(&s->wqes);
	sum->doorbells += qps_emu_read(&s->doorbells);
	sum->bf_writes += qps_emu_read(&s->bf_writes);
	sum->tx_cqes += qps_emu_read(&s->tx_cqes);
	sum->tx_drops += qps_emu_read(&s->tx_drops);
	sum->tx_no_dest += qps_emu_read(&s->tx_no_dest);
	sum->malformed += qps_emu_read(&s->malformed);
	sum->tx_cq_overrun += qps_emu_read(&s->tx_cq_overrun);
	sum->bf_bad += qps_emu_read(&s->bf_bad);
	sum->db_bad += qps_emu_read(&s->db_bad);
	sum->flushed += qps_emu_read(&s->flushed);
}

int qps_emu_counters_all(struct qps_dev *d, struct qps_emu_counters *out)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	const struct qps_emu_shm_stats *st = &dev->sp->st;
	struct qps_emu_qp_stats s;
	unsigned int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&dev->lock);
	s = dev->retired;
	for (i = 0; i < QPS_EMU_MAX_QP; i++)
		if (dev->qp[i])
			add_qp_stats(&s, &dev->qp[i]->st);
	pthread_mutex_unlock(&dev->lock);
	out->dev.wqes = s.wqes;
	out->dev.doorbells = s.doorbells;
	out->dev.bf_writes = s.bf_writes;
	out->dev.tx_cqes = s.tx_cqes;
	out->dev.tx_drops = s.tx_drops;
	out->dev.rx_cqes = qps_emu_read(&st->rx_cqes);
	out->dev.rx_drops = qps_emu_read(&st->rx_drops);
	out->dev.rx_no_rule = qps_emu_read(&st->rx_no_rule);
	out->dev.rx_no_buf = qps_emu_read(&st->rx_no_buf);
	out->dev.rx_cq_overrun = qps_emu_read(&st->rx_cq_overrun);
	out->tx_no_dest = s.tx_no_dest;
	out->malformed = s.malformed;
	out->tx_cq_overrun = s.tx_cq_overrun;
	out->bf_bad = s.bf_bad;
	out->db_bad = s.db_bad + qps_emu_read(&dev->db_bad);
	out->rx_frames = qps_emu_read(&st->rx_frames);
	out->rx_len_err = qps_emu_read(&st->rx_len_err);
	out->rx_corrupt = qps_emu_read(&st->rx_corrupt);
	out->cqe_corrupt = qps_emu_read(&dev->cqe_corrupt);
	out->lock_recovered = qps_emu_read(&st->lock_recovered);
	out->flushed = s.flushed;
	out->rx_qp_state = qps_emu_read(&st->rx_qp_state);
	out->rx_roce = qps_emu_read(&st->rx_roce);
	out->rx_roce_bad = qps_emu_read(&st->rx_roce_bad);
	out->rx_icrc_bad = qps_emu_read(&st->rx_icrc_bad);
	out->rx_bth_bad = qps_emu_read(&st->rx_bth_bad);
	out->rx_qpn_bad = qps_emu_read(&st->rx_qpn_bad);
	out->rx_qkey_bad = qps_emu_read(&st->rx_qkey_bad);
	out->rx_mcg_none = qps_emu_read(&st->rx_mcg_none);
	return 0;
}

int qps_emu_qp_counters(struct qps_qp *q, struct qps_emu_qp_counters *out)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	struct qps_emu_dev *dev = qps_emu_dev(q->dev);

	memset(out, 0, sizeof(*out));
	add_qp_stats(&out->tx, &qp->st);
	if (qp->has_rq) {
		const struct qps_emu_shm_rq *srq = &dev->sp->rq[qp->rq_slot];

		out->rx_cqes = qps_emu_read(&srq->cqes);
		out->rx_no_buf = qps_emu_read(&srq->no_buf);
	}
	out->rx_flushed = qps_emu_read(&qp->rq_flushed);
	return 0;
}

static int emu_counters(struct qps_dev *d, struct qps_dev_counters *out)
{
	struct qps_emu_counters c;
	int r = qps_emu_counters_all(d, &c);

	if (!r)
		*out = c.dev;
	return r;
}

static int emu_reg_mr(struct qps_dev *d, void *addr, size_t len,
		      struct qps_mr **mr_out)
{
	return qps_sw_mr_reg(&qps_emu_dev(d)->mrs, d, addr, len, mr_out);
}

static int emu_dereg_mr(struct qps_mr *m)
{
	return qps_sw_mr_dereg(&qps_emu_dev(m->dev)->mrs, m);
}

int qps_emu_mr_lookup(struct qps_emu_dev *dev, uint32_t lkey, uintptr_t *addr,
		      size_t *len)
{
	return qps_sw_mr_lookup(&dev->mrs, lkey, addr, len);
}

int qps_emu_inject_flow_err(struct qps_dev *d, int neg_errno)
{
	if (neg_errno > 0)
		return -EINVAL;
	__atomic_store_n(&qps_emu_dev(d)->flow_err, neg_errno,
			 __ATOMIC_RELAXED);
	return 0;
}

void qps_emu_test_set_tap(struct qps_dev *d,
			  void (*fn)(void *arg, const uint8_t *frame,
				     uint32_t len),
			  void *arg)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);

	dev->tap_arg = arg;
	dev->tap = fn;
}

unsigned int qps_emu_test_port(struct qps_dev *d)
{
	return qps_emu_dev(d)->port;
}

const struct qps_provider_ops qps_emu_ops = {
	.size = sizeof(struct qps_provider_ops),
	.name = "emu",
	.open = emu_open,
	.close = emu_close,
	.query = emu_query,
	.counters = emu_counters,
	.alloc_buf = qps_emu_alloc_buf,
	.free_buf = qps_emu_free_buf,
	.reg_mr = emu_reg_mr,
	.dereg_mr = emu_dereg_mr,
	.create_cq = qps_emu_create_cq,
	.destroy_cq = qps_emu_destroy_cq,
	.poll_cq = qps_emu_poll_cq,
	.req_notify_cq = qps_emu_req_notify_cq,
	.get_event_fd = qps_emu_get_event_fd,
	.ack_events = qps_emu_ack_events,
	.create_qp = qps_emu_create_qp,
	.destroy_qp = qps_emu_destroy_qp,
	.post_send = qps_emu_post_send,
	.post_recv = qps_emu_post_recv,
	.mlx4_sq = qps_emu_mlx4_sq,
	.create_flow = qps_emu_create_flow,
	.destroy_flow = qps_emu_destroy_flow,
	.mcast_attach = qps_emu_mcast_attach,
	.mcast_detach = qps_emu_mcast_detach,
	.resolve = qps_emu_resolve,
	.route_gen = qps_emu_route_gen,
	.modify_qp = qps_emu_modify_qp,
	.query_gid = qps_emu_query_gid,
	.create_ah = qps_emu_create_ah,
	.destroy_ah = qps_emu_destroy_ah,
	.attach_mcast = qps_emu_attach_mcast,
	.detach_mcast = qps_emu_detach_mcast,
	.get_cq_event_fd = qps_emu_get_cq_event_fd,
	.poll_cq_ts = qps_emu_poll_cq_ts,
	.read_clock = qps_emu_read_clock,
};
