/*
 * kv_acl.c - users and the check of a command against them (kv_acl.h),
 * with Redis's semantics: a rule applies at once to a copy of the user,
 * and the copy replaces the user only when every rule of an ACL SETUSER
 * was good. Also the ACL file's text (kv_acl_load, kv_acl_save).
 *
 * A user allowed every command, key and channel by its root selector has
 * `all` set; dispatch tests that flag and nothing else (cmd_acl.c).
 * Passwords are kept as their SHA-256 in hex, as Redis keeps them (so ACL
 * LIST and an ACL file hold no password): kv_acl_sha256.c. A selector's
 * rules (the command table, +cmd/-@cat/~pattern parsing, the rules
 * written back) are kv_acl_rules.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_acl_rules.h"

/* acl-pubsub-default (CONFIG): new users' channels. */
static bool pubsub_all(void)
{
	const char *v = kv_config_kept("acl-pubsub-default");
	return v && !strcmp(v, "allchannels");
}

/* ---------------------------------------------------------------- users */

static struct kv_acl_user **users;
static uint32_t nusers, capusers;
struct kv_acl_user kv_acl_nobody = { .name = (char *)"default", .nlen = 7 };

static void user_clear(struct kv_acl_user *u)
{
	for (uint32_t i = 0; i < u->nsel; i++)
		kv_acl_sel_free(&u->sel[i]);
	free(u->sel);
	free(u->pass);
	u->sel = NULL;
	u->pass = NULL;
	u->nsel = u->npass = 0;
}

static void user_free(struct kv_acl_user *u)
{
	if (!u)
		return;
	user_clear(u);
	free(u->name);
	free(u);
}

static void user_update(struct kv_acl_user *u)
{
	const uint8_t all = KV_ACLS_ALLKEYS | KV_ACLS_ALLCHANNELS | KV_ACLS_ALLCOMMANDS;
	u->all = u->nsel && (u->sel[0].flags & all) == all;
}

/* A new user as Redis creates one: off, no passwords, nothing allowed. */
static struct kv_acl_user *user_new(const void *name, size_t len)
{
	struct kv_acl_user *u = calloc(1, sizeof(*u));
	if (!u || !(u->name = malloc(len + 1)) || !(u->sel = calloc(1, sizeof(*u->sel)))) {
		if (u)
			free(u->name);
		free(u);
		return NULL;
	}
	memcpy(u->name, name, len);
	u->name[len] = 0;
	u->nlen = (uint32_t)len;
	u->nsel = 1;
	u->flags = KV_ACLU_OFF;
	if (pubsub_all())
		u->sel[0].flags |= KV_ACLS_ALLCHANNELS;
	return u;
}

/* dst (cleared) becomes a deep copy of src's rules (not its name). */
static int user_copy(struct kv_acl_user *dst, const struct kv_acl_user *src)
{
	user_clear(dst);
	dst->flags = src->flags;
	if (src->npass) {
		if (!(dst->pass = malloc(src->npass * sizeof(*dst->pass))))
			return -1;
		memcpy(dst->pass, src->pass, src->npass * sizeof(*dst->pass));
		dst->npass = src->npass;
	}
	if (!(dst->sel = calloc(src->nsel, sizeof(*dst->sel))))
		return -1;
	for (uint32_t i = 0; i < src->nsel; i++) {
		dst->nsel++;
		if (kv_acl_sel_copy(&dst->sel[i], &src->sel[i]))
			return -1;
	}
	user_update(dst);
	return 0;
}

static struct kv_acl_user *dflt;
static void default_changed(void);

/* u takes t's rules (its name and address stay: connections point at
 * it); t is freed. */
static void user_take(struct kv_acl_user *u, struct kv_acl_user *t)
{
	user_clear(u);
	u->flags = t->flags;
	u->pass = t->pass;
	u->npass = t->npass;
	u->sel = t->sel;
	u->nsel = t->nsel;
	u->all = t->all;
	free(t->name);
	free(t);
	if (u == dflt)
		default_changed();
}

