// SPDX-License-Identifier: MIT
/*
 * test_stat - the stats segment inside the process: its name and lifetime,
 * the opt-outs, qps_ep_stats, and the segment read as qps_stat reads it
 * (tools/stat_read.c) against qps_ctx_stats; a segment that cannot be had
 * (a full /dev/shm, RLIMIT_FSIZE) never ends the process (#36), and its
 * mode. Across processes: test_stat_e2e.sh; qps_stat against hostile
 * files: test_stat_reader.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qps_int.h"
#include "stat_fields.h"
#include "stat_proc.h"
#include "stat_read.h"
#include "t_util.h"

static char g_wire[64];

/* This process's segments now, by context number (bit n: ctx n). */
static uint64_t my_segments(void)
{
	struct sr_seg *v;
	uint64_t mask = 0;
	int n, i;

	n = sr_list(&v);
	for (i = 0; i < n; i++)
		if (v[i].pid == (int)getpid() && v[i].ctx_id < 64)
			mask |= 1ull << v[i].ctx_id;
	free(v);
	return mask;
}

static int seg_of(struct qps_ctx *ctx, struct sr_seg *s)
{
	memset(s, 0, sizeof(*s));
	s->pid = (int)getpid();
	s->ctx_id = ctx->stat.hdr->ctx_id;
	/* Its name, which may carry a tag (a taken name). */
	snprintf(s->name, sizeof(s->name), "%s", ctx->stat.name + 1);
	return sr_open(s) == SR_OK ? 0 : -1;
}

static void test_lifetime(void)
{
	struct qps_ctx *ctx;
	struct sr_seg s;
	uint64_t before;
	uint32_t id;

	t_suite_begin();
	before = my_segments();
	ctx = t_suite_ctx(g_wire, "198.18.0.1");
	id = ctx->stat.hdr->ctx_id;
	T_EQ(my_segments(), before | 1ull << id);
	T_EQ_FATAL(seg_of(ctx, &s), 0);
	T_EQ(s.h.pid, getpid());
	T_EQ(s.h.nsq, ctx->nsq);
	T_EQ(s.h.max_ep, ctx->ept.max);
	CU_ASSERT_STRING_EQUAL(s.h.provider, "emu");
	CU_ASSERT_STRING_EQUAL(s.h.dev, g_wire);
	T_EQ(s.h.addr, t_ip4("198.18.0.1"));
	T_EQ(sr_proc_state(s.pid, s.h.start_ticks), SR_PROC_ALIVE);
	/* The same pid with another start time is another process. */
	T_EQ(sr_proc_state(s.pid, s.h.start_ticks + 1), SR_PROC_GONE);
	CU_ASSERT(!s.other_ns);
	sr_close(&s);
	t_suite_end();
	T_EQ(my_segments(), before);
}

static void test_opt_out(void)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, "198.18.0.1");
	struct qps_ctx *ctx = NULL;
	struct qps_stats st;
	uint64_t before = my_segments();

	a.comp_mask |= QPS_CTX_ATTR_STATS;
	a.stats = 3;
	T_EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	/* Private: no file, and the counters still count. */
	a.stats = 0;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(my_segments(), before);
	T_EQ(qps_ctx_stats(ctx, &st, sizeof(st)), sizeof(st));
	T_EQ(st.tx_queues, ctx->nsq);
	T_EQ(qps_ctx_destroy(ctx), 0);

	setenv("QPS_STATS", "0", 1);
	a.comp_mask &= ~(uint64_t)QPS_CTX_ATTR_STATS;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(my_segments(), before);
	T_EQ(qps_ctx_destroy(ctx), 0);
	/* The attribute wins over the environment. */
	a.comp_mask |= QPS_CTX_ATTR_STATS;
	a.stats = 1;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(my_segments(), before | 1ull << ctx->stat.hdr->ctx_id);
	T_EQ(qps_ctx_destroy(ctx), 0);
	unsetenv("QPS_STATS");
	T_EQ(my_segments(), before);
}

