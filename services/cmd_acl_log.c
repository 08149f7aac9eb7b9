/*
 * cmd_acl_log.c - the log of refusals and ACL LOG [count | RESET], as
 * Redis 7.0 keeps and shows them: the latest refused commands, keys,
 * channels and logins, newest first, at most acllog-max-len, a refusal
 * like one of the last ten within a minute counted on that entry. The
 * check and the logins that add entries are cmd_acl.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_acl.h"
#include "kv_vec.h"
#include "pkvs_resp.h"

static void reply_cstr(struct resp_ctx *x, const char *s)
{
	resp_bulk(x, s, strlen(s));
}

struct log_entry {
	uint64_t count;
	int reason, context;
	char *object, *username, *cinfo;
	size_t olen, ulen;
	uint64_t ms;
};

#define LOG_GROUP_MS 60000u
static struct log_entry *acl_log;      /* newest first */
static uint32_t nlog, caplog;

static void entry_free(struct log_entry *e)
{
	free(e->object);
	free(e->username);
	free(e->cinfo);
}

static uint32_t log_max(void)
{
	const char *v = kv_config_kept("acllog-max-len");
	long long n = v ? atoll(v) : 128;
	return n < 0 ? 0 : (uint32_t)n;
}

/* An entry, or a bump of a like one among the last ten (Redis's). */
void kv_acl_log_add(struct resp_ctx *x, int reason, int context, const void *obj, size_t olen,
		    const void *user, size_t ulen)
{
	struct log_entry e = { .count = 1, .reason = reason, .context = context,
			       .olen = olen, .ulen = ulen, .ms = x->w->now_ms };
	char line[1024];
	int n = kv_client_line(x, line, sizeof(line));
	if (n > 0 && line[n - 1] == '\n')
		n--;
	e.object = kv_acl_dup(obj, olen);
	e.username = kv_acl_dup(user, ulen);
	e.cinfo = kv_acl_dup(line, n > 0 ? (size_t)n : 0);
	if (!e.object || !e.username || !e.cinfo) {
		entry_free(&e);
		return;
	}
	for (uint32_t i = 0; i < nlog && i < 10; i++) {
		struct log_entry *o = &acl_log[i];
		uint64_t d = o->ms > e.ms ? o->ms - e.ms : e.ms - o->ms;
		if (o->reason == reason && o->context == context && d <= LOG_GROUP_MS &&
		    o->olen == olen && !memcmp(o->object, e.object, olen) && o->ulen == ulen &&
		    !memcmp(o->username, e.username, ulen)) {
			struct log_entry m = *o;
			free(m.cinfo);
			m.cinfo = e.cinfo;
			m.ms = e.ms;
			m.count++;
			e.cinfo = NULL;
			entry_free(&e);
			memmove(&acl_log[1], &acl_log[0], i * sizeof(*acl_log));
			acl_log[0] = m;
			return;
		}
	}
	if (kv_vec_grow((void **)&acl_log, &caplog, nlog + 1, sizeof(*acl_log))) {
		entry_free(&e);
		return;
	}
	memmove(&acl_log[1], &acl_log[0], nlog * sizeof(*acl_log));
	acl_log[0] = e;
	nlog++;
	for (uint32_t max = log_max(); nlog > max;)
		entry_free(&acl_log[--nlog]);
}

void kv_acl_log_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	int64_t count = 10;
	if (kv_acl_too_many(x, a, n, 3))
		return;
	if (n == 3) {
		if (paste_resp_arg_eq(&a[2], "RESET")) {
			for (uint32_t i = 0; i < nlog; i++)
				entry_free(&acl_log[i]);
			nlog = 0;
			resp_ok(x);
			return;
		}
		if (!kv_arg_int(x, &a[2], &count))
			return;
		if (count < 0)
			count = 0;
	}
	if ((uint64_t)count > nlog)
		count = nlog;
	static const char *const reasons[] = { "unknown", "command", "key", "auth", "channel" };
	static const char *const ctxs[] = { "toplevel", "multi", "lua" };
	resp_array(x, (uint64_t)count);
	for (int64_t i = 0; i < count; i++) {
		const struct log_entry *e = &acl_log[i];
		char age[32];
		resp_map(x, 7);
		reply_cstr(x, "count");
		resp_int(x, (int64_t)e->count);
		reply_cstr(x, "reason");
		reply_cstr(x, reasons[e->reason]);
		reply_cstr(x, "context");
		reply_cstr(x, ctxs[e->context]);
		reply_cstr(x, "object");
		resp_bulk(x, e->object, e->olen);
		reply_cstr(x, "username");
		resp_bulk(x, e->username, e->ulen);
		reply_cstr(x, "age-seconds");
		snprintf(age, sizeof(age), "%.17g", (double)(x->w->now_ms - e->ms) / 1000);
		if (x->r->proto == 3) {
			char line[48];
			int k = snprintf(line, sizeof(line), ",%s\r\n", age);
			resp_send(x, line, (size_t)k);
		} else {
			reply_cstr(x, age);
		}
		reply_cstr(x, "client-info");
		reply_cstr(x, e->cinfo);
	}
}
