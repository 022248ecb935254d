/* SPDX-License-Identifier: MIT */
/* Helpers for the suites that drive the emu provider's ops directly
 * (test_emu, test_emu_ud). */
#ifndef QPS_T_EMU_H
#define QPS_T_EMU_H

#include <CUnit/CUnit.h>
#include <stddef.h>

#include "emu/emu.h"

/* Poll @cq through the emu ops until @want completions arrived or @ms
 * passed; returns how many were written to @wc. A failed poll fails the
 * test and returns what arrived before it. */
int t_emu_poll_wait(struct qps_cq *cq, struct ibv_wc *wc, int want, int ms);

/* The emu port counters of @dev, asserting they could be read. */
struct qps_emu_counters t_emu_ctrs(struct qps_dev *dev);

/* Run @tests as suite @suite (see t_run) on an emu wire of its own, named
 * from @tag into @wire (@len bytes), whose shared memory is removed before
 * and after. */
int t_emu_run(const char *suite, CU_TestInfo *tests, const char *tag,
	      char *wire, size_t len);

#endif
