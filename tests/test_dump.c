// SPDX-License-Identifier: MIT
/*
 * Capture rings (dump.c, dump_shm.h), this process playing the dumper
 * against its own contexts on emu: a good ring is taken and written as
 * the wire carries it; hostile rings (bad header, sizes, ids, a link, no
 * lock) are refused; a reader's tail that makes no sense drops records,
 * never traffic; a request withdrawn or a dumper that died lets the ring
 * go. The stats thread runs the ticks, so each step waits a few of them.
 */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump.h"
#include "dump_shm.h"
#include "qps_int.h"
#include "t_util.h"
#include "sq.h"
#include "ud.h"

#define RING_BYTES (64u * 1024)
#define TICKS_MS (QPS_STAT_PERIOD_MS * 20)

static char g_wire[64];
static uint64_t g_id = 0x1000;

struct ring {
	char name[96];
	int fd;
	void *base;
	size_t size;
	struct qps_dump_hdr *h;
	struct qps_dump_sub *subs;
	uint8_t *data;
};

/* A ring as qps_dump makes it; @tweak may spoil its header before the
 * magic is set; @lock: hold the dumper's lock. */
static void ring_make(struct ring *r, struct qps_ctx *ctx, uint64_t id,
		      void (*tweak)(struct qps_dump_hdr *), bool lock)
{
	struct qps_dump_geom g;
	struct flock fl;

	memset(r, 0, sizeof(*r));
	qps_dump_geom(ctx->nsq + 1, RING_BYTES, &g);
	r->size = (size_t)g.size;
	snprintf(r->name, sizeof(r->name), "/%s%d.%u.%016llx", QPS_DUMP_PREFIX,
		 (int)getpid(), ctx->stat.hdr->ctx_id, (unsigned long long)id);
	r->fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL, 0600);
	CU_ASSERT_FATAL(r->fd >= 0);
	CU_ASSERT_FATAL(ftruncate(r->fd, (off_t)r->size) == 0);
	if (lock) {
		memset(&fl, 0, sizeof(fl));
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		CU_ASSERT_FATAL(fcntl(r->fd, F_OFD_SETLK, &fl) == 0);
	}
	r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       r->fd, 0);
	CU_ASSERT_FATAL(r->base != MAP_FAILED);
	r->h = r->base;
	r->h->layout = QPS_DUMP_LAYOUT;
	r->h->hdr_size = sizeof(*r->h);
	r->h->sub_size = sizeof(struct qps_dump_sub);
	r->h->nring = ctx->nsq + 1;
	r->h->snaplen = 128;
	r->h->ring_bytes = RING_BYTES;
	r->h->size = g.size;
	r->h->id = id;
	r->h->pid = (int32_t)getpid();
	r->h->ctx_id = ctx->stat.hdr->ctx_id;
	r->subs = (struct qps_dump_sub *)((uint8_t *)r->base + g.off_sub);
	r->data = (uint8_t *)r->base + g.off_data;
	if (tweak)
		tweak(r->h);
	atomic_store_explicit(&r->h->magic, QPS_DUMP_MAGIC,
			      memory_order_release);
}

static void ring_free(struct ring *r)
{
	munmap(r->base, r->size);
	close(r->fd);
	shm_unlink(r->name);
}

static void request(struct qps_ctx *ctx, uint64_t id)
{
	atomic_store_explicit(&ctx->stat.hdr->dump_req, id,
			      memory_order_release);
}

/* Whether @ctx comes to have a ring (@want) or none within a few ticks. */
static bool becomes(struct qps_ctx *ctx, bool want)
{
	int i;

	for (i = 0; i < TICKS_MS; i++) {
		if ((__atomic_load_n(&ctx->dump, __ATOMIC_ACQUIRE) != NULL) ==
		    want)
			return true;
		usleep(1000);
	}
	return false;
}

/* Whether @ctx still has no ring after a few ticks. */
static bool stays_off(struct qps_ctx *ctx)
{
	usleep(QPS_STAT_PERIOD_MS * 2500);
	return __atomic_load_n(&ctx->dump, __ATOMIC_ACQUIRE) == NULL;
}

