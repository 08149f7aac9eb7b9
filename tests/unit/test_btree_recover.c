/* test_btree_recover.c - the tree across restarts: a checkpoint plus the
 * log tail replayed at open, records that are not the tree's skipped, a
 * lane change, torn and damaged meta slots and pages (refused, nothing
 * written), a store without a node area, and the recovery time of 1 M
 * keys (PASTE_BTREE_RECOVERY_KEYS; printed, not asserted). */
#include <sys/mman.h>
#include <time.h>
#include "btree_fixture.h"

static struct tenv E;
static uint32_t vpool[64];   /* the buffers values name: the first open's pool */

static void setup(const char *name, uint64_t size, uint64_t nodes)
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = size, .buf_size = 2048, .log_lanes = 2,
					      .node_size = nodes };
	E.mode = PASTE_DUR_EMULATED;
	E.npool = 64;
	tenv_start(&E, name);
	if (E.pool)
		memcpy(vpool, E.pool, sizeof(vpool));
}

static void key(char *k, uint32_t i)
{
	snprintf(k, 32, "key-%06u", i);
}

static struct paste_extent val_of(uint32_t i)
{
	return (struct paste_extent){ vpool[i % 64], i % 1000, 1 + i % 997 };
}

/* Keys [0, n) must be present with their values iff present(i). */
static uint32_t verify(uint32_t n, bool (*present)(uint32_t))
{
	uint32_t bad = 0;
	char k[32];
	for (uint32_t i = 0; i < n; i++) {
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS], want = val_of(i);
		uint32_t cnt, len;
		key(k, i);
		int rc = paste_btree_get(E.t, k, (uint32_t)strlen(k), ext, &cnt, &len);
		if (present(i))
			bad += rc != 0 || cnt != 1 || memcmp(ext, &want, sizeof(want)) != 0;
		else
			bad += rc != -ENOENT;
	}
	return bad;
}

static bool all(uint32_t i) { (void)i; return true; }
static bool not_div7(uint32_t i) { return i % 7 != 0; }

static uint64_t file_sum(const char *p)
{
	int fd = open(p, O_RDONLY);
	struct stat s;
	uint64_t h = 0;
	if (fd < 0 || fstat(fd, &s) < 0)
		return 0;
	uint8_t *m = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_SHARED, fd, 0);
	h = paste_crc32c(0, m, (size_t)s.st_size);
	munmap(m, (size_t)s.st_size);
	close(fd);
	return h;
}

static void test_checkpoint_and_replay(void)
{
	setup("replay", 16u << 20, 2u << 20);
	char k[32];
	for (uint32_t i = 0; i < 3000; i++) {
		struct paste_extent v = val_of(i);
		key(k, i);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	uint64_t seq = in.ckpt_seq;
	CHECK_EQ(seq, 1);
	/* The tail: more keys, overwrites of the same value, deletes. */
	for (uint32_t i = 3000; i < 5000; i++) {
		struct paste_extent v = val_of(i);
		key(k, i);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	uint32_t dels = 0;
	for (uint32_t i = 0; i < 5000; i += 7) {
		key(k, i);
		dels += paste_btree_del(E.t, k, (uint32_t)strlen(k), NULL) == 0;
	}
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.replayed, 2000 + dels);
	CHECK_EQ(in.ckpt_seq, seq);
	CHECK_EQ(in.keys, 5000 - dels);
	CHECK_EQ(verify(5000, not_div7), 0);
	CHECK_EQ(tree_check(E.t), 0);
	CHECK_EQ(audit_refs(&E), 0);
	/* Reopen again: the replayed tail is still in the log (no checkpoint
	 * since), and replayed again, to the same tree. */
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.replayed, 2000 + dels);
	CHECK_EQ(verify(5000, not_div7), 0);
	/* After a checkpoint nothing is replayed, and the log is empty. */
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.replayed, 0);
	CHECK_EQ(in.ckpt_seq, seq + 1);
	struct paste_wal_info wi;
	paste_wal_info(E.w, &wi);
	CHECK_EQ(wi.records, 0);
	CHECK_EQ(verify(5000, not_div7), 0);
	CHECK_EQ(audit_refs(&E), 0);

	/* A record that is not the tree's (another service's, in the other
	 * lane) is skipped; a lane change between runs is fine. */
	uint64_t lsn;
	struct paste_extent raw = { E.pool[0], 0, 100 };
	CHECK_EQ(paste_wal_append(E.w, 0, E.p, &raw, 1, &lsn), 0);
	CHECK_EQ(paste_persist_fence(E.p), 0);
	E.tcfg.lane = 1;
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.replay_skipped, 1);
	CHECK_EQ(in.replayed, 0);
	key(k, 0);
	struct paste_extent v0 = val_of(0);
	CHECK_EQ(set_str(E.t, k, &v0, 1), 0);    /* into lane 1 now */
	CHECK_EQ(paste_persist_fence(E.p), 0);
	E.tcfg.lane = 0;
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.replayed, 1);
	CHECK_EQ(verify(5000, all) > 0, 1);      /* the multiples of 7 but 0 are gone */
	CHECK_EQ(paste_btree_count(E.t), 5000 - dels + 1);
	tenv_finish(&E);
}

