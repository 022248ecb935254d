/* SPDX-License-Identifier: MIT */
/*
 * dump_pcap - the capture file qps_dump writes: pcap with nanosecond
 * stamps (magic 0xa1b23c4d), or pcapng (one Ethernet interface with
 * if_tsresol 9), to a file or to stdout, host byte order as both formats
 * allow. Every write is checked; a reader gone (EPIPE) is an error like
 * any other.
 */
#ifndef QPS_DUMP_PCAP_H
#define QPS_DUMP_PCAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct dp_out {
	FILE *f;
	bool ng;			/* pcapng */
	bool own;			/* fclose at the end (not stdout) */
};

/* "-" for stdout. @ng: pcapng. 0 or -errno. */
int dp_open(struct dp_out *o, const char *path, bool ng, uint32_t snaplen);
/* One frame: 0 or -errno. */
int dp_write(struct dp_out *o, uint64_t ts_ns, const void *data,
	     uint32_t caplen, uint32_t origlen);
int dp_flush(struct dp_out *o);
int dp_close(struct dp_out *o);

#endif /* QPS_DUMP_PCAP_H */
