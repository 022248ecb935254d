// SPDX-License-Identifier: MIT
#include "fuzz_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#endif

void fuzz_fail(const char *what, const char *file, int line)
{
	fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", what, file,
		line);
	abort();
}

uint8_t fuzz_u8(struct fuzz_in *in)
{
	uint8_t v = 0;

	fuzz_bytes(in, &v, 1);
	return v;
}

uint16_t fuzz_u16(struct fuzz_in *in)
{
	uint8_t b[2];

	fuzz_bytes(in, b, 2);
	return (uint16_t)(b[0] | b[1] << 8);
}

uint32_t fuzz_u32(struct fuzz_in *in)
{
	uint8_t b[4];

	fuzz_bytes(in, b, 4);
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

size_t fuzz_bytes(struct fuzz_in *in, void *dst, size_t len)
{
	size_t n = len < in->n ? len : in->n;

	if (n)
		memcpy(dst, in->p, n);
	if (len > n)
		memset((uint8_t *)dst + n, 0, len - n);
	in->p += n;
	in->n -= n;
	return n;
}

/* What fuzz_dup returns for 0 bytes if malloc(0) gave NULL. */
static uint8_t fuzz_empty;

void *fuzz_dup(const void *src, size_t len)
{
	/* Exactly @len bytes, even 0: glibc and ASan both return a unique
	 * pointer for malloc(0), and ASan flags any access through it. */
	void *p = malloc(len);

	if (!p && len)
		abort();
	if (!p)
		return &fuzz_empty;
	if (len && src)
		memcpy(p, src, len);
	else if (len)
		memset(p, 0, len);
	return p;
}

void fuzz_free(void *p)
{
	if (p != &fuzz_empty)
		free(p);
}

int fuzz_write_seed(const char *dir, const char *name, const void *data,
		    size_t len)
{
	char path[4096];
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, data, len) != (ssize_t)len)
		r = -EIO;
	close(fd);
	return r;
}

void fuzz_poison(const void *p, size_t len)
{
#ifdef FUZZ_ASAN
	ASAN_POISON_MEMORY_REGION(p, len);
#else
	(void)p;
	(void)len;
#endif
}

void fuzz_unpoison(const void *p, size_t len)
{
#ifdef FUZZ_ASAN
	ASAN_UNPOISON_MEMORY_REGION(p, len);
#else
	(void)p;
	(void)len;
#endif
}
