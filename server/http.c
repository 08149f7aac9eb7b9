/*
 * http.c - the HTTP/1.x protocol: framing, replies, the protocol's own
 * answers (bad input, 408, 503 after a store failure, GET /stats), and
 * dispatch to the service (http.h).
 *
 * Per request on the hot path: one parse of the head where it landed (a
 * head split across reads is reassembled in a small per-connection
 * buffer; bodies are never copied here), two indirect calls (the
 * service's route and finish), one atomic load (has the store failed?).
 * Pipelined requests in one read are handled in a loop; nothing is
 * allocated per request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "metrics.h"

#define CONTINUE_100 "HTTP/1.1 100 Continue\r\n\r\n"
#define FAIL_BODY_MAX 319u   /* "store failed: <why>\n", cut here */

struct http_proto_state {
	struct service_run run;          /* first: service_banner, service_pass */
	const struct http_config *cfg;
	const struct http_service *svc;  /* run.svc is &svc->base */
};

size_t http_put_str(char *out, size_t at, size_t cap, const char *s)
{
	size_t n = strlen(s);
	if (at + n > cap)
		n = at < cap ? cap - at : 0;
	memcpy(out + at, s, n);
	return at + n;
}

size_t http_put_u64(char *out, size_t at, size_t cap, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at < cap)
		out[at++] = tmp[--n];
	return at;
}

int http_reply_head(char *out, size_t cap, const char *server, const struct http_conn *h,
		    int status, const char *ctype, uint64_t content_length, const char *extra)
{
	size_t n = http_put_str(out, 0, cap, "HTTP/1.1 ");
	n = http_put_u64(out, n, cap, (uint64_t)status);
	n = http_put_str(out, n, cap, " ");
	n = http_put_str(out, n, cap, paste_http_reason(status));
	n = http_put_str(out, n, cap, "\r\nServer: ");
	n = http_put_str(out, n, cap, server);
	n = http_put_str(out, n, cap, "\r\n");
	if (ctype) {
		n = http_put_str(out, n, cap, "Content-Type: ");
		n = http_put_str(out, n, cap, ctype);
		n = http_put_str(out, n, cap, "\r\n");
	}
	/* 1.1 keeps alive by default; 1.0 must be told it was kept */
	if (!h->keep_alive)
		n = http_put_str(out, n, cap, "Connection: close\r\n");
	else if (h->http10)
		n = http_put_str(out, n, cap, "Connection: keep-alive\r\n");
	n = http_put_str(out, n, cap, "Content-Length: ");
	n = http_put_u64(out, n, cap, content_length);
	n = http_put_str(out, n, cap, "\r\n");
	if (extra) {
		n = http_put_str(out, n, cap, extra);
		n = http_put_str(out, n, cap, "\r\n");
	}
	n = http_put_str(out, n, cap, "\r\n");
	return (int)n;
}

int http_send_head(struct http_ctx *x, int status, const char *ctype, uint64_t content_length,
		   const char *extra, int flags)
{
	char buf[512];
	int n = http_reply_head(buf, sizeof(buf), x->w->srv->cfg.name, x->h, status, ctype,
				content_length, extra);
	srv_count_status(x->w, status);
	return paste_port_send(x->w->port, x->conn, buf, (size_t)n, flags);
}

int http_reply(struct http_ctx *x, int status, const char *ctype, const void *body, size_t len,
	       const char *extra, int flags)
{
	struct paste_port *pt = x->w->port;
	int r = http_send_head(x, status, ctype, len, extra, flags);
	if (r == -EIO && (flags & PASTE_SEND_DURABLE))
		return r;
	if (r == 0 && len && !x->h->head_only)
		r = paste_port_send(pt, x->conn, body, len, flags);
	if (!x->h->keep_alive)
		paste_port_close_conn(pt, x->conn);
	return r;
}

/* Nothing more is read on this connection; its close is queued. */
static void set_dead(struct http_ctx *x)
{
	x->h->state = H_DEAD;
	x->c->timer = SRV_T_NONE;
}

void http_reply_error_why(struct http_ctx *x, int status, const char *why)
{
	char body[160];
	int n = snprintf(body, sizeof(body), why ? "%d %s: %s\n" : "%d %s\n", status,
			 paste_http_reason(status), why);
	if (n < 0 || n >= (int)sizeof(body))
		n = snprintf(body, sizeof(body), "%d %s\n", status, paste_http_reason(status));
	x->h->keep_alive = false;
	x->h->head_only = false;
	http_reply(x, status, "text/plain", body, (size_t)n, NULL, 0);
	set_dead(x);
}

