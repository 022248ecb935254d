/* SPDX-License-Identifier: MIT */
/*
 * Transmit timestamps (txts.c), as SO_TIMESTAMPING's error queue with
 * SOF_TIMESTAMPING_OPT_ID: a sender with QPS_TS_TX_* numbers each
 * datagram, the send path keeps its number and times in the slot's
 * metadata, and once the device completes it the report waits in the
 * endpoint's queue for qps_recv_txts.
 */
#ifndef QPS_TXTS_H
#define QPS_TXTS_H

#include <stdbool.h>
#include <stdint.h>

struct qps_ep;
struct qps_sq;
struct qps_tx_meta;
struct qps_wc_ts;

/* Under rx.lock: make @ep's report queue if @tx_flags asks for reports. */
int qps_txts_enable_locked(struct qps_ep *ep, uint32_t tx_flags);
/* Under rx.lock, at close: forget the queue's reports. */
void qps_txts_fini_locked(struct qps_ep *ep);

/* Send path, under sq->lock: number a datagram of @ep in @m if it asked. */
void qps_txts_meta(struct qps_ep *ep, struct qps_tx_meta *m);
/* The slot's WQE is being written now: its software time. */
void qps_txts_posted(struct qps_tx_meta *m);
/* Under sq->lock: the slot's datagram left (@ts: the completion's stamp,
 * on CLOCK_REALTIME, or NULL), or failed. Takes rx.lock. */
void qps_txts_done(struct qps_sq *sq, const struct qps_tx_meta *m,
		   const struct qps_wc_ts *ts, bool failed);

#endif /* QPS_TXTS_H */
