/*
 * cmd_string.c - pkvs's string commands (pkvs_resp.h): GET, SET, STRLEN,
 * GETRANGE, INCR/DECR[BY], MGET, MSET.
 *
 * Values: a SET whose value landed in a packet buffer and is longer than
 * KV_PACK_MAX stays there, zero copy (paste_body_feed holds the buffer);
 * a SET value that arrives across reads is streamed by pkvs_resp.c into
 * held buffers the same way; values inside a command that had to be put
 * together (MSET's) are copied (paste_body_copy). GET replies go straight
 * from the value's buffers (values of KV_PACK_MAX bytes or less are
 * copied into the reply).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pkvs_resp.h"

/* Set key from an argument of a whole command: zero copy when it lies in
 * the event's store buffer and is worth holding, else copied. */
int kv_set_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *k,
	       const struct paste_resp_arg *v, bool *created)
{
	const struct paste_event *ev = x->ev;
	if (ev && ev->buf != PASTE_NO_BUF && v->len > KV_PACK_MAX && v->p >= (const char *)ev->data &&
	    v->p + v->len <= (const char *)ev->data + ev->len) {
		struct paste_body b;
		kv_body_idle(&b);
		if (paste_body_begin(&b, &kv->bc, kv->store, v->len))
			return -EFBIG;
		kv_admit(kv, v->len);
		paste_body_feed(&b, &kv->bc, x->w->port, ev, (uint32_t)(v->p - (const char *)ev->data),
				(uint32_t)v->len);
		return kv_set_body(kv, k->p, (uint32_t)k->len, &b, created);
	}
	return kv_set_bytes(kv, k->p, (uint32_t)k->len, v->p, v->len, created);
}

void cmd_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (!kv_key_ok(x, &a[1]))
		return;
	if (kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len))
		resp_null(x);
	else
		kv_reply_value(x, ext, en, 0, len);
}

/* SET key value [NX|XX] [GET]; EX/PX/EXAT/PXAT/KEEPTTL refused. */
void cmd_set(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	bool nx = false, xx = false, get = false;
	for (uint32_t i = 3; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "NX") && !xx)
			nx = true;
		else if (paste_resp_arg_eq(&a[i], "XX") && !nx)
			xx = true;
		else if (paste_resp_arg_eq(&a[i], "GET"))
			get = true;
		else if (paste_resp_arg_eq(&a[i], "EX") || paste_resp_arg_eq(&a[i], "PX") ||
			 paste_resp_arg_eq(&a[i], "EXAT") || paste_resp_arg_eq(&a[i], "PXAT") ||
			 paste_resp_arg_eq(&a[i], "KEEPTTL")) {
			resp_error(x, "ERR pkvs keeps keys until deleted: key expiry (EX, PX, EXAT, "
				   "PXAT, KEEPTTL) is not supported");
			return;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if (!kv_key_ok(x, &a[1]))
		return;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	/* A descent only when an option needs the old value (not a GET:
	 * INFO's keyspace hits and misses count reads by clients). */
	bool exists = (nx || xx || get) &&
		      paste_btree_get(kv->tree, a[1].p, (uint32_t)a[1].len, ext, &en, &len) == 0;
	if ((nx && exists) || (xx && !exists)) {
		if (get && exists)
			kv_reply_value(x, ext, en, 0, len);
		else
			resp_null(x);
		return;
	}
	/* SET ... GET: the old value must leave before the set releases it;
	 * its buffers are pinned by the send (kv_send_value), so queue first. */
	if (get) {
		if (exists ? kv_reply_value(x, ext, en, 0, len) : resp_null(x))
			return;
	}
	int r = kv_set_arg(x, kv, &a[1], &a[2], NULL);
	if (r)
		kv_reply_errno(x, r);
	else if (!get)
		resp_ok(x);
}

void cmd_strlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (kv_key_ok(x, &a[1]))
		resp_int(x, kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len) ? 0 : len);
}

/* GETRANGE key start end: Redis's index rules (negative from the end). */
void cmd_getrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)n;
	int64_t s, e;
	if (paste_resp_arg_i64(&a[2], &s) || paste_resp_arg_i64(&a[3], &e)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (!kv_key_ok(x, &a[1]))
		return;
	if (kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len) || len == 0 ||
	    (s < 0 && e < 0 && s > e)) {
		resp_bulk(x, "", 0);
		return;
	}
	if (s < 0)
		s += len;
	if (e < 0)
		e += len;
	if (s < 0)
		s = 0;
	if (e < 0)
		e = 0;
	if (e >= (int64_t)len)
		e = (int64_t)len - 1;
	if (s > e) {
		resp_bulk(x, "", 0);
		return;
	}
	kv_reply_value(x, ext, en, (uint64_t)s, (uint64_t)(e - s + 1));
}

static void incr_by(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		    uint32_t n, int64_t sign)
{
	int64_t by = 1;
	if (n == 3 && paste_resp_arg_i64(&a[2], &by)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	if (!kv_key_ok(x, &a[1]))
		return;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	int64_t v = 0;
	if (kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len) == 0) {
		char num[24];
		struct paste_resp_arg cur = { num, len };
		if (len > 20 || (kv_copy_value(kv, ext, en, 0, num, len), paste_resp_arg_i64(&cur, &v))) {
			resp_error(x, "ERR value is not an integer or out of range");
			return;
		}
	}
	if (sign < 0 && by == INT64_MIN) {
		resp_error(x, "ERR decrement would overflow");
		return;
	}
	by *= sign;
	if ((by > 0 && v > INT64_MAX - by) || (by < 0 && v < INT64_MIN - by)) {
		resp_error(x, "ERR increment or decrement would overflow");
		return;
	}
	v += by;
	char out[24];
	int k = snprintf(out, sizeof(out), "%" PRId64, v);
	int r = kv_set_bytes(kv, a[1].p, (uint32_t)a[1].len, out, (size_t)k, NULL);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, v);
}

void cmd_incr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	incr_by(x, kv, a, n, 1);
}

void cmd_decr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	incr_by(x, kv, a, n, -1);
}

void cmd_mget(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (resp_array(x, n - 1))
		return;
	for (uint32_t i = 1; i < n; i++) {
		int r = a[i].len && a[i].len <= PASTE_BTREE_MAX_KEY
			? kv_get(kv, a[i].p, (uint32_t)a[i].len, ext, &en, &len) : -ENOENT;
		if (r ? resp_null(x) : kv_reply_value(x, ext, en, 0, len))
			return;
	}
}

/* MSET k v [k v ...]: every key checked first, so a bad one sets none. */
void cmd_mset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n % 2 == 0) {
		resp_arity_error(x, &a[0]);
		return;
	}
	for (uint32_t i = 1; i < n; i += 2)
		if (!kv_key_ok(x, &a[i]))
			return;
	for (uint32_t i = 1; i < n; i += 2) {
		int r = kv_set_arg(x, kv, &a[i], &a[i + 1], NULL);
		if (r) {
			kv_reply_errno(x, r);
			return;
		}
	}
	resp_ok(x);
}
