// SPDX-License-Identifier: MIT
/*
 * verbs: real rdma-core devices through libibverbs. The ops are thin
 * pass-throughs; the work here is converting libibverbs' conventions
 * (positive errno, NULL + errno) to qpsock's -errno and explaining the
 * setup failures a first run on real hardware usually hits.
 *
 * One port per device (port 1), raw-packet QPs only for now; the mlx4
 * direct path and UD QPs are not implemented yet (their ops are stubs).
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "provider.h"

#define QPS_VERBS_PORT 1
#define QPS_VERBS_HINT \
	"use QPS_PROVIDER=emu (software ConnectX-3) or QPS_PROVIDER=packet " \
	"(AF_PACKET on a netdev)"

struct qps_verbs_dev {
	struct qps_dev base;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct qps_dev_info info;
};

struct qps_verbs_cq {
	struct qps_cq base;
	struct ibv_cq *cq;
};

struct qps_verbs_qp {
	struct qps_qp base;
	struct ibv_qp *qp;
};

struct qps_verbs_mr {
	struct qps_mr base;
	struct ibv_mr *mr;
};

struct qps_verbs_flow {
	struct qps_flow base;
	struct ibv_flow *flow;
};

#define to_vdev(d) ((struct qps_verbs_dev *)(d))
#define to_vcq(c) ((struct qps_verbs_cq *)(c))
#define to_vqp(q) ((struct qps_verbs_qp *)(q))

/* libibverbs reports failure as NULL or -1 with errno; some paths forget
 * to set it, and 0 must not turn a failure into success. */
static int neg_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/* Verbs calls that return a positive errno. */
static int neg_ret(int ret)
{
	return ret > 0 ? -ret : (ret < 0 ? -EIO : 0);
}

/* Read one line of a sysfs file, without the newline; 0 or -errno. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f)
		return neg_errno();
	if (!fgets(buf, (int)len, f))
		ret = ferror(f) ? -EIO : -ENODATA;
	fclose(f);
	if (!ret)
		buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

/*
 * On an Ethernet port the MAC, the IPv4 address and the L3 MTU belong to
 * the netdev behind GID 0, not to the RDMA device. active_mtu would be the
 * netdev MTU rounded down to an IB MTU (1500 -> 1024), hence the netdev's.
 * Best effort: what cannot be found stays as set before.
 */
static void query_netdev(struct qps_verbs_dev *vd,
			 const struct qps_dev_attr *attr)
{
	char path[256], ndev[IF_NAMESIZE + 1], line[64];
	struct ifaddrs *ifa, *it;
	unsigned int m[6];
	int i;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/0",
		 vd->info.name, QPS_VERBS_PORT);
	if (read_line(path, ndev, sizeof(ndev)) || !ndev[0])
		return;

	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ndev);
	if (!read_line(path, line, sizeof(line)) &&
	    sscanf(line, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3],
		   &m[4], &m[5]) == 6) {
		for (i = 0; i < 6; i++)
			vd->info.mac[i] = (uint8_t)m[i];
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", ndev);
	if (!read_line(path, line, sizeof(line)) && atoi(line) > 0)
		vd->info.mtu = (uint32_t)atoi(line);

	if (attr && attr->addr_set)
		return;
	if (getifaddrs(&ifa))
		return;
	for (it = ifa; it; it = it->ifa_next) {
		if (it->ifa_addr && it->ifa_addr->sa_family == AF_INET &&
		    !strcmp(it->ifa_name, ndev)) {
			vd->info.addr =
				((struct sockaddr_in *)it->ifa_addr)->sin_addr;
			break;
		}
	}
	freeifaddrs(ifa);
}

static int qps_verbs_close(struct qps_dev *dev)
{
	struct qps_verbs_dev *vd = to_vdev(dev);
	int ret = 0, r;

	if (vd->chan) {
		r = ibv_destroy_comp_channel(vd->chan);
		if (r && !ret)
			ret = neg_ret(r);
	}
	if (vd->pd) {
		r = ibv_dealloc_pd(vd->pd);
		if (r && !ret)
			ret = neg_ret(r);
	}
	if (vd->ctx) {
		r = ibv_close_device(vd->ctx);
		if (r && !ret)
			ret = neg_errno();
	}
	free(vd);
	return ret;
}

