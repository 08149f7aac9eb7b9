/*
 * script_lua.h - Lua 5.1 as Redis 7.0 runs it for EVAL and FUNCTION
 * (script_lua.c): the sandboxed state, the redis.* API, the conversions
 * between RESP replies and Lua values both ways (script_conv.c), and
 * SHA-1.
 *
 * It knows nothing of pkvs's dispatch: a command a script calls
 * (redis.call, redis.pcall) goes to the host's call hook, which runs it
 * and hands back its reply as RESP bytes; the engine turns them into Lua
 * values. cmd_script.c is the host of runs (EVAL, FCALL), cmd_function.c
 * of FUNCTION LOAD's registrations.
 */
#ifndef PASTE_SERVICES_SCRIPT_LUA_H
#define PASTE_SERVICES_SCRIPT_LUA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- SHA-1 (FIPS 180-4), for script names and redis.sha1hex ---- */

struct sl_sha1 {
	uint32_t h[5];
	uint64_t len;                  /* bytes hashed so far */
	uint8_t block[64];
};
void sl_sha1_init(struct sl_sha1 *s);
void sl_sha1_update(struct sl_sha1 *s, const void *p, size_t n);
void sl_sha1_final(struct sl_sha1 *s, uint8_t out[20]);
/* The digest of p[0..n) in lower-case hex, NUL-ended (41 bytes). */
void sl_sha1_hex(const void *p, size_t n, char out[41]);

/* ---- a growable output buffer ---- */

struct sl_buf {
	char *p;
	size_t len, cap;
	bool oom;                      /* an allocation failed: the content is incomplete */
};
void sl_buf_put(struct sl_buf *b, const void *p, size_t n);
void sl_buf_free(struct sl_buf *b);
/* Bytes with CR and LF as spaces (a line of RESP). */
void sl_buf_line(struct sl_buf *b, const char *s, size_t n);

/* ---- the engine ---- */

struct lua_State;

/* Script flags (shebang "#!lua flags=..." and register_function's). */
enum {
	SL_NO_WRITES = 1u << 0, SL_ALLOW_OOM = 1u << 1, SL_ALLOW_STALE = 1u << 2,
	SL_NO_CLUSTER = 1u << 3, SL_ALLOW_CROSS_SLOT = 1u << 4,
	SL_EVAL_COMPAT = 1u << 5,      /* EVAL without a shebang: Redis's older rules */
};
/* The flag named s (any case), 0 when none is. */
uint32_t sl_flag(const char *s, size_t n);
/* Each flag's name, in Redis's order (FUNCTION LIST). */
extern const char *const sl_flag_names[5];

/* What a script asks of its host. */
struct sl_call {
	int argc;                      /* < 0: only ask whether the script's user may run
					* it (redis.acl_check_cmd): 0 yes, 1 no, -1 no
					* such command */
	const char *const *argv;
	const size_t *lens;
	int proto;                     /* the script's RESP (redis.setresp) */
	/* The host's answer: the reply's RESP bytes (0 returned; valid until
	 * the next call), or a refusal before the command ran (-1 returned),
	 * in err as Redis's "-CODE message" or a bare message (code ERR). */
	const char *reply;
	size_t rlen;
	char err[320];
};
struct sl_host {
	int (*call)(void *arg, struct sl_call *c);
	/* Every 100,000 Lua instructions: true stops the script ("Script
	 * killed by user with SCRIPT KILL..."); NULL: never asked. */
	bool (*interrupt)(void *arg);
	/* redis.log at this level (0 debug .. 3 warning). */
	void (*log)(void *arg, int level, const char *msg, size_t len);
	/* FUNCTION LOAD: redis.register_function(name, fn, flags, desc):
	 * 0, or -1 with Redis's words in err. fn is a registry reference
	 * (luaL_ref) the host keeps or drops with sl_unref. */
	int (*register_fn)(void *arg, const char *name, size_t nlen, int ref, uint32_t flags,
			   const char *desc, size_t dlen, char *err, size_t errcap);
};

