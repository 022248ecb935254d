// SPDX-License-Identifier: MIT
/*
 * The device: list, open/close (one emu port per context), queries, GIDs,
 * P_Keys, async events.
 */
#define _GNU_SOURCE	/* pipe2 */
#include "ibvemu.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

static struct ibv_device qps_ibvemu_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = QPS_IBVEMU_DEV_NAME,
	.dev_name = "uverbs0",
	.dev_path = "/sys/class/infiniband_verbs/uverbs0",
	.ibdev_path = "/sys/class/infiniband/" QPS_IBVEMU_DEV_NAME,
};

/* Node GUID: the EUI-64 of emu's MAC prefix 02:51:50, port bits zero. */
#define QPS_IBVEMU_NODE_GUID 0x005150fffe000000ULL

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(2, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &qps_ibvemu_device;
	if (num_devices)
		*num_devices = 1;
	return list;
}
QPS_IBVEMU_DEFAULT(get_device_list);

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}
QPS_IBVEMU_DEFAULT(free_device_list);

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}
QPS_IBVEMU_DEFAULT(get_device_name);

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	(void)device;
	return htobe64(QPS_IBVEMU_NODE_GUID);
}
QPS_IBVEMU_DEFAULT(get_device_guid);

int ibv_get_device_index(struct ibv_device *device)
{
	return device == &qps_ibvemu_device ? 0 : -1;
}

bool qps_ibvemu_is_ours(struct ibv_context *ctx)
{
	return ctx && ctx->device == &qps_ibvemu_device &&
	       ctx->abi_compat == __VERBS_ABI_IS_EXTENDED;
}

static int query_device_ex(struct ibv_context *ctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size);

static int open_netdev(struct qps_ibvemu_ctx *c)
{
	const char *nd = getenv("QPS_IBV_EMU_NETDEV");
	int r;

	if (!nd || !*nd)
		return 0;
	c->ifindex = (int)if_nametoindex(nd);
	if (!c->ifindex) {
		fprintf(stderr, "ibvemu: QPS_IBV_EMU_NETDEV=%s: no such "
			"netdev\n", nd);
		return -ENODEV;
	}
	r = qps_ibvemu_neigh(c->ifindex, c->info.addr, c->info.mac, true);
	if (r < 0) {
		fprintf(stderr, "ibvemu: neighbour %s on %s: %s\n",
			inet_ntoa(c->info.addr), nd, strerror(-r));
		return r;
	}
	c->neigh = true;
	return 0;
}

static int open_ctx(struct qps_ibvemu_ctx *c)
{
	struct qps_dev_attr attr = { .dev = getenv("QPS_EMU_WIRE") };
	const char *ip = getenv("QPS_IBV_EMU_ADDR");
	int fds[2];
	int r;

	/* The port's address, as "ip addr add" on a real RoCE netdev
	 * (tests/t_util.c sets it per context on verbs). */
	if (ip && *ip) {
		if (inet_pton(AF_INET, ip, &attr.addr) != 1)
			return -EINVAL;
		attr.addr_set = true;
	}
	r = qps_provider_find("emu", &c->ops);
	if (r < 0)
		return r;
	r = c->ops->open(&attr, &c->dev);
	if (r < 0)
		return r;
	/* As the core does after open: the device dispatches through the
	 * filled table. */
	c->dev->ops = c->ops;
	r = c->ops->query(c->dev, &c->info);
	if (r < 0)
		goto err_close;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		r = -errno;
		goto err_close;
	}
	/* Raising an event never blocks; reading it does unless the
	 * application sets O_NONBLOCK, as on a real async fd. */
	if (fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		goto err_close;
	}
	c->vctx.context.async_fd = fds[0];
	c->async_wr = fds[1];
	r = open_netdev(c);
	if (r < 0)
		goto err_fds;
	return 0;

err_fds:
	close(fds[0]);
	close(fds[1]);
