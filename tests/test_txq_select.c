// SPDX-License-Identifier: MIT
/*
 * Send-QP selection (src/txq_select.c): the cached pick of connected
 * endpoints and its resets, hash balance, the in-flight rule of the flow
 * table, reordering (a model of QPs that deliver FIFO at different speeds,
 * and real threads moved between CPUs), and concurrent senders on one
 * flow table. The reorder tests also run with the rule switched off and
 * require reorderings then, so they are shown able to fail.
 */
#define _GNU_SOURCE	/* pthread_setaffinity_np, sched_getcpu */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "t_util.h"
#include "txq_select.h"

/* xorshift64*: the tests' own reproducible randomness. */
static uint64_t t_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static uint32_t t_rand_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)((t_rand(s) >> 32) * n >> 32);
}

static struct qps_txq_tuple t_tuple(uint32_t saddr, uint32_t daddr,
				    uint16_t sport, uint16_t dport)
{
	struct qps_txq_tuple t = {
		.saddr = htonl(saddr), .daddr = htonl(daddr),
		.sport = htons(sport), .dport = htons(dport),
	};

	return t;
}

static struct qps_txq_sel *t_sel(const struct qps_txq_attr *a)
{
	struct qps_txq_sel *sel = NULL;

	CU_ASSERT_EQUAL_FATAL(qps_txq_create(a, &sel), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sel);
	return sel;
}

static struct qps_txq_stats t_stats(struct qps_txq_sel *sel)
{
	struct qps_txq_stats st;

	CU_ASSERT_EQUAL(qps_txq_stats(sel, &st), 0);
	return st;
}

/* --- attributes ------------------------------------------------------ */

