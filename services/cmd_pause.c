/*
 * cmd_pause.c - CLIENT PAUSE and CLIENT UNPAUSE, as Redis 7.0's.
 *
 * For a while (the timeout, or until CLIENT UNPAUSE) the commands of
 * clients other than replicas wait unanswered: every command (ALL), or
 * those that may change the data or the replication stream (WRITE: write
 * commands, PUBLISH, PFCOUNT, a script that may write, an EXEC that
 * queued one). A waiting client runs nothing more (resp_postpone keeps its
 * command and what follows, as a blocked client's); when the pause ends
 * each runs again, in the order they came, and may wait again under a
 * new pause. Checked after a command is admitted (authentication, ACL,
 * arity and the rest answer at once) and before MULTI queues it, where
 * Redis checks. Meanwhile nothing expires: a key past its deadline reads
 * as gone but stays, with no DEL logged, until the pause ends.
 *
 * One pause for the process (CLIENT PAUSE is an admin's, and pkvs serves
 * RESP on one thread): a new pause keeps the later end and the stricter
 * type of the two.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_repl.h"
#include "pkvs_resp.h"

enum { PAUSE_OFF = 0, PAUSE_WRITE, PAUSE_ALL };

static struct {
	int type;
	uint64_t end_ms;                /* the server's clock (w->now_ms) */
	struct waiter { struct worker *w; uint32_t conn; uint64_t id; } *wait;
	uint32_t n, cap;
} pause;

bool kv_pause_on(void)
{
	return pause.type != PAUSE_OFF;
}

uint32_t kv_pause_count(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < pause.n; i++) {
		struct resp_ctx x;
		n += resp_ctx_of(&x, pause.wait[i].w, pause.wait[i].conn) && x.r->id == pause.wait[i].id;
	}
	return n;
}

/* Every waiting client runs its command again (at the end of the pass:
 * resp_unblock), in the order they came. */
static void release_all(struct kv *kv)
{
	struct waiter *w = pause.wait;
	uint32_t n = pause.n;
	pause.wait = NULL;
	pause.n = pause.cap = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct resp_ctx x;
		if (resp_ctx_of(&x, w[i].w, w[i].conn) && x.r->id == w[i].id)
			resp_unblock(&x);
	}
	free(w);
	kv->paused = pause.type != PAUSE_OFF;
}

static void unpause(struct kv *kv)
{
	pause.type = PAUSE_OFF;
	pause.end_ms = 0;
	release_all(kv);
}

bool kv_cmd_may_write(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc)
{
	const char *name = rt->c->name;
	if (!strcmp(name, "eval") || !strcmp(name, "evalsha") || !strcmp(name, "fcall"))
		return kv_script_may_write(argv, argc);
	return (rt->fl & (KV_CMD_WRITE | KV_CMD_MAY_REPLICATE)) != 0;
}

bool kv_pause_holds(struct resp_ctx *x, struct kv *kv, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc)
{
	if (x->w->now_ms >= pause.end_ms) {
		unpause(kv);                 /* over (the pass may not have seen it yet) */
		return false;
	}
	bool exec = !strcmp(rt->c->name, "exec");
	if (kv_repl_is_replica(x) ||
	    (pause.type == PAUSE_WRITE &&
	     !(exec ? kv_multi_queued_writes(x) : kv_cmd_may_write(rt, argv, argc))))
		return false;
	if (pause.n == pause.cap) {
		uint32_t cap = pause.cap ? 2 * pause.cap : 16;
		struct waiter *q = realloc(pause.wait, cap * sizeof(*q));
		if (!q) {
			resp_error(x, "ERR out of memory");
			return true;
		}
		pause.wait = q;
		pause.cap = cap;
	}
	pause.wait[pause.n++] = (struct waiter){ x->w, x->conn, x->r->id };
	resp_postpone(x);
	return true;
}

void kv_pause_pass(struct worker *w, struct kv *kv)
{
	if (pause.type != PAUSE_OFF && w->now_ms >= pause.end_ms)
		unpause(kv);
}

uint64_t kv_pause_wake(void)
{
	return pause.type != PAUSE_OFF ? pause.end_ms : UINT64_MAX;
}

/* CLIENT PAUSE timeout [WRITE|ALL]: timeout in milliseconds. */
void kv_client_pause(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n > 4) {
		resp_error(x, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
			   "Try CLIENT HELP.", (int)a[1].len, a[1].p);
		return;
	}
	int type = PAUSE_ALL;
	if (n == 4 && paste_resp_arg_eq(&a[3], "WRITE")) {
		type = PAUSE_WRITE;
	} else if (n == 4 && !paste_resp_arg_eq(&a[3], "ALL")) {
		resp_error(x, "ERR CLIENT PAUSE mode must be WRITE or ALL");
		return;
	}
	int64_t ms;
	if (paste_resp_arg_i64(&a[2], &ms)) {
		resp_error(x, "ERR timeout is not an integer or out of range");
		return;
	}
	if (ms < 0) {
		resp_error(x, "ERR timeout is negative");
		return;
	}
	uint64_t end = x->w->now_ms + (uint64_t)ms;
	if (pause.type == PAUSE_OFF || x->w->now_ms >= pause.end_ms) {
		pause.type = type;
		pause.end_ms = end;
	} else {
		pause.type = type > pause.type ? type : pause.type;
		pause.end_ms = end > pause.end_ms ? end : pause.end_ms;
	}
	kv->paused = true;
	resp_ok(x);
}

void kv_client_unpause(struct resp_ctx *x, struct kv *kv)
{
	unpause(kv);
	resp_ok(x);
}
