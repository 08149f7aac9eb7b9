/*
 * cmd_monitor.c - MONITOR with Redis 7.0.15's behaviour, and the hooks
 * that dispatch calls while a connection monitors or tracks keys
 * (cmd_tracking.h).
 *
 * A monitor receives every command another client (or itself) runs, once
 * it ran, as Redis's replicationFeedMonitors prints it:
 *
 *     +<sec>.<usec> [<db> <ip:port>] "set" "k\x00" "v"
 *
 * (a script's commands as [<db> lua]; each argument quoted, \\ \" \n \r
 * \t \a \b escaped, other bytes outside 0x20..0x7e as \xhh). As in
 * Redis: the commands flagged admin (CONFIG, CLIENT LIST, DEBUG,
 * MONITOR...) are not shown; EVAL and FCALL (skip_monitor) are shown
 * before they run, so their scripts' commands follow them; a transaction
 * shows MULTI, then at EXEC its commands, then EXEC; a command refused
 * before it ran (unknown, arity, NOAUTH) is not shown; AUTH's arguments,
 * HELLO's AUTH pair and MIGRATE's AUTH/AUTH2 ones are "(redacted)". The
 * line is sent behind the barrier like a reply (it reveals a change).
 * QUIT and RESET end it. A monitor that does not read grows its output
 * queue, as Redis's (monitors are its normal class: no output limit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cmd_script.h"
#include "cmd_tracking.h"

uint32_t kv_watch;

/* The connections that monitor, in the order they started. */
static struct {
	struct resp_ctx *x;             /* where their lines go (ev, capture unset) */
	uint32_t n, cap;
	char *line;                     /* the line being fed, kept for the next */
	size_t linecap;
} mon;

/* kv_run nesting seen by the hooks (0: between commands). */
static uint32_t depth;

static void watch_set(uint32_t bit, bool on)
{
	if (on)
		kv_watch |= bit;
	else
		kv_watch &= ~bit;
	if (!kv_watch) {
		depth = 0;
		kv_track_idle();
	}
}

bool kv_monitor_is(const struct resp_ctx *x)
{
	return ((const struct kv_resp_conn *)x->sc)->monitor;
}

void kv_monitor_reset(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	if (!kc->monitor)
		return;
	kc->monitor = false;
	for (uint32_t i = 0; i < mon.n; i++)
		if (mon.x[i].r == x->r) {
			memmove(&mon.x[i], &mon.x[i + 1], (mon.n - i - 1) * sizeof(*mon.x));
			mon.n--;
			break;
		}
	watch_set(KV_WATCH_MONITOR, mon.n > 0);
}

/* Redis's sdscatrepr of p[0..n) at o (room for 4n + 2 bytes). */
static size_t repr(char *o, const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t k = 0;
	o[k++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		switch (c) {
		case '\\': case '"': o[k++] = '\\'; o[k++] = (char)c; break;
		case '\n': o[k++] = '\\'; o[k++] = 'n'; break;
		case '\r': o[k++] = '\\'; o[k++] = 'r'; break;
		case '\t': o[k++] = '\\'; o[k++] = 't'; break;
		case '\a': o[k++] = '\\'; o[k++] = 'a'; break;
		case '\b': o[k++] = '\\'; o[k++] = 'b'; break;
		default:
			if (c >= 0x20 && c < 0x7f) {
				o[k++] = (char)c;
			} else {
				o[k++] = '\\';
				o[k++] = 'x';
				o[k++] = hex[c >> 4];
				o[k++] = hex[c & 15];
			}
		}
	}
	o[k++] = '"';
	return k;
}

