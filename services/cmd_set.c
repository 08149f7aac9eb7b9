/*
 * cmd_set.c - pkvs's set commands: SADD, SREM, SMEMBERS, SISMEMBER,
 * SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE, SSCAN, with Redis 7.0's
 * replies and errors in RESP2 and RESP3 (kv_set.h keeps the members),
 * the table of every set command (the algebra, SINTER ... SDIFFSTORE, is
 * cmd_setop.c's), and what the sorted-set commands share with them:
 * member arguments held where they landed, set-typed replies, SCAN
 * cursors of a collection, random picks.
 *
 * Order: members come in the tree's order (bytes; a member over 400
 * bytes by its first 375 and then its digest), not Redis's (an intset's
 * numeric order, a hash table's); Redis promises none.
 *
 * Random members (SRANDMEMBER, SPOP): an index drawn uniformly below the
 * count, and the tree passed to it a leaf at a time (kv_cwalk_skip:
 * O(index / members per leaf), ~60-90 short members a leaf); several
 * draws are sorted and taken in one walk, so a count of k costs one walk
 * of the set's leaves plus k steps, whatever k. Each member is equally
 * likely, as Redis's dictGetFairRandomKey makes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd_set.h"
#include "kv_notify.h"

static const char wrongtype[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

/* ------------------------------------------------------------ shared */

void kv_name_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		 struct kv_name *nm, struct paste_body *b)
{
	nm->p = (const uint8_t *)a->p;
	nm->len = a->len;
	nm->held = NULL;
	if (a->len > KV_INLINE && kv_arg_hold(x, kv, a, b) == 1)
		nm->held = b;
}

void kv_name_done(struct kv *kv, struct kv_name *nm)
{
	if (nm->held)
		paste_body_release((struct paste_body *)nm->held, kv->store);
	nm->held = NULL;
}

bool kv_members_ok(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t from,
		   uint32_t to, uint32_t step)
{
	for (uint32_t i = from; i < to; i += step)
		if (a[i].len > kv_max_key(kv)) {
			resp_error(x, "ERR member length %zu is over %zu bytes (pkvs's limit)", a[i].len,
				   kv_max_key(kv));
			return false;
		}
	return true;
}

int kv_cset_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		struct kv_cset *s, enum kv_type type, bool create, bool read)
{
	if (!kv_arg_key(x, kv, a, &s->key))
		return -EINVAL;
	int r = kv_cset_open(kv, s, type, read);
	if (r == -EMEDIUMTYPE) {
		resp_error(x, wrongtype);
		return -EINVAL;
	}
	if (r == -ENOENT && create) {
		kv_cset_new(kv, s, type);
		return 0;
	}
	return r;
}

void kv_reply_cset_errno(struct resp_ctx *x, int r)
{
	if (r == -ENAMETOOLONG && !server_store_failed(x->w))
		resp_error(x, "ERR member too long (pkvs's limit: %u store buffers for a member over "
			   "%u bytes)", PASTE_BTREE_MAX_EXTENTS, KV_INLINE);
	else
		kv_reply_errno(x, r);
}

int kv_proto(const struct resp_ctx *x)
{
	return x->r->proto == 3 ? 3 : 2;
}

void kv_notify_stored(struct kv *kv, struct kv_key *dst, bool had, uint64_t n, uint32_t cls,
		      const char *event)
{
	(void)kv;
	if (n)
		kv_notify(cls, event, dst);
	else if (had)
		kv_notify(KV_NOTIFY_GENERIC, "del", dst);
}

bool kv_key_held(struct kv *kv, struct kv_key *k)
{
	struct kv_obj o;
	return kv_notify_on && kv_lookup(kv, k, &o, false) == 0;
}

void kv_out_set(struct kv_out *o, uint64_t n)
{
	char l[32];
	int len = paste_resp_put_set(l, sizeof(l), kv_proto(o->x), n);
	if (len > 0)
		kv_out_put(o, l, (size_t)len);
}

