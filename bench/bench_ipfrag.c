// SPDX-License-Identifier: MIT
/*
 * qps_bench ipfrag [--json] [--rounds R]: the reassembly's cost per
 * fragment under what a hostile sender chooses, measured side by side in
 * one run, each case on a fresh table (src/ipfrag.c):
 *
 *   spread          first fragments of 12,000 datagrams from many
 *                   sources: each starts a datagram that never completes;
 *   collide_old     the same number, chosen so that they all share one
 *                   bucket of the table before it was keyed (an unkeyed
 *                   hash, 256 buckets: what a sender could compute);
 *   collide_new     chosen to share one bucket under this table's own
 *                   key, which a sender does not have: the worst case;
 *   tiny_1000       one datagram in 1,000 ascending 8-byte fragments;
 *   tiny_8000       the same with 8,000;
 *   group_flood     12,000 first fragments to a group, then one unicast
 *                   datagram in three fragments, which must complete.
 *
 * Frames are built before the clock starts. Each round runs the cases in
 * a rotating order; the result is each case's median ns per fragment and
 * the ratios the targets name (collide/spread, tiny 8,000 over 1,000 in
 * total cost).
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <qpsock/qpsock.h>

#include "frames.h"
#include "ipfrag.h"
#include "qps_bench.h"

#define BF_FLOOD 12000u
#define BF_FRAME 64u		/* a first fragment: UDP header + 8 bytes */
#define BF_ROUNDS_MAX 99
#define BF_MEM (256u << 20)

enum { BF_SPREAD, BF_COLLIDE_OLD, BF_COLLIDE_NEW, BF_TINY_1K, BF_TINY_8K,
       BF_GROUP, BF_CASES };

static const char *const bf_name[BF_CASES] = {
	"spread", "collide_old", "collide_new", "tiny_1000", "tiny_8000",
	"group_flood",
};

struct bf_set {
	uint8_t (*frame)[BF_FRAME];
	uint32_t n;
};

static uint64_t bf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The table's hash before it was keyed, which anyone could compute. */
static uint32_t bf_old_bucket(uint32_t saddr, uint32_t daddr, uint16_t id)
{
	uint32_t h = saddr * 0x9e3779b1u ^ daddr ^ (uint32_t)id << 16;

	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return h % 256u;
}

/* A fragment of @ip_len bytes at @off of datagram (@s, @d, @id). */
static void bf_frag(uint8_t *f, uint32_t s, uint32_t d, uint16_t id,
		    size_t off, size_t ip_len, bool more)
{
	struct qps_frame_hdr h;

	memset(&h, 0, sizeof(h));
	h.src_mac[0] = 2;
	h.dst_mac[0] = 2;
	h.dst_mac[5] = 1;
	h.saddr = s;
	h.daddr = d;
	h.ip_id = id;
	h.ttl = 64;
	memset(f + QPS_ETH_HLEN + QPS_IP_HLEN, 0x5a, ip_len);
	if (off == 0)
		qps_udp_hdr_build(f + QPS_ETH_HLEN + QPS_IP_HLEN, &h, 8, 0);
	(void)qps_frame_build_frag(f, &h, ip_len, off, more);
}

static int bf_alloc(struct bf_set *set, uint32_t n)
{
	set->frame = calloc(n, BF_FRAME);
	set->n = n;
	return set->frame ? 0 : -1;
}

/* First fragments from many sources; @mode 1: all in old bucket 0;
 * @mode 2: all in the bucket @key's table puts the first in. */
static int bf_flood(struct bf_set *set, int mode, const struct qps_ipfrag *key,
		    uint32_t daddr)
{
	uint32_t s = htonl(0x0a000001), i = 0, want = UINT32_MAX;
	uint16_t id = 0;

	if (bf_alloc(set, BF_FLOOD) < 0)
		return -1;
	while (i < BF_FLOOD) {
		uint32_t b;

		if (++id == 0)
			s = htonl(ntohl(s) + 1);
		if (mode == 1)
			b = bf_old_bucket(s, daddr, id);
		else if (mode == 2)
			b = qps_ipfrag_bucket(key, s, daddr, id);
		else
			b = want = 0;
		if (mode && want == UINT32_MAX)
			want = b;
		if (mode && b != want)
			continue;
		bf_frag(set->frame[i++], s, daddr, id, 0, 16, true);
		if (!mode)
			s = htonl(ntohl(s) + 7);
	}
	return 0;
}

static int bf_tiny(struct bf_set *set, uint32_t n)
{
	uint32_t i;

	if (bf_alloc(set, n) < 0)
		return -1;
	for (i = 0; i < n; i++)
		bf_frag(set->frame[i], htonl(0x0a000002), htonl(0x0a000003),
			htons(77), (size_t)i * 8, 8, i + 1 < n);
	return 0;
}