static bool hash_ok(const char *p, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

static int user_apply(struct kv_acl_user *u, const char *op, size_t len);

/* "(rules ...)": a new selector. */
static int add_selector(struct kv_acl_user *u, const char *op, size_t len)
{
	struct kv_acl_sel *ns = realloc(u->sel, (u->nsel + 1) * sizeof(*ns));
	if (!ns)
		return ENOMEM;
	u->sel = ns;
	struct kv_acl_sel *s = &ns[u->nsel];
	memset(s, 0, sizeof(*s));
	if (pubsub_all())
		s->flags |= KV_ACLS_ALLCHANNELS;
	for (size_t i = 1; i + 1 < len;) {
		while (i + 1 < len && isspace((unsigned char)op[i]))
			i++;
		size_t j = i;
		while (j + 1 < len && !isspace((unsigned char)op[j]))
			j++;
		if (j > i) {
			int e = kv_acl_sel_apply(s, op + i, j - i);
			if (e) {
				kv_acl_sel_free(s);
				return e;
			}
		}
		i = j;
	}
	u->nsel++;
	return 0;
}

static int user_apply(struct kv_acl_user *u, const char *op, size_t len)
{
	if (!len)
		return 0;
	if (op_is(op, len, "on")) {
		u->flags = (uint8_t)((u->flags | KV_ACLU_ON) & ~KV_ACLU_OFF);
	} else if (op_is(op, len, "off")) {
		u->flags = (uint8_t)((u->flags | KV_ACLU_OFF) & ~KV_ACLU_ON);
	} else if (op_is(op, len, "skip-sanitize-payload")) {
		u->flags = (uint8_t)((u->flags | KV_ACLU_SKIP_SANITIZE) & ~KV_ACLU_SANITIZE);
	} else if (op_is(op, len, "sanitize-payload")) {
		u->flags = (uint8_t)((u->flags | KV_ACLU_SANITIZE) & ~KV_ACLU_SKIP_SANITIZE);
	} else if (op_is(op, len, "nopass") || op_is(op, len, "resetpass")) {
		if (op_is(op, len, "nopass"))
			u->flags |= KV_ACLU_NOPASS;
		else
			u->flags &= (uint8_t)~KV_ACLU_NOPASS;
		free(u->pass);
		u->pass = NULL;
		u->npass = 0;
	} else if (op[0] == '>' || op[0] == '#' || op[0] == '<' || op[0] == '!') {
		char h[64];
		if (op[0] == '>' || op[0] == '<') {
			kv_acl_sha256_hex(op + 1, len - 1, h);
		} else {
			if (!hash_ok(op + 1, len - 1))
				return EBADMSG;
			memcpy(h, op + 1, 64);
		}
		uint32_t at = 0;
		while (at < u->npass && memcmp(u->pass[at], h, 64))
			at++;
		if (op[0] == '<' || op[0] == '!') {
			if (at == u->npass)
				return ENODEV;
			memmove(&u->pass[at], &u->pass[at + 1], (u->npass - at - 1) * sizeof(*u->pass));
			u->npass--;
			return 0;
		}
		if (at == u->npass) {
			char (*np)[64] = realloc(u->pass, (u->npass + 1) * sizeof(*np));
			if (!np)
				return ENOMEM;
			u->pass = np;
			memcpy(np[u->npass++], h, 64);
		}
		u->flags &= (uint8_t)~KV_ACLU_NOPASS;
	} else if (op[0] == '(' && op[len - 1] == ')') {
		return add_selector(u, op, len);
	} else if (op_is(op, len, "clearselectors")) {
		for (uint32_t i = 1; i < u->nsel; i++)
			kv_acl_sel_free(&u->sel[i]);
		u->nsel = 1;
	} else if (op_is(op, len, "reset")) {
		user_apply(u, "resetpass", 9);
		user_apply(u, "resetkeys", 9);
		user_apply(u, "resetchannels", 13);
		if (pubsub_all())
			user_apply(u, "allchannels", 11);
		user_apply(u, "off", 3);
		user_apply(u, "sanitize-payload", 16);
		user_apply(u, "clearselectors", 14);
		user_apply(u, "-@all", 5);
	} else {
		return kv_acl_sel_apply(&u->sel[0], op, len);
	}
	return 0;
}

static const char *apply_why(int e)
{
	switch (e) {
	case ENOENT: return "Unknown command or category name in ACL";
	case EINVAL: return "Syntax error";
	case EEXIST:
		return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and "
		       "does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
	case EISDIR:
		return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid "
		       "and does not have any effect. Try 'resetchannels' to start with an empty list "
		       "of channels";
	case ENODEV: return "The password you are trying to remove from the user does not exist";
	case EBADMSG:
		return "The password hash must be exactly 64 characters and contain only lowercase "
		       "hexadecimal characters";
	case ECHILD: return "Allowing first-arg of a subcommand is not supported";
	case ENOMEM: return "out of memory";
	default: return "Wrong format";
	}
}

static uint32_t user_pos(const void *name, size_t len, bool *found)
{
	uint32_t lo = 0, hi = nusers;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct kv_acl_user *u = users[mid];
		size_t m = u->nlen < len ? u->nlen : len;
		int d = memcmp(u->name, name, m);
		if (d < 0 || (d == 0 && u->nlen < len))
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < nusers && users[lo]->nlen == len && !memcmp(users[lo]->name, name, len);
	return lo;
}

static int user_insert(struct kv_acl_user *u)
{
	bool found;
	uint32_t at = user_pos(u->name, u->nlen, &found);
	if (nusers == capusers) {
		uint32_t cap = capusers ? capusers * 2 : 8;
		struct kv_acl_user **n = realloc(users, cap * sizeof(*n));
		if (!n)
			return -1;
		users = n;
		capusers = cap;
	}
	memmove(&users[at + 1], &users[at], (nusers - at) * sizeof(*users));
	users[at] = u;
	nusers++;
	return 0;
}

static struct kv_acl_user *default_new(void)
{
	struct kv_acl_user *u = user_new("default", 7);
	if (!u)
		return NULL;
	user_apply(u, "+@all", 5);
	user_apply(u, "~*", 2);
	user_apply(u, "&*", 2);
	user_apply(u, "on", 2);
	user_apply(u, "nopass", 6);
	user_update(u);
	return u;
}

/* default: never freed, its rules replaced in place (a pointer kept). */
bool kv_acl_default_open = true;

static void default_changed(void)
{
	kv_acl_default_open = (dflt->flags & KV_ACLU_ON) && (dflt->flags & KV_ACLU_NOPASS) && dflt->all;
}

static void users_init(void)
{
	if (nusers)
		return;
	dflt = default_new();
	if (!dflt || user_insert(dflt)) {
		fprintf(stderr, "pkvs: out of memory\n");
		abort();
	}
	default_changed();
}

uint32_t kv_acl_count(void)
{
	users_init();
	return nusers;
}

struct kv_acl_user *kv_acl_at(uint32_t i)
{
	users_init();
	return i < nusers ? users[i] : NULL;
}

struct kv_acl_user *kv_acl_get(const void *name, size_t len)
{
	bool found;
	users_init();
	uint32_t at = user_pos(name, len, &found);
	return found ? users[at] : NULL;
}

struct kv_acl_user *kv_acl_default(void)
{
	users_init();
	return dflt;
}

/* Rules as ACL SETUSER and the ACL file give them: a selector may be
 * spread over several arguments ("(~x" "+get)"), put back together. The
 * merged rules are ops of one string each (malloc'd array of spans into
 * buf, which holds the merged ones). */
struct span { const char *p; size_t len; };

static int merge_ops(const struct paste_resp_arg *ops, uint32_t n, struct span *out, uint32_t *nout,
		     struct sb *buf, uint32_t *bad)
{
	*nout = 0;
	int open = -1;
	size_t start = 0;
	for (uint32_t j = 0; j < n; j++) {
		const char *op = ops[j].p;
		size_t len = ops[j].len;
		if (open < 0 && len && op[0] == '(' && op[len - 1] != ')') {
			open = (int)j;
			start = buf->b.len;
			sb_put(buf, op, len);
			continue;
		}
		if (open >= 0) {
			sb_put(buf, " ", 1);
			sb_put(buf, op, len);
			if (len && op[len - 1] == ')') {
				out[(*nout)++] = (struct span){ (const char *)(uintptr_t)start, buf->b.len - start };
				open = -1;
			}
			continue;
		}
		out[(*nout)++] = (struct span){ op, len };
		out[*nout - 1].len |= (size_t)1 << 62;   /* not in buf */
	}
	if (open >= 0) {
		*bad = (uint32_t)open;
		return -1;
	}
	if (buf->oom)
		return -2;
	for (uint32_t i = 0; i < *nout; i++) {
		if (out[i].len & ((size_t)1 << 62))
			out[i].len &= ~((size_t)1 << 62);
		else
			out[i].p = buf->b.p + (size_t)(uintptr_t)out[i].p;
	}
	return 0;
}

/* Why staged() refused: an errno of user_apply (ENOENT ...), -1 for a
 * selector left open, ENOMEM; the rule (or the selector's first part). */
struct why_not {
	int e;
	char op[132];
};

static void why_set(struct why_not *w, int e, const char *op, size_t len)
{
	w->e = e;
	snprintf(w->op, sizeof(w->op), "%.*s", (int)strnlen(op, len < 128 ? len : 128), op);
}

/* Apply ops to a copy of u (NULL: a new user's rules): the copy, or NULL
 * and why not. */
static struct kv_acl_user *staged(const struct kv_acl_user *u, const void *name, size_t nlen,
				  const struct paste_resp_arg *ops, uint32_t n, struct why_not *w)
{
	struct kv_acl_user *t = user_new(name, nlen);
	struct span *sp = calloc(n ? n : 1, sizeof(*sp));
	struct sb buf = { 0 };
	uint32_t nsp = 0, bad = 0;
	int m = -2;
	if (!t || !sp || (u && user_copy(t, u)) || (m = merge_ops(ops, n, sp, &nsp, &buf, &bad))) {
		if (m == -1)
			why_set(w, -1, ops[bad].p, ops[bad].len);
		else
			why_set(w, ENOMEM, "", 0);
		goto fail;
	}
	for (uint32_t j = 0; j < nsp; j++) {
		int e = user_apply(t, sp[j].p, sp[j].len);
		if (e) {
			why_set(w, e, sp[j].p, sp[j].len);
			goto fail;
		}
	}
	user_update(t);
	free(sp);
	reasm_free(&buf.b);
	return t;
fail:
	user_free(t);
	free(sp);
	reasm_free(&buf.b);
	return NULL;
}

int kv_acl_setuser(const void *name, size_t nlen, const struct paste_resp_arg *ops, uint32_t n,
		   char *err, size_t cap)
{
	users_init();
	if (has_space(name, nlen)) {
		snprintf(err, cap, "ERR Usernames can't contain spaces or null characters");
		return -1;
	}
	struct kv_acl_user *u = kv_acl_get(name, nlen);
	struct why_not w;
	struct kv_acl_user *t = staged(u, name, nlen, ops, n, &w);
	if (!t) {
		if (w.e == -1)
			snprintf(err, cap, "ERR Unmatched parenthesis in acl selector starting at '%s'.",
				 w.op);
		else if (w.e == ENOMEM)
			snprintf(err, cap, "ERR out of memory");
		else
			snprintf(err, cap, "ERR Error in ACL SETUSER modifier '%s': %s", w.op,
				 apply_why(w.e));
		return -1;
	}
	if (!u) {
		if (user_insert(t)) {
			user_free(t);
			snprintf(err, cap, "ERR out of memory");
			return -1;
		}
		return 0;
	}
	user_take(u, t);                 /* the connections point at u */
	return 0;
}

void kv_acl_remove(struct kv_acl_user *u)
{
	bool found;
	uint32_t at = user_pos(u->name, u->nlen, &found);
	if (!found || users[at] != u)
		return;
	memmove(&users[at], &users[at + 1], (nusers - at - 1) * sizeof(*users));
	nusers--;
	user_free(u);
}

/* A line of the ACL file as Redis reads one: trimmed of spaces, tabs and
 * line ends, then split at each space (so two spaces make an empty
 * argument, which as a rule does nothing): spans into s. */
static uint32_t split_line(const char *s, size_t len, struct paste_resp_arg *out, uint32_t cap)
{
	while (len && strchr(" \t\r\n", s[0]))
		s++, len--;
	while (len && strchr(" \t\r\n", s[len - 1]))
		len--;
	uint32_t n = 0;
	for (size_t i = 0; len && i <= len && n < cap;) {
		const char *sp = memchr(s + i, ' ', len - i);
		size_t j = sp ? (size_t)(sp - s) : len;
		out[n++] = (struct paste_resp_arg){ s + i, j - i };
		i = j + 1;
	}
	return n;
}

static int list_push(struct kv_acl_user ***v, uint32_t *n, struct kv_acl_user *t)
{
	struct kv_acl_user **g = t ? realloc(*v, (*n + 1) * sizeof(*g)) : NULL;
	if (!g) {
		user_free(t);
		return -1;
	}
	*v = g;
	g[(*n)++] = t;
	return 0;
}

int kv_acl_load(const char *fname, const char *text, size_t len, char *err, size_t cap)
{
	users_init();
	struct kv_acl_user **nu = NULL;
	uint32_t nn = 0;
	int rc = -1;
	struct paste_resp_arg argv[1024];
	bool have_default = false;
	char e[400];
	e[0] = 0;
	for (size_t at = 0, line = 1; at < len && !e[0]; line++) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - text) : len;
		uint32_t argc = split_line(text + at, end - at, argv, 1024);
		at = end + 1;
		if (!argc)
			continue;
		const struct paste_resp_arg *name = &argv[1];
		if (argc < 2 || argv[0].len != 4 || memcmp(argv[0].p, "user", 4)) {
			snprintf(e, sizeof(e), "%s:%zu should start with user keyword followed by the "
				 "username. ", fname, line);
			break;
		}
		if (has_space(name->p, name->len)) {
			snprintf(e, sizeof(e), "'%s:%zu: username '%.*s' contains invalid characters. ",
				 fname, line, (int)(name->len < 128 ? name->len : 128), name->p);
			break;
		}
		for (uint32_t i = 0; i < nn && !e[0]; i++)
			if (nu[i]->nlen == name->len && !memcmp(nu[i]->name, name->p, name->len))
				snprintf(e, sizeof(e), "WARNING: Duplicate user '%.*s' found on line %zu. ",
					 (int)(name->len < 128 ? name->len : 128), name->p, line);
		if (e[0])
			break;
		struct why_not w;
		struct kv_acl_user *t = staged(NULL, name->p, name->len, argv + 2, argc - 2, &w);
		if (!t && w.e == -1)
			snprintf(e, sizeof(e), "%s:%zu: Unmatched parenthesis in selector definition.",
				 fname, line);
		else if (!t && w.e == ENOENT)
			snprintf(e, sizeof(e), "%s:%zu: Error in applying operation '%s': %s. ", fname,
				 line, w.op, apply_why(w.e));
		else if (!t)
			snprintf(e, sizeof(e), "%s:%zu: %s. ", fname, line, apply_why(w.e));
		else if (list_push(&nu, &nn, t))
			snprintf(e, sizeof(e), "out of memory. ");
		else
			have_default |= t->nlen == 7 && !memcmp(t->name, "default", 7);
	}
	/* Every user goes but default, which takes its new rules (or, not
	 * in the file, Redis's default ones) in place. */
	if (!e[0] && !have_default && list_push(&nu, &nn, default_new()))
		snprintf(e, sizeof(e), "out of memory. ");
	if (e[0]) {
		snprintf(err, cap, "ERR %sWARNING: ACL errors detected, no change to the previously "
			 "active ACL rules was performed", e);
		goto out;
	}
	struct kv_acl_user *d = kv_acl_default();
	for (uint32_t i = 0; i < nusers; i++)
		if (users[i] != d)
			user_free(users[i]);
	nusers = 0;
	for (uint32_t i = 0; i < nn; i++) {
		struct kv_acl_user *t = nu[i];
		if (t->nlen == 7 && !memcmp(t->name, "default", 7)) {
			user_take(d, t);
			nu[i] = d;
		}
		user_insert(nu[i]);
	}
	nn = 0;
	rc = 0;
