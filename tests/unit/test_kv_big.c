/* test_kv_big.c - strings longer than one entry (services/kv_big.c):
 * written through a writer in pieces of any size, read back whole and by
 * any range across chunk boundaries, listed as strings of their length;
 * a long key beside a full entry's extents; overwrite, DEL, expiry and
 * FLUSHDB give their chunks to the sweeper and their buffers back; a
 * write in progress is safe from the sweeper and from FLUSHALL; a write
 * cut short (given up, or a crash) leaves only chunks the sweeper
 * deletes, and the old value whole; a finished one survives a restart;
 * APPEND and SETRANGE at the kv level (one entry growing into chunks,
 * small appends that do not make a chunk each, patches across chunks,
 * gaps); the limits. */
#include "kv_fixture.h"

static struct kenv E;

#define BS 2048u
#define ONE_ENTRY (PASTE_BTREE_MAX_EXTENTS * BS)     /* 129,024 bytes */
#define CHUNK (32u * BS)

/* The value model: value i's byte j is pat(seed, j). */
static uint8_t *model(uint64_t len, uint32_t seed)
{
	uint8_t *p = malloc(len ? len : 1);
	fill(p, len, seed);
	return p;
}

/* Write key = len bytes of seed through a writer, in pieces of `step`. */
static int write_big(uint32_t db, const void *key, size_t klen, uint64_t len, uint32_t seed,
		     uint64_t step, int64_t exp)
{
	struct kv_writer w;
	kv_writer_idle(&w);
	int r = kv_writer_begin(E.kv, &w, len);
	if (r)
		return r;
	uint8_t *v = model(len, seed);
	for (uint64_t at = 0; at < len && r == 0; at += step)
		r = kv_writer_copy(E.kv, &w, v + at, len - at < step ? len - at : step);
	free(v);
	if (r) {
		kv_writer_drop(E.kv, &w);
		return r;
	}
	struct kv_key k;
	kv_key_init(E.kv, &k, db, key, klen);
	return kv_writer_put(E.kv, &w, &k, exp, NULL);
}

/* Is key's value exactly want[0..len), read whole and by ranges? */
static bool same_value(uint32_t db, const void *key, size_t klen, const uint8_t *want, uint64_t len)
{
	struct kv_key k;
	struct kv_obj o;
	kv_key_init(E.kv, &k, db, key, klen);
	if (kv_lookup(E.kv, &k, &o, false) || o.type != KV_STRING || o.len != len) {
		fprintf(stderr, "  value of %zu-byte key: absent, not a string, or not %llu bytes\n", klen,
			(unsigned long long)len);
		return false;
	}
	uint8_t *got = malloc(len + 1);
	size_t n = kv_value_read(E.kv, &o, 0, got, len + 1);
	bool ok = n == len && memcmp(got, want, len) == 0;
	/* Ranges: around every chunk boundary, and odd ones. */
	for (uint64_t b = CHUNK; ok && b < len; b += CHUNK) {
		uint64_t from = b - 3, l = len - from < 10 ? len - from : 10;
		n = kv_value_read(E.kv, &o, from, got, l);
		ok = n == l && memcmp(got, want + from, l) == 0;
	}
	uint64_t from = len / 3, l = len / 2;
	if (ok && len) {
		n = kv_value_read(E.kv, &o, from, got, l);
		ok = n == l && memcmp(got, want + from, l) == 0;
	}
	if (ok)
		ok = kv_value_read(E.kv, &o, len, got, 10) == 0;
	free(got);
	if (!ok)
		fprintf(stderr, "  value of %zu-byte key: bytes differ\n", klen);
	return ok;
}

static bool same_model(uint32_t db, const char *key, uint64_t len, uint32_t seed)
{
	uint8_t *v = model(len, seed);
	bool ok = same_value(db, key, strlen(key), v, len);
	free(v);
	return ok;
}

static uint64_t chunks_of(const char *key)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, key);
	if (kv_lookup(E.kv, &k, &o, false) || !o.big)
		return 0;
	return members_of(&E, o.big, KV_CHUNK);
}

static uint64_t all_chunks(void)
{
	return count_byte(&E, KV_PFX_MEMBER);
}

/* The pieces kv_value_each gives, checked against the value. */
struct pieces {
	const uint8_t *want;
	uint64_t at, calls;
	bool ok;
};

