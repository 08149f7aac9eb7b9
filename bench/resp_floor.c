/*
 * resp_floor.c - the floor under any RESP server on a paste port. It
 * answers SET with +OK, GET with a value as long as the last SET's (of
 * 'x's), PING with +PONG and anything else with an error; it stores and
 * logs nothing and, unless asked, flushes nothing. bench/kvs.py runs it
 * beside pkvs and Redis (--systems ...,floor): what it costs per op is
 * what the kernel's loopback TCP and the port cost every server on the
 * machine, so pkvs's cost above it is pkvs's own work (its parse, the log
 * record, flushes and the fence, the tree, reference counts), and no
 * server that answers over kernel TCP can cost less than it
 * (docs/results.md, "The floors").
 *
 * With a durability MODE other than none it is the durable floor (kvs.py's
 * floor-durable): the bytes of every DATA event that ends a SET (or leaves
 * a command incomplete) are flushed where they landed, and +OK waits for
 * the port's barrier (PASTE_SEND_DURABLE); a batch of GETs flushes
 * nothing. Each batch of SETs so pays one fence (emulated, pmem) or one
 * group commit (fsync: the flushed blocks written, then fdatasync), as
 * pkvs's do. It keeps no log and no index, so nothing it "stores" could
 * be found again: its cost is the least any durable server on a paste
 * port pays on that medium, and pkvs's cost above it is its log, tree and
 * reference counts.
 *
 *   resp-floor STORE [PORT [MODE [PM_NS]]]
 *       STORE: the receive buffers' file (created; on the medium measured);
 *       PORT 0 (the default): a free one; MODE: none (the default),
 *       emulated, pmem, fsync or auto; PM_NS: emulated PM's busy wait per
 *       fence. Prints "resp-floor: ready on 127.0.0.1:PORT (durability
 *       MODE[, WAY])" (WAY: paste_persist_flush_insn's answer);
 *       SIGTERM/SIGINT stop it, and it prints "resp-floor: N fences, M
 *       commits" first.
 *
 * The parse is the library's (paste_resp_parse, as pkvs's). A command
 * split across DATA events is put together in a per-connection buffer: a
 * copy pkvs does not make (it collects values where they land), so deep
 * pipelines of big values cost the floor more than a floor needs.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <paste.h>
#include "reassembly.h"

#define MAX_VALUE (1u << 20)        /* the parser's default max_bulk */

