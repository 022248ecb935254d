/* SPDX-License-Identifier: MIT */
/*
 * Helpers for software providers (not installed): the pieces emu and
 * packet would otherwise each carry, since both do in software what a NIC
 * does in hardware.
 *
 *   flow_parse.c  struct ibv_flow_attr -> one normalized match
 *   sw_mr.c       MR table: slot array, lkey = generation << 8 | slot
 */
#ifndef QPS_PROV_SW_H
#define QPS_PROV_SW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider.h"

/* The Internet checksum (RFC 1071) as a NIC computes it: @len bytes at
 * @p as big-endian 16-bit words (an odd last byte padded), added to @sum,
 * not folded. Plain on purpose: the devices' reference, not a fast path. */
static inline uint32_t qps_sw_csum_add(uint32_t sum, const uint8_t *p,
				       size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

/* @sum folded to 16 bits, not complemented. */
static inline uint16_t qps_sw_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* Lower tier wins before priority, as under mlx4 flow steering. */
enum qps_flow_tier {
	QPS_FLOW_TIER_NORMAL = 0,
	QPS_FLOW_TIER_MC_DEFAULT = 1,
	QPS_FLOW_TIER_ALL_DEFAULT = 2,
};

/*
 * A parsed steering rule. Values are pre-masked; addresses and ports stay
 * in network order. Only the destination MAC is kept from the ETH spec (mlx4
 * ignores src_mac); ether_type and vlan_tag are kept raw for the provider
 * to accept or refuse, since what it can honour differs.
 */
struct qps_flow_rule {
	enum qps_flow_tier tier;
	uint16_t prio;
	uint32_t seq;			/* creation order, set by the provider */
	uint8_t mac[6], mac_mask[6];	/* destination MAC */
	uint16_t ether_type, ether_type_mask;	/* network order */
	uint16_t vlan_mask;
	bool need_ip, need_udp;		/* an IPv4 / UDP spec was given */
	uint32_t sip, sip_mask, dip, dip_mask;
	uint16_t sport, sport_mask, dport, dport_mask;
};

/* 0; -EINVAL for a bad comp_mask, size, priority above @max_prio, a
 * duplicate spec or a spec of the wrong size; -EOPNOTSUPP for flags, an
 * unknown rule type or a spec other than ETH, IPv4, UDP. */
int qps_flow_parse(const struct ibv_flow_attr *attr, uint16_t max_prio,
		   struct qps_flow_rule *out);

/* The lkey's low byte is the slot, so a table has at most 256. */
#define QPS_SW_MR_SLOTS 256u

struct qps_sw_mr_table {
	pthread_mutex_t lock;
	unsigned int max;		/* slots in use: <= QPS_SW_MR_SLOTS */
	uint32_t gen;			/* next lkey generation */
	struct qps_mr *slot[QPS_SW_MR_SLOTS];
};

void qps_sw_mr_init(struct qps_sw_mr_table *t, unsigned int max);
/* Frees the MRs still registered. */
void qps_sw_mr_fini(struct qps_sw_mr_table *t);
/* 0, -EINVAL (NULL, empty or wrapping range) or -ENOMEM (table full). */
int qps_sw_mr_reg(struct qps_sw_mr_table *t, struct qps_dev *dev, void *addr,
		  size_t len, struct qps_mr **mr_out);
int qps_sw_mr_dereg(struct qps_sw_mr_table *t, struct qps_mr *mr);
/* Copy out the lkey's range; 0 or -EINVAL. */
int qps_sw_mr_lookup(struct qps_sw_mr_table *t, uint32_t lkey,
		     uintptr_t *addr, size_t *len);

#endif
