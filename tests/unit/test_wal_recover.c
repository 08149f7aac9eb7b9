/* test_wal_recover.c - log recovery (lib/wal_recover.c): torn tails (a
 * torn batch too) cut, damage (records past the stop that were durable, by
 * their durable marks or the checkpoint's claim; both checkpoint slots
 * lost) refused with nothing written, epochs that keep old records out,
 * LSNs at their limit or repeated across lanes, read-only opens that write
 * nothing, and a torn tail that must stay dead once its buffers are
 * reused. */
#include "wal_fixture.h"

/* A new store with five one-extent records in lane 0 at offsets 0, 64, ...,
 * 256, closed (ready for damage). */
static bool five_records(struct env *e, const char *name, uint64_t *lsn, uint32_t *bufs)
{
	if (!start(e, name))
		return false;
	for (unsigned i = 0; i < 5; i++)
		lsn[i] = put(e, 0, 1, &bufs[i]);
	env_close(e);
	return true;
}

static void test_torn_tail(void)
{
	/* Torn data of the last record. */
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "torn", lsn, bufs))
		return;
	flip(buf_off(bufs[4], 5));
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 0: torn record at offset 256 (data crc mismatch), "
		     "4 valid records before it") != NULL);
	struct paste_wal_info info = info_of(e.w);
	CHECK_EQ(info.records, 4);
	CHECK_EQ(info.last_lsn, lsn[3]);
	CHECK_EQ(paste_store_refcount(e.st, bufs[4]), 0);
	CHECK_EQ(paste_store_refcount(e.st, bufs[3]), 1);
	CHECK_EQ(paste_wal_check(e.w, &e.err), 0);   /* a torn tail is not damage */
	/* The next record takes the torn one's place. */
	uint64_t l = put(&e, 0, 1, NULL);
	CHECK(l > lsn[3]);
	if (!env_reopen(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	info = info_of(e.w);
	CHECK_EQ(info.records, 5);
	CHECK_EQ(info.last_lsn, l);
	finish(&e);

	/* Torn header of the last record. */
	if (!five_records(&e, "torn-hdr", lsn, bufs))
		return;
	flip(lane_off(0, 256 + 24));   /* its len field */
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "torn record at offset 256 (header crc mismatch)") != NULL);
	CHECK_EQ(records(e.w), 4);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	finish(&e);
}

/* A record in the middle damaged, with records of later batches behind
 * it: they were acknowledged, so the writable open refuses (-EBADMSG,
 * naming the lane, the offset and the LSNs at stake) and writes nothing; a
 * read-only open keeps what lies before the damage and says so. */
static void test_middle_damage(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "middle", lsn, bufs))
		return;
	flip(buf_off(bufs[2], 7));   /* record 2's data */
	char want[200];
	snprintf(want, sizeof(want), "log lane 0: damaged record at offset 128 (data crc mismatch) "
		 "after lsn %llu; 2 valid records follow it (lsn %llu..%llu), written after it was "
		 "durable", (unsigned long long)lsn[1], (unsigned long long)lsn[3],
		 (unsigned long long)lsn[4]);
	expect_refused(-EBADMSG, want);
	expect_refused(-EBADMSG, "refused, nothing written");

	struct paste_store *st;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	CHECK(strstr(err.msg, "lane 0: damaged record at offset 128 (data crc mismatch)") != NULL);
	CHECK_EQ(records(w), 2);
	CHECK_EQ(paste_wal_check(w, &err), 1);
	CHECK(strstr(err.msg, "damaged record at offset 128") != NULL);
	paste_wal_close(w);
	paste_store_close(st);
	unlink(path);

	/* A damaged header is damage too when what follows was durable. */
	if (!five_records(&e, "middle-hdr", lsn, bufs))
		return;
	flip(lane_off(0, 128 + 8));   /* record 2's LSN */
	expect_refused(-EBADMSG, "damaged record at offset 128 (header crc mismatch)");
	unlink(path);
}

