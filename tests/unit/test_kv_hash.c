/* test_kv_hash.c - hashes over the typed core (services/kv_hash.c): fields
 * set, overwritten, read and deleted with the record's count kept equal to
 * the fields present; what each change writes (an overwrite is the field's
 * entry alone, a new field the field and the record); the last field
 * taking the key with it and the sweeper taking the field; batches (one
 * record write, abort putting fields and count back); a batch cut off
 * before its commit gone after a reopen; long field names; values held
 * where they lie (zero copy) or packed; walks in order and resumed at a
 * member's tree key; a deadline kept when fields change. */
#include "kv_fixture.h"
#include "kv_hash.h"

static struct kenv E;

/* Open key's hash: 0, or -ENOENT with a new one set up. */
static int open_or_new(struct kv_hash *h, const char *key)
{
	key_of(&E, &h->key, 0, key);
	int r = kv_hash_open(E.kv, h, false);
	if (r == -ENOENT)
		kv_hash_new(E.kv, h);
	return r;
}

static int set(struct kv_hash *h, const char *f, const char *v, bool *created)
{
	return kv_hash_set_bytes(E.kv, h, f, strlen(f), v, strlen(v), created);
}

/* Field f's value is want (NULL: absent). */
static bool field_is(struct kv_hash *h, const void *f, size_t flen, const void *want, size_t wlen)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	uint64_t big;
	int r = kv_hash_get(E.kv, h, f, flen, ext, &n, &len, &big);
	if (!want)
		return r == -ENOENT;
	if (r || len != wlen)
		return false;
	uint8_t *buf = malloc(len + 1);
	bool ok = kv_elem_read(E.kv, ext, n, len, big, 0, buf, len) == len && !memcmp(buf, want, len);
	free(buf);
	return ok;
}

static bool has(struct kv_hash *h, const char *f, const char *want)
{
	return field_is(h, f, strlen(f), want, want ? strlen(want) : 0);
}

/* Fields a walk finds, and the stored record's count, reopened from the tree. */
static uint64_t walk_count(const char *key, uint64_t *stored)
{
	struct kv_hash h;
	*stored = 0;
	if (open_or_new(&h, key))
		return 0;
	*stored = h.o.coll.count;
	struct kv_hash_walk w;
	CHECK_EQ(kv_hash_walk_init(E.kv, &h, &w, NULL, 0), 0);
	uint64_t k = 0;
	while (kv_hash_walk_next(E.kv, &w) == 1)
		k++;
	return k;
}

static void check_count(const char *key, uint64_t want)
{
	uint64_t stored, walked = walk_count(key, &stored);
	CHECK_EQ(stored, want);
	CHECK_EQ(walked, want);
}

