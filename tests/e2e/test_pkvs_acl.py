"""pkvs's ACL users (services/kv_acl.c, services/cmd_acl.c): ACL SETUSER,
GETUSER, LIST, USERS, DELUSER, CAT, DRYRUN, GENPASS, LOG, SAVE and LOAD;
AUTH and HELLO AUTH as a user; the check of every command, its keys and
its channels (NOPERM), in MULTI/EXEC and in scripts; CLIENT LIST's user;
requirepass as the default user's password; the ACL file across a
restart; the HTTP port's Basic user:password. Replies are compared byte
for byte with Debian's redis-server 7.0.15 where they are deterministic
(GETUSER's single-command rules come in each server's own table order:
those are compared as sets).
"""
import base64
import os
import subprocess

import pytest
import redis

from conftest import RespConn, http_once, tool
from paste_proc import RedisServer
from redis_peer import Peers, RawConn, redis_peer, run_script  # noqa: F401 (redis_peer: a fixture)


@pytest.fixture
def pair(pkvs, redis_peer):
    """Peers on a fresh pkvs and on redis-server with its users reset."""
    srv = pkvs.start()
    p = Peers(srv.resp_port, redis_peer.resp_port)
    for user in p.redis.call("ACL", "USERS").split(b"\r\n")[2::2]:
        if user and user != b"default":
            p.redis.call("ACL", "DELUSER", user.decode())
    p.same("ACL", "SETUSER", "default", "reset", "on", "nopass", "~*", "&*", "+@all")
    p.redis.call("ACL", "LOG", "RESET")
    p.both("FLUSHALL")
    yield p, srv, redis_peer
    p.close()


def as_user(port, user, password):
    c = RawConn(port)
    assert c.call("AUTH", user, password) == b"+OK\r\n"
    return c


SETUSERS = [
    ("alice", "on", ">p1", "~foo*", "%R~bar*", "%W~baz*", "&ch*", "+get", "+set", "+mget",
     "+publish", "+subscribe", "+psubscribe", "+hget", "+select|1", "+config|get", "+acl|whoami"),
    ("bob",),
    ("carol", "on", "nopass", "allkeys", "allchannels", "+@all", "-@dangerous"),
    ("dave", "on", "#" + "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
     "resetchannels", "-@all", "+@hash"),
    ("erin", "on", "nopass", "reset", "+@read", "~*"),
    # commands and categories pkvs lacks read as Redis reads them
    ("fred", "+@all", "-@stream", "-@hyperloglog"),
    ("gail", "-@all", "+xadd"),
    ("hank", "+@all", "-debug", "+debug|digest"),
    ("ivan", "%RW~x", "%R~y", "%W~z", "%R~y", "%W~y"),
    ("jane", "allcommands", "-config|set"),
    ("kent", "+config", "-config|get"),
    ("lena", "+@all", "-@hash", "+hset"),
    ("mark", "(~a +get)", "(%R~b +@read)", "~c", "+set"),
    ("nina", "on", "nopass", "+@all", "-@write", "+set"),
    ("otto", "+@string", "-@write"),
    ("pete", "-@all", "+@keyspace", "+@read"),
    ("quin", "+client|id", "+client|list", "+client|info"),
    ("rosa", "+select|0", "+select|1", "-select"),
    ("sven", "+@pubsub", "&x", "&y"),
    ("tina", "+@all", "-@all", "+@admin", "-@dangerous"),
]


def rules_sorted(line):
    """A rules text with the command rules after +@all/-@all in order:
    single commands come in each server's own table order."""
    words = line.split(b" ")
    at = next((i for i, w in enumerate(words) if w in (b"+@all", b"-@all")), len(words))
    return b" ".join(words[:at + 1] + sorted(words[at + 1:]))


def normalized(reply):
    return b"\r\n".join(rules_sorted(x) for x in reply.split(b"\r\n"))


def test_setuser_getuser_list_as_redis(pair):
    p, srv, rs = pair
    for args in SETUSERS:
        p.same("ACL", "SETUSER", *args)
    for name in [u[0] for u in SETUSERS] + ["default", "nobody"]:
        got, want = p.both("ACL", "GETUSER", name)
        assert normalized(got) == normalized(want), (name, got, want)
    p.same("ACL", "USERS")
    got, want = p.both("ACL", "LIST")
    assert normalized(got) == normalized(want)
    # RESP3 maps and sets
    p3 = Peers(srv.resp_port, rs.resp_port, 3)
    for name in ("dave", "carol", "mark"):
        got, want = p3.both("ACL", "GETUSER", name)
        assert normalized(got) == normalized(want), (name, got, want)
    p3.close()


