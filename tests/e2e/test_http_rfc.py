"""HTTP as RFC 9110 and RFC 9112 say, through curl (and a raw socket where
curl will not send what is tested), against pkvs and phttpd: every status
line with its reason phrase, Host required on HTTP/1.1, the request
target's query and fragment kept out of keys and paths, absolute-form
targets (curl --proxy sends them) on every route, the listing's limit
capped, and query parameters a route does not know refused.

Each test starts its own server on free ports of 127.0.0.1 and stops it.
"""
import json
import os
import re
import subprocess

from conftest import HttpConn, connect, tool

# RFC 9110 section 15 (and RFC 6585 for 431, RFC 4918 for 507).
REASON = {
    100: "Continue", 200: "OK", 201: "Created", 204: "No Content",
    400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 413: "Content Too Large", 414: "URI Too Long",
    417: "Expectation Failed", 431: "Request Header Fields Too Large",
    501: "Not Implemented", 503: "Service Unavailable",
    505: "HTTP Version Not Supported", 507: "Insufficient Storage",
}

STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3}) ([^\r\n]*)\r\n")


class Reply:
    def __init__(self, status, reason, head, body):
        self.status, self.reason, self.head, self.body = status, reason, head, body

    def header(self, name):
        m = re.search(rb"(?im)^" + re.escape(name.encode()) + rb":[ \t]*([^\r\n]*)", self.head)
        return m.group(1).decode() if m else None

    def __repr__(self):
        return f"<Reply {self.status} {self.reason!r} {self.head!r} {self.body[:200]!r}>"


def parse_reply(raw):
    """The final response in raw (interim 1xx responses skipped)."""
    while True:
        m = STATUS_LINE.match(raw)
        assert m, raw[:300]
        end = raw.index(b"\r\n\r\n") + 4
        if not m.group(1).startswith(b"1"):
            return Reply(int(m.group(1)), m.group(2).decode(), raw[:end], raw[end:])
        raw = raw[end:]


def curl(*args, data=None):
    """curl -sS -i with args; the Reply it got."""
    argv = [tool("curl"), "-sS", "-i", "--max-time", "20"] + [str(a) for a in args]
    if data is not None:
        argv += ["--data-binary", "@-"]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    r = subprocess.run(argv, input=data, capture_output=True, timeout=30, env=env)
    assert r.returncode == 0, (argv, r.stderr)
    return parse_reply(r.stdout)


def raw(port, request):
    """request sent as it is on a fresh connection; the reply (the server
    closes after an error, or the request asks it to)."""
    with connect(port, timeout=10) as s:
        s.sendall(request)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    return parse_reply(got)


def check_reason(r):
    assert r.reason == REASON[r.status], r


def proxy(port):
    """curl options that send absolute-form targets to the server."""
    return ["--proxy", f"http://127.0.0.1:{port}"]


def test_reason_phrases_pkvs(pkvs):
    srv = pkvs.start(["--max-value", "65536"])
    url = srv.url
    replies = [
        curl("-X", "PUT", url("/kv/a"), data=b"v"),                       # 201
        curl("-X", "PUT", url("/kv/a"), data=b"w"),                       # 204
        curl(url("/kv/a")),                                               # 200
        curl(url("/kv/nope")),                                            # 404
        curl("-X", "POST", url("/kv/a"), data=b"x"),                      # 405
        curl(url("/elsewhere")),                                          # 404
        curl(url("/kv/%zz")),                                             # 400
        curl(url("/kv/" + "k" * 513)),                                    # 414
        curl("-H", "Expect: 100-continue", "-X", "PUT", url("/kv/big"),
             data=b"x" * 70000),                                          # 413
        curl("-H", "Expect: teapot", url("/kv/a")),                       # 417
        curl("-H", "X-Pad: " + "p" * 9000, url("/kv/a")),                 # 431
        curl("-H", "Transfer-Encoding: chunked", "-X", "PUT", url("/kv/c"), data=b"x"),  # 501
    ]
    assert [r.status for r in replies] == [201, 204, 200, 404, 405, 404, 400, 414, 413,
                                           417, 431, 501], replies
    replies.append(raw(srv.port, b"GET /kv/a HTTP/1.2\r\nHost: h\r\n\r\n"))
    assert replies[-1].status == 505
    for r in replies:
        check_reason(r)
    # The error bodies repeat the status line's words.
    assert replies[7].body == b"414 URI Too Long\n", replies[7]


