/* test_kv_rdb.c - Redis's RDB format for pkvs's keys (services/kv_rdb.c):
 * the CRC-64 against Redis's check value; payloads Redis 7.0.15's DUMP
 * wrote (raw, integer and LZF strings, an intset, listpack hashes and
 * sorted sets, a quicklist of listpacks, streams with deleted entries,
 * groups, pending entries and consumers) restored and read back; every
 * type dumped and restored byte for byte; damaged payloads refused (a
 * stream's in each way Redis's loader refuses one); a whole data set
 * (several databases, deadlines) as a snapshot, loaded again, and
 * written again the same. */
#include <math.h>
#include <stdarg.h>

#include "kv_fixture.h"
#include "kv_hash.h"
#include "kv_list.h"
#include "kv_rdb.h"
#include "kv_rdb_fmt.h"
#include "kv_stream.h"
#include "kv_zset.h"

static struct kenv E;

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	return n;
}

static void test_crc64(void)
{
	CHECK(kv_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caull);
	CHECK(kv_crc64(0, "", 0) == 0);
	/* In pieces as at once. */
	uint64_t c = kv_crc64(0, "1234", 4);
	CHECK(kv_crc64(c, "56789", 5) == 0xe9c6d914c4b8d9caull);
}

/* Restore Redis's payload (hex) under key. */
static int restore_hex(const char *key, const char *hex)
{
	uint8_t p[256];
	size_t n = unhex(hex, p);
	CHECK(kv_rdb_payload_ok(p, n));
	struct kv_key k;
	key_of(&E, &k, 0, key);
	return kv_rdb_restore(E.kv, &k, p, n - 10, KV_NO_TTL);
}

static bool set_has(const char *key, const char *m)
{
	struct kv_cset s;
	key_of(&E, &s.key, 0, key);
	return kv_cset_open(E.kv, &s, KV_SET, false) == 0 && kv_set_has(E.kv, &s, m, strlen(m));
}

static bool hash_is(const char *key, const char *f, const char *v)
{
	struct kv_hash h;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	char b[64];
	key_of(&E, &h.key, 0, key);
	if (kv_hash_open(E.kv, &h, false) || kv_hash_get(E.kv, &h, f, strlen(f), ext, &n, &len, NULL) ||
	    len >= sizeof(b))
		return false;
	paste_store_read(E.kv->store, ext, n, 0, b, len);
	return len == strlen(v) && !memcmp(b, v, len);
}

static bool list_at(const char *key, uint64_t i, const char *v)
{
	struct kv_list l;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	char b[64];
	key_of(&E, &l.key, 0, key);
	if (kv_list_open(E.kv, &l, false) || kv_list_get(E.kv, &l, i, ext, &n, &len, NULL) || len >= sizeof(b))
		return false;
	paste_store_read(E.kv->store, ext, n, 0, b, len);
	return len == strlen(v) && !memcmp(b, v, len);
}

static double zscore(const char *key, const char *m)
{
	struct kv_cset s;
	double d = NAN;
	key_of(&E, &s.key, 0, key);
	if (kv_cset_open(E.kv, &s, KV_ZSET, false) == 0)
		kv_zset_score(E.kv, &s, m, strlen(m), &d);
	return d;
}

static uint64_t count_of(const char *key)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, key);
	return kv_lookup(E.kv, &k, &o, false) ? 0 : o.coll.count;
}