out:
	for (uint32_t i = 0; i < nn; i++)
		user_free(nu[i]);
	free(nu);
	return rc;
}

char *kv_acl_save(void)
{
	struct sb b = { 0 };
	users_init();
	for (uint32_t i = 0; i < nusers; i++) {
		char *d = kv_acl_describe(users[i]);
		if (!d) {
			reasm_free(&b.b);
			return NULL;
		}
		sb_str(&b, "user ");
		sb_put(&b, users[i]->name, users[i]->nlen);
		sb_str(&b, " ");
		sb_str(&b, d);
		sb_str(&b, "\n");
		free(d);
	}
	return sb_done(&b);
}

/* ------------------------------------------------------------ the check */

static bool key_ok(const struct kv_acl_sel *s, const struct paste_resp_arg *k, uint32_t kflags)
{
	if (s->flags & KV_ACLS_ALLKEYS)
		return true;
	uint8_t need = 0;
	if (kflags & KV_KEY_ACCESS)
		need |= KV_ACLK_R;
	if (kflags & (KV_KEY_INSERT | KV_KEY_DELETE | KV_KEY_UPDATE))
		need |= KV_ACLK_W;
	for (uint32_t i = 0; i < s->nkeys; i++)
		if ((s->keys[i].fl & need) == need &&
		    kv_glob(s->keys[i].p, s->keys[i].len, (const uint8_t *)k->p, k->len))
			return true;
	return false;
}