static void test_attr(void)
{
	const uint16_t bad_map[2] = { 0, 4 };
	struct qps_txq_attr a = { .nqp = 4 };
	struct qps_txq_sel *sel = NULL;

	CU_ASSERT_EQUAL(qps_txq_create(NULL, &sel), -EINVAL);
	a.nqp = 3;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.nqp = 0;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.nqp = QPS_TXQ_MAX_QP * 2;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.nqp = 4;
	a.flow_entries = 100;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.flow_entries = 0;
	a.nshards = QPS_TXQ_MAX_SHARDS + 1;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.nshards = 0;
	a.policy = QPS_TXQ_POLICY_MAX;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.policy = QPS_TXQ_POLICY_CPU;
	a.cpu_map = bad_map;
	a.cpu_map_len = 2;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.cpu_map = NULL;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	a.cpu_map_len = 0;
	a.flags = 1u << 30;
	CU_ASSERT_EQUAL(qps_txq_create(&a, &sel), -EINVAL);
	CU_ASSERT_PTR_NULL(sel);
	a.flags = 0;
	sel = t_sel(&a);
	CU_ASSERT_EQUAL(qps_txq_enqueue(sel, 4, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(qps_txq_enqueue(sel, -1, 1, NULL), -EINVAL);
	CU_ASSERT_EQUAL(qps_txq_complete(sel, 4, 1), -EINVAL);
	CU_ASSERT_EQUAL(qps_txq_qp_reset(sel, 4), -EINVAL);
	CU_ASSERT_EQUAL(qps_txq_flow_commit(sel, 0, 4, 0), -EINVAL);
	qps_txq_destroy(sel);

	CU_ASSERT(qps_txq_default_nqp() >= 1 && qps_txq_default_nqp() <= 8);
	CU_ASSERT_EQUAL(qps_txq_default_nqp() & (qps_txq_default_nqp() - 1),
			0);
}

/* --- cached pick ----------------------------------------------------- */

static void test_cached_once(void)
{
	struct qps_txq_attr a = { .nqp = 4 };
	struct qps_txq_sel *sel = t_sel(&a);
	struct qps_txq_tuple t = t_tuple(0xc6120001, 0xc612000a, 40000, 9000);
	struct qps_txq_cache c;
	struct qps_txq_stats st;
	uint64_t gen = 7;
	int first, qp, i, same = 0;

	qps_txq_cache_init(&c);
	first = qps_txq_pick_cached(sel, &c, gen, &t);
	CU_ASSERT(first >= 0 && first < 4);
	CU_ASSERT_EQUAL(first, qps_txq_pick_hash(sel, &t));
	for (i = 1; i < 10000; i++)
		same += qps_txq_pick_cached(sel, &c, gen, &t) == first;
	CU_ASSERT_EQUAL(same, 9999);
	st = t_stats(sel);
	/* one computation for the sends, one for the pick_hash check */
	CU_ASSERT_EQUAL(st.picks_computed, 2);
	CU_ASSERT_EQUAL(st.picks_cached, 9999);

	/* A route change: exactly one new computation. */
	gen++;
	for (i = 0; i < 10000; i++)
		CU_ASSERT_EQUAL(qps_txq_pick_cached(sel, &c, gen, &t), first);
	st = t_stats(sel);
	CU_ASSERT_EQUAL(st.picks_computed, 3);
	CU_ASSERT_EQUAL(st.picks_cached, 9999 + 9999);
	CU_ASSERT_EQUAL(st.resets[QPS_TXQ_RESET_ROUTE], 1);

	/* Disconnect/reconnect: reset once (a second reset finds it unset). */
	CU_ASSERT_EQUAL(qps_txq_cache_reset(sel, &c, QPS_TXQ_RESET_CONNECT), 1);
	CU_ASSERT_EQUAL(qps_txq_cache_reset(sel, &c, QPS_TXQ_RESET_CONNECT), 0);
	CU_ASSERT_EQUAL(qps_txq_cache_reset(sel, &c, QPS_TXQ_RESET_MAX),
			-EINVAL);
	qp = qps_txq_pick_cached(sel, &c, gen, &t);
	CU_ASSERT_EQUAL(qp, first);
	qps_txq_pick_cached(sel, &c, gen, &t);
	st = t_stats(sel);
	CU_ASSERT_EQUAL(st.picks_computed, 4);
	CU_ASSERT_EQUAL(st.resets[QPS_TXQ_RESET_CONNECT], 1);

	/* Another QP's error leaves the cache alone; its own QP's does not. */
	CU_ASSERT_EQUAL(qps_txq_qp_reset(sel, (first + 1) % 4), 0);
	qps_txq_pick_cached(sel, &c, gen, &t);
	CU_ASSERT_EQUAL(t_stats(sel).picks_computed, 4);
	CU_ASSERT_EQUAL(qps_txq_qp_reset(sel, first), 0);
	for (i = 0; i < 100; i++)
		qps_txq_pick_cached(sel, &c, gen, &t);
	st = t_stats(sel);
	CU_ASSERT_EQUAL(st.picks_computed, 5);
	CU_ASSERT_EQUAL(st.resets[QPS_TXQ_RESET_QP], 1);
	CU_ASSERT_EQUAL(st.resets[QPS_TXQ_RESET_ROUTE], 1);
	CU_ASSERT_EQUAL(st.picks_cached, 9999 * 2 + 1 + 1 + 99);
	qps_txq_destroy(sel);
}

/* --- hash balance ---------------------------------------------------- */

enum { BAL_SPORTS, BAL_CLIENTS, BAL_DPORTS, BAL_RANDOM };

/* busiest / least busy QP over 1,000 flows of @family. */
static double balance(struct qps_txq_sel *sel, int family, uint64_t rs)
{
	uint32_t n[4] = { 0 }, lo = UINT32_MAX, hi = 0, i;
	struct qps_txq_tuple t;
	int qp;

	for (i = 0; i < 1000; i++) {
		switch (family) {
		case BAL_SPORTS:	/* one host, 1,000 sockets */
			t = t_tuple(0xc6120001, 0xc612000a, 32768 + i, 9000);
			break;
		case BAL_CLIENTS:	/* 1,000 clients of one server port */
			t = t_tuple(0xc612000a, 0x0a000000 + 1 + i, 9000,
				    40000);
			break;
		case BAL_DPORTS:
			t = t_tuple(0xc6120001, 0xc612000a, 40000, 1024 + i);
			break;
		default:
			t = t_tuple((uint32_t)t_rand(&rs),
				    (uint32_t)t_rand(&rs),
				    (uint16_t)t_rand(&rs),
				    (uint16_t)t_rand(&rs));
			break;
		}
		qp = qps_txq_pick_hash(sel, &t);
		CU_ASSERT_FATAL(qp >= 0 && qp < 4);
		n[qp]++;
	}
	for (i = 0; i < 4; i++) {
		lo = n[i] < lo ? n[i] : lo;
		hi = n[i] > hi ? n[i] : hi;
	}
	return lo ? (double)hi / lo : 1e9;
}

static void test_hash_balance(void)
{
	struct qps_txq_attr a = { .nqp = 4 };
	struct qps_txq_sel *sel = t_sel(&a);
	uint32_t seed, over[4] = { 0 };
	double r;
	int f;

	/* The default seed, every family: the ratio the issue asks for. */
	for (f = BAL_SPORTS; f <= BAL_RANDOM; f++) {
		r = balance(sel, f, 0x1234567 + (uint64_t)f);
		printf("\n    family %d: busiest/least %.3f", f, r);
		CU_ASSERT(r <= 1.25);
	}
	qps_txq_destroy(sel);

	/*
	 * And not by luck of one seed: over 200 seeds, flows that differ by
	 * a step in one field always meet it (the hash is linear in each
	 * field), random tuples meet it as often as a truly random
	 * assignment would (1,000 balls in 4 bins exceed 1.25 about 6% of
	 * the time; a biased hash would exceed it far more often).
	 */
	a.flags = QPS_TXQ_F_SEED;
	for (seed = 1; seed <= 200; seed++) {
		a.seed = seed * 2654435761u;
		sel = t_sel(&a);
		for (f = BAL_SPORTS; f <= BAL_RANDOM; f++)
			over[f] += balance(sel, f, seed) > 1.25;
		qps_txq_destroy(sel);
	}
	printf("\n    seeds over 1.25 of 200: %u %u %u %u\n", over[0], over[1],
	       over[2], over[3]);
	CU_ASSERT_EQUAL(over[BAL_SPORTS], 0);
	CU_ASSERT_EQUAL(over[BAL_CLIENTS], 0);
	CU_ASSERT_EQUAL(over[BAL_DPORTS], 0);
	CU_ASSERT(over[BAL_RANDOM] <= 24);
}

/* --- policies -------------------------------------------------------- */

static int t_fixed_cpu(void *arg)
{
	return *(const int *)arg;
}

static void test_cpu_policy(void)
{
	const uint16_t map[8] = { 3, 3, 2, 2, 1, 1, 0, 0 };
	struct qps_txq_attr a = {
		.nqp = 4, .policy = QPS_TXQ_POLICY_CPU, .cpu_map = map,
		.cpu_map_len = 8, .getcpu = t_fixed_cpu,
	};
	struct qps_txq_attr ah = { .nqp = 4 };
	struct qps_txq_tuple t = t_tuple(0xc6120001, 0xc612000a, 1, 2);
	struct qps_txq_sel *sel, *hsel;
	int cpu, i;

	a.getcpu_arg = &cpu;
	sel = t_sel(&a);
	hsel = t_sel(&ah);
	for (cpu = 0; cpu < 8; cpu++)
		CU_ASSERT_EQUAL(qps_txq_pick_hash(sel, &t), map[cpu]);
	cpu = 13;	/* beyond the map: cpu & (nqp - 1) */
	CU_ASSERT_EQUAL(qps_txq_pick_hash(sel, &t), 13 & 3);
	cpu = -1;	/* no CPU number: the hash policy */
	for (i = 0; i < 64; i++) {
		t.sport = htons((uint16_t)i);
		CU_ASSERT_EQUAL(qps_txq_pick_hash(sel, &t),
				qps_txq_pick_hash(hsel, &t));
	}
	qps_txq_destroy(sel);
	qps_txq_destroy(hsel);

	/* The real sched_getcpu() */
	a.getcpu = NULL;
	a.cpu_map = NULL;
	a.cpu_map_len = 0;
	sel = t_sel(&a);
	cpu = sched_getcpu();
	i = qps_txq_pick_hash(sel, &t);
	CU_ASSERT(i == (cpu & 3) || sched_getcpu() != cpu);
	qps_txq_destroy(sel);
}

struct t_thr_pick {
	struct qps_txq_sel *sel;
	int qp[3];
};

static void *t_thread_pick(void *arg)
{
	struct t_thr_pick *p = arg;
	struct qps_txq_tuple t = t_tuple(1, 2, 3, 4);
	int i;

	for (i = 0; i < 3; i++) {
		t.sport = htons((uint16_t)(i * 1000));
		p->qp[i] = qps_txq_pick_hash(p->sel, &t);
	}
	return NULL;
}

static void test_thread_policy(void)
{
	struct qps_txq_attr a = { .nqp = 4, .policy = QPS_TXQ_POLICY_THREAD };
	struct qps_txq_sel *sel = t_sel(&a);
	struct t_thr_pick p[4];
	pthread_t th;
	int i, j, seen = 0;

	/* Threads started one after the other take QPs round-robin; each
	 * keeps its own whatever the flow. */
	for (i = 0; i < 4; i++) {
		p[i].sel = sel;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, t_thread_pick,
						     &p[i]), 0);
		pthread_join(th, NULL);
		for (j = 1; j < 3; j++)
			CU_ASSERT_EQUAL(p[i].qp[j], p[i].qp[0]);
		CU_ASSERT_FATAL(p[i].qp[0] >= 0 && p[i].qp[0] < 4);
		seen |= 1 << p[i].qp[0];
	}
	CU_ASSERT_EQUAL(seen, 0xf);
	qps_txq_destroy(sel);
}

