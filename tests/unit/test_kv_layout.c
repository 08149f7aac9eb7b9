/* test_kv_layout.c - the conversion of a tree of the first key layout
 * (services/kv_layout.c): a tree of raw keys, as pkvs wrote them before
 * databases and types (any bytes: keys beginning with 0x00 and with
 * 0xFB..0xFF, keys named like pkvs's own entries, the longest tree key,
 * values of 63 extents, one with a long name), opened through kv_start:
 * every key is database 0's with its value, nothing else is left; a
 * conversion stopped after each group and reopened loses and duplicates
 * nothing; a tree with no prefix left is refused, and so is a later
 * layout. */
#include "kv_fixture.h"

static struct kenv E;

/* ---- a layout-1 tree, written with the tree's own calls ------------------ */

struct raw {
	uint8_t key[PASTE_BTREE_MAX_KEY];
	uint32_t klen;
	uint32_t vlen;          /* value: vlen bytes of pat(seed) */
	uint32_t seed;
};

#define NRAW 700u
static struct raw raws[NRAW + 32];
static uint32_t nraw;

static void add_raw(const void *k, uint32_t klen, uint32_t vlen)
{
	struct raw *r = &raws[nraw];
	memcpy(r->key, k, klen);
	r->klen = klen;
	r->vlen = vlen;
	r->seed = nraw + 1;
	nraw++;
}

static void make_raws(bool every_byte)
{
	nraw = 0;
	char k[32];
	for (uint32_t i = 0; i < NRAW; i++) {
		int n = snprintf(k, sizeof(k), "key-%04u", i);
		add_raw(k, (uint32_t)n, 1 + i % 700);
	}
	add_raw("\x00", 1, 5);
	add_raw("\x00zero", 5, 5);
	add_raw("\x01one", 4, 5);
	add_raw("\xfb\x00\x00\x00\x00\x00\x00\x00\x01\x00x", 11, 7);   /* an index entry's shape */
	add_raw("\xfc", 1, 3);
	add_raw("\xfd" "dbmap", 6, KV_MAX_DBS);                 /* a map's name and length */
	add_raw("\xfd" "layout", 7, 1);
	add_raw("\xfd" "relayout", 9, 1);
	add_raw("\xfe" "c\x00\x00\x00\x00\x00\x00\x00\x05", 10, 9);    /* a grave's */
	add_raw("\xff\x00\x00\x00\x00\x00\x00\x00\x05" "fm", 11, 9);  /* a member's */
	add_raw("\xff\xff\xff", 3, 0);                                /* an empty value */
	uint8_t longk[PASTE_BTREE_MAX_KEY];
	fill(longk, sizeof(longk), 99);
	longk[0] = 'L';
	add_raw(longk, PASTE_BTREE_MAX_KEY, 300);                  /* the longest tree key */
	longk[0] = 'M';
	add_raw(longk, 450, PASTE_BTREE_MAX_EXTENTS * 2048);       /* long, with 63 extents */
	add_raw("full", 4, PASTE_BTREE_MAX_EXTENTS * 2048);         /* 63 extents */
	if (every_byte) {
		/* Keys beginning with every byte a database prefix could be. */
		nraw = 0;
		for (uint32_t b = 0; b < KV_PHYS_DBS; b++) {
			uint8_t kb[2] = { (uint8_t)b, 'x' };
			add_raw(kb, 2, 4);
			if (nraw == sizeof(raws) / sizeof(raws[0]))
				break;
		}
	}
}

/* Write raws[] into a fresh store as layout 1 did: keys as they are,
 * tag 0, no word, no layout entry. */