/* argv[i] is shown as "(redacted)" when redact[i]. */
static void feed(struct resp_ctx *x, uint32_t db, bool script, const struct paste_resp_arg *argv,
		 uint32_t argc, const bool *redact)
{
	size_t need = 160;
	for (uint32_t i = 0; i < argc; i++)
		need += 4 * argv[i].len + 16;
	if (need > mon.linecap) {
		char *p = realloc(mon.line, need);
		if (!p)
			return;
		mon.line = p;
		mon.linecap = need;
	}
	char *o = mon.line;
	struct timeval tv;
	gettimeofday(&tv, NULL);
	int k = snprintf(o, 64, "+%ld.%06ld ", (long)tv.tv_sec, (long)tv.tv_usec);
	if (script) {
		k += snprintf(o + k, 32, "[%u lua] ", db);
	} else {
		char peer[80], local[80];
		int fd;
		resp_conn_addr(x, peer, local, sizeof(peer), &fd);
		k += snprintf(o + k, 120, "[%u %s] ", db, peer);
	}
	size_t len = (size_t)k;
	for (uint32_t i = 0; i < argc; i++) {
		if (redact && redact[i])
			len += repr(o + len, "(redacted)", 10);
		else
			len += repr(o + len, argv[i].p, argv[i].len);
		if (i + 1 < argc)
			o[len++] = ' ';
	}
	o[len++] = '\r';
	o[len++] = '\n';
	for (uint32_t i = 0; i < mon.n; i++) {
		resp_push_send(&mon.x[i], o, len, true);   /* a closing one is skipped */
		kv_normal_limit_after(&mon.x[i]);           /* a monitor is a normal client */
	}
}

bool *kv_redactions(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc,
		    bool small[3])
{
	bool *redact = NULL;
	small[0] = small[1] = small[2] = false;
	/* AUTH redacts its arguments once it parsed them (not with a syntax
	 * error's extra ones); MIGRATE its AUTH password and AUTH2 pair, as
	 * far as its options parse; ACL SETUSER everything after its name;
	 * CONFIG SET the values of masteruser, masterauth and requirepass. */
	if (!strcmp(rt->c->name, "auth") && argc <= 3) {
		small[1] = true;
		small[2] = argc == 3;
		redact = small;
	} else if (!strcmp(rt->c->name, "acl|setuser") && (redact = calloc(argc, sizeof(*redact)))) {
		for (uint32_t j = 2; j < argc; j++)
			redact[j] = true;
	} else if (!strcmp(rt->c->name, "config|set") && (redact = calloc(argc, sizeof(*redact)))) {
		for (uint32_t j = 2; j + 1 < argc; j += 2)
			redact[j + 1] = paste_resp_arg_eq(&argv[j], "masteruser") ||
					paste_resp_arg_eq(&argv[j], "masterauth") ||
					paste_resp_arg_eq(&argv[j], "requirepass");
	} else if (!strcmp(rt->c->name, "migrate") && argc > 6 &&
		   (redact = calloc(argc, sizeof(*redact)))) {
		for (uint32_t j = 6; j < argc; j++) {
			uint32_t more = argc - 1 - j;
			if (paste_resp_arg_eq(&argv[j], "AUTH") && more >= 1) {
				redact[++j] = true;
			} else if (paste_resp_arg_eq(&argv[j], "AUTH2") && more >= 2) {
				redact[j + 1] = redact[j + 2] = true;
				j += 2;
			} else if (!paste_resp_arg_eq(&argv[j], "COPY") &&
				   !paste_resp_arg_eq(&argv[j], "REPLACE")) {
				break;
			}
		}
	}
	return redact;
}

static void feed_cmd(struct resp_ctx *x, const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		     uint32_t argc, bool script)
{
	bool small[3], *redact = kv_redactions(rt, argv, argc, small);
	feed(x, kv_resp_db(x), script, argv, argc, redact);
	if (redact != small)
		free(redact);
}

void kv_monitor_own(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc)
{
	if (!(kv_watch & KV_WATCH_MONITOR))
		return;
	bool *redact = NULL;
	if (paste_resp_arg_eq(&argv[0], "HELLO") && argc > 2) {
		/* As Redis's HELLO parses: a good version, then options up to
		 * the first bad one; each AUTH pair it meets is redacted. */
		int64_t ver;
		if (paste_resp_arg_i64(&argv[1], &ver) || ver < 2 || ver > 3)
			goto out;
		if (!(redact = calloc(argc, sizeof(*redact))))
			return;
		for (uint32_t j = 2; j < argc; j++) {
			uint32_t more = argc - 1 - j;
			if (paste_resp_arg_eq(&argv[j], "AUTH") && more >= 2) {
				redact[j + 1] = redact[j + 2] = true;
				j += 2;
			} else if (paste_resp_arg_eq(&argv[j], "SETNAME") && more) {
				j++;
			} else {
				break;
			}
		}
	}
out:
	feed(x, kv_resp_db(x), false, argv, argc, redact);
	free(redact);
}

