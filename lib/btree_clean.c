/*
 * btree_clean.c - the tree's space: live value bytes per buffer, and the
 * cleaner that empties sparsely used buffers, as a log-structured store
 * cleans its segments (LFS, RAMCloud).
 *
 * Why a cleaner: a value stays in the packet buffer it arrived in, and a
 * buffer is free only when nothing names any byte of it. Small values
 * packed together, or received densely by incremental buffer consumption,
 * share buffers; once most of their neighbours are overwritten or deleted,
 * a few long-lived values pin whole buffers. The cleaner copies those few
 * values densely into fresh buffers and re-points their keys, so the old
 * buffers can go.
 *
 * Accounting: live[b] is the bytes of tree values in buffer b, changed
 * where the tree takes or drops its references (bt_value_ref, and a
 * release when it is due), so it is exact; born[b] is when b last went
 * from empty to holding a value, in seconds.
 *
 * A cycle, in bounded steps from paste_btree_maintain (once per pass):
 *  1. When fewer than clean_free_pct % of the buffers are free, choose
 *     victims: buffers with live bytes under clean_live_pct % of their
 *     size, best first by LFS's cost-benefit (1 - u) * age / (1 + u), u
 *     the live share, until they would give back what the trigger wants
 *     (and at most an eighth of the store per cycle).
 *  2. Walk the keys in order, a few thousand per step, and move every
 *     value with a byte in a victim: its bytes copied densely into the
 *     cleaner's append buffer (the CRC32C checked as they are read: a
 *     damaged value is reported and left where it is), then an ordinary
 *     set of the same key, tag and word. The set is logged like any
 *     other, so a crash at any point keeps either the old value or the
 *     new one, both whole.
 *  3. At the end of the walk, ask for a checkpoint: the old values'
 *     references are dropped once their replacements are durable (as for
 *     any overwrite), the log records that named them at the checkpoint's
 *     truncation, and the victims go back to the free list.
 * Cost: per step at most clean_step_bytes copied and 4096 entries looked
 * at; a victim choice is one pass over live[] and a sort of the
 * candidates. Nothing runs while free buffers are plentiful.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "btree_internal.h"

#define CLEAN_KEYS_PER_STEP 4096u
#define CLEAN_FLOOR 32u          /* the cleaner takes no buffer below this many free */
/* A cycle starts only when it can give back at least this many buffers,
 * or a 256th of the store: each one walks every key. */
#define CLEAN_MIN_GAIN 16u

struct bt_clean {
	uint64_t *victim;             /* bitmap over buffers */
	uint32_t nvictims;
	bool active;                  /* a walk is under way */
	struct paste_btree_cursor cur;
	struct paste_append app;      /* where moved values go */
	uint32_t limit;               /* bytes: a buffer with fewer live ones is sparse */
	uint64_t cycles, victims, moved, moved_bytes, damaged, ns;
};

/* ---- accounting ------------------------------------------------------- */

/* Buffer b's live bytes go from old to now: keep the counts of buffers
 * holding any, and of sparse ones (a cleaner's candidates), in step. */
static void live_moved(struct paste_btree *t, uint32_t b, uint32_t old, uint32_t now)
{
	uint32_t limit = t->cl->limit;
	t->live_bufs += (now != 0) - (old != 0);
	t->sparse += (now && now < limit) - (old && old < limit);
	if (!old && now)
		t->born[b] = t->now_s;
}

void bt_value_ref(struct paste_btree *t, const struct paste_extent *ext, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = ext[i].buf;
		paste_store_ref(t->st, b);
		if (!t->live || !ext[i].len)
			continue;
		uint32_t old = t->live[b];
		t->live[b] += ext[i].len;
		t->live_total += ext[i].len;
		live_moved(t, b, old, t->live[b]);
	}
}

void bt_value_unref(struct paste_btree *t, uint32_t buf, uint32_t len)
{
	if (t->live && len) {
		uint32_t old = t->live[buf];
		t->live[buf] -= len;
		t->live_total -= len;
		live_moved(t, buf, old, t->live[buf]);
	}
	paste_store_unref(t->st, buf, false);
}

bool bt_space_short(const struct paste_btree *t)
{
	uint32_t pct = t->cfg.clean_free_pct;
	return t->p && t->recs_since &&
	       (uint64_t)paste_store_nfree(t->st) * 100 < (uint64_t)t->g->nbufs * pct;
}

/* ---- open, close, info ------------------------------------------------- */