static void pair(struct qps_ctx **a, struct qps_ctx **b, struct qps_ep **ea,
		 struct qps_ep **eb)
{
	struct sockaddr_in s;
	int ms = 2000;

	*a = t_suite_ctx(g_wire, "198.18.0.1");
	*b = t_suite_ctx(g_wire, "198.18.0.2");
	T_EQ_FATAL(qps_ep_create(*a, QPS_EP_DGRAM, ea), 0);
	T_EQ_FATAL(qps_ep_create(*b, QPS_EP_DGRAM, eb), 0);
	s = t_sin("198.18.0.1", 9000);
	T_EQ_FATAL(qps_bind(*ea, (struct sockaddr *)&s, sizeof(s)), 0);
	s = t_sin("198.18.0.2", 9001);
	T_EQ_FATAL(qps_bind(*eb, (struct sockaddr *)&s, sizeof(s)), 0);
	T_EQ_FATAL(qps_setopt(*eb, QPS_OPT_RCVTIMEO, &ms, sizeof(ms)), 0);
}

/* One datagram a -> b, received. */
static void one(struct qps_ep *ea, struct qps_ep *eb, const char *msg)
{
	struct sockaddr_in to = t_sin("198.18.0.2", 9001);
	char buf[256];

	T_EQ(qps_sendto(ea, msg, strlen(msg), 0, (struct sockaddr *)&to,
			sizeof(to)), (long long)strlen(msg));
	T_EQ(qps_recv(eb, buf, sizeof(buf), 0), (long long)strlen(msg));
}

/* The first record of sub-ring @i, or NULL. */
static const struct qps_dump_rec *first_rec(const struct ring *r,
					    unsigned int i)
{
	if (!atomic_load_explicit(&r->subs[i].head, memory_order_acquire))
		return NULL;
	return (const struct qps_dump_rec *)(r->data +
					     (size_t)i * RING_BYTES);
}

static void test_capture(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	const struct qps_dump_rec *rec;
	struct ring ra, rb;
	uint64_t t0;
	const uint8_t *f;

	t_suite_begin();
	pair(&a, &b, &ea, &eb);
	ring_make(&ra, a, ++g_id, NULL, true);
	ring_make(&rb, b, ++g_id, NULL, true);
	request(a, ra.h->id);
	request(b, rb.h->id);
	CU_ASSERT_FATAL(becomes(a, true) && becomes(b, true));
	CU_ASSERT_EQUAL(ra.h->state, QPS_DUMP_ST_ATTACHED);
	t0 = qps_realtime_ns();
	one(ea, eb, "captured");
	/* Sent: send queue 0's sub-ring (1) of a. */
	rec = first_rec(&ra, 1);
	CU_ASSERT_FATAL(rec != NULL);
	CU_ASSERT_EQUAL(rec->dir, QPS_DUMP_TX);
	CU_ASSERT_EQUAL(rec->origlen, QPS_HDRS_LEN + 8);
	CU_ASSERT_EQUAL(rec->caplen, rec->origlen);
	CU_ASSERT(rec->ts_ns >= t0 && rec->ts_ns <= qps_realtime_ns());
	f = (const uint8_t *)(rec + 1);
	CU_ASSERT(memcmp(f + QPS_HDRS_LEN, "captured", 8) == 0);
	CU_ASSERT(memcmp(f + 6, a->info.mac, 6) == 0);
	/* Received: b's receive sub-ring (0), the same bytes but for the
	 * checksums a device fills in. */
	rec = first_rec(&rb, 0);
	CU_ASSERT_FATAL(rec != NULL);
	CU_ASSERT_EQUAL(rec->dir, QPS_DUMP_RX);
	CU_ASSERT_EQUAL(rec->origlen, QPS_HDRS_LEN + 8);
	CU_ASSERT(memcmp((const uint8_t *)(rec + 1) + QPS_HDRS_LEN,
			 "captured", 8) == 0);
	/* Withdrawn: the context lets it go. */
	request(a, 0);
	request(b, 0);
	CU_ASSERT(becomes(a, false) && becomes(b, false));
	one(ea, eb, "after");
	ring_free(&ra);
	ring_free(&rb);
	t_suite_end();
}

