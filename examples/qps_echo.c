// SPDX-License-Identifier: MIT
/*
 * qps_echo - a UDP echo server on qpsock that answers sockperf clients.
 *
 *   qps_echo [--provider P] [-d dev] [-a addr] [-p port] [-g group] [-B]
 *            [-U] [-t seconds] [-m max-size]
 *
 * (each also long: --dev, --addr, --port, --group, --busy-poll,
 * --unicast-reply, --seconds, --max-size; spelled as the perftest-style
 * tools spell --provider and -d/--dev)
 *
 * Run it where a sockperf server would run, then point the kernel client
 * at it: `sockperf ping-pong -i ADDR -p PORT` (or under-load). With -g it
 * joins GROUP on the port as well and answers multicast pings to the
 * group with the sender's source port, as sockperf's server does (-U
 * answers them unicast instead, as sockperf --force-unicast-reply).
 *
 * The sockperf message is a 14-byte big-endian header: sequence number
 * (8), flags (2: 0x1 CLIENT, 0x2 PONG_REQUEST, 0x4 WARMUP), total length
 * including the header (4), then the payload. The server drops messages
 * whose length field disagrees with the datagram or exceeds -m, ignores
 * messages without CLIENT and warm-up messages, counts the rest, and
 * sends back those with PONG_REQUEST, CLIENT cleared, byte for byte.
 *
 * -B busy-polls (QPS_MSG_DONTWAIT in a loop) instead of sleeping in the
 * endpoint's descriptor: lower latency, one core. SIGINT or SIGTERM (or
 * -t) stops it; it then prints its totals like sockperf's server.
 * Only the public header is used.
 */
#define _GNU_SOURCE	/* getopt_long */

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <qpsock/qpsock.h>

#define ECHO_PORT 11111		/* sockperf's default */
#define ECHO_HDR 14
#define ECHO_MAX 65507
#define ECHO_POLL_MS 100	/* how often a sleeping server checks for stop */

#define F_CLIENT 0x1
#define F_PONG 0x2
#define F_WARMUP 0x4

struct echo_opts {
	const char *provider, *dev;
	struct in_addr addr, group;
	bool addr_set, group_set, busy, unicast_reply;
	unsigned short port;
	unsigned int seconds;
	uint32_t max;
};

struct echo_count {
	uint64_t handled, replied, warmup, ignored, bad, send_err;
};

static volatile sig_atomic_t echo_stop;

static void on_signal(int sig)
{
	(void)sig;
	echo_stop = 1;
}

static int usage(FILE *f)
{
	fprintf(f,
		"usage: qps_echo [options]\n"
		"      --provider=NAME  emu, packet or verbs (default: $QPS_PROVIDER or emu)\n"
		"  -d, --dev=NAME       emu wire / netdev / RDMA device (default: $QPS_DEV)\n"
		"  -a, --addr=IP        local IPv4 address\n"
		"  -p, --port=N         UDP port (default %d, sockperf's)\n"
		"  -g, --group=IP       also join this multicast group on the port\n"
		"  -B, --busy-poll      spin on the endpoint instead of sleeping\n"
		"  -U, --unicast-reply  answer multicast pings unicast\n"
		"  -t, --seconds=N      stop after N seconds (default: at SIGINT/SIGTERM)\n"
		"  -m, --max-size=N     largest message accepted (default %d)\n"
		"  -h, --help           this text\n",
		ECHO_PORT, ECHO_MAX);
	return f == stderr ? 2 : 0;
}

enum { OPT_PROVIDER = 256 };

