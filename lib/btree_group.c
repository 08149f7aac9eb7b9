/*
 * btree_group.c - groups of changes that are one unit (include/paste.h,
 * "Groups"): pkvs's transactions and scripts.
 *
 * Format: every record of a group carries BT_EF_GROUP in its flags, its
 * first also BT_EF_FIRST, and a COMMIT record (no key, no value) follows
 * the last. Recovery (btree_recover.c) keeps a group's records aside and
 * applies them only when it reaches their COMMIT; a group cut short (a
 * crash, an abort) is dropped when the next group begins, when a record
 * of no group follows, or at the end of the log. One thread appends to
 * one lane, so a group's records are consecutive.
 *
 * Crash argument: a group's changes are acknowledged only after the
 * barrier that made its COMMIT durable, and a lane's records become
 * durable in order, so every recovered COMMIT has its whole group before
 * it; no checkpoint runs while a group is open, so no checkpoint holds
 * half of one.
 *
 * Abort: the changes were applied as they were made; each noted what it
 * replaced (the old entry's value extents, length, tag, CRC and word, or
 * that the key was absent: a SET or DEL while it applies, from the entry
 * it replaces, a range delete before, by a walk), and abort applies those
 * back in reverse, in DRAM only. The references come out exact: putting an old
 * value back takes the references its replacement's release will drop.
 * The group's records stay in the log, without a COMMIT.
 */
#include <errno.h>
#include <stdlib.h>
#include "btree_internal.h"

/* One noted entry in the undo arena: what a key was before the group
 * changed it. */
struct undo {
	uint16_t klen;
	uint8_t n;
	bool had;
	uint32_t vlen;
	struct paste_btree_attr attr;
	/* then klen key bytes and n extents */
};

struct bt_group {
	uint8_t *arena;
	size_t used, cap;
	uint32_t records;             /* appended so far: 0 means the next is the first */
	bool capture;                 /* the SET or DEL being applied notes what it replaces */
	bool broken;                  /* a change could not be noted: abort, never commit */
};

uint8_t bt_group_flags(struct paste_btree *t)
{
	if (!t->grp)
		return 0;
	return (uint8_t)(BT_EF_GROUP | (t->grp->records++ ? 0 : BT_EF_FIRST));
}

/* An entry's bytes: the undo, its key and extents, and its own size in
 * the last 4 bytes, so that abort walks the arena backwards without a
 * list of offsets (an allocation that could fail halfway through). */
static size_t undo_size(uint32_t klen, uint32_t n)
{
	return (sizeof(struct undo) + klen + n * sizeof(struct paste_extent) + 4u + 7u) & ~(size_t)7u;
}

/* Room for need more bytes of undo. */
static int room(struct bt_group *g, size_t need)
{
	if (g->used + need <= g->cap)
		return 0;
	size_t cap = g->cap ? g->cap : 4096;
	while (cap < g->used + need)
		cap *= 2;
	uint8_t *q = realloc(g->arena, cap);
	if (!q)
		return -ENOMEM;
	g->arena = q;
	g->cap = cap;
	return 0;
}

static int push(struct paste_btree *t, const uint8_t *key, uint32_t klen, bool had,
		const struct paste_extent *ext, uint32_t n, uint32_t vlen,
		const struct paste_btree_attr *a)
{
	struct bt_group *g = t->grp;
	size_t need = undo_size(klen, n);
	if (room(g, need) < 0)
		return -ENOMEM;
	struct undo u = { (uint16_t)klen, (uint8_t)n, had, vlen, { 0 } };
	if (a)
		u.attr = *a;
	uint8_t *at = g->arena + g->used;
	memcpy(at, &u, sizeof(u));
	memcpy(at + sizeof(u), key, klen);
	if (n)
		memcpy(at + sizeof(u) + klen, ext, n * sizeof(*ext));
	uint32_t size = (uint32_t)need;
	memcpy(at + need - sizeof(size), &size, sizeof(size));
	g->used += need;
	return 0;
}

/* A SET or DEL notes what it replaces while it applies (bt_group_old):
 * the entry is in hand there, where a lookup first would cost a descent
 * for a key the point index does not hold (a sorted set's score entries)
 * and one more for the CRC of one it does. The room is taken here, so
 * that the note cannot fail halfway through the change. */
int bt_group_note(struct paste_btree *t, const struct paste_btree_record *r)
{
	int rc = 0;
	t->grp->capture = false;
	if (r->op == PASTE_BTREE_SET || r->op == PASTE_BTREE_DEL) {
		rc = room(t->grp, undo_size(r->klen, PASTE_BTREE_MAX_EXTENTS));
		t->grp->capture = rc == 0;
	} else if (r->op == PASTE_BTREE_DELRANGE) {
		struct paste_btree_cursor c;
		const uint8_t *key;
		uint32_t klen, n, len;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		paste_btree_cursor_init(&c, t, r->key, r->klen);
		while (rc == 0 && paste_btree_cursor_next(&c, &key, &klen, ext, &n, &len) == 1) {
			if (r->hilen && bt_keycmp(key, klen, r->hi, r->hilen) >= 0)
				break;
			rc = push(t, key, klen, true, ext, n, len, paste_btree_cursor_attr(&c));
		}
	}
	if (rc < 0)
		t->grp->broken = true;
	return rc;
}

