// SPDX-License-Identifier: MIT
/*
 * dump_pcap - pcap (nanosecond) and pcapng writing for qps_dump; the
 * formats as libpcap documents them (pcap-savefile(5), the pcapng
 * draft): only the blocks a one-interface Ethernet capture needs.
 */
#include <errno.h>
#include <string.h>

#include "dump_pcap.h"

#define PCAP_MAGIC_NS 0xa1b23c4du
#define LINKTYPE_ETHERNET 1u
#define NG_SHB 0x0a0d0d0au
#define NG_IDB 0x00000001u
#define NG_EPB 0x00000006u
#define NG_BOM 0x1a2b3c4du
#define NG_OPT_TSRESOL 9u

static int dp_put(struct dp_out *o, const void *p, size_t len)
{
	if (len && fwrite(p, 1, len, o->f) != len)
		return ferror(o->f) && errno ? -errno : -EIO;
	return 0;
}

static int dp_ng_header(struct dp_out *o, uint32_t snaplen)
{
	const uint32_t shb[7] = {
		NG_SHB, 28, NG_BOM, 1 /* major 1, minor 0 */,
		0xffffffffu, 0xffffffffu /* section length unknown */, 28,
	};
	/* IDB: type, length, linktype + reserved, snaplen, option
	 * if_tsresol = 9 (10^-9 s) padded, opt_endofopt, length. */
	const uint32_t idb[8] = {
		NG_IDB, 32, LINKTYPE_ETHERNET, snaplen,
		NG_OPT_TSRESOL | 1u << 16, 9, 0, 32,
	};
	int ret = dp_put(o, shb, sizeof(shb));

	return ret ? ret : dp_put(o, idb, sizeof(idb));
}

int dp_open(struct dp_out *o, const char *path, bool ng, uint32_t snaplen)
{
	const uint32_t hdr[6] = {
		PCAP_MAGIC_NS, 2u | 4u << 16 /* version 2.4 */, 0, 0,
		snaplen, LINKTYPE_ETHERNET,
	};
	int ret;

	memset(o, 0, sizeof(*o));
	o->ng = ng;
	if (!strcmp(path, "-")) {
		o->f = stdout;
	} else {
		o->f = fopen(path, "we");
		if (!o->f)
			return -errno;
		o->own = true;
	}
	ret = ng ? dp_ng_header(o, snaplen) : dp_put(o, hdr, sizeof(hdr));
	if (!ret)
		ret = dp_flush(o);
	return ret;
}

/* An enhanced packet block: the stamp in if_tsresol units (ns). */
static int dp_write_ng(struct dp_out *o, uint64_t ts_ns, const void *data,
		       uint32_t caplen, uint32_t origlen)
{
	static const uint8_t zero[4];
	uint32_t pad = (4 - (caplen & 3)) & 3;
	uint32_t total = 32 + caplen + pad;
	const uint32_t epb[7] = {
		NG_EPB, total, 0 /* interface */, (uint32_t)(ts_ns >> 32),
		(uint32_t)ts_ns, caplen, origlen,
	};
	int ret = dp_put(o, epb, sizeof(epb));

	if (!ret)
		ret = dp_put(o, data, caplen);
	if (!ret)
		ret = dp_put(o, zero, pad);
	return ret ? ret : dp_put(o, &total, sizeof(total));
}

int dp_write(struct dp_out *o, uint64_t ts_ns, const void *data,
	     uint32_t caplen, uint32_t origlen)
{
	const uint32_t rec[4] = {
		(uint32_t)(ts_ns / 1000000000u),
		(uint32_t)(ts_ns % 1000000000u), caplen, origlen,
	};
	int ret;

	if (o->ng)
		return dp_write_ng(o, ts_ns, data, caplen, origlen);
	ret = dp_put(o, rec, sizeof(rec));
	return ret ? ret : dp_put(o, data, caplen);
}

int dp_flush(struct dp_out *o)
{
	return fflush(o->f) ? -errno : 0;
}

int dp_close(struct dp_out *o)
{
	int ret = dp_flush(o);

	if (o->own && fclose(o->f) && !ret)
		ret = -errno;
	o->f = NULL;
	return ret;
}
