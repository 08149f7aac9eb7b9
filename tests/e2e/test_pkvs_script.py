"""pkvs's scripting (EVAL, EVALSHA, EVAL_RO, SCRIPT, FUNCTION, FCALL)
against Debian's redis-server 7.0.15, byte for byte in RESP2 and RESP3;
a long script's BUSY replies and SCRIPT KILL; SHUTDOWN stopping one; a
script's writes all or none across kill -9; functions kept across a
restart."""
import random
import sys
import threading
import time

import pytest

from conftest import wait_until
from paste_proc import resp_command
from redis_peer import RawConn, peers, redis_peer, run_script  # noqa: F401 (fixtures)

PROTOS = (2, 3)

# (script, numkeys, keys and args...): each run on both servers, replies compared.
SCRIPTS = [
    ("return 'hello'", 0),
    ("return _G", 0),
    ("local a = {}; setmetatable(a,{__index=function() foo() end}) return a", 0),
    ("return 100.5", 0),
    ("return -3.99", 0),
    ("return 1e300", 0),
    ("return true", 0),
    ("return false", 0),
    ("return nil", 0),
    ("return {ok='fine'}", 0),
    ("return {ok='a\r\nb'}", 0),
    ("return {err='ERR this is an error'}", 0),
    ("return {err='MY_CODE custom'}", 0),
    ("return {1,2,3,'ciao',{1,2}}", 0),
    ("return {1,nil,3}", 0),
    ("return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", 2, "a{t}", "b{t}", "c{t}", "d{t}"),
    ("return {double=3.141}", 0),
    ("return {double=0.1}", 0),
    ("return {big_number='123'}", 0),
    ("return {big_number='123\r\n123'}", 0),
    ("return {map={a=1}}", 0),
    ("return {set={a=true}}", 0),
    ("return {verbatim_string={format='txt',string='hi'}}", 0),
    ("return redis.call('set', KEYS[1], ARGV[1])", 1, "k", "v"),
    ("return redis.call('get', KEYS[1])", 1, "k"),
    ("return redis.call('get', 'nosuchkey')", 0),
    ("local foo = redis.pcall('get', 'nosuchkey') return {type(foo), foo == false}", 0),
    ("local foo = redis.pcall('incr', KEYS[1]) return {type(foo), foo['err']}", 1, "k"),
    ("return redis.pcall('incr', KEYS[1])", 1, "k"),
    ("return redis.call('incr', KEYS[1])", 1, "k"),
    ("local foo = redis.pcall('set', KEYS[1], 'x') return {type(foo), foo['ok']}", 1, "k2"),
    ("redis.call('del', 'c') return redis.call('incr', 'c')", 0),
    ("return redis.call('hset', 'h', 'f', 'v', 'g', 'w')", 0),
    ("return redis.call('hgetall', 'h')", 0),
    ("redis.setresp(3) return redis.call('hgetall', 'h')", 0),
    ("redis.setresp(3) return redis.call('get', 'nosuchkey')", 0),
    ("redis.setresp(3) return redis.call('ping')", 0),
    ("redis.setresp(4)", 0),
    ("return redis.call()", 0),
    ("return redis.call('nosuchcommand')", 0),
    ("return redis.call('get','a','b','c')", 0),
    ("return redis.call('ping', {})", 0),
    ("return redis.call('set', 'n', 9007199254740991)", 0),
    ("return redis.call('get', 'n')", 0),
    ("return redis.call('select', 99)", 0),
    ("return redis.pcall('select', 99)", 0),
    ("return redis.call('select', '9')", 0),
    ("return redis.call('multi')", 0),
    # Commands pkvs lacks: Redis's words where its reference flags them
    # noscript or gives another arity, "Unknown" otherwise.
    ("return redis.call('cluster', 'reset', 'hard')", 0),
    ("return redis.pcall('CLUSTER', 'RESET')", 0),
    ("return redis.pcall('cluster', 'nosuch')", 0),
    ("return redis.pcall('cluster')", 0),
    ("return redis.pcall('monitor')", 0),
    ("return redis.pcall('monitor', 'x')", 0),
    ("return redis.pcall('latency', 'doctor')", 0),
    ("return redis.pcall('latency')", 0),
    ("return redis.pcall('client', 'pause', '10')", 0),
    ("return redis.pcall('replicaof', 'no', 'one')", 0),
    ("return redis.pcall('cluster|reset', 'x')", 0),
    ("return redis.call('eval', 'return 1', 0)", 0),
    ("return redis.sha1hex('')", 0),
    ("return redis.sha1hex('Pizza & Mandolino')", 0),
    ("redis.sha1hex()", 0),
    ("return redis.error_reply('MY_ERR_CODE custom msg')", 0),
    ("return redis.error_reply('')", 0),
    ("return redis.error_reply('-X y')", 0),
    ("return redis.status_reply('MY_OK custom')", 0),
    ("return redis.error_reply(1, 2)", 0),
    ("return redis.log(redis.LOG_WARNING, 'from a test')", 0),
    ("return redis.log(9, 'x')", 0),
    ("redis.log()", 0),
    ("redis.set_repl(12345)", 0),
    ("redis.set_repl(redis.REPL_ALL)", 0),
    ("return redis.replicate_commands()", 0),
    ("return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}", 0),
    ("return a", 0),
    ("a = 10", 0),
    ("setmetatable(_G, {})", 0),
    ("local g = getmetatable(_G); g.__index = {}", 0),
    ("redis = function() return 1 end", 0),
    ("_G = {}", 0),
    ("redis.call = function() return 1 end", 0),
    ("cjson.encode = function() return 1 end", 0),
    ("bit.lshift = function() return 1 end", 0),
    ("return rawset(_G, 'x', 1)", 0),
    ("loadfile('some file')", 0),
    ("dofile('some file')", 0),
    ("print('some data')", 0),
    ("return os.time()", 0),
    ("return io.open('/etc/passwd')", 0),
    ("return loadstring(string.dump(function() return 1 end))()", 0),
    ("return loadstring('return 7')()", 0),
    ("error('a\\nb')", 0),
    ("error({err='MY x'})", 0),
    ("foo(", 0),
    ("local status, res = pcall(function() return foo end); return tostring(status) .. ' ' .. res", 0),
    ("local ok, e = pcall(function() redis.call('nosuch') end) return e", 0),
    ("return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')", 0),
    ("local d = cjson.decode('{\"keya\": \"a\", \"keyb\": \"b\"}') return {d.keya, d.keyb}", 0),
    ("return cjson.encode({1, 2, 'x'})", 0),
    ("return {bit.tobit(1), bit.band(1), bit.bxor(1,2), bit.bor(1,2,4,8,16,32,64,128), bit.tohex(255)}", 0),
    ("return string.format('%d %s', 42, 'x')", 0),
    ("return ('x'):rep(3)", 0),
    ("math.randomseed(10) return tostring(math.random())", 0),
    ("math.randomseed(10) return {math.random(100), math.random(5, 9)}", 0),
    ("return 'hello' --trailing comment", 0),
    ("return #KEYS + #ARGV", 2, "a", "b", "c"),
    ("#!lua\nreturn 1", 0),
    ("#!lua flags=no-writes\nreturn redis.call('set', 'x', 1)", 0),
    ("#!not-lua\nreturn 1", 0),
    ("#!lua badger=data\nreturn 1", 0),
    ("#!lua flags=allow-oom,what?\nreturn 1", 0),
    ("return 'x'", -12),
    ("return 'x'", 1),
    ("local a = {} for i=1,7999 do a[i] = 'k' .. i end return redis.call('del', unpack(a))", 0),
    ("local a = {} for i=1,7999 do a[i] = i end return redis.call('mset', unpack(a))", 0),
]


