/*
 * cmd_slowlog.c - SLOWLOG GET, LEN, RESET, HELP (pkvs_resp.h), and the log
 * kv_run feeds: a command that ran at least slowlog-log-slower-than
 * microseconds (-1: none; 0: every one) is kept with its id, start time,
 * duration, arguments (at most 32, each at most 128 bytes, as Redis trims
 * them; passwords redacted as MONITOR redacts them), peer and name; the
 * newest slowlog-max-len are kept. A script's commands are logged as its
 * client's (peer "?:0", no name) and EXEC's one by one, EXEC itself not,
 * as in Redis.
 *
 * Cost: one compare per command below the bound; a copy of the trimmed
 * arguments per logged one. The log is a ring that grows to the length
 * asked for and is trimmed at the next push when the bound shrinks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_script.h"
#include "cmd_tracking.h"
#include "pkvs_resp.h"

#define MAX_ARGS 32
#define MAX_ARG_BYTES 128

struct slow_entry {
	uint64_t id, time_s, duration_us;
	uint32_t argc;
	struct paste_resp_arg *argv;    /* each p malloc'd */
	char *peer, *name;
};

uint64_t kv_slowlog_ns = 10000 * 1000ull;   /* slowlog-log-slower-than, in ns */
static struct {
	struct slow_entry *e;           /* a ring: e[(head + i) % cap], oldest first */
	uint32_t cap, head, n;
	uint64_t max_len, next_id;
} sl = { .max_len = 128 };

static void entry_free(struct slow_entry *e)
{
	for (uint32_t j = 0; j < e->argc; j++)
		free((void *)e->argv[j].p);
	free(e->argv);
	free(e->peer);
	free(e->name);
	memset(e, 0, sizeof(*e));
}

static void drop_oldest(void)
{
	entry_free(&sl.e[sl.head]);
	sl.head = (sl.head + 1) % sl.cap;
	sl.n--;
}

void kv_slowlog_setting(const char *name, int64_t v)
{
	if (!strcmp(name, "slowlog-log-slower-than"))
		kv_slowlog_ns = v < 0 ? UINT64_MAX : (uint64_t)v * 1000;
	else if (!strcmp(name, "slowlog-max-len"))
		sl.max_len = v < 0 ? 0 : (uint64_t)v;
}

/* A copy of a's bytes, or the first MAX_ARG_BYTES and how many more. */
static bool arg_copy(struct paste_resp_arg *out, const char *p, size_t len)
{
	char tail[48];
	size_t keep = len, more = 0;
	if (len > MAX_ARG_BYTES) {
		keep = MAX_ARG_BYTES;
		more = (size_t)snprintf(tail, sizeof(tail), "... (%zu more bytes)", len - MAX_ARG_BYTES);
	}
	char *b = malloc(keep + more + 1);
	if (!b)
		return false;
	memcpy(b, p, keep);
	memcpy(b + keep, tail, more);
	*out = (struct paste_resp_arg){ b, keep + more };
	return true;
}

