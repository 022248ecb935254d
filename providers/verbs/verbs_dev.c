// SPDX-License-Identifier: MIT
/*
 * Device open and discovery. On an Ethernet (RoCE) port the facts qpsock
 * needs belong to the netdev behind GID 0, which rdma-core 44 names in
 * ibv_gid_entry.ndev_ifindex (older kernels: the sysfs gid_attrs/ndevs
 * file, read as a fallback):
 *   MAC   the netdev's; when there is no netdev, or its MAC is not the
 *         one GID 0 was derived from, the EUI-64 of the RoCE v1
 *         link-local GID 0 (what the port itself answers to);
 *   IPv4  an IPv4-mapped GID (::ffff:a.b.c.d, RoCE v2 preferred) the
 *         kernel created from an address of the netdev; a requested
 *         address must be one of them (else -EADDRNOTAVAIL);
 *   MTU   the netdev's L3 MTU; active_mtu (an IB MTU: 1500 -> 1024) only
 *         without a netdev.
 * Counters are what the wrappers observe plus the port's sysfs discard
 * counters since open.
 */
#define _GNU_SOURCE	/* strerrordesc_np: strerror is not thread safe */
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verbs.h"

void qps_verbs_log(const char *fmt, ...)
{
	va_list ap;

	fputs("qpsock verbs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *qps_verbs_strerror(int err)
{
	const char *s = strerrordesc_np(err);

	return s ? s : "unknown error";
}

/* One line of a sysfs file without its newline; 0 or -errno. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f)
		return qps_verbs_errno();
	if (!fgets(buf, (int)len, f))
		ret = ferror(f) ? -EIO : -ENODATA;
	/* Opened for reading: closing it cannot lose data. */
	(void)fclose(f);
	if (!ret)
		buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

static const char *const sys_counter[QPS_VERBS_SYS_N] = {
	[QPS_VERBS_SYS_RX_DISCARDS] = "counters/port_rcv_discards",
	[QPS_VERBS_SYS_TX_DISCARDS] = "counters/port_xmit_discards",
	[QPS_VERBS_SYS_OUT_OF_BUF] = "hw_counters/out_of_buffer",
};

/* The sysfs file @leaf of our port; -ENAMETOOLONG rather than a truncated
 * path, which could name another file. */
static int port_path(const struct qps_verbs_dev *vd, const char *leaf,
		     char *path, size_t len)
{
	int n = snprintf(path, len, "/sys/class/infiniband/%s/ports/%d/%s",
			 vd->info.name, vd->port, leaf);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A port counter, 0 where the driver has none. */
static uint64_t sys_read(const struct qps_verbs_dev *vd, int which)
{
	char path[256], line[32];

	if (port_path(vd, sys_counter[which], path, sizeof(path)) ||
	    read_line(path, line, sizeof(line)))
		return 0;
	return strtoull(line, NULL, 10);
}

static bool is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* fe80::/64 with an EUI-64 interface id (ff:fe in the middle): the MAC
 * it was made from, universal/local bit flipped back. */
static bool gid_eui64_mac(const union ibv_gid *g, uint8_t mac[6])
{
	const uint8_t *r = g->raw;

	if (r[0] != 0xfe || r[1] != 0x80 || r[11] != 0xff || r[12] != 0xfe)
		return false;
	mac[0] = r[8] ^ 0x02;
	mac[1] = r[9];
	mac[2] = r[10];
	mac[3] = r[13];
	mac[4] = r[14];
	mac[5] = r[15];
	return true;
}

/* The netdev behind GID 0 for kernels or libraries without
 * ibv_query_gid_ex: the sysfs gid_attrs file. */
static int sysfs_ndev(const struct qps_verbs_dev *vd)
{
	char path[256], ndev[IF_NAMESIZE + 1];

	if (port_path(vd, "gid_attrs/ndevs/0", path, sizeof(path)) ||
	    read_line(path, ndev, sizeof(ndev)) || !ndev[0])
		return 0;
	return (int)if_nametoindex(ndev);
}

static void netdev_facts(struct qps_verbs_dev *vd, uint8_t mac[6],
			 bool *has_mac, uint32_t *mtu)
{
	struct ifreq ifr;
	int fd;

	*has_mac = false;
	*mtu = 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	/* Both IF_NAMESIZE: if_indextoname filled vd->ifname, NUL included. */
	_Static_assert(sizeof(ifr.ifr_name) == sizeof(vd->ifname),
		       "ifr_name and ifname differ in size");
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, vd->ifname, sizeof(ifr.ifr_name));
	if (!ioctl(fd, SIOCGIFHWADDR, &ifr)) {
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
		*has_mac = true;
	}
	if (!ioctl(fd, SIOCGIFMTU, &ifr) && ifr.ifr_mtu > 0)
		*mtu = (uint32_t)ifr.ifr_mtu;
	close(fd);
}

/* An IPv4 address of the netdev, for kernels without RoCE v2 GIDs. */
static bool netdev_has_addr(const struct qps_verbs_dev *vd,
			    const struct in_addr *want, struct in_addr *out)
{
	struct ifaddrs *ifa, *it;
	bool found = false;

	if (!vd->ifindex || getifaddrs(&ifa))
		return false;
	for (it = ifa; it && !found; it = it->ifa_next) {
		struct in_addr a;

		if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET ||
		    strcmp(it->ifa_name, vd->ifname) != 0)
			continue;
		a = ((struct sockaddr_in *)(void *)it->ifa_addr)->sin_addr;
		if (!want || want->s_addr == a.s_addr) {
			*out = a;
			found = true;
		}
	}
	freeifaddrs(ifa);
	return found;
}

/* Walk the GID table: the netdev of GID 0, its EUI-64 MAC, and the
 * IPv4-mapped GID of the requested (or the first) address, RoCE v2 before
 * v1 (ConnectX-3 without Pro has v1 GIDs only, IPv4-mapped all the same). */
static void discover_gids(struct qps_verbs_dev *vd, int tbl_len,
			  const struct qps_dev_attr *attr, uint8_t gid_mac[6],
			  bool *has_gid_mac)
{
	struct ibv_gid_entry e;
	bool ex = true;
	int i;

	*has_gid_mac = false;
	vd->addr_gid = -1;
	for (i = 0; i < tbl_len; i++) {
		struct in_addr a;
		int ret;

		memset(&e, 0, sizeof(e));
		ret = ex ? ibv_query_gid_ex(vd->ctx, vd->port,
					    (uint32_t)i, &e, 0) : -1;
		if (ret < 0)
			ret = -ret;
		if (ret && ex && i == 0 && (ret == EOPNOTSUPP ||
					    ret == ENOSYS)) {
			ex = false;
			ret = -1;
		}
		if (ret && !ex) {
			/* No gid_type here: IPv4-mapped counts as v2. */
			if (ibv_query_gid(vd->ctx, vd->port, i, &e.gid))
				continue;
			e.gid_type = IBV_GID_TYPE_ROCE_V1;
			if (is_v4_mapped(&e.gid))
				e.gid_type = IBV_GID_TYPE_ROCE_V2;
			e.ndev_ifindex = i ? 0 : (uint32_t)sysfs_ndev(vd);
		} else if (ret) {
			continue;	/* an empty slot: ENODATA */
		}
		if (i == 0) {
			vd->ifindex = (int)e.ndev_ifindex;
			*has_gid_mac = gid_eui64_mac(&e.gid, gid_mac);
		}
		if (!is_v4_mapped(&e.gid) || (vd->addr_gid >= 0 &&
		    (vd->addr_gid_type == IBV_GID_TYPE_ROCE_V2 ||
		     e.gid_type != IBV_GID_TYPE_ROCE_V2)))
			continue;
		memcpy(&a.s_addr, &e.gid.raw[12], 4);
		if (attr && attr->addr_set && a.s_addr != attr->addr.s_addr)
			continue;
		vd->addr_gid = i;
		vd->addr_gid_type = e.gid_type;
		vd->info.addr = a;
	}
}

static int discover(struct qps_verbs_dev *vd, const struct ibv_port_attr *pa,
		    const struct qps_dev_attr *attr)
{
	uint8_t gid_mac[6], nd_mac[6] = { 0 };
	bool has_gid_mac, has_nd_mac = false;
	uint32_t nd_mtu = 0;

	vd->link_layer = pa->link_layer;
	vd->info.mtu = pa->active_mtu ? 128u << pa->active_mtu : 0;
	discover_gids(vd, pa->gid_tbl_len, attr, gid_mac, &has_gid_mac);
	if (vd->ifindex && !if_indextoname((unsigned int)vd->ifindex,
					   vd->ifname))
		vd->ifindex = 0;
	if (vd->ifindex)
		netdev_facts(vd, nd_mac, &has_nd_mac, &nd_mtu);
	if (nd_mtu)
		vd->info.mtu = nd_mtu;
	if (has_gid_mac)
		memcpy(vd->info.mac, gid_mac, 6);
	else if (has_nd_mac)
		memcpy(vd->info.mac, nd_mac, 6);
	/* Worth knowing on hardware, routine on the test double (whose
	 * ports share one netdev): only with QPS_LOG=debug. */
	if (has_gid_mac && has_nd_mac && memcmp(gid_mac, nd_mac, 6) != 0 &&
	    getenv("QPS_LOG") && strcmp(getenv("QPS_LOG"), "debug") == 0)
		qps_verbs_log("%s: GID 0 names a MAC other than %s's; using "
			      "the port's (GID 0)", vd->info.name, vd->ifname);

	if (vd->addr_gid >= 0)
		return 0;
	/* No IPv4 GID (an old kernel, or IB): the netdev's address. */
	if (netdev_has_addr(vd, attr && attr->addr_set ? &attr->addr : NULL,
			    &vd->info.addr))
		return 0;
	if (attr && attr->addr_set) {
		char buf[INET_ADDRSTRLEN];

		qps_verbs_log("%s: %s is not an address of this port (no IPv4 "
			      "GID, not on %s): add it to the netdev",
			      vd->info.name,
			      inet_ntop(AF_INET, &attr->addr, buf, sizeof(buf)),
			      vd->ifindex ? vd->ifname : "any netdev");
		return -EADDRNOTAVAIL;
	}
	if (pa->link_layer == IBV_LINK_LAYER_ETHERNET)
		qps_verbs_log("%s: no IPv4 address on the port (no RoCE v2 "
			      "GID%s%s)", vd->info.name,
			      vd->ifindex ? ", none on " : "",
			      vd->ifindex ? vd->ifname : "");
	return 0;
}

/* mlx4 steers raw-packet QPs only with device-managed flow steering. */
static void check_mlx4_dmfs(const struct qps_verbs_dev *vd)
{
	char line[32], *end;
	long v;

	if (strncmp(vd->info.name, "mlx4", 4) != 0 ||
	    read_line("/sys/module/mlx4_core/parameters/log_num_mgm_entry_size",
		      line, sizeof(line)))
		return;
	/* -1 (DMFS on) or a table size; anything else says nothing. */
	v = strtol(line, &end, 10);
	if (end != line && *end == '\0' && v >= 0)
		qps_verbs_log("%s: mlx4_core log_num_mgm_entry_size=%s: "
			      "device-managed flow steering is disabled, raw "
			      "packet QPs and their rules will fail (load "
			      "mlx4_core with log_num_mgm_entry_size=-1)",
			      vd->info.name, line);
}

static int qps_verbs_close(struct qps_dev *dev)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	int ret = 0, r;

	qps_verbs_mcast_close(vd);
	qps_verbs_route_close(vd);
	qps_verbs_mlx4_close(vd);
	if (vd->chan)
		ret = qps_verbs_ret(ibv_destroy_comp_channel(vd->chan));
	if (vd->pd) {
		r = ibv_dealloc_pd(vd->pd);
		if (r && !ret)
			ret = qps_verbs_ret(r);
	}
	if (vd->ctx) {
		r = ibv_close_device(vd->ctx);
		if (r && !ret)
			ret = qps_verbs_errno();
	}
	pthread_mutex_destroy(&vd->route.lock);
	pthread_mutex_destroy(&vd->lock);
	free(vd);
	return ret;
}

