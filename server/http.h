/*
 * http.h - the HTTP/1.x protocol over the server layer, and the interface
 * a service implements (struct http_service).
 *
 * The protocol frames requests (heads parsed where they landed, heads
 * split across reads reassembled, pipelining, Expect: 100-continue, body
 * length), answers what is its own (4xx for bad input, 408, 503 once the
 * store failed, GET /stats), and hands every other request to one service:
 *
 *   head complete  -> route(x, req)       pick a handler; may refuse (413)
 *   body bytes     -> body(x, ev, off, n) as they arrive (optional)
 *   request whole  -> finish(x)           reply with the helpers below
 *   connection end -> closed(x)           release what it holds
 *
 * Its name, per-connection state, open/close/banner and per-pass hook are
 * the struct service_base every protocol's services share (server.h).
 *
 * Services call only downward: these helpers, server.h, libpaste.
 */
#ifndef PASTE_SERVER_HTTP_H
#define PASTE_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "paste.h"
#include "auth.h"
#include "reassembly.h"
#include "server.h"

#define HTTP_MAX_HEAD 8192u
#define HTTP_ROUTE_STATS UINT16_MAX   /* h->route of GET /stats (the protocol's own) */
#define HTTP_ROUTE_METRICS (UINT16_MAX - 1)  /* GET /metrics (the protocol's own) */

enum http_state { H_HEAD = 0, H_BODY, H_DEAD };

/* The protocol part of a connection (after struct srv_conn in the slot;
 * zeroed at accept). Services read keep_alive, http10, head_only, route;
 * they change them only through the reply helpers. */
struct http_conn {
	uint8_t state;             /* enum http_state */
	bool keep_alive;
	bool http10;
	bool head_only;            /* HEAD request: no body in the reply */
	uint16_t route;            /* what the service's route returned, or HTTP_ROUTE_STATS */
	struct reasm head;         /* a head split across reads, put together (kept for reuse) */
	uint64_t body_left;        /* body bytes still to come */
	struct paste_http_parser ps;
};

/* One request on one connection, as the protocol hands it to a service.
 * Built on the stack once per DATA event (six stores). */
struct http_ctx {
	struct worker *w;          /* w->port, w->persist, w->id (the log lane) */
	uint32_t conn;
	struct srv_conn *c;
	struct http_conn *h;
	void *sc;                  /* the service's part of the slot (conn_size bytes) */
	void *ss;                  /* the service's process-wide state (from open) */
};

struct http_service {
	struct service_base base;  /* name, per-connection state, open ... pass */
	/* A head is complete (req points into the event's bytes or the
	 * reassembly buffer: valid during this call only). Returns the handler
	 * id (0 .. HTTP_ROUTE_METRICS - 1, stored in x->h->route), or a negative
	 * HTTP status answered at once before the connection closes (-413: a
	 * body this service cannot take). Not called once the store failed. */
	int (*route)(struct http_ctx *x, const struct paste_http_req *req);
	/* Bytes [off, off + len) of DATA event ev are body bytes of the
	 * current request (every byte once, in order). NULL: bodies are read
	 * and dropped. */
	void (*body)(struct http_ctx *x, const struct paste_event *ev, uint32_t off, uint32_t len);
	/* The whole request is in: reply (http_reply and friends, or
	 * paste_port_send for a prebuilt reply). */
	void (*finish)(struct http_ctx *x);
	/* Release what the connection holds (a partial body). Called when the
	 * connection closes, times out, or is refused with 503 by a failed
	 * store: possibly more than once, so it must be idempotent. NULL: none. */
	void (*closed)(struct http_ctx *x);
	/* /stats: append the service's JSON members, each followed by ','
	 * (out[at..cap), like http_put_str); returns the new end. */
	size_t (*stats)(struct server *s, void *state, char *out, size_t at, size_t cap);
	/* GET /metrics: append the service's own samples in the Prometheus
	 * text format (server/metrics.h helpers); returns the new end. */
	size_t (*metrics)(struct server *s, void *state, char *out, size_t at, size_t cap);
};

struct http_config {
	uint64_t max_body;         /* larger Content-Length: 413 (--max-body) */
	const struct http_service *service;
	const void *service_cfg;
	/* A password (requirepass) every request must carry while one is set:
	 * HTTP Basic (any user) or "Authorization: Bearer <password>";
	 * otherwise 401 with WWW-Authenticate. NULL: none. */
	const struct srv_auth *auth;
};

/* The protocol; its server_config.proto_cfg is a struct http_config. */
extern const struct server_proto http_proto;

/* Replies are built by appending, not snprintf: on the WAL path three
 * snprintf calls per 201 would cost 7 % of the server's CPU. Each appends at
 * out[at..cap) and returns the new end (truncating at cap). */
size_t http_put_str(char *out, size_t at, size_t cap, const char *s);
size_t http_put_u64(char *out, size_t at, size_t cap, uint64_t v);
/* "HTTP/1.1 <status> <reason>", Server (the server's name: phttpd, pkvs),
 * Content-Type (if ctype), Connection (as h's keep_alive/http10 need),
 * Content-Length, the extra header line(s) if any (no CRLF at the end),
 * the blank line. Returns the length. */
int http_reply_head(char *out, size_t cap, const char *server, const struct http_conn *h,
		    int status, const char *ctype, uint64_t content_length, const char *extra);
/* Build, count (GET /metrics) and queue a reply head; the caller queues
 * the body (a service sending from store buffers). paste_port_send's
 * result. */
int http_send_head(struct http_ctx *x, int status, const char *ctype, uint64_t content_length,
		   const char *extra, int flags);
/* Head + body (no body for HEAD), then close unless keep-alive. Returns the
 * first failed send's result (0 when all were queued). A DURABLE reply
 * refused with -EIO (the store failed) queues nothing more and does not
 * close: the caller answers http_reply_failed instead. */
int http_reply(struct http_ctx *x, int status, const char *ctype, const void *body, size_t len,
	       const char *extra, int flags);
/* Bad input: "<status> <reason>\n", then close this connection only. */
void http_reply_error(struct http_ctx *x, int status);
/* The same with a word on what was wrong: "<status> <reason>: <why>\n"
 * (why NULL: as http_reply_error). */
void http_reply_error_why(struct http_ctx *x, int status, const char *why);

/* One name=value pair of a request's query, not decoded (paste_http_unescape
 * decodes a value); has_value is false for a bare name ("?flag"). */
struct http_param {
	const char *name, *value;
	uint32_t name_len, value_len;
	bool has_value;
};
/* The next pair of the query (*q)[0..*n) (req->query, req->query_len; NULL
 * and 0 are an empty query): true with *p filled and *q, *n moved past it;
 * false when none is left. Empty pairs ("a=1&&b=2", a trailing '&') are
 * skipped. So a route that takes no parameters refuses a query for which
 * the first call returns true (400: a parameter it does not know, rather
 * than a request it silently does not do). */
bool http_query_next(const char **q, uint32_t *n, struct http_param *p);
/* p names `name` (a NUL-terminated literal). */
bool http_param_is(const struct http_param *p, const char *name);
/* 503 naming the store's failure (Retry-After: 5), then close. */
void http_reply_failed(struct http_ctx *x);

#endif