/* A number setting of CONFIG (the sizes Redis's encodings follow): its
 * value, units (k, kb, m, mb, g, gb) allowed, or dflt. */
uint64_t kv_config_num(const char *name, uint64_t dflt)
{
	const char *s = kv_config_kept(name);
	if (!s)
		return dflt;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return dflt;
	static const struct { const char *u; uint64_t m; } units[] = {
		{ "k", 1000 }, { "kb", 1024 }, { "m", 1000000 }, { "mb", 1u << 20 },
		{ "g", 1000000000 }, { "gb", 1u << 30 },
	};
	for (size_t i = 0; *end && i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcasecmp(end, units[i].u))
			return v * units[i].m;
	return v;
}

static void reply_names_after(struct resp_ctx *x, const char *pre, const struct kv_names *m,
			      bool set_type);

/* A command of both families by its name's first letter (SREM/ZREM,
 * SCARD/ZCARD, SSCAN/ZSCAN). */
static enum kv_type type_of(const struct paste_resp_arg *name)
{
	return (name->p[0] | 0x20) == 'z' ? KV_ZSET : KV_SET;
}

/* ------------------------------------------------------------ SCAN cursors */

/* As SCAN's (cmd_keyspace.c): a cursor names where the last call stopped
 * (the tree key of the first member it did not return), kept for the
 * last CSCAN_SLOTS calls of SSCAN and ZSCAN. */
#define CSCAN_SLOTS 256u
static struct cscan_slot {
	uint64_t id;
	uint16_t tlen;
	uint8_t t[PASTE_BTREE_MAX_KEY];
} cscans[CSCAN_SLOTS];
static uint64_t cscan_next = 1;

void kv_cset_scan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	enum kv_type type = type_of(&a[0]);
	uint64_t cursor;
	if (!kv_arg_cursor(&a[2], &cursor)) {
		resp_error(x, "ERR invalid cursor");
		return;
	}
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, type, false, true);
	if (r == -EINVAL)
		return;
	if (r) {
		resp_send(x, "*2\r\n$1\r\n0\r\n*0\r\n", 15);
		return;
	}
	int64_t count;
	const struct paste_resp_arg *match;
	if (!kv_arg_scan(x, a, n, 3, &count, &match))
		return;
	/* A collection Redis would keep small (an intset, a listpack) is
	 * answered whole, cursor 0, whatever the cursor and COUNT. */
	bool whole = type == KV_SET ? kv_set_intset(kv, &s.o, kv_config_num("set-max-intset-entries", 512))
				    : kv_zset_listpack(kv, &s.o, kv_config_num("zset-max-listpack-entries", 128),
						       kv_config_num("zset-max-listpack-value", 64));
	/* A sorted set's walk is of its score index: in Redis's order (a
	 * small one's is the order it answers in), the score in the key. */
	uint8_t kind = type == KV_ZSET ? KV_ZSET_SCORE : KV_SET_MEMBER;
	uint32_t skip = type == KV_ZSET ? KV_ZSCORE : 0;
	struct kv_cwalk w;
	if (!whole && cursor) {
		struct cscan_slot *from = &cscans[cursor % CSCAN_SLOTS];
		if (from->id != cursor ||
		    !kv_cwalk_at(kv, &w, s.o.coll.id, kind, skip, from->t, from->tlen)) {
			resp_error(x, "ERR invalid cursor (pkvs keeps the last %u SSCAN and ZSCAN cursors)",
				   CSCAN_SLOTS);
			return;
		}
	} else {
		kv_cwalk_init(kv, &w, s.o.coll.id, kind, skip, false, NULL, 0);
	}
	if (whole && type == KV_SET) {
		/* As Redis's intset: every member, in ascending values. */
		struct kv_names m = { 0 };
		while ((r = kv_cwalk_next(kv, &w)) == 1)
			if (!match || kv_glob(match->p, match->len, w.name, w.nlen))
				kv_names_add(&m, w.name, w.nlen);
		if (r < 0)
			kv_reply_errno(x, r);
		else
			reply_names_after(x, "*2\r\n$1\r\n0\r\n", &m, false);
		kv_names_free(&m);
		return;
	}
	uint64_t steps = whole ? UINT64_MAX : (uint64_t)count, seen = 0, next = 0;
	struct resp_out body = { 0 };
	uint64_t found = 0;
	while ((r = kv_cwalk_next(kv, &w)) == 1) {
		if (seen == steps) {
			next = cscan_next++;
			struct cscan_slot *sl = &cscans[next % CSCAN_SLOTS];
			sl->id = next;
			sl->tlen = (uint16_t)w.tlen;
			memcpy(sl->t, w.t, w.tlen);
			break;
		}
		seen++;
		if (match && !kv_glob(match->p, match->len, w.name, w.nlen))
			continue;
		resp_out_bulk(&body, w.name, w.nlen);
		found++;
		if (type == KV_ZSET) {
			char num[40];
			int l = kv_zscore_str(num, sizeof(num), kv_zwalk_scoreof(&w), whole);
			resp_out_bulk(&body, num, (size_t)l);
		}
	}
	if (r < 0) {
		free(body.b.p);
		kv_reply_errno(x, r);
		return;
	}
	char head[64];
	int hl = snprintf(head, sizeof(head), "*2\r\n$%d\r\n%" PRIu64 "\r\n*%" PRIu64 "\r\n",
			  snprintf(NULL, 0, "%" PRIu64, next), next, type == KV_ZSET ? found * 2 : found);
	resp_out_send(x, head, hl, &body);
}