static bool chan_ok(const struct kv_acl_sel *s, const struct paste_resp_arg *c, bool pattern)
{
	if (s->flags & KV_ACLS_ALLCHANNELS)
		return true;
	for (uint32_t i = 0; i < s->nchans; i++) {
		const struct kv_acl_pat *p = &s->chans[i];
		if (pattern ? p->len == c->len && !memcmp(p->p, c->p, c->len)
			    : kv_glob(p->p, p->len, (const uint8_t *)c->p, c->len))
			return true;
	}
	return false;
}

bool kv_acl_channel_ok(const struct kv_acl_user *u, const void *name, size_t len, bool pattern)
{
	const struct paste_resp_arg c = { name, len };
	for (uint32_t i = 0; i < u->nsel; i++)
		if (chan_ok(&u->sel[i], &c, pattern))
			return true;
	return false;
}

/* The channels a command names (Redis's getChannelsFromCommand for the
 * ones ACL checks): 1 argv[1] published to, 2 every argument subscribed
 * to, 3 every argument a pattern subscribed to; 0 none. */
static int chan_kind(const struct kv_cmd_rt *rt)
{
	if (!(rt->fl & KV_CMD_PUBSUB))
		return 0;
	const char *n = rt->c->name;
	if (!strcmp(n, "publish") || !strcmp(n, "spublish"))
		return 1;
	if (!strcmp(n, "subscribe") || !strcmp(n, "ssubscribe"))
		return 2;
	if (!strcmp(n, "psubscribe"))
		return 3;
	return 0;
}

