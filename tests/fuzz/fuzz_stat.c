// SPDX-License-Identifier: MIT
/*
 * fuzz_stat: qps_stat's reader (tools/stat_read.c) fed segment images,
 * as any local user could leave them under a segment's name.
 *
 * Input: a flags byte, then the image. Flags: bit 0, the image as a file
 * name for sr_parse_name instead (up to 63 bytes); bit 1, the file is
 * truncated to the length in the last two bytes between sr_open_fd and
 * sr_read (a writer that shrinks it while it is read); bit 2, the name's
 * pid and context are taken from the image's header, so that the name
 * check passes and the rest is reached.
 *
 * The image is the content of a memfd (a regular file, as in /dev/shm)
 * read through sr_open_fd and sr_read, the path qps_stat takes after its
 * open. Checked for every input: no crash, hang or ASan report; a refused
 * image is refused before any counter is read; an accepted one has the
 * exact layout of this build and its file size; the endpoints read are
 * open slots below max_ep in increasing order; the escaped strings are
 * printable ASCII; a truncated file reads -ENODATA, never a fault; an
 * accepted name reads back as its pid and context.
 */
#define _GNU_SOURCE
#include "fuzz_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stat_read.h"

#define F_NAME 1
#define F_TRUNCATE 2
#define F_NAME_FROM_HDR 4

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check_printable(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len && s[i]; i++)
		FUZZ_CHECK(s[i] >= 0x20 && s[i] < 0x7f);
	FUZZ_CHECK(i < len);
}

static void fuzz_name(const uint8_t *data, size_t size)
{
	char name[64], back[64];
	unsigned int ctx;
	int pid, n;

	if (size >= sizeof(name))
		size = sizeof(name) - 1;
	memcpy(name, data, size);
	name[size] = '\0';
	if (sr_parse_name(name, &pid, &ctx) != 0)
		return;
	FUZZ_CHECK(pid > 0);
	n = snprintf(back, sizeof(back), "%s%d.%u", QPS_STAT_PREFIX, pid, ctx);
	FUZZ_CHECK(n > 0 && !strncmp(name, back, (size_t)n));
	FUZZ_CHECK(name[n] == '\0' || name[n] == '.');
}

