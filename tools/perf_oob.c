// SPDX-License-Identifier: MIT
/*
 * Out-of-band channel of the perftest-style tools: one TCP connection
 * (default port 18515) on which the client writes first and the server
 * answers, as perftest's ctx_xchg_data_ethernet does. The first exchange
 * carries both sides' test parameters and data addresses; the server
 * refuses a client whose parameters differ, saying which one. On UD the
 * addresses carry each context's QPN and Q_Key, which the peer hands to
 * qps_ud_peer_set (perftest's exchange of QPN and Q_Key). The format
 * is our own (fixed layout, network byte order): qpsock's tools talk to
 * each other, not to perftest.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf_common.h"

#define PERF_MAGIC "QPSPERF1"
#define PERF_VERSION 2		/* 2: transport, UD QPN and Q_Key */
#define PERF_CONNECT_MS 10000

static const char *perf_test_name(uint32_t test)
{
	return test == PERF_TEST_BW ? "send_bw" :
	       test == PERF_TEST_LAT ? "send_lat" : "unknown";
}

void perf_params_from_opts(const struct perf_opts *o, const char *provider,
			   const char *dev, struct perf_params *p)
{
	memset(p, 0, sizeof(*p));
	p->test = (uint32_t)o->test;
	p->all = o->all;
	p->size = o->all ? 0 : o->size;
	p->duration = o->duration;
	p->iters = o->duration ? 0 : o->iters;
	p->num_qps = o->num_qps;
	p->mcg = o->mcg;
	p->mcg_addr = o->mcg ? o->mcg_addr.s_addr : 0;
	snprintf(p->provider, sizeof(p->provider), "%s", provider ? provider : "");
	snprintf(p->dev, sizeof(p->dev), "%s", dev ? dev : "");
	p->transport = o->transport;
}

int perf_params_compare(const struct perf_params *c,
			const struct perf_params *s, char *why, size_t len)
{
#define PERF_DIFF(fmt, ...) do { \
		snprintf(why, len, fmt, __VA_ARGS__); \
		return -EPROTO; \
	} while (0)

	if (c->test != s->test)
		PERF_DIFF("test: client runs %s, server %s",
			  perf_test_name(c->test), perf_test_name(s->test));
	/* A raw frame and a UD message never meet: different QP types. */
	if (c->transport != s->transport)
		PERF_DIFF("-c (connection): client %s, server %s",
			  perf_conn_name(c->transport),
			  perf_conn_name(s->transport));
	if (strcmp(c->provider, s->provider))
		PERF_DIFF("provider: client %s, server %s", c->provider,
			  s->provider);
	/* On emu the wire is the network: different names never meet. */
	if (!strcmp(c->provider, "emu") && strcmp(c->dev, s->dev))
		PERF_DIFF("emu wire (--dev): client %s, server %s", c->dev,
			  s->dev);
	if (c->all != s->all)
		PERF_DIFF("-a (all sizes): client %s, server %s",
			  c->all ? "on" : "off", s->all ? "on" : "off");
	if (c->size != s->size)
		PERF_DIFF("-s (size): client %u, server %u", c->size, s->size);
	if (c->duration != s->duration)
		PERF_DIFF("-D (duration): client %u, server %u", c->duration,
			  s->duration);
	if (c->iters != s->iters)
		PERF_DIFF("-n (iterations): client %llu, server %llu",
			  (unsigned long long)c->iters,
			  (unsigned long long)s->iters);
	if (c->num_qps != s->num_qps)
		PERF_DIFF("-q (QPs): client %u, server %u", c->num_qps,
			  s->num_qps);
	if (c->mcg != s->mcg || c->mcg_addr != s->mcg_addr)
		PERF_DIFF("-g/-M (multicast): client %s, server %s",
			  c->mcg ? "on" : "off", s->mcg ? "on" : "off");
	if (why && len)
		why[0] = '\0';
	return 0;
#undef PERF_DIFF
}

static uint8_t *perf_put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
	return p + 4;
}

static uint8_t *perf_put64(uint8_t *p, uint64_t v)
{
	p = perf_put32(p, (uint32_t)(v >> 32));
	return perf_put32(p, (uint32_t)v);
}

static uint8_t *perf_putb(uint8_t *p, const void *v, size_t n)
{
	memcpy(p, v, n);
	return p + n;
}

static const uint8_t *perf_get32(const uint8_t *p, uint32_t *v)
{
	memcpy(v, p, 4);
	*v = ntohl(*v);
	return p + 4;
}

static const uint8_t *perf_get64(const uint8_t *p, uint64_t *v)
{
	uint32_t hi, lo;

	p = perf_get32(p, &hi);
	p = perf_get32(p, &lo);
	*v = (uint64_t)hi << 32 | lo;
	return p;
}

