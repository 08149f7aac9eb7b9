/*
 * cmd_acl.c - ACL and its place in dispatch: ACL SETUSER, GETUSER,
 * DELUSER, LIST, USERS, WHOAMI, CAT, DRYRUN, GENPASS, SAVE, LOAD, HELP;
 * the check of each command against its connection's user (Redis's
 * NOPERM errors); the login hooks server/auth.h calls (AUTH, HELLO AUTH,
 * the HTTP port's Basic and Bearer).
 *
 * The users and their rules are kv_acl.c's; the log of refusals and ACL
 * LOG cmd_acl_log.c's. The users live in DRAM, as Redis's do: they
 * outlast a restart only through the ACL file (--aclfile, ACL SAVE and
 * ACL LOAD: kv_acl_file.c), and requirepass sets the default user's
 * password at start and with CONFIG SET.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cmd_pubsub.h"
#include "kv_acl.h"
#include "pkvs_resp.h"

static struct kv_acl_user *user_of(const struct resp_ctx *x)
{
	return x->r->user ? x->r->user : kv_acl_default();
}

/* ----------------------------------------------------------- the check */

/* An ACL LOG entry for a refusal: the command's name, or the key or
 * channel refused (argv[idx]). */
static void log_denied(struct resp_ctx *x, int reason, int context, const struct kv_cmd_rt *rt,
		       const struct paste_resp_arg *argv, uint32_t idx)
{
	const struct kv_acl_user *u = user_of(x);
	if (reason == KV_ACL_DENIED_CMD)
		kv_acl_log_add(x, reason, context, rt->c->name, strlen(rt->c->name), u->name, u->nlen);
	else
		kv_acl_log_add(x, reason, context, argv[idx].p, argv[idx].len, u->name, u->nlen);
}

/* Check x's user against rt with argv; a refusal is logged in context
 * (-1: toplevel, or multi inside MULTI). KV_ACL_OK or why not. */
static int check_logged(struct resp_ctx *x, const struct kv_cmd_rt *rt,
			const struct paste_resp_arg *argv, uint32_t argc, int context)
{
	uint32_t idx = 0;
	int r = kv_acl_check(user_of(x), rt, argv, argc, &idx);
	if (r != KV_ACL_OK) {
		if (context < 0)
			context = kv_multi_active(x) ? KV_ACL_CTX_MULTI : KV_ACL_CTX_TOPLEVEL;
		log_denied(x, r, context, rt, argv, idx);
	}
	return r;
}

/* Redis's NOPERM line for a refused command (no CRLF). */
static void noperm(char *msg, size_t cap, int r, const struct kv_cmd_rt *rt)
{
	if (r == KV_ACL_DENIED_CMD)
		snprintf(msg, cap, "NOPERM this user has no permissions to run the '%s' command",
			 rt->c->name);
	else
		snprintf(msg, cap, "NOPERM this user has no permissions to access one of the %s used "
			 "as arguments", r == KV_ACL_DENIED_KEY ? "keys" : "channels");
}

bool kv_acl_allowed(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc)
{
	int r = check_logged(x, rt, argv, argc, -1);
	if (r == KV_ACL_OK)
		return true;
	char msg[256];
	noperm(msg, sizeof(msg), r, rt);
	/* EXEC refused is EXECABORT, in a transaction or not (Redis's). */
	if (!strcmp(rt->c->name, "exec")) {
		if (!kv_multi_exec_abort(x, rt, msg))
			resp_error(x, "EXECABORT Transaction discarded because of: %s", msg);
	} else {
		resp_error(x, "%s", msg);
	}
	return false;
}

const char *kv_acl_script_why(struct resp_ctx *x, const struct kv_cmd_rt *rt,
			      const struct paste_resp_arg *argv, uint32_t argc)
{
	switch (check_logged(x, rt, argv, argc, KV_ACL_CTX_LUA)) {
	case KV_ACL_OK: return NULL;
	case KV_ACL_DENIED_CMD: return "The user executing the script can't run this command or subcommand";
	case KV_ACL_DENIED_KEY:
		return "The user executing the script can't access at least one of the keys mentioned "
		       "in the command arguments";
	default: return "The user executing the script can't publish to the channel mentioned in the command";
	}
}

