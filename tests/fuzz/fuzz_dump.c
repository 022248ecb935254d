// SPDX-License-Identifier: MIT
/*
 * fuzz_dump: qps_dump's reading of a capture sub-ring (tools/dump_read.c)
 * and its checksum filling (tools/dump_frame.c), on rings the fuzzer
 * writes: the process being captured may be hostile to a root dumper.
 *
 * Input: the reader's tail (8 bytes) and the writer's head (8), then the
 * sub-ring's bytes (RING of them, zeros past the input), in an exact-size
 * heap copy so that ASan flags any read outside it.
 *
 * Checked for every input: every record handed over lies inside the
 * sub-ring, its caplen within its length and origlen; the reader ends at
 * the head; filling the checksums of a record's exact-size copy stays
 * inside it.
 */
#include "fuzz_util.h"

#include <stdlib.h>
#include <string.h>

#include "dump_frame.h"
#include "dump_read.h"
#include "dump_roce.h"

#define RING 4096u

struct ctx {
	const uint8_t *area;
	unsigned int n;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static int take(void *arg, const struct qps_dump_rec *r, const uint8_t *data)
{
	struct ctx *c = arg;
	uint8_t *copy;

	FUZZ_CHECK(data >= c->area && data + r->caplen <= c->area + RING);
	FUZZ_CHECK(r->caplen <= r->len - sizeof(*r) && r->caplen <= r->origlen);
	copy = fuzz_dup(data, r->caplen);
	if (r->flags & QPS_DUMP_F_UD) {
		uint32_t cap = r->origlen % (DR_ROCE_MAX_FRAME + 1), wire = 0;
		uint8_t *frame = fuzz_dup(NULL, cap);
		int n = dr_roce_build(copy, r->caplen, r->origlen, frame, cap,
				      &wire);

		FUZZ_CHECK(n < 0 || ((uint32_t)n <= cap && (uint32_t)n <= wire &&
				     wire <= DR_ROCE_MAX_FRAME));
		fuzz_free(frame);
	} else if (r->flags & QPS_DUMP_F_CSUM) {
		df_fill_csums(copy, r->caplen);
	}
	fuzz_free(copy);
	c->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	uint64_t tail, head, bad = 0;
	uint8_t *area = fuzz_dup(NULL, RING);
	struct ctx c = { area, 0 };

	tail = fuzz_u32(&in);
	tail |= (uint64_t)fuzz_u32(&in) << 32;
	head = fuzz_u32(&in);
	head |= (uint64_t)fuzz_u32(&in) << 32;
	fuzz_bytes(&in, area, RING);
	FUZZ_CHECK(dr_drain(area, RING, &tail, head, take, &c, &bad) == 0);
	FUZZ_CHECK(tail == head);
	fuzz_free(area);
	return 0;
}

/* A record as dump.c writes one, at @pos; returns its length. */
static uint32_t put(uint8_t *area, uint64_t pos, const void *frame,
		    uint32_t len, uint16_t flags)
{
	struct qps_dump_rec r;

	memset(&r, 0, sizeof(r));
	r.caplen = r.origlen = len;
	r.len = (uint32_t)qps_dump_align8(sizeof(r) + len);
	r.flags = flags;
	r.ts_ns = 1;
	memcpy(area + pos, &r, sizeof(r));
	memcpy(area + pos + sizeof(r), frame, len);
	return r.len;
}

static int seed(const char *dir, const char *name, uint64_t tail,
		uint64_t head, const uint8_t *area)
{
	uint8_t buf[16 + RING];

	memcpy(buf, &tail, 8);
	memcpy(buf + 8, &head, 8);
	memcpy(buf + 16, area, RING);
	return fuzz_write_seed(dir, name, buf, sizeof(buf));
}

int fuzz_make_corpus(const char *dir)
{
	/* Ethernet, IPv4 (20), UDP (8), 4 bytes: sums left to fill. */
	static const uint8_t udp[46] = {
		0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00,
		0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0,
		198, 18, 0, 1, 198, 18, 0, 2,
		0x1f, 0x90, 0x1f, 0x91, 0, 12, 0, 0, 'd', 'a', 't', 'a',
	};
	uint8_t ud[sizeof(struct qps_dump_ud) + 4];
	uint8_t *area = calloc(1, RING);
	struct qps_dump_ud u;
	uint64_t pos = 0;
	uint32_t w[2];
	int r = 0;

	if (!area)
		return -1;
	pos += put(area, pos, udp, sizeof(udp), QPS_DUMP_F_CSUM);
	pos += put(area, pos, udp, 30, 0);
	r |= seed(dir, "two", 0, pos, area);
	r |= seed(dir, "head-short", 0, pos - 8, area);
	r |= seed(dir, "head-far", 0, pos + 2 * RING, area);
	/* A pad record filling the end of the ring, then one at 0. */
	memset(area, 0, RING);
	w[0] = 64;
	w[1] = QPS_DUMP_PAD;
	memcpy(area + RING - 64, w, sizeof(w));
	put(area, 0, udp, sizeof(udp), QPS_DUMP_F_CSUM);
	r |= seed(dir, "wrap", RING - 64, RING + 88, area);
	w[0] = 72;
	memcpy(area + RING - 64, w, sizeof(w));
	r |= seed(dir, "bad-pad", RING - 64, RING + 88, area);
	/* A UD send: its header, then 4 bytes of payload. */
	memset(area, 0, RING);
	memset(&u, 0, sizeof(u));
	u.saddr = 0x0100a8c0;
	u.daddr = 0x0200a8c0;
	u.dqpn = 0x11;
	u.sqpn = 0x12;
	u.qkey = 0x01234567;
	u.opcode = QPS_DUMP_BTH_UD_SEND;
	u.ttl = 64;
	u.len = 4;
	memcpy(ud, &u, sizeof(u));
	memcpy(ud + sizeof(u), "data", 4);
	pos = put(area, 0, ud, sizeof(ud), QPS_DUMP_F_UD);
	r |= seed(dir, "ud", 0, pos, area);
	free(area);
	return r ? -1 : 0;
}
