/* SPDX-License-Identifier: MIT */
/*
 * The layout of a capture ring (dump.c writes into it, tools/qps_dump
 * makes it and reads it): /dev/shm/qpsock-dump.<pid>.<ctx>.<id>, created
 * by the dumper, which names it to the context through the dump_req word
 * of the context's stats segment (stat_shm.h).
 *
 *   header | nring sub-ring controls | nring data areas
 *
 * Sub-ring 0 is the receive side's (written under rx.lock), sub-ring
 * 1 + i send queue i's (under its lock): one writer each, one reader (the
 * dumper), no lock between them. A writer's position (head) and the
 * reader's (tail) count bytes from 0 and never wrap; a record starts at
 * head modulo ring_bytes, 8-aligned, and never straddles the end of the
 * data area: a writer that would cross it writes a pad record there and
 * starts again at 0.
 *
 * Each side treats the other's words as hostile: the context keeps its
 * own head privately and drops a record whenever the reader's tail makes
 * no sense; the reader checks every record's length against the area.
 */
#ifndef QPS_DUMP_SHM_H
#define QPS_DUMP_SHM_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#define QPS_DUMP_PREFIX "qpsock-dump."
#define QPS_DUMP_MAGIC 0x504d554450535150ull	/* "QPSDUMP" */
#define QPS_DUMP_LAYOUT 1
#define QPS_DUMP_ALIGN 64
/* Bounds a context accepts: every record fits in half a data area. */
#define QPS_DUMP_MIN_RING (64ull * 1024)
#define QPS_DUMP_MAX_RING (64ull * 1024 * 1024)
#define QPS_DUMP_MIN_SNAP 64u
#define QPS_DUMP_MAX_SNAP 65535u
/* The send queues' sub-rings and the receive side's. */
#define QPS_DUMP_MAX_RINGS 65u

/* struct qps_dump_hdr state, written by the context */
#define QPS_DUMP_ST_NEW 0u		/* not taken yet */
#define QPS_DUMP_ST_ATTACHED 1u		/* records are being written */
#define QPS_DUMP_ST_REFUSED 2u		/* the context would not take it */

/* struct qps_dump_rec dir */
#define QPS_DUMP_RX 0u
#define QPS_DUMP_TX 1u

/* struct qps_dump_rec flags */
/* The device computes the frame's IPv4 header and UDP checksums: they
 * are 0 in these bytes, for the reader to fill in. */
#define QPS_DUMP_F_CSUM 1u
/* A UD datagram: the device builds its RoCE v2 frame from the work
 * request, so the record is a struct qps_dump_ud and the payload, from
 * which the reader rebuilds the frame. */
#define QPS_DUMP_F_UD 2u

/* caplen of a pad record: skip len bytes, then go on at offset 0. */
#define QPS_DUMP_PAD 0xffffffffu

struct qps_dump_hdr {
	/* Stored last by the dumper (release): a context that sees it
	 * (acquire) sees the rest. */
	_Atomic uint64_t magic;
	uint32_t layout;		/* QPS_DUMP_LAYOUT */
	uint32_t hdr_size;		/* sizeof(struct qps_dump_hdr) */
	uint32_t sub_size;		/* sizeof(struct qps_dump_sub) */
	uint32_t nring;			/* the context's nsq + 1 or more */
	uint32_t snaplen;		/* bytes kept of a frame */
	uint32_t reserved;
	uint64_t ring_bytes;		/* data per sub-ring, a power of 2 */
	uint64_t size;			/* bytes of the file */
	uint64_t id;			/* the dump_req word that names it */
	int32_t pid;			/* the context's */
	uint32_t ctx_id;
	/* QPS_DUMP_ST_*: the context's answer (release, after its first
	 * records could be written); pairs with the dumper's acquire. */
	_Atomic uint32_t state;
	uint32_t reserved2;
} __attribute__((aligned(QPS_DUMP_ALIGN)));

