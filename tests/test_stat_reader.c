// SPDX-License-Identifier: MIT
/*
 * test_stat_reader - qps_stat against files it must not trust (issue #36
 * item 2): whatever sits in /dev/shm under a segment's name may be made
 * by another user to hang, crash or fool it. Each case runs the real
 * qps_stat with a deadline and checks it neither hangs nor dies by a
 * signal, refuses what it must, prints nothing raw, and removes a
 * segment only when its process is verifiably gone.
 *
 * Hostile files are copies of a live segment of this process, altered,
 * named qpsock-stat.<our pid>.<FAKE_CTX + k> and removed after each test.
 * The cases that need root (another owner, PID namespaces, a reused pid)
 * say so and pass without running otherwise.
 */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qps_int.h"
#include "t_util.h"

#define FAKE_CTX 7000u
#define NOBODY 65534
/* qps_stat never needs this long; a case that reaches it hung. */
#define STAT_TIMEOUT_MS 10000

static char g_wire[64];

/* ---- running qps_stat -------------------------------------------------- */

struct run {
	int status;		/* t_wait_child's: 128 + signal, -1 hung */
	char out[65536];	/* stdout and stderr, NUL-terminated */
};

static int spawn_stat(const char *const *args, int out_fd)
{
	const char *argv[16];
	int pid, n = 0;

	argv[n++] = QPS_STAT_BIN;
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		dup2(out_fd, 1);
		dup2(out_fd, 2);
		execv(QPS_STAT_BIN, (char *const *)argv);
		_exit(126);
	}
	return pid;
}

static void run_stat(struct run *r, const char *const *args)
{
	int fd = memfd_create("qps_stat-out", MFD_CLOEXEC);
	ssize_t n;
	int pid;

	memset(r, 0, sizeof(*r));
	CU_ASSERT_FATAL(fd >= 0);
	pid = spawn_stat(args, fd);
	CU_ASSERT_FATAL(pid > 0);
	r->status = t_wait_child(pid, STAT_TIMEOUT_MS);
	n = pread(fd, r->out, sizeof(r->out) - 1, 0);
	r->out[n > 0 ? n : 0] = '\0';
	close(fd);
	if (r->status != 0)
		printf("\n    qps_stat exit %d:\n%s", r->status, r->out);
}

/* Neither hung nor killed by a signal. */
static void expect_ended(const struct run *r)
{
	CU_ASSERT(r->status >= 0 && r->status < 126);
}

static int has(const struct run *r, const char *s)
{
	return strstr(r->out, s) != NULL;
}

/* ---- segments to alter ------------------------------------------------- */

/* A context of this process publishing a small segment. */
static struct qps_ctx *live_ctx(void)
{
	return t_suite_ctx(g_wire, NULL);
}

static void fake_path(char *buf, size_t len, unsigned int k)
{
	snprintf(buf, len, "%s/%s%d.%u", QPS_STAT_DIR, QPS_STAT_PREFIX,
		 (int)getpid(), FAKE_CTX + k);
}

/* A copy of @ctx's segment as context FAKE_CTX + @k of this process. */
static void *fake_image(struct qps_ctx *ctx, unsigned int k, size_t *len)
{
	struct qps_stat_hdr *h;
	void *img = malloc(ctx->stat.size);

	CU_ASSERT_FATAL(img != NULL && ctx->stat.shm);
	memcpy(img, ctx->stat.base, ctx->stat.size);
	h = img;
	h->ctx_id = FAKE_CTX + k;
	*len = ctx->stat.size;
	return img;
}

static int write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t n;

	CU_ASSERT_FATAL(fd >= 0);
	n = write(fd, p, len);
	CU_ASSERT_FATAL(n == (ssize_t)len);
	return fd;
}

static void fake_write(struct qps_ctx *ctx, unsigned int k)
{
	char path[128];
	size_t len;
	void *img = fake_image(ctx, k, &len);

	fake_path(path, sizeof(path), k);
	close(write_file(path, img, len));
	free(img);
}

/* Everything this suite made under /dev/shm. */
static void fake_cleanup(void)
{
	char path[128];
	unsigned int k;

	for (k = 0; k < 16; k++) {
		fake_path(path, sizeof(path), k);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/qpsock-statt-%d", QPS_STAT_DIR,
		 (int)getpid());
	unlink(path);
}

static void args_pk(const char **a, char *pid, char *ctx, unsigned int k)
{
	snprintf(pid, 16, "%d", (int)getpid());
	snprintf(ctx, 16, "%u", FAKE_CTX + k);
	a[0] = "-p";
	a[1] = pid;
	a[2] = "-c";
	a[3] = ctx;
	a[4] = NULL;
}