static void test_fields(void)
{
	kenv_start(&E, "fields", 64u << 20, 2048);
	struct kv_hash h;
	CHECK_EQ(open_or_new(&h, "h"), -ENOENT);
	CHECK(has(&h, "a", NULL));
	bool created = false;
	CHECK_EQ(set(&h, "a", "1", &created), 0);
	CHECK(created);
	CHECK(!absent(&E, 0, "h"));
	CHECK_EQ(set(&h, "b", "2", &created), 0);
	CHECK_EQ(set(&h, "", "empty name", &created), 0);
	CHECK_EQ(set(&h, "e", "", &created), 0);
	check_count("h", 4);
	CHECK(has(&h, "a", "1") && has(&h, "", "empty name") && has(&h, "e", ""));

	/* An overwrite writes the field's entry alone: one record, the
	 * record and its count untouched. */
	uint64_t lsn = paste_btree_last_lsn(E.kv->tree);
	CHECK_EQ(set(&h, "a", "one", &created), 0);
	CHECK(!created);
	CHECK_EQ(paste_btree_last_lsn(E.kv->tree) - lsn, 1);
	CHECK(has(&h, "a", "one"));
	check_count("h", 4);
	/* A new field: the field, the record and the group's COMMIT. */
	lsn = paste_btree_last_lsn(E.kv->tree);
	CHECK_EQ(set(&h, "c", "3", &created), 0);
	CHECK(created);
	CHECK_EQ(paste_btree_last_lsn(E.kv->tree) - lsn, 3);
	check_count("h", 5);

	/* Deletes: absent writes nothing; the count follows. */
	lsn = paste_btree_last_lsn(E.kv->tree);
	CHECK_EQ(kv_hash_del(E.kv, &h, "nope", 4), 0);
	CHECK_EQ(paste_btree_last_lsn(E.kv->tree), lsn);
	CHECK_EQ(kv_hash_del(E.kv, &h, "b", 1), 1);
	CHECK_EQ(kv_hash_del(E.kv, &h, "b", 1), 0);
	CHECK(has(&h, "b", NULL));
	check_count("h", 4);
	uint64_t id = h.o.coll.count ? h.o.coll.id : 0;
	CHECK_EQ(kv_hash_del(E.kv, &h, "a", 1), 1);
	CHECK_EQ(kv_hash_del(E.kv, &h, "", 0), 1);
	CHECK_EQ(kv_hash_del(E.kv, &h, "c", 1), 1);
	CHECK(!absent(&E, 0, "h"));
	/* The last field takes the key; its entry goes with the grave. */
	CHECK_EQ(kv_hash_del(E.kv, &h, "e", 1), 1);
	CHECK(absent(&E, 0, "h"));
	CHECK_EQ(h.o.coll.count, 0);
	CHECK_EQ(members_of(&E, id, KV_HASH_FIELD), 1);
	kv_sweep_step(E.kv, 16);
	CHECK_EQ(members_of(&E, id, KV_HASH_FIELD), 0);
	check_counts(&E);

	/* A field set again after that is a new hash's. */
	CHECK_EQ(set(&h, "z", "26", &created), 0);
	CHECK(created);
	CHECK(h.o.coll.id != id);
	check_count("h", 1);
	CHECK(kenv_reopen(&E));
	check_count("h", 1);
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK(has(&h, "z", "26"));
	/* Another type there: EMEDIUMTYPE. */
	CHECK_EQ(put_str(&E, 0, "s", "v", KV_NO_TTL), 0);
	CHECK_EQ(open_or_new(&h, "s"), -EMEDIUMTYPE);
	check_counts(&E);
	kenv_finish(&E);
}

static void test_batches(void)
{
	kenv_start(&E, "batches", 64u << 20, 2048);
	struct kv_hash h;
	CHECK_EQ(open_or_new(&h, "h"), -ENOENT);
	char f[32], v[32];
	uint64_t lsn = paste_btree_last_lsn(E.kv->tree);
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	int created = 0;
	for (int i = 0; i < 100; i++) {
		bool c;
		snprintf(f, sizeof(f), "f%03d", i % 90);      /* ten set twice */
		snprintf(v, sizeof(v), "v%d", i);
		CHECK_EQ(set(&h, f, v, &c), 0);
		created += c;
	}
	CHECK_EQ(kv_hash_end(E.kv, &h, 0), 0);
	CHECK_EQ(created, 90);
	/* 100 fields, one record, one COMMIT. */
	CHECK_EQ(paste_btree_last_lsn(E.kv->tree) - lsn, 102);
	check_count("h", 90);
	CHECK(has(&h, "f005", "v95") && has(&h, "f089", "v89"));

	/* An aborted batch puts fields and count back. */
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	CHECK_EQ(set(&h, "new", "x", NULL), 0);
	CHECK_EQ(set(&h, "f000", "changed", NULL), 0);
	CHECK_EQ(kv_hash_del(E.kv, &h, "f001", 4), 1);
	CHECK_EQ(h.o.coll.count, 90);
	CHECK_EQ(kv_hash_end(E.kv, &h, -EIO), -EIO);
	CHECK_EQ(h.o.coll.count, 90);
	CHECK(has(&h, "new", NULL) && has(&h, "f000", "v90") && has(&h, "f001", "v91"));
	check_count("h", 90);

	/* A batch that deletes every field deletes the key. */
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	for (int i = 0; i < 90; i++) {
		snprintf(f, sizeof(f), "f%03d", i);
		CHECK_EQ(kv_hash_del(E.kv, &h, f, strlen(f)), 1);
	}
	CHECK_EQ(kv_hash_end(E.kv, &h, 0), 0);
	CHECK(absent(&E, 0, "h"));
	check_counts(&E);

	/* A new hash's batch aborted leaves no key. */
	CHECK_EQ(open_or_new(&h, "n"), -ENOENT);
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	CHECK_EQ(set(&h, "a", "1", NULL), 0);
	CHECK_EQ(kv_hash_end(E.kv, &h, -ENOSPC), -ENOSPC);
	CHECK(absent(&E, 0, "n"));
	check_counts(&E);

	/* A batch inside an outer group (MULTI/EXEC): committed with it. */
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(open_or_new(&h, "m"), -ENOENT);
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	CHECK_EQ(set(&h, "a", "1", NULL), 0);
	CHECK_EQ(set(&h, "b", "2", NULL), 0);
	CHECK_EQ(kv_hash_end(E.kv, &h, 0), 0);
	CHECK_EQ(set(&h, "c", "3", NULL), 0);
	CHECK_EQ(kv_commit(E.kv), 0);
	check_count("m", 3);
	CHECK(kenv_reopen(&E));
	check_count("m", 3);
	check_counts(&E);
	kenv_finish(&E);
}

