/* store_upgrade.c - paste_store_upgrade: a closed store of an earlier
 * layout made the current one (version 3), keeping every key, record and
 * buffer index.
 *
 * What the earlier layouts were
 * -----------------------------
 * Version 1 had no node area (its buffers follow the lanes) and a 96-byte
 * superblock: version 3's first 92 bytes, then its CRC at 92.
 *
 * Version 2 is version 3 but for the B+tree's leaf entries and log records
 * (the superblock, the log, page headers, inner entries and meta slots are
 * the same):
 *    leaf entry: klen u16, nexts u8, 0 u8, vlen u32, nexts x {buf, off,
 *                len} u32, key (no CRC, tag or word);
 *    record:     extent 0 is the header, magic u32 "PBTR", op u8, nval u8,
 *                klen u16, vlen u32, key; extents 1..nval are the value.
 *
 * How each is upgraded
 * --------------------
 * A store without a node area (version 1, or version 2 created without
 * one) has no tree: its superblock is rewritten in place, one 112-byte
 * write of the first sector and an fsync, so a crash leaves either
 * superblock whole; every other byte stays.
 *
 * A version-2 store with a node area may hold a tree, in its pages and in
 * its log, and only its log says (records after the checkpoint). It is
 * converted in a copy: PATH.upgrade-XXXXXX in the same directory, created
 * exclusively, holds the file with the version-3 superblock and a zeroed
 * node area; the library opens it (store, log, tree) and the tree is
 * rebuilt there with paste_btree_set, one per live key, from
 *   - the version-2 tree of the newest valid meta slot, read from the
 *     original (its pages walked and checked: CRC, numbers, levels, key
 *     order within the parents' separators, extents, counts), and
 *   - the version-2 tree records after that meta's checkpoint LSN, in LSN
 *     order (SET, DEL, CLEAR; a record of another kind is not the tree's,
 *     as version 2's replay had it).
 * Values stay in their buffers (the tree computes each one's CRC32C; tag
 * 0, no word). The old tree records go: the log is truncated before the
 * rebuild and the tree's checkpoint truncates the rebuild's own records,
 * so the log holds nothing of the tree. Records that are not the tree's
 * (phttpd's) keep their LSNs and buffers: then the log is truncated only
 * up to the first of them and the rebuilt tree stays in its log records
 * (no checkpoint, which would truncate them too: the tree's first
 * checkpoint in a server does that, one tree per store). The copy is then
 * opened again read-only, as a server's recovery will, and must hold
 * exactly the live keys with their extents, pass paste_btree_check and
 * paste_wal_check, and keep every other record; then it is synced, renamed
 * over the original and the directory synced.
 *
 * Why a copy: the original is never written, so a crash or a kill at any
 * point leaves it whole under its name (rename() replaces the name in one
 * step, after the copy is durable), and a stray copy from a crash is
 * removed by the next upgrade, which holds the store's lock. Converting in
 * place would rewrite pages and truncate records the old tree still needs
 * before the superblock could say which format they are in. Cost: one read
 * and one write of the file and room for a second one while it runs.
 * Holding the original's exclusive lock throughout keeps servers and
 * other upgrades out (a server that opened the old file just before the
 * rename and locked it just after finds the path naming another file:
 * paste_store_watch fails its store).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "btree_internal.h"
#include "store_internal.h"

#define V1_SUPER_SIZE 96u            /* version 1: 92 bytes + CRC */
#define V2_REC_MAGIC  0x52544250u    /* "PBTR" */
#define V2_REC_HDR    12u            /* version 2's record header before the key */
#define V2_LFIX       8u             /* version 2's leaf entry before its extents */
#define COPY_CHUNK    (1u << 20)

static uint32_t super_crc(const struct store_super *sb)
{
	return paste_crc32c(0, sb, offsetof(struct store_super, crc));
}

/* ---- superblocks ----------------------------------------------------- */

/* raw (n bytes of the file's first page) read as an earlier superblock:
 * *sb as version 3 lays it out (version 1: no node area). NULL, or why it
 * is not sound. A version other than 1 and 2 is left to the caller. */
static const char *old_super(const uint8_t *raw, size_t n, struct store_super *sb)
{
	memset(sb, 0, sizeof(*sb));
	memcpy(sb, raw, offsetof(struct store_super, node_offset));
	if (memcmp(sb->magic, PASTE_STORE_MAGIC, 8) != 0)
		return "not a paste store (bad magic)";
	if (sb->version == 1) {
		uint32_t crc;
		memcpy(&crc, raw + offsetof(struct store_super, node_offset), 4);
		if (paste_crc32c(0, raw, offsetof(struct store_super, node_offset)) != crc)
			return "version-1 superblock checksum mismatch: corrupted";
		if (sb->header_size != V1_SUPER_SIZE)
			return "version-1 superblock has a bad header size: corrupted";
		sb->node_offset = sb->buf_offset;   /* no node area: buffers follow the lanes */
		sb->node_size = 0;
	} else if (sb->version == 2) {
		if (n < sizeof(*sb))
			return "truncated: less than a superblock";
		memcpy(sb, raw, sizeof(*sb));
		if (super_crc(sb) != sb->crc)
			return "version-2 superblock checksum mismatch: corrupted";
		if (sb->header_size != sizeof(*sb))
			return "version-2 superblock has a bad header size: corrupted";
	} else {
		return NULL;
	}
	struct paste_store_geom g;
	memset(&g, 0, sizeof(g));
	store_geom_from_super(&g, sb);
	return store_geom_check(&g);
}

