/* libFuzzer target for pkvs's RDB value reader (services/kv_rdb_load.c,
 * kv_rdb_stream.c): the bytes of a RESTORE payload or of a primary's full
 * sync, anyone's. The input is a payload's value part (type byte, value;
 * no version or CRC, which a mutated input would never get right), as
 * kv_rdb_restore takes it, and it is decoded as kv_rdb_restore decodes
 * before it writes: whole, nothing after the value.
 *
 * What must hold: the decode ends in 0, -EBADMSG or -ENOMEM, leaking
 * nothing; a value it accepts is whole (its elements inside its bytes,
 * as many as a plain encoding says, of the pkvs type its RDB type is; a
 * string one element, a hash in pairs, a sorted set's scores numbers; a
 * stream's count its entries, IDs rising to at most its last ID, each
 * entry's fields readable by kv_stream_fields_decode, each pending entry
 * of exactly one consumer of its group); and written again in the
 * encodings pkvs's own writer uses (kv_rdb.c: plain collections,
 * RDB_TYPE_STREAM_LISTPACKS_2 nodes) it decodes to the same value.
 *
 * The three sources are included, not linked, for their static decoder
 * (decode_one) and the stream's layout; their store-writing half links
 * against the ordinary libpaste_server, whose copies of these files are
 * then never pulled from the archive (fuzz/meson.build). */
#include "kv_rdb.c"
#include "kv_rdb_load.c"
#include "kv_rdb_stream.c"

#define CHECK(c) ((c) ? (void)0 : check_failed(#c, __LINE__))

static _Noreturn void check_failed(const char *what, int line)
{
	fprintf(stderr, "fuzz_rdb.c:%d: %s\n", line, what);
	abort();
}

/* The pkvs type RDB type t decodes to; KV_STREAM for a stream; -1: none
 * pkvs reads. */
static int type_of(uint8_t t)
{
	switch (t) {
	case T_STRING:
		return KV_STRING;
	case T_LIST: case T_LIST_ZIPLIST: case T_LIST_QUICKLIST: case T_LIST_QUICKLIST_2:
		return KV_LIST;
	case T_SET: case T_SET_INTSET: case T_SET_LISTPACK:
		return KV_SET;
	case T_ZSET: case T_ZSET_2: case T_ZSET_ZIPLIST: case T_ZSET_LISTPACK:
		return KV_ZSET;
	case T_HASH: case T_HASH_ZIPLIST: case T_HASH_LISTPACK:
		return KV_HASH;
	case T_STREAM_LISTPACKS: case T_STREAM_LISTPACKS_2:
		return KV_STREAM;
	}
	return -1;
}

/* ---- collections and strings ---------------------------------------- */

/* Element i's bytes; the buffer stays NULL while every element is empty,
 * and NULL + 0 is undefined. */
static const uint8_t *el_at(const struct elems *e, uint64_t i)
{
	return e->bytes.p ? e->bytes.p + e->off[i] : (const uint8_t *)"";
}

static void elems_check(const struct elems *e, enum kv_type type)
{
	CHECK(!e->n || (e->off && e->len));
	for (uint64_t i = 0; i < e->n; i++)
		CHECK(e->off[i] <= e->bytes.len && e->len[i] <= e->bytes.len - e->off[i]);
	if (type == KV_STRING)
		CHECK(e->n == 1);
	if (type == KV_HASH)
		CHECK(e->n % 2 == 0);
	if (type == KV_ZSET) {
		CHECK(e->score || !e->n);
		for (uint64_t i = 0; i < e->n; i++)
			CHECK(!isnan(e->score[i]));
	}
}

/* e as kv_rdb_value writes a value of its type (put_coll's plain
 * encodings, a string raw). */
