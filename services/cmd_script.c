/*
 * cmd_script.c - scripting (pkvs_resp.h): EVAL, EVALSHA, EVAL_RO,
 * EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL, FUNCTION LOAD/LIST/DELETE/
 * FLUSH/DUMP/RESTORE/STATS/KILL, FCALL, FCALL_RO, with Redis 7.0's
 * semantics over script_lua.c's Lua.
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
 * Functions persist: each library's code is an entry of pkvs's own
 * [0xFD]"fnlib:"<name> (kv_sys_put), read back at the first scripting
 * command after a start. Scripts (SCRIPT LOAD, EVAL) do not persist,
 * as in Redis.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pkvs_resp.h"
#include "script_lua.h"

/* ------------------------------------------------------------ state */

struct script {
	struct script *next;
	char sha[41];
	uint32_t flags;
	int ref;
	size_t len;                     /* the body's bytes (INFO) */
};

struct lib;
struct fn {
	char *name;
	char *desc;                     /* NULL: none */
	int ref;
	uint32_t flags;
	struct lib *lib;
};

struct lib {
	struct lib *next;
	char *name;
	char *code;                     /* the whole FUNCTION LOAD text */
	size_t clen;
	struct fn *fns;
	uint32_t nfns;
};

/* A script or function running now. */
struct srun {
	struct sl_run run;
	struct resp_ctx *x;
	struct kv *kv;
	bool eval;                      /* EVAL (SCRIPT KILL) or FCALL (FUNCTION KILL) */
	bool ro;                        /* no write may run */
	bool allow_oom, oom;            /* allow-oom flag; over maxmemory at the start */
	bool dirty;                     /* a write command ran: SCRIPT KILL refuses */
	bool busy;                      /* past busy-reply-threshold */
	bool kill;                      /* SCRIPT/FUNCTION KILL asked */
	bool shutdown;                  /* the server stops: the writes go */
	int64_t threshold_ms;
	uint64_t start_ns;
	/* The script's client: its RESP, database, and captured replies. */
	struct resp_conn r;
	struct kv_resp_conn kc;
	struct resp_out cap;
	/* The command that runs it, copied when it turns busy (FUNCTION
	 * STATS; the arguments' own bytes are gone by then). */
	char **argv;
	size_t *alens;
	uint32_t argc;
};

static struct {
	struct sl_engine *eval, *fn;
	struct script **sb;             /* scripts by SHA-1 */
	uint32_t nsb, nscripts;
	uint64_t script_bytes;
	struct lib *libs;
	uint32_t nlibs, nfns;
	bool loaded;                    /* the stored libraries were read */
	struct srun *running;
} st;

#define LIB_PREFIX "\xfd" "fnlib:"
#define LIB_PREFIX_LEN 7u
#define LIB_NAME_MAX 400u

static const char BUSY_EVAL[] = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
static const char BUSY_FN[] = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

static void load_stored(struct kv *kv);

/* A setting CONFIG keeps, as a number (dflt: unset or not one). */
static int64_t config_int(const char *name, int64_t dflt)
{
	const char *v = kv_config_kept(name);
	char *end;
	long long n = v ? strtoll(v, &end, 10) : 0;
	return v && *v && !*end ? n : dflt;
}

