/*
 * pkvs_http_hash.h - what pkvs's HTTP front end (pkvs_http.c) answers for
 * a hash and for a key's type in the listing (pkvs_http_hash.c).
 */
#ifndef PASTE_SERVICES_PKVS_HTTP_HASH_H
#define PASTE_SERVICES_PKVS_HTTP_HASH_H

#include "http.h"
#include "kv.h"

/* GET or HEAD /kv/<key> of a hash (o as kv_lookup found it at k): 200
 * with its fields as one JSON object, {"field":"value",...}. A name or
 * value that is valid UTF-8 is a JSON string; a value that is not is
 * {"base64":"..."}; a name that is not, or that begins with "base64:",
 * is "base64:" and its base64. */
void pkvs_http_hash_get(struct http_ctx *x, struct kv *kv, struct kv_key *k, struct kv_obj *o);

/* The listing's fields after a key's name: ,"type":"<type>" and for a
 * string ,"len":<bytes> (vlen), for a hash ,"fields":<count>, for
 * another collection ,"count":<members>. The key
 * (db 0, key[0..klen)) was just returned by kv_scan_next. Writes at most
 * 64 bytes at out + at; returns the new at. */
size_t pkvs_http_list_type(struct kv *kv, char *out, size_t at, size_t cap, const uint8_t *key,
			   size_t klen, enum kv_type type, uint32_t vlen);

#endif