/* ------------------------------------------------------------ writes */

static void cmd_sadd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (!kv_members_ok(x, kv, a, 2, n, 1))
		return;
	struct kv_cset s;
	if (kv_cset_arg(x, kv, &a[1], &s, KV_SET, true, false))
		return;
	uint64_t bytes = 0;
	for (uint32_t i = 2; i < n; i++)
		bytes += a[i].len > KV_INLINE ? a[i].len : 0;
	int64_t added = 0;
	kv_cset_prepare(kv, n - 2, bytes);
	int r = kv_cset_begin(kv, &s, bytes);
	for (uint32_t i = 2; r == 0 && i < n; i++) {
		struct kv_name nm;
		struct paste_body b;
		kv_name_arg(x, kv, &a[i], &nm, &b);
		int got = kv_set_add(kv, &s, &nm);
		kv_name_done(kv, &nm);
		if (got < 0)
			r = got;
		else
			added += got;
	}
	r = kv_cset_end(kv, &s, r);
	if (r) {
		kv_reply_cset_errno(x, r);
		return;
	}
	if (added)
		kv_notify(KV_NOTIFY_SET, "sadd", &s.key);
	resp_int(x, added);
}

/* SREM, ZREM key member...: the members removed in one group (the
 * last one takes the key). */
void kv_cset_rem_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	enum kv_type type = type_of(&a[0]);
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, type, false, false);
	if (r) {
		if (r == -ENOENT)
			resp_int(x, 0);
		return;
	}
	int64_t removed = 0;
	uint64_t before = s.o.coll.count;
	kv_cset_prepare(kv, (n - 2) * (type == KV_ZSET ? 2u : 1u), 0);
	r = kv_cset_begin(kv, &s, 0);
	for (uint32_t i = 2; r == 0 && i < n && s.o.coll.count; i++) {
		int got = kv_cset_rem(kv, &s, a[i].p, a[i].len);
		if (got < 0)
			r = got;
		else
			removed += got;
	}
	r = kv_cset_end(kv, &s, r);
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	if (removed) {
		kv_notify(type == KV_ZSET ? KV_NOTIFY_ZSET : KV_NOTIFY_SET,
			  type == KV_ZSET ? "zrem" : "srem", &s.key);
		if ((uint64_t)removed == before)
			kv_notify(KV_NOTIFY_GENERIC, "del", &s.key);
	}
	resp_int(x, removed);
}

