/*
 * cmd_script.c - scripting (pkvs_resp.h, cmd_script.h): EVAL, EVALSHA,
 * EVAL_RO, EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL, with Redis 7.0's
 * semantics over script_lua.c's Lua, and the run of a script or a
 * function that FCALL (cmd_function.c, with FUNCTION's libraries) shares;
 * the table below lists every scripting command.
 *
 * A command a script calls (redis.call) goes through kv_run, the dispatch
 * every command takes, with its replies captured (resp_ctx.capture) in
 * the script's RESP and turned into Lua values. The script runs as a
 * client of its own: its SELECT and its RESP are its own, the caller's
 * database, protocol and CLIENT REPLY mode are untouched.
 *
 * Atomic and durable as one unit: a script's writes are one kv group
 * (kv_begin/kv_commit), so after a crash all of them are there or none,
 * and its reply is queued after the commit (behind the batch's barrier,
 * as every reply). A script that fails after it wrote keeps its writes,
 * as Redis does: the group is committed (docs/compat.md, "Scripting").
 * Only a SHUTDOWN while it runs drops them (the group is aborted).
 *
 * Long scripts. Every 100,000 Lua instructions the script checks the
 * time; past busy-reply-threshold (lua-time-limit, 5 s) it runs a pass of
 * the event loop now and then (server_worker_nested_pass, Redis's
 * processEventsWhileBlocked): other clients get "BUSY ..." but for the
 * commands flagged allow_busy (SCRIPT KILL, FUNCTION KILL and STATS,
 * SHUTDOWN, AUTH, MULTI...), the script's own connection waits. SCRIPT
 * KILL stops a script that has not written; SHUTDOWN stops any, its
 * writes dropped.
 *
 * Scripts (SCRIPT LOAD, EVAL) do not persist, as in Redis; functions do
 * (cmd_function.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd_script.h"
#include "kv_acl.h"
#include "kv_repl.h"

/* ------------------------------------------------------------ state */

struct script {
	struct script *next;
	char sha[41];
	uint32_t flags;
	int ref;
	size_t len;                     /* the body's bytes (INFO) */
};

static struct {
	struct sl_engine *eval;
	struct script **sb;             /* scripts by SHA-1 */
	uint32_t nsb, nscripts;
	uint64_t script_bytes;
	struct kv_srun *running;
} st;

/* A setting CONFIG keeps, as a number (dflt: unset or not one). */
static int64_t config_int(const char *name, int64_t dflt)
{
	const char *v = kv_config_kept(name);
	char *end;
	long long n = v ? strtoll(v, &end, 10) : 0;
	return v && *v && !*end ? n : dflt;
}

int kv_script_engines(struct kv *kv)
{
	if (!st.eval && !(st.eval = sl_open(SL_KIND_EVAL)))
		return -ENOMEM;
	return kv_function_open(kv);
}

/* Count an error reply under its code without sending it (the caller
 * sends the whole line itself). */
static void count_error(struct resp_ctx *x, const char *line, size_t n)
{
	char code[40];
	size_t k = 0;
	for (size_t i = line[0] == '-'; i < n && k + 1 < sizeof(code) && line[i] != '\r'; i++)
		code[k++] = line[i];
	code[k] = 0;
	struct resp_out o = { 0 };
	struct resp_out *c = x->capture;
	x->capture = &o;
	resp_error(x, "%s", code);
	x->capture = c;
	reasm_free(&o.b);
}

void kv_script_send_reply(struct resp_ctx *x, const struct sl_buf *out, bool err, bool counted)
{
	if (out->oom) {
		resp_error(x, "ERR out of memory");
		return;
	}
	if (err) {
		if (counted)
			x->r->errors++;
		else
			count_error(x, out->p, out->len);
	}
	resp_send(x, out->p, out->len);
}

/* ------------------------------------------------------------ scripts by SHA-1 */

static uint32_t sha_slot(const char *sha)
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 40; i++)
		h = (h ^ (uint8_t)(sha[i] | 0x20)) * 16777619u;
	return h & (st.nsb - 1);
}

static struct script *script_find(const char *sha, size_t len)
{
	if (len != 40 || !st.nsb)
		return NULL;
	for (struct script *s = st.sb[sha_slot(sha)]; s; s = s->next)
		if (!strncasecmp(s->sha, sha, 40))
			return s;
	return NULL;
}

