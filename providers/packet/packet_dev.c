// SPDX-License-Identifier: MIT
/*
 * Device handle: open a netdev (ifindex, MAC, MTU, IPv4 address, through
 * common/host_dev.c), close, query, counters, memory registration and the
 * ops table.
 *
 * attr->dev names the interface (default $QPS_DEV); attr->addr, when set,
 * must be one of its IPv4 addresses, else the first is used. Failures a
 * first run usually hits are explained once on stderr: no such interface,
 * interface down, not Ethernet, no IPv4 address, no CAP_NET_RAW.
 */
#include "packet.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static void dev_free(struct qps_packet_dev *dev)
{
	if (dev->epfd >= 0)
		close(dev->epfd);
	if (dev->mc_fd >= 0)
		close(dev->mc_fd);
	qps_host_ns_close(&dev->ns);
	pthread_mutex_destroy(&dev->lock);
	qps_sw_mr_fini(&dev->mrs);
	pthread_mutex_destroy(&dev->route.lock);
	free(dev);
}

static int dev_setup(struct qps_packet_dev *dev, const char *name,
		     const struct qps_dev_attr *attr)
{
	int ret;

	ret = qps_host_dev_link("packet", name, &dev->info, &dev->ifindex);
	if (ret < 0)
		return ret;
	if (dev->info.mtu < 68) {
		qps_packet_log("%s has an MTU of %u", name, dev->info.mtu);
		return -EINVAL;
	}
	ret = qps_host_dev_addr("packet", name, attr, &dev->info);
	if (ret < 0)
		return ret;
	/* The first AF_PACKET socket: it tells whether we may have any. */
	dev->mc_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (dev->mc_fd < 0) {
		ret = -errno;
		if (ret == -EPERM || ret == -EACCES)
			qps_packet_log("AF_PACKET sockets need CAP_NET_RAW (run "
				       "as root, or setcap cap_net_raw+ep on "
				       "the program)");
		return ret;
	}
	dev->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (dev->epfd < 0)
		return -errno;
	dev->info.max_qp_wr = QPS_PACKET_MAX_WR;
	dev->info.max_cqe = QPS_PACKET_MAX_CQE;
	/* Every WR is copied at post time, so every frame is "inline". */
	dev->info.max_inline = dev->info.mtu + QPS_PACKET_ETH_HLEN;
	dev->info.caps = QPS_DEV_CAP_FLOW | QPS_DEV_CAP_MC_GROUP_RULE;
	/* Every send and receive goes through a TPACKET_V2 ring; the
	 * socket sees every queue of the interface. */
	dev->info.mode = QPS_DEV_MODE_HOST_NETDEV |
			 QPS_DEV_MODE_PACKET_RING;
	ret = qps_host_ns_open(&dev->ns);
	if (ret < 0)
		return ret;
	dev->ns.ifindex = (int)dev->ifindex;
	return qps_packet_route_open(dev);
}

static int packet_open(const struct qps_dev_attr *attr,
		       struct qps_dev **dev_out)
{
	struct qps_packet_dev *dev;
	const char *name;
	int ret;

	if (!dev_out)
		return -EINVAL;
	name = qps_host_dev_name("packet", attr);
	if (!name)
		return -ENODEV;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->epfd = -1;
	dev->mc_fd = -1;
	dev->ns.fd = -1;
	pthread_mutex_init(&dev->lock, NULL);
	qps_sw_mr_init(&dev->mrs, QPS_PACKET_MAX_MR);
	pthread_mutex_init(&dev->route.lock, NULL);
	ret = dev_setup(dev, name, attr);
	if (ret < 0) {
		qps_packet_route_close(dev);
		dev_free(dev);
		return ret;
	}
	*dev_out = &dev->base;
	return 0;
}

static int packet_close(struct qps_dev *d)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);

	while (dev->flows)
		qps_packet_destroy_flow(&dev->flows->base);
	while (dev->qps)
		if (qps_packet_destroy_qp(&dev->qps->base) < 0)
			break;
	qps_packet_mcast_close(dev);
	qps_packet_route_close(dev);
	dev_free(dev);
	return 0;
}

static int packet_query(struct qps_dev *d, struct qps_dev_info *info)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);

	return qps_host_dev_query(&dev->info, &dev->route, info);
}

static int packet_counters(struct qps_dev *d, struct qps_dev_counters *out)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct qps_packet_flow *fl;
	struct qps_packet_qp *qp;

	pthread_mutex_lock(&dev->lock);
	*out = dev->retired;
	for (qp = dev->qps; qp; qp = qp->next)
		qps_sw_sq_stats_add(out, &qp->sq_stats);
	for (fl = dev->flows; fl; fl = fl->next) {
		qps_packet_flow_stats(fl);
		out->rx_cqes += qps_sw_read(&fl->rx_cqes);
		out->rx_no_buf += qps_sw_read(&fl->rx_no_buf);
		out->rx_drops += qps_sw_read(&fl->rx_no_buf) +
				 qps_sw_read(&fl->ring_drops) +
				 qps_sw_read(&fl->rx_len_err) +
				 qps_sw_read(&fl->rx_vlan);
	}
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

static int packet_reg_mr(struct qps_dev *d, void *addr, size_t len,
			 struct qps_mr **mr_out)
{
	return qps_sw_mr_reg(&qps_packet_dev(d)->mrs, d, addr, len, mr_out);
}

static int packet_dereg_mr(struct qps_mr *m)
{
	return qps_sw_mr_dereg(&qps_packet_dev(m->dev)->mrs, m);
}

/* The interface is the host's: its ports are held in the kernel too. */
static int packet_hold_port(struct qps_dev *d, int fd, struct in_addr addr,
			    uint16_t *port, unsigned int flags)
{
	return qps_host_port_hold(&qps_packet_dev(d)->ns, fd, addr, port,
				  flags);
}

const struct qps_provider_ops qps_packet_ops = {
	.size = sizeof(struct qps_provider_ops),
	.name = "packet",
	.open = packet_open,
	.close = packet_close,
	.query = packet_query,
	.counters = packet_counters,
	.reg_mr = packet_reg_mr,
	.dereg_mr = packet_dereg_mr,
	.create_cq = qps_packet_create_cq,
	.destroy_cq = qps_packet_destroy_cq,
	.poll_cq = qps_packet_poll_cq,
	.req_notify_cq = qps_sw_cq_req_notify,
	.get_event_fd = qps_packet_get_event_fd,
	.ack_events = qps_packet_ack_events,
	.create_qp = qps_packet_create_qp,
	.destroy_qp = qps_packet_destroy_qp,
	.post_send = qps_packet_post_send,
	.post_recv = qps_packet_post_recv,
	.create_flow = qps_packet_create_flow,
	.destroy_flow = qps_packet_destroy_flow,
	.mcast_attach = qps_packet_mcast_attach,
	.mcast_detach = qps_packet_mcast_detach,
	.resolve = qps_packet_resolve,
	.resolve_nowait = qps_packet_resolve_nowait,
	.route_gen = qps_packet_route_gen,
	.hold_port = packet_hold_port,
	.poll_cq_ts = qps_packet_poll_cq_ts,
};
