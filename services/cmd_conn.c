/*
 * cmd_conn.c - the connection's commands (pkvs_resp.h): AUTH and who
 * may run what.
 */
#include "pkvs_resp.h"

bool kv_conn_allowed(struct resp_ctx *x, struct kv_cmd_rt *rt)
{
	(void)x, (void)rt;
	return true;
}

const struct kv_cmd kv_cmds_conn[] = {
	{ 0 }
};