/* --- the in-flight rule, step by step -------------------------------- */

struct t_send {
	struct qps_txq_sel *sel;
	uint32_t hash;
};

/* One unconnected send: pick, count it on the QP, record the head. */
static int t_send(struct t_send *s)
{
	uint32_t head;
	int qp = qps_txq_pick_flow(s->sel, s->hash);

	CU_ASSERT_FATAL(qp >= 0);
	CU_ASSERT_EQUAL(qps_txq_enqueue(s->sel, qp, 1, &head), 0);
	CU_ASSERT_EQUAL(qps_txq_flow_commit(s->sel, s->hash, qp, head), 1);
	return qp;
}

static void inflight_steps(bool rule)
{
	struct qps_txq_attr a = {
		.nqp = 4, .policy = QPS_TXQ_POLICY_CPU, .getcpu = t_fixed_cpu,
		/* cross the 2^32 wrap on QP 0 */
		.count_base = UINT32_MAX - 2,
		.flags = rule ? 0 : QPS_TXQ_F_NO_INFLIGHT_RULE,
	};
	struct qps_txq_tuple t = t_tuple(0xc6120001, 0xc612000a, 5000, 9000);
	struct qps_txq_stats st;
	struct t_send s;
	uint32_t enq, done;
	int cpu = 0, i;

	a.getcpu_arg = &cpu;
	s.sel = t_sel(&a);
	s.hash = qps_txq_flow_hash(s.sel, &t);

	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(t_send(&s), 0);
	st = t_stats(s.sel);
	CU_ASSERT_EQUAL(st.flow_new, 1);
	CU_ASSERT_EQUAL(st.flow_deferred, 0);
	CU_ASSERT_EQUAL(st.picks_computed, 5);

	/* The sender moves to CPU 1 (QP 1) with 5 packets in flight. */
	cpu = 1;
	if (!rule) {
		CU_ASSERT_EQUAL(qps_txq_pick_flow(s.sel, s.hash), 1);
		st = t_stats(s.sel);
		CU_ASSERT_EQUAL(st.flow_moves, 1);
		CU_ASSERT_EQUAL(st.flow_deferred, 0);
		qps_txq_destroy(s.sel);
		return;
	}
	CU_ASSERT_EQUAL(qps_txq_pick_flow(s.sel, s.hash), 0);
	CU_ASSERT_EQUAL(qps_txq_complete(s.sel, 0, 4), 0);
	CU_ASSERT_EQUAL(qps_txq_pick_flow(s.sel, s.hash), 0);
	/* More completions than packets: refused, nothing applied. */
	CU_ASSERT_EQUAL(qps_txq_complete(s.sel, 0, 2), -ERANGE);
	CU_ASSERT_EQUAL(qps_txq_pick_flow(s.sel, s.hash), 0);
	st = t_stats(s.sel);
	CU_ASSERT_EQUAL(st.flow_deferred, 3);
	CU_ASSERT_EQUAL(st.flow_moves, 0);

	/* The last one completes: the counter wrapped, the flow moves. */
	CU_ASSERT_EQUAL(qps_txq_complete(s.sel, 0, 1), 0);
	CU_ASSERT_EQUAL(qps_txq_qp_counts(s.sel, 0, &enq, &done), 0);
	CU_ASSERT_EQUAL(enq, done);
	CU_ASSERT(done < 5);	/* wrapped past 2^32 */
	CU_ASSERT_EQUAL(t_send(&s), 1);
	st = t_stats(s.sel);
	CU_ASSERT_EQUAL(st.flow_moves, 1);
	CU_ASSERT_EQUAL(st.flow_deferred, 3);

	/* In flight on QP 1, but the policy agrees: no deferral counted. */
	CU_ASSERT_EQUAL(t_send(&s), 1);
	CU_ASSERT_EQUAL(t_stats(s.sel).flow_deferred, 3);

	/* A WR counted but not posted is taken back and not committed, so
	 * the flow does not wait for a completion that cannot come. */
	CU_ASSERT_EQUAL(qps_txq_complete(s.sel, 1, 2), 0);
	CU_ASSERT_EQUAL(qps_txq_pick_flow(s.sel, s.hash), 1);
	CU_ASSERT_EQUAL(qps_txq_enqueue(s.sel, 1, 1, NULL), 0);
	CU_ASSERT_EQUAL(qps_txq_enqueue_cancel(s.sel, 1, 1), 0);
	CU_ASSERT_EQUAL(qps_txq_enqueue_cancel(s.sel, 1, 1), -ERANGE);
	cpu = 2;
	CU_ASSERT_EQUAL(t_send(&s), 2);
	st = t_stats(s.sel);
	CU_ASSERT_EQUAL(st.flow_moves, 2);
	CU_ASSERT_EQUAL(st.flow_deferred, 3);
	qps_txq_destroy(s.sel);
}