/* A batch whose COMMIT never came (the process died): after the reopen
 * neither its fields nor its count. */
static void test_cut_batch(void)
{
	kenv_start(&E, "cut", 64u << 20, 2048);
	struct kv_hash h;
	open_or_new(&h, "h");
	CHECK_EQ(set(&h, "a", "1", NULL), 0);
	CHECK_EQ(set(&h, "b", "2", NULL), 0);
	kenv_settle(&E);
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	CHECK_EQ(set(&h, "c", "3", NULL), 0);
	CHECK_EQ(kv_hash_del(E.kv, &h, "a", 1), 1);
	/* the record is written at the end, before the COMMIT: write it,
	 * then stop there */
	h.batch = 1;
	CHECK_EQ(kv_coll_save(E.kv, &h.key, &h.o), 0);
	kenv_settle(&E);
	kv_close(E.kv);              /* no COMMIT: a crash here */
	E.kv = NULL;
	paste_persist_close(E.p);
	paste_store_close(E.st);
	CHECK(kenv_open(&E));
	check_count("h", 2);
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK(has(&h, "a", "1") && has(&h, "b", "2") && has(&h, "c", NULL));
	check_counts(&E);
	kenv_finish(&E);
}

static void test_long_names(void)
{
	kenv_start(&E, "long", 64u << 20, 2048);
	struct kv_hash h;
	open_or_new(&h, "h");
	size_t lens[] = { 399, 400, 401, 1000, 5000, 60000, 0 };
	lens[6] = kv_max_key(E.kv);
	uint8_t *a = malloc(lens[6] + 1), *b = malloc(lens[6] + 1);
	fill(a, lens[6] + 1, 1);
	memcpy(b, a, lens[6] + 1);
	uint64_t want = 0;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		/* a and b share their first 375 bytes and more */
		b[lens[i] - 1] ^= 0x55;
		bool c;
		CHECK_EQ(kv_hash_set_bytes(E.kv, &h, a, lens[i], "A", 1, &c), 0);
		CHECK(c);
		CHECK_EQ(kv_hash_set_bytes(E.kv, &h, b, lens[i], "B", 1, &c), 0);
		CHECK(c);
		b[lens[i] - 1] ^= 0x55;
		want += 2;
	}
	check_count("h", want);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		CHECK(field_is(&h, a, lens[i], "A", 1));
		b[lens[i] - 1] ^= 0x55;
		CHECK(field_is(&h, b, lens[i], "B", 1));
		b[lens[i] - 1] ^= 0x55;
	}
	/* One longer than pkvs takes: refused, nothing changed. */
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, a, lens[6] + 1, "A", 1, NULL), -ENAMETOOLONG);
	check_count("h", want);
	/* A walk gives the whole names back. */
	struct kv_hash_walk w;
	CHECK_EQ(kv_hash_walk_init(E.kv, &h, &w, NULL, 0), 0);
	uint64_t seen = 0;
	while (kv_hash_walk_next(E.kv, &w) == 1) {
		seen++;
		CHECK(w.nlen >= 399 && w.nlen <= lens[6]);
		CHECK(memcmp(w.name, a, w.nlen - 1) == 0);
		CHECK_EQ(w.len, 1);
	}
	CHECK_EQ(seen, want);
	CHECK_EQ(kv_hash_del(E.kv, &h, a, 60000), 1);
	CHECK_EQ(kv_hash_del(E.kv, &h, a, 60000), 0);
	CHECK(field_is(&h, a, 60000, NULL, 0));
	check_count("h", want - 1);
	CHECK(kenv_reopen(&E));
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK(field_is(&h, a, lens[6], "A", 1));
	check_count("h", want - 1);
	free(a);
	free(b);
	kenv_finish(&E);
}

/* Values: extents of a buffer the caller holds are taken as they are
 * (the field names that buffer); a small body is packed and its buffer
 * let go. */