static void elems_encode(const struct elems *e, enum kv_type type, struct kv_rdb_buf *b)
{
	switch (type) {
	case KV_STRING:
		put_u8(b, T_STRING);
		put_str(b, el_at(e, 0), e->len[0]);
		return;
	case KV_LIST:
	case KV_SET:
		put_u8(b, type == KV_LIST ? T_LIST : T_SET);
		put_len(b, e->n);
		for (uint64_t i = 0; i < e->n; i++)
			put_str(b, el_at(e, i), e->len[i]);
		return;
	case KV_HASH:
		put_u8(b, T_HASH);
		put_len(b, e->n / 2);
		for (uint64_t i = 0; i < e->n; i++)
			put_str(b, el_at(e, i), e->len[i]);
		return;
	case KV_ZSET:
		put_u8(b, T_ZSET_2);
		put_len(b, e->n);
		for (uint64_t i = 0; i < e->n; i++) {
			uint64_t u;
			memcpy(&u, &e->score[i], 8);
			put_str(b, el_at(e, i), e->len[i]);
			put_le(b, u, 8);
		}
		return;
	default:
		CHECK(!"a collection type decode_one never gives");
	}
}

static void elems_same(const struct elems *a, const struct elems *b, enum kv_type type)
{
	CHECK(a->n == b->n);
	for (uint64_t i = 0; i < a->n; i++) {
		CHECK(a->len[i] == b->len[i]);
		CHECK(!memcmp(el_at(a, i), el_at(b, i), a->len[i]));
		if (type == KV_ZSET)
			CHECK(!memcmp(&a->score[i], &b->score[i], 8));
	}
}

static void fuzz_value(struct kv_rdb_rd *d, uint8_t t)
{
	struct elems e = { 0 };
	enum kv_type type = KV_STRING;
	int r = decode_one(d, t, &e, &type);
	if (!r && d->at != d->len)
		r = -EBADMSG;
	CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
	CHECK(d->at <= d->len);
	if (r) {
		el_free(&e);
		return;
	}
	CHECK((int)type == type_of(t));
	elems_check(&e, type);
	/* The plain encodings say how many elements follow: all were read. */
	if (t == T_LIST || t == T_SET || t == T_HASH || t == T_ZSET || t == T_ZSET_2) {
		uint64_t claimed;
		size_t at = 1;
		CHECK(kv_rdb_len_decode(d->p, d->len, &at, &claimed, NULL) == 0);
		CHECK(e.n == (t == T_HASH ? 2 * claimed : claimed));
	}

	struct kv_rdb_buf b = { 0 };
	elems_encode(&e, type, &b);
	if (!b.oom) {
		struct kv_rdb_rd d2 = { .p = b.p, .len = b.len };
		struct elems e2 = { 0 };
		enum kv_type type2 = KV_STRING;
		uint8_t t2 = get_u8(&d2);
		r = decode_one(&d2, t2, &e2, &type2);
		CHECK(r == 0 || r == -ENOMEM);
		if (!r) {
			CHECK(d2.at == d2.len && type2 == type);
			elems_same(&e, &e2, type);
		}
		el_free(&e2);
	}
	kv_rdb_free(&b);
	el_free(&e);
}

/* ---- streams --------------------------------------------------------- */

/* s's bytes at off (NULL + 0 is undefined: see el_at). */
static const uint8_t *sb_at(const struct kv_rdb_stream *s, size_t off)
{
	return s->bytes.p ? s->bytes.p + off : (const uint8_t *)"";
}

static bool in_bytes(const struct kv_rdb_stream *s, size_t off, size_t len)
{
	return off <= s->bytes.len && len <= s->bytes.len - off;
}

