/* test_kv_db.c - databases of the key-value core (services/kv_db.c):
 * FLUSHDB gives a database a fresh prefix and buries the old one, which
 * the sweeper empties (collections in it first get graves of their own);
 * prefixes run out only while graves wait, and are swept free; FLUSHALL
 * clears the tree (and keeps it of the current layout across a restart),
 * or inside a group buries every database; SWAPDB swaps two mappings;
 * the map survives a restart; the key counts are exact after every kind
 * of change and after a restart. */
#include "kv_fixture.h"

static struct kenv E;

static uint64_t prefix_keys(uint8_t p)
{
	return count_byte(&E, p);
}

static uint64_t graves(void)
{
	return count_byte(&E, KV_PFX_GRAVE);
}

static void test_flushdb(void)
{
	kenv_start(&E, "flushdb", 32u << 20, 2048);
	int64_t now = E.kv->now_ms;
	CHECK_EQ(put_str(&E, 0, "x", "zero", KV_NO_TTL), 0);
	char key[32];
	for (int i = 0; i < 600; i++) {
		snprintf(key, sizeof(key), "k%04d", i);
		CHECK_EQ(put_str(&E, 1, key, "one", i % 3 ? KV_NO_TTL : now + 1000), 0);
	}
	uint64_t id = make_hash(&E, 1, "h", 300);
	CHECK_EQ(kv_dbsize(E.kv, 1), 601);
	CHECK_EQ(kv_dbexpires(E.kv, 1), 200);
	uint8_t old = E.kv->dbmap[1];
	CHECK_EQ(kv_flushdb(E.kv, 1), 0);
	uint8_t fresh = E.kv->dbmap[1];
	CHECK(fresh != old && fresh >= KV_MAX_DBS && fresh < KV_PHYS_DBS);
	CHECK_EQ(kv_dbsize(E.kv, 1), 0);
	CHECK_EQ(kv_dbexpires(E.kv, 1), 0);
	CHECK(absent(&E, 1, "k0000") && absent(&E, 1, "h"));
	CHECK(has_str(&E, 0, "x", "zero"));
	CHECK_EQ(prefix_keys(old), 601);            /* O(1): buried, not yet deleted */
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_DB, old);
	CHECK_EQ(tree_count(&E, g, glen), 1);
	/* New keys of database 1 live under its fresh prefix. */
	CHECK_EQ(put_str(&E, 1, "k0000", "again", KV_NO_TTL), 0);
	CHECK(has_str(&E, 1, "k0000", "again"));
	CHECK_EQ(kv_dbsize(E.kv, 1), 1);
	check_counts(&E);
	/* A restart keeps the map and the graves; the sweeper goes on. */
	CHECK(kenv_reopen(&E));
	CHECK_EQ(E.kv->dbmap[1], fresh);
	CHECK(E.kv->sweep_due);
	CHECK(has_str(&E, 1, "k0000", "again") && absent(&E, 1, "k0001"));
	kv_sweep_step(E.kv, 1);                     /* one range: the hash is past it */
	CHECK_EQ(prefix_keys(old), 601 - PASTE_BTREE_RANGE_MAX);
	kenv_sweep(&E);
	CHECK_EQ(prefix_keys(old), 0);
	CHECK_EQ(members_of(&E, id, 'f'), 0);                /* its collection's grave swept too */
	CHECK_EQ(graves(), 0);
	CHECK(has_str(&E, 0, "x", "zero") && has_str(&E, 1, "k0000", "again"));
	/* The buried keys' index entries go when they come due. */
	CHECK_EQ(count_byte(&E, KV_PFX_EXPIRE), 200);
	E.kv->now_ms = now + 1000;
	kv_expire_step(E.kv, 1000);
	CHECK_EQ(count_byte(&E, KV_PFX_EXPIRE), 0);
	CHECK(has_str(&E, 1, "k0000", "again"));
	/* An empty database keeps its prefix. */
	CHECK_EQ(kv_flushdb(E.kv, 5), 0);
	CHECK_EQ(E.kv->dbmap[5], 5);
	check_counts(&E);
	kenv_finish(&E);
}

/* FLUSHDB faster than the sweeper: every free prefix taken by a grave;
 * the next one sweeps until one is free again. */