static int script_add(struct script *s)
{
	if (st.nscripts >= st.nsb) {
		uint32_t nb = st.nsb ? st.nsb * 2 : 64;
		struct script **b = calloc(nb, sizeof(*b));
		if (!b)
			return -ENOMEM;
		struct script **old = st.sb;
		uint32_t on = st.nsb;
		st.sb = b;
		st.nsb = nb;
		for (uint32_t i = 0; i < on; i++)
			for (struct script *t = old[i], *next; t; t = next) {
				next = t->next;
				uint32_t k = sha_slot(t->sha);
				t->next = b[k];
				b[k] = t;
			}
		free(old);
	}
	uint32_t k = sha_slot(s->sha);
	s->next = st.sb[k];
	st.sb[k] = s;
	st.nscripts++;
	st.script_bytes += s->len;
	return 0;
}

/* SCRIPT FLUSH: the scripts and the Lua state with them. */
static void scripts_flush(void)
{
	for (uint32_t i = 0; i < st.nsb; i++)
		for (struct script *s = st.sb[i], *next; s; s = next) {
			next = s->next;
			free(s);
		}
	free(st.sb);
	st.sb = NULL;
	st.nsb = st.nscripts = 0;
	st.script_bytes = 0;
	sl_close(st.eval);
	st.eval = NULL;
}

/* The script of body (compiled and cached if new): NULL after replying
 * the error. */
static struct script *script_create(struct resp_ctx *x, const char *body, size_t len)
{
	char sha[41], err[512];
	sl_sha1_hex(body, len, sha);
	struct script *s = script_find(sha, 40);
	if (s)
		return s;
	uint32_t flags;
	size_t skip;
	if (sl_shebang(body, len, &flags, &skip, err, sizeof(err))) {
		resp_error(x, "ERR %s", err);
		return NULL;
	}
	int ref = sl_compile(st.eval, body + skip, len - skip, err, sizeof(err));
	if (ref < 0) {
		struct sl_buf b = { 0 };
		sl_buf_put(&b, "-ERR ", 5);
		for (const char *p = err; *p; p++)
			sl_buf_put(&b, *p == '\r' || *p == '\n' ? " " : p, 1);
		sl_buf_put(&b, "\r\n", 2);
		kv_script_send_reply(x, &b, true, false);
		sl_buf_free(&b);
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s)))) {
		memcpy(s->sha, sha, 41);
		s->flags = flags;
		s->ref = ref;
		s->len = len;
	}
	if (!s || script_add(s)) {
		free(s);
		sl_unref(st.eval, ref);
		resp_error(x, "ERR out of memory");
		return NULL;
	}
	return s;
}

/* ------------------------------------------------------------ the host */

/* The connection's database: the script's client starts in it. */
static struct kv_cmd_rt *call_lookup(struct sl_call *c, struct paste_resp_arg *av, uint32_t argc)
{
	struct kv_cmd_rt *rt = kv_cmd_find(&av[0]);
	if (rt && rt->nsubs && argc >= 2)
		rt = kv_cmd_sub(rt, &av[1]);
	(void)c;
	return rt;
}

/* Append a's bytes in lower case to name[*n..] (NUL-ended): false when
 * they do not fit or hold no command name ('|' or NUL in them). */
