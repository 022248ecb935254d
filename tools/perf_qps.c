// SPDX-License-Identifier: MIT
/*
 * The qpsock side of the perftest-style tools, through the public API
 * only: one context (= one send/receive QP on the device) and one bound
 * datagram endpoint per -q, their counters, and perftest's test header.
 *
 * On emu every context is a port of the shared-memory wire with its own
 * 198.18.0.x address; the TCP handshake runs elsewhere (127.0.0.1 on one
 * host), so each side learns the other's wire addresses from the hello.
 * With -c UD the contexts use the UD transport and the hello also
 * carries each context's QPN and Q_Key (qps_ud_local), which the peer
 * registers with qps_ud_peer_set before it connects: the first datagram
 * needs no QPN learned from the other way. -Q becomes each context's
 * tx_signal (completion moderation) on BW tests.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "perf_common.h"

#define PERF_SNDTIMEO_MS 5000
#define PERF_RESOLVE_MS 5000

/* qps_join() and QPS_IFINDEX came into qpsock.h together (multicast
 * section); a header without them has no group membership. */
#ifdef QPS_IFINDEX
#define PERF_HAVE_JOIN 1
#else
#define PERF_HAVE_JOIN 0
#endif

bool perf_mcast_supported(void)
{
	return PERF_HAVE_JOIN;
}

/* The server receives the group on its bound port (perftest -g: the
 * client sends, the server has joined). */
static int perf_qp_join(const struct perf_opts *o, struct perf_qp *q)
{
#if PERF_HAVE_JOIN
	struct qps_mreq mr;
	int ret;

	memset(&mr, 0, sizeof(mr));
	mr.group = o->mcg_addr;
	ret = qps_join(q->ep, &mr, sizeof(mr));
	if (ret < 0)
		fprintf(stderr, "%s: qps_join(%s): %s\n", o->prog,
			inet_ntoa(o->mcg_addr), strerror(-ret));
	return ret;
#else
	(void)q;
	fprintf(stderr, "%s: multicast is not in this qpsock build\n",
		o->prog);
	return -EOPNOTSUPP;
#endif
}

static void perf_ctx_hint(const struct perf_opts *o, int ret)
{
	const char *prov = o->provider ? o->provider : "default";

	if (ret == -ENOENT)
		fprintf(stderr, "%s: provider '%s' is not available in this "
			"qpsock build (emu is always built; packet, xdp and "
			"verbs where their libraries were found)\n", o->prog,
			prov);
	else if (ret == -ENOSPC)
		fprintf(stderr, "%s: no free port on the device (an emu wire "
			"holds 16 ports; lower -q or use another --dev)\n",
			o->prog);
	else if (ret == -ENODEV)
		fprintf(stderr, "%s: no such device for provider '%s' "
			"(--dev)\n", o->prog, prov);
	else if (ret == -EOPNOTSUPP && o->transport == QPS_TRANSPORT_UD)
		fprintf(stderr, "%s: -c UD needs a provider with UD QPs (emu, "
			"verbs); provider '%s' has none\n", o->prog, prov);
}

/* QP @i binds port -p + @i: on a host netdev every context has the
 * host's address, and a port is held host-wide. An xdp interface holds
 * one context (-EBUSY for a second): its QPs are endpoints of QP 0's. */