/* sb as version 3 writes it. */
static void super_v3(struct store_super *sb)
{
	sb->version = PASTE_STORE_VERSION;
	sb->header_size = sizeof(*sb);
	sb->crc = super_crc(sb);
}

/* The superblock rewritten where it is: one write inside the first sector,
 * then a sync. */
static int rewrite_in_place(int fd, const char *path, struct store_super *sb, struct paste_error *err)
{
	super_v3(sb);
	errno = 0;
	if (pwrite(fd, sb, sizeof(*sb), 0) != (ssize_t)sizeof(*sb) || fsync(fd) < 0) {
		int e = errno ? errno : EIO;
		return paste_error_set(err, -e, "%s: cannot write the upgraded superblock: %s", path,
				       strerror(e));
	}
	return 0;
}

/* ---- version 2: the tree in the original ------------------------------ */

struct v2_rec {              /* a tree record of the log after the checkpoint */
	uint64_t lsn;
	uint8_t op, n;
	uint16_t klen;
	uint32_t vlen;
	struct paste_extent *ext;   /* n of them, then the key */
	uint8_t *key;
};

struct conv;
typedef int (*value_fn)(struct conv *c, const uint8_t *key, uint32_t klen,
			const struct paste_extent *ext, uint32_t n, uint32_t vlen);

struct conv {
	const char *path;            /* the store, as named */
	struct paste_error *err;
	struct paste_store_geom g;   /* the original's (version 3's numbers) */
	const uint8_t *old;          /* the original, mapped read-only */
	struct paste_btree *view;    /* its node area, for bt_meta_read */
	struct bt_meta meta;
	bool has_meta;
	uint8_t *seen;               /* the walk: pages reached */
	/* the log after the checkpoint: tree records, then only the last of
	 * each key after the last CLEAR (key order) */
	struct v2_rec **recs;
	size_t nrecs, cap;
	bool cleared;
	uint64_t last_lsn;           /* of any live record */
	uint64_t *other;             /* LSNs of the records that are not the tree's */
	size_t nother, other_cap;
	uint64_t leaf_keys, replayed, live, checked, mismatched;
	value_fn leaf_next;          /* live_foreach's fn, for the tree's keys */
	/* the copy */
	char tmp[PATH_MAX + 16];
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_btree *t;
};

struct frame {
	uint32_t no, next;
	const uint8_t *lo, *hi;   /* lo <= key < hi; NULL: no bound */
	uint32_t lolen, hilen;
};

static uint8_t *old_page(const struct conv *c, uint32_t no)
{
	return (uint8_t *)(uintptr_t)(c->old + c->g.node_offset + (size_t)no * BT_PAGE);
}

static uint32_t v2_esize(uint8_t type, const uint8_t *e)
{
	return type == BT_LEAF ? V2_LFIX + BT_EXT * e[2] + ld16(e) : BT_IFIX + ld16(e);
}

static const uint8_t *v2_ekey(uint8_t type, const uint8_t *e)
{
	return type == BT_LEAF ? e + V2_LFIX + BT_EXT * e[2] : e + BT_IFIX;
}

/* Why version-2 leaf page no cannot be one the tree wrote, or NULL: what
 * one page says about itself, so that reading it stays inside it. (Inner
 * pages are version 3's: bt_page_check.) */
static const char *v2_leaf_check(const uint8_t *pg, uint32_t no, const struct paste_store_geom *g)
{
	struct bt_hdr h;
	memcpy(&h, pg, sizeof(h));
	if (h.magic != BT_PAGE_MAGIC)
		return "bad page magic";
	if (h.pageno != no)
		return "page number does not match its place";
	if (h.level || h.zero || h.child0)
		return "bad leaf header";
	if (h.top > BT_PAGE || BT_HDR + 2u * h.nkeys > h.top)
		return "bad slot area";
	const uint8_t *prev = NULL;
	uint32_t prevlen = 0;
	for (uint32_t i = 0; i < h.nkeys; i++) {
		uint32_t off = ld16(pg + BT_HDR + 2 * i);
		if (off < h.top || off > BT_PAGE - V2_LFIX)
			return "entry outside the page";
		const uint8_t *e = pg + off;
		uint32_t klen = ld16(e);
		if (klen == 0 || klen > PASTE_BTREE_MAX_KEY)
			return "bad key length";
		if (e[2] > PASTE_BTREE_MAX_EXTENTS || e[3])
			return "bad extent count";
		if (v2_esize(BT_LEAF, e) > BT_PAGE - off)
			return "entry outside the page";
		const uint8_t *key = v2_ekey(BT_LEAF, e);
		if (prev && bt_keycmp(prev, prevlen, key, klen) >= 0)
			return "keys out of order";
		prev = key;
		prevlen = klen;
		uint64_t total = 0;
		for (uint32_t x = 0; x < e[2]; x++) {
			struct paste_extent ext;
			memcpy(&ext, e + V2_LFIX + BT_EXT * x, BT_EXT);
			if (ext.buf >= g->nbufs || ext.off > g->buf_size || ext.len > g->buf_size - ext.off)
				return "value extent outside the buffer area";
			total += ext.len;
		}
		if (total != ld32(e + 4))
			return "value extents do not add up to its length";
	}
	return NULL;
}

