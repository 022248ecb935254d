// SPDX-License-Identifier: MIT
/*
 * Checksum offload as ConnectX-3 does it on raw-packet QPs.
 *
 * Send: a WQE whose ctrl segment has MLX4_WQE_CTRL_IP_HDR_CSUM gets its
 * IPv4 header checksum computed, one with MLX4_WQE_CTRL_TCP_UDP_CSUM its
 * UDP checksum (pseudo header, UDP header and data, over the IPv4 total
 * length), into the frame as it goes on the wire. The device overwrites
 * the fields whatever they held: the Linux stack leaves the pseudo-header
 * sum there, VMA leaves 0, and both get the right checksum. A fragment's
 * UDP bytes are not a datagram: no UDP sum is computed for one (the core
 * never asks). A frame that is not IPv4, or whose lengths do not fit the
 * frame, goes as written.
 *
 * Receive: every delivered frame is classified and checked as mlx4 fills
 * a CQE's status word (IPV4, IPV4F, IPV4OPT, UDP, IP_HDR_CSUM_OK,
 * TCP_UDP_CSUM_OK) and its checksum field (the one's complement sum over
 * pseudo header and UDP datagram: 0xffff when right). poll_cq turns
 * IPV4 | IP_HDR_CSUM_OK | TCP_UDP_CSUM_OK into IBV_WC_IP_CSUM_OK, as
 * libmlx4 does. A UDP checksum of 0 (none sent) is not called right.
 *
 * Everything here reads only [frame, frame + len).
 */
#include "emu.h"

#include <string.h>

#define EMU_IP_HLEN 20u
#define EMU_UDP_HLEN 8u
#define EMU_IP_MF 0x2000u
#define EMU_IP_OFFMASK 0x1fffu

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The IPv4 header of @f, or NULL; *@ihl its length. */
static uint8_t *ipv4_hdr(uint8_t *f, uint32_t len, uint32_t *ihl)
{
	uint8_t *ip = f + QPS_EMU_ETH_HLEN;

	if (len < QPS_EMU_ETH_HLEN + EMU_IP_HLEN || get16(f + 12) != 0x0800 ||
	    ip[0] >> 4 != 4)
		return NULL;
	*ihl = (uint32_t)(ip[0] & 0x0f) * 4;
	if (*ihl < EMU_IP_HLEN || *ihl > len - QPS_EMU_ETH_HLEN)
		return NULL;
	return ip;
}

/* The UDP datagram's length (IPv4 total length less the header) when it
 * is whole inside the frame, else 0. */
static uint32_t udp_len(const uint8_t *ip, uint32_t ihl, uint32_t len)
{
	uint32_t tot = get16(ip + 2);

	if (ip[9] != 17 || (get16(ip + 6) & (EMU_IP_MF | EMU_IP_OFFMASK)) ||
	    tot < ihl + EMU_UDP_HLEN || tot > len - QPS_EMU_ETH_HLEN)
		return 0;
	return tot - ihl;
}

static uint32_t pseudo_sum(const uint8_t *ip, uint32_t ulen)
{
	return qps_sw_csum_add(0, ip + 12, 8) + 17 + ulen;
}

void qps_emu_csum_tx(uint8_t *f, uint32_t len, uint32_t srcrb)
{
	uint32_t ihl, ulen;
	uint8_t *ip = ipv4_hdr(f, len, &ihl);

	if (!ip)
		return;
	if (srcrb & MLX4_WQE_CTRL_IP_HDR_CSUM) {
		put16(ip + 10, 0);
		put16(ip + 10, (uint16_t)~qps_sw_csum_fold(
				       qps_sw_csum_add(0, ip, ihl)));
	}
	ulen = udp_len(ip, ihl, len);
	if ((srcrb & MLX4_WQE_CTRL_TCP_UDP_CSUM) && ulen) {
		uint8_t *udp = ip + ihl;
		uint16_t s;

		put16(udp + 6, 0);
		s = qps_sw_csum_fold(qps_sw_csum_add(pseudo_sum(ip, ulen),
						     udp, ulen));
		/* Its complement 0 goes as 0xffff: 0 on the wire means "no
		 * checksum" (RFC 768). */
		put16(udp + 6, s == 0xffff ? 0xffff : (uint16_t)~s);
	}
}

uint32_t qps_emu_csum_rx(const uint8_t *frame, uint32_t len,
			 uint16_t *checksum)
{
	/* Only read: ipv4_hdr takes a writable frame for the send side. */
	uint8_t *f = (uint8_t *)(uintptr_t)frame;
	uint32_t st, ihl, ulen;
	uint8_t *ip = ipv4_hdr(f, len, &ihl);

	*checksum = 0;
	if (!ip)
		return 0;
	st = MLX4_CQE_STATUS_IPV4_PKT;
	if (ihl > EMU_IP_HLEN)
		st |= QPS_EMU_CQE_STATUS_IPV4OPT;
	if (get16(ip + 6) & (EMU_IP_MF | EMU_IP_OFFMASK))
		st |= QPS_EMU_CQE_STATUS_IPV4F;
	if (qps_sw_csum_fold(qps_sw_csum_add(0, ip, ihl)) == 0xffff)
		st |= MLX4_CQE_STATUS_IP_HDR_CSUM_OK;
	ulen = udp_len(ip, ihl, len);
	if (ulen) {
		const uint8_t *udp = ip + ihl;

		st |= QPS_EMU_CQE_STATUS_UDP;
		*checksum = qps_sw_csum_fold(
			qps_sw_csum_add(pseudo_sum(ip, ulen), udp, ulen));
		if (get16(udp + 6) != 0 && *checksum == 0xffff)
			st |= MLX4_CQE_STATUS_TCP_UDP_CSUM_OK;
	}
	return st;
}
