// SPDX-License-Identifier: MIT
/*
 * A UDP socket shared across fork, as servers share it: a daemon whose
 * parent exits, prefork workers that all receive on one socket, and a
 * fork per request (socat's UDP-LISTEN,fork: the parent peeks the first
 * datagram, forks, closes its copy and binds a new socket; the child
 * connects the inherited one to the sender and answers it).
 *
 * This program is the client, with kernel sockets; it starts itself in
 * "server" mode as the program under test: on the kernel (127.0.0.1), or
 * under qpsock-run in another network namespace (PL_FORK_SERVER is the
 * command prefix, PL_TEST_ADDR the server's address). The assertions are
 * the same both ways. With PL_FORK_QPSOCK=1 the server's --stats lines
 * (its stderr, in PL_FORK_LOG) must show the datagrams went through
 * qpsock. PL_FORK_CASES limits the cases (emu: daemon only; docs/preload.md
 * "fork" says why).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#define PORT_DAEMON 47301
#define PORT_PREFORK 47302
#define PORT_FORKREQ 47303
#define WORKERS 3
#define N_MSGS 40

/* --- server side: the program under test ---------------------------- */

static int server_socket(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	int one = 1, fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("server bind");
		close(fd);
		return -1;
	}
	return fd;
}

/* Echoes every datagram until "quit"; returns how many it echoed. */
static int echo_loop(int fd)
{
	char buf[256];
	int n = 0;

	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t r = recvfrom(fd, buf, sizeof(buf), 0,
				     (struct sockaddr *)&from, &fl);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			perror("server recvfrom");
			return -1;
		}
		if (r == 4 && !memcmp(buf, "quit", 4))
			return n;
		if (sendto(fd, buf, (size_t)r, 0, (struct sockaddr *)&from,
			   fl) != r) {
			perror("server sendto");
			return -1;
		}
		n++;
	}
}

static int server_daemon(void)
{
	int fd = server_socket(PORT_DAEMON);
	pid_t pid;

	if (fd < 0)
		return 1;
	/* The classic double fork: the caller sees the first parent exit. */
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid > 0)
		exit(0);
	setsid();
	pid = fork();
	if (pid < 0)
		_exit(1);
	if (pid > 0)
		_exit(0);
	exit(echo_loop(fd) < 0);
}

static int server_prefork(void)
{
	int fd = server_socket(PORT_PREFORK), i, st, bad = 0;

	if (fd < 0)
		return 1;
	for (i = 0; i < WORKERS; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0)
			exit(echo_loop(fd) < 0);
	}
	/* The parent keeps the socket open and never touches it again. */
	for (i = 0; i < WORKERS; i++)
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	close(fd);
	return bad != 0;
}

static int server_forkreq(int requests)
{
	int i;

	for (i = 0; i < requests; i++) {
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		int fd = server_socket(PORT_FORKREQ);
		char b;
		pid_t pid;

		if (fd < 0)
			return 1;
		if (recvfrom(fd, &b, 1, MSG_PEEK, (struct sockaddr *)&peer,
			     &pl) < 0) {
			perror("server peek");
			return 1;
		}
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			char buf[256];
			ssize_t r;

			if (connect(fd, (struct sockaddr *)&peer, pl) < 0) {
				perror("child connect");
				exit(1);
			}
			r = recv(fd, buf, sizeof(buf), 0);
			if (r < 0 || send(fd, buf, (size_t)r, 0) != r) {
				perror("child echo");
				exit(1);
			}
			exit(0);
		}
		close(fd);
		/* socat waits for the child before it binds again. */
		if (waitpid(pid, NULL, 0) < 0)
			return 1;
	}
	return 0;
}

/* --- client side: the assertions ------------------------------------- */

static struct in_addr srv_addr;
static int cases = 7;	/* bit 0 daemon, 1 prefork, 2 forkreq */

#define EQ(a, b) CU_ASSERT_EQUAL((long)(a), (long)(b))

static pid_t start_server(const char *mode)
{
	const char *prefix = getenv("PL_FORK_SERVER");
	const char *log = getenv("PL_FORK_LOG");
	char cmd[1024];
	pid_t pid;

	(void)snprintf(cmd, sizeof(cmd), "exec %s /proc/%d/exe server %s %s",
		       prefix ? prefix : "", (int)getpid(), mode,
		       log ? "2>>\"$PL_FORK_LOG\"" : "");
	pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int client_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	CU_ASSERT_FATAL(fd >= 0);
	return fd;
}

/* Sends @msg to @port until it comes back (the server may be between
 * two processes, or not bound yet: on emu a send to an address nobody
 * serves fails at once); true when it did. */
