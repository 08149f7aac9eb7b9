/*
 * kv_rdb_stream.c - streams read from Redis's RDB format (kv_rdb_fmt.h):
 * RDB_TYPE_STREAM_LISTPACKS_2 (what Redis 7.0 writes, and pkvs: kv_rdb.c)
 * and RDB_TYPE_STREAM_LISTPACKS (Redis 5 and 6), decoded and checked
 * whole before anything is written.
 *
 * Redis keeps a stream's entries in listpacks ("nodes") keyed by a master
 * ID. A node starts with its master entry (live and deleted counts, the
 * master fields, a 0); then each entry: flags, its ID as the difference
 * to the master ID, its fields and values (only the values when the
 * fields are the master's: SAMEFIELDS), and how many elements it took.
 * Then come the length, the last ID, (type 19:) the first and largest
 * deleted IDs and entries added, and each consumer group: name, last
 * delivered ID, (19:) entries read, its pending entries (raw 16-byte IDs,
 * delivery time, delivery count) and its consumers (name, seen time, the
 * IDs of their pending entries).
 *
 * Checked as Redis's loader checks with sanitize-dump-payload, and more
 * where pkvs's record depends on it: node keys and entry IDs rise, the
 * length is the live entries', none past the last ID; every pending
 * entry has exactly one consumer; names of groups and consumers are of
 * at most 400 bytes (KV_INLINE: pkvs's commands' limit).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_rdb_fmt.h"
#include "kv_set.h"
#include "kv_stream.h"

#define F_DELETED 1
#define F_SAMEFIELDS 2

static void be64_out(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t be64_in(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* An ID as Redis's radix tree keys and pending lists hold it: 128 bits
 * big-endian. */
static struct kv_sid id_in(const uint8_t in[16])
{
	return (struct kv_sid){ be64_in(in), be64_in(in + 8) };
}

struct sentry {
	struct kv_sid id;
	size_t off, len;                /* its value (kv_stream_fields_encode's) in bytes */
	uint64_t node;                  /* its node's number (from 1) */
};
struct spel {
	struct kv_sid id;
	uint64_t delivered, count;
	size_t owner;                   /* its consumer's index in c; SIZE_MAX: none yet */
};
struct scons {
	size_t off, len;                /* its name in bytes */
	uint64_t seen, pending;
};
struct sgroup {
	size_t off, len;                /* its name in bytes */
	struct kv_sid last;
	int64_t read;
	size_t pel, npel, cons, ncons;  /* its slices of p and c */
};

struct kv_rdb_stream {
	struct kv_rdb_buf bytes;        /* values and names */
	struct sentry *e;
	struct spel *p;
	struct scons *c;
	struct sgroup *g;
	size_t ne, np, nc, ng, cape, capp, capc, capg;
	uint64_t count, added;
	struct kv_sid last, del;
	uint64_t nodes, fill;           /* nodes so far; entries of the last, deleted ones too */
};

/* Scratch space of a node's decoding, kept across nodes. */
struct scratch {
	struct kv_rdb_lpel *mf, *fv;    /* master fields; an entry's fields and values */
	size_t nmf, capmf, nfv, capfv;
	struct paste_resp_arg *av;
	char (*num)[24];
	size_t capav;
	uint8_t *val;
	size_t capval;
};

static void scratch_free(struct scratch *x)
{
	free(x->mf);
	free(x->fv);
	free(x->av);
	free(x->num);
	free(x->val);
}

/* The next element of listpack lp as an integer (an integer element or
 * a string that reads as one, as Redis's lpGetIntegerIfValid). */
static bool lp_get_int(const uint8_t *lp, size_t len, size_t *i, int64_t *v)
{
	struct kv_rdb_lpel e;
	if (kv_rdb_lp_next(lp, len, i, &e) != 1)
		return false;
	if (e.isint)
		*v = e.v;
	return e.isint || kv_rdb_strtoll(e.s, e.len, v);
}

/* The next element (not the terminator) onto the array *a: 0, -EBADMSG,
 * -ENOMEM. */
static int lp_push(const uint8_t *lp, size_t len, size_t *i, struct kv_rdb_lpel **a, size_t *n,
		   size_t *cap)
{
	if (!kv_rdb_grow(a, cap, *n, sizeof(**a)))
		return -ENOMEM;
	return kv_rdb_lp_next(lp, len, i, &(*a)[(*n)++]) == 1 ? 0 : -EBADMSG;
}

