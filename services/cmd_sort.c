/*
 * cmd_sort.c - SORT and SORT_RO (pkvs_resp.h) over lists, sets and
 * sorted sets, with Redis 7.0's options, replies and errors:
 *
 *   SORT key [BY pattern] [LIMIT offset count] [GET pattern ...]
 *            [ASC|DESC] [ALPHA] [STORE destination]
 *
 * The elements are gathered in DRAM and ordered there: by their value as
 * a double (ties by their bytes), or with ALPHA by their bytes (no
 * collation: what Redis does when its locale is C), or by what a BY
 * pattern names for each ('*' replaced by the element, "key->field" a
 * hash's field; a missing one weighs 0, or sorts first with ALPHA). A BY
 * pattern without '*' keeps the container's order (a list's, a sorted
 * set's by score; a set's as SMEMBERS gives it, but sorted by bytes when
 * stored or inside a script, as Redis does for determinism). The sort is
 * stable, as glibc's qsort (a merge sort) is for Redis.
 *
 * GET patterns are read per element of the result: "#" is the element,
 * a missing key or field nil (an empty element when stored). A reply
 * sends a long value from the store buffers it lies in (kv_out); STORE
 * writes the result as a new list under a fresh id whose entries name
 * those same buffers, then puts its record under the destination in one
 * group (kv_cbuild): a crash part way leaves the destination as it was.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_set.h"
#include "kv_hash.h"
#include "kv_list.h"
#include "kv_notify.h"
#include "cmd_script.h"

/* ------------------------------------------------------------ patterns */

/* A BY or GET pattern as Redis reads one (its C string functions stop at
 * the first NUL byte, its lengths do not). */
struct pattern {
	const uint8_t *p;
	size_t len;
	bool self;                      /* "#": the element itself */
	bool star;                      /* has a '*': a key per element */
	size_t pre, post;               /* bytes before the '*', and after it up to "->" */
	const uint8_t *field;           /* "->field": a hash's field (NULL: a string key) */
	size_t flen;
};

static void pattern_parse(struct pattern *pt, const struct paste_resp_arg *a)
{
	const uint8_t *p = (const uint8_t *)a->p;
	size_t len = a->len, zlen = strnlen(a->p, len);
	*pt = (struct pattern){ .p = p, .len = len };
	pt->self = len >= 1 && p[0] == '#' && (len == 1 || p[1] == 0);
	const uint8_t *star = memchr(p, '*', zlen);
	if (!star)
		return;
	pt->star = true;
	pt->pre = (size_t)(star - p);
	size_t fieldlen = 0;
	for (const uint8_t *f = star + 1; f + 2 < p + zlen; f++)
		if (f[0] == '-' && f[1] == '>') {
			fieldlen = len - (size_t)(f - p) - 2;
			pt->field = f + 2;
			pt->flen = fieldlen;
			break;
		}
	pt->post = len - pt->pre - 1 - (fieldlen ? fieldlen + 2 : 0);
}

/* What a pattern named for one element. */
struct sval {
	bool self;                      /* the element's own bytes */
	struct kv_obj o;                /* else: a string's value (o.big: in chunks), or a
					 * hash field's extents in o.ext */
};

struct sort {
	struct resp_ctx *x;
	struct kv *kv;
	uint32_t db;
	uint8_t *key;                   /* the key a pattern makes, grown as needed */
	size_t keycap;
};

/* The value pattern pt names for element el[0..elen): 1 (*v), 0 (none:
 * no '*', no such key, another type, no such field), or -ENOMEM. Looked
 * up as a read (a key whose deadline passed goes, as in Redis). */
static int pattern_get(struct sort *s, const struct pattern *pt, const uint8_t *el, size_t elen,
		       struct sval *v)
{
	if (pt->self) {
		v->self = true;
		return 1;
	}
	v->self = false;
	if (!pt->star)
		return 0;
	size_t klen = pt->pre + elen + pt->post;
	if (klen > kv_max_key(s->kv))
		return 0;                       /* no key that long can exist */
	if (klen > s->keycap) {
		uint8_t *k = realloc(s->key, klen);
		if (!k)
			return -ENOMEM;
		s->key = k;
		s->keycap = klen;
	}
	memcpy(s->key, pt->p, pt->pre);
	memcpy(s->key + pt->pre, el, elen);
	memcpy(s->key + pt->pre + elen, pt->p + pt->pre + 1, pt->post);
	if (pt->field) {
		struct kv_hash h;
		kv_key_init(s->kv, &h.key, s->db, s->key, klen);
		if (kv_hash_open(s->kv, &h, true))
			return 0;
		v->o = (struct kv_obj){ .type = KV_STRING };
		return kv_hash_get(s->kv, &h, pt->field, pt->flen, v->o.ext, &v->o.n, &v->o.len,
				   &v->o.big) == 0;
	}
	struct kv_key k;
	kv_key_init(s->kv, &k, s->db, s->key, klen);
	return kv_lookup(s->kv, &k, &v->o, true) == 0 && v->o.type == KV_STRING;
}

