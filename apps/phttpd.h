/*
 * phttpd.h - what phttpd.c (HTTP framing, RPC mode, the loop) and
 * phttpd_wal.c (the durable log mode) share.
 */
#ifndef PHTTPD_H
#define PHTTPD_H

#include <pthread.h>
#include <semaphore.h>
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

/* Per-connection state, zeroed by the port at accept (conn_data). */
struct hconn {
	uint8_t state;
	uint8_t route;
	bool keep_alive;
	bool http10;
	bool head_only;            /* HEAD request: no body in the reply */
	bool failed;               /* body collection failed: answer `fail_status` */
	uint16_t fail_status;
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

struct worker {
	struct server *srv;
	uint32_t id;
	struct paste_port *port;
	struct paste_persist *persist;
	uint64_t requests;
	pthread_t thread;
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
	/* state */
	struct paste_store *store;
	struct paste_wal *wal;
	struct worker *workers;
	char *rpc_reply;           /* precomputed RPC response, keep-alive */
	uint32_t rpc_reply_len, rpc_head_len;
	volatile int stop;
	uint16_t listen_port;      /* the bound port, for the next worker */
	sem_t opened;              /* a worker opened its port (or failed) */
	struct paste_error open_err;
};

/* phttpd.c */
void reply_simple(struct worker *w, uint32_t conn, struct hconn *h, int status,
		  const char *ctype, const char *body, size_t len, const char *extra, int flags);
void reply_error(struct worker *w, uint32_t conn, struct hconn *h, int status);
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
