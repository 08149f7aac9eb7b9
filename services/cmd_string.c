/*
 * cmd_string.c - pkvs's string commands (pkvs_resp.h): GET, SET (NX, XX,
 * GET, EX, PX, EXAT, PXAT, KEEPTTL), SETNX, SETEX, PSETEX, GETSET,
 * GETDEL, GETEX, MGET, MSET, MSETNX, APPEND, SETRANGE, GETRANGE, SUBSTR,
 * STRLEN, INCR/DECR[BY], INCRBYFLOAT, LCS, with Redis 7.0's replies,
 * errors and the order it checks things in (the bit commands:
 * cmd_bitops.c).
 *
 * Values: a value that landed in a packet buffer and is longer than
 * KV_PACK_MAX stays there, zero copy (paste_body_feed holds the buffer);
 * a SET value that arrives across reads is streamed by pkvs_resp.c into
 * held buffers the same way; values of a command that had to be put
 * together, and values of KV_PACK_MAX bytes or less, are copied densely
 * to the append point. APPEND of a long argument adds its held buffer
 * to the value's extents; SETRANGE and a short APPEND write the
 * entry (or, for a string in chunks, the chunks) they change
 * (kv_value_append, kv_value_setrange: kv_big.c). Replies go straight
 * from the value's buffers.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_notify.h"
#include "pkvs_resp.h"

bool kv_arg_int(struct resp_ctx *x, const struct paste_resp_arg *a, int64_t *v)
{
	if (paste_resp_arg_i64(a, v) == 0)
		return true;
	resp_error(x, "ERR value is not an integer or out of range");
	return false;
}

void kv_pin(struct kv *kv, const struct kv_obj *o, bool pin)
{
	for (uint32_t i = 0; i < o->n; i++) {
		if (pin)
			paste_store_ref(kv->store, o->ext[i].buf);
		else
			paste_store_unref(kv->store, o->ext[i].buf, false);
	}
}

/* Set key from an argument of a whole command: zero copy when it lies in
 * the event's store buffer and is worth holding, else copied. */
int kv_set_arg(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const struct paste_resp_arg *v,
	       int64_t expire_ms, bool *created)
{
	struct paste_body b;
	int r = kv_arg_hold(x, kv, v, &b);
	if (r)
		return r < 0 ? r : kv_put_body(kv, k, &b, expire_ms, created);
	return kv_put_bytes(kv, k, KV_STRING, v->p, v->len, expire_ms, created);
}

/* The string at key a[1]: 0 (*o), -ENOENT (absent), or -EINVAL after
 * replying (a key over pkvs's limit, WRONGTYPE). read: a client read
 * (INFO's hits and misses), as Redis's lookupKeyRead. */
static int string_at(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		     struct kv_key *k, struct kv_obj *o, bool read)
{
	if (!kv_arg_key(x, kv, &a[1], k))
		return -EINVAL;
	return kv_find(x, kv, k, KV_STRING, o, read);
}

void cmd_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, true);
	if (r == -ENOENT)
		resp_null(x);
	else if (r == 0)
		kv_reply_value(x, kv, &o, 0, o.len);
}

/* ------------------------------------------------- SET and its kin */

enum {
	S_NX = 1, S_XX = 2, S_GET = 4, S_KEEPTTL = 8, S_PERSIST = 16,
	S_EX = 32, S_PX = 64, S_EXAT = 128, S_PXAT = 256,
	S_DEADLINE = S_EX | S_PX | S_EXAT | S_PXAT,
};

/* SET's options (from a[3]) or GETEX's (from a[2]), as Redis accepts
 * them: NX and XX exclude each other, one deadline option (repeating the
 * same one is allowed: the last wins), KEEPTTL (SET) and PERSIST (GETEX)
 * exclude a deadline. false after a syntax error. */