/* Entry id's fields x->fv[0..2n) (field, value, ...) as its value. */
static int entry_add(struct kv_rdb_stream *s, struct scratch *x, struct kv_sid id, size_t n)
{
	if (2 * n > x->capav) {
		size_t c = 2 * n;
		void *a = realloc(x->av, c * sizeof(*x->av)), *m = a ? realloc(x->num, c * 24) : NULL;
		if (a)
			x->av = a;
		if (m)
			x->num = m;
		if (!a || !m)
			return -ENOMEM;
		x->capav = c;
	}
	for (size_t i = 0; i < 2 * n; i++) {
		const struct kv_rdb_lpel *e = &x->fv[i];
		if (e->isint) {
			x->av[i].len = (size_t)snprintf(x->num[i], 24, "%lld", (long long)e->v);
			x->av[i].p = x->num[i];
		} else {
			x->av[i].p = (const char *)e->s;
			x->av[i].len = e->len;
		}
	}
	size_t vlen = kv_stream_fields_size(x->av, (uint32_t)n);
	if (vlen > x->capval) {
		uint8_t *v = realloc(x->val, vlen);
		if (!v)
			return -ENOMEM;
		x->val = v, x->capval = vlen;
	}
	kv_stream_fields_encode(x->val, x->av, (uint32_t)n);
	if (!kv_rdb_grow(&s->e, &s->cape, s->ne, sizeof(*s->e)))
		return -ENOMEM;
	s->e[s->ne++] = (struct sentry){ id, s->bytes.len, vlen, s->nodes };
	kv_rdb_put(&s->bytes, x->val, vlen);
	return s->bytes.oom ? -ENOMEM : 0;
}

/* One node: master ID master, listpack lp[0..len). Its live entries are
 * added to s; IDs must rise across the whole stream. */
static int node_decode(struct kv_rdb_stream *s, struct scratch *x, struct kv_sid master,
		       const uint8_t *lp, size_t len)
{
	int64_t live, dead, nmf, zero;
	size_t i = 6;
	s->nodes++;
	s->fill = 0;
	if (len < 7 || !lp_get_int(lp, len, &i, &live) || !lp_get_int(lp, len, &i, &dead) ||
	    !lp_get_int(lp, len, &i, &nmf) || live < 0 || dead < 0 || nmf < 0 || (uint64_t)nmf > len)
		return -EBADMSG;
	int r;
	x->nmf = 0;
	for (int64_t j = 0; j < nmf; j++)
		if ((r = lp_push(lp, len, &i, &x->mf, &x->nmf, &x->capmf)))
			return r;
	if (!lp_get_int(lp, len, &i, &zero) || zero != 0)
		return -EBADMSG;
	uint64_t elems = 4 + (uint64_t)nmf, nlive = 0, ndead = 0;
	while (i < len && lp[i] != 0xFF) {
		int64_t flags, dms, dseq, nf, lpcount;
		if (!lp_get_int(lp, len, &i, &flags) || !lp_get_int(lp, len, &i, &dms) ||
		    !lp_get_int(lp, len, &i, &dseq))
			return -EBADMSG;
		bool same = flags & F_SAMEFIELDS;
		if (same)
			nf = nmf;
		else if (!lp_get_int(lp, len, &i, &nf) || nf < 0 || (uint64_t)nf > len)
			return -EBADMSG;
		x->nfv = 0;
		for (int64_t j = 0; j < nf; j++) {
			if (same && !kv_rdb_grow(&x->fv, &x->capfv, x->nfv, sizeof(*x->fv)))
				return -ENOMEM;
			if (same)
				x->fv[x->nfv++] = x->mf[j];
			else if ((r = lp_push(lp, len, &i, &x->fv, &x->nfv, &x->capfv)))
				return r;
			if ((r = lp_push(lp, len, &i, &x->fv, &x->nfv, &x->capfv)))
				return r;
		}
		if (!lp_get_int(lp, len, &i, &lpcount) || lpcount != (same ? nf + 3 : 2 * nf + 4))
			return -EBADMSG;
		elems += (uint64_t)lpcount + 1;
		struct kv_sid id = { master.ms + (uint64_t)dms, master.seq + (uint64_t)dseq };
		s->fill++;
		if (flags & F_DELETED) {
			ndead++;
			continue;
		}
		nlive++;
		if (s->ne && kv_sid_cmp(id, s->e[s->ne - 1].id) <= 0)
			return -EBADMSG;
		if ((r = entry_add(s, x, id, (size_t)nf)))
			return r;
	}
	if (i != len - 1 || elems > UINT32_MAX || !kv_rdb_lp_ok(lp, len, (uint32_t)elems) ||
	    nlive != (uint64_t)live || ndead != (uint64_t)dead)
		return -EBADMSG;
	return 0;
}