/* ---- the cases --------------------------------------------------------- */

/* Any user can make a FIFO under a segment's name: opening it for reading
 * waited for a writer forever. */
static void test_fifo(void)
{
	const char *a[8], *list[] = { NULL };
	char path[128], p[16], c[16];
	struct run r;

	fake_path(path, sizeof(path), 1);
	T_EQ_FATAL(mkfifo(path, 0666), 0);
	args_pk(a, p, c, 1);
	run_stat(&r, a);
	expect_ended(&r);
	T_EQ(r.status, 1);
	CU_ASSERT(has(&r, "not a regular file"));
	run_stat(&r, list);
	expect_ended(&r);
	fake_cleanup();
}

/* An offset near 2^64 wrapped the bounds check and was read from. */
static void test_wrapped_offset(void)
{
	const char *a[8];
	char path[128], p[16], c[16];
	struct qps_stat_hdr *h;
	struct qps_ctx *ctx;
	struct run r;
	size_t len;
	void *img;

	t_suite_begin();
	ctx = live_ctx();
	img = fake_image(ctx, 2, &len);
	h = img;
	h->off_rx = 0 - (uint64_t)sizeof(struct qps_stats) + 64;
	fake_path(path, sizeof(path), 2);
	close(write_file(path, img, len));
	free(img);
	args_pk(a, p, c, 2);
	run_stat(&r, a);
	expect_ended(&r);
	T_EQ(r.status, 1);
	CU_ASSERT(has(&r, "malformed"));
	fake_cleanup();
	t_suite_end();
}

/* A symbolic link named like a segment: followed, it reads any file the
 * reader may read (and lets the link's owner choose what is shown). */
static void test_symlink(void)
{
	char path[128], target[128], p[16], c[16];
	const char *a[8];
	struct run r;
	size_t len;
	void *img;

	t_suite_begin();
	img = fake_image(live_ctx(), 3, &len);
	snprintf(target, sizeof(target), "%s/qpsock-statt-%d", QPS_STAT_DIR,
		 (int)getpid());
	close(write_file(target, img, len));
	free(img);
	fake_path(path, sizeof(path), 3);
	T_EQ_FATAL(symlink(target, path), 0);
	args_pk(a, p, c, 3);
	run_stat(&r, a);
	expect_ended(&r);
	T_EQ(r.status, 1);
	CU_ASSERT(has(&r, "symbolic link"));
	fake_cleanup();
	t_suite_end();
}

/* Another user's file claiming one of our pids: its counters would be
 * shown as ours. */
static void test_other_owner(void)
{
	char path[128], p[16], c[16];
	const char *a[8];
	struct run r;

	if (geteuid() != 0) {
		printf("skipped: needs root (chown) ");
		return;
	}
	t_suite_begin();
	fake_write(live_ctx(), 4);
	fake_path(path, sizeof(path), 4);
	T_EQ_FATAL(chown(path, NOBODY, NOBODY), 0);
	args_pk(a, p, c, 4);
	run_stat(&r, a);
	expect_ended(&r);
	T_EQ(r.status, 1);
	CU_ASSERT(has(&r, "owned by another user"));
	CU_ASSERT(!has(&r, "context 7004:"));
	fake_cleanup();
	t_suite_end();
}

/* Read line by line from @fd until @n lines came, or EOF, or 5 s. */
static int read_lines(int fd, int n)
{
	uint64_t end = t_now_ms() + 5000;
	int got = 0;
	char ch;

	while (got < n && t_now_ms() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		if (read(fd, &ch, 1) != 1)
			break;
		got += ch == '\n';
	}
	return got;
}

/* A segment truncated while qps_stat watches it: its pages past the new
 * end raised SIGBUS in the reader's mapping. */
