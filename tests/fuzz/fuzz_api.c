// SPDX-License-Identifier: MIT
/*
 * fuzz_api: what the public API parses from its caller: options (any
 * optname, length and bytes), socket addresses (any bytes and length) for
 * bind, connect and sendto, qps_msg arrays for qps_sendmmsg, memberships,
 * name and stats buffers, and context attributes; on an emu context.
 *
 * The input is a program of calls on up to four endpoints. Buffers are
 * exact-size heap copies, so ASan flags any read or write past what the
 * caller handed in. Checked for every call: the result is 0, a count or
 * a -errno, and errno is untouched; a stale handle gets -EBADF; what a
 * call accepted reads back (getopt after setopt, getsockname after bind);
 * qps_sendmmsg's results follow its contract (accepted prefix, the
 * failing message's -errno, -ECANCELED after it). Datagrams are sent to
 * the context itself and drained, so nothing piles up between inputs.
 */
#include "fuzz_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <qpsock/qpsock.h>

#define NEP 4
#define MAX_OPS 48
#define OWN_IP 0xc6120001u	/* 198.18.0.1 */
#define ERRNO_SENTINEL 4242

static struct {
	char wire[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep[NEP];
	struct qps_ep *stale;	/* closed in this input */
} fa;

/* A result is a count or a -errno; errno was not touched. */
#define CALL(expr)                                                          \
	({                                                                  \
		long long r_;                                               \
		errno = ERRNO_SENTINEL;                                     \
		r_ = (long long)(expr);                                     \
		FUZZ_CHECK(errno == ERRNO_SENTINEL);                        \
		FUZZ_CHECK(r_ >= -4095);                                    \
		r_;                                                         \
	})

static void cleanup_at_exit(void)
{
	if (fa.ctx)
		qps_ctx_destroy(fa.ctx);
	fa.ctx = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_TX_DEPTH |
			     QPS_CTX_ATTR_RX_DEPTH | QPS_CTX_ATTR_NUM_TXQ,
		.provider = "emu",
		.tx_depth = 64,
		.rx_depth = 64,
		.num_txq = 2,
	};
	int r;

	(void)argc;
	(void)argv;
	snprintf(fa.wire, sizeof(fa.wire), "fz-api-%d", (int)getpid());
	attr.dev = fa.wire;
	attr.addr.s_addr = htonl(OWN_IP);
	r = qps_ctx_create(&attr, &fa.ctx);
	if (r) {
		fprintf(stderr, "fuzz_api: qps_ctx_create: %s\n", strerror(-r));
		abort();
	}
	atexit(cleanup_at_exit);
	return 0;
}

static struct qps_ep *pick_ep(struct fuzz_in *in)
{
	uint8_t k = fuzz_u8(in);

	if (k == 0xff && fa.stale)
		return fa.stale;
	if (k == 0xfe)
		return NULL;
	return fa.ep[k % NEP];
}

/* Option names: the defined ones and their neighbours, or any int. */
static int pick_opt(struct fuzz_in *in)
{
	uint8_t k = fuzz_u8(in);

	return k & 0x80 ? (int)fuzz_u32(in) : (int)(k % 21) - 1;
}

static int pick_int(struct fuzz_in *in)
{
	static const int edge[] = { 0, 1, -1, 2, 15, 16, 1000, INT_MAX,
				    INT_MIN, 65536 };
	uint8_t k = fuzz_u8(in);

	return k & 0x80 ? (int)fuzz_u32(in) : edge[k % 10];
}

static socklen_t pick_len(struct fuzz_in *in, socklen_t natural)
{
	uint8_t k = fuzz_u8(in);

	switch (k % 6) {
	case 0:
	case 1:
		return natural;
	case 2:
		return natural - 1;
	case 3:
		return natural + 1 + k / 6 % 8;
	case 4:
		return k / 6 % 4;	/* 0..3: shorter than a family */
	default:
		return (socklen_t)(k / 6);
	}
}

