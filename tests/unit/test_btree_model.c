/* test_btree_model.c - random operations on the B+tree checked against an
 * in-memory model, over millions of steps: set (overwrites, values of
 * 0..63 extents), del, get, range scans, a rare clear, in phases that grow
 * and shrink the tree (splits and merges), with checkpoints every few
 * thousand records, and now and then a full comparison, paste_btree_check,
 * the reference audit, and a reopen without a checkpoint (the log tail
 * replayed). Two rounds: 3000 keys in a node area kept nearly full (page
 * reuse under pressure; PASTE_BTREE_STEPS steps, default 2000000), then
 * 40000 keys in a tree of height 3-4 (merges and borrowing at inner
 * levels; half as many steps). */
#include "btree_fixture.h"

#define MAXKEYS 40000u

struct mval {
	bool present;
	uint32_t n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
};

static struct tenv E;
static uint32_t NKEYS;
static uint8_t *keys[MAXKEYS];
static uint32_t klens[MAXKEYS];
static struct mval model[MAXKEYS];
static uint64_t seed = 0x5eed;
static uint64_t live;

struct rawkey {
	uint8_t *k;
	uint32_t len;
};

static int key_sort(const void *a, const void *b)
{
	const struct rawkey *x = a, *y = b;
	return paste_btree_keycmp(x->k, x->len, y->k, y->len);
}

/* NKEYS distinct keys in sorted order: mostly short, some up to 512, and
 * every seventh with a long run of one byte (shared prefixes). */
static void make_keys(void)
{
	static struct rawkey raw[MAXKEYS * 2];
	uint32_t u = 0;
	for (uint32_t i = 0; i < NKEYS * 2; i++) {
		uint64_t r = rnd(&seed) % 100;
		uint32_t len = r < 60 ? 1 + (uint32_t)(rnd(&seed) % 16) : r < 90 ? 17 + (uint32_t)(rnd(&seed) % 48)
			     : 65 + (uint32_t)(rnd(&seed) % (PASTE_BTREE_MAX_KEY - 64));
		raw[i].k = malloc(len);
		raw[i].len = len;
		for (uint32_t j = 0; j < len; j++)
			raw[i].k[j] = (uint8_t)(i % 7 == 0 && j + 1 < len ? 'p' : rnd(&seed) % 64 + 32);
	}
	qsort(raw, NKEYS * 2, sizeof(raw[0]), key_sort);
	for (uint32_t i = 0; i < NKEYS * 2; i++)
		if (!u || key_sort(&raw[u - 1], &raw[i]) != 0)
			raw[u++] = raw[i];
		else
			free(raw[i].k);
	CHECK(u >= NKEYS);
	for (uint32_t i = 0; i < NKEYS; i++) {
		uint32_t r = (uint32_t)((uint64_t)i * u / NKEYS);
		keys[i] = raw[r].k;
		klens[i] = raw[r].len;
		raw[r].k = NULL;
	}
	for (uint32_t i = 0; i < u; i++)
		free(raw[i].k);
}

static void random_value(struct mval *v)
{
	uint32_t bs = paste_store_geom(E.st)->buf_size;
	uint64_t r = rnd(&seed) % 100;
	v->n = r < 5 ? 0 : r < 99 ? 1 + (uint32_t)(rnd(&seed) % 3) : (uint32_t)(rnd(&seed) % PASTE_BTREE_MAX_EXTENTS) + 1;
	v->len = 0;
	for (uint32_t i = 0; i < v->n; i++) {
		uint32_t off = (uint32_t)(rnd(&seed) % bs);
		uint32_t len = (uint32_t)(rnd(&seed) % (bs - off + 1));
		v->ext[i] = (struct paste_extent){ E.pool[rnd(&seed) % E.npool], off, len };
		v->len += len;
	}
}

static bool same_value(const struct mval *m, const struct paste_extent *ext, uint32_t n, uint32_t len)
{
	return m->n == n && m->len == len && memcmp(m->ext, ext, sizeof(*ext) * n) == 0;
}

/* The whole tree against the model, in order. */
static uint32_t compare_all(void)
{
	struct paste_btree_cursor c;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	const uint8_t *key;
	uint32_t klen, n, len, k = 0, bad = 0;
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	while (paste_btree_cursor_next(&c, &key, &klen, ext, &n, &len) == 1) {
		while (k < NKEYS && !model[k].present)
			k++;
		if (k == NKEYS || klen != klens[k] || memcmp(key, keys[k], klen) != 0 ||
		    !same_value(&model[k], ext, n, len)) {
			bad++;
			break;
		}
		k++;
	}
	while (k < NKEYS && !model[k].present)
		k++;
	bad += k != NKEYS;
	bad += paste_btree_count(E.t) != live;
	return bad;
}

static uint32_t scan_from(uint32_t from, uint32_t max)
{
	struct paste_btree_cursor c;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	const uint8_t *key;
	uint32_t klen, n, len, k = from, bad = 0;
	paste_btree_cursor_init(&c, E.t, keys[from], klens[from]);
	for (uint32_t i = 0; i < max; i++) {
		while (k < NKEYS && !model[k].present)
			k++;
		int r = paste_btree_cursor_next(&c, &key, &klen, ext, &n, &len);
		if (k == NKEYS)
			return bad + (r != 0);
		if (r != 1 || klen != klens[k] || memcmp(key, keys[k], klen) || !same_value(&model[k], ext, n, len))
			return bad + 1;
		k++;
	}
	return bad;
}

