"""Who may talk to pkvs (server/auth.c, server/resp.c, server/http.c,
services/cmd_conn.c): requirepass from the command line, a --config file
and CONFIG SET; AUTH in both forms and HELLO AUTH; NOAUTH for every
command but the no_auth ones; the limits on an unauthenticated command;
protected mode (a client from a non-loopback address, in a network
namespace of the test's own); the HTTP front end's Basic and Bearer
credentials. Replies byte for byte against Debian's redis-server 7.0.15
with the same password (what auth.tcl of Redis's suite checks, which its
external mode skips).
"""
import base64
import os
import shutil
import socket
import subprocess
import textwrap

import pytest
import redis

from conftest import PkvsFactory, RespConn, binary, http_once, tool
from redis_peer import Peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)

PASS = "s3cret pass"


@pytest.fixture(scope="module")
def locked():
    """pkvs with --requirepass, HTTP on."""
    factory = PkvsFactory()
    srv = factory.start(["--requirepass", PASS])
    yield srv
    factory.cleanup()


@pytest.fixture(scope="module")
def redis_locked(redis_peer):
    """The peer redis-server with the same password (set once it is up:
    the connection that sets it stays authenticated)."""
    c = RawConn(redis_peer.resp_port)
    c.call("CONFIG", "SET", "requirepass", PASS)
    yield redis_peer
    c.call("CONFIG", "SET", "requirepass", "")
    c.close()


