// SPDX-License-Identifier: MIT
/*
 * Device handle: open a netdev (ifindex, MAC, MTU, IPv4 address, through
 * common/host_dev.c), attach the XDP program and bind the XSKs, close,
 * query, counters, memory registration, the kernel socket behind a bound
 * port, and the ops table.
 *
 * attr->dev names the interface (default $QPS_DEV); attr->addr, when set,
 * must be one of its IPv4 addresses, else the first is used. Failures a
 * first run usually hits are explained once on stderr: no such interface,
 * interface down, not Ethernet, no IPv4 address, an MTU above what a
 * UMEM frame holds, no CAP_BPF / CAP_NET_ADMIN, no AF_XDP in the kernel,
 * another XDP program on the interface.
 */
#include "xdp.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static void dev_free(struct qps_xdp_dev *dev)
{
	qps_xdp_umem_close(dev);
	qps_xdp_obj_detach(dev);
	qps_xdp_route_close(dev);
	if (dev->epfd >= 0)
		close(dev->epfd);
	if (dev->evfd >= 0)
		close(dev->evfd);
	if (dev->carrier_fd >= 0)
		close(dev->carrier_fd);
	qps_host_ns_close(&dev->ns);
	pthread_mutex_destroy(&dev->lock);
	pthread_mutex_destroy(&dev->rx_lock);
	pthread_mutex_destroy(&dev->tx_lock);
	qps_sw_mr_fini(&dev->mrs);
	pthread_mutex_destroy(&dev->route.lock);
	free(dev);
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ev.data.fd = fd;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* The socket the send side asks whether the carrier is back (ETHTOOL_GLINK,
 * xdp_tx.c), made in the device's namespace; without it, kicks go on. */
static void carrier_open(struct qps_xdp_dev *dev)
{
	dev->carrier_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

static int dev_setup(struct qps_xdp_dev *dev, const char *name,
		     const struct qps_dev_attr *attr)
{
	const uint32_t max_frame = QPS_XDP_FRAME_SIZE - QPS_XDP_RX_HEADROOM;
	int ret;

	ret = qps_host_dev_link("xdp", name, &dev->info, &dev->ifindex);
	if (ret < 0)
		return ret;
	if (dev->info.mtu < 68 ||
	    dev->info.mtu + QPS_XDP_ETH_HLEN > max_frame) {
		qps_xdp_log("%s has an MTU of %u; a UMEM frame holds at most "
			    "%u (no multi-buffer frames)", name, dev->info.mtu,
			    max_frame - QPS_XDP_ETH_HLEN);
		return -EOPNOTSUPP;
	}
	ret = qps_host_dev_addr("xdp", name, attr, &dev->info);
	if (ret < 0)
		return ret;
	dev->epfd = epoll_create1(EPOLL_CLOEXEC);
	dev->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev->epfd < 0 || dev->evfd < 0)
		return -errno;
	dev->info.max_qp_wr = QPS_XDP_MAX_WR;
	dev->info.max_cqe = QPS_XDP_MAX_CQE;
	/* Every WR is copied at post time, so every frame is "inline". */
	dev->info.max_inline = dev->info.mtu + QPS_XDP_ETH_HLEN;
	dev->info.caps = QPS_DEV_CAP_FLOW | QPS_DEV_CAP_MC_GROUP_RULE;
	carrier_open(dev);
	ret = qps_host_ns_open(&dev->ns);
	if (ret < 0)
		return ret;
	dev->ns.ifindex = dev->ifindex;
	ret = qps_xdp_route_open(dev);
	if (ret < 0)
		return ret;
	ret = qps_xdp_obj_attach(dev);
	if (ret < 0)
		return ret;
	ret = qps_xdp_umem_open(dev);
	if (ret < 0)
		return ret;
	/* The XSK joins the set when a CQ is armed (xdp_event.c). */
	return epoll_add(dev->epfd, dev->evfd);
}

static int xdp_open(const struct qps_dev_attr *attr, struct qps_dev **dev_out)
{
	struct qps_xdp_dev *dev;
	const char *name;
	int ret;

	if (!dev_out)
		return -EINVAL;
	name = qps_host_dev_name("xdp", attr);
	if (!name)
		return -ENODEV;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->epfd = -1;
	dev->evfd = -1;
	dev->carrier_fd = -1;
	dev->link_fd = -1;
	dev->xsk_fd = -1;
	dev->ns.fd = -1;
	pthread_mutex_init(&dev->lock, NULL);
	pthread_mutex_init(&dev->rx_lock, NULL);
	pthread_mutex_init(&dev->tx_lock, NULL);
	qps_sw_mr_init(&dev->mrs, QPS_XDP_MAX_MR);
	pthread_mutex_init(&dev->route.lock, NULL);
	ret = dev_setup(dev, name, attr);
	if (ret < 0) {
		dev_free(dev);
		return ret;
	}
	*dev_out = &dev->base;
	return 0;
}

static int xdp_close(struct qps_dev *d)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);

	while (dev->flows)
		qps_xdp_destroy_flow(&dev->flows->base);
	while (dev->qps)
		if (qps_xdp_destroy_qp(&dev->qps->base) < 0)
			break;
	qps_xdp_mcast_close(dev);
	dev_free(dev);
	return 0;
}

