// SPDX-License-Identifier: MIT
/*
 * What qps_send_bw and qps_send_lat do before and after their test loop,
 * in perftest's order: parse, listen (server) / connect (client) on the
 * TCP port, open the data endpoints, exchange and check parameters,
 * connect the endpoints to the peer's wire addresses, print the header,
 * pick the sizes; at the end close everything.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "perf_session.h"

static int perf_session_oob(struct perf_session *s)
{
	const struct perf_opts *o = &s->o;
	int lfd, ret;

	if (o->server) {
		ret = perf_oob_connect(o->server, o->port, &s->fd);
		if (ret < 0)
			fprintf(stderr, "%s: cannot connect to %s:%u: %s "
				"(is the server running, with the same -p?)\n",
				o->prog, o->server, o->port, strerror(-ret));
		return ret;
	}
	lfd = s->lfd;
	printf("\n************************************\n"
	       "* Waiting for client to connect... *\n"
	       "************************************\n");
	fflush(stdout);
	ret = perf_oob_accept(lfd, &s->fd);
	if (ret < 0)
		fprintf(stderr, "%s: accept on TCP port %u: %s\n", o->prog,
			o->port, strerror(-ret));
	return ret;
}

static int perf_session_hello(struct perf_session *s)
{
	const struct perf_opts *o = &s->o;
	char why[PERF_REASON_MAX];
	int ret;

	perf_qps_hello(o, s->qp, o->num_qps, &s->mine);
	why[0] = '\0';
	if (o->server)
		ret = perf_oob_hello_client(s->fd, &s->mine, &s->peer, why,
					    sizeof(why));
	else
		ret = perf_oob_hello_server(s->fd, &s->mine, &s->peer, why,
					    sizeof(why));
	if (ret == -EPROTO || (ret < 0 && why[0]))
		fprintf(stderr, "%s: parameter mismatch between client and "
			"server: %s\n", o->prog, why);
	else if (ret < 0)
		fprintf(stderr, "%s: handshake with the %s: %s\n", o->prog,
			o->server ? "server" : "client", strerror(-ret));
	return ret;
}

/* perftest's UD rule (check_mtu): messages up to the path MTU, -a and
 * the default size lowered to it, an explicit -s above it refused; here
 * the largest datagram both ports carry: the Ethernet MTU less the
 * IPv4 and UDP headers (RAW), the UD MTU less qpsock's UD header (UD). */
static int perf_session_sizes(struct perf_session *s)
{
	const struct perf_opts *o = &s->o;
	uint32_t max = s->mine.max_payload, sz;
	bool ud = o->transport == QPS_TRANSPORT_UD;

	if (s->peer.max_payload < max)
		max = s->peer.max_payload;
	s->n_sizes = 0;
	if (o->all) {
		for (sz = 2; sz <= max && sz <= PERF_MAX_SIZE; sz *= 2)
			s->sizes[s->n_sizes++] = sz;
		return 0;
	}
	sz = o->size;
	if (sz > max) {
		if (o->size_set && ud) {
			fprintf(stderr, "%s: -s %u: max message size in UD is "
				"the MTU: %u bytes (UD MTU %u less qpsock's "
				"%u-byte UD header)\n", o->prog, sz, max,
				max + QPS_UD_HDR_LEN, QPS_UD_HDR_LEN);
			return -EMSGSIZE;
		}
		if (o->size_set) {
			fprintf(stderr, "%s: -s %u exceeds the largest datagram "
				"the ports carry (%u bytes, MTU %u)\n", o->prog,
				sz, max, s->qp[0].info.mtu);
			return -EMSGSIZE;
		}
		printf(" Max msg size for datagrams is the port's payload: "
		       "using %u[B] (perftest default %u)\n", max, sz);
		sz = max;
	}
	s->sizes[s->n_sizes++] = sz;
	return 0;
}