static bool name_append(char *name, size_t cap, size_t *n, const struct paste_resp_arg *a)
{
	if (a->len + 1 > cap - *n || memchr(a->p, '|', a->len) || memchr(a->p, 0, a->len))
		return false;
	for (size_t k = 0; k < a->len; k++) {
		char ch = a->p[k];
		name[(*n)++] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	name[*n] = 0;
	return true;
}

/* What Redis tells a script that calls a command pkvs lacks, from its
 * reference (cmd_meta.c): a wrong arity, or noscript (CLUSTER RESET may
 * not run in a script), checked in Redis's order; else that the command
 * is unknown. argv[1] names a subcommand of a container only, as in
 * Redis's lookup. */
static const char *missing_why(const struct paste_resp_arg *av, uint32_t argc)
{
	static const char unknown[] = "Unknown Redis command called from script";
	char name[80];
	size_t n = 0;
	if (!argc || !name_append(name, sizeof(name), &n, &av[0]))
		return unknown;
	bool container = false;
	for (uint32_t j = 0; argc >= 2 && j < kv_cmd_nmetas && !container; j++)
		container = !strncmp(kv_cmd_metas[j].name, name, n) && kv_cmd_metas[j].name[n] == '|';
	if (container) {
		name[n++] = '|';
		if (!name_append(name, sizeof(name), &n, &av[1]))
			return unknown;
	}
	const struct kv_cmd_meta *m = kv_cmd_meta_find(name);
	if (!m)
		return unknown;
	if ((m->arity > 0 && argc != (uint32_t)m->arity) || (m->arity < 0 && argc < (uint32_t)-m->arity))
		return "Wrong number of args calling Redis command from script";
	return m->noscript ? "This Redis command is not allowed from script" : unknown;
}

static int host_call(void *arg, struct sl_call *c)
{
	struct kv_srun *s = arg;
	struct resp_ctx *x = s->x;
	bool ask = c->argc < 0;
	uint32_t argc = (uint32_t)(ask ? -c->argc : c->argc);
	static struct paste_resp_arg *av;
	static uint32_t cap;
	if (argc > cap) {
		struct paste_resp_arg *n = realloc(av, argc * sizeof(*av));
		if (!n) {
			snprintf(c->err, sizeof(c->err), "ERR out of memory");
			return -1;
		}
		av = n;
		cap = argc;
	}
	for (uint32_t i = 0; i < argc; i++)
		av[i] = (struct paste_resp_arg){ c->argv[i], c->lens[i] };
	struct kv_cmd_rt *rt = call_lookup(c, av, argc);
	if (ask) {                      /* redis.acl_check_cmd */
		uint32_t idx;
		if (!rt || (!rt->c->fn && !rt->nsubs))
			return -1;
		return x->r->user && kv_acl_check(x->r->user, rt, av, argc, &idx) != KV_ACL_OK;
	}
	const char *why = NULL;
	if (!rt || (!rt->c->fn && !rt->nsubs && !(rt->fl & KV_CMD_NOSCRIPT))) {
		why = missing_why(av, argc);
	} else {
		int arity = rt->c->arity;
		if ((arity > 0 && argc != (uint32_t)arity) || (arity < 0 && argc < (uint32_t)-arity))
			why = "Wrong number of args calling Redis command from script";
		else if (rt->fl & KV_CMD_NOSCRIPT)
			why = "This Redis command is not allowed from script";
		else if (x->r->user && !((const struct kv_acl_user *)x->r->user)->all &&
			 (why = kv_acl_script_why(x, rt, av, argc)) != NULL)
			;                        /* ACL: the caller's user may not */
		else if (s->ro && (rt->fl & (KV_CMD_WRITE | KV_CMD_MAY_REPLICATE)))
			why = "Write commands are not allowed from read-only scripts.";
		else if ((rt->fl & KV_CMD_WRITE) && !s->dirty && kv_noreplicas)
			why = "-" KV_NOREPLICAS;
		else if (!s->allow_oom && !s->dirty && s->oom && (rt->fl & KV_CMD_DENYOOM))
			why = "-OOM command not allowed when used memory > 'maxmemory'.";
	}
	if (why) {
		snprintf(c->err, sizeof(c->err), "%s", why);
		/* Counted as Redis counts a refused command: in errorstats,
		 * and as the command's rejected call. */
		char line[360];
		int n = snprintf(line, sizeof(line), "%s%s", why[0] == '-' ? "" : "-ERR ", why);
		struct resp_ctx xs = *x;        /* the script's client's error, not the caller's */
		xs.r = &s->r;
		count_error(&xs, line, (size_t)n);
		if (rt)
			rt->rejected++;
		return -1;
	}
	if (rt->fl & KV_CMD_WRITE)
		s->dirty = true;
	struct resp_ctx x2 = *x;
	s->r.proto = (uint8_t)c->proto;
	x2.r = &s->r;
	x2.sc = &s->kc;
	x2.ev = NULL;                   /* the arguments are Lua's strings */
	s->cap.b.len = 0;
	s->cap.oom = false;
	x2.capture = &s->cap;
	kv_repl_quiet = !(s->run.repl & 2);     /* redis.set_repl: to replicas or not */
	kv_run(&x2, s->kv, rt, av, argc);
	kv_repl_quiet = false;
	if (s->cap.oom) {
		snprintf(c->err, sizeof(c->err), "ERR out of memory");
		return -1;
	}
	c->reply = s->cap.b.p;
	c->rlen = s->cap.b.len;
	return 0;
}

void kv_script_log(void *arg, int level, const char *msg, size_t len)
{
	(void)arg;
	static const char *const names[] = { "debug", "verbose", "notice", "warning" };
	if (level >= 2)                 /* loglevel notice, Redis's default */
		fprintf(stderr, "pkvs: script %s: %.*s\n", names[level], (int)len, msg);
}

/* Copy the running command's arguments (they live in the connection's
 * read buffer, which the passes below reuse). */
static void keep_argv(struct kv_srun *s, const struct paste_resp_arg *a, uint32_t n)
{
	s->argv = calloc(n, sizeof(*s->argv));
	s->alens = calloc(n, sizeof(*s->alens));
	if (!s->argv || !s->alens) {
		free(s->argv);
		free(s->alens);
		s->argv = NULL;
		s->alens = NULL;
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		s->argv[i] = malloc(a[i].len + 1);
		if (s->argv[i])
			memcpy(s->argv[i], a[i].p, a[i].len);
		s->alens[i] = s->argv[i] ? a[i].len : 0;
	}
	s->argc = n;
}

static void drop_argv(struct kv_srun *s)
{
	for (uint32_t i = 0; s->argv && i < s->argc; i++)
		free(s->argv[i]);
	free(s->argv);
	free(s->alens);
	s->argv = NULL;
	s->alens = NULL;
	s->argc = 0;
}

static const struct paste_resp_arg *run_args;   /* the running command's, until busy */
static uint32_t run_argc;

static bool host_interrupt(void *arg)
{
	struct kv_srun *s = arg;
	struct resp_ctx *x = s->x;
	if (atomic_load_explicit(&x->w->srv->stop, memory_order_relaxed)) {
		s->shutdown = true;
		return true;
	}
	if (!s->busy) {
		if ((paste_clock_ns() - s->start_ns) / 1000000 < (uint64_t)s->threshold_ms)
			return false;
		s->busy = true;
		fprintf(stderr, "pkvs: slow script detected: still running after %" PRIu64 " ms; %s "
			"stops it while it has not written (script %s)\n",
			(paste_clock_ns() - s->start_ns) / 1000000, s->eval ? "SCRIPT KILL" : "FUNCTION KILL",
			s->run.name);
		keep_argv(s, run_args, run_argc);
	}
	/* Others' commands while this one runs: BUSY, or the allow_busy
	 * ones (SCRIPT KILL sets s->kill, SHUTDOWN the server's stop). */
	server_worker_nested_pass(x->w, x->conn);
	if (atomic_load_explicit(&x->w->srv->stop, memory_order_relaxed))
		s->shutdown = true;
	return s->kill || s->shutdown;
}

static const struct sl_host eval_host = {
	.call = host_call, .interrupt = host_interrupt, .log = kv_script_log,
};
static const struct sl_host eval_host_nohook = {
	.call = host_call, .log = kv_script_log,
};

struct kv_srun *kv_script_running(void)
{
	return st.running;
}

bool kv_script_client(const struct resp_ctx *x)
{
	return st.running && x->r == &st.running->r;
}

const char *kv_script_busy_line(void)
{
	struct kv_srun *s = st.running;
	return s && s->busy ? (s->eval ? KV_BUSY_EVAL : KV_BUSY_FN) : NULL;
}

bool kv_script_busy(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc)
{
	struct kv_srun *s = st.running;
	if (!s || !s->busy)
		return false;
	if (!(rt->fl & KV_CMD_ALLOW_BUSY)) {
		rt->rejected++;
		const char *why = kv_script_busy_line();
		if (!kv_multi_exec_abort(x, rt, why)) {     /* EXEC: EXECABORT ... BUSY ... */
			kv_multi_reject(x);
			resp_error(x, "%s", why);
		}
		return true;
	}
	if (!kv_multi_queue(x, rt, argv, argc))
		kv_run(x, s->kv, rt, argv, argc);
	return true;
}

/* ------------------------------------------------------------ running */

bool kv_script_may_write(const struct paste_resp_arg *a, uint32_t n)
{
	uint32_t flags;
	if (n < 2)
		return true;
	if (paste_resp_arg_eq(&a[0], "FCALL"))
		return kv_function_may_write(&a[1]);
	if (paste_resp_arg_eq(&a[0], "EVALSHA")) {
		struct script *s = script_find(a[1].p, a[1].len);
		if (!s)
			return true;
		flags = s->flags;
	} else {
		size_t skip;
		char err[128];
		if (sl_shebang(a[1].p, a[1].len, &flags, &skip, err, sizeof(err)))
			return true;
	}
	/* Declared flags say whether it writes; without, it may. */
	return (flags & SL_EVAL_COMPAT) || !(flags & SL_NO_WRITES);
}

bool kv_script_flags_ok(struct resp_ctx *x, uint32_t flags, bool ro)
{
	if (flags & SL_EVAL_COMPAT)
		return true;
	if (!(flags & SL_NO_WRITES)) {
		if (ro) {
			resp_error(x, "ERR Can not execute a script with write flag using *_ro command.");
			return false;
		}
		if (kv_noreplicas) {
			resp_error(x, "%s", KV_NOREPLICAS);
			return false;
		}
	}
	if (!(flags & (SL_ALLOW_OOM | SL_NO_WRITES)) && kv_over_maxmemory(x)) {
		resp_error(x, "OOM allow-oom flag is not set on the script, can not run it when used "
			   "memory > 'maxmemory'");
		return false;
	}
	return true;
}

bool kv_script_numkeys(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, bool fcall,
		       int64_t *nk)
{
	if (paste_resp_arg_i64(&a[2], nk)) {
		resp_error(x, fcall ? "ERR Bad number of keys provided"
				    : "ERR value is not an integer or out of range");
		return false;
	}
	if (*nk > (int64_t)n - 3) {
		resp_error(x, "ERR Number of keys can't be greater than number of args");
		return false;
	}
	if (*nk < 0) {
		resp_error(x, "ERR Number of keys can't be negative");
		return false;
	}
	return true;
}

void kv_script_run(struct resp_ctx *x, struct kv *kv, struct sl_engine *e, int ref, bool eval,
		   const char *name, uint32_t flags, bool ro, const struct paste_resp_arg *a,
		   uint32_t n, int64_t nk)
{
	uint32_t nargs = n - 3 - (uint32_t)nk;
	const char **v = malloc((n - 3 + 1) * sizeof(*v));
	size_t *l = malloc((n - 3 + 1) * sizeof(*l));
	if (!v || !l) {
		free(v);
		free(l);
		resp_error(x, "ERR out of memory");
		return;
	}
	for (uint32_t i = 3; i < n; i++) {
		v[i - 3] = a[i].p;
		l[i - 3] = a[i].len;
	}
	struct kv_srun *s = calloc(1, sizeof(*s));
	if (!s) {
		free(v);
		free(l);
		resp_error(x, "ERR out of memory");
		return;
	}
	/* busy-reply-threshold, or its older name lua-time-limit: the one
	 * set last (CONFIG forgets the other). */
	int64_t threshold = config_int("busy-reply-threshold", 5000);
	if (threshold == 5000)
		threshold = config_int("lua-time-limit", 5000);
	s->x = x;
	s->kv = kv;
	s->eval = eval;
	s->ro = ro || (!(flags & SL_EVAL_COMPAT) && (flags & SL_NO_WRITES));
	s->allow_oom = !(flags & SL_EVAL_COMPAT) && (flags & SL_ALLOW_OOM);
	s->oom = kv_over_maxmemory(x);
	s->threshold_ms = threshold;
	s->start_ns = paste_clock_ns();
	s->r = *x->r;
	s->r.reply_off = s->r.skip = s->r.skip_next = false;
	s->r.state = R_CMD;
	s->kc.db = kv_resp_db(x);
	s->run = (struct sl_run){ .host = threshold > 0 ? &eval_host : &eval_host_nohook, .arg = s,
				  .name = name, .caller_proto = x->r->proto, .proto = 2,
				  .repl = 3 };
	run_args = a;
	run_argc = n;
	st.running = s;
	struct sl_buf out = { 0 };
	bool err = false, counted = false;
	int r = kv_begin(kv);
	uint32_t mark = kv_repl_active ? kv_repl_mark() : 0;
	if (r) {
		kv_reply_errno(x, r);
	} else {
		sl_run(e, &s->run, ref, eval, (int)nk, v, l, (int)nargs, v + nk, l + nk, &out, &err,
		       &counted);
		if (s->shutdown) {
			kv_abort(kv);           /* stopped from outside: none of it */
			if (kv_repl_active)
				kv_repl_rewind(mark);
			sl_buf_free(&out);
			sl_buf_put(&out, "-ERR Script killed by a shutdown\r\n", 34);
			err = true;
			counted = false;
		} else if ((r = kv_commit(kv)) != 0) {
			sl_buf_free(&out);
			err = false;
			if (kv_repl_active)
				kv_repl_rewind(mark);
		}
		if (r)
			kv_reply_errno(x, r);
		else
			kv_script_send_reply(x, &out, err, counted);
	}
	st.running = NULL;
	run_args = NULL;
	sl_buf_free(&out);
	reasm_free(&s->cap.b);
	drop_argv(s);
	free(s);
	free(v);
	free(l);
}

static void eval_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n, bool sha, bool ro)
{
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	int64_t nk;
	if (!kv_script_numkeys(x, a, n, false, &nk))
		return;
	struct script *s;
	if (sha) {
		s = script_find(a[1].p, a[1].len);
		if (!s) {
			resp_error(x, "NOSCRIPT No matching script. Please use EVAL.");
			return;
		}
	} else if (!(s = script_create(x, a[1].p, a[1].len))) {
		return;
	}
	if (!kv_script_flags_ok(x, s->flags, ro))
		return;
	char name[41];
	memcpy(name, s->sha, 41);        /* a SCRIPT FLUSH cannot run meanwhile, but be plain */
	kv_script_run(x, kv, st.eval, s->ref, true, name, s->flags, ro, a, n, nk);
}

