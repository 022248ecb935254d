/* SPDX-License-Identifier: MIT */
/*
 * IPv4 reassembly (ipfrag.c): fragments of one datagram are kept per
 * (source, destination, protocol, ID) until the datagram is whole, with
 * the kernel's limits: a memory cap (ipfrag_high_thresh), a lifetime
 * (ipfrag_time), overlaps dropping the whole datagram (RFC 5722) and
 * duplicates ignored. Runs under rx.lock, on the receive path.
 */
#ifndef QPS_IPFRAG_H
#define QPS_IPFRAG_H

#include <stdint.h>

struct qps_stats;
struct qps_fragq;

/* The table: its hash keyed per context, chains bounded (a full bucket
 * drops its oldest datagram, as FreeBSD's maxfragbucketsize), so no
 * choice of keys makes a lookup cost more than QPS_IPFRAG_CHAIN probes. */
#define QPS_IPFRAG_BUCKETS 1024u
#define QPS_IPFRAG_CHAIN 16u
/* Fragments of one datagram at most: 65,507 bytes over a 576-byte MTU
 * (119) fit; a datagram that needs more is dropped (FreeBSD: 16). */
#define QPS_IPFRAG_MAX_FRAGS 128u
/* Queues one expiry pass frees at most: the rest wait for the next
 * call, so no call holds rx.lock for long. */
#define QPS_IPFRAG_EXPIRE_BATCH 32u

struct qps_ipfrag {
	struct qps_fragq *tab[QPS_IPFRAG_BUCKETS];
	uint8_t chain[QPS_IPFRAG_BUCKETS];	/* queues per bucket */
	uint64_t key[2];		/* the hash's secret, per context */
	struct qps_fragq *oldest;	/* queues by creation: expiry order */
	struct qps_fragq *newest;
	uint64_t mem;			/* bytes charged now */
	uint64_t mem_group;		/* of them, to multicast/broadcast */
	uint64_t mem_cap;		/* 0: reassembly off, fragments dropped */
	uint64_t time_ns;
	uint32_t nq;
};

void qps_ipfrag_init(struct qps_ipfrag *f, uint64_t mem_cap,
		     uint64_t time_ns);
/* The IP ID of a fragmented datagram to @daddr: the send queue's counter
 * @ctr moved by a keyed hash of the destination (RFC 7739 5.3), so each
 * destination sees its own sequence, at an offset no one else can
 * predict. */
uint16_t qps_ipfrag_id(const struct qps_ipfrag *f, uint32_t daddr,
		       uint16_t ctr);
/* The bucket @f puts a datagram in: for tests and the benchmark. */
uint32_t qps_ipfrag_bucket(const struct qps_ipfrag *f, uint32_t saddr,
			   uint32_t daddr, uint16_t id);
void qps_ipfrag_fini(struct qps_ipfrag *f);

/*
 * qps_ipfrag_input - take one fragment (@frame, which qps_frame_parse
 * found to be one: QPS_RX_FRAGMENT). Returns 0 when it is held or
 * dropped (counted in @st), or the length of the whole datagram's frame
 * once this fragment completed it: *@out is then a malloc'd Ethernet +
 * IPv4 + UDP frame (qps_frame_reasm_hdr) the caller parses and frees.
 */
int qps_ipfrag_input(struct qps_ipfrag *f, struct qps_stats *st,
		     const void *frame, uint64_t now_ns, uint8_t **out);

/* Drop the datagrams whose lifetime ended by @now_ns, at most
 * QPS_IPFRAG_EXPIRE_BATCH of them. Cheap when none is held (a caller may
 * read the clock only when f->nq). */
void qps_ipfrag_expire(struct qps_ipfrag *f, struct qps_stats *st,
		       uint64_t now_ns);

#endif /* QPS_IPFRAG_H */
