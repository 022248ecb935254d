// SPDX-License-Identifier: MIT
/*
 * dump_roce - a UD record's RoCE v2 frame, as a ConnectX-3 Pro (and emu)
 * puts it on the wire:
 *
 *   Ethernet II (14) | IPv4 (20, DF, ID 0) | UDP (8, to 4791, checksum
 *   0) | BTH (12) | DETH (8) | [ImmDt (4)] | payload | pad (0..3) | ICRC
 *
 * What the record does not say is derived as the device does: the UDP
 * source port from the two QPNs (the AH has no flow label), P_Key
 * 0xffff, pad to 4 bytes. The ICRC is the CRC-32 of 8 bytes of 0xff
 * standing in for the LRH, then the packet from the IPv4 header with the
 * fields a router may change (TOS, TTL, header checksum, UDP checksum,
 * the BTH's byte after the P_Key) set to 1s; it is sent least
 * significant byte first, as an FCS.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "dump_frame.h"
#include "dump_roce.h"
#include "dump_shm.h"

#define R_ETH 14u
#define R_IP 20u
#define R_UDP 8u
#define R_BTH 12u
#define R_DETH 8u
#define R_IMM 4u
#define R_ICRC 4u
#define R_PORT 4791u
#define R_PKEY 0xffffu
#define R_QPN_MAX 0xffffffu
/* The largest payload whose IPv4 total length fits 16 bits. */
#define R_MAX_PAYLOAD (65535u - R_IP - R_UDP - R_BTH - R_DETH - R_IMM - 3u - \
		       R_ICRC)

uint32_t dr_crc32(uint32_t c, const uint8_t *p, uint32_t len)
{
	/* Filled on first use; qps_dump and the fuzzer are one thread. */
	static uint32_t table[256];
	uint32_t i, j;

	if (!table[1]) {
		for (i = 0; i < 256; i++) {
			uint32_t v = i;

			for (j = 0; j < 8; j++)
				v = (v & 1) ? (v >> 1) ^ 0xedb88320u : v >> 1;
			table[i] = v;
		}
	}
	for (i = 0; i < len; i++)
		c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
	return c;
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* 0xc000 and 14 bits of a hash of the QP pair: one pair keeps one port
 * (one ECMP path), different pairs spread. */
static uint16_t sport(uint32_t sqpn, uint32_t dqpn)
{
	uint32_t h = (sqpn * 0x9e3779b1u) ^ (dqpn * 0x85ebca6bu), fl;

	h ^= h >> 15;
	fl = h & 0xfffff;
	return (uint16_t)(0xc000 | ((fl & 0x3fff) ^ (fl >> 14)));
}

static int check(const struct qps_dump_ud *u, uint32_t caplen,
		 uint32_t origlen)
{
	if (caplen < sizeof(*u) || caplen > origlen || u->reserved ||
	    (u->opcode != QPS_DUMP_BTH_UD_SEND &&
	     u->opcode != QPS_DUMP_BTH_UD_SEND_IMM) ||
	    (u->opcode == QPS_DUMP_BTH_UD_SEND && u->imm) ||
	    u->dqpn > R_QPN_MAX || u->sqpn > R_QPN_MAX ||
	    u->psn > R_QPN_MAX || u->len > R_MAX_PAYLOAD ||
	    origlen - sizeof(*u) != u->len)
		return -EINVAL;
	return 0;
}

/* The ICRC of the packet whose @len bytes from the IPv4 header on (ICRC
 * excluded) are at @ip, with the variant fields masked. */
static uint32_t icrc(const uint8_t *ip, uint32_t len)
{
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff,
					0xff, 0xff, 0xff, 0xff };
	uint8_t h[R_IP + R_UDP + R_BTH];
	uint32_t c;

	memcpy(h, ip, sizeof(h));
	h[1] = 0xff;
	h[8] = 0xff;
	h[10] = h[11] = 0xff;
	h[R_IP + 6] = h[R_IP + 7] = 0xff;
	h[R_IP + R_UDP + 4] = 0xff;
	c = dr_crc32(0xffffffffu, lrh, sizeof(lrh));
	c = dr_crc32(c, h, sizeof(h));
	c = dr_crc32(c, ip + sizeof(h), len - (uint32_t)sizeof(h));
	return ~c;
}

