"""python/paste_proc.py itself: starting, stopping and restarting servers
(with a listening line or without one), the errors a misbehaving server
gives, the raw-socket helpers and the HTTP client's errors.

Most cases run a small Python stand-in server (FAKE below) so they take
milliseconds; the phttpd cases check the real listening line and store."""
import os
import signal
import socket
import sys
import threading

import pytest

import paste_proc
from paste_proc import (ConnectionClosed, HttpConn, Phttpd, ProtocolError, RespConn, Server,
                        ServerError, ServerFailed)

# argv[1] picks the behaviour. A serving fake answers every request with
# "ok" and exits on SIGTERM with argv[2] (default 0); it listens on port
# argv[3] (default 0) and says so on stderr, on stdout ("stdout") or not
# at all ("quiet").
FAKE = r"""
import signal, socket, sys, time
mode = sys.argv[1]
if mode == "fail":
    print("fake: unknown option --frob", file=sys.stderr, flush=True)
    sys.exit(2)
if mode == "silent":
    print("fake: starting", file=sys.stderr, flush=True)
    time.sleep(60)
    sys.exit(0)
code = int(sys.argv[2]) if len(sys.argv) > 2 else 0
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn"
              else lambda *a: sys.exit(code))
s = socket.socket()
s.bind(("127.0.0.1", port))
s.listen(16)
if mode != "quiet":
    print("fake: listening on 127.0.0.1:%d" % s.getsockname()[1],
          file=sys.stdout if mode == "stdout" else sys.stderr, flush=True)
if mode == "chatty":
    for i in range(5000):
        print("fake: line %d %s" % (i, "x" * 100), file=sys.stderr)
    sys.stderr.flush()
while True:
    c, _ = s.accept()
    c.recv(65536)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c.close()
"""


def fake(mode, *args, **kw):
    return Server([sys.executable, "-c", FAKE, mode] + [str(a) for a in args], **kw)


@pytest.fixture
def servers():
    """Servers to kill at the end whatever happened."""
    started = []
    yield started
    for srv in started:
        srv.kill9()


def test_generic_server_start_stop_restart(servers):
    srv = fake("serve")
    servers.append(srv)
    srv.start()
    assert srv.running() and srv.port > 0
    assert "fake: listening on 127.0.0.1:%d" % srv.port in srv.stderr()
    assert paste_proc.http_once(srv.port, "GET", "/").body == b"ok"
    first_pid = srv.pid
    srv.restart()
    assert srv.pid != first_pid
    assert paste_proc.http_once(srv.port, "GET", "/").body == b"ok"
    assert srv.stop() == 0
    assert not srv.running()

def test_chatty_server_keeps_running_and_tail_is_bounded(servers):
    srv = fake("chatty", max_lines=10)
    servers.append(srv)
    srv.start()
    # 5000 lines of 100+ bytes overflow any pipe: the reader thread drains them.
    assert paste_proc.http_once(srv.port, "GET", "/").body == b"ok"
    srv.stop()
    lines = srv.stderr().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("fake: line 4999 ")


def test_exit_before_listening_reports_stderr():
    srv = fake("fail")
    with pytest.raises(ServerFailed) as info:
        srv.start()
    e = info.value
    assert e.returncode == 2
    assert "unknown option --frob" in e.stderr
    assert "exited with 2 before listening" in str(e) and "unknown option --frob" in str(e)
    assert isinstance(e, AssertionError)
    assert not srv.running()


def test_no_listening_line_within_timeout():
    srv = fake("silent")
    with pytest.raises(ServerFailed) as info:
        srv.start(timeout=0.5)
    assert info.value.returncode is None
    assert "no listening line within 0.5s" in str(info.value)
    assert "fake: starting" in info.value.stderr
    assert not srv.running()


def test_stop_of_a_crashed_server(servers):
    srv = fake("serve")
    servers.append(srv)
    srv.start()
    os.kill(srv.pid, signal.SIGKILL)
    srv.proc.wait()
    with pytest.raises(ServerError, match="already exited with -9"):
        srv.stop()
    assert srv.stop(check=False) == -9


def test_stop_after_kill9(servers):
    srv = fake("serve")
    servers.append(srv)
    srv.start().kill9()
    assert not srv.running()
    assert srv.stop() is None                   # a crash test's kill: not a failure
    assert srv.stop(check=False) == -9


def test_stop_nonzero_exit(servers):
    srv = fake("serve", 3)
    servers.append(srv)
    srv.start()
    with pytest.raises(ServerError, match="exited with 3 after SIGTERM"):
        srv.stop()


def test_stop_is_bounded(servers):
    srv = fake("stubborn")
    servers.append(srv)
    srv.start()
    with pytest.raises(ServerError, match="did not exit within 0.3s of SIGTERM"):
        srv.stop(timeout=0.3)
    assert not srv.running()
    srv = fake("stubborn", check_exit=False)
    servers.append(srv)
    srv.start()
    assert srv.stop(timeout=0.3) == -signal.SIGKILL


def test_server_without_a_listening_line(servers):
    port = paste_proc.free_port()
    srv = fake("quiet", 0, port, listen_re=None, port=port)
    servers.append(srv)
    assert srv.start() is srv and srv.port == port
    assert paste_proc.http_once(port, "GET", "/").body == b"ok"
    assert srv.stop() == 0
    with pytest.raises(ValueError, match="needs its port"):
        fake("quiet", listen_re=None)


def test_never_ready_within_timeout():
    srv = fake("silent", listen_re=None, port=paste_proc.free_port())
    with pytest.raises(ServerFailed, match="was not ready within 0.5s") as info:
        srv.start(timeout=0.5)
    assert info.value.returncode is None and "fake: starting" in info.value.stderr
    assert not srv.running()


