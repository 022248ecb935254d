// SPDX-License-Identifier: MIT
/*
 * qps_soak: reconciliation of the workers' results and the report.
 *
 * The counters are per context, not per flow, so the ledger is kept per
 * receiving context R: the datagrams its endpoints should have received
 * and did not (sent - received, summed over the (flow, endpoint) pairs of
 * R) must equal what R counted as dropped:
 *
 *   rx_queue_full                       (one endpoint's copy)
 * + k * (dev_rx_drops + rx_no_endpoint + rx_errors + rx_bad[1..])
 *                                       (whole frames; k endpoints of R
 *                                        receive each frame: 1, or the
 *                                        fan-out of the group)
 *
 * Each process's send-side drops (tx_errors, dev_tx_drops) lose a frame
 * before any receiver; they must be 0 on emu (every destination exists),
 * otherwise the per-context ledgers cannot be balanced exactly and the run
 * fails as unaccounted. Sends refused with -EAGAIN (band or queue full)
 * or a timeout were never accepted, so they are not "sent".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qps_soak.h"

struct soak_ledger {
	uint64_t expected, received, missing, counted;
	int64_t residual;
};

struct soak_tot {
	uint64_t sent, expected, received, missing, counted;
	uint64_t dup, late, old, corrupt, alien, phantom;
	uint64_t eagain, timeouts, send_errors, recv_errors;
	uint64_t singles, more_runs, mmsg_calls, blocking_recvs;
	uint64_t q_full, dev_rx_drops, no_buf, cq_overrun, no_rule;
	uint64_t no_ep, rx_errors, rx_bad, truncated;
	uint64_t tx_errors, dev_tx_drops, band_drops, band_left;
	uint64_t tx_mismatch, unaccounted, rss_over;
	uint64_t flows_uc_conn, flows_uc, flows_mc;
};

static uint64_t frame_drops(const struct qps_stats *st)
{
	uint64_t n = st->dev_rx_drops + st->rx_no_endpoint + st->rx_errors;
	unsigned int i;

	for (i = 1; i < QPS_RX_REASON_MAX; i++)
		n += st->rx_bad[i];
	return n;
}

/* Which context of a process holds receiving endpoint @e. */
static unsigned int ctx_of(const struct soak_cfg *cfg, unsigned int e)
{
	unsigned int g;

	for (g = 0; g < cfg->groups; g++)
		if (e >= soak_rxep_group(cfg, g, 0) &&
		    e < soak_rxep_group(cfg, g + 1, 0))
			return 1 + g;
	return 0;
}

static void ledger(const struct soak_cfg *cfg, const struct soak_topo *topo,
		   const struct soak_wres *w, const uint64_t *sent,
		   struct soak_ledger *lg, struct soak_tot *tot)
{
	unsigned int p = (unsigned int)w->p, e, f, c;

	for (c = 0; c < w->nctx; c++)
		memset(&lg[c], 0, sizeof(lg[c]));
	for (e = 0; e < topo->nrxep; e++) {
		c = ctx_of(cfg, e);
		tot->corrupt += w->corrupt[e];
		tot->alien += w->alien[e];
		for (f = 0; f < topo->nflows; f++) {
			const struct soak_rx_sum *r = &w->rx[e][f];

			tot->dup += r->dup;
			tot->late += r->late;
			tot->old += r->old;
			if (!soak_expects(cfg, topo, f, p, e))
				continue;
			lg[c].expected += sent[f];
			lg[c].received += r->recv;
			if (r->recv > sent[f])
				tot->phantom += r->recv - sent[f];
			else
				lg[c].missing += sent[f] - r->recv;
		}
	}
	for (c = 0; c < w->nctx; c++) {
		const struct soak_ctx_res *cr = &w->ctx[c];
		const struct qps_stats *st = &cr->st;

		lg[c].counted = st->rx_queue_full + cr->k * frame_drops(st);
		lg[c].residual = (int64_t)lg[c].missing -
				 (int64_t)lg[c].counted;
		tot->expected += lg[c].expected;
		tot->received += lg[c].received;
		tot->missing += lg[c].missing;
		tot->counted += lg[c].counted;
		tot->q_full += st->rx_queue_full;
		tot->dev_rx_drops += st->dev_rx_drops;
		tot->no_buf += cr->dev_rx_no_buf;
		tot->cq_overrun += cr->dev_rx_cq_overrun;
		tot->no_rule += cr->dev_rx_no_rule;
		tot->no_ep += st->rx_no_endpoint;
		tot->rx_errors += st->rx_errors;
		tot->rx_bad += frame_drops(st) - st->dev_rx_drops -
			       st->rx_no_endpoint - st->rx_errors;
		tot->truncated += st->rx_truncated;
		tot->tx_errors += st->tx_errors;
		tot->dev_tx_drops += st->dev_tx_drops;
		for (f = 0; f < 3; f++) {
			tot->band_drops += st->tx_band_drops[f];
			tot->band_left += st->tx_band_depth[f];
		}
		tot->unaccounted += (uint64_t)llabs(lg[c].residual);
	}
}

