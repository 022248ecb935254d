// SPDX-License-Identifier: MIT
/*
 * RoCE v2 UD datagrams on the emu wire: build, parse and the ICRC. Pure
 * functions of their arguments (no device state), so the send engine,
 * the delivering process and the tests share one definition of the
 * frame:
 *
 *   Ethernet II (14) | IPv4 (20, DF) | UDP (8, dst 4791, checksum 0) |
 *   BTH (12) | DETH (8) | [ImmDt (4)] | payload | pad (0..3) | ICRC (4)
 *
 * The ICRC is the Ethernet CRC-32 (reflected 0x04c11db7, init and final
 * inversion) over 8 bytes of 0xff standing in for the LRH, then the IPv4
 * header with TOS, TTL and header checksum set to 1s, the UDP header
 * with the checksum set to 1s, the BTH with its reserved byte after the
 * P_Key (FECN/BECN/resv6) set to 1s, and everything after the BTH up to
 * the ICRC. Fields a router may rewrite are masked so that the CRC holds
 * end to end. It is sent least significant byte first, as the FCS is.
 */
#include "emu.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <string.h>

#define ROCE_ETH	14u
#define ROCE_IP		20u
#define ROCE_UDP	8u
#define ROCE_BTH	12u
#define ROCE_DETH	8u
#define ROCE_IMM	4u
#define ROCE_ICRC	4u
#define ROCE_ETH_P_IP	0x0800u
#define ROCE_IPPROTO_UDP 17u
#define ROCE_IP_DF	0x4000u

/*
 * CRC-32 (IEEE 802.3, reflected), sliced by 8: table k maps a byte to its
 * effect k bytes further on, so eight bytes cost eight lookups and one
 * dependency chain instead of eight. A NIC computes the ICRC in hardware;
 * emu pays it on both ends of every UD message, which made it most of the
 * UD path's time with the byte-at-a-time loop.
 */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	uint32_t i, j, k;

	for (i = 0; i < 256; i++) {
		uint32_t c = i;

		for (j = 0; j < 8; j++)
			c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
		crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^
					  crc_table[0][crc_table[k - 1][i] &
						       0xff];
}

static uint32_t crc_byte(uint32_t c, uint8_t b)
{
	return crc_table[0][(c ^ b) & 0xff] ^ (c >> 8);
}

/* Running CRC state (no inversions): callers start at 0xffffffff and
 * invert at the end. Bytes are read one by one: any alignment, any host
 * byte order. */
static uint32_t crc_run(uint32_t c, const uint8_t *p, uint32_t n)
{
	while (n >= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
				   (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);

		c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		    crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		    crc_table[3][p[4]] ^ crc_table[2][p[5]] ^
		    crc_table[1][p[6]] ^ crc_table[0][p[7]];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = crc_byte(c, *p++);
	return c;
}

uint32_t qps_emu_roce_icrc(const uint8_t *ip, uint32_t len)
{
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff,
					0xff, 0xff, 0xff, 0xff };
	uint8_t h[ROCE_IP + ROCE_UDP + ROCE_BTH];
	uint32_t c;

	pthread_once(&crc_once, crc_init);
	if (len < sizeof(h))
		return 0;
	memcpy(h, ip, sizeof(h));
	h[1] = 0xff;			/* TOS */
	h[8] = 0xff;			/* TTL */
	h[10] = h[11] = 0xff;		/* header checksum */
	h[ROCE_IP + 6] = h[ROCE_IP + 7] = 0xff;	/* UDP checksum */
	h[ROCE_IP + ROCE_UDP + 4] = 0xff;	/* BTH resv8a */
	c = crc_run(0xffffffffu, lrh, sizeof(lrh));
	c = crc_run(c, h, sizeof(h));
	c = crc_run(c, ip + sizeof(h), len - (uint32_t)sizeof(h));
	return ~c;
}

uint32_t qps_emu_ib_mtu(uint32_t mtu)
{
	uint32_t m;

	if (mtu < QPS_EMU_ROCE_OVERHEAD + 256)
		return 0;
	mtu -= QPS_EMU_ROCE_OVERHEAD;
	for (m = 4096; m > mtu; m >>= 1)
		;
	return m;
}