static int nodes_decode(struct kv_rdb_stream *s, struct kv_rdb_rd *d)
{
	struct scratch x = { 0 };
	uint64_t nodes = kv_rdb_rd_len(d);
	uint8_t prev[16];
	int r = 0;
	for (uint64_t n = 0; n < nodes && !r && !d->bad; n++) {
		const uint8_t *key, *lp = NULL;
		size_t klen, len = 0;
		uint8_t *kmem = NULL, *mem = NULL;
		char num[24], lnum[24];
		/* Node keys as Redis writes them: rising (its radix tree's order). */
		if (!kv_rdb_rd_str(d, &key, &klen, &kmem, num) || klen != 16 ||
		    (n && memcmp(key, prev, 16) <= 0) || !kv_rdb_rd_str(d, &lp, &len, &mem, lnum))
			r = -EBADMSG;
		else
			r = node_decode(s, &x, id_in(key), lp, len);
		if (!r)
			memcpy(prev, key, 16);
		free(kmem);
		free(mem);
	}
	scratch_free(&x);
	return d->bad ? -EBADMSG : r;
}

/* Redis's estimate of an ID's entries read, for a group of a stream
 * written before groups kept it: exact at the last ID, at or before the
 * first with no deletion since, unknown (-1) between. */
static int64_t read_estimate(const struct kv_rdb_stream *s, struct kv_sid id)
{
	if (!s->added)
		return 0;
	int cl = kv_sid_cmp(id, s->last);
	if ((!s->count && cl <= 0) || cl == 0)
		return (int64_t)s->added;
	if (cl > 0)
		return -1;
	struct kv_sid first = s->ne ? s->e[0].id : (struct kv_sid){ UINT64_MAX, UINT64_MAX };
	if ((!s->del.ms && !s->del.seq) || kv_sid_cmp(s->del, first) < 0) {
		int cf = kv_sid_cmp(id, first);
		if (cf <= 0)
			return (int64_t)(s->added - s->count) + (cf == 0);
	}
	return -1;
}

/* A group's or consumer's name into s->bytes: *off, *len. pkvs's names
 * are of KV_INLINE bytes at most (a pending entry holds its consumer's). */
static int name_read(struct kv_rdb_stream *s, struct kv_rdb_rd *d, size_t *off, size_t *len)
{
	const uint8_t *p;
	uint8_t *mem;
	char num[24];
	if (!kv_rdb_rd_str(d, &p, len, &mem, num))
		return -EBADMSG;
	*off = s->bytes.len;
	kv_rdb_put(&s->bytes, p, *len);
	free(mem);
	return s->bytes.oom ? -ENOMEM : *len > KV_INLINE ? -EBADMSG : 0;
}

static int spel_cmp(const void *a, const void *b)
{
	return kv_sid_cmp(((const struct spel *)a)->id, ((const struct spel *)b)->id);
}

/* A name in s->bytes, for finding one given twice. */
struct nref {
	const uint8_t *p;
	size_t len;
};

/* Name off, len of s->bytes: the buffer is still NULL when every name
 * so far was empty, and NULL + 0 is undefined. */
static struct nref nref_at(const struct kv_rdb_stream *s, size_t off, size_t len)
{
	return (struct nref){ s->bytes.p ? s->bytes.p + off : NULL, len };
}