def test_reason_phrases_phttpd(phttpd):
    srv = phttpd.start(mode="wal")
    url = srv.url
    replies = [
        curl("-X", "POST", url("/log"), data=b"rec"),                     # 201
        curl(url("/log/1")),                                              # 200
        curl(url("/log/9")),                                              # 404
        curl("-X", "PUT", url("/log"), data=b"x"),                        # 405
        curl("-X", "DELETE", url("/log?upto=x")),                         # 400
        curl("-X", "DELETE", url("/log?upto=1")),                         # 200
        curl(url("/stats")),                                              # 200
    ]
    assert [r.status for r in replies] == [201, 200, 404, 405, 400, 200, 200], replies
    for r in replies:
        check_reason(r)
    # 100 Continue: its own status line
    with connect(srv.port, timeout=10) as s:
        s.sendall(b"POST /log HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 2\r\n\r\n")
        assert s.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_host_required_on_http11(pkvs):
    srv = pkvs.start()
    assert curl("-X", "PUT", srv.url("/kv/h"), data=b"v").status == 201
    # curl -H "Host:" leaves the field out.
    r = curl("-H", "Host:", srv.url("/kv/h"))
    assert r.status == 400 and r.reason == "Bad Request", r
    assert r.header("Connection") == "close", r
    r = curl("--http1.0", "-H", "Host:", srv.url("/kv/h"))
    assert r.status == 200 and r.body == b"v", r
    for request in [
        b"GET /kv/h HTTP/1.1\r\n\r\n",
        b"GET /kv/h HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",             # two, even equal
        b"GET /kv/h HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /kv/h HTTP/1.1\r\nHost: a b\r\n\r\n",                       # not host[:port]
        b"GET /kv/h HTTP/1.1\r\nHost: user@a\r\n\r\n",
        b"GET /kv/h HTTP/1.1\r\nHost: a:8x\r\n\r\n",
        b"GET /stats HTTP/1.1\r\n\r\n",
    ]:
        r = raw(srv.port, request)
        assert (r.status, r.reason) == (400, "Bad Request"), (request, r)
    for request in [b"GET /kv/h HTTP/1.0\r\n\r\n",
                    b"GET /kv/h HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n",
                    b"GET /kv/h HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n"]:
        r = raw(srv.port, request)
        assert r.status == 200 and r.body == b"v", (request, r)


def test_query_and_fragment_are_not_the_key(pkvs):
    srv = pkvs.start()
    url = srv.url
    # A parameter /kv/<key> does not know: 400, and nothing stored anywhere.
    r = curl("-X", "PUT", url("/kv/q?x=1"), data=b"one")
    assert r.status == 400 and r.body == b"400 Bad Request: unknown query parameter\n", r
    r = curl("-X", "PUT", "--request-target", "/kv/q?x=1#frag", url("/"), data=b"one")
    assert r.status == 400, r
    for key in ("/kv/q", "/kv/q%3Fx=1", "/kv/q%3Fx=1%23frag"):
        assert curl(url(key)).status == 404, key
    # A fragment (which clients should not send) is not part of the path.
    r = curl("-X", "PUT", "--request-target", "/kv/q#frag", url("/"), data=b"two")
    assert r.status == 201, r
    assert curl(url("/kv/q")).body == b"two"
    # An empty query names no parameter; "?" and "#" escaped are key bytes.
    assert curl("-X", "PUT", url("/kv/q?"), data=b"three").status == 204
    assert curl("-X", "PUT", url("/kv/a%3Fb%23c"), data=b"four").status == 201
    r = curl("--request-target", "/kv?limit=10#frag", url("/"))
    assert r.status == 200, r
    assert [k["key"] for k in json.loads(r.body)["keys"]] == ["a?b#c", "q"], r
    assert curl(url("/kv/q")).body == b"three"
    # The other methods alike.
    for method in ("GET", "HEAD", "DELETE"):
        r = curl("-X", method, url("/kv/q?v=1"))
        assert r.status == 400, (method, r)
    assert curl("-X", "DELETE", "--request-target", "/kv/q#x", url("/")).status == 204