def _run_all(p, items):
    for item in items:
        script, nk, rest = item[0], item[1], item[2:]
        p.same("EVAL", script, str(nk), *rest)


@pytest.mark.parametrize("proto", PROTOS)
def test_eval_replies_byte_exact(peers, proto):
    run, _ = peers
    p = run(proto)
    _run_all(p, SCRIPTS)
    # A table that holds itself: as much as Lua's stack holds, then the
    # error (thousands of nested arrays: deep for the reply reader).
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 50000))
    p.same("EVAL", "local a = {}; local b = {a}; a[1] = b; return a", "0")
    p.same("PING")


@pytest.mark.parametrize("proto", PROTOS)
def test_evalsha_and_script_cache(peers, proto):
    run, _ = peers
    p = run(proto)
    run_script(p, [
        ("SCRIPT", "FLUSH"), ("SET", "mykey", "myval"),
        ("EVAL", "return redis.call('get',KEYS[1])", "1", "mykey"),
        ("EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"),
        ("EVALSHA", "FD758D1589D044DD850A6F05D52F2EEFD27F033F", "1", "mykey"),
        ("EVALSHA", "NotValidShaSUM", "0"),
        ("EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"),
        ("SCRIPT", "LOAD", "return 'loaded'"),
        ("EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"),
        ("SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8",
         "B534286061D4B9E4026607613B95C06C06015AE8", "b534286061d4b9e4026607613b95c06c06015ae9"),
        ("SCRIPT", "LOAD", "return ("), ("SCRIPT", "FLUSH", "ASYNC"), ("SCRIPT", "FLUSH", "bad"),
        ("EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"), ("SCRIPT", "KILL"),
        ("SCRIPT", "NOSUCH"), ("SCRIPT",), ("EVAL", "return 1"), ("EVAL", "return 1", "x"),
        ("EVALSHA_RO", "b534286061d4b9e4026607613b95c06c06015ae8", "0"),
    ])