static void json_ctx(const struct soak_wres *w, const struct soak_ledger *lg,
		     unsigned int c, bool last)
{
	const struct soak_ctx_res *cr = &w->ctx[c];

	printf("      {\"proc\": %d, \"ctx\": \"%s%u\", \"k\": %u, "
	       "\"expected\": %llu, \"received\": %llu, \"missing\": %llu, "
	       "\"counted\": %llu, \"residual\": %lld, "
	       "\"rx_queue_full\": %llu, \"dev_rx_drops\": %llu, "
	       "\"rx_no_buf\": %llu, \"rx_cq_overrun\": %llu, "
	       "\"rx_no_endpoint\": %llu}%s\n",
	       w->p, c ? "m" : "u", c ? c - 1 : 0, cr->k,
	       (unsigned long long)lg->expected,
	       (unsigned long long)lg->received,
	       (unsigned long long)lg->missing,
	       (unsigned long long)lg->counted, (long long)lg->residual,
	       (unsigned long long)cr->st.rx_queue_full,
	       (unsigned long long)cr->st.dev_rx_drops,
	       (unsigned long long)cr->dev_rx_no_buf,
	       (unsigned long long)cr->dev_rx_cq_overrun,
	       (unsigned long long)cr->st.rx_no_endpoint, last ? "" : ",");
}

#define U(x) ((unsigned long long)(x))

static void print_json(const struct soak_cfg *cfg, const struct soak_tot *t,
		       const struct soak_wres *const *w,
		       struct soak_ledger lg[][SOAK_MAX_CTX], bool pass)
{
	unsigned int p, c;

	printf("{\n  \"tool\": \"qps_soak\",\n");
	printf("  \"config\": {\"procs\": %u, \"threads\": %u, \"groups\": %u, "
	       "\"fanout\": %u, \"seconds\": %u, \"rate\": %u, "
	       "\"max_len\": %u, \"rx_depth\": %u, \"rcvbuf\": %u},\n",
	       cfg->procs, cfg->threads, cfg->groups, cfg->fanout,
	       cfg->seconds, cfg->rate, cfg->max_len, cfg->rx_depth,
	       cfg->rcvbuf);
	printf("  \"flows\": {\"connected\": %llu, \"unconnected\": %llu, "
	       "\"multicast\": %llu},\n", U(t->flows_uc_conn), U(t->flows_uc),
	       U(t->flows_mc));
	printf("  \"sent\": %llu, \"single_sends\": %llu, \"more_runs\": %llu, "
	       "\"sendmmsg_calls\": %llu, \"refused_eagain\": %llu, "
	       "\"refused_timeout\": %llu, \"send_errors\": %llu,\n",
	       U(t->sent), U(t->singles), U(t->more_runs), U(t->mmsg_calls),
	       U(t->eagain), U(t->timeouts), U(t->send_errors));
	printf("  \"expected\": %llu, \"received\": %llu, \"missing\": %llu, "
	       "\"counted_drops\": %llu, \"unaccounted\": %llu,\n",
	       U(t->expected), U(t->received), U(t->missing), U(t->counted),
	       U(t->unaccounted));
	printf("  \"drops\": {\"rx_queue_full\": %llu, \"dev_rx_drops\": %llu, "
	       "\"rx_no_buf\": %llu, \"rx_cq_overrun\": %llu, "
	       "\"rx_no_rule\": %llu, \"rx_no_endpoint\": %llu, "
	       "\"rx_errors\": %llu, \"rx_bad\": %llu, \"tx_errors\": %llu, "
	       "\"dev_tx_drops\": %llu, \"tx_band_drops\": %llu},\n",
	       U(t->q_full), U(t->dev_rx_drops), U(t->no_buf),
	       U(t->cq_overrun), U(t->no_rule), U(t->no_ep), U(t->rx_errors),
	       U(t->rx_bad), U(t->tx_errors), U(t->dev_tx_drops),
	       U(t->band_drops));
	printf("  \"duplicates\": %llu, \"reordered\": %llu, "
	       "\"beyond_window\": %llu, \"corrupt\": %llu, \"alien\": %llu, "
	       "\"phantom\": %llu, \"recv_errors\": %llu, "
	       "\"band_left\": %llu, \"tx_packets_mismatch\": %llu,\n",
	       U(t->dup), U(t->late), U(t->old), U(t->corrupt), U(t->alien),
	       U(t->phantom), U(t->recv_errors), U(t->band_left),
	       U(t->tx_mismatch));
	printf("  \"contexts\": [\n");
	for (p = 0; p < cfg->procs; p++)
		for (c = 0; c < w[p]->nctx; c++)
			json_ctx(w[p], &lg[p][c], c,
				 p + 1 == cfg->procs && c + 1 == w[p]->nctx);
	printf("  ],\n  \"rss_kb\": [\n");
	for (p = 0; p < cfg->procs; p++)
		printf("      {\"proc\": %u, \"base\": %llu, \"max\": %llu, "
		       "\"end\": %llu, \"growth\": %lld, "
		       "\"quarters\": [%llu, %llu, %llu, %llu], "
		       "\"anon_base\": %llu, \"anon_max\": %llu, "
		       "\"samples\": %llu}%s\n",
		       p, U(w[p]->rss_base_kb), U(w[p]->rss_max_kb),
		       U(w[p]->rss_end_kb),
		       (long long)w[p]->rss_max_kb -
		       (long long)w[p]->rss_base_kb,
		       U(w[p]->rss_quarter_kb[0]), U(w[p]->rss_quarter_kb[1]),
		       U(w[p]->rss_quarter_kb[2]), U(w[p]->rss_quarter_kb[3]),
		       U(w[p]->anon_base_kb), U(w[p]->anon_max_kb),
		       U(w[p]->rss_samples), p + 1 == cfg->procs ? "" : ",");
	printf("  ],\n  \"rss_limit_kb\": %u,\n  \"pass\": %s\n}\n",
	       cfg->rss_limit_kb, pass ? "true" : "false");
}