/* Check page no, reached from a parent of generation pgen at `level`
 * within f's bounds: NULL, or why not. */
static const char *v2_visit(struct conv *c, uint32_t no, uint32_t level, uint64_t pgen,
			    const struct frame *f)
{
	if (no < BT_FIRST_PAGE || no >= c->meta.hwm)
		return "page number outside the tree's pages";
	if (c->seen[no])
		return "page reached twice";
	c->seen[no] = 1;
	uint8_t *pg = old_page(c, no);
	const struct bt_hdr *h = bt_h(pg);
	if (h->crc != paste_crc32c(0, pg + 4, BT_PAGE - 4))
		return "page checksum mismatch";
	const char *why = h->type == BT_LEAF ? v2_leaf_check(pg, no, &c->g)
			: h->type == BT_INNER ? bt_page_check(pg, no, &c->g) : "bad page type";
	if (why)
		return why;
	if (h->gen > pgen)
		return "page newer than its parent or the checkpoint";
	if (h->level != level)
		return "page at the wrong level";
	if (h->nkeys == 0)
		return "empty node";
	const uint8_t *first = bt_entry(pg, 0), *last = bt_entry(pg, h->nkeys - 1u);
	if ((f->lo && bt_keycmp(v2_ekey(h->type, first), ld16(first), f->lo, f->lolen) < 0) ||
	    (f->hi && bt_keycmp(v2_ekey(h->type, last), ld16(last), f->hi, f->hilen) >= 0))
		return "keys outside the parent's separators";
	return NULL;
}

/* Walk the version-2 tree of the meta in force depth first, checking every
 * page, and call fn (if any) for each leaf entry in key order. 0, fn's
 * non-zero return, or -EBADMSG with err naming the damage. */
static int v2_walk(struct conv *c, value_fn fn)
{
	if (!c->has_meta || !c->meta.root)
		return 0;
	memset(c->seen, 0, c->g.node_size / BT_PAGE);
	struct frame st[BT_MAXH];
	int sp = 0;
	uint64_t keys = 0, pages = 1;
	uint32_t bad = c->meta.root;
	st[0] = (struct frame){ .no = c->meta.root };
	const char *why = v2_visit(c, c->meta.root, c->meta.height - 1u, c->meta.gen, &st[0]);
	while (!why && sp >= 0) {
		struct frame *f = &st[sp];
		uint8_t *pg = old_page(c, f->no);
		const struct bt_hdr *h = bt_h(pg);
		if (h->type == BT_LEAF) {
			for (uint32_t i = 0; i < h->nkeys; i++) {
				const uint8_t *e = bt_entry(pg, i);
				struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
				extents_copy(ext, e + V2_LFIX, e[2]);
				int r = fn ? fn(c, v2_ekey(BT_LEAF, e), ld16(e), ext, e[2], ld32(e + 4)) : 0;
				if (r)
					return r;
			}
			keys += h->nkeys;
			sp--;
			continue;
		}
		if (f->next > h->nkeys) {
			sp--;
			continue;
		}
		uint32_t i = f->next++;
		struct frame k = { .no = bt_child(pg, i), .lo = f->lo, .lolen = f->lolen,
				   .hi = f->hi, .hilen = f->hilen };
		if (i > 0) {
			const uint8_t *e = bt_entry(pg, i - 1);
			k.lo = e + BT_IFIX;
			k.lolen = ld16(e);
		}
		if (i < h->nkeys) {
			const uint8_t *e = bt_entry(pg, i);
			k.hi = e + BT_IFIX;
			k.hilen = ld16(e);
		}
		bad = k.no;
		if (sp + 1 >= (int)BT_MAXH)
			why = "tree deeper than its height";
		else if (!(why = v2_visit(c, k.no, h->level - 1u, h->gen, &k))) {
			st[++sp] = k;
			pages++;
		}
	}
	if (!why && (keys != c->meta.nkeys || pages != c->meta.npages)) {
		why = "the key or page count differs from the meta slot";
		bad = c->meta.root;
	}
	if (why)
		return paste_error_set(c->err, -EBADMSG, "%s: the version-2 B+tree is damaged (page %u: "
				       "%s): not upgraded, the store is untouched", c->path, bad, why);
	return 0;
}