/* A crash in the middle of a batch: any of its lines may have reached the
 * medium and any not, so a torn record may have whole records of its own
 * batch behind it. Their durable marks say nothing past the last fenced
 * record was durable: a torn tail, cut, and the open goes on. */
static void test_torn_batch(void)
{
	struct env e;
	if (!start(&e, "batch"))
		return;
	uint32_t b[5];
	uint64_t a = put(&e, 0, 1, &b[0]);           /* fenced: durable */
	put_open_batch(&e, 0, 1, &b[1]);               /* one batch, never fenced ... */
	put_open_batch(&e, 0, 1, &b[2]);
	uint64_t last = put_open_batch(&e, 0, 2, &b[3]);
	env_close(&e);
	flip(buf_off(b[1], 9));                      /* ... and its first record torn */
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 0: torn record at offset 64 (data crc mismatch), 1 valid "
		     "records before it (the rest of its batch never became durable)") != NULL);
	CHECK_EQ(records(e.w), 1);
	CHECK_EQ(info_of(e.w).last_lsn, a);
	CHECK_EQ(paste_wal_lookup(e.w, last, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	/* Sealed: the batch's remains stay behind a clean end. */
	CHECK(env_reopen(&e));
	CHECK_EQ(e.err.msg[0], 0);
	CHECK_EQ(records(e.w), 1);
	finish(&e);
}

/* The last record damaged, nothing behind it: as a torn tail it is cut,
 * unless the checkpoint says it was durable. A writable open claims every
 * record it recovered durable in the lane's checkpoint (they were read back
 * from the store), so once the store has been opened again, the same
 * damage is refused. */
static void test_checkpoint_claim(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "claim", lsn, bufs))
		return;
	CHECK(env_open(&e));    /* recovers all five and claims them durable */
	env_close(&e);
	flip(buf_off(bufs[4], 3));
	char want[160];
	snprintf(want, sizeof(want), "log lane 0: damaged record at offset 256 (data crc mismatch) "
		 "after lsn %llu; 0 valid records follow it", (unsigned long long)lsn[3]);
	expect_refused(-EBADMSG, want);
	expect_refused(-EBADMSG, "the log's checkpoint says a record past it was durable");
	unlink(path);
}

/* check re-reads the data: a logged buffer changed behind the log's back. */
static void test_check_rereads_data(void)
{
	struct env e;
	if (!start(&e, "reread"))
		return;
	uint32_t b[3];
	uint64_t l0 = put(&e, 0, 1, &b[0]);
	put(&e, 1, 2, &b[1]);
	(void)l0;
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	paste_store_buf(e.st, b[2])[3 + 5] ^= 1;   /* second extent of the second record */
	struct paste_error err = { 0 };
	CHECK_EQ(paste_wal_check(e.w, &err), 1);
	CHECK(strstr(err.msg, "lane 1: record lsn") != NULL);
	CHECK(strstr(err.msg, "data crc mismatch") != NULL);
	finish(&e);
}

/* A crash left a torn record B with a valid C of the same batch behind
 * it. New records overwrite B and end exactly where C starts; C's LSN is
 * above theirs (LSNs restart above the highest recovered one), so only its
 * lower epoch keeps it from being taken as their successor. */