static void test_prefixes_run_out(void)
{
	kenv_start(&E, "prefixes", 32u << 20, 2048);
	for (int i = 0; i < 2 * (int)KV_PHYS_DBS; i++) {
		CHECK_EQ(put_str(&E, 2, "k", "v", KV_NO_TTL), 0);
		int r = kv_flushdb(E.kv, 2);
		CHECK_EQ(r, 0);
		if (r)
			break;
		CHECK(graves() <= KV_PHYS_DBS - KV_MAX_DBS);
	}
	CHECK(absent(&E, 2, "k"));
	CHECK(graves() > 0);
	/* Inside a group the sweeper cannot run: refused while none is free. */
	while (graves() < KV_PHYS_DBS - KV_MAX_DBS) {
		CHECK_EQ(put_str(&E, 2, "k", "v", KV_NO_TTL), 0);
		CHECK_EQ(kv_flushdb(E.kv, 2), 0);
	}
	CHECK_EQ(put_str(&E, 2, "k", "v", KV_NO_TTL), 0);
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(kv_flushdb(E.kv, 2), -ENOSPC);
	kv_abort(E.kv);
	CHECK(has_str(&E, 2, "k", "v"));
	kenv_sweep(&E);
	CHECK_EQ(graves(), 0);
	check_counts(&E);
	kenv_finish(&E);
}

static void test_flushall(void)
{
	kenv_start(&E, "flushall", 32u << 20, 2048);
	for (uint32_t d = 0; d < 3; d++)
		CHECK_EQ(put_str(&E, d, "k", "v", d == 1 ? E.kv->now_ms + 100000 : KV_NO_TTL), 0);
	make_hash(&E, 2, "h", 10);
	CHECK_EQ(kv_swapdb(E.kv, 0, 2), 0);
	CHECK_EQ(kv_flushall(E.kv), 0);
	for (uint32_t d = 0; d < KV_MAX_DBS; d++)
		CHECK_EQ(E.kv->dbmap[d], d);
	for (uint32_t d = 0; d < 3; d++)
		CHECK(absent(&E, d, "k") && kv_dbsize(E.kv, d) == 0);
	CHECK_EQ(count_byte(&E, KV_PFX_MEMBER), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_EXPIRE), 0);
	/* The tree is still of this layout: a key written now is database
	 * 0's key "new" after a restart, not a key to convert. */
	CHECK_EQ(put_str(&E, 0, "new", "after", KV_NO_TTL), 0);
	CHECK(kenv_reopen(&E));
	CHECK(has_str(&E, 0, "new", "after"));
	CHECK_EQ(kv_dbsize(E.kv, 0), 1);
	CHECK_EQ(E.kv->dbmap[0], 0);
	check_counts(&E);

	/* Inside a group a clear cannot be undone: each database is buried. */
	CHECK_EQ(put_str(&E, 3, "k", "v", KV_NO_TTL), 0);
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(kv_flushall(E.kv), 0);
	CHECK(absent(&E, 0, "new") && absent(&E, 3, "k"));
	kv_abort(E.kv);                             /* and put back */
	CHECK(has_str(&E, 0, "new", "after") && has_str(&E, 3, "k", "v"));
	CHECK_EQ(E.kv->dbmap[3], 3);
	check_counts(&E);
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(kv_flushall(E.kv), 0);
	CHECK_EQ(kv_commit(E.kv), 0);
	CHECK(absent(&E, 0, "new") && absent(&E, 3, "k"));
	CHECK(E.kv->dbmap[0] != 0 && E.kv->dbmap[3] != 3);
	CHECK_EQ(kv_dbsize(E.kv, 0) + kv_dbsize(E.kv, 3), 0);
	CHECK(kenv_reopen(&E));
	CHECK(absent(&E, 0, "new") && absent(&E, 3, "k"));
	kenv_sweep(&E);
	CHECK_EQ(prefix_keys(0) + prefix_keys(3), 0);
	check_counts(&E);
	kenv_finish(&E);
}

