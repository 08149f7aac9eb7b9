/*
 * pkvs_http_hash.c - a hash over pkvs's HTTP front end (pkvs_http_hash.h):
 * GET /kv/<key> of a hash answers its fields as one JSON object, and the
 * listing says each key's type.
 *
 * JSON wants text and a hash holds bytes. A field's name or value that is
 * valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF) is a JSON string as it is, with '"', '\' and the control
 * characters escaped. A value that is not becomes {"base64":"..."} (RFC
 * 4648 with padding), which no string can be mistaken for. A name is an
 * object member's name, a string: one that is not UTF-8 is written
 * "base64:" followed by its base64, and so is a UTF-8 name that itself
 * begins with "base64:", so that a reader decodes exactly the names that
 * begin with it.
 *
 * The body is written twice over the same fields, first only counted (the
 * head's Content-Length), then sent in 64 KiB pieces: a hash of any size
 * costs one piece of memory, not its whole JSON.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_hash.h"
#include "pkvs_http_hash.h"

#define PIECE (64u * 1024)

struct jw {
	struct http_ctx *x;
	bool send;                      /* false: count only */
	int r;                          /* the first failed send */
	uint64_t total;
	size_t len;
	char *buf;                      /* PIECE bytes when sending */
};

static void jw_flush(struct jw *w)
{
	if (w->send && w->len && !w->r)
		w->r = paste_port_send(w->x->w->port, w->x->conn, w->buf, w->len, PASTE_SEND_DURABLE);
	w->len = 0;
}

static void jw_put(struct jw *w, const void *p, size_t n)
{
	w->total += n;
	if (!w->send)
		return;
	const char *s = p;
	while (n) {
		if (w->len == PIECE)
			jw_flush(w);
		size_t k = PIECE - w->len < n ? PIECE - w->len : n;
		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
}

static size_t utf8_seq(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	if (c < 0x80)
		return 1;
	size_t k;
	uint32_t cp;
	if (c >= 0xC2 && c <= 0xDF) {
		k = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		k = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		k = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < k)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3F);
	}
	if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return k;
}

static bool utf8_valid(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq(p + i, n - i);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

/* A JSON string of valid UTF-8: the bytes as they are but '"', '\' and
 * control characters, in runs. */
static void json_text(struct jw *w, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	jw_put(w, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		jw_put(w, p + run, i - run);
		run = i + 1;
		char e[6] = { '\\', (char)c };
		size_t k = 2;
		switch (c) {
		case '"': case '\\': break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		default:
			memcpy(e + 1, "u00", 3);
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			k = 6;
		}
		jw_put(w, e, k);
	}
	jw_put(w, p + run, n - run);
	jw_put(w, "\"", 1);
}

static void base64(struct jw *w, const uint8_t *p, size_t n)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char out[4 * 256];
	size_t k = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		out[k++] = b64[v >> 18];
		out[k++] = b64[(v >> 12) & 63];
		out[k++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[k++] = i + 2 < n ? b64[v & 63] : '=';
		if (k == sizeof(out)) {
			jw_put(w, out, k);
			k = 0;
		}
	}
	jw_put(w, out, k);
}

#define MARK "base64:"

static void json_name(struct jw *w, const uint8_t *p, size_t n)
{
	size_t m = sizeof(MARK) - 1;
	if (utf8_valid(p, n) && !(n >= m && !memcmp(p, MARK, m))) {
		json_text(w, p, n);
		return;
	}
	jw_put(w, "\"" MARK, m + 1);
	base64(w, p, n);
	jw_put(w, "\"", 1);
}

static void json_value(struct jw *w, const uint8_t *p, size_t n)
{
	if (utf8_valid(p, n)) {
		json_text(w, p, n);
		return;
	}
	jw_put(w, "{\"base64\":\"", 11);
	base64(w, p, n);
	jw_put(w, "\"}", 2);
}

/* The object, counted or sent: 0, or a negative errno (a walk's). */
static int hash_json(struct kv *kv, struct kv_hash *h, struct jw *w, uint8_t **val, size_t *vcap)
{
	struct kv_hash_walk hw;
	int r = kv_hash_walk_init(kv, h, &hw, NULL, 0);
	if (r)
		return r;
	bool first = true;
	jw_put(w, "{", 1);
	while ((r = kv_hash_walk_next(kv, &hw)) == 1) {
		if (!first)
			jw_put(w, ",", 1);
		first = false;
		json_name(w, hw.name, hw.nlen);
		jw_put(w, ":", 1);
		const uint8_t *v;
		if (hw.n <= 1 && !hw.big) {
			v = hw.n ? paste_store_buf(kv->store, hw.ext[0].buf) + hw.ext[0].off
				 : (const uint8_t *)"";
		} else {
			/* A value over several buffers or in chunks: read whole
			 * (UTF-8 may cross from one to the next). */
			if (hw.len > *vcap) {
				uint8_t *g = realloc(*val, hw.len);
				if (!g)
					return -ENOMEM;
				*val = g;
				*vcap = hw.len;
			}
			kv_elem_read(kv, hw.ext, hw.n, hw.len, hw.big, 0, *val, hw.len);
			v = *val;
		}
		json_value(w, v, hw.len);
	}
	jw_put(w, "}\n", 2);
	return r;
}

void pkvs_http_hash_get(struct http_ctx *x, struct kv *kv, struct kv_key *k, struct kv_obj *o)
{
	struct kv_hash h = { .key = *k, .o = *o, .stored = true, .saved = o->coll.count };
	struct jw w = { .x = x };
	uint8_t *val = NULL;
	size_t vcap = 0;
	int r = hash_json(kv, &h, &w, &val, &vcap);
	if (r == 0 && !x->h->head_only && !(w.buf = malloc(PIECE)))
		r = -ENOMEM;
	if (r) {
		free(val);
		http_reply_error(x, r == -ENOMEM ? 503 : 500);
		return;
	}
	bool failed = http_send_head(x, 200, "application/json", w.total, NULL, PASTE_SEND_DURABLE) == -EIO;
	if (!failed && !x->h->head_only) {
		w.send = true;
		w.total = 0;
		hash_json(kv, &h, &w, &val, &vcap);   /* the same walk: nothing changed between */
		jw_flush(&w);
		failed = w.r == -EIO;
	}
	free(w.buf);
	free(val);
	if (failed)
		http_reply_failed(x);
	else if (!x->h->keep_alive)
		paste_port_close_conn(x->w->port, x->conn);
}

size_t pkvs_http_list_type(struct kv *kv, char *out, size_t at, size_t cap, const uint8_t *key,
			   size_t klen, enum kv_type type, uint32_t vlen)
{
	at = http_put_str(out, at, cap, ",\"type\":\"");
	at = http_put_str(out, at, cap, kv_type_name(type));
	if (type == KV_STRING) {
		at = http_put_str(out, at, cap, "\",\"len\":");
		return http_put_u64(out, at, cap, vlen);
	}
	struct kv_key k;
	struct kv_obj o;
	kv_key_init(kv, &k, 0, key, klen);
	at = http_put_str(out, at, cap, type == KV_HASH ? "\",\"fields\":" : "\",\"count\":");
	/* The walk skipped expired keys: the lookup finds this one and
	 * changes nothing. */
	return http_put_u64(out, at, cap, kv_lookup(kv, &k, &o, false) ? 0 : o.coll.count);
}