/* The meta slot in force (the valid one with the higher sequence), as
 * version 2's recovery picks it; none at all is an empty tree. */
static int v2_meta(struct conv *c)
{
	c->view = calloc(1, sizeof(*c->view));
	c->seen = calloc(c->g.node_size / BT_PAGE, 1);
	if (!c->view || !c->seen)
		return paste_error_set(c->err, -ENOMEM, "%s: out of memory", c->path);
	c->view->nodes = old_page(c, 0);
	c->view->npages = (uint32_t)(c->g.node_size / BT_PAGE);
	c->view->g = &c->g;
	struct bt_meta m[2];
	int mr[2], best = -1;
	for (int s = 0; s < 2; s++) {
		mr[s] = bt_meta_read(c->view, s, &m[s]);
		if (mr[s] == 0 && (best < 0 || m[s].seq > m[best].seq))
			best = s;
	}
	if (mr[0] == -EBADMSG && mr[1] == -EBADMSG)
		return paste_error_set(c->err, -EBADMSG, "%s: both B+tree meta slots are damaged (one "
				       "write can tear only one): not upgraded, the store is untouched",
				       c->path);
	if (best >= 0) {
		c->meta = m[best];
		c->has_meta = true;
	}
	return 0;
}

/* ---- version 2: the log ----------------------------------------------- */

/* Log record ext[0..n) as a version-2 tree record (after the checkpoint:
 * kept, in *out), or -EINVAL when it is not one. */
static int v2_record(struct conv *c, const struct paste_extent *ext, uint32_t n, uint64_t lsn,
		     struct v2_rec **out)
{
	*out = NULL;
	if (n == 0 || n > PASTE_WAL_MAX_EXTENTS || ext[0].len < V2_REC_HDR)
		return -EINVAL;
	const uint8_t *h = paste_store_buf(c->st, ext[0].buf) + ext[0].off;
	uint8_t hdr[V2_REC_HDR];
	memcpy(hdr, h, sizeof(hdr));
	uint32_t klen = ld16(hdr + 6), vlen = ld32(hdr + 8);
	uint8_t op = hdr[4];
	uint64_t sum = 0;
	for (uint32_t i = 1; i < n; i++)
		sum += ext[i].len;
	if (ld32(hdr) != V2_REC_MAGIC || hdr[5] != n - 1 || sum != vlen || ext[0].len != V2_REC_HDR + klen)
		return -EINVAL;
	bool keyed = klen >= 1 && klen <= PASTE_BTREE_MAX_KEY;
	if (!(op == PASTE_BTREE_SET ? keyed : op == PASTE_BTREE_DEL ? keyed && n == 1
	      : op == PASTE_BTREE_CLEAR && klen == 0 && n == 1))
		return -EINVAL;
	if (c->has_meta && lsn <= c->meta.ckpt_lsn)
		return 0;   /* in the checkpoint already */
	struct v2_rec *r = malloc(sizeof(*r) + sizeof(struct paste_extent) * (n - 1) + klen);
	if (!r)
		return -ENOMEM;
	*r = (struct v2_rec){ .lsn = lsn, .op = op, .n = (uint8_t)(n - 1), .klen = (uint16_t)klen,
			      .vlen = vlen };
	r->ext = (struct paste_extent *)(void *)(r + 1);
	r->key = (uint8_t *)(r->ext + (n - 1));
	memcpy(r->ext, ext + 1, sizeof(*ext) * (n - 1));
	memcpy(r->key, h + V2_REC_HDR, klen);
	*out = r;
	return 0;
}

/* v with room for need items of size bytes (*cap of them), or NULL. */
static void *grow(void *v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return v;
	size_t n = *cap ? *cap * 2 : 256;
	void *p = realloc(v, n * size);
	if (p)
		*cap = n;
	return p;
}

