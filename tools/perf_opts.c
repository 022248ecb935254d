// SPDX-License-Identifier: MIT
/*
 * Command line of qps_send_bw / qps_send_lat: perftest's flags with their
 * meaning and defaults where they apply to datagrams (perftest's UD
 * rules: sizes capped at the port, one QP for multicast, -l and -Q for
 * BW tests only), plus qpsock's own options. -c picks the transport of
 * the contexts: RAW or UD (perftest's connection types that need a
 * connected or reliable QP are refused). Every bad value is refused
 * with a message naming the flag.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf_common.h"

enum {
	OPT_REPORT_GBITS = 256,
	OPT_PROVIDER,
	OPT_PRIORITY,
	OPT_THREADS,
	OPT_JSON,
};

static const struct option perf_long_opts[] = {
	{ "connection", required_argument, NULL, 'c' },
	{ "size", required_argument, NULL, 's' },
	{ "all", no_argument, NULL, 'a' },
	{ "iters", required_argument, NULL, 'n' },
	{ "duration", required_argument, NULL, 'D' },
	{ "qp", required_argument, NULL, 'q' },
	{ "post_list", required_argument, NULL, 'l' },
	{ "cq-mod", required_argument, NULL, 'Q' },
	{ "tx-depth", required_argument, NULL, 't' },
	{ "rx-depth", required_argument, NULL, 'r' },
	{ "inline_size", required_argument, NULL, 'I' },
	{ "mcg", no_argument, NULL, 'g' },
	{ "MGID", required_argument, NULL, 'M' },
	{ "CPU-freq", no_argument, NULL, 'F' },
	{ "noPeak", no_argument, NULL, 'N' },
	{ "report-histogram", no_argument, NULL, 'H' },
	{ "port", required_argument, NULL, 'p' },
	{ "ib-dev", required_argument, NULL, 'd' },
	{ "dev", required_argument, NULL, 'd' },
	{ "report_gbits", no_argument, NULL, OPT_REPORT_GBITS },
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "priority", required_argument, NULL, OPT_PRIORITY },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

void perf_usage(FILE *f, enum perf_test test, const char *prog)
{
	bool bw = test == PERF_TEST_BW;

	fprintf(f,
		"usage: %s [options]          start a server\n"
		"       %s [options] <host>   connect to the server on <host>\n"
		"Options (perftest's meaning; datagrams are capped at the port's max payload):\n"
		"  -s, --size=N          message size (default %u%s)\n"
		"  -a, --all             sizes 2, 4, 8 ... up to the port's max payload\n"
		"  -n, --iters=N         iterations (default %u, at least %u)\n"
		"  -D, --duration=S      run S seconds, measure the middle half (no peak)\n"
		"  -q, --qp=N            queue pairs = qpsock contexts (default 1%s)\n"
		"  -c, --connection=T    RAW (default: raw-packet QPs, whole UDP frames) or\n"
		"                        UD (UD QPs over RoCE v2; QPN and Q_Key exchanged\n"
		"                        over TCP; sizes up to the UD MTU less 12 bytes);\n"
		"                        RC, UC, XRC, DC, SRD: refused, qpsock is datagram-only\n",
		prog, prog, bw ? PERF_DEF_SIZE_BW : PERF_DEF_SIZE_LAT,
		bw ? ", capped" : "", PERF_DEF_ITERS, PERF_MIN_ITERS,
		bw ? "" : "; latency: 1 only");
	if (bw)
		fprintf(f,
			"  -l, --post_list=N     messages per doorbell (QPS_MSG_MORE on N-1 of N)\n"
			"  -Q, --cq-mod=N        reap once per N messages and ask the device for a\n"
			"                        completion every N WQEs (context tx_signal; the last\n"
			"                        WQE of each doorbell always asks, so -Q saves CQEs\n"
			"                        with -l > 1 only) (default %u, capped to -t)\n"
			"      --threads=N       sending threads sharing the QPs (default 1)\n",
			PERF_DEF_CQ_MOD);
	fprintf(f,
		"  -t, --tx-depth=N      send queue depth (default %u)\n"
		"  -r, --rx-depth=N      receive buffers posted (default: -n up to 4096, %u with -D)\n"
		"  -I, --inline_size=N   max inline data (recorded; qpsock inlines what fits)\n"
		"  -g, --mcg             multicast (group %s, or -M)\n"
		"  -M, --MGID=ADDR       IPv4 multicast group for -g\n"
		"  -F, --CPU-freq        accepted (time is CLOCK_MONOTONIC, no CPU clock check)\n"
		"      --report_gbits    report Gb/s instead of MB/s\n"
		"  -N, --noPeak          do not compute the peak bandwidth\n"
		"  -H, --report-histogram  latency: print every sample kept (usec, sorted)\n"
		"  -p, --port=N          TCP handshake port and UDP data port (default %u)\n"
		"      --provider=NAME   emu (default), packet or verbs\n"
		"  -d, --dev=NAME        emu wire / netdev / RDMA device\n"
		"      --priority=N      endpoint priority 0..15 (QPS_OPT_PRIORITY)\n"
		"      --json            also print each result line as one JSON object\n"
		"                        (with the counters: wqes, tx_signaled, tx_reaped ...)\n"
		"  -h, --help            this text\n",
		bw ? PERF_DEF_TX_BW : PERF_DEF_TX_LAT, PERF_DEF_RX,
		PERF_DEF_MCG, PERF_DEF_PORT);
}

const char *perf_conn_name(uint32_t transport)
{
	return transport == QPS_TRANSPORT_UD ? "UD" : "RAW";
}

/* perftest's connection types that are not datagram transports. */
static const char *const perf_conn_other[] = {
	"RC", "UC", "XRC", "DC", "SRD",
};