@pytest.mark.parametrize("args", [
    ("alice", "+nosuchcommand"), ("alice", "+@nosuch"), ("alice", "allkeys", "~x"),
    ("alice", "allchannels", "&x"), ("alice", "#abc"), ("alice", "<never-set"),
    ("alice", "+config|get|x"), ("alice", "+select|"), ("alice", "%X~a"), ("bad name",),
    ("alice", "(~x"), ("alice", "+get|x"), ("alice", "~a b"), ("alice", "bogus"),
])
def test_setuser_errors_as_redis(pair, args):
    p, _, _ = pair
    p.same("ACL", "SETUSER", "alice", "on", ">p1", "+get")
    p.same("ACL", "SETUSER", *args)
    p.same("ACL", "GETUSER", "alice")          # nothing changed


def test_noperm_errors_as_redis(pair):
    p, srv, rs = pair
    p.same("ACL", "SETUSER", *SETUSERS[0])
    pk, rd = as_user(srv.resp_port, "alice", "p1"), as_user(rs.resp_port, "alice", "p1")
    for args in (("GET", "foo1"), ("GET", "nope"), ("SET", "foo1", "v"), ("SET", "bar1", "v"),
                 ("GET", "bar1"), ("SET", "baz1", "v"), ("GET", "baz1"), ("SET", "baz1", "v", "GET"),
                 ("MGET", "foo1", "x"), ("DEL", "foo1"), ("HGET", "foo1", "f"),
                 ("SELECT", "1"), ("SELECT", "2"), ("SELECT", "0"), ("CONFIG", "GET", "maxmemory"),
                 ("CONFIG", "SET", "maxmemory", "0"), ("PUBLISH", "ch1", "m"),
                 ("PUBLISH", "other", "m"), ("ACL", "WHOAMI"), ("ACL", "LIST"),
                 ("NOSUCH",), ("GET",), ("PING",), ("AUTH", "alice", "wrong"), ("ACL", "WHOAMI")):
        got, want = pk.call(*args), rd.call(*args)
        assert got == want, f"{args}: pkvs {got!r}, redis {want!r}"
    # MULTI: refused when queued, and EXECABORT
    for args in (("MULTI",), ("GET", "foo1"), ("DEL", "foo1"), ("EXEC",)):
        got, want = pk.call(*args), rd.call(*args)
        assert got == want, f"{args}: pkvs {got!r}, redis {want!r}"
    pk.close()
    rd.close()


def test_dryrun_and_cat_as_redis(pair):
    p, _, _ = pair
    p.same("ACL", "SETUSER", *SETUSERS[0])
    for args in (("alice", "get", "foo"), ("alice", "get", "x"), ("alice", "set", "bar1", "v"),
                 ("alice", "del", "foo"), ("alice", "publish", "ch9", "m"),
                 ("alice", "publish", "zz", "m"), ("alice", "subscribe", "ch1", "zz"),
                 ("alice", "psubscribe", "ch*"), ("alice", "psubscribe", "ch1*"),
                 ("alice", "config", "get", "x"), ("alice", "config", "set", "x", "y"),
                 ("nobody", "get", "x"), ("alice", "nosuch"), ("alice", "get"),
                 ("default", "flushall")):
        p.same("ACL", "DRYRUN", *args)
    p.same("ACL", "CAT")
    p.same("ACL", "CAT", "nosuch")
    p.same("ACL", "CAT", "a", "b")
    for cat in ("hash", "keyspace", "pubsub"):
        got, want = p.both("ACL", "CAT", cat)
        pk_names = set(got.split(b"\r\n")[2::2])
        rd_names = set(want.split(b"\r\n")[2::2])
        assert pk_names and pk_names <= rd_names, cat    # pkvs's commands of that category
    run_script(p, [
        ("ACL", "GENPASS", "0"), ("ACL", "GENPASS", "5000"), ("ACL", "GENPASS", "x"),
        ("ACL", "DELUSER", "default"), ("ACL", "LOAD"), ("ACL", "SAVE"), ("ACL", "LOG", "x"),
        ("ACL", "HELP"), ("ACL", "HELP", "x"), ("ACL", "LOG", "0"), ("ACL", "WHOAMI", "x"),
        ("ACL", "DELUSER", "nobody"), ("ACL", "NOSUCH"), ("ACL", "LOG", "1", "2"),
        ("ACL", "GENPASS", "1", "2"),
    ])