/* A socket address in an exact-size buffer: a well-formed sockaddr_in
 * to a useful address, or raw bytes, with a chosen length. */
static void *pick_sockaddr(struct fuzz_in *in, socklen_t *len)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	uint8_t raw[64];
	uint8_t k = fuzz_u8(in);
	void *p;

	if (k & 0x80) {
		*len = fuzz_u8(in) % sizeof(raw);
		fuzz_bytes(in, raw, *len);
		return fuzz_dup(raw, *len);
	}
	switch (k % 8) {
	case 0:
	case 1:
		sin.sin_addr.s_addr = htonl(OWN_IP);
		break;
	case 2:
		sin.sin_addr.s_addr = htonl(0xef000001u + fuzz_u8(in));
		break;
	case 3:
		sin.sin_addr.s_addr = INADDR_BROADCAST;
		break;
	case 4:
		sin.sin_addr.s_addr = INADDR_ANY;
		break;
	case 5:
		sin.sin_family = AF_UNSPEC;
		break;
	case 6:
		sin.sin_family = (sa_family_t)fuzz_u16(in);
		break;
	default:
		sin.sin_addr.s_addr = fuzz_u32(in);
		break;
	}
	sin.sin_port = k & 0x40 ? htons(fuzz_u16(in)) :
		       htons((uint16_t)(9000 + (k >> 3 & 3)));
	*len = pick_len(in, sizeof(sin));
	p = fuzz_dup(NULL, *len);
	memset(p, 0, *len);
	memcpy(p, &sin, *len < sizeof(sin) ? *len : sizeof(sin));
	return p;
}

/* What a successful set must read back as. */
static void check_readback(struct qps_ep *ep, int opt, int v)
{
	socklen_t len = sizeof(int);
	int *got = fuzz_dup(NULL, sizeof(int));

	FUZZ_CHECK(CALL(qps_getopt(ep, opt, got, &len)) == 0);
	FUZZ_CHECK(len == sizeof(int));
	switch (opt) {
	case QPS_OPT_NONBLOCK:
	case QPS_OPT_REUSEADDR:
	case QPS_OPT_REUSEPORT:
	case QPS_OPT_PKTINFO:
	case QPS_OPT_MULTICAST_LOOP:
	case QPS_OPT_HOST_RX:
		FUZZ_CHECK(*got == (v != 0));
		break;
	case QPS_OPT_RCVBUF:	/* clamped, like SO_RCVBUF */
		FUZZ_CHECK(*got >= 1 && *got <= v && *got <= QPS_RCVBUF_MAX);
		break;
	case QPS_OPT_TTL:	/* -1: the default, as IP_TTL */
		FUZZ_CHECK(*got == (v == -1 ? 64 : v));
		break;
	case QPS_OPT_MULTICAST_TTL:
		FUZZ_CHECK(*got == (v == -1 ? 1 : v));
		break;
	case QPS_OPT_TOS:
		FUZZ_CHECK(*got == (v == -1 ? 0 : v));
		break;
	default:
		FUZZ_CHECK(*got == v);
		break;
	}
	fuzz_free(got);
}

static void op_setopt(struct fuzz_in *in)
{
	struct qps_ep *ep = pick_ep(in);
	int opt = pick_opt(in), v = pick_int(in);
	socklen_t len = pick_len(in, sizeof(int));
	uint8_t mode = fuzz_u8(in);
	uint8_t *val = NULL;
	long long r;

	if (!(mode & 1)) {
		val = fuzz_dup(NULL, len);
		memset(val, 0, len);
		memcpy(val, &v, len < sizeof(v) ? len : sizeof(v));
	}
	r = CALL(qps_setopt(ep, opt, val, len));
	FUZZ_CHECK(r <= 0);
	if (r == 0) {
		FUZZ_CHECK(ep && val && len == sizeof(int));
		FUZZ_CHECK((opt >= QPS_OPT_NONBLOCK &&
			    opt <= QPS_OPT_PKTINFO) ||
			   (opt >= QPS_OPT_REUSEPORT &&
			    opt <= QPS_OPT_RCVBUF_BYTES));
		check_readback(ep, opt, v);
	} else {
		FUZZ_CHECK(r == -ENOPROTOOPT || r == -EINVAL ||
			   r == -EFAULT || r == -EBADF || r == -ENOMEM ||
			   (r == -EISCONN && opt == QPS_OPT_HOST_RX));
	}
	if (!ep || ep == fa.stale)
		FUZZ_CHECK(r == -EBADF);
	if (val)
		fuzz_free(val);
}