const char *kv_acl_exec_why(struct resp_ctx *x, const struct kv_cmd_rt *rt,
			    const struct paste_resp_arg *argv, uint32_t argc)
{
	switch (check_logged(x, rt, argv, argc, KV_ACL_CTX_MULTI)) {
	case KV_ACL_OK: return NULL;
	case KV_ACL_DENIED_CMD: return "no permission to execute the command or subcommand";
	case KV_ACL_DENIED_KEY: return "no permission to touch the specified keys";
	default: return "no permission to access one of the channels used as arguments";
	}
}

/* ------------------------------------------------------- login hooks */

/* AUTH sets the name a refused login is logged under (Redis logs the
 * command's name as sent); HELLO's is "HELLO". */
static const struct paste_resp_arg *login_cmd;

static bool hook_start(void *ctx, void **user)
{
	(void)ctx;
	struct kv_acl_user *d = kv_acl_default();
	*user = d;
	return (d->flags & KV_ACLU_NOPASS) && (d->flags & KV_ACLU_ON);
}

static bool hook_login(void *ctx, void *conn, const void *name, size_t nl, const void *p,
		       size_t pl, void **user)
{
	(void)ctx;
	/* default first: the HTTP port asks for it on each request */
	struct kv_acl_user *u = nl == 7 && !memcmp(name, "default", 7) ? kv_acl_default()
								       : kv_acl_get(name, nl);
	if (!conn && !u)
		u = kv_acl_default();            /* HTTP Basic with any other name */
	bool ok = u && (u->flags & KV_ACLU_ON) && kv_acl_password_ok(u, p, pl);
	if (ok && !conn && !u->all)
		ok = false;                      /* the HTTP port serves only unrestricted users */
	if (ok) {
		*user = u;
		return true;
	}
	if (conn) {
		struct resp_ctx *x = conn;
		const struct paste_resp_arg *c = login_cmd;
		kv_acl_log_add(x, KV_ACL_DENIED_AUTH, kv_multi_active(x) ? KV_ACL_CTX_MULTI : KV_ACL_CTX_TOPLEVEL,
			c ? c->p : "HELLO", c ? c->len : 5, name, nl);
	}
	return false;
}

static void hook_requirepass(void *ctx, const void *p, size_t n)
{
	(void)ctx;
	struct paste_resp_arg ops[2] = { { "resetpass", 9 }, { "nopass", 6 } };
	char *op = NULL, err[256];
	if (n) {
		if (!(op = malloc(n + 1)))
			return;
		op[0] = '>';
		memcpy(op + 1, p, n);
		ops[1] = (struct paste_resp_arg){ op, n + 1 };
	}
	kv_acl_setuser("default", 7, ops, 2, err, sizeof(err));
	free(op);
}

static bool hook_nopass(void *ctx)
{
	(void)ctx;
	return kv_acl_default()->flags & KV_ACLU_NOPASS;
}

const struct srv_users kv_acl_users = {
	.start = hook_start, .login = hook_login, .requirepass = hook_requirepass,
	.nopass = hook_nopass, .open = &kv_acl_default_open,
};

/* ---------------------------------------------------- connections */

/* Connections to close: those of user u (NULL: of every user but
 * keep), when pubsub only those with a subscription u's rules refuse
 * (Redis's ACLKillPubsubClientsIfNeeded); forget points them at
 * kv_acl_nobody (their user is about to be freed). The caller's own is
 * closed after its reply (self_hit). */
struct closing {
	const struct kv_acl_user *u, *keep;
	bool pubsub, forget;
	struct resp_ctx *self;
	bool self_hit;
};

static bool refused_channel(void *arg, const void *name, size_t len, bool pattern)
{
	return !kv_acl_channel_ok(arg, name, len, pattern);
}

