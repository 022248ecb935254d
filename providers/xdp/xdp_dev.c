// SPDX-License-Identifier: MIT
/*
 * Device handle: open a netdev (ifindex, MAC, MTU, IPv4 address), attach
 * the XDP program and bind the XSK, close, query, counters, memory
 * registration, the kernel socket behind a bound port, and the ops table.
 *
 * attr->dev names the interface (default $QPS_DEV); attr->addr, when set,
 * must be one of its IPv4 addresses, else the first is used. Failures a
 * first run usually hits are explained once on stderr: no such interface,
 * interface down, not Ethernet, no IPv4 address, an MTU above what a
 * UMEM frame holds, no CAP_BPF / CAP_NET_ADMIN, no AF_XDP in the kernel,
 * another XDP program on the interface.
 */
#include "xdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

void qps_xdp_log(const char *fmt, ...)
{
	va_list ap;

	fputs("qpsock xdp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *dev_name(const struct qps_dev_attr *attr)
{
	const char *s;

	if (attr && attr->dev && *attr->dev)
		return attr->dev;
	s = getenv("QPS_DEV");
	return s && *s ? s : NULL;
}

/* Flags, MAC and MTU through the classic ioctls. */
static int query_link(struct qps_xdp_dev *dev, const char *name)
{
	struct ifreq ifr;
	int fd, ret;

	memset(&ifr, 0, sizeof(ifr));
	ret = snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ret < 0 || (size_t)ret >= sizeof(ifr.ifr_name))
		return -ENODEV;
	ret = 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	if (!(ifr.ifr_flags & IFF_UP)) {
		qps_xdp_log("interface %s is down (ip link set %s up)", name,
			    name);
		ret = -ENETDOWN;
		goto out;
	}
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
		qps_xdp_log("%s is not an Ethernet interface", name);
		ret = -EOPNOTSUPP;
		goto out;
	}
	memcpy(dev->info.mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	dev->info.mtu = (uint32_t)ifr.ifr_mtu;
out:
	close(fd);
	return ret;
}

static int pick_addr(struct qps_xdp_dev *dev, const char *name,
		     const struct qps_dev_attr *attr)
{
	struct ifaddrs *ifa, *it;
	bool found = false;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (it = ifa; it && !found; it = it->ifa_next) {
		const struct sockaddr_in *sin = (const void *)it->ifa_addr;

		if (!sin || sin->sin_family != AF_INET ||
		    strcmp(it->ifa_name, name) != 0)
			continue;
		if (attr && attr->addr_set &&
		    sin->sin_addr.s_addr != attr->addr.s_addr)
			continue;
		dev->info.addr = sin->sin_addr;
		found = true;
	}
	freeifaddrs(ifa);
	if (found)
		return 0;
	if (attr && attr->addr_set) {
		char buf[INET_ADDRSTRLEN];

		qps_xdp_log("%s is not an address of %s",
			    inet_ntop(AF_INET, &attr->addr, buf, sizeof(buf)),
			    name);
	} else {
		qps_xdp_log("%s has no IPv4 address", name);
	}
	return -EADDRNOTAVAIL;
}

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

	if (strlen(name) >= IF_NAMESIZE ||
	    !(dev->ifindex = (int)if_nametoindex(name))) {
		qps_xdp_log("no network interface named %s", name);
		return -ENODEV;
	}
	ret = snprintf(dev->info.name, sizeof(dev->info.name), "%s", name);
	if (ret < 0 || (size_t)ret >= sizeof(dev->info.name))
		return -ENODEV;
	ret = query_link(dev, name);
	if (ret < 0)
		return ret;
	if (dev->info.mtu < 68 ||
	    dev->info.mtu + QPS_XDP_ETH_HLEN > max_frame) {
		qps_xdp_log("%s has an MTU of %u; a UMEM frame holds at most "
			    "%u (no multi-buffer frames)", name, dev->info.mtu,
			    max_frame - QPS_XDP_ETH_HLEN);
		return -EOPNOTSUPP;
	}
	ret = pick_addr(dev, name, attr);
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
	const char *name = dev_name(attr);
	struct qps_xdp_dev *dev;
	int ret;

	if (!dev_out)
		return -EINVAL;
	if (!name) {
		qps_xdp_log("name a network interface (attr.dev or QPS_DEV)");
		return -ENODEV;
	}
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

	*info = dev->info;
	info->mtu = qps_xdp_mtu(dev);
	return 0;
}

static int xdp_counters(struct qps_dev *d, struct qps_dev_counters *out)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);
	struct qps_xdp_qp *qp;

	qps_xdp_umem_stats(dev);
	pthread_mutex_lock(&dev->lock);
	*out = dev->retired;
	for (qp = dev->qps; qp; qp = qp->next) {
		out->wqes += qps_xdp_read(&qp->wqes);
		out->doorbells += qps_xdp_read(&qp->doorbells);
		out->tx_cqes += qps_xdp_read(&qp->tx_cqes);
		out->tx_drops += qps_xdp_read(&qp->tx_drops);
		out->rx_cqes += qps_xdp_read(&qp->rx_cqes);
		out->rx_no_buf += qps_xdp_read(&qp->rx_no_buf);
		out->rx_drops += qps_xdp_read(&qp->rx_no_buf) +
				 qps_xdp_read(&qp->rx_len_err);
	}
	out->rx_no_rule += qps_xdp_read(&dev->rx_no_rule);
	out->rx_drops += qps_xdp_read(&dev->rx_no_rule) +
			 qps_xdp_read(&dev->rx_xsk_drops);
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

int qps_xdp_mr_check(struct qps_xdp_dev *dev, uint32_t lkey, uintptr_t addr,
		     uint64_t len)
{
	uintptr_t base;
	size_t size;

	if (qps_sw_mr_lookup(&dev->mrs, lkey, &base, &size) ||
	    addr < base || len > size || addr - base > size - len)
		return -EINVAL;
	return 0;
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
	.poll_cq_ts = qps_xdp_poll_cq_ts,
};
