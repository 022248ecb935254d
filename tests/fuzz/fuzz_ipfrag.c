// SPDX-License-Identifier: MIT
/*
 * fuzz_ipfrag: IPv4 reassembly (src/ipfrag.c) fed whatever fragments the
 * fuzzer makes of one datagram of its own.
 *
 * Input: a header of 4 bytes (the datagram's length, 2; the memory cap in
 * KiB, 1; a seed for its bytes, 1), then records of 8 bytes, one fragment
 * each: ID (low 2 bits, 1), offset in 8-byte units (2), length (2), flags
 * (1: bit 0 MF, bit 1 "a slice of the datagram": offset and length are
 * taken modulo it and rounded so it is a well-formed fragment of it,
 * bit 2 advance the clock past the lifetime first), 2 for the shape
 * (low 2 bits: 0 as said; 1 tiny: 8 bytes at the next 8-byte offset, MF
 * kept as given; 2 many datagrams: the ID is the shape's upper 14 bits, so
 * up to 256 datagrams share the table; 3 as 0).
 *
 * Checked for every input: nothing is read or written outside the frames
 * and the buffers (an exact-size heap copy of each frame under ASan); the
 * memory held never passes the cap and the gauge says what is held; a
 * datagram that comes out parses, and when all its fragments were slices
 * of the datagram under one ID, its payload is the datagram's; after the
 * lifetime nothing is held (after as many expiry calls as its batches
 * need); no bucket ever holds more than QPS_IPFRAG_CHAIN datagrams.
 */
#include "fuzz_util.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "ipfrag.h"

#define LIFE_NS 1000000000ull
#define DG_MAX 9000u

struct rec {
	uint16_t id;
	uint32_t off, len;
	uint8_t flags;
};

static uint8_t whole[QPS_UDP_HLEN + DG_MAX];
static size_t whole_len;

static void hdr(struct qps_frame_hdr *h, uint16_t id)
{
	memset(h, 0, sizeof(*h));
	h->dst_mac[0] = 2;
	h->src_mac[0] = 2;
	h->src_mac[5] = 1;
	h->saddr = htonl(0x0a000001);
	h->daddr = htonl(0x0a000002);
	h->sport = htons(1);
	h->dport = htons(2);
	h->ip_id = htons(id);
	h->ttl = 64;
}

static void make_whole(size_t len, uint8_t seed)
{
	struct qps_frame_hdr h;
	size_t i;

	for (i = 0; i < len; i++)
		whole[QPS_UDP_HLEN + i] = (uint8_t)(seed + i * 13);
	hdr(&h, 0);
	qps_udp_hdr_build(whole, &h, len,
			  qps_csum_partial(whole + QPS_UDP_HLEN, len, 0));
	whole_len = QPS_UDP_HLEN + len;
}

/* One fragment frame, written field by field so that malformed ones can
 * be made too (qps_frame_build_frag refuses them). */
static size_t frame_of(uint8_t *f, const struct rec *r)
{
	uint8_t *ip = f + QPS_ETH_HLEN;
	struct qps_frame_hdr h;
	uint16_t csum;
	size_t i;

	hdr(&h, r->id);
	memcpy(f, h.dst_mac, 6);
	memcpy(f + 6, h.src_mac, 6);
	qps_be16_put(f + 12, QPS_ETH_P_IP);
	memset(ip, 0, QPS_IP_HLEN);
	ip[QPS_IPOFF_VHL] = 0x45;
	qps_be16_put(ip + QPS_IPOFF_TOTLEN, (uint16_t)(QPS_IP_HLEN + r->len));
	memcpy(ip + QPS_IPOFF_ID, &h.ip_id, 2);
	qps_be16_put(ip + QPS_IPOFF_FRAG,
		     (uint16_t)(((r->flags & 1) ? QPS_IP_MF : 0) |
				(r->off / 8 & QPS_IP_OFFMASK)));
	ip[QPS_IPOFF_TTL] = 64;
	ip[QPS_IPOFF_PROTO] = QPS_IPPROTO_UDP;
	memcpy(ip + QPS_IPOFF_SADDR, &h.saddr, 4);
	memcpy(ip + QPS_IPOFF_DADDR, &h.daddr, 4);
	csum = qps_csum_fold(qps_csum_partial(ip, QPS_IP_HLEN, 0));
	memcpy(ip + QPS_IPOFF_CSUM, &csum, 2);
	for (i = 0; i < r->len; i++)
		ip[QPS_IP_HLEN + i] = r->off + i < whole_len ?
				      whole[r->off + i] : (uint8_t)i;
	return QPS_ETH_HLEN + QPS_IP_HLEN + r->len;
}