enum sl_kind { SL_KIND_EVAL, SL_KIND_FUNCTION };
struct sl_engine;

/* Push the cmsgpack table Redis gives scripts (script_cmsgpack.c): a
 * lua_CFunction, run once per state before the sandbox closes it. */
int sl_luaopen_cmsgpack(struct lua_State *L);
/* A fresh Lua state with Redis's sandbox (eval's or the functions'),
 * or NULL when out of memory. */
struct sl_engine *sl_open(enum sl_kind kind);
void sl_close(struct sl_engine *e);
/* Bytes the Lua state uses (INFO used_memory_lua). */
size_t sl_memory(const struct sl_engine *e);

/* A shebang line's words as Redis's sdssplitargs gives them: split at
 * blanks, "..." and '...' quoting (words cut at 511 bytes); false when a
 * quote is unbalanced or there are more than max. */
bool sl_split_words(const char *s, size_t n, char words[][512], int max, int *count);
/* EVAL: the script's flags and where its code starts after a shebang
 * line (its line feed kept, so line numbers stay): 0, or -1 with Redis's
 * words in err. */
int sl_shebang(const char *body, size_t len, uint32_t *flags, size_t *skip, char *err,
	       size_t errcap);
/* Compile an EVAL script body (after its shebang): a registry reference
 * to the chunk, or -1 with "Error compiling script (new function): ..."
 * in err. */
int sl_compile(struct sl_engine *e, const char *code, size_t len, char *err, size_t errcap);
/* FUNCTION LOAD's code (after its "#!lua ..." line): runs it with the
 * load API (redis.register_function), each registration going to
 * host->register_fn. 0, or -1 with Redis's words in err. */
int sl_load_library(struct sl_engine *e, const char *code, size_t len, const struct sl_host *host,
		    void *arg, char *err, size_t errcap);
void sl_unref(struct sl_engine *e, int ref);

/* One run of a script or function. */
struct sl_run {
	const struct sl_host *host;
	void *arg;
	const char *name;              /* a script's SHA-1, a function's name (in errors) */
	int caller_proto;              /* the client's RESP: the reply's */
	int proto;                     /* the script's RESP (redis.setresp) */
	int repl;                      /* redis.set_repl's flags: with 2 (REPL_REPLICA) writes propagate */
	bool killed;                   /* interrupt said stop */
};
/* Run chunk or function ref with keys and args (EVAL: as the globals
 * KEYS and ARGV; a function: its two arguments). The reply goes to out
 * as RESP in run->caller_proto; *err_reply true when it is one error
 * reply ("-...\r\n") and *counted when that error was counted already
 * (it came from a command the script ran). */
void sl_run(struct sl_engine *e, struct sl_run *run, int ref, bool eval, int nkeys,
	    const char *const *keys, const size_t *klens, int nargs, const char *const *args,
	    const size_t *alens, struct sl_buf *out, bool *err_reply, bool *counted);

/* ---- conversions (script_conv.c), exposed for the unit tests too ---- */

/* Push the error table Redis builds (luaPushErrorBuff) of s[0..n): from
 * "-CODE msg" or a bare msg (code ERR), {err="CODE msg"} with CR and LF
 * trimmed from msg's ends. */
void sl_push_error(struct lua_State *L, const char *s, size_t n);

/* Push the Lua value of the RESP reply p[0..n) (Redis's rules: integers
 * numbers, bulks strings, a null bulk or array false, status {ok=},
 * error {err=}, RESP3 null nil, map {map=}, set {set=}, double
 * {double=}, big number {big_number=}, verbatim {verbatim_string=}, bool
 * a boolean): the bytes used, 0 when the reply is malformed or cut. */
size_t sl_push_reply(struct lua_State *L, const char *p, size_t n);
/* Append the RESP form of the Lua value at the top of L's stack (popped)
 * to out, for a client speaking caller_proto, the script's RESP being
 * script_proto. */
void sl_reply_value(struct lua_State *L, struct sl_buf *out, int caller_proto, int script_proto);
struct lua_State *sl_state(struct sl_engine *e);

#endif
