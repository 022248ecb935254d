// SPDX-License-Identifier: MIT
/*
 * IPv4 reassembly, as the kernel's ip_fragment.c does it for UDP:
 *
 *   - a datagram's fragments are copied out of the receive buffers (a
 *     fragment flood must not hold the receive queue's buffers) into a
 *     list sorted by offset, charged with their bookkeeping against
 *     mem_cap; a fragment that would pass the cap drops its whole
 *     datagram, which could never complete without it;
 *   - an overlap drops the whole datagram and its fragments (RFC 5722,
 *     as amended by errata 3089, which Linux applies to IPv4 too); an
 *     exact duplicate is ignored and the datagram kept;
 *   - a first fragment that does not hold the UDP header, a non-final
 *     fragment whose length is not a multiple of 8, an end beyond 65535
 *     and a second, different end are malformed (RFC 1858 for the first);
 *   - a datagram not complete within time_ns of its first fragment is
 *     dropped, checked as fragments arrive and at each progress call.
 *
 * Against a sender that chooses its fragments (anyone who can reach the
 * context's address or a joined group), as Linux hardened the same code
 * after FragmentSmack (CVE-2018-5391) and FreeBSD bounds it: the table's
 * hash is SipHash-1-3 under a per-context random key, a bucket holds at
 * most QPS_IPFRAG_CHAIN datagrams, a datagram at most
 * QPS_IPFRAG_MAX_FRAGS fragments, a fragment past the last one is
 * appended without a walk, an expiry pass frees a bounded batch, and
 * datagrams to a group or broadcast may hold half of mem_cap at most, so
 * first fragments to a group no one completes cannot stop unicast
 * reassembly.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <qpsock/qpsock.h>

#include "frames.h"
#include "ipfrag.h"

struct qps_frag {
	struct qps_frag *next;		/* by offset */
	uint32_t off;
	uint32_t len;
	uint8_t data[];
};

struct qps_fragq {
	struct qps_fragq *hnext;	/* bucket chain */
	struct qps_fragq *older, *newer;
	uint32_t saddr, daddr;
	uint16_t id;
	bool have_last;
	uint32_t total;			/* the end, once the last arrived */
	uint32_t end_seen;		/* the furthest end so far */
	uint32_t have;			/* bytes held (no overlaps: distinct) */
	bool group;			/* to multicast or broadcast */
	uint32_t nfrags;
	uint64_t expires_ns;
	uint64_t mem;
	struct qps_frag *frags;
	struct qps_frag *tail;		/* the last by offset */
	uint8_t first_hdr[QPS_ETH_HLEN + QPS_IP_HLEN];
};

