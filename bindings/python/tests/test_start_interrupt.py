"""Ctrl-C during Loader() on a remote cold start: KeyboardInterrupt within
0.5 s, and nothing left behind - no thread (Python's or the library's), no
temporary file in the cache folder, no flock held - against a server that
never answers (the HEADs stall), and one that answers the HEADs but never
sends a shard (a transfer running, its temporary file and fetch lock held).

The loader starts in a fresh interpreter; once the start is stuck (its
first connection accepted by the silent server, or a transfer's temporary
file in the cache folder), the test sends it SIGINT, as a terminal's
Ctrl-C does, and the child reports what it saw as JSON (CLOCK_MONOTONIC,
time.monotonic(), is one clock for both processes).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import rfhelpers
import rfservers

CHILD = r"""
import json, os, sys, threading, time
import ringfeed

src, cache = sys.argv[1], sys.argv[2]

def tasks():
    return len(os.listdir("/proc/self/task"))

def tmp_files():
    return [n for _, _, names in os.walk(cache) for n in names if ".tmp." in n]

base = tasks()
out = {"interrupted": False}
try:
    ringfeed.Loader(src, cache_dir=cache, batch_size=4, image_size=16, num_workers=1,
                    fetch_retries=0, fetch_timeout_ms=20000, output="numpy")  # no torch import
except KeyboardInterrupt:
    out = {"interrupted": True, "caught": time.monotonic()}
except ringfeed.RingfeedError as e:
    out["error"] = str(e)
with open("/proc/locks") as f:
    flocks = sum(1 for line in f if line.split()[1] == "FLOCK"
                 and line.split()[4] == str(os.getpid()))
# a joined Python thread may still be leaving the kernel for a moment
deadline = time.monotonic() + 2
while tasks() > base and time.monotonic() < deadline:
    time.sleep(0.01)
out.update(python_threads=threading.active_count(), tasks=tasks(), base=base, tmp=tmp_files(),
           flocks=flocks)
print(json.dumps(out))
"""


def _flocks_of(pid):
    with open("/proc/locks") as f:
        return sum(1 for line in f if line.split()[1] == "FLOCK" and line.split()[4] == str(pid))


def _tmp_files(cache):
    return [n for _, _, names in os.walk(cache) for n in names if ".tmp." in n]


def _interrupted(src, cache, stuck):
    """Starts the child on src, waits until stuck(child) is true, sends
    SIGINT; returns the child's report and the test's checks."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, src, str(cache)],
                             env=rfhelpers.child_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not stuck(child) and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.01)
        before = {"tmp": len(_tmp_files(cache)), "flocks": _flocks_of(child.pid)}
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, (child.returncode, err)
    r = json.loads(out.strip().splitlines()[-1])
    assert r["interrupted"], r
    r["latency"] = r["caught"] - sent
    assert r["latency"] < 0.5, r
    assert r["python_threads"] == 1 and r["tasks"] == r["base"], r
    assert r["tmp"] == [] and r["flocks"] == 0, r
    r["before"] = before
    return r


def test_ctrl_c_while_the_heads_stall(tmp_path):
    with socket.socket() as s:  # takes the connections, answers nothing
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        s.setblocking(False)
        conns = []

        def stuck(child):
            try:
                conns.append(s.accept()[0])  # a HEAD arrived: the start waits on it
                return True
            except BlockingIOError:
                return False

        src = "http://127.0.0.1:%d/t-{0000..0003}.tar" % s.getsockname()[1]
        try:
            _interrupted(src, tmp_path / "cache", stuck)
        finally:
            for c in conns:
                c.close()


def test_ctrl_c_while_a_transfer_stalls(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    for i in range(3):  # the bytes do not matter: no GET of a shard is answered
        (served / ("t-%04d.tar" % i)).write_bytes(b"\0" * 10240)
    cache = tmp_path / "cache"
    with rfservers.http_files(str(served)) as url, \
            rfservers.fault_proxy(url, str(tmp_path / "proxy.log"), hold_s=60,
                                  hold_match="^GET .*[.]tar") as px:
        r = _interrupted(px.url + "/t-{0000..0002}.tar", cache,
                         lambda child: _tmp_files(cache) and _flocks_of(child.pid))
    assert r["before"]["tmp"] > 0 and r["before"]["flocks"] > 0, r  # a transfer was running