/* v's bytes in DRAM, NUL-ended (a copy: *out malloc'd), or NULL (out of
 * memory). */
static uint8_t *sval_bytes(struct sort *s, const struct sval *v, const uint8_t *el, size_t elen,
			   size_t *len)
{
	size_t n = v->self ? elen : v->o.len;
	uint8_t *b = malloc(n + 1);
	if (!b)
		return NULL;
	if (v->self)
		memcpy(b, el, n);
	else
		n = kv_value_read(s->kv, &v->o, 0, b, n);
	b[n] = 0;
	*len = n;
	return b;
}

/* ------------------------------------------------------------ the order */

struct item {
	uint64_t el;                    /* the element: its index in the gathered names */
	double score;
	int64_t by;                     /* ALPHA BY: its weight's index in the weights, -1: none */
};

struct order {
	const struct kv_names *els, *by;
	bool alpha, bypattern, desc;
};

static int bytes_cmp(const struct kv_names *m, uint64_t a, uint64_t b)
{
	size_t la, lb;
	const uint8_t *pa = kv_names_get(m, a, &la), *pb = kv_names_get(m, b, &lb);
	int c = memcmp(pa, pb, la < lb ? la : lb);
	return c ? (c < 0 ? -1 : 1) : (la > lb) - (la < lb);
}

static int item_cmp(const struct order *od, const struct item *a, const struct item *b)
{
	int c;
	if (!od->alpha)
		c = a->score > b->score ? 1 : a->score < b->score ? -1 : bytes_cmp(od->els, a->el, b->el);
	else if (!od->bypattern)
		c = bytes_cmp(od->els, a->el, b->el);
	else if (a->by < 0 || b->by < 0)
		c = (a->by >= 0) - (b->by >= 0);
	else
		c = bytes_cmp(od->by, (uint64_t)a->by, (uint64_t)b->by);
	return od->desc ? -c : c;
}

/* A stable merge sort of v[0..n) (tmp: room for n). */
static void merge_sort(const struct order *od, struct item *v, struct item *tmp, uint64_t n)
{
	if (n < 2)
		return;
	uint64_t h = n / 2;
	merge_sort(od, v, tmp, h);
	merge_sort(od, v + h, tmp, n - h);
	if (item_cmp(od, &v[h - 1], &v[h]) <= 0)
		return;
	memcpy(tmp, v, h * sizeof(*v));
	uint64_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		v[k++] = item_cmp(od, &v[j], &tmp[i]) < 0 ? v[j++] : tmp[i++];
	while (i < h)
		v[k++] = tmp[i++];
}

/* A set's members in SMEMBERS's order when Redis keeps it as an intset:
 * ascending values. */
static int64_t *int_vals;

static int int_cmp(const void *a, const void *b)
{
	int64_t x = int_vals[((const struct item *)a)->el], y = int_vals[((const struct item *)b)->el];
	return (x > y) - (x < y);
}

static int intset_order(struct kv *kv, const struct kv_obj *o, const struct kv_names *els,
			struct item *v)
{
	if (els->n < 2 || !kv_set_intset(kv, o, kv_config_num("set-max-intset-entries", 512)))
		return 0;
	int64_t *vals = malloc(sizeof(*vals) * els->n);
	if (!vals)
		return -ENOMEM;
	for (uint64_t i = 0; i < els->n; i++) {
		size_t len;
		const uint8_t *p = kv_names_get(els, i, &len);
		struct paste_resp_arg a = { (const char *)p, len };
		if (paste_resp_arg_i64(&a, &vals[i]))
			vals[i] = 0;
	}
	int_vals = vals;
	qsort(v, els->n, sizeof(*v), int_cmp);
	free(vals);
	return 0;
}

/* ------------------------------------------------------------ gathering */

static void add_extents(struct kv *kv, struct kv_names *m, const struct paste_extent *ext,
			uint32_t n, uint32_t len, uint64_t big)
{
	uint8_t stack[512];
	uint8_t *b = len <= sizeof(stack) ? stack : malloc(len);
	if (!b) {
		m->oom = true;
		return;
	}
	size_t got = kv_elem_read(kv, ext, n, len, big, 0, b, len);
	kv_names_add(m, b, got);
	if (b != stack)
		free(b);
}