err_close:
	c->ops->close(c->dev);
	return r;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct qps_ibvemu_ctx *c;
	struct ibv_context *ctx;
	int r;

	if (device != &qps_ibvemu_device) {
		errno = ENODEV;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	r = open_ctx(c);
	if (r < 0) {
		free(c);
		errno = -r;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->async_lock, NULL);

	ctx = &c->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = -1;
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = qps_ibvemu_poll_cq;
	ctx->ops.req_notify_cq = qps_ibvemu_req_notify_cq;
	ctx->ops.post_send = qps_ibvemu_post_send;
	ctx->ops.post_recv = qps_ibvemu_post_recv;

	/* libibverbs' inline wrappers find these through verbs_get_ctx_op;
	 * every member left NULL makes its wrapper fail with EOPNOTSUPP. */
	c->vctx.sz = sizeof(c->vctx);
	c->vctx.query_port = qps_ibvemu_query_port_ex;
	c->vctx.query_device_ex = query_device_ex;
	c->vctx.ibv_create_flow = qps_ibvemu_create_flow;
	c->vctx.ibv_destroy_flow = qps_ibvemu_destroy_flow;
	c->vctx.create_qp_ex = qps_ibvemu_create_qp_ex;
	c->vctx.create_cq_ex = qps_ibvemu_create_cq_ex;
	c->vctx.query_rt_values = qps_ibvemu_query_rt_values;
	return ctx;
}
QPS_IBVEMU_DEFAULT(open_device);

int ibv_close_device(struct ibv_context *ctx)
{
	struct qps_ibvemu_ctx *c;

	if (!qps_ibvemu_is_ours(ctx))
		return EINVAL;
	c = qps_ibvemu_ctx(ctx);
	if (c->neigh)
		qps_ibvemu_neigh(c->ifindex, c->info.addr, c->info.mac, false);
	/* emu frees what the application left open with the port. */
	c->ops->close(c->dev);
	while (c->ahs) {
		struct qps_ibvemu_ah *a = c->ahs;

		c->ahs = a->next;
		free(a);
	}
	close(ctx->async_fd);
	close(c->async_wr);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->async_lock);
	pthread_mutex_destroy(&ctx->mutex);
	free(c);
	return 0;
}
QPS_IBVEMU_DEFAULT(close_device);

/* --- queries --------------------------------------------------------- */

static void fill_device_attr(struct qps_ibvemu_ctx *c,
			     struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "qpsock-emu 0.1");
	a->node_guid = htobe64(QPS_IBVEMU_NODE_GUID);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = UINT32_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = QPS_IBVEMU_VENDOR_ID;
	a->vendor_part_id = QPS_IBVEMU_PART_ID;
	a->hw_ver = 1;
	a->max_qp = QPS_IBVEMU_MAX_QP;
	a->max_qp_wr = (int)c->info.max_qp_wr;
	/* emu offloads raw-packet checksums as ConnectX-3 (docs/emu.md). */
	a->device_cap_flags = IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_RAW_IP_CSUM;
	a->max_sge = 15;
	a->max_cq = 32;
	a->max_cqe = (int)c->info.max_cqe;
	a->max_mr = 256;
	a->max_pd = 1 << 16;
	a->max_ah = 1 << 16;
	a->max_mcast_grp = 64;
	a->max_mcast_qp_attach = 64;
	a->max_total_mcast_qp_attach = 64 * 64;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	if (!qps_ibvemu_is_ours(ctx) || !attr)
		return EINVAL;
	fill_device_attr(qps_ibvemu_ctx(ctx), attr);
	return 0;
}
QPS_IBVEMU_DEFAULT(query_device);

