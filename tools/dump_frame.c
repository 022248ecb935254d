// SPDX-License-Identifier: MIT
/*
 * dump_frame - the checksums of a frame whose context left them to the
 * device (QPS_DUMP_F_CSUM): the device sums what goes on the wire, so the
 * capture shows what the wire carried only once they are filled in here.
 * The application never pays for this.
 */
#include <string.h>

#include "dump_frame.h"

#define ETH_HLEN 14
#define IP_MIN_HLEN 20
#define UDP_HLEN 8

static uint32_t df_sum(const uint8_t *p, size_t len, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t df_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint16_t df_csum(const uint8_t *p, size_t len, uint32_t sum)
{
	return df_fold(df_sum(p, len, sum));
}

static void df_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void df_fill_csums(uint8_t *frame, size_t caplen)
{
	uint8_t *ip = frame + ETH_HLEN, *udp;
	size_t ihl, tot;
	uint32_t sum;
	uint16_t c;

	if (caplen < ETH_HLEN + IP_MIN_HLEN || frame[12] != 0x08 ||
	    frame[13] != 0x00 || (ip[0] >> 4) != 4)
		return;
	ihl = (size_t)(ip[0] & 0x0f) * 4;
	if (ihl < IP_MIN_HLEN || caplen < ETH_HLEN + ihl)
		return;
	df_put16(ip + 10, 0);
	df_put16(ip + 10, df_csum(ip, ihl, 0));
	tot = (size_t)ip[2] << 8 | ip[3];
	/* Fragments keep what they have: the device sums only whole
	 * datagrams, and qpsock sums fragments itself. */
	if (ip[9] != 17 || (ip[6] & 0x3f) || ip[7] || tot < ihl + UDP_HLEN ||
	    caplen < ETH_HLEN + tot)
		return;
	udp = ip + ihl;
	df_put16(udp + 6, 0);
	sum = df_sum(ip + 12, 8, 0) + 17 + (uint32_t)(tot - ihl);
	c = df_csum(udp, tot - ihl, sum);
	/* 0 means "no checksum" in UDP over IPv4: all ones stands for it. */
	df_put16(udp + 6, c ? c : 0xffff);
}
