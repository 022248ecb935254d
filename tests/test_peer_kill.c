// SPDX-License-Identifier: MIT
/*
 * Peer failure on the emu wire: a process killed with SIGKILL
 * while it sends must not take the others down with it.
 *
 * kill mid-burst: two survivor contexts in this process (R receives on a
 * thread, T sends to R and receives from R) and a victim process that
 * bursts datagrams to R. Each round the victim (this binary re-executed
 * with --victim) attaches, reports its port slot, starts its bursts, and
 * is killed at a random point of them; then T and R must exchange a full
 * round of datagrams in both directions, and the next victim must get the
 * same slot and address back (the dead one's port was reclaimed) and
 * deliver again. The victim spends most of a burst inside R's rx_lock,
 * so some kills land there: the next locker recovers the robust mutex
 * and rolls the half-done delivery forward.
 *
 * half-done deliveries: a child takes a port's rx_lock, leaves each
 * window of a delivery half-written (CQE without prod, prod without
 * tail) and dies; the port must go on receiving, in order, into the
 * right buffers.
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu.h"
#include "qps_int.h"

#define KILLS 20
#define R_IP "198.18.0.1"
#define T_IP "198.18.0.2"
#define V_IP "198.18.0.9"
#define R_PORT 7000
#define T_PORT 7001
#define ROUND_MSGS 64
#define REPLY_MSGS 16
#define VICTIM_BATCH 32

static char g_wire[64];

/* --- the victim process ------------------------------------------------- */

struct victim_hello {
	int32_t status;		/* 0, or the -errno that stopped it */
	int32_t port;		/* its slot on the wire */
};

/* Attach, report the slot, then burst to R until killed. */
static int victim_main(const char *wire, int fd)
{
	struct victim_hello h = { 0, -1 };
	struct sockaddr_in dst = t_sin(R_IP, R_PORT);
	struct qps_msg m[VICTIM_BATCH];
	char payload[VICTIM_BATCH][32];
	struct qps_ctx *ctx = NULL;
	struct qps_ep *ep = NULL;
	uint32_t seq = 0;
	unsigned int i;
	bool told = false;

	h.status = t_ctx_emu(wire, V_IP, &ctx);
	if (!h.status)
		h.status = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (!h.status)
		h.port = (int32_t)qps_emu_test_port(ctx->dev);
	if (write(fd, &h, sizeof(h)) != sizeof(h) || h.status)
		return 1;
	for (;;) {
		for (i = 0; i < VICTIM_BATCH; i++) {
			snprintf(payload[i], sizeof(payload[i]), "V%u", seq++);
			m[i] = (struct qps_msg){
				.buf = payload[i],
				.len = sizeof(payload[i]),
				.dest = (struct sockaddr *)&dst,
				.dest_len = sizeof(dst),
				.priority = -1,
			};
		}
		qps_sendmmsg(ep, m, VICTIM_BATCH, QPS_MSG_DONTWAIT);
		qps_ctx_progress(ctx);
		if (!told) {
			char s = 'S';

			told = write(fd, &s, 1) == 1;
		}
	}
}

/* Read exactly @len bytes within @ms milliseconds; 0 or -1. */
static int read_timed(int fd, void *buf, size_t len, int ms)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, ms) <= 0)
			return -1;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* Until @pid is a zombie (dead, not reaped); false after 5 s. */
static bool wait_zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'Z')
			return true;
		t_sleep_ms(1);
	}
	return false;
}