/* SMOVE src dst member: one group for both sets. */
static void cmd_smove(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_cset src, dst;
	int r = kv_cset_arg(x, kv, &a[1], &src, KV_SET, false, false);
	if (r) {
		if (r == -ENOENT)
			resp_int(x, 0);          /* dst's type is not looked at */
		return;
	}
	if (!kv_arg_key(x, kv, &a[2], &dst.key))
		return;
	r = kv_cset_open(kv, &dst, KV_SET, false);
	if (r == -EMEDIUMTYPE) {
		resp_error(x, wrongtype);
		return;
	}
	if (a[1].len == a[2].len && memcmp(a[1].p, a[2].p, a[1].len) == 0) {
		resp_int(x, kv_set_has(kv, &src, a[3].p, a[3].len));
		return;
	}
	if (!kv_set_has(kv, &src, a[3].p, a[3].len)) {
		resp_int(x, 0);
		return;
	}
	if (r == -ENOENT)
		kv_cset_new(kv, &dst, KV_SET);
	uint64_t bytes = a[3].len > KV_INLINE ? a[3].len : 0, before = src.o.coll.count;
	int added = 0;
	kv_admit(kv, bytes);
	if ((r = kv_begin(kv)) == 0) {
		r = kv_set_rem(kv, &src, a[3].p, a[3].len);
		if (r >= 0) {
			/* Redis's order: src's events, then dst's "new" (the
			 * core's, at the add) and "sadd". */
			kv_notify(KV_NOTIFY_SET, "srem", &src.key);
			if (before == 1)
				kv_notify(KV_NOTIFY_GENERIC, "del", &src.key);
			struct kv_name nm;
			struct paste_body b;
			kv_name_arg(x, kv, &a[3], &nm, &b);
			r = added = kv_set_add(kv, &dst, &nm);
			kv_name_done(kv, &nm);
		}
		if (r >= 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	if (r < 0) {
		kv_reply_cset_errno(x, r);
		return;
	}
	if (added > 0)
		kv_notify(KV_NOTIFY_SET, "sadd", &dst.key);
	resp_int(x, 1);
}

/* ------------------------------------------------------------ reads */

void kv_cset_card_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, type_of(&a[0]), false, true);
	if (r != -EINVAL)
		resp_int(x, r ? 0 : (int64_t)s.o.coll.count);
}

static void cmd_sismember(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	(void)n;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_SET, false, true);
	if (r != -EINVAL)
		resp_int(x, r == 0 && kv_set_has(kv, &s, a[2].p, a[2].len));
}

static void cmd_smismember(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_SET, false, true);
	if (r == -EINVAL)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, n - 2);
	for (uint32_t i = 2; i < n; i++)
		kv_out_int(&o, r == 0 && kv_set_has(kv, &s, a[i].p, a[i].len));
	kv_out_end(&o);
}

/* An integer as Redis's intset holds one (string2ll), or not. */
static bool ll_of(const uint8_t *p, size_t len, int64_t *v)
{
	struct paste_resp_arg a = { (const char *)p, len };
	return paste_resp_arg_i64(&a, v) == 0;
}

static int64_t *sort_vals;

static int cmp_val(const void *pa, const void *pb)
{
	int64_t a = sort_vals[*(const uint64_t *)pa], b = sort_vals[*(const uint64_t *)pb];
	return (a > b) - (a < b);
}

/* Members gathered in m sent as a set reply (RESP2: an array): in
 * Redis's order when it would keep them as an intset (every one an
 * integer, set-max-intset-entries at most: ascending values), else as
 * gathered (the tree's order). */