/* Damage: every failure refuses the open, and the start (a log recovered
 * without writing, as pkvs's kv_open does, then the tree) writes nothing:
 * the whole file is as it was. */
static void expect_refused(int code, const char *text)
{
	struct paste_store *st = NULL;
	struct paste_persist *p = NULL;
	struct paste_wal *w = NULL;
	struct paste_btree *t = NULL;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	struct paste_error err = { 0 };
	uint64_t before = file_sum(path);
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), 0);
	CHECK_EQ(paste_persist_open(&p, st, &pc, &err), 0);
	CHECK_EQ(paste_wal_recover(&w, st, p, &err), 0);
	CHECK_EQ(paste_btree_open(&t, st, w, p, NULL, &err), code);
	CHECK(t == NULL);
	if (!strstr(err.msg, text)) {
		fprintf(stderr, "  want \"%s\" in \"%s\"\n", text, err.msg);
		CHECK(0);
	}
	CHECK(strstr(err.msg, path) != NULL);
	CHECK_EQ(file_sum(path), before);
	paste_wal_close(w);
	paste_persist_close(p);
	paste_store_close(st);
}

static void poke_byte(uint64_t off, uint8_t x)
{
	int fd = open(path, O_RDWR);
	uint8_t b;
	CHECK_EQ(pread(fd, &b, 1, (off_t)off), 1);
	b ^= x;
	CHECK_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static void test_damage(void)
{
	setup("damage", 8u << 20, 1u << 20);
	char k[32];
	for (uint32_t i = 0; i < 2000; i++) {
		struct paste_extent v = val_of(i);
		key(k, i);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
		if (i == 1000)
			CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	}
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.ckpt_seq, 2);
	uint64_t nodes = paste_store_geom(E.st)->node_offset;
	uint32_t root_page;
	memcpy(&root_page, paste_store_nodes(E.st, NULL) + 4096 * 1 + 40, 4);   /* slot 1 holds seq 2 */
	tenv_close(&E);

	/* A flipped byte in a tree page: its CRC fails. */
	poke_byte(nodes + (uint64_t)root_page * 4096 + 100, 0x40);
	expect_refused(-EBADMSG, "page checksum mismatch");
	poke_byte(nodes + (uint64_t)root_page * 4096 + 100, 0x40);
	/* The newest meta slot torn: the older one is used, said in err. */
	poke_byte(nodes + 4096 + 30, 0x01);
	CHECK_EQ(tenv_open(&E), true);
	CHECK(strstr(E.err.msg, "meta slot 1 is torn or damaged") != NULL);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.ckpt_seq, 1);
	tenv_close(&E);
	/* Both damaged: refused. */
	poke_byte(nodes + 30, 0x01);
	expect_refused(-EBADMSG, "both B+tree meta slots are damaged");
	poke_byte(nodes + 30, 0x01);
	poke_byte(nodes + 4096 + 30, 0x01);
	/* The root's first child cut to its first entry, the rest of its
	 * page sound (the bytes let go counted as holes) and its CRC right:
	 * no change leaves a node below the fill bound, so a bug or another
	 * writer made it. Refused. (Header offsets: lib/btree_internal.h.) */
	{
		int fd = open(path, O_RDWR);
		uint8_t pg[4096], orig[4096];
		uint32_t child;
		CHECK_EQ(pread(fd, &child, 4, (off_t)(nodes + (uint64_t)root_page * 4096 + 24)), 4);
		off_t at = (off_t)(nodes + (uint64_t)child * 4096);
		CHECK_EQ(pread(fd, orig, sizeof(orig), at), (ssize_t)sizeof(orig));
		memcpy(pg, orig, sizeof(pg));
		uint16_t nkeys = 1, top, slot0, frag;
		memcpy(&top, pg + 22, 2);
		memcpy(&slot0, pg + 32, 2);
		uint8_t *e = pg + slot0;
		/* leaf entry: 12 bytes (+8 with a word), extents, key; inner: 8, key */
		uint32_t esize = (uint32_t)(e[0] | e[1] << 8) +
				 (pg[6] == 1 ? 12u + (e[3] & 0x10 ? 8u : 0u) + 12u * e[2] : 8u);
		frag = (uint16_t)(4096u - top - esize);
		memcpy(pg + 20, &nkeys, 2);
		memcpy(pg + 28, &frag, 2);
		uint32_t crc = paste_crc32c(0, pg + 4, sizeof(pg) - 4);
		memcpy(pg, &crc, 4);
		CHECK_EQ(pwrite(fd, pg, sizeof(pg), at), (ssize_t)sizeof(pg));
		expect_refused(-EBADMSG, "a node below the fill bound");
		CHECK_EQ(pwrite(fd, orig, sizeof(orig), at), (ssize_t)sizeof(orig));
		close(fd);
	}
	CHECK_EQ(tenv_open(&E), true);
	tenv_close(&E);
	/* A node area copied from another store: its meta names another
	 * uuid, so it is not this store's tree. */
	struct paste_store_geom g1;
	CHECK_EQ(tenv_open(&E), true);
	g1 = *paste_store_geom(E.st);
	tenv_close(&E);
	char first[sizeof(path)];
	memcpy(first, path, sizeof(path));
	snprintf(path, sizeof(path), "%s/damage-other.store", dir);
	unlink(path);
	CHECK_EQ(tenv_open(&E), true);   /* same geometry, another uuid */
	tenv_close(&E);
	int from = open(first, O_RDONLY), to = open(path, O_RDWR);
	uint8_t *buf = malloc(g1.node_size);
	CHECK_EQ(pread(from, buf, g1.node_size, (off_t)g1.node_offset), (ssize_t)g1.node_size);
	CHECK_EQ(pwrite(to, buf, g1.node_size, (off_t)g1.node_offset), (ssize_t)g1.node_size);
	free(buf);
	close(from);
	close(to);
	expect_refused(-EBADMSG, "both B+tree meta slots are damaged");
	unlink(path);
	memcpy(path, first, sizeof(path));
	free(E.pool);
	E.pool = NULL;
	unlink(path);

	/* No node area: refused with a message that says why. */
	snprintf(path, sizeof(path), "%s/nonodes.store", dir);
	unlink(path);
	struct paste_store *st = NULL;
	struct paste_wal *w = NULL;
	struct paste_btree *t = NULL;
	struct paste_store_config nc = { .size = 8u << 20, .node_size = PASTE_STORE_NO_NODES };
	struct paste_error err = { 0 };
	CHECK_EQ(paste_store_open(&st, path, &nc, PASTE_STORE_CREATE, &err), 0);
	CHECK_EQ(paste_store_geom(st)->node_size, 0);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	CHECK_EQ(paste_btree_open(&t, st, w, NULL, NULL, &err), -ENODEV);
	CHECK(strstr(err.msg, "no node area") != NULL);
	paste_wal_close(w);
	paste_store_close(st);
	unlink(path);
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* 1 M keys (16 bytes, one extent each), a checkpoint, a tail of 20 000
 * records, reopened: how long recovery takes. */