static struct ibv_device *pick_device(struct ibv_device **list, int n,
				      const char *name)
{
	int i;

	if (!name)
		return list[0];
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	return NULL;
}

static int open_device(struct qps_verbs_dev *vd, struct ibv_device *ibdev,
		       const struct qps_dev_attr *attr)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	int ret, flags;

	snprintf(vd->info.name, sizeof(vd->info.name), "%s",
		 ibv_get_device_name(ibdev));
	vd->ctx = ibv_open_device(ibdev);
	if (!vd->ctx) {
		ret = neg_errno();
		fprintf(stderr, "qpsock verbs: cannot open %s: %s\n",
			vd->info.name, strerror(-ret));
		return ret;
	}
	ret = ibv_query_device(vd->ctx, &dattr);
	if (ret)
		return neg_ret(ret);
	ret = ibv_query_port(vd->ctx, QPS_VERBS_PORT, &pattr);
	if (ret)
		return neg_ret(ret);

	vd->info.mtu = pattr.active_mtu ? 128u << pattr.active_mtu : 0;
	vd->info.max_qp_wr = (uint32_t)dattr.max_qp_wr;
	vd->info.max_cqe = (uint32_t)dattr.max_cqe;
	if (dattr.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING)
		vd->info.caps |= QPS_DEV_CAP_FLOW;
	if (attr && attr->addr_set)
		vd->info.addr = attr->addr;
	if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET)
		query_netdev(vd, attr);

	vd->pd = ibv_alloc_pd(vd->ctx);
	if (!vd->pd)
		return neg_errno();
	vd->chan = ibv_create_comp_channel(vd->ctx);
	if (!vd->chan)
		return neg_errno();
	/* ack_events must drain without blocking the progress thread. */
	flags = fcntl(vd->chan->fd, F_GETFL);
	if (flags < 0 || fcntl(vd->chan->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return neg_errno();
	return 0;
}

static int qps_verbs_open(const struct qps_dev_attr *attr,
			  struct qps_dev **dev_out)
{
	const char *name = attr ? attr->dev : NULL;
	struct ibv_device **list;
	struct ibv_device *ibdev;
	struct qps_verbs_dev *vd;
	int n = 0, ret;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr,
			"qpsock verbs: no RDMA device: ibv_get_device_list "
			"failed: %s (the kernel has no InfiniBand/RDMA support "
			"or no rdma driver is loaded); " QPS_VERBS_HINT "\n",
			strerror(errno));
		return -ENODEV;
	}
	if (n <= 0) {
		fprintf(stderr,
			"qpsock verbs: no RDMA device: ibv_get_device_list "
			"found none (no RDMA NIC, or its driver (mlx4_ib, "
			"mlx5_ib, ...) is not loaded); " QPS_VERBS_HINT "\n");
		ibv_free_device_list(list);
		return -ENODEV;
	}
	ibdev = pick_device(list, n, name);
	if (!ibdev) {
		fprintf(stderr,
			"qpsock verbs: no RDMA device named %s (see "
			"ibv_devices)\n", name);
		ibv_free_device_list(list);
		return -ENODEV;
	}

	vd = calloc(1, sizeof(*vd));
	if (!vd) {
		ibv_free_device_list(list);
		return -ENOMEM;
	}
	ret = open_device(vd, ibdev, attr);
	ibv_free_device_list(list);
	if (ret) {
		qps_verbs_close(&vd->base);
		return ret;
	}
	*dev_out = &vd->base;
	return 0;
}

static int qps_verbs_query(struct qps_dev *dev, struct qps_dev_info *info)
{
	*info = to_vdev(dev)->info;
	return 0;
}

static int qps_verbs_reg_mr(struct qps_dev *dev, void *addr, size_t len,
			    struct qps_mr **mr_out)
{
	struct qps_verbs_mr *vm = calloc(1, sizeof(*vm));
	int ret;