/* The elements of o: all of them, or (range) the ones at [start, end] of
 * its order, reversed with desc (a list's or a sorted set's own order). */
static int gather(struct kv *kv, const struct kv_key *k, const struct kv_obj *o, bool range,
		  int64_t start, int64_t end, bool desc, struct kv_names *els)
{
	uint64_t cnt = o->coll.count;
	int r;
	if (o->type == KV_LIST) {
		int64_t from = 0, to = (int64_t)cnt;
		bool back = false;
		if (range) {
			if (end < start)
				return 0;
			back = desc;
			from = desc ? (int64_t)cnt - 1 - end : start;
			to = desc ? (int64_t)cnt - start : end + 1;
		}
		struct kv_list_walk w;
		kv_list_walk_pos(kv, &w, o->coll.id, o->coll.head + from, o->coll.head + to, back);
		while ((r = kv_list_walk_next(kv, &w)) == 1 && !els->oom)
			add_extents(kv, els, w.ext, w.n, w.len, w.big);
		return r < 0 ? r : els->oom ? -ENOMEM : 0;
	}
	struct kv_cwalk w;
	uint64_t want = UINT64_MAX;
	if (o->type == KV_ZSET && range) {
		struct kv_cset s = { .key = *k, .o = *o };
		want = end >= start ? (uint64_t)(end - start + 1) : 0;
		kv_zwalk_rank(kv, &w, &s, desc, desc ? cnt - 1 - (uint64_t)start : (uint64_t)start);
	} else {
		kv_cwalk_init(kv, &w, o->coll.id, KV_SET_MEMBER, 0, false, NULL, 0);
	}
	for (uint64_t i = 0; i < want && (r = kv_cwalk_next(kv, &w)) == 1 && !els->oom; i++)
		kv_names_add(els, w.name, w.nlen);
	if (want != UINT64_MAX)
		return els->oom ? -ENOMEM : els->n == want ? 0 : -EBADMSG;
	return r < 0 ? r : els->oom ? -ENOMEM : 0;
}

/* ------------------------------------------------------------ the command */

/* The weights: each element's score (numeric), or its BY value's bytes
 * (ALPHA BY). false: a score is not a double (*bad) or a failure (*r). */
static int weigh(struct sort *s, const struct pattern *by, bool alpha, struct item *v, uint64_t n,
		 const struct kv_names *els, struct kv_names *bys, bool *bad)
{
	for (uint64_t i = 0; i < n; i++) {
		size_t elen, blen;
		const uint8_t *el = kv_names_get(els, v[i].el, &elen);
		struct sval sv = { .self = true };
		if (by) {
			int g = pattern_get(s, by, el, elen, &sv);
			if (g < 0)
				return g;
			if (g == 0)
				continue;
		}
		if (alpha && !by)
			continue;
		uint8_t *b = sval_bytes(s, &sv, el, elen, &blen);
		if (!b)
			return -ENOMEM;
		if (alpha) {
			v[i].by = (int64_t)bys->n;
			kv_names_add(bys, b, blen);
		} else {
			char *e;
			errno = 0;
			v[i].score = strtod((const char *)b, &e);
			if (*e || errno == ERANGE || isnan(v[i].score))
				*bad = true;
		}
		free(b);
	}
	return bys->oom ? -ENOMEM : 0;
}

/* One GET value into the new list: its extents (or bytes) at the tail. */
static int store_push(struct kv *kv, struct kv_cbuild *b, const struct paste_extent *ext, uint32_t n,
		      uint32_t len, const void *p, size_t plen)
{
	struct kv_key mk;
	kv_list_pos_key(&mk, b->o.coll.id, b->o.coll.tail);
	int r;
	if (ext && n) {
		r = len > kv_max_value(kv) ? -EFBIG : kv_member_put(kv, &mk, ext, n);
	} else {
		if (!ext && plen > kv_max_value(kv))
			return -EFBIG;
		r = kv_member_put_bytes(kv, &mk, ext || !plen ? "" : p, ext ? 0 : plen);
	}
	if (r == 0) {
		b->o.coll.tail++;
		b->o.coll.count++;
	}
	return r;
}

