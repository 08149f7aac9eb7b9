/*
 * kv_acl.h - pkvs's users and their rules, as Redis's ACL has them
 * (kv_acl.c; selector rules kv_acl_rules.c, SHA-256 kv_acl_sha256.c):
 * passwords kept as SHA-256, selectors of commands (by
 * command, subcommand, first argument and category), key patterns (read,
 * write or both) and channel patterns; the check of a command against
 * them; a user described back as ACL LIST and ACL SETUSER read it. The
 * commands (ACL, AUTH's log, the per-command check) are cmd_acl.c's.
 *
 * A command is its index in the command table (kv_cmd_at), and the
 * commands of Redis pkvs lacks follow (rules may name them); categories
 * are kv_cmd_acl's bits. The users change in the one thread that serves
 * both ports: no lock.
 */
#ifndef PASTE_SERVICES_KV_ACL_H
#define PASTE_SERVICES_KV_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkvs_resp.h"

#define KV_ACL_BITS 1024u     /* command ids: pkvs's table and Redis's commands it lacks */

/* Why a check refused (Redis's ACL_DENIED_*, in its order of relevance). */
enum { KV_ACL_OK = 0, KV_ACL_DENIED_CMD = 1, KV_ACL_DENIED_KEY = 2, KV_ACL_DENIED_AUTH = 3,
       KV_ACL_DENIED_CHANNEL = 4 };
/* User flags, in the order ACL LIST writes them. */
enum { KV_ACLU_ON = 1, KV_ACLU_OFF = 2, KV_ACLU_NOPASS = 4, KV_ACLU_SKIP_SANITIZE = 8,
       KV_ACLU_SANITIZE = 16 };
/* Selector flags. */
enum { KV_ACLS_ALLKEYS = 1, KV_ACLS_ALLCHANNELS = 2, KV_ACLS_ALLCOMMANDS = 4 };
/* A key pattern's permissions (%R~, %W~; ~ is both). */
enum { KV_ACLK_R = 1, KV_ACLK_W = 2 };

struct kv_acl_pat {
	char *p;
	uint32_t len;
	uint8_t fl;                    /* KV_ACLK_* (key patterns) */
};
struct kv_acl_farg {                   /* +select|0: a first argument allowed */
	uint32_t id;
	char *arg;
};
struct kv_acl_sel {
	uint8_t flags;                 /* KV_ACLS_* */
	bool future;                   /* +@all last (not -@all): described from +@all */
	uint64_t bits[KV_ACL_BITS / 64];
	struct kv_acl_pat *keys, *chans;
	uint32_t nkeys, nchans;
	struct kv_acl_farg *fargs;
	uint32_t nfargs;
};
struct kv_acl_user {
	char *name;
	uint32_t nlen;
	uint8_t flags;                 /* KV_ACLU_* */
	bool all;                      /* the root selector allows every command, key and
					* channel: dispatch checks nothing more */
	char (*pass)[64];              /* SHA-256 hashes in lower-case hex */
	uint32_t npass;
	struct kv_acl_sel *sel;        /* sel[0]: the root (rules outside parentheses) */
	uint32_t nsel;
};

/* The hooks server/auth.h's srv_users calls (apps/pkvs.c installs them). */
extern const struct srv_users kv_acl_users;

/* The users, sorted by name (ACL LIST's order); "default" is always one. */
uint32_t kv_acl_count(void);
struct kv_acl_user *kv_acl_at(uint32_t i);
struct kv_acl_user *kv_acl_get(const void *name, size_t len);
struct kv_acl_user *kv_acl_default(void);
/* The default user is on, nopass and allowed everything (srv_users.open). */
extern bool kv_acl_default_open;
/* A user with nothing allowed: where the connections of a deleted user
 * point until they close. */
extern struct kv_acl_user kv_acl_nobody;

/* ACL SETUSER: apply ops[0..n) to the user (created when absent), all
 * of them or none. 0, or -1 with Redis's error words in err. *created
 * is set when the user is new. Usernames with spaces or NUL are refused. */
int kv_acl_setuser(const void *name, size_t nlen, const struct paste_resp_arg *ops, uint32_t n,
		   char *err, size_t cap);