static void test_values(void)
{
	kenv_start(&E, "values", 64u << 20, 2048);
	struct kv_hash h;
	open_or_new(&h, "h");
	uint32_t bufs[3];
	CHECK_EQ(paste_store_alloc(E.st, bufs, 3), 3);
	for (int i = 0; i < 3; i++)
		fill(paste_store_buf(E.st, bufs[i]), 2048, 10 + (uint32_t)i);
	struct paste_extent big[3] = { { bufs[0], 0, 2048 }, { bufs[1], 0, 2048 }, { bufs[2], 100, 900 } };
	CHECK_EQ(kv_hash_set(E.kv, &h, "big", 3, big, 3, NULL), 0);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	CHECK_EQ(kv_hash_get(E.kv, &h, "big", 3, ext, &n, &len, NULL), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(len, 2048 * 2 + 900);
	CHECK(ext[0].buf == bufs[0] && ext[2].buf == bufs[2] && ext[2].off == 100);

	/* A small body: copied densely, the body's buffer released. */
	struct paste_body body;
	kv_body_idle(&body);
	CHECK_EQ(paste_body_begin(&body, &E.kv->bc, E.st, 64), 0);
	body.ext[0] = (struct paste_extent){ bufs[1], 1000, 64 };
	body.n = body.bufs = 1;
	body.left = 0;
	paste_store_ref(E.st, bufs[1]);
	uint32_t before = paste_store_refcount(E.st, bufs[1]);
	CHECK_EQ(kv_hash_set_body(E.kv, &h, "small", 5, &body, NULL), 0);
	CHECK_EQ(paste_store_refcount(E.st, bufs[1]), before - 1);
	CHECK_EQ(kv_hash_get(E.kv, &h, "small", 5, ext, &n, &len, NULL), 0);
	CHECK(n == 1 && len == 64 && ext[0].buf != bufs[1]);
	CHECK(field_is(&h, "small", 5, paste_store_buf(E.st, bufs[1]) + 1000, 64));

	/* Too big for an entry: in chunks of its own (test_kv_elem.c); over
	 * --max-value: refused. */
	uint64_t most = 63 * 2048;
	uint8_t *huge = malloc(most + 1);
	fill(huge, most + 1, 3);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "huge", 4, huge, most + 1, NULL), 0);
	CHECK(field_is(&h, "huge", 4, huge, most + 1));
	CHECK_EQ(kv_hash_get(E.kv, &h, "huge", 4, ext, &n, &len, NULL), -EFBIG);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "huge", 4, huge, most, NULL), 0);
	CHECK(field_is(&h, "huge", 4, huge, most));
	uint64_t was = E.kv->max_value;
	E.kv->max_value = 1000;
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "huge", 4, huge, 1001, NULL), -EFBIG);
	E.kv->max_value = was;
	free(huge);
	check_count("h", 3);
	uint8_t *want = malloc(big[0].len + big[1].len + big[2].len);
	for (int i = 0, at = 0; i < 3; at += (int)big[i].len, i++)
		memcpy(want + at, paste_store_buf(E.st, bufs[i]) + big[i].off, big[i].len);
	for (int i = 0; i < 3; i++)
		paste_store_unref(E.st, bufs[i], false);
	CHECK(kenv_reopen(&E));
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK(field_is(&h, "big", 3, want, 2048 * 2 + 900));
	free(want);
	check_counts(&E);
	kenv_finish(&E);
}

/* Walks in byte order, from a name, and resumed at a member's tree key
 * (HSCAN's cursor); a cursor of another hash is refused. */
