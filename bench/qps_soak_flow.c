// SPDX-License-Identifier: MIT
/*
 * qps_soak: the flow table (who sends what to whom, the same in every
 * process), the datagram format and the per-flow receive bookkeeping.
 */
#include <arpa/inet.h>
#include <string.h>

#include "qps_soak.h"

/* Three priorities that land in the three bands (prio2band 0->1, 1->2,
 * 6->0), so every band carries traffic. */
static const uint8_t soak_prios[3] = { 0, 1, 6 };

struct in_addr soak_ctx_addr(unsigned int p, unsigned int c)
{
	struct in_addr a;

	a.s_addr = htonl(0xc6120000u | (100 + 8 * p + c));	/* 198.18.0.x */
	return a;
}

struct in_addr soak_group(unsigned int g)
{
	struct in_addr a;

	a.s_addr = htonl(0xef010000u | (1 + g));		/* 239.1.0.x */
	return a;
}

unsigned int soak_group_k(const struct soak_cfg *cfg, unsigned int g)
{
	return g + 1 == cfg->groups ? cfg->fanout : 1;
}

unsigned int soak_rxep_thread(unsigned int t, unsigned int kind)
{
	return 3 * t + kind;
}

unsigned int soak_rxep_group(const struct soak_cfg *cfg, unsigned int g,
			     unsigned int j)
{
	unsigned int e = 3 * cfg->threads, i;

	for (i = 0; i < g; i++)
		e += soak_group_k(cfg, i);
	return e + j;
}

static struct sockaddr_in soak_sin(struct in_addr a, unsigned int port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_addr = a;
	s.sin_port = htons((uint16_t)port);
	return s;
}

/* Append the two flows (default and alternate priority) of one
 * destination of endpoint (@p, @t, @kind). */
static void soak_add(struct soak_topo *topo, unsigned int p, unsigned int t,
		     unsigned int kind, const struct soak_flow *proto)
{
	unsigned int i, base = p + t + kind;

	for (i = 0; i < 2 && topo->nflows < SOAK_MAX_FLOWS; i++) {
		struct soak_flow *f = &topo->flow[topo->nflows++];

		*f = *proto;
		f->src_p = (uint16_t)p;
		f->src_t = (uint16_t)t;
		f->src_kind = (uint8_t)kind;
		f->prio = soak_prios[(base + i) % 3];
		f->dflt = i == 0;
	}
}

void soak_topo_build(const struct soak_cfg *cfg, struct soak_topo *topo)
{
	unsigned int P = cfg->procs, p, t, d, g;

	memset(topo, 0, sizeof(*topo));
	for (p = 0; p < P; p++) {
		for (t = 0; t < cfg->threads; t++) {
			struct soak_flow f;
			unsigned int q;

			memset(&f, 0, sizeof(f));
			q = (p + 1) % P;
			f.dst_p = (uint16_t)q;
			f.dst = soak_sin(soak_ctx_addr(q, 0),
					 SOAK_PORT_C + 2 * t + 1);
			soak_add(topo, p, t, SOAK_EP_CN, &f);
			q = (p + P - 1) % P;
			f.dst_p = (uint16_t)q;
			f.dst = soak_sin(soak_ctx_addr(q, 0),
					 SOAK_PORT_C + 2 * t);
			soak_add(topo, p, t, SOAK_EP_CP, &f);
			for (d = 1; d < P; d++) {
				q = (p + d) % P;
				f.dst_p = (uint16_t)q;
				f.dst = soak_sin(soak_ctx_addr(q, 0),
						 SOAK_PORT_U + t);
				soak_add(topo, p, t, SOAK_EP_UN, &f);
			}
			f.mcast = true;
			for (g = 0; g < cfg->groups; g++) {
				f.group = (uint16_t)g;
				f.dst = soak_sin(soak_group(g), SOAK_PORT_MC);
				soak_add(topo, p, t, SOAK_EP_UN, &f);
			}
		}
	}
	topo->nrxep = soak_rxep_group(cfg, cfg->groups, 0);
}