int bt_clean_open(struct paste_btree *t)
{
	uint32_t nb = t->g->nbufs;
	t->live = calloc(nb, sizeof(uint32_t));
	t->born = calloc(nb, sizeof(uint32_t));
	t->cl = calloc(1, sizeof(*t->cl));
	if (t->cl)
		t->cl->victim = calloc((nb + 63) / 64, sizeof(uint64_t));
	if (!t->live || !t->born || !t->cl || !t->cl->victim)
		return -ENOMEM;
	t->cl->app = (struct paste_append)PASTE_APPEND_INIT;
	t->cl->limit = (uint32_t)((uint64_t)t->g->buf_size * t->cfg.clean_live_pct / 100);
	return 0;
}

void bt_clean_close(struct paste_btree *t)
{
	if (t->cl) {
		paste_append_close(t->st, &t->cl->app);
		free(t->cl->victim);
		free(t->cl);
	}
	free(t->live);
	free(t->born);
	t->cl = NULL;
	t->live = t->born = NULL;
}

void bt_clean_info(const struct paste_btree *t, struct paste_btree_info *out)
{
	out->live_bytes = t->live_total;
	out->live_bufs = t->live_bufs;
	out->space_checkpoints = t->space_checkpoints;
	out->clean_buf = t->cl ? t->cl->app.buf : PASTE_NO_BUF;
	if (!t->cl)
		return;
	out->clean_cycles = t->cl->cycles;
	out->clean_victims = t->cl->victims;
	out->clean_moved = t->cl->moved;
	out->clean_moved_bytes = t->cl->moved_bytes;
	out->clean_damaged = t->cl->damaged;
	out->clean_ns = t->cl->ns;
}

/* ---- choosing victims -------------------------------------------------- */

static bool is_victim(const struct bt_clean *c, uint32_t b)
{
	return c->victim[b >> 6] >> (b & 63) & 1;
}

struct cand {
	double score;
	uint32_t buf;
};

static int by_score(const void *a, const void *b)
{
	double x = ((const struct cand *)a)->score, y = ((const struct cand *)b)->score;
	return (x < y) - (x > y);   /* highest first */
}

/* Pick the buffers to empty; the count chosen. */
static uint32_t choose(struct paste_btree *t)
{
	struct bt_clean *c = t->cl;
	uint32_t nb = t->g->nbufs, bs = t->g->buf_size, limit = c->limit;
	memset(c->victim, 0, (nb + 63) / 64 * sizeof(uint64_t));
	c->nvictims = 0;
	uint32_t n = 0;
	for (uint32_t b = 0; b < nb; b++)
		n += t->live[b] && t->live[b] < limit && b != c->app.buf && b != t->hbuf;
	if (!n)
		return 0;
	struct cand *v = malloc(sizeof(*v) * n);
	if (!v)
		return 0;
	n = 0;
	for (uint32_t b = 0; b < nb; b++) {
		if (!t->live[b] || t->live[b] >= limit || b == c->app.buf || b == t->hbuf)
			continue;
		double u = (double)t->live[b] / bs;
		double age = (double)(t->now_s - t->born[b]) + 1.0;
		v[n++] = (struct cand){ (1.0 - u) * age / (1.0 + u), b };
	}
	qsort(v, n, sizeof(*v), by_score);
	/* Enough to bring the free buffers back over the trigger with some
	 * to spare: each victim gives back its free share. */
	uint64_t want = (uint64_t)nb * (t->cfg.clean_free_pct + 5) / 100, have = paste_store_nfree(t->st);
	double gain = 0, need = want > have ? (double)(want - have) : 1.0;
	for (uint32_t i = 0; i < n && gain < need && c->nvictims < nb / 8 + 1; i++) {
		uint32_t b = v[i].buf;
		c->victim[b >> 6] |= 1ull << (b & 63);
		c->nvictims++;
		gain += 1.0 - (double)t->live[b] / bs;
	}
	free(v);
	return c->nvictims;
}

/* ---- moving one value -------------------------------------------------- */

/* Copy len bytes of ext[0..n) densely to the append point, checking their
 * CRC32C on the way; the new extents in out[0..*on), each holding a
 * reference of ours. -ENOSPC: no buffer to copy into; -EBADMSG: the bytes
 * fail crc (nothing taken). */
static int copy_value(struct paste_btree *t, const struct paste_extent *ext, uint32_t n,
		      uint32_t len, uint32_t crc, struct paste_extent *out, uint32_t *on)
{
	uint32_t sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum = paste_crc32c(sum, paste_store_buf(t->st, ext[i].buf) + ext[i].off, ext[i].len);
	if (sum != crc)
		return -EBADMSG;
	int r = paste_append_reserve(t->st, &t->cl->app, len, CLEAN_FLOOR, out,
				     PASTE_BTREE_MAX_EXTENTS, on);
	for (uint32_t i = 0, x = 0, xoff = 0; r == 0 && i < *on; i++) {
		uint8_t *dst = paste_store_buf(t->st, out[i].buf) + out[i].off;
		for (uint32_t done = 0; done < out[i].len;) {
			uint32_t q = ext[x].len - xoff;
			if (q > out[i].len - done)
				q = out[i].len - done;
			memcpy(dst + done, paste_store_buf(t->st, ext[x].buf) + ext[x].off + xoff, q);
			done += q;
			xoff += q;
			if (xoff == ext[x].len) {
				x++;
				xoff = 0;
			}
		}
	}
	return r;
}