static int engines(struct kv *kv)
{
	if (!st.eval && !(st.eval = sl_open(SL_KIND_EVAL)))
		return -ENOMEM;
	if (!st.fn && !(st.fn = sl_open(SL_KIND_FUNCTION)))
		return -ENOMEM;
	if (!st.loaded) {
		st.loaded = true;
		load_stored(kv);
	}
	return 0;
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

/* The reply a run built: an error counted once (if the command the
 * script ran counted it, only the call is marked failed). */
static void send_reply(struct resp_ctx *x, const struct sl_buf *out, bool err, bool counted)
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
		send_reply(x, &b, true, false);
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

static int host_call(void *arg, struct sl_call *c)
{
	struct srun *s = arg;
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
	for (uint32_t i = 0; i < (ask ? 1 : argc); i++)
		av[i] = (struct paste_resp_arg){ c->argv[i], c->lens[i] };
	struct kv_cmd_rt *rt = call_lookup(c, av, ask ? 1 : argc);
	if (ask)
		return rt && (rt->c->fn || rt->nsubs) ? 0 : -1;
	const char *why = NULL;
	if (!rt || (!rt->c->fn && !rt->nsubs && !(rt->fl & KV_CMD_NOSCRIPT))) {
		why = "Unknown Redis command called from script";
	} else {
		int arity = rt->c->arity;
		if ((arity > 0 && argc != (uint32_t)arity) || (arity < 0 && argc < (uint32_t)-arity))
			why = "Wrong number of args calling Redis command from script";
		else if (rt->fl & KV_CMD_NOSCRIPT)
			why = "This Redis command is not allowed from script";
		else if (s->ro && (rt->fl & KV_CMD_WRITE))
			why = "Write commands are not allowed from read-only scripts.";
		else if ((rt->fl & KV_CMD_WRITE) && !s->dirty &&
			 config_int("min-replicas-to-write", 0) > 0 &&
			 config_int("min-replicas-max-lag", 10) > 0)
			why = "-NOREPLICAS Not enough good replicas to write.";
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
	kv_run(&x2, s->kv, rt, av, argc);
	if (s->cap.oom) {
		snprintf(c->err, sizeof(c->err), "ERR out of memory");
		return -1;
	}
	c->reply = s->cap.b.p;
	c->rlen = s->cap.b.len;
	return 0;
}

static void host_log(void *arg, int level, const char *msg, size_t len)
{
	(void)arg;
	static const char *const names[] = { "debug", "verbose", "notice", "warning" };
	if (level >= 2)                 /* loglevel notice, Redis's default */
		fprintf(stderr, "pkvs: script %s: %.*s\n", names[level], (int)len, msg);
}

/* Copy the running command's arguments (they live in the connection's
 * read buffer, which the passes below reuse). */
static void keep_argv(struct srun *s, const struct paste_resp_arg *a, uint32_t n)
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

static void drop_argv(struct srun *s)
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
	struct srun *s = arg;
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
	.call = host_call, .interrupt = host_interrupt, .log = host_log,
};
static const struct sl_host eval_host_nohook = {
	.call = host_call, .log = host_log,
};

bool kv_script_busy(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc)
{
	struct srun *s = st.running;
	if (!s || !s->busy)
		return false;
	if (!(rt->fl & KV_CMD_ALLOW_BUSY)) {
		rt->rejected++;
		kv_multi_reject(x);
		resp_error(x, "%s", s->eval ? BUSY_EVAL : BUSY_FN);
		return true;
	}
	if (!kv_multi_queue(x, rt, argv, argc))
		kv_run(x, s->kv, rt, argv, argc);
	return true;
}

/* ------------------------------------------------------------ running */

/* Redis's checks of a script's flags before it runs (scriptPrepareForRun):
 * false after replying. */
static bool flags_ok(struct resp_ctx *x, uint32_t flags, bool ro)
{
	if (flags & SL_EVAL_COMPAT)
		return true;
	if (!(flags & SL_NO_WRITES)) {
		if (ro) {
			resp_error(x, "ERR Can not execute a script with write flag using *_ro command.");
			return false;
		}
		if (config_int("min-replicas-to-write", 0) > 0 &&
		    config_int("min-replicas-max-lag", 10) > 0) {
			resp_error(x, "NOREPLICAS Not enough good replicas to write.");
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

/* numkeys of EVAL/FCALL: false after replying. */
static bool numkeys(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, bool fcall,
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

/* Run ref (a script's chunk or a function) for the command a[0..n). */
static void run(struct resp_ctx *x, struct kv *kv, struct sl_engine *e, int ref, bool eval,
		const char *name, uint32_t flags, bool ro, const struct paste_resp_arg *a, uint32_t n,
		int64_t nk)
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
	struct srun *s = calloc(1, sizeof(*s));
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
				  .name = name, .caller_proto = x->r->proto, .proto = 2 };
	run_args = a;
	run_argc = n;
	st.running = s;
	struct sl_buf out = { 0 };
	bool err = false, counted = false;
	int r = kv_begin(kv);
	if (r) {
		kv_reply_errno(x, r);
	} else {
		sl_run(e, &s->run, ref, eval, (int)nk, v, l, (int)nargs, v + nk, l + nk, &out, &err,
		       &counted);
		if (s->shutdown) {
			kv_abort(kv);           /* stopped from outside: none of it */
			sl_buf_free(&out);
			sl_buf_put(&out, "-ERR Script killed by a shutdown\r\n", 34);
			err = true;
			counted = false;
		} else if ((r = kv_commit(kv)) != 0) {
			sl_buf_free(&out);
			err = false;
		}
		if (r)
			kv_reply_errno(x, r);
		else
			send_reply(x, &out, err, counted);
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
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	int64_t nk;
	if (!numkeys(x, a, n, false, &nk))
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
	if (!flags_ok(x, s->flags, ro))
		return;
	char name[41];
	memcpy(name, s->sha, 41);        /* a SCRIPT FLUSH cannot run meanwhile, but be plain */
	run(x, kv, st.eval, s->ref, true, name, s->flags, ro, a, n, nk);
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
	if (engines(kv)) {
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

/* SCRIPT KILL, FUNCTION KILL. */
static void kill_running(struct resp_ctx *x, bool eval)
{
	struct srun *s = st.running;
	if (!s) {
		resp_error(x, "NOTBUSY No scripts in execution right now.");
	} else if (s->dirty) {
		resp_error(x, "UNKILLABLE Sorry the script already executed write commands against the "
			   "dataset. You can either wait the script termination or kill the server in a "
			   "hard way using the SHUTDOWN NOSAVE command.");
	} else if (eval != s->eval) {
		resp_error(x, "%s", s->eval ? BUSY_EVAL : BUSY_FN);
	} else {
		s->kill = true;
		resp_ok(x);
	}
}

static void cmd_script_kill(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	kill_running(x, true);
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

/* ------------------------------------------------------------ FUNCTION */

static bool name_ok(const char *p, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

static struct fn *fn_find(const char *p, size_t n, const struct lib *skip)
{
	for (struct lib *l = st.libs; l; l = l->next) {
		if (l == skip)
			continue;
		for (uint32_t i = 0; i < l->nfns; i++)
			if (strlen(l->fns[i].name) == n && !strncasecmp(l->fns[i].name, p, n))
				return &l->fns[i];
	}
	return NULL;
}

static struct lib *lib_find(const char *p, size_t n)
{
	for (struct lib *l = st.libs; l; l = l->next)
		if (strlen(l->name) == n && !strncasecmp(l->name, p, n))
			return l;
	return NULL;
}

static void lib_free(struct lib *l, bool unref)
{
	if (!l)
		return;
	for (uint32_t i = 0; i < l->nfns; i++) {
		if (unref && st.fn)
			sl_unref(st.fn, l->fns[i].ref);
		free(l->fns[i].name);
		free(l->fns[i].desc);
	}
	free(l->fns);
	free(l->name);
	free(l->code);
	free(l);
}

static void lib_unlink(struct lib *l)
{
	for (struct lib **pp = &st.libs; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			st.nlibs--;
			st.nfns -= l->nfns;
			return;
		}
}

static void lib_link(struct lib *l)
{
	struct lib **pp = &st.libs;
	while (*pp)
		pp = &(*pp)->next;
	l->next = NULL;
	*pp = l;
	st.nlibs++;
	st.nfns += l->nfns;
}

static int host_register(void *arg, const char *name, size_t nlen, int ref, uint32_t flags,
			 const char *desc, size_t dlen, char *err, size_t errcap)
{
	struct lib *l = arg;
	if (!name_ok(name, nlen)) {
		snprintf(err, errcap, "Library names can only contain letters, numbers, or underscores(_) "
			 "and must be at least one character long");
		return -1;
	}
	for (uint32_t i = 0; i < l->nfns; i++)
		if (strlen(l->fns[i].name) == nlen && !strncasecmp(l->fns[i].name, name, nlen)) {
			snprintf(err, errcap, "Function already exists in the library");
			return -1;
		}
	struct fn *f = realloc(l->fns, (l->nfns + 1) * sizeof(*f));
	if (!f) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	l->fns = f;
	f = &l->fns[l->nfns];
	*f = (struct fn){ .name = strndup(name, nlen), .desc = desc ? strndup(desc, dlen) : NULL,
			  .ref = ref, .flags = flags, .lib = l };
	if (!f->name || (desc && !f->desc)) {
		free(f->name);
		free(f->desc);
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	l->nfns++;
	return 0;
}

static const struct sl_host load_host = { .register_fn = host_register, .log = host_log };

static void lib_key(uint8_t *t, uint32_t *tlen, const char *name, size_t n)
{
	memcpy(t, LIB_PREFIX, LIB_PREFIX_LEN);
	memcpy(t + LIB_PREFIX_LEN, name, n);
	*tlen = LIB_PREFIX_LEN + (uint32_t)n;
}

/* Create a library from FUNCTION LOAD's code (Redis's
 * functionsCreateWithLibraryCtx): the new library, linked, with the one
 * it replaces in *old (unlinked, not freed); NULL with err. */
static struct lib *lib_create(const char *code, size_t len, bool replace, struct lib **old, char *err,
			      size_t errcap)
{
	*old = NULL;
	if (len < 2 || code[0] != '#' || code[1] != '!') {
		snprintf(err, errcap, "ERR Missing library metadata");
		return NULL;
	}
	const char *nl = memchr(code, '\n', len);
	if (!nl) {
		snprintf(err, errcap, "ERR Invalid library metadata");
		return NULL;
	}
	/* "#!<engine> name=<name>", words split (and quotes taken) as
	 * Redis's sdssplitargs does. */
	static char words[32][512];
	int nw = 0;
	size_t ll = (size_t)(nl - code);
	if (!sl_split_words(code, ll, words, 32, &nw) || !nw) {
		snprintf(err, errcap, "ERR Invalid library metadata");
		return NULL;
	}
	char *engine = words[0], *name = NULL;
	for (int wi = 1; wi < nw; wi++) {
		char *w = words[wi];
		if (!strncasecmp(w, "name=", 5)) {
			if (name) {
				snprintf(err, errcap, "ERR Invalid metadata value, name argument was given multiple times");
				return NULL;
			}
			name = w + 5;
			continue;
		}
		snprintf(err, errcap, "ERR Invalid metadata value given: %.450s", w);
		return NULL;
	}
	if (!name) {
		snprintf(err, errcap, "ERR Library name was not given");
		return NULL;
	}
	size_t nlen = strlen(name);
	if (!name_ok(name, nlen)) {
		snprintf(err, errcap, "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
		return NULL;
	}
	if (nlen > LIB_NAME_MAX) {
		snprintf(err, errcap, "ERR Library name is over %u bytes (pkvs's limit)", LIB_NAME_MAX);
		return NULL;
	}
	if (strcasecmp(engine + 2, "lua")) {
		snprintf(err, errcap, "ERR Engine '%.100s' not found", engine + 2);
		return NULL;
	}
	struct lib *prev = lib_find(name, nlen);
	if (prev && !replace) {
		snprintf(err, errcap, "ERR Library '%.450s' already exists", name);
		return NULL;
	}
	struct lib *l = calloc(1, sizeof(*l));
	if (!l || !(l->name = strndup(name, nlen)) || !(l->code = malloc(len ? len : 1))) {
		lib_free(l, false);
		snprintf(err, errcap, "ERR out of memory");
		return NULL;
	}
	memcpy(l->code, code, len);
	l->clen = len;
	char m[512];
	if (sl_load_library(st.fn, nl, len - ll, &load_host, l, m, sizeof(m))) {
		snprintf(err, errcap, "ERR %s", m);
		lib_free(l, true);
		return NULL;
	}
	if (!l->nfns) {
		snprintf(err, errcap, "ERR No functions registered");
		lib_free(l, true);
		return NULL;
	}
	for (uint32_t i = 0; i < l->nfns; i++)
		if (fn_find(l->fns[i].name, strlen(l->fns[i].name), prev)) {
			snprintf(err, errcap, "ERR Function %s already exists", l->fns[i].name);
			lib_free(l, true);
			return NULL;
		}
	if (prev)
		lib_unlink(prev);
	lib_link(l);
	*old = prev;
	return l;
}

/* At the first scripting command after a start: the stored libraries. */
static void load_stored(struct kv *kv)
{
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, LIB_PREFIX, LIB_PREFIX_LEN);
	const uint8_t *k;
	uint32_t klen, n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	while (paste_btree_cursor_next(&c, &k, &klen, ext, &n, &len) == 1) {
		if (klen < LIB_PREFIX_LEN || memcmp(k, LIB_PREFIX, LIB_PREFIX_LEN))
			break;
		char *code = malloc(len ? len : 1);
		if (!code)
			break;
		paste_store_read(kv->store, ext, n, 0, code, len);
		char err[600];
		struct lib *old;
		if (!lib_create(code, len, true, &old, err, sizeof(err)))
			fprintf(stderr, "pkvs: stored function library %.*s not loaded: %s\n",
				(int)(klen - LIB_PREFIX_LEN), (const char *)k + LIB_PREFIX_LEN, err);
		lib_free(old, true);
		free(code);
	}
}

/* FUNCTION FLUSH and RESTORE FLUSH: every library, stored ones too. */
static int libs_flush(struct kv *kv)
{
	int r = 0;
	for (struct lib *l = st.libs; l && !r; l = l->next) {
		uint8_t t[PASTE_BTREE_MAX_KEY];
		uint32_t tlen;
		lib_key(t, &tlen, l->name, strlen(l->name));
		r = kv_tree_del(kv, t, tlen);
		if (r == -ENOENT)
			r = 0;
	}
	if (r)
		return r;
	while (st.libs) {
		struct lib *l = st.libs;
		lib_unlink(l);
		lib_free(l, true);
	}
	return 0;
}

static int lib_store(struct kv *kv, const struct lib *l)
{
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	lib_key(t, &tlen, l->name, strlen(l->name));
	return kv_sys_put(kv, t, tlen, l->code, l->clen);
}

static void cmd_function_load(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	bool replace = false;
	uint32_t i = 2;
	for (; i < n - 1; i++) {
		if (paste_resp_arg_eq(&a[i], "replace")) {
			replace = true;
			continue;
		}
		resp_error(x, "ERR Unknown option given: %.*s", (int)(a[i].len < 128 ? a[i].len : 128), a[i].p);
		return;
	}
	if (i >= n) {
		resp_error(x, "ERR Function code is missing");
		return;
	}
	char err[600];
	struct lib *old;
	struct lib *l = lib_create(a[i].p, a[i].len, replace, &old, err, sizeof(err));
	if (!l) {
		struct sl_buf b = { 0 };
		sl_buf_put(&b, "-", 1);
		for (const char *p = err; *p; p++)
			sl_buf_put(&b, *p == '\r' || *p == '\n' ? " " : p, 1);
		sl_buf_put(&b, "\r\n", 2);
		send_reply(x, &b, true, false);
		sl_buf_free(&b);
		return;
	}
	int r = lib_store(kv, l);
	if (r) {                                 /* put back what was */
		lib_unlink(l);
		lib_free(l, true);
		if (old)
			lib_link(old);
		kv_reply_errno(x, r);
		return;
	}
	lib_free(old, true);
	resp_bulk(x, l->name, strlen(l->name));
}

static void reply_flags(struct resp_ctx *x, uint32_t flags)
{
	uint32_t k = 0;
	for (int i = 0; i < 5; i++)
		k += (flags >> i) & 1;
	resp_set(x, k);
	for (int i = 0; i < 5; i++)
		if (flags & (1u << i))
			resp_simple(x, sl_flag_names[i]);
}

static bool glob_nocase(const struct paste_resp_arg *pat, const char *s)
{
	char p[512], t[512];
	size_t pl = pat->len < sizeof(p) ? pat->len : sizeof(p), sl = strlen(s);
	sl = sl < sizeof(t) ? sl : sizeof(t);
	for (size_t i = 0; i < pl; i++)
		p[i] = (char)(pat->p[i] >= 'A' && pat->p[i] <= 'Z' ? pat->p[i] + 32 : pat->p[i]);
	for (size_t i = 0; i < sl; i++)
		t[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	return kv_glob(p, pl, (const uint8_t *)t, sl);
}

static void cmd_function_list(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	bool code = false;
	const struct paste_resp_arg *pat = NULL;
	for (uint32_t i = 2; i < n; i++) {
		if (!code && paste_resp_arg_eq(&a[i], "withcode")) {
			code = true;
			continue;
		}
		if (!pat && paste_resp_arg_eq(&a[i], "libraryname")) {
			if (i >= n - 1) {
				resp_error(x, "ERR library name argument was not given");
				return;
			}
			pat = &a[++i];
			continue;
		}
		resp_error(x, "ERR Unknown argument %.*s", (int)(a[i].len < 128 ? a[i].len : 128), a[i].p);
		return;
	}
	uint32_t k = 0;
	for (struct lib *l = st.libs; l; l = l->next)
		k += !pat || glob_nocase(pat, l->name);
	resp_array(x, k);
	for (struct lib *l = st.libs; l; l = l->next) {
		if (pat && !glob_nocase(pat, l->name))
			continue;
		resp_map(x, code ? 4 : 3);
		resp_bulk(x, "library_name", 12);
		resp_bulk(x, l->name, strlen(l->name));
		resp_bulk(x, "engine", 6);
		resp_bulk(x, "LUA", 3);
		resp_bulk(x, "functions", 9);
		resp_array(x, l->nfns);
		for (uint32_t i = 0; i < l->nfns; i++) {
			const struct fn *f = &l->fns[i];
			resp_map(x, 3);
			resp_bulk(x, "name", 4);
			resp_bulk(x, f->name, strlen(f->name));
			resp_bulk(x, "description", 11);
			if (f->desc)
				resp_bulk(x, f->desc, strlen(f->desc));
			else
				resp_null(x);
			resp_bulk(x, "flags", 5);
			reply_flags(x, f->flags);
		}
		if (code) {
			resp_bulk(x, "library_code", 12);
			const char *nl = memchr(l->code, '\n', l->clen);
			size_t at = nl ? (size_t)(nl - l->code) : 0;
			(void)at;
			resp_bulk(x, l->code, l->clen);
		}
	}
}

static void cmd_function_delete(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)n;
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct lib *l = lib_find(a[2].p, a[2].len);
	if (!l) {
		resp_error(x, "ERR Library not found");
		return;
	}
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	lib_key(t, &tlen, l->name, strlen(l->name));
	int r = kv_tree_del(kv, t, tlen);
	if (r && r != -ENOENT) {
		kv_reply_errno(x, r);
		return;
	}
	lib_unlink(l);
	lib_free(l, true);
	resp_ok(x);
}

/* Redis's answer to a subcommand given too many arguments. */
static void sub_syntax(struct resp_ctx *x, const struct paste_resp_arg *sub)
{
	resp_error(x, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try FUNCTION HELP.",
		   (int)(sub->len < 128 ? sub->len : 128), sub->p);
}

static void cmd_function_flush(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			       uint32_t n)
{
	if (n > 3) {
		sub_syntax(x, &a[1]);
		return;
	}
	if ( (n == 3 && !paste_resp_arg_eq(&a[2], "sync") && !paste_resp_arg_eq(&a[2], "async"))) {
		resp_error(x, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
		return;
	}
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	int r = kv_begin(kv);
	if (!r && !(r = libs_flush(kv)))
		r = kv_commit(kv);
	else if (!r)
		kv_abort(kv);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
}

static void cmd_function_kill(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv, (void)a, (void)n;
	kill_running(x, false);
}

static void cmd_function_stats(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			       uint32_t n)
{
	(void)a, (void)n;
	struct srun *s = st.running;
	if (s && s->eval) {
		resp_error(x, "%s", BUSY_EVAL);
		return;
	}
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	resp_map(x, 2);
	resp_bulk(x, "running_script", 14);
	if (!s) {
		resp_null(x);
	} else {
		resp_map(x, 3);
		resp_bulk(x, "name", 4);
		resp_bulk(x, s->run.name, strlen(s->run.name));
		resp_bulk(x, "command", 7);
		resp_array(x, s->argc);
		for (uint32_t i = 0; i < s->argc; i++)
			resp_bulk(x, s->argv[i], s->alens[i]);
		resp_bulk(x, "duration_ms", 11);
		resp_int(x, (int64_t)((paste_clock_ns() - s->start_ns) / 1000000));
	}
	resp_bulk(x, "engines", 7);
	resp_map(x, 1);
	resp_bulk(x, "LUA", 3);
	resp_map(x, 2);
	resp_bulk(x, "libraries_count", 15);
	resp_int(x, st.nlibs);
	resp_bulk(x, "functions_count", 15);
	resp_int(x, st.nfns);
}

/* FUNCTION DUMP's payload: per library 0xF5, its code's length (Redis's
 * RDB length encoding) and code; then 2 bytes of version (10) and 8 of
 * checksum (CRC-32C, zero-extended). Redis's own payload has the same
 * framing with a CRC-64 and may compress code: the two do not read each
 * other's (docs/compat.md). */
#define DUMP_OPCODE 0xf5u
#define DUMP_VERSION 10u

static void put_len(struct sl_buf *b, uint64_t len)
{
	uint8_t h[9];
	if (len < 64) {
		h[0] = (uint8_t)len;
		sl_buf_put(b, h, 1);
	} else if (len < 16384) {
		h[0] = (uint8_t)(0x40 | (len >> 8));
		h[1] = (uint8_t)len;
		sl_buf_put(b, h, 2);
	} else if (len <= UINT32_MAX) {
		h[0] = 0x80;
		for (int i = 0; i < 4; i++)
			h[1 + i] = (uint8_t)(len >> (24 - 8 * i));
		sl_buf_put(b, h, 5);
	} else {
		h[0] = 0x81;
		for (int i = 0; i < 8; i++)
			h[1 + i] = (uint8_t)(len >> (56 - 8 * i));
		sl_buf_put(b, h, 9);
	}
}

static bool get_len(const uint8_t **p, const uint8_t *end, uint64_t *len)
{
	if (*p >= end)
		return false;
	uint8_t t = **p;
	if ((t >> 6) == 0) {
		*len = t & 63;
		*p += 1;
	} else if ((t >> 6) == 1) {
		if (end - *p < 2)
			return false;
		*len = (uint64_t)(t & 63) << 8 | (*p)[1];
		*p += 2;
	} else if (t == 0x80 || t == 0x81) {
		int k = t == 0x80 ? 4 : 8;
		if (end - *p < 1 + k)
			return false;
		*len = 0;
		for (int i = 0; i < k; i++)
			*len = *len << 8 | (*p)[1 + i];
		*p += 1 + k;
	} else {
		return false;
	}
	return true;
}

static void cmd_function_dump(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)a, (void)n;
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct sl_buf b = { 0 };
	for (struct lib *l = st.libs; l; l = l->next) {
		uint8_t op = DUMP_OPCODE;
		sl_buf_put(&b, &op, 1);
		put_len(&b, l->clen);
		sl_buf_put(&b, l->code, l->clen);
	}
	uint8_t tail[10] = { DUMP_VERSION, 0 };
	uint32_t crc = paste_crc32c(0, b.p ? b.p : "", b.len);
	crc = paste_crc32c(crc, tail, 2);
	for (int i = 0; i < 4; i++)
		tail[2 + i] = (uint8_t)(crc >> (8 * i));
	sl_buf_put(&b, tail, sizeof(tail));
	if (b.oom)
		resp_error(x, "ERR out of memory");
	else
		resp_bulk(x, b.p, b.len);
	sl_buf_free(&b);
}

static void cmd_function_restore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				 uint32_t n)
{
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	if (n > 4) {
		sub_syntax(x, &a[1]);
		return;
	}
	enum { APPEND, REPLACE, FLUSH } policy = APPEND;
	if (n == 4) {
		if (paste_resp_arg_eq(&a[3], "append"))
			policy = APPEND;
		else if (paste_resp_arg_eq(&a[3], "replace"))
			policy = REPLACE;
		else if (paste_resp_arg_eq(&a[3], "flush"))
			policy = FLUSH;
		else {
			resp_error(x, "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.");
			return;
		}
	}
	const uint8_t *p = (const uint8_t *)a[2].p, *end = p + a[2].len;
	if (a[2].len < 10 || p[a[2].len - 10] != DUMP_VERSION || p[a[2].len - 9] != 0) {
		resp_error(x, "ERR DUMP payload version or checksum are wrong");
		return;
	}
	uint32_t crc = paste_crc32c(0, p, a[2].len - 8), got = 0;
	for (int i = 0; i < 4; i++)
		got |= (uint32_t)p[a[2].len - 8 + i] << (8 * i);
	if (crc != got || p[a[2].len - 4] || p[a[2].len - 3] || p[a[2].len - 2] || p[a[2].len - 1]) {
		resp_error(x, "ERR DUMP payload version or checksum are wrong");
		return;
	}
	end -= 10;
	/* The libraries in the payload, each checked alone first (a library
	 * of it that fails to load leaves everything as it was). */
	struct { const char *code; size_t len; } items[1024];
	uint32_t k = 0;
	while (p < end) {
		uint64_t len;
		if (*p++ != DUMP_OPCODE) {
			resp_error(x, "ERR given type is not a function");
			return;
		}
		if (!get_len(&p, end, &len) || len > (uint64_t)(end - p) || k == 1024) {
			resp_error(x, "ERR failed loading the given functions payload");
			return;
		}
		items[k].code = (const char *)p;
		items[k++].len = (size_t)len;
		p += len;
	}
	/* Set the current libraries aside, build the new set, and keep it
	 * or put the old one back. */
	struct lib *saved = st.libs;
	uint32_t snl = st.nlibs, snf = st.nfns;
	struct lib *keep = NULL;            /* FLUSH: none of the old */
	if (policy != FLUSH) {
		keep = saved;
	} else {
		st.libs = NULL;
		st.nlibs = st.nfns = 0;
	}
	struct lib *added[1024], *replaced[1024];
	uint32_t nadded = 0, nrepl = 0;
	char err[600] = "";
	for (uint32_t i = 0; i < k; i++) {
		struct lib *old;
		struct lib *l = lib_create(items[i].code, items[i].len, policy == REPLACE, &old, err, sizeof(err));
		if (!l) {
			if (policy == APPEND && !strncmp(err, "ERR Library '", 13)) {
				/* Redis's words for a collision at restore */
				char name[512];
				const char *q = err + 13, *e = strchr(q, '\'');
				snprintf(name, sizeof(name), "%.*s", e ? (int)(e - q) : 0, q);
				snprintf(err, sizeof(err), "ERR Library %s already exists", name);
			}
			break;
		}
		added[nadded++] = l;
		if (old)
			replaced[nrepl++] = old;
	}
	int r = 0;
	if (!err[0]) {
		r = kv_begin(kv);
		if (!r && policy == FLUSH) {
			for (struct lib *l = saved; l && !r; l = l->next) {
				uint8_t t[PASTE_BTREE_MAX_KEY];
				uint32_t tlen;
				lib_key(t, &tlen, l->name, strlen(l->name));
				r = kv_tree_del(kv, t, tlen);
				if (r == -ENOENT)
					r = 0;
			}
		}
		for (uint32_t i = 0; i < nadded && !r; i++)
			r = lib_store(kv, added[i]);
		if (!r)
			r = kv_commit(kv);
		else if (kv->group_depth)
			kv_abort(kv);
	}
	if (err[0] || r) {
		for (uint32_t i = nadded; i-- > 0;) {
			lib_unlink(added[i]);
			lib_free(added[i], true);
		}
		for (uint32_t i = 0; i < nrepl; i++)
			lib_link(replaced[i]);
		if (policy == FLUSH) {
			st.libs = saved;
			st.nlibs = snl;
			st.nfns = snf;
		}
		if (r)
			kv_reply_errno(x, r);
		else
			resp_error(x, "%s", err);
		return;
	}
	for (uint32_t i = 0; i < nrepl; i++)
		lib_free(replaced[i], true);
	if (policy == FLUSH)
		while (saved) {
			struct lib *l = saved;
			saved = l->next;
			lib_free(l, true);
		}
	(void)keep;
	resp_ok(x);
}

static void cmd_function_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"LOAD [REPLACE] <FUNCTION CODE>",
		"    Create a new library with the given library name and code.",
		"DELETE <LIBRARY NAME>",
		"    Delete the given library.",
		"LIST [LIBRARYNAME PATTERN] [WITHCODE]",
		"    Return general information on all the libraries:",
		"    * Library name",
		"    * The engine used to run the Library",
		"    * Library description",
		"    * Functions list",
		"    * Library code (if WITHCODE is given)",
		"    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
		"STATS",
		"    Return information about the current function running:",
		"    * Function name",
		"    * Command used to run the function",
		"    * Duration in MS that the function is running",
		"    If no function is running, return nil",
		"    In addition, returns a list of available engines.",
		"KILL",
		"    Kill the current running function.",
		"FLUSH [ASYNC|SYNC]",
		"    Delete all the libraries.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the libraries.",
		"    * SYNC: Synchronously flush the libraries.",
		"DUMP",
		"    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
		"RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
		"    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
		"    control how to handle existing libraries (default APPEND):",
		"    * FLUSH: delete all existing libraries.",
		"    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
		"    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
		"      libraries with the new libraries (notice that even on this option there is a chance of failure",
		"      in case of functions name collision with another library).",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

static void fcall_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n, bool ro)
{
	if (engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct fn *f = fn_find(a[1].p, a[1].len, NULL);
	if (!f) {
		resp_error(x, "ERR Function not found");
		return;
	}
	int64_t nk;
	if (!numkeys(x, a, n, true, &nk))
		return;
	if (!flags_ok(x, f->flags, ro))
		return;
	run(x, kv, st.fn, f->ref, false, f->name, f->flags, ro, a, n, nk);
}

static void cmd_fcall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	fcall_generic(x, kv, a, n, false);
}

static void cmd_fcall_ro(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	fcall_generic(x, kv, a, n, true);
}

/* ------------------------------------------------------------ INFO */

void kv_script_info(struct kv *kv, struct kv_script_info *out)
{
	(void)kv;
	*out = (struct kv_script_info){
		.eval_bytes = sl_memory(st.eval), .fn_bytes = sl_memory(st.fn),
		.scripts = st.nscripts, .script_bytes = st.script_bytes,
		.functions = st.nfns, .libraries = st.nlibs,
	};
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
