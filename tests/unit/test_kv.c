/* test_kv.c - the key-value core (services/kv.h) over a real store: the
 * tree-key encoding (databases, the empty key, long keys named by a
 * prefix and a digest, a forged digest that must not find another key),
 * typed puts, lookups and removes, KEEPTTL, expiry (lazy on lookup, the
 * active step earliest first with its stale index entries, walks that
 * skip expired keys, deadlines across a reopen), collections and their
 * members (long names too), dropped collections swept in bounded steps
 * and across a reopen, and groups (nesting, commit, abort putting back
 * the tree and the counts). Databases are in test_kv_db.c, the layout
 * conversion in test_kv_layout.c, big strings in test_kv_big.c. */
#include "kv_fixture.h"

static struct kenv E;

static uint8_t *long_name(size_t n, uint32_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	fill(p, n, seed);
	return p;
}

static int put_raw(const void *key, size_t klen, uint32_t db, const void *val, size_t vlen,
		   int64_t exp)
{
	struct kv_key k;
	kv_key_init(E.kv, &k, db, key, klen);
	return kv_put_bytes(E.kv, &k, KV_STRING, val, vlen, exp, NULL);
}

/* ---- the tree-key encoding --------------------------------------------- */

/* Keys to 1 MiB take buffers of 32 KiB (a long name lies in its entry's
 * extents, at most kv_max_key bytes); with 2 KiB ones a key over that is
 * refused and changes nothing. */