static int query_device_ex(struct ibv_context *ctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;

	if ((input && input->comp_mask) ||
	    attr_size < sizeof(struct ibv_device_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	fill_device_attr(qps_ibvemu_ctx(ctx), &a.orig_attr);
	/* No VLAN stripping; emu's checksum offload. */
	a.raw_packet_caps = IBV_RAW_PACKET_CAP_IP_CSUM;
	/* emu's device clock stamps every CQE (docs/emu.md). */
	a.completion_timestamp_mask = qps_ibvemu_ctx(ctx)->info.clock_mask;
	a.hca_core_clock = qps_ibvemu_ctx(ctx)->info.clock_hz / 1000; /* kHz */
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

/* The largest IB MTU whose RoCE packet fits the netdev MTU. */
static enum ibv_mtu port_mtu(uint32_t l3_mtu)
{
	static const struct { uint32_t bytes; enum ibv_mtu mtu; } t[] = {
		{ 4096, IBV_MTU_4096 }, { 2048, IBV_MTU_2048 },
		{ 1024, IBV_MTU_1024 }, { 512, IBV_MTU_512 },
	};
	/* IPv4 + UDP + BTH + DETH + ICRC of a RoCE v2 UD packet. */
	uint32_t room = l3_mtu > 52 ? l3_mtu - 52 : 0;
	unsigned int i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].bytes <= room)
			return t[i].mtu;
	return IBV_MTU_256;
}

int qps_ibvemu_query_port_ex(struct ibv_context *ctx, uint8_t port,
			     struct ibv_port_attr *attr, size_t len)
{
	struct qps_ibvemu_ctx *c;
	struct ibv_port_attr a;

	if (!qps_ibvemu_is_ours(ctx) || !attr)
		return EINVAL;
	if (port != 1)
		return EINVAL;
	c = qps_ibvemu_ctx(ctx);
	memset(&a, 0, sizeof(a));
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = port_mtu(c->info.mtu);
	a.gid_tbl_len = QPS_GID_TABLE_LEN;
	a.port_cap_flags = IBV_PORT_CM_SUP;
	a.max_msg_sz = 1u << 30;
	a.pkey_tbl_len = 1;
	a.active_width = 2;	/* 4X */
	a.active_speed = 8;	/* 10 Gb/s per lane (FDR10 encoding): 40G */
	a.phys_state = 5;	/* LinkUp */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

/* The exported symbol, for binaries built before the extended query. */
int qps_ibvemu_query_port(struct ibv_context *ctx, uint8_t port,
			  struct _compat_ibv_port_attr *attr)
{
	/* The layout of before 2018 ends with link_layer. */
	return qps_ibvemu_query_port_ex(ctx, port, (struct ibv_port_attr *)attr,
			offsetof(struct ibv_port_attr, link_layer) + 1);
}
QPS_IBVEMU_DEFAULT(query_port);

int qps_ibvemu_gid(struct qps_ibvemu_ctx *c, unsigned int index,
		   union ibv_gid *gid)
{
	const uint8_t *m = c->info.mac;
	int r;

	if (index >= QPS_GID_TABLE_LEN)
		return -EINVAL;
	r = c->ops->query_gid(c->dev, (int)index, gid);
	if (r != -EOPNOTSUPP)
		return r;
	/* emu without UD: the table as provider.h defines it. */
	memset(gid, 0, sizeof(*gid));
	if (index == QPS_GID_ROCE_V1_LL) {
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
		gid->raw[8] = m[0] ^ 2;
		gid->raw[9] = m[1];
		gid->raw[10] = m[2];
		gid->raw[11] = 0xff;
		gid->raw[12] = 0xfe;
		gid->raw[13] = m[3];
		gid->raw[14] = m[4];
		gid->raw[15] = m[5];
	} else {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &c->info.addr, 4);
	}
	return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index,
		  union ibv_gid *gid)
{
	if (!qps_ibvemu_is_ours(ctx) || !gid || port != 1 || index < 0)
		return -1;
	return qps_ibvemu_gid(qps_ibvemu_ctx(ctx), (unsigned int)index, gid) ?
	       -1 : 0;
}
QPS_IBVEMU_DEFAULT(query_gid);

static int gid_entry(struct qps_ibvemu_ctx *c, uint32_t index,
		     struct ibv_gid_entry *e)
{
	int r = qps_ibvemu_gid(c, index, &e->gid);

	if (r < 0)
		return -r;
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = index == QPS_GID_ROCE_V1_LL ? IBV_GID_TYPE_ROCE_V1 :
						    IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = (uint32_t)c->ifindex;
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags,
		      size_t entry_size)
{
	if (!qps_ibvemu_is_ours(ctx) || !entry || flags ||
	    entry_size < sizeof(*entry) || port != 1)
		return EINVAL;
	if (index >= QPS_GID_TABLE_LEN)
		return ENODATA;
	return gid_entry(qps_ibvemu_ctx(ctx), index, entry);
}

ssize_t _ibv_query_gid_table(struct ibv_context *ctx,
			     struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags,
			     size_t entry_size)
{
	uint32_t i;
	int r;

	if (!qps_ibvemu_is_ours(ctx) || !entries || flags ||
	    entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < QPS_GID_TABLE_LEN)
		return -EINVAL;
	for (i = 0; i < QPS_GID_TABLE_LEN; i++) {
		struct ibv_gid_entry *e = (struct ibv_gid_entry *)
			(void *)((char *)entries + i * entry_size);

		r = gid_entry(qps_ibvemu_ctx(ctx), i, e);
		if (r)
			return -r;
	}
	return QPS_GID_TABLE_LEN;
}

int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index,
		   __be16 *pkey)
{
	if (!qps_ibvemu_is_ours(ctx) || !pkey || port != 1 || index != 0)
		return EINVAL;
	*pkey = htobe16(0xffff);
	return 0;
}
QPS_IBVEMU_DEFAULT(query_pkey);