void http_reply_error(struct http_ctx *x, int status)
{
	http_reply_error_why(x, status, NULL);
}

bool http_query_next(const char **q, uint32_t *n, struct http_param *p)
{
	while (*n) {
		const char *s = *q;
		const char *amp = memchr(s, '&', *n);
		uint32_t len = amp ? (uint32_t)(amp - s) : *n;
		*q = s + len + (amp != NULL);
		*n -= len + (amp != NULL);
		if (!len)
			continue;
		const char *eq = memchr(s, '=', len);
		p->name = s;
		p->name_len = eq ? (uint32_t)(eq - s) : len;
		p->has_value = eq != NULL;
		p->value = eq ? eq + 1 : s + len;
		p->value_len = eq ? len - p->name_len - 1 : 0;
		return true;
	}
	return false;
}

bool http_param_is(const struct http_param *p, const char *name)
{
	size_t n = strlen(name);
	return p->name_len == n && !memcmp(p->name, name, n);
}

/* The server is going away: say why and close, so the client does not
 * send more on this connection. */
void http_reply_failed(struct http_ctx *x)
{
	char body[FAIL_BODY_MAX];
	server_store_failed(x->w);
	size_t n = http_put_str(body, 0, sizeof(body), "store failed: ");
	n = http_put_str(body, n, sizeof(body), x->w->fail_why ? x->w->fail_why : "");
	n = http_put_str(body, n, sizeof(body), "\n");
	x->h->keep_alive = false;
	http_reply(x, 503, "text/plain", body, n, "Retry-After: 5", 0);
	set_dead(x);
}

/* GET /stats: the server's totals, the service's members. */
static void reply_stats(struct http_ctx *x, const struct http_proto_state *hs)
{
	struct server *s = x->w->srv;
	struct server_totals tt;
	server_totals(x->w, &tt);
	const struct paste_port_stats *t = &tt.port;
	const struct paste_store_geom *g = paste_store_geom(s->store);
	char body[1536];
	int n = snprintf(body, sizeof(body),
		"{\"engine\":\"%s\",\"mode\":\"%s\",\"durability\":\"%s\",\"threads\":%u,"
		"\"requests\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"events\":%" PRIu64 ",\"mean_batch\":%.2f,"
		"\"syscalls\":%" PRIu64 ",\"syscalls_per_request\":%.4f,"
		"\"bufs_total\":%u,\"bufs_free\":%u,\"bufs_held\":%u,\"enobufs\":%" PRIu64 ","
		"\"conns\":%u,\"accepts\":%" PRIu64 ",\"fences\":%" PRIu64 ",\"commits\":%" PRIu64 ","
		"\"refused\":%" PRIu64 ",\"paused\":%u,\"pauses\":%" PRIu64 ",\"max_output\":%" PRIu64 ",",
		paste_engine_name(s->cfg.engine), hs->svc->base.name,
		paste_durability_name(x->w->persist ? paste_persist_mode(x->w->persist) : PASTE_DUR_NONE),
		s->cfg.threads, tt.requests, t->polls, t->events,
		t->polls ? (double)t->events / (double)t->polls : 0.0,
		t->syscalls, tt.requests ? (double)t->syscalls / (double)tt.requests : 0.0,
		g->nbufs, paste_store_nfree(s->store), tt.bufs_held,
		t->enobufs, t->conns, t->accepts, t->fences, t->commits, t->refused, t->paused, t->pauses,
		s->cfg.max_output);
	size_t at = n < (int)sizeof(body) ? (size_t)n : sizeof(body) - 1;
	if (hs->svc->stats)
		at = hs->svc->stats(s, hs->run.ss, body, at, sizeof(body) - 1);
	n = snprintf(body + at, sizeof(body) - at,
		"\"timeouts\":%" PRIu64 ",\"idle_closes\":%" PRIu64 ",\"store_failed\":%s}\n",
		tt.timeouts, tt.idle_closes, paste_store_failed(s->store, NULL) ? "true" : "false");
	at += n < (int)(sizeof(body) - at) ? (size_t)n : sizeof(body) - at - 1;
	http_reply(x, 200, "application/json", body, at, NULL, 0);
}

