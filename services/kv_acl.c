/*
 * kv_acl.c - users, their rules and the check of a command against them
 * (kv_acl.h), with Redis's semantics: a rule applies at once to a copy
 * of the user, and the copy replaces the user only when every rule of an
 * ACL SETUSER was good.
 *
 * A user allowed every command, key and channel by its root selector has
 * `all` set; dispatch tests that flag and nothing else (cmd_acl.c).
 * Passwords are kept as their SHA-256 in hex, as Redis keeps them (so ACL
 * LIST and an ACL file hold no password). SHA-256 is written here (about
 * 60 lines, tests/unit/test_kv_acl.c checks FIPS 180-4's vectors): pkvs
 * links no crypto library, and one hash does not warrant one.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_acl.h"

/* acl-pubsub-default (CONFIG): new users' channels. */
static bool pubsub_all(void)
{
	const char *v = kv_config_kept("acl-pubsub-default");
	return v && !strcmp(v, "allchannels");
}

/* ------------------------------------------------------------ SHA-256 */

static const uint32_t K256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t v, int k)
{
	return (v >> k) | (v << (32 - k));
}

static void sha_block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], a[8];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(a, h, sizeof(a));
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = a[7] + (ror(a[4], 6) ^ ror(a[4], 11) ^ ror(a[4], 25)) +
			      ((a[4] & a[5]) ^ (~a[4] & a[6])) + K256[i] + w[i];
		uint32_t t2 = (ror(a[0], 2) ^ ror(a[0], 13) ^ ror(a[0], 22)) +
			      ((a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]));
		memmove(&a[1], &a[0], 7 * sizeof(a[0]));
		a[4] += t1;
		a[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		h[i] += a[i];
}

void kv_acl_sha256(const void *data, size_t n, uint8_t out[32])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	const uint8_t *p = data;
	size_t left = n;
	for (; left >= 64; p += 64, left -= 64)
		sha_block(h, p);
	uint8_t last[128] = { 0 };
	memcpy(last, p, left);
	last[left] = 0x80;
	size_t tail = left < 56 ? 64 : 128;
	uint64_t bits = (uint64_t)n * 8;
	for (int i = 0; i < 8; i++)
		last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha_block(h, last);
	if (tail == 128)
		sha_block(h, last + 64);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

void kv_acl_sha256_hex(const void *p, size_t n, char out[64])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[32];
	kv_acl_sha256(p, n, d);
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
}

/* ------------------------------------------------------------ strings */

/* Text built up (descriptions, the ACL file): resp_out's growing buffer,
 * an allocation failure remembered. */
#define sb resp_out

static void sb_put(struct sb *b, const void *p, size_t n)
{
	resp_out_put(b, p, n);
}

static void sb_str(struct sb *b, const char *s)
{
	resp_out_put(b, s, strlen(s));
}

/* The text, NUL-ended (malloc'd), or NULL when memory ran out. */
static char *sb_done(struct sb *b)
{
	resp_out_put(b, "", 1);
	if (b->oom) {
		reasm_free(&b->b);
		return NULL;
	}
	return b->b.p;
}

static bool has_space(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)p[i]) || !p[i])
			return true;
	return false;
}

/* ---------------------------------------------------- the command table */

/* The commands rules name: pkvs's table (id i: kv_cmd_at(i)), then the
 * commands of Redis 7.0 pkvs lacks (their categories from cmd_meta.c, or
 * below for the types it has none of), so that rules written for Redis
 * read the same and ACL GETUSER derives the same categories from them.
 * Those never run; a user may be allowed or denied them all the same. */
