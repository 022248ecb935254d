// SPDX-License-Identifier: MIT
/*
 * Destination IPv4 -> next-hop MAC. Multicast and broadcast map directly;
 * unicast asks the provider (emu: the wire's port table; packet: the
 * kernel's neighbour table) and is cached in a direct-mapped table that
 * the caller owns (each send queue has one, under its lock), so senders on
 * different send queues share nothing here. An entry is valid only while
 * the provider's route generation is unchanged, which is how
 * neighbour/route changes reset cached destinations (and, through the
 * same generation, a connected endpoint's cached send QP: tx.c), and
 * how the context follows the MTU.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "qps_int.h"

/*
 * A new generation may come with a new MTU (a link event): what a datagram
 * may carry follows it, never above what the send slots hold. Raw
 * transport only: a UD message is sized by the path MTU of the QP. Two
 * senders may both do it; they store the same values.
 */
static void qps_route_mtu(struct qps_ctx *ctx, uint64_t gen)
{
	struct qps_dev_info info;
	uint32_t max;

	__atomic_store_n(&ctx->mtu_gen, gen, __ATOMIC_RELAXED);
	if (ctx->ud || ctx->ops->query(ctx->dev, &info) < 0 ||
	    info.mtu < QPS_IP_HLEN + QPS_UDP_HLEN)
		return;
	max = info.mtu - QPS_IP_HLEN - QPS_UDP_HLEN;
	if (max > ctx->max_payload_cap)
		max = ctx->max_payload_cap;
	__atomic_store_n(&ctx->info.mtu, info.mtu, __ATOMIC_RELAXED);
	__atomic_store_n(&ctx->max_payload, max, __ATOMIC_RELAXED);
}

uint64_t qps_route_gen_ask(struct qps_ctx *ctx)
{
	uint64_t gen = ctx->ops->route_gen(ctx->dev);

	if (gen != __atomic_load_n(&ctx->mtu_gen, __ATOMIC_RELAXED))
		qps_route_mtu(ctx, gen);
	return gen;
}

int qps_route_resolve(struct qps_ctx *ctx, struct qps_route_slot *cache,
		      uint32_t daddr, uint8_t mac[6], bool nowait)
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
	ret = nowait ? ctx->ops->resolve_nowait(ctx->dev, dst, mac) :
		       -EOPNOTSUPP;
	if (ret == -EOPNOTSUPP)
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