static void test_ep_stats_errors(void)
{
	struct qps_ep_counters c;
	struct qps_ctx *ctx;
	struct qps_ep *ep = NULL;

	t_suite_begin();
	ctx = t_suite_ctx(g_wire, "198.18.0.1");
	T_EQ(qps_ep_stats(NULL, &c, sizeof(c)), -EBADF);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ(qps_ep_stats(ep, NULL, sizeof(c)), -EFAULT);
	T_EQ(qps_ep_stats(ep, NULL, 0), 0);
	T_EQ(qps_ep_stats(ep, &c, 8), 8);
	T_EQ(qps_ep_stats(ep, &c, sizeof(c) + 100), sizeof(c));
	/* Unbound, unconnected, never sent. */
	T_EQ(c.local.sin_family, AF_UNSPEC);
	T_EQ(c.peer.sin_family, AF_UNSPEC);
	T_EQ(c.txq, -1);
	T_EQ(c.rcvbuf, ctx->rx.depth);
	T_EQ(qps_ep_close(ep), 0);
	T_EQ(qps_ep_stats(ep, &c, sizeof(c)), -EBADF);
	t_suite_end();
}

/* Every field of the segment's sum equals qps_ctx_stats' (none moves:
 * traffic stopped), named on failure. */
static void expect_equal(const struct qps_stats *got,
			 const struct qps_stats *want)
{
	unsigned int i, k;

	for (i = 0; i < sf_nfields; i++)
		for (k = 0; k < sf_fields[i].n; k++)
			if (sf_get(got, &sf_fields[i], k) !=
			    sf_get(want, &sf_fields[i], k)) {
				printf("\n    %s[%u]: segment %llu, ctx_stats "
				       "%llu", sf_fields[i].name, k,
				       (unsigned long long)sf_get(
					       got, &sf_fields[i], k),
				       (unsigned long long)sf_get(
					       want, &sf_fields[i], k));
				CU_FAIL("segment differs from qps_ctx_stats");
			}
}

/* The snapshot block is refreshed by the publisher thread: wait for one
 * taken after @t (realtime ns). */
static void wait_snap(struct qps_ctx *ctx, uint64_t t)
{
	int i;

	for (i = 0; i < 1000 && atomic_load(&ctx->stat.hdr->snap_ns) <= t; i++)
		t_sleep_ms(10);
	CU_ASSERT_FATAL(atomic_load(&ctx->stat.hdr->snap_ns) > t);
}

static uint64_t now_realtime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_unicast_counts(void)
{
	struct sockaddr_in dst = t_sin("198.18.0.2", 6000);
	struct qps_ctx *a, *b;
	struct qps_ep *tx = NULL, *rx;
	struct qps_ep_counters ct, cr;
	struct qps_stats sa, sb;
	struct sr_snap snap;
	struct sr_seg seg;
	char buf[256];
	int i, rcvbuf = 5, prio = 1;
	uint64_t t;

	t_suite_begin();
	a = t_suite_ctx(g_wire, "198.18.0.1");
	b = t_suite_ctx(g_wire, "198.18.0.2");
	rx = t_ep_bound(b, "198.18.0.2", 6000, 2000);
	T_EQ(qps_setopt(rx, QPS_OPT_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	T_EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &tx), 0);
	T_EQ(qps_setopt(tx, QPS_OPT_PRIORITY, &prio, sizeof(prio)), 0);
	T_EQ(qps_connect(tx, (struct sockaddr *)&dst, sizeof(dst)), 0);
	memset(buf, 'z', sizeof(buf));
	for (i = 0; i < 8; i++)
		T_EQ(qps_send(tx, buf, 100 + (size_t)i, 0), 100 + i);
	/* Three of eight find the queue full; one is read short. */
	T_EQ(qps_recv(rx, buf, 10, 0), 10);
	for (i = 0; i < 4; i++)
		T_GE(qps_recv(rx, buf, sizeof(buf), 0), 100);
	T_EQ(qps_ctx_progress(a) >= 0, 1);

	T_EQ(qps_ep_stats(tx, &ct, sizeof(ct)), sizeof(ct));
	T_EQ(ct.tx_packets, 8);
	T_EQ(ct.tx_bytes, 8 * 100 + 28);
	T_EQ(ct.priority, 1);
	T_EQ(ct.band, 2);
	T_GE(ct.txq, 0);
	T_LE(ct.txq, (long long)a->nsq - 1);
	T_EQ(ct.peer.sin_port, htons(6000));
	T_EQ(ct.peer.sin_addr.s_addr, t_ip4("198.18.0.2"));
	T_EQ(ct.local.sin_family, AF_INET);	/* autobound */
	T_EQ(qps_ep_stats(rx, &cr, sizeof(cr)), sizeof(cr));
	T_EQ(cr.rx_packets, 5);
	T_EQ(cr.rx_queue_full, 3);
	T_EQ(cr.rx_truncated, 1);
	T_EQ(cr.rxq_hwm, 5);
	T_EQ(cr.rxq_depth, 0);
	T_EQ(cr.rcvbuf, 5);
	T_EQ(cr.local.sin_port, htons(6000));

	/* The segment, read as qps_stat reads it, says the same. */
	sa = t_ctx_stats(a);
	sb = t_ctx_stats(b);
	t = now_realtime();
	wait_snap(a, t);
	wait_snap(b, t);
	T_EQ_FATAL(seg_of(b, &seg), 0);
	T_EQ_FATAL(sr_read(&seg, &snap), 0);
	expect_equal(&snap.all, &sb);
	T_EQ_FATAL(snap.neps, 1);
	T_EQ(snap.eps[0].slot, rx - b->ept.eps);
	T_EQ(snap.eps[0].b.rx_packets, 5);
	T_EQ(snap.eps[0].b.rx_queue_full, 3);
	sr_snap_free(&snap);
	sr_close(&seg);
	T_EQ_FATAL(seg_of(a, &seg), 0);
	T_EQ_FATAL(sr_read(&seg, &snap), 0);
	expect_equal(&snap.all, &sa);
	T_EQ(snap.all.tx_packets, 8);
	sr_snap_free(&snap);
	sr_close(&seg);

	/* A reused slot starts from 0. */
	T_EQ(qps_ep_close(tx), 0);
	T_EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &tx), 0);
	T_EQ(qps_ep_stats(tx, &ct, sizeof(ct)), sizeof(ct));
	T_EQ(ct.tx_packets, 0);
	T_EQ(ct.txq, -1);
	t_suite_end();
}