static void print_human(const struct soak_cfg *cfg, const struct soak_tot *t,
			const struct soak_wres *const *w,
			struct soak_ledger lg[][SOAK_MAX_CTX], bool pass,
			FILE *out)
{
	unsigned int p, c;

	fprintf(out, "qps_soak: %u processes x %u threads, %u groups "
		"(fan-out %u), %u s, rate %u/s per thread%s\n", cfg->procs,
		cfg->threads, cfg->groups, cfg->fanout, cfg->seconds,
		cfg->rate, cfg->rate ? "" : " (unpaced)");
	fprintf(out, "flows: %llu connected unicast, %llu unconnected "
		"unicast, %llu multicast\n", U(t->flows_uc_conn),
		U(t->flows_uc), U(t->flows_mc));
	fprintf(out, "sent %llu datagrams (%llu single sends, %llu MSG_MORE "
		"runs, %llu sendmmsg calls); not sent: %llu -EAGAIN, "
		"%llu timeouts\n", U(t->sent), U(t->singles),
		U(t->more_runs), U(t->mmsg_calls), U(t->eagain),
		U(t->timeouts));
	fprintf(out, "deliveries: expected %llu, received %llu, missing "
		"%llu, counted drops %llu, unaccounted %llu\n",
		U(t->expected), U(t->received), U(t->missing), U(t->counted),
		U(t->unaccounted));
	fprintf(out, "drops by reason: rx_queue_full %llu, dev_rx_drops %llu "
		"(no_buf %llu, cq_overrun %llu, no_rule %llu), "
		"rx_no_endpoint %llu, rx_errors %llu, rx_bad %llu; "
		"tx_errors %llu, dev_tx_drops %llu, band -EAGAIN %llu\n",
		U(t->q_full), U(t->dev_rx_drops), U(t->no_buf),
		U(t->cq_overrun), U(t->no_rule), U(t->no_ep), U(t->rx_errors),
		U(t->rx_bad), U(t->tx_errors), U(t->dev_tx_drops),
		U(t->band_drops));
	fprintf(out, "integrity: %llu duplicates, %llu reordered, %llu beyond "
		"window, %llu corrupt, %llu alien, %llu phantom, %llu left in "
		"bands, %llu tx_packets mismatch, %llu send errors, %llu "
		"receive errors\n", U(t->dup), U(t->late), U(t->old),
		U(t->corrupt), U(t->alien), U(t->phantom), U(t->band_left),
		U(t->tx_mismatch), U(t->send_errors), U(t->recv_errors));
	fprintf(out, "%-5s %-4s %2s %12s %12s %10s %10s %9s\n", "proc",
		"ctx", "k", "expected", "received", "missing", "counted",
		"residual");
	for (p = 0; p < cfg->procs; p++)
		for (c = 0; c < w[p]->nctx; c++)
			fprintf(out, "%-5u %s%-3u %2u %12llu %12llu %10llu "
				"%10llu %9lld\n", p, c ? "m" : "u",
				c ? c - 1 : 0, w[p]->ctx[c].k,
				U(lg[p][c].expected), U(lg[p][c].received),
				U(lg[p][c].missing), U(lg[p][c].counted),
				(long long)lg[p][c].residual);
	for (p = 0; p < cfg->procs; p++) {
		const struct soak_wres *r = w[p];

		fprintf(out, "rss proc %u: %llu kB after %u s warm-up, max "
			"%llu kB, end %llu kB, growth %lld kB (limit %u%s); "
			"by quarter %llu %llu %llu %llu kB; private %llu -> "
			"%llu kB; %llu samples\n", p, U(r->rss_base_kb),
			cfg->warmup, U(r->rss_max_kb), U(r->rss_end_kb),
			(long long)r->rss_max_kb - (long long)r->rss_base_kb,
			cfg->rss_limit_kb,
			cfg->warmup ? "" : ", not checked: no warm-up",
			U(r->rss_quarter_kb[0]), U(r->rss_quarter_kb[1]),
			U(r->rss_quarter_kb[2]), U(r->rss_quarter_kb[3]),
			U(r->anon_base_kb), U(r->anon_max_kb),
			U(r->rss_samples));
	}
	fprintf(out, "result: %s\n", pass ? "PASS" : "FAIL");
}

