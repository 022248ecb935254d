/* SPDX-License-Identifier: MIT */
/*
 * qps_soak: shared definitions of the parent (qps_soak.c: options, fork,
 * reconciliation, report), the workers (qps_soak_worker.c) and the flow
 * table and datagram format (qps_soak_flow.c).
 *
 * Topology, the same in every process (computed from the options, so
 * nothing but results crosses the pipes):
 *
 *   process p has one sending context "u" (address 198.18.0.<100+8p>) and
 *   one receive-only context per multicast group g ("m<g>",
 *   198.18.0.<101+8p+g>). Thread t of process p owns three endpoints of
 *   context u: cn (connected to cp of thread t in process p+1), cp
 *   (connected to cn of thread t in process p-1) and un (unconnected,
 *   bound to port SOAK_PORT_U+t). Group g (239.1.0.<1+g>, port
 *   SOAK_PORT_MC) is joined in every process by one endpoint of context
 *   m<g>, the last group by --fanout endpoints (fan-out inside a context).
 *
 * A flow is (sending endpoint, destination, priority): every flow has one
 * priority, so its order is promised (one band, one send QP at a time).
 */
#ifndef QPS_SOAK_H
#define QPS_SOAK_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <qpsock/qpsock.h>

#define SOAK_MAX_PROCS 4
#define SOAK_MAX_THREADS 4
#define SOAK_MAX_GROUPS 3
#define SOAK_MAX_FANOUT 3
#define SOAK_MAX_CTX (1 + SOAK_MAX_GROUPS)	/* per process */
#define SOAK_MAX_FLOWS 512
/* Receiving endpoints per process: cn, cp, un per thread, then the
 * group members. */
#define SOAK_MAX_RXEP (3 * SOAK_MAX_THREADS + SOAK_MAX_GROUPS * SOAK_MAX_FANOUT)
#define SOAK_PORT_C 5000
#define SOAK_PORT_U 6000
#define SOAK_PORT_MC 7000
#define SOAK_MAX_LEN 1400	/* payload after the header */

struct soak_cfg {
	unsigned int procs;
	unsigned int threads;
	unsigned int groups;
	unsigned int fanout;
	unsigned int seconds;
	unsigned int warmup;	/* seconds before RSS is taken as the base */
	unsigned int rate;	/* datagrams/s per thread; 0 = unpaced */
	unsigned int max_len;	/* payload bytes after the header, max */
	unsigned int rx_depth;
	unsigned int rcvbuf;
	unsigned int rss_limit_kb;
	uint64_t seed;
	unsigned int inject;	/* enum soak_inject: self-test of the checks */
	bool json;
	char wire[32];
};

/* Faults the worker of process 0 injects once, so that a run can show
 * that each check fails when it should (ctest runs them with WILL_FAIL). */
enum soak_inject {
	SOAK_INJ_NONE,
	SOAK_INJ_LOSS,		/* count a datagram sent that never was */
	SOAK_INJ_DUP,		/* send one datagram twice */
	SOAK_INJ_REORDER,	/* send seq n+1 before seq n */
	SOAK_INJ_CORRUPT,	/* flip a payload byte after the checksum */
};

/* Endpoint kinds of a thread, in rx endpoint index order. */
enum soak_ep_kind { SOAK_EP_CN, SOAK_EP_CP, SOAK_EP_UN, SOAK_EP_KINDS };

struct soak_flow {
	uint16_t src_p, src_t;
	uint8_t src_kind;	/* enum soak_ep_kind */
	bool mcast;
	uint16_t dst_p;		/* unicast */
	uint16_t group;		/* multicast */
	uint8_t prio;
	bool dflt;		/* the sending endpoint's QPS_OPT_PRIORITY */
	struct sockaddr_in dst;
};

struct soak_topo {
	unsigned int nflows;
	struct soak_flow flow[SOAK_MAX_FLOWS];
	unsigned int nrxep;	/* receiving endpoints per process */
};

/* The datagram: this header, then len pseudo-random bytes derived from
 * (flow, seq), so a retried send carries exactly the same bytes. */
#define SOAK_MAGIC 0x51534f4bu
struct soak_hdr {
	uint32_t magic;
	uint32_t flow;
	uint64_t seq;
	uint32_t len;
	uint32_t csum;	/* FNV-1a over flow, seq, len and the payload */
};

/* What a receiving endpoint saw of one flow. A window of recent sequence
 * numbers tells a duplicate from a late (reordered) datagram. */