static void test_truncated(void)
{
	const char *a[] = { "-p", NULL, "-c", NULL, "-i", "0.2", "-n", "10",
			    NULL };
	char path[128], p[16], c[16];
	int fd, pfd[2], pid;
	size_t len, got;
	ssize_t n;
	void *img;
	static struct run r;

	t_suite_begin();
	img = fake_image(live_ctx(), 5, &len);
	fake_path(path, sizeof(path), 5);
	fd = write_file(path, img, len);
	free(img);
	snprintf(p, sizeof(p), "%d", (int)getpid());
	snprintf(c, sizeof(c), "%u", FAKE_CTX + 5);
	a[1] = p;
	a[3] = c;
	T_EQ_FATAL(pipe2(pfd, O_CLOEXEC), 0);
	pid = spawn_stat(a, pfd[1]);
	close(pfd[1]);
	CU_ASSERT_FATAL(pid > 0);
	/* The header, then one reading: the segment is being watched. */
	T_EQ(read_lines(pfd[0], 2), 2);
	T_EQ(ftruncate(fd, 4096), 0);
	close(fd);
	got = 0;
	while ((n = read(pfd[0], r.out + got, sizeof(r.out) - 1 - got)) > 0)
		got += (size_t)n;
	r.out[got] = '\0';
	close(pfd[0]);
	r.status = t_wait_child(pid, STAT_TIMEOUT_MS);
	if (r.status)
		printf("\n    qps_stat exit %d:\n%s", r.status, r.out);
	expect_ended(&r);
	CU_ASSERT(has(&r, "malformed") || has(&r, "truncated"));
	fake_cleanup();
	t_suite_end();
}

/* A command name (any process sets its own: PR_SET_NAME) or any other
 * string of the file went to the terminal raw, escape sequences and all. */
static void test_escaped(void)
{
	static const char evil[] = "e\033[2Jv\a\\";
	const char *a[8], *j[8];
	char path[128], p[16], c[16];
	struct qps_stat_hdr *h;
	struct run r;
	size_t len, i;
	void *img;

	t_suite_begin();
	img = fake_image(live_ctx(), 6, &len);
	h = img;
	memset(h->comm, 0, sizeof(h->comm));
	memcpy(h->comm, evil, sizeof(evil) - 1);
	h->dev[0] = 0x7f;
	h->dev[1] = (char)0x9b;	/* CSI on 8-bit terminals */
	h->dev[2] = 0;
	fake_path(path, sizeof(path), 6);
	close(write_file(path, img, len));
	free(img);
	args_pk(a, p, c, 6);
	run_stat(&r, a);
	expect_ended(&r);
	T_EQ(r.status, 0);
	CU_ASSERT(has(&r, "(e\\033[2Jv\\007\\134)"));
	CU_ASSERT(has(&r, "\\177\\233"));
	for (i = 0; r.out[i]; i++)
		if (r.out[i] != '\n' && !(r.out[i] >= 0x20 && r.out[i] < 0x7f))
			break;
	T_EQ(r.out[i], 0);
	/* JSON too: only printable ASCII inside the strings. */
	memcpy(j, a, sizeof(j));
	j[4] = "--json";
	j[5] = NULL;
	run_stat(&r, j);
	T_EQ(r.status, 0);
	CU_ASSERT(has(&r, "\"command\":\"e\\\\033[2Jv\\\\007\\\\134\""));
	for (i = 0; r.out[i]; i++)
		if (r.out[i] != '\n' && !(r.out[i] >= 0x20 && r.out[i] < 0x7f))
			break;
	T_EQ(r.out[i], 0);
	fake_cleanup();
	t_suite_end();
}

/* The name a context would take is already there, made by someone else:
 * it was removed (another user's file, maybe another PID namespace's live
 * segment) or, when it could not be, publishing was silently off. */
