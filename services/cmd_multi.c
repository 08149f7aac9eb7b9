/*
 * cmd_multi.c - transactions (pkvs_resp.h): MULTI, EXEC, DISCARD,
 * WATCH, UNWATCH.
 */
#include "pkvs_resp.h"

bool kv_multi_queue(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc)
{
	(void)x, (void)rt, (void)argv, (void)argc;
	return false;
}

void kv_multi_reject(struct resp_ctx *x)
{
	(void)x;
}

const struct kv_cmd kv_cmds_multi[] = {
	{ 0 }
};