static void reply_names_after(struct resp_ctx *x, const char *pre, const struct kv_names *m,
			      bool set_type)
{
	if (m->oom) {
		kv_reply_errno(x, -ENOMEM);
		return;
	}
	uint64_t n = m->n, *order = NULL;
	int64_t *vals = NULL;
	if (n > 1 && n <= kv_config_num("set-max-intset-entries", 512) &&
	    (vals = malloc(sizeof(*vals) * n)) && (order = malloc(sizeof(*order) * n))) {
		uint64_t i = 0;
		for (; i < n; i++) {
			size_t len;
			const uint8_t *p = kv_names_get(m, i, &len);
			if (!ll_of(p, len, &vals[i]))
				break;
			order[i] = i;
		}
		if (i == n) {
			sort_vals = vals;
			qsort(order, n, sizeof(*order), cmp_val);
		} else {
			free(order);
			order = NULL;
		}
	}
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_put(&o, pre, strlen(pre));
	if (set_type)
		kv_out_set(&o, n);
	else
		kv_out_array(&o, n);
	for (uint64_t i = 0; i < n && !o.r; i++) {
		size_t len;
		const uint8_t *p = kv_names_get(m, order ? order[i] : i, &len);
		kv_out_bulk(&o, p, len);
	}
	kv_out_end(&o);
	free(vals);
	free(order);
}

void kv_reply_names(struct resp_ctx *x, const struct kv_names *m, bool set_type)
{
	reply_names_after(x, "", m, set_type);
}

/* Every member of s, gathered in DRAM: 0 or a failure. */
static int gather_all(struct kv *kv, const struct kv_cset *s, struct kv_names *m)
{
	struct kv_cwalk w;
	int r;
	kv_cwalk_init(kv, &w, s->o.coll.id, KV_SET_MEMBER, 0, false, NULL, 0);
	while ((r = kv_cwalk_next(kv, &w)) == 1 && !m->oom)
		kv_names_add(m, w.name, w.nlen);
	if (r == 0 && m->n != s->o.coll.count)
		r = -EBADMSG;                   /* the record's count and the members disagree */
	return r < 0 ? r : m->oom ? -ENOMEM : 0;
}

/* Every member of s as a set reply (RESP2: an array). */
static void reply_all(struct resp_ctx *x, struct kv *kv, const struct kv_cset *s, bool set_type)
{
	struct kv_names m = { 0 };
	int r = gather_all(kv, s, &m);
	if (r)
		kv_reply_errno(x, r);
	else
		kv_reply_names(x, &m, set_type);
	kv_names_free(&m);
}

static void cmd_smembers(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)n;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_SET, false, true);
	if (r == -EINVAL)
		return;
	if (r)
		resp_set(x, 0);
	else
		reply_all(x, kv, &s, true);
}

/* ------------------------------------------------------------ random members */

/* Members at the sorted indexes idx[0..k) of a collection's entries of
 * one kind, in one walk: fn(arg, j, walk) for the j-th (repeated indexes
 * repeat it). 0, or the walk's failure. */
int kv_cset_pick(struct kv *kv, uint64_t id, uint8_t kind, const uint64_t *idx, uint64_t k,
		 kv_pick_fn fn, void *arg)
{
	struct kv_cwalk w;
	kv_cwalk_init(kv, &w, id, kind, 0, false, NULL, 0);
	uint64_t at = 0;                        /* the index the walk returns next */
	for (uint64_t j = 0; j < k; j++) {
		if (j && idx[j] == idx[j - 1]) {
			int r = fn(arg, j, &w);
			if (r)
				return r;
			continue;
		}
		if (idx[j] > at)
			at += kv_cwalk_skip(&w, idx[j] - at, NULL, 0);
		int r = kv_cwalk_next(kv, &w);
		if (r != 1)
			return r < 0 ? r : -EBADMSG;
		at++;
		if ((r = fn(arg, j, &w)))
			return r;
	}
	return 0;
}

