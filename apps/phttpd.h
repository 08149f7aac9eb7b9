/*
 * phttpd.h - what phttpd.c (HTTP framing, RPC mode, the loop) and
 * phttpd_wal.c (the durable log mode) share.
 */
#ifndef PHTTPD_H
#define PHTTPD_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include "paste.h"

enum route {
	ROUTE_RPC = 0,      /* fixed body (RPC mode) */
	ROUTE_STATS,
	ROUTE_LOG_APPEND,   /* POST /log */
	ROUTE_LOG_GET,      /* GET /log/<lsn> */
	ROUTE_LOG_TRUNCATE, /* DELETE /log?upto=<lsn> */
	ROUTE_NOT_FOUND,
	ROUTE_BAD_METHOD,
	ROUTE_BAD_REQUEST,
};

enum hstate { H_HEAD = 0, H_BODY, H_DEAD };

/* Per-connection state, zeroed by the port at accept (conn_data). The
 * timeout sweep reads only the first cache line (state .. head_ms). */
struct hconn {
	uint8_t state;
	uint8_t route;
	bool keep_alive;
	bool http10;
	bool head_only;            /* HEAD request: no body in the reply */
	bool failed;               /* body collection failed: answer `fail_status` */
	uint16_t fail_status;
	uint64_t last_ms;          /* batch clock at the accept or the last DATA */
	uint64_t head_ms;          /* batch clock when a split head's first bytes came */
	struct paste_http_parser ps;
	char *head;                /* reassembly of a head split across reads */
	uint32_t head_len, head_cap;
	uint64_t body_left, body_len;
	uint64_t arg;              /* LSN argument of the route */
	/* WAL body collection: extents in store buffers this request holds. */
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t next;
	bool copying;              /* current extent is a copy buffer being filled */
};

struct server;

/* Counters other threads read (/stats): written by their worker only, so
 * a relaxed load + store (plain moves on x86) instead of an atomic add
 * (a locked instruction, ~20 cycles per request), still no data race. */
static inline void gauge_add(_Atomic uint64_t *c, int64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
			      memory_order_relaxed);
}

static inline void bump(_Atomic uint64_t *c)
{
	gauge_add(c, 1);
}

struct worker {
	struct server *srv;
	uint32_t id;
	struct paste_port *port;
	struct paste_persist *persist;
	_Atomic uint64_t requests;
	_Atomic uint64_t timeouts;     /* 408s sent by the sweep */
	_Atomic uint64_t idle_closes;  /* keep-alive connections closed idle */
	_Atomic uint64_t body_bufs;    /* store buffers unfinished bodies pin now */
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
	char fail_body[320];
	uint32_t fail_body_len;
	/* This worker's port counters for /stats in other threads (a port's
	 * counters are plain fields only its own thread may read). */
	pthread_mutex_t snap_lock;
	struct paste_port_stats snap;
	bool snap_valid, snap_stale;
};

struct server {
	/* flags */
	const char *host;
	uint16_t port;
	uint32_t threads;
	enum paste_engine engine;
	bool wal_mode;
	uint32_t body_len;
	const char *store_path;
	uint64_t store_size;
	uint32_t buf_size;
	enum paste_durability durability;
	uint64_t pm_latency_ns;
	bool copy;
	uint64_t max_body;
	uint32_t ring_bufs;
	bool busy_poll;
	int cpu;
	uint64_t header_to_ms, idle_to_ms, body_to_ms;   /* 0: disabled */
	uint64_t max_held;         /* store bytes an unfinished body may pin; 0: no limit */
	/* state */
	struct paste_store *store;
	struct paste_wal *wal;
	struct worker *workers;
	char *rpc_reply;           /* precomputed RPC response, keep-alive */
	uint32_t rpc_reply_len, rpc_head_len;
	atomic_int stop;           /* main tells the workers to return */
	atomic_int exit_code;      /* a worker's run-time failure: 1 */
	uint16_t listen_port;      /* the bound port, for the next worker */
	sem_t opened;              /* a worker opened its port (or failed) */
	struct paste_error open_err;
};

/* phttpd.c */
/* Returns the first failed send's result (0 when all were queued). A
 * DURABLE reply refused with -EIO (the store failed) queues nothing more
 * and does not close: the caller answers 503 instead (reply_failed). */
int reply_simple(struct worker *w, uint32_t conn, struct hconn *h, int status,
		 const char *ctype, const char *body, size_t len, const char *extra, int flags);
void reply_error(struct worker *w, uint32_t conn, struct hconn *h, int status);
/* True once the store has failed (one atomic load); the first call that
 * sees it prepares this worker's 503 body. */
bool store_failed(struct worker *w);
/* 503 naming the failure, then close. */
void reply_failed(struct worker *w, uint32_t conn, struct hconn *h);
/* Append a string / a decimal number at out[at..cap); return the new end
 * (truncating at cap). */
size_t put_str(char *out, size_t at, size_t cap, const char *s);
size_t put_u64(char *out, size_t at, size_t cap, uint64_t v);
/* Write "HTTP/1.1 <status> <reason>" and common headers; returns length. */
int reply_head(char *out, size_t cap, struct hconn *h, int status, const char *ctype,
	       uint64_t content_length, const char *extra);

/* phttpd_wal.c */
void wal_route(struct server *srv, struct hconn *h, const struct paste_http_req *req);
/* Body bytes of a WAL append: hold them in place or copy them. */
void wal_body(struct worker *w, struct hconn *h, const struct paste_event *ev,
	      uint32_t pos, uint32_t len);
void wal_finish(struct worker *w, uint32_t conn, struct hconn *h);
void wal_release(struct worker *w, struct hconn *h);
uint64_t wal_max_body(const struct server *srv);

#endif
