/*
 * The kernel's floor under benches/asgi_conn.py (issue 31): the least a FastCGI responder
 * on a unix socket can do per request, so that what a new connection costs it more than a
 * kept one is the kernel's making and unmaking of a socket and the wake-ups around it,
 * with no interpreter, no framing layer and no accounting on top.
 *
 * It speaks just enough FastCGI for asgi_conn.py's client: it reads one request's records
 * (BEGIN_REQUEST, PARAMS, the empty STDIN that ends them), answers a fixed STDOUT, the empty
 * STDOUT and END_REQUEST, and closes the connection unless BEGIN_REQUEST asked for
 * FCGI_KEEP_CONN. Three ways to wait, as the kinds of server do:
 *
 * - epoll: one thread, the listener and every connection non-blocking in one epoll set
 *   (level-triggered), as an event loop serves them (uvloop; drover's hub its connections);
 * - blocking: accept, read, write, close, one connection at a time, as a pre-fork worker
 *   of php-fpm's kind does: no epoll set to join or leave;
 * - uring: the epoll loop, but the listener blocking and its accepts made through io_uring
 *   (one IORING_OP_ACCEPT in flight, the ring's descriptor in the epoll set, re-armed after
 *   each completion), as drover's ASGI hub accepts on a listener its workers share
 *   (crates/python/src/asgi/ring.rs): what that design costs a connection, without drover.
 *
 *     cc -O2 -o /tmp/conn_floor benches/conn_floor.c
 *     /tmp/conn_floor /tmp/floor.sock epoll &      # then asgi_conn.py /tmp/floor.sock:PID
 *
 * Prints "ready" once it listens; runs until a signal ends it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

static void adopt(int ep, int s);

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
					adopt(ep, s);
				}
			} else if (!serve(fd, conns[fd])) {
				/* The close takes the socket out of the set: its file has no other descriptor. */
				close(fd);
			}
		}
	}
}

/* An io_uring of a few entries, by its system calls (no liburing on this machine). */
struct uring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static void *map(int fd, size_t len, off_t what)
{
	void *at = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, what);
	if (at == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return at;
}

static void uring_init(struct uring *u)
{
	struct io_uring_params p = { 0 };
	u->fd = syscall(__NR_io_uring_setup, 8, &p);
	if (u->fd < 0) {
		perror("io_uring_setup");
		exit(2);
	}
	size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	int single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single && cq_len > sq_len) {
		sq_len = cq_len;
	}
	char *sq = map(u->fd, sq_len, IORING_OFF_SQ_RING);
	char *cq = single ? sq : map(u->fd, cq_len, IORING_OFF_CQ_RING);
	u->sqes = map(u->fd, p.sq_entries * sizeof(struct io_uring_sqe), IORING_OFF_SQES);
	u->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	u->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	u->sq_array = (unsigned *)(sq + p.sq_off.array);
	u->cq_head = (unsigned *)(cq + p.cq_off.head);
	u->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	u->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* Submits one accept on lfd (the connection non-blocking, as drover's hub asks). */
static void arm_accept(struct uring *u, int lfd)
{
	unsigned tail = *u->sq_tail, i = tail & *u->sq_mask;
	struct io_uring_sqe *e = &u->sqes[i];
	memset(e, 0, sizeof *e);
	e->opcode = IORING_OP_ACCEPT;
	e->fd = lfd;
	e->accept_flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
	u->sq_array[i] = i;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, u->fd, 1, 0, 0, NULL, 0) != 1) {
		perror("io_uring_enter");
		exit(2);
	}
}

/* The next completion's result (a new socket, or -errno); 0 in *none when there is none. */
static int reap(struct uring *u, int *none)
{
	unsigned head = *u->cq_head;
	*none = head == __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE);
	if (*none) {
		return 0;
	}
	int res = u->cqes[head & *u->cq_mask].res;
	__atomic_store_n(u->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static void adopt(int ep, int s)
{
	if (s >= MAX_FD) {
		close(s);
		return;
	}
	if (!conns[s]) {
		conns[s] = malloc(sizeof(struct conn));
	}
	conns[s]->have = 0;
	struct epoll_event e = { .events = EPOLLIN, .data.fd = s };
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
}

static void run_uring(const char *path)
{
	int lfd = listener(path, 0);
	struct uring u;
	uring_init(&u);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = u.fd };
	epoll_ctl(ep, EPOLL_CTL_ADD, u.fd, &ev);
	arm_accept(&u, lfd);
	ready();
	for (;;) {
		struct epoll_event events[64];
		int n = epoll_wait(ep, events, 64, -1);
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;
			if (fd == u.fd) {
				int none, s, accepted = 0;
				while ((s = reap(&u, &none)), !none) {
					accepted = 1;
					if (s >= 0) {
						adopt(ep, s);
					}
				}
				if (accepted) {
					arm_accept(&u, lfd);
				}
			} else if (!serve(fd, conns[fd])) {
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
	const char *mode = argc == 3 ? argv[2] : "";
	if (strcmp(mode, "epoll") != 0 && strcmp(mode, "blocking") != 0 && strcmp(mode, "uring") != 0) {
		fprintf(stderr, "usage: %s SOCKET epoll|blocking|uring\n", argv[0]);
		return 2;
	}
	build_answer();
	if (strcmp(mode, "epoll") == 0) {
		run_epoll(argv[1]);
	} else if (strcmp(mode, "uring") == 0) {
		run_uring(argv[1]);
	} else {
		run_blocking(argv[1]);
	}
	return 0;
}