static void test_fanout_counts(void)
{
	struct sockaddr_in grp = t_sin("239.9.9.9", 6100);
	struct qps_ep *eps[4], *tx = NULL;
	struct qps_ep_counters c;
	struct qps_ctx *a, *b;
	struct qps_mreq m;
	struct qps_stats sb;
	char buf[64] = "fan-out";
	uint64_t sum = 0;
	int i, k, one = 1;

	t_suite_begin();
	a = t_suite_ctx(g_wire, "198.18.0.1");
	b = t_suite_ctx(g_wire, "198.18.0.2");
	for (i = 0; i < 4; i++) {
		T_EQ_FATAL(qps_ep_create(b, QPS_EP_DGRAM, &eps[i]), 0);
		T_EQ(qps_setopt(eps[i], QPS_OPT_REUSEADDR, &one, sizeof(one)),
		     0);
		T_EQ(qps_bind(eps[i], (struct sockaddr *)&grp, sizeof(grp)),
		     0);
		memset(&m, 0, sizeof(m));
		m.group = grp.sin_addr;
		/* The last one accepts another source only. */
		if (i == 3)
			m.source.s_addr = t_ip4("198.18.0.77");
		T_EQ(qps_join(eps[i], &m, sizeof(m)), 0);
	}
	T_EQ_FATAL(qps_ep_create(a, QPS_EP_DGRAM, &tx), 0);
	for (i = 0; i < 20; i++)
		T_EQ(qps_sendto(tx, buf, 40, 0, (struct sockaddr *)&grp,
				sizeof(grp)), 40);
	for (i = 0; i < 3; i++)
		for (k = 0; k < 20; k++)
			T_EQ(qps_recv(eps[i], buf, sizeof(buf),
				      QPS_MSG_DONTWAIT) == 40 ||
			     qps_recv(eps[i], buf, sizeof(buf), 0) == 40, 1);
	for (i = 0; i < 4; i++) {
		T_EQ(qps_ep_stats(eps[i], &c, sizeof(c)), sizeof(c));
		T_EQ(c.rx_packets, i < 3 ? 20 : 0);
		T_EQ(c.rx_bytes, i < 3 ? 800 : 0);
		T_EQ(c.rx_filtered, i < 3 ? 0 : 20);
		T_EQ(c.ngroups, 1);
		T_EQ(c.groups[0].group.s_addr, grp.sin_addr.s_addr);
		T_EQ(c.groups[0].source.s_addr,
		     i < 3 ? 0 : t_ip4("198.18.0.77"));
		sum += c.rx_packets;
	}
	sb = t_ctx_stats(b);
	T_EQ(sb.rx_packets, sum);
	T_EQ(sb.rx_mc_filtered, 20);
	/* Leaving shows at once. */
	memset(&m, 0, sizeof(m));
	m.group = grp.sin_addr;
	T_EQ(qps_leave(eps[0], &m, sizeof(m)), 0);
	T_EQ(qps_ep_stats(eps[0], &c, sizeof(c)), sizeof(c));
	T_EQ(c.ngroups, 0);
	t_suite_end();
}

