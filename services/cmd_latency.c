/*
 * cmd_latency.c - LATENCY and INFO latencystats (pkvs_resp.h), as Redis
 * 7.0 answers them.
 *
 * Per command, a histogram of its run times (latency-tracking yes, the
 * default): log-linear buckets, 16 per power of two (6 % wide), of
 * nanoseconds up to 1 s (Redis's clamp). Recording is a bucket index
 * and an increment in kv_run (kv_latency_bucket, pkvs_resp.h); a
 * command's buckets (4.8 KiB) are allocated at its first call. LATENCY HISTOGRAM gives the
 * cumulative counts at 1, 2, 4, ... microseconds (powers of two of
 * nanoseconds from 1024, Redis's points); INFO latencystats the
 * configured percentiles (latency-tracking-info-percentiles) as the
 * upper edge of the bucket they fall in.
 *
 * The latency monitor: an event (a command, a fast command, an active
 * expiry step) that took latency-monitor-threshold milliseconds or more
 * is kept per event name, one sample per second (the largest), the last
 * 160, with the event's all-time largest.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pkvs_resp.h"

#define SUB 16                                  /* buckets per power of two */
#define NBUCKETS KV_LAT_BUCKETS                 /* up to 2^41 ns */
#define TS_LEN 160
#define MAX_EVENTS 8

bool kv_latency_tracking = true;
uint64_t kv_latency_ns = UINT64_MAX;            /* latency-monitor-threshold; UINT64_MAX: off */

/* The largest value bucket i holds. */
static uint64_t bucket_high(unsigned i)
{
	if (i < SUB)
		return i;
	unsigned m = i / SUB + 3, sub = i % SUB;
	return (((uint64_t)SUB + sub) << (m - 4)) + ((1ull << (m - 4)) - 1);
}

void kv_latency_record(struct kv_cmd_rt *rt, uint64_t ns)
{
	if (!rt->lat && !(rt->lat = calloc(NBUCKETS, sizeof(*rt->lat))))
		return;
	rt->lat[kv_latency_bucket(ns)]++;
}

/* A histogram's calls: the sum of its buckets (kept by no counter, so
 * that a call adds to one word). */
static uint64_t total_of(const uint64_t *lat)
{
	uint64_t t = 0;
	for (unsigned i = 0; i < NBUCKETS; i++)
		t += lat[i];
	return t;
}

void kv_latency_reset(struct kv_cmd_rt *rt)
{
	free(rt->lat);
	rt->lat = NULL;
}

/* ------------------------------------------------------------ events */

static struct event {
	char name[24];
	uint32_t max, idx;
	struct sample {
		uint32_t time, ms;            /* time 0: an empty slot */
	} s[TS_LEN];
} events[MAX_EVENTS];
static uint32_t nevents;

static struct event *event_find(const char *p, size_t len)
{
	for (uint32_t i = 0; i < nevents; i++)
		if (strlen(events[i].name) == len && !memcmp(events[i].name, p, len))
			return &events[i];
	return NULL;
}

void kv_latency_event(const char *name, uint64_t ms)
{
	struct event *e = event_find(name, strlen(name));
	if (!e) {
		if (nevents == MAX_EVENTS)
			return;
		e = &events[nevents++];
		memset(e, 0, sizeof(*e));
		snprintf(e->name, sizeof(e->name), "%s", name);
	}
	uint32_t now = (uint32_t)time(NULL), v = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
	if (v > e->max)
		e->max = v;
	struct sample *prev = &e->s[(e->idx + TS_LEN - 1) % TS_LEN];
	if (prev->time == now) {                /* one sample a second: its largest */
		if (v > prev->ms)
			prev->ms = v;
		return;
	}
	e->s[e->idx] = (struct sample){ now, v };
	e->idx = (e->idx + 1) % TS_LEN;
}

void kv_latency_setting(const char *name, const char *value)
{
	if (!strcmp(name, "latency-tracking")) {
		kv_latency_tracking = !strcmp(value, "yes");
	} else if (!strcmp(name, "latency-monitor-threshold")) {
		long long ms = atoll(value);
		kv_latency_ns = ms > 0 ? (uint64_t)ms * 1000000u : UINT64_MAX;
	}
}

/* ------------------------------------------------------------ LATENCY */

/* The samples of e into out, oldest first: how many. */
static uint32_t samples(const struct event *e, struct sample *out)
{
	uint32_t n = 0;
	for (uint32_t j = 0; j < TS_LEN; j++) {
		const struct sample *s = &e->s[(e->idx + j) % TS_LEN];
		if (s->time)
			out[n++] = *s;
	}
	return n;
}

static void cmd_latency_latest(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			       uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_array(x, nevents);
	for (uint32_t i = 0; i < nevents; i++) {
		const struct event *e = &events[i];
		const struct sample *last = &e->s[(e->idx + TS_LEN - 1) % TS_LEN];
		resp_array(x, 4);
		resp_bulk(x, e->name, strlen(e->name));
		resp_int(x, last->time);
		resp_int(x, last->ms);
		resp_int(x, e->max);
	}
}

