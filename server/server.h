/*
 * server.h - the server layer of phttpd and pkvs (and of any paste
 * server): worker threads with one paste port each, signals, the
 * per-connection state layout, dispatch of port events to a protocol,
 * the timeout sweep, the failed store, and the counters /stats reports.
 *
 * It knows no protocol. A protocol plugs in through struct server_proto,
 * a service through its protocol's table (struct http_service, struct
 * resp_service), each beginning with struct service_base. Services sit
 * above the protocols, as Redis's t_string.c sits above networking.c:
 * they call down into the protocol's reply helpers and the library;
 * the layers below reach them only through those tables.
 *
 *   apps/phttpd.c                     apps/pkvs.c            main(): options -> configs
 *   services/rpc.c, log.c             services/pkvs_http.c,  what a request means
 *                                     pkvs_resp.c + cmd_*.c
 *        |                              |          |         (both over services/kv.c,
 *        v                              v          v          the key-value core)
 *   server/http.c  ----------------  server/http.c  server/resp.c   protocols: framing, replies
 *        \_____________________________|__________/
 *                                      v
 *   server/server.c                     threads, dispatch, timeouts, failed store
 *                                      v
 *   lib/ (libpaste, include/paste.h)    port, store, persist, wal, body, btree, parsers
 *
 * One request's path, a pkvs SET: the port returns a DATA event
 * (server_worker_pass -> paste_port_poll); server.c hands it to the
 * listener's protocol (resp_proto.data); server/resp.c frames the command
 * where it landed and calls the service (pkvs_resp_service.command ->
 * cmd_set); cmd_set calls the core (kv_set_body: hold the value's buffer,
 * paste_btree_set logs and applies it) and replies with resp_ok, queued
 * PASTE_SEND_DURABLE; the next pass's barrier makes the batch durable and
 * sends its replies. A phttpd POST /log goes http.c -> log_service.route,
 * .body (paste_body_feed), .finish (paste_wal_append, http_reply).
 *
 * Per-connection state lives in the port's conn_data slot (zeroed at
 * accept), in three parts, each 16-byte aligned:
 *
 *   [ struct srv_conn | protocol part | service part ]
 *
 * so a connection costs what its protocol and service need: an RPC
 * connection carries no WAL extents (phttpd: 80 bytes in rpc mode, ~900 in
 * wal mode, times 16384 slots per thread).
 */
#ifndef PASTE_SERVER_H
#define PASTE_SERVER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "paste.h"

struct server;
struct worker;

/* Which timeout applies to a connection now. The protocol sets it at its
 * own transitions (a store of one byte); the sweep only reads it. */
enum srv_timer {
	SRV_T_IDLE = 0,  /* no request in progress (a zeroed, new slot too):
			  * idle_to_ms since last_ms */
	SRV_T_HEAD,      /* a request began and is not framed yet:
			  * header_to_ms since since_ms (more bytes do not reset it) */
	SRV_T_BODY,      /* a request is being read: body_to_ms since last_ms */
	SRV_T_NONE,      /* closing: nothing to time */
};

/* The server part, first in the slot: the sweep reads 24 bytes, one cache
 * line, per open connection. */
struct srv_conn {
	uint8_t timer;      /* enum srv_timer, set by the protocol */
	uint8_t lis;        /* the listener it came through: which protocol (server) */
	uint64_t last_ms;   /* batch clock at the accept or the last DATA (server) */
	uint64_t since_ms;  /* batch clock when the current request began (protocol) */
};

#define SRV_ALIGN(n) (((size_t)(n) + 15u) & ~(size_t)15u)

/* The parts of a slot. Constant offsets: no lookup per event. */
static inline void *srv_proto_part(struct srv_conn *c)
{
	return (char *)c + SRV_ALIGN(sizeof(*c));
}

static inline void *srv_service_part(void *proto_part, uint32_t proto_size)
{
	return (char *)proto_part + SRV_ALIGN(proto_size);
}

/* A protocol: what the server calls. Per event one indirect call (data,
 * accept, closed); the rest is rare. A server may run several protocols,
 * one per listener (pkvs: HTTP and RESP); each has its own state, which
 * its callbacks find with srv_proto_state. */