static void test_key_encoding(uint32_t bs)
{
	kenv_start(&E, "keys", 64u << 20, bs);
	struct kv_key k;
	key_of(&E, &k, 0, "abc");
	CHECK_EQ(k.tlen, 4);
	CHECK(!k.longkey && k.t[0] == E.kv->dbmap[0] && memcmp(k.t + 1, "abc", 3) == 0);
	key_of(&E, &k, 5, "abc");
	CHECK_EQ(k.t[0], 5);
	/* The empty key is a key of its own, one per database. */
	kv_key_init(E.kv, &k, 0, "", 0);
	CHECK_EQ(k.tlen, 1);
	CHECK_EQ(put_str(&E, 0, "", "empty0", KV_NO_TTL), 0);
	CHECK_EQ(put_str(&E, 1, "", "empty1", KV_NO_TTL), 0);
	CHECK(has_str(&E, 0, "", "empty0"));
	CHECK(has_str(&E, 1, "", "empty1"));
	CHECK_EQ(put_str(&E, 0, "k", "zero", KV_NO_TTL), 0);
	CHECK_EQ(put_str(&E, 3, "k", "three", KV_NO_TTL), 0);
	CHECK(has_str(&E, 0, "k", "zero") && has_str(&E, 3, "k", "three") && absent(&E, 2, "k"));

	/* KV_INLINE bytes are a tree key as they are; one more is long. */
	uint8_t *n400 = long_name(400, 1), *n401 = long_name(401, 1);
	kv_key_init(E.kv, &k, 0, n400, 400);
	CHECK(!k.longkey && k.tlen == 401);
	kv_key_init(E.kv, &k, 0, n401, 401);
	CHECK(k.longkey);
	CHECK_EQ(k.tlen, 1 + KV_LONG_PREFIX + 1 + 16);
	CHECK(memcmp(k.t + 1, n401, KV_LONG_PREFIX) == 0 && k.t[1 + KV_LONG_PREFIX] == 0);
	CHECK_EQ(put_raw(n400, 400, 0, "v400", 4, KV_NO_TTL), 0);
	CHECK_EQ(put_raw(n401, 401, 0, "v401", 4, KV_NO_TTL), 0);

	/* Long keys to 1 MiB; pairs sharing their first 375 bytes (differing
	 * right after it, in the last byte, or one a prefix of the other). */
	size_t lens[] = { 401, 512, 4096, 65536, 1u << 20 };
	char buf[64];
	if (bs < 32768) {
		uint8_t *a = long_name(1u << 20, 7);
		CHECK(kv_max_key(E.kv) < (1u << 20) && kv_max_key(E.kv) >= 65536);
		CHECK_EQ(put_raw(a, 1u << 20, 0, "v", 1, KV_NO_TTL), -ENAMETOOLONG);
		CHECK_EQ(put_raw(a, kv_max_key(E.kv) + 1, 0, "v", 1, KV_NO_TTL), -ENAMETOOLONG);
		CHECK_EQ(put_raw(a, kv_max_key(E.kv), 0, "v", 1, KV_NO_TTL), 0);
		struct kv_key mk;
		kv_key_init(E.kv, &mk, 0, a, kv_max_key(E.kv));
		CHECK_EQ(kv_remove(E.kv, &mk), 1);
		free(a);
		lens[4] = kv_max_key(E.kv);
	} else {
		CHECK_EQ(kv_max_key(E.kv), KV_MAX_KEY);
	}
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *a = long_name(lens[i], 7);
		snprintf(buf, sizeof(buf), "value of %zu", lens[i]);
		CHECK_EQ(put_raw(a, lens[i], 0, buf, strlen(buf), KV_NO_TTL), 0);
		free(a);
	}
	uint8_t *base = long_name(1000, 9);
	uint8_t *b1 = malloc(1000), *b2 = malloc(1000), *b3 = malloc(1000);
	memcpy(b1, base, 1000);
	memcpy(b2, base, 1000);
	memcpy(b3, base, 1000);
	b1[KV_LONG_PREFIX] ^= 1;            /* differs in its 376th byte */
	b2[999] ^= 1;                       /* in its last */
	CHECK_EQ(put_raw(base, 1000, 0, "base", 4, KV_NO_TTL), 0);
	CHECK_EQ(put_raw(b1, 1000, 0, "b1", 2, KV_NO_TTL), 0);
	CHECK_EQ(put_raw(b2, 1000, 0, "b2", 2, KV_NO_TTL), 0);
	CHECK_EQ(put_raw(b3, 999, 0, "b3", 2, KV_NO_TTL), 0);      /* a prefix of base */
	CHECK(kenv_reopen(&E));
	char out[64];
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *a = long_name(lens[i], 7);
		snprintf(buf, sizeof(buf), "value of %zu", lens[i]);
		CHECK_EQ(get_buf(&E, 0, a, lens[i], out, sizeof(out)), (long)strlen(buf));
		CHECK(strcmp(out, buf) == 0);
		a[lens[i] - 1] ^= 0x80;         /* the same but its last byte: absent */
		CHECK_EQ(get_buf(&E, 0, a, lens[i], out, sizeof(out)), -1);
		free(a);
	}
	CHECK(get_buf(&E, 0, base, 1000, out, sizeof(out)) == 4 && !strcmp(out, "base"));
	CHECK(get_buf(&E, 0, b1, 1000, out, sizeof(out)) == 2 && !strcmp(out, "b1"));
	CHECK(get_buf(&E, 0, b2, 1000, out, sizeof(out)) == 2 && !strcmp(out, "b2"));
	CHECK(get_buf(&E, 0, b3, 999, out, sizeof(out)) == 2 && !strcmp(out, "b3"));
	CHECK(get_buf(&E, 0, n400, 400, out, sizeof(out)) == 4 && !strcmp(out, "v400"));
	CHECK(get_buf(&E, 0, n401, 401, out, sizeof(out)) == 4 && !strcmp(out, "v401"));
	CHECK(get_buf(&E, 1, n401, 401, out, sizeof(out)) == -1);   /* another database */

	/* A forged digest: key b1's bytes under base's tree key (what a
	 * collision would be) must not find base's value, nor remove it. */
	struct kv_key kb, kf;
	struct kv_obj o;
	kv_key_init(E.kv, &kb, 0, base, 1000);
	kv_key_init(E.kv, &kf, 0, b1, 1000);
	memcpy(kf.t, kb.t, kb.tlen);
	kf.tlen = kb.tlen;
	CHECK_EQ(kv_lookup(E.kv, &kf, &o, true), -ENOENT);
	CHECK_EQ(kv_remove(E.kv, &kf), 0);
	CHECK(get_buf(&E, 0, base, 1000, out, sizeof(out)) == 4 && !strcmp(out, "base"));
	/* The walk gives each long key back whole, in tree order. */
	struct kv_scan *sc = malloc(sizeof(*sc));
	uint8_t *longbuf = malloc(KV_MAX_KEY);
	kv_scan_init(E.kv, sc, 0, NULL, 0, false);
	const uint8_t *key;
	size_t klen;
	uint32_t seen = 0, found_base = 0, found_1m = 0;
	while (kv_scan_next(E.kv, sc, &key, &klen, longbuf, NULL, NULL) == 1) {
		seen++;
		found_base += klen == 1000 && memcmp(key, base, 1000) == 0;
		if (klen == lens[4]) {
			uint8_t *a = long_name(lens[4], 7);
			found_1m += memcmp(key, a, klen) == 0;
			free(a);
		}
	}
	CHECK_EQ(seen, 2 + 2 + 5 + 4);      /* "", k, n400, n401, lens[], base b1 b2 b3 */
	CHECK_EQ(found_base, 1);
	CHECK_EQ(found_1m, 1);
	CHECK_EQ(kv_dbsize(E.kv, 0), seen);
	check_counts(&E);
	free(sc);
	free(longbuf);
	free(base);
	free(b1);
	free(b2);
	free(b3);
	free(n400);
	free(n401);
	kenv_finish(&E);
}

/* ---- typed writes ------------------------------------------------------ */