struct keys_cache {
	bool init;
	int n;
	uint32_t *pos, *fl, cap;
};

static int sel_check(const struct kv_acl_sel *s, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc, uint32_t *idx,
		     struct keys_cache *kc)
{
	uint32_t id = cmd_id(rt);
	if (!(s->flags & KV_ACLS_ALLCOMMANDS) && !(rt->fl & KV_CMD_NO_AUTH) && !bit_get(s, id)) {
		bool ok = false;
		uint32_t at = rt->parent ? 2 : 1;
		for (uint32_t i = 0; i < s->nfargs && !ok && argc > at; i++)
			ok = s->fargs[i].id == id && paste_resp_arg_eq(&argv[at], s->fargs[i].arg);
		if (!ok)
			return KV_ACL_DENIED_CMD;
	}
	if (!(s->flags & KV_ACLS_ALLKEYS)) {
		if (!kc->init) {
			kc->init = true;
			kc->cap = argc;
			kc->pos = malloc(2 * (size_t)argc * sizeof(uint32_t));
			kc->fl = kc->pos ? kc->pos + argc : NULL;
			kc->n = kc->pos ? kv_cmd_getkeys(rt, argv, argc, kc->pos, kc->fl, argc) : -2;
		}
		if (kc->n == -2)
			return KV_ACL_DENIED_KEY;     /* out of memory: refuse */
		for (int j = 0; j < kc->n; j++)
			if (!key_ok(s, &argv[kc->pos[j]], kc->fl[j])) {
				*idx = kc->pos[j];
				return KV_ACL_DENIED_KEY;
			}
	}
	int kind;
	if (!(s->flags & KV_ACLS_ALLCHANNELS) && (kind = chan_kind(rt)) != 0) {
		for (uint32_t j = 1; j < (kind == 1 ? 2u : argc) && j < argc; j++)
			if (!chan_ok(s, &argv[j], kind == 3)) {
				*idx = j;
				return KV_ACL_DENIED_CHANNEL;
			}
	}
	return KV_ACL_OK;
}

