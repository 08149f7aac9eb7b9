/*
 * kv_acl_rules.c - the rules of a selector (kv_acl_rules.h): the table of
 * commands rules can name (pkvs's and Redis's it lacks) with their
 * categories, a rule applied to a selector (+cmd, -@cat, ~pattern,
 * &channel, ...), and a selector written back as rules for ACL LIST and
 * ACL GETUSER (Redis's derivation of categories from the bits). Users,
 * passwords and the check are kv_acl.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_acl_rules.h"

/* ---------------------------------------------------- the command table */

/* The commands rules name: pkvs's table (id i: kv_cmd_at(i)), then the
 * commands of Redis 7.0 pkvs lacks (their categories from cmd_meta.c, or
 * below for the types it has none of), so that rules written for Redis
 * read the same and ACL GETUSER derives the same categories from them.
 * Those never run; a user may be allowed or denied them all the same. */
static const struct { const char *name, *cats; } absent[] = {
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

void kv_acl_sel_free(struct kv_acl_sel *s)
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

int kv_acl_sel_copy(struct kv_acl_sel *d, const struct kv_acl_sel *s)
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


/* One selector rule: 0 or an errno saying why not (Redis's). */
int kv_acl_sel_apply(struct kv_acl_sel *s, const char *op, size_t len)
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