static void test_inflight_rule(void)
{
	inflight_steps(true);
	inflight_steps(false);
}

/* --- reordering, module-level model ---------------------------------- */

#define SIM_QPS 4
#define SIM_FLOWS 16
#define SIM_RING 65536

struct sim_pkt {
	uint32_t flow;
	uint32_t seq;
};

/* A QP that delivers in FIFO order, @speed packets per turn. */
struct sim_qp {
	struct sim_pkt ring[SIM_RING];
	uint32_t head, tail;
	uint32_t speed;
};

struct sim {
	struct qps_txq_sel *sel;
	struct sim_qp qp[SIM_QPS];
	uint32_t hash[SIM_FLOWS];
	uint32_t next_seq[SIM_FLOWS];
	int64_t last_seq[SIM_FLOWS];
	uint64_t rs;
	int cpu;
	uint64_t sent, delivered, reorders;
};

static void sim_send(struct sim *m, uint32_t flow)
{
	struct sim_qp *q;
	uint32_t head;
	int qp;

	qp = qps_txq_pick_flow(m->sel, m->hash[flow]);
	CU_ASSERT_FATAL(qp >= 0 && qp < SIM_QPS);
	q = &m->qp[qp];
	CU_ASSERT_FATAL(q->tail - q->head < SIM_RING);
	/* Counted before the device can see it, as the contract says. */
	qps_txq_enqueue(m->sel, qp, 1, &head);
	q->ring[q->tail++ % SIM_RING] = (struct sim_pkt){
		.flow = flow, .seq = m->next_seq[flow]++,
	};
	qps_txq_flow_commit(m->sel, m->hash[flow], qp, head);
	m->sent++;
}

/* The receiver: per-flow sequence numbers must only grow. */
static void sim_deliver(struct sim *m, const struct sim_pkt *p)
{
	if ((int64_t)p->seq < m->last_seq[p->flow])
		m->reorders++;
	else
		m->last_seq[p->flow] = p->seq;
	m->delivered++;
}

/* One turn of QP @qp: up to its speed in packets leave, in order; each is
 * delivered before its completion is counted, as a NIC does. */
static void sim_drain(struct sim *m, int qp)
{
	struct sim_qp *q = &m->qp[qp];
	uint32_t n;

	for (n = 0; n < q->speed && q->head != q->tail; n++)
		sim_deliver(m, &q->ring[q->head++ % SIM_RING]);
	if (n)
		CU_ASSERT_EQUAL(qps_txq_complete(m->sel, qp, n), 0);
}

static void sim_drain_all(struct sim *m)
{
	uint32_t enq, done;
	int i;

	for (i = 0; i < SIM_QPS; i++) {
		while (m->qp[i].head != m->qp[i].tail)
			sim_drain(m, i);
		qps_txq_qp_counts(m->sel, i, &enq, &done);
		CU_ASSERT_EQUAL(enq, done);
	}
	CU_ASSERT_EQUAL(m->sent, m->delivered);
}