/* GET /metrics: the Prometheus text format, built per scrape (~4 KiB). */
#define METRICS_CAP 16384u
static void reply_metrics(struct http_ctx *x, const struct http_proto_state *hs)
{
	char *body = malloc(METRICS_CAP);
	if (!body) {
		http_reply_error(x, 503);
		return;
	}
	size_t at = metrics_server(x->w, body, 0, METRICS_CAP);
	if (hs->svc->metrics)
		at = hs->svc->metrics(x->w->srv, hs->run.ss, body, at, METRICS_CAP);
	http_reply(x, 200, "text/plain; version=0.0.4; charset=utf-8", body, at, NULL, 0);
	free(body);
}

/* A whole request (head and body) is in: answer it. */
static void finish_request(struct http_ctx *x, const struct http_proto_state *hs)
{
	struct http_conn *h = x->h;
	srv_bump(&x->w->requests);
	if (h->route == HTTP_ROUTE_STATS) {
		reply_stats(x, hs);
	} else if (h->route == HTTP_ROUTE_METRICS) {
		reply_metrics(x, hs);
	} else if (server_store_failed(x->w)) {
		if (hs->svc->closed)
			hs->svc->closed(x);
		http_reply_failed(x);
		return;
	} else {
		hs->svc->finish(x);
	}
	if (h->state != H_DEAD) {
		h->state = H_HEAD;
		x->c->timer = SRV_T_IDLE;
	}
	paste_http_parser_init(&h->ps, HTTP_MAX_HEAD, hs->cfg->max_body);
}

/* The protocol's own routes, answered even when the store failed: the
 * route, 0 (the service's), or a negative status with *why. Neither
 * /stats nor /metrics takes a parameter. No service is a proxy, so
 * CONNECT (RFC 9110 section 9.3.6) is not implemented by any. */
static int own_route(const struct paste_http_req *req, const char **why)
{
	if (req->method == PASTE_HTTP_OTHER && req->method_len == 7 &&
	    !memcmp(req->method_str, "CONNECT", 7)) {
		*why = "CONNECT: this server is not a proxy";
		return -501;
	}
	if (req->method != PASTE_HTTP_GET && req->method != PASTE_HTTP_HEAD)
		return 0;
	int route = 0;
	if (req->path_len == 6 && !memcmp(req->path, "/stats", 6))
		route = HTTP_ROUTE_STATS;
	else if (req->path_len == 8 && !memcmp(req->path, "/metrics", 8))
		route = HTTP_ROUTE_METRICS;
	const char *q = req->query;
	uint32_t n = req->query_len;
	struct http_param p;
	if (route && http_query_next(&q, &n, &p)) {
		*why = "unknown query parameter";
		return -400;
	}
	return route;
}

/* The value of header field `name` in req's head (the first one), with
 * its surrounding blanks left out: false when there is none. */
static bool header_value(const struct paste_http_req *req, const char *name, const char **v,
			 size_t *vlen)
{
	const char *p = req->method_str, *end = p + req->head_len;
	size_t nl = strlen(name);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			return false;
		p = eol + 1;                     /* the start of the next line */
		if ((size_t)(end - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
			const char *a = p + nl + 1, *b = memchr(a, '\n', (size_t)(end - a));
			if (!b)
				return false;
			while (a < b && (*a == ' ' || *a == '\t'))
				a++;
			while (b > a && (b[-1] == '\r' || b[-1] == ' ' || b[-1] == '\t'))
				b--;
			*v = a;
			*vlen = (size_t)(b - a);
			return true;
		}
	}
	return false;
}

/* Base64 (RFC 4648, padding optional) into out: the length, or -1. */
static int64_t base64_decode(const char *p, size_t n, uint8_t *out, size_t cap)
{
	uint32_t acc = 0, bits = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 :
			c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
		if (c == '=')
			break;
		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (k == cap)
				return -1;
			out[k++] = (uint8_t)(acc >> bits);
		}
	}
	return (int64_t)k;
}

/* The password, when the default user needs one: "Authorization: Basic
 * <base64 of user:password>" (a user the service knows, or with any
 * other name the default user) or "Authorization: Bearer <password>" (the
 * default user's), compared in constant time (server/auth.c). */