/* -c: perftest spells the types in capitals; case is not significant.
 * RawEth is perftest's name for raw-packet QPs (raw_ethernet_bw). */
static int perf_conn(const char *s, uint32_t *out, const char **why)
{
	size_t i;

	if (!strcasecmp(s, "RAW") || !strcasecmp(s, "RawEth")) {
		*out = QPS_TRANSPORT_RAW;
		return 0;
	}
	if (!strcasecmp(s, "UD")) {
		*out = QPS_TRANSPORT_UD;
		return 0;
	}
	*why = "one of RAW, UD";
	for (i = 0; i < sizeof(perf_conn_other) / sizeof(perf_conn_other[0]);
	     i++)
		if (!strcasecmp(s, perf_conn_other[i]))
			*why = "qpsock is datagram-only: RAW (raw-packet QPs) "
			       "or UD; connected (RC, UC, XRC, DC) and "
			       "reliable (SRD) QPs are not supported";
	return -EINVAL;
}

/* A decimal number in [lo, hi]; anything else is refused. */
static int perf_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int perf_bad(FILE *err, const struct perf_opts *o, const char *flag,
		    const char *val, const char *why)
{
	fprintf(err, "%s: bad %s '%s': %s\n", o->prog, flag, val ? val : "",
		why);
	return -EINVAL;
}

static int perf_defaults(struct perf_opts *o, enum perf_test test,
			 const char *prog)
{
	memset(o, 0, sizeof(*o));
	o->test = test;
	o->prog = prog;
	o->port = PERF_DEF_PORT;
	o->size = test == PERF_TEST_BW ? PERF_DEF_SIZE_BW : PERF_DEF_SIZE_LAT;
	o->iters = PERF_DEF_ITERS;
	o->num_qps = 1;
	o->post_list = 1;
	o->cq_mod = PERF_DEF_CQ_MOD;
	o->tx_depth = test == PERF_TEST_BW ? PERF_DEF_TX_BW : PERF_DEF_TX_LAT;
	o->rx_depth = PERF_DEF_RX;
	o->priority = -1;
	o->threads = 1;
	o->transport = QPS_TRANSPORT_RAW;
	return inet_pton(AF_INET, PERF_DEF_MCG, &o->mcg_addr) == 1 ? 0 :
	       -EINVAL;
}