static struct sim *sim_new(enum qps_txq_policy policy, bool rule)
{
	struct qps_txq_attr a = {
		.nqp = SIM_QPS, .policy = policy, .getcpu = t_fixed_cpu,
		.flags = rule ? 0 : QPS_TXQ_F_NO_INFLIGHT_RULE,
	};
	/* Even the slowest QP outpaces the sender (1 send in 3 events), so
	 * flows held on it by the rule cannot make its queue grow forever. */
	static const uint32_t speed[SIM_QPS] = { 3, 4, 6, 10 };
	struct qps_txq_tuple t;
	struct sim *m = calloc(1, sizeof(*m));
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	a.getcpu_arg = &m->cpu;
	m->sel = t_sel(&a);
	m->rs = 0x9d2c5680a5b1e3f7ull;
	for (i = 0; i < SIM_QPS; i++)
		m->qp[i].speed = speed[i];
	for (i = 0; i < SIM_FLOWS; i++) {
		t = t_tuple(0xc6120001, 0xc612000a, (uint16_t)(7000 + i), 9000);
		m->hash[i] = qps_txq_flow_hash(m->sel, &t);
		m->last_seq[i] = -1;
	}
	return m;
}

static void sim_free(struct sim *m)
{
	qps_txq_destroy(m->sel);
	free(m);
}

/* One sender whose CPU changes every 37 sends, while the QPs drain in a
 * random interleaving; returns the reorderings the receiver saw. */
static uint64_t sim_cpu_run(bool rule, struct qps_txq_stats *st)
{
	struct sim *m = sim_new(QPS_TXQ_POLICY_CPU, rule);
	uint64_t sends = 0, reorders;
	int ev;

	for (ev = 0; ev < 200000; ev++) {
		if (t_rand_below(&m->rs, 3) == 0) {
			sim_send(m, t_rand_below(&m->rs, SIM_FLOWS));
			if (++sends % 37 == 0)
				m->cpu = (int)t_rand_below(&m->rs, SIM_QPS);
		} else {
			sim_drain(m, (int)t_rand_below(&m->rs, SIM_QPS));
		}
	}
	sim_drain_all(m);
	*st = t_stats(m->sel);
	reorders = m->reorders;
	sim_free(m);
	return reorders;
}

struct sim_turn {
	struct sim *m;
	uint32_t n;
};

static void *sim_turn_thread(void *arg)
{
	struct sim_turn *tt = arg;
	uint32_t i;

	for (i = 0; i < tt->n; i++)
		sim_send(tt->m, t_rand_below(&tt->m->rs, 4));
	return NULL;
}

/* The thread policy: a new thread takes the flows over every turn (as a
 * worker pool would), so their pick changes; the QPs drain in between. */
static uint64_t sim_thread_run(bool rule, struct qps_txq_stats *st)
{
	struct sim *m = sim_new(QPS_TXQ_POLICY_THREAD, rule);
	struct sim_turn tt = { .m = m };
	uint64_t reorders;
	uint32_t turn, d, nd;
	pthread_t th;

	for (turn = 0; turn < 200; turn++) {
		tt.n = 1 + t_rand_below(&m->rs, 8);
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL,
						     sim_turn_thread, &tt), 0);
		pthread_join(th, NULL);
		nd = t_rand_below(&m->rs, 16);
		for (d = 0; d < nd; d++)
			sim_drain(m, (int)t_rand_below(&m->rs, SIM_QPS));
	}
	sim_drain_all(m);
	*st = t_stats(m->sel);
	reorders = m->reorders;
	sim_free(m);
	return reorders;
}

static void test_reorder_model(void)
{
	struct qps_txq_stats st;
	uint64_t r;

	r = sim_cpu_run(true, &st);
	printf("\n    cpu policy, rule on:  %llu reorderings, %llu moves, "
	       "%llu deferred", (unsigned long long)r,
	       (unsigned long long)st.flow_moves,
	       (unsigned long long)st.flow_deferred);
	CU_ASSERT_EQUAL(r, 0);
	CU_ASSERT(st.flow_moves > 0);
	CU_ASSERT(st.flow_deferred > 0);
	r = sim_cpu_run(false, &st);
	printf("\n    cpu policy, rule off: %llu reorderings, %llu moves",
	       (unsigned long long)r, (unsigned long long)st.flow_moves);
	CU_ASSERT(r > 0);
	CU_ASSERT_EQUAL(st.flow_deferred, 0);

	r = sim_thread_run(true, &st);
	printf("\n    thread policy, rule on:  %llu reorderings, %llu moves, "
	       "%llu deferred", (unsigned long long)r,
	       (unsigned long long)st.flow_moves,
	       (unsigned long long)st.flow_deferred);
	CU_ASSERT_EQUAL(r, 0);
	CU_ASSERT(st.flow_moves > 0);
	CU_ASSERT(st.flow_deferred > 0);
	r = sim_thread_run(false, &st);
	printf("\n    thread policy, rule off: %llu reorderings\n",
	       (unsigned long long)r);
	CU_ASSERT(r > 0);
}

/* --- reordering with real threads moved between two CPUs ------------- */

#define RT_RING 4096
#define RT_FLOWS 2
#define RT_ROUNDS 48
#define RT_BURST 32

struct rt_pkt {
	uint32_t flow;
	uint32_t seq;
	uint64_t t_ns;
};

/* Single producer (the sender), single consumer (the device thread). */
struct rt_ring {
	_Atomic uint32_t head;	/* consumer */
	_Atomic uint32_t tail;	/* producer */
	struct rt_pkt pkt[RT_RING];
};

