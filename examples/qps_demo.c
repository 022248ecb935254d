// SPDX-License-Identifier: MIT
/*
 * qps_demo - send and receive a few datagrams through qpsock.
 *
 *   qps_demo recv [--provider P] [-d dev] [-a addr] [-p port] [-n count]
 *   qps_demo send [--provider P] [-d dev] [-a addr] --dest IP [-p port]
 *                 [-n count] [-b burst]
 *
 * Start the receiver first. On the emu provider both processes attach to
 * the shared-memory wire named by --dev, each as a port with the IPv4
 * address given by --addr. The sender retries while the destination cannot
 * be resolved yet (-EHOSTUNREACH: no port with that address on the wire),
 * for at most 5 s. With --burst N the sender passes QPS_MSG_MORE on all but
 * the last datagram of every N, so a burst costs one doorbell. The options
 * are spelled as the perftest-style tools spell them (--provider, -d/--dev).
 *
 * Only the public header is used. Every qpsock call returns a count or
 * -errno, hence strerror(-ret) below.
 */
#define _GNU_SOURCE	/* getopt_long */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <qpsock/qpsock.h>

#define DEMO_PORT 9000
#define DEMO_COUNT 10
#define DEMO_RCVTIMEO_MS 5000
#define DEMO_RESOLVE_MS 5000
#define DEMO_SEND_WAIT_MS 5000
#define DEMO_MAX_COUNT 1000000

struct demo_opts {
	bool recv;
	const char *provider;
	const char *wire;
	const char *addr;
	const char *dest;
	unsigned int port;
	unsigned int count;
	unsigned int burst;
};

static const char *prog = "qps_demo";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s recv [options]\n"
		"       %s send --dest=IP [options]\n"
		"      --provider=NAME  emu, packet or verbs (default: $QPS_PROVIDER or emu)\n"
		"  -d, --dev=NAME       emu wire / netdev / RDMA device (default: $QPS_DEV or qps0)\n"
		"  -a, --addr=IP        local IPv4 address (emu default: first free on the wire)\n"
		"      --dest=IP        send: destination IPv4 address\n"
		"  -p, --port=N         UDP port: bound by recv, destination of send (default %d)\n"
		"  -n, --count=N        datagrams to receive or send (default %d)\n"
		"  -b, --burst=N        send: datagrams per doorbell, QPS_MSG_MORE (default 1)\n"
		"  -h, --help           this text\n",
		prog, prog, DEMO_PORT, DEMO_COUNT);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int parse_uint(const char *s, unsigned int max, unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || v > max)
		return -1;
	*out = (unsigned int)v;
	return 0;
}

enum { OPT_PROVIDER = 256, OPT_DEST };

