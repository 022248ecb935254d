// SPDX-License-Identifier: MIT
/*
 * fuzz_emu_wire: the emu shared-memory wire as a receiving port sees it,
 * with a hostile peer that can write any shared byte it can reach.
 *
 * One wire, two ports in this process: A receives (a receive CQ, a send
 * CQ, a raw-packet QP with posted buffers, a unicast and a multicast
 * steering rule, a joined group), B is the peer. The input is a program:
 * write bytes or words into A's shared port state, A's queue area (RQ
 * ring, CQ rings), the wire header or B's port state; deliver frames from
 * B to A; poll, repost, arm; resolve; attach and close a third port.
 * The robust mutexes are never written: a peer that corrupts or holds a
 * lock can stall a port (a denial of service the wire does not claim to
 * prevent); only dead holders are recovered.
 *
 * Checked: no crash, hang or ASan report; every access stays inside the
 * wire's header, the port control blocks and the queue areas and pools
 * of A and B (the rest of the mapping is ASan-poisoned); each frame A's
 * filter takes is counted once, as a CQE or a drop (a corrupt state is
 * a counted drop); receive completions name A's QP and return A's posted
 * buffers in posting order, never longer than posted. After each input
 * the shared state and A's private queue state are restored, so runs are
 * reproducible; if the wire name got unlinked it is rebuilt.
 */
#include "fuzz_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/emu.h"
#include "frames.h"

#define NBUF 32u
#define BUF_SZ 2048u
#define RX_PORT 9000
#define GROUP 0xef010101u	/* 239.1.1.1, host order */
#define A_IP 0xc6120001u	/* 198.18.0.1 */
#define B_IP 0xc6120002u
#define MAX_OPS 64
#define SNAP_QAREA (64u << 10)	/* holds every ring A allocates */

static const struct qps_provider_ops *E = &qps_emu_ops;

struct snap {
	void *p;
	size_t len;
	uint8_t *copy;
};

static struct fz {
	char wire[64];
	struct qps_dev *a, *b;
	struct qps_emu_dev *ea, *eb;
	struct qps_cq *rcq, *scq;
	struct qps_qp *qp;
	struct qps_flow *flow_uc, *flow_mc;
	uint8_t *bufs;
	/* Snapshots of the shared state and of A's private queue state. */
	struct snap s_ctl_a, s_ctl_b, s_hdr, s_qarea, s_rcq, s_scq, s_qp;
	struct snap s_wrid, s_len;
	/* Buffers posted, in posting order (the RQ is FIFO). */
	uint32_t fifo[NBUF];
	unsigned int f_head, f_n;
	bool free_buf[NBUF];
	bool ready;
} fz;

/* --- setup ------------------------------------------------------------- */

static void die(const char *what, int r)
{
	fprintf(stderr, "fuzz_emu_wire: setup: %s: %s\n", what, strerror(-r));
	abort();
}

static int open_port(uint32_t ip, struct qps_dev **out)
{
	struct qps_dev_attr attr = { .dev = fz.wire, .addr_set = true };

	attr.addr.s_addr = htonl(ip);
	return E->open(&attr, out);
}

static void snap_take(struct snap *s, void *p, size_t len)
{
	s->p = p;
	s->len = len;
	s->copy = malloc(len);
	if (!s->copy)
		abort();
	memcpy(s->copy, p, len);
}

static void snap_restore(const struct snap *s)
{
	memcpy(s->p, s->copy, s->len);
}

static void snap_free(struct snap *s)
{
	free(s->copy);
	s->copy = NULL;
}

/* Everything in the port control block after the lock. */
static void *ctl_body(struct qps_emu_shm_port *sp, size_t *len)
{
	*len = sizeof(*sp) - offsetof(struct qps_emu_shm_port, state);
	return &sp->state;
}

static void post_one(uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(fz.bufs + (size_t)idx * BUF_SZ),
		.length = BUF_SZ,
	};
	struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	int r = E->post_recv(fz.qp, &wr, &bad);

	FUZZ_CHECK(r == 0);
	fz.fifo[(fz.f_head + fz.f_n) % NBUF] = idx;
	fz.f_n++;
	fz.free_buf[idx] = false;
}

