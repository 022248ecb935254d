// SPDX-License-Identifier: MIT
/*
 * Suite "prio_e2e": the priority bands in the send path, end to end on emu
 * (tests/test_prio.c tests the module alone).
 *
 * - Strict priority: with the transmitter paused (the module's hook,
 *   reached through qps_sq_prio), a batch of mixed per-message priorities
 *   and sends at the endpoint's QPS_OPT_PRIORITY are parked; on resume the
 *   receiver sees band 0, then band 1, then band 2, FIFO inside each, and
 *   the stats showed each band's depth and bytes while parked.
 * - A full band: a non-blocking endpoint gets -EAGAIN, counted in that
 *   band's drops; the parked datagrams all go out on resume.
 * - Concurrent producers on one send QP: every datagram is delivered once
 *   or counted as dropped, each producer's order kept (also under TSan).
 * - A frame the device refuses at the end of a burst: the frames before
 *   it, written for the doorbell it would have rung, are rung anyway.
 * - One thread's QPS_MSG_MORE tail in the same burst as another's plain
 *   send does not hold that send back until the bounded delay.
 * Each case runs on both send paths (generic and direct).
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sq.h"
#include "sq_path.h"

#define IP_A "198.18.1.1"
#define IP_B "198.18.1.2"
#define PORT_A 4100
#define PORT_B 5100
#define PKT_LEN 64
#define PER_BAND 10
#define CC_THREADS 3
#define CC_SENDS 20000

#define EQ(got, want) CU_ASSERT_EQUAL((long long)(got), (long long)(want))
#define LE_MS(got, max) CU_ASSERT((got) <= (max))
#define EQ_FATAL(got, want) \
	CU_ASSERT_EQUAL_FATAL((long long)(got), (long long)(want))

static char g_wire[64];

struct pkt {
	uint32_t src;		/* producer, or band */
	uint32_t seq;
	uint8_t pad[PKT_LEN - 8];
};

static struct qps_ctx *mkctx(const char *ip, uint32_t path, uint32_t depth)
{
	/* t_emu_attr: emu, or verbs over the test double (t_util.h). */
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	a.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_NUM_TXQ |
		       QPS_CTX_ATTR_TX_DEPTH | QPS_CTX_ATTR_RX_DEPTH;
	a.tx_path = path;
	a.num_txq = 1;
	a.tx_depth = depth;
	a.rx_depth = 1024;
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

/* An endpoint bound to @ip:@port, connected to @peer unless NULL. */
static struct qps_ep *mkep(struct qps_ctx *ctx, const char *ip,
			   unsigned short port, const struct sockaddr_in *peer)
{
	struct qps_ep *ep = t_ep_bound(ctx, ip, port, 2000);
	int rcvbuf = 65536;

	qps_setopt(ep, QPS_OPT_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (peer)
		EQ_FATAL(qps_connect(ep, (const struct sockaddr *)peer,
				     sizeof(*peer)), 0);
	return ep;
}

static void set_prio(struct qps_ep *ep, int prio)
{
	EQ_FATAL(qps_setopt(ep, QPS_OPT_PRIORITY, &prio, sizeof(prio)), 0);
}

static ssize_t send_pkt(struct qps_ep *ep, uint32_t src, uint32_t seq)
{
	struct pkt p;

	memset(&p, 0, sizeof(p));
	p.src = src;
	p.seq = seq;
	return qps_send(ep, &p, sizeof(p), 0);
}

#define BOTH_PATHS(fn) \
	static void fn##_generic(void) \
	{ T_EXCLUDED_RETURN(); fn(QPS_TX_PATH_GENERIC); } \
	static void fn##_direct(void) \
	{ T_EXCLUDED_RETURN(); fn(QPS_TX_PATH_DIRECT); }

/* --- strict priority ------------------------------------------------------ */

/* A priority of each band (prio2band: 6 -> 0, 0 -> 1, 1 -> 2). */
static const int band_prio[QPS_PRIO_BANDS] = { 6, 0, 1 };

static void strict(uint32_t path)
{
	struct qps_msg m[2 * PER_BAND];
	struct pkt p[2 * PER_BAND], r;
	uint32_t seq[QPS_PRIO_BANDS] = { 0 }, want[QPS_PRIO_BANDS] = { 0 };
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_stats st;
	unsigned int i, band;

	t_wire_name(g_wire, sizeof(g_wire), "prio-strict");
	a = mkctx(IP_A, path, 1024);
	b = mkctx(IP_B, path, 1024);
	eb = mkep(b, IP_B, PORT_B, NULL);
	ea = mkep(a, IP_A, PORT_A, &sb);
	EQ_FATAL(qps_prio_pause(qps_sq_prio(a, 0)), 0);

	/* Mixed per-message priorities (bands 2, 1, 0, 2, ...), and -1 =
	 * the endpoint's (band 0 here). */
	set_prio(ea, band_prio[0]);
	for (i = 0; i < 2 * PER_BAND; i++) {
		band = i < 3 * PER_BAND / 2 ? 2 - i % 3 : 0;
		memset(&p[i], 0, sizeof(p[i]));
		p[i].src = band;
		p[i].seq = seq[band]++;
		m[i] = (struct qps_msg){
			.buf = &p[i], .len = sizeof(p[i]),
			.priority = band == 0 && i % 2 ? -1 : band_prio[band],
		};
	}
	EQ_FATAL(qps_sendmmsg(ea, m, 2 * PER_BAND, 0), 2 * PER_BAND);
	/* The endpoint option alone: top each band up to PER_BAND. */
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		set_prio(ea, band_prio[band]);
		while (seq[band] < PER_BAND) {
			EQ_FATAL(send_pkt(ea, band, seq[band]), PKT_LEN);
			seq[band]++;
		}
	}

	st = t_ctx_stats(a);
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		EQ(st.tx_band_depth[band], PER_BAND);
		EQ(st.tx_band_bytes[band], PER_BAND * PKT_LEN);
		EQ(st.tx_band_enqueued[band], PER_BAND);
	}
	EQ(st.tx_packets, 0);
	EQ(qps_recv(eb, &r, sizeof(r), QPS_MSG_DONTWAIT), -EAGAIN);

