// SPDX-License-Identifier: MIT
#include "t_emu.h"
#include "t_util.h"

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int t_emu_poll_wait(struct qps_cq *cq, struct ibv_wc *wc, int want, int ms)
{
	uint64_t end = t_now_ms() + (uint64_t)ms;
	int n = 0;

	for (;;) {
		int r = qps_emu_ops.poll_cq(cq, want - n, wc + n);

		T_GE(r, 0);
		if (r < 0)
			return n;
		n += r;
		if (n >= want || t_now_ms() >= end)
			return n;
		if (!r)
			usleep(1000);
	}
}

struct qps_emu_counters t_emu_ctrs(struct qps_dev *dev)
{
	struct qps_emu_counters c;

	T_EQ(qps_emu_counters_all(dev, &c), 0);
	return c;
}

int t_emu_run(const char *suite, CU_TestInfo *tests, const char *tag,
	      char *wire, size_t len)
{
	char name[128];
	int rc;

	t_wire_name(wire, len, tag);
	snprintf(name, sizeof(name), "%s%s", QPS_EMU_SHM_PREFIX, wire);
	shm_unlink(name);
	rc = t_run(suite, tests);
	shm_unlink(name);
	return rc;
}