def test_genpass_lengths(pkvs):
    r = redis.Redis(port=pkvs.start(http=False).resp_port, decode_responses=True)
    assert len(r.acl_genpass()) == 64
    assert len(r.acl_genpass(5)) == 2
    assert r.acl_genpass() != r.acl_genpass()
    assert all(c in "0123456789abcdef" for c in r.acl_genpass(4096))


def test_redis_py_users_log_and_client_list(pkvs):
    srv = pkvs.start(http=False)
    admin = redis.Redis(port=srv.resp_port, decode_responses=True)
    assert admin.acl_setuser("app", enabled=True, passwords=["+apppw"], keys=["app:*"],
                             commands=["+get", "+set", "+client|list", "+acl|whoami"])
    info = admin.acl_getuser("app")
    assert "on" in info["flags"] and info["keys"] == ["~app:*"]
    app = redis.Redis(port=srv.resp_port, username="app", password="apppw",
                      decode_responses=True)
    assert app.acl_whoami() == "app"
    assert app.set("app:1", "v") and app.get("app:1") == "v"
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.get("other")
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.delete("app:1")
    assert any(c["user"] == "app" for c in admin.client_list())
    log = admin.acl_log()
    assert log[0]["reason"] == "command" and log[0]["object"] == "del"
    assert log[0]["username"] == "app" and log[0]["context"] == "toplevel"
    assert log[1]["reason"] == "key" and log[1]["object"] == "other"
    info = log[0]["client-info"]
    assert (info["user"] if isinstance(info, dict) else info).count("app")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=srv.resp_port, username="app", password="bad").ping()
    assert admin.acl_log(1)[0]["reason"] == "auth"
    assert admin.acl_log(1)[0]["username"] == "app"
    assert admin.acl_log_reset()
    assert admin.acl_log() == []
    # RESP3 and HELLO AUTH
    app3 = redis.Redis(port=srv.resp_port, username="app", password="apppw", protocol=3,
                       decode_responses=True)
    assert app3.acl_whoami() == "app"
    # the same failure again bumps the entry's count
    for _ in range(3):
        with pytest.raises(redis.exceptions.NoPermissionError):
            app.get("other")
    assert admin.acl_log()[0]["count"] == 3
    # CLIENT KILL USER closes a user's connections
    other = RespConn(srv.resp_port)
    assert other.command("AUTH", "app", "apppw") == "OK"
    assert admin.client_kill_filter(user="app", skipme=True) >= 1
    with pytest.raises(Exception):
        other.command("GET", "app:1")
    app = redis.Redis(port=srv.resp_port, username="app", password="apppw",
                      decode_responses=True)
    assert app.get("app:1") == "v"
    with pytest.raises(redis.ResponseError, match="No such user 'nobody'"):
        admin.client_kill_filter(user="nobody")
    # a user deleted: its connections close
    assert admin.acl_deluser("app") == 1
    with pytest.raises(redis.ConnectionError):
        app.get("app:1")


def test_redis_cli_user(pkvs):
    srv = pkvs.start(http=False)
    cli = tool("redis-cli")
    base = [cli, "-p", str(srv.resp_port)]
    run = lambda *a: subprocess.run(base + list(a), capture_output=True, text=True,  # noqa: E731
                                    timeout=30).stdout.strip()
    assert run("ACL", "SETUSER", "cli", "on", ">pw", "~k*", "+set", "+get") == "OK"
    assert run("--user", "cli", "--pass", "pw", "--no-auth-warning", "SET", "k1", "v") == "OK"
    assert run("--user", "cli", "--pass", "pw", "--no-auth-warning", "GET", "k1") == "v"
    out = run("--user", "cli", "--pass", "pw", "--no-auth-warning", "SET", "x", "v")
    assert out == "NOPERM this user has no permissions to access one of the keys used as arguments"
    # a refused AUTH: redis-cli says so and goes on as the default user
    out = subprocess.run(base + ["--user", "cli", "--pass", "nope", "--no-auth-warning", "ACL",
                                 "WHOAMI"], capture_output=True, text=True, timeout=30)
    assert "WRONGPASS" in out.stderr + out.stdout and out.stdout.strip().endswith("default")