def test_listening_line_on_stdout(servers):
    srv = fake("stdout", stdout=True)
    servers.append(srv)
    srv.start()
    assert "fake: listening on 127.0.0.1:%d" % srv.port in srv.stderr()
    assert paste_proc.http_once(srv.port, "GET", "/").body == b"ok"
    srv.stop()
    with pytest.raises(ServerFailed, match="no listening line"):   # stdout unread
        fake("stdout").start(timeout=0.5)


def test_run_to_exit():
    rc, err = paste_proc.run_to_exit([sys.executable, "-c", FAKE, "fail"])
    assert rc == 2 and "unknown option --frob" in err
    with pytest.raises(ServerError, match="kept running"):
        paste_proc.run_to_exit([sys.executable, "-c", FAKE, "serve"], timeout=0.5)


def test_missing_binary(tmp_path):
    with pytest.raises(paste_proc.MissingBinary, match="set PASTE_BUILD"):
        paste_proc.binary("phttpd", build=tmp_path)


@pytest.mark.crash
def test_phttpd_own_store_restart_and_crash(phttpd):
    srv = Phttpd(["--mode", "wal", "--store-size", "64M"], store_dir=phttpd.tmpdir())
    try:
        assert srv.own_store and not os.path.exists(srv.store)
        srv.start()
        assert os.path.exists(srv.store)
        assert srv.stats()["log_last_lsn"] == 0
        with HttpConn(srv.port) as c:
            assert c.request("POST", "/log", b"hello").status == 201
        srv.restart()                           # same store, kept
        assert paste_proc.http_once(srv.port, "GET", "/log/1").body == b"hello"
        srv.kill9()
        srv.start()                             # recovery after kill -9
        assert paste_proc.http_once(srv.port, "GET", "/log/1").body == b"hello"
        store = srv.store
        assert srv.stop() == 0
        assert not os.path.exists(store)        # an own store goes with stop()
    finally:
        srv.kill9()
        srv.remove_store()


def test_phttpd_refuses_bad_flag(phttpd):
    srv = Phttpd(["--frobnicate"], store=phttpd.new_store())
    with pytest.raises(ServerFailed, match="--frobnicate") as info:
        srv.start()
    assert info.value.returncode == 2


def serve_once(reply, close=True):
    """A listening socket that answers one connection with reply bytes."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)

    def run():
        c, _ = s.accept()
        c.recv(65536)
        c.sendall(reply)
        if close:
            c.close()
        s.close()
    threading.Thread(target=run, daemon=True).start()
    return s.getsockname()[1]


def test_clients_over_a_connected_socket():
    sock = paste_proc.connect(serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    sock.sendall(paste_proc.build_request("GET", "/"))
    assert HttpConn.over(sock).read_response().body == b"ok"
    sock.close()
    sock = paste_proc.connect(serve_once(b"+PONG\r\n:7\r\n"), rcvbuf=4096)
    sock.sendall(paste_proc.resp_command("PING"))
    c = RespConn.over(sock)
    assert c.read_reply() == "PONG" and c.read_reply() == 7
    c.close()


def test_reset_is_a_rst():
    lsock = socket.create_server(("127.0.0.1", 0))
    try:
        c = paste_proc.connect(lsock.getsockname()[1])
        peer, _ = lsock.accept()
        paste_proc.reset(c)
        peer.settimeout(5)
        with pytest.raises(ConnectionResetError):
            peer.recv(10)
        peer.close()
    finally:
        lsock.close()


def test_take_response_waits_for_whole_responses():
    two = (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
           b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    first_len = two.index(b"HTTP/1.1 404")
    for cut in range(len(two)):
        buf = bytearray(two[:cut])
        first = paste_proc.take_response(buf)
        if cut < first_len:                      # nothing taken from a part
            assert first is None and buf == two[:cut]
        else:
            assert first.status == 200 and first.body == b"abc"
            assert buf == two[first_len:cut] and paste_proc.take_response(buf) is None
    buf = bytearray(two)
    assert [paste_proc.take_response(buf).status for _ in range(2)] == [200, 404] and not buf
    head = bytearray(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")
    assert paste_proc.take_response(head, "HEAD").body == b"" and not head


def test_redis_server_directory_and_ping():
    try:
        redis = paste_proc.RedisServer()
    except paste_proc.MissingBinary as e:
        pytest.skip(str(e))
    redis.start()
    try:
        d = redis.dir
        assert os.path.isdir(d) and redis.resp_port == redis.port
        with RespConn(redis.port) as c:
            assert c.command("SET", "k", "v") == "OK" and c.command("GET", "k") == b"v"
    finally:
        assert redis.stop() == 0
    assert not os.path.exists(d)


@pytest.mark.parametrize("reply, error, words", [
    (b"garbage\r\n\r\n", ProtocolError, "bad status line"),
    (b"HTTP/1.1 200 OK\r\nX: 1\r\n\r\n", ProtocolError, "without a valid Content-Length"),
    (b"HTTP/1.1 200 OK\r\nbroken\r\nContent-Length: 0\r\n\r\n", ProtocolError, "bad response header"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", ConnectionClosed, "closed"),
    (b"HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n",
     ProtocolError, "GET /stats"),
])
def test_http_errors(reply, error, words):
    port = serve_once(reply)
    with pytest.raises(error, match=words):
        if words == "GET /stats":
            paste_proc.get_stats(port)
        else:
            paste_proc.http_once(port, "GET", "/")