static void full_check(const char *when, uint64_t step)
{
	uint32_t bad = compare_all();
	int chk = tree_check(E.t);
	CHECK(paste_btree_maintain(E.t) >= 0);
	uint32_t refs = audit_refs(&E);
	if (bad || chk || refs)
		fprintf(stderr, "  %s at step %llu: compare %u, check %d, refs %u\n", when,
			(unsigned long long)step, bad, chk, refs);
	CHECK_EQ(bad, 0);
	CHECK_EQ(chk, 0);
	CHECK_EQ(refs, 0);
}

static void run_round(uint32_t nkeys, uint64_t steps, uint64_t node_size)
{
	NKEYS = nkeys;
	live = 0;
	memset(model, 0, sizeof(model));
	make_keys();
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 32u << 20, .buf_size = 1024, .log_lanes = 2,
					      .node_size = node_size };
	E.tcfg = (struct paste_btree_config){ .lane = 1, .ckpt_records = 4000 };
	E.mode = PASTE_DUR_NONE;
	E.npool = 256;
	if (!tenv_start(&E, "model"))
		return;
	uint64_t counts[6] = { 0 }, mismatches = 0, errors = 0, ops_bad = 0, ckpts = 0, last_ckpts = 0;
	uint32_t peak = 0;
	for (uint64_t s = 0; s < steps; s++) {
		bool grow = (s / 150000) % 2 == 0;
		uint64_t r = rnd(&seed) % 1000;
		uint32_t k = (uint32_t)(rnd(&seed) % NKEYS);
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, len;
		if (r < (grow ? 450u : 150u)) {
			struct mval v;
			random_value(&v);
			int rc = paste_btree_set(E.t, keys[k], klens[k], v.ext, v.n, NULL);
			if (rc == 0) {
				live += !model[k].present;
				model[k] = v;
				model[k].present = true;
			} else {
				errors++;
			}
			counts[0]++;
		} else if (r < 700) {
			int rc = paste_btree_del(E.t, keys[k], klens[k], NULL);
			ops_bad += rc != (model[k].present ? 0 : -ENOENT);
			if (rc == 0) {
				model[k].present = false;
				live--;
			}
			counts[1]++;
		} else if (r < 980) {
			int rc = paste_btree_get(E.t, keys[k], klens[k], ext, &n, &len);
			if (model[k].present)
				mismatches += rc != 0 || !same_value(&model[k], ext, n, len);
			else
				mismatches += rc != -ENOENT;
			counts[2]++;
		} else if (r < 999) {
			mismatches += scan_from(k, 1 + (uint32_t)(rnd(&seed) % 40));
			counts[3]++;
		} else if (rnd(&seed) % 500 == 0) {
			CHECK_EQ(paste_btree_clear(E.t, NULL), 0);
			for (uint32_t i = 0; i < NKEYS; i++)
				model[i].present = false;
			live = 0;
			counts[4]++;
		}
		if (s % 64 == 63) {
			errors += paste_btree_maintain(E.t) < 0;
			struct paste_btree_info in;
			paste_btree_info(E.t, &in);
			if (in.pages_total - in.pages_free > peak)
				peak = in.pages_total - in.pages_free;
			if (in.checkpoints < last_ckpts)
				ckpts += last_ckpts;   /* reopened */
			last_ckpts = in.checkpoints;
		}
		if (s % 100000 == 99999)
			full_check("check", s);
		if (s % 400000 == 399999) {
			counts[5]++;
			if (!tenv_reopen(&E))
				break;
			full_check("reopen", s);
		}
	}
	CHECK_EQ(mismatches, 0);
	CHECK_EQ(errors, 0);
	CHECK_EQ(ops_bad, 0);
	full_check("end", steps);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	printf("%llu steps: %llu sets, %llu dels, %llu gets, %llu scans, %llu clears, %llu reopens, "
	       "%llu checkpoints; at the end %llu keys, height %u, %u of %u pages (peak %u in use "
	       "or pending)\n",
	       (unsigned long long)steps, (unsigned long long)counts[0], (unsigned long long)counts[1],
	       (unsigned long long)counts[2], (unsigned long long)counts[3], (unsigned long long)counts[4],
	       (unsigned long long)counts[5], (unsigned long long)(ckpts + in.checkpoints),
	       (unsigned long long)in.keys, in.height, in.pages_used, in.pages_total, peak);
	tenv_finish(&E);
	for (uint32_t i = 0; i < NKEYS; i++)
		free(keys[i]);
}

int main(void)
{
	const char *env = getenv("PASTE_BTREE_STEPS");
	uint64_t steps = env ? strtoull(env, NULL, 10) : 2000000;
	make_dir("btree-model");
	run_round(3000, steps, 512u << 10);
	run_round(MAXKEYS, steps / 2, 16u << 20);
	rmdir(dir);
	return check_done();
}