struct server_proto {
	const char *name;
	uint32_t conn_size;                          /* protocol part of a slot */
	/* The service part of a slot, from the protocol's configuration. */
	uint32_t (*service_conn_size)(const void *proto_cfg);
	/* Process-wide state (*state, found later with srv_proto_state) from
	 * proto_cfg, after the workers' persist objects exist and before the
	 * store starts (log recovery takes its buffers first) and before any
	 * worker runs. Returns 0 or a negative errno with err->msg set. */
	int (*open)(struct server *s, const void *proto_cfg, void **state, struct paste_error *err);
	void (*close)(struct server *s, void *state);   /* after every worker stopped */
	void (*banner)(struct server *s, void *state);  /* start-up lines of its own, if any */
	/* Optional: once the store is started (its free buffers there),
	 * before any worker: the work of a start that writes. 0, or a
	 * negative errno with err->msg set (the server exits). */
	int (*started)(struct server *s, void *state, struct paste_error *err);
	/* Optional: once per pass, after the batch's events (pkvs: release
	 * what became durable, checkpoint when due). */
	void (*pass)(struct worker *w, void *state);
	/* Optional: when the next pass is due with no event (a blocked
	 * client's timeout), on w->now_ms's clock; UINT64_MAX: none. The
	 * poll waits no longer than that. Asked once per pass: cheap. */
	uint64_t (*wake)(struct worker *w, void *state);
	void (*accept)(struct worker *w, uint32_t conn, struct srv_conn *c);
	void (*data)(struct worker *w, const struct paste_event *ev, struct srv_conn *c);
	/* The connection is gone (or the server stops with it open): release
	 * everything it holds. No event follows for this slot. */
	void (*closed)(struct worker *w, uint32_t conn, struct srv_conn *c);
	/* Optional look ahead: ev (DATA) is the event after the one about to
	 * be handled, of another connection; start loading what it will need
	 * (RESP: the key's slot in the tree's point index). Changes nothing.
	 * Costs a short scan of ev's first bytes, against a cache miss the
	 * next data() would take. */
	void (*peek)(struct worker *w, const struct paste_event *ev, struct srv_conn *c);
	/* c->timer's timeout expired; the protocol decides what that means
	 * (HTTP: 408 and close, or a silent close when idle) and must leave
	 * the timer at SRV_T_NONE. The server counts it (timeouts, or
	 * idle_closes for SRV_T_IDLE). */
	void (*timeout)(struct worker *w, uint32_t conn, struct srv_conn *c);
	/* What a connection over max_conns is sent before the port closes it
	 * (paste_port_config.refuse): RESP "-ERR max number of clients
	 * reached", HTTP a 503. NULL: it waits in the backlog for a slot. */
	const char *refuse;
};

/* TCP_DEFER_ACCEPT, on by default: both protocols are client-speaks-first,
 * so the kernel hands over a connection with its first request and the
 * accept and the first read come in one pass (cheaper per connection:
 * docs/results.md, "Short connections"). At most an hour, as the port. */
#define SRV_DEFER_ACCEPT_S 1u
#define SRV_DEFER_ACCEPT_MAX_S 3600u

struct server_config {
	const char *name;            /* prefix of every message: "phttpd" */
	const char *host;
	uint16_t port;
	uint32_t threads;
	enum paste_engine engine;
	const char *store_path;
	uint64_t store_size;
	uint32_t buf_size;
	uint64_t node_size;          /* B+tree node area when creating (paste_store_config) */
	enum paste_durability durability;
	uint64_t pm_latency_ns;
	uint32_t ring_bufs;
	uint32_t max_conns;          /* connection slots per thread */
	uint64_t max_output;         /* a connection's unsent replies before it is no longer
				      * read (paste_port_config.max_output); 0: no limit */
	bool busy_poll;
	int cpu;                     /* pin thread i to CPU cpu+i; -1: no pinning */
	uint32_t defer_accept_s;     /* paste_port_config.defer_accept_s (0: off) */
	/* paste_port_config's batch-wait knobs (uring; 0: the port's default) */
	uint32_t min_wait_us, want_div;
	bool no_min_wait;
	uint32_t commit_hold_us;   /* fsync group commits: paste_port_config's (0: default) */
	bool no_commit_hold;       /* ... -1: never wait */
	uint64_t header_to_ms, body_to_ms, idle_to_ms;   /* 0: disabled */
	bool peer_addrs;             /* paste_port_config.peer_addrs (pkvs: protected mode) */
	const char *mode;            /* for the start-up line: "rpc", "wal" */
	const char *mode_note;       /* appended to it (", copy mode"), or "" */
	/* One listener on `port` with this protocol (phttpd) ... */
	const struct server_proto *proto;
	const void *proto_cfg;
	/* ... or, when nlisten > 0, these listeners on host instead, each
	 * with its protocol (pkvs: HTTP and RESP), served by the same ports:
	 * one submission per pass for all of them. */
	uint32_t nlisten;
	struct server_listener {
		const char *label;       /* "http", "resp": the listening line */
		uint16_t port;           /* 0: a free one */
		const struct server_proto *proto;
		const void *proto_cfg;
	} listen[PASTE_PORT_MAX_LISTEN];
};