static bool close_one(struct resp_ctx *o, void *arg)
{
	struct closing *cl = arg;
	if (cl->u ? o->r->user != cl->u : (!o->r->user || o->r->user == cl->keep))
		return true;
	if (cl->pubsub && !kv_pubsub_any(o, refused_channel, (void *)cl->u))
		return true;
	if (cl->forget)
		o->r->user = &kv_acl_nobody;
	if (o->r->id == cl->self->r->id)
		cl->self_hit = true;
	else
		resp_close(o);
	return true;
}

static void close_conns(struct resp_ctx *x, struct closing *cl)
{
	cl->self = x;
	resp_each(x, close_one, cl);
}

/* ------------------------------------------------------- commands */

bool kv_acl_too_many(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t max)
{
	if (n <= max)
		return false;
	kv_sub_syntax_error(x, "ACL", &a[1]);
	return true;
}

static void reply_cstr(struct resp_ctx *x, const char *s)
{
	resp_bulk(x, s, strlen(s));
}

/* The channels a user may use, all selectors together: true for
 * allchannels in any; else the patterns (as channel text) in *out. */
static bool chans_of(const struct kv_acl_user *u, struct kv_acl_pat **out, uint32_t *n)
{
	*out = NULL;
	*n = 0;
	for (uint32_t i = 0; i < u->nsel; i++)
		if (u->sel[i].flags & KV_ACLS_ALLCHANNELS)
			return true;
	for (uint32_t i = 0; i < u->nsel; i++)
		for (uint32_t j = 0; j < u->sel[i].nchans; j++) {
			struct kv_acl_pat *g = realloc(*out, (*n + 1) * sizeof(*g));
			if (!g)
				return false;
			*out = g;
			g[*n] = u->sel[i].chans[j];
			if (!(g[*n].p = kv_acl_dup(g[*n].p, g[*n].len)))
				return false;
			(*n)++;
		}
	return false;
}

static void cmd_acl_setuser(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv;
	char err[512];
	const struct kv_acl_user *u = kv_acl_get(a[2].p, a[2].len);
	struct kv_acl_pat *before = NULL, *after = NULL;
	uint32_t nb = 0, na = 0;
	bool all_before = u && chans_of(u, &before, &nb);
	if (kv_acl_setuser(a[2].p, a[2].len, a + 3, n - 3, err, sizeof(err))) {
		resp_error(x, "%s", err);
	} else {
		bool narrowed = false;
		if (u && !chans_of(u, &after, &na)) {
			narrowed = all_before;
			for (uint32_t i = 0; i < nb && !narrowed; i++) {
				bool kept = false;
				for (uint32_t j = 0; j < na && !kept; j++)
					kept = before[i].len == after[j].len &&
					       !memcmp(before[i].p, after[j].p, after[j].len);
				narrowed = !kept;
			}
		}
		/* Channels narrowed: the user's connections holding a
		 * subscription the new rules refuse are closed (Redis's). */
		struct closing cl = { .u = u, .pubsub = true };
		if (narrowed)
			close_conns(x, &cl);
		resp_ok(x);
		if (cl.self_hit)
			resp_close(x);
	}
	for (uint32_t i = 0; i < nb; i++)
		free(before[i].p);
	for (uint32_t i = 0; i < na; i++)
		free(after[i].p);
	free(before);
	free(after);
}

static void cmd_acl_deluser(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv;
	for (uint32_t i = 2; i < n; i++)
		if (paste_resp_arg_eq(&a[i], "default") && a[i].len == 7 && !memcmp(a[i].p, "default", 7)) {
			resp_error(x, "ERR The 'default' user cannot be removed");
			return;
		}
	int64_t deleted = 0;
	bool self = false;
	for (uint32_t i = 2; i < n; i++) {
		struct kv_acl_user *u = kv_acl_get(a[i].p, a[i].len);
		if (!u)
			continue;
		struct closing cl = { .u = u, .forget = true };   /* Redis closes them */
		close_conns(x, &cl);
		self |= cl.self_hit;
		kv_acl_remove(u);
		deleted++;
	}
	resp_int(x, deleted);
	if (self)
		resp_close(x);
}

