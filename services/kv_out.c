/*
 * kv_out.c - replies of many values, large ones sent from where they lie
 * (kv_out.h).
 */
#include <errno.h>
#include <string.h>

#include "kv_out.h"

void kv_out_init(struct kv_out *o, struct resp_ctx *x)
{
	o->x = x;
	o->r = 0;
	o->len = 0;
}

static void flush(struct kv_out *o)
{
	if (o->len && !o->r)
		o->r = resp_send(o->x, o->buf, o->len);
	o->len = 0;
}

int kv_out_end(struct kv_out *o)
{
	flush(o);
	return o->r;
}

void kv_out_put(struct kv_out *o, const void *p, size_t n)
{
	if (o->len + n > sizeof(o->buf)) {
		flush(o);
		if (n > sizeof(o->buf)) {
			if (!o->r)
				o->r = resp_send(o->x, p, n);
			return;
		}
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

/* A line made by one of paste_resp_put_*. */
#define LINE(o, call)                                           \
	do {                                                    \
		char l_[48];                                    \
		int n_ = (call);                                \
		if (n_ > 0)                                     \
			kv_out_put((o), l_, (size_t)n_);        \
	} while (0)

int kv_out_proto(const struct kv_out *o)
{
	return o->x->r->proto == 3 ? 3 : 2;
}

void kv_out_array(struct kv_out *o, uint64_t n) { LINE(o, paste_resp_put_array(l_, sizeof(l_), n)); }
void kv_out_map(struct kv_out *o, uint64_t n) { LINE(o, paste_resp_put_map(l_, sizeof(l_), kv_out_proto(o), n)); }
void kv_out_null(struct kv_out *o) { LINE(o, paste_resp_put_null(l_, sizeof(l_), kv_out_proto(o))); }
void kv_out_null_array(struct kv_out *o) { LINE(o, paste_resp_put_null_array(l_, sizeof(l_), kv_out_proto(o))); }
void kv_out_int(struct kv_out *o, int64_t v) { LINE(o, paste_resp_put_int(l_, sizeof(l_), v)); }

void kv_out_bulk(struct kv_out *o, const void *p, size_t n)
{
	LINE(o, paste_resp_put_bulk_head(l_, sizeof(l_), n));
	kv_out_put(o, p, n);
	kv_out_put(o, "\r\n", 2);
}

void kv_out_value(struct kv_out *o, struct kv *kv, const struct paste_extent *ext, uint32_t n,
		  uint32_t len)
{
	struct resp_ctx *x = o->x;
	LINE(o, paste_resp_put_bulk_head(l_, sizeof(l_), len));
	if (len <= KV_PACK_MAX || x->capture || x->r->reply_off || x->r->skip) {
		/* Copied: small, or gathered by EXEC (its replies are queued
		 * once it committed), or not sent at all. */
		for (uint32_t i = 0; i < n; i++)
			kv_out_put(o, paste_store_buf(kv->store, ext[i].buf) + ext[i].off, ext[i].len);
	} else {
		flush(o);
		if (!o->r && paste_port_send_extents(x->w->port, x->conn, ext, n, 0, len,
						     PASTE_SEND_DURABLE)) {
			resp_reply_failed(x);
			o->r = -EIO;
		}
	}
	kv_out_put(o, "\r\n", 2);
}

static int send_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		      uint64_t len)
{
	struct kv_out *o = arg;
	return paste_port_send_extents(o->x->w->port, o->x->conn, ext, n, skip, len, PASTE_SEND_DURABLE);
}

struct copy_to {
	struct kv_out *o;
	const struct kv *kv;
};

static int copy_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		      uint64_t len)
{
	struct copy_to *c = arg;
	char b[4096];
	while (len) {
		size_t k = paste_store_read(c->kv->store, ext, n, skip, b, len < sizeof(b) ? (size_t)len : sizeof(b));
		if (!k)
			return -EBADMSG;
		kv_out_put(c->o, b, k);
		skip += k;
		len -= k;
	}
	return 0;
}

void kv_out_elem(struct kv_out *o, struct kv *kv, const struct paste_extent *ext, uint32_t n,
		 uint32_t len, uint64_t big)
{
	if (!big) {
		kv_out_value(o, kv, ext, n, len);
		return;
	}
	struct resp_ctx *x = o->x;
	LINE(o, paste_resp_put_bulk_head(l_, sizeof(l_), len));
	/* A chunk at a time, from the buffers it lies in (copied where
	 * kv_out_value copies). */
	struct copy_to c = { o, kv };
	bool copy = x->capture || x->r->reply_off || x->r->skip;
	if (!copy)
		flush(o);
	if (!o->r && kv_elem_each(kv, ext, n, len, big, 0, len, copy ? copy_piece : send_piece,
				  copy ? (void *)&c : (void *)o)) {
		resp_reply_failed(x);
		o->r = -EIO;
	}
	kv_out_put(o, "\r\n", 2);
}
