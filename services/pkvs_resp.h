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

struct kv_cmd {
	const char *name;      /* lower case, as COMMAND reports it */
	int arity;             /* Redis's: argc including the name; negative: at least */
	const char *flags;     /* space-separated, for COMMAND */
	const char *group;     /* for COMMAND DOCS */
	const char *summary;
	kv_cmd_fn fn;          /* NULL: the protocol's own (HELLO, QUIT) */
};

extern const struct kv_cmd kv_cmds[];
extern const uint32_t kv_ncmds;

/* Shared by the command files. */
bool kv_key_ok(struct resp_ctx *x, const struct paste_resp_arg *k);   /* else replied */
void kv_reply_errno(struct resp_ctx *x, int r);
/* "$len\r\n" + bytes [from, from + len) of a value + "\r\n": 0 or -EIO. */
int kv_reply_value(struct resp_ctx *x, const struct paste_extent *ext, uint32_t n,
		   uint64_t from, uint64_t len);
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
int kv_set_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *k,
	       const struct paste_resp_arg *v, bool *created);

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