static void test_types(void)
{
	kenv_start(&E, "types", 16u << 20, 2048);
	struct kv_key k;
	struct kv_obj o;
	bool created = false;
	key_of(&E, &k, 0, "s");
	CHECK_EQ(kv_put_bytes(E.kv, &k, KV_STRING, "hello", 5, KV_NO_TTL, &created), 0);
	CHECK(created);
	CHECK_EQ(kv_put_bytes(E.kv, &k, KV_STRING, "world!", 6, KV_NO_TTL, &created), 0);
	CHECK(!created);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, true), 0);
	CHECK(o.type == KV_STRING && o.len == 6 && o.expire_ms == KV_NO_TTL);
	CHECK(has_str(&E, 0, "s", "world!"));
	/* A value of 2 KiB held where it lies (one extent of a held buffer). */
	uint8_t big[3000];
	fill(big, sizeof(big), 3);
	key_of(&E, &k, 0, "b");
	CHECK_EQ(kv_put_bytes(E.kv, &k, KV_STRING, big, sizeof(big), KV_NO_TTL, NULL), 0);
	uint8_t back[3000];
	CHECK_EQ(kv_lookup(E.kv, &k, &o, true), 0);
	CHECK_EQ(o.len, sizeof(big));
	CHECK_EQ(kv_value_read(E.kv, &o, 0, back, sizeof(back)), sizeof(big));
	CHECK(memcmp(back, big, sizeof(big)) == 0);
	CHECK_EQ(kv_value_read(E.kv, &o, 2990, back, 100), 10);
	CHECK(memcmp(back, big + 2990, 10) == 0);
	/* A hash: its record is the value, its type the tag. */
	struct kv_obj h;
	key_of(&E, &k, 0, "h");
	kv_coll_new(E.kv, &h, KV_HASH);
	CHECK(h.coll.id > 0);
	struct kv_key mk;
	kv_member_key(E.kv, &mk, h.coll.id, 'f', "f1", 2);
	CHECK_EQ(kv_member_put_bytes(E.kv, &mk, "v1", 2), 0);
	h.coll.count = 1;
	CHECK_EQ(kv_coll_save(E.kv, &k, &h), 0);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, true), 0);
	CHECK(o.type == KV_HASH && o.coll.id == h.coll.id && o.coll.count == 1);
	CHECK(!strcmp(kv_type_name(o.type), "hash") && !strcmp(kv_type_name(KV_STRING), "string"));
	/* A string over the hash buries its members. */
	uint8_t gk[16];
	uint32_t glen = kv_grave_key(gk, KV_GRAVE_COLL, h.coll.id);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	CHECK_EQ(put_str(&E, 0, "h", "now a string", KV_NO_TTL), 0);
	CHECK_EQ(tree_count(&E, gk, glen), 1);
	CHECK(has_str(&E, 0, "h", "now a string"));
	kv_sweep_step(E.kv, 8);
	CHECK_EQ(count_byte(&E, KV_PFX_MEMBER), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	/* Remove: 1, then 0. */
	key_of(&E, &k, 0, "s");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	CHECK_EQ(kv_remove(E.kv, &k), 0);
	CHECK(absent(&E, 0, "s"));
	CHECK_EQ(kv_dbsize(E.kv, 0), 2);
	check_counts(&E);
	kenv_finish(&E);
}

/* ---- deadlines ---------------------------------------------------------- */

static uint64_t index_entries(void)
{
	return count_byte(&E, KV_PFX_EXPIRE);
}

static int64_t deadline_of(uint32_t db, const char *key)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, db, key);
	return kv_lookup(E.kv, &k, &o, false) ? -1 : o.expire_ms;
}

/* Is the key's entry in the tree (expired or not)? */
static bool in_tree(uint32_t db, const char *key)
{
	struct kv_key k;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	key_of(&E, &k, db, key);
	return paste_btree_get(E.kv->tree, k.t, k.tlen, ext, &n, &len) == 0;
}

static void test_keepttl(void)
{
	kenv_start(&E, "keepttl", 16u << 20, 2048);
	int64_t now = E.kv->now_ms, d1 = now + 100000, d2 = now + 200000;
	CHECK_EQ(put_str(&E, 0, "k", "a", d1), 0);
	CHECK_EQ(deadline_of(0, "k"), d1);
	CHECK_EQ(index_entries(), 1);
	CHECK_EQ(kv_dbexpires(E.kv, 0), 1);
	CHECK_EQ(put_str(&E, 0, "k", "b", KV_KEEP_TTL), 0);
	CHECK_EQ(deadline_of(0, "k"), d1);
	CHECK(has_str(&E, 0, "k", "b"));
	CHECK_EQ(index_entries(), 1);
	CHECK_EQ(put_str(&E, 0, "k", "c", d2), 0);       /* another deadline: one entry */
	CHECK_EQ(deadline_of(0, "k"), d2);
	CHECK_EQ(index_entries(), 1);
	CHECK_EQ(put_str(&E, 0, "k", "d", KV_NO_TTL), 0);
	CHECK_EQ(deadline_of(0, "k"), KV_NO_TTL);
	CHECK_EQ(index_entries(), 0);
	CHECK_EQ(kv_dbexpires(E.kv, 0), 0);
	/* KEEPTTL on an absent key, and over an expired one: no deadline. */
	CHECK_EQ(put_str(&E, 0, "n", "x", KV_KEEP_TTL), 0);
	CHECK_EQ(deadline_of(0, "n"), KV_NO_TTL);
	CHECK_EQ(put_str(&E, 0, "e", "x", now + 10), 0);
	E.kv->now_ms = now + 20;
	uint64_t expired = E.kv->n.expired;
	CHECK_EQ(put_str(&E, 0, "e", "y", KV_KEEP_TTL), 0);
	CHECK_EQ(deadline_of(0, "e"), KV_NO_TTL);
	CHECK(has_str(&E, 0, "e", "y"));
	CHECK_EQ(E.kv->n.expired, expired + 1);
	CHECK_EQ(index_entries(), 0);
	/* kv_set_expire gives a found key another deadline, and takes it away. */
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, "n");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, d1), 0);
	CHECK_EQ(deadline_of(0, "n"), d1);
	CHECK(has_str(&E, 0, "n", "x"));
	CHECK_EQ(index_entries(), 1);
	CHECK_EQ(kv_dbexpires(E.kv, 0), 1);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, KV_NO_TTL), 0);
	CHECK_EQ(deadline_of(0, "n"), KV_NO_TTL);
	CHECK_EQ(index_entries(), 0);
	check_counts(&E);
	kenv_finish(&E);
}

