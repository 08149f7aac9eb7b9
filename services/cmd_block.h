/*
 * cmd_block.h - clients blocked on keys, as Redis 7.0's blocked.c: BLPOP,
 * BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP (cmd_list.c), BZPOPMIN, BZPOPMAX,
 * BZMPOP (the sorted-set commands).
 *
 * A blocking command that finds nothing to take calls kv_block: it sends
 * no reply, and the connection runs none of its later commands (the
 * protocol keeps what it sends meanwhile: resp_block) until it is
 * served, times out, is unblocked (CLIENT UNBLOCK) or closes. Every
 * change to a key somebody waits on (a push, LMOVE, RENAME, MOVE, COPY,
 * SWAPDB, EXEC, a script: kv_touched) marks the key ready; after the
 * command that did it (pkvs_resp.c calls kv_block_serve), the clients
 * waiting on each ready key are served in the order they blocked, each by
 * its command's serve function, until the key has nothing left for
 * them. A serve's change and its reply are the serve function's: the
 * reply is queued like any (PASTE_SEND_DURABLE), so it leaves behind the
 * barrier that makes the pop durable. Then the client's next commands
 * run, at the end of the pass.
 *
 * Timeouts: a min-heap of deadlines (the server's monotonic clock,
 * w->now_ms); kv_block_wake tells the server when the next one falls, so
 * its poll waits no longer, and kv_block_pass answers those due with a
 * null array (RESP2 "*-1", RESP3 "_"), as Redis answers every list and
 * sorted-set timeout.
 *
 * For a blocking command (the sorted-set engineer's BZPOPMIN, say):
 *
 *   uint64_t ms;
 *   if (!kv_block_timeout(x, &a[n - 1], &ms)) return;       // replied
 *   ... look at the keys: one with something to take: take it, reply ...
 *   if (!kv_block_allowed(x, kv)) { reply as a timeout would; return; }
 *   struct my_arg arg = { ... };                            // copied
 *   struct kv_block_req req = { KV_ZSET, my_serve, &arg, sizeof(arg) };
 *   kv_block(x, kv, &a[1], n - 2, ms, &req);                // no reply
 *
 * and my_serve(x, kv, k, arg) is called for key k (of the client's
 * database, found holding a value of req.type) with x the blocked
 * client's context: it takes what the command takes, replies to x and
 * returns true (served: the client unblocks; an error reply counts), or
 * returns false when k has nothing for it after all (the client keeps
 * waiting, and the clients behind it on k are not tried).
 */
#ifndef PASTE_SERVICES_CMD_BLOCK_H
#define PASTE_SERVICES_CMD_BLOCK_H

#include "pkvs_resp.h"

/* A timeout argument in seconds, a float as Redis reads one (0: none):
 * false after replying Redis's error ("timeout is not a float or out of
 * range", "timeout is negative"); *ms the timeout in milliseconds,
 * rounded up. */
bool kv_block_timeout(struct resp_ctx *x, const struct paste_resp_arg *a, uint64_t *ms);

/* May the running command block? Not inside MULTI/EXEC or a script (they
 * run inside a kv group, or gather their replies): there Redis answers
 * at once as a timeout would. */
bool kv_block_allowed(const struct resp_ctx *x, const struct kv *kv);

typedef bool (*kv_block_serve_fn)(struct resp_ctx *x, struct kv *kv, struct kv_key *k,
				  const void *arg);

struct kv_block_req {
	enum kv_type type;              /* the keys' type that can serve it */
	kv_block_serve_fn serve;
	const void *arg;                /* the command's own parameters, copied */
	size_t arglen;
	/* Streams: each waiting client is tried whatever the one before got
	 * (every: one that waits for a later ID does not hold the others
	 * back), and serve is called also when the key was deleted or now
	 * holds another type (gone: XREADGROUP's client is then answered an
	 * error, as Redis unblocks it). */
	bool every, gone;
};

/* Block x on keys[0..nkeys) of its database (a key named twice counts
 * once) for timeout_ms (0: until served). Sends no reply. 0, or -ENOMEM
 * after replying the error. */
int kv_block(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *keys, uint32_t nkeys,
	     uint64_t timeout_ms, const struct kv_block_req *req);

/* After a command at the top level (pkvs_resp.c): serve the clients
 * waiting on the keys it made ready. Nothing when none is (one load). */
void kv_block_serve(struct kv *kv);

/* The service's pass: answer the clients whose timeout passed. wake: when
 * the next one falls (w->now_ms's clock), UINT64_MAX when none waits with
 * a timeout. */
void kv_block_pass(struct worker *w, struct kv *kv);
uint64_t kv_block_wake(struct worker *w, void *service_state);

/* The command that ran for ns and left x blocked (kv_run): the slow log
 * takes it when it is served, its time the first run's and the serve's
 * (a timeout or CLIENT UNBLOCK logs nothing, as in Redis). */
void kv_block_ran(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		  uint32_t argc, uint64_t ns);

/* x's connection closes: it waits no more (no reply). */
void kv_block_closed(struct resp_ctx *x);

/* CLIENT UNBLOCK id [TIMEOUT|ERROR]: the client of that id, if it is
 * blocked here, is answered as a timeout would (error false) or with
 * "-UNBLOCKED client unblocked via CLIENT UNBLOCK": 1, else 0. x: any
 * context of the protocol (the caller's). */
int kv_block_unblock(struct resp_ctx *x, struct kv *kv, uint64_t id, bool error);

/* Is o's client blocked (CLIENT LIST flag 'b'; kv_run, after every
 * command: inline, one load)? How many are (INFO blocked_clients)? */
static inline bool kv_block_is(const struct resp_ctx *o)
{
	return ((const struct kv_resp_conn *)o->sc)->block != NULL;
}
uint32_t kv_block_count(void);

#endif