/* ---- a step ------------------------------------------------------------ */

static bool names_victim(const struct bt_clean *c, const struct paste_extent *ext, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (is_victim(c, ext[i].buf))
			return true;
	return false;
}

int bt_clean_step(struct paste_btree *t, bool urgent)
{
	struct bt_clean *c = t->cl;
	if (!c || !t->p || t->cfg.no_clean)
		return 0;
	uint32_t nb = t->g->nbufs;
	uint32_t pct = t->cfg.clean_free_pct ? t->cfg.clean_free_pct : 20;
	if (!c->active) {
		if ((uint64_t)paste_store_nfree(t->st) * 100 >= (uint64_t)nb * pct)
			return 0;
		uint32_t min_gain = nb / 256 > CLEAN_MIN_GAIN ? nb / 256 : CLEAN_MIN_GAIN;
		if (t->sparse < min_gain && !(urgent && t->sparse))
			return 0;
		uint64_t t0 = paste_clock_ns();
		c->cycles++;
		uint32_t v = choose(t);
		c->ns += paste_clock_ns() - t0;
		if (!v)
			return 0;
		c->victims += v;
		c->active = true;
		paste_btree_cursor_init(&c->cur, t, NULL, 0);
	}
	uint64_t t0 = paste_clock_ns();
	uint64_t budget = t->cfg.clean_step_bytes ? t->cfg.clean_step_bytes : 256u << 10;
	if (urgent)
		budget *= 4;
	uint64_t copied = 0;
	int rc = 0;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS], to[PASTE_BTREE_MAX_EXTENTS];
	const uint8_t *key;
	uint32_t klen, n, len;
	uint8_t kcopy[PASTE_BTREE_MAX_KEY];
	for (uint32_t seen = 0; seen < CLEAN_KEYS_PER_STEP && copied < budget; seen++) {
		int r = paste_btree_cursor_next(&c->cur, &key, &klen, ext, &n, &len);
		if (r <= 0) {
			c->active = false;   /* the walk is done: the checkpoint frees the victims */
			t->ckpt_wanted = true;
			break;
		}
		if (!names_victim(c, ext, n))
			continue;
		struct paste_btree_attr a = *paste_btree_cursor_attr(&c->cur);
		uint32_t tn;
		int cr = copy_value(t, ext, n, len, a.crc, to, &tn);
		if (cr == -EBADMSG) {
			if (!c->damaged++)
				fprintf(stderr, "paste: %s: the cleaner found a value (%u bytes) whose bytes "
					"fail their CRC32C; it stays where it is (paste-store check names "
					"the key)\n", paste_store_path(t->st), len);
			continue;
		}
		if (cr < 0)
			break;               /* no buffer to copy into: the next step tries again */
		memcpy(kcopy, key, klen);   /* the cursor's copy changes with the set */
		rc = paste_btree_put(t, kcopy, klen, to, tn, &a, NULL);
		for (uint32_t i = 0; i < tn; i++)
			paste_store_unref(t->st, to[i].buf, false);   /* the tree took its own */
		if (rc < 0)
			break;
		c->moved++;
		c->moved_bytes += len;
		copied += len;
	}
	c->ns += paste_clock_ns() - t0;
	if (rc < 0 && rc != -ENOSPC)
		return rc;
	return 1;
}

int64_t paste_btree_make_room(struct paste_btree *t, uint32_t want, uint32_t max_steps)
{
	if (!t)
		return -EINVAL;
	if (!t->p)
		return -EROFS;
	int rc = paste_btree_checkpoint(t);
	if (rc < 0)
		return rc;
	bt_release_due(t, false);
	t->space_checkpoints++;
	for (uint32_t i = 0; i < max_steps && paste_store_nfree(t->st) < want; i++) {
		rc = bt_clean_step(t, true);
		if (rc < 0)
			return rc;
		if (rc == 0 && !t->cl->active)
			break;                       /* nothing left to clean */
		if (!t->cl->active) {            /* a walk ended: free its victims */
			if ((rc = paste_btree_checkpoint(t)) < 0)
				return rc;
			bt_release_due(t, false);
		}
	}
	if (t->cl && t->cl->active && paste_store_nfree(t->st) < want) {
		if ((rc = paste_btree_checkpoint(t)) < 0)
			return rc;
		bt_release_due(t, false);
	}
	return paste_store_nfree(t->st);
}