def test_default_user_rules_and_requirepass(pkvs):
    srv = pkvs.start(["--requirepass", "rp"], http=False)
    c = RespConn(srv.resp_port)
    assert str(c.command("PING")).startswith("NOAUTH")
    assert c.command("AUTH", "rp") == "OK"
    assert c.command("ACL", "SETUSER", "adm", "on", ">ap", "+@all", "~*", "&*") == "OK"
    assert c.command("AUTH", "adm", "ap") == "OK"
    acl = c.command("ACL", "LIST")[1].decode()
    assert acl.startswith("user default on #") and acl.endswith(" ~* &* +@all")
    # requirepass is the default user's password, both ways
    assert c.command("CONFIG", "SET", "requirepass", "") == "OK"
    assert c.command("ACL", "LIST")[1] == b"user default on nopass ~* &* +@all"
    assert c.command("ACL", "SETUSER", "default", "resetpass", ">viaacl") == "OK"
    n = RespConn(srv.resp_port)
    assert str(n.command("GET", "x")).startswith("NOAUTH")
    assert n.command("AUTH", "viaacl") == "OK"
    # default off: new connections are not logged in, AUTH default fails
    assert c.command("ACL", "SETUSER", "default", "nopass", "off") == "OK"
    n = RespConn(srv.resp_port)
    assert str(n.command("GET", "x")).startswith("NOAUTH")
    assert str(n.command("AUTH", "default", "x")).startswith("WRONGPASS")
    assert c.command("ACL", "SETUSER", "default", "on", "-@all", "+get") == "OK"
    n = RespConn(srv.resp_port)
    assert n.command("GET", "x") is None
    assert str(n.command("SET", "x", "1")).startswith("NOPERM")
    assert c.command("ACL", "SETUSER", "default", "+@all") == "OK"
    assert n.command("SET", "x", "1") == "OK"
    # RESET logs out of a user
    assert c.command("ACL", "SETUSER", "u", "on", ">p", "+@all", "~*") == "OK"
    assert n.command("AUTH", "u", "p") == "OK"
    assert n.command("ACL", "WHOAMI") == b"u"
    assert n.command("RESET") == "RESET"
    assert n.command("ACL", "WHOAMI") == b"default"


def test_scripts_and_exec_are_checked(pair):
    p, srv, rs = pair
    p.same("ACL", "SETUSER", "s", "on", ">p", "~*", "+eval", "+get", "+multi", "+exec", "+incr")
    pk, rd = as_user(srv.resp_port, "s", "p"), as_user(rs.resp_port, "s", "p")
    assert pk.call("EVAL", "return redis.call('get','k')", "0") == b"$-1\r\n"
    got = pk.call("EVAL", "return redis.call('set','k','v')", "0")
    assert got.startswith(b"-") and b"can't run this command or subcommand" in got
    for script in ("return redis.acl_check_cmd('get','k')", "return redis.acl_check_cmd('set','k',1)",
                   "return redis.acl_check_cmd('config','get','x')",
                   "return redis.acl_check_cmd('nosuch','x')"):
        got, want = pk.call("EVAL", script, "0"), rd.call("EVAL", script, "0")
        assert got.split(b" script:")[0] == want.split(b" script:")[0], (script, got, want)
    for args in (("MULTI",), ("INCR", "k")):
        assert pk.call(*args) == rd.call(*args)
    adm = RawConn(srv.resp_port)
    adm.call("ACL", "SETUSER", "s", "-incr")
    RawConn(rs.resp_port).call("ACL", "SETUSER", "s", "-incr")
    got, want = pk.call("EXEC"), rd.call("EXEC")
    assert got == want, (got, want)
    log = adm.call("ACL", "LOG", "2")
    assert b"multi" in log and b"incr" in log and b"lua" in log
    pk.close()
    rd.close()


