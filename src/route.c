// SPDX-License-Identifier: MIT
/*
 * Destination IPv4 -> next-hop MAC. Multicast and broadcast map directly;
 * unicast asks the provider (emu: the wire's port table; packet: the
 * kernel's neighbour table) and is cached in a direct-mapped table that
 * the caller owns (each send queue has one, under its lock), so senders on
 * different send queues share nothing here. An entry is valid only while
 * the provider's route generation is unchanged, which is how
 * neighbour/route changes reset cached destinations (and, through the
 * same generation, a connected endpoint's cached send QP: tx.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "qps_int.h"

uint64_t qps_route_gen(struct qps_ctx *ctx)
{
	return ctx->ops->route_gen(ctx->dev);
}

int qps_route_resolve(struct qps_ctx *ctx, struct qps_route_slot *cache,
		      uint32_t daddr, uint8_t mac[6])
{
	struct qps_route_slot *slot;
	uint32_t h = ntohl(daddr);
	struct in_addr dst = { .s_addr = daddr };
	uint64_t gen;
	int ret;

	if (IN_MULTICAST(h)) {
		qps_mcast_mac(daddr, mac);
		return 0;
	}
	if (h == INADDR_BROADCAST) {
		memset(mac, 0xff, 6);
		return 0;
	}
	if (h == INADDR_ANY)
		return -EHOSTUNREACH;

	gen = qps_route_gen(ctx);
	slot = cache ? &cache[(h ^ (h >> 8)) % QPS_ROUTE_SLOTS] : NULL;
	if (slot && slot->valid && slot->daddr == daddr && slot->gen == gen) {
		memcpy(mac, slot->mac, 6);
		return 0;
	}
	ret = ctx->ops->resolve(ctx->dev, dst, mac);
	if (ret < 0)
		return ret == -EOPNOTSUPP ? -EHOSTUNREACH : ret;
	if (!slot)
		return 0;
	slot->daddr = daddr;
	slot->gen = gen;
	memcpy(slot->mac, mac, 6);
	slot->valid = true;
	return 0;
}