static bool parse_opts(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, bool set,
		       unsigned *fl, const struct paste_resp_arg **dl)
{
	static const struct { const char *w; unsigned bit, excl; } dls[] = {
		{ "EX", S_EX, S_PX | S_EXAT | S_PXAT },
		{ "PX", S_PX, S_EX | S_EXAT | S_PXAT },
		{ "EXAT", S_EXAT, S_EX | S_PX | S_PXAT },
		{ "PXAT", S_PXAT, S_EX | S_PX | S_EXAT },
	};
	for (uint32_t i = set ? 3 : 2; i < n; i++) {
		const struct paste_resp_arg *o = &a[i];
		if (set && paste_resp_arg_eq(o, "NX") && !(*fl & S_XX)) {
			*fl |= S_NX;
			continue;
		}
		if (set && paste_resp_arg_eq(o, "XX") && !(*fl & S_NX)) {
			*fl |= S_XX;
			continue;
		}
		if (set && paste_resp_arg_eq(o, "GET")) {
			*fl |= S_GET;
			continue;
		}
		if (set && paste_resp_arg_eq(o, "KEEPTTL") && !(*fl & S_DEADLINE)) {
			*fl |= S_KEEPTTL;
			continue;
		}
		if (!set && paste_resp_arg_eq(o, "PERSIST") && !(*fl & S_DEADLINE)) {
			*fl |= S_PERSIST;
			continue;
		}
		bool ok = false;
		for (size_t d = 0; d < sizeof(dls) / sizeof(dls[0]) && !ok; d++)
			if (paste_resp_arg_eq(o, dls[d].w) && !(*fl & (dls[d].excl | S_KEEPTTL | S_PERSIST)) &&
			    i + 1 < n) {
				*fl |= dls[d].bit;
				*dl = &a[++i];
				ok = true;
			}
		if (!ok) {
			resp_error(x, "ERR syntax error");
			return false;
		}
	}
	return true;
}

/* The absolute deadline an EX/PX/EXAT/PXAT argument names: it must be a
 * positive number, and its conversion to absolute milliseconds must not
 * overflow. false after replying. */
static bool opt_deadline(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *cmd,
			 const struct paste_resp_arg *arg, unsigned fl, int64_t *out)
{
	int64_t v;
	if (!kv_arg_int(x, arg, &v))
		return false;
	bool sec = fl & (S_EX | S_EXAT);
	if (v <= 0 || (sec && v > INT64_MAX / 1000)) {
		kv_reply_bad_expire(x, cmd);
		return false;
	}
	if (sec)
		v *= 1000;
	if (fl & (S_EX | S_PX)) {
		if (v > INT64_MAX - kv->now_ms) {
			kv_reply_bad_expire(x, cmd);
			return false;
		}
		v += kv->now_ms;
	}
	*out = v;
	return true;
}

/* SET, SETNX, SETEX, PSETEX, GETSET: key a[1] = value v. An error (from
 * the options, the type, or the store) is the whole reply; with GET the
 * old value is sent after the write, from its own buffers (pinned: the
 * write may release them). as_int: SETNX's :1 / :0 for OK / not set. */
static void set_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			const struct paste_resp_arg *v, unsigned fl, const struct paste_resp_arg *dl,
			bool as_int)
{
	int64_t deadline = fl & S_KEEPTTL ? KV_KEEP_TTL : KV_NO_TTL;
	if (dl && !opt_deadline(x, kv, &a[0], dl, fl, &deadline))
		return;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	bool found = false;
	if (fl & (S_NX | S_XX | S_GET)) {
		/* GET reads the key as a client read (INFO's hits and misses). */
		found = kv_lookup(kv, &k, &o, fl & S_GET) == 0;
		if (found && (fl & S_GET) && o.type != KV_STRING) {
			resp_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
			return;
		}
	}
	bool get = (fl & S_GET) && found;
	if (((fl & S_NX) && found) || ((fl & S_XX) && !found)) {
		if (get)
			kv_reply_value(x, kv, &o, 0, o.len);
		else if (as_int)
			resp_int(x, 0);
		else
			resp_null(x);
		return;
	}
	if (get)
		kv_pin(kv, &o, true);
	int r = kv_set_arg(x, kv, &k, v, deadline, NULL);
	if (r == 0) {
		kv_notify(KV_NOTIFY_STRING, "set", &k);
		if (dl)
			kv_notify(KV_NOTIFY_GENERIC, "expire", &k);
	}
	if (r)
		kv_reply_errno(x, r);
	else if (get)
		kv_reply_value(x, kv, &o, 0, o.len);
	else if (fl & S_GET)
		resp_null(x);
	else if (as_int)
		resp_int(x, 1);
	else
		resp_ok(x);
	if (get)
		kv_pin(kv, &o, false);
}

