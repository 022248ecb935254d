// SPDX-License-Identifier: MIT
/*
 * Steering rules in libibverbs' own layout, so that the verbs provider can
 * hand them to ibv_create_flow unchanged and the others parse one format.
 *
 * The layout depends only on which fields are set, never on the device:
 *   struct ibv_flow_attr
 *   struct ibv_flow_spec_eth       always (mask all-ones on dst_mac when
 *                                  match_mac, else all-zero: any frame)
 *   struct ibv_flow_spec_ipv4      when an address or a port is set; a zero
 *                                  address has a zero mask, others /32
 *   struct ibv_flow_spec_tcp_udp   IBV_FLOW_SPEC_UDP, when a port is set; a
 *                                  zero port has a zero mask
 * The IPv4 spec comes with every UDP spec so that a port rule matches
 * only UDP over IPv4, never over IPv6.
 * attr.size counts the attr and all its specs; port is 1 (one port per
 * device in qpsock).
 */
#include "provider.h"

#include <string.h>

_Static_assert(sizeof(struct ibv_flow_attr) +
	       sizeof(struct ibv_flow_spec_eth) +
	       sizeof(struct ibv_flow_spec_ipv4) +
	       sizeof(struct ibv_flow_spec_tcp_udp) <= QPS_FLOW_ATTR_MAX,
	       "QPS_FLOW_ATTR_MAX too small for ETH+IPv4+UDP");

struct ibv_flow_attr *qps_flow_attr_build(void *buf,
					  const struct qps_flow_match *m)
{
	struct ibv_flow_attr *attr = buf;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_ipv4 ipv4;
	struct ibv_flow_spec_tcp_udp udp;
	uint8_t *p = buf;
	size_t off = sizeof(*attr);
	bool want_udp = m->dst_port || m->src_port;
	bool want_ipv4 = want_udp || m->dst_ip || m->src_ip;

	memset(buf, 0, QPS_FLOW_ATTR_MAX);
	attr->type = m->type;
	attr->priority = m->priority;
	attr->port = 1;

	memset(&eth, 0, sizeof(eth));
	eth.type = IBV_FLOW_SPEC_ETH;
	eth.size = sizeof(eth);
	if (m->match_mac) {
		memcpy(eth.val.dst_mac, m->dst_mac, 6);
		memset(eth.mask.dst_mac, 0xff, 6);
	}
	memcpy(p + off, &eth, sizeof(eth));
	off += sizeof(eth);
	attr->num_of_specs++;

	if (want_ipv4) {
		memset(&ipv4, 0, sizeof(ipv4));
		ipv4.type = IBV_FLOW_SPEC_IPV4;
		ipv4.size = sizeof(ipv4);
		ipv4.val.dst_ip = m->dst_ip;
		ipv4.val.src_ip = m->src_ip;
		ipv4.mask.dst_ip = m->dst_ip ? UINT32_MAX : 0;
		ipv4.mask.src_ip = m->src_ip ? UINT32_MAX : 0;
		memcpy(p + off, &ipv4, sizeof(ipv4));
		off += sizeof(ipv4);
		attr->num_of_specs++;
	}

	if (want_udp) {
		memset(&udp, 0, sizeof(udp));
		udp.type = IBV_FLOW_SPEC_UDP;
		udp.size = sizeof(udp);
		udp.val.dst_port = m->dst_port;
		udp.val.src_port = m->src_port;
		udp.mask.dst_port = m->dst_port ? UINT16_MAX : 0;
		udp.mask.src_port = m->src_port ? UINT16_MAX : 0;
		memcpy(p + off, &udp, sizeof(udp));
		off += sizeof(udp);
		attr->num_of_specs++;
	}

	attr->size = (uint16_t)off;
	return attr;
}
