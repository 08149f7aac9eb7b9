/*
 * cmd_tracking.h - connections that watch what others do: MONITOR
 * (cmd_monitor.c: every command run, as Redis prints it) and client-side
 * caching (cmd_tracking.c: CLIENT TRACKING, CACHING, GETREDIR,
 * TRACKINGINFO; kv_tracking.c: the tracking table and the invalidation
 * messages), and the hooks dispatch,
 * CLIENT, RESET, INFO and CONFIG call.
 *
 * Cost when unused: kv_watch is 0 while no connection monitors or tracks
 * keys, and a command then pays one test of it in kv_run; the change
 * listener (kv_touch_add) is installed only while a connection tracks.
 */
#ifndef PASTE_SERVICES_CMD_TRACKING_H
#define PASTE_SERVICES_CMD_TRACKING_H

#include "pkvs_resp.h"

/* KV_WATCH_MONITOR: a connection monitors; KV_WATCH_TRACKING: one tracks
 * keys, or invalidations wait to be sent. */
enum { KV_WATCH_MONITOR = 1u << 0, KV_WATCH_TRACKING = 1u << 1 };
extern uint32_t kv_watch;

/* kv_run, while kv_watch: before and after a command runs, at every
 * level (a command of EXEC or of a script too). */
void kv_watch_before(struct resp_ctx *x, struct kv *kv, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc);
void kv_watch_after(struct resp_ctx *x, struct kv *kv, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc);
/* Dispatch, while kv_watch: the command and the blocked clients it
 * served are done (invalidations go out after their replies). */
void kv_watch_done(struct kv *kv);
/* Every event-loop pass (expiry's invalidations, BCAST's, the tracking
 * table's bound). */
void kv_watch_pass(struct kv *kv);

/* ---- cmd_monitor.c */
/* Which of argv's arguments MONITOR and SLOWLOG show as "(redacted)", as
 * Redis redacts them: NULL (none), small (three or fewer), or an array
 * of argc the caller frees. */
bool *kv_redactions(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc,
		    bool small[3]);
extern const struct kv_cmd kv_cmds_monitor[];
/* The protocol ran its own HELLO or QUIT (server/resp.c): monitors see it,
 * HELLO's AUTH arguments redacted. */
void kv_monitor_own(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc);
/* A SET whose value streamed (pkvs_resp.c's kv_streamed_end) wrote key k:
 * monitors see it. */
void kv_monitor_set(struct resp_ctx *x, struct kv *kv, const struct kv_key *k);
/* x monitors (CLIENT LIST's O); RESET and the close end it. */
bool kv_monitor_is(const struct resp_ctx *x);
void kv_monitor_reset(struct resp_ctx *x);
/* kv_watch's KV_WATCH_TRACKING bit (cmd_tracking.c keeps it). */
void kv_watch_tracking(bool on);

/* ---- kv_tracking.c and cmd_tracking.c */
/* The hooks' tracking part (cmd_monitor.c calls them): outer is the
 * dispatched command (not one of EXEC or a script), script a command a
 * script runs. */
void kv_track_before(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc, bool outer, bool script);
void kv_track_after(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc, bool outer, bool script);
void kv_track_flush(struct kv *kv, bool pass);
/* kv_watch fell to 0: what the hooks knew of the command under way goes. */
void kv_track_idle(void);
/* CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO (a[1] says which). */
void kv_client_tracking(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n);
/* RESET (tracking off) and the close (its state freed). */
void kv_tracking_reset(struct resp_ctx *x);
void kv_tracking_closed(struct resp_ctx *x);
/* CLIENT LIST: the flags t, R, B written at f (their count), and redir=. */
int kv_tracking_flags(const struct resp_ctx *x, char *f);
int64_t kv_tracking_redir(const struct resp_ctx *x);
/* INFO: tracking_clients, tracking_total_keys, _items, _prefixes. */
struct kv_tracking_info {
	uint64_t clients, keys, items, prefixes;
};
void kv_tracking_info(struct kv_tracking_info *out);
/* CONFIG SET tracking-table-max-keys (0: no bound). */
void kv_tracking_max_keys(uint64_t n);

#endif