static void test_expiry_lazy(void)
{
	kenv_start(&E, "lazy", 16u << 20, 2048);
	int64_t now = E.kv->now_ms;
	CHECK_EQ(put_str(&E, 0, "k", "v", now + 100), 0);
	CHECK_EQ(put_str(&E, 0, "keep", "v", now + 1000000), 0);
	CHECK_EQ(kv_dbsize(E.kv, 0), 2);
	CHECK(has_str(&E, 0, "k", "v"));
	E.kv->now_ms = now + 100;                   /* the deadline itself: expired */
	uint64_t expired = E.kv->n.expired, misses = E.kv->n.misses;
	CHECK(in_tree(0, "k"));
	char out[8];
	CHECK_EQ(get_buf(&E, 0, "k", 1, out, sizeof(out)), -1);
	CHECK_EQ(E.kv->n.misses, misses + 1);
	CHECK(!in_tree(0, "k"));                    /* removed, as a DEL */
	CHECK_EQ(E.kv->n.expired, expired + 1);
	CHECK_EQ(index_entries(), 1);
	CHECK_EQ(kv_dbsize(E.kv, 0), 1);
	CHECK_EQ(kv_dbexpires(E.kv, 0), 1);
	/* Removing a key whose deadline passed: 0, as if absent. */
	CHECK_EQ(put_str(&E, 0, "r", "v", now + 150), 0);
	E.kv->now_ms = now + 200;
	struct kv_key k;
	key_of(&E, &k, 0, "r");
	CHECK_EQ(kv_remove(E.kv, &k), 0);
	CHECK(!in_tree(0, "r"));
	CHECK_EQ(index_entries(), 1);
	check_counts(&E);
	/* The removal was logged: absent after a reopen, with its clock. */
	CHECK(kenv_reopen(&E));
	CHECK(!in_tree(0, "k") && in_tree(0, "keep"));
	kenv_finish(&E);
}

static void test_expire_step(void)
{
	kenv_start(&E, "step", 16u << 20, 2048);
	int64_t now = E.kv->now_ms;
	static const char *const keys[] = { "a", "b", "c", "d", "e" };
	static const int64_t at[] = { 50, 10, 40, 20, 30 };
	for (int i = 0; i < 5; i++)
		CHECK_EQ(put_str(&E, 0, keys[i], "v", now + at[i]), 0);
	CHECK_EQ(put_str(&E, 0, "forever", "v", KV_NO_TTL), 0);
	CHECK_EQ(index_entries(), 5);
	E.kv->now_ms = now + 35;                    /* b, d, e are due */
	kv_expire_step(E.kv, 2);                    /* the two earliest */
	CHECK(!in_tree(0, "b") && !in_tree(0, "d") && in_tree(0, "e"));
	CHECK(in_tree(0, "a") && in_tree(0, "c"));
	CHECK_EQ(index_entries(), 3);
	kv_expire_step(E.kv, 100);
	CHECK(!in_tree(0, "e") && in_tree(0, "a") && in_tree(0, "c") && in_tree(0, "forever"));
	CHECK_EQ(index_entries(), 2);
	CHECK_EQ(kv_dbsize(E.kv, 0), 3);
	CHECK_EQ(kv_dbexpires(E.kv, 0), 2);

	/* Stale entries, as a crash between a key's write and its old
	 * entry's delete leaves them: one naming c with another deadline,
	 * one naming a key that is gone, one a key of no database. Each is
	 * dropped when due; c keeps its own. */
	struct kv_key k;
	uint8_t ik[PASTE_BTREE_MAX_KEY];
	key_of(&E, &k, 0, "c");
	CHECK_EQ(kv_tree_set(E.kv, ik, kv_expire_key(ik, now + 1, &k)), 0);
	key_of(&E, &k, 0, "gone");
	CHECK_EQ(kv_tree_set(E.kv, ik, kv_expire_key(ik, now + 2, &k)), 0);
	k.t[0] = KV_PHYS_DBS - 1;                   /* a prefix no database maps */
	struct paste_btree_attr a = { .has_word = true, .word = (uint64_t)(now + 3) };
	CHECK_EQ(paste_btree_put(E.kv->tree, k.t, k.tlen, NULL, 0, &a, NULL), 0);
	CHECK_EQ(kv_tree_set(E.kv, ik, kv_expire_key(ik, now + 3, &k)), 0);
	CHECK_EQ(index_entries(), 5);
	kv_expire_step(E.kv, 100);
	CHECK_EQ(index_entries(), 2);
	CHECK(in_tree(0, "c") && in_tree(0, "a"));
	CHECK_EQ(deadline_of(0, "c"), now + 40);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	CHECK_EQ(paste_btree_get(E.kv->tree, k.t, k.tlen, ext, &n, &len), 0);   /* not a key: kept */
	/* Not yet due: untouched. */
	E.kv->now_ms = now + 39;
	kv_expire_step(E.kv, 100);
	CHECK(in_tree(0, "c"));
	E.kv->now_ms = now + 1000;
	kv_expire_step(E.kv, 100);
	CHECK(!in_tree(0, "c") && !in_tree(0, "a"));
	CHECK_EQ(index_entries(), 0);
	CHECK_EQ(kv_dbsize(E.kv, 0), 1);
	/* A long key expires too (its name read back from its entry). */
	uint8_t *ln = long_name(5000, 4);
	CHECK_EQ(put_raw(ln, 5000, 0, "v", 1, now + 1500), 0);
	E.kv->now_ms = now + 2000;
	kv_expire_step(E.kv, 100);
	kv_key_init(E.kv, &k, 0, ln, 5000);
	CHECK_EQ(paste_btree_get(E.kv->tree, k.t, k.tlen, ext, &n, &len), -ENOENT);
	CHECK_EQ(index_entries(), 0);
	free(ln);
	check_counts(&E);
	kenv_finish(&E);
}