static void cmd_latency_history(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)kv, (void)n;
	const struct event *e = event_find(a[2].p, a[2].len);
	struct sample s[TS_LEN];
	uint32_t ns = e ? samples(e, s) : 0;
	resp_array(x, ns);
	for (uint32_t i = 0; i < ns; i++) {
		resp_array(x, 2);
		resp_int(x, s[i].time);
		resp_int(x, s[i].ms);
	}
}

static uint32_t reset_event(struct event *e)
{
	uint32_t i = (uint32_t)(e - events);
	memmove(&events[i], &events[i + 1], (nevents - i - 1) * sizeof(*e));
	nevents--;
	return 1;
}

static void cmd_latency_reset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv;
	uint32_t resets = 0;
	if (n == 2) {
		resets = nevents;
		nevents = 0;
	}
	for (uint32_t j = 2; j < n; j++) {
		struct event *e = event_find(a[j].p, a[j].len);
		if (e)
			resets += reset_event(e);
	}
	resp_int(x, resets);
}

/* A text reply (resp_out_send_text: RESP3's verbatim string). */
static void reply_text(struct resp_ctx *x, const char *s, size_t len)
{
	struct resp_out o = { 0 };
	resp_out_put(&o, s, len);
	resp_out_send_text(x, &o);
}

/* An event's samples as a chart of 4 rows, a column per sample (the last
 * 80): '#' where the sample reaches the row, '_' at the bottom. */
static void cmd_latency_graph(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv, (void)n;
	const struct event *e = event_find(a[2].p, a[2].len);
	if (!e) {
		resp_error(x, "ERR No samples available for event '%.*s'", (int)a[2].len, a[2].p);
		return;
	}
	struct sample s[TS_LEN];
	uint32_t ns = samples(e, s), from = ns > 80 ? ns - 80 : 0, lo = UINT32_MAX, hi = 0;
	for (uint32_t i = from; i < ns; i++) {
		lo = s[i].ms < lo ? s[i].ms : lo;
		hi = s[i].ms > hi ? s[i].ms : hi;
	}
	char out[1024];
	int at = snprintf(out, sizeof(out), "%s - high %u ms, low %u ms (all time high %u ms)\n", e->name,
			  hi, lo == UINT32_MAX ? 0 : lo, e->max);
	for (int row = 4; row >= 1; row--) {
		for (uint32_t i = from; i < ns; i++) {
			uint32_t level = hi > lo ? 1 + (s[i].ms - lo) * 3 / (hi - lo) : 4;
			out[at++] = level >= (uint32_t)row ? (row == 1 ? '_' : '#') : ' ';
		}
		out[at++] = '\n';
	}
	reply_text(x, out, (size_t)at);
}

static void cmd_latency_doctor(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			       uint32_t n)
{
	(void)kv, (void)a, (void)n;
	char out[2048];
	int at;
	if (kv_latency_ns == UINT64_MAX)
		at = snprintf(out, sizeof(out), "Latency monitoring is off: CONFIG SET "
			      "latency-monitor-threshold <milliseconds> turns it on; events that take "
			      "that long or more are then kept here.\n");
	else if (!nevents)
		at = snprintf(out, sizeof(out), "No event took %" PRIu64 " ms or more "
			      "(latency-monitor-threshold) since the last reset.\n", kv_latency_ns / 1000000);
	else
		at = snprintf(out, sizeof(out), "Events that took %" PRIu64 " ms or more:\n",
			      kv_latency_ns / 1000000);
	for (uint32_t i = 0; i < nevents && at < (int)sizeof(out) - 200; i++) {
		struct sample s[TS_LEN];
		uint32_t ns = samples(&events[i], s);
		uint64_t sum = 0;
		for (uint32_t j = 0; j < ns; j++)
			sum += s[j].ms;
		at += snprintf(out + at, sizeof(out) - (size_t)at,
			       "%u. %s: %u seconds with one (average %" PRIu64 " ms), all time high %u ms.%s\n",
			       i + 1, events[i].name, ns, ns ? sum / ns : 0, events[i].max,
			       !strcmp(events[i].name, "command") || !strcmp(events[i].name, "fast-command")
			       ? " SLOWLOG GET shows which commands." : "");
	}
	reply_text(x, out, (size_t)at);
}

/* A command's histogram: {calls, histogram_usec: {us: cumulative}} at
 * 1024 ns * 2^k, the points where the count grew. */
static void reply_cdf(struct resp_ctx *x, const struct kv_cmd_rt *rt)
{
	uint64_t total = total_of(rt->lat), cum = 0, prev = 0;
	uint32_t points = 0;
	uint64_t us[24], at[24];
	unsigned b = 0;
	for (unsigned k = 0; k < 24 && prev < total; k++) {
		uint64_t edge = 1024ull << k;
		while (b < NBUCKETS && bucket_high(b) < edge)
			cum += rt->lat[b++];
		if (cum > prev) {
			us[points] = (edge - 1) / 1000;
			at[points++] = cum;
		}
		prev = cum;
	}
	resp_map(x, 2);
	resp_bulk(x, "calls", 5);
	resp_int(x, (int64_t)total);
	resp_bulk(x, "histogram_usec", 14);
	resp_map(x, points);
	for (uint32_t i = 0; i < points; i++) {
		resp_int(x, (int64_t)us[i]);
		resp_int(x, (int64_t)at[i]);
	}
}