static void test_precreated(void)
{
	char path[128], want[128], p[16], c[16], buf[16];
	struct qps_ctx *ctx;
	const char *a[8];
	struct stat st;
	uint32_t id;
	struct run r;
	int fd;

	t_suite_begin();
	ctx = live_ctx();
	id = ctx->stat.hdr->ctx_id + 1;
	snprintf(path, sizeof(path), "%s/%s%d.%u", QPS_STAT_DIR,
		 QPS_STAT_PREFIX, (int)getpid(), id);
	fd = write_file(path, "squatter", 8);
	close(fd);
	if (geteuid() == 0)
		T_EQ(chown(path, NOBODY, NOBODY), 0);
	ctx = live_ctx();
	T_EQ_FATAL(ctx->stat.hdr->ctx_id, id);
	/* Published, under another name; the squatter's file untouched. */
	CU_ASSERT(ctx->stat.shm);
	snprintf(want, sizeof(want), "/%s%d.%u", QPS_STAT_PREFIX,
		 (int)getpid(), id);
	CU_ASSERT(strcmp(ctx->stat.name, want) != 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	T_EQ(fd >= 0, 1);
	if (fd >= 0) {
		T_EQ(read(fd, buf, sizeof(buf)), 8);
		T_EQ(fstat(fd, &st), 0);
		close(fd);
	}
	/* qps_stat finds it by its context number. */
	args_pk(a, p, c, 0);
	snprintf(c, sizeof(c), "%u", id);
	run_stat(&r, a);
	expect_ended(&r);
	snprintf(want, sizeof(want), "context %u: emu", id);
	CU_ASSERT(has(&r, want));
	unlink(path);
	t_suite_end();
	T_EQ(access(path, F_OK), -1);
}

/* ---- stale segments ---------------------------------------------------- */

/* A child that opens a context, sends its segment's name up @up and
 * waits for a byte on @down (or EOF) before closing it. On the null
 * provider where built: it shares nothing, so a killed child leaves no
 * wire behind and a child in another PID namespace meets no port whose
 * owner's pid it cannot see. */
static void publisher(int up, int down, const char *wire)
{
	struct qps_ctx_attr at = { .comp_mask = QPS_CTX_ATTR_PROVIDER |
						QPS_CTX_ATTR_NUM_TXQ,
				   .provider = "null", .num_txq = 1 };
	struct qps_ctx *ctx = NULL;
	char b;

	if (qps_ctx_create(&at, &ctx) == -ENOENT) {
		at = t_emu_attr(wire, NULL);
		if (qps_ctx_create(&at, &ctx) != 0)
			_exit(3);
	}
	if (!ctx)
		_exit(3);
	if (write(up, ctx->stat.name, sizeof(ctx->stat.name)) !=
	    (ssize_t)sizeof(ctx->stat.name))
		_exit(4);
	if (read(down, &b, 1) < 0)
		_exit(5);
	qps_ctx_destroy(ctx);
	_exit(0);
}

/* The segment name a publisher sent, within 10 s; "" if none. */
static void read_name(int fd, char *name, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	name[0] = '\0';
	if (poll(&pfd, 1, 10000) == 1 && read(fd, name, len) == (ssize_t)len)
		name[len - 1] = '\0';
	else
		name[0] = '\0';
}

/* The emu wire of a killed publisher, if it used one. */
static void wire_cleanup(const char *wire)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/qpsock-emu-%s", QPS_STAT_DIR, wire);
	unlink(path);
}

static int shm_exists(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s%s", QPS_STAT_DIR, name);
	return access(path, F_OK) == 0;
}

/* A killed process's segment is stale and goes; a live one stays. */
static void test_stale_removed(void)
{
	char name[64], p[16], wire[64];
	const char *a[] = { "-p", p, NULL };
	int up[2], down[2], pid;
	struct run r;

	t_wire_name(wire, sizeof(wire), "statk");
	T_EQ_FATAL(pipe2(up, O_CLOEXEC), 0);
	T_EQ_FATAL(pipe2(down, O_CLOEXEC), 0);
	pid = fork();
	if (pid == 0)
		publisher(up[1], down[0], wire);
	read_name(up[0], name, sizeof(name));
	CU_ASSERT_FATAL(name[0] != '\0');
	snprintf(p, sizeof(p), "%d", pid);
	run_stat(&r, a);
	T_EQ(r.status, 0);
	CU_ASSERT(shm_exists(name));
	kill(pid, SIGKILL);
	T_EQ(t_wait_child(pid, 5000), 128 + SIGKILL);
	run_stat(&r, a);
	T_EQ(r.status, 1);
	CU_ASSERT(has(&r, "is gone: stale, removed"));
	CU_ASSERT(!shm_exists(name));
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	t_stat_reap(pid);
	wire_cleanup(wire);
}

/*
 * PID namespaces that share /dev/shm (containers): a process that is pid
 * 1 in its namespace publishes qpsock-stat.1.<n>, and pid 1 here (init)
 * started at another time: it was taken for a reused pid and its live
 * segment removed.
 */
static void test_stale_other_pidns(void)
{
	const char *a[] = { "-p", "1", NULL };
	char name[64], wire[64];
	int up[2], down[2], pid;
	struct run r;

	if (geteuid() != 0) {
		printf("skipped: needs root (CLONE_NEWPID) ");
		return;
	}
	t_wire_name(wire, sizeof(wire), "statns");
	T_EQ_FATAL(pipe2(up, O_CLOEXEC), 0);
	T_EQ_FATAL(pipe2(down, O_CLOEXEC), 0);
	pid = fork();
	if (pid == 0) {
		int st, g;

		if (unshare(CLONE_NEWPID) != 0)
			_exit(77);
		g = fork();
		if (g == 0)
			publisher(up[1], down[0], wire);
		if (g < 0 || waitpid(g, &st, 0) != g)
			_exit(6);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 7);
	}
	read_name(up[0], name, sizeof(name));
	CU_ASSERT(strncmp(name, "/qpsock-stat.1.", 15) == 0);
	if (name[0]) {
		run_stat(&r, a);
		expect_ended(&r);
		CU_ASSERT(!has(&r, "stale, removed"));
		CU_ASSERT(shm_exists(name));
	}
	T_EQ(write(down[1], "x", 1), 1);
	T_EQ(t_wait_child(pid, 10000), 0);
	CU_ASSERT(!name[0] || !shm_exists(name));
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	wire_cleanup(wire);
}