static int nref_cmp(const void *a, const void *b)
{
	const struct nref *x = a, *y = b;
	size_t l = x->len < y->len ? x->len : y->len;
	int c = l ? memcmp(x->p, y->p, l) : 0;
	return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

/* v[0..n) (freed here) sorted: 0, or -EBADMSG when a name is there twice. */
static int dup_names(struct nref *v, size_t n)
{
	if (!v)
		return -ENOMEM;
	qsort(v, n, sizeof(*v), nref_cmp);
	int r = 0;
	for (size_t i = 1; i < n && !r; i++)
		if (!nref_cmp(&v[i - 1], &v[i]))
			r = -EBADMSG;
	free(v);
	return r;
}

/* Group g's consumers and their pending entries' IDs. */
static int consumers_decode(struct kv_rdb_stream *s, struct kv_rdb_rd *d, struct sgroup *g)
{
	uint64_t n = kv_rdb_rd_len(d);
	g->cons = s->nc;
	for (uint64_t i = 0; i < n && !d->bad; i++) {
		if (!kv_rdb_grow(&s->c, &s->capc, s->nc, sizeof(*s->c)))
			return -ENOMEM;
		struct scons *c = &s->c[s->nc];
		*c = (struct scons){ 0 };
		int r = name_read(s, d, &c->off, &c->len);
		if (r)
			return r;
		c->seen = kv_rdb_rd_le(d, 8);
		uint64_t np = kv_rdb_rd_len(d);
		for (uint64_t j = 0; j < np && !d->bad; j++) {
			const uint8_t *raw;
			if (!kv_rdb_rd_take(d, 16, &raw))
				break;
			struct spel key = { .id = id_in(raw) };
			struct spel *p = g->npel ? bsearch(&key, s->p + g->pel, g->npel, sizeof(*p),
							   spel_cmp) : NULL;
			/* Not in the group's list, or another's (or this one's) already. */
			if (!p || p->owner != SIZE_MAX)
				return -EBADMSG;
			p->owner = s->nc;
			c->pending++;
		}
		s->nc++;
	}
	g->ncons = s->nc - g->cons;
	if (d->bad)
		return -EBADMSG;
	for (size_t j = g->pel; j < g->pel + g->npel; j++)
		if (s->p[j].owner == SIZE_MAX)
			return -EBADMSG;      /* a pending entry of no consumer */
	struct nref *v = malloc((g->ncons + 1) * sizeof(*v));
	for (size_t j = 0; v && j < g->ncons; j++)
		v[j] = nref_at(s, s->c[g->cons + j].off, s->c[g->cons + j].len);
	return dup_names(v, g->ncons);
}

static int groups_decode(struct kv_rdb_stream *s, struct kv_rdb_rd *d, bool v2)
{
	uint64_t n = kv_rdb_rd_len(d);
	int r = 0;
	for (uint64_t i = 0; i < n && !d->bad && !r; i++) {
		if (!kv_rdb_grow(&s->g, &s->capg, s->ng, sizeof(*s->g)))
			return -ENOMEM;
		struct sgroup *g = &s->g[s->ng];
		*g = (struct sgroup){ 0 };
		if ((r = name_read(s, d, &g->off, &g->len)))
			return r;
		g->last.ms = kv_rdb_rd_len(d);
		g->last.seq = kv_rdb_rd_len(d);
		g->read = v2 ? (int64_t)kv_rdb_rd_len(d) : read_estimate(s, g->last);
		uint64_t np = kv_rdb_rd_len(d);
		g->pel = s->np;
		bool sorted = true;
		for (uint64_t j = 0; j < np && !d->bad; j++) {
			const uint8_t *raw;
			if (!kv_rdb_grow(&s->p, &s->capp, s->np, sizeof(*s->p)))
				return -ENOMEM;
			if (!kv_rdb_rd_take(d, 16, &raw))
				break;
			struct spel *p = &s->p[s->np];
			p->id = id_in(raw);
			p->delivered = kv_rdb_rd_le(d, 8);
			p->count = kv_rdb_rd_len(d);
			p->owner = SIZE_MAX;
			if (s->np > g->pel && kv_sid_cmp(p[-1].id, p->id) >= 0)
				sorted = false;
			s->np++;
		}
		g->npel = s->np - g->pel;
		if (d->bad)
			return -EBADMSG;
		if (!sorted) {
			qsort(s->p + g->pel, g->npel, sizeof(*s->p), spel_cmp);
			for (size_t j = g->pel + 1; j < s->np; j++)
				if (!kv_sid_cmp(s->p[j - 1].id, s->p[j].id))
					return -EBADMSG;      /* twice in the list */
		}
		s->ng++;
		r = consumers_decode(s, d, g);
	}
	if (!r && d->bad)
		r = -EBADMSG;
	if (r)
		return r;
	struct nref *v = malloc((s->ng + 1) * sizeof(*v));
	for (size_t j = 0; v && j < s->ng; j++)
		v[j] = nref_at(s, s->g[j].off, s->g[j].len);
	return dup_names(v, s->ng);
}

int kv_rdb_stream_decode(struct kv_rdb_rd *d, uint8_t t, struct kv_rdb_stream **out)
{
	struct kv_rdb_stream *s = calloc(1, sizeof(*s));
	*out = s;
	if (!s)
		return -ENOMEM;
	bool v2 = t == T_STREAM_LISTPACKS_2;
	int r = nodes_decode(s, d);
	if (r)
		return r;
	s->count = kv_rdb_rd_len(d);
	s->last.ms = kv_rdb_rd_len(d);
	s->last.seq = kv_rdb_rd_len(d);
	s->added = s->count;
	if (v2) {
		kv_rdb_rd_len(d);               /* the first ID: pkvs finds it */
		kv_rdb_rd_len(d);
		s->del.ms = kv_rdb_rd_len(d);
		s->del.seq = kv_rdb_rd_len(d);
		s->added = kv_rdb_rd_len(d);
	}
	/* pkvs's record counts the entries present, and no entry lies past
	 * the last ID (the next XADD's floor). */
	if (d->bad || s->count != s->ne || (s->ne && kv_sid_cmp(s->e[s->ne - 1].id, s->last) > 0))
		return -EBADMSG;
	return groups_decode(s, d, v2);
}

void kv_rdb_stream_free(struct kv_rdb_stream *s)
{
	if (!s)
		return;
	kv_rdb_free(&s->bytes);
	free(s->e);
	free(s->p);
	free(s->c);
	free(s->g);
	free(s);
}

int kv_rdb_stream_write(struct kv *kv, struct kv_key *k, const struct kv_rdb_stream *s,
			int64_t expire_ms)
{
	struct kv_cbuild b;
	int r = kv_cbuild_begin(kv, &b, KV_STREAM);
	if (r)
		return r;
	b.o.expire_ms = expire_ms;
	const uint8_t *base = s->bytes.p ? s->bytes.p : (const uint8_t *)"";   /* all empty: no buffer */
	uint8_t id[16], pre[8], v[16 + KV_INLINE];
	/* Each entry in the node it came in (kv_stream_put_entry), so that
	 * approximate trims remove what Redis's would. */
	for (size_t i = 0; i < s->ne && !r; i++)
		r = kv_stream_put_entry(kv, b.o.coll.id, s->e[i].id, base + s->e[i].off, s->e[i].len,
					s->e[i].node);
	for (size_t i = 0; i < s->ng && !r; i++) {
		const struct sgroup *g = &s->g[i];
		struct kv_sgroup sg = { g->last, g->read, kv_new_id(kv), g->npel };
		uint8_t gv[KV_SGROUP_BYTES];
		kv_sgroup_encode(gv, &sg);
		be64_out(pre, sg.num);
		r = kv_cbuild_put(kv, &b, KV_STREAM_GROUP, NULL, 0, base + g->off, g->len, gv,
				  sizeof(gv));
		for (size_t j = g->cons; j < g->cons + g->ncons && !r; j++) {
			uint8_t cv[KV_SCONSUMER_BYTES];
			kv_sconsumer_encode(cv, &(struct kv_sconsumer){ s->c[j].seen, s->c[j].pending });
			r = kv_cbuild_put(kv, &b, KV_STREAM_CONSUMER, pre, 8, base + s->c[j].off,
					  s->c[j].len, cv, sizeof(cv));
		}
		for (size_t j = g->pel; j < g->pel + g->npel && !r; j++) {
			const struct spel *p = &s->p[j];
			const struct scons *c = &s->c[p->owner];
			size_t vlen = kv_spending_encode(v, p->delivered, p->count, base + c->off,
							 c->len);
			kv_sid_put(id, p->id);
			r = kv_cbuild_put(kv, &b, KV_STREAM_PEL, pre, 8, id, 16, v, vlen);
		}
	}
	b.o.coll.count = s->ne;
	b.o.coll.last_ms = s->last.ms;
	b.o.coll.last_seq = s->last.seq;
	b.o.coll.del_ms = s->del.ms;
	b.o.coll.del_seq = s->del.seq;
	b.o.coll.added = s->added;
	b.o.coll.node = s->nodes;
	b.o.coll.fill = s->fill;
	b.o.coll.top_ms = s->last.ms;           /* the newest node's last entry, as near as known */
	b.o.coll.top_seq = s->last.seq;
	return kv_cbuild_end(kv, &b, k, r);
}
