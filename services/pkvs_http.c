/*
 * pkvs_http.c - pkvs over HTTP: the key-value store (kv.h) as an
 * http_service.
 *
 *   PUT /kv/<key>      the body is the value: 201 (new key) or 204, once durable
 *   GET /kv/<key>      200 with the value, sent from the buffers it lives in; 404;
 *                      a hash: its fields as JSON (pkvs_http_hash.c)
 *   HEAD /kv/<key>     the same without the body
 *   DELETE /kv/<key>   204, or 404 when absent
 *   GET /kv?start=<key>&end=<key>&limit=<n>   (and HEAD)
 *                      keys in order from start (inclusive) to end (exclusive),
 *                      at most n (default 100; a larger n is taken as 1000),
 *                      as JSON: {"keys":[{"key":"a","type":"string","len":3},
 *                      {"key":"h","type":"hash","fields":2},...],"more":false}
 *
 * Keys are the percent-decoded path after /kv/ (any byte, 1..512 of them):
 * 400 for an empty key or a bad %-escape, 414 for a longer key. The query
 * and a fragment are never part of a key. /kv/<key> takes no parameters,
 * and the listing none but its three: a parameter pkvs does not know is
 * 400, not ignored, so a client asking for what pkvs does not do (an
 * expiry, a misspelt limit) is told. Values over the store's limit
 * (kv_max_value) get 413 at their head, and 507 when more than the whole
 * store could hold; a value over one entry is written in chunks as its
 * body arrives (kv_big.c) and a GET sends it chunk by chunk.
 *
 * A PUT and a DELETE raise the keyspace notifications of SET and DEL,
 * and are refused where Redis refuses a write: 403 on a read-only
 * replica, 503 short of min-replicas-to-write (and any request, 503, on a
 * replica cut from its primary with replica-serve-stale-data no, and
 * while a script runs past busy-reply-threshold: BUSY).
 * Every reply that depends on the tree is PASTE_SEND_DURABLE, 404s
 * included: it leaves behind the barrier of any change it could reveal
 * (kv.h, "Why one thread").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "pkvs_front.h"
#include "kv_evict.h"
#include "kv_notify.h"
#include "kv_repl.h"
#include "pkvs_http_hash.h"

#define LIST_DEFAULT 100u
#define LIST_MAX 1000u

enum kv_route {
	ROUTE_NOT_FOUND = 0,
	ROUTE_PUT,
	ROUTE_GET,            /* GET or HEAD */
	ROUTE_DELETE,
	ROUTE_LIST,           /* GET or HEAD */
	ROUTE_BAD_METHOD,     /* 405, Allow: kc->why */
	ROUTE_BAD_REQUEST,    /* 400, kc->why says what */
	ROUTE_TOO_LONG,       /* 414 */
	ROUTE_REFUSED,        /* kc->status, Redis's error line in kc->why */
};

/* Per connection: what finish needs after the head is gone. */
struct kv_http_conn {
	struct kv_writer body;              /* a PUT's value (in chunks when over one entry) */
	const char *why;                    /* ROUTE_BAD_REQUEST's word, ROUTE_BAD_METHOD's Allow */
	uint16_t status;                    /* ROUTE_REFUSED's */
	uint16_t klen, elen;
	uint16_t limit;
	bool has_end;
	uint8_t key[PASTE_BTREE_MAX_KEY];   /* the key, or the range's start */
	uint8_t end[PASTE_BTREE_MAX_KEY];
};

static int bad_request(struct kv_http_conn *kc, const char *why)
{
	kc->why = why;
	return ROUTE_BAD_REQUEST;
}

/* A replica's rules and min-replicas-to-write, as the Redis port applies
 * them (kv_repl_refusal): a write refused on a read-only replica is 403,
 * any request on a replica cut from stale data or a write without the
 * replicas asked for is 503, with Redis's error line. 0: it may run. */
static int refused(struct kv_http_conn *kc, bool write)
{
	const char *why = kv_repl_refusal(write);
	if (!why)
		return 0;
	kc->why = why;
	kc->status = !strncmp(why, "READONLY", 8) ? 403 : 503;
	return ROUTE_REFUSED;
}

/* A key or range bound from its %-escaped form into out. */
static int key_of(struct kv_http_conn *kc, const char *p, uint32_t n, uint8_t *out, uint16_t *len)
{
	int64_t k = paste_http_unescape(p, n, out, PASTE_BTREE_MAX_KEY);
	if (k == -ENOSPC)
		return ROUTE_TOO_LONG;
	if (k < 0)
		return bad_request(kc, "bad %-escape");
	*len = (uint16_t)k;
	return 0;
}