void kv_names_add(struct kv_names *s, const uint8_t *p, size_t len)
{
	if (s->oom)
		return;
	/* Small first (most lists are a pop's one or a few names): sizes
	 * glibc's thread cache serves without its arena lock or bins. */
	if (s->n + 2 > s->ncap) {
		uint64_t nc = s->ncap ? s->ncap * 2 : 16;
		size_t *na = realloc(s->at, sizeof(*na) * nc);
		if (!na) {
			s->oom = true;
			return;
		}
		s->at = na;
		s->ncap = nc;
	}
	if (s->used + len > s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		while (nc < s->used + len)
			nc *= 2;
		uint8_t *nb = realloc(s->bytes, nc);
		if (!nb) {
			s->oom = true;
			return;
		}
		s->bytes = nb;
		s->cap = nc;
	}
	if (s->n == 0)
		s->at[0] = 0;
	if (len)
		memcpy(s->bytes + s->used, p, len);
	s->used += len;
	s->at[++s->n] = s->used;
}

void kv_names_free(struct kv_names *s)
{
	free(s->bytes);
	free(s->at);
	*s = (struct kv_names){ 0 };
}

/* From this size SPOP of one member samples by a random descent: below
 * it an exact pick walks a few leaves at most (~60-90 members a leaf),
 * and Redis's suite checks the distribution of small sets. */
#define SAMPLE_MIN 4096u

static int pick_name(void *arg, uint64_t j, const struct kv_cwalk *w)
{
	(void)j;
	kv_names_add(arg, w->name, w->nlen);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A batch of draws with repetition (Redis's SRANDMEMBER_RANDOM_SAMPLE_LIMIT
 * is its own; this bounds the DRAM of one batch). */
#define PICK_BATCH 1000u

/* SRANDMEMBER key count < 0: |count| members drawn with repetition,
 * answered in the order drawn (each batch sorted for one walk, then
 * shuffled: the same as the draws in order). */
static int reply_draws(struct kv_out *o, struct kv *kv, const struct kv_cset *s, uint64_t count)
{
	uint64_t *idx = malloc(sizeof(*idx) * PICK_BATCH);
	if (!idx)
		return -ENOMEM;
	int r = 0;
	while (count && !r && !o->r) {
		uint64_t k = count < PICK_BATCH ? count : PICK_BATCH;
		count -= k;
		for (uint64_t j = 0; j < k; j++)
			idx[j] = kv_rand_below(s->o.coll.count);
		qsort(idx, k, sizeof(*idx), cmp_u64);
		struct kv_names got = { 0 };
		r = kv_cset_pick(kv, s->o.coll.id, KV_SET_MEMBER, idx, k, pick_name, &got);
		if (r == 0 && got.oom)
			r = -ENOMEM;
		/* idx serves again as a random permutation (Fisher-Yates) of
		 * what was picked */
		for (uint64_t j = 0; r == 0 && j < k; j++)
			idx[j] = j;
		for (uint64_t j = k; r == 0 && j > 1; j--) {
			uint64_t i = kv_rand_below(j), t = idx[j - 1];
			idx[j - 1] = idx[i];
			idx[i] = t;
		}
		for (uint64_t j = 0; r == 0 && j < k; j++)
			kv_out_bulk(o, got.bytes + got.at[idx[j]], got.at[idx[j] + 1] - got.at[idx[j]]);
		kv_names_free(&got);
	}
	free(idx);
	return r;
}

/* k distinct members of s (k < count), in the tree's order, into got. */
static int draw_distinct(struct kv *kv, const struct kv_cset *s, uint64_t k, struct kv_names *got)
{
	uint64_t *idx = malloc(sizeof(*idx) * (k ? k : 1));
	if (!idx)
		return -ENOMEM;
	int r = kv_rand_distinct(s->o.coll.count, k, idx);
	if (r == 0)
		r = kv_cset_pick(kv, s->o.coll.id, KV_SET_MEMBER, idx, k, pick_name, got);
	if (r == 0 && got->oom)
		r = -ENOMEM;
	free(idx);
	return r;
}

static void cmd_srandmember(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	if (n > 3) {
		resp_error(x, "ERR syntax error");
		return;
	}
	int64_t c = 0;
	if (n == 3 && !kv_arg_range(x, &a[2], -INT64_MAX, INT64_MAX, NULL, &c))
		return;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_SET, false, true);
	if (r == -EINVAL)
		return;
	if (n == 2) {
		if (r) {
			resp_null(x);
			return;
		}
		uint64_t i = kv_rand_below(s.o.coll.count);
		struct kv_names got = { 0 };
		r = kv_cset_pick(kv, s.o.coll.id, KV_SET_MEMBER, &i, 1, pick_name, &got);
		if (r || got.oom)
			kv_reply_errno(x, r ? r : -ENOMEM);
		else
			resp_bulk(x, got.bytes, got.at[1]);
		kv_names_free(&got);
		return;
	}
	if (r || c == 0) {
		resp_array(x, 0);
		return;
	}
	uint64_t size = s.o.coll.count;
	struct kv_out o;
	kv_out_init(&o, x);
	if (c < 0 || c == 1) {
		uint64_t count = c < 0 ? (uint64_t)-c : 1;
		kv_out_array(&o, count);
		r = reply_draws(&o, kv, &s, count);
	} else if ((uint64_t)c >= size) {
		kv_out_end(&o);
		reply_all(x, kv, &s, false);
		return;
	} else {
		struct kv_names got = { 0 };
		r = draw_distinct(kv, &s, (uint64_t)c, &got);
		if (r == 0) {
			kv_out_array(&o, got.n);
			for (uint64_t j = 0; j < got.n; j++)
				kv_out_bulk(&o, got.bytes + got.at[j], got.at[j + 1] - got.at[j]);
		}
		kv_names_free(&got);
	}
	if (r && !o.len)
		kv_reply_errno(x, r);
	else if (r)
		resp_close(x);                  /* part of the reply went: end it unfinished */
	kv_out_end(&o);
}