static void cmd_eval(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	eval_generic(x, kv, a, n, false, false);
}

static void cmd_evalsha(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	eval_generic(x, kv, a, n, true, false);
}

static void cmd_eval_ro(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	eval_generic(x, kv, a, n, false, true);
}

static void cmd_evalsha_ro(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	eval_generic(x, kv, a, n, true, true);
}

/* ------------------------------------------------------------ SCRIPT */

static void cmd_script_load(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)n;
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct script *s = script_create(x, a[2].p, a[2].len);
	if (s)
		resp_bulk(x, s->sha, 40);
}

static void cmd_script_exists(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv;
	resp_array(x, n - 2);
	for (uint32_t i = 2; i < n; i++)
		resp_int(x, script_find(a[i].p, a[i].len) != NULL);
}

static void cmd_script_flush(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)kv;
	if (n > 3 || (n == 3 && !paste_resp_arg_eq(&a[2], "sync") && !paste_resp_arg_eq(&a[2], "async"))) {
		resp_error(x, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
		return;
	}
	scripts_flush();
	resp_ok(x);
}

void kv_script_kill(struct resp_ctx *x, bool eval)
{
	struct kv_srun *s = st.running;
	if (!s) {
		resp_error(x, "NOTBUSY No scripts in execution right now.");
	} else if (s->dirty) {
		resp_error(x, "UNKILLABLE Sorry the script already executed write commands against the "
			   "dataset. You can either wait the script termination or kill the server in a "
			   "hard way using the SHUTDOWN NOSAVE command.");
	} else if (eval != s->eval) {
		resp_error(x, "%s", s->eval ? KV_BUSY_EVAL : KV_BUSY_FN);
	} else {
		s->kill = true;
		resp_ok(x);
	}
}