static bool echo(int fd, int port, const char *msg, int tries)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = srv_addr,
				  .sin_port = htons((uint16_t)port) };
	size_t len = strlen(msg);
	char buf[256];

	while (tries-- > 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (sendto(fd, msg, len, 0, (struct sockaddr *)&to,
			   sizeof(to)) != (ssize_t)len) {
			usleep(300000);
			continue;
		}
		while (poll(&p, 1, 300) == 1) {
			ssize_t r = recv(fd, buf, sizeof(buf), 0);

			if (r == (ssize_t)len && !memcmp(buf, msg, len))
				return true;
		}
	}
	return false;
}

static void send_quit(int fd, int port)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = srv_addr,
				  .sin_port = htons((uint16_t)port) };

	(void)sendto(fd, "quit", 4, 0, (struct sockaddr *)&to, sizeof(to));
}

/* Waits up to @ms for @pid; its exit status, or -1. */
static int reap(pid_t pid, int ms)
{
	int st;

	for (; ms > 0; ms -= 10) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* Kernel semantics: each echoed datagram was received once. */
static void exchange(int port, int n, int *got_out)
{
	int fd = client_socket(), i, got = 0;
	char msg[32];

	for (i = 0; i < n; i++) {
		(void)snprintf(msg, sizeof(msg), "msg-%d", i);
		got += echo(fd, port, msg, 10);
	}
	close(fd);
	*got_out = got;
}

static void test_daemon(void)
{
	pid_t pid;
	int got, fd, i;

	if (!(cases & 1)) {
		printf("skipped on this provider ");
		return;
	}
	pid = start_server("daemon");
	/* The first parent exits once the daemon runs. */
	EQ(reap(pid, 10000), 0);
	exchange(PORT_DAEMON, N_MSGS, &got);
	EQ(got, N_MSGS);
	fd = client_socket();
	for (i = 0; i < 20; i++) {
		send_quit(fd, PORT_DAEMON);
		usleep(50000);
	}
	close(fd);
}

static void test_prefork(void)
{
	pid_t pid;
	int got, fd, i;

	if (!(cases & 2)) {
		printf("skipped on this provider ");
		return;
	}
	pid = start_server("prefork");
	exchange(PORT_PREFORK, N_MSGS, &got);
	EQ(got, N_MSGS);
	/* One quit per worker: each datagram reaches exactly one. */
	fd = client_socket();
	for (i = 0; i < WORKERS; i++) {
		send_quit(fd, PORT_PREFORK);
		usleep(100000);
	}
	EQ(reap(pid, 10000), 0);
	close(fd);
}

static void test_forkreq(void)
{
	pid_t pid;
	int i, ok = 0;

	if (!(cases & 4)) {
		printf("skipped on this provider ");
		return;
	}
	pid = start_server("forkreq");
	/* A new client each time, as `socat - UDP:host:port` is. */
	for (i = 0; i < 5; i++) {
		int fd = client_socket();
		char msg[32];

		(void)snprintf(msg, sizeof(msg), "request-%d", i);
		ok += echo(fd, PORT_FORKREQ, msg, 20);
		close(fd);
	}
	EQ(ok, 5);
	EQ(reap(pid, 10000), 0);
}

/* The server's --stats lines: datagrams received through qpsock. */
static void test_via_qpsock(void)
{
	const char *log = getenv("PL_FORK_LOG");
	const char *want = getenv("PL_FORK_QPSOCK");
	long total = 0;
	char line[1024];
	FILE *f;

	if (!want || strcmp(want, "1") || !log)
		return;
	usleep(300000);
	f = fopen(log, "r");
	CU_ASSERT_FATAL(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, " udp ");
		const char *rx = p ? strstr(p, ": rx ") : NULL;

		if (rx && strstr(line, "via qpsock"))
			total += strtol(rx + 5, NULL, 10);
	}
	fclose(f);
	printf("\n  server sockets received %ld datagrams through qpsock\n",
	       total);
	CU_ASSERT(total >= N_MSGS * (__builtin_popcount(cases & 3)));
}

int main(int argc, char **argv)
{
	const char *a = getenv("PL_TEST_ADDR"), *c = getenv("PL_FORK_CASES");
	CU_pSuite s;
	unsigned int fails;

	if (argc >= 3 && !strcmp(argv[1], "server")) {
		if (!strcmp(argv[2], "daemon"))
			return server_daemon();
		if (!strcmp(argv[2], "prefork"))
			return server_prefork();
		if (!strcmp(argv[2], "forkreq"))
			return server_forkreq(5);
		return 2;
	}
	if (!a || inet_pton(AF_INET, a, &srv_addr) != 1)
		inet_pton(AF_INET, "127.0.0.1", &srv_addr);
	if (c)
		cases = atoi(c);
	signal(SIGPIPE, SIG_IGN);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("preload_fork", NULL, NULL);
	CU_add_test(s, "daemon: the parent exits, the child serves", test_daemon);
	CU_add_test(s, "prefork: workers share one socket", test_prefork);
	CU_add_test(s, "fork per request (socat)", test_forkreq);
	CU_add_test(s, "the datagrams went through qpsock", test_via_qpsock);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