def raw(port, data, want_close=True, timeout=5):
    """Send data on a fresh connection; what came back until the server
    closed (or timeout)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
            if not want_close and got.endswith(b"\r\n"):
                break
    except socket.timeout:
        pass
    s.close()
    return got


# -------------------------------------------------- no password set

def test_auth_without_password_as_redis(pkvs, redis_peer):
    srv = pkvs.start(http=False)
    p = Peers(srv.resp_port, redis_peer.resp_port)
    for args in (("AUTH", "foo"), ("AUTH", "a", "b", "c"), ("AUTH", "default", "anything"),
                 ("AUTH", "nobody", "x"), ("HELLO", "2", "AUTH", "default", "x"),
                 ("ACL", "WHOAMI"), ("AUTH",)):
        got, want = p.both(*args)
        if args[0] == "HELLO":
            assert got.startswith(b"*14\r\n") and want.startswith(b"*14\r\n")
        else:
            assert got == want, args
    p.close()


# ------------------------------------------------------ a password

@pytest.mark.parametrize("proto", [2, 3])
def test_noauth_and_auth_as_redis(locked, redis_locked, proto):
    pk, rd = RawConn(locked.resp_port), RawConn(redis_locked.resp_port)
    for args in (("SET", "foo", "bar"), ("GET", "foo"), ("PING",), ("CONFIG", "GET", "x"),
                 ("CLIENT", "ID"), ("NOPE",), ("GET",), ("HELLO", str(proto)),
                 ("AUTH", "wrong!"), ("AUTH", "default", "wrong!"), ("AUTH", "x", PASS),
                 ("AUTH", "a", "b", "c"), ("HELLO", str(proto), "AUTH", "default", "nope"),
                 ("SET", "foo", "bar"), ("AUTH", PASS), ("SET", "foo", "100"), ("INCR", "foo"),
                 ("ACL", "WHOAMI"), ("AUTH", "default", PASS), ("RESET",), ("GET", "foo"),
                 ("AUTH", "default", PASS), ("GET", "foo")):
        got, want = pk.call(*args), rd.call(*args)
        assert got == want, f"{args}: pkvs {got!r}, redis {want!r}"
    pk.close()
    rd.close()
    # HELLO AUTH and SETNAME in one go
    for port in (locked.resp_port, redis_locked.resp_port):
        c = RespConn(port)
        m = c.command("HELLO", str(proto), "AUTH", "default", PASS, "SETNAME", "me")
        m = m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
        assert m.get(b"proto", m.get("proto")) == proto
        assert c.command("CLIENT", "GETNAME") == b"me"
        c.close()


def test_unauthenticated_limits_as_redis(locked, redis_locked):
    for body in (b"*100\r\n", b"*1\r\n$100000000\r\n", b"*11\r\n", b"*3000000000\r\n"):
        got = raw(locked.resp_port, body)
        want = raw(redis_locked.resp_port, body)
        assert got == want, body
    assert b"unauthenticated multibulk length" in raw(locked.resp_port, b"*100\r\n")
    assert b"unauthenticated bulk length" in raw(locked.resp_port, b"*1\r\n$100000000\r\n")
    # after AUTH a command may be as long as ever
    c = RespConn(locked.resp_port)
    assert c.command("AUTH", PASS) == "OK"
    args = ["MSET"] + [f"k{i}" for i in range(40)]
    assert c.command(*args) == "OK"
    assert c.command("SET", "big", "x" * 100000) == "OK"


def test_redis_py_and_cli_with_password(locked):
    r = redis.Redis(port=locked.resp_port, password=PASS, decode_responses=True)
    assert r.set("rp", "1") and r.get("rp") == "1"
    r3 = redis.Redis(port=locked.resp_port, password=PASS, protocol=3, decode_responses=True)
    assert r3.get("rp") == "1"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=locked.resp_port, password="nope").ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=locked.resp_port).get("rp")
    cli = tool("redis-cli")
    out = subprocess.run([cli, "-p", str(locked.resp_port), "-a", PASS, "--no-auth-warning",
                          "GET", "rp"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "1"
    out = subprocess.run([cli, "-p", str(locked.resp_port), "GET", "rp"],
                         capture_output=True, text=True, timeout=30)
    assert "NOAUTH Authentication required." in out.stdout + out.stderr


def test_config_set_requirepass(pkvs):
    srv = pkvs.start(http=False)
    old = RespConn(srv.resp_port)
    assert old.command("PING") == "PONG"
    assert old.command("CONFIG", "SET", "requirepass", "abc\x00def") == "OK"
    assert old.command("GET", "x") is None                  # connected before: still in
    new = RespConn(srv.resp_port)
    assert str(new.command("GET", "x")) == "NOAUTH Authentication required."
    assert str(new.command("AUTH", "abc")).startswith("WRONGPASS")
    assert new.command("AUTH", "abc\x00def") == "OK"         # binary, as auth.tcl's
    assert new.command("CONFIG", "GET", "requirepass") == [b"requirepass", b"abc\x00def"]
    assert new.command("RESET") == "RESET"
    assert str(new.command("GET", "x")) == "NOAUTH Authentication required."
    assert old.command("CONFIG", "SET", "requirepass", "") == "OK"
    assert RespConn(srv.resp_port).command("GET", "x") is None


def test_requirepass_from_config_file(pkvs, tmp_path):
    conf = tmp_path / "pkvs.conf"
    conf.write_text("requirepass = fromfile\nprotected-mode = no\n")
    srv = pkvs.start(["--config", str(conf)], http=False)
    c = RespConn(srv.resp_port)
    assert str(c.command("PING")) == "NOAUTH Authentication required."
    assert c.command("AUTH", "fromfile") == "OK"
    info = c.command("INFO", "server").decode()
    assert f"config_file:{conf}" in info
    assert c.command("CONFIG", "GET", "protected-mode") == [b"protected-mode", b"no"]


def test_acl_subcommands(locked):
    c = RespConn(locked.resp_port)
    c.command("AUTH", PASS)
    assert c.command("ACL", "WHOAMI") == b"default"
    assert c.command("ACL", "USERS") == [b"default"]
    assert b"string" in c.command("ACL", "CAT")
    assert c.command("ACL", "SETUSER", "u1", "on", ">x", "+get", "+acl|whoami", "~k*") == "OK"
    assert c.command("AUTH", "u1", "x") == "OK"
    assert c.command("ACL", "WHOAMI") == b"u1"
    assert str(c.command("SET", "k1", "v")).startswith("NOPERM")
    assert c.command("AUTH", PASS) == "OK"
    assert c.command("ACL", "DELUSER", "u1") == 1


# -------------------------------------------------------------- HTTP

def test_http_needs_the_password(locked):
    port = locked.port
    r = http_once(port, "PUT", "/kv/h1", body=b"v")
    assert r.status == 401
    challenges = [v for k, v in r.headers if k.lower() == "www-authenticate"]
    assert challenges == ['Basic realm="pkvs", charset="UTF-8"', 'Bearer realm="pkvs"']
    basic = base64.b64encode(f"anyone:{PASS}".encode()).decode()
    r = http_once(port, "PUT", "/kv/h1", body=b"v", headers=[("Authorization", f"Basic {basic}")])
    assert r.status in (201, 204)
    r = http_once(port, "GET", "/kv/h1", headers=[("Authorization", f"Bearer {PASS}")])
    assert r.status == 200 and r.body == b"v"
    for hdr in (("Authorization", "Bearer wrong"), ("Authorization", "Basic !!!"),
                ("Authorization", "Basic " + base64.b64encode(b"u:wrong").decode()),
                ("Authorization", "Digest x")):
        assert http_once(port, "GET", "/kv/h1", headers=[hdr]).status == 401
    for path in ("/stats", "/metrics"):
        assert http_once(port, "GET", path).status == 401
        assert http_once(port, "GET", path, headers=[("Authorization", f"Bearer {PASS}")]).status == 200


def test_http_curl(locked):
    curl = tool("curl")
    url = f"http://127.0.0.1:{locked.port}/kv/c1"
    out = subprocess.run([curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", url],
                         capture_output=True, text=True, timeout=30).stdout
    assert out == "401"
    out = subprocess.run([curl, "-s", "-u", f"x:{PASS}", "-X", "PUT", "--data-binary", "cv",
                          "-o", "/dev/null", "-w", "%{http_code}", url],
                         capture_output=True, text=True, timeout=30).stdout
    assert out in ("201", "204")
    out = subprocess.run([curl, "-s", "-H", f"Authorization: Bearer {PASS}", url],
                         capture_output=True, text=True, timeout=30).stdout
    assert out == "cv"


def test_http_open_without_password(pkvs):
    srv = pkvs.start()
    assert http_once(srv.port, "GET", "/kv/none").status == 404


# ---------------------------------------------------- protected mode

NS_SCRIPT = textwrap.dedent("""\
    set -e
    ip link set lo up
    ip addr add 10.77.0.1/32 dev lo
    {pkvs} --store {store} --store-size 64M --host 0.0.0.0 --resp-port {port} --http-port off \\
        --engine {engine} {extra} > {log} 2>&1 &
    pid=$!
    {redis} --port {rport} --save '' --appendonly no --daemonize no --logfile '' > /dev/null 2>&1 &
    rpid=$!
    for i in $(seq 50); do
        {python} - <<'EOF' && break || sleep 0.1
    import socket
    socket.create_connection(("127.0.0.1", {port}), 1).close()
    socket.create_connection(("127.0.0.1", {rport}), 1).close()
    EOF
    done
    {python} - <<'EOF'
    import socket
    def talk(port, host):
        s = socket.create_connection((host, port), 5)
        s.settimeout(5)
        s.sendall(b"PING\\r\\n")
        got = b""
        while True:
            try:
                b = s.recv(4096)
            except ConnectionResetError:
                break
            if not b:
                break
            got += b
            if got.endswith(b"\\r\\n") and not got.startswith(b"-DENIED"):
                break
        s.close()
        return got
    print(repr(talk({port}, "10.77.0.1")))
    print(repr(talk({rport}, "10.77.0.1")))
    print(repr(talk({port}, "127.0.0.1")))
    EOF
    kill $pid $rpid
    wait $pid || true
    """)


def run_in_netns(engine, extra=""):
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip for a network namespace")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a network namespace here: " + probe.stderr.decode().strip())
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        pytest.skip("redis-server is not installed")
    factory = PkvsFactory()
    store = factory.new_store()
    script = NS_SCRIPT.format(pkvs=binary("pkvs"), store=store, port=27501, rport=27502,
                              engine=engine, extra=extra, log=store + ".log", redis=redis_server,
                              python=shutil.which("python3"))
    try:
        out = subprocess.run(["unshare", "-n", "bash", "-c", script], capture_output=True,
                             text=True, timeout=60)
    finally:
        factory.cleanup()
    lines = [l for l in out.stdout.splitlines() if l.startswith(("b'", 'b"'))]
    assert len(lines) == 3, out.stdout + out.stderr
    return [eval(l) for l in lines]  # noqa: S307 (our own repr of bytes)


@pytest.mark.parametrize("engine", ["uring", "epoll"])
def test_protected_mode_as_redis(engine):
    pkvs_far, redis_far, pkvs_near = run_in_netns(engine)
    assert pkvs_far == redis_far and pkvs_far.startswith(b"-DENIED Redis is running in protected mode")
    assert pkvs_near == b"+PONG\r\n"


def test_protected_mode_off_or_password():
    far, _, near = run_in_netns("uring", "--protected-mode no")
    assert far == b"+PONG\r\n" and near == b"+PONG\r\n"
    far, _, near = run_in_netns("uring", "--requirepass pw")
    assert far == b"-NOAUTH Authentication required.\r\n" == near