#define SOAK_WIN 1024u
struct soak_rx {
	uint64_t next;		/* highest seen + 1 */
	uint64_t recv;		/* distinct datagrams */
	uint64_t dup;
	uint64_t late;		/* below next, not seen before: reordered */
	uint64_t old;		/* below the window: reordered or duplicate */
	uint64_t win[SOAK_WIN / 64];
};

/* The parts of struct soak_rx that cross the pipe. */
struct soak_rx_sum {
	uint64_t recv, dup, late, old;
};

struct soak_ctx_res {
	struct qps_stats st;
	uint64_t dev_rx_no_rule, dev_rx_no_buf, dev_rx_cq_overrun;
	unsigned int k;		/* endpoints that receive each frame */
};

/* One worker's results, written to the parent in one piece. */
struct soak_wres {
	int32_t p;
	int32_t status;		/* 0, or the -errno that stopped the worker */
	char why[96];
	uint64_t sent[SOAK_MAX_FLOWS];
	uint64_t eagain;	/* non-blocking sends refused: not sent */
	uint64_t timeouts;	/* blocking sends past SNDTIMEO: not sent */
	uint64_t send_errors;	/* any other -errno from a send call */
	uint64_t recv_errors;	/* unexpected -errno from a receive call */
	uint64_t mmsg_calls, more_runs, single_sends;
	uint64_t blocking_recvs;
	struct soak_rx_sum rx[SOAK_MAX_RXEP][SOAK_MAX_FLOWS];
	uint64_t corrupt[SOAK_MAX_RXEP];	/* failed magic, length, csum */
	uint64_t alien[SOAK_MAX_RXEP];	/* flow not expected here */
	unsigned int nctx;
	struct soak_ctx_res ctx[SOAK_MAX_CTX];
	uint64_t rss_base_kb, rss_max_kb, rss_end_kb, rss_samples;
	/* Resident minus shared (the emu wire is shared memory, touched as
	 * peers' buffers get used): private memory, where a leak shows. */
	uint64_t anon_base_kb, anon_max_kb;
	/* RSS at the end of each quarter of the time after the warm-up. */
	uint64_t rss_quarter_kb[4];
};

/* qps_soak_flow.c */
void soak_topo_build(const struct soak_cfg *cfg, struct soak_topo *topo);
struct in_addr soak_ctx_addr(unsigned int p, unsigned int c);
struct in_addr soak_group(unsigned int g);
unsigned int soak_group_k(const struct soak_cfg *cfg, unsigned int g);
/* Receiving endpoint index (in process @p) of kind @kind of thread @t, and
 * of member @j of group @g. */
unsigned int soak_rxep_thread(unsigned int t, unsigned int kind);
unsigned int soak_rxep_group(const struct soak_cfg *cfg, unsigned int g,
			     unsigned int j);
/* Whether endpoint @e of process @p receives flow @f. */
bool soak_expects(const struct soak_cfg *cfg, const struct soak_topo *topo,
		  unsigned int f, unsigned int p, unsigned int e);
/* Build datagram (@flow, @seq) in @buf (room for sizeof(struct soak_hdr)
 * + cfg->max_len); returns its length. */
size_t soak_build(const struct soak_cfg *cfg, uint8_t *buf, uint32_t flow,
		  uint64_t seq);
/* Check a received datagram; returns its flow id, or -1 if corrupt. */
int soak_check(const uint8_t *buf, size_t len, uint64_t *seq);
void soak_rx_note(struct soak_rx *rx, uint64_t seq);
uint64_t soak_rand(uint64_t *state);

/* qps_soak_worker.c: runs process @p; never returns. */
_Noreturn void soak_worker(const struct soak_cfg *cfg,
			   const struct soak_topo *topo, unsigned int p,
			   int cmd_fd, int res_fd);

/* qps_soak_report.c: reconcile, print (human or JSON); true = pass. */
bool soak_report(const struct soak_cfg *cfg, const struct soak_topo *topo,
		 const struct soak_wres *const *w);

/* Pipe messages: worker -> parent one byte per step; SOAK_MSG_RESULT is
 * followed by struct soak_wres (at the end, or at once on a failure). */
#define SOAK_MSG_READY 'R'
#define SOAK_MSG_SENT 'S'
#define SOAK_MSG_RESULT 'X'
#define SOAK_CMD_GO 'G'
#define SOAK_CMD_DRAIN 'D'

int soak_write_all(int fd, const void *buf, size_t len);
int soak_read_all(int fd, void *buf, size_t len);

#endif
