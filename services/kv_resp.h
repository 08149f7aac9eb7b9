/*
 * kv_resp.h - pkvs's Redis command table (kv_resp.c) and the admin
 * commands that answer clients' introspection (kv_resp_admin.c).
 */
#ifndef PASTE_SERVICES_KV_RESP_H
#define PASTE_SERVICES_KV_RESP_H

#include "kv.h"
#include "resp.h"

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

void kv_cmd_scan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cmd_keys(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cmd_info(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cmd_config(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cmd_command(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cmd_client(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

/* Redis's glob (stringmatchlen): * ? [abc] [^a] [a-z] and \ escapes. */
bool kv_glob(const char *pat, size_t plen, const uint8_t *s, size_t slen);

extern const struct resp_service kv_resp_service;

#endif