struct rt {
	struct qps_txq_sel *sel;
	struct rt_ring ring[2];
	uint64_t delay_ns[2];
	int cpu[2];
	uint32_t hash[RT_FLOWS];
	_Atomic int sender_done;
	/* sender's */
	uint32_t sent, not_moved;
	/* device thread's */
	int64_t last_seq[RT_FLOWS];
	uint32_t delivered, reorders;
	int errors;
};

static uint64_t t_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Deliver what QP @i has ready: packets whose delay has passed, in FIFO
 * order; the completion is counted after the delivery, as a NIC does.
 * Returns the number delivered. */
static uint32_t rt_drain(struct rt *r, int i)
{
	struct rt_ring *q = &r->ring[i];
	uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
	uint32_t n = 0;
	struct rt_pkt *p;

	/* Acquire pairs with the producer's release of tail: the slot's
	 * contents are written. */
	while (h != atomic_load_explicit(&q->tail, memory_order_acquire)) {
		p = &q->pkt[h % RT_RING];
		if (t_now_ns() - p->t_ns < r->delay_ns[i])
			break;
		if ((int64_t)p->seq < r->last_seq[p->flow])
			r->reorders++;
		else
			r->last_seq[p->flow] = p->seq;
		r->delivered++;
		/* Returns the slot to the producer (pairs with its acquire of
		 * head). */
		atomic_store_explicit(&q->head, ++h, memory_order_release);
		if (qps_txq_complete(r->sel, i, 1))
			r->errors++;
		n++;
	}
	return n;
}

static bool rt_empty(struct rt *r)
{
	return atomic_load(&r->ring[0].tail) == atomic_load(&r->ring[0].head) &&
	       atomic_load(&r->ring[1].tail) == atomic_load(&r->ring[1].head);
}

/* The device: QP 0 delivers each packet delay_ns[0] after it was posted,
 * QP 1 at once. */
static void *rt_device(void *arg)
{
	struct rt *r = arg;
	uint32_t n;
	bool done;

	for (;;) {
		/* Pairs with the sender's release: every packet it posted
		 * before finishing is visible below. */
		done = atomic_load_explicit(&r->sender_done,
					    memory_order_acquire);
		n = rt_drain(r, 0) + rt_drain(r, 1);
		if (n)
			continue;
		if (done && rt_empty(r))
			return NULL;
		usleep(50);
	}
}

static int rt_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *rt_sender(void *arg)
{
	struct rt *r = arg;
	uint32_t seq[RT_FLOWS] = { 0 }, head, tail, f, i, round;
	struct rt_ring *q;
	int qp;

	for (round = 0; round < RT_ROUNDS; round++) {
		if (rt_pin(r->cpu[round & 1]) != 0 ||
		    sched_getcpu() != r->cpu[round & 1])
			r->not_moved++;
		for (i = 0; i < RT_BURST; i++) {
			f = i % RT_FLOWS;
			qp = qps_txq_pick_flow(r->sel, r->hash[f]);
			q = &r->ring[qp];
			tail = atomic_load_explicit(&q->tail,
						    memory_order_relaxed);
			while (tail - atomic_load_explicit(&q->head,
					memory_order_acquire) >= RT_RING)
				sched_yield();
			qps_txq_enqueue(r->sel, qp, 1, &head);
			q->pkt[tail % RT_RING] = (struct rt_pkt){
				.flow = f, .seq = seq[f]++, .t_ns = t_now_ns(),
			};
			/* Publishes the slot: the "doorbell". */
			atomic_store_explicit(&q->tail, tail + 1,
					      memory_order_release);
			qps_txq_flow_commit(r->sel, r->hash[f], qp, head);
			r->sent++;
		}
		/* Idle now and then, on either CPU: the queues drain and
		 * the flows may move. */
		if (round % 3 == 2)
			usleep(4000);
	}
	atomic_store_explicit(&r->sender_done, 1, memory_order_release);
	return NULL;
}

/* The first two CPUs this process may run on; false if fewer. */
static bool rt_two_cpus(int cpu[2])
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return false;
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			cpu[n++] = i;
	return n == 2;
}

static int rt_run(bool rule, const int cpu[2], struct rt *r,
		  struct qps_txq_stats *st)
{
	uint16_t map[CPU_SETSIZE] = { 0 };
	struct qps_txq_attr a = {
		.nqp = 2, .policy = QPS_TXQ_POLICY_CPU, .cpu_map = map,
		.flags = rule ? 0 : QPS_TXQ_F_NO_INFLIGHT_RULE,
	};
	struct qps_txq_tuple t;
	pthread_t dev, snd;
	int i;

	map[cpu[1]] = 1;
	a.cpu_map_len = (uint32_t)(cpu[1] > cpu[0] ? cpu[1] : cpu[0]) + 1;
	memset(r, 0, sizeof(*r));
	r->sel = t_sel(&a);
	r->cpu[0] = cpu[0];
	r->cpu[1] = cpu[1];
	r->delay_ns[0] = 1500000;
	for (i = 0; i < RT_FLOWS; i++) {
		t = t_tuple(0xc6120001, 0xc612000a, (uint16_t)(6000 + i), 9000);
		r->hash[i] = qps_txq_flow_hash(r->sel, &t);
		r->last_seq[i] = -1;
	}
	if (pthread_create(&dev, NULL, rt_device, r) != 0)
		return -1;
	if (pthread_create(&snd, NULL, rt_sender, r) != 0) {
		atomic_store(&r->sender_done, 1);
		pthread_join(dev, NULL);
		return -1;
	}
	pthread_join(snd, NULL);
	pthread_join(dev, NULL);
	*st = t_stats(r->sel);
	qps_txq_destroy(r->sel);
	return 0;
}

