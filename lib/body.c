/*
 * body.c - a request body of known length, gathered from DATA events into
 * extents of store buffers: held where it landed (zero copy), or copied
 * densely into fresh buffers. What the WAL (and any service that stores
 * bodies) hands to paste_wal_append.
 *
 * The rules live here, once, so every service applies the same limits:
 *
 *  - A read is held only while the extents left after it could still take
 *    the rest of the body copied densely, and (with max_held) while the
 *    buffers taken so far, plus this one, plus a dense copy of the rest,
 *    stay within max_held. Each hold and each dense copy keeps
 *    "extents used + buffers a dense copy of the rest needs" within both
 *    bounds, and paste_body_begin refuses a body whose dense copy alone
 *    exceeds them, so a body never runs out of extents and never pins more
 *    than max_held (rounded down to whole buffers), however it is split.
 *  - Nothing is taken while the store has fewer than `reserve` free
 *    buffers: the ports refill their rings from the same free list, and a
 *    store filled by bodies must still receive the DELETE that empties it.
 *    A hold takes no free buffer itself, but the port replaces the held
 *    one in its ring at the next poll, so it counts the same.
 *
 * Per event: no syscall, no allocation but store buffers, no lock on the
 * hold path (the store's mutex per fresh buffer on the copy path).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>   /* port_internal.h needs struct msghdr */

#include "paste.h"
#include "port_internal.h"   /* pt->store: the port's store is the body's */

/* The only failure: the store (below the reserve) or the extents ran out. */
#define BODY_FULL_STATUS 507
#define BODY_FULL_ERRNO (-ENOSPC)

static const struct paste_body_config default_cfg;

static uint32_t reserve_of(const struct paste_body_config *cfg)
{
	return cfg->reserve ? cfg->reserve : PASTE_BODY_DEFAULT_RESERVE;
}

uint64_t paste_body_max(const struct paste_body_config *cfg, const struct paste_store *st)
{
	if (!cfg)
		cfg = &default_cfg;
	uint64_t bs = paste_store_geom(st)->buf_size;
	uint64_t cap = (uint64_t)PASTE_BODY_MAX_EXTENTS * bs;
	/* A dense copy of the body must fit in max_held: it is where the
	 * collection falls back to when holding would pin more. */
	if (cfg->max_held && cfg->max_held / bs * bs < cap)
		cap = cfg->max_held / bs * bs;
	return cap;
}

int paste_body_begin(struct paste_body *b, const struct paste_body_config *cfg,
		     const struct paste_store *st, uint64_t len)
{
	/* Starting over a body that still holds buffers would leak them. */
	if (b->n || b->bufs)
		return -EBUSY;
	if (len > paste_body_max(cfg, st))
		return -E2BIG;
	b->n = 0;
	b->bufs = 0;
	b->len = b->left = len;
	b->copying = false;
	b->error = 0;
	return 0;
}

static void drop_refs(struct paste_body *b, struct paste_store *st)
{
	for (uint32_t i = 0; i < b->n; i++)
		paste_store_unref(st, b->ext[i].buf, false);
	b->n = 0;
	b->bufs = 0;
	b->copying = false;
}

/* Give back at once what a body that cannot complete holds: its bytes
 * will never be logged, and the store is short of buffers just now. */
static int body_fail(struct paste_body *b, struct paste_store *st)
{
	drop_refs(b, st);
	b->error = BODY_FULL_STATUS;
	return BODY_FULL_ERRNO;
}

/* The dense copy both feed and copy make: fill the last copy buffer,
 * then take fresh ones (the store's mutex each). The caller has counted
 * the bytes off b->left. */
static int copy_in(struct paste_body *b, struct paste_store *st, uint32_t reserve,
		   const uint8_t *src, uint64_t len)
{
	uint32_t bs = paste_store_geom(st)->buf_size;
	while (len) {
		if (!b->copying || b->ext[b->n - 1].len == bs) {
			uint32_t idx;
			if (b->n == PASTE_BODY_MAX_EXTENTS || paste_store_nfree(st) < reserve ||
			    paste_store_alloc(st, &idx, 1) != 1)
				return body_fail(b, st);
			b->ext[b->n++] = (struct paste_extent){ idx, 0, 0 };
			b->bufs++;
			b->copying = true;
		}
		struct paste_extent *e = &b->ext[b->n - 1];
		uint32_t k = bs - e->len < len ? bs - e->len : (uint32_t)len;
		memcpy(paste_store_buf(st, e->buf) + e->len, src, k);
		e->len += k;
		src += k;
		len -= k;
	}
	return 0;
}

int paste_body_feed(struct paste_body *b, const struct paste_body_config *cfg,
		    struct paste_port *pt, const struct paste_event *ev,
		    uint32_t off, uint32_t len)
{
	if (!cfg)
		cfg = &default_cfg;
	if (len > b->left || ev->type != PASTE_EV_DATA || (uint64_t)off + len > ev->len)
		return -EINVAL;
	b->left -= len;
	if (b->error)
		return BODY_FULL_ERRNO;   /* read and dropped; the reply says why */
	if (!len)
		return 0;                 /* no empty extent, nothing held */
	struct paste_store *st = pt->store;
	uint32_t bs = paste_store_geom(st)->buf_size;
	uint32_t reserve = reserve_of(cfg);
	if (!cfg->copy && ev->buf != PASTE_NO_BUF && b->n < PASTE_BODY_MAX_EXTENTS) {
		/* Hold in place while the extents left can still take the rest
		 * of the body densely copied (a body trickling in tiny reads
		 * would otherwise run out of extents), and while the buffers
		 * held plus this one plus that dense copy stay within max_held.
		 * b->left is already the rest after this read. */
		uint64_t rest = b->left;
		uint64_t room = (uint64_t)(PASTE_BODY_MAX_EXTENTS - b->n - 1) * bs;
		uint64_t pinned = ((uint64_t)b->n + 1 + (rest + bs - 1) / bs) * bs;
		if (room >= rest && (!cfg->max_held || pinned <= cfg->max_held) &&
		    paste_store_nfree(st) >= reserve && paste_port_hold(pt, ev) == 0) {
			b->ext[b->n++] = (struct paste_extent){ ev->buf, ev->off + off, len };
			b->bufs++;
			b->copying = false;   /* a partly filled copy buffer stays as it is */
			return 0;
		}
	}
	return copy_in(b, st, reserve, ev->data + off, len);
}

int paste_body_copy(struct paste_body *b, const struct paste_body_config *cfg,
		    struct paste_store *st, const void *p, uint64_t len)
{
	if (!cfg)
		cfg = &default_cfg;
	if (len > b->left)
		return -EINVAL;
	b->left -= len;
	if (b->error)
		return BODY_FULL_ERRNO;
	return copy_in(b, st, reserve_of(cfg), p, len);
}

void paste_body_release(struct paste_body *b, struct paste_store *st)
{
	drop_refs(b, st);
	b->len = b->left = 0;
	b->error = 0;
}