/* One sub-ring's control words, each side's on its own cache line. */
struct qps_dump_sub {
	/* Writer: bytes written. Release after the record's bytes; pairs
	 * with the reader's acquire load. */
	_Atomic uint64_t head __attribute__((aligned(QPS_DUMP_ALIGN)));
	/* Records the writer could not fit: dropped from the capture. */
	_Atomic uint64_t drops;
	_Atomic uint64_t records;
	/* Reader: bytes consumed. Release after it read them; pairs with
	 * the writer's acquire load, which may then reuse them. */
	_Atomic uint64_t tail __attribute__((aligned(QPS_DUMP_ALIGN)));
} __attribute__((aligned(QPS_DUMP_ALIGN)));

/* One record: this, then caplen bytes of the frame, padded to 8. */
struct qps_dump_rec {
	uint32_t len;			/* bytes of the record, padded */
	uint32_t caplen;		/* frame bytes kept, or QPS_DUMP_PAD */
	uint32_t origlen;		/* frame bytes on the wire */
	uint16_t flags;			/* QPS_DUMP_F_* */
	uint8_t dir;			/* QPS_DUMP_RX, _TX */
	uint8_t reserved;
	uint64_t ts_ns;			/* CLOCK_REALTIME */
};

/* The bytes of a QPS_DUMP_F_UD record ahead of its payload. */
struct qps_dump_ud {
	uint8_t dmac[6];
	uint8_t smac[6];		/* zero: not known (received) */
	uint32_t saddr, daddr;		/* IPv4, network order */
	uint32_t dqpn, sqpn;		/* 24 bits, host order */
	uint32_t qkey;			/* host order */
	uint32_t psn;			/* 24 bits; 0: not known */
	uint32_t imm;			/* network order, with SEND_IMM */
	uint8_t opcode;			/* QPS_DUMP_BTH_UD_SEND[_IMM] */
	uint8_t ttl, tos;
	uint8_t reserved;		/* 0 */
	uint32_t len;			/* payload bytes that follow */
};

/* The BTH opcodes a UD datagram is sent with. */
#define QPS_DUMP_BTH_UD_SEND 0x64u
#define QPS_DUMP_BTH_UD_SEND_IMM 0x65u

static inline uint64_t qps_dump_align8(uint64_t v)
{
	return (v + 7) & ~(uint64_t)7;
}

struct qps_dump_geom {
	uint64_t off_sub;
	uint64_t off_data;
	uint64_t size;
};

/* The one layout for @nring sub-rings of @ring_bytes: both sides compute
 * it and the context takes a ring only when the file matches. Within the
 * bounds above nothing wraps. */
static inline void qps_dump_geom(uint32_t nring, uint64_t ring_bytes,
				 struct qps_dump_geom *g)
{
	g->off_sub = (sizeof(struct qps_dump_hdr) + QPS_DUMP_ALIGN - 1) &
		     ~(uint64_t)(QPS_DUMP_ALIGN - 1);
	g->off_data = g->off_sub + (uint64_t)nring * sizeof(struct qps_dump_sub);
	g->size = g->off_data + (uint64_t)nring * ring_bytes;
}

/* Whether a header's numbers are ones the context could write into:
 * 0 or -EINVAL. @size is the file's, @nsq the context's send queues. */
static inline int qps_dump_hdr_check(const struct qps_dump_hdr *h,
				     uint64_t size, uint32_t nsq)
{
	struct qps_dump_geom g;

	if (h->layout != QPS_DUMP_LAYOUT ||
	    h->hdr_size != sizeof(struct qps_dump_hdr) ||
	    h->sub_size != sizeof(struct qps_dump_sub))
		return -EINVAL;
	if (h->nring < nsq + 1 || h->nring > QPS_DUMP_MAX_RINGS ||
	    h->snaplen < QPS_DUMP_MIN_SNAP || h->snaplen > QPS_DUMP_MAX_SNAP ||
	    h->ring_bytes < QPS_DUMP_MIN_RING ||
	    h->ring_bytes > QPS_DUMP_MAX_RING ||
	    (h->ring_bytes & (h->ring_bytes - 1)))
		return -EINVAL;
	qps_dump_geom(h->nring, h->ring_bytes, &g);
	if (h->size != g.size || size != g.size)
		return -EINVAL;
	return 0;
}

#endif /* QPS_DUMP_SHM_H */
