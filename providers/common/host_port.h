/* SPDX-License-Identifier: MIT */
/*
 * The kernel socket behind a bound endpoint, for providers whose device is
 * a netdev the host's IP stack also serves (the hold_port op,
 * provider.h). See host_port.c.
 */
#ifndef QPS_HOST_PORT_H
#define QPS_HOST_PORT_H

#include <netinet/in.h>
#include <stdint.h>

/* The network namespace a device was opened in: sockets for it are made
 * there whatever namespace the binding thread is in. */
struct qps_host_ns {
	int fd;			/* /proc/thread-self/ns/net at open, or -1 */
	uint64_t ino;
	/* The device's netdev: what arrives through it is the device's
	 * to deliver, not a QPS_HOLD_HOST_RX socket's. 0: unknown. */
	int ifindex;
};

int qps_host_ns_open(struct qps_host_ns *ns);
void qps_host_ns_close(struct qps_host_ns *ns);

/* The hold_port op: returns the socket's descriptor or -errno. @fd >= 0:
 * the caller's socket, bound instead of a new one and never closed. */
int qps_host_port_hold(const struct qps_host_ns *ns, int fd,
		       struct in_addr addr, uint16_t *port,
		       unsigned int flags);

#endif /* QPS_HOST_PORT_H */
