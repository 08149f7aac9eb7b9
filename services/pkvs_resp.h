/*
 * pkvs_resp.h - pkvs over the Redis protocol: the command table
 * (pkvs_resp.c) and the command families, one file each, as Redis keeps
 * t_string.c above networking.c:
 *
 *   cmd_string.c    GET, SET, STRLEN, GETRANGE, INCR..., MGET, MSET
 *   cmd_keyspace.c  DEL, EXISTS, TYPE, DBSIZE, FLUSHALL, SCAN, KEYS
 *   cmd_server.c    PING, ECHO, SELECT, INFO, CONFIG, COMMAND, CLIENT
 *
 * A command reads the way Redis's do: check its arguments, call the
 * key-value core (kv.h), reply with resp_*() (server/resp.h). The table
 * names arity, flags and group once; dispatch and COMMAND read it.
 */
#ifndef PASTE_SERVICES_PKVS_RESP_H
#define PASTE_SERVICES_PKVS_RESP_H

#include "pkvs_front.h"
#include "resp.h"

/* The Redis version whose protocol and replies pkvs follows: INFO's
 * redis_version and HELLO's version (pkvs's own is PASTE_VERSION). */
#define PKVS_REDIS_VERSION "7.0.15"

typedef void (*kv_cmd_fn)(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *argv,
			  uint32_t argc);

/* A command, as each family's table (kv_cmds_<family>[], ended by a row
 * of zeros) lists it once: dispatch, COMMAND and INFO read it. */
struct kv_cmd {
	const char *name;      /* lower case, as COMMAND reports it */
	int arity;             /* Redis's: argc including the name; negative: at least */
	const char *flags;     /* Redis's command flags, space-separated, for COMMAND */
	const char *group;     /* for COMMAND DOCS */
	const char *summary;
	kv_cmd_fn fn;          /* NULL: the protocol's own (HELLO, QUIT) */
	/* Redis's legacy key positions (COMMAND INFO, GETKEYS): the first
	 * key's argument index (0: no keys), the last's (negative: counted
	 * from the end, -1 the last argument) and the step between keys. */
	int8_t first_key, last_key, key_step;
};

/* What dispatch reads from the flags, parsed once. */
enum {
	KV_CMD_WRITE = 1u << 0, KV_CMD_READONLY = 1u << 1, KV_CMD_DENYOOM = 1u << 2,
	KV_CMD_ADMIN = 1u << 3, KV_CMD_PUBSUB = 1u << 4, KV_CMD_NOSCRIPT = 1u << 5,
	KV_CMD_BLOCKING = 1u << 6, KV_CMD_LOADING = 1u << 7, KV_CMD_STALE = 1u << 8,
	KV_CMD_NO_AUTH = 1u << 9, KV_CMD_NO_MULTI = 1u << 10, KV_CMD_FAST = 1u << 11,
	KV_CMD_ALLOW_BUSY = 1u << 12,
};

/* A command at run time: its row, flags, and INFO commandstats. */
struct kv_cmd_rt {
	const struct kv_cmd *c;
	uint32_t fl;
	uint64_t calls, usec, rejected, failed;
};

/* The families (pkvs_resp.c lists them). */
extern const struct kv_cmd kv_cmds_string[], kv_cmds_keyspace[], kv_cmds_expire[],
	kv_cmds_hash[], kv_cmds_multi[], kv_cmds_conn[], kv_cmds_server[];

/* Every command: count, the i-th, and by name (any case; NULL: unknown). */
uint32_t kv_cmd_count(void);
struct kv_cmd_rt *kv_cmd_at(uint32_t i);
struct kv_cmd_rt *kv_cmd_find(const struct paste_resp_arg *name);
/* Run a command whose arity was checked (dispatch, EXEC). */
void kv_run(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
	    const struct paste_resp_arg *argv, uint32_t argc);

/* cmd_multi.c: inside MULTI, a command is queued (true: replied QUEUED)
 * or, refused before it ran (unknown, arity), marks the transaction
 * failed. */
bool kv_multi_queue(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc);
void kv_multi_reject(struct resp_ctx *x);
/* cmd_conn.c: may this connection run rt (AUTH)? false: replied. */
bool kv_conn_allowed(struct resp_ctx *x, struct kv_cmd_rt *rt);

/* The service's part of a connection. */
struct kv_resp_conn {
	uint32_t db;                   /* SELECT */
	/* A streamed SET's value and key (a long key's bytes in name): in
	 * body when it fits one entry, else written in chunks by big. */
	struct paste_body body;
	struct kv_writer big;
	struct kv_key key;
	uint8_t *name;
};

static inline uint32_t kv_resp_db(const struct resp_ctx *x)
{
	return ((const struct kv_resp_conn *)x->sc)->db;
}

/* Shared by the command files. */
/* The key named by argument a in the connection's database: false (and
 * replied) when it is longer than pkvs takes. */
bool kv_arg_key(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, struct kv_key *k);
/* Look k up expecting `type`: 0 (found, *o), -ENOENT (absent), or
 * -EINVAL after replying WRONGTYPE. */
int kv_find(struct resp_ctx *x, struct kv *kv, struct kv_key *k, enum kv_type type,
	    struct kv_obj *o, bool read);
void kv_reply_errno(struct resp_ctx *x, int r);
/* "$len\r\n" + bytes [from, from + len) of string o's value + "\r\n", sent
 * from where the value lies: 0 or -EIO. */
int kv_reply_value(struct resp_ctx *x, struct kv *kv, const struct kv_obj *o, uint64_t from,
		   uint64_t len);
/* Redis's glob (stringmatchlen): * ? [abc] [^a] [a-z] and \ escapes. */
bool kv_glob(const char *pat, size_t plen, const uint8_t *s, size_t slen);

/* cmd_string.c */
void cmd_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_set(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_strlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_getrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_incr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_decr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_mget(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_mset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
/* A SET value held where it landed in ev's buffer (the streamed path and
 * set_arg share it). */
int kv_set_arg(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const struct paste_resp_arg *v,
	       int64_t expire_ms, bool *created);

/* cmd_keyspace.c */
void cmd_del(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_exists(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_type(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_dbsize(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_flushall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_scan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_keys(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

/* cmd_server.c */
void cmd_ping(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_echo(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_select(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_info(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_config(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_command(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_client(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

extern const struct resp_service pkvs_resp_service;

#endif
