/*
 * kv_repl.h - replication (kv_repl.c, kv_repl_rewrite.c, cmd_repl.c; the
 * replica's link kv_replica.c): pkvs as a primary (SYNC, PSYNC,
 * REPLCONF, WAIT, ROLE, INFO's Replication section, the command stream)
 * and the replica role's rules (REPLICAOF, READONLY, MASTERDOWN).
 *
 * The stream: every command that changed the data set, as Redis 7.0
 * propagates it (relative deadlines made absolute, INCRBYFLOAT as SET
 * KEEPTTL, SPOP as SREM, blocking pops as their plain forms, a script
 * or transaction as its effects, more than one wrapped in MULTI/EXEC,
 * SELECT when the database changes, expired keys as DEL), sent to the
 * replicas PASTE_SEND_DURABLE: behind the same barrier as the replies of
 * the batch that made the change, so a replica never holds a write the
 * primary could lose in a crash.
 *
 * Cost when unused: kv_repl_active is false (no replica attached, not a
 * replica): dispatch and kv_run test it once per command, nothing else.
 */
#ifndef PASTE_SERVICES_KV_REPL_H
#define PASTE_SERVICES_KV_REPL_H

#include "pkvs_resp.h"

/* A replica is attached or pkvs is one: the hooks below run. */
extern bool kv_repl_active;

/* kv_run's hook: runs rt (as kv_run would) and records what it changed
 * for the stream; the outermost call sends it. */
void kv_repl_run(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
		 const struct paste_resp_arg *argv, uint32_t argc);
/* Dispatch's hook for the replica role: true after refusing rt (READONLY,
 * MASTERDOWN; EXECABORT for an EXEC). */
bool kv_repl_refused(struct resp_ctx *x, struct kv_cmd_rt *rt);
/* The same rules for a request outside the command table (the HTTP
 * front end; write: it changes the store), min-replicas-to-write's
 * included: Redis's error line (READONLY, MASTERDOWN, NOREPLICAS), or
 * NULL when it may run. */
const char *kv_repl_refusal(bool write);
/* What the running command has added to the stream so far, and back to
 * that (a group it ran in was aborted: EXEC's retry, a killed script).
 * Called only while kv_repl_active. */
uint32_t kv_repl_mark(void);
void kv_repl_rewind(uint32_t mark);
/* A blocked client served outside any command (cmd_block.c runs the
 * serve functions of cmd_list.c and cmd_zset.c): mark before the pop,
 * then what it did, as Redis propagates it: op ("LPOP", "RPOP",
 * "ZPOPMIN", "ZPOPMAX") on key k with a count (count < 0: none), or a move
 * of k's element to dst (from and to "left"/"right": LMOVE; NULL:
 * RPOPLPUSH). */
uint32_t kv_repl_serve_mark(void);
void kv_repl_served_pop(uint32_t mark, const struct kv_key *k, const char *op, int64_t count);
void kv_repl_served_move(uint32_t mark, const struct kv_key *k, const void *dst, size_t dlen,
			 const char *from, const char *to);
/* A command's effects as other commands, as Redis propagates a stream
 * command's (XADD with the ID it took, XREADGROUP as XCLAIMs): each
 * added to the running command's unit, and the command itself not sent.
 * A blocked client's serve calls kv_repl_serve_mark first. */
void kv_repl_also(uint32_t db, const struct paste_resp_arg *av, uint32_t n);
/* Is x the link to this replica's primary (what it sends is applied as
 * sent: an XADD's trim is exact there)? */
bool kv_repl_from_primary(const struct resp_ctx *x);
/* Set while a script's command runs after redis.set_repl dropped
 * REPL_REPLICA: what that command changes is not propagated. */
extern bool kv_repl_quiet;
/* Key k was evicted (kv_evict_key, after its removal): DEL to replicas. */
void kv_repl_evicted(const struct kv_key *k);
/* A streamed SET set key k (its value is read back for the stream). */
void kv_repl_set(struct resp_ctx *x, struct kv *kv, struct kv_key *k);
/* The connection ends: a replica or a WAIT goes. */
void kv_repl_closed(struct resp_ctx *x);
/* x's connection is a replica's (its stream has the replica class's
 * output limit, not the normal one's). */
bool kv_repl_is_replica(const struct resp_ctx *x);
/* The bytes queued to the replicas and not yet sent (not counted in
 * maxmemory, as Redis's mem_not_counted_for_evict). */
uint64_t kv_repl_queued(void);
/* The event loop's pass: WAIT's timeouts, pings to the replicas. */
void kv_repl_pass(struct worker *w, struct kv *kv);
uint64_t kv_repl_wake(struct worker *w);
/* WAIT numreplicas timeout (ms, 0: none), its arguments checked. */
void kv_repl_wait(struct resp_ctx *x, struct kv *kv, int64_t num, int64_t timeout_ms);
/* Redis's checkGoodReplicasStatus: kv_noreplicas is set while
 * min-replicas-to-write is above 0, min-replicas-max-lag not 0, and fewer
 * replicas than the former acknowledged within the latter (seconds).
 * CONFIG SET calls it; so do attaches, acknowledgements and the pass. */
void kv_repl_good_update(void);
/* INFO's Replication section's lines, into out (NUL-ended). */
void kv_repl_info(char *out, size_t cap);
/* CONFIG GET replicaof: "host port" of the primary, "" when none. */
const char *kv_repl_primary(char *buf, size_t cap);

extern const struct kv_cmd kv_cmds_repl[];
/* cmd_dump.c: DUMP, RESTORE. */
extern const struct kv_cmd kv_cmds_dump[];

#endif