	EQ(qps_prio_resume(qps_sq_prio(a, 0)), QPS_PRIO_BANDS * PER_BAND);
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		for (i = 0; i < PER_BAND; i++) {
			EQ_FATAL(qps_recv(eb, &r, sizeof(r), 0), PKT_LEN);
			EQ_FATAL(r.src, band);
			EQ_FATAL(r.seq, want[band]);
			want[band]++;
		}
	}
	st = t_ctx_stats(a);
	EQ(st.tx_packets, QPS_PRIO_BANDS * PER_BAND);
	for (band = 0; band < QPS_PRIO_BANDS; band++)
		EQ(st.tx_band_depth[band], 0);
	/* Bands empty, owner free: a lone sender bypasses them (the first
	 * send after a drain may still go through the rings: backlog). */
	set_prio(ea, band_prio[0]);
	EQ_FATAL(send_pkt(ea, 0, seq[0]), PKT_LEN);
	EQ_FATAL(send_pkt(ea, 0, seq[0] + 1), PKT_LEN);
	CU_ASSERT(t_ctx_stats(a).tx_band_bypassed[0] >= 1);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(strict)

/* --- a refused frame ends a burst ------------------------------------------ */

/* The send path of the queue under test, with its write failing for the
 * fail_at-th frame (counted from 1; 0 = never). */
static struct qps_sq_path refusing_path;
static const struct qps_sq_path *real_path;
static unsigned int writes, fail_at;

static int refusing_write(struct qps_sq *sq, uint32_t slot,
			  const struct qps_tx_frame *f, uint32_t len,
			  bool signaled)
{
	if (++writes == fail_at)
		return -EIO;
	return real_path->write(sq, slot, f, len, signaled);
}

