/* SPDX-License-Identifier: MIT */
/*
 * Shared code of the perftest-style tools qps_send_bw and qps_send_lat:
 * options (perf_opts.c), statistics and output (perf_stats.c), the
 * out-of-band TCP handshake (perf_oob.c) and the qpsock side: contexts,
 * endpoints, counters (perf_qps.c). Every function returns 0, a count or
 * -errno unless it says otherwise.
 */
#ifndef QPS_PERF_COMMON_H
#define QPS_PERF_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>

#include <qpsock/qpsock.h>

#define PERF_DEF_PORT 18515		/* perftest's DEF_PORT */
#define PERF_DEF_ITERS 1000		/* DEF_ITERS */
#define PERF_MIN_ITERS 5
#define PERF_MAX_ITERS 100000000ULL
#define PERF_DEF_SIZE_BW 65536		/* DEF_SIZE_BW, capped to the port */
#define PERF_DEF_SIZE_LAT 2		/* DEF_SIZE_LAT */
#define PERF_MAX_SIZE 8388608		/* MAX_SIZE: 2^23 */
#define PERF_DEF_CQ_MOD 100		/* DEF_CQ_MOD */
#define PERF_MAX_CQ_MOD 1024
#define PERF_DEF_TX_BW 128
#define PERF_DEF_TX_LAT 1
#define PERF_DEF_RX 512
#define PERF_MAX_DEPTH 4096		/* qpsock's context limit */
#define PERF_MAX_POST_LIST 1024
#define PERF_MAX_INLINE 912		/* perftest's MAX_INLINE */
#define PERF_MAX_QPS 16			/* one context per QP; emu: 16 ports */
#define PERF_MAX_THREADS 64
#define PERF_MAX_DURATION 3600
#define PERF_NOPEAK_ITERS 20000		/* perftest drops the peak above it */
#define PERF_LAT_TAIL 2			/* LAT_MEASURE_TAIL */
#define PERF_DEF_MCG "239.255.0.1"
#define PERF_NAME_MAX 64

enum perf_test {
	PERF_TEST_BW = 1,
	PERF_TEST_LAT = 2,
};

/* Command line of one side. The *_set flags say what was given. */
struct perf_opts {
	enum perf_test test;
	const char *prog;
	const char *server;	/* host to connect to; NULL = server side */
	unsigned int port;	/* -p: TCP handshake port and UDP data port */
	uint32_t size;		/* -s */
	bool size_set;
	bool all;		/* -a */
	uint64_t iters;		/* -n */
	bool iters_set;
	unsigned int duration;	/* -D seconds; 0 = iteration mode */
	unsigned int num_qps;	/* -q */
	unsigned int post_list;	/* -l */
	unsigned int cq_mod;	/* -Q */
	bool cq_mod_set;
	unsigned int tx_depth;	/* -t */
	unsigned int rx_depth;	/* -r */
	unsigned int inline_size; /* -I */
	bool inline_set;
	bool mcg;		/* -g / --mcg */
	struct in_addr mcg_addr; /* -M / --mcg=ADDR */
	bool cpu_freq_f;	/* -F */
	bool report_gbits;	/* --report_gbits */
	bool no_peak;		/* -N */
	bool histogram;		/* -H: every latency sample */
	const char *provider;	/* --provider; NULL = qpsock's default */
	const char *dev;	/* --dev */
	int priority;		/* --priority; -1 = not set */
	unsigned int threads;	/* --threads */
	bool json;		/* --json */
	uint32_t transport;	/* -c: QPS_TRANSPORT_RAW or _UD */
};

/* perf_opts.c */
/* "RAW" or "UD", as the header and the JSON lines name -c. */
const char *perf_conn_name(uint32_t transport);
void perf_usage(FILE *f, enum perf_test test, const char *prog);
/* 0 = run, 1 = help printed (exit 0), -EINVAL = bad option (message on
 * @err). Resets getopt itself, so it may be called repeatedly. */
int perf_parse(int argc, char **argv, enum perf_test test,
	       struct perf_opts *o, FILE *err);

/* perf_stats.c: timestamps are nanoseconds (CLOCK_MONOTONIC). */
struct perf_bw_result {
	uint64_t size;
	uint64_t iters;
	double bw_peak;		/* MB/sec (2^20) or Gb/sec (1.25e8 B) */
	double bw_avg;
	double msg_rate;	/* Mpps */
};

struct perf_lat_result {
	uint64_t size;
	uint64_t iters;
	double t_min, t_max, t_typical, t_avg, t_stdev, p99, p999; /* usec */
};

