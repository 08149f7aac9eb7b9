/*
 * resp.c - the Redis protocol: framing (lib/resp_parse.c), replies, HELLO, QUIT,
 * protocol errors, the failed store, and dispatch to a command set
 * (resp.h).
 *
 * Per command on the hot path: one parse where the bytes landed (no copy
 * unless the command is split across reads), one indirect call, one
 * atomic load (has the store failed?), and the replies' memcpy into the
 * connection's output buffer. Pipelined commands in one read are handled
 * in a loop. Nothing is allocated per command; a connection that splits
 * a command gets a reassembly buffer, kept for its next one (up to
 * BUF_KEEP: a bigger one is freed once its command ran).
 *
 * Unfinished commands are bounded in DRAM twice: one by the parser's
 * max_command (the parser refuses more), all of them together by
 * max_pending (gather: the command whose growth passes it is refused and
 * its connection closed). Values that stream into store buffers are the
 * store's space, bounded by the store.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

#define ARGV_CAP 65536u
/* A reassembly buffer bigger than this is freed once its command ran: the
 * next split command pays an allocation, but a connection does not keep
 * the memory of its biggest command for its lifetime. */
#define BUF_KEEP (16u << 10)

struct resp_proto_state {
	struct service_run run;          /* first: service_banner, service_pass */
	const struct resp_config *cfg;
	const struct resp_service *svc;  /* run.svc is &svc->base */
	struct paste_resp_arg *argv;   /* per process: one thread parses at a time per worker */
	uint32_t argv_cap;             /* ARGV_CAP, grown for a command of more arguments */
	char *scratch;                 /* inline arguments with quotes */
	uint32_t scratch_cap;
	uint32_t nworkers;
	/* Unfinished commands: the bytes their buffers hold (one thread
	 * runs the protocol: resp_open), and those refused as too big. */
	uint64_t pending, too_big;
	uint64_t next_id;              /* CLIENT ID */
	/* INFO errorstats: codes in byte order, and every error reply. */
	struct resp_errstat errs[RESP_ERRSTATS];
	uint32_t nerrs;
	uint64_t errors;
	/* Connections unblocked with commands kept (resp_unblock): they run
	 * at the end of the pass. */
	struct resume { uint32_t conn; uint64_t id; } *resume;
	uint32_t nresume, capresume;
};

/* Redis's bounds on a command before authentication. */
#define UNAUTH_MAX_ARGS 10u
#define UNAUTH_MAX_BULK 16384u

/* ------------------------------------------------------------------ replies */

static void set_dead(struct resp_ctx *x)
{
	x->r->state = R_DEAD;
	x->c->timer = SRV_T_NONE;
}

void resp_close(struct resp_ctx *x)
{
	set_dead(x);
	paste_port_close_conn(x->w->port, x->conn);
}

static void buf_drop(struct resp_proto_state *ps, struct resp_conn *r);

void resp_drop(struct resp_ctx *x)
{
	set_dead(x);
	paste_port_drop_conn(x->w->port, x->conn);
	/* Its unfinished request goes too: dropping a client frees its
	 * memory now (client eviction counts on it). */
	if (x->r->buf.cap)
		buf_drop(srv_proto_state(x->w, x->c), x->r);
}

/* The store failed: say so once and close (the client must not send more). */
void resp_reply_failed(struct resp_ctx *x)
{
	char line[320];
	server_store_failed(x->w);
	int n = snprintf(line, sizeof(line), "-ERR store failed: %s\r\n",
			 x->w->fail_why ? x->w->fail_why : "I/O error");
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	for (int i = 0; i < n - 2; i++)       /* one line, whatever the sentence holds */
		if (line[i] == '\r' || line[i] == '\n')
			line[i] = ' ';
	paste_port_send(x->w->port, x->conn, line, (size_t)n, 0);
	resp_close(x);
}

int resp_send(struct resp_ctx *x, const void *p, size_t n)
{
	if (x->r->state == R_DEAD)
		return -EIO;
	if (x->r->reply_off || x->r->skip)
		return 0;                        /* CLIENT REPLY OFF / SKIP */
	if (x->capture) {
		resp_out_put(x->capture, p, n);
		return 0;
	}
	int r = paste_port_send(x->w->port, x->conn, p, n, PASTE_SEND_DURABLE);
	if (r == -EIO) {
		resp_reply_failed(x);
		return r;
	}
	return 0;
}

int resp_push_send(struct resp_ctx *x, const void *p, size_t n, bool durable)
{
	if (x->r->state == R_DEAD)
		return -EIO;
	if (x->capture) {
		resp_out_put(x->capture, p, n);
		return 0;
	}
	int r = paste_port_send(x->w->port, x->conn, p, n, durable ? PASTE_SEND_DURABLE : 0);
	if (r == -EIO) {
		resp_reply_failed(x);
		return r;
	}
	return r ? -EIO : 0;
}