static void test_reorder_affinity(void)
{
	struct qps_txq_stats st;
	struct rt *r;
	int cpu[2];

	if (!rt_two_cpus(cpu)) {
		printf("\n    skipped: fewer than 2 CPUs available ");
		return;
	}
	r = malloc(sizeof(*r));
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);

	CU_ASSERT_EQUAL_FATAL(rt_run(true, cpu, r, &st), 0);
	printf("\n    CPUs %d,%d, rule on:  %u sent, %u reorderings, %llu "
	       "moves, %llu deferred, %u rounds not moved", cpu[0], cpu[1],
	       r->sent, r->reorders, (unsigned long long)st.flow_moves,
	       (unsigned long long)st.flow_deferred, r->not_moved);
	CU_ASSERT_EQUAL(r->errors, 0);
	CU_ASSERT_EQUAL(r->delivered, r->sent);
	CU_ASSERT_EQUAL(r->sent, RT_ROUNDS * RT_BURST);
	CU_ASSERT_EQUAL(r->reorders, 0);
	CU_ASSERT(st.flow_moves > 0);
	CU_ASSERT(st.flow_deferred > 0);
	CU_ASSERT(r->not_moved < RT_ROUNDS / 2);

	CU_ASSERT_EQUAL_FATAL(rt_run(false, cpu, r, &st), 0);
	printf("\n    CPUs %d,%d, rule off: %u sent, %u reorderings, %llu "
	       "moves\n", cpu[0], cpu[1], r->sent, r->reorders,
	       (unsigned long long)st.flow_moves);
	CU_ASSERT_EQUAL(r->errors, 0);
	CU_ASSERT_EQUAL(r->delivered, r->sent);
	CU_ASSERT(r->reorders > 0);
	free(r);
}

/* --- concurrency ----------------------------------------------------- */

#define CC_THREADS 4
#define CC_FLOWS 128
#define CC_PKTS 40000
#define CC_QPS 4

struct cc {
	struct qps_txq_sel *sel;
	pthread_mutex_t post[CC_QPS];	/* the posting side of each QP */
	uint32_t hash[CC_FLOWS];
	_Atomic int running;
	int errors;	/* device thread's */
};

struct cc_thr {
	struct cc *c;
	uint64_t rs;
	uint32_t per_qp[CC_QPS];
	uint32_t bad;
};

static void *cc_sender(void *arg)
{
	struct cc_thr *t = arg;
	struct cc *c = t->c;
	uint32_t i, f, head;
	int qp;

	for (i = 0; i < CC_PKTS; i++) {
		f = t_rand_below(&t->rs, CC_FLOWS);
		qp = qps_txq_pick_flow(c->sel, c->hash[f]);
		if (qp < 0 || qp >= CC_QPS) {
			t->bad++;
			continue;
		}
		pthread_mutex_lock(&c->post[qp]);
		if (qps_txq_enqueue(c->sel, qp, 1, &head) != 0)
			t->bad++;
		pthread_mutex_unlock(&c->post[qp]);
		if (qps_txq_flow_commit(c->sel, c->hash[f], qp, head) < 0)
			t->bad++;
		t->per_qp[qp]++;
	}
	atomic_fetch_sub(&c->running, 1);
	return NULL;
}

/* The completion side of every QP: completes what was enqueued, a few at
 * a time, until the senders have stopped and everything is complete. */
static void *cc_device(void *arg)
{
	struct cc *c = arg;
	uint64_t rs = 0x51ed2701ull;
	uint32_t enq, done, n;
	bool busy;
	int qp;

	do {
		bool stopped = atomic_load(&c->running) == 0;

		busy = false;
		for (qp = 0; qp < CC_QPS; qp++) {
			qps_txq_qp_counts(c->sel, qp, &enq, &done);
			if (enq == done)
				continue;
			busy = true;
			n = 1 + t_rand_below(&rs, 8);
			if (n > enq - done)
				n = enq - done;
			if (qps_txq_complete(c->sel, qp, n) != 0)
				c->errors++;
		}
		if (!busy && stopped)
			break;
		if (!busy)
			sched_yield();
	} while (true);
	return NULL;
}

