/*
 * cmd_server.c - the server's own commands: TIME, LASTSAVE, SAVE,
 * BGSAVE, BGREWRITEAOF, WAIT, SHUTDOWN, CLUSTER (answered as Redis
 * answers without cluster support), MODULE (no modules), LOLWUT, the rows of HELLO and QUIT (server/
 * resp.c answers them), and what the commands that look at pkvs share
 * (HELP replies, the Redis port, a glob of any case). Those commands
 * have files of their own: INFO cmd_info.c, CONFIG cmd_config.c,
 * COMMAND cmd_command.c; the connection's commands are cmd_conn.c's.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kv_repl.h"
#include "pkvs_resp.h"

/* Redis's glob, any case (COMMAND LIST PATTERN, CONFIG GET): both sides
 * lower-cased, then kv_glob. */
bool kv_glob_nocase(const char *pat, size_t plen, const uint8_t *s, size_t slen)
{
	char p[256], t[256];
	if (plen > sizeof(p) || slen > sizeof(t))
		return false;
	for (size_t i = 0; i < plen; i++)
		p[i] = (char)(pat[i] >= 'A' && pat[i] <= 'Z' ? pat[i] + 32 : pat[i]);
	for (size_t i = 0; i < slen; i++)
		t[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	return kv_glob(p, plen, (const uint8_t *)t, slen);
}

/* The Redis port's bound port (INFO tcp_port, CONFIG GET port). */
unsigned kv_resp_port(const struct resp_ctx *x)
{
	const struct server *s = x->w->srv;
	for (uint32_t i = 0; i < s->nlis; i++)
		if (s->lis[i].proto == &resp_proto)
			return s->listen_port[i];
	return 0;
}

void kv_reply_help(struct resp_ctx *x, const char *const *lines, uint32_t n)
{
	resp_array(x, n);
	for (uint32_t i = 0; i < n; i++)
		resp_simple(x, lines[i]);
}

/* ------------------------------------------------- the server's own */

static void cmd_time(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char s[24], us[24];
	int sl = snprintf(s, sizeof(s), "%lld", (long long)ts.tv_sec);
	int ul = snprintf(us, sizeof(us), "%ld", ts.tv_nsec / 1000);
	resp_array(x, 2);
	resp_bulk(x, s, (size_t)sl);
	resp_bulk(x, us, (size_t)ul);
}

/* SAVE, BGSAVE and BGREWRITEAOF: how many ran, the last one's Unix time
 * (0: none yet). */
static uint64_t saves, last_save;

uint64_t kv_save_count(void)
{
	return saves;
}

uint64_t kv_last_save(const struct resp_ctx *x)
{
	return last_save ? last_save : ((const struct kv_handle *)x->ss)->started_ms / 1000;
}

/* Every write is durable before its reply: the last save is now. */
static void cmd_lastsave(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_int(x, (int64_t)kv_last_save(x));
}

/* SAVE and BGSAVE have nothing left to write: every acknowledged write
 * is durable already. The reply waits for the batch's barrier like any. */
static void cmd_save(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	saves++;
	last_save = (uint64_t)time(NULL);
	if (paste_resp_arg_eq(&a[0], "BGSAVE")) {
		if (n > 2 || (n == 2 && !paste_resp_arg_eq(&a[1], "SCHEDULE"))) {
			resp_error(x, "ERR syntax error");
			return;
		}
		resp_simple(x, "Background saving started");
	} else if (paste_resp_arg_eq(&a[0], "BGREWRITEAOF")) {
		resp_simple(x, "Background append only file rewriting started");
	} else {
		resp_ok(x);
	}
}

/* WAIT numreplicas timeout: kv_repl.c counts the acknowledgements. */
static void cmd_wait(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t v;
	if (paste_resp_arg_i64(&a[1], &v) || paste_resp_arg_i64(&a[2], &v)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	if (v < 0) {
		resp_error(x, "ERR timeout is negative");
		return;
	}
	int64_t num = 0;
	paste_resp_arg_i64(&a[1], &num);
	kv_repl_wait(x, kv, num, v);             /* kv_repl.c */
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: a clean stop (exit 0);
 * the store is durable either way. */
static void cmd_shutdown(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv;
	bool save = false, nosave = false, abort_ = false;
	for (uint32_t i = 1; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "NOSAVE"))
			nosave = true;
		else if (paste_resp_arg_eq(&a[i], "SAVE"))
			save = true;
		else if (paste_resp_arg_eq(&a[i], "ABORT"))
			abort_ = true;
		else if (!paste_resp_arg_eq(&a[i], "NOW") && !paste_resp_arg_eq(&a[i], "FORCE")) {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if ((save && nosave) || (abort_ && n > 2)) {
		resp_error(x, "ERR syntax error");
		return;
	}
	if (abort_) {
		resp_error(x, "ERR No shutdown in progress.");
		return;
	}
	/* main's signal wait stops the workers and exits 0, as at SIGTERM. */
	kill(getpid(), SIGTERM);
}

static void cmd_cluster(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_error(x, "ERR This instance has cluster support disabled");
}

/* MODULE: pkvs loads no Redis modules (they are built against Redis's
 * own structures), so its list is empty and a load fails in Redis's
 * words, the reason in the server's log; clients that look for a module
 * (MODULE LIST) see none. */
static void cmd_module_list(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_array(x, 0);
}

static void cmd_module_load(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)n;
	fprintf(stderr, "pkvs: MODULE %.*s %.*s refused: pkvs does not load Redis modules\n",
		(int)a[1].len, a[1].p, (int)(a[2].len > 256 ? 256 : a[2].len), a[2].p);
	resp_error(x, "ERR Error loading the extension. Please check the server logs.");
}

static void cmd_module_unload(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_error(x, "ERR Error unloading module: no such module with that name");
}

static void cmd_module_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"LIST",
		"    The loaded modules: none (pkvs loads no Redis modules).",
		"LOAD <path> [<arg> ...]",
		"    Refused (the reason goes to the server's log).",
		"LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
		"    Refused, as LOAD.",
		"UNLOAD <name>",
		"    Answers that no module has that name.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* LOLWUT [VERSION v] [...]: Redis 7.0's answer for a version without
 * art of its own, the version line; pkvs draws none for any. */
static void cmd_lolwut(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	int64_t v;
	if (n >= 3 && paste_resp_arg_eq(&a[1], "VERSION") && !kv_arg_int(x, &a[2], &v))
		return;
	struct resp_out o = { 0 };
	static const char line[] = "Redis ver. " PKVS_REDIS_VERSION "\n";
	resp_out_put(&o, line, sizeof(line) - 1);
	resp_out_send_text(x, &o);
}

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_server[] = {
	{ "time", 1, "loading stale fast", "server", "The server's clock: Unix seconds and the microseconds past them.", cmd_time, 0, 0, 0 },
	{ "lastsave", 1, "loading stale fast", "server", "The Unix time of the last SAVE, BGSAVE or BGREWRITEAOF, or of pkvs's start before any.", cmd_lastsave, 0, 0, 0 },
	{ "save", 1, "admin noscript no_async_loading no_multi", "server", "Answers OK: every write is durable before its reply, so nothing is left to save.", cmd_save, 0, 0, 0 },
	{ "bgsave", -1, "admin noscript no_async_loading", "server", "Answers that a background save started: every write is durable already.", cmd_save, 0, 0, 0 },
	{ "bgrewriteaof", 1, "admin noscript no_async_loading", "server", "Answers that a log rewrite started: pkvs has no append-only file to rewrite.", cmd_save, 0, 0, 0 },
	{ "wait", 3, "noscript", "generic", "Waits until that many replicas acknowledged the writes so far, or the timeout; answers how many did.", cmd_wait, 0, 0, 0 },
	{ "shutdown", -1, "admin noscript loading stale no_multi allow_busy", "server", "Stops pkvs cleanly (exit status 0); the store is durable, so nothing is saved first.", cmd_shutdown, 0, 0, 0 },
	{ "cluster", -2, "", "cluster", "CLUSTER subcommands: pkvs is not a cluster node.", NULL, 0, 0, 0 },
	{ "cluster|info", 2, "stale", "cluster", "Cluster state: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|keyslot", 3, "stale", "cluster", "A key's hash slot: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|nodes", 2, "stale", "cluster", "The cluster's nodes: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|slots", 2, "stale", "cluster", "Which nodes serve which slots: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|shards", 2, "stale", "cluster", "The cluster's shards: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|myid", 2, "stale", "cluster", "This node's cluster id: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|help", 2, "loading stale", "cluster", "Answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "module", -2, "", "server", "MODULE subcommands: pkvs loads no Redis modules.", NULL, 0, 0, 0 },
	{ "module|help", 2, "loading stale", "server", "Lists MODULE's subcommands.", cmd_module_help, 0, 0, 0 },
	{ "module|list", 2, "admin noscript", "server", "The loaded modules: an empty list.", cmd_module_list, 0, 0, 0 },
	{ "module|load", -3, "admin noscript no_async_loading", "server", "Refused in Redis's words: pkvs loads no Redis modules.", cmd_module_load, 0, 0, 0 },
	{ "module|loadex", -3, "admin noscript no_async_loading", "server", "Refused in Redis's words: pkvs loads no Redis modules.", cmd_module_load, 0, 0, 0 },
	{ "module|unload", 3, "admin noscript no_async_loading", "server", "Answers that no module has that name.", cmd_module_unload, 0, 0, 0 },
	{ "lolwut", -1, "readonly fast", "server", "The Redis version pkvs answers as, as Redis 7.0 answers LOLWUT without art.", cmd_lolwut, 0, 0, 0 },
	{ "hello", -1, "noscript loading stale fast no_auth allow_busy", "connection", "Picks the protocol (2 or 3), optionally logs in and names the connection; describes the server.", NULL, 0, 0, 0 },
	{ "quit", -1, "noscript loading stale fast no_auth allow_busy", "connection", "Answers OK and closes the connection.", NULL, 0, 0, 0 },
	{ 0 }
};