	if (!vm)
		return -ENOMEM;
	vm->mr = ibv_reg_mr(to_vdev(dev)->pd, addr, len,
			    IBV_ACCESS_LOCAL_WRITE);
	if (!vm->mr) {
		ret = neg_errno();
		free(vm);
		return ret;
	}
	vm->base.dev = dev;
	vm->base.addr = addr;
	vm->base.length = len;
	vm->base.lkey = vm->mr->lkey;
	*mr_out = &vm->base;
	return 0;
}

static int qps_verbs_dereg_mr(struct qps_mr *mr)
{
	struct qps_verbs_mr *vm = (struct qps_verbs_mr *)mr;
	int ret = ibv_dereg_mr(vm->mr);

	if (ret)
		return neg_ret(ret);
	free(vm);
	return 0;
}

static int qps_verbs_create_cq(struct qps_dev *dev, int cqe,
			       struct qps_cq **cq_out)
{
	struct qps_verbs_dev *vd = to_vdev(dev);
	struct qps_verbs_cq *vc = calloc(1, sizeof(*vc));
	int ret;

	if (!vc)
		return -ENOMEM;
	vc->cq = ibv_create_cq(vd->ctx, cqe, vc, vd->chan, 0);
	if (!vc->cq) {
		ret = neg_errno();
		free(vc);
		return ret;
	}
	vc->base.dev = dev;
	vc->base.cqe = vc->cq->cqe;
	*cq_out = &vc->base;
	return 0;
}

static int qps_verbs_destroy_cq(struct qps_cq *cq)
{
	struct qps_verbs_cq *vc = to_vcq(cq);
	int ret = ibv_destroy_cq(vc->cq);

	if (ret)
		return neg_ret(ret);
	free(vc);
	return 0;
}

static int qps_verbs_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc)
{
	int n = ibv_poll_cq(to_vcq(cq)->cq, num, wc);

	/* A negative return carries no errno: the CQ is broken. */
	return n < 0 ? -EIO : n;
}

static int qps_verbs_req_notify_cq(struct qps_cq *cq)
{
	return neg_ret(ibv_req_notify_cq(to_vcq(cq)->cq, 0));
}

static int qps_verbs_get_event_fd(struct qps_dev *dev)
{
	return to_vdev(dev)->chan->fd;
}

/* Every event is acknowledged at once: ibv_destroy_cq waits for the
 * unacknowledged ones, and the core never needs them later. */
static int qps_verbs_ack_events(struct qps_dev *dev)
{
	struct qps_verbs_dev *vd = to_vdev(dev);
	struct ibv_cq *cq;
	void *cq_ctx;
	int n = 0;

	while (!ibv_get_cq_event(vd->chan, &cq, &cq_ctx)) {
		ibv_ack_cq_events(cq, 1);
		n++;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && !n)
		return neg_errno();
	return n;
}

static int modify_qp(struct ibv_qp *qp, enum ibv_qp_state state, int mask)
{
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = state;
	qa.port_num = QPS_VERBS_PORT;
	return neg_ret(ibv_modify_qp(qp, &qa, IBV_QP_STATE | mask));
}

static int qps_verbs_create_qp(struct qps_dev *dev,
			       const struct qps_qp_init_attr *attr,
			       struct qps_qp **qp_out)
{
	struct qps_verbs_dev *vd = to_vdev(dev);
	struct ibv_qp_init_attr ia;
	struct qps_verbs_qp *vq;
	int ret;

	if (attr->qp_type != IBV_QPT_RAW_PACKET)
		return -EOPNOTSUPP;
	vq = calloc(1, sizeof(*vq));
	if (!vq)
		return -ENOMEM;

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = vq;
	ia.send_cq = to_vcq(attr->send_cq)->cq;
	ia.recv_cq = to_vcq(attr->recv_cq)->cq;
	ia.cap = attr->cap;
	ia.qp_type = attr->qp_type;
	ia.sq_sig_all = attr->sq_sig_all;
	vq->qp = ibv_create_qp(vd->pd, &ia);
	if (!vq->qp) {
		ret = neg_errno();
		if (ret == -EPERM)
			fprintf(stderr,
				"qpsock verbs: creating a raw packet QP on %s "
				"needs CAP_NET_RAW (run as root or setcap "
				"cap_net_raw+ep on the program)\n",
				vd->info.name);
		free(vq);
		return ret;
	}