/* A SET whose value was streamed into the store (pkvs_resp.c's
 * kv_stream_end, not kv_run): its line, the value read back. The name
 * is shown as "SET" (the client's own spelling is not kept). */
void kv_monitor_set(struct resp_ctx *x, struct kv *kv, const struct kv_key *k)
{
	if (!(kv_watch & KV_WATCH_MONITOR))
		return;
	struct kv_key kk = *k;
	struct kv_obj o;
	if (kv_lookup(kv, &kk, &o, false) || o.type != KV_STRING)
		return;
	char *v = malloc(o.len ? o.len : 1);
	if (!v)
		return;
	size_t got = 0;
	for (size_t n; got < o.len && (n = kv_value_read(kv, &o, got, v + got, o.len - got));)
		got += n;
	const struct paste_resp_arg av[3] = {
		{ "SET", 3 }, { (const char *)(k->longkey ? k->p : k->t + 1), k->len }, { v, got },
	};
	feed(x, kv_resp_db(x), false, av, 3, NULL);
	free(v);
}

/* ---------------------------------------------------------- hooks */

void kv_watch_before(struct resp_ctx *x, struct kv *kv, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc)
{
	(void)kv;
	bool outer = depth++ == 0, script = kv_script_client(x);   /* shown as [db lua] */
	/* EVAL and FCALL show before their scripts' commands. */
	if ((kv_watch & KV_WATCH_MONITOR) && (rt->fl & KV_CMD_SKIP_MONITOR))
		feed_cmd(x, rt, argv, argc, script);
	kv_track_before(x, rt, argv, argc, outer, script);
}

void kv_watch_after(struct resp_ctx *x, struct kv *kv, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc)
{
	(void)kv;
	/* (kv_watch may have been set while the command ran: no before.) */
	if (depth)
		depth--;
	bool script = kv_script_client(x);
	if ((kv_watch & KV_WATCH_MONITOR) && !(rt->fl & (KV_CMD_SKIP_MONITOR | KV_CMD_ADMIN)))
		feed_cmd(x, rt, argv, argc, script);
	kv_track_after(x, rt, argv, argc, depth == 0, script);
}

void kv_watch_done(struct kv *kv)
{
	kv_track_flush(kv, false);
}

void kv_watch_pass(struct kv *kv)
{
	kv_track_flush(kv, true);
}

void kv_watch_tracking(bool on)
{
	watch_set(KV_WATCH_TRACKING, on);
}

/* ---------------------------------------------------------- MONITOR */

static void cmd_monitor(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	struct kv_resp_conn *kc = x->sc;
	if (kv->group_depth) {
		/* Inside EXEC: a client that must get one reply per command. */
		resp_error(x, "ERR MONITOR isn't allowed for DENY BLOCKING client");
		return;
	}
	if (kc->monitor)
		return;                         /* already: no reply, as Redis */
	if (mon.n == mon.cap) {
		uint32_t cap = mon.cap ? mon.cap * 2 : 4;
		struct resp_ctx *p = realloc(mon.x, cap * sizeof(*p));
		if (!p) {
			resp_error(x, "ERR out of memory");
			return;
		}
		mon.x = p;
		mon.cap = cap;
	}
	struct resp_ctx *m = &mon.x[mon.n++];
	*m = *x;
	m->ev = NULL;
	m->capture = NULL;
	kc->monitor = true;
	watch_set(KV_WATCH_MONITOR, true);
	resp_ok(x);
}

/* name, arity, flags, group, summary, handler, first key, last key, step. */
const struct kv_cmd kv_cmds_monitor[] = {
	{ "monitor", 1, "admin noscript loading stale", "server", "Streams every command the server runs from now on, one line each, until QUIT or RESET.", cmd_monitor, 0, 0, 0 },
	{ 0 }
};
