/*
 * echo_rpc.c - an echo (request -> reply) server over raw TCP, in paste.h
 * only: the skeleton of any RPC service on a paste port.
 *
 * Every connection's bytes come back to it, in order. One paste_port_poll
 * per pass serves every connection: it sends the replies queued in the
 * previous pass and returns one batch of events for all of them. Replies
 * leave straight from the store buffer the request landed in (no copy);
 * the epoll engines (the socket API) have no store buffers, so there
 * they are copied.
 *
 *   echo_rpc STORE [PORT [uring|epoll|epoll-batch]]
 *       PORT 0 (the default) picks a free one; "listening on
 *       127.0.0.1:PORT" is printed
 *
 * STORE is the packet store the receive buffers are carved from (created
 * if missing; /dev/shm is a good place: nothing here is made durable).
 * Build: cc echo_rpc.c $(pkg-config --cflags --libs paste)
 */
#define _DEFAULT_SOURCE   /* sigaction, htobe64 with -std=c11 too */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <paste.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

/* The engine paste_engine_name calls s; -1 if none. */
static int engine_named(const char *s, enum paste_engine *out)
{
	for (int e = PASTE_ENGINE_URING; e <= PASTE_ENGINE_EPOLL_BATCH; e++)
		if (!strcmp(s, paste_engine_name((enum paste_engine)e))) {
			*out = (enum paste_engine)e;
			return 0;
		}
	return -1;
}

int main(int argc, char **argv)
{
	enum paste_engine engine = PASTE_ENGINE_URING;
	if (argc < 2 || argc > 4 || (argc == 4 && engine_named(argv[3], &engine) < 0)) {
		fprintf(stderr, "usage: echo_rpc STORE [PORT [uring|epoll|epoll-batch]]\n");
		return 2;
	}
	struct paste_error err = { 0 };
	struct paste_store *st = NULL;
	struct paste_port *pt = NULL;
	struct paste_store_config scfg = { .size = 32u << 20, .node_size = PASTE_STORE_NO_NODES };
	int rc = 1;
	if (paste_store_open(&st, argv[1], access(argv[1], F_OK) ? &scfg : NULL, PASTE_STORE_CREATE,
			     &err) < 0)   /* scfg: when creating it */
		goto out;
	paste_store_start(st);           /* no log: every buffer is free */
	struct paste_port_config cfg = {
		.engine = engine,
		.port = (uint16_t)atoi(argc > 2 ? argv[2] : "0"), .store = st,
		.ring_bufs = 1024, .max_conns = 1024,
	};
	if (paste_port_open(&pt, &cfg, &err) < 0)
		goto out;
	fprintf(stderr, "echo_rpc: %s engine; listening on 127.0.0.1:%u\n",
		paste_engine_name(cfg.engine), paste_port_local_port(pt));
	struct sigaction sa = { .sa_handler = on_signal };   /* no SA_RESTART: poll returns */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		struct paste_event *evs;
		int n = paste_port_poll(pt, &evs, 1000);
		if (n == -EINTR)
			continue;
		if (n < 0) {
			paste_error_set(&err, n, "paste_port_poll: %s", strerror(-n));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			const struct paste_event *ev = &evs[i];
			if (ev->type != PASTE_EV_DATA)
				continue;        /* ACCEPT, CLOSED: no per-connection state here */
			/* A reply that cannot be queued (no memory) closes the
			 * connection in the port, after what was queued before
			 * it: nothing is left for the app to do. */
			if (ev->buf != PASTE_NO_BUF)
				paste_port_send_store(pt, ev->conn, ev->buf, ev->off, ev->len, 0);
			else
				paste_port_send(pt, ev->conn, ev->data, ev->len, 0);
		}
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "echo_rpc: %s\n", err.msg);
	paste_port_close(pt);
	paste_store_close(st);
	return rc;
}
