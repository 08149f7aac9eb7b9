"""pkvs over HTTP, through curl and Python's http.client: PUT/GET/HEAD/DELETE
/kv/<key>, range listings, errors.

Each test starts its own pkvs on free ports of 127.0.0.1 and stops it.
"""
import http.client
import json
import os
import subprocess
import urllib.parse

import pytest

from conftest import ENGINES, HttpConn, http_once, tool

ENGINE_ARGS = {e: ["--engine", e] for e in ENGINES}


def curl(*args, data=None, timeout=20):
    """curl -s ... -w '%{http_code}'; returns (status, body bytes)."""
    argv = [tool("curl"), "-s", "-o", "-", "-w", "\n%{http_code}"] + list(args)
    r = subprocess.run(argv, input=data, capture_output=True, timeout=timeout)
    assert r.returncode == 0, (argv, r.stderr)
    body, _, code = r.stdout.rpartition(b"\n")
    return int(code), body


@pytest.mark.basic
def test_curl_put_get_head_delete(pkvs, engine):
    srv = pkvs.start(ENGINE_ARGS[engine])
    url = srv.url("/kv/alpha")
    assert curl("-X", "PUT", "--data-binary", "@-", url, data=b"first value") == (201, b"")
    assert curl(url) == (200, b"first value")
    assert curl("-X", "PUT", "--data-binary", "@-", url, data=b"second") == (204, b"")
    assert curl(url) == (200, b"second")
    code, head = curl("-I", url)
    assert code == 200 and b"Content-Length: 6" in head, head
    assert curl("-X", "DELETE", url) == (204, b"")
    assert curl(url)[0] == 404
    assert curl("-I", url)[0] == 404
    assert curl("-X", "DELETE", url)[0] == 404


def test_http_client_binary_values_and_keys(pkvs, engine):
    # 32 KiB buffers: a value spans at most 63 of them (2 MiB).
    srv = pkvs.start(ENGINE_ARGS[engine] + ["--buf-size", "32768", "--ring-bufs", "1024"],
                     store_size="256M")
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    values = {}
    for n in (0, 1, 100, 2047, 2048, 2049, 65536, 1 << 20):
        key = f"size-{n}"
        body = os.urandom(n)
        conn.request("PUT", f"/kv/{key}", body=body)
        r = conn.getresponse()
        r.read()
        assert r.status == 201, (n, r.status)
        values[key] = body
    # Percent-encoded keys: any byte may be in a key.
    odd = b"a/b c?\x00\xff%"
    conn.request("PUT", "/kv/" + urllib.parse.quote(odd, safe=""), body=b"odd")
    r = conn.getresponse()
    r.read()
    assert r.status == 201
    for key, body in values.items():
        conn.request("GET", f"/kv/{key}")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == body, key
        assert r.getheader("Content-Type") == "application/octet-stream"
        assert r.getheader("Server") == "pkvs"     # the server's own name, not phttpd
    conn.request("GET", "/kv/" + urllib.parse.quote(odd, safe=""))
    r = conn.getresponse()
    assert r.status == 200 and r.read() == b"odd"
    conn.close()


def test_range_listing(pkvs):
    srv = pkvs.start()
    names = [f"item{i:03d}" for i in range(50)] + ["zeta", "alpha"]
    with HttpConn(srv.port) as c:
        for n in names:
            assert c.request("PUT", f"/kv/{n}", n.encode() * 2).status == 201
        r = c.request("GET", "/kv?start=item010&end=item020&limit=100")
        assert r.status == 200 and r.header("Content-Type") == "application/json", r
        doc = json.loads(r.body)
        assert [k["key"] for k in doc["keys"]] == [f"item{i:03d}" for i in range(10, 20)]
        assert all(k["len"] == 14 for k in doc["keys"])
        assert doc["more"] is False
        r = c.request("GET", "/kv?limit=3")
        doc = json.loads(r.body)
        assert [k["key"] for k in doc["keys"]] == ["alpha", "item000", "item001"]
        assert doc["more"] is True
        r = c.request("GET", "/kv?start=item048")
        doc = json.loads(r.body)
        assert [k["key"] for k in doc["keys"]] == ["item048", "item049", "zeta"]
    # Bad input: the status, then that connection closes.
    for query in ("limit=0", "limit=abc", "bogus=1", "start=%zz"):
        assert http_once(srv.port, "GET", f"/kv?{query}").status == 400, query


def test_http_errors(pkvs):
    srv = pkvs.start(["--max-value", "65536"])
    # Bad input: the status, then that connection closes.
    assert http_once(srv.port, "PUT", "/kv/", b"x").status == 400
    assert http_once(srv.port, "PUT", "/kv/" + "k" * 513, b"x").status == 414
    assert http_once(srv.port, "PUT", "/kv/%zz", b"x").status == 400
    with HttpConn(srv.port) as c:
        assert c.request("POST", "/kv/a", b"x").status == 405
        assert c.request("GET", "/elsewhere").status == 404
    # Over --max-value: 413 before the body is read, then the connection closes.
    with HttpConn(srv.port) as c:
        c.send(b"PUT /kv/big HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n")
        r = c.read_response()
        assert r.status == 413, r
    assert http_once(srv.port, "GET", "/kv/big").status == 404
    st = srv.stats()
    assert st["keys"] == 0, st


def test_put_is_durable_before_ack_across_restart(pkvs, engine):
    srv = pkvs.start(ENGINE_ARGS[engine])
    with HttpConn(srv.port) as c:
        for i in range(300):
            assert c.request("PUT", f"/kv/k{i}", f"v{i}".encode()).status == 201
    srv.kill9()
    srv.start()
    with HttpConn(srv.port) as c:
        for i in range(300):
            r = c.request("GET", f"/kv/k{i}")
            assert r.status == 200 and r.body == f"v{i}".encode(), i


@pytest.mark.parametrize("front", ["http", "resp"])
def test_one_front_end_off(pkvs, front):
    srv = pkvs.start(http=(front == "http"), resp=(front == "resp"))
    if front == "http":
        assert srv.resp_port is None
        assert http_once(srv.port, "PUT", "/kv/x", b"1").status == 201
    else:
        assert srv.port is None and srv.resp_port