static int xdp_query(struct qps_dev *d, struct qps_dev_info *info)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);

	return qps_host_dev_query(&dev->info, &dev->route, info);
}

static int xdp_counters(struct qps_dev *d, struct qps_dev_counters *out)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);
	struct qps_xdp_qp *qp;

	qps_xdp_umem_stats(dev);
	pthread_mutex_lock(&dev->lock);
	*out = dev->retired;
	for (qp = dev->qps; qp; qp = qp->next) {
		qps_sw_sq_stats_add(out, &qp->sq_stats);
		out->rx_cqes += qps_sw_read(&qp->rx_cqes);
		out->rx_no_buf += qps_sw_read(&qp->rx_no_buf);
		out->rx_drops += qps_sw_read(&qp->rx_no_buf) +
				 qps_sw_read(&qp->rx_len_err);
	}
	out->rx_no_rule += qps_sw_read(&dev->rx_no_rule);
	out->rx_drops += qps_sw_read(&dev->rx_no_rule) +
			 qps_sw_read(&dev->rx_xsk_drops);
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

static int xdp_reg_mr(struct qps_dev *d, void *addr, size_t len,
		      struct qps_mr **mr_out)
{
	return qps_sw_mr_reg(&qps_xdp_dev(d)->mrs, d, addr, len, mr_out);
}

static int xdp_dereg_mr(struct qps_mr *m)
{
	return qps_sw_mr_dereg(&qps_xdp_dev(m->dev)->mrs, m);
}

/*
 * The interface is the host's: its ports are held in the kernel too. The
 * socket carries the device's mark, which is how the XDP program tells
 * the context's ports from the host's (xdp_prog.bpf.c: held()).
 */
static int xdp_hold_port(struct qps_dev *d, int fd, struct in_addr addr,
			 uint16_t *port, unsigned int flags)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);
	int s = qps_host_port_hold(&dev->ns, fd, addr, port, flags);
	int ret;

	if (s < 0)
		return s;
	if (setsockopt(s, SOL_SOCKET, SO_MARK, &dev->cfg.mark,
		       sizeof(dev->cfg.mark)) == 0)
		return s;
	ret = -errno;
	qps_xdp_log("cannot mark the socket of a bound port (SO_MARK needs "
		    "CAP_NET_ADMIN)");
	if (fd < 0)
		close(s);
	return ret;
}

/* The program then passes the port's traffic to the kernel socket. A mark
 * of the application's own was overwritten at hold_port and is not
 * restored. */
static void xdp_release_port(struct qps_dev *d, int fd)
{
	uint32_t none = 0;

	(void)d;
	(void)setsockopt(fd, SOL_SOCKET, SO_MARK, &none, sizeof(none));
}

const struct qps_provider_ops qps_xdp_ops = {
	.size = sizeof(struct qps_provider_ops),
	.name = "xdp",
	.open = xdp_open,
	.close = xdp_close,
	.query = xdp_query,
	.counters = xdp_counters,
	.reg_mr = xdp_reg_mr,
	.dereg_mr = xdp_dereg_mr,
	.create_cq = qps_xdp_create_cq,
	.destroy_cq = qps_xdp_destroy_cq,
	.poll_cq = qps_xdp_poll_cq,
	.req_notify_cq = qps_xdp_req_notify_cq,
	.get_event_fd = qps_xdp_get_event_fd,
	.ack_events = qps_xdp_ack_events,
	.create_qp = qps_xdp_create_qp,
	.destroy_qp = qps_xdp_destroy_qp,
	.post_send = qps_xdp_post_send,
	.post_recv = qps_xdp_post_recv,
	.create_flow = qps_xdp_create_flow,
	.destroy_flow = qps_xdp_destroy_flow,
	.mcast_attach = qps_xdp_mcast_attach,
	.mcast_detach = qps_xdp_mcast_detach,
	.resolve = qps_xdp_resolve,
	.resolve_nowait = qps_xdp_resolve_nowait,
	.route_gen = qps_xdp_route_gen,
	.hold_port = xdp_hold_port,
	.release_port = xdp_release_port,
	.poll_cq_ts = qps_xdp_poll_cq_ts,
};