static void cmd_spop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n > 3) {
		resp_error(x, "ERR syntax error");
		return;
	}
	int64_t c = 1;
	if (n == 3 && !kv_arg_range(x, &a[2], 0, INT64_MAX, "value is out of range, must be positive", &c))
		return;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_SET, false, false);
	if (r == -EINVAL)
		return;
	if (r || c == 0) {
		if (n == 2)
			resp_null(x);
		else
			resp_set(x, 0);
		return;
	}
	uint64_t size = s.o.coll.count;
	if (n == 3 && (uint64_t)c >= size) {
		/* The whole set: gathered (the walk reads the members the
		 * remove buries), the key removed (its members go with its
		 * grave), then sent. */
		struct kv_names m = { 0 };
		r = gather_all(kv, &s, &m);
		if (r == 0 && (r = kv_remove(kv, &s.key)) > 0)
			r = 0;
		if (r) {
			kv_reply_errno(x, r);
		} else {
			kv_notify(KV_NOTIFY_SET, "spop", &s.key);
			kv_notify(KV_NOTIFY_GENERIC, "del", &s.key);
			kv_reply_names(x, &m, true);
		}
		kv_names_free(&m);
		return;
	}
	/* c distinct members at random: gathered for the reply, then
	 * removed in one group, or, when fewer stay than go, the set
	 * written again without them. */
	uint64_t k = (uint64_t)c;
	struct kv_names got = { 0 };
	uint64_t *idx = malloc(sizeof(*idx) * k);
	r = idx ? 0 : -ENOMEM;
	/* One member of a large set: a random descent, O(log N), where an
	 * exact uniform index walks to it a leaf at a time (Redis's pick is
	 * approximate too: a random bucket, then a chain member). */
	int sampled = 0;
	if (r == 0 && k == 1 && size >= SAMPLE_MIN) {
		struct kv_cwalk w;
		sampled = kv_cwalk_sample(kv, &w, s.o.coll.id, KV_SET_MEMBER, kv_rand_below(UINT64_MAX));
		if (sampled == 1)
			kv_names_add(&got, w.name, w.nlen);
		else if (sampled < 0)
			r = sampled;
	}
	if (r == 0 && sampled != 1 && (r = kv_rand_distinct(size, k, idx)) == 0)
		r = kv_cset_pick(kv, s.o.coll.id, KV_SET_MEMBER, idx, k, pick_name, &got);
	if (r == 0 && got.oom)
		r = -ENOMEM;
	if (r == 0 && k >= KV_REBUILD_MIN && size - k < k) {
		r = kv_cset_rebuild(kv, &s, 0, 0, idx, k);
	} else if (r == 0) {
		kv_cset_prepare(kv, k + 1, 0);
		if ((r = kv_cset_begin(kv, &s, 0)) == 0) {
			for (uint64_t j = 0; r == 0 && j < got.n; j++) {
				size_t len;
				const uint8_t *p = kv_names_get(&got, j, &len);
				int d = kv_set_rem(kv, &s, p, len);
				r = d < 0 ? d : d == 1 ? 0 : -EBADMSG;
			}
			r = kv_cset_end(kv, &s, r);
		}
	}
	free(idx);
	if (r == 0) {
		kv_notify(KV_NOTIFY_SET, "spop", &s.key);
		if (k == size)
			kv_notify(KV_NOTIFY_GENERIC, "del", &s.key);
	}
	if (r) {
		kv_reply_errno(x, r);
	} else if (n == 2) {
		resp_bulk(x, got.bytes, got.at[1]);
	} else {
		kv_reply_names(x, &got, true);
	}
	kv_names_free(&got);
}

