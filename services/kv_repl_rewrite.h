/*
 * kv_repl_rewrite.h - shared by kv_repl.c and kv_repl_rewrite.c (the
 * commands' propagated forms); internal to replication.
 */
#ifndef PASTE_SERVICES_KV_REPL_REWRITE_H
#define PASTE_SERVICES_KV_REPL_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pkvs_resp.h"

/* kv_repl.c: a command of the unit, in database db; an array grown to
 * hold need items; the key the running command changed last. */
void kv_repl_add_cmd(uint32_t db, const struct paste_resp_arg *av, uint32_t n);
bool kv_repl_grow(void **p, uint32_t *cap, uint32_t need, size_t size);
const uint8_t *kv_repl_last(size_t *len);

/* A command's name (lower case) is w; an argument is option w. */
static inline bool is(const char *name, const char *w)
{
	return !strcmp(name, w);
}

static inline bool opt_is(const struct paste_resp_arg *a, const char *w)
{
	return paste_resp_arg_eq(a, w);
}

/* kv_repl_rewrite.c: a string key's value (malloc'd); what SPOP and [B]LMPOP/[B]ZMPOP
 * looked at before they ran; the command's form added to the unit. */
bool kv_repl_read_string(struct kv *kv, uint32_t db, const struct paste_resp_arg *a, char **buf,
			 size_t *len);
void kv_repl_spop_snapshot(struct kv *kv, uint32_t db, const struct paste_resp_arg *a);
void kv_repl_mpop_snapshot(struct kv *kv, uint32_t db, const char *nm, const struct paste_resp_arg *a,
			   uint32_t n);
void kv_repl_propagate(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
		       const struct paste_resp_arg *a, uint32_t n, uint32_t db);

#endif
