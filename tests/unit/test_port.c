/*
 * test_port.c - the paste port's edge cases, both engines, over real
 * loopback sockets driven from this same thread: accept/data/close
 * events, hold and recycle, ring exhaustion (ENOBUFS) without data loss,
 * partial sends of large replies, zero-copy sends from store buffers,
 * peers that reset, a full connection table, and durable replies held
 * behind the fence.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "paste.h"

static char store_path[64];
static struct paste_store *st;

static int client(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Poll the port until pred(evs) is satisfied or 2 s pass; collects events
 * of all rounds into `all` (type, conn, bytes). */
struct seen {
	int accepts, closes;
	size_t bytes;
	char data[1 << 16];
	uint32_t last_conn;
	int holds;
};

static void pump(struct paste_port *pt, struct seen *s, int rounds, bool hold)
{
	for (int i = 0; i < rounds; i++) {
		struct paste_event *evs;
		int n = paste_port_poll(pt, &evs, 20);
		for (int j = 0; j < n; j++) {
			struct paste_event *ev = &evs[j];
			s->last_conn = ev->conn;
			if (ev->type == PASTE_EV_ACCEPT)
				s->accepts++;
			else if (ev->type == PASTE_EV_CLOSED)
				s->closes++;
			else if (ev->type == PASTE_EV_DATA) {
				if (s->bytes + ev->len <= sizeof(s->data))
					memcpy(s->data + s->bytes, ev->data, ev->len);
				s->bytes += ev->len;
				if (hold && paste_port_hold(pt, ev) == 0)
					s->holds++;
			}
		}
	}
}

static struct paste_port *open_port(enum paste_engine e, uint32_t ring, uint32_t max_conns,
				    struct paste_persist *p)
{
	struct paste_port_config c = { .engine = e, .port = 0, .ring_bufs = ring,
				       .max_conns = max_conns, .store = st, .persist = p };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	if (paste_port_open(&pt, &c, &err)) {
		fprintf(stderr, "port open: %s\n", err.msg);
		return NULL;
	}
	return pt;
}

static ssize_t read_all(int fd, char *buf, size_t want, int ms)
{
	size_t got = 0;
	while (got < want) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, ms) <= 0)
			break;
		ssize_t r = read(fd, buf + got, want - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static void test_echo(enum paste_engine e)
{
	struct paste_port *pt = open_port(e, 64, 64, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = client(paste_port_local_port(pt));
	CHECK(fd >= 0);
	struct seen s = { 0 };
	pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 1);
	CHECK(write(fd, "hello", 5) == 5);
	pump(pt, &s, 5, false);
	CHECK_EQ(s.bytes, 5);
	CHECK(!memcmp(s.data, "hello", 5));
	/* a reply made of a copied piece and a zero-copy store piece */
	uint32_t idx;
	CHECK_EQ(paste_store_alloc(st, &idx, 1), 1);
	memcpy(paste_store_buf(st, idx), "WORLD", 5);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "hi ", 3, 0), 0);
	CHECK_EQ(paste_port_send_store(pt, s.last_conn, idx, 0, 5, 0), 0);
	CHECK_EQ(paste_store_refcount(st, idx), 2);          /* pinned by the send */
	paste_store_unref(st, idx, false);
	pump(pt, &s, 3, false);
	char buf[16] = { 0 };
	CHECK_EQ(read_all(fd, buf, 8, 1000), 8);
	CHECK(!memcmp(buf, "hi WORLD", 8));
	CHECK_EQ(paste_store_refcount(st, idx), 0);          /* unpinned, freed */
	CHECK_EQ(paste_port_send_store(pt, s.last_conn, st ? UINT32_MAX - 1 : 0, 0, 1, 0), -EINVAL);
	close(fd);
	pump(pt, &s, 5, false);
	CHECK_EQ(s.closes, 1);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "x", 1, 0), -ENOTCONN);
	paste_port_close(pt);
}

