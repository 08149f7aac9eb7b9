/*
 * log.c - phttpd's durable log service (--mode wal).
 *
 *   POST /log              append the body; 201 + X-Paste-LSN once durable
 *   GET /log/<lsn>         the stored bytes, sent from the held buffers (and HEAD)
 *   DELETE /log?upto=<lsn> truncate; frees the buffers
 *
 * Routes match the target's path; upto is the only query parameter, and
 * any other is 400 (as pkvs: a parameter not known is not ignored).
 *
 * Bodies are gathered by lib/body.c (paste_body_*): zero copy with the
 * uring engine (every packet buffer that carries body bytes is held where
 * it landed and named in the record by (buffer, offset, length)); the
 * epoll engine and --copy copy the body into fresh store buffers instead
 * (the paper's baseline and its "copy" bar); --max-held bounds the store
 * space one unfinished body pins (see paste_body(3)), and a body whose
 * dense copy alone would not fit is refused with 413 at its head. Either
 * way the record and data are flushed at append and made durable by the
 * port's one barrier per batch before the 201 leaves.
 *
 * Once the store has failed nothing here acknowledges: the protocol
 * answers 503 before route and finish, and a DURABLE send the port
 * refuses with -EIO becomes a 503 too.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "services.h"

/* Per worker: the store buffers unfinished bodies pin now (/stats
 * body_bufs). A cache line each: written by its worker per body read. */
struct log_thread {
	_Alignas(64) _Atomic uint64_t body_bufs;
};

struct log_state {
	struct paste_wal *wal;
	struct paste_store *store;
	struct paste_body_config bc;
	uint32_t threads;
	struct log_thread *t;
};

/* Per connection (after the protocol's part of the slot). */
struct log_conn {
	uint64_t arg;               /* the route's LSN */
	const char *why;            /* LOG_BAD_REQUEST's word, LOG_BAD_METHOD's Allow */
	struct paste_body body;     /* POST /log: the body so far */
};

static int log_open(struct server *s, const void *cfg, void **state, struct paste_error *err)
{
	const struct log_config *wc = cfg;
	struct log_state *ws = calloc(1, sizeof(*ws));
	struct log_thread *t = aligned_alloc(64, s->cfg.threads * sizeof(*t));
	if (!ws || !t) {
		free(ws);
		free(t);
		return paste_error_set(err, -ENOMEM, "out of memory");
	}
	memset(t, 0, s->cfg.threads * sizeof(*t));
	err->msg[0] = 0;
	int r = paste_wal_open(&ws->wal, s->store, s->workers[0].persist, err);
	if (r) {
		free(ws);
		free(t);
		return r;
	}
	if (err->msg[0])
		fprintf(stderr, "%s: recovery: %s\n", s->cfg.name, err->msg);
	ws->store = s->store;
	ws->bc = (struct paste_body_config){ .copy = wc->copy, .max_held = wc->max_held };
	ws->threads = s->cfg.threads;
	ws->t = t;
	*state = ws;
	return 0;
}

static void log_close(struct server *s, void *state)
{
	(void)s;
	struct log_state *ws = state;
	if (!ws)
		return;
	paste_wal_close(ws->wal);
	free(ws->t);
	free(ws);
}

static void log_banner(struct server *s, void *state)
{
	struct log_state *ws = state;
	struct paste_wal_info wi = { 0 };
	paste_wal_info(ws->wal, &wi);
	fprintf(stderr, "%s: log: %" PRIu64 " records, LSN %" PRIu64 "..%" PRIu64 "\n",
		s->cfg.name, wi.records, wi.first_lsn, wi.last_lsn);
}

static bool parse_lsn(const char *p, uint32_t n, uint64_t *out)
{
	if (!n || n > 20)
		return false;
	uint64_t v = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return true;
}

static void body_release(struct http_ctx *x)
{
	struct log_conn *wc = x->sc;
	struct log_state *ws = x->ss;
	if (wc->body.bufs)
		srv_gauge_add(&ws->t[x->w->id].body_bufs, -(int64_t)wc->body.bufs);
	paste_body_release(&wc->body, ws->store);
}

/* DELETE /log's query: upto=<lsn>, once, and nothing else. */
static int truncate_route(struct log_conn *wc, const char *q, uint32_t n)
{
	struct http_param p;
	bool seen = false;
	while (http_query_next(&q, &n, &p)) {
		if (!http_param_is(&p, "upto")) {
			wc->why = "unknown query parameter";
			return LOG_BAD_REQUEST;
		}
		if (seen || !parse_lsn(p.value, p.value_len, &wc->arg)) {
			wc->why = seen ? "repeated query parameter" : "upto is not an LSN";
			return LOG_BAD_REQUEST;
		}
		seen = true;
	}
	if (!seen)
		wc->why = "upto=<lsn> missing";
	return seen ? LOG_TRUNCATE : LOG_BAD_REQUEST;
}