struct perf_lat_dur_result {
	uint64_t size;
	uint64_t iters;
	double t_avg;		/* usec, half round trip */
	double tps;		/* round trips per second */
};

uint64_t perf_now_ns(void);
/*
 * perftest's print_report_bw: @n messages; tposted[i] valid where i is a
 * multiple of @post_list, tcompleted[j] where (j + 1) is a multiple of
 * @cq_mod and at n - 1. Peak = best per-message time over those windows
 * (0 when @no_peak); average and rate from tposted[0] to tcompleted[n-1].
 */
int perf_bw_compute(const uint64_t *tposted, const uint64_t *tcompleted,
		    uint64_t n, unsigned int post_list, unsigned int cq_mod,
		    uint64_t size, bool no_peak, bool gbits,
		    struct perf_bw_result *r);
/* Average and rate of @n messages of @size in @ns nanoseconds. */
int perf_bw_from_span(uint64_t n, uint64_t size, uint64_t ns, bool gbits,
		      struct perf_bw_result *r);
/*
 * perftest's print_report_lat: tposted[] holds @iters ping-pong send
 * times; iters - 1 round trips, halved, sorted, the 2 largest dropped;
 * median as t_typical; 99% / 99.9% at ceil(p * kept). @scratch holds
 * iters - 1 values. t_stdev is the true standard deviation (perftest
 * truncates each deviation to an int, which reads 0 below 1 usec).
 */
int perf_lat_compute(const uint64_t *tposted, uint64_t iters, uint64_t size,
		     uint64_t *scratch, struct perf_lat_result *r);
int perf_lat_dur_compute(uint64_t iters, uint64_t size, uint64_t ns,
			 struct perf_lat_dur_result *r);
/* -H: the @kept sorted round trips of perf_lat_compute, as half trips. */
void perf_print_lat_samples(FILE *f, const uint64_t *sorted, uint64_t kept);
double perf_percentile_sorted(const uint64_t *sorted, uint64_t kept,
			      double p);

void perf_print_line(FILE *f);
void perf_print_bw_head(FILE *f, bool gbits);
void perf_print_bw_row(FILE *f, const struct perf_bw_result *r, bool gbits);
void perf_print_lat_head(FILE *f, bool duration);
void perf_print_lat_row(FILE *f, const struct perf_lat_result *r);
void perf_print_lat_dur_row(FILE *f, const struct perf_lat_dur_result *r);

/* A JSON object built on one line; writes past @cap are cut and flagged. */
struct perf_json {
	char *buf;
	size_t cap;
	size_t len;
	bool first;
	bool overflow;
};

void perf_json_begin(struct perf_json *j, char *buf, size_t cap);
void perf_json_str(struct perf_json *j, const char *key, const char *val);
void perf_json_u64(struct perf_json *j, const char *key, uint64_t val);
void perf_json_dbl(struct perf_json *j, const char *key, double val);
void perf_json_obj(struct perf_json *j, const char *key); /* opens { */
void perf_json_close(struct perf_json *j);		   /* closes } */
int perf_json_end(struct perf_json *j);	/* -ENOSPC on overflow */

/* perf_oob.c: parameters both sides must agree on. */
struct perf_params {
	uint32_t test;
	uint32_t size;		/* 0 with all */
	uint32_t all;
	uint64_t iters;		/* 0 with duration */
	uint32_t duration;
	uint32_t num_qps;
	uint32_t mcg;
	uint32_t mcg_addr;	/* network order */
	char provider[16];
	char dev[PERF_NAME_MAX];
	uint32_t transport;	/* QPS_TRANSPORT_RAW or _UD */
};

/* One data endpoint as the peer must address it; on UD also the
 * receiving QP of its context (perftest exchanges QPN and Q_Key too). */
struct perf_peer_addr {
	uint32_t addr;		/* network order */
	uint16_t port;		/* network order */
	uint8_t mac[6];
	uint32_t qpn;		/* UD only, else 0 */
	uint32_t qkey;
};

struct perf_hello {
	struct perf_params params;
	uint32_t max_payload;
	uint32_t n_addr;
	struct perf_peer_addr addr[PERF_MAX_QPS];
};

#define PERF_HELLO_WIRE_SIZE (8 + 4 + 4 + 4 + 4 + 8 + 4 + 4 + 4 + 4 + 16 + \
			      PERF_NAME_MAX + 4 + 4 + 4 + PERF_MAX_QPS * 20)
#define PERF_REASON_MAX 160

void perf_params_from_opts(const struct perf_opts *o, const char *provider,
			   const char *dev, struct perf_params *p);
