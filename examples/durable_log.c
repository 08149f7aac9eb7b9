/*
 * durable_log.c - a durable append-only log over raw TCP, in paste.h only.
 *
 * A client sends records, each a 4-byte big-endian length and that many
 * bytes (at most 128 KiB with the default 2 KiB buffers). For each record,
 * in order, the server answers 8 bytes: its LSN (big-endian) once the
 * record is durable, or 0 when it was refused (the log or the store is
 * full). Records stay where they landed: the receive buffers that carry a
 * record are held and logged, not copied, and a whole batch of records is
 * made durable by one barrier (a fence, or one fdatasync on a disk) before
 * its acks leave together.
 *
 *   durable_log STORE [PORT]   PORT 0 (default): any free one, printed
 *   paste-store STORE dump --data             reads the log back
 *   cc durable_log.c $(pkg-config --cflags --libs paste)   builds it
 *
 * A real service would also truncate (paste_wal_truncate) what its readers
 * have consumed; here a full log refuses records (ack 0).
 */
#define _DEFAULT_SOURCE   /* sigaction, htobe64 with -std=c11 too */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <paste.h>

struct conn {                     /* per connection, zeroed at accept */
	uint8_t head[4];          /* the length prefix, possibly split across reads */
	uint32_t have;            /* bytes of it so far */
	bool in_record;           /* collecting a record's bytes into body */
	bool closing;             /* refused: the rest of its bytes are ignored */
	struct paste_body body;   /* the record so far: extents of held buffers */
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static struct paste_store *st;
static struct paste_persist *persist;
static struct paste_wal *wal;
static struct paste_port *port;

/* The record in c is complete: log it, ack its LSN once it is durable. */
static void finish(uint32_t slot, struct conn *c)
{
	uint64_t lsn = 0;
	if (c->body.error || paste_wal_append(wal, 0, persist, c->body.ext, c->body.n, &lsn) < 0)
		lsn = 0;                           /* store or log full: refused */
	paste_body_release(&c->body, st);          /* the log took its own references */
	c->in_record = false;
	uint64_t be = htobe64(lsn);
	if (paste_port_send(port, slot, &be, sizeof(be), PASTE_SEND_DURABLE) < 0) {
		c->closing = true;                         /* the store failed */
		paste_port_close_conn(port, slot);
	}
}

static void on_data(const struct paste_event *ev)
{
	struct conn *c = paste_port_conn_data(port, ev->conn);
	uint32_t off = 0;
	while (off < ev->len && !c->closing) {
		if (!c->in_record) {                   /* the length prefix */
			c->head[c->have++] = ev->data[off++];
			if (c->have < sizeof(c->head))
				continue;
			uint32_t len;
			memcpy(&len, c->head, sizeof(len));
			c->have = 0;
			if (paste_body_begin(&c->body, NULL, st, ntohl(len)) < 0) {
				c->closing = true;                       /* too long */
				paste_port_close_conn(port, ev->conn);
				return;
			}
			c->in_record = true;
		}
		uint32_t take = ev->len - off;
		if (take > c->body.left)
			take = (uint32_t)c->body.left;
		if (take)   /* zero copy: the event's buffer is held where it is */
			paste_body_feed(&c->body, NULL, port, ev, off, take);
		off += take;
		if (c->body.left == 0)                 /* also right after an empty record's prefix */
			finish(ev->conn, c);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: durable_log STORE [PORT]\n");
		return 2;
	}
	struct paste_error err = { 0 };
	struct paste_store_config scfg = { .size = 64ull << 20,      /* when creating; */
					   .node_size = PASTE_STORE_NO_NODES }; /* no B+tree */
	struct paste_persist_config pcfg = { .mode = PASTE_DUR_AUTO }; /* from the file system */
	int rc = 1;
	if (paste_store_open(&st, argv[1], access(argv[1], F_OK) ? &scfg : NULL, PASTE_STORE_CREATE,
			     &err) < 0 ||
	    paste_persist_open(&persist, st, &pcfg, &err) < 0 ||
	    paste_wal_open(&wal, st, persist, &err) < 0)       /* recovery */
		goto out;
	paste_store_start(st);       /* free list: every buffer no record holds */
	struct paste_port_config cfg = {
		.port = (uint16_t)atoi(argc > 2 ? argv[2] : "0"), .store = st, .persist = persist,
		.ring_bufs = 1024, .max_conns = 256, .conn_data_size = sizeof(struct conn),
	};
	if (paste_port_open(&port, &cfg, &err) < 0)
		goto out;
	struct paste_wal_info in;
	paste_wal_info(wal, &in);
	fprintf(stderr, "durable_log: %llu records (lsn %llu..%llu), durability %s; "
		"listening on 127.0.0.1:%u\n", (unsigned long long)in.records,
		(unsigned long long)in.first_lsn, (unsigned long long)in.last_lsn,
		paste_durability_name(paste_persist_mode(persist)), paste_port_local_port(port));
	struct sigaction sa = { .sa_handler = on_signal };   /* no SA_RESTART: poll returns */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop && !paste_store_failed(st, NULL)) {
		struct paste_event *evs;
		int n = paste_port_poll(port, &evs, 1000);   /* sends the last batch's acks */
		if (n == -EINTR)
			continue;
		if (n < 0) {
			paste_error_set(&err, n, "paste_port_poll: %s", strerror(-n));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].type == PASTE_EV_DATA)
				on_data(&evs[i]);
			else if (evs[i].type == PASTE_EV_CLOSED)   /* drop a half-received record */
				paste_body_release(&((struct conn *)paste_port_conn_data(port,
						      evs[i].conn))->body, st);
		}
	}
	rc = paste_store_failed(st, NULL) ? 1 : 0;
out:
	if (rc)
		fprintf(stderr, "durable_log: %s\n", err.msg[0] ? err.msg : "the store failed");
	paste_port_close(port);
	paste_wal_close(wal);
	paste_persist_close(persist);
	paste_store_close(st);
	return rc;
}