static int perf_qp_open(const struct perf_opts *o, struct perf_qp *qp,
			unsigned int i)
{
	struct perf_qp *q = &qp[i];
	struct qps_ctx_attr attr;
	struct qps_ctx_info_ex ix;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int timeo = PERF_SNDTIMEO_MS;
	int ret;

	memset(&attr, 0, sizeof(attr));
	if (o->provider) {
		attr.comp_mask |= QPS_CTX_ATTR_PROVIDER;
		attr.provider = o->provider;
	}
	if (o->dev) {
		attr.comp_mask |= QPS_CTX_ATTR_DEV;
		attr.dev = o->dev;
	}
	/* qpsock needs 2 slots at least; perftest's LAT default is 1. */
	attr.comp_mask |= QPS_CTX_ATTR_TX_DEPTH | QPS_CTX_ATTR_RX_DEPTH;
	attr.tx_depth = o->tx_depth < 2 ? 2 : o->tx_depth;
	attr.rx_depth = o->rx_depth;
	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT;
	attr.transport = o->transport;
	/* perftest's -Q: a signalled WQE every cq_mod (perf_check() keeps
	 * it within -t). Latency sends one message per doorbell, which is
	 * signalled anyway, and has no -Q. */
	if (o->test == PERF_TEST_BW) {
		attr.comp_mask |= QPS_CTX_ATTR_TX_SIGNAL;
		attr.tx_signal = o->cq_mod;
	}
	ret = qps_ctx_create(&attr, &q->ctx);
	if (ret == -EBUSY && i > 0) {
		q->ctx = qp[0].ctx;
		q->ctx_shared = true;
		ret = 0;
	}
	if (ret < 0) {
		fprintf(stderr, "%s: qps_ctx_create(provider %s, dev %s, %s): "
			"%s\n", o->prog, o->provider ? o->provider : "default",
			o->dev ? o->dev : "default",
			perf_conn_name(o->transport), strerror(-ret));
		perf_ctx_hint(o, ret);
		return ret;
	}
	ret = qps_ctx_query_ex(q->ctx, &ix, sizeof(ix));
	if (ret < 0) {
		fprintf(stderr, "%s: qps_ctx_query_ex: %s\n", o->prog,
			strerror(-ret));
		return ret;
	}
	q->info = ix.base;
	q->mode = ix.flags;
	q->rx_queue = ix.rx_queue;
	q->rx_queues = ix.rx_queues;
	if (o->transport == QPS_TRANSPORT_UD) {
		ret = qps_ud_local(q->ctx, &q->ud);
		if (ret < 0) {
			fprintf(stderr, "%s: qps_ud_local: %s\n", o->prog,
				strerror(-ret));
			return ret;
		}
	}
	ret = qps_ep_create(q->ctx, QPS_EP_DGRAM, &q->ep);
	if (ret < 0) {
		fprintf(stderr, "%s: qps_ep_create: %s\n", o->prog,
			strerror(-ret));
		return ret;
	}
	/* A send that cannot get a slot in 5 s fails instead of hanging. */
	ret = qps_setopt(q->ep, QPS_OPT_SNDTIMEO, &timeo, sizeof(timeo));
	if (ret == 0 && o->priority >= 0)
		ret = qps_setopt(q->ep, QPS_OPT_PRIORITY, &o->priority,
				 sizeof(o->priority));
	if (ret < 0) {
		fprintf(stderr, "%s: qps_setopt: %s\n", o->prog,
			strerror(-ret));
		return ret;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	sin.sin_port = htons((uint16_t)(o->port + i));
	ret = qps_bind(q->ep, (struct sockaddr *)&sin, sizeof(sin));
	if (ret == 0)
		ret = qps_getsockname(q->ep, (struct sockaddr *)&sin, &len);
	if (ret < 0) {
		fprintf(stderr, "%s: qps_bind(UDP port %u): %s\n", o->prog,
			o->port + i, strerror(-ret));
		return ret;
	}
	if (sin.sin_addr.s_addr == htonl(INADDR_ANY))
		sin.sin_addr = q->info.addr;
	q->local = sin;
	return o->mcg && !o->server ? perf_qp_join(o, q) : 0;
}

void perf_qps_close(struct perf_qp *qp, unsigned int n)
{
	unsigned int i;

	/* Endpoints first: a shared context goes with QP 0. */
	for (i = 0; i < n; i++)
		if (qp[i].ep)
			qps_ep_close(qp[i].ep);
	for (i = 0; i < n; i++) {
		if (qp[i].ctx && !qp[i].ctx_shared)
			qps_ctx_destroy(qp[i].ctx);
		memset(&qp[i], 0, sizeof(qp[i]));
	}
}

int perf_qps_open(const struct perf_opts *o, struct perf_qp *qp,
		  unsigned int n)
{
	unsigned int i;
	int ret;

	memset(qp, 0, sizeof(*qp) * n);
	for (i = 0; i < n; i++) {
		ret = perf_qp_open(o, qp, i);
		if (ret < 0) {
			perf_qps_close(qp, n);
			return ret;
		}
	}
	return 0;
}

void perf_qps_hello(const struct perf_opts *o, const struct perf_qp *qp,
		    unsigned int n, struct perf_hello *h)
{
	unsigned int i;

	memset(h, 0, sizeof(*h));
	perf_params_from_opts(o, qp[0].info.provider, qp[0].info.dev,
			      &h->params);
	h->max_payload = qp[0].info.max_payload;
	h->n_addr = n;
	for (i = 0; i < n; i++) {
		h->addr[i].addr = qp[i].local.sin_addr.s_addr;
		h->addr[i].port = qp[i].local.sin_port;
		memcpy(h->addr[i].mac, qp[i].info.mac, 6);
		h->addr[i].qpn = qp[i].ud.qpn;
		h->addr[i].qkey = qp[i].ud.qkey;
	}
}

/* UD: the peer's context receives on (address, QPN, Q_Key); tell ours
 * before the first send, as perftest creates its AH from the exchange. */
static int perf_qp_ud_peer(const struct perf_opts *o, struct perf_qp *q,
			   const struct perf_peer_addr *pa)
{
	struct qps_ud_addr ua;
	char ip[INET_ADDRSTRLEN];
	int ret;

	if (!inet_ntop(AF_INET, &pa->addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	if (!pa->qpn || pa->qpn > 0xffffff) {
		fprintf(stderr, "%s: the peer's UD address %s has no valid QPN "
			"(0x%x)\n", o->prog, ip, pa->qpn);
		return -EPROTO;
	}
	memset(&ua, 0, sizeof(ua));
	ua.addr.s_addr = pa->addr;
	ua.qpn = pa->qpn;
	ua.qkey = pa->qkey;
	ret = qps_ud_peer_set(q->ctx, &ua);
	if (ret < 0)
		fprintf(stderr, "%s: qps_ud_peer_set(%s QPN 0x%06x Q_Key "
			"0x%08x): %s\n", o->prog, ip, pa->qpn, pa->qkey,
			strerror(-ret));
	return ret;
}

static void perf_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int perf_qps_connect(const struct perf_opts *o, struct perf_qp *qp,
		     unsigned int n, const struct perf_hello *peer)
{
	char ip[INET_ADDRSTRLEN];
	unsigned int i;
	int ret = 0, waited;

	if (peer->n_addr != n) {
		fprintf(stderr, "%s: the peer has %u data endpoints, we have %u\n",
			o->prog, peer->n_addr, n);
		return -EPROTO;
	}
	for (i = 0; i < n; i++) {
		memset(&qp[i].peer, 0, sizeof(qp[i].peer));
		qp[i].peer.sin_family = AF_INET;
		qp[i].peer.sin_addr.s_addr = peer->addr[i].addr;
		qp[i].peer.sin_port = peer->addr[i].port;
		if (o->transport == QPS_TRANSPORT_UD) {
			ret = perf_qp_ud_peer(o, &qp[i], &peer->addr[i]);
			if (ret < 0)
				return ret;
		}
		/* Multicast: the client sends to the group the server joined;
		 * the server still answers (latency) to the client itself. */
		if (o->mcg && o->server) {
			qp[i].peer.sin_addr = o->mcg_addr;
			continue;
		}
		/* The peer's ports exist before the hello; still, give a
		 * slow neighbour table a moment. */
		for (waited = 0;; waited += 10) {
			ret = qps_connect(qp[i].ep,
					  (struct sockaddr *)&qp[i].peer,
					  sizeof(qp[i].peer));
			if (ret != -EHOSTUNREACH || waited >= PERF_RESOLVE_MS)
				break;
			perf_sleep_ms(10);
		}
		if (ret < 0) {
			if (!inet_ntop(AF_INET, &qp[i].peer.sin_addr, ip,
				       sizeof(ip)))
				snprintf(ip, sizeof(ip), "?");
			fprintf(stderr, "%s: qps_connect(%s:%u): %s%s\n",
				o->prog, ip, ntohs(qp[i].peer.sin_port),
				strerror(-ret), ret == -EHOSTUNREACH ?
				" (is the peer on the same wire / network?)" :
				"");
			return ret;
		}
		qp[i].connected = true;
	}
	return 0;
}

int perf_qps_counters(struct perf_qp *qp, unsigned int n,
		      struct perf_counters *c)
{
	struct qps_stats st;
	unsigned int i;
	int ret;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < n; i++) {
		if (qp[i].ctx_shared)
			continue;
		memset(&st, 0, sizeof(st));
		ret = qps_ctx_stats(qp[i].ctx, &st, sizeof(st));
		if (ret < 0)
			return ret;
		c->tx_packets += st.tx_packets;
		c->rx_packets += st.rx_packets;
		c->tx_errors += st.tx_errors;
		c->rx_errors += st.rx_errors;
		c->wqes += st.wqes;
		c->doorbells += st.doorbells;
		c->bf_writes += st.bf_writes;
		c->tx_cqes += st.tx_cqes;
		c->rx_cqes += st.rx_cqes;
		c->dev_tx_drops += st.dev_tx_drops;
		c->dev_rx_drops += st.dev_rx_drops;
		c->rx_queue_full += st.rx_queue_full;
		c->rx_no_endpoint += st.rx_no_endpoint;
		c->rx_truncated += st.rx_truncated;
		c->tx_signaled += st.tx_signaled;
		c->tx_reaped += st.tx_reaped;
	}
	return 0;
}

void perf_counters_delta(const struct perf_counters *b,
			 const struct perf_counters *a,
			 struct perf_counters *d)
{
	const uint64_t *pb = (const uint64_t *)b, *pa = (const uint64_t *)a;
	uint64_t *pd = (uint64_t *)d;
	size_t i;

	for (i = 0; i < sizeof(*d) / sizeof(uint64_t); i++)
		pd[i] = pa[i] - pb[i];
}

double perf_counters_signaled(const struct perf_counters *c)
{
	return c->wqes ? (double)c->tx_signaled / (double)c->wqes : 0;
}

uint64_t perf_counters_drops(const struct perf_counters *c)
{
	return c->dev_tx_drops + c->dev_rx_drops + c->rx_queue_full +
	       c->rx_no_endpoint;
}

void perf_json_counters(struct perf_json *j, const struct perf_counters *c)
{
	perf_json_obj(j, "counters");
	perf_json_u64(j, "wqes", c->wqes);
	perf_json_u64(j, "doorbells", c->doorbells);
	perf_json_u64(j, "bf_writes", c->bf_writes);
	perf_json_u64(j, "tx_signaled", c->tx_signaled);
	perf_json_u64(j, "tx_reaped", c->tx_reaped);
	perf_json_dbl(j, "signaled_per_wqe", perf_counters_signaled(c));
	perf_json_u64(j, "drops", perf_counters_drops(c));
	perf_json_u64(j, "dev_tx_drops", c->dev_tx_drops);
	perf_json_u64(j, "dev_rx_drops", c->dev_rx_drops);
	perf_json_u64(j, "rx_queue_full", c->rx_queue_full);
	perf_json_u64(j, "rx_no_endpoint", c->rx_no_endpoint);
	perf_json_u64(j, "tx_packets", c->tx_packets);
	perf_json_u64(j, "rx_packets", c->rx_packets);
	perf_json_u64(j, "tx_cqes", c->tx_cqes);
	perf_json_u64(j, "rx_cqes", c->rx_cqes);
	perf_json_u64(j, "tx_errors", c->tx_errors);
	perf_json_u64(j, "rx_errors", c->rx_errors);
	perf_json_close(j);
}

static void perf_print_addr(FILE *f, const char *who, bool ud,
			    const struct perf_peer_addr *a)
{
	char ip[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &a->addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	if (ud)
		fprintf(f, " %s address: IP %s UDP %u QPN 0x%06x Q_Key 0x%08x\n",
			who, ip, ntohs(a->port), a->qpn, a->qkey);
	else
		fprintf(f, " %s address: IP %s UDP %u MAC %02x:%02x:%02x:%02x:%02x:%02x\n",
			who, ip, ntohs(a->port), a->mac[0], a->mac[1],
			a->mac[2], a->mac[3], a->mac[4], a->mac[5]);
}

/* How the first context drives its device, in the words of the provider's
 * own log line: a run's numbers mean little without it. */
static void perf_print_mode(FILE *f, const struct perf_qp *q)
{
	uint32_t m = q->mode;

	fprintf(f, " Device mode     :");
	if (!strcmp(q->info.provider, "xdp"))
		fprintf(f, " %s XDP, %s, %s,",
			m & QPS_CTX_INFO_F_XDP_NATIVE ? "native" :
							"generic (SKB)",
			m & QPS_CTX_INFO_F_XDP_ZEROCOPY ? "zero-copy" :
							  "copy mode",
			m & QPS_CTX_INFO_F_XDP_BUSY_POLL ?
				"preferred busy polling" : "no busy polling");
	if (m & QPS_CTX_INFO_F_PACKET_RING)
		fprintf(f, " TPACKET rings,");
	fprintf(f, " %s send path%s", m & QPS_CTX_INFO_F_TX_DIRECT ?
		"direct" : "generic", m & QPS_CTX_INFO_F_BLUEFLAME ?
		" with BlueFlame" : "");
	if (q->rx_queues == 1)
		fprintf(f, ", receive queue %u", q->rx_queue);
	else if (q->rx_queues)
		fprintf(f, ", receive queues %u-%u", q->rx_queue,
			q->rx_queue + q->rx_queues - 1);
	fprintf(f, "\n");
}

void perf_print_header(FILE *f, const struct perf_opts *o,
		       const struct perf_qp *qp, unsigned int n,
		       const struct perf_hello *peer)
{
	const struct qps_ctx_info *in = &qp[0].info;
	bool bw = o->test == PERF_TEST_BW, client = o->server != NULL;
	bool ud = o->transport == QPS_TRANSPORT_UD;
	struct perf_hello mine;
	unsigned int i;

	perf_print_line(f);
	fprintf(f, "                    Send %s%s%s Test\n",
		bw && o->post_list > 1 ? "Post List " : "",
		bw ? "BW" : "Latency", o->mcg ? " Multicast" : "");
	fprintf(f, " Dual-port       : OFF\t\tDevice         : %s\n", in->dev);
	fprintf(f, " Number of qps   : %u\t\tTransport type : qpsock %s\n", n,
		in->provider);
	fprintf(f, " Connection type : %s\t\tUsing SRQ      : OFF\n",
		perf_conn_name(o->transport));
	perf_print_mode(f, &qp[0]);
	if (!bw || client)
		fprintf(f, " TX depth        : %u\n", in->tx_depth);
	if (bw && o->post_list > 1)
		fprintf(f, " Post List       : %u\n", o->post_list);
	if (!bw || !client)
		fprintf(f, " RX depth        : %u\n", in->rx_depth);
	if (bw)
		fprintf(f, " CQ Moderation   : %u\n", o->cq_mod);
	/* UD: perftest prints the path MTU the message must fit. */
	if (ud)
		fprintf(f, " Mtu             : %u[B] (UD; Ethernet %u[B])\n",
			in->max_payload + QPS_UD_HDR_LEN, in->mtu);
	else
		fprintf(f, " Mtu             : %u[B]\n", in->mtu);
	fprintf(f, " Link type       : Ethernet\n");
	fprintf(f, " Max inline data : %u[B]%s\n", o->inline_size,
		o->inline_set ? " (recorded: qpsock inlines what fits)" : "");
	fprintf(f, " Data ex. method : Ethernet\n");
	fprintf(f, " Max payload     : %u[B]\t\tThreads        : %u\n",
		in->max_payload, o->threads);
	if (o->priority >= 0)
		fprintf(f, " Priority        : %d\n", o->priority);
	if (o->mcg)
		fprintf(f, " Multicast group : %s\n", inet_ntoa(o->mcg_addr));
	perf_print_line(f);
	perf_qps_hello(o, qp, n, &mine);
	for (i = 0; i < n; i++) {
		perf_print_addr(f, "local", ud, &mine.addr[i]);
		if (peer && i < peer->n_addr)
			perf_print_addr(f, "remote", ud, &peer->addr[i]);
	}
}