static int store_value(struct sort *s, struct kv_cbuild *b, const struct sval *v, int found,
		       const uint8_t *el, size_t elen)
{
	if (found <= 0)
		return store_push(s->kv, b, NULL, 0, 0, "", 0);
	if (v->self)
		return store_push(s->kv, b, NULL, 0, 0, el, elen);
	if (!v->o.big)
		return store_push(s->kv, b, v->o.ext, v->o.n, v->o.len, NULL, 0);
	if (v->o.len > kv_max_value(s->kv))
		return -EFBIG;
	size_t len;
	uint8_t *p = sval_bytes(s, v, el, elen, &len);
	if (!p)
		return -ENOMEM;
	int r = store_push(s->kv, b, NULL, 0, 0, p, len);
	free(p);
	return r;
}

static void reply_value(struct sort *s, struct kv_out *out, const struct sval *v, int found,
			const uint8_t *el, size_t elen)
{
	if (found <= 0) {
		kv_out_null(out);
	} else if (v->self) {
		kv_out_bulk(out, el, elen);
	} else if (!v->o.big) {
		kv_out_value(out, s->kv, v->o.ext, v->o.n, v->o.len);
	} else {
		size_t len;
		uint8_t *p = sval_bytes(s, v, el, elen, &len);
		if (p)
			kv_out_bulk(out, p, len);
		else
			out->r = out->r ? out->r : -ENOMEM;
		free(p);
	}
}

static void sort_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		     bool readonly)
{
	bool desc = false, alpha = false, dontsort = false;
	int64_t lstart = 0, lcount = -1;
	const struct paste_resp_arg *byarg = NULL, *store = NULL;
	uint32_t ngets = 0;
	const struct paste_resp_arg **gets = malloc(sizeof(*gets) * n);
	if (!gets) {
		resp_error(x, "ERR out of memory");
		return;
	}
	for (uint32_t j = 2; j < n; j++) {
		uint32_t left = n - j - 1;
		if (paste_resp_arg_eq(&a[j], "ASC")) {
			desc = false;
		} else if (paste_resp_arg_eq(&a[j], "DESC")) {
			desc = true;
		} else if (paste_resp_arg_eq(&a[j], "ALPHA")) {
			alpha = true;
		} else if (paste_resp_arg_eq(&a[j], "LIMIT") && left >= 2) {
			if (!kv_arg_int(x, &a[j + 1], &lstart) || !kv_arg_int(x, &a[j + 2], &lcount))
				goto out;
			j += 2;
		} else if (!readonly && paste_resp_arg_eq(&a[j], "STORE") && left >= 1) {
			store = &a[++j];
		} else if (paste_resp_arg_eq(&a[j], "BY") && left >= 1) {
			byarg = &a[++j];
			if (!memchr(byarg->p, '*', strnlen(byarg->p, byarg->len)))
				dontsort = true;
		} else if (paste_resp_arg_eq(&a[j], "GET") && left >= 1) {
			gets[ngets++] = &a[++j];
		} else {
			resp_error(x, "ERR syntax error");
			goto out;
		}
	}

	struct kv_key k, dst;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k) || (store && !kv_arg_key(x, kv, store, &dst)))
		goto out;
	if (kv_lookup(kv, &k, &o, true)) {
		o = (struct kv_obj){ .type = KV_LIST };
	} else if (o.type != KV_LIST && o.type != KV_SET && o.type != KV_ZSET) {
		resp_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
		goto out;
	}
	if (dontsort && o.type == KV_SET && (store || kv_script_client(x))) {
		dontsort = false;               /* a set's order made deterministic */
		alpha = true;
		byarg = NULL;
	}

	/* LIMIT as Redis bounds it: [start, end] of the elements. */
	int64_t len = (int64_t)o.coll.count;
	int64_t start = lstart < 0 ? 0 : lstart > len ? len : lstart;
	int64_t count = lcount < -1 ? -1 : lcount > len ? len : lcount;
	int64_t end = count < 0 ? len - 1 : start + count - 1;
	if (start >= len) {
		start = len - 1;
		end = len - 2;
	}
	if (end >= len)
		end = len - 1;

	struct sort s = { .x = x, .kv = kv, .db = kv_resp_db(x) };
	struct kv_names els = { 0 }, bys = { 0 };
	struct item *v = NULL, *tmp = NULL;
	struct pattern by = { 0 }, *pats = malloc(sizeof(*pats) * (ngets ? ngets : 1));
	bool direct = dontsort && (o.type == KV_LIST || o.type == KV_ZSET);
	bool bad = false;
	int r = pats ? 0 : -ENOMEM;
	for (uint32_t i = 0; r == 0 && i < ngets; i++)
		pattern_parse(&pats[i], gets[i]);
	if (byarg)
		pattern_parse(&by, byarg);
	if (r == 0 && o.coll.count)
		r = gather(kv, &k, &o, direct, start, end, desc, &els);
	if (direct) {
		end -= start;                   /* gathered [start, end] only */
		start = 0;
	}
	if (r == 0 && els.n && !(v = malloc(sizeof(*v) * els.n)))
		r = -ENOMEM;
	for (uint64_t i = 0; r == 0 && i < els.n; i++)
		v[i] = (struct item){ .el = i, .by = -1 };
	if (r == 0 && dontsort && o.type == KV_SET)
		r = intset_order(kv, &o, &els, v);
	if (r == 0 && !dontsort && els.n) {
		r = weigh(&s, byarg ? &by : NULL, alpha, v, els.n, &els, &bys, &bad);
		struct order od = { &els, &bys, alpha, byarg != NULL, desc };
		if (r == 0 && !(tmp = malloc(sizeof(*tmp) * (els.n / 2 + 1))))
			r = -ENOMEM;
		if (r == 0)
			merge_sort(&od, v, tmp, els.n);
	}
	uint64_t rows = end >= start ? (uint64_t)(end - start + 1) : 0;
	uint64_t outlen = ngets ? ngets * rows : rows;
	if (r) {
		kv_reply_errno(x, r);
	} else if (bad) {
		resp_error(x, "ERR One or more scores can't be converted into double");
	} else if (!store) {
		struct kv_out out;
		kv_out_init(&out, x);
		kv_out_array(&out, outlen);
		for (int64_t j = start; j <= end && !out.r; j++) {
			size_t elen;
			const uint8_t *el = kv_names_get(&els, v[j].el, &elen);
			if (!ngets)
				kv_out_bulk(&out, el, elen);
			for (uint32_t g = 0; g < ngets && !out.r; g++) {
				struct sval sv;
				int found = pattern_get(&s, &pats[g], el, elen, &sv);
				if (found < 0)
					out.r = found;
				else
					reply_value(&s, &out, &sv, found, el, elen);
			}
		}
		kv_out_end(&out);
	} else {
		bool had = kv_key_held(kv, &dst);
		struct kv_cbuild b;
		r = kv_cbuild_begin(kv, &b, KV_LIST);
		for (int64_t j = start; r == 0 && j <= end; j++) {
			size_t elen;
			const uint8_t *el = kv_names_get(&els, v[j].el, &elen);
			if (!ngets)
				r = store_push(kv, &b, NULL, 0, 0, el, elen);
			for (uint32_t g = 0; r == 0 && g < ngets; g++) {
				struct sval sv;
				int found = pattern_get(&s, &pats[g], el, elen, &sv);
				r = found < 0 ? found : store_value(&s, &b, &sv, found, el, elen);
			}
		}
		r = kv_cbuild_end(kv, &b, &dst, r);
		if (r) {
			kv_reply_errno(x, r);
		} else {
			kv_notify_stored(kv, &dst, had, outlen, KV_NOTIFY_LIST, "sortstore");
			resp_int(x, (int64_t)outlen);
		}
	}
	free(s.key);
	free(pats);
	free(v);
	free(tmp);
	kv_names_free(&els);
	kv_names_free(&bys);