static int log_route(struct http_ctx *x, const struct paste_http_req *req)
{
	struct log_conn *wc = x->sc;
	const char *t = req->path;
	uint32_t n = req->path_len;
	enum paste_http_method m = req->method;
	const char *q = req->query;
	uint32_t qn = req->query_len;
	struct http_param p;
	if (n < 4 || memcmp(t, "/log", 4) || (n > 4 && t[4] != '/'))
		return LOG_NOT_FOUND;
	if (n == 4 && m == PASTE_HTTP_DELETE)
		return truncate_route(wc, q, qn);
	if (n == 4 && m != PASTE_HTTP_POST) {
		wc->why = "Allow: POST, DELETE";
		return LOG_BAD_METHOD;
	}
	if (n > 4 && m != PASTE_HTTP_GET && m != PASTE_HTTP_HEAD) {
		wc->why = "Allow: GET, HEAD";
		return LOG_BAD_METHOD;
	}
	if (http_query_next(&q, &qn, &p)) {
		wc->why = "unknown query parameter";
		return LOG_BAD_REQUEST;
	}
	if (n > 4)
		return parse_lsn(t + 5, n - 5, &wc->arg) ? LOG_GET : LOG_NOT_FOUND;
	const struct log_state *ws = x->ss;
	/* -E2BIG: a dense copy alone would exceed the extent cap or
	 * --max-held (--max-body the parser applied already). */
	int r = paste_body_begin(&wc->body, &ws->bc, ws->store, req->content_length);
	if (r == -EBUSY) {       /* never: every path releases; but never leak */
		body_release(x);
		r = paste_body_begin(&wc->body, &ws->bc, ws->store, req->content_length);
	}
	return r ? -413 : LOG_APPEND;
}

/* Hold or copy: paste_body_feed; the gauge follows the buffers the body
 * references (down to 0 when collection fails and gives them back). */
static void log_body(struct http_ctx *x, const struct paste_event *ev, uint32_t off, uint32_t len)
{
	if (x->h->route != LOG_APPEND)
		return;                  /* read and dropped */
	struct log_conn *wc = x->sc;
	struct log_state *ws = x->ss;
	uint32_t before = wc->body.bufs;
	paste_body_feed(&wc->body, &ws->bc, x->w->port, ev, off, len);
	if (wc->body.bufs != before)
		srv_gauge_add(&ws->t[x->w->id].body_bufs, (int64_t)wc->body.bufs - (int64_t)before);
}

static void finish_append(struct http_ctx *x)
{
	struct log_conn *wc = x->sc;
	struct log_state *ws = x->ss;
	if (wc->body.error) {
		int status = wc->body.error;
		body_release(x);
		http_reply(x, status, "text/plain", "store full\n", 11, NULL, 0);
		return;
	}
	uint64_t lsn = 0;
	int r = paste_wal_append(ws->wal, x->w->id, x->w->persist, wc->body.ext, wc->body.n, &lsn);
	body_release(x);     /* the log took its own references */
	if (r < 0 && server_store_failed(x->w)) {
		http_reply_failed(x);
		return;
	}
	if (r == -ENOSPC) {
		http_reply(x, 507, "text/plain", "log full\n", 9, NULL, 0);
		return;
	}
	if (r < 0) {
		char msg[96];
		int n = snprintf(msg, sizeof(msg), "append failed: %s\n", strerror(-r));
		http_reply(x, 500, "text/plain", msg, (size_t)n, NULL, 0);
		return;
	}
	char body[32], extra[96];
	size_t n = http_put_u64(body, 0, sizeof(body), lsn);
	body[n++] = '\n';
	size_t e = http_put_str(extra, 0, sizeof(extra) - 1, "X-Paste-LSN: ");
	e = http_put_u64(extra, e, sizeof(extra) - 1, lsn);
	e = http_put_str(extra, e, sizeof(extra) - 1, "\r\nLocation: /log/");
	e = http_put_u64(extra, e, sizeof(extra) - 1, lsn);
	extra[e] = 0;
	/* The 201 leaves only after the port's barrier made body and record
	 * durable (one fence or group commit for the whole batch); if the
	 * store failed meanwhile the port refuses it (or, if already queued,
	 * discards it and closes the connection). */
	if (http_reply(x, 201, "text/plain", body, n, extra, PASTE_SEND_DURABLE) == -EIO)
		http_reply_failed(x);
}