static void op_getopt(struct fuzz_in *in)
{
	struct qps_ep *ep = pick_ep(in);
	int opt = pick_opt(in);
	socklen_t len = pick_len(in, sizeof(int)), in_len = len;
	uint8_t mode = fuzz_u8(in);
	void *val = mode & 1 ? NULL : fuzz_dup(NULL, len);
	long long r;

	r = CALL(qps_getopt(ep, opt, val, mode & 2 ? NULL : &len));
	FUZZ_CHECK(r <= 0);
	if (r == 0) {
		FUZZ_CHECK(len == sizeof(int) && in_len >= sizeof(int));
	} else {
		FUZZ_CHECK(len == in_len);
		FUZZ_CHECK(r == -ENOPROTOOPT || r == -EINVAL ||
			   r == -EFAULT || r == -EBADF);
	}
	if (val)
		fuzz_free(val);
}

static void check_name(struct qps_ep *ep, bool peer, uint16_t want_port)
{
	struct sockaddr_in *sin = fuzz_dup(NULL, sizeof(*sin));
	socklen_t len = sizeof(*sin);
	long long r;

	r = peer ? CALL(qps_getpeername(ep, (void *)sin, &len)) :
		   CALL(qps_getsockname(ep, (void *)sin, &len));
	FUZZ_CHECK(r == 0 && len == sizeof(*sin));
	FUZZ_CHECK(sin->sin_family == AF_INET && sin->sin_port != 0);
	if (want_port)
		FUZZ_CHECK(sin->sin_port == want_port);
	fuzz_free(sin);
}

static void op_bind_connect(struct fuzz_in *in, bool conn)
{
	struct qps_ep *ep = pick_ep(in);
	socklen_t len;
	struct sockaddr_in *sa = pick_sockaddr(in, &len);
	uint16_t port = 0;
	long long r;

	if (len >= sizeof(*sa))
		port = sa->sin_port;
	r = conn ? CALL(qps_connect(ep, (void *)sa, len)) :
		   CALL(qps_bind(ep, (void *)sa, len));
	FUZZ_CHECK(r <= 0);
	if (r == 0 && len >= sizeof(*sa) && sa->sin_family == AF_INET) {
		check_name(ep, false, conn ? 0 : port);
		if (conn)
			check_name(ep, true, port);
	}
	fuzz_free(sa);
}

static void op_sendto(struct fuzz_in *in)
{
	static uint8_t payload[9000];
	struct qps_ep *ep = pick_ep(in);
	size_t len = fuzz_u16(in) % 2048;
	int flags = fuzz_u8(in) & 1 ? (int)fuzz_u32(in) :
		    QPS_MSG_DONTWAIT | (fuzz_u8(in) & 1 ? QPS_MSG_MORE : 0);
	uint8_t mode = fuzz_u8(in);
	socklen_t alen = 0;
	void *sa = mode & 1 ? NULL : pick_sockaddr(in, &alen);
	void *buf = mode & 2 ? NULL : fuzz_dup(payload, len);
	long long r;

	r = CALL(qps_sendto(ep, buf, len, flags, sa, alen));
	FUZZ_CHECK(r == (long long)len || r < 0);
	if (r >= 0)
		FUZZ_CHECK(buf || !len);
	if (sa)
		fuzz_free(sa);
	if (buf)
		fuzz_free(buf);
}