/* Counters other threads read (/stats): written by their worker only, so
 * a relaxed load + store (plain moves on x86) instead of an atomic add
 * (a locked instruction, ~20 cycles per request), still no data race. */
static inline void srv_gauge_add(_Atomic uint64_t *c, int64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
			      memory_order_relaxed);
}

static inline void srv_bump(_Atomic uint64_t *c)
{
	srv_gauge_add(c, 1);
}

/* Replies by HTTP status, for GET /metrics: the codes the servers here
 * send, then one slot for any other. */
#define SRV_NSTATUS 19u
extern const uint16_t srv_status_codes[SRV_NSTATUS - 1];

struct worker {
	struct server *srv;
	uint32_t id;                   /* also the log lane a service may write */
	struct paste_port *port;
	struct paste_persist *persist;
	_Atomic uint64_t requests;     /* the protocol counts them */
	_Atomic uint64_t timeouts;     /* SRV_T_HEAD / SRV_T_BODY expiries */
	_Atomic uint64_t idle_closes;  /* SRV_T_IDLE expiries */
	_Atomic uint64_t status[SRV_NSTATUS];   /* replies by status (srv_count_status) */
	pthread_t thread;
	uint64_t now_ms;               /* monotonic, read once per poll pass */
	uint64_t next_sweep_ms;
	/* Open connections, for the sweep: slots in open[0..nopen), and
	 * pos[slot] their index (UINT32_MAX: not listed). Kept outside
	 * conn_data, which the port zeroes at accept. */
	uint32_t *open, *pos, nopen;
	/* The failed store, as this worker saw it. */
	bool failing;
	uint32_t fail_passes;
	uint64_t fail_ms;
	const char *fail_why;          /* the store's sentence (lives as long as it) */
	/* This worker's port counters for /stats in other threads (a port's
	 * counters are plain fields only its own thread may read). */
	pthread_mutex_t snap_lock;
	struct paste_port_stats snap;
	bool snap_valid, snap_stale;
	/* The batch being dispatched (a nested pass takes over its rest),
	 * whether its bytes are copies of ours rather than the port's
	 * buffers, the current event's buffer a nested pass holds
	 * (PASTE_NO_BUF: none), and the held-back events of the connection
	 * whose command runs long, copied, in order. */
	const struct paste_event *cur_evs, *cur_ev;
	uint32_t cur_n, cur_i, cur_held;
	bool cur_copied, nest_off;
	struct paste_event *later;
	uint32_t nlater, caplater;
};

struct server {
	struct server_config cfg;
	enum paste_durability durability;   /* cfg's, AUTO resolved */
	struct paste_store *store;
	struct worker *workers;
	uint32_t conn_size;            /* bytes per conn_data slot, all three parts */
	/* The listeners (cfg.listen, or the one cfg.proto on cfg.port), each
	 * protocol's state from its open, and the bound ports. */
	uint32_t nlis;
	struct server_listener lis[PASTE_PORT_MAX_LISTEN];
	void *proto_state[PASTE_PORT_MAX_LISTEN];
	bool proto_open[PASTE_PORT_MAX_LISTEN];
	bool started;
	bool served;                   /* every port opened: the start succeeded */
	atomic_int stop;               /* main tells the workers to return */
	atomic_int exit_code;          /* a worker's run-time failure: 1 */
	uint16_t listen_port[PASTE_PORT_MAX_LISTEN];   /* bound ports, for the next worker */
	sem_t opened;                  /* a worker opened its port (or failed) */
	struct paste_error open_err;
};

/* Bytes per conn_data slot for this protocol and configuration. */
uint32_t server_conn_size(const struct server_proto *proto, const void *proto_cfg);

/* What a service of any protocol has: HTTP's and RESP's service tables
 * (struct http_service, struct resp_service) begin with it. Every hook may
 * be NULL. */
struct service_base {
	const char *name;          /* --mode, /stats "mode" */
	uint32_t conn_size;        /* per-connection state; 0 for none */
	/* Process-wide state: *state is passed back to every hook (the
	 * protocols' contexts carry it as x->ss). cfg is the service's own
	 * config (struct rpc_config, ...). Runs once before any worker, with
	 * the store not yet started. 0, or a negative errno with err->msg set
	 * (the server exits 1). */
	int (*open)(struct server *s, const void *cfg, void **state, struct paste_error *err);
	void (*close)(struct server *s, void *state);
	void (*banner)(struct server *s, void *state);   /* start-up lines of its own */
	/* Once the store is started, before any worker: what a start writes
	 * (pkvs: converting an earlier key layout). As server_proto's. */
	int (*started)(struct server *s, void *state, struct paste_error *err);
	/* Once per event-loop pass, after the batch (pkvs: release what
	 * became durable, checkpoint when due). */
	void (*pass)(struct worker *w, void *state);
	/* When the service next needs a pass with no event (server_proto's
	 * wake), UINT64_MAX for none. */
	uint64_t (*wake)(struct worker *w, void *state);
};

