// SPDX-License-Identifier: MIT
/*
 * stat_fields - the table of struct qps_stats fields (stat_fields.h). The
 * assertion below fails the build when a field is added to the struct
 * and not here.
 */
#include "stat_fields.h"

#define SF(g, f) { g, #f, offsetof(struct qps_stats, f), \
		   sizeof(((struct qps_stats *)0)->f) / sizeof(uint64_t) }

const struct sf_field sf_fields[] = {
	SF("datagrams", tx_packets),
	SF("datagrams", tx_bytes),
	SF("datagrams", tx_errors),
	SF("datagrams", rx_packets),
	SF("datagrams", rx_bytes),
	SF("datagrams", rx_bad),
	SF("datagrams", rx_no_endpoint),
	SF("datagrams", rx_queue_full),
	SF("datagrams", rx_truncated),
	SF("datagrams", rx_errors),
	SF("device", wqes),
	SF("device", doorbells),
	SF("device", bf_writes),
	SF("device", tx_cqes),
	SF("device", rx_cqes),
	SF("device", dev_tx_drops),
	SF("device", dev_rx_drops),
	SF("send path: doorbells and flushes", tx_wqes),
	SF("send path: doorbells and flushes", tx_doorbells),
	SF("send path: doorbells and flushes", tx_bf),
	SF("send path: doorbells and flushes", tx_db_ppm),
	SF("send path: doorbells and flushes", tx_flush_send),
	SF("send path: doorbells and flushes", tx_flush_explicit),
	SF("send path: doorbells and flushes", tx_flush_poll),
	SF("send path: doorbells and flushes", tx_flush_close),
	SF("send path: doorbells and flushes", tx_flush_full),
	SF("send path: doorbells and flushes", tx_flush_timer),
	SF("send path: send-QP selection", tx_queues),
	SF("send path: send-QP selection", txq_picks_cached),
	SF("send path: send-QP selection", txq_picks_computed),
	SF("send path: send-QP selection", txq_flows_new),
	SF("send path: send-QP selection", txq_flow_moves),
	SF("send path: send-QP selection", txq_flow_deferred),
	SF("send path: send-QP selection", txq_resets_connect),
	SF("send path: send-QP selection", txq_resets_route),
	SF("send path: send-QP selection", txq_resets_qp),
	SF("send path: priority bands", tx_band_enqueued),
	SF("send path: priority bands", tx_band_bypassed),
	SF("send path: priority bands", tx_band_drops),
	SF("send path: priority bands", tx_band_depth),
	SF("send path: priority bands", tx_band_bytes),
	SF("multicast and demultiplexing", rx_demux_early),
	SF("multicast and demultiplexing", rx_demux_fanout),
	SF("multicast and demultiplexing", rx_demux_connected),
	SF("multicast and demultiplexing", rx_demux_bound),
	SF("multicast and demultiplexing", rx_fanout_deliveries),
	SF("multicast and demultiplexing", rx_mc_filtered),
	SF("multicast and demultiplexing", rx_pktinfo),
	SF("multicast and demultiplexing", mc_joins),
	SF("multicast and demultiplexing", mc_leaves),
	SF("multicast and demultiplexing", mc_rules_created),
	SF("multicast and demultiplexing", mc_rules),
	SF("multicast and demultiplexing", mc_rule_refs),
	SF("send path: completion moderation", tx_signaled),
	SF("send path: completion moderation", tx_reaped),
	SF("UD transport", ud_ah_created),
	SF("UD transport", ud_ah_reused),
	SF("UD transport", ud_ah_live),
	SF("UD transport", ud_peers_learned),
	SF("UD transport", ud_tx_no_peer),
	SF("UD transport", rx_ud_bad_grh),
	SF("UD transport", rx_ud_bad_hdr),
	SF("QP errors", qp_errors),
	SF("QP errors", qp_recoveries),
	SF("IPv4 fragments", rx_reasm_ok),
	SF("IPv4 fragments", rx_reasm_timeout),
	SF("IPv4 fragments", rx_reasm_overlap),
	SF("IPv4 fragments", rx_reasm_dup),
	SF("IPv4 fragments", rx_reasm_mem),
	SF("IPv4 fragments", rx_reasm_bad),
	SF("IPv4 fragments", rx_reasm_bytes),
	SF("IPv4 fragments", tx_frags),
	SF("IPv4 fragments", tx_frag_partial),
	SF("multicast loopback", tx_mc_loops),
	SF("multicast loopback", tx_mc_loop_errors),
	SF("multicast loopback", rx_mc_loop_off),
	SF("checksum offload", csum_offload),
	SF("thread mode", thread_single),
	SF("thread mode", tx_lock_barriers),
	SF("thread mode", tx_lock_biased),
	SF("thread mode", tx_nested),
};