static void stream_check(const struct kv_rdb_stream *s)
{
	CHECK(s->count == s->ne);
	uint64_t node = 0;
	for (size_t i = 0; i < s->ne; i++) {
		const struct sentry *e = &s->e[i];
		uint32_t n;
		CHECK(!i || kv_sid_cmp(s->e[i - 1].id, e->id) < 0);
		CHECK(e->node >= node && e->node >= 1 && e->node <= s->nodes);
		node = e->node;
		CHECK(in_bytes(s, e->off, e->len));
		CHECK(kv_stream_fields_decode(sb_at(s, e->off), e->len, &n, NULL, NULL) == 0);
	}
	CHECK(!s->ne || kv_sid_cmp(s->e[s->ne - 1].id, s->last) <= 0);
	size_t pel = 0, cons = 0;
	for (size_t i = 0; i < s->ng; i++) {
		const struct sgroup *g = &s->g[i];
		/* Each group's pending entries and consumers are the next slices. */
		CHECK(g->pel == pel && g->npel <= s->np - pel);
		CHECK(g->cons == cons && g->ncons <= s->nc - cons);
		pel += g->npel, cons += g->ncons;
		CHECK(in_bytes(s, g->off, g->len) && g->len <= KV_INLINE);
		uint64_t owned = 0;
		for (size_t j = g->cons; j < g->cons + g->ncons; j++) {
			const struct scons *c = &s->c[j];
			CHECK(in_bytes(s, c->off, c->len) && c->len <= KV_INLINE);
			owned += c->pending;
		}
		CHECK(owned == g->npel);
		for (size_t j = g->pel; j < g->pel + g->npel; j++) {
			const struct spel *p = &s->p[j];
			CHECK(j == g->pel || kv_sid_cmp(p[-1].id, p->id) < 0);
			CHECK(p->owner >= g->cons && p->owner < g->cons + g->ncons);
		}
	}
	CHECK(pel == s->np && cons == s->nc);
}

/* s as pkvs's writer writes a stream (put_stream, from decoded parts
 * rather than the store): its node writer, then the record, then the
 * groups, each consumer's pending IDs in ID order. */
static int stream_encode(const struct kv_rdb_stream *s, struct kv_rdb_buf *b)
{
	struct node nd = { 0 };
	struct fvs x = { 0 };
	struct kv_rdb_buf nodes = { 0 };
	int r = 0;
	for (size_t i = 0; i < s->ne && !r; i++) {
		uint32_t n;
		x.n = 0;
		CHECK(kv_stream_fields_decode(sb_at(s, s->e[i].off), s->e[i].len, &n, fv_add, &x) == 0);
		r = x.oom ? -ENOMEM : node_add(&nd, &nodes, s->e[i].id, s->e[i].node, &x);
	}
	if (!r)
		r = node_flush(&nd, &nodes);
	if (!r && (nd.body.oom || nd.master.oom || nodes.oom))
		r = -ENOMEM;
	struct kv_sid first = s->ne ? s->e[0].id : (struct kv_sid){ 0, 0 };
	put_u8(b, T_STREAM_LISTPACKS_2);
	put_len(b, nd.nodes);
	kv_rdb_put(b, nodes.p, nodes.len);
	put_len(b, s->count);
	put_len(b, s->last.ms);
	put_len(b, s->last.seq);
	put_len(b, first.ms);
	put_len(b, first.seq);
	put_len(b, s->del.ms);
	put_len(b, s->del.seq);
	put_len(b, s->added);
	put_len(b, s->ng);
	for (size_t i = 0; i < s->ng; i++) {
		const struct sgroup *g = &s->g[i];
		put_str(b, sb_at(s, g->off), g->len);
		put_len(b, g->last.ms);
		put_len(b, g->last.seq);
		put_len(b, (uint64_t)g->read);
		put_len(b, g->npel);
		for (size_t j = g->pel; j < g->pel + g->npel; j++) {
			put_id(b, s->p[j].id);
			put_le(b, s->p[j].delivered, 8);
			put_len(b, s->p[j].count);
		}
		put_len(b, g->ncons);
		for (size_t j = g->cons; j < g->cons + g->ncons; j++) {
			const struct scons *c = &s->c[j];
			put_str(b, sb_at(s, c->off), c->len);
			put_le(b, c->seen, 8);
			put_len(b, c->pending);
			for (size_t k = g->pel; k < g->pel + g->npel; k++)
				if (s->p[k].owner == j)
					put_id(b, s->p[k].id);
		}
	}
	if (!r && b->oom)
		r = -ENOMEM;
	kv_rdb_free(&nd.body);
	kv_rdb_free(&nd.lp);
	kv_rdb_free(&nd.master);
	kv_rdb_free(&nodes);
	free(x.a);
	return r;
}

