/* SPDX-License-Identifier: MIT */
/* Setup and teardown shared by qps_send_bw and qps_send_lat. */
#ifndef QPS_PERF_SESSION_H
#define QPS_PERF_SESSION_H

#include "perf_common.h"

#define PERF_MAX_SIZES 24

struct perf_session {
	struct perf_opts o;
	struct perf_qp qp[PERF_MAX_QPS];
	bool open;
	int lfd;		/* server: listening socket */
	int fd;			/* the TCP connection to the peer */
	struct perf_hello mine;
	struct perf_hello peer;
	uint32_t sizes[PERF_MAX_SIZES];
	unsigned int n_sizes;
};

/* 0: run the test; 1: --help was printed (exit 0); -errno: failed, a
 * message was printed (exit non-zero). */
int perf_session_start(struct perf_session *s, int argc, char **argv,
		       enum perf_test test);
void perf_session_end(struct perf_session *s);
/*
 * A whole tool run: start the session, print the table head (@head), run
 * @run_size for each message size until one fails, end the session.
 * Returns the process exit status.
 */
int perf_session_main(int argc, char **argv, enum perf_test test,
		      void (*head)(const struct perf_session *s),
		      int (*run_size)(struct perf_session *s, uint32_t size));
void perf_session_json_head(const struct perf_session *s, struct perf_json *j,
			    char *buf, size_t cap);
int perf_session_json_print(struct perf_json *j);

#endif /* QPS_PERF_SESSION_H */