/* Rules between flags, checked once all are known. */
static int perf_check(struct perf_opts *o, FILE *err, bool tx_set,
		      bool rx_set)
{
	bool bw = o->test == PERF_TEST_BW;

	/* perftest for UD: depths no deeper than the run, and without -r
	 * the receive ring holds the whole run (up to qpsock's 4096). */
	if (!o->duration) {
		if (o->tx_depth > o->iters)
			o->tx_depth = (unsigned int)o->iters;
		if (!rx_set)
			o->rx_depth = o->iters < PERF_MAX_DEPTH ?
				      (unsigned int)o->iters : PERF_MAX_DEPTH;
		else if (o->rx_depth > o->iters)
			o->rx_depth = (unsigned int)o->iters;
	}

	if (o->all && o->size_set) {
		fprintf(err, "%s: -a and -s exclude each other\n", o->prog);
		return -EINVAL;
	}
	if (o->duration && o->iters_set) {
		fprintf(err, "%s: -D and -n exclude each other\n", o->prog);
		return -EINVAL;
	}
	if (o->duration && o->all) {
		fprintf(err, "%s: -D cannot be used with -a\n", o->prog);
		return -EINVAL;
	}
	if (o->duration && o->histogram) {
		fprintf(err, "%s: -H needs samples: use -n, not -D\n", o->prog);
		return -EINVAL;
	}
	if (!bw && o->num_qps != 1) {
		fprintf(err, "%s: latency tests use one QP (-q 1)\n", o->prog);
		return -EINVAL;
	}
	if (o->port + o->num_qps - 1 > 65535) {
		fprintf(err, "%s: QP i binds UDP port -p + i: -p %u with -q %u "
			"passes 65535\n", o->prog, o->port, o->num_qps);
		return -EINVAL;
	}
	if (o->mcg && o->num_qps != 1) {
		fprintf(err, "%s: multicast (-g) uses one QP (-q 1)\n", o->prog);
		return -EINVAL;
	}
	if (bw && !o->duration && o->iters % o->post_list) {
		fprintf(err, "%s: -n %llu must be a multiple of -l %u\n",
			o->prog, (unsigned long long)o->iters, o->post_list);
		return -EINVAL;
	}
	if (bw && o->post_list > o->tx_depth) {
		fprintf(err, "%s: -l %u exceeds the TX depth %u (-t)\n",
			o->prog, o->post_list, o->tx_depth);
		return -EINVAL;
	}
	/* perftest: without -Q, completions are moderated by the post list. */
	if (bw && !o->cq_mod_set && o->post_list > 1)
		o->cq_mod = o->post_list;
	if (bw && o->cq_mod > o->tx_depth) {
		if (o->cq_mod_set && tx_set) {
			fprintf(err, "%s: -Q %u exceeds the TX depth %u (-t)\n",
				o->prog, o->cq_mod, o->tx_depth);
			return -EINVAL;
		}
		o->cq_mod = o->tx_depth;
	}
	return 0;
}

int perf_parse(int argc, char **argv, enum perf_test test,
	       struct perf_opts *o, FILE *err)
{
	const char *prog = test == PERF_TEST_BW ? "qps_send_bw" :
			   "qps_send_lat";
	bool bw = test == PERF_TEST_BW;
	bool tx_set = false, rx_set = false;
	const char *why;
	uint64_t v;
	int c;