int kv_acl_check(const struct kv_acl_user *u, const struct kv_cmd_rt *rt,
		 const struct paste_resp_arg *argv, uint32_t argc, uint32_t *idx)
{
	if (u->all)
		return KV_ACL_OK;
	struct keys_cache kc = { 0 };
	int relevant = KV_ACL_DENIED_CMD;
	uint32_t last = 0;
	for (uint32_t i = 0; i < u->nsel; i++) {
		uint32_t at = 0;
		int r = sel_check(&u->sel[i], rt, argv, argc, &at, &kc);
		if (r == KV_ACL_OK) {
			free(kc.pos);
			return KV_ACL_OK;
		}
		if (r > relevant || (r == relevant && at > last)) {
			relevant = r;
			last = at;
		}
	}
	free(kc.pos);
	*idx = last;
	return relevant;
}

bool kv_acl_password_ok(const struct kv_acl_user *u, const void *p, size_t n)
{
	if (u->flags & KV_ACLU_NOPASS)
		return true;
	char h[64];
	kv_acl_sha256_hex(p, n, h);
	bool ok = false;
	for (uint32_t i = 0; i < u->npass; i++) {
		uint8_t diff = 0;
		for (int j = 0; j < 64; j++)
			diff |= (uint8_t)(h[j] ^ u->pass[i][j]);
		ok |= diff == 0;
	}
	return ok;
}