/* What Redis 7.0.15's DUMP answered for these keys. */
static void test_redis_payloads(void)
{
	char b[128];
	CHECK_EQ(restore_hex("s", "000568656c6c6f0a006372df766534200a"), 0);
	CHECK(has_str(&E, 0, "s", "hello"));
	CHECK_EQ(restore_hex("i", "00c139300a009d94ea2793fc08b9"), 0);
	CHECK(has_str(&E, 0, "i", "12345"));
	CHECK_EQ(restore_hex("l", "00c30b405a0361626361e04b020162630a00238036f9e2d0c780"), 0);
	size_t k = 0;
	for (int i = 0; i < 30; i++)
		k += (size_t)snprintf(b + k, sizeof(b) - k, "abc");
	CHECK(has_str(&E, 0, "l", b));
	CHECK_EQ(restore_hex("is", "0b18040000000400000090eefeff0100000002000000030000000a00a8b63c622cbf2c9c"), 0);
	CHECK_EQ(count_of("is"), 4);
	CHECK(set_has("is", "-70000") && set_has("is", "1") && set_has("is", "3"));
	CHECK_EQ(restore_hex("h", "1016160000000400826631038276310382663203c0de02ff0a0080b06c64f4b6e8ba"), 0);
	CHECK_EQ(count_of("h"), 2);
	CHECK(hash_is("h", "f1", "v1") && hash_is("h", "f2", "222"));
	CHECK_EQ(restore_hex("li", "12010213130000000400816102826262030701df7f02ff0a00a11a87b129ce474d"), 0);
	CHECK_EQ(count_of("li"), 4);
	CHECK(list_at("li", 0, "a") && list_at("li", 1, "bb") && list_at("li", 2, "7") &&
	      list_at("li", 3, "-129"));
	CHECK_EQ(restore_hex("z", "111a1a0000000600817702dffd0281780283312e35048179020201ff0a00c02eb9d878fb7651"), 0);
	CHECK_EQ(count_of("z"), 3);
	CHECK(zscore("z", "w") == -3 && zscore("z", "x") == 1.5 && zscore("z", "y") == 2);
}

/* Key's payload as pkvs writes it. */
static bool dump_of(const char *key, struct kv_rdb_buf *b)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, key);
	return kv_lookup(E.kv, &k, &o, false) == 0 && kv_rdb_dump(E.kv, &o, b) == 0;
}

