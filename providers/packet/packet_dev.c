// SPDX-License-Identifier: MIT
/*
 * Device handle: open a netdev (ifindex, MAC, MTU, IPv4 address), close,
 * query, counters, memory registration and the ops table.
 *
 * attr->dev names the interface (default $QPS_DEV); attr->addr, when set,
 * must be one of its IPv4 addresses, else the first is used. Failures a
 * first run usually hits are explained once on stderr: no such interface,
 * interface down, not Ethernet, no IPv4 address, no CAP_NET_RAW.
 */
#include "packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

void qps_packet_log(const char *fmt, ...)
{
	va_list ap;

	fputs("qpsock packet: ", stderr);
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
static int query_link(struct qps_packet_dev *dev, const char *name)
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
		qps_packet_log("interface %s is down (ip link set %s up)",
			       name, name);
		ret = -ENETDOWN;
		goto out;
	}
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
		qps_packet_log("%s is not an Ethernet interface", name);
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

static int pick_addr(struct qps_packet_dev *dev, const char *name,
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

		qps_packet_log("%s is not an address of %s",
			       inet_ntop(AF_INET, &attr->addr, buf,
					 sizeof(buf)), name);
	} else {
		qps_packet_log("%s has no IPv4 address", name);
	}
	return -EADDRNOTAVAIL;
}

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

	if (strlen(name) >= IF_NAMESIZE || !(dev->ifindex =
					     (int)if_nametoindex(name))) {
		qps_packet_log("no network interface named %s", name);
		return -ENODEV;
	}
	ret = snprintf(dev->info.name, sizeof(dev->info.name), "%s", name);
	if (ret < 0 || (size_t)ret >= sizeof(dev->info.name))
		return -ENODEV;
	ret = query_link(dev, name);
	if (ret < 0)
		return ret;
	if (dev->info.mtu < 68) {
		qps_packet_log("%s has an MTU of %u", name, dev->info.mtu);
		return -EINVAL;
	}
	ret = pick_addr(dev, name, attr);
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
	ret = qps_host_ns_open(&dev->ns);
	if (ret < 0)
		return ret;
	dev->ns.ifindex = (int)dev->ifindex;
	return qps_packet_route_open(dev);
}

static int packet_open(const struct qps_dev_attr *attr,
		       struct qps_dev **dev_out)
{
	const char *name = dev_name(attr);
	struct qps_packet_dev *dev;
	int ret;

	if (!dev_out)
		return -EINVAL;
	if (!name) {
		qps_packet_log("name a network interface (attr.dev or "
			       "QPS_DEV)");
		return -ENODEV;
	}
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

	*info = dev->info;
	info->mtu = qps_packet_mtu(dev);
	return 0;
}

static int packet_counters(struct qps_dev *d, struct qps_dev_counters *out)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct qps_packet_flow *fl;
	struct qps_packet_qp *qp;

	pthread_mutex_lock(&dev->lock);
	*out = dev->retired;
	for (qp = dev->qps; qp; qp = qp->next) {
		out->wqes += qps_packet_read(&qp->wqes);
		out->doorbells += qps_packet_read(&qp->doorbells);
		out->tx_cqes += qps_packet_read(&qp->tx_cqes);
		out->tx_drops += qps_packet_read(&qp->tx_drops);
	}
	for (fl = dev->flows; fl; fl = fl->next) {
		qps_packet_flow_stats(fl);
		out->rx_cqes += qps_packet_read(&fl->rx_cqes);
		out->rx_no_buf += qps_packet_read(&fl->rx_no_buf);
		out->rx_drops += qps_packet_read(&fl->rx_no_buf) +
				 qps_packet_read(&fl->ring_drops) +
				 qps_packet_read(&fl->rx_len_err) +
				 qps_packet_read(&fl->rx_vlan);
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

int qps_packet_mr_check(struct qps_packet_dev *dev, uint32_t lkey,
			uintptr_t addr, uint64_t len)
{
	uintptr_t base;
	size_t size;

	if (qps_sw_mr_lookup(&dev->mrs, lkey, &base, &size) ||
	    addr < base || len > size || addr - base > size - len)
		return -EINVAL;
	return 0;
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
	.req_notify_cq = qps_packet_req_notify_cq,
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