	if (argc > 0 && argv[0] && *argv[0]) {
		const char *slash = strrchr(argv[0], '/');

		prog = slash ? slash + 1 : argv[0];
	}
	if (perf_defaults(o, test, prog) < 0)
		return -EINVAL;
	/* optind 0 makes glibc start over, so tests can parse many times. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:s:an:D:q:l:Q:t:r:I:gM:FNHp:d:h",
				perf_long_opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (perf_conn(optarg, &o->transport, &why))
				return perf_bad(err, o, "-c", optarg, why);
			break;
		case 's':
			if (perf_num(optarg, 1, PERF_MAX_SIZE, &v))
				return perf_bad(err, o, "-s", optarg,
						"size is 1..8388608");
			o->size = (uint32_t)v;
			o->size_set = true;
			break;
		case 'a':
			o->all = true;
			break;
		case 'n':
			if (perf_num(optarg, PERF_MIN_ITERS, PERF_MAX_ITERS, &v))
				return perf_bad(err, o, "-n", optarg,
						"iterations are 5..100000000");
			o->iters = v;
			o->iters_set = true;
			break;
		case 'D':
			if (perf_num(optarg, 1, PERF_MAX_DURATION, &v))
				return perf_bad(err, o, "-D", optarg,
						"duration is 1..3600 s");
			o->duration = (unsigned int)v;
			break;
		case 'q':
			if (perf_num(optarg, 1, PERF_MAX_QPS, &v))
				return perf_bad(err, o, "-q", optarg,
						"QPs are 1..16");
			o->num_qps = (unsigned int)v;
			break;
		case 'l':
			if (!bw) {
				fprintf(err, "%s: -l (post list) is for BW tests\n",
					o->prog);
				return -EINVAL;
			}
			if (perf_num(optarg, 1, PERF_MAX_POST_LIST, &v))
				return perf_bad(err, o, "-l", optarg,
						"post list is 1..1024");
			o->post_list = (unsigned int)v;
			break;
		case 'Q':
			if (!bw) {
				fprintf(err, "%s: -Q (CQ moderation) is for BW tests\n",
					o->prog);
				return -EINVAL;
			}
			if (perf_num(optarg, 1, PERF_MAX_CQ_MOD, &v))
				return perf_bad(err, o, "-Q", optarg,
						"CQ moderation is 1..1024");
			o->cq_mod = (unsigned int)v;
			o->cq_mod_set = true;
			break;
		case 't':
			if (perf_num(optarg, 1, PERF_MAX_DEPTH, &v))
				return perf_bad(err, o, "-t", optarg,
						"TX depth is 1..4096");
			o->tx_depth = (unsigned int)v;
			tx_set = true;
			break;
		case 'r':
			if (perf_num(optarg, 2, PERF_MAX_DEPTH, &v))
				return perf_bad(err, o, "-r", optarg,
						"RX depth is 2..4096");
			o->rx_depth = (unsigned int)v;
			rx_set = true;
			break;
		case 'I':
			if (perf_num(optarg, 0, PERF_MAX_INLINE, &v))
				return perf_bad(err, o, "-I", optarg,
						"inline size is 0..912");
			o->inline_size = (unsigned int)v;
			o->inline_set = true;
			break;
		case 'g':
			o->mcg = true;
			break;
		case 'M':
			if (inet_pton(AF_INET, optarg, &o->mcg_addr) != 1 ||
			    !IN_MULTICAST(ntohl(o->mcg_addr.s_addr)))
				return perf_bad(err, o, "-M", optarg,
						"not an IPv4 multicast group");
			o->mcg = true;
			break;
		case 'F':
			o->cpu_freq_f = true;
			break;
		case 'N':
			o->no_peak = true;
			break;
		case 'H':
			if (test != PERF_TEST_LAT) {
				fprintf(err, "%s: -H is for latency tests\n",
					o->prog);
				return -EINVAL;
			}
			o->histogram = true;
			break;
		case 'p':
			if (perf_num(optarg, 1, 65535, &v))
				return perf_bad(err, o, "-p", optarg,
						"port is 1..65535");
			o->port = (unsigned int)v;
			break;
		case 'd':
			if (!*optarg || strlen(optarg) >= PERF_NAME_MAX ||
			    strchr(optarg, '/'))
				return perf_bad(err, o, "--dev", optarg,
						"1..63 characters, no '/'");
			o->dev = optarg;
			break;
		case OPT_REPORT_GBITS:
			o->report_gbits = true;
			break;
		case OPT_PROVIDER:
			if (strcmp(optarg, "emu") && strcmp(optarg, "packet") &&
			    strcmp(optarg, "xdp") && strcmp(optarg, "verbs"))
				return perf_bad(err, o, "--provider", optarg,
						"one of emu, packet, xdp, verbs");
			o->provider = optarg;
			break;
		case OPT_PRIORITY:
			if (perf_num(optarg, 0, 15, &v))
				return perf_bad(err, o, "--priority", optarg,
						"priority is 0..15");
			o->priority = (int)v;
			break;
		case OPT_THREADS:
			if (!bw) {
				fprintf(err, "%s: --threads is for BW tests\n",
					o->prog);
				return -EINVAL;
			}
			if (perf_num(optarg, 1, PERF_MAX_THREADS, &v))
				return perf_bad(err, o, "--threads", optarg,
						"threads are 1..64");
			o->threads = (unsigned int)v;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case 'h':
			perf_usage(stdout, test, o->prog);
			return 1;
		case ':':
			fprintf(err, "%s: option '%s' needs a value\n", o->prog,
				argv[optind - 1]);
			return -EINVAL;
		default:
			if (optopt > 0 && optopt < 256)
				fprintf(err, "%s: unknown option '-%c' (see --help)\n",
					o->prog, optopt);
			else
				fprintf(err, "%s: unknown option '%s' (see --help)\n",
					o->prog, argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc)
		o->server = argv[optind++];
	if (optind < argc) {
		fprintf(err, "%s: unexpected argument '%s'\n", o->prog,
			argv[optind]);
		return -EINVAL;
	}
	if (o->server && !*o->server) {
		fprintf(err, "%s: empty server host\n", o->prog);
		return -EINVAL;
	}
	return perf_check(o, err, tx_set, rx_set);
}