void cmd_set(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n == 3) {                       /* the common case: no lookup */
		struct kv_key k;
		if (!kv_arg_key(x, kv, &a[1], &k))
			return;
		int r = kv_set_arg(x, kv, &k, &a[2], KV_NO_TTL, NULL);
		if (r) {
			kv_reply_errno(x, r);
		} else {
			kv_notify(KV_NOTIFY_STRING, "set", &k);
			resp_ok(x);
		}
		return;
	}
	unsigned fl = 0;
	const struct paste_resp_arg *dl = NULL;
	if (parse_opts(x, a, n, true, &fl, &dl))
		set_generic(x, kv, a, &a[2], fl, dl, false);
}

static void cmd_setnx(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	set_generic(x, kv, a, &a[2], S_NX, NULL, true);
}

static void cmd_setex(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	set_generic(x, kv, a, &a[3], S_EX, &a[2], false);
}

static void cmd_psetex(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	set_generic(x, kv, a, &a[3], S_PX, &a[2], false);
}

static void cmd_getset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	set_generic(x, kv, a, &a[2], S_GET, NULL, false);
}

/* GETDEL and GETEX: the value is sent after the change, pinned. */
static void cmd_getdel(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, true);
	if (r == -ENOENT)
		resp_null(x);
	if (r)
		return;
	kv_pin(kv, &o, true);
	r = kv_remove(kv, &k);
	if (r > 0)
		kv_notify(KV_NOTIFY_GENERIC, "del", &k);
	if (r < 0)
		kv_reply_errno(x, r);
	else
		kv_reply_value(x, kv, &o, 0, o.len);
	kv_pin(kv, &o, false);
}

/* GETEX key [EX s | PX ms | EXAT t | PXAT tms | PERSIST]: the deadline is
 * checked after the key is found (a missing key answers nil, whatever
 * the number); an absolute one in the past deletes the key. */
static void cmd_getex(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	unsigned fl = 0;
	const struct paste_resp_arg *dl = NULL;
	if (!parse_opts(x, a, n, false, &fl, &dl))
		return;
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, true);
	if (r == -ENOENT)
		resp_null(x);
	if (r)
		return;
	int64_t deadline = KV_NO_TTL;
	if (dl && !opt_deadline(x, kv, &a[0], dl, fl, &deadline))
		return;
	kv_pin(kv, &o, true);
	r = 0;
	const char *event = NULL;
	if ((fl & (S_EXAT | S_PXAT)) && deadline <= kv->now_ms)
		r = kv_remove(kv, &k), event = "del";
	else if (dl)
		r = kv_set_expire(kv, &k, &o, deadline), event = "expire";
	else if ((fl & S_PERSIST) && o.expire_ms != KV_NO_TTL)
		r = kv_set_expire(kv, &k, &o, KV_NO_TTL), event = "persist";
	if (r >= 0 && event)
		kv_notify(KV_NOTIFY_GENERIC, event, &k);
	if (r < 0)
		kv_reply_errno(x, r);
	else
		kv_reply_value(x, kv, &o, 0, o.len);
	kv_pin(kv, &o, false);
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

/* MSET and MSETNX: every key checked first, then all pairs set in one
 * group (all of them after a crash, or none). MSETNX sets nothing when
 * any key exists. */