@pytest.mark.parametrize("proto", PROTOS)
def test_eval_ro(peers, proto):
    run, _ = peers
    p = run(proto)
    run_script(p, [
        ("SET", "foo", "bar"), ("EVAL_RO", "return redis.call('get', KEYS[1])", "1", "foo"),
        ("EVAL_RO", "redis.call('del', KEYS[1])", "1", "foo"),
        ("EVAL_RO", "return redis.pcall('set', 'x', 'y')", "1", "x"),
        ("EVAL_RO", "#!lua\nreturn 1", "0"),
        ("EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get','foo')", "0"), ("GET", "foo"),
    ])


@pytest.mark.parametrize("proto", PROTOS)
def test_errors_counted_as_redis(peers, proto):
    run, _ = peers
    p = run(proto)
    p.same("CONFIG", "RESETSTAT")
    p.same("EVAL", "return redis.error_reply('MY_ERR_CODE custom msg')", "0")
    p.same("EVAL", "return redis.call('select', 99)", "0")
    p.same("EVAL", "return redis.pcall('select', 99)", "0")
    got, want = p.both("INFO", "errorstats")
    assert b"errorstat_MY_ERR_CODE:count=1" in got and b"errorstat_ERR:count=2" in got, got


@pytest.mark.parametrize("proto", PROTOS)
def test_script_error_keeps_earlier_writes(peers, proto):
    """Redis does not roll a script back: writes before its error stay."""
    run, _ = peers
    p = run(proto)
    p.same("EVAL", "redis.call('set', KEYS[1], 'y'); redis.call('nosuch')", "1", "kept")
    p.same("GET", "kept")
    p.same("EVAL", "redis.call('set', KEYS[1], 'z'); error('stop')", "1", "kept")
    p.same("GET", "kept")


@pytest.mark.parametrize("proto", PROTOS)
def test_script_selects_its_own_db(peers, proto):
    run, _ = peers
    p = run(proto)
    p.same("SELECT", "1")
    p.same("SET", "mykey", "db1")
    p.same("EVAL", "redis.call('select', '2'); redis.call('set', 'mykey', 'db2'); return redis.call('get', 'mykey')", "0")
    p.same("GET", "mykey")
    p.same("SELECT", "2")
    p.same("GET", "mykey")


LIB = "#!lua name=mylib\n" \
      "redis.register_function('myset', function(keys, args) return redis.call('set', keys[1], args[1]) end)\n" \
      "redis.register_function{function_name='myget', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}\n"

# cmsgpack (Debian's lua-messagepack with Redis's encoding): what
# cmsgpack.pack writes, in hex, and what it reads back.
HEX = "local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end "
PACKED = ["0.1", "0.5", "-0.25", "1/0", "-1/0", "0/0", "-(0/0)", "3.4e38", "2^128", "1e-40", "2^-149",
          "1e-310", "-1e-310", "2^53", "2^60 + 2^10", "-2^60 - 2^10", "2^63", "-2^63",
          "-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, -2^32",
          "0, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^40",
          "'', string.rep('x', 31), string.rep('x', 32), string.rep('x', 255), string.rep('x', 256)",
          "string.rep('x', 65535), string.rep('x', 65536)",
          "true, false, nil, type", "{}", "{1, 2, 3}", "{[1] = 1, [3] = 3}", "{[0.5] = 1, [2] = 2}",
          "{a = {b = {1, 'z'}}}", "{[-1] = 1}", "{[2^31] = 1}"]