/* A slice: a well-formed fragment of the datagram. */
static void slice(struct rec *r)
{
	size_t units = (whole_len + 7) / 8;

	r->off = (uint32_t)(r->off % units) * 8;
	if (r->len == 0)
		r->len = 8;
	if (r->off + r->len >= whole_len) {
		r->len = (uint32_t)(whole_len - r->off);
		r->flags &= (uint8_t)~1u;
	} else {
		r->len &= ~7u;
		if (!r->len)
			r->len = 8;
		r->flags |= 1;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct qps_ipfrag f;
	struct qps_stats st;
	uint64_t cap, now = 0;
	bool pure = true;
	uint16_t first_id = 0, shape;
	uint32_t tiny = 0, b;
	int k = 0;
	size_t dlen = fuzz_u16(&in) % DG_MAX;

	cap = (uint64_t)fuzz_u8(&in) * 1024;
	make_whole(dlen, fuzz_u8(&in));
	memset(&st, 0, sizeof(st));
	qps_ipfrag_init(&f, cap, LIFE_NS);
	while (fuzz_in_left(&in) && k++ < 256) {
		struct rec r;
		uint8_t *frame, *out = NULL;
		size_t flen;
		int len;

		r.id = fuzz_u8(&in) & 3;
		r.off = fuzz_u16(&in);
		r.len = fuzz_u16(&in) % 1600;
		r.flags = fuzz_u8(&in);
		shape = fuzz_u16(&in);
		if ((shape & 3) == 1) {
			r.off = tiny;
			r.len = 8;
			tiny += 8;
		} else if ((shape & 3) == 2) {
			r.id = shape >> 2;
		}
		if (r.flags & 2)
			slice(&r);
		else
			pure = false;
		if (k == 1)
			first_id = r.id;
		pure &= r.id == first_id;
		if (r.flags & 4)
			now += LIFE_NS;
		frame = fuzz_dup(NULL, QPS_ETH_HLEN + QPS_IP_HLEN + r.len);
		flen = frame_of(frame, &r);
		if (qps_frame_parse(frame, flen, NULL) == QPS_RX_FRAGMENT)
			len = qps_ipfrag_input(&f, &st, frame, now, &out);
		else
			len = 0;
		fuzz_free(frame);
		FUZZ_CHECK(f.mem <= cap);
		FUZZ_CHECK(st.rx_reasm_bytes == f.mem);
		if (len > 0) {
			struct qps_frame_info fi;
			uint8_t *copy = fuzz_dup(out, (size_t)len);

			free(out);
			FUZZ_CHECK(qps_frame_parse(copy, (size_t)len, &fi) ==
					   QPS_RX_OK ||
				   !pure);
			if (pure)
				FUZZ_CHECK(fi.payload_len + QPS_UDP_HLEN ==
						   whole_len &&
					   !memcmp(fi.payload,
						   whole + QPS_UDP_HLEN,
						   fi.payload_len));
			fuzz_free(copy);
		}
	}
	for (b = 0; b < QPS_IPFRAG_BUCKETS; b++)
		FUZZ_CHECK(f.chain[b] <= QPS_IPFRAG_CHAIN);
	for (k = 0; k < 16 && f.nq; k++)
		qps_ipfrag_expire(&f, &st, now + LIFE_NS);
	FUZZ_CHECK(f.nq == 0 && f.mem == 0);
	qps_ipfrag_fini(&f);
	return 0;
}

static int seed(const char *dir, const char *name, size_t len, uint8_t cap,
		const struct rec *r, int n)
{
	uint8_t buf[4 + 8 * 16];
	int i;

	buf[0] = (uint8_t)len;
	buf[1] = (uint8_t)(len >> 8);
	buf[2] = cap;
	buf[3] = 7;
	for (i = 0; i < n; i++) {
		uint8_t *p = buf + 4 + 8 * i;

		p[0] = (uint8_t)r[i].id;
		p[1] = (uint8_t)r[i].off;
		p[2] = (uint8_t)(r[i].off >> 8);
		p[3] = (uint8_t)r[i].len;
		p[4] = (uint8_t)(r[i].len >> 8);
		p[5] = r[i].flags;
		p[6] = p[7] = 0;
	}
	return fuzz_write_seed(dir, name, buf, 4 + 8 * (size_t)n);
}

int fuzz_make_corpus(const char *dir)
{
	/* 3000 bytes in 1480-byte slices (offsets in units of 8), in
	 * order, reversed with a duplicate, and overlapping. */
	static const struct rec in_order[] = {
		{ 0, 0, 1480, 3 }, { 0, 185, 1480, 3 }, { 0, 370, 48, 2 } };
	static const struct rec reversed[] = {
		{ 0, 370, 48, 2 }, { 0, 185, 1480, 3 }, { 0, 185, 1480, 3 },
		{ 0, 0, 1480, 3 } };
	static const struct rec overlap[] = {
		{ 0, 0, 1480, 3 }, { 0, 184, 1480, 3 }, { 0, 370, 48, 2 } };
	static const struct rec raw[] = {
		{ 1, 0, 4, 1 }, { 2, 8191, 16, 0 }, { 3, 10, 12, 1 } };
	int r = 0;

	r |= seed(dir, "in-order", 3000, 64, in_order, 3);
	r |= seed(dir, "reversed-dup", 3000, 64, reversed, 4);
	r |= seed(dir, "overlap", 3000, 64, overlap, 3);
	r |= seed(dir, "malformed", 3000, 64, raw, 3);
	r |= seed(dir, "tiny-cap", 3000, 1, in_order, 3);
	return r;
}
