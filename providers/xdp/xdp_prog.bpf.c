// SPDX-License-Identifier: MIT
/*
 * The xdp provider's XDP program: a frame the context's steering rules
 * ask for goes to the context's XSK on the frame's receive queue; every
 * other frame passes to the kernel untouched (ARP, IGMP, TCP, the host's
 * own UDP sockets).
 *
 * What the context asks for (maps filled by xdp_flow.c):
 *   rules  (IPv4 dst, UDP dst port) -> QPS_XDP_R_EXACT: that port, taken
 *          whole (a group's port rule); (address, 0) -> QPS_XDP_R_HELD:
 *          the ports of that address whose kernel socket is one of the
 *          context's (hold_port marks them with cfg.mark), so a port
 *          nobody bound stays the kernel's
 *   cfg    the context's address and mark, and the catch-all flags of
 *          MAC-only rules (broadcast, all multicast, everything)
 *   frags  IPv4 fragments after the first have no UDP header: they follow
 *          their first fragment, which recorded (src, dst, id) here when
 *          it was redirected; a later fragment that arrives before its
 *          first is the kernel's
 * An IPv4 frame too broken to read (short, version not 4, IHL below 5, a
 * UDP header beyond the end) is redirected too: the kernel would only
 * drop it, and the core's parser counts it (as packet's filters hand
 * such frames over).
 * A frame is only ever redirected or passed, never dropped here; which
 * of the context's rules takes it is decided again in user space.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xdp_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, QPS_XDP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, QPS_XDP_MAX_KEYS);
	__type(key, struct qps_xdp_key);
	__type(value, __u32);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct qps_xdp_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, QPS_XDP_MAX_FRAGS);
	__type(key, struct qps_xdp_frag);
	__type(value, __u32);
} frags SEC(".maps");

/* Is UDP @port of the context's address held by one of its sockets? */
static __always_inline int held(struct xdp_md *ctx,
				const struct qps_xdp_cfg *c,
				const struct iphdr *ip,
				const struct udphdr *udp)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	int ret;

	t.ipv4.saddr = ip->saddr;
	t.ipv4.daddr = c->addr;
	t.ipv4.sport = udp->source;
	t.ipv4.dport = udp->dest;
	sk = bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS,
			       0);
	if (!sk)
		return 0;
	ret = sk->mark == c->mark;
	bpf_sk_release(sk);
	return ret;
}

static __always_inline int wanted(struct xdp_md *ctx,
				  const struct qps_xdp_cfg *c,
				  const struct ethhdr *eth,
				  const struct iphdr *ip,
				  const struct udphdr *udp)
{
	struct qps_xdp_key k = { .addr = ip->daddr, .port = udp->dest };
	__u32 *r;

	if (c->flags & QPS_XDP_C_ALL)
		return 1;
	if ((eth->h_dest[0] & 1) && (c->flags & QPS_XDP_C_MC_ALL))
		return 1;
	r = bpf_map_lookup_elem(&rules, &k);
	if (r && (*r & QPS_XDP_R_EXACT))
		return 1;
	k.port = 0;
	r = bpf_map_lookup_elem(&rules, &k);
	if (r && (*r & QPS_XDP_R_HELD) && held(ctx, c, ip, udp))
		return 1;
	k.addr = 0;
	k.port = udp->dest;
	r = bpf_map_lookup_elem(&rules, &k);
	if (r && (*r & QPS_XDP_R_EXACT))
		return 1;
	if ((c->flags & QPS_XDP_C_BCAST) && eth->h_dest[0] == 0xff &&
	    eth->h_dest[1] == 0xff && eth->h_dest[2] == 0xff &&
	    eth->h_dest[3] == 0xff && eth->h_dest[4] == 0xff &&
	    eth->h_dest[5] == 0xff)
		return held(ctx, c, ip, udp);
	return 0;
}

SEC("xdp")
int qps_xdp_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct qps_xdp_frag fk = {};
	struct qps_xdp_cfg *c;
	struct udphdr *udp;
	struct iphdr *ip;
	__u32 zero = 0, one = 1;
	__u16 frag;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5)
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	if (ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return XDP_PASS;
	frag = bpf_ntohs(ip->frag_off);
	fk.saddr = ip->saddr;
	fk.daddr = ip->daddr;
	fk.id = ip->id;
	if (frag & 0x1fff) {
		if (!bpf_map_lookup_elem(&frags, &fk))
			return XDP_PASS;
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	}
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	if (!wanted(ctx, c, eth, ip, udp))
		return XDP_PASS;
	if (frag & 0x2000)
		bpf_map_update_elem(&frags, &fk, &one, BPF_ANY);
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual MIT/GPL";