/* commands, keys, channels of a selector: 3 pairs. */
static void reply_selector(struct resp_ctx *x, const struct kv_acl_sel *s)
{
	char *c = kv_acl_describe_cmds(s), *k = kv_acl_describe_keys(s), *ch = kv_acl_describe_chans(s);
	reply_cstr(x, "commands");
	reply_cstr(x, c ? c : "");
	reply_cstr(x, "keys");
	reply_cstr(x, k ? k : "");
	reply_cstr(x, "channels");
	reply_cstr(x, ch ? ch : "");
	free(c);
	free(k);
	free(ch);
}

static void cmd_acl_getuser(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)n;
	static const char *const fl[] = { "on", "off", "nopass", "skip-sanitize-payload",
					  "sanitize-payload" };
	const struct kv_acl_user *u = kv_acl_get(a[2].p, a[2].len);
	if (!u) {
		resp_null(x);
		return;
	}
	resp_map(x, 6);
	reply_cstr(x, "flags");
	uint32_t nf = 0;
	for (int i = 0; i < 5; i++)
		nf += (u->flags >> i) & 1;
	resp_set(x, nf);
	for (int i = 0; i < 5; i++)
		if (u->flags & (1u << i))
			reply_cstr(x, fl[i]);
	reply_cstr(x, "passwords");
	resp_array(x, u->npass);
	for (uint32_t i = 0; i < u->npass; i++)
		resp_bulk(x, u->pass[i], 64);
	reply_selector(x, &u->sel[0]);
	reply_cstr(x, "selectors");
	resp_array(x, u->nsel - 1);
	for (uint32_t i = 1; i < u->nsel; i++) {
		resp_map(x, 3);
		reply_selector(x, &u->sel[i]);
	}
}

static void cmd_acl_list(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)n;
	bool names = paste_resp_arg_eq(&a[1], "USERS");
	uint32_t nu = kv_acl_count();
	resp_array(x, nu);
	for (uint32_t i = 0; i < nu; i++) {
		const struct kv_acl_user *u = kv_acl_at(i);
		if (names) {
			resp_bulk(x, u->name, u->nlen);
			continue;
		}
		char *d = kv_acl_describe(u);
		size_t len = 6 + u->nlen + (d ? strlen(d) : 0);
		char *line = malloc(len + 1);
		if (line)
			snprintf(line, len + 1, "user %s %s", u->name, d ? d : "");
		resp_bulk(x, line ? line : "", line ? len : 0);
		free(line);
		free(d);
	}
}

static void cmd_acl_whoami(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	(void)kv, (void)a, (void)n;
	const struct kv_acl_user *u = user_of(x);
	resp_bulk(x, u->name, u->nlen);
}

/* ACL CAT [category]: the categories, or a category's commands. */
static void cmd_acl_cat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	(void)kv;
	struct resp_out o = { 0 };
	char head[32];
	uint32_t cnt = 0;
	if (kv_acl_too_many(x, a, n, 3))
		return;
	if (n == 2) {
		for (uint32_t i = 0; kv_acl_names[i]; i++, cnt++)
			resp_out_bulk(&o, kv_acl_names[i], strlen(kv_acl_names[i]));
	} else {
		uint32_t bit = 0;
		for (uint32_t i = 0; kv_acl_names[i]; i++)
			if (paste_resp_arg_eq(&a[2], kv_acl_names[i]))
				bit = 1u << i;
		if (!bit) {
			resp_error(x, "ERR Unknown category '%.*s'", (int)(a[2].len < 128 ? a[2].len : 128),
				   a[2].p);
			return;
		}
		for (uint32_t i = 0; i < kv_cmd_count(); i++) {
			const struct kv_cmd_rt *rt = kv_cmd_at(i);
			if (kv_cmd_acl(rt) & bit) {
				resp_out_bulk(&o, rt->c->name, strlen(rt->c->name));
				cnt++;
			}
		}
	}
	resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), cnt), &o);
}