static void test_scan_and_reopen(void)
{
	kenv_start(&E, "scan", 16u << 20, 2048);
	int64_t now = E.kv->now_ms, far = now + 3600000;
	CHECK_EQ(put_str(&E, 0, "x1", "v", KV_NO_TTL), 0);
	CHECK_EQ(put_str(&E, 0, "x2", "v", now + 10), 0);
	CHECK_EQ(put_str(&E, 0, "x3", "v", far), 0);
	CHECK_EQ(put_str(&E, 0, "x4", "v", now + 10), 0);
	CHECK_EQ(put_str(&E, 0, "x5", "v", KV_NO_TTL), 0);
	E.kv->now_ms = now + 10;
	struct kv_scan sc;
	kv_scan_init(E.kv, &sc, 0, NULL, 0, false);
	const uint8_t *key;
	size_t klen;
	enum kv_type type;
	int64_t exp;
	char got[64] = "";
	while (kv_scan_next(E.kv, &sc, &key, &klen, NULL, &type, &exp) == 1) {
		strncat(got, (const char *)key, klen);
		strcat(got, exp == far ? "+ " : " ");
		CHECK_EQ(type, KV_STRING);
	}
	CHECK(strcmp(got, "x1 x3+ x5 ") == 0);
	if (strcmp(got, "x1 x3+ x5 "))
		fprintf(stderr, "  scan: %s\n", got);
	CHECK(in_tree(0, "x2") && in_tree(0, "x4"));        /* a walk changes nothing */
	/* Resuming after a key. */
	kv_scan_init(E.kv, &sc, 0, "\0x1", 3, true);
	CHECK_EQ(kv_scan_next(E.kv, &sc, &key, &klen, NULL, NULL, NULL), 1);
	CHECK(klen == 2 && !memcmp(key, "x3", 2));
	/* Deadlines are durable: the same after a reopen, and honoured. */
	CHECK(kenv_reopen(&E));
	CHECK_EQ(deadline_of(0, "x3"), far);
	CHECK_EQ(index_entries(), 3);
	E.kv->now_ms = now + 10;
	CHECK(absent(&E, 0, "x2"));
	kv_expire_step(E.kv, 100);
	CHECK(!in_tree(0, "x4") && in_tree(0, "x3"));
	CHECK_EQ(index_entries(), 1);
	check_counts(&E);
	E.kv->now_ms = far;
	kv_expire_step(E.kv, 100);
	CHECK(!in_tree(0, "x3"));
	CHECK_EQ(kv_dbsize(E.kv, 0), 2);
	check_counts(&E);
	kenv_finish(&E);
}

/* ---- collections --------------------------------------------------------- */

static int put_member(uint64_t id, const void *name, size_t nlen, const void *v, size_t vlen)
{
	struct kv_key mk;
	kv_member_key(E.kv, &mk, id, 'f', name, nlen);
	return kv_member_put_bytes(E.kv, &mk, v, vlen);
}

static long get_member(uint64_t id, const void *name, size_t nlen, char *out, size_t cap)
{
	struct kv_key mk;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	kv_member_key(E.kv, &mk, id, 'f', name, nlen);
	if (kv_member_lookup(E.kv, &mk, ext, &n, &len))
		return -1;
	size_t got = paste_store_read(E.st, ext, n, 0, out, cap - 1);
	out[got] = 0;
	return len;
}