void bt_group_old_entry(struct paste_btree *t, const uint8_t *key_entry, const uint8_t *old)
{
	struct bt_group *g = t->grp;
	if (!g->capture)
		return;
	g->capture = false;
	const uint8_t *key = bt_ekey(BT_LEAF, key_entry);
	if (!old) {
		(void)push(t, key, ld16(key_entry), false, NULL, 0, 0, NULL);   /* room reserved */
		return;
	}
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	extents_copy(ext, bt_lext(old), old[2]);
	bt_lattr(old, &a);
	(void)push(t, key, ld16(key_entry), true, ext, old[2], ld32(old + 4), &a);
}

/* A collection's every change is a group: its struct and arena are kept
 * from one to the next instead of two allocations and two frees each
 * (docs/results.md, "Instructions per pipelined request"), an arena up
 * to this size. */
#define GROUP_KEEP (64u << 10)

static void park(struct paste_btree *t, struct bt_group *g)
{
	if (g->cap > GROUP_KEEP) {
		free(g->arena);
		g->arena = NULL;
		g->cap = 0;
	}
	t->grp_spare = g;          /* none is kept while a group is open */
}

void bt_group_free(struct paste_btree *t)
{
	if (!t->grp)
		return;
	park(t, t->grp);
	t->grp = NULL;
}

void bt_group_drop(struct paste_btree *t)
{
	bt_group_free(t);
	if (t->grp_spare)
		free(t->grp_spare->arena);
	free(t->grp_spare);
	t->grp_spare = NULL;
}

int paste_btree_group_begin(struct paste_btree *t)
{
	if (!t)
		return -EINVAL;
	if (!t->p)
		return -EROFS;
	if (t->grp)
		return -EBUSY;
	struct bt_group *g = t->grp_spare;
	t->grp_spare = NULL;
	if (g)
		*g = (struct bt_group){ .arena = g->arena, .cap = g->cap };
	else if (!(g = calloc(1, sizeof(*g))))
		return -ENOMEM;
	t->grp = g;
	return 0;
}

int paste_btree_group_commit(struct paste_btree *t, uint64_t *lsn)
{
	if (!t || !t->grp)
		return -EINVAL;
	if (t->grp->broken) {
		paste_btree_group_abort(t);
		return -ENOMEM;
	}
	bool empty = t->grp->records == 0;
	/* Closed before the COMMIT is appended: it carries no group flag. */
	bt_group_free(t);
	if (empty)
		return 0;
	uint64_t l;
	int rc = bt_append(t, PASTE_BTREE_COMMIT, NULL, 0, NULL, 0, 0, NULL, &l);
	if (rc < 0)
		return rc;     /* the store failed: nothing of the group will be acknowledged */
	if (l > t->last_lsn)
		t->last_lsn = l;
	t->mods++;
	if (lsn)
		*lsn = l;
	return 0;
}

int paste_btree_group_abort(struct paste_btree *t)
{
	if (!t || !t->grp)
		return -EINVAL;
	struct bt_group *g = t->grp;
	int rc = 0;
	t->grp = NULL;            /* the applies below are no group's */
	for (size_t end = g->used; end > 0;) {
		uint32_t size;
		memcpy(&size, g->arena + end - sizeof(size), sizeof(size));
		end -= size;
		struct undo u;
		memcpy(&u, g->arena + end, sizeof(u));
		const uint8_t *key = g->arena + end + sizeof(u);
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		if (u.n)
			memcpy(ext, key + u.klen, u.n * sizeof(*ext));
		struct paste_btree_record r = { .op = u.had ? PASTE_BTREE_SET : PASTE_BTREE_DEL,
						.key = key, .klen = u.klen, .val = ext, .n = u.n,
						.vlen = u.vlen, .attr = u.attr };
		if (bt_pages_spare(t) < bt_pages_needed(t)) {
			/* No page to put it back with, and no checkpoint may run
			 * (it would keep half a group): the DRAM tree cannot be
			 * trusted now, the log can. Fail the store; a restart
			 * recovers without the group. */
			paste_store_fail(t->st, -ENOSPC, "%s: the node area ran out of pages while a "
					 "group's changes were put back", paste_store_path(t->st));
			rc = -ENOSPC;
			break;
		}
		/* What the entry holds now is released once the abort is
		 * durable, as any replaced value. */
		if (bt_release_reserve(t, PASTE_BTREE_MAX_EXTENTS) < 0) {
			paste_store_fail(t->st, -ENOMEM, "%s: out of memory while a group's changes "
					 "were put back", paste_store_path(t->st));
			rc = -ENOMEM;
			break;
		}
		bt_apply(t, &r, 0);   /* DRAM only: no record, the LSN unchanged */
	}
	park(t, g);
	return rc;
}