static void cmd_latency_histogram(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				  uint32_t n)
{
	(void)kv;
	/* The commands asked for (all: NULL), and their subcommands; unknown
	 * names are skipped. Two passes: the count, then the map. */
	for (int pass = 0; pass < 2; pass++) {
		uint32_t count = 0;
		for (uint32_t i = 0; i < kv_cmd_count(); i++) {
			struct kv_cmd_rt *rt = kv_cmd_at(i);
			if (!rt->lat)
				continue;
			bool asked = n == 2;
			for (uint32_t j = 2; j < n && !asked; j++) {
				struct kv_cmd_rt *named = kv_cmd_lookup(a[j].p, a[j].len);
				asked = named && (named == rt || rt->parent == named);
			}
			if (!asked)
				continue;
			count++;
			if (pass == 1) {
				resp_bulk(x, rt->c->name, strlen(rt->c->name));
				reply_cdf(x, rt);
			}
		}
		if (pass == 0)
			resp_map(x, count);
	}
}

static void cmd_latency_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const lines[] = {
		"LATENCY <subcommand> [<arg> ...]. Subcommands are:",
		"DOCTOR",
		"    A report of the events kept, in words.",
		"GRAPH <event>",
		"    A chart of the event's samples.",
		"HISTORY <event>",
		"    The event's samples: (time, milliseconds), oldest first.",
		"LATEST",
		"    Per event: its name, last sample's time and milliseconds, largest ever.",
		"RESET [<event> ...]",
		"    Forgets the events named (default: all of them).",
		"HISTOGRAM [<command> ...]",
		"    Per command (default: every one that ran): its calls and the cumulative",
		"    count of its run times at 1, 2, 4, ... microseconds.",
		"HELP",
		"    This text.",
	};
	uint32_t nl = sizeof(lines) / sizeof(lines[0]);
	resp_array(x, nl);
	for (uint32_t i = 0; i < nl; i++)
		resp_simple(x, lines[i]);
}

/* INFO latencystats: one line per command that ran. */
void kv_latency_info(struct resp_out *o)
{
	const char *cfg = kv_config_kept("latency-tracking-info-percentiles");
	double pct[16];
	uint32_t np = 0;
	for (const char *p = cfg ? cfg : "50 99 99.9"; *p && np < 16;) {
		char *end;
		double v = strtod(p, &end);
		if (end == p)
			break;
		pct[np++] = v;
		p = end;
	}
	for (uint32_t i = 0; i < kv_cmd_count(); i++) {
		const struct kv_cmd_rt *rt = kv_cmd_at(i);
		if (!rt->lat)
			continue;
		char line[512];
		int at = snprintf(line, sizeof(line), "latency_percentiles_usec_%s:", rt->c->name);
		uint64_t total = total_of(rt->lat);
		for (uint32_t j = 0; j < np; j++) {
			uint64_t want = (uint64_t)ceil(pct[j] / 100.0 * (double)total), cum = 0;
			unsigned b = 0;
			want = want ? want : 1;
			while (b < NBUCKETS - 1 && (cum += rt->lat[b]) < want)
				b++;
			at += snprintf(line + at, sizeof(line) - (size_t)at, "%sp%g=%.3f", j ? "," : "", pct[j],
				       (double)bucket_high(b) / 1000.0);
		}
		at += snprintf(line + at, sizeof(line) - (size_t)at, "\r\n");
		resp_out_put(o, line, (size_t)at);
	}
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_latency[] = {
	{ "latency", -2, "", "server", "LATENCY subcommands: slow events and per-command latency histograms.", NULL, 0, 0, 0 },
	{ "latency|doctor", 2, "admin noscript loading stale", "server", "A report, in words, of the events kept.", cmd_latency_doctor, 0, 0, 0 },
	{ "latency|graph", 3, "admin noscript loading stale", "server", "A chart of an event's samples.", cmd_latency_graph, 0, 0, 0 },
	{ "latency|help", 2, "loading stale", "server", "What LATENCY's subcommands do.", cmd_latency_help, 0, 0, 0 },
	{ "latency|histogram", -2, "admin noscript loading stale", "server", "Per command, its calls and the cumulative counts of its run times.", cmd_latency_histogram, 0, 0, 0 },
	{ "latency|history", 3, "admin noscript loading stale", "server", "An event's samples, oldest first.", cmd_latency_history, 0, 0, 0 },
	{ "latency|latest", 2, "admin noscript loading stale", "server", "Each event's last sample and largest.", cmd_latency_latest, 0, 0, 0 },
	{ "latency|reset", -2, "admin noscript loading stale", "server", "Forgets events; answers how many.", cmd_latency_reset, 0, 0, 0 },
	{ 0 }
};