static void add_flow(struct qps_flow **out, uint32_t dip, bool mac)
{
	uint8_t buf[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	struct qps_flow_match m = {
		.match_mac = mac,
		.dst_ip = htonl(dip),
		.dst_port = htons(RX_PORT),
		.type = IBV_FLOW_ATTR_NORMAL,
	};
	int r;

	memcpy(m.dst_mac, fz.ea->sp->mac, 6);
	r = E->create_flow(fz.qp, qps_flow_attr_build(buf, &m), out);
	if (r)
		die("create_flow", r);
}

/* Poison what no receive-side path may touch: the header page past the
 * header, the control pages past each port's block, and the queue areas
 * and pools of the ports that are neither A nor B. */
static void poison_wire(bool on)
{
	struct qps_emu_wire *w = &fz.ea->wire;
	void (*fn)(const void *, size_t) = on ? fuzz_poison : fuzz_unpoison;
	uint8_t *base = w->base, *end = base + w->size;
	unsigned int i;

	fn(base + sizeof(*w->hdr),
	   (size_t)((uint8_t *)qps_emu_port_ctl(w, 0) - base) -
	   sizeof(*w->hdr));
	for (i = 0; i < QPS_EMU_MAX_PORTS; i++) {
		uint8_t *ctl = (uint8_t *)qps_emu_port_ctl(w, i);
		uint8_t *qarea = qps_emu_port_qarea(w, i);
		uint8_t *next = i + 1 < QPS_EMU_MAX_PORTS ?
				(uint8_t *)qps_emu_port_ctl(w, i + 1) : end;

		fn(ctl + sizeof(struct qps_emu_shm_port),
		   (size_t)(qarea - ctl) - sizeof(struct qps_emu_shm_port));
		if (i == fz.ea->port || i == fz.eb->port)
			continue;
		fn(qarea, (size_t)(next - qarea));
	}
}

static void setup(void)
{
	struct qps_qp_init_attr qa = {
		.qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 16, .max_recv_wr = NBUF,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct in_addr g = { htonl(GROUP) }, any = { 0 };
	struct qps_emu_qp *q;
	size_t len;
	void *p;
	uint32_t i;
	int r;

	snprintf(fz.wire, sizeof(fz.wire), "fz-wire-%d", (int)getpid());
	r = open_port(A_IP, &fz.a);
	if (r)
		die("open A", r);
	r = open_port(B_IP, &fz.b);
	if (r)
		die("open B", r);
	fz.ea = qps_emu_dev(fz.a);
	fz.eb = qps_emu_dev(fz.b);
	r = E->create_cq(fz.a, 64, &fz.rcq);
	if (!r)
		r = E->create_cq(fz.a, 16, &fz.scq);
	if (r)
		die("create_cq", r);
	qa.send_cq = fz.scq;
	qa.recv_cq = fz.rcq;
	r = E->create_qp(fz.a, &qa, &fz.qp);
	if (r)
		die("create_qp", r);
	add_flow(&fz.flow_uc, A_IP, true);
	add_flow(&fz.flow_mc, GROUP, false);
	r = E->mcast_attach(fz.a, g, any);
	if (r)
		die("mcast_attach", r);
	r = E->alloc_buf(fz.a, (size_t)NBUF * BUF_SZ, &p);
	if (r)
		die("alloc_buf", r);
	fz.bufs = p;
	fz.f_head = fz.f_n = 0;
	for (i = 0; i < NBUF; i++)
		post_one(i);

	p = ctl_body(fz.ea->sp, &len);
	snap_take(&fz.s_ctl_a, p, len);
	p = ctl_body(fz.eb->sp, &len);
	snap_take(&fz.s_ctl_b, p, len);
	snap_take(&fz.s_hdr, fz.ea->wire.hdr,
		  offsetof(struct qps_emu_wire_hdr, lock));
	snap_take(&fz.s_qarea, fz.ea->qarea, SNAP_QAREA);
	snap_take(&fz.s_rcq, qps_emu_cq(fz.rcq), sizeof(struct qps_emu_cq));
	snap_take(&fz.s_scq, qps_emu_cq(fz.scq), sizeof(struct qps_emu_cq));
	q = qps_emu_qp(fz.qp);
	snap_take(&fz.s_qp, q, sizeof(*q));
	snap_take(&fz.s_wrid, q->rq_wrid, q->rq_cnt * sizeof(*q->rq_wrid));
	snap_take(&fz.s_len, q->rq_len, q->rq_cnt * sizeof(*q->rq_len));
	FUZZ_CHECK(q->rq_off + q->rq_cnt * 16 <= SNAP_QAREA);
	FUZZ_CHECK(qps_emu_cq(fz.rcq)->ring_off + 64 * 32 <= SNAP_QAREA);
	poison_wire(true);
	fz.ready = true;
}

static void teardown(void)
{
	struct snap *s[] = { &fz.s_ctl_a, &fz.s_ctl_b, &fz.s_hdr,
			     &fz.s_qarea, &fz.s_rcq, &fz.s_scq, &fz.s_qp,
			     &fz.s_wrid, &fz.s_len };
	unsigned int i;

	poison_wire(false);
	E->close(fz.b);
	E->close(fz.a);	/* destroys A's flows, QP and CQs */
	for (i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		snap_free(s[i]);
	fz.ready = false;
}

/* Back to the state right after setup(). */
static void restore(void)
{
	uint32_t i;

	snap_restore(&fz.s_ctl_a);
	snap_restore(&fz.s_ctl_b);
	snap_restore(&fz.s_hdr);
	snap_restore(&fz.s_qarea);
	snap_restore(&fz.s_rcq);
	snap_restore(&fz.s_scq);
	snap_restore(&fz.s_qp);
	snap_restore(&fz.s_wrid);
	snap_restore(&fz.s_len);
	fz.f_head = 0;
	fz.f_n = NBUF;
	for (i = 0; i < NBUF; i++) {
		fz.fifo[i] = i;
		fz.free_buf[i] = false;
	}
	E->ack_events(fz.a);
	E->ack_events(fz.b);
}

static bool wire_linked(void)
{
	char name[128];
	int fd;

	snprintf(name, sizeof(name), "%s%s", QPS_EMU_SHM_PREFIX, fz.wire);
	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static void cleanup_at_exit(void)
{
	if (fz.ready)
		teardown();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setup();
	atexit(cleanup_at_exit);
	/* Inputs that unset the magic would make every third-port attach
	 * wait for a creator that never finishes: fail at once instead. */
	setenv("QPS_EMU_ATTACH_WAIT_MS", "0", 1);
	return 0;
}

/* --- operations -------------------------------------------------------- */

enum region {
	R_CTL_A, R_RQ_A, R_CQ_A, R_FLOW_A, R_QAREA_A, R_RING_RQ, R_RING_CQ,
	R_HDR, R_CTL_B, R_MC_A, R_MAX
};

static uint8_t *region(enum region r, size_t *len)
{
	struct qps_emu_shm_port *sp = fz.ea->sp;
	struct qps_emu_qp *q = qps_emu_qp(fz.qp);
	struct qps_emu_cq *c = qps_emu_cq(fz.rcq);

	switch (r) {
	case R_CTL_A:
		return ctl_body(sp, len);
	case R_RQ_A:
		*len = sizeof(sp->rq[0]);
		return (uint8_t *)&sp->rq[q->rq_slot];
	case R_CQ_A:
		*len = sizeof(sp->cq[0]);
		return (uint8_t *)&sp->cq[c->slot];
	case R_FLOW_A:
		*len = 2 * sizeof(sp->flow[0]);
		return (uint8_t *)&sp->flow[0];
	case R_QAREA_A:
		*len = SNAP_QAREA;
		return fz.ea->qarea;
	case R_RING_RQ:
		*len = (size_t)q->rq_cnt * 16;
		return fz.ea->qarea + q->rq_off;
	case R_RING_CQ:
		*len = (size_t)c->cqe_cnt * 32;
		return fz.ea->qarea + c->ring_off;
	case R_HDR:
		*len = offsetof(struct qps_emu_wire_hdr, lock);
		return (uint8_t *)fz.ea->wire.hdr;
	case R_CTL_B:
		return ctl_body(fz.eb->sp, len);
	case R_MC_A:
	default:
		*len = sizeof(sp->mc) + sizeof(sp->st);
		return (uint8_t *)&sp->st;
	}
}

static void op_write(struct fuzz_in *in, bool word)
{
	size_t len, off;
	uint8_t *p = region((enum region)(fuzz_u8(in) % R_MAX), &len);
	uint8_t b[16];
	size_t n;

	off = fuzz_u16(in);
	if (word) {
		uint32_t v = fuzz_u32(in);

		off = (off * 4) % (len & ~(size_t)3);
		memcpy(p + off, &v, 4);
		return;
	}
	off %= len;
	n = fuzz_u8(in) % sizeof(b) + 1;
	if (n > len - off)
		n = len - off;
	n = fuzz_bytes(in, b, n);
	memcpy(p + off, b, n);
}

struct rx_counts {
	uint64_t frames, cqes, drops, corrupt;
};

static struct rx_counts rx_counts(void)
{
	const struct qps_emu_shm_stats *st = &fz.ea->sp->st;

	return (struct rx_counts){
		.frames = qps_emu_read(&st->rx_frames),
		.cqes = qps_emu_read(&st->rx_cqes),
		.drops = qps_emu_read(&st->rx_drops),
		.corrupt = qps_emu_read(&st->rx_corrupt),
	};
}

/* One frame from B: UDP to A, to the group, broadcast, or raw bytes. */
static uint32_t make_frame(struct fuzz_in *in, uint8_t *f)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct qps_frame_hdr h = { .ttl = 64 };
	uint8_t kind = fuzz_u8(in);
	uint32_t plen = fuzz_u16(in) % (1500 - 28 + 1);
	int n;

	if ((kind & 7) == 7) {	/* raw bytes, any length */
		uint32_t len = 6 + fuzz_u16(in) % (QPS_EMU_FRAME_MAX - 6);

		memset(f, 0, len);
		fuzz_bytes(in, f, len);
		if (kind & 8)
			memcpy(f, fz.ea->sp->mac, 6);
		return len;
	}
	memcpy(h.src_mac, fz.eb->sp->mac, 6);
	h.saddr = htonl(B_IP);
	h.sport = htons(40000);
	h.dport = htons(kind & 8 ? fuzz_u16(in) : RX_PORT);
	switch (kind & 7) {
	case 0: case 1: case 2:
		memcpy(h.dst_mac, fz.ea->sp->mac, 6);
		h.daddr = htonl(A_IP);
		break;
	case 3: case 4:
		qps_mcast_mac(htonl(GROUP), h.dst_mac);
		h.daddr = htonl(GROUP);
		break;
	case 5:
		memcpy(h.dst_mac, bcast, 6);
		h.daddr = INADDR_BROADCAST;
		break;
	default:
		memcpy(h.dst_mac, fz.eb->sp->mac, 6);
		h.daddr = htonl(B_IP);
		break;
	}
	fuzz_bytes(in, f + QPS_HDRS_LEN, plen > 64 ? 64 : plen);
	n = qps_frame_build(f, &h, plen);
	FUZZ_CHECK(n > 0);
	return (uint32_t)n;
}

static void op_deliver(struct fuzz_in *in, unsigned int count)
{
	static uint8_t frame[QPS_EMU_FRAME_MAX];
	unsigned int i;

	for (i = 0; i < count; i++) {
		struct rx_counts c0 = rx_counts(), c1;
		uint32_t len = make_frame(in, frame);
		uint64_t df, dc, dd, dx;

		qps_emu_wire_tx(fz.eb, frame, len);
		c1 = rx_counts();
		df = c1.frames - c0.frames;
		dc = c1.cqes - c0.cqes;
		dd = c1.drops - c0.drops;
		dx = c1.corrupt - c0.corrupt;
		/* Each frame A took: one CQE (an error CQE is a drop too)
		 * or one drop; corrupt state is always a counted drop. */
		FUZZ_CHECK(df <= 1);
		FUZZ_CHECK(dc <= df && dd <= df && dx <= df);
		FUZZ_CHECK(dc + dd >= df);
		FUZZ_CHECK(dx <= dd);
	}
}

static void check_wc(const struct ibv_wc *wc)
{
	uint32_t want;

	FUZZ_CHECK(wc->qp_num == fz.qp->qp_num);
	FUZZ_CHECK(wc->opcode == IBV_WC_RECV);
	/* The RQ completes in posting order, only what was posted. */
	FUZZ_CHECK(fz.f_n > 0);
	want = fz.fifo[fz.f_head];
	FUZZ_CHECK(wc->wr_id == want);
	fz.f_head = (fz.f_head + 1) % NBUF;
	fz.f_n--;
	fz.free_buf[want] = true;
	if (wc->status == IBV_WC_SUCCESS)
		FUZZ_CHECK(wc->byte_len <= BUF_SZ);
}

static void op_poll(struct fuzz_in *in)
{
	struct ibv_wc wc[33];
	int n = fuzz_u8(in) % 33, got, i;

	got = E->poll_cq(fz.rcq, n, wc);
	FUZZ_CHECK(got <= n);
	FUZZ_CHECK(got >= 0 || got == -EIO);
	for (i = 0; i < got; i++)
		check_wc(&wc[i]);
	/* Nothing was sent: no send completion can be valid. */
	got = E->poll_cq(fz.scq, 4, wc);
	FUZZ_CHECK(got == 0 || got == -EIO);
}

static void op_post(struct fuzz_in *in)
{
	uint8_t mode = fuzz_u8(in);
	unsigned int n = mode % 8, i;

	if (mode & 0x80) {
		/* Bad work requests: outside the pool, empty, two SGEs. */
		struct ibv_sge sge = { .addr = (uintptr_t)fz.bufs,
				       .length = BUF_SZ };
		struct ibv_recv_wr wr = { .wr_id = 999, .sg_list = &sge,
					  .num_sge = 1 }, *bad = NULL;

		switch (mode & 3) {
		case 0:
			sge.addr = (uintptr_t)fz.ea->pool +
				   QPS_EMU_POOL_SIZE - 8;
			break;
		case 1:
			sge.length = 0;
			break;
		case 2:
			wr.num_sge = 2;
			break;
		default:
			sge.addr = (uintptr_t)fz.ea->pool - 4096;
			break;
		}
		FUZZ_CHECK(E->post_recv(fz.qp, &wr, &bad) == -EINVAL);
		FUZZ_CHECK(bad == &wr);
		return;
	}
	for (i = 0; i < NBUF && n; i++) {
		if (fz.free_buf[i]) {
			post_one(i);
			n--;
		}
	}
}

static void op_resolve(struct fuzz_in *in)
{
	struct in_addr a;
	uint8_t mac[6];
	uint8_t sel = fuzz_u8(in);
	int r;

	a.s_addr = sel & 1 ? fuzz_u32(in) : htonl(QPS_EMU_NET | (sel >> 1));
	r = E->resolve(fz.a, a, mac);
	FUZZ_CHECK(r == 0 || r == -EHOSTUNREACH);
	if (r == 0 && !(mac[0] & 1))
		FUZZ_CHECK(mac[0] == QPS_EMU_MAC_OUI0 &&
			   mac[5] < QPS_EMU_MAX_PORTS);
	(void)E->route_gen(fz.a);
}

static void op_attach(struct fuzz_in *in)
{
	struct qps_dev_attr attr = { .dev = fz.wire };
	struct qps_dev *c;
	uint8_t sel = fuzz_u8(in);
	int r;

	if (sel & 1) {
		attr.addr_set = true;
		attr.addr.s_addr = sel & 2 ? fuzz_u32(in) :
				   htonl(QPS_EMU_NET | fuzz_u8(in));
	}
	r = E->open(&attr, &c);
	FUZZ_CHECK(r == 0 || r == -EADDRINUSE || r == -ENOSPC ||
		   r == -EINVAL || r == -EADDRNOTAVAIL || r == -EAGAIN ||
		   r == -EPROTO || r == -ETIMEDOUT);
	if (r == 0)
		E->close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct qps_emu_counters ctr;
	bool attached = false;
	unsigned int ops = 0;

	if (!fz.ready)
		setup();
	while (fuzz_in_left(&in) && ops++ < MAX_OPS) {
		switch (fuzz_u8(&in) % 10) {
		case 0:
			op_write(&in, false);
			break;
		case 1:
			op_write(&in, true);
			break;
		case 2:
			op_deliver(&in, 1);
			break;
		case 3:
			op_deliver(&in, 1 + fuzz_u8(&in) % 48);
			break;
		case 4:
			op_poll(&in);
			break;
		case 5:
			op_post(&in);
			break;
		case 6:
			FUZZ_CHECK(E->req_notify_cq(fz.rcq) == 0);
			FUZZ_CHECK(E->ack_events(fz.a) >= 0);
			break;
		case 7:
			op_resolve(&in);
			break;
		case 8:
			FUZZ_CHECK(qps_emu_counters_all(fz.a, &ctr) == 0);
			break;
		default:
			/* One attach per input: it maps the whole wire. */
			if (!attached)
				op_attach(&in);
			attached = true;
			break;
		}
	}
	restore();
	if (attached && !wire_linked()) {
		/* Every port looked dead or free to the closing one, which
		 * unlinked the name: start from a fresh wire. */
		teardown();
		setup();
	}
	return 0;
}

/* --- seeds ------------------------------------------------------------- */

int fuzz_make_corpus(const char *dir)
{
	/* deliver to A, poll, repost */
	static const uint8_t s_basic[] = { 2, 0, 18, 0, 4, 8, 5, 1 };
	/* a burst that overruns the receive CQ, then poll it all */
	static const uint8_t s_burst[] = { 3, 70, 1, 0, 0, 4, 32, 4, 32, 5, 7 };
	/* group and broadcast frames */
	static const uint8_t s_mc[] = { 2, 3, 40, 0, 2, 5, 10, 0, 4, 4 };
	/* head of A's RQ far ahead, then a delivery */
	static const uint8_t s_rq[] = { 1, R_RQ_A, 6, 0, 0xa0, 0x86, 1, 0,
					2, 0, 0, 0, 4, 4 };
	/* CQ ring size not a power of two */
	static const uint8_t s_cq[] = { 1, R_CQ_A, 1, 0, 3, 0, 0, 0,
					2, 1, 16, 0, 4, 4 };
	/* a forged CQE in A's receive ring */
	static const uint8_t s_cqe[] = { 0, R_RING_CQ, 0, 0, 15, 0, 1, 0, 0x40,
					 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81,
					 4, 4 };
	/* a wire header with another geometry, then traffic and resolve */
	static const uint8_t s_hdr[] = { 1, R_HDR, 4, 0, 0, 0, 0, 0x10,
					 2, 0, 8, 0, 7, 2, 4, 4 };
	/* B's slot claimed by a dead pid, then a third port attaches */
	static const uint8_t s_dead[] = { 1, R_CTL_B, 1, 0, 0xff, 0xff, 0xff,
					  0x7f, 9, 0, 7, 4 };
	/* arm, deliver, ack; bad receive WRs */
	static const uint8_t s_arm[] = { 6, 2, 1, 9, 0, 6, 5, 0x80, 5, 0x81,
					 5, 0x82, 5, 0x83, 8 };
	/* raw frame bytes to A's MAC */
	static const uint8_t s_raw[] = { 2, 15, 0, 0, 60, 0, 8, 0, 0x45, 0,
					 0, 40, 4, 4 };
	int r = 0;

	r |= fuzz_write_seed(dir, "basic", s_basic, sizeof(s_basic));
	r |= fuzz_write_seed(dir, "burst", s_burst, sizeof(s_burst));
	r |= fuzz_write_seed(dir, "mcast", s_mc, sizeof(s_mc));
	r |= fuzz_write_seed(dir, "rq-head", s_rq, sizeof(s_rq));
	r |= fuzz_write_seed(dir, "cq-size", s_cq, sizeof(s_cq));
	r |= fuzz_write_seed(dir, "cqe-forged", s_cqe, sizeof(s_cqe));
	r |= fuzz_write_seed(dir, "hdr-geometry", s_hdr, sizeof(s_hdr));
	r |= fuzz_write_seed(dir, "dead-peer", s_dead, sizeof(s_dead));
	r |= fuzz_write_seed(dir, "arm-badwr", s_arm, sizeof(s_arm));
	r |= fuzz_write_seed(dir, "raw", s_raw, sizeof(s_raw));
	return r;
}