static void cmd_acl_dryrun(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	(void)kv;
	const struct kv_acl_user *u = kv_acl_get(a[2].p, a[2].len);
	if (!u) {
		resp_error(x, "ERR User '%.*s' not found", (int)(a[2].len < 128 ? a[2].len : 128), a[2].p);
		return;
	}
	const struct paste_resp_arg *argv = a + 3;
	uint32_t argc = n - 3;
	struct kv_cmd_rt *rt = kv_cmd_find(&argv[0]);
	if (rt && rt->nsubs && argc >= 2)
		rt = kv_cmd_sub(rt, &argv[1]);
	if (!rt || (!rt->c->fn && !rt->nsubs)) {
		resp_error(x, "ERR Command '%.*s' not found", (int)(argv[0].len < 128 ? argv[0].len : 128),
			   argv[0].p);
		return;
	}
	int arity = rt->c->arity;
	if ((arity > 0 && argc != (uint32_t)arity) || argc < (uint32_t)(arity < 0 ? -arity : 0)) {
		resp_error(x, "ERR wrong number of arguments for '%s' command", rt->c->name);
		return;
	}
	uint32_t idx = 0;
	int r = kv_acl_check(u, rt, argv, argc, &idx);
	char msg[512];
	if (r == KV_ACL_OK) {
		resp_ok(x);
		return;
	}
	if (r == KV_ACL_DENIED_CMD)
		snprintf(msg, sizeof(msg), "This user has no permissions to run the '%s' command",
			 rt->c->name);
	else
		snprintf(msg, sizeof(msg), "This user has no permissions to access the '%.*s' %s",
			 (int)(argv[idx].len < 256 ? argv[idx].len : 256), argv[idx].p,
			 r == KV_ACL_DENIED_KEY ? "key" : "channel");
	reply_cstr(x, msg);
}

static void cmd_acl_genpass(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv;
	int64_t bits = 256;
	if (kv_acl_too_many(x, a, n, 3))
		return;
	if (n == 3 && !kv_arg_int(x, &a[2], &bits))
		return;
	if (bits <= 0 || bits > 4096) {
		resp_error(x, "ERR ACL GENPASS argument must be the number of bits for the output "
			   "password, a positive number up to 4096");
		return;
	}
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[512];
	char out[1024];
	size_t chars = (size_t)(bits + 3) / 4;
	if (getrandom(raw, (chars + 1) / 2, 0) != (ssize_t)((chars + 1) / 2))
		for (size_t i = 0; i < (chars + 1) / 2; i++)
			raw[i] = (uint8_t)kv_rand_below(256);
	for (size_t i = 0; i < chars; i++)
		out[i] = hex[i & 1 ? raw[i / 2] & 15 : raw[i / 2] >> 4];
	resp_bulk(x, out, chars);
}

static bool acl_file_refused(struct resp_ctx *x)
{
	if (kv_acl_file_path())
		return false;
	resp_error(x, "ERR This Redis instance is not configured to use an ACL file. You may want to "
		   "specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming "
		   "you have a Redis configuration file set) in order to store users in the Redis "
		   "configuration.");
	return true;
}

static void cmd_acl_load(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)a, (void)n;
	if (acl_file_refused(x))
		return;
	char err[512];
	if (kv_acl_file_load(err, sizeof(err))) {
		resp_error(x, "%s", err);
		return;
	}
	/* Every user but default is new: the old ones' connections close,
	 * as Redis closes them (the users are freed: the walk compares
	 * addresses, it follows none). */
	struct closing cl = { .keep = kv_acl_default(), .forget = true };
	close_conns(x, &cl);
	resp_ok(x);
	if (cl.self_hit)
		resp_close(x);
}

static void cmd_acl_save(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)a, (void)n;
	if (acl_file_refused(x))
		return;
	if (kv_acl_file_save())
		resp_error(x, "ERR There was an error trying to save the ACLs. Please check the server "
			   "logs for more information");
	else
		resp_ok(x);
}