static void test_epoch_blocks_old_records(void)
{
	struct env e;
	if (!start(&e, "epoch"))
		return;
	uint32_t ba, bb[3], bp, bq, bc;
	uint64_t a = put(&e, 0, 1, &ba);               /* lane 0 @0, fenced */
	put_open_batch(&e, 0, 3, bb);                    /* lane 0 @64, 128 bytes */
	put_open_batch(&e, 1, 1, &bp);                   /* lane 1 @0: will be torn */
	uint64_t q = put_open_batch(&e, 1, 1, &bq);      /* lane 1 @64: lost behind it */
	uint64_t c = put_open_batch(&e, 0, 1, &bc);      /* lane 0 @192 */
	env_close(&e);                                 /* the batch never fenced */
	flip(buf_off(bb[1], 10));
	flip(buf_off(bp, 10));
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 0: torn record at offset 64 (data crc mismatch), 1 valid "
		     "records before it (the rest of its batch never became durable)") != NULL);
	CHECK(strstr(e.err.msg, "lane 1: torn record at offset 0 (data crc mismatch), 0 valid "
		     "records before it (the rest of its batch never became durable)") != NULL);
	struct paste_wal_info info = info_of(e.w);
	CHECK_EQ(info.records, 1);
	CHECK_EQ(info.epoch, 2);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	CHECK_EQ(paste_wal_lookup(e.w, q, NULL, NULL, NULL), -ENOENT);
	uint64_t d = put(&e, 0, 1, NULL);    /* @64 */
	uint64_t f = put(&e, 0, 1, NULL);    /* @128: the next offset is C's */
	CHECK(d == a + 1 && f == a + 2 && c > f);
	if (!env_reopen(&e))
		return;
	info = info_of(e.w);
	CHECK_EQ(info.records, 3);
	CHECK_EQ(info.last_lsn, f);
	CHECK_EQ(paste_wal_lookup(e.w, c, NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_store_refcount(e.st, bc), 0);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);   /* the old records are just stale now */
	CHECK_EQ(e.err.msg[0], 0);
	finish(&e);
}

/* Both checkpoint slots lost while the lane holds records: one write
 * tears only one, so this is damage. A writable open refuses and writes
 * nothing; a read-only one keeps nothing of the lane and says so. */
static void test_lost_checkpoint(void)
{
	struct env e;
	if (!start(&e, "ckpt"))
		return;
	uint32_t b[3];
	for (unsigned i = 0; i < 3; i++)
		put(&e, 2, 1, &b[i]);
	env_close(&e);
	uint8_t zero[128] = { 0 };
	poke(geom.ckpt_offset + 2 * 128, zero, sizeof(zero));
	expect_refused(-EBADMSG, "log lane 2: both checkpoint slots are damaged and the lane holds "
		       "records");
	struct paste_store *st;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	CHECK(strstr(err.msg, "lane 2: both checkpoint slots are invalid") != NULL);
	CHECK_EQ(records(w), 0);
	CHECK_EQ(paste_store_refcount(st, b[0]), 0);
	CHECK_EQ(paste_wal_check(w, NULL), 1);
	paste_wal_close(w);
	paste_store_close(st);
	unlink(path);

	/* The newest slot torn (a crash while the second open wrote it): the
	 * older one serves. The epoch is one above the newest of all lanes. */
	if (!start(&e, "ckpt1"))
		return;
	for (unsigned i = 0; i < 3; i++)
		put(&e, 2, 1, &b[i]);
	env_close(&e);
	if (!env_open(&e))   /* epoch 2 goes to slot 1 */
		return;
	env_close(&e);
	flip(geom.ckpt_offset + 2 * 128 + 64 + 20);
	if (!env_open(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	CHECK_EQ(records(e.w), 3);
	CHECK_EQ(info_of(e.w).epoch, 3);
	finish(&e);
}

static void test_read_only(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "rdonly", lsn, bufs))
		return;
	flip(buf_off(bufs[4], 0));   /* a torn tail to report */
	size_t n0;
	uint8_t *before = slurp(&n0);

	struct paste_store *st;
	struct paste_wal *w;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	CHECK(strstr(err.msg, "torn record at offset 256") != NULL);
	CHECK_EQ(records(w), 4);
	CHECK_EQ(info_of(w).epoch, 1);   /* not advanced: nothing written */
	CHECK_EQ(paste_store_nheld(st), 4);
	CHECK_EQ(paste_wal_check(w, &err), 0);
	struct seen s = { .st = st };
	CHECK_EQ(paste_wal_foreach(w, collect, &s), 0);
	CHECK_EQ(s.n, 4);
	CHECK_EQ(paste_wal_lookup(w, lsn[2], NULL, NULL, NULL), 0);
	struct paste_extent ext = { bufs[0], 0, 1 };
	uint64_t l;
	CHECK_EQ(paste_wal_append(w, 0, NULL, &ext, 1, &l), -EROFS);
	CHECK_EQ(paste_wal_truncate(w, lsn[4], NULL), -EROFS);
	/* A persist object cannot make a read-only mapping writable. */
	struct paste_persist *p = NULL;
	struct paste_wal *w2 = NULL;
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	if (paste_persist_open(&p, st, &pc, NULL) == 0) {
		CHECK_EQ(paste_wal_open(&w2, st, p, &err), -EROFS);
		CHECK(w2 == NULL);
		paste_persist_close(p);
	}
	paste_wal_close(w);
	paste_store_close(st);
	CHECK(unchanged(before, n0));
	unlink(path);
}