static void concurrency_run(uint32_t nshards, enum qps_txq_policy policy)
{
	struct qps_txq_attr a = {
		.nqp = CC_QPS, .flow_entries = 64, .nshards = nshards,
		.policy = policy, .count_base = UINT32_MAX - 1000,
	};
	struct cc_thr thr[CC_THREADS];
	pthread_t th[CC_THREADS], dev;
	struct qps_txq_stats st;
	struct qps_txq_tuple tu;
	uint32_t enq, done, sum;
	struct cc c;
	int i, q;

	memset(&c, 0, sizeof(c));
	c.sel = t_sel(&a);
	for (i = 0; i < CC_QPS; i++)
		pthread_mutex_init(&c.post[i], NULL);
	for (i = 0; i < CC_FLOWS; i++) {
		tu = t_tuple(0x0a000001 + (uint32_t)i, 0xc612000a, 4000, 9000);
		c.hash[i] = qps_txq_flow_hash(c.sel, &tu);
	}
	atomic_store(&c.running, CC_THREADS);
	memset(thr, 0, sizeof(thr));
	CU_ASSERT_EQUAL_FATAL(pthread_create(&dev, NULL, cc_device, &c), 0);
	for (i = 0; i < CC_THREADS; i++) {
		thr[i].c = &c;
		thr[i].rs = 0x1000 + (uint64_t)i * 0x9e3779b97f4a7c15ull;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, cc_sender,
						     &thr[i]), 0);
	}
	for (i = 0; i < CC_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_join(dev, NULL);

	CU_ASSERT_EQUAL(c.errors, 0);
	for (i = 0; i < CC_THREADS; i++)
		CU_ASSERT_EQUAL(thr[i].bad, 0);
	for (q = 0; q < CC_QPS; q++) {
		sum = 0;
		for (i = 0; i < CC_THREADS; i++)
			sum += thr[i].per_qp[q];
		qps_txq_qp_counts(c.sel, q, &enq, &done);
		CU_ASSERT_EQUAL(enq - (UINT32_MAX - 1000), sum);
		CU_ASSERT_EQUAL(enq, done);
	}
	st = t_stats(c.sel);
	printf("\n    %u shards, policy %d: %llu computed, %llu new, "
	       "%llu moves, %llu deferred", nshards, policy,
	       (unsigned long long)st.picks_computed,
	       (unsigned long long)st.flow_new,
	       (unsigned long long)st.flow_moves,
	       (unsigned long long)st.flow_deferred);
	CU_ASSERT_EQUAL(st.picks_computed, (uint64_t)CC_THREADS * CC_PKTS);
	CU_ASSERT(st.flow_new >= 1 && st.flow_new <= 64);
	CU_ASSERT(st.flow_new + st.flow_moves + st.flow_deferred <=
		  (uint64_t)CC_THREADS * CC_PKTS);
	if (policy == QPS_TXQ_POLICY_THREAD)
		CU_ASSERT(st.flow_moves + st.flow_deferred > 0);
	for (i = 0; i < CC_QPS; i++)
		pthread_mutex_destroy(&c.post[i]);
	qps_txq_destroy(c.sel);
}

static void test_concurrent_flows(void)
{
	concurrency_run(0, QPS_TXQ_POLICY_THREAD);
	/* Fewer shards than threads: the rest count on the overflow shard,
	 * with atomic adds; the sums stay exact. */
	concurrency_run(1, QPS_TXQ_POLICY_THREAD);
	concurrency_run(0, QPS_TXQ_POLICY_HASH);
	printf("\n");
}

#define CE_THREADS 3
#define CE_PICKS 50000

struct ce {
	struct qps_txq_sel *sel;
	struct qps_txq_cache cache;	/* one endpoint, several senders */
	_Atomic uint64_t route_gen;
	_Atomic int running;
	uint32_t bad;
};

static void *ce_sender(void *arg)
{
	struct ce *e = arg;
	struct qps_txq_tuple t = t_tuple(0xc6120001, 0xc612000a, 1234, 9000);
	uint32_t i, bad = 0;
	int qp;

	for (i = 0; i < CE_PICKS; i++) {
		qp = qps_txq_pick_cached(e->sel, &e->cache,
					 atomic_load_explicit(&e->route_gen,
						memory_order_relaxed), &t);
		bad += qp < 0 || qp >= 4;
	}
	__atomic_fetch_add(&e->bad, bad, __ATOMIC_RELAXED);
	atomic_fetch_sub(&e->running, 1);
	return NULL;
}

/* Several threads send on one connected endpoint while routes change,
 * QPs are reset and the endpoint reconnects: always a valid QP, and every
 * pick is counted once, as cached or computed. */
static void test_concurrent_cache(void)
{
	struct qps_txq_attr a = { .nqp = 4 };
	struct qps_txq_stats st;
	pthread_t th[CE_THREADS];
	struct ce *e = calloc(1, sizeof(*e));
	int i, n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	e->sel = t_sel(&a);
	qps_txq_cache_init(&e->cache);
	atomic_store(&e->running, CE_THREADS);
	for (i = 0; i < CE_THREADS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, ce_sender,
						     e), 0);
	while (atomic_load(&e->running)) {
		switch (n++ % 3) {
		case 0:
			atomic_fetch_add(&e->route_gen, 1);
			break;
		case 1:
			qps_txq_qp_reset(e->sel, n % 4);
			break;
		default:
			qps_txq_cache_reset(e->sel, &e->cache,
					    QPS_TXQ_RESET_CONNECT);
			break;
		}
		usleep(100);
	}
	for (i = 0; i < CE_THREADS; i++)
		pthread_join(th[i], NULL);
	st = t_stats(e->sel);
	CU_ASSERT_EQUAL(e->bad, 0);
	CU_ASSERT_EQUAL(st.picks_cached + st.picks_computed,
			(uint64_t)CE_THREADS * CE_PICKS);
	CU_ASSERT(st.picks_cached > st.picks_computed);
	qps_txq_destroy(e->sel);
	free(e);
}

static CU_TestInfo txq_tests[] = {
	{ "attributes and bounds", test_attr },
	{ "connected: one computation per destination", test_cached_once },
	{ "hash policy balance, 1000 flows over 4 QPs", test_hash_balance },
	{ "cpu policy", test_cpu_policy },
	{ "thread policy: one QP per thread", test_thread_policy },
	{ "in-flight rule, step by step", test_inflight_rule },
	{ "reordering: FIFO QPs at different speeds", test_reorder_model },
	{ "reordering: sender moved between 2 CPUs", test_reorder_affinity },
	{ "concurrent senders, one flow table", test_concurrent_flows },
	{ "concurrent senders, one endpoint cache", test_concurrent_cache },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("txq_select", txq_tests);
}
