/*
 * kv_copy.h - a key's value copied under another key (COPY): kv_copy.c.
 */
#ifndef PASTE_SERVICES_KV_COPY_H
#define PASTE_SERVICES_KV_COPY_H

#include "kv.h"

/* Put the value of a key found as o (kv_lookup) under dst, of the same or
 * another database, with o's type and deadline; what dst held is
 * replaced (a collection there dropped). A string shares o's extents (no
 * byte is copied: the tree takes its own references). A collection (or a
 * string in chunks) is copied member by member (chunk by chunk, sharing
 * their extents) under a new id, the record last: a grave named
 * by the new id is written first and goes in the record's group, so a
 * crash or an error part way leaves members the sweeper deletes, never a
 * half collection under dst. dst must not be o's own key. 0, or as
 * kv_put (-ENOSPC, the store's failure). */
int kv_copy(struct kv *kv, const struct kv_obj *o, struct kv_key *dst);

#endif