/* A record whose checksums hold but whose LSN is 2^64-1: damage, cut
 * (nothing durable lies past it), and the next LSN is not pushed to the
 * limit. */
static void test_lsn_at_limit(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	if (!five_records(&e, "lsnmax", lsn, bufs))
		return;
	forge_lsn(0, 256, UINT64_MAX);
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "record at offset 256 (impossible type or lsn)") != NULL);
	CHECK_EQ(records(e.w), 4);
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
	CHECK(put(&e, 0, 1, NULL) > lsn[3]);
	finish(&e);

	/* In the middle, with durable records behind it: refused. */
	if (!five_records(&e, "lsnmax2", lsn, bufs))
		return;
	forge_lsn(0, 64, UINT64_MAX);
	expect_refused(-EBADMSG, "damaged record at offset 64 (impossible type or lsn) after lsn");
	unlink(path);
}

/* Two lanes holding one LSN cannot come from the writer (one counter), but
 * a forged record with valid checksums can say so: the later lane ends at
 * it, as at any corrupt record, and every LSN names one record. */
static void test_duplicate_lsn_across_lanes(void)
{
	struct env e;
	if (!start(&e, "duplsn"))
		return;
	uint64_t lsn[6];
	uint32_t lanes[6] = { 0, 1, 0, 1, 0, 1 };
	for (int i = 0; i < 6; i++)
		lsn[i] = put(&e, lanes[i], 1, NULL);
	env_close(&e);
	forge_lsn(1, 128, lsn[4]);   /* lane 1's last record takes lane 0's last LSN */
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 1: corrupt record at offset 128 (lsn already used by a "
		     "record in another lane), 2 valid records before it") != NULL);
	CHECK_EQ(records(e.w), 5);
	CHECK_EQ(paste_store_nheld(e.st), 5);     /* the cut record's buffer is free */
	struct seen s = { .st = e.st };
	paste_wal_foreach(e.w, collect, &s);
	CHECK_EQ(s.n, 5);
	for (int i = 0; i < 5; i++)
		CHECK(s.lsn[i] == lsn[i] && s.lane[i] == lanes[i]);
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
	CHECK(put(&e, 1, 1, NULL) > lsn[4]);     /* lane 1 goes on where it stopped */
	CHECK(env_reopen(&e));
	CHECK_EQ(records(e.w), 6);
	finish(&e);
}

/* Take buffer `want` from the free list (the store hands out buffers in
 * its own order: the others go back). */
static void grab(struct env *e, uint32_t want)
{
	uint32_t *got = malloc(sizeof(*got) * geom.nbufs), n = 0;
	while (got && n < geom.nbufs && paste_store_alloc(e->st, &got[n], 1) == 1 && got[n] != want)
		n++;
	CHECK(got && n < geom.nbufs && got[n] == want);
	for (uint32_t i = 0; got && i < n; i++)
		paste_store_unref(e->st, got[i], false);
	free(got);
}

/* A crash tore record R (lane 0 @64, LSN r: its data never became
 * durable, so it was never acknowledged). The next run re-issues LSN r,
 * and a client retrying its POST puts the very same bytes into R's old
 * buffer, logged in lane 1 and acknowledged, followed by LSN r + 1.
 * Leaves the store closed; *r and *br say which LSN and buffer. */