out:
	free(gets);
}

static void cmd_sort(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	sort_cmd(x, kv, a, n, a[0].len == 7);           /* SORT_RO */
}

int kv_sort_getkeys(const struct paste_resp_arg *argv, uint32_t argc, bool readonly,
		    uint32_t *pos, uint32_t *fl)
{
	pos[0] = 1;
	fl[0] = KV_KEY_RO | KV_KEY_ACCESS;
	if (readonly)
		return 1;
	/* As Redis's sortGetKeys reads them: LIMIT skips two arguments, GET
	 * and BY one, the last STORE with an argument after it names the
	 * destination (and what follows it is read as an option again). */
	int nk = 1;
	for (uint32_t i = 2; i < argc; i++) {
		if (paste_resp_arg_eq(&argv[i], "LIMIT")) {
			i += 2;
		} else if (paste_resp_arg_eq(&argv[i], "GET") || paste_resp_arg_eq(&argv[i], "BY")) {
			i += 1;
		} else if (paste_resp_arg_eq(&argv[i], "STORE") && i + 1 < argc) {
			pos[1] = i + 1;
			fl[1] = KV_KEY_OW | KV_KEY_UPDATE;
			nk = 2;
		}
	}
	return nk;
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_sort[] = {
	{ "sort", -2, "write denyoom", "generic", "The elements of a list, set or sorted set in order, or stored as a list", cmd_sort, 1, 1, 1 },
	{ "sort_ro", -2, "readonly", "generic", "The elements of a list, set or sorted set in order", cmd_sort, 1, 1, 1 },
	{ 0 }
};