static void cmd_script_kill(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	kv_script_kill(x, true);
}

static void cmd_script_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"DEBUG (YES|SYNC|NO)",
		"    Set the debug mode for subsequent scripts executed.",
		"EXISTS <sha1> [<sha1> ...]",
		"    Return information about the existence of the scripts in the script cache.",
		"FLUSH [ASYNC|SYNC]",
		"    Flush the Lua scripts cache. Very dangerous on replicas.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the scripts cache.",
		"    * SYNC: Synchronously flush the scripts cache.",
		"KILL",
		"    Kill the currently executing Lua script.",
		"LOAD <script>",
		"    Load a script into the scripts cache without executing it.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* ------------------------------------------------------------ INFO */

void kv_script_info(struct kv *kv, struct kv_script_info *out)
{
	(void)kv;
	*out = (struct kv_script_info){
		.eval_bytes = sl_memory(st.eval),
		.scripts = st.nscripts, .script_bytes = st.script_bytes,
	};
	kv_function_info(out);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_script[] = {
	{ "eval", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale", "scripting", "Runs a Lua script: its writes and its reply are one unit.", cmd_eval, 0, 0, 0 },
	{ "evalsha", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale", "scripting", "Runs a cached Lua script by its SHA-1.", cmd_evalsha, 0, 0, 0 },
	{ "eval_ro", -3, "noscript skip_monitor no_mandatory_keys stale readonly", "scripting", "Runs a Lua script that may not write.", cmd_eval_ro, 0, 0, 0 },
	{ "evalsha_ro", -3, "noscript skip_monitor no_mandatory_keys stale readonly", "scripting", "Runs a cached Lua script that may not write, by its SHA-1.", cmd_evalsha_ro, 0, 0, 0 },
	{ "fcall", -3, "noscript skip_monitor may_replicate no_mandatory_keys stale", "scripting", "Runs a function of a loaded library.", cmd_fcall, 0, 0, 0 },
	{ "fcall_ro", -3, "noscript skip_monitor no_mandatory_keys stale readonly", "scripting", "Runs a function that may not write.", cmd_fcall_ro, 0, 0, 0 },
	{ "script", -2, "", "scripting", "Manages the script cache.", NULL, 0, 0, 0 },
	{ "script|load", 3, "noscript stale", "scripting", "Compiles a script into the cache and answers its SHA-1.", cmd_script_load, 0, 0, 0 },
	{ "script|exists", -3, "noscript", "scripting", "Answers, for each SHA-1, whether the cache holds its script.", cmd_script_exists, 0, 0, 0 },
	{ "script|flush", -2, "noscript", "scripting", "Empties the script cache.", cmd_script_flush, 0, 0, 0 },
	{ "script|kill", 2, "noscript allow_busy", "scripting", "Stops the running script if it has not written.", cmd_script_kill, 0, 0, 0 },
	{ "script|help", 2, "loading stale", "scripting", "Describes the SCRIPT subcommands.", cmd_script_help, 0, 0, 0 },
	{ "function", -2, "", "scripting", "Manages function libraries.", NULL, 0, 0, 0 },
	{ "function|load", -3, "noscript write denyoom", "scripting", "Loads a library of functions (kept across restarts).", cmd_function_load, 0, 0, 0 },
	{ "function|list", -2, "noscript", "scripting", "Lists the libraries and their functions.", cmd_function_list, 0, 0, 0 },
	{ "function|delete", 3, "noscript write", "scripting", "Deletes a library.", cmd_function_delete, 0, 0, 0 },
	{ "function|flush", -2, "noscript write", "scripting", "Deletes every library.", cmd_function_flush, 0, 0, 0 },
	{ "function|dump", 2, "noscript", "scripting", "Answers the libraries as one payload for FUNCTION RESTORE.", cmd_function_dump, 0, 0, 0 },
	{ "function|restore", -3, "noscript write denyoom", "scripting", "Loads the libraries of a FUNCTION DUMP payload.", cmd_function_restore, 0, 0, 0 },
	{ "function|stats", 2, "noscript allow_busy", "scripting", "Describes the running function and the libraries.", cmd_function_stats, 0, 0, 0 },
	{ "function|kill", 2, "noscript allow_busy", "scripting", "Stops the running function if it has not written.", cmd_function_kill, 0, 0, 0 },
	{ "function|help", 2, "loading stale", "scripting", "Describes the FUNCTION subcommands.", cmd_function_help, 0, 0, 0 },
	{ 0 }
};