static bool revenant(struct env *e, const char *name, uint64_t *r, uint32_t *br)
{
	if (!start(e, name))
		return false;
	put(e, 0, 1, NULL);
	*r = put(e, 0, 1, br);
	env_close(e);
	flip(buf_off(*br, 5));
	if (!env_open(e))
		return false;
	CHECK(strstr(e->err.msg, "lane 0: torn record at offset 64 (data crc mismatch)") != NULL);
	CHECK_EQ(records(e->w), 1);
	grab(e, *br);
	fill(e->st, *br, *br);                 /* the same bytes land there again */
	struct paste_extent ext = { *br, 0, 100 };
	uint64_t lsn = 0;
	CHECK_EQ(paste_wal_append(e->w, 1, e->p, &ext, 1, &lsn), 0);
	CHECK_EQ(lsn, *r);                     /* the LSN is handed out again */
	CHECK_EQ(paste_persist_fence(e->p), 0);
	paste_store_unref(e->st, *br, false);
	CHECK_EQ(put(e, 1, 1, NULL), *r + 1);
	env_close(e);
	return true;
}

/* The writable open sealed R's stop (zeroed its magic), so R cannot come
 * back and push the acknowledged LSN r (and r + 1 behind it) out of lane 1. */
static void test_torn_tail_stays_dead(void)
{
	struct env e;
	uint64_t r;
	uint32_t br;
	if (!revenant(&e, "deadtail", &r, &br) || !env_open(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);                 /* a clean end now */
	CHECK_EQ(records(e.w), 3);
	struct seen s = { .st = e.st };
	paste_wal_foreach(e.w, collect, &s);
	CHECK(s.n == 3 && s.lsn[1] == r && s.lane[1] == 1 && s.lsn[2] == r + 1);
	CHECK_EQ(paste_store_refcount(e.st, br), 1);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	finish(&e);
}

/* A store where R's stop was not sealed (an older writer): R revives, and
 * LSN r is in two lanes. The copy with the older epoch (R, run 1) goes,
 * not the later lane's (run 2, acknowledged). */
static void test_dedup_keeps_newer_epoch(void)
{
	struct env e;
	uint64_t r;
	uint32_t br, magic = 0x4c415750u;
	if (!revenant(&e, "newer", &r, &br))
		return;
	poke(lane_off(0, 64), &magic, 4);
	if (!env_open(&e))
		return;
	CHECK(strstr(e.err.msg, "lane 0: corrupt record at offset 64 (lsn already used by a "
		     "record in another lane), 1 valid records before it") != NULL);
	CHECK_EQ(records(e.w), 3);
	struct seen s = { .st = e.st };
	paste_wal_foreach(e.w, collect, &s);
	CHECK(s.n == 3 && s.lsn[1] == r && s.lane[1] == 1 && s.lsn[2] == r + 1);
	CHECK_EQ(paste_store_refcount(e.st, br), 1);   /* lane 1's reference only */
	CHECK_EQ(paste_wal_check(e.w, NULL), 1);
	finish(&e);
}

struct said {
	char msg[4096];
};

static void say_line(void *arg, const char *line)
{
	struct said *out = arg;
	size_t n = strlen(out->msg);
	snprintf(out->msg + n, sizeof(out->msg) - n, "%s\n", line);
}

/* Salvage the store at path: 0 lanes when clean, else what it rebuilt;
 * the report in *said, a line each. */
static int salvage(struct said *said)
{
	struct paste_store *st = NULL;
	struct paste_persist *p = NULL;
	struct paste_error err = { 0 };
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	memset(said, 0, sizeof(*said));
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), 0);
	CHECK_EQ(paste_persist_open(&p, st, &pc, &err), 0);
	int rc = paste_wal_salvage(st, p, say_line, said, &err);
	CHECK_EQ(paste_store_nheld(st), 0);   /* references as before */
	paste_persist_close(p);
	paste_store_close(st);
	return rc;
}

/* Salvage keeps the records on both sides of the damage, says which LSN
 * was lost, and leaves a store that opens writable and checks clean. */