static int check_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		       uint64_t len)
{
	struct pieces *p = arg;
	uint8_t *b = malloc(len);
	p->ok &= paste_store_read(E.st, ext, n, skip, b, len) == len &&
		 memcmp(b, p->want + p->at, len) == 0;
	free(b);
	p->at += len;
	p->calls++;
	return 0;
}

static void test_write_read(void)
{
	kenv_start(&E, "big-rw", 64u << 20, BS);
	CHECK_EQ(kv_max_value(E.kv), KV_STRING_MAX);
	/* Sizes around one entry's limit and the chunk size, fed in pieces
	 * that straddle chunk boundaries. */
	static const uint64_t sizes[] = { ONE_ENTRY, ONE_ENTRY + 1, 3 * CHUNK, 3 * CHUNK + 7,
					  1u << 20, 5u << 20 };
	static const uint64_t steps[] = { 1000, 4096, 100000, 1u << 20 };
	char key[32];
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(key, sizeof(key), "big%zu", i);
		CHECK_EQ(write_big(0, key, strlen(key), sizes[i], (uint32_t)i + 1, steps[i % 4],
				   KV_NO_TTL), 0);
		CHECK(same_model(0, key, sizes[i], (uint32_t)i + 1));
		CHECK_EQ(chunks_of(key), sizes[i] <= ONE_ENTRY ? 0 : (sizes[i] + CHUNK - 1) / CHUNK);
	}
	/* kv_value_each: one call per chunk, in order. */
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, "big4");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, true), 0);
	CHECK(o.big != 0 && o.len == 1u << 20);
	uint8_t *v = model(1u << 20, 5);
	struct pieces p = { v + CHUNK - 5, 0, 0, true };
	CHECK_EQ(kv_value_each(E.kv, &o, CHUNK - 5, 2 * CHUNK + 10, check_piece, &p), 0);
	CHECK(p.ok && p.at == 2 * CHUNK + 10 && p.calls == 4);
	free(v);
	/* Listed as a string of its length. */
	struct kv_scan sc;
	kv_scan_init(E.kv, &sc, 0, "\0big4", 5, false);
	const uint8_t *key4;
	size_t klen;
	enum kv_type type = KV_HASH;
	CHECK_EQ(kv_scan_next(E.kv, &sc, &key4, &klen, NULL, &type, NULL), 1);
	CHECK(klen == 4 && !memcmp(key4, "big4", 4) && type == KV_STRING && sc.vlen == 1u << 20);
	CHECK_EQ(kv_dbsize(E.kv, 0), 6);
	/* A restart: the same bytes. */
	CHECK(kenv_reopen(&E));
	CHECK(same_model(0, "big5", 5u << 20, 6));
	CHECK(same_model(0, "big1", ONE_ENTRY + 1, 2));
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	check_counts(&E);
	/* A deadline and KEEPTTL keep it a string in chunks. */
	key_of(&E, &k, 0, "big3");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, E.kv->now_ms + 100000), 0);
	CHECK(same_model(0, "big3", 3 * CHUNK + 7, 4));
	CHECK_EQ(write_big(0, "big3", 4, 4 * CHUNK, 9, 5000, KV_KEEP_TTL), 0);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(o.expire_ms, E.kv->now_ms + 100000);
	CHECK(same_model(0, "big3", 4 * CHUNK, 9));
	check_counts(&E);
	/* The limits. */
	struct kv_writer w;
	kv_writer_idle(&w);
	CHECK_EQ(kv_writer_begin(E.kv, &w, KV_STRING_MAX + 1), -EFBIG);
	CHECK_EQ(kv_writer_begin(E.kv, &w, 64u << 20), -ENOSPC);    /* more than the store */
	kenv_finish(&E);
	/* --max-value lowers it. */
	memset(&E, 0, sizeof(E));
	E.kcfg.max_value = 200000;
	E.scfg = (struct paste_store_config){ .size = 16u << 20, .buf_size = BS, .log_lanes = 2 };
	snprintf(E.path, sizeof(E.path), "%s/max.store", kv_dir);
	unlink(E.path);
	CHECK(kenv_open(&E));
	CHECK_EQ(kv_max_value(E.kv), 200000);
	CHECK_EQ(write_big(0, "m", 1, 200001, 1, 4096, KV_NO_TTL), -EFBIG);
	CHECK_EQ(write_big(0, "m", 1, 200000, 1, 4096, KV_NO_TTL), 0);
	uint8_t *b = model(200001, 1);
	struct kv_key km;
	key_of(&E, &km, 0, "m");
	CHECK_EQ(kv_put_bytes(E.kv, &km, KV_STRING, b, 200001, KV_NO_TTL, NULL), -EFBIG);
	free(b);
	kenv_finish(&E);
}