static pid_t victim_start(int *rfd)
{
	char fdarg[16];
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		snprintf(fdarg, sizeof(fdarg), "%d", p[1]);
		execl("/proc/self/exe", "test_peer_kill", "--victim", g_wire,
		      fdarg, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

/* --- the survivors ------------------------------------------------------ */

struct rx_thread {
	struct qps_ep *ep;
	int stop;
	uint64_t from_t[KILLS + 1];	/* T's datagrams, per round */
	uint64_t from_v;		/* the victims' datagrams */
	uint64_t other;
};

static void *rx_loop(void *arg)
{
	struct rx_thread *rt = arg;
	char buf[64];

	/* Acquire: pairs with the release store in t_thread_stop(). */
	while (!__atomic_load_n(&rt->stop, __ATOMIC_ACQUIRE)) {
		ssize_t n = qps_recv(rt->ep, buf, sizeof(buf) - 1,
				     QPS_MSG_DONTWAIT);
		unsigned int round;

		if (n < 0) {
			sched_yield();
			continue;
		}
		buf[n] = 0;
		if (buf[0] == 'V')
			__atomic_fetch_add(&rt->from_v, 1, __ATOMIC_RELAXED);
		else if (sscanf(buf, "T%u", &round) == 1 && round <= KILLS)
			__atomic_fetch_add(&rt->from_t[round], 1,
					   __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&rt->other, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Until R's thread has drained what the victim left queued. */
static void settle(const struct rx_thread *rt)
{
	uint64_t last = ~0ull, v;
	int still = 0;

	while (still < 20) {
		v = __atomic_load_n(&rt->from_v, __ATOMIC_RELAXED);
		still = v == last ? still + 1 : 0;
		last = v;
		t_sleep_ms(1);
	}
}

static uint64_t wait_count(const uint64_t *c, uint64_t want, int ms)
{
	uint64_t v = 0;
	int waited;

	for (waited = 0; waited <= ms; waited++) {
		v = __atomic_load_n(c, __ATOMIC_RELAXED);
		if (v >= want)
			break;
		t_sleep_ms(1);
	}
	return v;
}

/* T -> R, a full round, and R -> T back: nothing may be missing. */
static void exchange(struct qps_ep *tep, struct qps_ep *rep,
		     struct rx_thread *rt, unsigned int round)
{
	struct sockaddr_in r = t_sin(R_IP, R_PORT), t = t_sin(T_IP, T_PORT);
	char buf[32];
	unsigned int i;

	for (i = 0; i < ROUND_MSGS; i++) {
		snprintf(buf, sizeof(buf), "T%u/%u", round, i);
		T_EQ(qps_sendto(tep, buf, sizeof(buf), 0,
				(struct sockaddr *)&r, sizeof(r)),
		     sizeof(buf));
		/* Paced, so that R's queue never overflows and a loss
		 * means a broken port, not a full one. */
		if (i % 16 == 15)
			wait_count(&rt->from_t[round], i + 1, 2000);
	}
	T_EQ(wait_count(&rt->from_t[round], ROUND_MSGS, 5000), ROUND_MSGS);
	for (i = 0; i < REPLY_MSGS; i++) {
		snprintf(buf, sizeof(buf), "R%u/%u", round, i);
		T_EQ(qps_sendto(rep, buf, sizeof(buf), 0,
				(struct sockaddr *)&t, sizeof(t)),
		     sizeof(buf));
		T_EQ(qps_recv(tep, buf, sizeof(buf), 0), sizeof(buf));
	}
}

static struct qps_emu_counters emu_ctrs(struct qps_ctx *ctx)
{
	struct qps_emu_counters c;

	CU_ASSERT_EQUAL(qps_emu_counters_all(ctx->dev, &c), 0);
	return c;
}

static void test_kill_mid_burst(void)
{
	struct qps_ctx *rctx, *tctx;
	struct qps_ep *rep, *tep;
	struct rx_thread rt;
	struct qps_emu_counters c;
	struct qps_stats st;
	pthread_t th;
	unsigned int k, kills = 0, seed = (unsigned int)getpid();
	pid_t zombie = 0;
	int32_t slot = -1;
	uint64_t v_before;

	memset(&rt, 0, sizeof(rt));
	rctx = t_suite_ctx(g_wire, R_IP);
	tctx = t_suite_ctx(g_wire, T_IP);
	rep = t_ep_bound(rctx, R_IP, R_PORT, 2000);
	tep = t_ep_bound(tctx, T_IP, T_PORT, 2000);
	rt.ep = rep;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, rx_loop, &rt), 0);
	exchange(tep, rep, &rt, 0);

	for (k = 1; k <= KILLS; k++) {
		struct victim_hello h = { -1, -1 };
		char s = 0;
		int fd = -1, wst;
		pid_t pid = victim_start(&fd);

		CU_ASSERT_FATAL(pid > 0);
		v_before = __atomic_load_n(&rt.from_v, __ATOMIC_RELAXED);
		CU_ASSERT_EQUAL(read_timed(fd, &h, sizeof(h), 5000), 0);
		/* The restarted victim gets the dead one's address (no
		 * -EADDRINUSE) and its slot back. */
		T_EQ(h.status, 0);
		if (slot < 0)
			slot = h.port;
		T_EQ(h.port, slot);
		CU_ASSERT_EQUAL(read_timed(fd, &s, 1, 5000), 0);
		/* It rejoined: R receives from it. */
		T_GE(wait_count(&rt.from_v, v_before + 1, 5000), v_before + 1);
		/* Mid-burst: it goes on delivering into R while we wait. */
		usleep(200 + rand_r(&seed) % 3000);
		CU_ASSERT_EQUAL(kill(pid, SIGKILL), 0);
		/* What qps_stat would remove: the victim's stats segment. */
		t_stat_reap(pid);
		if (zombie > 0) {
			CU_ASSERT_EQUAL(waitpid(zombie, &wst, 0), zombie);
			zombie = 0;
		}
		if (k % 2) {
			/* Not reaped until the next victim has attached: a
			 * zombie's slot is reclaimed too. */
			CU_ASSERT(wait_zombie(pid));
			zombie = pid;
		} else {
			CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
			CU_ASSERT(WIFSIGNALED(wst) &&
				  WTERMSIG(wst) == SIGKILL);
		}
		close(fd);
		kills++;
		settle(&rt);
		exchange(tep, rep, &rt, k);
		if (CU_get_number_of_failures())
			break;
	}
	if (zombie > 0)
		waitpid(zombie, NULL, 0);
	t_thread_stop(th, &rt.stop);
	c = emu_ctrs(rctx);
	st = t_ctx_stats(rctx);
	printf("\n    %u kills, victim datagrams received %llu, R: rx_lock "
	       "recovered %llu, rx_corrupt %llu, cqe_corrupt %llu, "
	       "dev_rx_drops %llu\n", kills,
	       (unsigned long long)rt.from_v,
	       (unsigned long long)c.lock_recovered,
	       (unsigned long long)c.rx_corrupt,
	       (unsigned long long)c.cqe_corrupt,
	       (unsigned long long)st.dev_rx_drops);
	/* A dead peer is not a hostile one: nothing it left behind may
	 * read as corrupt once the lock was recovered. */
	T_EQ(c.rx_corrupt, 0);
	T_EQ(c.cqe_corrupt, 0);
	T_EQ(rt.other, 0);
	T_EQ(st.rx_bad[QPS_RX_BAD_UDP_CSUM], 0);
	t_suite_end();
}

/* --- half-done deliveries ----------------------------------------------- */

static const struct qps_provider_ops *E = &qps_emu_ops;

struct port {
	struct qps_dev *dev;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_flow *flow;
	uint8_t *bufs;
};

#define NBUF 8u
#define BUF_SZ 2048u

static void port_open(struct port *p, const char *ip, bool rx)
{
	struct qps_dev_attr attr = { .dev = g_wire, .addr_set = true };
	struct qps_qp_init_attr qa = {
		.qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 8, .max_recv_wr = rx ? NBUF : 0,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	uint8_t fbuf[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	struct qps_flow_match m = { .type = IBV_FLOW_ATTR_ALL_DEFAULT };
	void *b;
	unsigned int i;

	memset(p, 0, sizeof(*p));
	inet_pton(AF_INET, ip, &attr.addr);
	CU_ASSERT_EQUAL_FATAL(E->open(&attr, &p->dev), 0);
	CU_ASSERT_EQUAL_FATAL(E->create_cq(p->dev, 16, &p->cq), 0);
	qa.send_cq = p->cq;
	qa.recv_cq = rx ? p->cq : NULL;
	CU_ASSERT_EQUAL_FATAL(E->create_qp(p->dev, &qa, &p->qp), 0);
	if (!rx)
		return;
	CU_ASSERT_EQUAL_FATAL(E->create_flow(p->qp,
		qps_flow_attr_build(fbuf, &m), &p->flow), 0);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(p->dev, NBUF * BUF_SZ, &b), 0);
	p->bufs = b;
	for (i = 0; i < NBUF; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)(p->bufs + (size_t)i * BUF_SZ),
			.length = BUF_SZ,
		};
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		CU_ASSERT_EQUAL_FATAL(E->post_recv(p->qp, &wr, &bad), 0);
	}
}

static void port_close(struct port *p)
{
	CU_ASSERT_EQUAL(E->close(p->dev), 0);
}

/* One frame from @from to @to's port carrying @tag. */
static void deliver(struct port *from, struct port *to, uint8_t tag)
{
	struct qps_emu_dev *f = qps_emu_dev(from->dev);
	struct qps_emu_dev *t = qps_emu_dev(to->dev);
	struct qps_frame_hdr h = { .ttl = 64 };
	uint8_t frame[QPS_HDRS_LEN + 16];

	memcpy(h.dst_mac, t->sp->mac, 6);
	memcpy(h.src_mac, f->sp->mac, 6);
	h.saddr = f->sp->addr;
	h.daddr = t->sp->addr;
	h.sport = htons(1);
	h.dport = htons(2);
	memset(frame + QPS_HDRS_LEN, tag, 16);
	CU_ASSERT_FATAL(qps_frame_build(frame, &h, 16) > 0);
	T_EQ(qps_emu_wire_tx(f, frame, sizeof(frame)), 1);
}

/* Poll one receive completion and check it is buffer @idx with @tag. */
static void expect_rx(struct port *p, uint64_t idx, uint8_t tag)
{
	struct ibv_wc wc;

	T_EQ(E->poll_cq(p->cq, 1, &wc), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.wr_id, idx);
	T_EQ(p->bufs[idx * BUF_SZ + QPS_HDRS_LEN], tag);
}

enum window { W_CQE_NO_PROD, W_PROD_NO_TAIL };

/*
 * In a child: take @p's rx_lock and do what qps_emu_rq_deliver() does up
 * to @w, for the buffer at the RQ's tail, then die holding the lock.
 */
static void die_in_window(struct port *p, enum window w)
{
	struct qps_emu_dev *d = qps_emu_dev(p->dev);
	struct qps_emu_qp *q = qps_emu_qp(p->qp);
	struct qps_emu_shm_rq *srq = &d->sp->rq[q->rq_slot];
	struct qps_emu_cq *cq = qps_emu_cq(p->cq);
	struct qps_emu_shm_cq *scq = &d->sp->cq[cq->slot];
	struct qps_emu_cqe_info ci = {
		.opcode = QPS_EMU_RECV_OPCODE_SEND,
		.qpn = srq->qpn,
		.wqe_index = (uint16_t)srq->tail,
		.byte_cnt = QPS_HDRS_LEN + 16,
	};
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		if (qps_emu_lock(&d->sp->rx_lock) < 0)
			_exit(1);
		if (qps_emu_cq_write(d->sp, d->qarea, cq->slot, &ci) !=
		    QPS_EMU_CQE_OK)
			_exit(2);
		if (w == W_CQE_NO_PROD)
			scq->prod--;
		raise(SIGKILL);
		_exit(3);
	}
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void test_half_done_delivery(void)
{
	struct port rx, tx;
	struct qps_emu_counters c;
	struct qps_emu_qp *q;

	port_open(&rx, "198.18.0.21", true);
	port_open(&tx, "198.18.0.22", false);
	q = qps_emu_qp(rx.qp);

	/* CQE written, prod not advanced; the owner consumes the CQE
	 * before anyone takes the lock (the window where cons passes
	 * prod). */
	memset(rx.bufs, 0, NBUF * BUF_SZ);
	die_in_window(&rx, W_CQE_NO_PROD);
	expect_rx(&rx, 0, 0);
	deliver(&tx, &rx, 0xb1);
	expect_rx(&rx, 1, 0xb1);

	/* prod advanced, tail not: the next frame must take the next
	 * buffer, not the one the dead peer already completed. */
	die_in_window(&rx, W_PROD_NO_TAIL);
	deliver(&tx, &rx, 0xb2);
	expect_rx(&rx, 2, 0);	/* the dead peer's completion */
	expect_rx(&rx, 3, 0xb2);
	rx.bufs[2 * BUF_SZ + QPS_HDRS_LEN] = 0x5a;	/* still ours */
	deliver(&tx, &rx, 0xb3);
	expect_rx(&rx, 4, 0xb3);
	T_EQ(rx.bufs[2 * BUF_SZ + QPS_HDRS_LEN], 0x5a);

	T_EQ(qps_emu_counters_all(rx.dev, &c), 0);
	T_EQ(c.lock_recovered, 2);
	T_EQ(c.rx_corrupt, 0);
	T_EQ(c.cqe_corrupt, 0);
	T_EQ(q->rq_done, 5);
	port_close(&tx);
	port_close(&rx);
}

static void cleanup(void)
{
	t_suite_cleanup();
}

int main(int argc, char **argv)
{
	CU_TestInfo tests[] = {
		{ "killed mid-burst: survivors go on, slot reused",
		  test_kill_mid_burst },
		{ "half-done deliveries are rolled forward",
		  test_half_done_delivery },
		CU_TEST_INFO_NULL,
	};

	if (argc == 4 && !strcmp(argv[1], "--victim"))
		return victim_main(argv[2], atoi(argv[3]));
	signal(SIGPIPE, SIG_IGN);
	t_wire_name(g_wire, sizeof(g_wire), "kill");
	atexit(cleanup);
	return t_run("peer_kill", tests);
}