/* 8 buffers in the ring, 16 connections each sending 3 KiB: the ring runs
 * dry, recv re-arms after the batch, and every byte arrives. */
static void test_enobufs(void)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 8, 64, NULL);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fds[16];
	char msg[3072];
	memset(msg, 'a', sizeof(msg));
	for (int i = 0; i < 16; i++)
		fds[i] = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 16);
	for (int i = 0; i < 16; i++)
		CHECK(write(fds[i], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	for (int i = 0; i < 200 && s.bytes < 16 * sizeof(msg); i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.bytes, 16 * sizeof(msg));
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK(ps.enobufs > 0);
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	pump(pt, &s, 10, false);
	CHECK_EQ(s.closes, 16);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);            /* no buffer leaked */
}

/* Held buffers keep their bytes; the ring gets replacements. */
static void test_hold(void)
{
	uint32_t before = paste_store_nfree(st);
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 8, 16, NULL);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	struct paste_event *evs;
	uint32_t held = PASTE_NO_BUF;
	CHECK(write(fd, "keep me", 7) == 7);
	for (int i = 0; i < 50 && held == PASTE_NO_BUF; i++) {
		int n = paste_port_poll(pt, &evs, 20);
		for (int j = 0; j < n; j++)
			if (evs[j].type == PASTE_EV_DATA && paste_port_hold(pt, &evs[j]) == 0)
				held = evs[j].buf;
	}
	CHECK(held != PASTE_NO_BUF);
	/* push more data through: the held buffer must never be reused */
	char msg[1500];
	memset(msg, 'z', sizeof(msg));
	for (int i = 0; i < 40; i++) {
		CHECK(write(fd, msg, sizeof(msg)) == (ssize_t)sizeof(msg));
		pump(pt, &s, 2, false);
	}
	CHECK(!memcmp(paste_store_buf(st, held), "keep me", 7));
	CHECK_EQ(paste_store_refcount(st, held), 1);
	paste_store_unref(st, held, false);
	close(fd);
	pump(pt, &s, 5, false);
	paste_port_close(pt);
	CHECK_EQ(paste_store_nfree(st), before);
}

/* A 16 MiB reply cannot leave in one send (socket buffers are ~4 MiB on
 * loopback): partial sends resume where they stopped. */
static void test_partial_send(enum paste_engine e)
{
	struct paste_port *pt = open_port(e, 16, 16, NULL);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK(write(fd, "go", 2) == 2);
	pump(pt, &s, 3, false);
	size_t big = 16u << 20;
	char *out = malloc(big), *in = malloc(big);
	for (size_t i = 0; i < big; i++)
		out[i] = (char)(i * 7);
	CHECK_EQ(paste_port_send(pt, s.last_conn, out, big, 0), 0);
	size_t got = 0;
	for (int i = 0; i < 20000 && got < big; i++) {
		struct paste_event *evs;
		paste_port_poll(pt, &evs, 1);
		struct pollfd p = { fd, POLLIN, 0 };
		while (poll(&p, 1, 0) > 0 && got < big) {
			ssize_t r = read(fd, in + got, big - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
	}
	CHECK_EQ(got, big);
	CHECK(!memcmp(in, out, big));
	free(out);
	free(in);
	close(fd);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* A peer that resets (SO_LINGER 0) gives CLOSED and leaks nothing. */
static void test_reset(enum paste_engine e)
{
	struct paste_port *pt = open_port(e, 16, 16, NULL);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK(write(fd, "x", 1) == 1);
	pump(pt, &s, 3, false);
	paste_port_send(pt, s.last_conn, "reply", 5, 0);
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	pump(pt, &s, 10, false);
	CHECK_EQ(s.closes, 1);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.conns, 0);
	paste_port_close(pt);
}

/* More connections than slots: the extra ones wait in the backlog and
 * are served once a slot frees; the others keep working meanwhile. */
static void test_table_full(void)
{
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 16, 2, NULL);
	uint16_t port = paste_port_local_port(pt);
	int a = client(port), b = client(port), c = client(port);
	struct seen s = { 0 };
	pump(pt, &s, 5, false);
	CHECK_EQ(s.accepts, 2);
	CHECK(write(a, "1", 1) == 1);
	pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 1);      /* existing connections still served */
	close(a);
	for (int i = 0; i < 30 && s.accepts < 3; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 3);
	close(b);
	close(c);
	pump(pt, &s, 10, false);
	paste_port_close(pt);
}