static void mset_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n, bool nx)
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
	if (nx)
		for (uint32_t i = 1; i < n; i += 2) {
			struct kv_key k;
			struct kv_obj o;
			kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
			if (kv_lookup(kv, &k, &o, false) == 0) {
				resp_int(x, 0);
				return;
			}
		}
	bool group = n > 3;
	int r = group ? kv_begin(kv) : 0;
	for (uint32_t i = 1; i < n && r == 0; i += 2) {
		struct kv_key k;
		kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
		r = kv_set_arg(x, kv, &k, &a[i + 1], KV_NO_TTL, NULL);
		if (r == 0)
			kv_notify(KV_NOTIFY_STRING, "set", &k);
	}
	if (group) {
		if (r == 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	if (r)
		kv_reply_errno(x, r);
	else if (nx)
		resp_int(x, 1);
	else
		resp_ok(x);
}

void cmd_mset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	mset_generic(x, kv, a, n, false);
}

static void cmd_msetnx(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	mset_generic(x, kv, a, n, true);
}

/* ------------------------------------------- changes of a value in place */

/* Redis's checkStringLength: the string a command would make. */
static bool length_ok(struct resp_ctx *x, uint64_t size, uint64_t add)
{
	if (size + add > KV_STRING_MAX || size + add < size) {
		resp_error(x, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
		return false;
	}
	return true;
}

static void cmd_append(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, false);
	if (r == -EINVAL)
		return;
	uint64_t total = a[2].len;
	if (r == -ENOENT) {
		r = kv_set_arg(x, kv, &k, &a[2], KV_NO_TTL, NULL);
	} else {
		if (!length_ok(x, o.len, a[2].len))
			return;
		total += o.len;
		struct paste_body b;
		r = kv_arg_hold(x, kv, &a[2], &b);
		if (r == 0) {
			r = kv_value_append_bytes(kv, &k, &o, a[2].p, a[2].len);
		} else if (r > 0) {
			r = b.error ? -ENOSPC : kv_value_append(kv, &k, &o, b.ext, b.n);
			paste_body_release(&b, kv->store);
		}
	}
	if (r >= 0)
		kv_notify(KV_NOTIFY_STRING, "append", &k);
	if (r < 0)
		kv_reply_errno(x, r);
	else
		resp_int(x, (int64_t)total);
}

static void cmd_setrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t off;
	if (!kv_arg_int(x, &a[2], &off))
		return;
	if (off < 0) {
		resp_error(x, "ERR offset is out of range");
		return;
	}
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, false);
	if (r == -EINVAL)
		return;
	uint64_t olen = r ? 0 : o.len;
	if (a[3].len == 0) {                   /* nothing to set: the length */
		resp_int(x, (int64_t)olen);
		return;
	}
	if (!length_ok(x, (uint64_t)off, a[3].len))
		return;
	r = kv_value_setrange(kv, &k, r ? NULL : &o, (uint64_t)off, a[3].p, a[3].len);
	if (r == 0)
		kv_notify(KV_NOTIFY_STRING, "setrange", &k);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, (int64_t)((uint64_t)off + a[3].len > olen ? (uint64_t)off + a[3].len : olen));
}

/* ---------------------------------------------------------- reads */

void cmd_strlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, true);
	if (r != -EINVAL)
		resp_int(x, r ? 0 : o.len);
}

/* GETRANGE (and SUBSTR) key start end: Redis's index rules (negative
 * from the end, clamped). */
void cmd_getrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)n;
	int64_t s, e;
	if (!kv_arg_int(x, &a[2], &s) || !kv_arg_int(x, &a[3], &e))
		return;
	struct kv_key k;
	struct kv_obj o;
	int r = string_at(x, kv, a, &k, &o, true);
	if (r == -EINVAL)
		return;
	int64_t len = r ? 0 : o.len;
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
	if (e >= len)
		e = len - 1;
	if (s > e) {
		resp_bulk(x, "", 0);
		return;
	}
	kv_reply_value(x, kv, &o, (uint64_t)s, (uint64_t)(e - s + 1));
}

/* ---------------------------------------------------------- numbers */