void qps_ipfrag_init(struct qps_ipfrag *f, uint64_t mem_cap, uint64_t time_ns)
{
	memset(f, 0, sizeof(*f));
	f->mem_cap = mem_cap;
	f->time_ns = time_ns;
	if (getrandom(f->key, sizeof(f->key), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(f->key)) {
		struct timespec ts;

		/* Entropy not ready yet (early boot): worse than random,
		 * still not the same for every context. */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		f->key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
			    (uintptr_t)f;
		f->key[1] = (uint64_t)ts.tv_sec ^ (uintptr_t)&ts;
	}
}

#define QPS_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static void qps_sipround(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = QPS_ROTL(v[1], 13) ^ v[0];
	v[0] = QPS_ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = QPS_ROTL(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = QPS_ROTL(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = QPS_ROTL(v[1], 17) ^ v[2];
	v[2] = QPS_ROTL(v[2], 32);
}

/* SipHash-1-3 of the 16-byte message (@m0, @m1) under @key, as Linux
 * keys its fragment and flow tables. */
static uint64_t qps_siphash13(const uint64_t key[2], uint64_t m0, uint64_t m1)
{
	uint64_t v[4] = {
		key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull,
		key[0] ^ 0x6c7967656e657261ull, key[1] ^ 0x7465646279746573ull,
	};
	uint64_t last = (uint64_t)16 << 56;

	v[3] ^= m0;
	qps_sipround(v);
	v[0] ^= m0;
	v[3] ^= m1;
	qps_sipround(v);
	v[0] ^= m1;
	v[3] ^= last;
	qps_sipround(v);
	v[0] ^= last;
	v[2] ^= 0xff;
	qps_sipround(v);
	qps_sipround(v);
	qps_sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint16_t qps_ipfrag_id(const struct qps_ipfrag *f, uint32_t daddr,
		       uint16_t ctr)
{
	/* m1 = 2^16, which no ID reaches, keeps these apart from the
	 * table's hashes. */
	return (uint16_t)(ctr + qps_siphash13(f->key, daddr, 1u << 16));
}

uint32_t qps_ipfrag_bucket(const struct qps_ipfrag *f, uint32_t saddr,
			   uint32_t daddr, uint16_t id)
{
	return (uint32_t)(qps_siphash13(f->key,
					(uint64_t)saddr | (uint64_t)daddr << 32,
					id) % QPS_IPFRAG_BUCKETS);
}

static void qps_fragq_free(struct qps_ipfrag *f, struct qps_fragq *q)
{
	struct qps_fragq **pp;
	struct qps_frag *fr, *next;

	uint32_t b = qps_ipfrag_bucket(f, q->saddr, q->daddr, q->id);

	pp = &f->tab[b];
	while (*pp != q)
		pp = &(*pp)->hnext;
	*pp = q->hnext;
	f->chain[b]--;
	if (q == f->oldest)
		f->oldest = q->newer;
	else
		q->older->newer = q->newer;
	if (q == f->newest)
		f->newest = q->older;
	else
		q->newer->older = q->older;
	for (fr = q->frags; fr; fr = next) {
		next = fr->next;
		free(fr);
	}
	f->mem -= q->mem;
	if (q->group)
		f->mem_group -= q->mem;
	f->nq--;
	free(q);
}

void qps_ipfrag_fini(struct qps_ipfrag *f)
{
	while (f->oldest)
		qps_fragq_free(f, f->oldest);
}

void qps_ipfrag_expire(struct qps_ipfrag *f, struct qps_stats *st,
		       uint64_t now_ns)
{
	uint32_t n = 0;

	while (f->oldest && f->oldest->expires_ns <= now_ns &&
	       n++ < QPS_IPFRAG_EXPIRE_BATCH) {
		qps_fragq_free(f, f->oldest);
		st->rx_reasm_timeout++;
	}
	st->rx_reasm_bytes = f->mem;
}

static struct qps_fragq *qps_fragq_find(struct qps_ipfrag *f,
					const struct qps_frag_info *fi)
{
	struct qps_fragq *q;

	q = f->tab[qps_ipfrag_bucket(f, fi->saddr, fi->daddr, fi->id)];
	for (; q; q = q->hnext)
		if (q->saddr == fi->saddr && q->daddr == fi->daddr &&
		    q->id == fi->id)
			return q;
	return NULL;
}

static bool qps_ipfrag_group(uint32_t daddr)
{
	uint32_t a = ntohl(daddr);

	return (a & 0xf0000000u) == 0xe0000000u || a == 0xffffffffu;
}

/* Whether @q may be charged @n more bytes: the cap, and half of it for
 * datagrams to a group. */
static bool qps_ipfrag_room(const struct qps_ipfrag *f, bool group, size_t n)
{
	if (f->mem + n > f->mem_cap)
		return false;
	return !group || f->mem_group + n <= f->mem_cap / 2;
}

static void qps_ipfrag_charge(struct qps_ipfrag *f, struct qps_fragq *q,
			      size_t n)
{
	q->mem += n;
	f->mem += n;
	if (q->group)
		f->mem_group += n;
}

static struct qps_fragq *qps_fragq_new(struct qps_ipfrag *f,
				       struct qps_stats *st,
				       const struct qps_frag_info *fi,
				       uint64_t now_ns)
{
	uint32_t b = qps_ipfrag_bucket(f, fi->saddr, fi->daddr, fi->id);
	bool group = qps_ipfrag_group(fi->daddr);
	struct qps_fragq *q;

	if (f->chain[b] >= QPS_IPFRAG_CHAIN) {
		/* New ones go in front: the last of the chain is its
		 * oldest, the one least likely to complete. */
		for (q = f->tab[b]; q->hnext; q = q->hnext)
			;
		qps_fragq_free(f, q);
		st->rx_reasm_mem++;
	}
	if (!qps_ipfrag_room(f, group, sizeof(*q)))
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->saddr = fi->saddr;
	q->daddr = fi->daddr;
	q->id = fi->id;
	q->expires_ns = now_ns + f->time_ns;
	q->group = group;
	qps_ipfrag_charge(f, q, sizeof(*q));
	q->hnext = f->tab[b];
	f->tab[b] = q;
	f->chain[b]++;
	q->older = f->newest;
	if (f->newest)
		f->newest->newer = q;
	else
		f->oldest = q;
	f->newest = q;
	f->nq++;
	return q;
}

/* The RFC 1858 and RFC 791 rules a fragment must pass on its own. */
static bool qps_frag_malformed(const struct qps_frag_info *fi)
{
	uint32_t end = fi->off + fi->len;

	if (end > QPS_IP_MAX_TOTLEN - QPS_IP_HLEN || !fi->len)
		return true;
	if (fi->more && (fi->len & 7))
		return true;
	return fi->off == 0 && fi->len < QPS_UDP_HLEN;
}

enum qps_frag_verdict { QPS_FRAG_ADD, QPS_FRAG_DUP, QPS_FRAG_OVERLAP,
			QPS_FRAG_BAD };

/* Where @fi goes in @q's list (*@pos: the link to insert at), and
 * whether it may. */
static enum qps_frag_verdict qps_frag_place(struct qps_fragq *q,
					    const struct qps_frag_info *fi,
					    struct qps_frag ***pos)
{
	uint32_t end = fi->off + fi->len;
	struct qps_frag **pp = &q->frags;

	if (!fi->more) {
		if (q->have_last ? end != q->total : end < q->end_seen)
			return QPS_FRAG_BAD;
	} else if (q->have_last && end > q->total) {
		return QPS_FRAG_BAD;
	}
	if (q->nfrags >= QPS_IPFRAG_MAX_FRAGS)
		return QPS_FRAG_BAD;
	/* In order, the usual case: after the last, no walk. */
	if (q->tail && q->tail->off + q->tail->len <= fi->off) {
		*pos = &q->tail->next;
		return QPS_FRAG_ADD;
	}
	while (*pp && (*pp)->off + (*pp)->len <= fi->off)
		pp = &(*pp)->next;
	if (*pp && (*pp)->off == fi->off && (*pp)->len == fi->len)
		return QPS_FRAG_DUP;
	if (*pp && (*pp)->off < end)
		return QPS_FRAG_OVERLAP;
	*pos = pp;
	return QPS_FRAG_ADD;
}

/* The whole datagram, out of a complete queue, which is freed. */
static int qps_fragq_join(struct qps_ipfrag *f, struct qps_fragq *q,
			  uint8_t **out)
{
	size_t hdr = QPS_ETH_HLEN + QPS_IP_HLEN;
	const struct qps_frag *fr;
	uint8_t *p;
	int len = (int)(hdr + q->total);

	p = malloc(hdr + q->total);
	if (!p) {
		qps_fragq_free(f, q);
		return -1;
	}
	qps_frame_reasm_hdr(p, q->first_hdr, q->total);
	for (fr = q->frags; fr; fr = fr->next)
		memcpy(p + hdr + fr->off, fr->data, fr->len);
	qps_fragq_free(f, q);
	*out = p;
	return len;
}

int qps_ipfrag_input(struct qps_ipfrag *f, struct qps_stats *st,
		     const void *frame, uint64_t now_ns, uint8_t **out)
{
	struct qps_frag_info fi;
	struct qps_frag **pos = NULL, *fr;
	struct qps_fragq *q;
	int ret = 0;

	qps_ipfrag_expire(f, st, now_ns);
	qps_frag_info_get(frame, &fi);
	if (qps_frag_malformed(&fi)) {
		st->rx_reasm_bad++;
		return 0;
	}
	q = qps_fragq_find(f, &fi);
	if (!q) {
		q = qps_fragq_new(f, st, &fi, now_ns);
		if (!q) {
			st->rx_reasm_mem++;
			goto out;
		}
	}
	switch (qps_frag_place(q, &fi, &pos)) {
	case QPS_FRAG_DUP:
		st->rx_reasm_dup++;
		goto out;
	case QPS_FRAG_OVERLAP:
		st->rx_reasm_overlap++;
		qps_fragq_free(f, q);
		goto out;
	case QPS_FRAG_BAD:
		st->rx_reasm_bad++;
		qps_fragq_free(f, q);
		goto out;
	case QPS_FRAG_ADD:
		break;
	}
	if (!qps_ipfrag_room(f, q->group, sizeof(*fr) + fi.len) ||
	    !(fr = malloc(sizeof(*fr) + fi.len))) {
		st->rx_reasm_mem++;
		qps_fragq_free(f, q);
		goto out;
	}
	fr->off = fi.off;
	fr->len = fi.len;
	memcpy(fr->data, fi.data, fi.len);
	fr->next = *pos;
	*pos = fr;
	if (!fr->next)
		q->tail = fr;
	q->nfrags++;
	qps_ipfrag_charge(f, q, sizeof(*fr) + fi.len);
	q->have += fi.len;
	if (fi.off + fi.len > q->end_seen)
		q->end_seen = fi.off + fi.len;
	if (fi.off == 0)
		memcpy(q->first_hdr, frame, sizeof(q->first_hdr));
	if (!fi.more) {
		q->have_last = true;
		q->total = fi.off + fi.len;
	}
	/* No overlaps: the bytes held add up to the end only when every
	 * hole is filled. */
	if (q->have_last && q->have == q->total) {
		ret = qps_fragq_join(f, q, out);
		if (ret < 0) {
			st->rx_reasm_mem++;
			ret = 0;
		} else {
			st->rx_reasm_ok++;
		}
	}
out:
	st->rx_reasm_bytes = f->mem;
	return ret;
}