	/* A raw packet QP has no addressing: port only, then RTR, RTS. */
	ret = modify_qp(vq->qp, IBV_QPS_INIT, IBV_QP_PORT);
	if (!ret)
		ret = modify_qp(vq->qp, IBV_QPS_RTR, 0);
	if (!ret)
		ret = modify_qp(vq->qp, IBV_QPS_RTS, 0);
	if (ret) {
		ibv_destroy_qp(vq->qp);
		free(vq);
		return ret;
	}

	vq->base.dev = dev;
	vq->base.qp_num = vq->qp->qp_num;
	vq->base.qp_type = attr->qp_type;
	vq->base.send_cq = attr->send_cq;
	vq->base.recv_cq = attr->recv_cq;
	vq->base.cap = ia.cap;
	*qp_out = &vq->base;
	return 0;
}

static int qps_verbs_destroy_qp(struct qps_qp *qp)
{
	struct qps_verbs_qp *vq = to_vqp(qp);
	int ret = ibv_destroy_qp(vq->qp);

	if (ret)
		return neg_ret(ret);
	free(vq);
	return 0;
}

static int qps_verbs_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
			       struct ibv_send_wr **bad_wr)
{
	struct ibv_send_wr *bad;

	return neg_ret(ibv_post_send(to_vqp(qp)->qp, wr,
				     bad_wr ? bad_wr : &bad));
}

static int qps_verbs_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	struct ibv_recv_wr *bad;

	return neg_ret(ibv_post_recv(to_vqp(qp)->qp, wr,
				     bad_wr ? bad_wr : &bad));
}

static int qps_verbs_create_flow(struct qps_qp *qp,
				 struct ibv_flow_attr *attr,
				 struct qps_flow **flow_out)
{
	struct qps_verbs_flow *vf = calloc(1, sizeof(*vf));
	const char *why = NULL;
	int ret;

	if (!vf)
		return -ENOMEM;
	vf->flow = ibv_create_flow(to_vqp(qp)->qp, attr);
	if (!vf->flow) {
		ret = neg_errno();
		free(vf);
		switch (-ret) {
		case ENXIO:
			why = "device-managed flow steering disabled "
			      "(mlx4_core log_num_mgm_entry_size=-1)";
			break;
		case EINVAL:
			why = "device-managed flow steering disabled "
			      "(mlx4_core log_num_mgm_entry_size=-1), or a "
			      "rule the device cannot match";
			break;
		case ENOMEM:
			why = "too many rules";
			break;
		case EOPNOTSUPP:
			why = "the device has no flow steering";
			break;
		}
		if (why)
			fprintf(stderr,
				"qpsock verbs: ibv_create_flow on %s: %s\n",
				to_vdev(qp->dev)->info.name, why);
		return ret;
	}
	vf->base.qp = qp;
	*flow_out = &vf->base;
	return 0;
}

static int qps_verbs_destroy_flow(struct qps_flow *flow)
{
	struct qps_verbs_flow *vf = (struct qps_verbs_flow *)flow;
	int ret = ibv_destroy_flow(vf->flow);

	if (ret)
		return neg_ret(ret);
	free(vf);
	return 0;
}

const struct qps_provider_ops qps_verbs_ops = {
	.size = sizeof(struct qps_provider_ops),
	.name = "verbs",
	.open = qps_verbs_open,
	.close = qps_verbs_close,
	.query = qps_verbs_query,
	.reg_mr = qps_verbs_reg_mr,
	.dereg_mr = qps_verbs_dereg_mr,
	.create_cq = qps_verbs_create_cq,
	.destroy_cq = qps_verbs_destroy_cq,
	.poll_cq = qps_verbs_poll_cq,
	.req_notify_cq = qps_verbs_req_notify_cq,
	.get_event_fd = qps_verbs_get_event_fd,
	.ack_events = qps_verbs_ack_events,
	.create_qp = qps_verbs_create_qp,
	.destroy_qp = qps_verbs_destroy_qp,
	.post_send = qps_verbs_post_send,
	.post_recv = qps_verbs_post_recv,
	.create_flow = qps_verbs_create_flow,
	.destroy_flow = qps_verbs_destroy_flow,
};