static void test_collections(void)
{
	kenv_start(&E, "coll", 32u << 20, 2048);
	uint64_t id = make_hash(&E, 0, "h", 3);
	uint64_t id2 = make_hash(&E, 0, "h2", 0);
	CHECK(id2 > id);
	char out[128];
	CHECK(get_member(id, "field-00001", 11, out, sizeof(out)) == 2 && !strcmp(out, "v1"));
	CHECK_EQ(get_member(id, "field-00009", 11, out, sizeof(out)), -1);
	CHECK_EQ(get_member(id2, "field-00001", 11, out, sizeof(out)), -1);
	/* Long member names, one sharing its first 375 bytes with another. */
	uint8_t *m1 = long_name(600, 5), *m2 = long_name(70000, 5);
	CHECK_EQ(put_member(id, m1, 600, "long1", 5), 0);
	CHECK_EQ(put_member(id, m2, 70000, "long2", 5), 0);
	CHECK(get_member(id, m1, 600, out, sizeof(out)) == 5 && !strcmp(out, "long1"));
	CHECK(get_member(id, m2, 70000, out, sizeof(out)) == 5 && !strcmp(out, "long2"));
	m1[599] ^= 1;
	CHECK_EQ(get_member(id, m1, 600, out, sizeof(out)), -1);
	m1[599] ^= 1;
	/* The walk: every member once, long names read back whole. */
	struct kv_members w;
	uint8_t *longbuf = malloc(KV_MAX_KEY);
	const uint8_t *name;
	size_t nlen;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len, count = 0, longs = 0;
	kv_members_init(E.kv, &w, id, 'f', NULL, 0);
	while (kv_members_next(E.kv, &w, &name, &nlen, longbuf, ext, &n, &len) == 1) {
		count++;
		paste_store_read(E.st, ext, n, 0, out, sizeof(out));
		if (nlen == 600)
			longs += !memcmp(name, m1, 600) && len == 5 && !memcmp(out, "long1", 5);
		else if (nlen == 70000)
			longs += !memcmp(name, m2, 70000) && len == 5 && !memcmp(out, "long2", 5);
		else
			CHECK(nlen == 11 && !memcmp(name, "field-0000", 10) && out[0] == 'v' &&
			      out[1] == (char)name[10]);
	}
	CHECK_EQ(count, 5);
	CHECK_EQ(longs, 2);
	/* From a member on. */
	kv_members_init(E.kv, &w, id, 'f', "field-00001", 11);
	CHECK_EQ(kv_members_next(E.kv, &w, &name, &nlen, longbuf, ext, &n, &len), 1);
	CHECK(nlen == 11 && !memcmp(name, "field-00001", 11));
	/* Remove: 1, then 0. */
	struct kv_key mk;
	kv_member_key(E.kv, &mk, id, 'f', m2, 70000);
	CHECK_EQ(kv_member_remove(E.kv, &mk), 1);
	CHECK_EQ(kv_member_remove(E.kv, &mk), 0);
	CHECK_EQ(members_of(&E, id, 'f'), 4);
	free(m1);
	free(m2);
	free(longbuf);
	kenv_finish(&E);
}

static void test_drop_and_sweep(void)
{
	kenv_start(&E, "sweep", 64u << 20, 2048);
	uint32_t many = 3 * PASTE_BTREE_RANGE_MAX + 10;
	uint64_t id = make_hash(&E, 0, "big", many), keep = make_hash(&E, 0, "keep", 5);
	CHECK_EQ(members_of(&E, id, 'f'), many);
	struct kv_key k;
	key_of(&E, &k, 0, "big");
	uint64_t before = E.kv->n.swept;
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	uint8_t gk[16];
	uint32_t glen = kv_grave_key(gk, KV_GRAVE_COLL, id);
	CHECK_EQ(tree_count(&E, gk, glen), 1);
	CHECK_EQ(members_of(&E, id, 'f'), many);             /* O(1): the members wait */
	CHECK(E.kv->sweep_due);
	CHECK_EQ(kv_sweep_pending(E.kv), 1);
	kv_sweep_step(E.kv, 1);                     /* one range delete */
	CHECK_EQ(members_of(&E, id, 'f'), many - PASTE_BTREE_RANGE_MAX);
	CHECK_EQ(E.kv->n.swept - before, PASTE_BTREE_RANGE_MAX);
	CHECK_EQ(tree_count(&E, gk, glen), 1);
	CHECK_EQ(kv_sweep_pending(E.kv), 1);
	CHECK_EQ(E.kv->n.lazyfreed, 0);             /* not all of it yet */
	/* A restart goes on where the sweeper stopped. */
	CHECK(kenv_reopen(&E));
	CHECK(E.kv->sweep_due);
	CHECK_EQ(members_of(&E, id, 'f'), many - PASTE_BTREE_RANGE_MAX);
	kv_sweep_step(E.kv, 2);
	CHECK_EQ(members_of(&E, id, 'f'), many - 3 * PASTE_BTREE_RANGE_MAX);
	CHECK_EQ(tree_count(&E, gk, glen), 1);
	kv_sweep_step(E.kv, 1);
	CHECK_EQ(members_of(&E, id, 'f'), 0);
	CHECK_EQ(tree_count(&E, gk, glen), 0);      /* the grave goes with its range */
	CHECK_EQ(kv_sweep_pending(E.kv), 0);
	CHECK_EQ(E.kv->n.lazyfreed, 1);
	kv_sweep_step(E.kv, 1);
	CHECK(!E.kv->sweep_due);
	CHECK_EQ(members_of(&E, keep, 'f'), 5);              /* another hash's members stay */
	char out[16];
	CHECK(get_member(keep, "field-00004", 11, out, sizeof(out)) == 2 && !strcmp(out, "v4"));
	/* An expiring hash goes with its members too. */
	int64_t now = E.kv->now_ms;
	uint64_t eid = make_hash(&E, 0, "eh", 4);
	struct kv_obj o;
	key_of(&E, &k, 0, "eh");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, now + 5), 0);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK(o.type == KV_HASH && o.coll.id == eid && o.expire_ms == now + 5);
	/* kv_coll_save of the same collection keeps its deadline. */
	o.coll.count = 4;
	CHECK_EQ(kv_coll_save(E.kv, &k, &o), 0);
	CHECK_EQ(deadline_of(0, "eh"), now + 5);
	E.kv->now_ms = now + 5;
	kv_expire_step(E.kv, 10);
	CHECK(!in_tree(0, "eh"));
	glen = kv_grave_key(gk, KV_GRAVE_COLL, eid);
	CHECK_EQ(tree_count(&E, gk, glen), 1);
	kv_sweep_step(E.kv, 10);
	CHECK_EQ(members_of(&E, eid, 'f'), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	/* A new hash over an expired key with a deadline: counts stay exact. */
	CHECK_EQ(put_str(&E, 0, "x", "v", now + 100), 0);
	E.kv->now_ms = now + 100;
	make_hash(&E, 0, "x", 2);
	CHECK_EQ(deadline_of(0, "x"), KV_NO_TTL);
	check_counts(&E);
	/* ... and over a live string with one. */
	CHECK_EQ(put_str(&E, 0, "y", "v", now + 100000), 0);
	struct kv_obj nh;
	kv_coll_new(E.kv, &nh, KV_HASH);
	key_of(&E, &k, 0, "y");
	CHECK_EQ(kv_coll_save(E.kv, &k, &nh), 0);
	CHECK_EQ(deadline_of(0, "y"), KV_NO_TTL);
	CHECK_EQ(index_entries(), 0);
	check_counts(&E);
	kenv_finish(&E);
}

