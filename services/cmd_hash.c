/*
 * cmd_hash.c - the hash commands (pkvs_resp.h).
 */
#include "pkvs_resp.h"

const struct kv_cmd kv_cmds_hash[] = {
	{ 0 }
};
