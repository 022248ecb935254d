// SPDX-License-Identifier: MIT
/*
 * qpsock's UD header and the GRH in front of it in a receive buffer.
 *
 * The device writes 40 bytes of GRH ahead of every UD message. RoCE v2
 * over IPv4 leaves the first 20 zero and puts the IPv4 header in the last
 * 20; IB and RoCE v1 write an IPv6-format GRH whose source and destination
 * GIDs, for a peer qpsock can address, are IPv4-mapped (::ffff:a.b.c.d).
 * The device has already checked the transport headers (ICRC, BTH, Q_Key),
 * so only what qpsock relies on is checked here: the addresses, and the
 * header qpsock itself wrote. Multi-byte fields go through memcpy: buffers
 * sit at any offset.
 */
#include "ud.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define UD_OFF_MAGIC 0
#define UD_OFF_FLAGS 1
#define UD_OFF_LEN 2
#define UD_OFF_SPORT 4
#define UD_OFF_DPORT 6
#define UD_OFF_QPN 8

/* Where the IPv4 header sits in a RoCE v2 GRH, and its fields. */
#define GRH_V4_OFF 20
#define IP4_OFF_TOS 1
#define IP4_OFF_ID 4
#define IP4_OFF_TTL 8
#define IP4_OFF_PROTO 9
#define IP4_OFF_SADDR 12
#define IP4_OFF_DADDR 16
#define IP4_PROTO_UDP 17

/* IPv6-format GRH: traffic class straddles bytes 0..1, hop limit, GIDs. */
#define GRH_V6_HOPLIMIT 7
#define GRH_V6_SGID 8
#define GRH_V6_DGID 24

int qps_ud_hdr_build(void *buf, const struct qps_ud_hdr_info *h,
		     size_t payload_len)
{
	uint8_t *p = buf;
	uint32_t qpn;

	if (payload_len > UINT16_MAX)
		return -EMSGSIZE;
	p[UD_OFF_MAGIC] = QPS_UD_MAGIC;
	p[UD_OFF_FLAGS] = 0;
	qps_be16_put(p + UD_OFF_LEN, (uint16_t)payload_len);
	memcpy(p + UD_OFF_SPORT, &h->sport, 2);
	memcpy(p + UD_OFF_DPORT, &h->dport, 2);
	qpn = htonl(h->src_qpn & QPS_UD_QPN_MASK);
	memcpy(p + UD_OFF_QPN, &qpn, 4);
	return (int)(QPS_UD_HDR_LEN + payload_len);
}

/* ::ffff:a.b.c.d; the IPv4 address (network order) into @v4. */
static bool gid_v4(const uint8_t *gid, uint32_t *v4)
{
	static const uint8_t prefix[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	if (memcmp(gid, prefix, sizeof(prefix)) != 0)
		return false;
	memcpy(v4, gid + 12, 4);
	return true;
}

/* A source no one can reply to: 0.0.0.0, 255.255.255.255 or a group. */
static bool bad_saddr(uint32_t a)
{
	uint32_t h = ntohl(a);

	return h == 0 || h == 0xffffffffu || (h >> 28) == 0xe;
}

static int parse_grh(const uint8_t *grh, struct qps_frame_hdr *h)
{
	const uint8_t *ip = grh + GRH_V4_OFF;
	static const uint8_t zero[GRH_V4_OFF];

	memset(h, 0, sizeof(*h));
	if (!memcmp(grh, zero, sizeof(zero))) {
		/* RoCE v2: the IPv4 header of the packet, options-free. */
		if (ip[0] != 0x45 || ip[IP4_OFF_PROTO] != IP4_PROTO_UDP)
			return -EPROTO;
		memcpy(&h->saddr, ip + IP4_OFF_SADDR, 4);
		memcpy(&h->daddr, ip + IP4_OFF_DADDR, 4);
		memcpy(&h->ip_id, ip + IP4_OFF_ID, 2);
		h->ttl = ip[IP4_OFF_TTL];
		h->tos = ip[IP4_OFF_TOS];
	} else if (grh[0] >> 4 == 6) {
		if (!gid_v4(grh + GRH_V6_SGID, &h->saddr) ||
		    !gid_v4(grh + GRH_V6_DGID, &h->daddr))
			return -EPROTO;
		h->ttl = grh[GRH_V6_HOPLIMIT];
		h->tos = (uint8_t)((grh[0] << 4) | (grh[1] >> 4));
	} else {
		return -EPROTO;
	}
	if (bad_saddr(h->saddr))
		return -EPROTO;
	return 0;
}

/*
 * @len is checked against the GRH first and the UD header second, and
 * the payload length in the header must account for every byte that is
 * left, so nothing outside [buf, buf + len) is read and nothing in it is
 * ignored.
 */
int qps_ud_parse(const uint8_t *buf, uint32_t len,
		 struct qps_frame_info *fi, uint32_t *src_qpn_out)
{
	struct qps_frame_info tmp;
	const uint8_t *ud;
	uint32_t qpn;
	int ret;

	if (!fi)
		fi = &tmp;
	if (len < QPS_UD_GRH_LEN)
		return -EPROTO;
	ret = parse_grh(buf, &fi->hdr);
	if (ret)
		return ret;
	ud = buf + QPS_UD_GRH_LEN;
	len -= QPS_UD_GRH_LEN;
	if (len < QPS_UD_HDR_LEN || ud[UD_OFF_MAGIC] != QPS_UD_MAGIC ||
	    ud[UD_OFF_FLAGS] != 0 ||
	    qps_be16_get(ud + UD_OFF_LEN) != len - QPS_UD_HDR_LEN)
		return -EBADMSG;
	memcpy(&qpn, ud + UD_OFF_QPN, 4);
	qpn = ntohl(qpn);
	/* The high byte is reserved: a QPN has 24 bits. */
	if (qpn & ~QPS_UD_QPN_MASK)
		return -EBADMSG;
	memcpy(&fi->hdr.sport, ud + UD_OFF_SPORT, 2);
	memcpy(&fi->hdr.dport, ud + UD_OFF_DPORT, 2);
	fi->payload = ud + QPS_UD_HDR_LEN;
	fi->payload_len = len - QPS_UD_HDR_LEN;
	if (src_qpn_out)
		*src_qpn_out = qpn;
	return 0;
}
