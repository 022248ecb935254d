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

#define QPS_IPFRAG_BUCKETS 256u

struct qps_ipfrag {
	struct qps_fragq *tab[QPS_IPFRAG_BUCKETS];
	struct qps_fragq *oldest;	/* queues by creation: expiry order */
	struct qps_fragq *newest;
	uint64_t mem;			/* bytes charged now */
	uint64_t mem_cap;		/* 0: reassembly off, fragments dropped */
	uint64_t time_ns;
	uint32_t nq;
};

void qps_ipfrag_init(struct qps_ipfrag *f, uint64_t mem_cap,
		     uint64_t time_ns);
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

/* Drop the datagrams whose lifetime ended by @now_ns. Cheap when none is
 * held (a caller may read the clock only when f->nq). */
void qps_ipfrag_expire(struct qps_ipfrag *f, struct qps_stats *st,
		       uint64_t now_ns);

#endif /* QPS_IPFRAG_H */
