/*
 * rpc.c - the RPC service: a fixed reply to every request (the paper's
 * first figure: what a request costs when it does no work).
 *
 * The keep-alive HTTP/1.1 reply is built once at open, head and body, so
 * the hot path is one paste_port_send (a memcpy into the connection's
 * output buffer) and no per-connection state (conn_size 0). Other replies
 * (HTTP/1.0, Connection: close, HEAD) are built per request from the same
 * body.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "services.h"

struct rpc_state {
	char *reply;                /* head + body, for keep-alive HTTP/1.1 */
	uint32_t len, head_len, body_len;
};

static int rpc_open(struct server *s, const void *cfg, void **state, struct paste_error *err)
{
	const struct rpc_config *rc = cfg;
	struct rpc_state *r = calloc(1, sizeof(*r));
	struct http_conn h = { .keep_alive = true };
	char head[256];
	int n = http_reply_head(head, sizeof(head), s->cfg.name, &h, 200, "text/plain", rc->body_len,
				NULL);
	if (r)
		r->reply = malloc((size_t)n + rc->body_len);
	if (!r || !r->reply) {
		free(r);
		return paste_error_set(err, -ENOMEM, "out of memory");
	}
	r->head_len = (uint32_t)n;
	r->body_len = rc->body_len;
	r->len = (uint32_t)n + rc->body_len;
	memcpy(r->reply, head, (size_t)n);
	memset(r->reply + n, 'x', rc->body_len);
	*state = r;
	return 0;
}

static void rpc_close(struct server *s, void *state)
{
	(void)s;
	struct rpc_state *r = state;
	if (r)
		free(r->reply);
	free(r);
}

static int rpc_route(struct http_ctx *x, const struct paste_http_req *req)
{
	(void)x;
	(void)req;
	return 0;   /* one handler; a body is read and dropped (no body op) */
}

static void rpc_finish(struct http_ctx *x)
{
	const struct rpc_state *r = x->ss;
	const struct http_conn *h = x->h;
	if (h->keep_alive && !h->http10 && !h->head_only) {
		paste_port_send(x->w->port, x->conn, r->reply, r->len, 0);
		srv_count_status(x->w, 200);
	} else {
		http_reply(x, 200, "text/plain", r->reply + r->head_len, r->body_len, NULL, 0);
	}
}

/* The log members every mode reports, so /stats has one schema: zeros
 * here. */
static size_t rpc_stats(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s;
	(void)state;
	return http_put_str(out, at, cap,
		"\"log_records\":0,\"log_first_lsn\":0,\"log_last_lsn\":0,\"body_bufs\":0,");
}

const struct http_service rpc_service = {
	.base = {
		.name = "rpc",
		.conn_size = 0,
		.open = rpc_open,
		.close = rpc_close,
	},
	.route = rpc_route,
	.finish = rpc_finish,
	.stats = rpc_stats,
};
