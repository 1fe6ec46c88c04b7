/*
 * The kernel's floor under benches/asgi_conn.py (issue 31): the least a FastCGI responder
 * on a unix socket can do per request, so that what a new connection costs it more than a
 * kept one is the kernel's making and unmaking of a socket and the wake-ups around it,
 * with no interpreter, no framing layer and no accounting on top.
 *
 * It speaks just enough FastCGI for asgi_conn.py's client: it reads one request's records
 * (BEGIN_REQUEST, PARAMS, the empty STDIN that ends them), answers a fixed STDOUT, the empty
 * STDOUT and END_REQUEST, and closes the connection unless BEGIN_REQUEST asked for
 * FCGI_KEEP_CONN. Two ways to wait, as the two kinds of server do:
 *
 * - epoll: one thread, the listener and every connection non-blocking in one epoll set
 *   (level-triggered), as an event loop serves them (drover's hub, uvloop);
 * - blocking: accept, read, write, close, one connection at a time, as a pre-fork worker
 *   of php-fpm's kind does: no epoll set to join or leave.
 *
 *     cc -O2 -o /tmp/conn_floor benches/conn_floor.c
 *     /tmp/conn_floor /tmp/floor.sock epoll &      # then asgi_conn.py /tmp/floor.sock:PID
 *
 * Prints "ready" once it listens; runs until a signal ends it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { BEGIN_REQUEST = 1, END_REQUEST = 3, STDOUT = 6, STDIN = 5, KEEP_CONN = 1 };

/* A request's records fit in this: asgi_conn.py's come to about 300 bytes. */
#define BUFFER 4096
#define MAX_FD 1024

struct conn {
	size_t have;
	unsigned char buf[BUFFER];
};

static struct conn *conns[MAX_FD];

/* The answer, built once: STDOUT with the headers and body, the empty STDOUT, END_REQUEST
 * (app status 0, FCGI_REQUEST_COMPLETE), all for request id 1 (asgi_conn.py's). */
static unsigned char answer[256];
static size_t answer_len;

static void record(int type, const char *content, size_t len)
{
	unsigned char *h = answer + answer_len;
	h[0] = 1;
	h[1] = type;
	h[2] = 0;
	h[3] = 1;
	h[4] = len >> 8;
	h[5] = len & 0xff;
	h[6] = 0;
	h[7] = 0;
	memcpy(h + 8, content, len);
	answer_len += 8 + len;
}

static void build_answer(void)
{
	static const char body[] = "Status: 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\n"
				   "Hello, world!\n";
	static const char end[8] = { 0 };
	record(STDOUT, body, sizeof body - 1);
	record(STDOUT, "", 0);
	record(END_REQUEST, end, sizeof end);
}

/* Whether buf holds a whole request (its empty STDIN record); *keep is BEGIN_REQUEST's
 * FCGI_KEEP_CONN flag. */
static int complete(const unsigned char *buf, size_t have, int *keep)
{
	size_t at = 0;
	while (at + 8 <= have) {
		size_t len = (buf[at + 4] << 8) | buf[at + 5], padding = buf[at + 6];
		if (at + 8 + len + padding > have) {
			return 0;
		}
		if (buf[at + 1] == BEGIN_REQUEST && len >= 3) {
			*keep = buf[at + 8 + 2] & KEEP_CONN;
		} else if (buf[at + 1] == STDIN && len == 0) {
			return 1;
		}
		at += 8 + len + padding;
	}
	return 0;
}

static int listener(const char *path, int flags)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof addr.sun_path) {
		fprintf(stderr, "socket path too long: %s\n", path);
		exit(2);
	}
	strcpy(addr.sun_path, path);
	unlink(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 511) < 0) {
		perror("listen");
		exit(2);
	}
	return fd;
}

static void ready(void)
{
	printf("ready\n");
	fflush(stdout);
}

/* Reads what fd has; answers when a request is whole. Returns 0 once fd is to be closed. */
static int serve(int fd, struct conn *c)
{
	ssize_t got = read(fd, c->buf + c->have, BUFFER - c->have);
	if (got <= 0) {
		return got < 0 && errno == EAGAIN;
	}
	c->have += got;
	int keep = 0;
	if (!complete(c->buf, c->have, &keep)) {
		return c->have < BUFFER;
	}
	c->have = 0;
	if (write(fd, answer, answer_len) != (ssize_t)answer_len) {
		return 0;
	}
	return keep;
}

static void run_epoll(const char *path)
{
	int lfd = listener(path, SOCK_NONBLOCK);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	ready();
	for (;;) {
		struct epoll_event events[64];
		int n = epoll_wait(ep, events, 64, -1);
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;
			if (fd == lfd) {
				int s;
				while ((s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					if (s >= MAX_FD) {
						close(s);
						continue;
					}
					if (!conns[s]) {
						conns[s] = malloc(sizeof(struct conn));
					}
					conns[s]->have = 0;
					struct epoll_event e = { .events = EPOLLIN, .data.fd = s };
					epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
				}
			} else if (!serve(fd, conns[fd])) {
				/* The close takes the socket out of the set: its file has no other descriptor. */
				close(fd);
			}
		}
	}
}

static void run_blocking(const char *path)
{
	int lfd = listener(path, 0);
	struct conn *c = malloc(sizeof(struct conn));
	ready();
	for (;;) {
		int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (s < 0) {
			continue;
		}
		c->have = 0;
		while (serve(s, c)) {
		}
		close(s);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[2], "epoll") != 0 && strcmp(argv[2], "blocking") != 0)) {
		fprintf(stderr, "usage: %s SOCKET epoll|blocking\n", argv[0]);
		return 2;
	}
	build_answer();
	if (strcmp(argv[2], "epoll") == 0) {
		run_epoll(argv[1]);
	} else {
		run_blocking(argv[1]);
	}
	return 0;
}