MSGPACK_SCRIPTS = [(HEX + "return hex(cmsgpack.pack(%s))" % v, 0) for v in PACKED] + [
    (HEX + "local a = {y = 5} a.x = {x = a} return hex(cmsgpack.pack(a))", 0),
    ("return cmsgpack.pack()", 0),
    ("local t = {} for i = 1, 5000 do t[i] = i end return cmsgpack.pack(unpack(t))", 0),
    ("return {cmsgpack.unpack(cmsgpack.pack(1, 'x', {2, {k = 0.25}}, 2^60, 1e-40))}", 0),
    ("local t = cmsgpack.unpack(cmsgpack.pack({1, {a = 'b'}})) return {t[1], t[2].a}", 0),
    ("return {cmsgpack.unpack('')}", 0),
    ("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x'))}", 0),
    ("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x'), 2)}", 0),
    ("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x'), 4)}", 0),
    ("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x'), 5)}", 0),
    ("return {cmsgpack.unpack_one(cmsgpack.pack(1), -1)}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 0)}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 0, 1)}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 2, 1)}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), '2')}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), -1)}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'), 'a')}", 0),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 'x'))}", 0),
    ("local f = cmsgpack.unpack_one return f()", 0),
    ("return {cmsgpack.unpack()}", 0),
    ("return {cmsgpack.unpack({})}", 0),
    ("return {cmsgpack.unpack(12)}", 0),
    ("return {cmsgpack.unpack('\\193')}", 0),          # no type starts with 0xc1
    ("return {cmsgpack.unpack('\\196\\1a')}", 0),      # bin8: Redis reads none
    ("return {cmsgpack.unpack('\\212\\1\\1')}", 0),  # fixext1
    ("return {cmsgpack.unpack('\\147\\1')}", 0),       # an array cut short
    ("return {pcall(cmsgpack.unpack, '\\217\\5ab')}", 0),
    ("return #{cmsgpack.unpack(string.rep('\\1', 7990))}", 0),
    ("return #{cmsgpack.unpack(string.rep('\\1', 9000))}", 0),
    ("cmsgpack.pack = function() return 1 end", 0),
    ("return cmsgpack._NAME", 0),
]


@pytest.mark.parametrize("proto", PROTOS)
def test_cmsgpack_byte_exact(peers, proto):
    run, _ = peers
    p = run(proto)
    _run_all(p, MSGPACK_SCRIPTS)
    # Functions have it too.
    p.same("FUNCTION", "FLUSH")
    p.same("FUNCTION", "LOAD", "#!lua name=mp\nredis.register_function('mp', function(keys, args) "
           "return {cmsgpack.unpack(cmsgpack.pack(unpack(args)))} end)")
    p.same("FCALL", "mp", "0", "a", "b")
    p.same("FUNCTION", "FLUSH")


ONE = "#!lua name=onelib\n" \
      "redis.register_function{function_name='one', callback=function() return 1 end, flags={'no-writes', 'allow-oom'}}\n"