static void test_walks(void)
{
	kenv_start(&E, "walks", 64u << 20, 2048);
	struct kv_hash h, other;
	open_or_new(&h, "h");
	char f[32];
	CHECK_EQ(kv_hash_begin(E.kv, &h, 0), 0);
	for (int i = 99; i >= 0; i--) {
		snprintf(f, sizeof(f), "k%02d", i);
		CHECK_EQ(set(&h, f, f, NULL), 0);
	}
	CHECK_EQ(kv_hash_end(E.kv, &h, 0), 0);
	/* (a new hash's id is the log's next LSN: one at a time) */
	open_or_new(&other, "o");
	CHECK_EQ(set(&other, "x", "y", NULL), 0);
	struct kv_hash_walk w;
	CHECK_EQ(kv_hash_walk_init(E.kv, &h, &w, "k50", 3), 0);
	int i = 50;
	uint8_t at[PASTE_BTREE_MAX_KEY];
	uint32_t atlen = 0;
	while (kv_hash_walk_next(E.kv, &w) == 1) {
		snprintf(f, sizeof(f), "k%02d", i++);
		CHECK(w.nlen == 3 && !memcmp(w.name, f, 3));
		if (i == 71) {
			const uint8_t *t = kv_hash_walk_pos(&w, &atlen);
			memcpy(at, t, atlen);
		}
	}
	CHECK_EQ(i, 100);
	/* Resumed at k70 after the hash changed around it. */
	CHECK_EQ(kv_hash_del(E.kv, &h, "k69", 3), 1);
	CHECK_EQ(set(&h, "k705", "x", NULL), 0);
	CHECK(kv_hash_walk_at(E.kv, &h, &w, at, atlen));
	CHECK_EQ(kv_hash_walk_next(E.kv, &w), 1);
	CHECK(w.nlen == 3 && !memcmp(w.name, "k70", 3));
	CHECK_EQ(kv_hash_walk_next(E.kv, &w), 1);
	CHECK(w.nlen == 4 && !memcmp(w.name, "k705", 4));
	CHECK(!kv_hash_walk_at(E.kv, &other, &w, at, atlen));
	CHECK(!kv_hash_walk_at(E.kv, &h, &w, at, 5));
	/* Skips pass whole leaves and stop at the hash's end, not in the
	 * next hash's fields. */
	struct kv_hash big;
	open_or_new(&big, "big");
	CHECK_EQ(kv_hash_begin(E.kv, &big, 0), 0);
	for (int j = 0; j < 3000; j++) {
		snprintf(f, sizeof(f), "b%05d", j);
		CHECK_EQ(set(&big, f, "v", NULL), 0);
	}
	CHECK_EQ(kv_hash_end(E.kv, &big, 0), 0);
	struct kv_hash after;
	open_or_new(&after, "after");             /* a newer id: its fields sort after big's */
	CHECK_EQ(set(&after, "a", "x", NULL), 0);
	CHECK_EQ(kv_hash_walk_init(E.kv, &big, &w, NULL, 0), 0);
	CHECK_EQ(kv_hash_walk_skip(&w, 1234), 1234);
	CHECK_EQ(kv_hash_walk_next(E.kv, &w), 1);
	CHECK(w.nlen == 6 && !memcmp(w.name, "b01234", 6));
	CHECK_EQ(kv_hash_walk_skip(&w, 0), 0);
	CHECK_EQ(kv_hash_walk_next(E.kv, &w), 1);
	CHECK(w.nlen == 6 && !memcmp(w.name, "b01235", 6));
	CHECK_EQ(kv_hash_walk_skip(&w, 5000), 3000 - 1236);
	CHECK_EQ(kv_hash_walk_next(E.kv, &w), 0);
	/* An empty walk of a new hash. */
	struct kv_hash nh;
	open_or_new(&nh, "new");
	CHECK_EQ(kv_hash_walk_init(E.kv, &nh, &w, NULL, 0), 0);
	CHECK_EQ(kv_hash_walk_next(E.kv, &w), 0);
	kenv_finish(&E);
}

/* A deadline stays when fields change and when the count changes. */
static void test_deadline(void)
{
	kenv_start(&E, "deadline", 64u << 20, 2048);
	struct kv_hash h;
	open_or_new(&h, "h");
	CHECK_EQ(set(&h, "a", "1", NULL), 0);
	int64_t dl = E.kv->now_ms + 3600 * 1000;
	struct kv_obj o;
	struct kv_key k;
	key_of(&E, &k, 0, "h");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, dl), 0);
	CHECK_EQ(open_or_new(&h, "h"), 0);
	CHECK_EQ(set(&h, "b", "2", NULL), 0);
	CHECK_EQ(set(&h, "a", "one", NULL), 0);
	CHECK_EQ(kv_hash_del(E.kv, &h, "b", 1), 1);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(o.expire_ms, dl);
	CHECK_EQ(o.coll.count, 1);
	/* Expired: the hash is gone, and a field set makes a new one. */
	E.kv->now_ms = dl + 1;
	CHECK_EQ(open_or_new(&h, "h"), -ENOENT);
	CHECK_EQ(set(&h, "c", "3", NULL), 0);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(o.expire_ms, KV_NO_TTL);
	check_count("h", 1);
	check_counts(&E);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kvhash");
	test_fields();
	test_batches();
	test_cut_batch();
	test_long_names();
	test_values();
	test_walks();
	test_deadline();
	rmdir(kv_dir);
	printf("%d passed, %d failed\n", check_pass, check_fail);
	return check_fail ? 1 : 0;
}
