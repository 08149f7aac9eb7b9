/*
 * cmd_expire.c - deadlines (pkvs_resp.h): EXPIRE, PEXPIRE, EXPIREAT,
 * PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST.
 */
#include "pkvs_resp.h"

const struct kv_cmd kv_cmds_expire[] = {
	{ 0 }
};