static void t_layout(struct qps_dump_hdr *h) { h->layout = 99; }
static void t_hdr_size(struct qps_dump_hdr *h) { h->hdr_size = 8; }
static void t_nring(struct qps_dump_hdr *h) { h->nring = 1; }
static void t_nring_big(struct qps_dump_hdr *h) { h->nring = 1000000; }
static void t_pow2(struct qps_dump_hdr *h) { h->ring_bytes = RING_BYTES + 8; }
static void t_ring_huge(struct qps_dump_hdr *h) { h->ring_bytes = 1ull << 62; }
static void t_size(struct qps_dump_hdr *h) { h->size += 4096; }
static void t_snap0(struct qps_dump_hdr *h) { h->snaplen = 0; }
static void t_snap_big(struct qps_dump_hdr *h) { h->snaplen = 1u << 30; }
static void t_id(struct qps_dump_hdr *h) { h->id ^= 1; }
static void t_pid(struct qps_dump_hdr *h) { h->pid = 1; }
static void t_ctx(struct qps_dump_hdr *h) { h->ctx_id += 7; }

static void test_hostile_headers(void)
{
	static void (*const tweaks[])(struct qps_dump_hdr *) = {
		t_layout, t_hdr_size, t_nring, t_nring_big, t_pow2,
		t_ring_huge, t_size, t_snap0, t_snap_big, t_id, t_pid, t_ctx,
	};
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct ring r;
	unsigned int i;

	t_suite_begin();
	pair(&a, &b, &ea, &eb);
	for (i = 0; i < sizeof(tweaks) / sizeof(tweaks[0]); i++) {
		ring_make(&r, a, ++g_id, tweaks[i], true);
		request(a, r.h->id);
		CU_ASSERT(stays_off(a));
		CU_ASSERT_EQUAL(r.h->state, QPS_DUMP_ST_NEW);
		one(ea, eb, "still sent");
		ring_free(&r);
	}
	/* No dumper holds it: a dead one's. */
	ring_make(&r, a, ++g_id, NULL, false);
	request(a, r.h->id);
	CU_ASSERT(stays_off(a));
	ring_free(&r);
	/* Nothing under the name. */
	request(a, ++g_id);
	CU_ASSERT(stays_off(a));
	request(a, 0);
	one(ea, eb, "still sent");
	t_suite_end();
}

static void test_hostile_files(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	char name[128], target[160];
	int fd;

	t_suite_begin();
	pair(&a, &b, &ea, &eb);
	/* A link under the name: never followed. */
	snprintf(name, sizeof(name), "/dev/shm/%s%d.%u.%016llx",
		 QPS_DUMP_PREFIX, (int)getpid(), a->stat.hdr->ctx_id,
		 (unsigned long long)++g_id);
	snprintf(target, sizeof(target), "%s.target", name);
	fd = open(target, O_RDWR | O_CREAT | O_EXCL, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	CU_ASSERT_FATAL(symlink(target, name) == 0);
	request(a, g_id);
	CU_ASSERT(stays_off(a));
	unlink(name);
	unlink(target);
	/* A directory, then a file too short for a header. */
	CU_ASSERT_FATAL(mkdir(name, 0700) == 0);
	request(a, g_id);
	CU_ASSERT(stays_off(a));
	rmdir(name);
	fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, "x", 1) == 1);
	request(a, ++g_id);
	CU_ASSERT(stays_off(a));
	close(fd);
	unlink(name);
	request(a, 0);
	one(ea, eb, "still sent");
	t_suite_end();
}