static void op_sendmmsg(struct fuzz_in *in)
{
	static uint8_t payload[2048];
	struct qps_ep *ep = pick_ep(in);
	uint8_t mode = fuzz_u8(in);
	unsigned int n = mode % 9, i, k;
	int flags = mode & 0x80 ? (int)fuzz_u32(in) : QPS_MSG_DONTWAIT;
	struct qps_msg *m;
	long long r;

	if (mode & 0x40) {
		/* Array pointer and count that do not match. */
		unsigned int bad_n = fuzz_u8(in) & 1 ? UINT_MAX : n + 1;

		r = CALL(qps_sendmmsg(ep, NULL, bad_n, flags));
		FUZZ_CHECK(r < 0);
		return;
	}
	m = fuzz_dup(NULL, n * sizeof(*m));
	for (i = 0; i < n; i++) {
		uint8_t f = fuzz_u8(in);

		m[i].len = fuzz_u16(in) % 2048;
		m[i].buf = f & 1 ? NULL : fuzz_dup(payload, m[i].len);
		m[i].dest = f & 2 ? NULL : pick_sockaddr(in, &m[i].dest_len);
		if (f & 2)
			m[i].dest_len = fuzz_u8(in);
		m[i].priority = f & 4 ? pick_int(in) : -1;
		m[i].result = 12345;
	}
	r = CALL(qps_sendmmsg(ep, m, n, flags));
	FUZZ_CHECK(r <= (long long)n);
	if (r >= 0 && n) {
		/* An accepted prefix, then the failing one, then the
		 * ones not tried. */
		for (k = 0; k < (unsigned int)r; k++)
			FUZZ_CHECK(m[k].result == (ssize_t)m[k].len);
		if ((unsigned int)r < n) {
			FUZZ_CHECK(m[r].result < 0 && m[r].result >= -4095);
			for (k = (unsigned int)r + 1; k < n; k++)
				FUZZ_CHECK(m[k].result == -ECANCELED);
		}
	} else if (r < 0 && n && ep && ep != fa.stale) {
		FUZZ_CHECK(m[0].result == r ||
			   (flags & ~(QPS_MSG_DONTWAIT | QPS_MSG_MORE)));
	}
	for (i = 0; i < n; i++) {
		if (m[i].buf)
			fuzz_free((void *)m[i].buf);
		if (m[i].dest)
			fuzz_free((void *)m[i].dest);
	}
	fuzz_free(m);
}

static void op_recv(struct fuzz_in *in)
{
	struct qps_ep *ep = pick_ep(in);
	size_t len = fuzz_u16(in) % 2048;
	uint8_t mode = fuzz_u8(in);
	int flags = QPS_MSG_DONTWAIT | (mode & 1 ? QPS_MSG_PEEK : 0) |
		    (mode & 2 ? QPS_MSG_TRUNC : 0);
	socklen_t slen = pick_len(in, sizeof(struct sockaddr_in));
	void *buf = mode & 4 ? NULL : fuzz_dup(NULL, len);
	void *src = mode & 8 ? NULL : fuzz_dup(NULL, slen);
	long long r;

	r = CALL(qps_recvfrom(ep, buf, len, flags, src,
			      mode & 16 ? NULL : &slen));
	if (r >= 0 && !(flags & QPS_MSG_TRUNC))
		FUZZ_CHECK((size_t)r <= len);
	if (mode & 32) {
		/* Transmit reports (QPS_OPT_TIMESTAMP): never more than
		 * asked for, else one of the documented errors. */
		struct qps_txts t[4];
		unsigned int n = (unsigned int)(len % 5);

		r = CALL(qps_recv_txts(ep, mode & 64 ? NULL : t, n,
				       mode & 128 ? 0x1000 : 0));
		FUZZ_CHECK(r >= 0 ? r <= (long long)n :
			   r == -EAGAIN || r == -EBADF || r == -EINVAL ||
			   r == -EFAULT);
	}
	if (buf)
		fuzz_free(buf);
	if (src)
		fuzz_free(src);
}

