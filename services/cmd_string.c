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
int kv_set_arg(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const struct paste_resp_arg *v,
	       int64_t expire_ms, bool *created)
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
		return kv_put_body(kv, k, &b, expire_ms, created);
	}
	return kv_put_bytes(kv, k, KV_STRING, v->p, v->len, expire_ms, created);
}

void cmd_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	int r = kv_find(x, kv, &k, KV_STRING, &o, true);
	if (r == -ENOENT)
		resp_null(x);
	else if (r == 0)
		kv_reply_value(x, kv, &o, 0, o.len);
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
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	/* A lookup only when an option needs the old value (not a GET:
	 * INFO's keyspace hits and misses count reads by clients). */
	bool exists = false;
	if (nx || xx || get) {
		int r = get ? kv_find(x, kv, &k, KV_STRING, &o, false) : kv_lookup(kv, &k, &o, false);
		if (r == -EINVAL)
			return;                        /* WRONGTYPE */
		exists = r == 0;
	}
	if ((nx && exists) || (xx && !exists)) {
		if (get && exists)
			kv_reply_value(x, kv, &o, 0, o.len);
		else
			resp_null(x);
		return;
	}
	/* SET ... GET: the old value must leave before the set releases it;
	 * its buffers are pinned by the send, so queue first. */
	if (get) {
		if (exists ? kv_reply_value(x, kv, &o, 0, o.len) : resp_null(x))
			return;
	}
	int r = kv_set_arg(x, kv, &k, &a[2], KV_NO_TTL, NULL);
	if (r)
		kv_reply_errno(x, r);
	else if (!get)
		resp_ok(x);
}

void cmd_strlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	int r = kv_find(x, kv, &k, KV_STRING, &o, true);
	if (r != -EINVAL)
		resp_int(x, r ? 0 : o.len);
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
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	int r = kv_find(x, kv, &k, KV_STRING, &o, true);
	if (r == -EINVAL)
		return;
	uint32_t len = o.len;
	if (r || len == 0 || (s < 0 && e < 0 && s > e)) {
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
	kv_reply_value(x, kv, &o, (uint64_t)s, (uint64_t)(e - s + 1));
}

static void incr_by(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		    uint32_t n, int64_t sign)
{
	int64_t by = 1;
	if (n == 3 && paste_resp_arg_i64(&a[2], &by)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	int64_t v = 0;
	int f = kv_find(x, kv, &k, KV_STRING, &o, false);
	if (f == -EINVAL)
		return;
	if (f == 0) {
		char num[24];
		struct paste_resp_arg cur = { num, o.len };
		if (o.len > 20 || (kv_value_read(kv, &o, 0, num, o.len), paste_resp_arg_i64(&cur, &v))) {
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
	int len = snprintf(out, sizeof(out), "%" PRId64, v);
	int r = kv_put_bytes(kv, &k, KV_STRING, out, (size_t)len, KV_KEEP_TTL, NULL);
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
	if (resp_array(x, n - 1))
		return;
	for (uint32_t i = 1; i < n; i++) {
		struct kv_key k;
		struct kv_obj o;
		kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
		int r = a[i].len <= KV_MAX_KEY ? kv_lookup(kv, &k, &o, true) : -ENOENT;
		if (r || o.type != KV_STRING ? resp_null(x) : kv_reply_value(x, kv, &o, 0, o.len))
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
		if (a[i].len > KV_MAX_KEY) {
			resp_error(x, "ERR key length %zu is over %u bytes (pkvs's limit)", a[i].len, KV_MAX_KEY);
			return;
		}
	for (uint32_t i = 1; i < n; i += 2) {
		struct kv_key k;
		kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
		int r = kv_set_arg(x, kv, &k, &a[i + 1], KV_NO_TTL, NULL);
		if (r) {
			kv_reply_errno(x, r);
			return;
		}
	}
	resp_ok(x);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_string[] = {
	{ "get", 2, "readonly fast", "string", "Reads a string key's value.", cmd_get, 1, 1, 1 },
	{ "set", -3, "write denyoom", "string", "Writes a string value, optionally with a deadline (EX, PX, EXAT, PXAT, KEEPTTL), a condition (NX, XX) or the old value back (GET).", cmd_set, 1, 1, 1 },
	{ "strlen", 2, "readonly fast", "string", "The length in bytes of a string value (0 when the key is missing).", cmd_strlen, 1, 1, 1 },
	{ "getrange", 4, "readonly", "string", "The bytes of a string value between two offsets, negative ones counted from the end.", cmd_getrange, 1, 1, 1 },
	{ "incr", 2, "write denyoom fast", "string", "Adds 1 to a string holding an integer (a missing key counts as 0).", cmd_incr, 1, 1, 1 },
	{ "decr", 2, "write denyoom fast", "string", "Takes 1 from a string holding an integer (a missing key counts as 0).", cmd_decr, 1, 1, 1 },
	{ "incrby", 3, "write denyoom fast", "string", "Adds an integer to a string holding one (a missing key counts as 0).", cmd_incr, 1, 1, 1 },
	{ "decrby", 3, "write denyoom fast", "string", "Takes an integer from a string holding one (a missing key counts as 0).", cmd_decr, 1, 1, 1 },
	{ "mget", -2, "readonly fast", "string", "Reads string keys: a null for each one missing or not a string.", cmd_mget, 1, -1, 1 },
	{ "mset", -3, "write denyoom", "string", "Writes string keys, all in one durable step.", cmd_mset, 1, -1, 2 },
	{ 0 }
};