static const struct option demo_long_opts[] = {
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "dev", required_argument, NULL, 'd' },
	{ "addr", required_argument, NULL, 'a' },
	{ "dest", required_argument, NULL, OPT_DEST },
	{ "port", required_argument, NULL, 'p' },
	{ "count", required_argument, NULL, 'n' },
	{ "burst", required_argument, NULL, 'b' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_opts(int argc, char **argv, struct demo_opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->port = DEMO_PORT;
	o->count = DEMO_COUNT;
	o->burst = 1;

	if (argc < 2)
		return -1;
	if (strcmp(argv[1], "recv") == 0)
		o->recv = true;
	else if (strcmp(argv[1], "send") != 0)
		return -1;

	/* Parse the options after the mode word. */
	optind = 2;
	while ((c = getopt_long(argc, argv, "d:a:p:n:b:h", demo_long_opts,
				NULL)) != -1) {
		switch (c) {
		case OPT_PROVIDER:
			o->provider = optarg;
			break;
		case 'd':
			o->wire = optarg;
			break;
		case 'a':
			o->addr = optarg;
			break;
		case OPT_DEST:
			o->dest = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'p':
			if (parse_uint(optarg, 65535, &o->port) || !o->port) {
				fprintf(stderr, "%s: bad port '%s'\n", prog,
					optarg);
				return -1;
			}
			break;
		case 'n':
			if (parse_uint(optarg, DEMO_MAX_COUNT, &o->count)) {
				fprintf(stderr, "%s: bad count '%s'\n", prog,
					optarg);
				return -1;
			}
			break;
		case 'b':
			if (parse_uint(optarg, 4096, &o->burst) || !o->burst) {
				fprintf(stderr, "%s: bad burst '%s'\n", prog,
					optarg);
				return -1;
			}
			break;
		default:
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog,
			argv[optind]);
		return -1;
	}
	if (o->recv && o->dest) {
		fprintf(stderr, "%s: --dest is for send\n", prog);
		return -1;
	}
	if (!o->recv && !o->dest) {
		fprintf(stderr, "%s: send needs --dest=IP\n", prog);
		return -1;
	}
	return 0;
}

static int parse_ip(const char *s, struct in_addr *out)
{
	if (inet_pton(AF_INET, s, out) != 1) {
		fprintf(stderr, "%s: bad IPv4 address '%s'\n", prog, s);
		return -1;
	}
	return 0;
}

static const char *fmt_sin(const struct sockaddr_in *sin, char *buf,
			   size_t len)
{
	char ip[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	snprintf(buf, len, "%s:%u", ip, ntohs(sin->sin_port));
	return buf;
}

static int open_ctx(const struct demo_opts *o, struct qps_ctx **ctx,
		    struct qps_ctx_info *info)
{
	struct qps_ctx_attr attr;
	char ip[INET_ADDRSTRLEN];
	int ret;

	memset(&attr, 0, sizeof(attr));
	if (o->provider) {
		attr.comp_mask |= QPS_CTX_ATTR_PROVIDER;
		attr.provider = o->provider;
	}
	if (o->wire) {
		attr.comp_mask |= QPS_CTX_ATTR_DEV;
		attr.dev = o->wire;
	}
	if (o->addr) {
		if (parse_ip(o->addr, &attr.addr))
			return -EINVAL;
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
	}

	ret = qps_ctx_create(&attr, ctx);
	if (ret < 0) {
		fprintf(stderr, "%s: qps_ctx_create(provider %s, dev %s, addr %s): %s\n",
			prog, o->provider ? o->provider : "default",
			o->wire ? o->wire : "default",
			o->addr ? o->addr : "default", strerror(-ret));
		return ret;
	}
	ret = qps_ctx_query(*ctx, info);
	if (ret < 0) {
		fprintf(stderr, "%s: qps_ctx_query: %s\n", prog, strerror(-ret));
		qps_ctx_destroy(*ctx);
		*ctx = NULL;
		return ret;
	}
	if (!inet_ntop(AF_INET, &info->addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	printf("%s %s: context on provider %s, dev %s, address %s, "
	       "mac %02x:%02x:%02x:%02x:%02x:%02x, mtu %u, max payload %u\n",
	       prog, o->recv ? "recv" : "send", info->provider, info->dev, ip,
	       info->mac[0], info->mac[1], info->mac[2], info->mac[3],
	       info->mac[4], info->mac[5], info->mtu, info->max_payload);
	return 0;
}

static void print_stats(const char *who, struct qps_ctx *ctx)
{
	struct qps_stats st;
	unsigned long long dropped;
	int ret;

	memset(&st, 0, sizeof(st));
	ret = qps_ctx_stats(ctx, &st, sizeof(st));
	if (ret < 0) {
		fprintf(stderr, "%s %s: qps_ctx_stats: %s\n", prog, who,
			strerror(-ret));
		return;
	}
	dropped = st.dev_tx_drops + st.dev_rx_drops + st.rx_no_endpoint +
		  st.rx_queue_full;
	printf("%s %s: stats: tx_packets=%llu rx_packets=%llu wqes=%llu "
	       "doorbells=%llu bf_writes=%llu tx_cqes=%llu rx_cqes=%llu "
	       "dropped=%llu (dev_tx=%llu dev_rx=%llu no_endpoint=%llu "
	       "queue_full=%llu) tx_errors=%llu rx_errors=%llu\n",
	       prog, who,
	       (unsigned long long)st.tx_packets,
	       (unsigned long long)st.rx_packets,
	       (unsigned long long)st.wqes,
	       (unsigned long long)st.doorbells,
	       (unsigned long long)st.bf_writes,
	       (unsigned long long)st.tx_cqes,
	       (unsigned long long)st.rx_cqes,
	       dropped,
	       (unsigned long long)st.dev_tx_drops,
	       (unsigned long long)st.dev_rx_drops,
	       (unsigned long long)st.rx_no_endpoint,
	       (unsigned long long)st.rx_queue_full,
	       (unsigned long long)st.tx_errors,
	       (unsigned long long)st.rx_errors);
}

/* Payload as printable text: the datagram is not NUL-terminated. */
static void print_text(const char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		putchar(isprint(c) ? c : '.');
	}
}

static int run_recv(const struct demo_opts *o, struct qps_ctx *ctx,
		    const struct qps_ctx_info *info)
{
	struct sockaddr_in sin, src;
	socklen_t slen;
	struct qps_ep *ep = NULL;
	char abuf[64];
	char *buf;
	size_t buf_len = info->max_payload ? info->max_payload : 65507;
	int timeo = DEMO_RCVTIMEO_MS;
	unsigned int got = 0;
	int ret, rc = 1;

	buf = malloc(buf_len);
	if (!buf) {
		fprintf(stderr, "%s recv: out of memory\n", prog);
		return 1;
	}

	ret = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (ret < 0) {
		fprintf(stderr, "%s recv: qps_ep_create: %s\n", prog,
			strerror(-ret));
		goto out;
	}
	/* A bounded wait per datagram: a lost datagram fails, never hangs. */
	ret = qps_setopt(ep, QPS_OPT_RCVTIMEO, &timeo, sizeof(timeo));
	if (ret < 0) {
		fprintf(stderr, "%s recv: qps_setopt(QPS_OPT_RCVTIMEO): %s\n",
			prog, strerror(-ret));
		goto out;
	}

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	sin.sin_port = htons((uint16_t)o->port);
	ret = qps_bind(ep, (const struct sockaddr *)&sin, sizeof(sin));
	if (ret < 0) {
		fprintf(stderr, "%s recv: qps_bind(port %u): %s\n", prog,
			o->port, strerror(-ret));
		goto out;
	}
	slen = sizeof(sin);
	ret = qps_getsockname(ep, (struct sockaddr *)&sin, &slen);
	if (ret < 0) {
		fprintf(stderr, "%s recv: qps_getsockname: %s\n", prog,
			strerror(-ret));
		goto out;
	}
	if (sin.sin_addr.s_addr == htonl(INADDR_ANY))
		sin.sin_addr = info->addr;
	/* run-demo.sh waits for this line before it starts the sender. */
	printf("%s recv: listening on %s, expecting %u datagrams "
	       "(timeout %d ms each)\n", prog, fmt_sin(&sin, abuf, sizeof(abuf)),
	       o->count, timeo);
	fflush(stdout);

	while (got < o->count) {
		ssize_t n;

		slen = sizeof(src);
		memset(&src, 0, sizeof(src));
		n = qps_recvfrom(ep, buf, buf_len, 0,
				 (struct sockaddr *)&src, &slen);
		if (n < 0) {
			fprintf(stderr, "%s recv: qps_recvfrom after %u of %u: %s\n",
				prog, got, o->count, strerror((int)-n));
			goto out;
		}
		got++;
		printf("%s recv: #%u from %s, %zd bytes: \"", prog, got,
		       fmt_sin(&src, abuf, sizeof(abuf)), n);
		print_text(buf, (size_t)n);
		printf("\"\n");
		fflush(stdout);
	}
	printf("%s recv: received %u of %u datagrams\n", prog, got, o->count);
	rc = 0;
out:
	if (ctx)
		print_stats("recv", ctx);
	if (ep) {
		ret = qps_ep_close(ep);
		if (ret < 0) {
			fprintf(stderr, "%s recv: qps_ep_close: %s\n", prog,
				strerror(-ret));
			rc = 1;
		}
	}
	free(buf);
	return rc;
}

/*
 * Send one datagram. -EHOSTUNREACH is retried until @resolve_deadline
 * (the receiver's port may not be on the wire yet); -EAGAIN (send queue
 * full) is retried after a progress call for a bounded time.
 */
static ssize_t send_one(struct qps_ctx *ctx, struct qps_ep *ep,
			const char *msg, size_t len, int flags,
			const struct sockaddr_in *dst, long long resolve_deadline,
			unsigned int *resolve_retries)
{
	long long again_deadline = now_ms() + DEMO_SEND_WAIT_MS;
	ssize_t n;

	for (;;) {
		n = qps_sendto(ep, msg, len, flags,
			       (const struct sockaddr *)dst, sizeof(*dst));
		if (n == -EHOSTUNREACH && now_ms() < resolve_deadline) {
			(*resolve_retries)++;
			sleep_ms(50);
			continue;
		}
		if (n == -EAGAIN && now_ms() < again_deadline) {
			qps_ctx_progress(ctx);
			sleep_ms(1);
			continue;
		}
		return n;
	}
}

static int run_send(const struct demo_opts *o, struct qps_ctx *ctx,
		    const struct qps_ctx_info *info)
{
	struct sockaddr_in dst;
	struct qps_ep *ep = NULL;
	char me[INET_ADDRSTRLEN], abuf[64], msg[128];
	long long resolve_deadline;
	unsigned int i, sent = 0, retries = 0;
	int ret, idle, rc = 1;

	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)o->port);
	if (parse_ip(o->dest, &dst.sin_addr))
		return 1;
	if (!inet_ntop(AF_INET, &info->addr, me, sizeof(me)))
		snprintf(me, sizeof(me), "?");

	ret = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (ret < 0) {
		fprintf(stderr, "%s send: qps_ep_create: %s\n", prog,
			strerror(-ret));
		goto out;
	}
	printf("%s send: sending %u datagrams to %s (burst %u)\n", prog,
	       o->count, fmt_sin(&dst, abuf, sizeof(abuf)), o->burst);

	resolve_deadline = now_ms() + DEMO_RESOLVE_MS;
	for (i = 1; i <= o->count; i++) {
		bool last = (i % o->burst) == 0 || i == o->count;
		int len = snprintf(msg, sizeof(msg), "hello #%u from %s", i, me);
		ssize_t n;

		n = send_one(ctx, ep, msg, (size_t)len,
			     last ? 0 : QPS_MSG_MORE, &dst,
			     sent ? 0 : resolve_deadline, &retries);
		if (n < 0) {
			fprintf(stderr, "%s send: qps_sendto #%u to %s: %s%s\n",
				prog, i, fmt_sin(&dst, abuf, sizeof(abuf)),
				strerror((int)-n),
				n == -EHOSTUNREACH ?
				" (is the receiver running on this wire?)" : "");
			goto out;
		}
		if (n != len) {
			fprintf(stderr, "%s send: qps_sendto #%u: sent %zd of %d bytes\n",
				prog, i, n, len);
			goto out;
		}
		sent++;
		printf("%s send: #%u %d bytes: \"%s\"%s\n", prog, i, len, msg,
		       last ? "" : " (more)");
	}
	if (retries)
		printf("%s send: destination resolved after %u retries\n",
		       prog, retries);

	/* Reap send completions so the counters are settled. */
	for (idle = 0, i = 0; idle < 3 && i < 1000; i++) {
		ret = qps_ctx_progress(ctx);
		if (ret < 0) {
			fprintf(stderr, "%s send: qps_ctx_progress: %s\n", prog,
				strerror(-ret));
			goto out;
		}
		idle = ret ? 0 : idle + 1;
		if (!ret)
			sleep_ms(1);
	}
	printf("%s send: sent %u of %u datagrams\n", prog, sent, o->count);
	rc = 0;
out:
	if (ctx)
		print_stats("send", ctx);
	if (ep) {
		ret = qps_ep_close(ep);
		if (ret < 0) {
			fprintf(stderr, "%s send: qps_ep_close: %s\n", prog,
				strerror(-ret));
			rc = 1;
		}
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct demo_opts o;
	struct qps_ctx *ctx = NULL;
	struct qps_ctx_info info;
	int ret, rc;

	if (argc > 0 && argv[0] && *argv[0]) {
		const char *slash = strrchr(argv[0], '/');

		prog = slash ? slash + 1 : argv[0];
	}
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (parse_opts(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	/* Line-buffered even into a pipe or file: the logs interleave. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	memset(&info, 0, sizeof(info));
	if (open_ctx(&o, &ctx, &info) < 0)
		return 1;
	rc = o.recv ? run_recv(&o, ctx, &info) : run_send(&o, ctx, &info);

	ret = qps_ctx_destroy(ctx);
	if (ret < 0) {
		fprintf(stderr, "%s: qps_ctx_destroy: %s\n", prog,
			strerror(-ret));
		rc = 1;
	}
	return rc;
}