static void op_membership(struct fuzz_in *in)
{
	struct qps_ep *ep = pick_ep(in);
	struct qps_mreq mr = { .ifindex = 0 };
	uint8_t mode = fuzz_u8(in);
	socklen_t len = pick_len(in, sizeof(mr));
	void *p;

	mr.group.s_addr = mode & 1 ? fuzz_u32(in) :
			  htonl(0xef000001u + (mode >> 4));
	if (mode & 2)
		mr.source.s_addr = fuzz_u32(in);
	if (mode & 4)
		mr.iface.s_addr = fuzz_u32(in);
	if (mode & 8)
		mr.ifindex = pick_int(in);
	p = fuzz_dup(NULL, len);
	memset(p, 0, len);
	memcpy(p, &mr, len < sizeof(mr) ? len : sizeof(mr));
	if (fuzz_u8(in) & 1)
		CALL(qps_leave(ep, p, len));
	else
		CALL(qps_join(ep, p, len));
	fuzz_free(p);
}

static void op_names(struct fuzz_in *in)
{
	struct qps_ep *ep = pick_ep(in);
	socklen_t len = pick_len(in, sizeof(struct sockaddr_in)), in_len = len;
	uint8_t mode = fuzz_u8(in);
	void *sa = mode & 1 ? NULL : fuzz_dup(NULL, len);
	long long r;

	r = mode & 2 ? CALL(qps_getpeername(ep, sa, mode & 4 ? NULL : &len)) :
		       CALL(qps_getsockname(ep, sa, mode & 4 ? NULL : &len));
	FUZZ_CHECK(r <= 0);
	if (r == 0)
		FUZZ_CHECK(len == sizeof(struct sockaddr_in));
	else
		FUZZ_CHECK(len == in_len);
	if (sa)
		fuzz_free(sa);
}

static void op_ctx(struct fuzz_in *in)
{
	size_t size = fuzz_u16(in) % (2 * sizeof(struct qps_stats));
	void *st = fuzz_dup(NULL, size);
	struct qps_ctx_info info;
	long long r;

	r = CALL(qps_ctx_stats(fa.ctx, st, size));
	FUZZ_CHECK(r >= 0 && (size_t)r <= size &&
		   (size_t)r <= sizeof(struct qps_stats));
	fuzz_free(st);
	FUZZ_CHECK(CALL(qps_ctx_progress(fa.ctx)) >= 0);
	FUZZ_CHECK(CALL(qps_ctx_query(fa.ctx, &info)) == 0);
	/* The same draw sizes the extended query: exactly that much is
	 * allocated, so a byte written past it is caught. */
	size %= 2 * sizeof(struct qps_ctx_info_ex);
	st = fuzz_dup(NULL, size);
	r = CALL(qps_ctx_query_ex(fa.ctx, st, size));
	if (size < sizeof(struct qps_ctx_info))
		FUZZ_CHECK(r == -EINVAL);
	else
		FUZZ_CHECK((size_t)r == (size < sizeof(struct qps_ctx_info_ex) ?
					 size : sizeof(struct qps_ctx_info_ex)));
	fuzz_free(st);
	CALL(qps_ctx_flush(fa.ctx));
}

static uint32_t pick_u32(struct fuzz_in *in)
{
	static const uint32_t edge[] = { 0, 1, 2, 3, 8, 64, 65, 4096, 4097,
					 1u << 24, (1u << 24) + 1, UINT32_MAX,
					 1000000, 1000001, 65536, 65537 };
	uint8_t k = fuzz_u8(in);

	return k & 0x80 ? fuzz_u32(in) : edge[k % 16];
}

/* Context attributes: mostly rejected; one that is accepted is opened
 * and closed again. Queue sizes that would be valid but large are kept
 * small, or each run would allocate megabytes. */
