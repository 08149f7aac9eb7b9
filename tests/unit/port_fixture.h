/*
 * port_fixture.h - what the tests of the port and of what runs over it
 * share (test_port*.c, test_port_durable.c, test_body.c): a store of the
 * test's own, ports opened on it, loopback clients driven from the test's
 * own thread, bounded reads, and the exit status (77 without io_uring:
 * meson's "skipped", after the epoll half ran).
 *
 * The port tests also share `seen`/pf_pump: poll a port a few rounds and
 * count what came (accepts, closes, the bytes).
 */
#ifndef PASTE_PORT_FIXTURE_H
#define PASTE_PORT_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "paste.h"

/* ---- stores ------------------------------------------------------- */

/* A store of the test's own, created at dir/paste-test-TAG-PID-N (dir:
 * /dev/shm, or /var/tmp where fdatasync must reach a disk) and removed at
 * close. Not started: a persist object may be opened first. */
struct pf_store {
	char path[96];
	struct paste_store *st;
};

static inline int pf_store_open(struct pf_store *s, const char *dir, const char *tag,
				uint64_t size)
{
	static int seq;
	struct paste_store_config c = { .size = size };
	struct paste_error err = { 0 };
	snprintf(s->path, sizeof(s->path), "%s/paste-test-%s-%d-%d", dir, tag, (int)getpid(), seq++);
	s->st = NULL;
	if (paste_store_open(&s->st, s->path, &c, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

static inline void pf_store_close(struct pf_store *s)
{
	paste_store_close(s->st);
	s->st = NULL;
	unlink(s->path);
}

/* ---- ports and clients -------------------------------------------- */

/* paste_port_open, printing why it failed (NULL then). */
static inline struct paste_port *pf_port_open(const struct paste_port_config *c)
{
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	if (paste_port_open(&pt, c, &err)) {
		fprintf(stderr, "port open: %s\n", err.msg);
		return NULL;
	}
	return pt;
}

/* true: the ports pf_open_port opens take a whole buffer per receive
 * (no_dense_recv), for tests of what a hold does to a buffer's place in
 * the ring; false: the port's default (dense receives where the kernel
 * has them). */
static bool pf_whole_buffers;

/* The port tests' usual port: ring buffers, slots, nothing else. */
static inline struct paste_port *pf_open_port(struct paste_store *st, enum paste_engine e,
					      uint32_t ring, uint32_t max_conns)
{
	struct paste_port_config c = { .engine = e, .ring_bufs = ring, .max_conns = max_conns,
				       .store = st, .no_dense_recv = pf_whole_buffers };
	return pf_port_open(&c);
}

/* A blocking loopback connection to port, or -1. */
static inline int pf_client(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Up to want bytes, waiting at most ms for each read; stops at EOF. */
static inline ssize_t pf_read_all(int fd, char *buf, size_t want, int ms)
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

static inline double pf_now_s(void)
{
	return (double)paste_clock_ns() / 1e9;
}

/* ---- polling ------------------------------------------------------ */

/* What rounds of polling brought: counts, the bytes (the first 64 KiB),
 * the last event's slot, and the holds made. */
struct seen {
	int accepts, closes;
	size_t bytes;
	char data[1 << 16];
	uint32_t last_conn;
	int holds;
};

/* Poll `rounds` times (20 ms each at most); hold: keep every DATA buffer. */
static inline void pf_pump(struct paste_port *pt, struct seen *s, int rounds, bool hold)
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

/* Poll until the DATA events have brought `want` bytes (2 s at most). */
static inline void pf_pump_bytes(struct paste_port *pt, struct seen *s, size_t want)
{
	for (int i = 0; i < 100 && s->bytes < want; i++)
		pf_pump(pt, s, 1, false);
}

/* ---- start and end ------------------------------------------------- */

/* Whether the uring engine can run here; says so when not. */
static inline bool pf_uring_usable(void)
{
	struct paste_error err;
	if (paste_uring_probe(&err) == 0)
		return true;
	printf("skipping the uring tests: %s\n", err.msg);
	return false;
}

/* The exit status: failures, else 77 (meson's "skipped") when the uring
 * half could not run. */
static inline int pf_done(bool uring)
{
	int r = check_done();
	return r ? r : uring ? 0 : 77;
}

#endif