/* ---- a segment that cannot be had: the process must not die ---- */

/* Codes a child below exits with; 77 skips. */
enum { C_OK, C_CREATE_SMALL, C_NOT_PUBLISHED, C_CREATE, C_PUBLISHED,
       C_TRAFFIC, C_LOG, C_LEFT };

static int null_ctx(uint32_t max_ep, struct qps_ctx **ctx)
{
	struct qps_ctx_attr a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_NUM_TXQ;
	a.provider = "null";
	a.num_txq = 1;
	if (max_ep) {
		a.comp_mask |= QPS_CTX_ATTR_MAX_EP;
		a.max_ep = max_ep;
	}
	return qps_ctx_create(&a, ctx);
}

/* Lines on stderr since @fd (a memfd that is stderr) was made; the
 * whole text is copied to @text. */
static int log_lines(int fd, char *text, size_t len)
{
	ssize_t n = pread(fd, text, len - 1, 0);
	int lines = 0;
	ssize_t i;

	text[n > 0 ? n : 0] = '\0';
	for (i = 0; i < n; i++)
		lines += text[i] == '\n';
	return lines;
}

static int my_files(void)
{
	char prefix[64];
	struct dirent *e;
	DIR *d = opendir(QPS_STAT_DIR);
	int n = 0;

	snprintf(prefix, sizeof(prefix), "%s%d.", QPS_STAT_PREFIX,
		 (int)getpid());
	while (d && (e = readdir(d)) != NULL)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

/*
 * In a child whose segments cannot get their space (@max_fit endpoints
 * fit, the default 1024 do not): a small context publishes, a default one
 * keeps its counters private with one line on stderr, and works.
 */
static int no_space_child(void)
{
	struct sockaddr_in dst = t_sin("198.18.0.2", 9);
	struct qps_ctx *small = NULL, *big = NULL;
	struct qps_ep *ep = NULL;
	struct qps_stats st;
	char text[2048];
	int fd, err, lines;

	fd = memfd_create("stderr", 0);
	err = dup(2);
	if (fd < 0 || err < 0 || dup2(fd, 2) < 0)
		return 77;
	if (null_ctx(16, &small) == -ENOENT)
		return 77;	/* no null provider in this build */
	if (!small)
		return C_CREATE_SMALL;
	if (!small->stat.shm)
		return C_NOT_PUBLISHED;
	if (null_ctx(0, &big) != 0)
		return C_CREATE;
	if (big->stat.shm)
		return C_PUBLISHED;
	if (qps_ep_create(big, QPS_EP_DGRAM, &ep) != 0 ||
	    qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&dst,
		       sizeof(dst)) != 1 ||
	    qps_ctx_flush(big) < 0 ||
	    qps_ctx_stats(big, &st, sizeof(st)) != sizeof(st) ||
	    st.tx_packets != 1)
		return C_TRAFFIC;
	lines = log_lines(fd, text, sizeof(text));
	dup2(err, 2);
	if (lines != 1 || !strstr(text, "stats segment")) {
		fprintf(stderr, "stderr of the child, %d lines:\n%s", lines,
			text);
		return C_LOG;
	}
	if (my_files() != 1)
		return C_LEFT;
	qps_ep_close(ep);
	qps_ctx_destroy(big);
	qps_ctx_destroy(small);
	return my_files() ? C_LEFT : C_OK;
}