static void write_layout1(const char *name)
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 64u << 20, .buf_size = 2048, .log_lanes = 2 };
	snprintf(E.path, sizeof(E.path), "%s/%s.store", kv_dir, name);
	unlink(E.path);
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	struct paste_btree_config tc = { 0 };
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_btree *t;
	if (paste_store_open(&st, E.path, &E.scfg, PASTE_STORE_CREATE, &E.err) < 0 ||
	    paste_persist_open(&p, st, &pc, &E.err) < 0 || paste_wal_open(&w, st, p, &E.err) < 0 ||
	    paste_btree_open(&t, st, w, p, &tc, &E.err) < 0) {
		fprintf(stderr, "write_layout1: %s\n", E.err.msg);
		CHECK(0);
		exit(1);
	}
	paste_store_start(st);
	uint32_t bs = paste_store_geom(st)->buf_size;
	for (uint32_t i = 0; i < nraw; i++) {
		struct raw *r = &raws[i];
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n = 0;
		for (uint64_t at = 0; at < r->vlen; n++) {
			uint32_t b;
			CHECK_EQ(paste_store_alloc(st, &b, 1), 1);
			uint32_t l = r->vlen - at < bs ? (uint32_t)(r->vlen - at) : bs;
			uint8_t *d = paste_store_buf(st, b);
			for (uint32_t j = 0; j < l; j++)
				d[j] = pat(r->seed, at + j);
			ext[n] = (struct paste_extent){ b, 0, l };
			at += l;
		}
		CHECK_EQ(paste_btree_set(t, r->key, r->klen, ext, n, NULL), 0);
		for (uint32_t j = 0; j < n; j++)
			paste_store_unref(st, ext[j].buf, false);
		if (i % 64 == 63)
			paste_btree_maintain(t);
	}
	paste_persist_fence(p);
	paste_btree_maintain(t);
	paste_btree_close(t);
	paste_wal_close(w);
	paste_persist_close(p);
	paste_store_close(st);
}

/* ---- checks ------------------------------------------------------------ */

/* Every raw key is database 0's with its value; none is left as it was
 * (but those named like pkvs's own entries, which are its entries now). */
static uint32_t check_converted(void)
{
	uint32_t bad = 0;
	uint8_t *buf = malloc(PASTE_BTREE_MAX_EXTENTS * 2048 + 1);
	for (uint32_t i = 0; i < nraw; i++) {
		struct raw *r = &raws[i];
		struct kv_key k;
		struct kv_obj o;
		kv_key_init(E.kv, &k, 0, r->key, r->klen);
		if (kv_lookup(E.kv, &k, &o, false) || o.type != KV_STRING || o.len != r->vlen ||
		    o.expire_ms != KV_NO_TTL) {
			if (bad++ < 5)
				fprintf(stderr, "  raw key %u (%u bytes, first %02x): not in database 0 as it "
					"was\n", i, r->klen, r->key[0]);
			continue;
		}
		size_t got = kv_value_read(E.kv, &o, 0, buf, r->vlen);
		bool same = got == r->vlen;
		for (uint32_t j = 0; same && j < r->vlen; j++)
			same = buf[j] == pat(r->seed, j);
		if (!same && bad++ < 5)
			fprintf(stderr, "  raw key %u: value differs\n", i);
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		struct paste_btree_attr a;
		uint32_t n, len;
		if (paste_btree_lookup(E.kv->tree, r->key, r->klen, ext, &n, &len, &a) == 0 &&
		    a.tag != KV_TAG_SYS && bad++ < 5)
			fprintf(stderr, "  raw key %u: still there as it was\n", i);
	}
	free(buf);
	return bad;
}

static void check_tree(void)
{
	struct paste_error err = { 0 };
	int r = paste_btree_check(E.kv->tree, &err);
	if (r)
		fprintf(stderr, "  paste_btree_check: %d: %s\n", r, err.msg);
	CHECK_EQ(r, 0);
}

