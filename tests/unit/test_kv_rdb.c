/* test_kv_rdb.c - Redis's RDB format for pkvs's keys (services/kv_rdb.c):
 * the CRC-64 against Redis's check value; payloads Redis 7.0.15's DUMP
 * wrote (raw, integer and LZF strings, an intset, listpack hashes and
 * sorted sets, a quicklist of listpacks) restored and read back; every
 * type dumped and restored byte for byte; damaged payloads refused; a
 * whole data set (several databases, deadlines) as a snapshot, loaded
 * again, and written again the same. */
#include <math.h>

#include "kv_fixture.h"
#include "kv_hash.h"
#include "kv_list.h"
#include "kv_rdb.h"
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
	if (kv_hash_open(E.kv, &h, false) || kv_hash_get(E.kv, &h, f, strlen(f), ext, &n, &len) ||
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
	if (kv_list_open(E.kv, &l, false) || kv_list_get(E.kv, &l, i, ext, &n, &len) || len >= sizeof(b))
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
	/* A newer RDB version is refused. */
	struct kv_rdb_buf a = { 0 };
	CHECK(dump_of("s", &a));
	a.p[a.len - 10] = 11;
	CHECK(!kv_rdb_payload_ok(a.p, a.len));
	kv_rdb_free(&a);
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
	test_snapshot();
	kenv_finish(&E);
	rmdir(kv_dir);
	return check_done();
}