/* limit: digits; 0 is refused, anything over LIST_MAX is LIST_MAX (a
 * client asking for "all" gets the most one reply holds, and "more"). */
static int limit_of(struct kv_http_conn *kc, const char *v, uint32_t n)
{
	uint32_t lim = 0;
	if (!n)
		return bad_request(kc, "limit is not a number");
	for (uint32_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return bad_request(kc, "limit is not a number");
		lim = lim * 10 + (uint32_t)(v[i] - '0');
		if (lim > LIST_MAX)
			lim = LIST_MAX + 1;   /* saturate: no overflow however long */
	}
	if (lim == 0)
		return bad_request(kc, "limit must be at least 1");
	kc->limit = (uint16_t)(lim > LIST_MAX ? LIST_MAX : lim);
	return 0;
}

/* start=, end=, limit= in any order, each at most once. */
static int parse_query(struct kv_http_conn *kc, const char *q, uint32_t n)
{
	static const char *const names[] = { "start", "end", "limit" };
	unsigned seen = 0;
	struct http_param p;
	kc->klen = kc->elen = 0;
	kc->limit = LIST_DEFAULT;
	while (http_query_next(&q, &n, &p)) {
		unsigned k = 0;
		while (k < 3 && !http_param_is(&p, names[k]))
			k++;
		if (k == 3)
			return bad_request(kc, "unknown query parameter");
		if (seen & (1u << k))
			return bad_request(kc, "repeated query parameter");
		if (!p.has_value)
			return bad_request(kc, "query parameter without a value");
		seen |= 1u << k;
		int r = k == 0 ? key_of(kc, p.value, p.value_len, kc->key, &kc->klen) :
			k == 1 ? key_of(kc, p.value, p.value_len, kc->end, &kc->elen) :
			limit_of(kc, p.value, p.value_len);
		if (r)
			return r;
	}
	kc->has_end = seen & 2u;
	return ROUTE_LIST;
}

static int kv_http_route(struct http_ctx *x, const struct paste_http_req *req)
{
	struct kv_http_conn *kc = x->sc;
	struct kv *kv = pkvs_kv(x->ss);
	const char *t = req->path;
	uint32_t n = req->path_len;
	enum paste_http_method m = req->method;
	if (n == 3 && !memcmp(t, "/kv", 3)) {
		if (m != PASTE_HTTP_GET && m != PASTE_HTTP_HEAD) {
			kc->why = "Allow: GET, HEAD";
			return ROUTE_BAD_METHOD;
		}
		int r = parse_query(kc, req->query, req->query_len);
		return r == ROUTE_LIST && refused(kc, false) ? ROUTE_REFUSED : r;
	}
	if (n < 4 || memcmp(t, "/kv/", 4))
		return ROUTE_NOT_FOUND;
	int r = key_of(kc, t + 4, n - 4, kc->key, &kc->klen);
	if (r)
		return r;
	if (!kc->klen)
		return bad_request(kc, "empty key");
	const char *q = req->query;
	uint32_t qn = req->query_len;
	struct http_param p;
	if (http_query_next(&q, &qn, &p))
		return bad_request(kc, "unknown query parameter");
	if ((m == PASTE_HTTP_PUT || m == PASTE_HTTP_DELETE || m == PASTE_HTTP_GET ||
	     m == PASTE_HTTP_HEAD) && refused(kc, m == PASTE_HTTP_PUT || m == PASTE_HTTP_DELETE))
		return ROUTE_REFUSED;
	kv_access_touch(kv, 0, kc->key, kc->klen);     /* OBJECT IDLETIME, LRU (kv_evict.h) */
	switch (m) {
	case PASTE_HTTP_PUT:
		if (kv_evict_cfg.maxmemory && kv_evict_over(kv))
			return -507;                       /* over maxmemory, nothing to evict */
		switch (kv_writer_begin(kv, &kc->body, req->content_length)) {
		case 0:
			return ROUTE_PUT;
		case -ENOSPC:
			return -507;
		default:
			return -413;
		}
	case PASTE_HTTP_GET:
	case PASTE_HTTP_HEAD:
		return ROUTE_GET;
	case PASTE_HTTP_DELETE:
		return ROUTE_DELETE;
	default:
		kc->why = "Allow: GET, HEAD, PUT, DELETE";
		return ROUTE_BAD_METHOD;
	}
}

