/*
 * kv_notify.c - keyspace notifications (kv_notify.h): Redis's
 * notify-keyspace-events, its class letters, and the two channels each
 * event is published on, __keyspace@<db>__:<key> (the event's name) and
 * __keyevent@<db>__:<event> (the key), in that order.
 *
 * Where events come from. A command emits its own (kv_notify, in the
 * command's code beside the change, as Redis's commands call
 * notifyKeyspaceEvent: which events a command emits depends on what it
 * did, so a table of events per command row could not say it). The
 * core's two, "expired" (active expiry, a lookup or a write that found a
 * key's deadline passed) and "new" (a key added), come from its change
 * listener (kv_touch_add), registered only while one of those classes is
 * on and somebody subscribes: otherwise a change costs nothing here.
 *
 * Cost: while no class is on or nobody subscribes to a channel or a
 * pattern, kv_notify_on is 0 and a command's kv_notify is one branch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_pubsub.h"
#include "kv_notify.h"

#define NOTIFY_ALL (KV_NOTIFY_GENERIC | KV_NOTIFY_STRING | KV_NOTIFY_LIST | KV_NOTIFY_SET | \
		    KV_NOTIFY_HASH | KV_NOTIFY_ZSET | KV_NOTIFY_EXPIRED | KV_NOTIFY_EVICTED |  \
		    KV_NOTIFY_STREAM | KV_NOTIFY_MODULE)

uint32_t kv_notify_on;
static uint32_t flags;                  /* the setting */
static bool listening;                  /* on kv's change listeners */

/* The letters and their classes, in Redis's canonical order (the classes
 * of A, then n; K, E and m come last). */
static const struct {
	char c;
	uint32_t fl;
} letters[] = {
	{ 'g', KV_NOTIFY_GENERIC }, { '$', KV_NOTIFY_STRING }, { 'l', KV_NOTIFY_LIST },
	{ 's', KV_NOTIFY_SET }, { 'h', KV_NOTIFY_HASH }, { 'z', KV_NOTIFY_ZSET },
	{ 'x', KV_NOTIFY_EXPIRED }, { 'e', KV_NOTIFY_EVICTED }, { 't', KV_NOTIFY_STREAM },
	{ 'd', KV_NOTIFY_MODULE }, { 'n', KV_NOTIFY_NEW },
	{ 'K', KV_NOTIFY_KEYSPACE }, { 'E', KV_NOTIFY_KEYEVENT }, { 'm', KV_NOTIFY_KEY_MISS },
};
#define NLETTERS (sizeof(letters) / sizeof(letters[0]))

int kv_notify_parse(const char *p, size_t len)
{
	uint32_t fl = 0;
	for (size_t i = 0; i < len; i++) {
		if (p[i] == 'A') {
			fl |= NOTIFY_ALL;
			continue;
		}
		size_t j = 0;
		while (j < NLETTERS && letters[j].c != p[i])
			j++;
		if (j == NLETTERS)
			return -1;
		fl |= letters[j].fl;
	}
	return (int)fl;
}

void kv_notify_format(uint32_t fl, char *out)
{
	size_t k = 0;
	bool all = (fl & NOTIFY_ALL) == NOTIFY_ALL;
	if (all)
		out[k++] = 'A';             /* (n then goes unsaid, as in Redis) */
	for (size_t j = 0; j < NLETTERS; j++) {
		bool in_all = (letters[j].fl & (NOTIFY_ALL | KV_NOTIFY_NEW)) != 0;
		if ((fl & letters[j].fl) && !(all && in_all))
			out[k++] = letters[j].c;
	}
	out[k] = 0;
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what);

void kv_notify_sync(struct kv *kv)
{
	static struct kv *the_kv;           /* (one store per process) */
	if (kv)
		the_kv = kv;
	kv = the_kv;
	bool some = kv_pubsub_listeners() > 0 && (flags & (KV_NOTIFY_KEYSPACE | KV_NOTIFY_KEYEVENT));
	kv_notify_on = some ? flags : 0;
	bool want = (kv_notify_on & (KV_NOTIFY_EXPIRED | KV_NOTIFY_NEW)) != 0;
	if (!kv || want == listening)
		return;
	if (want)
		listening = kv_touch_add(kv, touched, kv) == 0;
	else {
		kv_touch_remove(kv, touched, kv);
		listening = false;
	}
}

void kv_notify_set(struct kv *kv, uint32_t fl)
{
	flags = fl;
	kv_notify_sync(kv);
}

uint32_t kv_notify_get(void)
{
	return flags;
}

/* "__key<space|event>@<db>__:" + tail, in a buffer kept for the next. */
static const uint8_t *channel(const char *kind, uint32_t db, const void *tail, size_t tlen,
			      size_t *len)
{
	static uint8_t *buf;
	static size_t cap;
	char head[48];
	int h = snprintf(head, sizeof(head), "__key%s@%u__:", kind, db);
	if ((size_t)h + tlen > cap) {
		size_t ncap = (size_t)h + tlen + 64;
		uint8_t *p = realloc(buf, ncap);
		if (!p)
			return NULL;
		buf = p;
		cap = ncap;
	}
	memcpy(buf, head, (size_t)h);
	memcpy(buf + h, tail, tlen);
	*len = (size_t)h + tlen;
	return buf;
}

void kv_notify_emit(uint32_t cls, const char *event, const struct kv_key *k)
{
	(void)cls;
	if (!k->p && !k->tlen)
		return;                     /* a whole database: no event */
	/* A short key's bytes are its tree key's (p may be gone by now). */
	const void *key = k->longkey ? (const void *)k->p : k->t + 1;
	size_t klen = k->longkey ? k->len : k->tlen - 1u, elen = strlen(event), clen;
	const uint8_t *c;
	if ((kv_notify_on & KV_NOTIFY_KEYSPACE) && (c = channel("space", k->db, key, klen, &clen)))
		kv_pubsub_publish(c, clen, event, elen, true);
	if ((kv_notify_on & KV_NOTIFY_KEYEVENT) && (c = channel("event", k->db, event, elen, &clen)))
		kv_pubsub_publish(c, clen, key, klen, true);
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what)
{
	(void)arg;
	if (what == KV_TOUCH_EXPIRED)
		kv_notify(KV_NOTIFY_EXPIRED, "expired", k);
	else if (what == KV_TOUCH_CREATED)
		kv_notify(KV_NOTIFY_NEW, "new", k);
}