const unsigned int sf_nfields = sizeof(sf_fields) / sizeof(sf_fields[0]);

/* Every counter is in the table exactly once: the sizes add up. */
#define SF_N(f) (sizeof(((struct qps_stats *)0)->f) / sizeof(uint64_t))
_Static_assert(SF_N(tx_packets) +
	       SF_N(tx_bytes) +
	       SF_N(tx_errors) +
	       SF_N(rx_packets) +
	       SF_N(rx_bytes) +
	       SF_N(rx_bad) +
	       SF_N(rx_no_endpoint) +
	       SF_N(rx_queue_full) +
	       SF_N(rx_truncated) +
	       SF_N(rx_errors) +
	       SF_N(wqes) +
	       SF_N(doorbells) +
	       SF_N(bf_writes) +
	       SF_N(tx_cqes) +
	       SF_N(rx_cqes) +
	       SF_N(dev_tx_drops) +
	       SF_N(dev_rx_drops) +
	       SF_N(tx_wqes) +
	       SF_N(tx_doorbells) +
	       SF_N(tx_bf) +
	       SF_N(tx_db_ppm) +
	       SF_N(tx_flush_send) +
	       SF_N(tx_flush_explicit) +
	       SF_N(tx_flush_poll) +
	       SF_N(tx_flush_close) +
	       SF_N(tx_flush_full) +
	       SF_N(tx_flush_timer) +
	       SF_N(tx_queues) +
	       SF_N(txq_picks_cached) +
	       SF_N(txq_picks_computed) +
	       SF_N(txq_flows_new) +
	       SF_N(txq_flow_moves) +
	       SF_N(txq_flow_deferred) +
	       SF_N(txq_resets_connect) +
	       SF_N(txq_resets_route) +
	       SF_N(txq_resets_qp) +
	       SF_N(tx_band_enqueued) +
	       SF_N(tx_band_bypassed) +
	       SF_N(tx_band_drops) +
	       SF_N(tx_band_depth) +
	       SF_N(tx_band_bytes) +
	       SF_N(rx_demux_early) +
	       SF_N(rx_demux_fanout) +
	       SF_N(rx_demux_connected) +
	       SF_N(rx_demux_bound) +
	       SF_N(rx_fanout_deliveries) +
	       SF_N(rx_mc_filtered) +
	       SF_N(rx_pktinfo) +
	       SF_N(mc_joins) +
	       SF_N(mc_leaves) +
	       SF_N(mc_rules_created) +
	       SF_N(mc_rules) +
	       SF_N(mc_rule_refs) +
	       SF_N(tx_signaled) +
	       SF_N(tx_reaped) +
	       SF_N(ud_ah_created) +
	       SF_N(ud_ah_reused) +
	       SF_N(ud_ah_live) +
	       SF_N(ud_peers_learned) +
	       SF_N(ud_tx_no_peer) +
	       SF_N(rx_ud_bad_grh) +
	       SF_N(rx_ud_bad_hdr) +
	       SF_N(qp_errors) +
	       SF_N(qp_recoveries) +
	       SF_N(rx_reasm_ok) +
	       SF_N(rx_reasm_timeout) +
	       SF_N(rx_reasm_overlap) +
	       SF_N(rx_reasm_dup) +
	       SF_N(rx_reasm_mem) +
	       SF_N(rx_reasm_bad) +
	       SF_N(rx_reasm_bytes) +
	       SF_N(tx_frags) +
	       SF_N(tx_frag_partial) +
	       SF_N(tx_mc_loops) +
	       SF_N(tx_mc_loop_errors) +
	       SF_N(rx_mc_loop_off) +
	       SF_N(csum_offload) +
	       SF_N(thread_single) +
	       SF_N(tx_lock_barriers) + SF_N(tx_lock_biased) +
	       SF_N(tx_nested) == sizeof(struct qps_stats) / sizeof(uint64_t),
	       "sf_fields lists every field of struct qps_stats");
