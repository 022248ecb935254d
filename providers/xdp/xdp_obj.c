// SPDX-License-Identifier: MIT
/*
 * The XDP program: opened from the bytes linked into the library, loaded,
 * and attached to the interface with a bpf_link (not netlink), so that
 * the kernel detaches it when its last descriptor closes: at close, and
 * when the process dies however it dies. Native (driver) mode first,
 * generic (SKB) mode when the driver has none; each choice is logged once
 * per device.
 *
 * veth is the exception: generic first. Its native XDP gets the skbs the
 * peer's stack built (frames come as xdp_frames only when an XDP program
 * redirects them into the pair), copies each into a page of its own for
 * the headroom, and runs in a NAPI poll scheduled behind the sender's
 * transmit; generic mode runs in the receive path the skb takes anyway.
 * $QPS_XDP_ATTACH=native or generic overrides the choice.
 *
 * An interface holds one XDP program per mode: when another one (or
 * another context's) is there, the link cannot be made (-EBUSY).
 */
#include "xdp.h"
#include "xdp_obj.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

static int link_try(struct qps_xdp_dev *dev, int prog_fd, uint32_t flags)
{
	struct bpf_link_create_opts o;

	memset(&o, 0, sizeof(o));
	o.sz = sizeof(o);
	o.flags = flags;
	/* libbpf 1.x returns the descriptor or -errno. */
	return bpf_link_create(prog_fd, dev->ifindex, BPF_XDP, &o);
}

/* Whether the program attached to the interface is qpsock's, i.e. another
 * context's (a fork parent's, typically): the message then says so. */
static bool attached_is_ours(const struct qps_xdp_dev *dev)
{
	struct bpf_prog_info info;
	uint32_t id = 0, len = sizeof(info);
	bool ours = false;
	int fd;

	if (bpf_xdp_query_id(dev->ifindex, 0, &id) < 0 || !id)
		return false;
	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return false;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
		ours = strncmp(info.name, "qps_xdp_steer",
			       sizeof(info.name)) == 0;
	close(fd);
	return ours;
}

/* The driver's name is "veth" (ETHTOOL_GDRVINFO). */
static bool is_veth(const struct qps_xdp_dev *dev)
{
	struct ethtool_drvinfo di = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr;

	if (dev->carrier_fd < 0)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, dev->info.name, IF_NAMESIZE - 1);
	ifr.ifr_data = (void *)&di;
	return ioctl(dev->carrier_fd, SIOCETHTOOL, &ifr) == 0 &&
	       strcmp(di.driver, "veth") == 0;
}

/* Whether to try native mode first (see top). */
static bool native_first(const struct qps_xdp_dev *dev)
{
	const char *s = getenv("QPS_XDP_ATTACH");

	if (s && strcmp(s, "native") == 0)
		return true;
	if (s && strcmp(s, "generic") == 0)
		return false;
	return !is_veth(dev);
}

static int attach(struct qps_xdp_dev *dev, int prog_fd)
{
	bool native = native_first(dev);
	int fd = native ? link_try(dev, prog_fd, XDP_FLAGS_DRV_MODE) :
			  -EOPNOTSUPP;

	if (fd >= 0) {
		dev->native = true;
	} else if (fd == -EBUSY || fd == -EEXIST) {
		goto busy;
	} else {
		fd = link_try(dev, prog_fd, XDP_FLAGS_SKB_MODE);
		if (fd == -EBUSY || fd == -EEXIST)
			goto busy;
		if (fd < 0) {
			qps_xdp_log("cannot attach the XDP program to %s (%d)",
				    dev->info.name, fd);
			return fd;
		}
		if (native)
			qps_xdp_log("%s: no native XDP in its driver; generic "
				    "(SKB) mode", dev->info.name);
	}
	dev->link_fd = fd;
	return 0;
busy:
	if (attached_is_ours(dev))
		qps_xdp_log("%s: another qpsock context has the interface "
			    "(one per interface)", dev->info.name);
	else
		qps_xdp_log("%s already has an XDP program (ip link show "
			    "%s); detach it first", dev->info.name,
			    dev->info.name);
	return -EBUSY;
}

static int map_fd(struct qps_xdp_dev *dev, const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(dev->obj, name);

	return fd < 0 ? -ENOENT : fd;
}

int qps_xdp_cfg_write(struct qps_xdp_dev *dev)
{
	uint32_t zero = 0;

	if (bpf_map_update_elem(dev->cfg_fd, &zero, &dev->cfg, BPF_ANY) < 0)
		return -errno;
	return 0;
}

int qps_xdp_obj_attach(struct qps_xdp_dev *dev)
{
	struct bpf_object_open_opts oo;
	struct bpf_program *prog;
	int ret;

	memset(&oo, 0, sizeof(oo));
	oo.sz = sizeof(oo);
	oo.object_name = "qps_xdp";
	dev->obj = bpf_object__open_mem(qps_xdp_prog_obj,
					qps_xdp_prog_obj_len, &oo);
	if (!dev->obj) {
		ret = errno;
		return ret > 0 ? -ret : -EINVAL;
	}
	ret = bpf_object__load(dev->obj);
	if (ret < 0) {
		if (ret == -EPERM || ret == -EACCES)
			qps_xdp_log("loading an XDP program needs CAP_BPF and "
				    "CAP_NET_ADMIN (run as root)");
		else
			qps_xdp_log("the kernel refused the XDP program (%d)",
				    ret);
		return ret;
	}
	prog = bpf_object__find_program_by_name(dev->obj, "qps_xdp_steer");
	if (!prog)
		return -ENOENT;
	dev->xsks_fd = map_fd(dev, "xsks");
	dev->rules_fd = map_fd(dev, "rules");
	dev->cfg_fd = map_fd(dev, "cfg");
	if (dev->xsks_fd < 0 || dev->rules_fd < 0 || dev->cfg_fd < 0)
		return -ENOENT;
	/* The mark of the context's kernel sockets: any value another
	 * program is unlikely to use; never 0, every socket's default. */
	if (getrandom(&dev->cfg.mark, sizeof(dev->cfg.mark), 0) !=
	    sizeof(dev->cfg.mark))
		dev->cfg.mark = (uint32_t)getpid();
	dev->cfg.mark |= 1u << 31;
	dev->cfg.addr = dev->info.addr.s_addr;
	ret = qps_xdp_cfg_write(dev);
	if (ret < 0)
		return ret;
	return attach(dev, bpf_program__fd(prog));
}

void qps_xdp_obj_detach(struct qps_xdp_dev *dev)
{
	if (dev->link_fd >= 0)
		close(dev->link_fd);
	dev->link_fd = -1;
	bpf_object__close(dev->obj);
	dev->obj = NULL;
}