uint32_t qps_emu_roce_hdr_len(bool imm)
{
	return ROCE_ETH + ROCE_IP + ROCE_UDP + ROCE_BTH + ROCE_DETH +
	       (imm ? ROCE_IMM : 0);
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

static uint32_t get16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* RFC 1071 over a 20-byte header: 0 when its checksum field is right. */
static uint16_t ip_sum(const uint8_t *h)
{
	uint32_t s = 0;
	unsigned int i;

	for (i = 0; i < ROCE_IP; i += 2)
		s += get16(h + i);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

uint32_t qps_emu_roce_build(uint8_t *f, const struct qps_emu_roce *r,
			    uint32_t payload_len)
{
	bool imm = r->opcode == QPS_EMU_BTH_UD_SEND_IMM;
	uint32_t hdr = qps_emu_roce_hdr_len(imm);
	uint32_t pad = (4 - (payload_len & 3)) & 3;
	uint32_t l3 = hdr - ROCE_ETH + payload_len + pad + ROCE_ICRC;
	uint8_t *ip = f + ROCE_ETH, *udp = ip + ROCE_IP, *bth = udp + ROCE_UDP;
	uint8_t *deth = bth + ROCE_BTH;
	uint32_t icrc;

	memcpy(f, r->dmac, 6);
	memcpy(f + 6, r->smac, 6);
	put16(f + 12, ROCE_ETH_P_IP);

	ip[0] = 0x45;
	ip[1] = r->tos;
	put16(ip + 2, l3);
	put16(ip + 4, 0);	/* ID: 0 is fine with DF (RFC 6864) */
	put16(ip + 6, ROCE_IP_DF);
	ip[8] = r->ttl;
	ip[9] = ROCE_IPPROTO_UDP;
	put16(ip + 10, 0);
	memcpy(ip + 12, &r->sip, 4);
	memcpy(ip + 16, &r->dip, 4);
	put16(ip + 10, ip_sum(ip));

	put16(udp, r->sport);
	put16(udp + 2, QPS_EMU_ROCE_PORT);
	put16(udp + 4, l3 - ROCE_IP);
	put16(udp + 6, 0);	/* RoCE v2 allows a zero UDP checksum */

	bth[0] = r->opcode;
	bth[1] = (uint8_t)((r->se ? 0x80 : 0) | pad << 4); /* M 0, TVer 0 */
	put16(bth + 2, r->pkey);
	put32(bth + 4, r->dqpn & 0xffffff);	/* resv8a 0 */
	put32(bth + 8, r->psn & 0xffffff);	/* AckReq 0 */

	put32(deth, r->qkey);
	put32(deth + 4, r->sqpn & 0xffffff);
	if (imm)
		memcpy(deth + ROCE_DETH, &r->imm, 4);

	memset(f + hdr + payload_len, 0, pad);
	icrc = qps_emu_roce_icrc(ip, l3 - ROCE_ICRC);
	/* Least significant byte first, as an Ethernet FCS. */
	f[ROCE_ETH + l3 - 4] = (uint8_t)icrc;
	f[ROCE_ETH + l3 - 3] = (uint8_t)(icrc >> 8);
	f[ROCE_ETH + l3 - 2] = (uint8_t)(icrc >> 16);
	f[ROCE_ETH + l3 - 1] = (uint8_t)(icrc >> 24);
	return ROCE_ETH + l3;
}

enum qps_emu_roce_res qps_emu_roce_parse(const uint8_t *f, uint32_t len,
					 uint32_t local,
					 struct qps_emu_roce *r)
{
	const uint8_t *ip = f + ROCE_ETH, *udp, *bth, *deth;
	uint32_t ihl, tot, dip, pad, hdr, got;

	if (len < ROCE_ETH + ROCE_IP || get16(f + 12) != ROCE_ETH_P_IP ||
	    (ip[0] >> 4) != 4 || ip[9] != ROCE_IPPROTO_UDP ||
	    (get16(ip + 6) & 0x1fff))
		return QPS_EMU_ROCE_NOT;
	ihl = (ip[0] & 0xfu) * 4;
	if (ihl < ROCE_IP || len < ROCE_ETH + ihl + ROCE_UDP)
		return QPS_EMU_ROCE_NOT;
	udp = ip + ihl;
	memcpy(&dip, ip + 16, 4);
	if (get16(udp + 2) != QPS_EMU_ROCE_PORT ||
	    (dip != local && (ntohl(dip) >> 28) != 0xe))
		return QPS_EMU_ROCE_NOT;

	/* RoCE v2 from here: every defect is a counted drop. */
	memset(r, 0, sizeof(*r));
	tot = get16(ip + 2);
	if (ihl != ROCE_IP || ip_sum(ip) != 0 || (get16(ip + 6) & 0x2000) ||
	    tot > len - ROCE_ETH ||
	    tot < ROCE_IP + ROCE_UDP + ROCE_BTH + ROCE_DETH + ROCE_ICRC ||
	    get16(udp + 4) != tot - ROCE_IP)
		return QPS_EMU_ROCE_BAD;
	bth = udp + ROCE_UDP;
	deth = bth + ROCE_BTH;
	if (qps_emu_roce_icrc(ip, tot - ROCE_ICRC) !=
	    ((uint32_t)ip[tot - 4] | (uint32_t)ip[tot - 3] << 8 |
	     (uint32_t)ip[tot - 2] << 16 | (uint32_t)ip[tot - 1] << 24))
		return QPS_EMU_ROCE_ICRC;
	r->opcode = bth[0];
	if ((r->opcode != QPS_EMU_BTH_UD_SEND &&
	     r->opcode != QPS_EMU_BTH_UD_SEND_IMM) || (bth[1] & 0x0f) ||
	    (get16(bth + 2) & 0x7fff) != 0x7fff)
		return QPS_EMU_ROCE_BTH;
	hdr = ROCE_IP + ROCE_UDP + ROCE_BTH + ROCE_DETH +
	      (r->opcode == QPS_EMU_BTH_UD_SEND_IMM ? ROCE_IMM : 0);
	pad = (bth[1] >> 4) & 3;
	if (tot < hdr + ROCE_ICRC + pad)
		return QPS_EMU_ROCE_BAD;
	got = tot - hdr - ROCE_ICRC - pad;
	memcpy(r->dmac, f, 6);
	memcpy(r->smac, f + 6, 6);
	memcpy(&r->sip, ip + 12, 4);
	r->dip = dip;
	r->tos = ip[1];
	r->ttl = ip[8];
	r->sport = (uint16_t)get16(udp);
	r->se = bth[1] & 0x80;
	r->pkey = (uint16_t)get16(bth + 2);
	r->dqpn = get32(bth + 4) & 0xffffff;
	r->psn = get32(bth + 8) & 0xffffff;
	r->qkey = get32(deth);
	r->sqpn = get32(deth + 4) & 0xffffff;
	if (r->opcode == QPS_EMU_BTH_UD_SEND_IMM)
		memcpy(&r->imm, deth + ROCE_DETH, 4);
	r->ip = ip;
	r->payload = ip + hdr;
	r->payload_len = got;
	return QPS_EMU_ROCE_OK;
}