/*
 * A full /dev/shm: tmpfs reserves no page at ftruncate, so the segment
 * was made and mapped, and the first store to a page it could not have
 * raised SIGBUS. Here /dev/shm is a 128 KiB tmpfs of the child's own
 * (a private mount namespace).
 */
static void test_full_shm(void)
{
	int pid, st;

	if (geteuid() != 0) {
		printf("skipped: needs root (mount namespace) ");
		return;
	}
	if (t_under_valgrind()) {
		printf("skipped under valgrind: it checks mount's arguments as "
		       "it cannot know them, and a tmpfs this small leaves no "
		       "room for its own files ");
		return;
	}
	pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    mount("tmpfs", QPS_STAT_DIR, "tmpfs", MS_NOSUID | MS_NODEV,
			  "size=128k") != 0)
			_exit(77);
		_exit(no_space_child());
	}
	st = t_wait_child(pid, 60000);
	if (st == 77) {
		printf("skipped: no mount namespace or no null provider ");
		return;
	}
	T_EQ(st, C_OK);
}

/*
 * RLIMIT_FSIZE below the segment's size: ftruncate (and fallocate) past
 * it send SIGXFSZ, whose default action ends the process.
 */
static void test_fsize_limit(void)
{
	int pid, st;

	pid = fork();
	if (pid == 0) {
		struct rlimit fs = { 128 << 10, 128 << 10 };
		struct rlimit core = { 0, 0 };

		if (setrlimit(RLIMIT_CORE, &core) != 0 ||
		    setrlimit(RLIMIT_FSIZE, &fs) != 0)
			_exit(77);
		_exit(no_space_child());
	}
	st = t_wait_child(pid, 60000);
	if (st == 77) {
		printf("skipped: no null provider ");
		return;
	}
	T_EQ(st, C_OK);
}

static unsigned int seg_mode(struct qps_ctx *ctx)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s%s", QPS_STAT_DIR, ctx->stat.name);
	if (stat(path, &st) != 0)
		return 0;
	return st.st_mode & 07777;
}

/* Only the owner (and root) reads a segment, unless asked otherwise. */
static void test_mode(void)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, "198.18.0.1");
	struct qps_ctx *ctx = NULL;

	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(seg_mode(ctx), 0600);
	T_EQ(qps_ctx_destroy(ctx), 0);
	a.comp_mask |= QPS_CTX_ATTR_STATS;
	a.stats = QPS_STATS_ALL_USERS;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(seg_mode(ctx), 0644);
	T_EQ(qps_ctx_destroy(ctx), 0);
	a.comp_mask &= ~(uint64_t)QPS_CTX_ATTR_STATS;
	setenv("QPS_STATS", "2", 1);
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(seg_mode(ctx), 0644);
	T_EQ(qps_ctx_destroy(ctx), 0);
	/* The attribute wins: owner only. */
	a.comp_mask |= QPS_CTX_ATTR_STATS;
	a.stats = QPS_STATS_OWNER;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(seg_mode(ctx), 0600);
	T_EQ(qps_ctx_destroy(ctx), 0);
	setenv("QPS_STATS", "7", 1);
	a.comp_mask &= ~(uint64_t)QPS_CTX_ATTR_STATS;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	T_EQ(seg_mode(ctx), 0600);
	T_EQ(qps_ctx_destroy(ctx), 0);
	unsetenv("QPS_STATS");
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "segment: named, described, removed", test_lifetime },
		{ "segment: attribute and QPS_STATS=0 opt out",
		  test_opt_out },
		{ "qps_ep_stats: errors, size, fresh endpoint",
		  test_ep_stats_errors },
		{ "unicast: endpoint counters, segment = qps_ctx_stats",
		  test_unicast_counts },
		{ "multicast fan-out: per endpoint, filtered",
		  test_fanout_counts },
		{ "no space in /dev/shm: private, one line, no SIGBUS",
		  test_full_shm },
		{ "RLIMIT_FSIZE below the segment: private, no SIGXFSZ",
		  test_fsize_limit },
		{ "segment mode: owner only unless asked", test_mode },
		CU_TEST_INFO_NULL,
	};

	unsetenv("QPS_STATS");
	t_wire_name(g_wire, sizeof(g_wire), "stat");
	atexit(t_suite_cleanup);
	return t_run("stat", tests);
}