static void test_recovery_time(void)
{
	const char *env = getenv("PASTE_BTREE_RECOVERY_KEYS");
	uint32_t n = env ? (uint32_t)strtoul(env, NULL, 10) : 1000000;
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 320u << 20, .buf_size = 2048, .log_lanes = 2,
					      .log_size = 64u << 20, .node_size = 192u << 20 };
	E.tcfg = (struct paste_btree_config){ .ckpt_records = 200000 };
	E.mode = PASTE_DUR_NONE;
	E.npool = 1024;
	if (!tenv_start(&E, "million"))
		return;
	char k[32];
	uint32_t bad = 0;
	uint64_t t0 = (uint64_t)clock();
	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = (uint32_t)((uint64_t)i * 2654435761u % n);
		snprintf(k, sizeof(k), "k%015u", x);
		struct paste_extent v = { E.pool[x % E.npool], (x * 8) % 2040, 8 };
		bad += paste_btree_set(E.t, k, 16, &v, 1, NULL) != 0;
		if (i % 1024 == 0)
			bad += paste_btree_maintain(E.t) < 0;
	}
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	for (uint32_t i = 0; i < 20000 && n; i++) {
		snprintf(k, sizeof(k), "k%015u", i * 37u % n);
		struct paste_extent v = { E.pool[i % E.npool], 0, 16 };
		bad += paste_btree_set(E.t, k, 16, &v, 1, NULL) != 0;
	}
	double build_s = (double)((uint64_t)clock() - t0) / CLOCKS_PER_SEC;
	CHECK_EQ(bad, 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	uint32_t pages = in.pages_used, height = in.height;
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.keys, n);
	CHECK_EQ(in.replayed, n ? 20000 : 0);
	printf("recovery of %u keys (%u pages, height %u): %.1f ms (walk %.1f ms, replay of %llu "
	       "records and the point index %.1f ms); building took %.1f s of CPU\n", n, pages, height, ms(in.recovery_ns),
	       ms(in.walk_ns), (unsigned long long)in.replayed, ms(in.recovery_ns - in.walk_ns), build_s);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	CHECK_EQ(tenv_reopen(&E), true);
	paste_btree_info(E.t, &in);
	printf("recovery of %u keys from a checkpoint alone: %.1f ms\n", n, ms(in.recovery_ns));
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

int main(void)
{
	make_dir("btree-recover");
	test_checkpoint_and_replay();
	test_damage();
	test_recovery_time();
	rmdir(dir);
	return check_done();
}