static void kv_http_body(struct http_ctx *x, const struct paste_event *ev, uint32_t off, uint32_t len)
{
	if (x->h->route != ROUTE_PUT)
		return;
	struct kv_http_conn *kc = x->sc;
	struct kv *kv = pkvs_kv(x->ss);
	kv_writer_feed(kv, &kc->body, x->w->port, ev, off, len);
}

/* A durable reply, or 503 when the store failed under it. */
static void reply(struct http_ctx *x, int status, const char *ctype, const void *body, size_t len)
{
	if (http_reply(x, status, ctype, body, len, NULL, PASTE_SEND_DURABLE) == -EIO)
		http_reply_failed(x);
}

static void reply_errno(struct http_ctx *x, int r)
{
	if (server_store_failed(x->w)) {
		http_reply_failed(x);
		return;
	}
	char msg[96];
	int status = r == -ENOSPC ? 507 : r == -EFBIG ? 413 : r == -ENAMETOOLONG ? 414 :
		     r == -EINVAL ? 400 : 500;
	int n = snprintf(msg, sizeof(msg), "%s\n", status == 507 ? "store full" : strerror(-r));
	http_reply(x, status, "text/plain", msg, (size_t)n, NULL, 0);
}

static void finish_put(struct http_ctx *x, struct kv *kv, struct kv_http_conn *kc)
{
	bool created = false;
	struct kv_key k;
	kv_key_init(kv, &k, 0, kc->key, kc->klen);
	kv_clock(kv);
	int r = kv_writer_put(kv, &kc->body, &k, KV_NO_TTL, &created);
	if (r) {
		reply_errno(x, r);
		return;
	}
	kv_notify(KV_NOTIFY_STRING, "set", &k);    /* as a SET's, for keyspace subscribers */
	reply(x, created ? 201 : 204, NULL, NULL, 0);
}

static int send_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		      uint64_t len)
{
	struct http_ctx *x = arg;
	return paste_port_send_extents(x->w->port, x->conn, ext, n, skip, len, PASTE_SEND_DURABLE);
}

static void finish_get(struct http_ctx *x, struct kv *kv, struct kv_http_conn *kc)
{
	struct kv_key k;
	struct kv_obj o;
	kv_key_init(kv, &k, 0, kc->key, kc->klen);
	kv_clock(kv);
	if (kv_lookup(kv, &k, &o, true)) {
		reply(x, 404, "text/plain", "no such key\n", 12);
		return;
	}
	if (o.type == KV_HASH) {
		pkvs_http_hash_get(x, kv, &k, &o);   /* its fields as JSON */
		return;
	}
	if (o.type != KV_STRING) {
		reply(x, 409, "text/plain", "not a string\n", 13);
		return;
	}
	bool failed = http_send_head(x, 200, "application/octet-stream", o.len, NULL,
				     PASTE_SEND_DURABLE) == -EIO;
	/* From the buffers the value lies in, an entry (chunk) at a time. */
	if (!failed && !x->h->head_only)
		failed = kv_value_each(kv, &o, 0, o.len, send_piece, x) != 0;
	if (failed)
		http_reply_failed(x);
	else if (!x->h->keep_alive)
		paste_port_close_conn(x->w->port, x->conn);
}

static void finish_delete(struct http_ctx *x, struct kv *kv, struct kv_http_conn *kc)
{
	struct kv_key k;
	kv_key_init(kv, &k, 0, kc->key, kc->klen);
	kv_clock(kv);
	int r = kv_remove(kv, &k);
	if (r < 0)
		reply_errno(x, r);
	else if (r == 0)
		reply(x, 404, "text/plain", "no such key\n", 12);
	else {
		kv_notify(KV_NOTIFY_GENERIC, "del", &k);
		reply(x, 204, NULL, NULL, 0);
	}
}

/* JSON string body for a key: every byte outside printable ASCII, and
 * '"' and '\\', escaped (keys are bytes, not UTF-8). */