static bool authorized(const struct http_proto_state *hs, const struct paste_http_req *req)
{
	const struct srv_auth *a = hs->cfg->auth;
	void *user;
	if (!a || (a->users ? *a->users->open : !a->pass))
		return true;                 /* the default user needs no password */
	const char *v;
	size_t n;
	if (!header_value(req, "Authorization", &v, &n))
		return false;
	if (n > 7 && !strncasecmp(v, "Bearer ", 7)) {
		v += 7;
		n -= 7;
		while (n && *v == ' ')
			v++, n--;
		return srv_auth_login(a, NULL, "default", 7, v, n, &user);
	}
	if (n > 6 && !strncasecmp(v, "Basic ", 6)) {
		uint8_t cred[1024];
		v += 6;
		n -= 6;
		while (n && *v == ' ')
			v++, n--;
		int64_t k = base64_decode(v, n, cred, sizeof(cred));
		const uint8_t *colon = k > 0 ? memchr(cred, ':', (size_t)k) : NULL;
		if (!colon)
			return false;
		const uint8_t *p = colon + 1;
		return srv_auth_login(a, NULL, cred, (size_t)(colon - cred), p, (size_t)(cred + k - p),
				      &user);
	}
	return false;
}

/* 401 with the two schemes pkvs takes, then close (the body, if any, is
 * not read). */
static void reply_unauthorized(struct http_ctx *x)
{
	static const char body[] = "401 Unauthorized: a password is required (HTTP Basic with any "
				   "user, or Authorization: Bearer <password>)\n";
	char extra[160];
	const char *name = x->w->srv->cfg.name;
	snprintf(extra, sizeof(extra), "WWW-Authenticate: Basic realm=\"%s\", charset=\"UTF-8\"\r\n"
		 "WWW-Authenticate: Bearer realm=\"%s\"", name, name);
	x->h->keep_alive = false;
	x->h->head_only = false;
	http_reply(x, 401, "text/plain", body, sizeof(body) - 1, extra, 0);
	set_dead(x);
}

/* body_started: bytes after the head already arrived with it (the client
 * did not wait, so no 100 Continue is needed). */
static void head_done(struct http_ctx *x, const struct http_proto_state *hs,
		      const struct paste_http_req *req, bool body_started)
{
	struct http_conn *h = x->h;
	h->keep_alive = req->keep_alive;
	h->http10 = req->version_minor == 0;
	h->head_only = req->method == PASTE_HTTP_HEAD;
	h->body_left = req->content_length;
	const char *why = NULL;
	if (!authorized(hs, req)) {
		reply_unauthorized(x);
		return;
	}
	int own = own_route(req, &why);
	if (own < 0) {
		http_reply_error_why(x, -own, why);   /* the body, if any, is not read */
		return;
	}
	if ((h->route = (uint16_t)own) != 0) {
		/* /stats or /metrics */
	} else if (server_store_failed(x->w)) {
		http_reply_failed(x);   /* the body, if any, is not read */
		return;
	} else {
		int r = hs->svc->route(x, req);
		if (r < 0) {
			http_reply_error(x, -r);
			return;
		}
		h->route = (uint16_t)r;
	}
	if (h->body_left) {
		h->state = H_BODY;
		x->c->timer = SRV_T_BODY;
		/* The body will be read: say so to a client that waits for it
		 * (RFC 9110 section 10.1.1). Queued in order behind any earlier
		 * reply on this connection, so it never overtakes a 201 that is
		 * still waiting for its barrier. */
		if (req->expect_continue && !body_started)
			paste_port_send(x->w->port, x->conn, CONTINUE_100, sizeof(CONTINUE_100) - 1, 0);
	} else {
		finish_request(x, hs);
	}
}

static void ctx_init(struct http_ctx *x, struct worker *w, uint32_t conn, struct srv_conn *c)
{
	struct http_proto_state *hs = srv_proto_state(w, c);
	x->w = w;
	x->conn = conn;
	x->c = c;
	x->h = srv_proto_part(c);
	x->sc = srv_service_part(x->h, sizeof(struct http_conn));
	x->ss = hs->run.ss;
}

/* Frame the bytes of one DATA event into requests (pipelining: as many as
 * it holds; splitting: state carries over to the next event). */
