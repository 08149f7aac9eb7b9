/*
 * kv_rdb_fmt.h - RDB's type and opcode numbers, shared by the writer
 * (kv_rdb.c) and the reader (kv_rdb_load.c).
 */
#ifndef PASTE_SERVICES_KV_RDB_FMT_H
#define PASTE_SERVICES_KV_RDB_FMT_H

/* RDB's types and opcodes (Redis's rdb.h numbers: a format, not code). */
enum {
	T_STRING = 0, T_LIST = 1, T_SET = 2, T_ZSET = 3, T_HASH = 4, T_ZSET_2 = 5,
	T_HASH_ZIPMAP = 9, T_LIST_ZIPLIST = 10, T_SET_INTSET = 11, T_ZSET_ZIPLIST = 12,
	T_HASH_ZIPLIST = 13, T_LIST_QUICKLIST = 14, T_HASH_LISTPACK = 16,
	T_ZSET_LISTPACK = 17, T_LIST_QUICKLIST_2 = 18, T_SET_LISTPACK = 20,
	OP_FUNCTION2 = 0xF5, OP_MODULE_AUX = 0xF7, OP_IDLE = 0xF8, OP_FREQ = 0xF9, OP_AUX = 0xFA,
	OP_RESIZEDB = 0xFB, OP_EXPIRE_MS = 0xFC, OP_EXPIRE = 0xFD, OP_SELECTDB = 0xFE, OP_EOF = 0xFF,
};

#endif