static size_t json_key(char *out, size_t at, const uint8_t *k, uint32_t n)
{
	static const char hex[] = "0123456789abcdef";
	out[at++] = '"';
	for (uint32_t i = 0; i < n; i++) {
		uint8_t c = k[i];
		if (c == '"' || c == '\\') {
			out[at++] = '\\';
			out[at++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			memcpy(out + at, "\\u00", 4);
			out[at + 4] = hex[c >> 4];
			out[at + 5] = hex[c & 15];
			at += 6;
		} else {
			out[at++] = (char)c;
		}
	}
	out[at++] = '"';
	return at;
}

static void finish_list(struct http_ctx *x, struct kv *kv, struct kv_http_conn *kc)
{
	/* Worst case per key: 6 bytes per key byte + ~40; built once. */
	size_t cap = (size_t)kc->limit * (6 * PASTE_BTREE_MAX_KEY + 48) + 64;
	char *out = malloc(cap);
	if (!out) {
		http_reply_error(x, 503);
		return;
	}
	struct kv_scan *sc = malloc(sizeof(*sc) + KV_MAX_KEY);
	if (!sc) {
		free(out);
		http_reply_error(x, 503);
		return;
	}
	struct kv_key from;
	kv_key_init(kv, &from, 0, kc->key, kc->klen);
	kv_clock(kv);
	kv_scan_init(kv, sc, 0, from.t, from.tlen, false);
	size_t at = http_put_str(out, 0, cap, "{\"keys\":[");
	uint32_t count = 0;
	const uint8_t *key;
	size_t klen;
	enum kv_type type;
	bool more = false;
	while (kv_scan_next(kv, sc, &key, &klen, (uint8_t *)(sc + 1), &type, NULL) == 1) {
		if (kc->has_end && paste_btree_keycmp(key, (uint32_t)klen, kc->end, kc->elen) >= 0)
			break;
		if (count == kc->limit) {
			more = true;
			break;
		}
		if (at + 6 * klen + 128 > cap) {          /* a long key (RESP's, up to 1 MiB) */
			size_t ncap = 2 * cap + 6 * klen + 128;
			char *grown = realloc(out, ncap);
			if (!grown) {
				free(sc);
				free(out);
				http_reply_error(x, 503);
				return;
			}
			out = grown;
			cap = ncap;
		}
		if (count++)
			out[at++] = ',';
		at = http_put_str(out, at, cap, "{\"key\":");
		at = json_key(out, at, key, (uint32_t)klen);
		at = pkvs_http_list_type(kv, out, at, cap, key, klen, type, sc->vlen);
		out[at++] = '}';
	}
	free(sc);
	kv->n.scans++;
	at = http_put_str(out, at, cap, more ? "],\"more\":true}\n" : "],\"more\":false}\n");
	reply(x, 200, "application/json", out, at);
	free(out);
}

static void kv_http_finish(struct http_ctx *x)
{
	struct kv_http_conn *kc = x->sc;
	struct kv *kv = pkvs_kv(x->ss);
	uint16_t route = x->h->route;
	const char *busy = route >= ROUTE_PUT && route <= ROUTE_LIST ? kv_script_busy_line() : NULL;
	if (busy) {
		/* The loop runs inside a long script: its changes are not
		 * committed, so neither read nor write them (503, BUSY). */
		kv_writer_drop(kv, &kc->body);
		kc->why = busy;
		kc->status = 503;
		route = ROUTE_REFUSED;
	}
	switch (route) {
	case ROUTE_PUT:
		finish_put(x, kv, kc);
		break;
	case ROUTE_GET:
		finish_get(x, kv, kc);
		break;
	case ROUTE_DELETE:
		finish_delete(x, kv, kc);
		break;
	case ROUTE_LIST:
		finish_list(x, kv, kc);
		break;
	case ROUTE_BAD_METHOD:
		http_reply(x, 405, "text/plain", "method not allowed\n", 19, kc->why, 0);
		break;
	case ROUTE_BAD_REQUEST:
		http_reply_error_why(x, 400, kc->why);
		break;
	case ROUTE_TOO_LONG:
		http_reply_error(x, 414);
		break;
	case ROUTE_REFUSED: {                  /* the connection stays */
		char body[128];
		int n = snprintf(body, sizeof(body), "%s\n", kc->why);
		http_reply(x, kc->status, "text/plain", body, (size_t)n, NULL, 0);
		break;
	}
	default:
		http_reply(x, 404, "text/plain", "not found\n", 10, NULL, 0);
		break;
	}
}

static void kv_http_closed(struct http_ctx *x)
{
	struct kv_http_conn *kc = x->sc;
	struct kv *kv = pkvs_kv(x->ss);
	kv_writer_drop(kv, &kc->body);
}

static size_t kv_http_stats(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s;
	return pkvs_stats_json(pkvs_kv(state), out, at, cap);
}

const struct http_service pkvs_http_service = {
	.base = PKVS_SERVICE_BASE(struct kv_http_conn),
	.route = kv_http_route,
	.body = kv_http_body,
	.finish = kv_http_finish,
	.closed = kv_http_closed,
	.stats = kv_http_stats,
	.metrics = pkvs_metrics,
};