void kv_slowlog_push(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc, uint64_t ns)
{
	if ((rt->fl & KV_CMD_SKIP_SLOWLOG) || !sl.max_len)
		return;
	bool script = kv_script_client(x);      /* Redis's Lua client: "?:0", no name */
	while (sl.n && sl.n >= sl.max_len)
		drop_oldest();
	if (sl.n == sl.cap) {                   /* grow the ring, oldest first again */
		uint32_t cap = sl.cap ? sl.cap * 2 : 16;
		struct slow_entry *e = calloc(cap, sizeof(*e));
		if (!e)
			return;
		for (uint32_t i = 0; i < sl.n; i++)
			e[i] = sl.e[(sl.head + i) % sl.cap];
		free(sl.e);
		sl.e = e;
		sl.cap = cap;
		sl.head = 0;
	}
	struct slow_entry en = { .id = sl.next_id++, .time_s = (uint64_t)time(NULL),
				 .duration_us = ns / 1000 };
	bool small[3], *redact = kv_redactions(rt, argv, argc, small);
	en.argc = argc > MAX_ARGS ? MAX_ARGS : argc;
	en.argv = calloc(en.argc, sizeof(*en.argv));
	bool ok = en.argv != NULL;
	for (uint32_t j = 0; ok && j < en.argc; j++) {
		char more[48];
		if (en.argc < argc && j == en.argc - 1) {
			int k = snprintf(more, sizeof(more), "... (%u more arguments)", argc - en.argc + 1);
			ok = arg_copy(&en.argv[j], more, (size_t)k);
		} else if (redact && redact[j]) {
			ok = arg_copy(&en.argv[j], "(redacted)", 10);
		} else {
			ok = arg_copy(&en.argv[j], argv[j].p, argv[j].len);
		}
	}
	if (redact != small)
		free(redact);
	char peer[80] = "?:0", local[80];
	int fd;
	if (!script)
		resp_conn_addr(x, peer, local, sizeof(peer), &fd);
	en.peer = strdup(peer);
	en.name = strdup(x->r->name && !script ? x->r->name : "");
	if (!ok || !en.peer || !en.name) {
		entry_free(&en);
		return;
	}
	sl.e[(sl.head + sl.n) % sl.cap] = en;
	sl.n++;
}

static void cmd_slowlog_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv;
	int64_t count = 10;
	if (n == 3 && !kv_arg_range(x, &a[2], -1, INT64_MAX,
				    "count should be greater than or equal to -1", &count))
		return;
	if (n > 3) {
		kv_sub_syntax_error(x, "SLOWLOG", &a[1]);
		return;
	}
	uint64_t send = count < 0 || (uint64_t)count > sl.n ? sl.n : (uint64_t)count;
	resp_array(x, send);
	for (uint64_t i = 0; i < send; i++) {          /* newest first */
		const struct slow_entry *e = &sl.e[(sl.head + sl.n - 1 - i) % sl.cap];
		resp_array(x, 6);
		resp_int(x, (int64_t)e->id);
		resp_int(x, (int64_t)e->time_s);
		resp_int(x, (int64_t)e->duration_us);
		resp_array(x, e->argc);
		for (uint32_t j = 0; j < e->argc; j++)
			resp_bulk(x, e->argv[j].p, e->argv[j].len);
		resp_bulk(x, e->peer, strlen(e->peer));
		resp_bulk(x, e->name, strlen(e->name));
	}
}

static void cmd_slowlog_len(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_int(x, sl.n);
}

static void cmd_slowlog_reset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv, (void)a, (void)n;
	while (sl.n)
		drop_oldest();
	resp_ok(x);
}

static void cmd_slowlog_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GET [<count>]",
		"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
		"    Entries are made of:",
		"    id, timestamp, time in microseconds, arguments array, client IP and port,",
		"    client name",
		"LEN",
		"    Return the length of the slowlog.",
		"RESET",
		"    Reset the slowlog.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_slowlog[] = {
	{ "slowlog", -2, "", "server", "SLOWLOG subcommands: the commands that ran longer than slowlog-log-slower-than.", NULL, 0, 0, 0 },
	{ "slowlog|get", -2, "admin loading stale", "server", "The newest entries of the slow log (10, or count; -1: all).", cmd_slowlog_get, 0, 0, 0 },
	{ "slowlog|help", 2, "loading stale", "server", "What SLOWLOG's subcommands do.", cmd_slowlog_help, 0, 0, 0 },
	{ "slowlog|len", 2, "admin loading stale", "server", "How many entries the slow log holds.", cmd_slowlog_len, 0, 0, 0 },
	{ "slowlog|reset", 2, "admin loading stale", "server", "Empties the slow log.", cmd_slowlog_reset, 0, 0, 0 },
	{ 0 }
};