/* A long key beside a value of 63 extents; long keys with big values. */
static void test_long_keys(void)
{
	kenv_start(&E, "big-long", 64u << 20, BS);
	uint8_t *name = model(5000, 77);
	/* kv_put of a full entry's extents with a long name: chunks, sharing
	 * the extents (no byte copied). */
	uint32_t bufs[PASTE_BTREE_MAX_EXTENTS];
	CHECK_EQ(paste_store_alloc(E.st, bufs, PASTE_BTREE_MAX_EXTENTS), PASTE_BTREE_MAX_EXTENTS);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint8_t *v = model(ONE_ENTRY, 3);
	for (uint32_t i = 0; i < PASTE_BTREE_MAX_EXTENTS; i++) {
		memcpy(paste_store_buf(E.st, bufs[i]), v + (uint64_t)i * BS, BS);
		ext[i] = (struct paste_extent){ bufs[i], 0, BS };
	}
	struct kv_key k;
	kv_key_init(E.kv, &k, 0, name, 5000);
	CHECK_EQ(kv_put(E.kv, &k, KV_STRING, ext, PASTE_BTREE_MAX_EXTENTS, KV_NO_TTL, NULL), 0);
	for (uint32_t i = 0; i < PASTE_BTREE_MAX_EXTENTS; i++)
		paste_store_unref(E.st, bufs[i], false);
	CHECK(same_value(0, name, 5000, v, ONE_ENTRY));
	struct kv_obj o;
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK(o.big != 0);
	free(v);
	/* Through a writer and from DRAM, with long keys. */
	name[0] ^= 1;
	CHECK_EQ(write_big(0, name, 5000, 300000, 4, 3000, KV_NO_TTL), 0);
	v = model(300000, 4);
	CHECK(same_value(0, name, 5000, v, 300000));
	free(v);
	name[0] ^= 2;
	v = model(1u << 20, 5);
	kv_key_init(E.kv, &k, 0, name, 5000);
	CHECK_EQ(kv_put_bytes(E.kv, &k, KV_STRING, v, 1u << 20, KV_NO_TTL, NULL), 0);
	CHECK(same_value(0, name, 5000, v, 1u << 20));
	/* A short key from DRAM: one over an entry's worth is chunked too. */
	key_of(&E, &k, 0, "dram");
	CHECK_EQ(kv_put_bytes(E.kv, &k, KV_STRING, v, ONE_ENTRY + 100, KV_NO_TTL, NULL), 0);
	CHECK(same_value(0, "dram", 4, v, ONE_ENTRY + 100));
	free(v);
	CHECK(kenv_reopen(&E));
	name[0] ^= 2;
	v = model(300000, 4);
	CHECK(same_value(0, name, 5000, v, 300000));
	free(v);
	free(name);
	check_counts(&E);
	kenv_finish(&E);
}

/* Overwrite, DEL, expiry, FLUSHDB: the chunks go to the sweeper, the
 * buffers come back. */