static void http_data(struct worker *w, const struct paste_event *ev, struct srv_conn *c)
{
	const struct http_proto_state *hs = srv_proto_state(w, c);
	struct http_ctx x;
	ctx_init(&x, w, ev->conn, c);
	struct http_conn *h = x.h;
	uint32_t pos = 0;
	while (pos < ev->len && h->state != H_DEAD) {
		if (h->state == H_BODY) {
			uint32_t take = ev->len - pos;
			if (take > h->body_left)
				take = (uint32_t)h->body_left;
			if (h->route < HTTP_ROUTE_METRICS && hs->svc->body)
				hs->svc->body(&x, ev, pos, take);
			h->body_left -= take;
			pos += take;
			if (!h->body_left)
				finish_request(&x, hs);
			continue;
		}
		struct paste_http_req req;
		int r;
		uint32_t used;
		if (!h->head.len) {           /* zero copy: parse where it landed */
			r = paste_http_parse(&h->ps, (const char *)ev->data + pos, ev->len - pos, &req);
			if (r == 0) {
				c->timer = SRV_T_HEAD;   /* the header timeout starts */
				c->since_ms = w->now_ms;
				if (reasm_append(&h->head, ev->data + pos, ev->len - pos))
					http_reply_error(&x, 503);
				return;
			}
			used = r > 0 ? (uint32_t)r : 0;
		} else {                      /* a head split across reads */
			/* The buffer grows up to HTTP_MAX_HEAD + 1: one byte past
			 * the limit is the parser's 431. */
			uint32_t old = h->head.len, n = ev->len - pos;
			if (n > HTTP_MAX_HEAD + 1 - old)
				n = HTTP_MAX_HEAD + 1 - old;
			if (reasm_append(&h->head, ev->data + pos, n)) {
				http_reply_error(&x, 503);
				return;
			}
			r = paste_http_parse(&h->ps, h->head.p, h->head.len, &req);
			if (r == 0) {
				pos += n;
				continue;
			}
			used = r > 0 ? (uint32_t)r - old : 0;
		}
		if (r < 0) {
			http_reply_error(&x, -r);
			return;
		}
		pos += used;
		head_done(&x, hs, &req, pos < ev->len);   /* req may point into h->head */
		h->head.len = 0;
	}
}

static void http_accept(struct worker *w, uint32_t conn, struct srv_conn *c)
{
	(void)conn;
	const struct http_proto_state *hs = srv_proto_state(w, c);
	struct http_conn *h = srv_proto_part(c);
	paste_http_parser_init(&h->ps, HTTP_MAX_HEAD, hs->cfg->max_body);
}

static void http_closed(struct worker *w, uint32_t conn, struct srv_conn *c)
{
	const struct http_proto_state *hs = srv_proto_state(w, c);
	struct http_ctx x;
	ctx_init(&x, w, conn, c);
	if (hs->svc->closed)
		hs->svc->closed(&x);      /* a half-received body held buffers */
	reasm_free(&x.h->head);
	set_dead(&x);
}

/* A slow or stalled client: 408, close, and the service gives back what
 * the request held. An idle one is closed without a word: there is no
 * request to answer. */
static void http_timeout(struct worker *w, uint32_t conn, struct srv_conn *c)
{
	const struct http_proto_state *hs = srv_proto_state(w, c);
	struct http_ctx x;
	ctx_init(&x, w, conn, c);
	if (c->timer == SRV_T_IDLE) {
		set_dead(&x);
		paste_port_close_conn(w->port, conn);
		return;
	}
	if (hs->svc->closed)
		hs->svc->closed(&x);
	http_reply_error(&x, 408);
}

static uint32_t http_service_conn_size(const void *cfg)
{
	return ((const struct http_config *)cfg)->service->base.conn_size;
}

static int http_open(struct server *s, const void *proto_cfg, void **state,
		     struct paste_error *err)
{
	const struct http_config *cfg = proto_cfg;
	struct http_proto_state *hs = calloc(1, sizeof(*hs));
	if (!hs)
		return paste_error_set(err, -ENOMEM, "out of memory");
	hs->cfg = cfg;
	hs->svc = cfg->service;
	int r = service_open(&hs->run, &hs->svc->base, s, cfg->service_cfg, err);
	if (r) {
		free(hs);
		return r;
	}
	*state = hs;
	return 0;
}

static void http_close(struct server *s, void *state)
{
	struct http_proto_state *hs = state;
	if (!hs)
		return;
	service_close(&hs->run, s);
	free(hs);
}

const struct server_proto http_proto = {
	.name = "http",
	.conn_size = sizeof(struct http_conn),
	.service_conn_size = http_service_conn_size,
	.open = http_open,
	.close = http_close,
	.banner = service_banner,
	.started = service_started,
	.pass = service_pass,
	.wake = service_wake,
	.accept = http_accept,
	.data = http_data,
	.closed = http_closed,
	.timeout = http_timeout,
	/* Over max_conns: a whole response, then the port closes. */
	.refuse = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
		  "Content-Length: 30\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
		  "max number of clients reached\n",
};