static int classify(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		    uint32_t n, uint32_t len, uint32_t crc)
{
	struct conv *c = arg;
	struct v2_rec *r;
	(void)lane; (void)len; (void)crc;
	if (lsn > c->last_lsn)
		c->last_lsn = lsn;
	int rc = v2_record(c, ext, n, lsn, &r);
	if (rc == -EINVAL) {
		uint64_t *o = grow(c->other, &c->other_cap, c->nother + 1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		c->other = o;
		c->other[c->nother++] = lsn;
		return 0;
	}
	if (rc < 0 || !r)
		return rc;
	struct v2_rec **v = grow(c->recs, &c->cap, c->nrecs + 1, sizeof(*v));
	if (!v) {
		free(r);
		return -ENOMEM;
	}
	c->recs = v;
	c->recs[c->nrecs++] = r;
	c->replayed++;
	return 0;
}

static int rec_order(const void *a, const void *b)
{
	const struct v2_rec *x = *(struct v2_rec *const *)a, *y = *(struct v2_rec *const *)b;
	int k = bt_keycmp(x->key, x->klen, y->key, y->klen);
	return k ? k : (x->lsn > y->lsn) - (x->lsn < y->lsn);
}

/* What the records after the checkpoint leave: nothing before the last
 * CLEAR (nor the tree's keys, if there is one), and of each key its last
 * record, in key order. */
static void v2_resolve(struct conv *c)
{
	uint64_t clear = 0;
	for (size_t i = 0; i < c->nrecs; i++)
		if (c->recs[i]->op == PASTE_BTREE_CLEAR && c->recs[i]->lsn > clear)
			clear = c->recs[i]->lsn;
	c->cleared = clear != 0;
	size_t k = 0;
	for (size_t i = 0; i < c->nrecs; i++) {
		if (c->recs[i]->op != PASTE_BTREE_CLEAR && c->recs[i]->lsn > clear)
			c->recs[k++] = c->recs[i];
		else
			free(c->recs[i]);
	}
	if (k)
		qsort(c->recs, k, sizeof(*c->recs), rec_order);
	size_t m = 0;
	for (size_t i = 0; i < k; i++) {
		bool last = i + 1 == k || bt_keycmp(c->recs[i]->key, c->recs[i]->klen,
						    c->recs[i + 1]->key, c->recs[i + 1]->klen) != 0;
		if (last)
			c->recs[m++] = c->recs[i];
		else
			free(c->recs[i]);
	}
	c->nrecs = m;
}

static bool in_records(const struct conv *c, const uint8_t *key, uint32_t klen)
{
	size_t lo = 0, hi = c->nrecs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int k = bt_keycmp(c->recs[mid]->key, c->recs[mid]->klen, key, klen);
		if (k == 0)
			return true;
		if (k < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* ---- the live keys ---------------------------------------------------- */

static int leaf_live(struct conv *c, const uint8_t *key, uint32_t klen,
		     const struct paste_extent *ext, uint32_t n, uint32_t vlen)
{
	return in_records(c, key, klen) ? 0 : c->leaf_next(c, key, klen, ext, n, vlen);
}

/* fn for every live key of the version-2 store with its value: the
 * tree's keys the records after the checkpoint leave alone, then the
 * keys those records set last. Both in key order, each key once. */
static int live_foreach(struct conv *c, value_fn fn)
{
	int r = 0;
	if (!c->cleared) {
		c->leaf_next = fn;
		r = v2_walk(c, leaf_live);
	}
	for (size_t i = 0; r == 0 && i < c->nrecs; i++) {
		const struct v2_rec *x = c->recs[i];
		if (x->op == PASTE_BTREE_SET)
			r = fn(c, x->key, x->klen, x->ext, x->n, x->vlen);
	}
	return r;
}

static int count_leaf(struct conv *c, const uint8_t *key, uint32_t klen,
		      const struct paste_extent *ext, uint32_t n, uint32_t vlen)
{
	(void)key; (void)klen; (void)ext; (void)n; (void)vlen;
	c->leaf_keys++;
	return 0;
}

/* The conversion's own reference on each live value's buffers, taken
 * before the copy's store starts and dropped after the rebuild: the old
 * tree's values have no other until the new tree takes its, and a buffer
 * with none would be free for the rebuild's record headers. */
static int hold(struct conv *c, const uint8_t *key, uint32_t klen,
		const struct paste_extent *ext, uint32_t n, uint32_t vlen)
{
	(void)key; (void)klen; (void)vlen;
	for (uint32_t i = 0; i < n; i++)
		paste_store_ref(c->st, ext[i].buf);
	c->live++;
	return 0;
}

static int release(struct conv *c, const uint8_t *key, uint32_t klen,
		   const struct paste_extent *ext, uint32_t n, uint32_t vlen)
{
	(void)key; (void)klen; (void)vlen;
	for (uint32_t i = 0; i < n; i++)
		paste_store_unref(c->st, ext[i].buf, false);
	return 0;
}

static int put(struct conv *c, const uint8_t *key, uint32_t klen,
	       const struct paste_extent *ext, uint32_t n, uint32_t vlen)
{
	(void)vlen;
	int r = paste_btree_set(c->t, key, klen, ext, n, NULL);
	if (r == -ENAMETOOLONG)
		return paste_error_set(c->err, r, "%s: a key of %u bytes: version 3's log record "
				       "header leaves keys of at most %u bytes in %u-byte buffers: not "
				       "upgraded, the store is untouched", c->path, klen,
				       c->g.buf_size - BT_REC_HDR - BT_WORD, c->g.buf_size);
	if (r == -ENOSPC)
		return paste_error_set(c->err, r, "%s: no room for the converted tree: its node area "
				       "(version 3's leaf entries are 4 bytes longer), log or free buffers "
				       "(for the records' headers) ran out: not upgraded, the store is "
				       "untouched", c->path);
	if (r < 0)
		return paste_error_set(c->err, r, "%s: cannot set a key in the converted tree: %s: not "
				       "upgraded, the store is untouched", c->path, strerror(-r));
	return 0;
}

/* The reopened copy (c->t) must hold the key with exactly this value. */
static int verify(struct conv *c, const uint8_t *key, uint32_t klen,
		  const struct paste_extent *ext, uint32_t n, uint32_t vlen)
{
	struct paste_extent got[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t gn = 0, glen = 0;
	c->checked++;
	if (paste_btree_lookup(c->t, key, klen, got, &gn, &glen, &a) != 0 || gn != n || glen != vlen ||
	    memcmp(got, ext, sizeof(*ext) * n) != 0 || a.tag || a.has_word)
		c->mismatched++;
	return 0;
}

/* ---- the copy --------------------------------------------------------- */

/* Remove copies a crashed upgrade left: only an upgrade holding the
 * store's lock (as this one does) makes them. */
static void remove_stale(int dirfd, const char *base)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	size_t blen = strlen(base);
	for (struct dirent *de; (de = readdir(d)) != NULL;)
		if (strncmp(de->d_name, base, blen) == 0 && strncmp(de->d_name + blen, ".upgrade-", 9) == 0 &&
		    strlen(de->d_name) == blen + 15)
			unlinkat(dirfd, de->d_name, 0);
	closedir(d);
}

/* The original's bytes with the version-3 superblock sb and a zeroed node
 * area, written in full (no hole and no unwritten extent: see zero_fill
 * in store_format.c). */
static int copy_file(int from, int to, const struct store_super *sb, const struct paste_store_geom *g)
{
	int r = fallocate(to, 0, 0, (off_t)g->file_size);
	if (r < 0 && errno == EOPNOTSUPP)
		r = ftruncate(to, (off_t)g->file_size);
	uint8_t *b = r == 0 ? malloc(COPY_CHUNK) : NULL;
	if (!b)
		return -(errno ? errno : ENOMEM);
	uint64_t nlo = g->node_offset, nhi = g->node_offset + g->node_size;
	for (uint64_t off = 0; r == 0 && off < g->file_size; off += COPY_CHUNK) {
		size_t n = g->file_size - off < COPY_CHUNK ? (size_t)(g->file_size - off) : COPY_CHUNK;
		errno = EIO;
		if (pread(from, b, n, (off_t)off) != (ssize_t)n) {
			r = -1;
			break;
		}
		uint64_t lo = nlo > off ? nlo : off, hi = nhi < off + n ? nhi : off + n;
		if (lo < hi)
			memset(b + (lo - off), 0, hi - lo);
		if (off == 0)
			memcpy(b, sb, sizeof(*sb));
		errno = EIO;
		r = pwrite(to, b, n, (off_t)off) == (ssize_t)n ? 0 : -1;
	}
	free(b);
	return r == 0 ? 0 : -errno;
}

/* Say what went wrong in the copy, naming the store first; why: the
 * library's sentence (NULL: r's). */
static int copy_error(struct conv *c, int r, const char *what, const char *why)
{
	char because[sizeof(c->err->msg)];
	snprintf(because, sizeof(because), "%s", why ? why : strerror(-r));
	return paste_error_set(c->err, r, "%s: not upgraded, the store is untouched: %s the "
			       "converted copy: %.160s", c->path, what, because);
}

/* Rebuild the tree in the open copy. */
static int rebuild(struct conv *c)
{
	int r = 0;
	/* The old tree records go (their contents are in c->recs and their
	 * values held), but not the records of others, nor what follows the
	 * first of them. */
	uint64_t cut = c->nother ? c->other[0] - 1 : c->last_lsn;
	if (cut) {
		int64_t d = paste_wal_truncate(c->w, cut, c->p);
		if (d < 0)
			return copy_error(c, (int)d, "cannot truncate the log of", NULL);
	}
	if (!c->live) {
		paste_store_start(c->st);
		return 0;
	}
	/* No point index (nothing looks keys up) and no cleaner: values stay
	 * where they are, as the check of the copy expects. */
	struct paste_btree_config tc = { .no_point_index = true, .no_clean = true };
	if ((r = paste_btree_open(&c->t, c->st, c->w, c->p, &tc, c->err)) < 0)
		return copy_error(c, r, "cannot open the tree of", c->err->msg);
	paste_store_start(c->st);
	if ((r = live_foreach(c, put)) < 0)
		return r;
	struct paste_btree_info bi;
	paste_btree_info(c->t, &bi);
	if (c->nother && bi.checkpoints)
		return paste_error_set(c->err, -ENOSPC, "%s: the log has no room for the converted tree "
				       "beside its %zu records that are not the tree's (a checkpoint would "
				       "truncate them): not upgraded, the store is untouched", c->path,
				       c->nother);
	if (!c->nother && (r = paste_btree_checkpoint(c->t)) < 0)
		return copy_error(c, r, "cannot checkpoint the tree of", NULL);
	return 0;
}

static void close_copy(struct conv *c)
{
	paste_btree_close(c->t);
	paste_wal_close(c->w);
	paste_persist_close(c->p);
	paste_store_close(c->st);
	c->t = NULL;
	c->w = NULL;
	c->p = NULL;
	c->st = NULL;
}

/* Open the copy, read its log, rebuild the tree. No persistence: the copy
 * is synced whole before it is renamed, and until then a crash only
 * leaves it behind. */
static int convert(struct conv *c)
{
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	int r = paste_store_open(&c->st, c->tmp, NULL, 0, c->err);
	if (r == 0)
		r = paste_persist_open(&c->p, c->st, &pc, c->err);
	if (r == 0)
		r = paste_wal_open(&c->w, c->st, c->p, c->err);
	if (r < 0)
		return copy_error(c, r, "cannot open", c->err->msg);
	/* Before the store starts, the copy's buffers are the original's. */
	if ((r = paste_wal_foreach(c->w, classify, c)) < 0)
		return paste_error_set(c->err, r, "%s: reading the log: %s", c->path, strerror(-r));
	v2_resolve(c);
	if ((r = live_foreach(c, hold)) < 0)
		return r;
	r = rebuild(c);
	paste_btree_close(c->t);
	c->t = NULL;
	live_foreach(c, release);
	return r;
}

/* Open the copy read-only, as a server's recovery will, and check it. */
static int check_copy(struct conv *c)
{
	struct paste_error e = { 0 };
	int r = paste_store_open(&c->st, c->tmp, NULL, PASTE_STORE_RDONLY, &e);
	if (r == 0)
		r = paste_wal_open(&c->w, c->st, NULL, &e);
	if (r == 0)
		r = paste_btree_open(&c->t, c->st, c->w, NULL, NULL, &e);
	if (r < 0)
		return copy_error(c, r, "cannot reopen", e.msg);
	live_foreach(c, verify);
	uint64_t lost = 0;
	for (size_t i = 0; i < c->nother; i++)
		lost += paste_wal_lookup(c->w, c->other[i], NULL, NULL, NULL) != 0;
	int bad_tree = paste_btree_check(c->t, &e);
	char tree_msg[sizeof(e.msg)];
	memcpy(tree_msg, e.msg, sizeof(tree_msg));
	int bad_log = paste_wal_check(c->w, &e);
	if (c->mismatched || paste_btree_count(c->t) != c->live || lost || bad_tree || bad_log)
		r = paste_error_set(c->err, -EIO, "%s: the converted copy does not hold what the store "
				    "does (%llu of %llu keys differ, %llu keys in all, %llu other records "
				    "lost; tree: %.60s; log: %.60s): not upgraded, the store is untouched",
				    c->path, (unsigned long long)c->mismatched,
				    (unsigned long long)c->checked, (unsigned long long)paste_btree_count(c->t),
				    (unsigned long long)lost, bad_tree ? tree_msg : "clean",
				    bad_log ? e.msg : "clean");
	close_copy(c);
	return r;
}

static void conv_free(struct conv *c)
{
	close_copy(c);
	for (size_t i = 0; i < c->nrecs; i++)
		free(c->recs[i]);
	free(c->recs);
	free(c->other);
	free(c->view);
	free(c->seen);
	if (c->old)
		munmap((void *)(uintptr_t)c->old, c->g.file_size);
}

/* Version 2 with a node area -> 3 through a copy (the top of this file).
 * fd is the original, locked; real its resolved path. */
static int upgrade_v2(int fd, const char *path, const char *real, const struct stat *sst,
		      struct store_super *sb, struct paste_error *err)
{
	struct conv c = { .path = path, .err = err };
	store_geom_from_super(&c.g, sb);
	void *m = mmap(NULL, c.g.file_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return paste_error_set(err, -errno, "%s: cannot map: %s", path, strerror(errno));
	c.old = m;
	/* The old tree first: damage refuses before anything is written. */
	int r = v2_meta(&c);
	if (r == 0)
		r = v2_walk(&c, count_leaf);
	char *dcopy = strdup(real), *bcopy = strdup(real);
	int dirfd = dcopy ? open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	int tfd = -1;
	if (r == 0 && (!bcopy || dirfd < 0))
		r = paste_error_set(err, -errno, "%s: cannot open its directory: %s", path, strerror(errno));
	if (r == 0) {
		remove_stale(dirfd, basename(bcopy));
		snprintf(c.tmp, sizeof(c.tmp), "%s.upgrade-XXXXXX", real);
		tfd = mkostemp(c.tmp, O_CLOEXEC);
		if (tfd < 0)
			r = paste_error_set(err, -errno, "%s: cannot create %s for the converted copy: %s",
					    path, c.tmp, strerror(errno));
	}
	if (r == 0) {
		super_v3(sb);
		if ((r = copy_file(fd, tfd, sb, &c.g)) < 0)
			paste_error_set(err, r, "%s: cannot copy it to %s (%llu bytes; the upgrade needs "
					"room for a second copy while it runs): %s: not upgraded, the store "
					"is untouched", path, c.tmp, (unsigned long long)c.g.file_size,
					strerror(-r));
	}
	if (r == 0)
		r = convert(&c);
	close_copy(&c);
	if (r == 0)
		r = check_copy(&c);
	bool renamed = false;
	if (r == 0) {
		/* The same owner and mode, then durable, then in its place.
		 * (Without the right to give it the owner the copy stays ours.) */
		errno = 0;
		if (fchmod(tfd, sst->st_mode & 07777) < 0 ||
		    (fchown(tfd, sst->st_uid, sst->st_gid) < 0 && errno != EPERM) ||
		    fsync(tfd) < 0 || flock(tfd, LOCK_EX | LOCK_NB) < 0 || !(renamed = rename(c.tmp, real) == 0))
			r = paste_error_set(err, -errno, "%s: cannot put the converted copy %s in its place: "
					    "%s: not upgraded, the store is untouched", path, c.tmp,
					    strerror(errno));
		else if (fsync(dirfd) < 0)
			r = paste_error_set(err, -errno, "%s: upgraded, but syncing its directory failed: %s",
					    path, strerror(errno));
		else
			paste_error_set(err, 0, "%s: layout version 2 converted to %u: the B+tree's %llu "
					"keys rewritten (%llu from its checkpoint, %llu log records after it "
					"replayed); %zu log records that are not the tree's kept", path,
					PASTE_STORE_VERSION, (unsigned long long)c.live,
					(unsigned long long)c.leaf_keys, (unsigned long long)c.replayed,
					c.nother);
	}
	if (tfd >= 0 && !renamed)
		unlink(c.tmp);
	if (tfd >= 0)
		close(tfd);
	if (dirfd >= 0)
		close(dirfd);
	free(dcopy);
	free(bcopy);
	conv_free(&c);
	return r;
}

/* ---- the entry point -------------------------------------------------- */

int paste_store_upgrade(const char *path, struct paste_error *err)
{
	if (!path || !*path)
		return paste_error_set(err, -EINVAL, "store path is empty");
	char real[PATH_MAX];
	int fd = realpath(path, real) ? open(real, O_RDWR | O_CLOEXEC) : -1;
	if (fd < 0)
		return paste_error_set(err, -errno, "%s: cannot open: %s", path, strerror(errno));
	int r = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK
			? paste_error_set(err, -EBUSY, "%s: in use (locked by a running server or another "
					  "open): stop it before upgrading", path)
			: paste_error_set(err, -errno, "%s: cannot lock: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	uint8_t raw[4096];
	struct store_super sb;
	struct stat sst;
	ssize_t n = pread(fd, raw, sizeof(raw), 0);
	const char *why = NULL;
	if (n < 0)
		r = paste_error_set(err, -errno, "%s: cannot read the superblock: %s", path, strerror(errno));
	else if (n < (ssize_t)V1_SUPER_SIZE)
		r = paste_error_set(err, -EBADMSG, "%s: truncated: file has %zd bytes, less than a superblock",
				    path, n);
	else if ((why = old_super(raw, (size_t)n, &sb)) != NULL)
		r = paste_error_set(err, strstr(why, "magic") ? -EINVAL : -EBADMSG, "%s: %s", path, why);
	else if (sb.version == PASTE_STORE_VERSION)
		r = paste_error_set(err, -EALREADY, "%s: already layout version %u: nothing to do",
				    path, PASTE_STORE_VERSION);
	else if (sb.version != 1 && sb.version != 2)
		r = paste_error_set(err, -EPROTO, "%s: layout version %u: this build upgrades versions 1 "
				    "and 2", path, sb.version);
	else if (fstat(fd, &sst) < 0 || (uint64_t)sst.st_size < sb.file_size)
		r = paste_error_set(err, -EBADMSG, "%s: truncated: file has %llu bytes, superblock says %llu",
				    path, (unsigned long long)sst.st_size, (unsigned long long)sb.file_size);
	else if (sb.version == 2 && sb.node_size && sst.st_nlink > 1)
		r = paste_error_set(err, -EMLINK, "%s: has %llu hard links: the upgrade replaces the file, "
				    "and the other names would keep the old one; remove them first",
				    path, (unsigned long long)sst.st_nlink);
	if (r == 0 && (sb.version == 1 || !sb.node_size)) {
		uint32_t from = sb.version;
		r = rewrite_in_place(fd, path, &sb, err);
		if (r == 0)
			paste_error_set(err, 0, "%s: layout version %u upgraded to %u in place: every record "
					"and buffer kept; no node area, so it serves the log, not a tree",
					path, from, PASTE_STORE_VERSION);
	} else if (r == 0) {
		r = upgrade_v2(fd, path, real, &sst, &sb, err);
	}
	close(fd);
	return r;
}
