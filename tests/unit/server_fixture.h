/*
 * server_fixture.h - a real server (server/server.c + the HTTP protocol)
 * with one worker driven from the test's own thread, and loopback clients:
 * what test_http_proto.c and test_services.c share.
 *
 * The worker is stepped with server_worker_pass while a client waits for
 * its reply, so a test is a plain sequence: write, pump until the reply is
 * in, check. Stores live in /dev/shm and are removed at close.
 */
#ifndef PASTE_SERVER_FIXTURE_H
#define PASTE_SERVER_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http.h"
#include "port_fixture.h"
#include "server.h"

struct fixture {
	struct server *s;
	struct worker *w;
	char store[64];
};

static inline uint64_t fx_ms(void)
{
	return paste_clock_ns() / 1000000u;
}

/* A server with one worker whose port is open in this thread; cfg may
 * adjust the defaults before the open (timeouts, durability). */
static inline int fx_open(struct fixture *f, enum paste_engine e, const struct http_config *hc,
			  const char *tag, void (*adjust)(struct server_config *))
{
	static int seq;
	memset(f, 0, sizeof(*f));
	snprintf(f->store, sizeof(f->store), "/dev/shm/paste-test-%s-%d-%d", tag, getpid(), seq++);
	struct server_config sc = {
		.name = "test", .host = "127.0.0.1", .port = 0, .threads = 1, .engine = e,
		.store_path = f->store, .store_size = 16 << 20, .durability = PASTE_DUR_EMULATED,
		.ring_bufs = 64, .max_conns = 64, .cpu = -1,
		.header_to_ms = 60000, .body_to_ms = 60000, .idle_to_ms = 75000,
		.mode = hc->service->base.name, .mode_note = "", .proto = &http_proto, .proto_cfg = hc,
	};
	if (adjust)
		adjust(&sc);
	if (server_open(&f->s, &sc) || server_ready(f->s)) {
		unlink(f->store);
		return -1;
	}
	f->w = &f->s->workers[0];
	if (server_worker_start(f->w)) {
		fprintf(stderr, "port: %s\n", f->s->open_err.msg);
		server_close(f->s, 0);
		unlink(f->store);
		return -1;
	}
	return 0;
}

static inline void fx_close(struct fixture *f)
{
	server_worker_stop(f->w);
	server_close(f->s, 0);
	unlink(f->store);
}

static inline void fx_pump(struct fixture *f, int passes)
{
	for (int i = 0; i < passes; i++)
		server_worker_pass(f->w, 5);
}

static inline int fx_client(struct fixture *f)
{
	int fd = pf_client(paste_port_local_port(f->w->port));
	if (fd < 0)
		return -1;
	int one = 1;   /* small writes go at once (Nagle would hold them for an ACK) */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	fx_pump(f, 3);       /* the accept */
	return fd;
}

static inline void fx_send(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t r = write(fd, p, n);
		if (r <= 0)
			return;
		p += r;
		n -= (size_t)r;
	}
}

/* Pump the server and read what fd receives until `want` bytes came, the
 * peer closed (*closed = true), or ms passed. Returns the bytes read. */
static inline size_t fx_read(struct fixture *f, int fd, char *buf, size_t cap, size_t want,
			     int ms, bool *closed)
{
	size_t got = 0;
	uint64_t end = fx_ms() + (uint64_t)ms;
	if (closed)
		*closed = false;
	while (got < want && fx_ms() < end) {
		server_worker_pass(f->w, 5);
		for (;;) {
			ssize_t r = read(fd, buf + got, cap - got - 1);
			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			if (r == 0 && closed) {
				*closed = true;
				want = 0;
			}
			break;
		}
	}
	buf[got] = 0;
	return got;
}

/* Bytes of the first whole response in p[0..n) (head + Content-Length
 * bytes of body, none for a 1xx or when head_only), or 0 if incomplete. */
static inline size_t fx_whole(const char *p, size_t n, bool head_only)
{
	const char *end = memmem(p, n, "\r\n\r\n", 4);
	if (!end)
		return 0;
	size_t hl = (size_t)(end - p) + 4, bl = 0;
	const char *cl = memmem(p, hl, "Content-Length: ", 16);
	if (cl && !head_only && !(n > 9 && p[9] == '1'))
		bl = strtoull(cl + 16, NULL, 10);
	return hl + bl <= n ? hl + bl : 0;
}

/* Pump and read until `count` whole responses came (or the peer closed,
 * or ms passed). Returns the bytes read. */
static inline size_t fx_replies(struct fixture *f, int fd, char *buf, size_t cap, int count,
				bool head_only, int ms)
{
	size_t got = 0, done = 0;
	uint64_t end = fx_ms() + (uint64_t)ms;
	while (count > 0 && fx_ms() < end) {
		server_worker_pass(f->w, 5);
		ssize_t r;
		while ((r = read(fd, buf + got, cap - got - 1)) > 0)
			got += (size_t)r;
		size_t k;
		while (count > 0 && (k = fx_whole(buf + done, got - done, head_only)) > 0) {
			done += k;
			count--;
		}
		if (r == 0)
			break;
	}
	buf[got] = 0;
	return got;
}

/* Count occurrences of s in buf. */
static inline int fx_count(const char *buf, const char *s)
{
	int n = 0;
	for (const char *p = strstr(buf, s); p; p = strstr(p + 1, s))
		n++;
	return n;
}

#endif