static void test_salvage(void)
{
	struct env e;
	uint64_t lsn[5];
	uint32_t bufs[5];
	struct said said;
	if (!five_records(&e, "salvage", lsn, bufs))
		return;
	CHECK_EQ(salvage(&said), 0);                 /* nothing damaged: nothing done */
	CHECK_EQ(said.msg[0], 0);
	flip(buf_off(bufs[1], 7));
	CHECK_EQ(salvage(&said), 1);
	char want[200];
	snprintf(want, sizeof(want), "log lane 0: bytes 64..128 skipped (data crc mismatch): the "
		 "records with LSNs between %llu and %llu are lost (those whose header survived: lsn %llu)",
		 (unsigned long long)lsn[0], (unsigned long long)lsn[2], (unsigned long long)lsn[1]);
	CHECK(strstr(said.msg, want) != NULL);
	snprintf(want, sizeof(want), "log lane 0: kept 4 records (lsn %llu..%llu): 1 before the "
		 "damage, 3 past it", (unsigned long long)lsn[0], (unsigned long long)lsn[4]);
	CHECK(strstr(said.msg, want) != NULL);
	if (!env_open(&e))
		return;
	CHECK_EQ(e.err.msg[0], 0);
	CHECK_EQ(records(e.w), 4);
	CHECK_EQ(paste_wal_lookup(e.w, lsn[1], NULL, NULL, NULL), -ENOENT);
	CHECK_EQ(paste_wal_lookup(e.w, lsn[4], NULL, NULL, NULL), 0);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	CHECK_EQ(paste_store_nheld(e.st), 4);
	uint64_t l = put(&e, 0, 1, NULL);
	CHECK(l > lsn[4]);
	CHECK(env_reopen(&e));
	CHECK_EQ(records(e.w), 5);
	CHECK_EQ(e.err.msg[0], 0);
	finish(&e);

	/* Two damaged records: both gaps skipped, everything else kept. */
	if (!five_records(&e, "salvage2", lsn, bufs))
		return;
	flip(buf_off(bufs[1], 7));
	flip(lane_off(0, 192 + 8));   /* record 3's header */
	CHECK_EQ(salvage(&said), 1);
	CHECK(strstr(said.msg, "kept 3 records") != NULL);
	CHECK(strstr(said.msg, "bytes 192..256 skipped (header crc mismatch)") != NULL);
	if (!env_open(&e))
		return;
	CHECK_EQ(records(e.w), 3);
	finish(&e);

	/* Both checkpoint slots lost: the lane read from its start. */
	if (!start(&e, "salvage3"))
		return;
	for (unsigned i = 0; i < 3; i++)
		put(&e, 2, 1, NULL);
	env_close(&e);
	uint8_t zero[128] = { 0 };
	poke(geom.ckpt_offset + 2 * 128, zero, sizeof(zero));
	CHECK_EQ(salvage(&said), 1);
	CHECK(strstr(said.msg, "kept 3 records") != NULL);
	if (!env_open(&e))
		return;
	CHECK_EQ(records(e.w), 3);
	CHECK_EQ(paste_wal_check(e.w, NULL), 0);
	finish(&e);

	/* A torn batch is no damage: salvage leaves it to the next open. */
	if (!start(&e, "salvage4"))
		return;
	put(&e, 0, 1, NULL);
	uint32_t b;
	put_open_batch(&e, 0, 1, &b);
	put_open_batch(&e, 0, 1, NULL);
	env_close(&e);
	flip(buf_off(b, 3));
	CHECK_EQ(salvage(&said), 0);
	if (!env_open(&e))
		return;
	CHECK_EQ(records(e.w), 1);
	finish(&e);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/paste-walrec-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_torn_tail();
	test_middle_damage();
	test_torn_batch();
	test_checkpoint_claim();
	test_check_rereads_data();
	test_epoch_blocks_old_records();
	test_lost_checkpoint();
	test_read_only();
	test_lsn_at_limit();
	test_duplicate_lsn_across_lanes();
	test_torn_tail_stays_dead();
	test_dedup_keeps_newer_epoch();
	test_salvage();
	rmdir(dir);
	return check_done();
}