static void test_drop(void)
{
	kenv_start(&E, "big-drop", 64u << 20, BS);
	uint32_t base = kenv_free(&E);
	CHECK_EQ(write_big(0, "a", 1, 4u << 20, 1, 65536, KV_NO_TTL), 0);
	uint32_t used = base - kenv_free(&E);
	CHECK(used >= (4u << 20) / BS && used < (4u << 20) / BS + 64);
	/* Overwritten by a small value: buried, then swept. */
	uint64_t chunks = all_chunks();
	CHECK(chunks > 0);
	CHECK_EQ(put_str(&E, 0, "a", "small", KV_NO_TTL), 0);
	CHECK(has_str(&E, 0, "a", "small"));
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 1);
	CHECK_EQ(all_chunks(), chunks);
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	/* DEL. */
	CHECK_EQ(write_big(0, "b", 1, 2u << 20, 2, 65536, KV_NO_TTL), 0);
	struct kv_key k;
	key_of(&E, &k, 0, "b");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	CHECK(absent(&E, 0, "b"));
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	/* Overwritten by another big one: only the old chunks go. */
	CHECK_EQ(write_big(0, "c", 1, 1u << 20, 3, 65536, KV_NO_TTL), 0);
	CHECK_EQ(write_big(0, "c", 1, 1u << 20, 4, 65536, KV_NO_TTL), 0);
	kenv_sweep(&E);
	CHECK(same_model(0, "c", 1u << 20, 4));
	CHECK_EQ(all_chunks(), chunks_of("c"));
	/* Expiry, lazy and active. */
	int64_t now = E.kv->now_ms;
	CHECK_EQ(write_big(0, "d", 1, 1u << 20, 5, 65536, now + 10), 0);
	CHECK_EQ(write_big(0, "e", 1, 1u << 20, 6, 65536, now + 10), 0);
	E.kv->now_ms = now + 10;
	CHECK(absent(&E, 0, "d"));
	kv_expire_step(E.kv, 10);
	CHECK_EQ(count_byte(&E, KV_PFX_EXPIRE), 0);
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), chunks_of("c"));
	/* A flushed database: its big strings get graves of their own. */
	CHECK_EQ(write_big(1, "f", 1, 1u << 20, 7, 65536, KV_NO_TTL), 0);
	CHECK_EQ(kv_flushdb(E.kv, 1), 0);
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), chunks_of("c"));
	key_of(&E, &k, 0, "c");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	check_counts(&E);
	kenv_finish(&E);
}

/* Writes in progress, given up, and cut short by a crash. */
static void test_in_progress(void)
{
	kenv_start(&E, "big-progress", 64u << 20, BS);
	uint32_t base = kenv_free(&E);
	CHECK_EQ(write_big(0, "old", 3, 1u << 20, 1, 65536, KV_NO_TTL), 0);
	uint64_t old_chunks = all_chunks();
	/* Half written: the sweeper leaves its chunks alone, FLUSHALL does
	 * not take them (databases are buried instead of a clear). */
	struct kv_writer w;
	kv_writer_idle(&w);
	uint64_t len = 3u << 20;
	uint8_t *v = model(len, 2);
	CHECK_EQ(kv_writer_begin(E.kv, &w, len), 0);
	CHECK_EQ(kv_writer_copy(E.kv, &w, v, len / 2), 0);
	uint64_t mid = all_chunks();
	CHECK(mid > old_chunks);
	CHECK(kv_writing(E.kv, w.id));
	kv_sweep_step(E.kv, 100);
	CHECK_EQ(all_chunks(), mid);
	CHECK_EQ(put_str(&E, 0, "x", "gone", KV_NO_TTL), 0);
	CHECK_EQ(kv_flushall(E.kv), 0);
	CHECK(absent(&E, 0, "x") && absent(&E, 0, "old"));
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), mid - old_chunks);
	CHECK_EQ(kv_writer_copy(E.kv, &w, v + len / 2, len - len / 2), 0);
	struct kv_key k;
	key_of(&E, &k, 0, "new");
	CHECK_EQ(kv_writer_put(E.kv, &w, &k, KV_NO_TTL, NULL), 0);
	CHECK(!kv_writing(E.kv, w.id));
	CHECK(same_value(0, "new", 3, v, len));
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	CHECK_EQ(kv_dbsize(E.kv, 0), 1);
	check_counts(&E);
	/* Given up (the connection went): its chunks are swept. */
	kv_writer_idle(&w);
	CHECK_EQ(kv_writer_begin(E.kv, &w, len), 0);
	CHECK_EQ(kv_writer_copy(E.kv, &w, v, len / 2), 0);
	kv_writer_drop(E.kv, &w);
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), chunks_of("new"));
	CHECK(same_value(0, "new", 3, v, len));
	/* Cut short by a crash: the old value whole, the new one's chunks
	 * swept after the restart. */
	kv_writer_idle(&w);
	CHECK_EQ(kv_writer_begin(E.kv, &w, len), 0);
	CHECK_EQ(kv_writer_copy(E.kv, &w, v, len - 1), 0);
	CHECK(all_chunks() > chunks_of("new"));
	paste_body_release(&w.body, E.st);    /* the crash: nothing else happens */
	CHECK(kenv_reopen(&E));
	CHECK(E.kv->sweep_due);
	CHECK(same_value(0, "new", 3, v, len));
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), chunks_of("new"));
	key_of(&E, &k, 0, "new");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	kenv_sweep(&E);
	CHECK(kenv_free(&E) + 8 >= base);
	/* A failure partway (a value over the store's room): refused, and
	 * what it wrote is swept. */
	kenv_finish(&E);
	kenv_start(&E, "big-full", 8u << 20, BS);
	base = kenv_free(&E);
	CHECK_EQ(write_big(0, "full", 4, 6u << 20, 3, 65536, KV_NO_TTL), -ENOSPC);
	CHECK(absent(&E, 0, "full"));
	kenv_sweep(&E);
	CHECK_EQ(all_chunks(), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	CHECK_EQ(write_big(0, "fits", 4, 1u << 20, 3, 65536, KV_NO_TTL), 0);
	/* Below the reserve a value of one entry is refused too, and the key
	 * keeps what it had. */
	uint32_t n = paste_store_nfree(E.st);
	uint32_t *hoard = malloc(sizeof(*hoard) * n);
	CHECK_EQ(paste_store_alloc(E.st, hoard, n), n);
	kv_writer_idle(&w);                   /* as the front ends: put at the end */
	uint8_t small[5000];
	fill(small, sizeof(small), 4);
	CHECK_EQ(kv_writer_begin(E.kv, &w, sizeof(small)), 0);
	CHECK_EQ(kv_writer_copy(E.kv, &w, small, sizeof(small)), -ENOSPC);
	key_of(&E, &k, 0, "fits");
	CHECK_EQ(kv_writer_put(E.kv, &w, &k, KV_NO_TTL, NULL), -ENOSPC);
	for (uint32_t i = 0; i < n; i++)
		paste_store_unref(E.st, hoard[i], false);
	free(hoard);
	CHECK(same_model(0, "fits", 1u << 20, 3));
	free(v);
	kenv_finish(&E);
}