def test_channels(pkvs):
    srv = pkvs.start(http=False)
    adm = RespConn(srv.resp_port)
    assert adm.command("ACL", "SETUSER", "ps", "on", ">p", "&news.*", "+subscribe",
                       "+psubscribe", "+publish", "+ping") == "OK"
    r = redis.Redis(port=srv.resp_port, username="ps", password="p")
    assert r.publish("news.1", "m") == 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.publish("sport", "m")
    raw = RespConn(srv.resp_port)
    assert raw.command("AUTH", "ps", "p") == "OK"
    assert raw.command("SUBSCRIBE", "news.a") == [b"subscribe", b"news.a", 1]
    # a pattern must be one the user has, literally
    assert str(raw.command("PSUBSCRIBE", "news.a*")) == (
        "NOPERM this user has no permissions to access one of the channels used as arguments")
    assert raw.command("PSUBSCRIBE", "news.*") == [b"psubscribe", b"news.*", 2]
    # narrowed channels: the user's subscribed connections are closed
    sub = RespConn(srv.resp_port)
    assert sub.command("AUTH", "ps", "p") == "OK"
    sub.command("SUBSCRIBE", "news.b")
    assert adm.command("ACL", "SETUSER", "ps", "&news.*", "&more") == "OK"   # wider: kept
    assert sub.command("PING") == [b"pong", b""]
    # narrowed: a connection keeps running while its subscriptions are
    # still allowed; one holding a refused one is closed
    assert adm.command("ACL", "SETUSER", "ps", "resetchannels", "&news.b", "&news.*") == "OK"
    assert adm.command("ACL", "SETUSER", "ps", "resetchannels", "&news.b") == "OK"
    assert sub.command("PING") == [b"pong", b""]
    with pytest.raises(Exception):
        raw.command("PING")                 # news.a and the pattern news.*
    assert adm.command("ACL", "SETUSER", "ps", "resetchannels", "&other") == "OK"
    with pytest.raises(Exception):
        sub.command("PING")