static const struct { const char *name, *cats; } absent[] = {
	{ "pfadd", "write hyperloglog fast" }, { "pfcount", "read hyperloglog slow" },
	{ "pfdebug", "write hyperloglog admin slow dangerous" },
	{ "pfmerge", "write hyperloglog slow" },
	{ "pfselftest", "hyperloglog admin slow dangerous" },
	{ "xack", "write stream fast" }, { "xadd", "write stream fast" },
	{ "xautoclaim", "write stream fast" }, { "xclaim", "write stream fast" },
	{ "xdel", "write stream fast" }, { "xgroup", "slow" },
	{ "xgroup|create", "write stream slow" }, { "xgroup|createconsumer", "write stream slow" },
	{ "xgroup|delconsumer", "write stream slow" }, { "xgroup|destroy", "write stream slow" },
	{ "xgroup|help", "stream slow" }, { "xgroup|setid", "write stream slow" },
	{ "xinfo", "slow" }, { "xinfo|consumers", "read stream slow" },
	{ "xinfo|groups", "read stream slow" }, { "xinfo|help", "stream slow" },
	{ "xinfo|stream", "read stream slow" }, { "xlen", "read stream fast" },
	{ "xpending", "read stream slow" }, { "xrange", "read stream slow" },
	{ "xread", "read stream slow blocking" }, { "xreadgroup", "write stream slow blocking" },
	{ "xrevrange", "read stream slow" }, { "xsetid", "write stream fast" },
	{ "xtrim", "write stream slow" },
};

#define NONE UINT32_MAX
struct ent {
	const char *name;
	uint32_t cats;
	uint32_t parent, child, next;  /* the container; first subcommand; next sibling */
};
static struct ent ents[KV_ACL_BITS];
static uint32_t nents, npkvs;

static int cat_bit(const char *name, size_t len);

static uint32_t ent_find(const char *p, size_t len)
{
	for (uint32_t i = 0; i < nents; i++)
		if (strlen(ents[i].name) == len && !strncasecmp(ents[i].name, p, len))
			return i;
	return NONE;
}

static void ent_add(const char *name, uint32_t cats)
{
	if (nents == KV_ACL_BITS)
		abort();                        /* KV_ACL_BITS too small for the tables */
	struct ent *e = &ents[nents];
	*e = (struct ent){ name, cats, NONE, NONE, NONE };
	const char *bar = strchr(name, '|');
	if (bar && (e->parent = ent_find(name, (size_t)(bar - name))) != NONE) {
		e->next = ents[e->parent].child;
		ents[e->parent].child = nents;
	}
	nents++;
}

static void catalog_init(void)
{
	if (nents)
		return;
	npkvs = kv_cmd_count();
	for (uint32_t i = 0; i < npkvs; i++) {
		const struct kv_cmd_rt *rt = kv_cmd_at(i);
		ent_add(rt->c->name, kv_cmd_acl(rt));
	}
	for (uint32_t j = 0; j < kv_cmd_nmetas; j++)
		if (!kv_cmd_lookup(kv_cmd_metas[j].name, strlen(kv_cmd_metas[j].name)))
			ent_add(kv_cmd_metas[j].name, kv_cmd_metas[j].acl);
	for (size_t j = 0; j < sizeof(absent) / sizeof(absent[0]); j++) {
		uint32_t cats = 0;
		for (const char *p = absent[j].cats; *p;) {
			size_t len = strcspn(p, " ");
			cats |= 1u << cat_bit(p, len);
			p += len + (p[len] == ' ');
		}
		if (ent_find(absent[j].name, strlen(absent[j].name)) == NONE)
			ent_add(absent[j].name, cats);
	}
}

static uint32_t ncmds(void)
{
	catalog_init();
	return nents;
}

static uint32_t cmd_id(const struct kv_cmd_rt *rt)
{
	return (uint32_t)(rt - kv_cmd_at(0));
}

static bool bit_get(const struct kv_acl_sel *s, uint32_t id)
{
	return (s->bits[id / 64] >> (id % 64)) & 1;
}

static void bit_set(struct kv_acl_sel *s, uint32_t id, bool on)
{
	if (on) {
		s->bits[id / 64] |= 1ull << (id % 64);
	} else {
		s->bits[id / 64] &= ~(1ull << (id % 64));
		s->flags &= (uint8_t)~KV_ACLS_ALLCOMMANDS;
	}
}