bool resp_pubsub_refused(struct resp_ctx *x, const char *name)
{
	static const char *const allowed[] = { "ping", "subscribe", "ssubscribe", "unsubscribe",
					       "sunsubscribe", "psubscribe", "punsubscribe", "quit",
					       "reset" };
	if (!x->r->pubsub || x->r->proto == 3)
		return false;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!strcmp(name, allowed[i]))
			return false;
	resp_error(x, "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
		   "QUIT / RESET are allowed in this context", name);
	return true;
}

/* Writer -> send, for the fixed-size replies (a 64-byte line suffices). */
#define SEND_WITH(call)                                            \
	do {                                                       \
		char b_[64];                                       \
		int n_ = (call);                                   \
		return n_ < 0 ? n_ : resp_send(x, b_, (size_t)n_); \
	} while (0)

int resp_ok(struct resp_ctx *x) { return resp_send(x, "+OK\r\n", 5); }
int resp_int(struct resp_ctx *x, int64_t v) { SEND_WITH(paste_resp_put_int(b_, sizeof(b_), v)); }
int resp_null(struct resp_ctx *x) { SEND_WITH(paste_resp_put_null(b_, sizeof(b_), x->r->proto)); }
int resp_array(struct resp_ctx *x, uint64_t n) { SEND_WITH(paste_resp_put_array(b_, sizeof(b_), n)); }
int resp_map(struct resp_ctx *x, uint64_t n) { SEND_WITH(paste_resp_put_map(b_, sizeof(b_), x->r->proto, n)); }
int resp_set(struct resp_ctx *x, uint64_t n) { SEND_WITH(paste_resp_put_set(b_, sizeof(b_), x->r->proto, n)); }
int resp_bool(struct resp_ctx *x, bool v) { SEND_WITH(paste_resp_put_bool(b_, sizeof(b_), x->r->proto, v)); }
int resp_bulk_head(struct resp_ctx *x, uint64_t n) { SEND_WITH(paste_resp_put_bulk_head(b_, sizeof(b_), n)); }
int resp_bulk_end(struct resp_ctx *x) { return resp_send(x, "\r\n", 2); }

int resp_simple(struct resp_ctx *x, const char *s)
{
	char b[512];
	int n = paste_resp_put_simple(b, sizeof(b), s);
	return n < 0 ? n : resp_send(x, b, (size_t)n);
}

int resp_bulk(struct resp_ctx *x, const void *p, size_t n)
{
	int r = resp_bulk_head(x, n);
	if (r == 0 && n)
		r = resp_send(x, p, n);
	return r ? r : resp_bulk_end(x);
}

/* Count an error reply under its code: the word before the first space
 * within 32 bytes, else "ERR" (as Redis counts). */
static void count_error(struct resp_ctx *x, const char *msg)
{
	struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
	x->r->errors++;
	ps->errors++;
	size_t n = strcspn(msg, " ");
	if (n >= 32 || !msg[n] || !n) {
		msg = "ERR";
		n = 3;
	}
	uint32_t lo = 0, hi = ps->nerrs;
	while (lo < hi) {                    /* the first code >= msg[0..n) */
		uint32_t mid = (lo + hi) / 2;
		const char *c = ps->errs[mid].code;
		size_t cl = strlen(c);
		int d = memcmp(c, msg, cl < n ? cl : n);
		if (d < 0 || (d == 0 && cl < n))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < ps->nerrs && strlen(ps->errs[lo].code) == n && !memcmp(ps->errs[lo].code, msg, n)) {
		ps->errs[lo].count++;
		return;
	}
	if (ps->nerrs == RESP_ERRSTATS)
		return;
	memmove(&ps->errs[lo + 1], &ps->errs[lo], (ps->nerrs - lo) * sizeof(ps->errs[0]));
	ps->nerrs++;
	memcpy(ps->errs[lo].code, msg, n);
	ps->errs[lo].code[n] = 0;
	ps->errs[lo].count = 1;
}