def test_absolute_form_on_every_pkvs_route(pkvs):
    srv = pkvs.start()
    px = proxy(srv.port)
    # curl --proxy sends "PUT http://kv.example/kv/a HTTP/1.1" and Host: kv.example.
    assert curl(*px, "-X", "PUT", "http://kv.example/kv/a", data=b"abs").status == 201
    assert curl(*px, "-X", "PUT", "http://kv.example:1234/kv/b", data=b"b").status == 201
    r = curl(*px, "http://kv.example/kv/a")
    assert r.status == 200 and r.body == b"abs", r
    assert curl(*px, "-I", "http://kv.example/kv/a").header("Content-Length") == "3"
    assert curl(srv.url("/kv/a")).body == b"abs"            # one key, whatever the form
    r = curl(*px, "http://kv.example/kv?limit=5")
    assert [k["key"] for k in json.loads(r.body)["keys"]] == ["a", "b"], r
    r = curl(*px, "http://kv.example/stats")
    assert r.status == 200 and json.loads(r.body)["keys"] == 2, r
    r = curl(*px, "http://kv.example/metrics")
    assert r.status == 200 and b"paste_replies_total" in r.body, r
    assert curl(*px, "-X", "PUT", "http://kv.example/kv/a?x=1", data=b"y").status == 400
    assert curl(*px, "-X", "DELETE", "http://kv.example/kv/a").status == 204
    assert curl(*px, "http://kv.example/kv/a").status == 404
    assert curl(*px, "http://kv.example/nothing").status == 404
    # The authority takes the place of Host, which HTTP/1.1 still sends.
    r = raw(srv.port, b"GET http://x/kv/b HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n")
    assert r.status == 200 and r.body == b"b", r
    r = raw(srv.port, b"GET HTTPS://x/kv/b HTTP/1.0\r\n\r\n")
    assert r.status == 200 and r.body == b"b", r
    r = raw(srv.port, b"GET http://x HTTP/1.0\r\n\r\n")          # empty path: "/"
    assert r.status == 404, r
    for request in [b"GET http://x/kv/b HTTP/1.1\r\n\r\n",
                    b"GET ftp://x/kv/b HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET http://u@x/kv/b HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET http:///kv/b HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET kv/b HTTP/1.1\r\nHost: x\r\n\r\n"]:
        r = raw(srv.port, request)
        assert r.status == 400, (request, r)
    r = raw(srv.port, b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n")
    assert (r.status, r.reason) == (501, "Not Implemented"), r


def test_absolute_form_on_every_log_route(phttpd):
    srv = phttpd.start(mode="wal")
    px = proxy(srv.port)
    r = curl(*px, "-X", "POST", "http://log.example/log", data=b"first")
    assert r.status == 201 and r.header("X-Paste-LSN") == "1", r
    assert curl(*px, "-X", "POST", "http://log.example:99/log", data=b"second").status == 201
    r = curl(*px, "http://log.example/log/1")
    assert r.status == 200 and r.body == b"first", r
    r = curl(*px, "-I", "http://log.example/log/2")
    assert r.status == 200 and r.header("Content-Length") == "6", r
    r = curl("--request-target", "/log/2#frag", srv.url("/"))
    assert r.status == 200 and r.body == b"second", r
    assert json.loads(curl(*px, "http://log.example/stats").body)["log_records"] == 2
    assert b"paste_log_records 2" in curl(*px, "http://log.example/metrics").body
    r = curl(*px, "-X", "DELETE", "http://log.example/log?upto=1")
    assert r.status == 200 and json.loads(r.body) == {"truncated": 1}, r
    assert curl(*px, "http://log.example/log/1").status == 404


def test_log_query_parameters(phttpd):
    srv = phttpd.start(mode="wal")
    url = srv.url
    assert curl("-X", "POST", url("/log"), data=b"r").status == 201
    for args, why in [
        (["-X", "POST", url("/log?x=1")], "unknown query parameter"),
        ([url("/log/1?x=1")], "unknown query parameter"),
        (["-X", "DELETE", url("/log?upto=1&x=1")], "unknown query parameter"),
        (["-X", "DELETE", url("/log?upto=1&upto=1")], "repeated query parameter"),
        (["-X", "DELETE", url("/log")], "upto=<lsn> missing"),
        (["-X", "DELETE", url("/log?upto=")], "upto is not an LSN"),
        ([url("/stats?pretty=1")], "unknown query parameter"),
        ([url("/metrics?x")], "unknown query parameter"),
    ]:
        r = curl(*args, data=b"x" if "POST" in args else None)
        assert r.status == 400 and r.body == f"400 Bad Request: {why}\n".encode(), (args, r)
    assert curl(url("/log/1")).status == 200                    # nothing was dropped
    # 405 names the methods of the resource asked for.
    assert curl("-X", "PUT", url("/log"), data=b"x").header("Allow") == "POST, DELETE"
    assert curl("-X", "DELETE", url("/log/1")).header("Allow") == "GET, HEAD"
    r = curl("-X", "DELETE", url("/log?upto=1&"))               # empty pairs are no parameter
    assert r.status == 200, r
    assert curl(url("/stats?")).status == 200


def test_listing_limit_capped(pkvs):
    srv = pkvs.start()
    with HttpConn(srv.port, timeout=30) as c:
        c.send(b"".join(b"PUT /kv/k%04d HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nv" % i
                        for i in range(1005)))
        assert all(r.status == 201 for r in c.read_responses(["PUT"] * 1005))
    url = srv.url
    for limit in ("1001", "5000", "99999999999999999999999999"):
        r = curl(url(f"/kv?limit={limit}"))
        assert r.status == 200, (limit, r)
        doc = json.loads(r.body)
        assert len(doc["keys"]) == 1000 and doc["more"] is True, limit
        assert doc["keys"][-1]["key"] == "k0999", limit
    doc = json.loads(curl(url("/kv?limit=1000&start=k0005")).body)
    assert len(doc["keys"]) == 1000 and doc["more"] is False
    doc = json.loads(curl(url("/kv?limit=0007")).body)
    assert len(doc["keys"]) == 7 and doc["more"] is True
    for query, why in [("limit=0", "limit must be at least 1"),
                       ("limit=000", "limit must be at least 1"),
                       ("limit=", "limit is not a number"),
                       ("limit=-5", "limit is not a number"),
                       ("limit=1e3", "limit is not a number"),
                       ("limit", "query parameter without a value"),
                       ("limit=5&limit=6", "repeated query parameter"),
                       ("lmit=5", "unknown query parameter")]:
        r = curl(url(f"/kv?{query}"))
        assert r.status == 400 and r.body == f"400 Bad Request: {why}\n".encode(), (query, r)
    # HEAD on the listing: its length, no body; other methods: 405 naming GET, HEAD.
    r = curl("-I", url("/kv?limit=2"))
    assert r.status == 200 and int(r.header("Content-Length")) > 0 and r.body == b"", r
    r = curl("-X", "DELETE", url("/kv"))
    assert r.status == 405 and r.header("Allow") == "GET, HEAD", r
