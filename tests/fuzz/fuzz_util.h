/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the libFuzzer harnesses: the entry points each harness
 * defines, a bounded reader over the fuzz input, and seed writing. The
 * same harness sources link either libFuzzer (-DQPS_FUZZ=ON, clang) or
 * replay_main.c, which runs given corpus files once (ctest, any compiler).
 */
#ifndef QPS_FUZZ_UTIL_H
#define QPS_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Defined by each harness. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
/* Write the harness's seed inputs into @dir (replay_main --make-corpus). */
int fuzz_make_corpus(const char *dir);

/* A failed invariant: print it and abort, which both libFuzzer and the
 * replay driver report as a crash with the input that caused it. */
#define FUZZ_CHECK(cond)                                                   \
	do {                                                               \
		if (!(cond))                                               \
			fuzz_fail(#cond, __FILE__, __LINE__);              \
	} while (0)

void fuzz_fail(const char *what, const char *file, int line)
	__attribute__((noreturn));

/* Reads past the end return zeros, so a harness never checks lengths
 * before each field; fuzz_in_left() says when to stop. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

uint8_t fuzz_u8(struct fuzz_in *in);
uint16_t fuzz_u16(struct fuzz_in *in);
uint32_t fuzz_u32(struct fuzz_in *in);
/* Up to @len bytes into @dst (the rest zeroed); returns how many were
 * taken from the input. */
size_t fuzz_bytes(struct fuzz_in *in, void *dst, size_t len);
static inline size_t fuzz_in_left(const struct fuzz_in *in)
{
	return in->n;
}

/* A malloc'd copy of exactly @len bytes of @src (zeros when @src is NULL),
 * so that ASan flags any access past it; release it with fuzz_free.
 * Aborts on OOM. */
void *fuzz_dup(const void *src, size_t len);
void fuzz_free(void *p);

/* Seeds: @dir/@name gets @len bytes. 0 or -errno. */
int fuzz_write_seed(const char *dir, const char *name, const void *data,
		    size_t len);

/* ASan manual poisoning, no-ops without ASan: a harness marks memory the
 * code under test must never touch. */
void fuzz_poison(const void *p, size_t len);
void fuzz_unpoison(const void *p, size_t len);

#endif /* QPS_FUZZ_UTIL_H */
