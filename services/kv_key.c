/*
 * kv_key.c - how pkvs names its keys in the tree (kv.h, "Keys in the
 * tree"): a user key of a database, the members of a collection, the
 * expiry index, the graves of dropped collections and databases, and the
 * database map.
 *
 * The first byte of every tree key says what it is:
 *
 *   0 .. KV_PHYS_DBS-1  [phys db][user key]                   a key
 *   KV_PFX_EXPIRE       [0xFB][deadline ms BE64][tree key]    expiry index
 *   KV_PFX_SYS          [0xFD][name]                          the database map
 *   KV_PFX_GRAVE        [0xFE][kind][id BE64]                 to sweep
 *   KV_PFX_MEMBER       [0xFF][collection id BE64][kind][member]
 *
 * A user key (or member) longer than KV_INLINE bytes cannot be a tree key
 * as it is (those are 512 bytes at most): it is named by its first
 * KV_LONG_PREFIX bytes, a zero byte and its 128-bit SipHash-2-4 keyed with
 * the store's random uuid, and the whole key is kept with its entry (the
 * first extent of the value, tag bit KV_TAG_LONG) and compared on every
 * lookup. Keys that share their first KV_LONG_PREFIX bytes then sort by
 * their digests, not their bytes.
 */
#include <errno.h>
#include <string.h>

#include "kv.h"

/* Tree key = prefix (pfx bytes) + name, inline or cut and digested. */
static void name(const struct kv *kv, const uint8_t *pfx, uint32_t plen, const void *p,
		 size_t len, struct kv_key *k)
{
	memcpy(k->t, pfx, plen);
	k->longkey = len > KV_INLINE;
	if (!k->longkey) {
		if (len)
			memcpy(k->t + plen, p, len);
		k->tlen = plen + (uint32_t)len;
		return;
	}
	memcpy(k->t + plen, p, KV_LONG_PREFIX);
	k->t[plen + KV_LONG_PREFIX] = 0;
	paste_siphash128(paste_store_geom(kv->store)->uuid, p, len, k->t + plen + KV_LONG_PREFIX + 1);
	k->tlen = plen + KV_LONG_PREFIX + 1 + 16;
}

void kv_key_init(const struct kv *kv, struct kv_key *k, uint32_t db, const void *p, size_t len)
{
	uint8_t pfx = kv->dbmap[db];
	k->db = db;
	k->p = p;
	k->len = len;
	name(kv, &pfx, 1, p, len, k);
}

static void be64(uint8_t *out, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(out, &v, 8);
}

void kv_member_key(const struct kv *kv, struct kv_key *k, uint64_t id, uint8_t kind,
		   const void *m, size_t len)
{
	uint8_t pfx[10] = { KV_PFX_MEMBER };
	be64(pfx + 1, id);
	pfx[9] = kind;
	k->db = 0;
	k->p = m;
	k->len = len;
	name(kv, pfx, sizeof(pfx), m, len, k);
}

uint32_t kv_member_prefix(uint8_t *out, uint64_t id, uint8_t kind)
{
	out[0] = KV_PFX_MEMBER;
	be64(out + 1, id);
	out[9] = kind;
	return 10;
}

uint32_t kv_expire_key(uint8_t *out, int64_t deadline, const struct kv_key *k)
{
	out[0] = KV_PFX_EXPIRE;
	be64(out + 1, (uint64_t)deadline);
	/* A key's tree key is at most 1 + KV_INLINE bytes: it fits. */
	memcpy(out + 9, k->t, k->tlen);
	return 9 + k->tlen;
}

uint32_t kv_grave_key(uint8_t *out, uint8_t kind, uint64_t id)
{
	out[0] = KV_PFX_GRAVE;
	out[1] = kind;
	be64(out + 2, id);
	return 10;
}

bool kv_key_user(const uint8_t *t, uint32_t tlen, const struct kv *kv, uint32_t *db)
{
	if (!tlen || t[0] >= KV_PHYS_DBS)
		return false;
	for (uint32_t d = 0; d < kv->ndbs; d++)
		if (kv->dbmap[d] == t[0]) {
			*db = d;
			return true;
		}
	return false;
}

/* ---- a long name kept with its entry ----------------------------------- */

/* The name's extents: [u32 length, little-endian][the name], copied to
 * the append point as one run (so no extent holds anything else). */
int kv_long_span(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint32_t *next,
		 uint32_t *nlen)
{
	uint8_t h[4];
	if (paste_store_read(kv->store, ext, n, 0, h, 4) != 4)
		return -EBADMSG;
	uint64_t want = 4 + ((uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
			     (uint32_t)h[3] << 24);
	uint64_t got = 0;
	uint32_t i = 0;
	while (i < n && got < want)
		got += ext[i++].len;
	if (got != want)
		return -EBADMSG;
	*next = i;
	*nlen = (uint32_t)(want - 4);
	return 0;
}

bool kv_long_same(const struct kv *kv, const struct paste_extent *ext, uint32_t n, const uint8_t *p,
		  size_t len, uint32_t *next)
{
	uint32_t nlen;
	if (kv_long_span(kv, ext, n, next, &nlen) || nlen != len)
		return false;
	uint64_t at = 0;                 /* offset in [header][name] */
	for (uint32_t i = 0; i < *next; i++) {
		const uint8_t *b = paste_store_buf(kv->store, ext[i].buf) + ext[i].off;
		uint32_t l = ext[i].len, skip = at < 4 ? (uint32_t)(4 - at) : 0;
		if (skip > l)
			skip = l;
		if (memcmp(b + skip, p + (at + skip - 4), l - skip) != 0)
			return false;
		at += l;
	}
	return true;
}

size_t kv_long_read(const struct kv *kv, const struct paste_extent *ext, uint32_t next,
		    uint32_t nlen, uint8_t *out)
{
	return paste_store_read(kv->store, ext, next, 4, out, nlen);
}