static void test_convert(void)
{
	make_raws(false);
	write_layout1("convert");
	E.kcfg.relayout_batch = 64;
	CHECK(kenv_open(&E));
	uint8_t p = E.kv->dbmap[0];
	CHECK_EQ(p, 2);                         /* 0 and 1 begin layout-1 keys */
	CHECK_EQ(E.kv->dbmap[2], 0);
	CHECK_EQ(check_converted(), 0);
	CHECK_EQ(kv_dbsize(E.kv, 0), nraw);
	CHECK_EQ(count_byte(&E, p), nraw);
	for (uint32_t d = 1; d < E.kv->ndbs; d++)
		CHECK_EQ(kv_dbsize(E.kv, d), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_SYS), 2);    /* layout, dbmap */
	CHECK_EQ(count_byte(&E, KV_PFX_EXPIRE), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	check_counts(&E);
	check_tree();
	/* Converted once: a restart finds the layout entry. */
	CHECK(kenv_reopen(&E));
	CHECK_EQ(E.kv->dbmap[0], p);
	CHECK_EQ(check_converted(), 0);
	CHECK_EQ(count_byte(&E, p), nraw);
	/* And it serves: a write, a scan in order. */
	CHECK_EQ(put_str(&E, 0, "key-0000", "new", KV_NO_TTL), 0);
	CHECK(has_str(&E, 0, "key-0000", "new"));
	struct kv_scan sc;
	kv_scan_init(E.kv, &sc, 0, NULL, 0, false);
	const uint8_t *key;
	size_t klen;
	uint8_t *longbuf = malloc(KV_MAX_KEY);
	CHECK_EQ(kv_scan_next(E.kv, &sc, &key, &klen, longbuf, NULL, NULL), 1);
	CHECK(klen == 1 && key[0] == 0);
	free(longbuf);
	kenv_finish(&E);
}

/* Stopped after every group (as a crash between two groups leaves it):
 * each restart goes on; at the end every key is there once. */
static void test_cut_short(void)
{
	make_raws(false);
	write_layout1("cut");
	E.kcfg.relayout_batch = 100;
	E.kcfg.relayout_stop = 1;
	uint32_t starts = 0;
	uint64_t converted = 0;
	for (;;) {
		CHECK(kenv_open_raw(&E));
		starts++;
		if (E.start_r == 0)
			break;
		CHECK_EQ(E.start_r, -EINTR);
		uint8_t p = E.kv->dbmap[0];
		uint64_t now = count_byte(&E, p);
		CHECK(now > converted);             /* a group more each time, none lost */
		converted = now;
		/* Converted and layout-1 keys together are every key, once. */
		uint64_t left = 0;
		for (uint32_t i = 0; i < nraw; i++) {
			struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
			struct paste_btree_attr a;
			uint32_t n, len;
			left += paste_btree_lookup(E.kv->tree, raws[i].key, raws[i].klen, ext, &n, &len, &a) == 0 &&
				a.tag != KV_TAG_SYS;
		}
		CHECK_EQ(left + now, nraw);
		kenv_close(&E);
		if (starts > nraw)
			break;
	}
	/* The two keys named like the map and "relayout" go with the first
	 * group; the others 100 a group; the last start finds none left. */
	CHECK_EQ(starts, (nraw - 2 + 99) / 100 + 1);
	CHECK_EQ(check_converted(), 0);
	CHECK_EQ(count_byte(&E, E.kv->dbmap[0]), nraw);
	CHECK_EQ(count_byte(&E, KV_PFX_SYS), 2);
	check_counts(&E);
	check_tree();
	kenv_finish(&E);
}

static void test_refused(void)
{
	/* Keys beginning with every byte 0..249: no prefix for database 0. */
	make_raws(true);
	write_layout1("full");
	CHECK(kenv_open_raw(&E));
	CHECK_EQ(E.start_r, -EUCLEAN);
	CHECK(strstr(E.err.msg, "none is left") != NULL);
	CHECK_EQ(count_byte(&E, KV_PFX_SYS), 0);    /* nothing written */
	kenv_finish(&E);
	/* A later layout. */
	kenv_start(&E, "later", 16u << 20, 2048);
	static const uint8_t lk[] = { KV_PFX_SYS, 'l', 'a', 'y', 'o', 'u', 't' };
	CHECK_EQ(kv_sys_put(E.kv, lk, sizeof(lk), "3", 1), 0);
	kenv_close(&E);
	CHECK(kenv_open_raw(&E));
	CHECK_EQ(E.start_r, -EPROTO);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kv-layout");
	test_convert();
	test_cut_short();
	test_refused();
	rmdir(kv_dir);
	return check_done();
}
