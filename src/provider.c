// SPDX-License-Identifier: MIT
/*
 * Provider registry. Each in-tree provider's table is copied once into a
 * filled table in which every op the provider left NULL, or that lies
 * beyond the @size it was built with, is a stub, so dispatch never checks
 * for NULL and a provider built against an older, shorter table keeps
 * working when ops are appended.
 */
#include "provider.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <qpsock/qpsock.h>

/* A provider's name is reported whole in struct qps_ctx_info. */
#define QPS_PROVIDER_NAME_MAX sizeof(((struct qps_ctx_info *)0)->provider)

/* Every field after @name is an op of pointer size; a new op must get a
 * stub in qps_provider_fill, and this count must change with it. */
#define QPS_PROVIDER_NUM_OPS 37
_Static_assert(sizeof(struct qps_provider_ops) ==
	       offsetof(struct qps_provider_ops, open) +
	       QPS_PROVIDER_NUM_OPS * sizeof(void (*)(void)),
	       "struct qps_provider_ops changed: update the stubs");

static int stub_open(const struct qps_dev_attr *attr, struct qps_dev **dev_out)
{
	(void)attr;
	(void)dev_out;
	return -EOPNOTSUPP;
}

static int stub_dev(struct qps_dev *dev)
{
	(void)dev;
	return -EOPNOTSUPP;
}

static int stub_query(struct qps_dev *dev, struct qps_dev_info *info)
{
	(void)dev;
	(void)info;
	return -EOPNOTSUPP;
}

static int stub_counters(struct qps_dev *dev, struct qps_dev_counters *out)
{
	(void)dev;
	(void)out;
	return -EOPNOTSUPP;
}

static int stub_alloc_buf(struct qps_dev *dev, size_t len, void **addr_out)
{
	(void)dev;
	(void)len;
	(void)addr_out;
	return -EOPNOTSUPP;
}

static int stub_free_buf(struct qps_dev *dev, void *addr, size_t len)
{
	(void)dev;
	(void)addr;
	(void)len;
	return -EOPNOTSUPP;
}

static int stub_reg_mr(struct qps_dev *dev, void *addr, size_t len,
		       struct qps_mr **mr_out)
{
	(void)dev;
	(void)addr;
	(void)len;
	(void)mr_out;
	return -EOPNOTSUPP;
}

static int stub_dereg_mr(struct qps_mr *mr)
{
	(void)mr;
	return -EOPNOTSUPP;
}

static int stub_create_cq(struct qps_dev *dev, int cqe, struct qps_cq **cq_out)
{
	(void)dev;
	(void)cqe;
	(void)cq_out;
	return -EOPNOTSUPP;
}

static int stub_cq(struct qps_cq *cq)
{
	(void)cq;
	return -EOPNOTSUPP;
}

static int stub_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc)
{
	(void)cq;
	(void)num;
	(void)wc;
	return -EOPNOTSUPP;
}

static int stub_create_qp(struct qps_dev *dev,
			  const struct qps_qp_init_attr *attr,
			  struct qps_qp **qp_out)
{
	(void)dev;
	(void)attr;
	(void)qp_out;
	return -EOPNOTSUPP;
}

static int stub_destroy_qp(struct qps_qp *qp)
{
	(void)qp;
	return -EOPNOTSUPP;
}

static int stub_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr)
{
	(void)qp;
	if (bad_wr)
		*bad_wr = wr;
	return -EOPNOTSUPP;
}

static int stub_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	(void)qp;
	if (bad_wr)
		*bad_wr = wr;
	return -EOPNOTSUPP;
}

static int stub_mlx4_sq(struct qps_qp *qp, struct qps_mlx4_sq *out)
{
	(void)qp;
	(void)out;
	return -EOPNOTSUPP;
}

static int stub_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			    struct qps_flow **flow_out)
{
	(void)qp;
	(void)attr;
	(void)flow_out;
	return -EOPNOTSUPP;
}

static int stub_destroy_flow(struct qps_flow *flow)
{
	(void)flow;
	return -EOPNOTSUPP;
}

static int stub_mcast(struct qps_dev *dev, struct in_addr group,
		      struct in_addr source)
{
	(void)dev;
	(void)group;
	(void)source;
	return -EOPNOTSUPP;
}

static int stub_resolve(struct qps_dev *dev, struct in_addr dst,
			uint8_t mac_out[6])
{
	(void)dev;
	(void)dst;
	(void)mac_out;
	return -EOPNOTSUPP;
}

/* A provider without route changes never invalidates a destination. */
static uint64_t stub_route_gen(struct qps_dev *dev)
{
	(void)dev;
	return 0;
}

bool qps_provider_routes_static(const struct qps_provider_ops *ops)
{
	return ops->route_gen == stub_route_gen;
}

static int stub_modify_qp(struct qps_qp *qp, struct ibv_qp_attr *attr,
			  int attr_mask)
{
	(void)qp;
	(void)attr;
	(void)attr_mask;
	return -EOPNOTSUPP;
}

static int stub_query_gid(struct qps_dev *dev, int index, union ibv_gid *gid)
{
	(void)dev;
	(void)index;
	(void)gid;
	return -EOPNOTSUPP;
}

static int stub_create_ah(struct qps_dev *dev, struct ibv_ah_attr *attr,
			  struct qps_ah **ah_out)
{
	(void)dev;
	(void)attr;
	(void)ah_out;
	return -EOPNOTSUPP;
}

static int stub_destroy_ah(struct qps_ah *ah)
{
	(void)ah;
	return -EOPNOTSUPP;
}

static int stub_qp_mcast(struct qps_qp *qp, const union ibv_gid *gid,
			 uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return -EOPNOTSUPP;
}