bool soak_report(const struct soak_cfg *cfg, const struct soak_topo *topo,
		 const struct soak_wres *const *w)
{
	static struct soak_ledger lg[SOAK_MAX_PROCS][SOAK_MAX_CTX];
	uint64_t sent[SOAK_MAX_FLOWS] = { 0 };
	struct soak_tot t;
	unsigned int p, f;
	bool pass;

	memset(&t, 0, sizeof(t));
	for (f = 0; f < topo->nflows; f++) {
		const struct soak_flow *fl = &topo->flow[f];

		sent[f] = w[fl->src_p]->sent[f];
		t.sent += sent[f];
		if (fl->mcast)
			t.flows_mc++;
		else if (fl->src_kind == SOAK_EP_UN)
			t.flows_uc++;
		else
			t.flows_uc_conn++;
	}
	for (p = 0; p < cfg->procs; p++) {
		uint64_t mine = 0;

		for (f = 0; f < topo->nflows; f++)
			if (topo->flow[f].src_p == p)
				mine += sent[f];
		/* Every accepted datagram is one tx_packets of context u. */
		if (w[p]->ctx[0].st.tx_packets != mine)
			t.tx_mismatch++;
		ledger(cfg, topo, w[p], sent, lg[p], &t);
		t.eagain += w[p]->eagain;
		t.timeouts += w[p]->timeouts;
		t.send_errors += w[p]->send_errors;
		t.recv_errors += w[p]->recv_errors;
		t.singles += w[p]->single_sends;
		t.more_runs += w[p]->more_runs;
		t.mmsg_calls += w[p]->mmsg_calls;
		t.blocking_recvs += w[p]->blocking_recvs;
		/* Without a warm-up the base is taken before the buffers
		 * are touched: no verdict. */
		if (cfg->warmup &&
		    w[p]->rss_max_kb > w[p]->rss_base_kb + cfg->rss_limit_kb)
			t.rss_over++;
	}
	/* Send-side drops cannot be placed in one context's ledger. */
	t.unaccounted += t.tx_errors + t.dev_tx_drops;
	pass = !t.unaccounted && !t.dup && !t.late && !t.old && !t.corrupt &&
	       !t.alien && !t.phantom && !t.band_left && !t.tx_mismatch &&
	       !t.send_errors && !t.recv_errors && !t.rss_over && t.sent &&
	       !t.truncated;
	/* With --json the JSON goes to stdout, the summary to stderr. */
	if (cfg->json)
		print_json(cfg, &t, w, lg, pass);
	print_human(cfg, &t, w, lg, pass, cfg->json ? stderr : stdout);
	return pass;
}