static const uint8_t *perf_getb(const uint8_t *p, void *v, size_t n)
{
	memcpy(v, p, n);
	return p + n;
}

size_t perf_hello_pack(const struct perf_hello *h, uint8_t *buf)
{
	const struct perf_params *pp = &h->params;
	uint8_t *p = buf;
	unsigned int i;

	memset(buf, 0, PERF_HELLO_WIRE_SIZE);
	p = perf_putb(p, PERF_MAGIC, 8);
	p = perf_put32(p, PERF_VERSION);
	p = perf_put32(p, pp->test);
	p = perf_put32(p, pp->size);
	p = perf_put32(p, pp->all);
	p = perf_put64(p, pp->iters);
	p = perf_put32(p, pp->duration);
	p = perf_put32(p, pp->num_qps);
	p = perf_put32(p, pp->mcg);
	p = perf_putb(p, &pp->mcg_addr, 4);
	p = perf_putb(p, pp->provider, sizeof(pp->provider));
	p = perf_putb(p, pp->dev, sizeof(pp->dev));
	p = perf_put32(p, pp->transport);
	p = perf_put32(p, h->max_payload);
	p = perf_put32(p, h->n_addr);
	for (i = 0; i < PERF_MAX_QPS; i++) {
		p = perf_putb(p, &h->addr[i].addr, 4);
		p = perf_putb(p, &h->addr[i].port, 2);
		p = perf_putb(p, h->addr[i].mac, 6);
		p = perf_put32(p, h->addr[i].qpn);
		p = perf_put32(p, h->addr[i].qkey);
	}
	return (size_t)(p - buf);
}

int perf_hello_unpack(const uint8_t *buf, size_t len, struct perf_hello *h)
{
	struct perf_params *pp = &h->params;
	const uint8_t *p = buf;
	uint32_t version;
	unsigned int i;

	if (len < PERF_HELLO_WIRE_SIZE || memcmp(buf, PERF_MAGIC, 8))
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	p += 8;
	p = perf_get32(p, &version);
	if (version != PERF_VERSION)
		return -EPROTO;
	p = perf_get32(p, &pp->test);
	p = perf_get32(p, &pp->size);
	p = perf_get32(p, &pp->all);
	p = perf_get64(p, &pp->iters);
	p = perf_get32(p, &pp->duration);
	p = perf_get32(p, &pp->num_qps);
	p = perf_get32(p, &pp->mcg);
	p = perf_getb(p, &pp->mcg_addr, 4);
	p = perf_getb(p, pp->provider, sizeof(pp->provider));
	p = perf_getb(p, pp->dev, sizeof(pp->dev));
	p = perf_get32(p, &pp->transport);
	p = perf_get32(p, &h->max_payload);
	p = perf_get32(p, &h->n_addr);
	for (i = 0; i < PERF_MAX_QPS; i++) {
		p = perf_getb(p, &h->addr[i].addr, 4);
		p = perf_getb(p, &h->addr[i].port, 2);
		p = perf_getb(p, h->addr[i].mac, 6);
		p = perf_get32(p, &h->addr[i].qpn);
		p = perf_get32(p, &h->addr[i].qkey);
	}
	/* Names are NUL-terminated whatever the peer sent. */
	pp->provider[sizeof(pp->provider) - 1] = '\0';
	pp->dev[sizeof(pp->dev) - 1] = '\0';
	if (h->n_addr > PERF_MAX_QPS || pp->num_qps > PERF_MAX_QPS ||
	    (pp->transport != QPS_TRANSPORT_RAW &&
	     pp->transport != QPS_TRANSPORT_UD))
		return -EPROTO;
	return 0;
}

int perf_oob_listen(unsigned int port, int *fd_out)
{
	struct sockaddr_in sin;
	int fd, one = 1, ret;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	sin.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(fd, 1) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	*fd_out = fd;
	return 0;
}

static void perf_oob_tune(int fd)
{
	int one = 1;

	/* Barriers are tiny messages: do not let Nagle hold them back. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int perf_oob_accept(int lfd, int *fd_out)
{
	int fd;

	do {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	perf_oob_tune(fd);
	*fd_out = fd;
	return 0;
}

/* connect() bounded by PERF_CONNECT_MS, so a silent host fails in time. */
static int perf_oob_try(const struct addrinfo *ai, int *fd_out)
{
	struct pollfd pfd;
	socklen_t len = sizeof(int);
	int fd, err = 0, ret, fl;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			ret = -errno;
			goto fail;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		do {
			ret = poll(&pfd, 1, PERF_CONNECT_MS);
		} while (ret < 0 && errno == EINTR);
		if (ret == 0) {
			ret = -ETIMEDOUT;
			goto fail;
		}
		if (ret < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					  &len) < 0) {
			ret = -errno;
			goto fail;
		}
		if (err) {
			ret = -err;
			goto fail;
		}
	}
	fcntl(fd, F_SETFL, fl);
	perf_oob_tune(fd);
	*fd_out = fd;
	return 0;