/* ---- groups ----------------------------------------------------------- */

static void test_groups(void)
{
	kenv_start(&E, "groups", 16u << 20, 2048);
	CHECK_EQ(put_str(&E, 0, "c", "old", KV_NO_TTL), 0);
	CHECK_EQ(put_str(&E, 1, "d", "in db 1", KV_NO_TTL), 0);
	uint64_t keys0 = kv_dbsize(E.kv, 0), keys1 = kv_dbsize(E.kv, 1);
	uint8_t map1 = E.kv->dbmap[1];
	/* Nested: the inner commit ends nothing; abort puts everything back. */
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(put_str(&E, 0, "a", "1", KV_NO_TTL), 0);
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(put_str(&E, 0, "b", "2", E.kv->now_ms + 100000), 0);
	CHECK_EQ(put_str(&E, 0, "c", "new", KV_NO_TTL), 0);
	CHECK_EQ(kv_commit(E.kv), 0);
	CHECK_EQ(E.kv->group_depth, 1);
	CHECK(has_str(&E, 0, "a", "1") && has_str(&E, 0, "c", "new"));   /* seen as made */
	CHECK_EQ(kv_flushdb(E.kv, 1), 0);
	CHECK(absent(&E, 1, "d"));
	kv_abort(E.kv);
	CHECK_EQ(E.kv->group_depth, 0);
	CHECK(absent(&E, 0, "a") && absent(&E, 0, "b"));
	CHECK(has_str(&E, 0, "c", "old"));
	CHECK_EQ(E.kv->dbmap[1], map1);
	CHECK(has_str(&E, 1, "d", "in db 1"));
	CHECK_EQ(kv_dbsize(E.kv, 0), keys0);
	CHECK_EQ(kv_dbsize(E.kv, 1), keys1);
	CHECK_EQ(index_entries(), 0);
	check_counts(&E);
	/* Committed: there, and after a reopen. */
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(put_str(&E, 0, "a", "1", KV_NO_TTL), 0);
	CHECK_EQ(kv_commit(E.kv), 0);
	CHECK_EQ(put_str(&E, 0, "b", "2", KV_NO_TTL), 0);
	CHECK_EQ(kv_commit(E.kv), 0);
	CHECK_EQ(E.kv->group_depth, 0);
	CHECK_EQ(kv_commit(E.kv), 0);               /* none open: nothing */
	kv_abort(E.kv);                             /* likewise */
	CHECK(has_str(&E, 0, "a", "1"));
	CHECK(kenv_reopen(&E));
	CHECK(has_str(&E, 0, "a", "1") && has_str(&E, 0, "b", "2") && has_str(&E, 0, "c", "old"));
	/* A group cut short (no commit before the stop) is not there after. */
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(put_str(&E, 0, "z", "lost", KV_NO_TTL), 0);
	CHECK_EQ(put_str(&E, 0, "a", "lost", KV_NO_TTL), 0);
	E.kv->group_depth = 0;                      /* as a crash leaves it: no abort */
	CHECK(kenv_reopen(&E));
	CHECK(absent(&E, 0, "z") && has_str(&E, 0, "a", "1"));
	check_counts(&E);
	kenv_finish(&E);
}

/* ---- listeners of changes (kv_touch_add) -------------------------------- */

struct heard {
	int n;
	enum kv_touch what[16];
	uint32_t db[16];
	char key[16][8];
	bool remove_self, add_other;
};

static void hear(void *arg, const struct kv_key *k, enum kv_touch what)
{
	struct heard *h = arg;
	if (h->n < 16) {
		h->what[h->n] = what;
		h->db[h->n] = k->db;
		size_t l = k->p ? k->tlen - 1u : 0;      /* short keys: their tree key's bytes */
		memcpy(h->key[h->n], k->t + 1, l < 7 ? l : 7);
		h->key[h->n][l < 7 ? l : 7] = 0;
	}
	h->n++;
}

static struct heard *other_heard;
static void hear_and_leave(void *arg, const struct kv_key *k, enum kv_touch what)
{
	struct heard *h = arg;
	hear(arg, k, what);
	if (h->remove_self)
		kv_touch_remove(E.kv, hear_and_leave, arg);
	if (h->add_other)
		kv_touch_add(E.kv, hear, other_heard);
}

static bool heard_is(const struct heard *h, int i, enum kv_touch what, const char *key)
{
	return i < h->n && h->what[i] == what && !strcmp(h->key[i], key);
}