/* "device[:port]": the device (NULL or "" = the first) and the port. */
static int parse_dev(const char *s, char *name, size_t len, uint8_t *port)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	size_t n;

	*port = QPS_VERBS_DEFAULT_PORT;
	name[0] = '\0';
	if (!s)
		return 0;
	n = colon ? (size_t)(colon - s) : strlen(s);
	if (colon) {
		unsigned long p;
		char *end;

		p = strtoul(colon + 1, &end, 10);
		if (colon[1] == '\0' || *end || p < 1 || p > 255)
			return -EINVAL;
		*port = (uint8_t)p;
	}
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(name, s, n);
	name[n] = '\0';
	return 0;
}

static struct ibv_device *pick_device(struct ibv_device **list, int n,
				      const char *name)
{
	int i;

	if (!name[0])
		return list[0];
	for (i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			return list[i];
	return NULL;
}

static int open_device(struct qps_verbs_dev *vd, struct ibv_device *ibdev,
		       const struct qps_dev_attr *attr)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	const char *name = ibv_get_device_name(ibdev);
	int ret, flags, i;

	/* The name builds sysfs paths: never use a truncated one. */
	ret = snprintf(vd->info.name, sizeof(vd->info.name), "%s", name);
	if (ret < 0 || (size_t)ret >= sizeof(vd->info.name)) {
		qps_verbs_log("device name %s is too long", name);
		return -ENAMETOOLONG;
	}
	vd->ctx = ibv_open_device(ibdev);
	if (!vd->ctx) {
		ret = qps_verbs_errno();
		qps_verbs_log("cannot open %s: %s", vd->info.name,
			      qps_verbs_strerror(-ret));
		return ret;
	}
	ret = ibv_query_device(vd->ctx, &dattr);
	if (ret)
		return qps_verbs_ret(ret);
	ret = ibv_query_port(vd->ctx, vd->port, &pattr);
	if (ret)
		return qps_verbs_ret(ret);
	if (pattr.state != IBV_PORT_ACTIVE)
		qps_verbs_log("%s port %d is %s, not ACTIVE (cable, link "
			      "partner, or subnet manager on IB)",
			      vd->info.name, vd->port,
			      ibv_port_state_str(pattr.state));

	/* mlx4 loops multicast back to the port's QPs (qpsock never sets
	 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) and to the host's netdev. */
	vd->info.caps |= QPS_DEV_CAP_QP_ERR | QPS_DEV_CAP_MC_LOOP;
	vd->info.max_qp_wr = (uint32_t)dattr.max_qp_wr;
	vd->info.max_cqe = (uint32_t)dattr.max_cqe;
	if (dattr.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING)
		vd->info.caps |= QPS_DEV_CAP_FLOW;
	/* Raw-packet checksum offload both ways: libmlx4 takes
	 * IBV_SEND_IP_CSUM on a raw QP and reports IBV_WC_IP_CSUM_OK only
	 * on an Ethernet port of a device that has it. */
	if ((dattr.device_cap_flags & IBV_DEVICE_RAW_IP_CSUM) &&
	    pattr.link_layer == IBV_LINK_LAYER_ETHERNET)
		vd->info.caps |= QPS_DEV_CAP_CSUM;
	ret = discover(vd, &pattr, attr);
	if (ret)
		return ret;
	/* UD over RoCE needs a GID for our address; IB has LIDs. */
	if (vd->addr_gid >= 0 ||
	    pattr.link_layer == IBV_LINK_LAYER_INFINIBAND) {
		vd->info.caps |= QPS_DEV_CAP_UD;
		/* A UD message is one packet of the path MTU (enum
		 * ibv_mtu: 1 = 256 ... 5 = 4096). */
		vd->info.ud_mtu = pattr.active_mtu ?
				  128u << pattr.active_mtu : 0;
	}
	check_mlx4_dmfs(vd);

	vd->pd = ibv_alloc_pd(vd->ctx);
	if (!vd->pd)
		return qps_verbs_errno();
	vd->chan = ibv_create_comp_channel(vd->ctx);
	if (!vd->chan)
		return qps_verbs_errno();
	/* ack_events must drain without blocking the progress thread. */
	flags = fcntl(vd->chan->fd, F_GETFL);
	if (flags < 0 || fcntl(vd->chan->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return qps_verbs_errno();
	if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET)
		qps_verbs_probe_inline(vd, &vd->info.max_inline);
	ret = qps_verbs_route_open(vd);
	if (ret)
		return ret;
	/* A netdev behind GID 0: the kernel serves the port too
	 * (hold_port holds ports in it). */
	if (vd->ifindex)
		vd->info.mode |= QPS_DEV_MODE_HOST_NETDEV;
	qps_verbs_mlx4_open(vd, &dattr);
	qps_verbs_ts_open(vd);
	for (i = 0; i < QPS_VERBS_SYS_N; i++)
		vd->sys_base[i] = sys_read(vd, i);
	return 0;
}

static int qps_verbs_open(const struct qps_dev_attr *attr,
			  struct qps_dev **dev_out)
{
	const char *spec = attr && attr->dev ? attr->dev : getenv("QPS_DEV");
	struct ibv_device **list;
	struct ibv_device *ibdev;
	struct qps_verbs_dev *vd;
	char name[64];
	uint8_t port;
	int n = 0, ret;

	ret = parse_dev(spec, name, sizeof(name), &port);
	if (ret) {
		qps_verbs_log("bad device \"%s\": name an RDMA device "
			      "(ibv_devices), optionally with :port", spec);
		return ret;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		ret = qps_verbs_errno();
		qps_verbs_log("no RDMA device: ibv_get_device_list failed: %s "
			      "(the kernel has no InfiniBand/RDMA support or "
			      "no rdma driver is loaded); " QPS_VERBS_HINT,
			      qps_verbs_strerror(-ret));
		return -ENODEV;
	}
	if (n <= 0) {
		qps_verbs_log("no RDMA device: ibv_get_device_list found none "
			      "(no RDMA NIC, or its driver (mlx4_ib, mlx5_ib, "
			      "...) is not loaded); " QPS_VERBS_HINT);
		ibv_free_device_list(list);
		return -ENODEV;
	}
	ibdev = pick_device(list, n, name);
	if (!ibdev) {
		qps_verbs_log("no RDMA device named %s (see ibv_devices)",
			      name);
		ibv_free_device_list(list);
		return -ENODEV;
	}

	vd = calloc(1, sizeof(*vd));
	if (!vd) {
		ibv_free_device_list(list);
		return -ENOMEM;
	}
	vd->port = port;
	vd->ns.fd = -1;
	pthread_mutex_init(&vd->lock, NULL);
	pthread_mutex_init(&vd->route.lock, NULL);
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
	*info = qps_verbs_dev(dev)->info;
	return 0;
}

static uint64_t sys_delta(const struct qps_verbs_dev *vd, int which)
{
	uint64_t now = sys_read(vd, which);

	/* A counter that went backwards was reset by someone else. */
	return now >= vd->sys_base[which] ? now - vd->sys_base[which] : 0;
}

static int qps_verbs_counters(struct qps_dev *dev,
			      struct qps_dev_counters *out)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);

	memset(out, 0, sizeof(*out));
	out->wqes = __atomic_load_n(&vd->wqes, __ATOMIC_RELAXED);
	out->doorbells = __atomic_load_n(&vd->doorbells, __ATOMIC_RELAXED);
	out->tx_cqes = __atomic_load_n(&vd->tx_cqes, __ATOMIC_RELAXED);
	out->rx_cqes = __atomic_load_n(&vd->rx_cqes, __ATOMIC_RELAXED);
	/* Port-wide: other users of the port count here too. */
	out->rx_drops = sys_delta(vd, QPS_VERBS_SYS_RX_DISCARDS);
	out->tx_drops = sys_delta(vd, QPS_VERBS_SYS_TX_DISCARDS);
	out->rx_no_buf = sys_delta(vd, QPS_VERBS_SYS_OUT_OF_BUF);
	return 0;
}