/* Fork until a child gets pid @want (ns_last_pid, root): 0 when it did,
 * the child running publisher(); -1 after 50 tries (other processes took
 * the pid first). */
static int fork_as(int want, int up, int down, const char *wire)
{
	int i, pid, fd;

	for (i = 0; i < 50; i++) {
		char v[16];
		int n = snprintf(v, sizeof(v), "%d", want - 1);

		fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		if (write(fd, v, (size_t)n) != n) {
			close(fd);
			return -1;
		}
		close(fd);
		pid = fork();
		if (pid == 0) {
			if (getpid() != want)
				_exit(0);
			publisher(up, down, wire);
		}
		if (pid == want)
			return 0;
		t_wait_child(pid, 5000);
	}
	return -1;
}

/*
 * Watching a process that dies while a new one takes its pid and its
 * segment name (pid reuse): the new, live segment was removed as the old
 * process's.
 */
static void test_stale_pid_reuse(void)
{
	const char *a[] = { "-p", NULL, "-i", "2", "-n", "2", NULL };
	char name1[64], name2[64], p[16], wire[64], path[128];
	int up[2], down[2], pid, fd, spid, i;
	struct run r;

	if (geteuid() != 0) {
		printf("skipped: needs root (ns_last_pid) ");
		return;
	}
	t_wire_name(wire, sizeof(wire), "statr");
	T_EQ_FATAL(pipe2(up, O_CLOEXEC), 0);
	T_EQ_FATAL(pipe2(down, O_CLOEXEC), 0);
	pid = fork();
	if (pid == 0)
		publisher(up[1], down[0], wire);
	read_name(up[0], name1, sizeof(name1));
	CU_ASSERT_FATAL(name1[0] != '\0');
	snprintf(p, sizeof(p), "%d", pid);
	a[1] = p;
	fd = memfd_create("qps_stat-out", MFD_CLOEXEC);
	spid = spawn_stat(a, fd);
	/* Its header line: the first reading is done. */
	for (i = 0; i < 500 && lseek(fd, 0, SEEK_END) == 0; i++)
		t_sleep_ms(10);
	kill(pid, SIGKILL);
	t_wait_child(pid, 5000);
	snprintf(path, sizeof(path), "%s%s", QPS_STAT_DIR, name1);
	unlink(path);
	if (fork_as(pid, up[1], down[0], wire) != 0) {
		printf("skipped: pid %d not reused ", pid);
		t_wait_child(spid, STAT_TIMEOUT_MS);
	} else {
		read_name(up[0], name2, sizeof(name2));
		T_EQ(strcmp(name1, name2), 0);
		r.status = t_wait_child(spid, STAT_TIMEOUT_MS);
		expect_ended(&r);
		memset(r.out, 0, sizeof(r.out));
		T_EQ(pread(fd, r.out, sizeof(r.out) - 1, 0) > 0, 1);
		CU_ASSERT(!has(&r, "stale, removed"));
		CU_ASSERT(shm_exists(name2));
		T_EQ(write(down[1], "x", 1), 1);
		T_EQ(t_wait_child(pid, 10000), 0);
	}
	close(fd);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	t_stat_reap(pid);
	wire_cleanup(wire);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "a FIFO: refused, no hang", test_fifo },
		{ "an offset that wraps: refused", test_wrapped_offset },
		{ "a symbolic link: refused", test_symlink },
		{ "another user's file claiming our pid: refused",
		  test_other_owner },
		{ "truncated while watched: no SIGBUS", test_truncated },
		{ "strings from the file: escaped", test_escaped },
		{ "a pre-created name: another name, still found",
		  test_precreated },
		{ "stale: a killed process's segment removed",
		  test_stale_removed },
		{ "stale: another PID namespace's live segment kept",
		  test_stale_other_pidns },
		{ "stale: a reused pid's live segment kept",
		  test_stale_pid_reuse },
		CU_TEST_INFO_NULL,
	};

	unsetenv("QPS_STATS");
	t_wire_name(g_wire, sizeof(g_wire), "statrd");
	atexit(fake_cleanup);
	atexit(t_suite_cleanup);
	return t_run("stat_reader", tests);
}