static void finish_get(struct http_ctx *x)
{
	struct log_conn *wc = x->sc;
	struct log_state *ws = x->ss;
	struct paste_port *pt = x->w->port;
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t n, len;
	if (paste_wal_read(ws->wal, wc->arg, ext, &n, &len)) {
		http_reply(x, 404, "text/plain", "no such record\n", 15, NULL, 0);
		return;
	}
	char extra[48];
	size_t e = http_put_str(extra, 0, sizeof(extra) - 1, "X-Paste-LSN: ");
	extra[http_put_u64(extra, e, sizeof(extra) - 1, wc->arg)] = 0;
	/* DURABLE: a record appended in this same batch is not readable
	 * before it is acknowledged (no dirty reads). */
	bool failed = http_send_head(x, 200, "application/octet-stream", len, extra,
				     PASTE_SEND_DURABLE) == -EIO;
	if (!x->h->head_only && !failed)   /* the send takes its own pins */
		failed = paste_port_send_extents(pt, x->conn, ext, n, 0, len, PASTE_SEND_DURABLE) == -EIO;
	for (uint32_t i = 0; i < n; i++)
		paste_store_unref(ws->store, ext[i].buf, false);
	if (failed)
		http_reply_failed(x);
	else if (!x->h->keep_alive)
		paste_port_close_conn(pt, x->conn);
}

static void finish_truncate(struct http_ctx *x)
{
	struct log_conn *wc = x->sc;
	struct log_state *ws = x->ss;
	int64_t dropped = paste_wal_truncate(ws->wal, wc->arg, x->w->persist);
	if (dropped < 0 && server_store_failed(x->w)) {
		http_reply_failed(x);
		return;
	}
	char body[64];
	int n = dropped < 0 ? snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", strerror((int)-dropped))
			    : snprintf(body, sizeof(body), "{\"truncated\":%" PRId64 "}\n", dropped);
	http_reply(x, dropped < 0 ? 500 : 200, "application/json", body, (size_t)n, NULL, 0);
}

static void log_finish(struct http_ctx *x)
{
	const struct log_conn *wc = x->sc;
	switch (x->h->route) {
	case LOG_APPEND:
		finish_append(x);
		break;
	case LOG_GET:
		finish_get(x);
		break;
	case LOG_TRUNCATE:
		finish_truncate(x);
		break;
	case LOG_BAD_METHOD:
		http_reply(x, 405, "text/plain", "method not allowed\n", 19, wc->why, 0);
		break;
	case LOG_BAD_REQUEST:
		http_reply_error_why(x, 400, wc->why);
		break;
	default:
		http_reply(x, 404, "text/plain", "not found\n", 10, NULL, 0);
		break;
	}
}

static size_t log_stats(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s;
	struct log_state *ws = state;
	struct paste_wal_info wi = { 0 };
	paste_wal_info(ws->wal, &wi);
	uint64_t body_bufs = 0;
	for (uint32_t i = 0; i < ws->threads; i++)
		body_bufs += atomic_load_explicit(&ws->t[i].body_bufs, memory_order_relaxed);
	char tmp[192];
	int n = snprintf(tmp, sizeof(tmp),
		"\"log_records\":%" PRIu64 ",\"log_first_lsn\":%" PRIu64 ",\"log_last_lsn\":%" PRIu64 ","
		"\"body_bufs\":%" PRIu64 ",", wi.records, wi.first_lsn, wi.last_lsn, body_bufs);
	(void)n;
	return http_put_str(out, at, cap, tmp);
}

static size_t log_metrics(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s;
	struct log_state *ws = state;
	struct paste_wal_info wi = { 0 };
	paste_wal_info(ws->wal, &wi);
	at = metrics_one(out, at, cap, "paste_log_records", "gauge", "Live durable log records.",
			 wi.records);
	at = metrics_one(out, at, cap, "paste_log_data_bytes", "gauge",
			 "Data bytes of the live durable records.", wi.bytes);
	at = metrics_one(out, at, cap, "paste_log_used_bytes", "gauge",
			 "Log-area bytes in use, all lanes.", wi.log_used);
	return metrics_one(out, at, cap, "paste_log_size_bytes", "gauge", "Log-area bytes, all lanes.",
			   wi.log_size);
}

const struct http_service log_service = {
	.base = {
		.name = "wal",
		.conn_size = sizeof(struct log_conn),
		.open = log_open,
		.close = log_close,
		.banner = log_banner,
	},
	.route = log_route,
	.body = log_body,
	.finish = log_finish,
	.closed = body_release,
	.stats = log_stats,
	.metrics = log_metrics,
};
