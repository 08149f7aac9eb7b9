/*
 * cmd_expire.c - deadlines (pkvs_resp.h): EXPIRE, PEXPIRE, EXPIREAT,
 * PEXPIREAT (NX, XX, GT, LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST.
 *
 * A deadline is absolute: milliseconds since the epoch (CLOCK_REALTIME),
 * kept with the key's entry and in the expiry index (kv_obj.c), so it
 * holds across a restart and a crash: a key whose deadline passed while
 * pkvs was down is absent when it comes back. A deadline set in the past
 * deletes the key at once, as Redis does (a delete, not an expiry, in
 * INFO's counts); every command reads through kv_lookup, which removes a
 * key whose deadline passed.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "kv_notify.h"
#include "pkvs_resp.h"

void kv_reply_bad_expire(struct resp_ctx *x, const struct paste_resp_arg *cmd)
{
	char name[32];
	size_t n = cmd->len < sizeof(name) - 1 ? cmd->len : sizeof(name) - 1;
	for (size_t i = 0; i < n; i++)
		name[i] = cmd->p[i] >= 'A' && cmd->p[i] <= 'Z' ? (char)(cmd->p[i] + 32) : cmd->p[i];
	name[n] = 0;
	resp_error(x, "ERR invalid expire time in '%s' command", name);
}

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* EXPIRE key t [NX|XX|GT|LT ...]: the options are read first, then the
 * number (Redis's order: "EXPIRE k x ZZ" names the option). */
static void expire_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n, bool at, bool ms)
{
	unsigned fl = 0;
	for (uint32_t i = 3; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "NX"))
			fl |= EXP_NX;
		else if (paste_resp_arg_eq(&a[i], "XX"))
			fl |= EXP_XX;
		else if (paste_resp_arg_eq(&a[i], "GT"))
			fl |= EXP_GT;
		else if (paste_resp_arg_eq(&a[i], "LT"))
			fl |= EXP_LT;
		else {
			resp_error(x, "ERR Unsupported option %.*s", (int)(a[i].len > 128 ? 128 : a[i].len),
				   a[i].p);
			return;
		}
	}
	if ((fl & EXP_NX) && (fl & (EXP_XX | EXP_GT | EXP_LT))) {
		resp_error(x, "ERR NX and XX, GT or LT options at the same time are not compatible");
		return;
	}
	if ((fl & EXP_GT) && (fl & EXP_LT)) {
		resp_error(x, "ERR GT and LT options at the same time are not compatible");
		return;
	}
	int64_t when;
	if (paste_resp_arg_i64(&a[2], &when)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	/* Negative numbers are allowed (a deadline in the past); only the
	 * unit's conversion and the addition of now may overflow. */
	if (!ms) {
		if (when > INT64_MAX / 1000 || when < INT64_MIN / 1000) {
			kv_reply_bad_expire(x, &a[0]);
			return;
		}
		when *= 1000;
	}
	int64_t base = at ? 0 : kv->now_ms;
	if (when > INT64_MAX - base) {
		kv_reply_bad_expire(x, &a[0]);
		return;
	}
	when += base;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	if (kv_lookup(kv, &k, &o, false)) {
		resp_int(x, 0);
		return;
	}
	int64_t cur = o.expire_ms == KV_NO_TTL ? -1 : o.expire_ms;
	/* A key without a deadline lives forever: GT never beats it, LT
	 * always does. */
	if (((fl & EXP_NX) && cur != -1) || ((fl & EXP_XX) && cur == -1) ||
	    ((fl & EXP_GT) && (cur == -1 || when <= cur)) || ((fl & EXP_LT) && cur != -1 && when >= cur)) {
		resp_int(x, 0);
		return;
	}
	int r = when <= kv->now_ms ? kv_remove(kv, &k) : kv_set_expire(kv, &k, &o, when);
	if (r >= 0)
		kv_notify(KV_NOTIFY_GENERIC, when <= kv->now_ms ? "del" : "expire", &k);
	if (r < 0)
		kv_reply_errno(x, r);
	else
		resp_int(x, 1);
}

void cmd_expire(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	expire_generic(x, kv, a, n, false, false);
}

void cmd_pexpire(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	expire_generic(x, kv, a, n, false, true);
}

void cmd_expireat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	expire_generic(x, kv, a, n, true, false);
}

void cmd_pexpireat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	expire_generic(x, kv, a, n, true, true);
}

/* TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 absent, -1 no deadline; seconds
 * are rounded to the nearest. */
static void ttl_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			bool ms, bool abs)
{
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	if (kv_lookup(kv, &k, &o, true)) {
		resp_int(x, -2);
		return;
	}
	if (o.expire_ms == KV_NO_TTL) {
		resp_int(x, -1);
		return;
	}
	int64_t t = abs ? o.expire_ms : o.expire_ms - kv->now_ms;
	if (t < 0)
		t = 0;
	resp_int(x, ms ? t : t / 1000 + (t % 1000 >= 500));
}

void cmd_ttl(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	ttl_generic(x, kv, a, false, false);
}

void cmd_pttl(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	ttl_generic(x, kv, a, true, false);
}

void cmd_expiretime(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	ttl_generic(x, kv, a, false, true);
}

void cmd_pexpiretime(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	ttl_generic(x, kv, a, true, true);
}

void cmd_persist(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	if (kv_lookup(kv, &k, &o, false) || o.expire_ms == KV_NO_TTL) {
		resp_int(x, 0);
		return;
	}
	int r = kv_set_expire(kv, &k, &o, KV_NO_TTL);
	if (r == 0)
		kv_notify(KV_NOTIFY_GENERIC, "persist", &k);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, 1);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_expire[] = {
	{ "expire", -3, "write fast", "generic", "Gives a key a time to live in seconds, optionally only under a condition (NX, XX, GT, LT).", cmd_expire, 1, 1, 1 },
	{ "pexpire", -3, "write fast", "generic", "Gives a key a time to live in milliseconds, optionally only under a condition (NX, XX, GT, LT).", cmd_pexpire, 1, 1, 1 },
	{ "expireat", -3, "write fast", "generic", "Makes a key expire at a Unix time in seconds (NX, XX, GT, LT as EXPIRE).", cmd_expireat, 1, 1, 1 },
	{ "pexpireat", -3, "write fast", "generic", "Makes a key expire at a Unix time in milliseconds (NX, XX, GT, LT as EXPIRE).", cmd_pexpireat, 1, 1, 1 },
	{ "ttl", 2, "readonly fast", "generic", "Seconds a key has left to live: -1 when it has no deadline, -2 when it is missing.", cmd_ttl, 1, 1, 1 },
	{ "pttl", 2, "readonly fast", "generic", "Milliseconds a key has left to live: -1 when it has no deadline, -2 when it is missing.", cmd_pttl, 1, 1, 1 },
	{ "expiretime", 2, "readonly fast", "generic", "A key's deadline as a Unix time in seconds: -1 when it has none, -2 when it is missing.", cmd_expiretime, 1, 1, 1 },
	{ "pexpiretime", 2, "readonly fast", "generic", "A key's deadline as a Unix time in milliseconds: -1 when it has none, -2 when it is missing.", cmd_pexpiretime, 1, 1, 1 },
	{ "persist", 2, "write fast", "generic", "Takes away a key's deadline: it lives until deleted.", cmd_persist, 1, 1, 1 },
	{ 0 }
};