/* APPEND and SETRANGE at the kv level. */
static int append_model(const char *key, uint8_t **m, uint64_t *mlen, const void *p, uint64_t len)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, key);
	bool found = kv_lookup(E.kv, &k, &o, false) == 0;
	int r = kv_value_append_bytes(E.kv, &k, found ? &o : NULL, p, len);
	if (r == 0) {
		*m = realloc(*m, *mlen + len + 1);
		memcpy(*m + *mlen, p, len);
		*mlen += len;
	}
	return r;
}

static int setrange_model(const char *key, uint8_t **m, uint64_t *mlen, uint64_t off,
			  const void *p, uint64_t len)
{
	struct kv_key k;
	struct kv_obj o;
	key_of(&E, &k, 0, key);
	bool found = kv_lookup(E.kv, &k, &o, false) == 0;
	int r = kv_value_setrange(E.kv, &k, found ? &o : NULL, off, p, len);
	if (r == 0 && len) {
		uint64_t n = off + len > *mlen ? off + len : *mlen;
		*m = realloc(*m, n + 1);
		if (off > *mlen)
			memset(*m + *mlen, 0, off - *mlen);
		if (p)
			memcpy(*m + off, p, len);
		else
			memset(*m + off, 0, len);
		*mlen = n;
	}
	return r;
}