const struct qps_provider_ops qps_verbs_ops = {
	.size = sizeof(struct qps_provider_ops),
	.name = "verbs",
	.open = qps_verbs_open,
	.close = qps_verbs_close,
	.query = qps_verbs_query,
	.counters = qps_verbs_counters,
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
	.mlx4_sq = qps_verbs_mlx4_sq,
	.create_flow = qps_verbs_create_flow,
	.destroy_flow = qps_verbs_destroy_flow,
	.mcast_attach = qps_verbs_mcast_attach,
	.mcast_detach = qps_verbs_mcast_detach,
	.resolve = qps_verbs_resolve,
	.resolve_nowait = qps_verbs_resolve_nowait,
	.route_gen = qps_verbs_route_gen,
	.modify_qp = qps_verbs_modify_qp,
	.query_gid = qps_verbs_query_gid,
	.create_ah = qps_verbs_create_ah,
	.destroy_ah = qps_verbs_destroy_ah,
	.attach_mcast = qps_verbs_attach_mcast,
	.detach_mcast = qps_verbs_detach_mcast,
	.hold_port = qps_verbs_hold_port,
	.get_cq_event_fd = qps_verbs_get_cq_event_fd,
	.poll_cq_ts = qps_verbs_poll_cq_ts,
	.read_clock = qps_verbs_read_clock,
};