/* Not the host's device: the core's port table is the only one. */
static int stub_hold_port(struct qps_dev *dev, int fd, struct in_addr addr,
			  uint16_t *port, unsigned int flags)
{
	(void)dev;
	(void)fd;
	(void)addr;
	(void)port;
	(void)flags;
	return -EOPNOTSUPP;
}

static void stub_release_port(struct qps_dev *dev, int fd)
{
	(void)dev;
	(void)fd;
}

static int stub_poll_cq_ts(struct qps_cq *cq, int num, struct ibv_wc *wc,
			   struct qps_wc_ts *ts)
{
	(void)cq;
	(void)num;
	(void)wc;
	(void)ts;
	return -EOPNOTSUPP;
}

static int stub_read_clock(struct qps_dev *dev, uint64_t *cycles)
{
	(void)dev;
	(void)cycles;
	return -EOPNOTSUPP;
}

int qps_provider_fill(const struct qps_provider_ops *raw,
		      struct qps_provider_ops *out)
{
	size_t n;

	if (!raw || !out)
		return -EINVAL;
	if (raw->size < offsetof(struct qps_provider_ops, open) || !raw->name ||
	    strnlen(raw->name, QPS_PROVIDER_NAME_MAX) == QPS_PROVIDER_NAME_MAX)
		return -EINVAL;

	n = raw->size < sizeof(*out) ? raw->size : sizeof(*out);
	memset(out, 0, sizeof(*out));
	memcpy(out, raw, n);
	out->size = sizeof(*out);

	/* An op counts only when it lies entirely within raw->size: a size
	 * that cuts a pointer in half leaves that op to its stub. */
#define QPS_FILL(op, stub)                                                   \
	do {                                                                 \
		if (offsetof(struct qps_provider_ops, op) +                  \
			    sizeof(out->op) > n || !out->op)                 \
			out->op = (stub);                                    \
	} while (0)
	QPS_FILL(open, stub_open);
	QPS_FILL(close, stub_dev);
	QPS_FILL(query, stub_query);
	QPS_FILL(counters, stub_counters);
	QPS_FILL(alloc_buf, stub_alloc_buf);
	QPS_FILL(free_buf, stub_free_buf);
	QPS_FILL(reg_mr, stub_reg_mr);
	QPS_FILL(dereg_mr, stub_dereg_mr);
	QPS_FILL(create_cq, stub_create_cq);
	QPS_FILL(destroy_cq, stub_cq);
	QPS_FILL(poll_cq, stub_poll_cq);
	QPS_FILL(req_notify_cq, stub_cq);
	QPS_FILL(get_event_fd, stub_dev);
	QPS_FILL(ack_events, stub_dev);
	QPS_FILL(create_qp, stub_create_qp);
	QPS_FILL(destroy_qp, stub_destroy_qp);
	QPS_FILL(post_send, stub_post_send);
	QPS_FILL(post_recv, stub_post_recv);
	QPS_FILL(mlx4_sq, stub_mlx4_sq);
	QPS_FILL(create_flow, stub_create_flow);
	QPS_FILL(destroy_flow, stub_destroy_flow);
	QPS_FILL(mcast_attach, stub_mcast);
	QPS_FILL(mcast_detach, stub_mcast);
	QPS_FILL(resolve, stub_resolve);
	QPS_FILL(route_gen, stub_route_gen);
	QPS_FILL(modify_qp, stub_modify_qp);
	QPS_FILL(query_gid, stub_query_gid);
	QPS_FILL(create_ah, stub_create_ah);
	QPS_FILL(destroy_ah, stub_destroy_ah);
	QPS_FILL(attach_mcast, stub_qp_mcast);
	QPS_FILL(detach_mcast, stub_qp_mcast);
	QPS_FILL(hold_port, stub_hold_port);
	QPS_FILL(get_cq_event_fd, stub_cq);
	QPS_FILL(poll_cq_ts, stub_poll_cq_ts);
	QPS_FILL(read_clock, stub_read_clock);
	QPS_FILL(resolve_nowait, stub_resolve);
	QPS_FILL(release_port, stub_release_port);
#undef QPS_FILL
	return 0;
}

static const struct qps_provider_ops *const qps_providers[] = {
	&qps_emu_ops,
#ifdef QPS_HAVE_VERBS
	&qps_verbs_ops,
#endif
#ifdef QPS_HAVE_PACKET
	&qps_packet_ops,
#endif
#ifdef QPS_HAVE_XDP
	&qps_xdp_ops,
#endif
#ifdef QPS_HAVE_NULL
	&qps_null_ops,
#endif
};

#define QPS_NUM_PROVIDERS (sizeof(qps_providers) / sizeof(qps_providers[0]))

static struct qps_provider_ops qps_filled[QPS_NUM_PROVIDERS];
static int qps_filled_err[QPS_NUM_PROVIDERS];
static pthread_once_t qps_filled_once = PTHREAD_ONCE_INIT;

static void fill_all(void)
{
	size_t i;

	for (i = 0; i < QPS_NUM_PROVIDERS; i++)
		qps_filled_err[i] = qps_provider_fill(qps_providers[i],
						      &qps_filled[i]);
}

int qps_provider_find(const char *name, const struct qps_provider_ops **ops)
{
	size_t i;

	if (!ops)
		return -EINVAL;
	if (!name)
		return -ENOENT;
	pthread_once(&qps_filled_once, fill_all);
	for (i = 0; i < QPS_NUM_PROVIDERS; i++) {
		/* A table that fails to fill is a build bug; hide it rather
		 * than hand out NULL ops. */
		if (qps_filled_err[i] || strcmp(qps_filled[i].name, name) != 0)
			continue;
		*ops = &qps_filled[i];
		return 0;
	}
	return -ENOENT;
}