@pytest.mark.parametrize("proto", PROTOS)
def test_functions_byte_exact(peers, proto):
    run, _ = peers
    p = run(proto)
    p.same("FUNCTION", "FLUSH")
    p.same("FUNCTION", "LOAD", LIB)
    p.same("FUNCTION", "LOAD", LIB)
    p.same("FUNCTION", "LOAD", "REPLACE", LIB)
    p.same("FCALL", "myset", "1", "fk", "fv")
    p.same("FCALL_RO", "myget", "1", "fk")
    p.same("FCALL_RO", "myset", "1", "fk", "x")
    p.same("FCALL", "nosuch", "0")
    p.same("FCALL", "myget", "x")
    p.same("FCALL", "myget", "-1")
    p.same("FCALL", "myget", "5", "a")
    # Redis lists a library's functions in its hash table's order: one
    # function per library compares.
    p.same("FUNCTION", "LOAD", ONE)
    p.same("FUNCTION", "LIST", "LIBRARYNAME", "on*")
    p.same("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "ONE*")
    p.same("FUNCTION", "LIST", "LIBRARYNAME", "zz*")
    p.same("FUNCTION", "LIST", "bad")
    p.same("FUNCTION", "STATS")
    for bad in ["return 1", "#!lua\nreturn 1", "#!lua name=a b=c\n", "#!lua name=bad\nlocal x = 1",
                "#!lua name=bad\nreturn string.len('x')", "#!lua name=bad\nredis.register_function('x', 1)",
                "#!lua name=bad\nredis.register_function('myset', function() end)",
                "#!lua name=bad\nredis.register_function('f', function() end) redis.register_function('f', function() end)",
                "#!lua name=bad\nredis.register_function{function_name='f', callback=function() end, flags={'bad'}}",
                "#!lua name=bad\nredis.register_function{function_name='f'}",
                "#!lua name=bad\nredis.call('ping')", "#!nosuch name=bad\n", "#!lua name=b-d\n",
                "#!lua name=bad\nbad code here"]:
        p.same("FUNCTION", "LOAD", bad)
    p.same("FUNCTION", "LOAD", "x", LIB)
    p.same("FUNCTION", "DELETE", "nosuch")
    p.same("FUNCTION", "DELETE", "mylib")
    p.same("FCALL", "myget", "1", "fk")
    p.same("FUNCTION", "KILL")
    p.same("FUNCTION", "FLUSH", "bad")
    p.same("FUNCTION", "RESTORE", "bad payload")
    p.same("FUNCTION", "STATS")


def test_function_dump_restore(pkvs):
    srv = pkvs.start()
    c = RawConn(srv.resp_port)
    assert c.call("FUNCTION", "LOAD", LIB) == b"$5\r\nmylib\r\n"
    dump = c.call("FUNCTION", "DUMP")
    payload = dump[dump.index(b"\r\n") + 2:-2]
    assert c.call("FUNCTION", "RESTORE", payload) == b"-ERR Library mylib already exists\r\n"
    assert c.call("FUNCTION", "FLUSH") == b"+OK\r\n"
    assert c.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
    assert c.call("FCALL", "myset", "1", "k", "v") == b"+OK\r\n"
    assert c.call("FUNCTION", "RESTORE", payload, "REPLACE") == b"+OK\r\n"
    assert c.call("FUNCTION", "RESTORE", payload[:-1] + b"x") == \
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    assert c.call("FCALL_RO", "myget", "1", "k") == b"$1\r\nv\r\n"
    c.close()


def test_function_dump_crosses_redis(pkvs, redis_peer):  # noqa: F811
    """FUNCTION DUMP's payload is Redis's: one server restores the
    other's, Redis's code compressed (a long library) included."""
    srv = pkvs.start()
    ours, theirs = RawConn(srv.resp_port), RawConn(redis_peer.resp_port)
    long_lib = ("#!lua name=longlib\n" + "-- padding that compresses well\n" * 200 +
                "redis.register_function('lget', function(keys) return redis.call('GET', keys[1]) end)")
    for c in (ours, theirs):
        c.call("FUNCTION", "FLUSH")
        c.call("FLUSHALL")
        assert c.call("SET", "k", "v") == b"+OK\r\n"
    assert theirs.call("FUNCTION", "LOAD", long_lib) == b"$7\r\nlonglib\r\n"
    dump = theirs.call("FUNCTION", "DUMP")
    payload = dump[dump.index(b"\r\n") + 2:-2]
    assert len(payload) < len(long_lib)                   # Redis compressed it
    assert ours.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
    assert ours.call("FCALL", "lget", "1", "k") == b"$1\r\nv\r\n"
    assert ours.call("FUNCTION", "LOAD", LIB) == b"$5\r\nmylib\r\n"
    dump = ours.call("FUNCTION", "DUMP")
    payload = dump[dump.index(b"\r\n") + 2:-2]
    assert theirs.call("FUNCTION", "RESTORE", payload, "REPLACE") == b"+OK\r\n"
    assert theirs.call("FCALL_RO", "myget", "1", "k") == b"$1\r\nv\r\n"
    assert theirs.call("FCALL", "lget", "1", "k") == b"$1\r\nv\r\n"
    assert ours.call("FUNCTION", "RESTORE", payload[:-1] + bytes([payload[-1] ^ 1])) == \
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    ours.close()
    theirs.close()


def test_functions_kept_across_restart(pkvs):
    srv = pkvs.start()
    c = RawConn(srv.resp_port)
    assert c.call("FUNCTION", "LOAD", LIB) == b"$5\r\nmylib\r\n"
    assert c.call("FUNCTION", "LOAD", "#!lua name=gone\nredis.register_function('g', function() return 1 end)") == b"$4\r\ngone\r\n"
    assert c.call("FUNCTION", "DELETE", "gone") == b"+OK\r\n"
    c.close()
    srv.kill9()
    srv.start()
    c = RawConn(srv.resp_port)
    assert c.call("FCALL", "myset", "1", "k", "v") == b"+OK\r\n"
    assert c.call("FCALL", "g", "0") == b"-ERR Function not found\r\n"
    listing = c.call("FUNCTION", "LIST")
    assert b"mylib" in listing and b"gone" not in listing
    assert c.call("FUNCTION", "FLUSH") == b"+OK\r\n"
    c.close()
    srv.stop(keep_store=True)
    srv.start()
    c = RawConn(srv.resp_port)
    assert c.call("FUNCTION", "LIST") == b"*0\r\n"
    c.close()


BUSY = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
BUSY_FN = b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"


def _wait_busy(port, busy=BUSY):
    c = RawConn(port)
    assert wait_until(lambda: c.call("PING") == busy, 10), "the script never turned busy"
    return c


def _shutdown_nosave_restart(srv, conn):
    """SHUTDOWN NOSAVE on conn (a busy script's writes go with it), a clean
    exit, a restart; a connection to the new server."""
    try:
        conn.call("SHUTDOWN", "NOSAVE")
    except Exception:
        pass
    assert srv.wait_exit(10) == 0
    srv.start()
    return RawConn(srv.resp_port)


def test_busy_script_kill(pkvs):
    srv = pkvs.start()
    admin = RawConn(srv.resp_port)
    assert admin.call("CONFIG", "SET", "lua-time-limit", "100") == b"+OK\r\n"
    runner = RawConn(srv.resp_port)
    # The script, then a PING pipelined behind it on the same connection.
    runner.send(resp_command("EVAL", "while 1 do redis.call('ping') end", "0") + resp_command("PING"))
    other = _wait_busy(srv.resp_port)
    assert other.call("SET", "a", "b") == BUSY
    assert other.call("MULTI") == b"+OK\r\n"          # allow_busy: runs
    assert other.call("DISCARD") == b"+OK\r\n"
    # EXEC while busy: the transaction is discarded with the reason, and
    # the connection leaves MULTI (Redis's execCommandAbort).
    assert other.call("MULTI") == b"+OK\r\n"
    assert other.call("INCR", "n") == BUSY
    assert other.call("EXEC") == b"-EXECABORT Transaction discarded because of: " + BUSY[1:]
    assert other.call("PING") == BUSY                   # not QUEUED: no longer in MULTI
    assert other.call("FUNCTION", "STATS") == BUSY
    assert other.call("FUNCTION", "KILL") == BUSY
    assert other.call("SCRIPT", "KILL") == b"+OK\r\n"
    assert wait_until(lambda: other.call("PING") == b"+PONG\r\n", 10)
    assert runner.read_raw().startswith(b"-ERR Script killed by user with SCRIPT KILL... script: ")
    assert runner.read_raw() == b"+PONG\r\n"
    assert other.call("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    # A script that wrote cannot be killed; a script may not go on
    # forever either: this one stops when a key it reads appears... which
    # only SHUTDOWN could write now, so SHUTDOWN it is (below).
    runner.send(resp_command("EVAL", "redis.call('set',KEYS[1],'y') while true do end return 1", "1", "w"))
    other = _wait_busy(srv.resp_port)
    assert other.call("SCRIPT", "KILL").startswith(b"-UNKILLABLE Sorry the script already executed write commands")
    assert other.call("GET", "w") == BUSY
    assert _shutdown_nosave_restart(srv, other).call("GET", "w") == b"$-1\r\n"   # its write went


def test_busy_script_holds_http_and_streamed_set(pkvs):
    """While a script that wrote runs long, the loop serves clients from
    inside it, and its writes are not committed: an HTTP GET of what it
    wrote and an HTTP PUT are 503 with the BUSY line (neither a read of
    the unfinished script nor a write acknowledged into it, which the
    SHUTDOWN NOSAVE below would take away), and a SET whose value was
    streaming when the script began is BUSY once it ends."""
    from paste_proc import http_once
    srv = pkvs.start()
    admin = RawConn(srv.resp_port)
    assert admin.call("CONFIG", "SET", "lua-time-limit", "100") == b"+OK\r\n"
    value = b"s" * 1500
    streaming = RawConn(srv.resp_port)
    wire = resp_command("SET", "streamed", value)
    streaming.send(wire[:-800])                          # the value has begun
    assert wait_until(lambda: admin.call("CLIENT", "LIST").count(b"cmd=set") == 1, 5)
    runner = RawConn(srv.resp_port)
    runner.send(resp_command("EVAL", "redis.call('set',KEYS[1],'y') while true do end return 1", "1", "w"))
    other = _wait_busy(srv.resp_port)
    streaming.send(wire[-800:])
    assert streaming.read_raw() == BUSY
    line = BUSY[1:-2] + b"\n"
    got = http_once(srv.port, "GET", "/kv/w")
    assert (got.status, got.body) == (503, line), got
    got = http_once(srv.port, "PUT", "/kv/h", body=b"v")
    assert (got.status, got.body) == (503, line), got
    assert http_once(srv.port, "GET", "/kv").status == 503
    assert _shutdown_nosave_restart(srv, other).call("EXISTS", "w", "h", "streamed") == b":0\r\n"


def test_busy_function_kill(pkvs):
    srv = pkvs.start()
    admin = RawConn(srv.resp_port)
    assert admin.call("CONFIG", "SET", "busy-reply-threshold", "100") == b"+OK\r\n"
    assert admin.call("FUNCTION", "LOAD", "#!lua name=spin\nredis.register_function('spin', function() local a = 1 while true do a = a + 1 end end)") == b"$4\r\nspin\r\n"
    runner = RawConn(srv.resp_port)
    runner.send(resp_command("FCALL", "spin", "0"))
    other = _wait_busy(srv.resp_port, BUSY_FN)
    assert other.call("SCRIPT", "KILL") == BUSY_FN
    stats = other.call("FUNCTION", "STATS")
    assert b"running_script" in stats and b"spin" in stats and b"FCALL" in stats
    assert other.call("FUNCTION", "KILL") == b"+OK\r\n"
    assert wait_until(lambda: other.call("PING") == b"+PONG\r\n", 10)
    assert runner.read_raw().startswith(b"-ERR Script killed by user with SCRIPT KILL...")


def test_short_script_not_busy(pkvs):
    """A script under the threshold never lets another command in."""
    srv = pkvs.start()
    c = RawConn(srv.resp_port)
    assert c.call("EVAL", "for i=1,200000 do redis.call('ping') end return 'ok'", "0") == b"$2\r\nok\r\n"
    assert c.call("PING") == b"+PONG\r\n"


GROUP = 400     # keys per script


def _script_writer(port, stop, acked, errors):
    """Scripts, one after another, each writing GROUP keys g:<id>:<j>;
    an id is acknowledged when its reply came."""
    body = "for j=1,%d do redis.call('set', 'g:' .. ARGV[1] .. ':' .. j, j) end return 1" % GROUP
    try:
        c = RawConn(port, timeout=30)
        i = 0
        while not stop.is_set():
            i += 1
            if c.call("EVAL", body, "0", str(i)) == b":1\r\n":
                acked.append(i)
    except Exception as e:     # the kill ends the connection
        errors.append(e)


@pytest.mark.crash
def test_script_writes_all_or_none_across_kill9(pkvs):
    srv = pkvs.start()
    rng = random.Random(27)
    for round_ in range(4):
        stop = threading.Event()
        acked, errors = [], []
        t = threading.Thread(target=_script_writer, args=(srv.resp_port, stop, acked, errors))
        t.start()
        wait_until(lambda: len(acked) >= 3, 20)
        time.sleep(rng.uniform(0.0, 0.05))
        srv.kill9()
        stop.set()
        t.join(30)
        srv.start()
        c = RawConn(srv.resp_port, timeout=30)
        counts = {}
        cursor = b"0"
        # every g:<id>:<j> key, counted per id
        keys = c.call("KEYS", "g:*")
        for line in keys.split(b"\r\n"):
            if line.startswith(b"g:"):
                gid = int(line.split(b":")[1])
                counts[gid] = counts.get(gid, 0) + 1
        partial = {g: n for g, n in counts.items() if n != GROUP}
        assert not partial, f"round {round_}: scripts cut short by the crash: {partial}"
        missing = [g for g in acked if counts.get(g) != GROUP]
        assert not missing, f"round {round_}: acknowledged scripts lost: {missing[:10]}"
        assert c.call("FLUSHALL") == b"+OK\r\n"
        c.close()
        del cursor
