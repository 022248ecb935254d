// SPDX-License-Identifier: MIT
/*
 * Steering rules as classic BPF socket filters.
 *
 * A NIC steers a frame to one rule: the strongest that matches (NORMAL
 * rules, then MC_DEFAULT, then ALL_DEFAULT; lower priority value first;
 * the older rule on a tie), which is what emu models. Here every rule is
 * its own socket and the kernel offers each frame to all of them, so a
 * rule's program first rejects what any stronger, overlapping rule takes
 * and only then accepts what it matches itself:
 *
 *   block(stronger 1): match -> ret 0
 *   ...
 *   block(self):       match -> ret ACCEPT
 *   ret 0
 *
 * A block compares the destination MAC (ETH spec, or the group bit for
 * MC_DEFAULT), then requires IPv4 carrying UDP, then the masked
 * addresses and ports. The kernel owns every other protocol on a shared
 * interface, so only UDP is steered. A frame whose IPv4 or UDP header is
 * too broken to read the fields (short, version not 4, IHL < 5, ports
 * beyond the end) *matches* at the layer where it broke: the strongest
 * rule whose MAC it carries takes it, and the core's parser rejects and
 * counts it instead of it vanishing in a filter. Fragments other than the
 * first carry no ports and so never match a port rule.
 *
 * Classic BPF loads are big-endian (converted to host order), hence
 * ntohl/ntohs on the rule's network-order values.
 */
#include "packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define PKT_FLOW_MAX_PRIO 0xfffu	/* as mlx4 */
#define PKT_IPPROTO_UDP 17
#define PKT_ETH_P_IP 0x0800
#define PKT_IP_MIN (QPS_PACKET_ETH_HLEN + 20)

int qps_packet_rule_parse(const struct ibv_flow_attr *a,
			  struct qps_flow_rule *r)
{
	int ret = qps_flow_parse(a, PKT_FLOW_MAX_PRIO, r);

	if (ret)
		return ret;
	if (r->vlan_mask)
		return -EOPNOTSUPP;	/* rings see untagged frames */
	/* Only IPv4 reaches an ETH_P_IP socket; src_mac is ignored as mlx4
	 * (and emu) ignore it. */
	if (r->ether_type &&
	    r->ether_type != (htons(PKT_ETH_P_IP) & r->ether_type_mask))
		return -EOPNOTSUPP;
	return 0;
}

/* Is bit 0 of the first MAC byte (group bit) fixed to 0 by @r? */
static bool unicast_only(const struct qps_flow_rule *r)
{
	return (r->mac_mask[0] & 1) && !(r->mac[0] & 1);
}

/*
 * True when no frame can match both: decided on the destination MAC only,
 * because a frame broken above L2 matches every rule whose MAC it carries.
 */
bool qps_packet_rule_disjoint(const struct qps_flow_rule *a,
			      const struct qps_flow_rule *b)
{
	unsigned int i;

	for (i = 0; i < 6; i++) {
		uint8_t m = a->mac_mask[i] & b->mac_mask[i];

		if ((a->mac[i] & m) != (b->mac[i] & m))
			return true;
	}
	if (a->tier == QPS_FLOW_TIER_MC_DEFAULT && unicast_only(b))
		return true;
	if (b->tier == QPS_FLOW_TIER_MC_DEFAULT && unicast_only(a))
		return true;
	return false;
}

/* Jump targets inside a block, resolved when the block is closed. */
enum { J_NEXT = 0, J_MATCH, J_NOMATCH };

struct emit {
	struct sock_filter *p;
	unsigned int n, max;
	unsigned int start;		/* first instruction of the block */
	uint8_t jt[QPS_PACKET_BPF_BLOCK_MAX], jf[QPS_PACKET_BPF_BLOCK_MAX];
	bool overflow;
};

static void op(struct emit *e, uint16_t code, uint32_t k, int jt, int jf)
{
	unsigned int i = e->n - e->start;

	if (e->n >= e->max || i >= QPS_PACKET_BPF_BLOCK_MAX) {
		e->overflow = true;
		return;
	}
	e->p[e->n] = (struct sock_filter){ .code = code, .k = k };
	e->jt[i] = (uint8_t)jt;
	e->jf[i] = (uint8_t)jf;
	e->n++;
}

/* A masked compare of the value loaded into A; a zero mask is no test. */
static void cmp(struct emit *e, uint32_t val, uint32_t mask, uint32_t full)
{
	if (mask != full)
		op(e, BPF_ALU | BPF_AND | BPF_K, mask, 0, 0);
	op(e, BPF_JMP | BPF_JEQ | BPF_K, val & mask, J_NEXT, J_NOMATCH);
}

static void mac_checks(struct emit *e, const struct qps_flow_rule *r)
{
	uint32_t m32 = (uint32_t)r->mac_mask[2] << 24 |
		       (uint32_t)r->mac_mask[3] << 16 |
		       (uint32_t)r->mac_mask[4] << 8 | r->mac_mask[5];
	uint32_t v32 = (uint32_t)r->mac[2] << 24 | (uint32_t)r->mac[3] << 16 |
		       (uint32_t)r->mac[4] << 8 | r->mac[5];
	uint32_t m16 = (uint32_t)r->mac_mask[0] << 8 | r->mac_mask[1];
	uint32_t v16 = (uint32_t)r->mac[0] << 8 | r->mac[1];

	if (r->tier == QPS_FLOW_TIER_MC_DEFAULT) {
		op(e, BPF_LD | BPF_B | BPF_ABS, 0, 0, 0);
		op(e, BPF_JMP | BPF_JSET | BPF_K, 1, J_NEXT, J_NOMATCH);
	}
	if (m32) {
		op(e, BPF_LD | BPF_W | BPF_ABS, 2, 0, 0);
		cmp(e, v32, m32, UINT32_MAX);
	}
	if (m16) {
		op(e, BPF_LD | BPF_H | BPF_ABS, 0, 0, 0);
		cmp(e, v16, m16, 0xffff);
	}
}