/* A protocol's hold on its service: the table and the state its open
 * gave. A protocol's state begins with one, so service_banner and
 * service_pass serve as its server_proto banner and pass hooks. */
struct service_run {
	const struct service_base *svc;
	void *ss;
};
int service_open(struct service_run *r, const struct service_base *svc, struct server *s,
		 const void *cfg, struct paste_error *err);
void service_close(struct service_run *r, struct server *s);
void service_banner(struct server *s, void *proto_state);
int service_started(struct server *s, void *proto_state, struct paste_error *err);
void service_pass(struct worker *w, void *proto_state);
uint64_t service_wake(struct worker *w, void *proto_state);

/* The state of the protocol connection c belongs to (its open's *state). */
static inline void *srv_proto_state(const struct worker *w, const struct srv_conn *c)
{
	return w->srv->proto_state[c->lis];
}

/* The exit statuses (enum paste_exit), for both servers' --help. */
#define SRV_EXIT_HELP \
	"exit status: 0 clean stop, 1 run-time failure (a failed store included), 2 usage or\n" \
	"configuration, 3 store damaged (start refused, nothing written: paste-store salvage),\n" \
	"4 store in use, 5 I/O error at start (cannot create, allocate, read or sync)\n"

/* Open the store (created if missing), check it against the config, open
 * one persist object per thread. Returns 0, or the exit status (enum
 * paste_exit: paste_exit_status of the error, 2 for bad usage) after
 * printing why; *out is then NULL. */
int server_open(struct server **out, const struct server_config *cfg);
/* Open the protocol's process-wide state (the services: recovery), then
 * start the store (its free list). Returns 0 or the exit status of the
 * failure (printed): 3 for a damaged store. server_run calls it if needed. */
int server_ready(struct server *s);
/* Start the workers (each opens its own port), print the start-up lines,
 * wait for SIGINT/SIGTERM or a worker's failure, stop. Returns the exit
 * status: 0, that of a failed start, or 1 after a run-time failure (a
 * failed store named on stderr). */
int server_run(struct server *s);
/* Everything server_open and server_ready set up, in reverse; returns code.
 * A non-zero code before the server listened removes a store this start
 * created (paste_store_unlink_created). */
int server_close(struct server *s, int code);

/* One worker, step by step (server_run's threads; unit tests drive them
 * from their own thread). start opens the port in the calling thread
 * (SINGLE_ISSUER) and returns 0 or a negative errno (s->open_err says
 * why). pass polls once (at most timeout_ms; -1: the server's own bound)
 * and dispatches the batch; returns the events, or < 0 when the worker
 * must stop (the loop failed, or a failed store's drain is over). stop
 * closes what is still open and the port. */
int server_worker_start(struct worker *w);
int server_worker_pass(struct worker *w, int timeout_ms);
/* A pass from inside a command that runs long (a script past
 * busy-reply-threshold; Redis's processEventsWhileBlocked): the rest of
 * the batch being dispatched and what a poll that does not wait brings
 * are handed to their protocols now, but the events of connection
 * `held` (the one whose command runs), which are copied and dispatched
 * in order once that command returned. No service pass, no sweep. The
 * current event's buffer is held meanwhile (its command's connection
 * reads on in it). 0 and nothing done where that cannot be: an engine
 * without store buffers (epoll: the next poll reuses its read buffer),
 * or after held's connection closed (its slot must stay its own). */
int server_worker_nested_pass(struct worker *w, uint32_t held);
void server_worker_stop(struct worker *w);

/* True once the store has failed (one atomic load per call until then);
 * the first call that sees it sets w->fail_why and starts the drain. */
bool server_store_failed(struct worker *w);

/* Every worker's counters summed: this worker's port live, the others'
 * from their snapshots (at most one pass, or half a second when idle,
 * old). bufs_held: buffers the store counts as in use minus those the
 * ports own while free (posted in a ring or in a uring port's allocation
 * cache), so a leak of even one buffer shows. */
struct server_totals {
	struct paste_port_stats port;
	uint64_t requests, timeouts, idle_closes;
	uint64_t status[SRV_NSTATUS];
	uint32_t bufs_held;
};

/* Count one reply with this status (a relaxed add; a short scan of
 * srv_status_codes). */
void srv_count_status(struct worker *w, int status);
void server_totals(struct worker *w, struct server_totals *t);

#endif