static void op_ctx_create(struct fuzz_in *in)
{
	static const char *const prov[] = { "emu", "", "nope", "verbs",
					    NULL, "EMU" };
	char dev[80];
	struct qps_ctx_attr a;
	struct qps_ctx *c = (void *)1;
	uint8_t k;
	long long r;

	memset(&a, 0, sizeof(a));
	a.comp_mask = fuzz_u16(in) | (fuzz_u8(in) & 1 ? 1ull << 40 : 0);
	a.provider = prov[fuzz_u8(in) % 6];
	k = fuzz_u8(in);
	switch (k % 5) {
	case 0:
		a.dev = fa.wire;
		break;
	case 1:
		a.dev = NULL;
		break;
	case 2:
		a.dev = "a/b";
		break;
	case 3:
		memset(dev, 'x', sizeof(dev) - 1);
		dev[sizeof(dev) - 1] = 0;
		a.dev = dev;
		break;
	default:
		a.dev = "";
		break;
	}
	a.addr.s_addr = k & 8 ? fuzz_u32(in) : htonl(OWN_IP + 1 + (k >> 4));
	a.tx_depth = pick_u32(in) % 129;
	a.rx_depth = pick_u32(in) % 129;
	a.max_ep = pick_u32(in);
	if (a.max_ep > 64 && a.max_ep <= 65536)
		a.max_ep = 64;
	a.tx_path = pick_u32(in);
	a.db_delay_us = pick_u32(in);
	a.num_txq = pick_u32(in);
	if (a.num_txq > 4 && a.num_txq <= 64)
		a.num_txq = 4;
	a.txq_policy = pick_u32(in);
	a.txq_flows = pick_u32(in);
	if (a.txq_flows > 64 && a.txq_flows <= (1u << 24))
		a.txq_flows = 64;
	r = CALL(qps_ctx_create(fuzz_u8(in) & 1 ? NULL : &a,
				fuzz_u8(in) & 1 ? NULL : &c));
	FUZZ_CHECK(r <= 0);
	if (r == 0) {
		FUZZ_CHECK(c && c != (void *)1);
		FUZZ_CHECK(CALL(qps_ctx_destroy(c)) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	bool created = false;
	unsigned int ops = 0, i;
	struct qps_ep *e;
	long long r;

	if (!fa.ctx)
		LLVMFuzzerInitialize(NULL, NULL);
	for (i = 0; i < NEP; i++) {
		r = CALL(qps_ep_create(fa.ctx, QPS_EP_DGRAM, &fa.ep[i]));
		FUZZ_CHECK(r == 0);
	}
	fa.stale = NULL;
	while (fuzz_in_left(&in) && ops++ < MAX_OPS) {
		switch (fuzz_u8(&in) % 14) {
		case 0:
			op_setopt(&in);
			break;
		case 1:
			op_getopt(&in);
			break;
		case 2:
			op_bind_connect(&in, false);
			break;
		case 3:
			op_bind_connect(&in, true);
			break;
		case 4:
			op_sendto(&in);
			break;
		case 5:
			op_sendmmsg(&in);
			break;
		case 6:
			op_recv(&in);
			break;
		case 7:
			op_membership(&in);
			break;
		case 8:
			op_names(&in);
			break;
		case 9:
			op_ctx(&in);
			break;
		case 10: {
			/* Close one; its handle is stale from now on. */
			uint8_t k = fuzz_u8(&in) % NEP;

			FUZZ_CHECK(CALL(qps_ep_close(fa.ep[k])) == 0);
			FUZZ_CHECK(CALL(qps_ep_close(fa.ep[k])) == -EBADF);
			fa.stale = fa.ep[k];
			r = CALL(qps_ep_create(fa.ctx, QPS_EP_DGRAM,
					       &fa.ep[k]));
			FUZZ_CHECK(r == 0 && fa.ep[k] != fa.stale);
			break;
		}
		case 11: {
			int type = pick_int(&in);

			e = NULL;
			r = CALL(qps_ep_create(fa.ctx, type, &e));
			FUZZ_CHECK(r == 0 ? type == QPS_EP_DGRAM && e :
					    r == -EINVAL || r == -EPROTOTYPE ||
					    r == -EPROTONOSUPPORT);
			if (r == 0)
				FUZZ_CHECK(CALL(qps_ep_close(e)) == 0);
			break;
		}
		case 12:
			if (!created)
				op_ctx_create(&in);
			created = true;
			break;
		default:
			FUZZ_CHECK(CALL(qps_ep_fd(pick_ep(&in))) != 0);
			break;
		}
	}
	/* Drain what was sent to ourselves, then close everything. */
	for (i = 0; i < NEP; i++)
		FUZZ_CHECK(CALL(qps_ep_close(fa.ep[i])) == 0);
	CALL(qps_ctx_flush(fa.ctx));
	while (CALL(qps_ctx_progress(fa.ctx)) > 0)
		;
	return 0;
}

/* --- seeds ------------------------------------------------------------- */

int fuzz_make_corpus(const char *dir)
{
	/* set and read back every option */
	static const uint8_t s_opts[] = {
		0, 0, 1, 1, 0, 0,	0, 0, 2, 0x85, 100, 0, 0, 0, 0,
		0, 0, 3, 1, 0, 0,	0, 0, 4, 4, 0, 0,
		0, 0, 5, 6, 0, 0,	0, 0, 7, 1, 0, 0,
		1, 0, 8, 0, 0,		1, 0, 9, 0, 0,
		0, 1, 12, 0, 2, 0,	1, 1, 40, 1, 0 };
	/* bind, connect to ourselves, send, receive */
	static const uint8_t s_loop[] = {
		2, 0, 0x00, 0,		2, 1, 0x08, 0,
		3, 0, 0x08, 0,		4, 0, 18, 0, 0, 0, 1,
		6, 1, 0, 4, 0, 0,	4, 0, 10, 0, 0, 0, 0, 0x08, 0,
		6, 1, 64, 0, 0, 0,	8, 0, 0, 2,	8, 0, 0, 0 };
	/* a batch with a bad message in the middle, a NULL array */
	static const uint8_t s_mmsg[] = {
		3, 0, 0x00, 0,		5, 0, 4,
		2, 5, 0,		0, 8, 0, 0x00, 0,
		4, 0, 0,		0, 4, 0,
		5, 0, 0x43, 1,		6, 0, 2, 0, 0, 0 };
	/* raw sockaddr bytes, short lengths, AF_UNSPEC, unknown family */
	static const uint8_t s_addr[] = {
		2, 0, 0x80, 3, 2, 0, 0,	2, 1, 0x80, 17, 2, 0, 0x23, 0x28,
		198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
		3, 2, 0x05, 0,		3, 3, 0x06, 0x10, 0, 4,
		2, 2, 0x00, 2,		2, 3, 0x00, 5 };
	/* join, leave, stats with odd sizes, context attributes */
	static const uint8_t s_misc[] = {
		2, 0, 0x02, 0, 0,	7, 0, 0x00, 0, 0,
		7, 0, 0x00, 0, 1,	7, 0, 0x01, 0, 1, 2, 3, 4, 0,
		9, 40, 0,		9, 0, 0,
		10, 1,			11, 2,	13, 0xff,
		12, 0x03, 0, 0, 0, 0, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0 };
	int r = 0;

	r |= fuzz_write_seed(dir, "options", s_opts, sizeof(s_opts));
	r |= fuzz_write_seed(dir, "loopback", s_loop, sizeof(s_loop));
	r |= fuzz_write_seed(dir, "sendmmsg", s_mmsg, sizeof(s_mmsg));
	r |= fuzz_write_seed(dir, "sockaddr", s_addr, sizeof(s_addr));
	r |= fuzz_write_seed(dir, "misc", s_misc, sizeof(s_misc));
	return r;
}
