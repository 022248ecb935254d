// SPDX-License-Identifier: MIT
/*
 * struct ibv_flow_attr for software providers: validated as mlx4 does
 * under device-managed flow steering, then normalized into one
 * struct qps_flow_rule that emu and packet each turn into their matcher.
 * Specs are walked by their size and copied out: they sit at 4-byte
 * offsets, below the alignment of the union struct ibv_flow_spec.
 */
#include "prov_sw.h"

#include <errno.h>
#include <string.h>

struct spec_hdr {
	enum ibv_flow_spec_type type;
	uint16_t size;
};

static void parse_eth(const uint8_t *p, struct qps_flow_rule *r)
{
	struct ibv_flow_spec_eth s;
	unsigned int i;

	memcpy(&s, p, sizeof(s));
	for (i = 0; i < 6; i++) {
		r->mac_mask[i] = s.mask.dst_mac[i];
		r->mac[i] = s.val.dst_mac[i] & s.mask.dst_mac[i];
	}
	r->ether_type_mask = s.mask.ether_type;
	r->ether_type = s.val.ether_type & s.mask.ether_type;
	r->vlan_mask = s.mask.vlan_tag;
}

static void parse_ipv4(const uint8_t *p, struct qps_flow_rule *r)
{
	struct ibv_flow_spec_ipv4 s;

	memcpy(&s, p, sizeof(s));
	r->need_ip = true;
	r->sip_mask = s.mask.src_ip;
	r->sip = s.val.src_ip & s.mask.src_ip;
	r->dip_mask = s.mask.dst_ip;
	r->dip = s.val.dst_ip & s.mask.dst_ip;
}

static void parse_udp(const uint8_t *p, struct qps_flow_rule *r)
{
	struct ibv_flow_spec_tcp_udp s;

	memcpy(&s, p, sizeof(s));
	r->need_ip = r->need_udp = true;	/* UDP over IPv4 only */
	r->sport_mask = s.mask.src_port;
	r->sport = s.val.src_port & s.mask.src_port;
	r->dport_mask = s.mask.dst_port;
	r->dport = s.val.dst_port & s.mask.dst_port;
}

int qps_flow_parse(const struct ibv_flow_attr *a, uint16_t max_prio,
		   struct qps_flow_rule *r)
{
	const uint8_t *p = (const uint8_t *)(a + 1);
	uint32_t left, seen = 0;
	unsigned int i;

	memset(r, 0, sizeof(*r));
	if (a->comp_mask || a->size < sizeof(*a) || a->priority > max_prio)
		return -EINVAL;
	if (a->flags)
		return -EOPNOTSUPP;
	switch (a->type) {
	case IBV_FLOW_ATTR_NORMAL:
		r->tier = QPS_FLOW_TIER_NORMAL;
		break;
	case IBV_FLOW_ATTR_MC_DEFAULT:
		r->tier = QPS_FLOW_TIER_MC_DEFAULT;
		break;
	case IBV_FLOW_ATTR_ALL_DEFAULT:
		r->tier = QPS_FLOW_TIER_ALL_DEFAULT;
		break;
	default:
		return -EOPNOTSUPP;
	}
	r->prio = a->priority;
	left = a->size - sizeof(*a);
	for (i = 0; i < a->num_of_specs; i++) {
		struct spec_hdr h;
		size_t want;
		uint32_t bit;

		if (left < sizeof(h))
			return -EINVAL;
		memcpy(&h, p, sizeof(h));
		switch (h.type) {
		case IBV_FLOW_SPEC_ETH:
			want = sizeof(struct ibv_flow_spec_eth);
			break;
		case IBV_FLOW_SPEC_IPV4:
			want = sizeof(struct ibv_flow_spec_ipv4);
			break;
		case IBV_FLOW_SPEC_UDP:
			want = sizeof(struct ibv_flow_spec_tcp_udp);
			break;
		default:
			return -EOPNOTSUPP;	/* TCP, IPv6, IPv4_EXT, ... */
		}
		/* One bit per spec kind (0x20, 0x30, 0x41 -> 2, 3, 4). */
		bit = 1u << ((h.type >> 4) & 7);
		if (h.size != want || h.size > left || (seen & bit))
			return -EINVAL;
		seen |= bit;
		if (h.type == IBV_FLOW_SPEC_ETH)
			parse_eth(p, r);
		else if (h.type == IBV_FLOW_SPEC_IPV4)
			parse_ipv4(p, r);
		else
			parse_udp(p, r);
		p += h.size;
		left -= h.size;
	}
	return 0;
}

bool qps_flow_rule_before(const struct qps_flow_rule *a,
			  const struct qps_flow_rule *b)
{
	if (a->tier != b->tier)
		return a->tier < b->tier;
	if (a->prio != b->prio)
		return a->prio < b->prio;
	return a->seq < b->seq;
}