static void test_round_trip(void)
{
	const char *keys[] = { "s", "i", "l", "is", "h", "li", "z" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct kv_rdb_buf a = { 0 }, b = { 0 };
		CHECK(dump_of(keys[i], &a));
		CHECK(kv_rdb_payload_ok(a.p, a.len));
		struct kv_key k;
		key_of(&E, &k, 0, "copy");
		CHECK_EQ(kv_rdb_restore(E.kv, &k, a.p, a.len - 10, KV_NO_TTL), 0);
		CHECK(dump_of("copy", &b));
		CHECK(a.len == b.len && !memcmp(a.p, b.p, a.len));
		/* A flipped byte: the CRC tells. */
		a.p[1] ^= 1;
		CHECK(!kv_rdb_payload_ok(a.p, a.len));
		/* A cut value: not read. */
		CHECK_EQ(kv_rdb_restore(E.kv, &k, b.p, b.len - 12, KV_NO_TTL), -EBADMSG);
		kv_rdb_free(&a);
		kv_rdb_free(&b);
	}
	/* An LZF string that claims more than a string may hold: refused,
	 * not dropped (a hash of one field and no value was read). */
	static const uint8_t lzf[] = { 0x04, 0x01, 0x01, 0x66, 0xc3, 0x00, 0x81, 0xff, 0xff,
				       0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct kv_key hk;
	key_of(&E, &hk, 0, "lzf");
	CHECK_EQ(kv_rdb_restore(E.kv, &hk, lzf, sizeof(lzf), KV_NO_TTL), -EBADMSG);
	CHECK(absent(&E, 0, "lzf"));
	/* A newer RDB version is refused. */
	struct kv_rdb_buf a = { 0 };
	CHECK(dump_of("s", &a));
	a.p[a.len - 10] = 11;
	CHECK(!kv_rdb_payload_ok(a.p, a.len));
	kv_rdb_free(&a);
}

/* ---- streams ---- */

static void fv_cat(void *arg, uint32_t i, const uint8_t *f, size_t flen, const uint8_t *v,
		   size_t vlen)
{
	struct kv_rdb_buf *b = arg;
	(void)i;
	kv_rdb_put(b, " ", 1);
	kv_rdb_put(b, f, flen);
	kv_rdb_put(b, "=", 1);
	kv_rdb_put(b, v, vlen);
}

static void catf(struct kv_rdb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void catf(struct kv_rdb_buf *b, const char *fmt, ...)
{
	char s[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	kv_rdb_put(b, s, n < (int)sizeof(s) ? (size_t)n : sizeof(s) - 1);
}

#define ULL(x) ((unsigned long long)(x))

/* Stream key as text: its record, entries, and each group with its
 * pending entries and consumers, in the tree's order. */
static bool describe(const char *key, struct kv_rdb_buf *b)
{
	struct kv_stream s;
	key_of(&E, &s.key, 0, key);
	if (kv_stream_open(E.kv, &s, false))
		return false;
	const struct kv_coll *c = &s.o.coll;
	catf(b, "count %llu last %llu-%llu del %llu-%llu added %llu", ULL(c->count), ULL(c->last_ms),
	     ULL(c->last_seq), ULL(c->del_ms), ULL(c->del_seq), ULL(c->added));
	struct kv_stream_walk w;
	kv_stream_walk_init(E.kv, &w, c->id, (struct kv_sid){ 0, 0 }, false);
	static uint8_t v[16384];
	while (kv_stream_walk_next(E.kv, &w) == 1) {
		uint32_t n;
		if (w.len > sizeof(v))
			return false;
		paste_store_read(E.kv->store, w.ext, w.n, 0, v, w.len);
		catf(b, "|%llu-%llu", ULL(w.id.ms), ULL(w.id.seq));
		if (kv_stream_fields_decode(v, w.len, &n, fv_cat, b))
			return false;
	}
	struct kv_sgroup_walk g;
	kv_sgroup_walk_init(E.kv, &g, c->id);
	while (kv_sgroup_walk_next(E.kv, &g) == 1) {
		catf(b, "|group %.*s last %llu-%llu read %lld pending %llu", (int)g.nlen, g.name,
		     ULL(g.g.last.ms), ULL(g.g.last.seq), (long long)g.g.read, ULL(g.g.pending));
		struct kv_spending_walk p;
		kv_spending_walk_init(E.kv, &p, c->id, g.g.num, (struct kv_sid){ 0, 0 });
		while (kv_spending_walk_next(E.kv, &p) == 1)
			catf(b, "|pel %llu-%llu %llu %llu %.*s", ULL(p.p.id.ms), ULL(p.p.id.seq),
			     ULL(p.p.delivered_ms), ULL(p.p.count), (int)p.p.clen, p.p.consumer);
		struct kv_sconsumer_walk k;
		kv_sconsumer_walk_init(E.kv, &k, c->id, g.g.num);
		while (kv_sconsumer_walk_next(E.kv, &k) == 1)
			catf(b, "|consumer %.*s %llu %llu", (int)k.nlen, k.name, ULL(k.c.seen_ms),
			     ULL(k.c.pending));
	}
	kv_rdb_put(b, "", 1);
	return !b->oom;
}

static bool stream_is(const char *key, const char *want)
{
	struct kv_rdb_buf b = { 0 };
	bool ok = describe(key, &b) && !strcmp((const char *)b.p, want);
	if (!ok)
		fprintf(stderr, "  %s is: %s\n  wanted: %s\n", key,
			b.p ? (const char *)b.p : "(none)", want);
	kv_rdb_free(&b);
	return ok;
}

/* Restore payload p[0..n) (value, version, CRC) under key. */
static int restore_bytes(const char *key, const uint8_t *p, size_t n)
{
	struct kv_key k;
	key_of(&E, &k, 0, key);
	if (!kv_rdb_payload_ok(p, n))
		return -EINVAL;
	return kv_rdb_restore(E.kv, &k, p, n - 10, KV_NO_TTL);
}

/* Redis 7.0.15's DUMP (stream-node-max-entries 3) after XADD st 1-1 name
 * ann age 31, 1-2 name bob age 7, 2-0 city paris, 3-5 name cy age -4096,
 * 3-6 name dee age 123456789012; XDEL st 1-2; XGROUP CREATE st g1 0;
 * XREADGROUP GROUP g1 alice COUNT 2 (1-1, 2-0), bob COUNT 1 (3-5);
 * XGROUP CREATECONSUMER st g1 carol; XGROUP CREATE st g2 $ and 12345 0
 * (a name Redis writes as an integer). */
static const char ST_HEX[] =
	"130210000000000000000100000000000000014050500000001900020101010201846e616d6505836167"
	"6504000102010001000183616e6e041f01050103010001010183626f62040701050100010101dfff0201"
	"01846369747905857061726973060601ff1000000000000000030000000000000005404040000000120002"
	"0100010201846e616d65058361676504000102010001000182637903d000020501020100010101836465"
	"6504f4141a99be1c000000090501ff040306010101020503c13930000081ffffffffffffffff00000267"
	"31030581ffffffffffffffff03000000000000000100000000000000017aba6220a20100000100000000"
	"0000000200000000000000007aba6220a2010000010000000000000003000000000000000586ba6220a2"
	"010000010305616c6963657aba6220a201000002000000000000000100000000000000010000000000000"
	"002000000000000000003626f6286ba6220a20100000100000000000000030000000000000005056361726f"
	"6c8dba6220a201000000026732030681ffffffffffffffff00000a00e7e1927e93b2a433";
#define ST_ENTRIES "|1-1 name=ann age=31|2-0 city=paris|3-5 name=cy age=-4096" \
	"|3-6 name=dee age=123456789012"
#define ST_G1 "|group g1 last 3-5 read -1 pending 3|pel 1-1 1795839670906 1 alice" \
	"|pel 2-0 1795839670906 1 alice|pel 3-5 1795839670918 1 bob|consumer alice 1795839670906 2" \
	"|consumer bob 1795839670918 1|consumer carol 1795839670925 0"
#define ST_DESC "count 4 last 3-6 del 1-2 added 5" ST_ENTRIES \
	"|group 12345 last 0-0 read -1 pending 0" ST_G1 "|group g2 last 3-6 read -1 pending 0"
/* The same as Redis 6 wrote it (type 15): entries added are the length,
 * no deleted ID; entries read estimated (as Redis 7.0 does). */
#define ST15_DESC "count 4 last 3-6 del 0-0 added 4" ST_ENTRIES \
	"|group 12345 last 0-0 read 0 pending 0" ST_G1 "|group g2 last 3-6 read 4 pending 0"
/* XADD em 5-1 a 1; XDEL em 5-1; XGROUP CREATE em g 0: empty, with a group. */
static const char EM_HEX[] =
	"13000005010000050101010167000081ffffffffffffffff00000a00a912bcdf5c5ace00";
#define EM_DESC "count 0 last 5-1 del 5-1 added 1|group g last 0-0 read -1 pending 0"
/* XADD lz 1-1 f (ab x 60) g x, 1-2 f (ab x 60) g y: an LZF-compressed node. */
static const char LZ_HEX[] =
	"13011000000000000000010000000000000001c33641211121010000120002010001020181660281670240"
	"090000200103e0786162e06d01047a81780205208f02000101e074850079208500ff0201020101000002"
	"000a00457cbbef59ab032d";

static int restore_stream_hex(const char *key, const char *hex)
{
	static uint8_t p[1024];
	return restore_bytes(key, p, unhex(hex, p));
}

static void lz_desc(char *out, size_t cap)
{
	char ab[121];
	for (int i = 0; i < 60; i++)
		memcpy(ab + 2 * i, "ab", 2);
	ab[120] = 0;
	snprintf(out, cap, "count 2 last 1-2 del 0-0 added 2|1-1 f=%s g=x|1-2 f=%s g=y", ab, ab);
}

static void test_stream_redis(void)
{
	char lz[512];
	lz_desc(lz, sizeof(lz));
	CHECK_EQ(restore_stream_hex("st", ST_HEX), 0);
	CHECK(stream_is("st", ST_DESC));
	/* Nodes: each entry in the node it came in; the record's newest node
	 * and what was added to it, 1-2 (deleted) too. */
	struct kv_stream s;
	key_of(&E, &s.key, 0, "st");
	CHECK_EQ(kv_stream_open(E.kv, &s, false), 0);
	struct kv_stream_walk w;
	kv_stream_walk_init(E.kv, &w, s.o.coll.id, (struct kv_sid){ 0, 0 }, false);
	uint64_t node[4] = { 0 }, want[4] = { 1, 1, 2, 2 };   /* the payload's two nodes */
	for (int i = 0; i < 4 && kv_stream_walk_next(E.kv, &w) == 1; i++)
		node[i] = w.node;
	CHECK(!memcmp(node, want, sizeof(node)));
	CHECK_EQ(s.o.coll.node, 2);
	CHECK_EQ(s.o.coll.fill, 2);
	CHECK_EQ(restore_stream_hex("em", EM_HEX), 0);
	CHECK(stream_is("em", EM_DESC));
	CHECK_EQ(restore_stream_hex("lz", LZ_HEX), 0);
	CHECK(stream_is("lz", lz));
	/* Over a key of another type, and with a deadline. */
	struct kv_key k;
	struct kv_obj o;
	uint8_t p[1024];
	size_t n = unhex(ST_HEX, p);
	key_of(&E, &k, 0, "s");
	CHECK_EQ(kv_rdb_restore(E.kv, &k, p, n - 10, E.kv->now_ms + 100000), 0);
	CHECK(kv_lookup(E.kv, &k, &o, false) == 0 && o.type == KV_STREAM &&
	      o.expire_ms == E.kv->now_ms + 100000);
	CHECK(stream_is("s", ST_DESC));
	CHECK_EQ(restore_hex("s", "000568656c6c6f0a006372df766534200a"), 0);
}

/* pkvs's DUMP of each: type 19, restored the same, dumped again byte for
 * byte. */
static void test_stream_round_trip(void)
{
	char lz[512];
	lz_desc(lz, sizeof(lz));
	const char *keys[] = { "st", "em", "lz" }, *want[] = { ST_DESC, EM_DESC, lz };
	for (int i = 0; i < 3; i++) {
		struct kv_rdb_buf a = { 0 }, b = { 0 };
		CHECK(dump_of(keys[i], &a));
		CHECK(a.len && a.p[0] == 19 && kv_rdb_payload_ok(a.p, a.len));
		CHECK_EQ(restore_bytes("copy", a.p, a.len), 0);
		CHECK(stream_is("copy", want[i]));
		CHECK(dump_of("copy", &b));
		CHECK(a.len == b.len && !memcmp(a.p, b.p, a.len));
		kv_rdb_free(&a);
		kv_rdb_free(&b);
	}
}

/* Ways to damage "st" (D_NONE: none; D_TYPE15: Redis 6's type). */
enum dmg {
	D_NONE, D_TYPE15, D_CONS_MISSING, D_DUP_GROUP, D_LENGTH, D_LAST_LOW, D_ORPHAN,
	D_DUP_CONSUMER, D_DUP_PEL, D_CLAIMED_TWICE, D_LP_COUNT, D_LP_BYTES, D_LP_DELETED,
	D_LP_BACKLEN, D_NODE_KEY, D_NODE_ORDER, D_TRAILING, D_NDMG
};
/* Its two nodes' listpacks as Redis wrote them (master IDs 1-1, 3-5). */
static const char *const ST_LP[2] = {
	"500000001900020101010201846e616d65058361676504000102010001000183616e6e041f010501030100"
	"01010183626f62040701050100010101dfff020101846369747905857061726973060601ff",
	"400000001200020100010201846e616d65058361676504000102010001000182637903d000020501020100"
	"0101018364656504f4141a99be1c000000090501ff",
};

static void b_len(struct kv_rdb_buf *b, uint64_t n)
{
	uint8_t o[9];
	kv_rdb_put(b, o, kv_rdb_len_encode(o, n));
}

static void b_str(struct kv_rdb_buf *b, const char *s)
{
	b_len(b, strlen(s));
	kv_rdb_put(b, s, strlen(s));
}

static void b_raw(struct kv_rdb_buf *b, uint64_t v, int bytes, bool be)
{
	uint8_t o[8];
	for (int i = 0; i < bytes; i++)
		o[be ? bytes - 1 - i : i] = (uint8_t)(v >> (8 * i));
	kv_rdb_put(b, o, (size_t)bytes);
}

static void b_id(struct kv_rdb_buf *b, uint64_t ms, uint64_t seq)
{
	b_raw(b, ms, 8, true);
	b_raw(b, seq, 8, true);
}

/* "st" as a payload, damaged by d. */
static void st_payload(enum dmg d, struct kv_rdb_buf *b)
{
	const uint64_t t1 = 1795839670906, t2 = 1795839670918, t3 = 1795839670925, none = UINT64_MAX;
	bool v2 = d != D_TYPE15;
	uint8_t lp[2][128];
	size_t n[2] = { unhex(ST_LP[0], lp[0]), unhex(ST_LP[1], lp[1]) };
	if (d == D_LP_COUNT)
		lp[0][n[0] - 3] = 7;            /* the last entry's element count */
	if (d == D_LP_BYTES)
		lp[0][0]++;                     /* the listpack's length */
	if (d == D_LP_DELETED)
		lp[0][8] = 0;                   /* the master entry's deleted count */
	if (d == D_LP_BACKLEN)
		lp[0][n[0] - 2] = 2;            /* the last element's back length */
	b_raw(b, v2 ? T_STREAM_LISTPACKS_2 : T_STREAM_LISTPACKS, 1, false);
	b_len(b, 2);
	for (int k = 0; k < 2; k++) {
		int i = d == D_NODE_ORDER ? 1 - k : k;
		b_len(b, 16);
		b_id(b, i ? 3 : 1, i ? 5 : 1);
		if (d == D_NODE_KEY && k == 0)
			b->p[b->len - 17] = 15, b->len--;
		b_len(b, n[i]);
		kv_rdb_put(b, lp[i], n[i]);
	}
	b_len(b, d == D_LENGTH ? 5 : 4);
	b_len(b, 3);
	b_len(b, d == D_LAST_LOW ? 5 : 6);
	if (v2)
		b_len(b, 1), b_len(b, 1), b_len(b, 1), b_len(b, 2), b_len(b, 5);
	b_len(b, 3);
	b_str(b, "12345");
	b_len(b, 0), b_len(b, 0);
	if (v2)
		b_len(b, none);
	b_len(b, 0), b_len(b, 0);
	b_str(b, "g1");
	b_len(b, 3), b_len(b, 5);
	if (v2)
		b_len(b, none);
	b_len(b, d == D_DUP_PEL ? 4 : 3);
	const uint64_t pel[4][3] = { { 1, 1, t1 }, { 2, 0, t1 }, { 3, 5, t2 }, { 1, 1, t1 } };
	for (int i = 0; i < (d == D_DUP_PEL ? 4 : 3); i++) {
		b_id(b, pel[i][0], pel[i][1]);
		b_raw(b, pel[i][2], 8, false);
		b_len(b, 1);
	}
	b_len(b, 3);
	b_str(b, "alice");
	b_raw(b, t1, 8, false);
	b_len(b, d == D_CONS_MISSING ? 3 : 2);
	b_id(b, 1, 1), b_id(b, 2, 0);
	if (d == D_CONS_MISSING)
		b_id(b, 3, 6);                  /* not in the group's list */
	b_str(b, "bob");
	b_raw(b, t2, 8, false);
	b_len(b, d == D_ORPHAN ? 0 : d == D_CLAIMED_TWICE ? 2 : 1);
	if (d != D_ORPHAN)
		b_id(b, 3, 5);
	if (d == D_CLAIMED_TWICE)
		b_id(b, 1, 1);                  /* alice's too */
	b_str(b, d == D_DUP_CONSUMER ? "bob" : "carol");
	b_raw(b, t3, 8, false);
	b_len(b, 0);
	b_str(b, d == D_DUP_GROUP ? "g1" : "g2");
	b_len(b, 3), b_len(b, 6);
	if (v2)
		b_len(b, none);
	b_len(b, 0), b_len(b, 0);
	if (d == D_TRAILING)
		b_len(b, 0);
	kv_rdb_seal(b, 0);
}

static void test_stream_damaged(void)
{
	for (int d = 0; d < D_NDMG; d++) {
		struct kv_rdb_buf b = { 0 };
		st_payload((enum dmg)d, &b);
		int r = restore_bytes(d <= D_TYPE15 ? "built" : "st", b.p, b.len);
		if (d == D_NONE)
			CHECK(r == 0 && stream_is("built", ST_DESC));
		else if (d == D_TYPE15)
			CHECK(r == 0 && stream_is("built", ST15_DESC));
		else if (r != -EBADMSG)
			CHECK_EQ(d * 1000 + r, d * 1000 - EBADMSG);
		kv_rdb_free(&b);
	}
	CHECK(stream_is("st", ST_DESC));        /* left as it was */
	/* Redis's payload cut anywhere, or with a byte changed: refused or
	 * read, never past its end (the sanitizers' builds tell). */
	uint8_t p[1024];
	size_t n = unhex(ST_HEX, p) - 10;
	struct kv_key k;
	key_of(&E, &k, 0, "cut");
	int bad = 0, read = 0;
	for (size_t cut = 0; cut < n; cut++)
		bad += kv_rdb_restore(E.kv, &k, p, cut, KV_NO_TTL) == -EBADMSG;
	CHECK_EQ(bad, (int)n);
	for (size_t i = 0; i < n; i++)
		for (int bit = 0; bit < 8; bit += 3) {
			p[i] ^= (uint8_t)(1 << bit);
			int r = kv_rdb_restore(E.kv, &k, p, n, KV_NO_TTL);
			p[i] ^= (uint8_t)(1 << bit);
			read += r == 0;
			if (r && r != -EBADMSG)
				CHECK_EQ(r, -EBADMSG);
		}
	CHECK(read > 0 && read < 3 * (int)n);
}

/* A stream written by pkvs itself, of more entries than a node holds and
 * an entry over 4 KiB: nodes of 100 entries, restored the same. */
static void test_stream_nodes(void)
{
	struct kv_stream s;
	key_of(&E, &s.key, 0, "big");
	kv_stream_new(E.kv, &s);
	static char big[5000];
	memset(big, 'x', sizeof(big));
	int r = kv_stream_begin(E.kv, &s, 0);
	for (uint32_t i = 0; i < 250 && !r; i++) {
		char num[24], other[24];
		snprintf(num, sizeof(num), "%u", i * 7);
		snprintf(other, sizeof(other), "o%u", i);
		struct paste_resp_arg av[4] = {
			{ "name", 4 }, { i == 120 ? big : num, i == 120 ? sizeof(big) : strlen(num) },
			{ i % 50 != 7 ? "n" : other, i % 50 != 7 ? 1 : strlen(other) }, { "007", 3 },
		};
		uint8_t val[6000];
		kv_stream_fields_encode(val, av, 2);
		r = kv_stream_append(E.kv, &s, (struct kv_sid){ 1000 + i / 3, i % 3 }, val,
				     kv_stream_fields_size(av, 2));
	}
	CHECK_EQ(kv_stream_end(E.kv, &s, r), 0);
	CHECK_EQ(kv_stream_delete(E.kv, &s, (struct kv_sid){ 1001, 1 }), 1);
	struct kv_sgroup g = { { 1010, 0 }, 31, kv_new_id(E.kv), 1 };
	CHECK_EQ(kv_sgroup_put(E.kv, &s, "grp", 3, &g), 0);
	CHECK_EQ(kv_spending_put(E.kv, &s, g.num, (struct kv_sid){ 1005, 2 }, 77, 2, "c", 1), 0);
	CHECK_EQ(kv_sconsumer_put(E.kv, &s, g.num, "c", 1, &(struct kv_sconsumer){ 78, 1 }), 0);
	struct kv_rdb_buf a = { 0 }, b = { 0 }, da = { 0 }, db = { 0 };
	CHECK(dump_of("big", &a));
	/* 0-99, 100-199, 200-249 (one deleted). */
	CHECK(a.len > 2 && a.p[0] == 19 && a.p[1] == 3);
	CHECK_EQ(restore_bytes("big2", a.p, a.len), 0);
	CHECK(describe("big", &da) && describe("big2", &db));
	CHECK(da.len == db.len && !memcmp(da.p, db.p, da.len));
	const char *d = (const char *)da.p;
	CHECK(strstr(d, "count 249 last 1083-0 del 1001-1 added 250|1000-0 name=0 n=007|"));
	CHECK(strstr(d, "|group grp last 1010-0 read 31 pending 1|pel 1005-2 77 2 c|consumer c 78 1"));
	CHECK(dump_of("big2", &b));
	CHECK(a.len == b.len && !memcmp(a.p, b.p, a.len));
	kv_rdb_free(&a);
	kv_rdb_free(&b);
	kv_rdb_free(&da);
	kv_rdb_free(&db);
}

/* The snapshot's part after the AUX fields, without the CRC. */
static const uint8_t *body_of(const struct kv_rdb_buf *b, size_t *len)
{
	const uint8_t *p = memchr(b->p + 9, 0xFE, b->len - 9);
	*len = p ? (size_t)(b->p + b->len - 8 - p) : 0;
	return p;
}

static void test_snapshot(void)
{
	CHECK_EQ(put_str(&E, 1, "one", "1", E.kv->now_ms + 100000), 0);
	CHECK_EQ(put_str(&E, 3, "three", "3", KV_NO_TTL), 0);
	struct kv_rdb_buf a = { 0 }, b = { 0 };
	CHECK_EQ(kv_rdb_snapshot(E.kv, &a, "0123456789012345678901234567890123456789", 7), 0);
	CHECK(!memcmp(a.p, "REDIS0010", 9));
	uint64_t crc = 0;
	for (int i = 7; i >= 0; i--)
		crc = crc << 8 | a.p[a.len - 8 + (size_t)i];
	CHECK(crc == kv_crc64(0, a.p, a.len - 8));
	CHECK_EQ(kv_rdb_load(E.kv, a.p, a.len), 0);
	CHECK(has_str(&E, 1, "one", "1") && has_str(&E, 3, "three", "3") && has_str(&E, 0, "s", "hello"));
	CHECK_EQ(kv_dbexpires(E.kv, 1), 1);
	CHECK_EQ(count_of("li"), 4);
	CHECK(stream_is("st", ST_DESC));
	CHECK_EQ(kv_rdb_snapshot(E.kv, &b, "0123456789012345678901234567890123456789", 7), 0);
	size_t la, lb;
	const uint8_t *pa = body_of(&a, &la), *pb = body_of(&b, &lb);
	CHECK(pa && pb && la == lb && !memcmp(pa, pb, la));
	/* A damaged file is refused before anything is flushed. */
	a.p[a.len / 2] ^= 0x40;
	CHECK_EQ(kv_rdb_load(E.kv, a.p, a.len), -EBADMSG);
	CHECK(has_str(&E, 3, "three", "3"));
	kv_rdb_free(&a);
	kv_rdb_free(&b);
}

int main(void)
{
	kv_make_dir("kvrdb");
	test_crc64();
	if (!kenv_start(&E, "rdb", 64ull << 20, 2048))
		return 1;
	kv_clock(E.kv);
	test_redis_payloads();
	test_round_trip();
	test_stream_redis();
	test_stream_round_trip();
	test_stream_damaged();
	test_stream_nodes();
	test_snapshot();
	kenv_finish(&E);
	rmdir(kv_dir);
	return check_done();
}