static void fargs_drop(struct kv_acl_sel *s, uint32_t id)
{
	for (uint32_t i = 0; i < s->nfargs;)
		if (id == UINT32_MAX || s->fargs[i].id == id) {
			free(s->fargs[i].arg);
			s->fargs[i] = s->fargs[--s->nfargs];
		} else {
			i++;
		}
}

/* Allow or deny a command, a container with its subcommands. */
static void change_perm(struct kv_acl_sel *s, uint32_t id, bool allow, bool fargs)
{
	bit_set(s, id, allow);
	if (fargs)
		fargs_drop(s, id);
	for (uint32_t c = ents[id].child; c != NONE; c = ents[c].next)
		bit_set(s, c, allow);
}

static int cat_bit(const char *name, size_t len)
{
	for (int i = 0; kv_acl_names[i]; i++)
		if (strlen(kv_acl_names[i]) == len && !strncasecmp(kv_acl_names[i], name, len))
			return i;
	return -1;
}

static void set_category(struct kv_acl_sel *s, int cat, bool allow, bool fargs)
{
	for (uint32_t id = 0; id < ncmds(); id++)
		if (ents[id].cats & (1u << cat))
			change_perm(s, id, allow, fargs);
}

static void count_category(const struct kv_acl_sel *s, int cat, uint32_t *on, uint32_t *off)
{
	*on = *off = 0;
	for (uint32_t id = 0; id < ncmds(); id++)
		if (ents[id].cats & (1u << cat)) {
			if (bit_get(s, id))
				(*on)++;
			else
				(*off)++;
		}
}

/* ------------------------------------------------------------ selectors */

static void sel_free(struct kv_acl_sel *s)
{
	for (uint32_t i = 0; i < s->nkeys; i++)
		free(s->keys[i].p);
	for (uint32_t i = 0; i < s->nchans; i++)
		free(s->chans[i].p);
	fargs_drop(s, UINT32_MAX);
	free(s->keys);
	free(s->chans);
	free(s->fargs);
	memset(s, 0, sizeof(*s));
}

static int pats_copy(struct kv_acl_pat **dst, const struct kv_acl_pat *src, uint32_t n)
{
	*dst = NULL;
	if (!n)
		return 0;
	if (!(*dst = calloc(n, sizeof(**dst))))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		(*dst)[i] = src[i];
		if (!((*dst)[i].p = malloc(src[i].len + 1)))
			return -1;
		memcpy((*dst)[i].p, src[i].p, src[i].len + 1);
	}
	return 0;
}

static int sel_copy(struct kv_acl_sel *d, const struct kv_acl_sel *s)
{
	*d = *s;
	d->keys = d->chans = NULL;
	d->fargs = NULL;
	d->nkeys = d->nchans = d->nfargs = 0;
	if (pats_copy(&d->keys, s->keys, s->nkeys))
		return -1;
	d->nkeys = s->nkeys;
	if (pats_copy(&d->chans, s->chans, s->nchans))
		return -1;
	d->nchans = s->nchans;
	if (s->nfargs) {
		if (!(d->fargs = calloc(s->nfargs, sizeof(*d->fargs))))
			return -1;
		for (uint32_t i = 0; i < s->nfargs; i++) {
			if (!(d->fargs[i].arg = strdup(s->fargs[i].arg)))
				return -1;
			d->fargs[i].id = s->fargs[i].id;
			d->nfargs++;
		}
	}
	return 0;
}

static int pat_add(struct kv_acl_pat **v, uint32_t *n, const char *p, size_t len, uint8_t fl)
{
	for (uint32_t i = 0; i < *n; i++)
		if ((*v)[i].len == len && !memcmp((*v)[i].p, p, len)) {
			(*v)[i].fl |= fl;
			return 0;
		}
	struct kv_acl_pat *nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return -1;
	*v = nv;
	char *c = malloc(len + 1);
	if (!c)
		return -1;
	memcpy(c, p, len);
	c[len] = 0;
	nv[(*n)++] = (struct kv_acl_pat){ c, (uint32_t)len, fl };
	return 0;
}