static void test_hostile_tail(void)
{
	static const uint64_t tails[] = { 1ull << 40, UINT64_MAX / 2 };
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_stats st;
	struct ring r;
	unsigned int i;
	uint64_t drops;

	t_suite_begin();
	pair(&a, &b, &ea, &eb);
	ring_make(&r, a, ++g_id, NULL, true);
	request(a, r.h->id);
	CU_ASSERT_FATAL(becomes(a, true));
	for (i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		drops = atomic_load(&r.subs[1].drops);
		atomic_store(&r.subs[1].tail, tails[i]);
		one(ea, eb, "tail");
		CU_ASSERT(atomic_load(&r.subs[1].drops) == drops + 1);
	}
	/* A reader that never reads: the ring fills, the traffic goes on. */
	atomic_store(&r.subs[1].tail, atomic_load(&r.subs[1].head));
	for (i = 0; i < 2000; i++)
		one(ea, eb, "flooding the capture ring");
	CU_ASSERT(atomic_load(&r.subs[1].drops) > 0);
	st = t_ctx_stats(a);
	CU_ASSERT_EQUAL(st.tx_errors, 0);
	request(a, 0);
	CU_ASSERT(becomes(a, false));
	ring_free(&r);
	t_suite_end();
}

static void test_dumper_death(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct ring r;
	char path[128];

	t_suite_begin();
	pair(&a, &b, &ea, &eb);
	ring_make(&r, a, ++g_id, NULL, true);
	request(a, r.h->id);
	CU_ASSERT_FATAL(becomes(a, true));
	/* The lock goes with its open file description, which the mapping
	 * holds too: as when the dumper is killed. */
	munmap(r.base, r.size);
	close(r.fd);
	CU_ASSERT(becomes(a, false));
	snprintf(path, sizeof(path), "/dev/shm%s", r.name);
	CU_ASSERT(access(path, F_OK) != 0);
	CU_ASSERT_EQUAL(atomic_load(&a->stat.hdr->dump_req), 0);
	one(ea, eb, "after the dumper");
	t_suite_end();
}

static struct qps_ctx *ud_ctx(const char *addr)
{
	struct qps_ctx_attr attr;
	struct qps_ctx *u = NULL;

	attr = t_emu_attr(g_wire, addr);
	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT;
	attr.transport = QPS_TRANSPORT_UD;
	T_EQ_FATAL(qps_ctx_create(&attr, &u), 0);
	t_ctxs_add(&t_suite_ctxs, u);
	return u;
}

/* A UD record: its header checked against what @a sent @b. */
static void check_ud(const struct qps_dump_rec *rec, uint8_t dir,
		     const struct qps_ctx *a, const struct qps_ctx *b,
		     uint32_t len)
{
	struct qps_dump_ud u;

	CU_ASSERT_FATAL(rec != NULL);
	CU_ASSERT_EQUAL(rec->dir, dir);
	CU_ASSERT_EQUAL(rec->flags, QPS_DUMP_F_UD);
	CU_ASSERT_EQUAL(rec->origlen, sizeof(u) + QPS_UD_HDR_LEN + len);
	CU_ASSERT_FATAL(rec->caplen == rec->origlen);
	memcpy(&u, rec + 1, sizeof(u));
	CU_ASSERT_EQUAL(u.saddr, a->info.addr.s_addr);
	CU_ASSERT_EQUAL(u.daddr, b->info.addr.s_addr);
	CU_ASSERT(memcmp(u.dmac, b->info.mac, 6) == 0);
	CU_ASSERT_EQUAL(u.dqpn, b->qp->qp_num);
	CU_ASSERT_EQUAL(u.sqpn, a->sq[0].qp->qp_num);
	CU_ASSERT_EQUAL(u.qkey, QPS_UD_QKEY);
	CU_ASSERT_EQUAL(u.opcode, QPS_DUMP_BTH_UD_SEND);
	CU_ASSERT_EQUAL(u.ttl, 64);
	CU_ASSERT_EQUAL(u.len, QPS_UD_HDR_LEN + len);
	/* The sender knows its MAC; the receiver is not told it. */
	if (dir == QPS_DUMP_TX)
		CU_ASSERT(memcmp(u.smac, a->info.mac, 6) == 0);
}

/* A UD context takes the ring; a datagram lands as a UD record on both
 * sides: what the RoCE v2 frame is made of, then the message. */