static void udp_checks(struct emit *e, const struct qps_flow_rule *r)
{
	if (!r->sport_mask && !r->dport_mask)
		return;
	/* Later fragments carry no UDP header. */
	op(e, BPF_LD | BPF_H | BPF_ABS, QPS_PACKET_ETH_HLEN + 6, 0, 0);
	op(e, BPF_JMP | BPF_JSET | BPF_K, 0x1fff, J_NOMATCH, J_NEXT);
	/* Ports beyond the frame: broken UDP, matches (see top). */
	op(e, BPF_LDX | BPF_B | BPF_MSH, QPS_PACKET_ETH_HLEN, 0, 0);
	op(e, BPF_MISC | BPF_TXA, 0, 0, 0);
	/* BPF_ADD and BPF_K are both 0, named as the BPF idiom does.
	 * NOLINTNEXTLINE(misc-redundant-expression) */
	op(e, BPF_ALU | BPF_ADD | BPF_K, QPS_PACKET_ETH_HLEN + 4, 0, 0);
	op(e, BPF_MISC | BPF_TAX, 0, 0, 0);
	op(e, BPF_LD | BPF_W | BPF_LEN, 0, 0, 0);
	op(e, BPF_JMP | BPF_JGE | BPF_X, 0, J_NEXT, J_MATCH);
	op(e, BPF_LDX | BPF_B | BPF_MSH, QPS_PACKET_ETH_HLEN, 0, 0);
	if (r->sport_mask) {
		op(e, BPF_LD | BPF_H | BPF_IND, QPS_PACKET_ETH_HLEN, 0, 0);
		cmp(e, ntohs(r->sport), ntohs(r->sport_mask), 0xffff);
	}
	if (r->dport_mask) {
		op(e, BPF_LD | BPF_H | BPF_IND, QPS_PACKET_ETH_HLEN + 2, 0, 0);
		cmp(e, ntohs(r->dport), ntohs(r->dport_mask), 0xffff);
	}
}

static void block(struct emit *e, const struct qps_flow_rule *r,
		  uint32_t verdict)
{
	unsigned int i, end;

	e->start = e->n;
	mac_checks(e, r);
	op(e, BPF_LD | BPF_W | BPF_LEN, 0, 0, 0);
	op(e, BPF_JMP | BPF_JGE | BPF_K, PKT_IP_MIN, J_NEXT, J_MATCH);
	op(e, BPF_LD | BPF_B | BPF_ABS, QPS_PACKET_ETH_HLEN, 0, 0);
	op(e, BPF_ALU | BPF_AND | BPF_K, 0xf0, 0, 0);
	op(e, BPF_JMP | BPF_JEQ | BPF_K, 0x40, J_NEXT, J_MATCH);
	op(e, BPF_LD | BPF_B | BPF_ABS, QPS_PACKET_ETH_HLEN, 0, 0);
	op(e, BPF_ALU | BPF_AND | BPF_K, 0x0f, 0, 0);
	op(e, BPF_JMP | BPF_JGE | BPF_K, 5, J_NEXT, J_MATCH);
	op(e, BPF_LD | BPF_B | BPF_ABS, QPS_PACKET_ETH_HLEN + 9, 0, 0);
	op(e, BPF_JMP | BPF_JEQ | BPF_K, PKT_IPPROTO_UDP, J_NEXT, J_NOMATCH);
	if (r->sip_mask) {
		op(e, BPF_LD | BPF_W | BPF_ABS, QPS_PACKET_ETH_HLEN + 12, 0, 0);
		cmp(e, ntohl(r->sip), ntohl(r->sip_mask), UINT32_MAX);
	}
	if (r->dip_mask) {
		op(e, BPF_LD | BPF_W | BPF_ABS, QPS_PACKET_ETH_HLEN + 16, 0, 0);
		cmp(e, ntohl(r->dip), ntohl(r->dip_mask), UINT32_MAX);
	}
	udp_checks(e, r);
	op(e, BPF_RET | BPF_K, verdict, 0, 0);
	if (e->overflow)
		return;
	/* The ret is the MATCH target; NOMATCH is the next block. */
	end = e->n - 1;
	for (i = e->start; i < end; i++) {
		uint8_t t = e->jt[i - e->start], f = e->jf[i - e->start];

		if (BPF_CLASS(e->p[i].code) != BPF_JMP)
			continue;
		e->p[i].jt = t == J_MATCH ? (uint8_t)(end - i - 1) :
			     t == J_NOMATCH ? (uint8_t)(end - i) : 0;
		e->p[i].jf = f == J_MATCH ? (uint8_t)(end - i - 1) :
			     f == J_NOMATCH ? (uint8_t)(end - i) : 0;
	}
}

int qps_packet_bpf_build(const struct qps_flow_rule *self,
			 const struct qps_flow_rule *const *stronger,
			 unsigned int nstronger, struct sock_filter *prog,
			 unsigned int max)
{
	struct emit e = { .p = prog, .max = max };
	unsigned int i;

	for (i = 0; i < nstronger; i++)
		block(&e, stronger[i], 0);
	block(&e, self, QPS_PACKET_BPF_ACCEPT);
	e.start = e.n;
	op(&e, BPF_RET | BPF_K, 0, 0, 0);
	return e.overflow ? -E2BIG : (int)e.n;
}