static void cmd_acl_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CAT [<category>]",
		"    List all commands that belong to <category>, or all command categories",
		"    when no category is specified.",
		"DELUSER <username> [<username> ...]",
		"    Delete a list of users.",
		"DRYRUN <username> <command> [<arg> ...]",
		"    Returns whether the user can execute the given command without executing the command.",
		"GETUSER <username>",
		"    Get the user's details.",
		"GENPASS [<bits>]",
		"    Generate a secure 256-bit user password. The optional `bits` argument can",
		"    be used to specify a different size.",
		"LIST",
		"    Show users details in config file format.",
		"LOAD",
		"    Reload users from the ACL file.",
		"LOG [<count> | RESET]",
		"    Show the ACL log entries.",
		"SAVE",
		"    Save the current config to the ACL file.",
		"SETUSER <username> <attribute> [<attribute> ...]",
		"    Create or modify a user with the specified attributes.",
		"USERS",
		"    List all the registered usernames.",
		"WHOAMI",
		"    Return the current connection username.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* AUTH [user] password. */
static void cmd_auth(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (n > 3) {
		resp_error(x, "ERR syntax error");
		return;
	}
	const struct kv_acl_user *d = kv_acl_default();
	if (n == 2 && (d->flags & KV_ACLU_NOPASS)) {
		resp_error(x, "ERR AUTH <password> called without any password configured for the "
			   "default user. Are you sure your configuration is correct?");
		return;
	}
	const struct paste_resp_arg user = { "default", 7 };
	login_cmd = &a[0];
	bool ok = resp_login(x, n == 2 ? &user : &a[1], &a[n - 1]);
	login_cmd = NULL;
	if (!ok)
		resp_error(x, "WRONGPASS invalid username-password pair or user is disabled.");
	else
		resp_ok(x);
}

/* name, arity, flags, group, summary, handler, first key, last key, step. */
const struct kv_cmd kv_cmds_acl[] = {
	{ "auth", -2, "noscript loading stale fast no_auth allow_busy", "connection", "Logs the connection in as a user (default: the default user, whose password is requirepass).", cmd_auth, 0, 0, 0 },
	{ "acl", -2, "", "server", "ACL subcommands: users, their rules, and the log of refusals.", NULL, 0, 0, 0 },
	{ "acl|cat", -2, "noscript loading stale", "server", "The ACL category names, or the commands that belong to one.", cmd_acl_cat, 0, 0, 0 },
	{ "acl|deluser", -3, "admin noscript loading stale", "server", "Deletes users (not default) and closes their connections.", cmd_acl_deluser, 0, 0, 0 },
	{ "acl|dryrun", -4, "admin noscript loading stale", "server", "Whether a user could run a command, without running it.", cmd_acl_dryrun, 0, 0, 0 },
	{ "acl|genpass", -2, "noscript loading stale", "server", "A random password in hex (256 bits, or the bits asked for).", cmd_acl_genpass, 0, 0, 0 },
	{ "acl|getuser", 3, "admin noscript loading stale", "server", "A user's flags, password hashes, commands, keys, channels and selectors.", cmd_acl_getuser, 0, 0, 0 },
	{ "acl|help", 2, "loading stale", "server", "Lists ACL's subcommands.", cmd_acl_help, 0, 0, 0 },
	{ "acl|list", 2, "admin noscript loading stale", "server", "Every user's rules, as the ACL file holds them.", cmd_acl_list, 0, 0, 0 },
	{ "acl|load", 2, "admin noscript loading stale", "server", "Replaces the users by those of the ACL file (all or none).", cmd_acl_load, 0, 0, 0 },
	{ "acl|log", -2, "admin noscript loading stale", "server", "The latest refused commands, keys, channels and logins, or RESET.", kv_acl_log_cmd, 0, 0, 0 },
	{ "acl|save", 2, "admin noscript loading stale", "server", "Writes the users to the ACL file.", cmd_acl_save, 0, 0, 0 },
	{ "acl|setuser", -3, "admin noscript loading stale", "server", "Creates a user or changes its rules (all of them or none).", cmd_acl_setuser, 0, 0, 0 },
	{ "acl|users", 2, "admin noscript loading stale", "server", "Names the users.", cmd_acl_list, 0, 0, 0 },
	{ "acl|whoami", 2, "noscript loading stale", "server", "Names the connection's user.", cmd_acl_whoami, 0, 0, 0 },
	{ 0 }
};