static void test_ud(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_ud_addr la, lb;
	struct sockaddr_in s;
	struct ring ra, rb;
	const struct qps_dump_rec *rec;
	char buf[64];
	int ms = 2000;

	t_suite_begin();
	a = ud_ctx("198.18.0.9");
	b = ud_ctx("198.18.0.10");
	T_EQ_FATAL(qps_ud_local(a, &la), 0);
	T_EQ_FATAL(qps_ud_local(b, &lb), 0);
	T_EQ_FATAL(qps_ud_peer_set(a, &lb), 0);
	T_EQ_FATAL(qps_ud_peer_set(b, &la), 0);
	T_EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &ea), 0);
	T_EQ_FATAL(qps_ep_create(b, QPS_EP_DGRAM, &eb), 0);
	s = t_sin("198.18.0.9", 9000);
	T_EQ_FATAL(qps_bind(ea, (struct sockaddr *)&s, sizeof(s)), 0);
	s = t_sin("198.18.0.10", 9001);
	T_EQ_FATAL(qps_bind(eb, (struct sockaddr *)&s, sizeof(s)), 0);
	T_EQ_FATAL(qps_setopt(eb, QPS_OPT_RCVTIMEO, &ms, sizeof(ms)), 0);
	ring_make(&ra, a, ++g_id, NULL, true);
	ring_make(&rb, b, ++g_id, NULL, true);
	request(a, ra.h->id);
	request(b, rb.h->id);
	CU_ASSERT_FATAL(becomes(a, true) && becomes(b, true));
	CU_ASSERT_EQUAL(ra.h->state, QPS_DUMP_ST_ATTACHED);
	T_EQ(qps_sendto(ea, "ud-datagram", 11, 0, (struct sockaddr *)&s,
			sizeof(s)), 11);
	T_EQ(qps_recv(eb, buf, sizeof(buf), 0), 11);
	rec = first_rec(&ra, 1);
	check_ud(rec, QPS_DUMP_TX, a, b, 11);
	CU_ASSERT(memcmp((const uint8_t *)(rec + 1) +
			 sizeof(struct qps_dump_ud) + QPS_UD_HDR_LEN,
			 "ud-datagram", 11) == 0);
	rec = first_rec(&rb, 0);
	check_ud(rec, QPS_DUMP_RX, a, b, 11);
	CU_ASSERT(memcmp((const uint8_t *)(rec + 1) +
			 sizeof(struct qps_dump_ud) + QPS_UD_HDR_LEN,
			 "ud-datagram", 11) == 0);
	request(a, 0);
	request(b, 0);
	CU_ASSERT(becomes(a, false) && becomes(b, false));
	ring_free(&ra);
	ring_free(&rb);
	t_suite_end();
}

static void test_wait_env(void)
{
	struct qps_ctx *a;
	uint64_t t0;

	t_suite_begin();
	setenv("QPS_DUMP_WAIT_MS", "150", 1);
	t0 = qps_now_ns();
	a = t_suite_ctx(g_wire, "198.18.0.1");
	unsetenv("QPS_DUMP_WAIT_MS");
	/* Nobody came: it waited about that long, and no more. */
	CU_ASSERT(qps_now_ns() - t0 >= 140000000u);
	CU_ASSERT(qps_now_ns() - t0 < 5000000000u);
	CU_ASSERT(a->dump == NULL);
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "capture: sent and received frames, withdrawn",
		  test_capture },
		{ "hostile headers refused, traffic unaffected",
		  test_hostile_headers },
		{ "hostile files: link, directory, short", test_hostile_files },
		{ "hostile or stuck tail: drops, never traffic",
		  test_hostile_tail },
		{ "dumper death: ring dropped, name removed, request cleared",
		  test_dumper_death },
		{ "UD transport: sent and received as UD records", test_ud },
		{ "QPS_DUMP_WAIT_MS bounded", test_wait_env },
		CU_TEST_INFO_NULL,
	};

	t_wire_name(g_wire, sizeof(g_wire), "dump");
	atexit(t_suite_cleanup);
	return t_run("dump", tests);
}
