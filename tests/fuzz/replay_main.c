// SPDX-License-Identifier: MIT
/*
 * Runs a harness without libFuzzer: every file named on the command line,
 * or found in a directory named there, goes once through
 * LLVMFuzzerTestOneInput. ctest replays the seed corpus and the crash
 * regressions this way in every build, with any compiler.
 *
 *   fuzz_x FILE|DIR...           replay
 *   fuzz_x --make-corpus DIR     write the harness's seeds into DIR
 */
#include "fuzz_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		n = fread(buf + len, 1, cap - len, f);
		if (!n)
			break;
		len += n;
	}
	fclose(f);
	/* An exact-size copy: the harness sees what libFuzzer would give. */
	{
		void *in = fuzz_dup(buf, len);

		free(buf);
		LLVMFuzzerTestOneInput(in, len);
		fuzz_free(in);
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files of @dir in name order, so that runs are reproducible. */
static int run_dir(const char *dir, unsigned int *count)
{
	char **names = NULL, path[4096];
	size_t n = 0, i;
	struct dirent *de;
	DIR *d = opendir(dir);
	int r = 0;

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		if (!names)
			abort();
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (i = 0; i < n; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (!stat(path, &st) && S_ISREG(st.st_mode)) {
			if (run_file(path))
				r = -1;
			else
				(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	unsigned int count = 0;
	int i, r = 0;

	if (argc == 3 && !strcmp(argv[1], "--make-corpus")) {
		r = fuzz_make_corpus(argv[2]);
		if (r)
			fprintf(stderr, "replay: seeds: %s\n", strerror(-r));
		return r ? 1 : 0;
	}
	LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
				strerror(errno));
			r = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count))
				r = 1;
		} else if (run_file(argv[i])) {
			r = 1;
		} else {
			count++;
		}
	}
	printf("replay: %u inputs, %s\n", count, r ? "errors" : "no crash");
	return r;
}