/* Remove a user (not "default"); its memory is freed: callers repoint
 * its connections first. */
void kv_acl_remove(struct kv_acl_user *u);
/* Replace every user by those of an ACL file's text ("user <name>
 * rules..." a line; fname names it in errors): all or nothing. 0, or -1
 * and Redis's error in err. */
int kv_acl_load(const char *fname, const char *text, size_t len, char *err, size_t cap);
/* The users in ACL file form, one "user ..." line each (malloc'd; NULL:
 * out of memory). */
char *kv_acl_save(void);

/* Descriptions (malloc'd strings, NULL: out of memory): the user as ACL
 * LIST writes it after "user <name> "; a selector's command rules, keys
 * and channels as ACL GETUSER gives them. */
char *kv_acl_describe(const struct kv_acl_user *u);
char *kv_acl_describe_cmds(const struct kv_acl_sel *s);
char *kv_acl_describe_keys(const struct kv_acl_sel *s);
char *kv_acl_describe_chans(const struct kv_acl_sel *s);

/* May u run rt with argv[0..argc)? KV_ACL_OK, or why not and in *idx
 * the argument (key or channel) refused. */
int kv_acl_check(const struct kv_acl_user *u, const struct kv_cmd_rt *rt,
		 const struct paste_resp_arg *argv, uint32_t argc, uint32_t *idx);
/* May u use channel name[0..len) (pattern: as PSUBSCRIBE's pattern,
 * matched literally)? */
bool kv_acl_channel_ok(const struct kv_acl_user *u, const void *name, size_t len, bool pattern);
/* Is p[0..n) one of u's passwords (any, for nopass)? u must be on. */
bool kv_acl_password_ok(const struct kv_acl_user *u, const void *p, size_t n);

/* SHA-256 (FIPS 180-4) of p[0..n); and as 64 lower-case hex digits. */
void kv_acl_sha256(const void *p, size_t n, uint8_t out[32]);
void kv_acl_sha256_hex(const void *p, size_t n, char out[64]);
/* Redis's glob for patterns: kv_glob. */

/* cmd_acl.c: may x's user run rt with argv? false after Redis's NOPERM
 * error and an ACL LOG entry (dispatch calls it for users not allowed
 * everything). */
bool kv_acl_allowed(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc);
/* The same check for a command a script calls (Redis's words for it)
 * and for one EXEC runs (its reason): NULL when allowed. */
const char *kv_acl_script_why(struct resp_ctx *x, const struct kv_cmd_rt *rt,
			      const struct paste_resp_arg *argv, uint32_t argc);
const char *kv_acl_exec_why(struct resp_ctx *x, const struct kv_cmd_rt *rt,
			    const struct paste_resp_arg *argv, uint32_t argc);
/* ACL subcommand a[1] given more than max arguments (n): Redis's error
 * replied, true. */
bool kv_acl_too_many(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t max);
/* --aclfile: its users replace the built-in ones; ACL SAVE and LOAD use
 * it (NULL or "": none). 0, or -1 with the reason in err. */
int kv_acl_start(const char *path, char *err, size_t cap);
/* kv_acl_file.c: the ACL file's path (NULL: none); its users loaded
 * (0, or -1 with Redis's error in err); the users saved to it (0 or
 * -errno). */
const char *kv_acl_file_path(void);
int kv_acl_file_load(char *err, size_t cap);
int kv_acl_file_save(void);

/* cmd_acl_log.c: where a refusal happened (ACL LOG's context), an entry
 * for one (reason KV_ACL_DENIED_*, obj the command, key, channel or
 * login name refused, user the user's name), and ACL LOG itself. */
enum { KV_ACL_CTX_TOPLEVEL, KV_ACL_CTX_MULTI, KV_ACL_CTX_LUA };
void kv_acl_log_add(struct resp_ctx *x, int reason, int context, const void *obj, size_t olen,
		    const void *user, size_t ulen);
void kv_acl_log_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

/* A copy of p[0..n), NUL-ended (malloc'd; NULL: out of memory). */
static inline char *kv_acl_dup(const void *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

#endif