/* epoll engine out of descriptors (EMFILE): the listener sheds the new
 * connection instead of spinning, and the existing one is still served. */
static void test_emfile_epoll(void)
{
	struct paste_port *pt = open_port(PASTE_ENGINE_EPOLL, 16, 64, NULL);
	uint16_t port = paste_port_local_port(pt);
	int a = client(port);
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK_EQ(s.accepts, 1);
	struct rlimit old, low;
	getrlimit(RLIMIT_NOFILE, &old);
	int probe = dup(0);              /* the lowest free descriptor */
	close(probe);
	int b = client(port);            /* takes `probe`; the server gets none */
	low = old;
	low.rlim_cur = (rlim_t)probe + 1;
	setrlimit(RLIMIT_NOFILE, &low);
	for (int i = 0; i < 5; i++)
		pump(pt, &s, 1, false);
	CHECK_EQ(s.accepts, 1);
	char c;                         /* b was shed: the peer closed it */
	struct pollfd pb = { b, POLLIN, 0 };
	CHECK(poll(&pb, 1, 1000) == 1 && read(b, &c, 1) <= 0);
	CHECK(write(a, "still", 5) == 5);
	pump(pt, &s, 3, false);
	CHECK_EQ(s.bytes, 5);
	setrlimit(RLIMIT_NOFILE, &old);
	close(a);
	close(b);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
}

/* A durable reply waits for the barrier; the fence count proves it paid. */
static void test_durable_gate(void)
{
	struct paste_persist *p;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	struct paste_error err;
	CHECK_EQ(paste_persist_open(&p, st, &pc, &err), 0);
	struct paste_port *pt = open_port(PASTE_ENGINE_URING, 16, 16, p);
	int fd = client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pump(pt, &s, 3, false);
	CHECK(write(fd, "x", 1) == 1);
	pump(pt, &s, 3, false);
	uint32_t idx;
	paste_store_alloc(st, &idx, 1);
	memcpy(paste_store_buf(st, idx), "durable", 7);
	paste_persist_flush(p, paste_store_buf(st, idx), 7);
	paste_port_send(pt, s.last_conn, "ok", 2, PASTE_SEND_DURABLE);
	pump(pt, &s, 2, false);
	char buf[4];
	CHECK_EQ(read_all(fd, buf, 2, 1000), 2);
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	CHECK_EQ(ps.fences, 1);
	CHECK(!paste_persist_pending(p));
	paste_store_unref(st, idx, false);
	close(fd);
	pump(pt, &s, 3, false);
	paste_port_close(pt);
	paste_persist_close(p);
}

int main(void)
{
	struct paste_error err;
	if (paste_uring_probe(&err)) {
		printf("skipping the uring tests: %s\n", err.msg);
	}
	snprintf(store_path, sizeof(store_path), "/dev/shm/paste-test-port-%d", getpid());
	struct paste_store_config c = { .size = 8 << 20 };
	if (paste_store_open(&st, store_path, &c, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	paste_store_start(st);
	test_echo(PASTE_ENGINE_EPOLL);
	test_partial_send(PASTE_ENGINE_EPOLL);
	test_reset(PASTE_ENGINE_EPOLL);
	test_emfile_epoll();
	if (!paste_uring_probe(&err)) {
		test_echo(PASTE_ENGINE_URING);
		test_enobufs();
		test_hold();
		test_partial_send(PASTE_ENGINE_URING);
		test_reset(PASTE_ENGINE_URING);
		test_table_full();
		test_durable_gate();
	}
	paste_store_close(st);
	unlink(store_path);
	return check_done();
}