int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	if (!qps_ibvemu_is_ours(ctx) || port != 1 ||
	    (be16toh(pkey) & 0x7fff) != 0x7fff) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* --- async events ------------------------------------------------------ */

void qps_ibvemu_async(struct qps_ibvemu_ctx *c, enum ibv_event_type type,
		      void *obj)
{
	struct ibv_async_event *e;
	char b = 1;

	pthread_mutex_lock(&c->async_lock);
	if (c->async_head - c->async_tail >= QPS_IBVEMU_ASYNC_MAX) {
		c->async_lost++;
		pthread_mutex_unlock(&c->async_lock);
		fprintf(stderr, "ibvemu: async event queue full, %s lost\n",
			ibv_event_type_str(type));
		return;
	}
	e = &c->async[c->async_head++ % QPS_IBVEMU_ASYNC_MAX];
	memset(e, 0, sizeof(*e));
	e->event_type = type;
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		e->element.cq = obj;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		e->element.qp = obj;
		break;
	default:
		e->element.port_num = 1;
		break;
	}
	pthread_mutex_unlock(&c->async_lock);
	/* One byte per queued event, so the fd is readable exactly while
	 * events wait; the ring bounds the pipe's content. */
	if (write(c->async_wr, &b, 1) != 1)
		fprintf(stderr, "ibvemu: async event pipe: %s\n",
			strerror(errno));
}

int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct qps_ibvemu_ctx *c;
	char b;

	if (!qps_ibvemu_is_ours(ctx) || !event) {
		errno = EINVAL;
		return -1;
	}
	c = qps_ibvemu_ctx(ctx);
	/* Blocks unless the application made async_fd non-blocking. */
	if (read(ctx->async_fd, &b, 1) != 1)
		return -1;
	pthread_mutex_lock(&c->async_lock);
	if (c->async_tail == c->async_head) {
		pthread_mutex_unlock(&c->async_lock);
		errno = EAGAIN;
		return -1;
	}
	*event = c->async[c->async_tail++ % QPS_IBVEMU_ASYNC_MAX];
	pthread_mutex_unlock(&c->async_lock);
	return 0;
}
QPS_IBVEMU_DEFAULT(get_async_event);

void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_signal(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		break;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		break;
	}
	default:
		break;
	}
}
QPS_IBVEMU_DEFAULT(ack_async_event);
