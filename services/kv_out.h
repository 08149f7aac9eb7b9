/*
 * kv_out.h - a reply of many values (LRANGE, LPOP with a count, BLPOP's
 * answer to a blocked client, ...) built in a small buffer and queued as
 * it fills: lines and small values are copied in, and each value over
 * KV_PACK_MAX bytes is queued from the store buffers it lies in
 * (paste_port_send_extents), between two fills: no DRAM copy of a large
 * value. Inside EXEC (x->capture) a large value is copied into the
 * gathered replies instead, so replies keep their order; CLIENT REPLY
 * OFF/SKIP send nothing.
 *
 * Use: kv_out_init, then kv_out_* in reply order, then kv_out_end (0, or
 * -EIO: the store failed and the connection was answered so). After the
 * first failure every call does nothing.
 */
#ifndef PASTE_SERVICES_KV_OUT_H
#define PASTE_SERVICES_KV_OUT_H

#include "kv.h"
#include "resp.h"

struct kv_out {
	struct resp_ctx *x;
	int r;                          /* the first error (-EIO) */
	size_t len;
	char buf[8192];
};

void kv_out_init(struct kv_out *o, struct resp_ctx *x);
int kv_out_end(struct kv_out *o);
void kv_out_put(struct kv_out *o, const void *p, size_t n);
/* The connection's protocol: 2 or 3. */
int kv_out_proto(const struct kv_out *o);
void kv_out_array(struct kv_out *o, uint64_t n);
void kv_out_map(struct kv_out *o, uint64_t n);   /* RESP2 "*2n", RESP3 "%n" */
void kv_out_null(struct kv_out *o);          /* RESP2 "$-1", RESP3 "_" */
void kv_out_null_array(struct kv_out *o);    /* RESP2 "*-1", RESP3 "_" */
void kv_out_int(struct kv_out *o, int64_t v);
void kv_out_bulk(struct kv_out *o, const void *p, size_t n);
/* A bulk of the value in ext[0..n) (len bytes), as it lies in the store. */
void kv_out_value(struct kv_out *o, struct kv *kv, const struct paste_extent *ext, uint32_t n,
		  uint32_t len);
/* The same for an element that may be in chunks (kv_elem, kv.h: big its
 * id, len its length), sent a chunk at a time from where it lies. */
void kv_out_elem(struct kv_out *o, struct kv *kv, const struct paste_extent *ext, uint32_t n,
		 uint32_t len, uint64_t big);

#endif
