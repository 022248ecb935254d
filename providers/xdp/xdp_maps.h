/* SPDX-License-Identifier: MIT */
/*
 * The layout of the XDP program's maps, shared by the program
 * (xdp_prog.bpf.c) and the provider that fills them (xdp_flow.c).
 * Addresses and ports in network order.
 */
#ifndef QPS_XDP_MAPS_H
#define QPS_XDP_MAPS_H

#include <linux/types.h>

#define QPS_XDP_MAX_QUEUES 64
#define QPS_XDP_MAX_KEYS 1024
#define QPS_XDP_MAX_FRAGS 4096

/* rules values */
#define QPS_XDP_R_EXACT (1u << 0)	/* the (address, port) itself */
#define QPS_XDP_R_HELD (1u << 1)	/* the address's held ports */

/* cfg.flags: catch-all rules */
#define QPS_XDP_C_ALL (1u << 0)		/* every UDP datagram */
#define QPS_XDP_C_MC_ALL (1u << 1)	/* every multicast one */
#define QPS_XDP_C_BCAST (1u << 2)	/* broadcast to a held port */

struct qps_xdp_key {
	__u32 addr;
	__u16 port;
	__u16 pad;
};

struct qps_xdp_cfg {
	__u32 addr;
	__u32 mark;
	__u32 flags;
};

struct qps_xdp_frag {
	__u32 saddr;
	__u32 daddr;
	__u16 id;
	__u16 pad;
};

#endif /* QPS_XDP_MAPS_H */