/* 0 when @client and @server agree, else -EPROTO and what differs. */
int perf_params_compare(const struct perf_params *client,
			const struct perf_params *server, char *why,
			size_t len);
/* Serialise / parse a hello (network byte order, fixed layout). */
size_t perf_hello_pack(const struct perf_hello *h, uint8_t *buf);
int perf_hello_unpack(const uint8_t *buf, size_t len, struct perf_hello *h);

/* TCP: the server listens on all IPv4 addresses, accepts one client. */
int perf_oob_listen(unsigned int port, int *fd_out);
int perf_oob_accept(int lfd, int *fd_out);
int perf_oob_connect(const char *host, unsigned int port, int *fd_out);
int perf_oob_write(int fd, const void *buf, size_t len);
int perf_oob_read(int fd, void *buf, size_t len);
/* A message may be waiting: 1 yes, 0 no, -errno. */
int perf_oob_ready(int fd);
/*
 * Handshake: the client writes its hello, the server answers with a
 * status, a reason and its own hello. -EPROTO on a parameter mismatch
 * (both sides then print @why and exit non-zero).
 */
int perf_oob_hello_client(int fd, const struct perf_hello *mine,
			  struct perf_hello *theirs, char *why, size_t len);
int perf_oob_hello_server(int fd, const struct perf_hello *mine,
			  struct perf_hello *theirs, char *why, size_t len);
/* Symmetric barrier carrying one 64-bit value each way (client writes
 * first, as perftest's ctx_hand_shake). */
int perf_oob_sync(int fd, bool client, uint64_t mine, uint64_t *theirs);
int perf_oob_put_u64s(int fd, const uint64_t *v, unsigned int n);
int perf_oob_get_u64s(int fd, uint64_t *v, unsigned int n);

/* perf_qps.c: one qpsock context (one QP) and one endpoint per -q. */
struct perf_qp {
	struct qps_ctx *ctx;
	bool ctx_shared;	/* QP 0's context: the device holds one */
	struct qps_ep *ep;
	struct qps_ctx_info info;
	uint32_t mode;		/* qps_ctx_info_ex flags */
	uint32_t rx_queue, rx_queues;
	struct sockaddr_in local;
	struct sockaddr_in peer;
	struct qps_ud_addr ud;	/* UD: where this context receives */
	bool connected;		/* else sends go to @peer with qps_sendto */
};

/* One datagram to the peer: qps_send on a connected endpoint (its cached
 * route), qps_sendto on the multicast client, which stays unconnected so
 * that unicast answers from the server are accepted. */
static inline ssize_t perf_qp_send(struct perf_qp *q, const void *buf,
				   size_t len, int flags)
{
	if (q->connected)
		return qps_send(q->ep, buf, len, flags);
	return qps_sendto(q->ep, buf, len, flags,
			  (const struct sockaddr *)&q->peer, sizeof(q->peer));
}

/* Device and core counters of interest, summed over the contexts. */
struct perf_counters {
	uint64_t tx_packets, rx_packets, tx_errors, rx_errors;
	uint64_t wqes, doorbells, bf_writes, tx_cqes, rx_cqes;
	uint64_t dev_tx_drops, dev_rx_drops, rx_queue_full, rx_no_endpoint;
	uint64_t rx_truncated;
	uint64_t tx_signaled, tx_reaped;	/* completion moderation (-Q) */
};

int perf_qps_open(const struct perf_opts *o, struct perf_qp *qp,
		  unsigned int n);
void perf_qps_close(struct perf_qp *qp, unsigned int n);
int perf_qps_connect(const struct perf_opts *o, struct perf_qp *qp,
		     unsigned int n, const struct perf_hello *peer);
void perf_qps_hello(const struct perf_opts *o, const struct perf_qp *qp,
		    unsigned int n, struct perf_hello *h);
int perf_qps_counters(struct perf_qp *qp, unsigned int n,
		      struct perf_counters *c);
void perf_counters_delta(const struct perf_counters *before,
			 const struct perf_counters *after,
			 struct perf_counters *d);
uint64_t perf_counters_drops(const struct perf_counters *c);
/* tx_signaled / wqes: the CQEs asked for per WQE (0 without WQEs). */
double perf_counters_signaled(const struct perf_counters *c);
void perf_json_counters(struct perf_json *j, const struct perf_counters *c);
/* perftest's test header plus local/remote address lines. */
void perf_print_header(FILE *f, const struct perf_opts *o,
		       const struct perf_qp *qp, unsigned int n,
		       const struct perf_hello *peer);
/* Multicast (-g) needs qpsock's group join API. */
bool perf_mcast_supported(void);

#endif /* QPS_PERF_COMMON_H */