/* The unicast datagram fed after the group flood: three fragments. */
static void bf_unicast(uint8_t f[3][BF_FRAME])
{
	uint32_t s = htonl(0x0a000009), d = htonl(0x0a000003);

	bf_frag(f[0], s, d, htons(4242), 0, 16, true);
	bf_frag(f[1], s, d, htons(4242), 16, 16, true);
	bf_frag(f[2], s, d, htons(4242), 32, 8, false);
}

/* Feeds @set (and @tail) to a fresh table seeded as @key; ns per frame.
 * *@done counts datagrams completed. */
static double bf_run(const struct bf_set *set, uint8_t (*tail)[BF_FRAME],
		     uint32_t ntail, const struct qps_ipfrag *key,
		     uint32_t *done)
{
	static struct qps_ipfrag f;
	struct qps_stats st;
	uint64_t t0, t1;
	uint8_t *out;
	uint32_t i;

	qps_ipfrag_init(&f, BF_MEM, 30ull * 1000000000u);
	memcpy(f.key, key->key, sizeof(f.key));
	memset(&st, 0, sizeof(st));
	t0 = bf_now_ns();
	for (i = 0; i < set->n + ntail; i++) {
		const uint8_t *fr = i < set->n ? set->frame[i] :
				    tail[i - set->n];

		out = NULL;
		if (qps_ipfrag_input(&f, &st, fr, 1, &out) > 0) {
			(*done)++;
			free(out);
		}
	}
	t1 = bf_now_ns();
	qps_ipfrag_fini(&f);
	return (double)(t1 - t0) / (double)(set->n + ntail);
}

static int bf_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double bf_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bf_cmp);
	return v[n / 2];
}

int qps_bench_ipfrag(int argc, char **argv)
{
	static double ns[BF_CASES][BF_ROUNDS_MAX];
	struct bf_set set[BF_CASES];
	uint8_t uni[3][BF_FRAME];
	struct qps_ipfrag key;
	double med[BF_CASES], old_x, new_x, tiny_x;
	uint32_t delivered = 0, done;
	int rounds = 9, json = 0, i, r, c;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: qps_bench ipfrag [--json] "
				"[--rounds R]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > BF_ROUNDS_MAX)
		rounds = 9;
	qps_ipfrag_init(&key, BF_MEM, 1);
	if (bf_flood(&set[BF_SPREAD], 0, &key, htonl(0x0a000003)) ||
	    bf_flood(&set[BF_COLLIDE_OLD], 1, &key, htonl(0x0a000003)) ||
	    bf_flood(&set[BF_COLLIDE_NEW], 2, &key, htonl(0x0a000003)) ||
	    bf_tiny(&set[BF_TINY_1K], 1000) || bf_tiny(&set[BF_TINY_8K], 8000) ||
	    bf_flood(&set[BF_GROUP], 0, &key, htonl(0xef010101))) {
		fprintf(stderr, "qps_bench ipfrag: out of memory\n");
		return 1;
	}
	bf_unicast(uni);
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < BF_CASES; i++) {
			c = (i + r) % BF_CASES;
			done = 0;
			ns[c][r] = bf_run(&set[c], c == BF_GROUP ? uni : NULL,
					  c == BF_GROUP ? 3 : 0, &key, &done);
			if (c == BF_GROUP)
				delivered += done == 1;
		}
	}
	for (c = 0; c < BF_CASES; c++)
		med[c] = bf_median(ns[c], rounds);
	old_x = med[BF_COLLIDE_OLD] / med[BF_SPREAD];
	new_x = med[BF_COLLIDE_NEW] / med[BF_SPREAD];
	tiny_x = med[BF_TINY_8K] * 8000 / (med[BF_TINY_1K] * 1000);
	if (json) {
		printf("{\"bench\":\"ipfrag\",\"rounds\":%d,\"flood\":%u,"
		       "\"cases\":[", rounds, BF_FLOOD);
		for (c = 0; c < BF_CASES; c++)
			printf("%s{\"case\":\"%s\",\"ns_per_frag\":%.1f}",
			       c ? "," : "", bf_name[c], med[c]);
		printf("],\"collide_old_vs_spread\":%.2f,"
		       "\"collide_new_vs_spread\":%.2f,"
		       "\"tiny_8000_vs_1000_total\":%.2f,"
		       "\"unicast_after_group_flood\":%u,\"of\":%d}\n",
		       old_x, new_x, tiny_x, delivered, rounds);
	} else {
		printf("ipfrag, %u-datagram floods, %d rounds (median):\n",
		       BF_FLOOD, rounds);
		for (c = 0; c < BF_CASES; c++)
			printf("  %-12s %8.1f ns/fragment\n", bf_name[c],
			       med[c]);
		printf("  colliding/spread: %.2f (old hash), %.2f (own key); "
		       "8,000 tiny fragments cost %.2fx 1,000; unicast after "
		       "the group flood delivered %u of %d\n", old_x, new_x,
		       tiny_x, delivered, rounds);
	}
	for (c = 0; c < BF_CASES; c++)
		free(set[c].frame);
	return delivered == (uint32_t)rounds ? 0 : 1;
}
