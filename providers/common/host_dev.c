// SPDX-License-Identifier: MIT
/*
 * What a provider on a host netdev learns when it opens one: the
 * interface the caller named, its flags, MAC and MTU (the classic ioctls)
 * and the IPv4 address to use. The failures a first run usually hits (no
 * such interface, interface down, not Ethernet, no IPv4 address) are
 * explained on stderr, since an errno alone does not say which it was.
 */
#include "host_dev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

void qps_host_log(const char *who, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "qpsock %s: ", who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *qps_host_dev_name(const char *who,
			      const struct qps_dev_attr *attr)
{
	const char *s;

	if (attr && attr->dev && *attr->dev)
		return attr->dev;
	s = getenv("QPS_DEV");
	if (s && *s)
		return s;
	qps_host_log(who, "name a network interface (attr.dev or QPS_DEV)");
	return NULL;
}

/* Flags, MAC and MTU through the classic ioctls. */
static int query_link(const char *who, const char *name,
		      struct qps_dev_info *info)
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
		qps_host_log(who, "interface %s is down (ip link set %s up)",
			     name, name);
		ret = -ENETDOWN;
		goto out;
	}
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
		qps_host_log(who, "%s is not an Ethernet interface", name);
		ret = -EOPNOTSUPP;
		goto out;
	}
	memcpy(info->mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	info->mtu = (uint32_t)ifr.ifr_mtu;
out:
	close(fd);
	return ret;
}

int qps_host_dev_link(const char *who, const char *name,
		      struct qps_dev_info *info, int *ifindex)
{
	int ret;

	if (strlen(name) >= IF_NAMESIZE ||
	    !(*ifindex = (int)if_nametoindex(name))) {
		qps_host_log(who, "no network interface named %s", name);
		return -ENODEV;
	}
	ret = snprintf(info->name, sizeof(info->name), "%s", name);
	if (ret < 0 || (size_t)ret >= sizeof(info->name))
		return -ENODEV;
	return query_link(who, name, info);
}

int qps_host_dev_addr(const char *who, const char *name,
		      const struct qps_dev_attr *attr,
		      struct qps_dev_info *info)
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
		info->addr = sin->sin_addr;
		found = true;
	}
	freeifaddrs(ifa);
	if (found)
		return 0;
	if (attr && attr->addr_set) {
		char buf[INET_ADDRSTRLEN];

		qps_host_log(who, "%s is not an address of %s",
			     inet_ntop(AF_INET, &attr->addr, buf, sizeof(buf)),
			     name);
	} else {
		qps_host_log(who, "%s has no IPv4 address", name);
	}
	return -EADDRNOTAVAIL;
}

int qps_host_dev_query(const struct qps_dev_info *info,
		       const struct qps_nl_route *route,
		       struct qps_dev_info *out)
{
	*out = *info;
	out->mtu = qps_host_dev_mtu(info, route);
	return 0;
}
