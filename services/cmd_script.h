/*
 * cmd_script.h - what the scripting commands share: cmd_script.c (EVAL,
 * SCRIPT, and the run of a script or a function: the host script_lua.c
 * calls back) and cmd_function.c (FUNCTION's libraries, FCALL).
 */
#ifndef PASTE_SERVICES_CMD_SCRIPT_H
#define PASTE_SERVICES_CMD_SCRIPT_H

#include "pkvs_resp.h"
#include "script_lua.h"

#define KV_BUSY_EVAL "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
#define KV_BUSY_FN "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."

/* A script or function running now. */
struct kv_srun {
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

/* cmd_script.c */
/* The two Lua states, and the stored libraries read (kv_function_open),
 * at the first scripting command: 0 or -ENOMEM. */
int kv_script_engines(struct kv *kv);
/* The script or function running now (FUNCTION STATS); NULL: none. */
struct kv_srun *kv_script_running(void);
/* Is x the running script's client (the commands it calls)? */
bool kv_script_client(const struct resp_ctx *x);
/* Redis's checks of a script's flags before it runs (scriptPrepareForRun):
 * false after replying. */
bool kv_script_flags_ok(struct resp_ctx *x, uint32_t flags, bool ro);
/* numkeys of EVAL/FCALL: false after replying. */
bool kv_script_numkeys(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, bool fcall,
		       int64_t *nk);
/* Run ref (a script's chunk or a function of engine e) for the command
 * a[0..n), and reply. */
void kv_script_run(struct resp_ctx *x, struct kv *kv, struct sl_engine *e, int ref, bool eval,
		   const char *name, uint32_t flags, bool ro, const struct paste_resp_arg *a,
		   uint32_t n, int64_t nk);
/* The reply a run built: an error counted once (if the command the
 * script ran counted it, only the call is marked failed). */
void kv_script_send_reply(struct resp_ctx *x, const struct sl_buf *out, bool err, bool counted);
/* redis.log (the host's log hook). */
void kv_script_log(void *arg, int level, const char *msg, size_t len);
/* SCRIPT KILL (eval), FUNCTION KILL. */
void kv_script_kill(struct resp_ctx *x, bool eval);

/* cmd_function.c */
/* The functions' Lua state, opened, and the stored libraries read into it
 * once: 0 or -ENOMEM. */
int kv_function_open(struct kv *kv);
/* INFO's lines of functions: fn_bytes, functions, libraries. */
void kv_function_info(struct kv_script_info *out);
/* FUNCTION's subcommands; FCALL, FCALL_RO. */
void cmd_function_load(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_list(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_delete(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_flush(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_dump(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_restore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n);
void cmd_function_stats(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_kill(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_function_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_fcall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_fcall_ro(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

#endif