/* A string value as Redis's string2ll reads it (at most 20 bytes). */
static bool value_i64(const struct kv *kv, const struct kv_obj *o, int64_t *v)
{
	char num[24];
	if (o->len > 20)
		return false;
	struct paste_resp_arg cur = { num, kv_value_read(kv, o, 0, num, o->len) };
	return paste_resp_arg_i64(&cur, v) == 0;
}

static void incr_by(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		    uint32_t n, int64_t sign)
{
	int64_t by = 1;
	if (n == 3 && !kv_arg_int(x, &a[2], &by))
		return;
	if (sign < 0 && by == INT64_MIN) {
		resp_error(x, "ERR decrement would overflow");
		return;
	}
	struct kv_key k;
	struct kv_obj o;
	int64_t v = 0;
	int f = string_at(x, kv, a, &k, &o, false);
	if (f == -EINVAL)
		return;
	if (f == 0 && !value_i64(kv, &o, &v)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	by *= sign;
	if ((by > 0 && v > INT64_MAX - by) || (by < 0 && v < INT64_MIN - by)) {
		resp_error(x, "ERR increment or decrement would overflow");
		return;
	}
	v += by;
	char out[24];
	int len = paste_resp_put_i64_text(out, sizeof(out), v);
	int r = kv_put_bytes(kv, &k, KV_STRING, out, (size_t)len, KV_KEEP_TTL, NULL);
	if (r == 0)
		kv_notify(KV_NOTIFY_STRING, "incrby", &k);
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

static void cmd_incrbyfloat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	int f = string_at(x, kv, a, &k, &o, false);
	if (f == -EINVAL)
		return;
	long double v = 0, by;
	char *cur = NULL;
	if (f == 0 && o.len < KV_LD_CHARS && (cur = malloc(o.len + 1)))
		kv_value_read(kv, &o, 0, cur, o.len);
	bool ok = (f || (cur && kv_ld_parse(cur, o.len, &v))) && kv_ld_parse(a[2].p, a[2].len, &by);
	free(cur);
	if (!ok) {
		resp_error(x, "ERR value is not a valid float");
		return;
	}
	v += by;
	if (isnan(v) || isinf(v)) {
		resp_error(x, "ERR increment would produce NaN or Infinity");
		return;
	}
	char *out = malloc(KV_LD_CHARS);
	int len = out ? kv_ld_format(out, KV_LD_CHARS, v) : -1;
	int r = len < 0 ? -ENOMEM : kv_put_bytes(kv, &k, KV_STRING, out, (size_t)len, KV_KEEP_TTL, NULL);
	if (r == 0)
		kv_notify(KV_NOTIFY_STRING, "incrbyfloat", &k);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_bulk(x, out, (size_t)len);
	free(out);
}

/* ---------------------------------------------------------- LCS */

/* A key for LCS: 0 with *o (absent: o->len 0, o->n 0), -EINVAL when it
 * is not a string. */
static int lcs_key(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, struct kv_obj *o)
{
	struct kv_key k;
	o->len = 0;
	if (a->len > KV_MAX_KEY)
		return 0;
	kv_key_init(kv, &k, kv_resp_db(x), a->p, a->len);
	if (kv_lookup(kv, &k, o, true)) {
		o->len = 0;
		return 0;
	}
	return o->type == KV_STRING ? 0 : -EINVAL;
}

static void put_int(struct resp_out *o, int64_t v)
{
	char b[32];
	int l = paste_resp_put_int(b, sizeof(b), v);
	resp_out_put(o, b, (size_t)l);
}

/* LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest
 * common subsequence by the textbook table, O(len1 x len2) time and
 * 4 bytes of memory per cell (bounded by proto-max-bulk-len, as Redis). */
static void cmd_lcs(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	uint8_t *sa = NULL, *sb = NULL;
	uint32_t alen, blen, *t = NULL;
	struct kv_obj oa, ob;
	bool getlen = false, getidx = false, withlen = false;
	int64_t minlen = 0;
	if ((lcs_key(x, kv, &a[1], &oa) | lcs_key(x, kv, &a[2], &ob)) != 0) {
		resp_error(x, "ERR The specified keys must contain string values");
		return;
	}
	for (uint32_t j = 3; j < n; j++) {
		if (paste_resp_arg_eq(&a[j], "IDX")) {
			getidx = true;
		} else if (paste_resp_arg_eq(&a[j], "LEN")) {
			getlen = true;
		} else if (paste_resp_arg_eq(&a[j], "WITHMATCHLEN")) {
			withlen = true;
		} else if (paste_resp_arg_eq(&a[j], "MINMATCHLEN") && j + 1 < n) {
			if (!kv_arg_int(x, &a[++j], &minlen))
				goto out;
			if (minlen < 0)
				minlen = 0;
		} else {
			resp_error(x, "ERR syntax error");
			goto out;
		}
	}
	if (getlen && getidx) {
		resp_error(x, "ERR If you want both the length and indexes, please just use IDX.");
		goto out;
	}
	/* The table's size is known before a byte is read: a table over
	 * proto-max-bulk-len is refused, as Redis refuses it. */
	uint64_t cells = (uint64_t)(oa.len + 1) * (ob.len + 1);
	if (cells * sizeof(*t) > KV_STRING_MAX) {
		resp_error(x, "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
		goto out;
	}
	alen = (uint32_t)oa.len;
	blen = (uint32_t)ob.len;
	if (!(t = malloc(cells * sizeof(*t))) || !(sa = malloc(alen + 1u)) || !(sb = malloc(blen + 1u))) {
		resp_error(x, "ERR Insufficient memory, failed allocating transient memory for LCS");
		goto out;
	}
	if (alen)
		kv_value_read(kv, &oa, 0, sa, alen);
	if (blen)
		kv_value_read(kv, &ob, 0, sb, blen);
#define T(i, j) t[(uint64_t)(i) * (blen + 1) + (j)]
	for (uint32_t i = 0; i <= alen; i++)
		for (uint32_t j = 0; j <= blen; j++)
			T(i, j) = i == 0 || j == 0 ? 0
				  : sa[i - 1] == sb[j - 1] ? T(i - 1, j - 1) + 1
				  : T(i - 1, j) > T(i, j - 1) ? T(i - 1, j) : T(i, j - 1);
	uint32_t total = T(alen, blen);
	if (getlen) {
		resp_int(x, total);
		goto out;
	}
	/* Walk back from the end: the common string (backwards), and with
	 * IDX the matching ranges, the last one first, each emitted when it
	 * can grow no more. */
	uint8_t *res = malloc(total ? total : 1);
	struct resp_out ro = { 0 };
	uint32_t nranges = 0, idx = total, i = alen, j = blen;
	uint32_t as = alen, ae = 0, bs = 0, be = 0;      /* as == alen: no range open */
	while (res && i > 0 && j > 0) {
		bool emit = false;
		if (sa[i - 1] == sb[j - 1]) {
			res[--idx] = sa[i - 1];
			if (as == alen) {
				as = ae = i - 1;
				bs = be = j - 1;
			} else if (as == i && bs == j) {
				as--;
				bs--;
			} else {
				emit = true;
			}
			if (as == 0 || bs == 0)
				emit = true;
			i--;
			j--;
		} else {
			if (T(i - 1, j) > T(i, j - 1))
				i--;
			else
				j--;
			if (as != alen)
				emit = true;
		}
		uint32_t mlen = ae - as + 1;
		if (emit) {
			if (getidx && (minlen == 0 || mlen >= minlen)) {
				char h[8];
				resp_out_put(&ro, h, (size_t)paste_resp_put_array(h, sizeof(h), 2 + withlen));
				resp_out_put(&ro, "*2\r\n", 4);
				put_int(&ro, as);
				put_int(&ro, ae);
				resp_out_put(&ro, "*2\r\n", 4);
				put_int(&ro, bs);
				put_int(&ro, be);
				if (withlen)
					put_int(&ro, mlen);
				nranges++;
			}
			as = alen;
		}
	}
#undef T
	if (!res) {
		kv_reply_errno(x, -ENOMEM);
	} else if (getidx) {
		char h[32];
		if (resp_map(x, 2) == 0 && resp_bulk(x, "matches", 7) == 0 &&
		    resp_out_send(x, h, paste_resp_put_array(h, sizeof(h), nranges), &ro) == 0 &&
		    resp_bulk(x, "len", 3) == 0)
			resp_int(x, total);
	} else {
		resp_bulk(x, res, total);
	}
	reasm_free(&ro.b);                   /* sent (and freed) or not needed */
	free(res);
out:
	free(t);
	free(sa);
	free(sb);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_string[] = {
	{ "get", 2, "readonly fast", "string", "Reads a string key's value.", cmd_get, 1, 1, 1 },
	{ "set", -3, "write denyoom", "string", "Writes a string value, optionally with a deadline (EX, PX, EXAT, PXAT, KEEPTTL), a condition (NX, XX) or the old value back (GET).", cmd_set, 1, 1, 1 },
	{ "setnx", 3, "write denyoom fast", "string", "Writes a string value only when the key is missing.", cmd_setnx, 1, 1, 1 },
	{ "setex", 4, "write denyoom", "string", "Writes a string value that lives the given seconds.", cmd_setex, 1, 1, 1 },
	{ "psetex", 4, "write denyoom", "string", "Writes a string value that lives the given milliseconds.", cmd_psetex, 1, 1, 1 },
	{ "getset", 3, "write denyoom fast", "string", "Writes a string value and answers the one it replaced.", cmd_getset, 1, 1, 1 },
	{ "getdel", 2, "write fast", "string", "Answers a string value and deletes its key.", cmd_getdel, 1, 1, 1 },
	{ "getex", -2, "write fast", "string", "Answers a string value and changes or removes its key's deadline.", cmd_getex, 1, 1, 1 },
	{ "strlen", 2, "readonly fast", "string", "The length in bytes of a string value (0 when the key is missing).", cmd_strlen, 1, 1, 1 },
	{ "getrange", 4, "readonly", "string", "The bytes of a string value between two offsets, negative ones counted from the end.", cmd_getrange, 1, 1, 1 },
	{ "substr", 4, "readonly", "string", "GETRANGE's older name.", cmd_getrange, 1, 1, 1 },
	{ "append", 3, "write denyoom fast", "string", "Adds bytes at the end of a string value, creating the key when missing; answers the new length.", cmd_append, 1, 1, 1 },
	{ "setrange", 4, "write denyoom", "string", "Overwrites a string value's bytes from an offset, padding with zero bytes; answers the new length.", cmd_setrange, 1, 1, 1 },
	{ "incr", 2, "write denyoom fast", "string", "Adds 1 to a string holding an integer (a missing key counts as 0).", cmd_incr, 1, 1, 1 },
	{ "decr", 2, "write denyoom fast", "string", "Takes 1 from a string holding an integer (a missing key counts as 0).", cmd_decr, 1, 1, 1 },
	{ "incrby", 3, "write denyoom fast", "string", "Adds an integer to a string holding one (a missing key counts as 0).", cmd_incr, 1, 1, 1 },
	{ "decrby", 3, "write denyoom fast", "string", "Takes an integer from a string holding one (a missing key counts as 0).", cmd_decr, 1, 1, 1 },
	{ "incrbyfloat", 3, "write denyoom fast", "string", "Adds a decimal number to a string holding a number (a missing key counts as 0).", cmd_incrbyfloat, 1, 1, 1 },
	{ "mget", -2, "readonly fast", "string", "Reads string keys: a null for each one missing or not a string.", cmd_mget, 1, -1, 1 },
	{ "mset", -3, "write denyoom", "string", "Writes string keys, all in one durable step.", cmd_mset, 1, -1, 2 },
	{ "msetnx", -3, "write denyoom", "string", "Writes string keys only when none of them exists, all or nothing.", cmd_msetnx, 1, -1, 2 },
	{ "lcs", -3, "readonly", "string", "The longest common subsequence of two string values, its length (LEN) or where it matches (IDX).", cmd_lcs, 1, 2, 1 },
	{ 0 }
};