struct fconn {
	struct paste_resp_parser ps;
	struct reasm buf;           /* an incomplete command's bytes */
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static char xs[MAX_VALUE];          /* every GET's value: 'x' * last_len */
static size_t last_len = SIZE_MAX;  /* SIZE_MAX: no SET yet, GET is a miss */

static struct paste_persist *persist;   /* NULL: durability none */
static unsigned send_flags;             /* PASTE_SEND_DURABLE with persist */
static bool set_seen;                   /* the DATA event being handled ended a SET */

static void answer(struct paste_port *pt, uint32_t conn, const struct paste_resp_cmd *cmd)
{
	const struct paste_resp_arg *a = cmd->argv;
	char head[32];
	if (cmd->argc == 0)
		return;
	if (paste_resp_arg_eq(&a[0], "SET") && cmd->argc >= 3) {
		last_len = a[2].len;
		set_seen = true;
		paste_port_send(pt, conn, "+OK\r\n", 5, send_flags);
	} else if (paste_resp_arg_eq(&a[0], "GET") && cmd->argc == 2) {
		if (last_len == SIZE_MAX) {
			paste_port_send(pt, conn, "$-1\r\n", 5, 0);
			return;
		}
		int n = paste_resp_put_bulk_head(head, sizeof(head), last_len);
		/* three copies into one contiguous reply: one iovec */
		paste_port_send(pt, conn, head, (size_t)n, 0);
		paste_port_send(pt, conn, xs, last_len, 0);
		paste_port_send(pt, conn, "\r\n", 2, 0);
	} else if (paste_resp_arg_eq(&a[0], "PING")) {
		paste_port_send(pt, conn, "+PONG\r\n", 7, 0);
	} else {
		paste_port_send(pt, conn, "-ERR unknown command\r\n", 22, 0);
	}
}

/* Answer every whole command in p[0..n); returns the bytes they took, or
 * n after a protocol error (answered, the connection closing). */
static size_t consume(struct paste_port *pt, uint32_t conn, struct fconn *f, const char *p,
		      size_t n)
{
	struct paste_resp_arg argv[16];
	size_t off = 0;
	while (off < n) {
		struct paste_resp_cmd cmd = { .argv = argv, .argv_cap = 16 };
		int r = paste_resp_parse(&f->ps, p + off, n - off, &cmd);
		if (r == PASTE_RESP_MORE)
			break;
		if (r < 0) {
			char line[160];
			int k = paste_resp_put_proto_error(line, sizeof(line), &f->ps, r);
			paste_port_send(pt, conn, line, (size_t)k, 0);
			paste_port_close_conn(pt, conn);
			return n;
		}
		answer(pt, conn, &cmd);      /* r == PASTE_RESP_CMD: nothing streams */
		off += cmd.used;
	}
	return off;
}

static void on_data_bytes(struct paste_port *pt, const struct paste_event *ev, struct fconn *f,
			  const char *p, size_t n)
{
	if (f->buf.len == 0) {
		size_t used = consume(pt, ev->conn, f, p, n);
		if (used < n && reasm_append(&f->buf, p + used, n - used))
			paste_port_close_conn(pt, ev->conn);
		return;
	}
	if (reasm_append(&f->buf, p, n)) {
		paste_port_close_conn(pt, ev->conn);
		return;
	}
	reasm_consume(&f->buf, (uint32_t)consume(pt, ev->conn, f, f->buf.p, f->buf.len));
}

static void on_data(struct paste_port *pt, const struct paste_event *ev)
{
	struct fconn *f = paste_port_conn_data(pt, ev->conn);
	const char *p = (const char *)ev->data;
	size_t n = ev->len;
	set_seen = false;
	on_data_bytes(pt, ev, f, p, n);
	/* Durable floor: flush the bytes where they landed, as pkvs flushes
	 * its values, when they end a SET or begin a command still incomplete
	 * (the start of a value, maybe); a batch of GETs flushes nothing. */
	if (persist && (set_seen || f->buf.len))
		paste_persist_flush(persist, p, n);
}

int main(int argc, char **argv)
{
	enum paste_durability mode = PASTE_DUR_NONE;
	if (argc < 2 || argc > 5 || (argc > 3 && paste_durability_parse(argv[3], &mode) < 0)) {
		fprintf(stderr, "usage: resp-floor STORE [PORT [none|emulated|pmem|fsync|auto [PM_NS]]]\n");
		return 2;
	}
	memset(xs, 'x', sizeof(xs));
	struct paste_error err = { 0 };
	struct paste_store *st = NULL;
	struct paste_port *pt = NULL;
	struct paste_store_config scfg = { .size = 64u << 20, .node_size = PASTE_STORE_NO_NODES };
	struct paste_resp_config rcfg = { .stream_min = PASTE_RESP_NO_STREAM };
	struct paste_port_config cfg = {
		.port = (uint16_t)atoi(argc > 2 ? argv[2] : "0"),
		.ring_bufs = 1024, .max_conns = 1024, .conn_data_size = sizeof(struct fconn),
	};
	int rc = 1;
	if (paste_store_open(&st, argv[1], &scfg, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err) < 0)
		goto out;
	if (mode != PASTE_DUR_NONE) {            /* AUTO: resolved by the open */
		struct paste_persist_config pcfg = {
			.mode = mode, .pm_latency_ns = argc > 4 ? strtoull(argv[4], NULL, 10) : 0,
		};
		if (paste_persist_open(&persist, st, &pcfg, &err) < 0)
			goto out;
		send_flags = PASTE_SEND_DURABLE;
		mode = paste_persist_mode(persist);
	}
	paste_store_start(st);           /* no log: every buffer is free */
	cfg.store = st;
	cfg.persist = persist;
	if (paste_port_open(&pt, &cfg, &err) < 0)
		goto out;
	struct sigaction sa = { .sa_handler = on_signal };   /* no SA_RESTART: poll returns */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("resp-floor: ready on 127.0.0.1:%u (durability %s%s%s)\n", paste_port_local_port(pt),
	       paste_durability_name(mode), persist ? ", " : "",
	       persist ? paste_persist_flush_insn(persist) : "");
	fflush(stdout);
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
			struct fconn *f = paste_port_conn_data(pt, ev->conn);
			if (ev->type == PASTE_EV_ACCEPT) {
				paste_resp_parser_init(&f->ps, &rcfg);
			} else if (ev->type == PASTE_EV_CLOSED) {
				reasm_free(&f->buf);   /* the slot's data is zeroed on its next accept */
			} else if (ev->type == PASTE_EV_DATA) {
				on_data(pt, ev);
			}
		}
	}
	struct paste_port_stats ps;
	paste_port_stats(pt, &ps);
	printf("resp-floor: %llu fences, %llu commits\n", (unsigned long long)ps.fences,
	       (unsigned long long)ps.commits);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "resp-floor: %s\n", err.msg);
	if (pt) {
		for (uint32_t c = 0; c < cfg.max_conns; c++) {
			struct fconn *f = paste_port_conn_data(pt, c);
			reasm_free(&f->buf);
		}
	}
	paste_port_close(pt);
	paste_persist_close(persist);
	if (st) {                        /* created here (EXCL): nobody else's */
		paste_store_close(st);
		unlink(argv[1]);
	}
	return rc;
}