static void refused_last(uint32_t path)
{
	enum { N = 3 };
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_sq *sq;
	struct pkt r;
	unsigned int i;

	t_wire_name(g_wire, sizeof(g_wire), "prio-refused");
	a = mkctx(IP_A, path, 1024);
	b = mkctx(IP_B, path, 1024);
	eb = mkep(b, IP_B, PORT_B, NULL);
	ea = mkep(a, IP_A, PORT_A, &sb);
	sq = &a->sq[0];
	real_path = sq->path;
	refusing_path = *real_path;
	refusing_path.write = refusing_write;
	writes = 0;
	fail_at = N;
	qps_alock_lock(&sq->lock);
	sq->path = &refusing_path;
	qps_alock_unlock(&sq->lock);

	/* Parked, then posted as one burst whose last frame is refused. */
	EQ_FATAL(qps_prio_pause(qps_sq_prio(a, 0)), 0);
	for (i = 0; i < N; i++)
		EQ_FATAL(send_pkt(ea, 0, i), PKT_LEN);
	EQ(qps_prio_resume(qps_sq_prio(a, 0)), N);
	EQ(writes, N);
	EQ(sq->unrung, 0);
	for (i = 0; i + 1 < N; i++) {
		EQ_FATAL(qps_recv(eb, &r, sizeof(r), 0), PKT_LEN);
		EQ(r.seq, i);
	}
	EQ(t_ctx_stats(a).tx_errors, 1);

	qps_alock_lock(&sq->lock);
	sq->path = real_path;
	qps_alock_unlock(&sq->lock);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(refused_last)

/* --- another thread's MORE tail ---------------------------------------------- */

struct more_sender {
	struct qps_ep *ep;
	int flags;
	ssize_t ret;
};

static void *more_send(void *arg)
{
	struct more_sender *m = arg;
	struct pkt p;

	memset(&p, 0, sizeof(p));
	p.src = m->flags ? 1 : 0;	/* 0: the plain one */
	m->ret = qps_send(m->ep, &p, sizeof(p), m->flags);
	return NULL;
}

/* Send from a thread of its own (its own qps_thread_id()). */
static ssize_t send_from_thread(struct qps_ep *ep, int flags)
{
	struct more_sender m = { .ep = ep, .flags = flags };
	pthread_t th;

	if (pthread_create(&th, NULL, more_send, &m))
		return -1;
	pthread_join(th, NULL);
	return m.ret;
}

static void more_tail(uint32_t path)
{
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_ctx_attr attr;
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct pkt r;
	uint64_t t0, ms;

	t_wire_name(g_wire, sizeof(g_wire), "prio-moretail");
	attr = t_emu_attr(g_wire, IP_A);
	attr.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_NUM_TXQ |
			  QPS_CTX_ATTR_DB_DELAY;
	attr.tx_path = path;
	attr.num_txq = 1;
	attr.db_delay_us = 1000000;	/* a held doorbell waits 1 s */
	a = NULL;
	EQ_FATAL(qps_ctx_create(&attr, &a), 0);
	b = mkctx(IP_B, path, 1024);
	eb = mkep(b, IP_B, PORT_B, NULL);
	ea = mkep(a, IP_A, PORT_A, &sb);

	/* Parked in one band: a plain send, then another thread's MORE. */
	EQ_FATAL(qps_prio_pause(qps_sq_prio(a, 0)), 0);
	EQ_FATAL(send_from_thread(ea, 0), PKT_LEN);
	EQ_FATAL(send_from_thread(ea, QPS_MSG_MORE), PKT_LEN);
	t0 = t_now_ms();
	EQ(qps_prio_resume(qps_sq_prio(a, 0)), 2);
	/* Both went in one burst: the plain one must not wait 1 s. */
	EQ_FATAL(qps_recv(eb, &r, sizeof(r), 0), PKT_LEN);
	ms = t_now_ms() - t0;
	EQ(r.src, 0);
	LE_MS(ms, 200);
	printf("\n    plain send before a MORE tail: received after %llu ms "
	       "(db_delay 1000 ms)\n", (unsigned long long)ms);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(more_tail)

/* --- a full band ------------------------------------------------------------ */

static void full_band(uint32_t path)
{
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_stats st;
	struct pkt r;
	uint32_t sent = 0, got = 0;
	int one = 1;
	ssize_t ret;

	t_wire_name(g_wire, sizeof(g_wire), "prio-full");
	/* More slots than a band holds: the band fills first. */
	a = mkctx(IP_A, path, 1024);
	b = mkctx(IP_B, path, 1024);
	eb = mkep(b, IP_B, PORT_B, NULL);
	ea = mkep(a, IP_A, PORT_A, &sb);
	EQ(qps_setopt(ea, QPS_OPT_NONBLOCK, &one, sizeof(one)), 0);
	EQ_FATAL(qps_prio_pause(qps_sq_prio(a, 0)), 0);
	for (;;) {
		ret = send_pkt(ea, 1, sent);
		if (ret < 0)
			break;
		sent++;
	}
	EQ(ret, -EAGAIN);
	EQ(sent, QPS_PRIO_DEFAULT_DEPTH);
	EQ(send_pkt(ea, 1, sent), -EAGAIN);
	st = t_ctx_stats(a);
	EQ(st.tx_band_drops[1], 2);
	EQ(st.tx_band_drops[0], 0);
	EQ(st.tx_band_drops[2], 0);
	EQ(st.tx_band_depth[1], sent);
	EQ(st.tx_band_bytes[1], (uint64_t)sent * PKT_LEN);

	/* Another band still has room. */
	set_prio(ea, band_prio[0]);
	EQ(send_pkt(ea, 0, 0), PKT_LEN);
	EQ(qps_prio_resume(qps_sq_prio(a, 0)), sent + 1);
	EQ_FATAL(qps_recv(eb, &r, sizeof(r), 0), PKT_LEN);
	EQ(r.src, 0);
	while (got < sent && qps_recv(eb, &r, sizeof(r), 0) == PKT_LEN) {
		EQ_FATAL(r.seq, got);
		got++;
	}
	EQ(got, sent);
	st = t_ctx_stats(a);
	EQ(st.tx_packets, sent + 1);
	EQ(st.tx_band_depth[1], 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(full_band)

/* --- concurrent producers on one send QP ---------------------------------- */

struct cc_send {
	struct qps_ep *ep;
	uint32_t id;
	uint32_t sent;
	int err;
};

struct cc_recv {
	struct qps_ep *ep;
	uint32_t next[CC_THREADS];
	uint64_t received;
	uint64_t bad;
	int stop;
};

static void *cc_send_main(void *arg)
{
	struct cc_send *s = arg;
	ssize_t ret;

	while (s->sent < CC_SENDS) {
		ret = send_pkt(s->ep, s->id, s->sent);
		if (ret != PKT_LEN) {
			s->err = (int)ret;
			break;
		}
		s->sent++;
	}
	return NULL;
}

/* Per producer: sequence numbers only grow (gaps are counted drops). */
static void *cc_recv_main(void *arg)
{
	struct cc_recv *c = arg;
	struct pkt p;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		if (qps_recv(c->ep, &p, sizeof(p), QPS_MSG_DONTWAIT) !=
		    PKT_LEN)
			continue;
		if (p.src >= CC_THREADS || p.seq < c->next[p.src]) {
			c->bad++;
			continue;
		}
		c->next[p.src] = p.seq + 1;
		/* Read by the main thread while we run (cc_settle). */
		__atomic_store_n(&c->received, c->received + 1,
				 __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Wait until the receiver has taken everything in flight: its count
 * stops moving for 100 ms (at most 10 s: ThreadSanitizer on 2 busy
 * cores). */
static void cc_settle(struct cc_recv *c)
{
	uint64_t last = UINT64_MAX, now;
	unsigned int quiet = 0, i;

	for (i = 0; i < 1000 && quiet < 10; i++) {
		t_sleep_ms(10);
		now = __atomic_load_n(&c->received, __ATOMIC_RELAXED);
		quiet = now == last ? quiet + 1 : 0;
		last = now;
	}
}

static void concurrent(uint32_t path)
{
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct cc_send s[CC_THREADS];
	struct cc_recv c;
	pthread_t tr;
	struct qps_ctx *a, *b;
	struct qps_stats sa, sb_st;
	uint64_t sent = 0, drops;
	unsigned int k;

	t_wire_name(g_wire, sizeof(g_wire), "prio-cc");
	a = mkctx(IP_A, path, 256);
	b = mkctx(IP_B, path, 1024);
	memset(&c, 0, sizeof(c));
	c.ep = mkep(b, IP_B, PORT_B, NULL);
	for (k = 0; k < CC_THREADS; k++) {
		s[k] = (struct cc_send){
			.ep = mkep(a, IP_A, (unsigned short)(PORT_A + k), &sb),
			.id = k,
		};
		set_prio(s[k].ep, band_prio[k % QPS_PRIO_BANDS]);
	}
	EQ_FATAL(pthread_create(&tr, NULL, cc_recv_main, &c), 0);
	t_threads_run(cc_send_main, s, sizeof(s[0]), CC_THREADS);
	for (k = 0; k < CC_THREADS; k++) {
		EQ(s[k].err, 0);
		EQ(s[k].sent, CC_SENDS);
		sent += s[k].sent;
	}
	qps_ctx_flush(a);
	cc_settle(&c);
	t_thread_stop(tr, &c.stop);

	EQ(c.bad, 0);
	drops = t_check_delivery(a, b, sent, c.received, &sa, &sb_st);
	for (k = 0; k < QPS_PRIO_BANDS; k++) {
		EQ(sa.tx_band_depth[k], 0);
		EQ(sa.tx_band_drops[k], 0);
	}
	printf("\n    %llu sent, %llu received, %llu dropped (counted) ",
	       (unsigned long long)sent, (unsigned long long)c.received,
	       (unsigned long long)drops);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(concurrent)

static CU_TestInfo tests[] = {
	{ "strict priority end to end (generic)", strict_generic },
	{ "strict priority end to end (direct)", strict_direct },
	{ "full band: -EAGAIN, counted (generic)", full_band_generic },
	{ "full band: -EAGAIN, counted (direct)", full_band_direct },
	{ "concurrent producers on one QP (generic)", concurrent_generic },
	{ "concurrent producers on one QP (direct)", concurrent_direct },
	{ "refused last frame: the burst is rung (generic)",
	  refused_last_generic },
	{ "refused last frame: the burst is rung (direct)",
	  refused_last_direct },
	{ "another thread's MORE tail holds no plain send (generic)",
	  more_tail_generic },
	{ "another thread's MORE tail holds no plain send (direct)",
	  more_tail_direct },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("prio_e2e", tests);
}