def test_aclfile_save_load_restart(pkvs, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user default on nopass ~* &* +@all\nuser keep on >kp ~k* +get\n")
    srv = pkvs.start(["--aclfile", str(path)], http=False)
    c = RespConn(srv.resp_port)
    assert c.command("ACL", "USERS") == [b"default", b"keep"]
    assert c.command("ACL", "SETUSER", "new", "on", ">np", "+@all", "~*") == "OK"
    assert c.command("ACL", "SAVE") == "OK"
    text = path.read_text()
    assert "user new on #" in text and "np" not in text.replace("user new", "")
    srv.restart()
    c = RespConn(srv.resp_port)
    assert c.command("ACL", "USERS") == [b"default", b"keep", b"new"]
    u = RespConn(srv.resp_port)
    assert u.command("AUTH", "new", "np") == "OK"
    # ACL LOAD replaces the users; a connection of a user gone is closed
    path.write_text("user default on nopass ~* &* +@all\nuser other on nopass +@all\n")
    assert c.command("ACL", "LOAD") == "OK"
    assert c.command("ACL", "USERS") == [b"default", b"other"]
    with pytest.raises(Exception):
        u.command("PING")
    # a bad file changes nothing
    path.write_text("user default on nopass ~* &* +@all\nuser bad on +nosuch\n")
    err = str(c.command("ACL", "LOAD"))
    assert err == (f"ERR {path}:2: Error in applying operation '+nosuch': Unknown command or "
                   "category name in ACL. WARNING: ACL errors detected, no change to the "
                   "previously active ACL rules was performed")
    assert c.command("ACL", "USERS") == [b"default", b"other"]
    srv.stop()
    code, err = pkvs.start_failing(["--aclfile", str(path)])
    assert code == 2 and "Unknown command" in err


def test_http_basic_user(pkvs):
    srv = pkvs.start(["--requirepass", "rp"])
    adm = RespConn(srv.resp_port)
    assert adm.command("AUTH", "rp") == "OK"
    assert adm.command("ACL", "SETUSER", "web", "on", ">wp", "+@all", "~*", "&*") == "OK"
    assert adm.command("ACL", "SETUSER", "narrow", "on", ">np", "+get", "~*") == "OK"

    def basic(user, pw):
        return [("Authorization", "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode())]
    assert http_once(srv.port, "PUT", "/kv/h", body=b"v", headers=basic("web", "wp")).status in (201, 204)
    assert http_once(srv.port, "GET", "/kv/h", headers=basic("web", "wp")).status == 200
    assert http_once(srv.port, "GET", "/kv/h", headers=basic("web", "rp")).status == 401
    # a user with rules narrower than everything is not served over HTTP
    assert http_once(srv.port, "GET", "/kv/h", headers=basic("narrow", "np")).status == 401
    # a name that is no user's: the default user's password
    assert http_once(srv.port, "GET", "/kv/h", headers=basic("anyone", "rp")).status == 200
    assert http_once(srv.port, "GET", "/kv/h", headers=[("Authorization", "Bearer rp")]).status == 200
    # no password for default, but narrower rules: the HTTP port is closed
    assert adm.command("CONFIG", "SET", "requirepass", "") == "OK"
    assert http_once(srv.port, "GET", "/kv/h").status == 200
    assert adm.command("ACL", "SETUSER", "default", "-@all", "+get") == "OK"
    assert http_once(srv.port, "GET", "/kv/h").status == 401
    assert http_once(srv.port, "GET", "/kv/h", headers=basic("web", "wp")).status == 200


def test_streamed_set_is_checked(pkvs):
    """A SET whose value arrives over several reads streams into the store
    (pkvs_resp.c): its key is checked before the first byte is kept."""
    import time
    from paste_proc import resp_command
    srv = pkvs.start(http=False)
    adm = RespConn(srv.resp_port)
    assert adm.command("ACL", "SETUSER", "st", "on", ">p", "~ok*", "+set", "+get") == "OK"
    c = RespConn(srv.resp_port)
    assert c.command("AUTH", "st", "p") == "OK"
    value = os.urandom(200000)
    for key, want in (("no1", "NOPERM this user has no permissions to access one of the keys "
                       "used as arguments"), ("ok1", "OK")):
        wire = resp_command("SET", key, value)
        for at in range(0, len(wire), 30000):
            c.send(wire[at:at + 30000])
            time.sleep(0.01)
        assert str(c.read_reply()) == want
    assert c.command("GET", "ok1") == value
    assert adm.command("EXISTS", "no1") == 0
    entry = adm.command("ACL", "LOG", "1")[0]
    assert entry[entry.index(b"object") + 1] == b"no1"


ACL_FILES = [
    "user default on nopass ~* &* +@all\nuser a on >x ~k* &c* -@all +@hash +get\n",
    "user b on nopass +@all -@dangerous ~*\n",                      # default as Redis's
    "user default on nopass ~* &* +@all\nuser a on +nosuch\n",
    "user default on nopass ~* &* +@all\nuser a on +get\nuser a off\n",
    "users a on\n",
    "user a on allkeys ~x\n",
    "user a on #abc\n",
    "\nuser   spaced   on   +get   \n\n",
    "\tuser c on nopass +@all ~* \r\n",
]


@pytest.mark.parametrize("text", ACL_FILES)
def test_acl_load_as_redis(pkvs, tmp_path, text):
    """ACL LOAD's users and its errors, against redis-server reading the
    same file (one path for both: errors name it)."""
    path = tmp_path / "users.acl"
    path.write_text("user default on nopass ~* &* +@all\n")
    rs = RedisServer(["--aclfile", str(path)], dir_base="/dev/shm", tag="acl-peer")
    rs.start()
    try:
        srv = pkvs.start(["--aclfile", str(path)], http=False)
        p = Peers(srv.resp_port, rs.resp_port)
        path.write_text(text)
        p.same("ACL", "LOAD")
        p.same("ACL", "LIST")
        # ACL SAVE writes the same file (each server in turn)
        assert p.pkvs.call("ACL", "SAVE") == b"+OK\r\n"
        mine = path.read_text()
        assert p.redis.call("ACL", "SAVE") == b"+OK\r\n"
        assert mine == path.read_text()
        p.close()
    finally:
        rs.stop()


def test_pubsub_default_and_log_len_as_redis(pair):
    p, srv, rs = pair
    try:
        p.same("CONFIG", "SET", "acl-pubsub-default", "allchannels")
        p.same("CONFIG", "GET", "acl-pubsub-default")
        p.same("ACL", "SETUSER", "pd", "on", ">x", "+publish")
        p.same("ACL", "GETUSER", "pd")
        p.same("ACL", "SETUSER", "pd2", "(+get ~x)")
        p.same("ACL", "LIST")
        p.same("ACL", "SETUSER", "pd", "reset")
        p.same("ACL", "GETUSER", "pd")
        p.same("CONFIG", "SET", "acllog-max-len", "2")
    finally:
        p.both("CONFIG", "SET", "acl-pubsub-default", "resetchannels")
    p.same("ACL", "SETUSER", "lg", "on", ">x", "+get", "~a")
    pk, rd = as_user(srv.resp_port, "lg", "x"), as_user(rs.resp_port, "lg", "x")
    for key in ("b", "c", "d", "e"):
        assert pk.call("GET", key) == rd.call("GET", key)
    got, want = p.both("ACL", "LOG")
    assert got.startswith(b"*2\r\n") and want.startswith(b"*2\r\n")
    p.both("CONFIG", "SET", "acllog-max-len", "128")
    pk.close()
    rd.close()