static void test_touch(void)
{
	kenv_start(&E, "touch", 16u << 20, 2048);
	struct heard a = { 0 }, b = { 0 };
	/* Nobody listening: nothing called. */
	CHECK_EQ(put_str(&E, 0, "k", "v", KV_NO_TTL), 0);
	CHECK_EQ(kv_touch_add(E.kv, hear, &a), 0);
	CHECK_EQ(kv_touch_add(E.kv, hear, &a), -EEXIST);
	CHECK_EQ(kv_touch_add(E.kv, hear, &b), 0);
	/* Written, deleted, expired (by a lookup, and written over). */
	int64_t now = E.kv->now_ms;
	CHECK_EQ(put_str(&E, 0, "k", "w", now + 10), 0);
	struct kv_key k;
	key_of(&E, &k, 0, "k");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	CHECK_EQ(put_str(&E, 0, "t", "v", now + 10), 0);
	CHECK_EQ(put_str(&E, 0, "u", "v", now + 10), 0);
	E.kv->now_ms = now + 10;
	CHECK(absent(&E, 0, "t"));
	CHECK_EQ(put_str(&E, 0, "u", "again", KV_NO_TTL), 0);
	CHECK_EQ(a.n, 7);
	CHECK(heard_is(&a, 0, KV_TOUCH_WRITTEN, "k") && heard_is(&a, 1, KV_TOUCH_DELETED, "k"));
	CHECK(heard_is(&a, 2, KV_TOUCH_CREATED, "t") && heard_is(&a, 3, KV_TOUCH_CREATED, "u"));
	CHECK(heard_is(&a, 4, KV_TOUCH_EXPIRED, "t"));
	CHECK(heard_is(&a, 5, KV_TOUCH_EXPIRED, "u") && heard_is(&a, 6, KV_TOUCH_CREATED, "u"));
	CHECK_EQ(b.n, 7);
	/* A rename: the source deleted, the destination new (as Redis adds it
	 * after deleting what was there). */
	a.n = 0;
	struct kv_key src, dst;
	struct kv_obj o;
	key_of(&E, &src, 0, "u");
	key_of(&E, &dst, 0, "t");
	CHECK_EQ(kv_lookup(E.kv, &src, &o, false), 0);
	CHECK_EQ(kv_rename(E.kv, &src, &o, &dst), 0);
	CHECK(a.n == 2 && heard_is(&a, 0, KV_TOUCH_DELETED, "u") && heard_is(&a, 1, KV_TOUCH_CREATED, "t"));
	/* A database at once: p NULL. */
	a.n = b.n = 0;
	CHECK_EQ(kv_flushdb(E.kv, 3), 0);
	CHECK_EQ(a.n, 1);
	CHECK(a.what[0] == KV_TOUCH_DELETED && a.db[0] == 3 && !a.key[0][0]);
	/* Removed: heard no more; the other still hears. */
	kv_touch_remove(E.kv, hear, &a);
	kv_touch_remove(E.kv, hear, &a);           /* not there: nothing */
	a.n = b.n = 0;
	CHECK_EQ(put_str(&E, 0, "k", "v", KV_NO_TTL), 0);
	CHECK_EQ(a.n, 0);
	CHECK_EQ(b.n, 1);
	/* A listener that leaves while called, and adds another: the one
	 * after it in the list is still called, the one added hears the
	 * rest of this change and later ones. */
	struct heard c = { .remove_self = true, .add_other = true };
	kv_touch_remove(E.kv, hear, &b);
	CHECK_EQ(E.kv->ntouch, 0);
	CHECK_EQ(kv_touch_add(E.kv, hear_and_leave, &c), 0);
	CHECK_EQ(kv_touch_add(E.kv, hear, &b), 0);
	other_heard = &a;
	a.n = b.n = 0;
	CHECK_EQ(put_str(&E, 0, "k", "w", KV_NO_TTL), 0);
	CHECK_EQ(c.n, 1);
	CHECK_EQ(b.n, 1);
	CHECK_EQ(a.n, 1);
	CHECK_EQ(E.kv->ntouch, 2);                 /* compacted after the call */
	CHECK_EQ(put_str(&E, 0, "k", "x", KV_NO_TTL), 0);
	CHECK_EQ(c.n, 1);
	CHECK(b.n == 2 && a.n == 2);
	/* Full. */
	kv_touch_remove(E.kv, hear, &a);
	kv_touch_remove(E.kv, hear, &b);
	struct heard many[KV_TOUCH_MAX] = { { 0 } };
	for (uint32_t i = 0; i < KV_TOUCH_MAX; i++)
		CHECK_EQ(kv_touch_add(E.kv, hear, &many[i]), 0);
	CHECK_EQ(kv_touch_add(E.kv, hear, &a), -ENOSPC);
	for (uint32_t i = 0; i < KV_TOUCH_MAX; i++)
		kv_touch_remove(E.kv, hear, &many[i]);
	CHECK_EQ(E.kv->ntouch, 0);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kv");
	test_key_encoding(2048);
	test_key_encoding(32768);
	test_types();
	test_keepttl();
	test_expiry_lazy();
	test_expire_step();
	test_scan_and_reopen();
	test_collections();
	test_drop_and_sweep();
	test_groups();
	test_touch();
	rmdir(kv_dir);
	return check_done();
}