const char *kv_set_encoding(struct kv *kv, const struct kv_obj *o)
{
	return kv_set_intset(kv, o, kv_config_num("set-max-intset-entries", 512)) ? "intset"
										     : "hashtable";
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_set[] = {
	{ "sadd", -3, "write denyoom fast", "set", "Adds one or more members to a set.", cmd_sadd, 1, 1, 1 },
	{ "srem", -3, "write fast", "set", "Removes one or more members from a set.", kv_cset_rem_cmd, 1, 1, 1 },
	{ "smembers", 2, "readonly", "set", "Returns all members of a set.", cmd_smembers, 1, 1, 1 },
	{ "sismember", 3, "readonly fast", "set", "Determines whether a member belongs to a set.", cmd_sismember, 1, 1, 1 },
	{ "smismember", -3, "readonly fast", "set", "Determines whether several members belong to a set.", cmd_smismember, 1, 1, 1 },
	{ "scard", 2, "readonly fast", "set", "Returns the number of members in a set.", kv_cset_card_cmd, 1, 1, 1 },
	{ "spop", -2, "write fast", "set", "Removes and returns one or more random members of a set.", cmd_spop, 1, 1, 1 },
	{ "srandmember", -2, "readonly", "set", "Returns one or more random members of a set.", cmd_srandmember, 1, 1, 1 },
	{ "smove", 4, "write fast", "set", "Moves a member from one set to another.", cmd_smove, 1, 2, 1 },
	{ "sinter", -2, "readonly", "set", "Returns the intersection of sets.", cmd_setop, 1, -1, 1 },
	{ "sinterstore", -3, "write denyoom", "set", "Stores the intersection of sets in a key.", cmd_setop, 1, -1, 1 },
	{ "sintercard", -3, "readonly movablekeys", "set", "Returns the number of members of the intersection of sets.", cmd_sintercard, 0, 0, 0 },
	{ "sunion", -2, "readonly", "set", "Returns the union of sets.", cmd_setop, 1, -1, 1 },
	{ "sunionstore", -3, "write denyoom", "set", "Stores the union of sets in a key.", cmd_setop, 1, -1, 1 },
	{ "sdiff", -2, "readonly", "set", "Returns the difference of sets.", cmd_setop, 1, -1, 1 },
	{ "sdiffstore", -3, "write denyoom", "set", "Stores the difference of sets in a key.", cmd_setop, 1, -1, 1 },
	{ "sscan", -3, "readonly", "set", "Iterates over the members of a set.", kv_cset_scan, 1, 1, 1 },
	{ 0 }
};