int resp_error(struct resp_ctx *x, const char *fmt, ...)
{
	char msg[448], b[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	count_error(x, msg);
	int n = paste_resp_put_error(b, sizeof(b), msg);
	return n < 0 ? n : resp_send(x, b, (size_t)n);
}

const struct resp_errstat *resp_errstats(const struct resp_ctx *x, uint32_t *n, uint64_t *total)
{
	const struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
	*n = ps->nerrs;
	*total = ps->errors;
	return ps->errs;
}

void resp_errstats_reset(const struct resp_ctx *x)
{
	struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
	ps->nerrs = 0;
	ps->errors = 0;
}

struct srv_auth *resp_auth(const struct resp_ctx *x)
{
	const struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
	return ps->cfg->auth;
}

/* The parser's limits for a connection as authenticated or not (between
 * commands: the parser holds no command then). */
static void parser_limits(struct resp_conn *r, const struct resp_proto_state *ps, bool authed)
{
	struct paste_resp_config pc = ps->cfg->parser;
	if (!authed) {
		pc.max_args = UNAUTH_MAX_ARGS;
		pc.max_bulk = UNAUTH_MAX_BULK;
	}
	paste_resp_parser_init(&r->ps, &pc);
}

void resp_set_authed(struct resp_ctx *x, bool authed)
{
	if (x->r->authed != authed)
		parser_limits(x->r, srv_proto_state(x->w, x->c), authed);
	x->r->authed = authed;
}

void resp_out_put(struct resp_out *o, const void *p, size_t n)
{
	if (!o->oom && reasm_append(&o->b, p, n))
		o->oom = true;
}

void resp_out_bulk(struct resp_out *o, const void *p, size_t n)
{
	char h[32];
	int k = paste_resp_put_bulk_head(h, sizeof(h), n);
	resp_out_put(o, h, (size_t)k);
	resp_out_put(o, p, n);
	resp_out_put(o, "\r\n", 2);
}

int resp_out_send(struct resp_ctx *x, const char *head, int hlen, struct resp_out *o)
{
	int r;
	if (o->oom)
		r = resp_error(x, "ERR out of memory");
	else if ((r = resp_send(x, head, (size_t)hlen)) == 0 && o->b.len)
		r = resp_send(x, o->b.p, o->b.len);
	reasm_free(&o->b);
	return r;
}

int resp_out_send_text(struct resp_ctx *x, struct resp_out *o)
{
	char head[48];
	int hl = x->r->proto == 3 ? snprintf(head, sizeof(head), "=%zu\r\ntxt:", (size_t)o->b.len + 4)
				  : paste_resp_put_bulk_head(head, sizeof(head), o->b.len);
	resp_out_put(o, "\r\n", 2);
	return resp_out_send(x, head, hl, o);
}

/* An argument in an error message: printable, at most 128 bytes. */
static void arg_text(const struct paste_resp_arg *a, char *out, size_t cap)
{
	size_t n = a->p ? a->len : 0, k = 0;
	for (size_t i = 0; i < n && k + 1 < cap && i < 128; i++) {
		char c = a->p[i];
		out[k++] = c >= 0x20 && c < 0x7f ? c : '?';
	}
	out[k] = 0;
}

int resp_arity_error(struct resp_ctx *x, const struct paste_resp_arg *cmd)
{
	char name[132];
	arg_text(cmd, name, sizeof(name));
	for (char *p = name; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	return resp_error(x, "ERR wrong number of arguments for '%s' command", name);
}

/* ------------------------------------------------------ the protocol's own */

/* AUTH's login, for HELLO AUTH here and the service's AUTH. */
bool resp_login(struct resp_ctx *x, const struct paste_resp_arg *user,
		const struct paste_resp_arg *pass)
{
	void *u;
	if (!srv_auth_login(resp_auth(x), x, user->p, user->len, pass->p, pass->len, &u))
		return false;
	x->r->user = u;
	resp_set_authed(x, true);
	return true;
}

/* A client name: printable, no spaces (CLIENT SETNAME, HELLO SETNAME);
 * false after replying Redis's error. */
bool resp_set_name(struct resp_ctx *x, const struct paste_resp_arg *a)
{
	for (size_t i = 0; i < a->len; i++)
		if (a->p[i] <= ' ' || a->p[i] > '~') {
			resp_error(x, "ERR Client names cannot contain spaces, newlines or special characters.");
			return false;
		}
	char *name = a->len ? strndup(a->p, a->len) : NULL;
	if (a->len && !name) {
		resp_error(x, "ERR out of memory");
		return false;
	}
	free(x->r->name);
	x->r->name = name;
	return true;
}

/* HELLO [protover [AUTH u p] [SETNAME name]]: the server's map, in the
 * protocol asked for. redis-py 8 refuses a server whose HELLO 3 reply is
 * not a map with proto 3. */
static void hello(struct resp_ctx *x, const struct resp_proto_state *ps,
		  const struct paste_resp_arg *argv, uint32_t argc)
{
	uint8_t proto = x->r->proto ? x->r->proto : 2;
	uint32_t i = 1;
	if (argc > 1) {
		int64_t v;
		if (paste_resp_arg_i64(&argv[1], &v)) {
			resp_error(x, "ERR Protocol version is not an integer or out of range");
			return;
		}
		if (v != 2 && v != 3) {
			resp_error(x, "NOPROTO unsupported protocol version");
			return;
		}
		proto = (uint8_t)v;
		i = 2;
	}
	for (; i < argc; i++) {
		if (paste_resp_arg_eq(&argv[i], "SETNAME") && i + 1 < argc) {
			if (!resp_set_name(x, &argv[i + 1]))
				return;
			i++;
		} else if (paste_resp_arg_eq(&argv[i], "AUTH") && i + 2 < argc) {
			if (!resp_login(x, &argv[i + 1], &argv[i + 2])) {
				resp_error(x, "WRONGPASS invalid username-password pair or user is disabled.");
				return;
			}
			i += 2;
		} else {
			char a[132];
			arg_text(&argv[i], a, sizeof(a));
			resp_error(x, "ERR Syntax error in HELLO option '%s'", a);
			return;
		}
	}
	if (!x->r->authed) {
		resp_error(x, "NOAUTH HELLO must be called with the client already authenticated, "
			   "otherwise the HELLO AUTH <user> <pass> option can be used to authenticate "
			   "the client and select the RESP protocol version at the same time");
		return;
	}
	x->r->proto = proto;
	const char *name = ps->cfg->server_name ? ps->cfg->server_name : "paste";
	const char *version = ps->cfg->version ? ps->cfg->version : "0";
	resp_map(x, 7);
	resp_bulk(x, "server", 6);
	resp_bulk(x, name, strlen(name));
	resp_bulk(x, "version", 7);
	resp_bulk(x, version, strlen(version));
	resp_bulk(x, "proto", 5);
	resp_int(x, proto);
	resp_bulk(x, "id", 2);
	resp_int(x, (int64_t)x->r->id);
	resp_bulk(x, "mode", 4);
	resp_bulk(x, "standalone", 10);
	resp_bulk(x, "role", 4);
	resp_bulk(x, "master", 6);
	resp_bulk(x, "modules", 7);
	resp_array(x, 0);
}

/* A command (run, or streamed and ended) is over: CLIENT REPLY SKIP drops
 * the replies of the command after it, and only that one's. */
static void command_done(struct resp_conn *r)
{
	r->skip = r->skip_next;
	r->skip_next = false;
}

static bool gather(struct resp_ctx *x, struct resp_proto_state *ps, const void *p, size_t n);

static void run_command(struct resp_ctx *x, const struct resp_proto_state *ps,
			const struct paste_resp_arg *argv, uint32_t argc)
{
	srv_bump(&x->w->requests);
	if (argv[0].len == 4 && paste_resp_arg_eq(&argv[0], "QUIT")) {
		resp_ok(x);
		resp_close(x);
		if (ps->svc->own)
			ps->svc->own(x, argv, argc);
	} else if (argv[0].len == 5 && paste_resp_arg_eq(&argv[0], "HELLO")) {
		if (!resp_pubsub_refused(x, "hello")) {
			hello(x, ps, argv, argc);
			if (ps->svc->own)
				ps->svc->own(x, argv, argc);
		}
	} else if (server_store_failed(x->w)) {
		resp_reply_failed(x);
	} else {
		ps->svc->command(x, argv, argc);
	}
	if (!x->r->postponed)
		command_done(x->r);      /* (CLIENT REPLY SKIP still applies when it runs) */
}

/* After run_command: a postponed command's bytes go back in front of the
 * connection's kept ones, where resp_data's blocked path appends the
 * rest. at: the bytes where they landed (zero copy), or NULL when the
 * command was gathered into buf, whose first n bytes it still is. */
static bool keep_postponed(struct resp_ctx *x, struct resp_proto_state *ps, const char *at,
			   uint32_t n)
{
	struct resp_conn *r = x->r;
	r->postponed = false;
	if (!at) {
		r->buf.len = n;
		return true;
	}
	return gather(x, ps, at, n);
}

/* ------------------------------------------------- unfinished commands */

static void buf_drop(struct resp_proto_state *ps, struct resp_conn *r)
{
	ps->pending -= r->buf.cap;
	reasm_free(&r->buf);
}

/* Append n bytes to the connection's unfinished command. Its buffer's
 * growth counts against max_pending; past it (or out of memory) the
 * command is refused, the buffer freed and the connection closed: false.
 * The bound is checked after the growth, so what all connections hold
 * passes it by at most one buffer's doubling, for an instant. */
static bool gather(struct resp_ctx *x, struct resp_proto_state *ps, const void *p, size_t n)
{
	struct resp_conn *r = x->r;
	uint32_t before = r->buf.cap;
	int e = reasm_append(&r->buf, p, n);
	ps->pending += r->buf.cap - before;
	uint64_t limit = ps->cfg->max_pending;
	if (!e && (!limit || ps->pending <= limit))
		return true;
	if (e) {
		resp_error(x, "ERR out of memory");
	} else {
		ps->too_big++;
		resp_error(x, "ERR Protocol error: too big request: unfinished commands of all "
			   "clients hold over %" PRIu64 " bytes", limit);
	}
	buf_drop(ps, r);
	resp_close(x);
	return false;
}

void resp_pending_info(const struct resp_ctx *x, struct resp_pending *out)
{
	const struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
	*out = (struct resp_pending){ .bytes = ps->pending, .limit = ps->cfg->max_pending,
				      .refused = ps->too_big,
				      .max_request = x->r->ps.cfg.max_command };
}

static void proto_error(struct resp_ctx *x, int code)
{
	char b[128];
	if (code == PASTE_RESP_E_TOO_BIG || code == PASTE_RESP_E_INLINE_TOO_BIG) {
		struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
		ps->too_big++;
	}
	int n;
	if (!x->r->authed && code == PASTE_RESP_E_TOO_MANY_ARGS)
		n = snprintf(b, sizeof(b), "-ERR Protocol error: unauthenticated multibulk length\r\n");
	else if (!x->r->authed && code == PASTE_RESP_E_BULK_TOO_BIG)
		n = snprintf(b, sizeof(b), "-ERR Protocol error: unauthenticated bulk length\r\n");
	else
		n = paste_resp_put_proto_error(b, sizeof(b), &x->r->ps, code);
	if (n > 0)
		paste_port_send(x->w->port, x->conn, b, (size_t)n, 0);
	resp_close(x);
}

/* ------------------------------------------------------------ framing */

static void ctx_init(struct resp_ctx *x, struct worker *w, uint32_t conn, struct srv_conn *c,
		     const struct resp_proto_state *ps)
{
	x->w = w;
	x->conn = conn;
	x->c = c;
	x->r = srv_proto_part(c);
	x->sc = srv_service_part(x->r, sizeof(struct resp_conn));
	x->ss = ps->run.ss;
	x->ev = NULL;
	x->capture = NULL;
	x->clock_ns = 0;
}

static void stream_begin(struct resp_ctx *x, const struct resp_proto_state *ps,
			 struct paste_resp_cmd *cmd)
{
	struct resp_conn *r = x->r;
	const char *why = "value too long for this command";
	srv_bump(&x->w->requests);
	r->stream_left = cmd->argv[cmd->argc - 1].len;
	r->refused = server_store_failed(x->w) || !ps->svc->stream_begin ||
		     ps->svc->stream_begin(x, cmd->argv, cmd->argc, &why) != 0;
	if (r->refused) {
		/* Read and drop the bytes, then say why (a failed store:
		 * answered and closed at once). */
		if (server_store_failed(x->w)) {
			resp_reply_failed(x);
			return;
		}
		if (why) {
			char b[256];
			int n = snprintf(b, sizeof(b), "%s%s\r\n", why[0] == '-' ? "" : "-ERR ", why);
			resp_send(x, b, (size_t)n);
		}
	}
	r->state = r->stream_left ? R_STREAM : R_CRLF;
	x->c->timer = SRV_T_BODY;
}

/* R_SMALL is complete: parse the gathered command with streaming off
 * (it is all here) and run it. */
/* paste_resp_parse, argv doubled (up to the parser's max_args) while the
 * command has more arguments than it holds: the parser refuses the count
 * before it changes its state, and refills the earlier arguments when it
 * resumes. Back to ARGV_CAP once the event's commands ran (argv_shrink). */
static int parse_args(struct resp_proto_state *ps, struct paste_resp_parser *p, const char *b,
		      size_t n, struct paste_resp_cmd *cmd)
{
	int res;
	while ((res = paste_resp_parse(p, b, n, cmd)) == PASTE_RESP_E_TOO_MANY_ARGS &&
	       ps->argv_cap < p->cfg.max_args) {
		uint32_t cap = ps->argv_cap > p->cfg.max_args / 2 ? p->cfg.max_args : 2 * ps->argv_cap;
		struct paste_resp_arg *a = realloc(ps->argv, cap * sizeof(*a));
		if (!a)
			break;                   /* refused as too many */
		ps->argv = a;
		ps->argv_cap = cap;
		cmd->argv = a;
		cmd->argv_cap = cap;
	}
	return res;
}

static void argv_shrink(struct resp_proto_state *ps)
{
	struct paste_resp_arg *a = realloc(ps->argv, ARGV_CAP * sizeof(*a));
	if (a) {
		ps->argv = a;
		ps->argv_cap = ARGV_CAP;
	}
}

static void run_gathered(struct resp_ctx *x, struct resp_proto_state *ps)
{
	struct resp_conn *r = x->r;
	struct paste_resp_config pc = r->ps.cfg;
	pc.stream_min = PASTE_RESP_NO_STREAM;
	struct paste_resp_parser tmp;
	paste_resp_parser_init(&tmp, &pc);
	struct paste_resp_cmd cmd = { .argv = ps->argv, .argv_cap = ps->argv_cap,
				      .scratch = ps->scratch, .scratch_cap = ps->scratch_cap };
	int res = parse_args(ps, &tmp, r->buf.p, r->buf.len, &cmd);
	r->buf.len = 0;
	r->state = R_CMD;
	x->c->timer = SRV_T_IDLE;
	x->ev = NULL;
	if (res < 0) {
		r->ps.bad = tmp.bad;
		proto_error(x, res);
	} else if (res == PASTE_RESP_CMD && cmd.argc) {
		r->cmd_bytes = cmd.used;
		run_command(x, ps, cmd.argv, cmd.argc);
		r->cmd_bytes = 0;
		if (r->postponed)
			keep_postponed(x, ps, NULL, cmd.used);
	}
}

/* The command at p[0..len) is the next one this thread runs: let the
 * service start loading what it needs while this one runs. */
static inline void look_ahead(const struct resp_proto_state *ps, const struct resp_conn *r,
			      const char *p, size_t len)
{
	const char *key;
	size_t klen;
	if (ps->svc->prefetch && paste_resp_peek_key(p, len, &key, &klen))
		ps->svc->prefetch(ps->run.ss, srv_service_part((void *)r, sizeof(struct resp_conn)), key, klen);
}

/* Protected mode (Redis's): no password, and a peer that is not on the
 * loopback interface (or unknown, on a listener that is not a loopback
 * one): Redis's explanation, then close. At the first bytes, when the
 * port knows the peer (paste_port_config.peer_addrs). */
static bool refused_peer(struct resp_ctx *x, const struct resp_proto_state *ps)
{
	x->r->peer_checked = true;
	const struct srv_auth *a = ps->cfg->auth;
	if (!a || !a->protected_mode || !srv_auth_open(a))
		return false;
	struct sockaddr_storage peer, local;
	uint32_t plen = 0, llen = 0;
	paste_port_conn_addr(x->w->port, x->conn, &peer, &plen, &local, &llen, NULL);
	if (srv_addr_local(&peer, plen) || (!plen && srv_addr_local(&local, llen)))
		return false;
	paste_port_send(x->w->port, x->conn, srv_denied_text, strlen(srv_denied_text), 0);
	resp_close(x);
	return true;
}

static void resp_data(struct worker *w, const struct paste_event *ev, struct srv_conn *c)
{
	struct resp_proto_state *ps = srv_proto_state(w, c);
	struct resp_ctx x;
	ctx_init(&x, w, ev->conn, c, ps);
	struct resp_conn *r = x.r;
	uint32_t pos = 0;
	if (!r->peer_checked && refused_peer(&x, ps))
		return;
	while (pos < ev->len && r->state != R_DEAD) {
		const char *at = (const char *)ev->data + pos;
		uint32_t avail = ev->len - pos;
		if (r->blocked) {
			/* A blocking command waits: what follows it is kept,
			 * whole, until it is answered (resp_unblock). */
			if (!gather(&x, ps, at, avail))
				return;
			break;
		}
		if (r->state == R_STREAM) {
			uint32_t take = avail < r->stream_left ? avail : (uint32_t)r->stream_left;
			if (!r->refused)
				ps->svc->stream_data(&x, ev, pos, take);
			r->stream_left -= take;
			pos += take;
			if (!r->stream_left)
				r->state = R_CRLF;
			continue;
		}
		if (r->state == R_SMALL) {
			uint32_t take = avail < r->stream_left ? avail : (uint32_t)r->stream_left;
			if (!gather(&x, ps, at, take))
				return;
			pos += take;
			r->stream_left -= take;
			if (r->stream_left)
				continue;
			run_gathered(&x, ps);
			continue;
		}
		if (r->state == R_CRLF) {
			int k = paste_resp_stream_crlf(&r->ps, at, avail);
			if (k < 0) {
				if (!r->refused && ps->svc->closed)
					ps->svc->closed(&x);
				proto_error(&x, k);
				return;
			}
			if (k == 0) {
				pos = ev->len;
				continue;
			}
			pos += (uint32_t)k;
			r->state = R_CMD;
			c->timer = SRV_T_IDLE;
			if (!r->refused) {
				look_ahead(ps, r, at + k, avail - (uint32_t)k);
				ps->svc->stream_end(&x);
			}
			command_done(r);
			continue;
		}
		struct paste_resp_cmd cmd = { .argv = ps->argv, .argv_cap = ps->argv_cap,
					      .scratch = ps->scratch, .scratch_cap = ps->scratch_cap };
		int res;
		uint32_t old = r->buf.len;
		if (!old) {                       /* zero copy: parse where it landed */
			res = parse_args(ps, &r->ps, at, avail, &cmd);
			x.ev = ev;
		} else {                          /* a command split across reads */
			if (!gather(&x, ps, at, avail))
				return;
			res = parse_args(ps, &r->ps, r->buf.p, r->buf.len, &cmd);
			x.ev = NULL;
		}
		if (res < 0) {
			proto_error(&x, res);
			return;
		}
		if (res == PASTE_RESP_MORE) {
			if (!old && !gather(&x, ps, at, avail))
				return;
			if (!old) {
				c->timer = SRV_T_HEAD;   /* the header timeout starts */
				c->since_ms = w->now_ms;
			}
			pos = ev->len;
			continue;
		}
		/* Bytes of this event the command (or the streamed head) used. */
		uint32_t used = cmd.used - old;
		pos += used;
		r->buf.len = 0;
		if (res == PASTE_RESP_STREAM) {
			uint64_t blen = cmd.argv[cmd.argc - 1].len;
			bool split = ps->svc->stream_split && ps->svc->stream_split(cmd.argv, cmd.argc);
			if (ps->svc->stream_split ? !split : blen < r->ps.cfg.stream_min) {
				/* Not streamed (short and only split across
				 * reads, or a command the service does not
				 * stream): gather the whole command (head, bulk,
				 * CRLF; max_command bounds it) and run it as one. */
				if (!old && !gather(&x, ps, at, used))
					return;
				r->buf.len = cmd.used;
				r->stream_left = blen + 2;
				r->state = R_SMALL;
				/* A value is arriving, short or not: the body
				 * timeout applies (the idle one, usually off,
				 * would let it stall forever). */
				c->timer = SRV_T_BODY;
				continue;
			}
			stream_begin(&x, ps, &cmd);
			continue;
		}
		c->timer = SRV_T_IDLE;
		if (cmd.argc) {
			look_ahead(ps, r, at + used, avail - used);
			r->cmd_bytes = cmd.used;
			run_command(&x, ps, cmd.argv, cmd.argc);
			r->cmd_bytes = 0;
			if (r->postponed && !keep_postponed(&x, ps, old ? NULL : at, cmd.used))
				return;
		}
	}
	/* The commands that used the buffer have run: a big one goes, and
	 * so does a grown argv. */
	if (!r->buf.len && r->buf.cap > BUF_KEEP)
		buf_drop(ps, r);
	if (ps->argv_cap > ARGV_CAP && !r->buf.len)
		argv_shrink(ps);                 /* (not while this one's command is gathered) */
}

/* Only a connection between commands: elsewhere the event's bytes are a
 * value's or the rest of a split command's. (The server never peeks at
 * the next event of the connection being handled, whose state here would
 * be the one before that event.) */
static void resp_peek(struct worker *w, const struct paste_event *ev, struct srv_conn *c)
{
	const struct resp_conn *r = srv_proto_part(c);
	if (r->state == R_CMD && !r->buf.len)
		look_ahead(srv_proto_state(w, c), r, (const char *)ev->data, ev->len);
}

static void resp_accept(struct worker *w, uint32_t conn, struct srv_conn *c)
{
	(void)conn;
	struct resp_proto_state *ps = srv_proto_state(w, c);
	struct resp_conn *r = srv_proto_part(c);
	r->authed = srv_auth_start(ps->cfg->auth, &r->user);
	parser_limits(r, ps, r->authed);
	r->proto = 2;
	r->id = ++ps->next_id;
	r->created_ms = w->now_ms;
}

void resp_each(const struct resp_ctx *x, bool (*fn)(struct resp_ctx *o, void *arg), void *arg)
{
	struct worker *w = x->w;
	const struct resp_proto_state *ps = srv_proto_state(w, x->c);
	for (uint32_t i = 0; i < w->nopen; i++) {
		uint32_t conn = w->open[i];
		struct srv_conn *c = paste_port_conn_data(w->port, conn);
		if (!c || srv_proto_state(w, c) != ps)
			continue;
		struct resp_ctx o;
		ctx_init(&o, w, conn, c, ps);
		if (o.r->state != R_DEAD && !fn(&o, arg))
			return;
	}
}

void resp_conn_addr(const struct resp_ctx *o, char *peer, char *local, size_t cap, int *fd)
{
	struct sockaddr_storage p, l;
	uint32_t plen = 0, llen = 0;
	*fd = -1;
	paste_port_conn_addr(o->w->port, o->conn, &p, &plen, &l, &llen, fd);
	srv_addr_format(&p, plen, peer, cap);
	srv_addr_format(&l, llen, local, cap);
}

bool resp_ctx_of(struct resp_ctx *x, struct worker *w, uint32_t conn)
{
	struct srv_conn *c = paste_port_conn_data(w->port, conn);
	if (!c || w->srv->lis[c->lis].proto != &resp_proto)
		return false;
	ctx_init(x, w, conn, c, srv_proto_state(w, c));
	return x->r->state != R_DEAD;
}

void resp_block(struct resp_ctx *x)
{
	x->r->blocked = true;
	x->c->timer = SRV_T_NONE;            /* Redis times blocked clients out only by their own */
}

void resp_postpone(struct resp_ctx *x)
{
	x->r->postponed = true;
	resp_block(x);
}

void resp_unblock(struct resp_ctx *x)
{
	struct resp_conn *r = x->r;
	if (!r->blocked)
		return;
	r->blocked = false;
	if (r->state == R_DEAD)
		return;
	x->c->timer = SRV_T_IDLE;
	x->c->last_ms = x->w->now_ms;
	if (!r->buf.len || r->resume)
		return;
	struct resp_proto_state *ps = srv_proto_state(x->w, x->c);
	if (ps->nresume == ps->capresume) {
		uint32_t cap = ps->capresume ? 2 * ps->capresume : 16;
		struct resume *q = realloc(ps->resume, cap * sizeof(*q));
		if (!q) {
			resp_error(x, "ERR out of memory");
			resp_close(x);
			return;
		}
		ps->resume = q;
		ps->capresume = cap;
	}
	ps->resume[ps->nresume++] = (struct resume){ x->conn, r->id };
	r->resume = true;
}

/* The commands unblocked connections kept run now, as if they had just
 * arrived (from a copy: no store buffer holds them). One may block again,
 * or unblock another, which joins the end of the list. */
static void resume_kept(struct worker *w, struct resp_proto_state *ps)
{
	for (uint32_t i = 0; i < ps->nresume; i++) {
		struct resp_ctx x;
		if (!resp_ctx_of(&x, w, ps->resume[i].conn) || x.r->id != ps->resume[i].id ||
		    !x.r->resume)
			continue;
		struct resp_conn *r = x.r;
		r->resume = false;
		if (r->blocked)
			continue;
		struct reasm kept = r->buf;
		r->buf = (struct reasm){ 0 };
		ps->pending -= kept.cap;
		struct paste_event ev = { .type = PASTE_EV_DATA, .listener = x.c->lis,
					  .conn = x.conn, .buf = PASTE_NO_BUF, .len = kept.len,
					  .data = (const uint8_t *)kept.p };
		resp_data(w, &ev, x.c);
		reasm_free(&kept);
	}
	ps->nresume = 0;
}

static void resp_pass(struct worker *w, void *state)
{
	service_pass(w, state);
	resume_kept(w, state);
}

static uint64_t resp_wake(struct worker *w, void *state)
{
	const struct resp_proto_state *ps = state;
	return ps->nresume ? w->now_ms : service_wake(w, state);
}

static void resp_closed(struct worker *w, uint32_t conn, struct srv_conn *c)
{
	struct resp_proto_state *ps = srv_proto_state(w, c);
	struct resp_ctx x;
	ctx_init(&x, w, conn, c, ps);
	if (ps->svc->closed)
		ps->svc->closed(&x);
	buf_drop(ps, x.r);
	free(x.r->name);
	x.r->name = NULL;
	set_dead(&x);
}

/* A command or a value that stalls: an error and a close. An idle
 * connection is closed without a word (Redis's `timeout`). */
static void resp_timeout(struct worker *w, uint32_t conn, struct srv_conn *c)
{
	const struct resp_proto_state *ps = srv_proto_state(w, c);
	struct resp_ctx x;
	ctx_init(&x, w, conn, c, ps);
	if (c->timer != SRV_T_IDLE) {
		if (ps->svc->closed)
			ps->svc->closed(&x);
		paste_port_send(w->port, conn, "-ERR timeout reading the command\r\n", 34, 0);
	}
	resp_close(&x);
}

/* The client name lives in the protocol part; services reach it here. */
static uint32_t resp_service_conn_size(const void *cfg)
{
	return ((const struct resp_config *)cfg)->service->base.conn_size;
}

static int resp_open(struct server *s, const void *cfg_, void **state, struct paste_error *err)
{
	const struct resp_config *cfg = cfg_;
	struct resp_proto_state *ps = calloc(1, sizeof(*ps));
	uint32_t scratch = cfg->parser.max_inline ? cfg->parser.max_inline : PASTE_RESP_DEFAULT_MAX_INLINE;
	if (ps) {
		ps->argv = calloc(ARGV_CAP, sizeof(*ps->argv));
		ps->argv_cap = ARGV_CAP;
		ps->scratch = malloc(scratch);
	}
	if (!ps || !ps->argv || !ps->scratch) {
		if (ps) {
			free(ps->argv);
			free(ps->scratch);
		}
		free(ps);
		return paste_error_set(err, -ENOMEM, "out of memory");
	}
	if (s->cfg.threads != 1) {
		free(ps->argv);
		free(ps->scratch);
		free(ps);
		return paste_error_set(err, -EINVAL, "the Redis protocol runs in one thread (--threads 1)");
	}
	ps->scratch_cap = scratch;
	ps->cfg = cfg;
	ps->svc = cfg->service;
	int r = service_open(&ps->run, &ps->svc->base, s, cfg->service_cfg, err);
	if (r) {
		free(ps->argv);
		free(ps->scratch);
		free(ps);
		return r;
	}
	*state = ps;
	return 0;
}

static void resp_close_proto(struct server *s, void *state)
{
	struct resp_proto_state *ps = state;
	if (!ps)
		return;
	service_close(&ps->run, s);
	free(ps->resume);
	free(ps->argv);
	free(ps->scratch);
	free(ps);
}

const struct server_proto resp_proto = {
	.name = "resp",
	.conn_size = sizeof(struct resp_conn),
	.service_conn_size = resp_service_conn_size,
	.open = resp_open,
	.close = resp_close_proto,
	.banner = service_banner,
	.started = service_started,
	.pass = resp_pass,
	.wake = resp_wake,
	.accept = resp_accept,
	.data = resp_data,
	.peek = resp_peek,
	.closed = resp_closed,
	.timeout = resp_timeout,
	.refuse = "-ERR max number of clients reached\r\n",   /* Redis's words */
};