static void test_append_setrange(void)
{
	kenv_start(&E, "big-append", 64u << 20, BS);
	uint8_t *m = NULL, *src = model(1u << 20, 11);
	uint64_t mlen = 0;
	/* From nothing, small appends, growing past one entry. */
	for (uint32_t i = 0; i < 200; i++)
		CHECK_EQ(append_model("a", &m, &mlen, src + i * 1000, 1000), 0);
	CHECK(mlen > ONE_ENTRY);
	CHECK(same_value(0, "a", 1, m, mlen));
	uint64_t before = chunks_of("a");
	/* Small appends to a string in chunks grow its last chunk. */
	for (uint32_t i = 0; i < 50; i++)
		CHECK_EQ(append_model("a", &m, &mlen, src + i, 100), 0);
	CHECK(chunks_of("a") <= before + 1);
	CHECK(same_value(0, "a", 1, m, mlen));
	/* A big append. */
	CHECK_EQ(append_model("a", &m, &mlen, src, 700000), 0);
	CHECK(same_value(0, "a", 1, m, mlen));
	/* Extents appended as they are (zero copy). */
	struct kv_key k;
	struct kv_obj o;
	uint32_t b;
	CHECK_EQ(paste_store_alloc(E.st, &b, 1), 1);
	memcpy(paste_store_buf(E.st, b), src + 5, BS);
	struct paste_extent e = { b, 0, BS };
	key_of(&E, &k, 0, "a");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_value_append(E.kv, &k, &o, &e, 1), 0);
	paste_store_unref(E.st, b, false);
	m = realloc(m, mlen + BS);
	memcpy(m + mlen, src + 5, BS);
	mlen += BS;
	CHECK(same_value(0, "a", 1, m, mlen));
	/* SETRANGE: inside, across chunk boundaries, past the end with a gap. */
	CHECK_EQ(setrange_model("a", &m, &mlen, CHUNK - 10, src + 3, 30), 0);
	CHECK_EQ(setrange_model("a", &m, &mlen, 2 * CHUNK - 100, src + 7, 3 * CHUNK), 0);
	CHECK_EQ(setrange_model("a", &m, &mlen, 5, NULL, 50), 0);
	CHECK(same_value(0, "a", 1, m, mlen));
	CHECK_EQ(setrange_model("a", &m, &mlen, mlen + 300000, src, 5000), 0);
	CHECK(same_value(0, "a", 1, m, mlen));
	CHECK_EQ(setrange_model("a", &m, &mlen, mlen - 10, src, 100000), 0);   /* across the end */
	CHECK(same_value(0, "a", 1, m, mlen));
	/* A deadline stays through both. */
	int64_t dl = E.kv->now_ms + 100000;
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, dl), 0);
	CHECK_EQ(append_model("a", &m, &mlen, src, 10), 0);
	CHECK_EQ(setrange_model("a", &m, &mlen, 1, src, 10), 0);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(o.expire_ms, dl);
	CHECK(kenv_reopen(&E));
	CHECK(same_value(0, "a", 1, m, mlen));
	/* SETRANGE on an absent key far out: zeros then the bytes, in chunks. */
	uint8_t *z = NULL;
	uint64_t zlen = 0;
	CHECK_EQ(setrange_model("z", &z, &zlen, 3u << 20, "end", 3), 0);
	CHECK(same_value(0, "z", 1, z, zlen));
	CHECK(chunks_of("z") > 0);
	/* One in one entry grows past it: its extents become chunks. */
	uint8_t *g = NULL;
	uint64_t glen = 0;
	CHECK_EQ(setrange_model("g", &g, &glen, 0, src, 100000), 0);
	CHECK_EQ(chunks_of("g"), 0);
	CHECK_EQ(setrange_model("g", &g, &glen, 99990, src + 9, 200000), 0);
	CHECK(chunks_of("g") > 0);
	CHECK(same_value(0, "g", 1, g, glen));
	free(g);
	/* A small one stays one entry. */
	uint8_t *s = NULL;
	uint64_t slen = 0;
	CHECK_EQ(setrange_model("s", &s, &slen, 10, "abc", 3), 0);
	CHECK_EQ(append_model("s", &s, &slen, "def", 3), 0);
	CHECK(same_value(0, "s", 1, s, slen));
	CHECK_EQ(chunks_of("s"), 0);
	/* Over the limit: refused, nothing changed. */
	CHECK_EQ(setrange_model("s", &s, &slen, KV_STRING_MAX, "x", 1), -EFBIG);
	CHECK(same_value(0, "s", 1, s, slen));
	kenv_sweep(&E);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	/* Every chunk belongs to a key. */
	CHECK_EQ(all_chunks(), chunks_of("a") + chunks_of("z") + chunks_of("g"));
	check_counts(&E);
	free(m);
	free(z);
	free(s);
	free(src);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kv-big");
	test_write_read();
	test_long_keys();
	test_drop();
	test_in_progress();
	test_append_setrange();
	rmdir(kv_dir);
	return check_done();
}