fail:
	close(fd);
	return ret;
}

int perf_oob_connect(const char *host, unsigned int port, int *fd_out)
{
	struct addrinfo hints, *res, *ai;
	char serv[16];
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(serv, sizeof(serv), "%u", port);
	ret = getaddrinfo(host, serv, &hints, &res);
	if (ret)
		return ret == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	ret = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		ret = perf_oob_try(ai, fd_out);
		if (ret == 0)
			break;
	}
	freeaddrinfo(res);
	return ret;
}

int perf_oob_write(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int perf_oob_read(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len) {
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;	/* the peer went away */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int perf_oob_ready(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int ret = poll(&pfd, 1, 0);

	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	return ret > 0;
}

/* Server's answer: status (0 or an errno), a reason, then its hello. */
#define PERF_ANSWER_SIZE (4 + PERF_REASON_MAX + PERF_HELLO_WIRE_SIZE)

int perf_oob_hello_client(int fd, const struct perf_hello *mine,
			  struct perf_hello *theirs, char *why, size_t len)
{
	uint8_t buf[PERF_ANSWER_SIZE];
	uint32_t status;
	int ret;

	perf_hello_pack(mine, buf);
	ret = perf_oob_write(fd, buf, PERF_HELLO_WIRE_SIZE);
	if (ret < 0)
		return ret;
	ret = perf_oob_read(fd, buf, PERF_ANSWER_SIZE);
	if (ret < 0)
		return ret;
	perf_get32(buf, &status);
	buf[4 + PERF_REASON_MAX - 1] = '\0';
	snprintf(why, len, "%s", (const char *)buf + 4);
	if (status)
		return status < 4096 ? -(int)status : -EPROTO;
	ret = perf_hello_unpack(buf + 4 + PERF_REASON_MAX,
				PERF_HELLO_WIRE_SIZE, theirs);
	if (ret < 0)
		snprintf(why, len, "the server's answer is not a qpsock perf hello");
	return ret;
}

int perf_oob_hello_server(int fd, const struct perf_hello *mine,
			  struct perf_hello *theirs, char *why, size_t len)
{
	uint8_t buf[PERF_ANSWER_SIZE];
	int ret, wret;

	ret = perf_oob_read(fd, buf, PERF_HELLO_WIRE_SIZE);
	if (ret < 0)
		return ret;
	ret = perf_hello_unpack(buf, PERF_HELLO_WIRE_SIZE, theirs);
	if (ret < 0)
		snprintf(why, len, "the client is not a qpsock perf tool "
			 "of this version");
	else
		ret = perf_params_compare(&theirs->params, &mine->params, why,
					  len);
	memset(buf, 0, sizeof(buf));
	perf_put32(buf, ret < 0 ? (uint32_t)-ret : 0);
	snprintf((char *)buf + 4, PERF_REASON_MAX, "%s", ret < 0 ? why : "");
	perf_hello_pack(mine, buf + 4 + PERF_REASON_MAX);
	wret = perf_oob_write(fd, buf, PERF_ANSWER_SIZE);
	return ret < 0 ? ret : wret;
}

int perf_oob_put_u64s(int fd, const uint64_t *v, unsigned int n)
{
	uint8_t buf[8 * 64];
	unsigned int i;

	if (n > 64)
		return -EINVAL;
	for (i = 0; i < n; i++)
		perf_put64(buf + 8 * i, v[i]);
	return perf_oob_write(fd, buf, 8 * (size_t)n);
}

int perf_oob_get_u64s(int fd, uint64_t *v, unsigned int n)
{
	uint8_t buf[8 * 64];
	unsigned int i;
	int ret;

	if (n > 64)
		return -EINVAL;
	ret = perf_oob_read(fd, buf, 8 * (size_t)n);
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++)
		perf_get64(buf + 8 * i, &v[i]);
	return 0;
}

int perf_oob_sync(int fd, bool client, uint64_t mine, uint64_t *theirs)
{
	int ret;

	if (client) {
		ret = perf_oob_put_u64s(fd, &mine, 1);
		return ret < 0 ? ret : perf_oob_get_u64s(fd, theirs, 1);
	}
	ret = perf_oob_get_u64s(fd, theirs, 1);
	return ret < 0 ? ret : perf_oob_put_u64s(fd, &mine, 1);
}