static void pats_clear(struct kv_acl_pat **v, uint32_t *n)
{
	for (uint32_t i = 0; i < *n; i++)
		free((*v)[i].p);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* A command or "container|sub" by name, any case: its id or NONE. A
 * name with more than one '|' is none (Redis's lookup). */
static uint32_t lookup(const char *p, size_t len)
{
	ncmds();
	const struct kv_cmd_rt *rt = kv_cmd_lookup(p, len);
	if (rt)
		return cmd_id(rt);
	for (uint32_t i = npkvs; i < nents; i++)
		if (strlen(ents[i].name) == len && !strncasecmp(ents[i].name, p, len))
			return i;
	return NONE;
}

static bool op_is(const char *op, size_t len, const char *word)
{
	return strlen(word) == len && !strncasecmp(op, word, len);
}

/* One selector rule: 0 or an errno saying why not (Redis's). */
static int sel_apply(struct kv_acl_sel *s, const char *op, size_t len)
{
	if (op_is(op, len, "allkeys") || (len == 2 && !memcmp(op, "~*", 2))) {
		s->flags |= KV_ACLS_ALLKEYS;
		pats_clear(&s->keys, &s->nkeys);
	} else if (op_is(op, len, "resetkeys")) {
		s->flags &= (uint8_t)~KV_ACLS_ALLKEYS;
		pats_clear(&s->keys, &s->nkeys);
	} else if (op_is(op, len, "allchannels") || (len == 2 && !memcmp(op, "&*", 2))) {
		s->flags |= KV_ACLS_ALLCHANNELS;
		pats_clear(&s->chans, &s->nchans);
	} else if (op_is(op, len, "resetchannels")) {
		s->flags &= (uint8_t)~KV_ACLS_ALLCHANNELS;
		pats_clear(&s->chans, &s->nchans);
	} else if (op_is(op, len, "allcommands") || op_is(op, len, "+@all")) {
		memset(s->bits, 0xff, sizeof(s->bits));
		s->flags |= KV_ACLS_ALLCOMMANDS;
		s->future = true;
		fargs_drop(s, UINT32_MAX);
	} else if (op_is(op, len, "nocommands") || op_is(op, len, "-@all")) {
		memset(s->bits, 0, sizeof(s->bits));
		s->flags &= (uint8_t)~KV_ACLS_ALLCOMMANDS;
		s->future = false;
		fargs_drop(s, UINT32_MAX);
	} else if (op[0] == '~' || op[0] == '%') {
		if (s->flags & KV_ACLS_ALLKEYS)
			return EEXIST;
		uint8_t fl = 0;
		size_t off = 1;
		if (op[0] == '%') {
			for (; off < len; off++) {
				char c = (char)toupper((unsigned char)op[off]);
				if (c == 'R' && !(fl & KV_ACLK_R)) {
					fl |= KV_ACLK_R;
				} else if (c == 'W' && !(fl & KV_ACLK_W)) {
					fl |= KV_ACLK_W;
				} else if (op[off] == '~') {
					off++;
					break;
				} else {
					return EINVAL;
				}
			}
			if (!fl)
				return EINVAL;
		} else {
			fl = KV_ACLK_R | KV_ACLK_W;
		}
		if (has_space(op + off, len - off))
			return EINVAL;
		if (pat_add(&s->keys, &s->nkeys, op + off, len - off, fl))
			return ENOMEM;
		s->flags &= (uint8_t)~KV_ACLS_ALLKEYS;
	} else if (op[0] == '&') {
		if (s->flags & KV_ACLS_ALLCHANNELS)
			return EISDIR;
		if (has_space(op + 1, len - 1))
			return EINVAL;
		if (pat_add(&s->chans, &s->nchans, op + 1, len - 1, 0))
			return ENOMEM;
		s->flags &= (uint8_t)~KV_ACLS_ALLCHANNELS;
	} else if ((op[0] == '+' || op[0] == '-') && len > 1 && op[1] == '@') {
		int cat = cat_bit(op + 2, len - 2);
		if (cat < 0)
			return ENOENT;
		set_category(s, cat, op[0] == '+', true);
	} else if (op[0] == '+' && len > 1) {
		const char *bar = NULL;
		for (size_t i = 1; i < len; i++)
			if (op[i] == '|')
				bar = op + i;
		if (!bar) {
			uint32_t id = lookup(op + 1, len - 1);
			if (id == NONE)
				return ENOENT;
			change_perm(s, id, true, true);
			return 0;
		}
		uint32_t id = lookup(op + 1, (size_t)(bar - op - 1));
		if (id == NONE)
			return ENOENT;
		if (ents[id].parent != NONE)
			return ECHILD;
		size_t sl = len - (size_t)(bar + 1 - op);
		if (!sl)
			return EINVAL;
		if (ents[id].child != NONE) {
			uint32_t sub = lookup(op + 1, len - 1);
			if (sub == NONE)
				return ENOENT;
			change_perm(s, sub, true, true);
			return 0;
		}
		for (uint32_t i = 0; i < s->nfargs; i++)
			if (s->fargs[i].id == id && strlen(s->fargs[i].arg) == sl &&
			    !strncasecmp(s->fargs[i].arg, bar + 1, sl))
				return 0;
		struct kv_acl_farg *nf = realloc(s->fargs, (s->nfargs + 1) * sizeof(*nf));
		if (!nf)
			return ENOMEM;
		s->fargs = nf;
		if (!(nf[s->nfargs].arg = strndup(bar + 1, sl)))
			return ENOMEM;
		nf[s->nfargs++].id = id;
	} else if (op[0] == '-' && len > 1) {
		uint32_t id = lookup(op + 1, len - 1);
		if (id == NONE)
			return ENOENT;
		change_perm(s, id, false, true);
	} else {
		return EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------- users */

static struct kv_acl_user **users;
static uint32_t nusers, capusers;
struct kv_acl_user kv_acl_nobody = { .name = (char *)"default", .nlen = 7 };

static void user_clear(struct kv_acl_user *u)
{
	for (uint32_t i = 0; i < u->nsel; i++)
		sel_free(&u->sel[i]);
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
		if (sel_copy(&dst->sel[i], &src->sel[i]))
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
			int e = sel_apply(s, op + i, j - i);
			if (e) {
				sel_free(s);
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
			sel_free(&u->sel[i]);
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
		return sel_apply(&u->sel[0], op, len);
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

/* --------------------------------------------------------- descriptions */

static void pat_put(struct sb *b, const struct kv_acl_pat *p)
{
	if (p->fl == (KV_ACLK_R | KV_ACLK_W))
		sb_str(b, "~");
	else if (p->fl == KV_ACLK_R)
		sb_str(b, "%R~");
	else
		sb_str(b, "%W~");
	sb_put(b, p->p, p->len);
}

/* The command rules as Redis derives them from the bits: +@all or -@all,
 * then the category that best fits what differs, again and again, then
 * single commands (and first arguments) for the rest. */
static void cmds_put(struct sb *b, const struct kv_acl_sel *s)
{
	struct kv_acl_sel fake = { 0 }, temp = { 0 };
	bool additive = !s->future;
	sb_str(b, additive ? "-@all" : "+@all");
	if (!additive)
		memset(fake.bits, 0xff, sizeof(fake.bits));
	memcpy(temp.bits, s->bits, sizeof(s->bits));
	bool applied[32] = { 0 };
	for (;;) {
		int best = -1;
		uint32_t mindiff = UINT32_MAX, maxsame = 0;
		for (int j = 0; kv_acl_names[j]; j++) {
			if (applied[j])
				continue;
			uint32_t on, off;
			count_category(&temp, j, &on, &off);
			uint32_t diff = additive ? off : on, same = additive ? on : off;
			if (same > diff && (diff < mindiff || (diff == mindiff && same > maxsame))) {
				best = j;
				mindiff = diff;
				maxsame = same;
			}
		}
		if (best < 0)
			break;
		set_category(&fake, best, additive, false);
		set_category(&temp, best, !additive, false);
		sb_str(b, additive ? " +@" : " -@");
		sb_str(b, kv_acl_names[best]);
		applied[best] = true;
	}
	for (uint32_t id = 0; id < ncmds(); id++) {
		bool ub = bit_get(s, id);
		if (ub != bit_get(&fake, id)) {
			sb_str(b, ub ? " +" : " -");
			sb_str(b, ents[id].name);
			change_perm(&fake, id, ub, false);
		}
		if (!ub)
			for (uint32_t i = 0; i < s->nfargs; i++)
				if (s->fargs[i].id == id) {
					sb_str(b, " +");
					sb_str(b, ents[id].name);
					sb_str(b, "|");
					sb_str(b, s->fargs[i].arg);
				}
	}
}

/* A selector's keys (or channels) as ACL GETUSER gives them: "~*" ("&*")
 * for all, else the patterns, space-separated. */
static void pats_put(struct sb *b, const struct kv_acl_sel *s, bool keys)
{
	if (s->flags & (keys ? KV_ACLS_ALLKEYS : KV_ACLS_ALLCHANNELS)) {
		sb_str(b, keys ? "~*" : "&*");
		return;
	}
	for (uint32_t i = 0; i < (keys ? s->nkeys : s->nchans); i++) {
		if (i)
			sb_str(b, " ");
		if (keys) {
			pat_put(b, &s->keys[i]);
		} else {
			sb_str(b, "&");
			sb_put(b, s->chans[i].p, s->chans[i].len);
		}
	}
}

/* As ACL LIST has it: keys, channels (resetchannels first unless all),
 * command rules. */
static void sel_put(struct sb *b, const struct kv_acl_sel *s)
{
	pats_put(b, s, true);
	if ((s->flags & KV_ACLS_ALLKEYS) || s->nkeys)
		sb_str(b, " ");
	if (!(s->flags & KV_ACLS_ALLCHANNELS))
		sb_str(b, "resetchannels ");
	pats_put(b, s, false);
	if ((s->flags & KV_ACLS_ALLCHANNELS) || s->nchans)
		sb_str(b, " ");
	cmds_put(b, s);
}

char *kv_acl_describe(const struct kv_acl_user *u)
{
	static const char *const fl[] = { "on", "off", "nopass", "skip-sanitize-payload",
					  "sanitize-payload" };
	struct sb b = { 0 };
	for (int i = 0; i < 5; i++)
		if (u->flags & (1u << i)) {
			sb_str(&b, fl[i]);
			sb_str(&b, " ");
		}
	for (uint32_t i = 0; i < u->npass; i++) {
		sb_str(&b, "#");
		sb_put(&b, u->pass[i], 64);
		sb_str(&b, " ");
	}
	for (uint32_t i = 0; i < u->nsel; i++) {
		if (i)
			sb_str(&b, " (");
		sel_put(&b, &u->sel[i]);
		if (i)
			sb_str(&b, ")");
	}
	return sb_done(&b);
}

char *kv_acl_describe_cmds(const struct kv_acl_sel *s)
{
	struct sb b = { 0 };
	cmds_put(&b, s);
	return sb_done(&b);
}

char *kv_acl_describe_keys(const struct kv_acl_sel *s)
{
	struct sb b = { 0 };
	pats_put(&b, s, true);
	return sb_done(&b);
}

char *kv_acl_describe_chans(const struct kv_acl_sel *s)
{
	struct sb b = { 0 };
	pats_put(&b, s, false);
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