static const struct option echo_long_opts[] = {
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "dev", required_argument, NULL, 'd' },
	{ "addr", required_argument, NULL, 'a' },
	{ "port", required_argument, NULL, 'p' },
	{ "group", required_argument, NULL, 'g' },
	{ "busy-poll", no_argument, NULL, 'B' },
	{ "unicast-reply", no_argument, NULL, 'U' },
	{ "seconds", required_argument, NULL, 't' },
	{ "max-size", required_argument, NULL, 'm' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse(int argc, char **argv, struct echo_opts *o)
{
	unsigned long v;
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->port = ECHO_PORT;
	o->max = ECHO_MAX;
	while ((c = getopt_long(argc, argv, "d:a:p:g:BUt:m:h", echo_long_opts,
				NULL)) != -1) {
		switch (c) {
		case OPT_PROVIDER:
			o->provider = optarg;
			break;
		case 'd':
			o->dev = optarg;
			break;
		case 'a':
		case 'g':
			if (inet_pton(AF_INET, optarg,
				      c == 'a' ? &o->addr : &o->group) != 1) {
				fprintf(stderr, "qps_echo: bad address %s\n",
					optarg);
				return -1;
			}
			*(c == 'a' ? &o->addr_set : &o->group_set) = true;
			break;
		case 'p':
		case 't':
		case 'm':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg ||
			    (c == 'p' && (!v || v > 65535)) ||
			    (c == 'm' && (v < ECHO_HDR || v > ECHO_MAX)) ||
			    v > 86400 * 365) {
				fprintf(stderr, "qps_echo: bad -%c %s\n", c,
					optarg);
				return -1;
			}
			if (c == 'p')
				o->port = (unsigned short)v;
			else if (c == 't')
				o->seconds = (unsigned int)v;
			else
				o->max = (uint32_t)v;
			break;
		case 'B':
			o->busy = true;
			break;
		case 'U':
			o->unicast_reply = true;
			break;
		case 'h':
			exit(usage(stdout));
		default:
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* Apply sockperf's server rules to one message; true when @msg (with
 * CLIENT cleared) must go back. */
static bool handle(uint8_t *msg, size_t len, uint32_t max,
		   struct echo_count *n)
{
	uint16_t flags;
	uint32_t mlen;

	if (len < ECHO_HDR) {
		n->bad++;
		return false;
	}
	flags = get16(msg + 8);
	mlen = get32(msg + 10);
	if (mlen != len || mlen > max) {
		n->bad++;
		return false;
	}
	if (!(flags & F_CLIENT)) {
		n->ignored++;
		return false;
	}
	if (flags & F_WARMUP) {
		n->warmup++;
		return false;
	}
	n->handled++;
	if (!(flags & F_PONG))
		return false;
	flags &= (uint16_t)~F_CLIENT;
	msg[8] = (uint8_t)(flags >> 8);
	msg[9] = (uint8_t)flags;
	return true;
}

static int open_ctx(const struct echo_opts *o, struct qps_ctx **ctx)
{
	struct qps_ctx_attr attr;

	memset(&attr, 0, sizeof(attr));
	if (o->provider) {
		attr.comp_mask |= QPS_CTX_ATTR_PROVIDER;
		attr.provider = o->provider;
	}
	if (o->dev) {
		attr.comp_mask |= QPS_CTX_ATTR_DEV;
		attr.dev = o->dev;
	}
	if (o->addr_set) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		attr.addr = o->addr;
	}
	return qps_ctx_create(&attr, ctx);
}

static int join(struct qps_ep *ep, const struct echo_opts *o)
{
#ifdef QPS_IFINDEX
	struct qps_mreq mr;

	memset(&mr, 0, sizeof(mr));
	mr.group = o->group;
	return qps_join(ep, &mr, sizeof(mr));
#else
	(void)ep;
	(void)o;
	fprintf(stderr, "qps_echo: this qpsock has no multicast join\n");
	return -EOPNOTSUPP;
#endif
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int serve(struct qps_ep *ep, const struct echo_opts *o,
		 struct echo_count *n)
{
	static uint8_t buf[ECHO_MAX];
	struct sockaddr_in src, dst;
	socklen_t slen;
	long long end = o->seconds ? now_ms() + 1000LL * o->seconds : 0;
	int flags = o->busy ? QPS_MSG_DONTWAIT : 0;
	ssize_t r;

	while (!echo_stop && (!end || now_ms() < end)) {
		slen = sizeof(src);
		r = qps_recvfrom(ep, buf, sizeof(buf), flags | QPS_MSG_TRUNC,
				 (struct sockaddr *)&src, &slen);
		if (r == -EAGAIN || r == -ETIMEDOUT || r == -EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "qps_echo: qps_recvfrom: %s\n",
				strerror((int)-r));
			return (int)r;
		}
		if ((size_t)r > sizeof(buf) ||
		    !handle(buf, (size_t)r, o->max, n))
			continue;
		dst = src;
		/* sockperf answers a multicast ping to the group, from
		 * which only the sender's port is kept. We cannot see the
		 * destination of a datagram here, so with -g every ping
		 * is taken for a multicast one. */
		if (o->group_set && !o->unicast_reply)
			dst.sin_addr = o->group;
		r = qps_sendto(ep, buf, (size_t)r, 0, (struct sockaddr *)&dst,
			       sizeof(dst));
		if (r < 0)
			n->send_err++;
		else
			n->replied++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct echo_opts o;
	struct echo_count n = { 0 };
	struct qps_ctx *ctx = NULL;
	struct qps_ep *ep = NULL;
	struct qps_ctx_info info;
	struct qps_stats st;
	struct sockaddr_in sin;
	struct sigaction sa;
	int tmo = ECHO_POLL_MS, ret, i;
	unsigned long long bad = 0;
	char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];

	if (parse(argc, argv, &o) < 0)
		return usage(stderr);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ret = open_ctx(&o, &ctx);
	if (ret < 0) {
		fprintf(stderr, "qps_echo: qps_ctx_create: %s\n",
			strerror(-ret));
		return 1;
	}
	qps_ctx_query(ctx, &info);
	ret = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (!ret)
		ret = qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(o.port);
	if (!ret)
		ret = qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin));
	if (!ret && o.group_set)
		ret = join(ep, &o);
	if (ret < 0) {
		fprintf(stderr, "qps_echo: setting up the endpoint: %s\n",
			strerror(-ret));
		qps_ctx_destroy(ctx);
		return 1;
	}
	printf("qps_echo: %s/%s %s:%u%s%s, %s\n", info.provider, info.dev,
	       inet_ntop(AF_INET, &info.addr, a, sizeof(a)), o.port,
	       o.group_set ? " + group " : "",
	       o.group_set ? inet_ntop(AF_INET, &o.group, g, sizeof(g)) : "",
	       o.busy ? "busy-polling" : "sleeping in qps_recvfrom");
	fflush(stdout);

	ret = serve(ep, &o, &n);

	printf("qps_echo: Total %llu messages received and handled "
	       "(%llu replied, %llu warm-up, %llu ignored, %llu bad, "
	       "%llu send errors)\n",
	       (unsigned long long)n.handled, (unsigned long long)n.replied,
	       (unsigned long long)n.warmup, (unsigned long long)n.ignored,
	       (unsigned long long)n.bad, (unsigned long long)n.send_err);
	if (qps_ctx_stats(ctx, &st, sizeof(st)) > 0) {
		for (i = QPS_RX_OK + 1; i < QPS_RX_REASON_MAX; i++)
			bad += st.rx_bad[i];
		printf("qps_echo: stats: rx_packets=%llu tx_packets=%llu "
		       "rx_bad_frames=%llu rx_no_endpoint=%llu "
		       "dev_rx_drops=%llu doorbells=%llu\n",
		       (unsigned long long)st.rx_packets,
		       (unsigned long long)st.tx_packets,
		       (unsigned long long)bad,
		       (unsigned long long)st.rx_no_endpoint,
		       (unsigned long long)st.dev_rx_drops,
		       (unsigned long long)st.doorbells);
	}
	qps_ep_close(ep);
	qps_ctx_destroy(ctx);
	return ret < 0 ? 1 : 0;
}