bool soak_expects(const struct soak_cfg *cfg, const struct soak_topo *topo,
		  unsigned int f, unsigned int p, unsigned int e)
{
	const struct soak_flow *fl = &topo->flow[f];
	unsigned int kind;

	if (fl->mcast)
		return e >= soak_rxep_group(cfg, fl->group, 0) &&
		       e < soak_rxep_group(cfg, fl->group + 1u, 0);
	if (fl->dst_p != p)
		return false;
	/* cn sends to the peer's cp, cp to the peer's cn, un to un. */
	kind = fl->src_kind == SOAK_EP_CN ? SOAK_EP_CP :
	       fl->src_kind == SOAK_EP_CP ? SOAK_EP_CN : SOAK_EP_UN;
	return e == soak_rxep_thread(fl->src_t, kind);
}

uint64_t soak_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t fnv1a(uint32_t h, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static uint32_t soak_csum(const struct soak_hdr *h, const uint8_t *payload)
{
	uint32_t c = 2166136261u;

	c = fnv1a(c, &h->flow, sizeof(h->flow));
	c = fnv1a(c, &h->seq, sizeof(h->seq));
	c = fnv1a(c, &h->len, sizeof(h->len));
	return fnv1a(c, payload, h->len);
}

size_t soak_build(const struct soak_cfg *cfg, uint8_t *buf, uint32_t flow,
		  uint64_t seq)
{
	uint64_t st = cfg->seed ^ ((uint64_t)flow << 40) ^ seq;
	uint8_t *payload = buf + sizeof(struct soak_hdr);
	struct soak_hdr h;
	uint64_t r = 0;
	uint32_t i;

	h.magic = SOAK_MAGIC;
	h.flow = flow;
	h.seq = seq;
	h.len = (uint32_t)(soak_rand(&st) % (cfg->max_len + 1u));
	for (i = 0; i < h.len; i++) {
		if (!(i & 7))
			r = soak_rand(&st);
		payload[i] = (uint8_t)(r >> (8 * (i & 7)));
	}
	h.csum = soak_csum(&h, payload);
	memcpy(buf, &h, sizeof(h));
	return sizeof(h) + h.len;
}

int soak_check(const uint8_t *buf, size_t len, uint64_t *seq)
{
	struct soak_hdr h;

	if (len < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != SOAK_MAGIC || h.flow >= SOAK_MAX_FLOWS ||
	    len != sizeof(h) + h.len ||
	    h.csum != soak_csum(&h, buf + sizeof(h)))
		return -1;
	*seq = h.seq;
	return (int)h.flow;
}

static bool win_test_set(struct soak_rx *rx, uint64_t seq)
{
	uint64_t bit = 1ull << (seq % 64);
	uint64_t *w = &rx->win[(seq % SOAK_WIN) / 64];
	bool was = *w & bit;

	*w |= bit;
	return was;
}

static void win_clear(struct soak_rx *rx, uint64_t seq)
{
	rx->win[(seq % SOAK_WIN) / 64] &= ~(1ull << (seq % 64));
}

void soak_rx_note(struct soak_rx *rx, uint64_t seq)
{
	if (seq >= rx->next) {
		/* The slots of the skipped numbers still hold numbers a
		 * window ago: clear them, they are not received (yet). */
		if (seq - rx->next >= SOAK_WIN)
			memset(rx->win, 0, sizeof(rx->win));
		else
			for (uint64_t s = rx->next; s < seq; s++)
				win_clear(rx, s);
		win_clear(rx, seq);
		win_test_set(rx, seq);
		rx->next = seq + 1;
		rx->recv++;
		return;
	}
	if (rx->next - seq > SOAK_WIN) {
		rx->old++;
		return;
	}
	if (win_test_set(rx, seq)) {
		rx->dup++;
		return;
	}
	rx->late++;
	rx->recv++;
}