/* Headers from Ethernet to ImmDt into @f; returns their length. */
static uint32_t headers(uint8_t *f, const struct qps_dump_ud *u, uint32_t l3,
			uint32_t pad)
{
	bool imm = u->opcode == QPS_DUMP_BTH_UD_SEND_IMM;
	uint8_t *ip = f + R_ETH, *udp = ip + R_IP, *bth = udp + R_UDP;
	uint8_t *deth = bth + R_BTH;

	memcpy(f, u->dmac, 6);
	memcpy(f + 6, u->smac, 6);
	put16(f + 12, 0x0800);
	ip[0] = 0x45;
	ip[1] = u->tos;
	put16(ip + 2, l3);
	put16(ip + 4, 0);
	put16(ip + 6, 0x4000);
	ip[8] = u->ttl;
	ip[9] = 17;
	put16(ip + 10, 0);
	memcpy(ip + 12, &u->saddr, 4);
	memcpy(ip + 16, &u->daddr, 4);
	put16(ip + 10, df_csum(ip, R_IP, 0));
	put16(udp, sport(u->sqpn, u->dqpn));
	put16(udp + 2, R_PORT);
	put16(udp + 4, l3 - R_IP);
	put16(udp + 6, 0);
	bth[0] = u->opcode;
	bth[1] = (uint8_t)(pad << 4);
	put16(bth + 2, R_PKEY);
	put32(bth + 4, u->dqpn);
	put32(bth + 8, u->psn);
	put32(deth, u->qkey);
	put32(deth + 4, u->sqpn);
	if (!imm)
		return R_ETH + R_IP + R_UDP + R_BTH + R_DETH;
	memcpy(deth + R_DETH, &u->imm, 4);
	return R_ETH + R_IP + R_UDP + R_BTH + R_DETH + R_IMM;
}

int dr_roce_build(const uint8_t *rec, uint32_t caplen, uint32_t origlen,
		  uint8_t *out, uint32_t cap, uint32_t *wire)
{
	uint8_t f[R_ETH + R_IP + R_UDP + R_BTH + R_DETH + R_IMM];
	struct qps_dump_ud u;
	uint32_t pad, l3, hdr, have, n, c;

	if (caplen < sizeof(u))
		return -EINVAL;
	memcpy(&u, rec, sizeof(u));
	if (check(&u, caplen, origlen) < 0)
		return -EINVAL;
	pad = (4 - (u.len & 3)) & 3;
	l3 = R_IP + R_UDP + R_BTH + R_DETH + u.len + pad + R_ICRC +
	     (u.opcode == QPS_DUMP_BTH_UD_SEND_IMM ? R_IMM : 0);
	hdr = headers(f, &u, l3, pad);
	*wire = R_ETH + l3;
	have = caplen - (uint32_t)sizeof(u);
	n = hdr < cap ? hdr : cap;
	memcpy(out, f, n);
	if (n < hdr)
		return (int)n;
	n = have < cap - hdr ? have : cap - hdr;
	memcpy(out + hdr, rec + sizeof(u), n);
	/* The pad and ICRC only when the whole payload is there. */
	if (have < u.len || cap - hdr - n < pad + R_ICRC)
		return (int)(hdr + n);
	memset(out + hdr + n, 0, pad);
	c = icrc(out + R_ETH, l3 - R_ICRC);
	n = hdr + n + pad;
	out[n] = (uint8_t)c;
	out[n + 1] = (uint8_t)(c >> 8);
	out[n + 2] = (uint8_t)(c >> 16);
	out[n + 3] = (uint8_t)(c >> 24);
	return (int)(n + R_ICRC);
}