static void test_swapdb(void)
{
	kenv_start(&E, "swapdb", 16u << 20, 2048);
	CHECK_EQ(put_str(&E, 0, "a", "zero", KV_NO_TTL), 0);
	CHECK_EQ(put_str(&E, 1, "a", "one", E.kv->now_ms + 100000), 0);
	CHECK_EQ(put_str(&E, 1, "b", "one", KV_NO_TTL), 0);
	CHECK_EQ(kv_dbsize(E.kv, 0), 1);
	CHECK_EQ(kv_swapdb(E.kv, 0, 1), 0);
	CHECK(has_str(&E, 0, "a", "one") && has_str(&E, 1, "a", "zero") && has_str(&E, 0, "b", "one"));
	CHECK_EQ(kv_dbsize(E.kv, 0), 2);
	CHECK_EQ(kv_dbexpires(E.kv, 0), 1);
	CHECK_EQ(kv_dbsize(E.kv, 1), 1);
	CHECK_EQ(kv_swapdb(E.kv, 4, 4), 0);
	CHECK(kenv_reopen(&E));
	CHECK(has_str(&E, 0, "a", "one") && has_str(&E, 1, "a", "zero"));
	CHECK_EQ(E.kv->dbmap[0], 1);
	/* A write after the swap goes where the database now lives. */
	CHECK_EQ(put_str(&E, 1, "c", "into one", KV_NO_TTL), 0);
	CHECK_EQ(kv_swapdb(E.kv, 1, 0), 0);
	CHECK(has_str(&E, 0, "c", "into one") && has_str(&E, 0, "a", "zero"));
	CHECK(has_str(&E, 1, "a", "one"));
	/* An expiring key still expires in its new database. */
	E.kv->now_ms += 200000;
	kv_expire_step(E.kv, 10);
	CHECK(absent(&E, 1, "a") && has_str(&E, 1, "b", "one"));
	check_counts(&E);
	kenv_finish(&E);
}

/* Every kind of change, the counts checked against a walk after each. */
static void test_counts(void)
{
	kenv_start(&E, "counts", 32u << 20, 2048);
	int64_t now = E.kv->now_ms;
	struct kv_key k;
	struct kv_obj o;
	CHECK_EQ(put_str(&E, 0, "a", "v", KV_NO_TTL), 0);        /* new */
	CHECK_EQ(put_str(&E, 0, "a", "w", KV_NO_TTL), 0);        /* overwrite */
	CHECK_EQ(put_str(&E, 0, "b", "v", now + 10), 0);         /* with a deadline */
	CHECK_EQ(put_str(&E, 0, "b", "v", KV_KEEP_TTL), 0);
	CHECK_EQ(put_str(&E, 0, "c", "v", now + 20), 0);
	CHECK_EQ(put_str(&E, 0, "c", "v", KV_NO_TTL), 0);        /* deadline dropped */
	check_counts(&E);
	key_of(&E, &k, 0, "a");
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, now + 30), 0);
	check_counts(&E);
	make_hash(&E, 0, "h", 5);
	make_hash(&E, 1, "h", 5);
	check_counts(&E);
	E.kv->now_ms = now + 10;
	CHECK(absent(&E, 0, "b"));                               /* lazily expired */
	check_counts(&E);
	CHECK_EQ(put_str(&E, 0, "d", "v", now + 15), 0);
	E.kv->now_ms = now + 40;
	kv_expire_step(E.kv, 100);                               /* actively: a, d */
	CHECK(absent(&E, 0, "a"));
	check_counts(&E);
	key_of(&E, &k, 0, "h");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	check_counts(&E);
	CHECK_EQ(put_str(&E, 2, "x", "v", now + 1000), 0);
	CHECK_EQ(kv_swapdb(E.kv, 1, 2), 0);
	check_counts(&E);
	CHECK_EQ(kv_flushdb(E.kv, 2), 0);
	check_counts(&E);
	CHECK_EQ(kv_begin(E.kv), 0);
	CHECK_EQ(put_str(&E, 3, "y", "v", now + 1000), 0);
	key_of(&E, &k, 0, "c");
	CHECK_EQ(kv_remove(E.kv, &k), 1);
	kv_abort(E.kv);
	check_counts(&E);
	uint64_t sizes[4];
	for (uint32_t d = 0; d < 4; d++)
		sizes[d] = kv_dbsize(E.kv, d);
	CHECK(kenv_reopen(&E));
	for (uint32_t d = 0; d < 4; d++)
		CHECK_EQ(kv_dbsize(E.kv, d), sizes[d]);
	CHECK_EQ(kv_keys(E.kv), 2);                              /* c, and x (now db 1) */
	check_counts(&E);
	CHECK_EQ(kv_flushall(E.kv), 0);
	check_counts(&E);
	CHECK_EQ(kv_keys(E.kv), 0);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kv-db");
	test_flushdb();
	test_prefixes_run_out();
	test_flushall();
	test_swapdb();
	test_counts();
	rmdir(kv_dir);
	return check_done();
}