static void check_read(const struct sr_seg *s, struct sr_snap *snap)
{
	uint32_t i;

	FUZZ_CHECK(snap->neps <= s->h.max_ep);
	for (i = 0; i < snap->neps; i++) {
		FUZZ_CHECK(snap->eps[i].slot < s->h.max_ep);
		FUZZ_CHECK(!i || snap->eps[i].slot > snap->eps[i - 1].slot);
		FUZZ_CHECK(snap->eps[i].b.state == QPS_STAT_EP_OPEN);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sr_seg s;
	struct sr_snap snap;
	enum sr_status st;
	uint8_t flags;
	int fd, r;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;
	if (flags & F_NAME) {
		fuzz_name(data, size);
		return 0;
	}
	fd = memfd_create("fuzz_stat", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
	memset(&s, 0, sizeof(s));
	s.pid = 1;
	if ((flags & F_NAME_FROM_HDR) && size >= sizeof(struct qps_stat_hdr)) {
		struct qps_stat_hdr h;

		memcpy(&h, data, sizeof(h));
		s.pid = h.pid;
		s.ctx_id = h.ctx_id;
	}
	st = sr_open_fd(&s, fd);
	if (st != SR_OK) {
		sr_close(&s);
		return 0;
	}
	FUZZ_CHECK(s.size == size && s.h.size == size);
	FUZZ_CHECK(s.h.nsq >= 1 && s.h.nsq <= QPS_STAT_MAX_SQ);
	FUZZ_CHECK(s.h.max_ep >= 1 && s.h.max_ep <= QPS_STAT_MAX_EP);
	FUZZ_CHECK(qps_stat_size(s.h.nsq, s.h.max_ep) == size);
	check_printable(s.comm, sizeof(s.comm));
	check_printable(s.provider, sizeof(s.provider));
	check_printable(s.devname, sizeof(s.devname));
	if ((flags & F_TRUNCATE) && size >= 2) {
		size_t to = (size_t)(data[size - 2] | data[size - 1] << 8);

		FUZZ_CHECK(ftruncate(fd, (off_t)(to % size)) == 0);
		FUZZ_CHECK(sr_read(&s, &snap) == -ENODATA);
		FUZZ_CHECK(snap.neps == 0 && snap.eps == NULL);
	} else {
		r = sr_read(&s, &snap);
		FUZZ_CHECK(r == 0);
		check_read(&s, &snap);
		sr_snap_free(&snap);
	}
	sr_close(&s);
	return 0;
}

/* ---- seeds: images as this build's writer makes them ---- */

static void *image(uint32_t nsq, uint32_t max_ep, size_t *len)
{
	struct qps_stat_geom g;
	struct qps_stat_hdr *h;
	struct qps_stat_ep *ep;
	uint8_t *img;
	uint64_t magic = QPS_STAT_MAGIC;

	qps_stat_geom(nsq, max_ep, &g);
	img = calloc(1, (size_t)g.size);
	if (!img)
		abort();
	h = (struct qps_stat_hdr *)img;
	memcpy(&h->magic, &magic, sizeof(magic));
	h->layout = QPS_STAT_LAYOUT;
	h->hdr_size = sizeof(*h);
	h->stats_size = sizeof(struct qps_stats);
	h->sq_size = sizeof(struct qps_sq_stats);
	h->ep_size = sizeof(struct qps_stat_ep);
	h->version = QPS_STAT_VERSION;
	h->size = g.size;
	h->pid = 7;
	h->start_ticks = 12345;
	memcpy(h->comm, "seed", 5);
	memcpy(h->provider, "emu", 4);
	memcpy(h->dev, "wire", 5);
	h->nsq = nsq;
	h->max_ep = max_ep;
	h->off_rx = g.off_rx;
	h->off_snap = g.off_snap;
	h->off_sq = g.off_sq;
	h->off_ep = g.off_ep;
	ep = (struct qps_stat_ep *)(img + g.off_ep);
	ep[max_ep - 1].state = QPS_STAT_EP_OPEN;
	ep[max_ep - 1].flags = QPS_STAT_EP_BOUND;
	ep[max_ep - 1].ngroups = 9;
	ep[max_ep - 1].txq = -1;
	*len = (size_t)g.size;
	return img;
}

static int seed(const char *dir, const char *name, uint8_t flags,
		const void *img, size_t len)
{
	uint8_t *buf = malloc(len + 1);
	int r;

	if (!buf)
		abort();
	buf[0] = flags;
	memcpy(buf + 1, img, len);
	r = fuzz_write_seed(dir, name, buf, len + 1);
	free(buf);
	return r;
}

int fuzz_make_corpus(const char *dir)
{
	struct qps_stat_hdr *h;
	size_t len;
	uint8_t *img;
	int r = 0;

	img = image(1, 1, &len);
	r |= seed(dir, "one-ep", F_NAME_FROM_HDR, img, len);
	r |= seed(dir, "name-mismatch", 0, img, len);
	h = (struct qps_stat_hdr *)img;
	h->snap_seq = 3;	/* a writer killed mid-snapshot */
	r |= seed(dir, "odd-snap-seq", F_NAME_FROM_HDR, img, len);
	h->off_rx = 0 - (uint64_t)sizeof(struct qps_stats) + 64;
	r |= seed(dir, "wrapped-offset", F_NAME_FROM_HDR, img, len);
	free(img);
	img = image(2, 4, &len);
	r |= seed(dir, "two-sq", F_NAME_FROM_HDR, img, len);
	img[len - 2] = 0x10;	/* to 16 bytes */
	img[len - 1] = 0;
	r |= seed(dir, "truncated", F_NAME_FROM_HDR | F_TRUNCATE, img, len);
	h = (struct qps_stat_hdr *)img;
	memcpy(h->comm, "\033[2J\a\\", 7);
	h->dev[0] = (char)0x9b;
	r |= seed(dir, "escapes", F_NAME_FROM_HDR, img, len);
	free(img);
	r |= seed(dir, "name-plain", F_NAME, "qpsock-stat.42.0", 16);
	r |= seed(dir, "name-tag", F_NAME, "qpsock-stat.1.3.a1d9ef20", 24);
	r |= seed(dir, "name-bad", F_NAME, "qpsock-stat.-1.03", 17);
	return r;
}