int perf_session_start(struct perf_session *s, int argc, char **argv,
		       enum perf_test test)
{
	struct perf_opts *o = &s->o;
	int ret;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->lfd = -1;
	ret = perf_parse(argc, argv, test, o, stderr);
	if (ret == 1)
		return 1;
	if (ret < 0) {
		fprintf(stderr, "%s: see --help\n", o->prog);
		return ret;
	}
	if (o->mcg && !perf_mcast_supported()) {
		fprintf(stderr, "%s: -g/--mcg: multicast needs qpsock's group "
			"join API (qps_join), which this build does not have\n",
			o->prog);
		return -EOPNOTSUPP;
	}
	/* Line-buffered even into a pipe: server and client logs interleave. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* A busy port is reported before anything else is set up. */
	if (!o->server) {
		ret = perf_oob_listen(o->port, &s->lfd);
		if (ret < 0) {
			fprintf(stderr, "%s: cannot listen on TCP port %u: %s%s\n",
				o->prog, o->port, strerror(-ret),
				ret == -EADDRINUSE ? " (another server? pick "
				"another port with -p)" : "");
			return ret;
		}
	}
	ret = perf_qps_open(o, s->qp, o->num_qps);
	if (ret < 0)
		goto fail;
	s->open = true;
	ret = perf_session_oob(s);
	if (ret == 0)
		ret = perf_session_hello(s);
	if (ret == 0)
		ret = perf_qps_connect(o, s->qp, o->num_qps, &s->peer);
	if (ret == 0)
		ret = perf_session_sizes(s);
	if (ret < 0)
		goto fail;
	perf_print_header(stdout, o, s->qp, o->num_qps, &s->peer);
	return 0;
fail:
	perf_session_end(s);
	return ret;
}

void perf_session_end(struct perf_session *s)
{
	if (s->open)
		perf_qps_close(s->qp, s->o.num_qps);
	s->open = false;
	if (s->fd >= 0)
		close(s->fd);
	if (s->lfd >= 0)
		close(s->lfd);
	s->fd = s->lfd = -1;
}

int perf_session_main(int argc, char **argv, enum perf_test test,
		      void (*head)(const struct perf_session *s),
		      int (*run_size)(struct perf_session *s, uint32_t size))
{
	struct perf_session s;
	unsigned int k;
	int ret;

	ret = perf_session_start(&s, argc, argv, test);
	if (ret == 1)
		return 0;
	if (ret < 0)
		return 1;
	perf_print_line(stdout);
	head(&s);
	for (k = 0; k < s.n_sizes && ret == 0; k++)
		ret = run_size(&s, s.sizes[k]);
	perf_print_line(stdout);
	if (ret < 0)
		fprintf(stderr, "%s: test failed: %s\n", s.o.prog,
			strerror(-ret));
	perf_session_end(&s);
	return ret < 0 ? 1 : 0;
}

/* The JSON fields every result line starts with. */
void perf_session_json_head(const struct perf_session *s, struct perf_json *j,
			    char *buf, size_t cap)
{
	const struct perf_opts *o = &s->o;

	perf_json_begin(j, buf, cap);
	perf_json_str(j, "tool", o->prog);
	perf_json_str(j, "role", o->server ? "client" : "server");
	perf_json_str(j, "provider", s->qp[0].info.provider);
	perf_json_str(j, "dev", s->qp[0].info.dev);
	perf_json_str(j, "connection", perf_conn_name(o->transport));
	perf_json_u64(j, "qps", o->num_qps);
	perf_json_u64(j, "threads", o->threads);
	perf_json_u64(j, "post_list", o->post_list);
	perf_json_u64(j, "cq_mod", o->cq_mod);
	perf_json_u64(j, "duration", o->duration);
}

int perf_session_json_print(struct perf_json *j)
{
	int ret = perf_json_end(j);

	if (ret < 0)
		return ret;
	printf("%s\n", j->buf);
	return 0;
}
