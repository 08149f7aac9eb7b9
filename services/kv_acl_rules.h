/*
 * kv_acl_rules.h - what kv_acl.c (users, the ACL file, the check) and
 * kv_acl_rules.c (the command table, selector rules, rules written back
 * as text) share; private to those two files.
 */
#ifndef PASTE_SERVICES_KV_ACL_RULES_H
#define PASTE_SERVICES_KV_ACL_RULES_H

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "kv_acl.h"

/* Text built up (descriptions, the ACL file): resp_out's growing buffer,
 * an allocation failure remembered. */
#define sb resp_out

static inline void sb_put(struct sb *b, const void *p, size_t n)
{
	resp_out_put(b, p, n);
}

static inline void sb_str(struct sb *b, const char *s)
{
	resp_out_put(b, s, strlen(s));
}

/* The text, NUL-ended (malloc'd), or NULL when memory ran out. */
static inline char *sb_done(struct sb *b)
{
	resp_out_put(b, "", 1);
	if (b->oom) {
		reasm_free(&b->b);
		return NULL;
	}
	return b->b.p;
}

static inline bool has_space(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)p[i]) || !p[i])
			return true;
	return false;
}

static inline bool op_is(const char *op, size_t len, const char *word)
{
	return strlen(word) == len && !strncasecmp(op, word, len);
}

/* A command's id: its index in pkvs's table. */
static inline uint32_t cmd_id(const struct kv_cmd_rt *rt)
{
	return (uint32_t)(rt - kv_cmd_at(0));
}

/* Is command id allowed by s's bits? */
static inline bool bit_get(const struct kv_acl_sel *s, uint32_t id)
{
	return (s->bits[id / 64] >> (id % 64)) & 1;
}

/* A selector freed (zeroed), copied (-1: out of memory, d to be freed),
 * and one rule applied to it: 0 or an errno saying why not (Redis's). */
void kv_acl_sel_free(struct kv_acl_sel *s);
int kv_acl_sel_copy(struct kv_acl_sel *d, const struct kv_acl_sel *s);
int kv_acl_sel_apply(struct kv_acl_sel *s, const char *op, size_t len);

#endif