static bool same_bytes(const struct kv_rdb_stream *a, size_t ao, size_t al,
		       const struct kv_rdb_stream *b, size_t bo, size_t bl)
{
	return al == bl && !memcmp(sb_at(a, ao), sb_at(b, bo), al);
}

/* Node numbers and fill are left out: the writer cuts nodes its own way
 * (100 entries, no deleted ones). */
static void stream_same(const struct kv_rdb_stream *a, const struct kv_rdb_stream *b)
{
	CHECK(a->ne == b->ne && a->count == b->count && a->added == b->added);
	CHECK(!kv_sid_cmp(a->last, b->last) && !kv_sid_cmp(a->del, b->del));
	for (size_t i = 0; i < a->ne; i++) {
		CHECK(!kv_sid_cmp(a->e[i].id, b->e[i].id));
		CHECK(same_bytes(a, a->e[i].off, a->e[i].len, b, b->e[i].off, b->e[i].len));
	}
	CHECK(a->ng == b->ng && a->np == b->np && a->nc == b->nc);
	for (size_t i = 0; i < a->ng; i++) {
		const struct sgroup *g = &a->g[i], *h = &b->g[i];
		CHECK(same_bytes(a, g->off, g->len, b, h->off, h->len));
		CHECK(!kv_sid_cmp(g->last, h->last) && g->read == h->read);
		CHECK(g->pel == h->pel && g->npel == h->npel && g->cons == h->cons &&
		      g->ncons == h->ncons);
	}
	for (size_t j = 0; j < a->np; j++) {
		const struct spel *p = &a->p[j], *q = &b->p[j];
		CHECK(!kv_sid_cmp(p->id, q->id) && p->delivered == q->delivered &&
		      p->count == q->count && p->owner == q->owner);
	}
	for (size_t j = 0; j < a->nc; j++) {
		const struct scons *c = &a->c[j], *k = &b->c[j];
		CHECK(same_bytes(a, c->off, c->len, b, k->off, k->len));
		CHECK(c->seen == k->seen && c->pending == k->pending);
	}
}

static void fuzz_stream(struct kv_rdb_rd *d, uint8_t t)
{
	struct kv_rdb_stream *s = NULL;
	int r = kv_rdb_stream_decode(d, t, &s);
	if (!r && d->at != d->len)
		r = -EBADMSG;
	CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
	CHECK(s || r == -ENOMEM);
	CHECK(d->at <= d->len);
	if (r) {
		kv_rdb_stream_free(s);
		return;
	}
	stream_check(s);

	struct kv_rdb_buf b = { 0 };
	if (!stream_encode(s, &b)) {
		struct kv_rdb_rd d2 = { .p = b.p, .len = b.len };
		struct kv_rdb_stream *s2 = NULL;
		uint8_t t2 = get_u8(&d2);
		r = kv_rdb_stream_decode(&d2, t2, &s2);
		CHECK(r == 0 || r == -ENOMEM);
		if (!r) {
			CHECK(d2.at == d2.len);
			stream_check(s2);
			stream_same(s, s2);
		}
		kv_rdb_stream_free(s2);
	}
	kv_rdb_free(&b);
	kv_rdb_stream_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Larger inputs find nothing smaller ones do not, only slower. */
	if (size > (1u << 20))
		return 0;
	struct kv_rdb_rd d = { .p = data, .len = size };
	uint8_t t = get_u8(&d);
	if (d.bad)
		return 0;
	if (t == T_STREAM_LISTPACKS || t == T_STREAM_LISTPACKS_2)
		fuzz_stream(&d, t);
	else
		fuzz_value(&d, t);
	return 0;
}
