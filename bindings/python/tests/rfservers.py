"""Real servers on 127.0.0.1 for the remote-shard tests, each in a
subprocess on a free port, always stopped (context managers):

  moto_s3()      an S3-compatible server (moto[server]) with SigV4 checking on:
                 an IAM user with s3:* is made, then authentication is switched
                 on, so every request the library makes must be signed right.
  http_files()   Python's http.server over a folder (plain HTTP).
  fault_proxy()  tests/rfproxy.py in front of either: counts requests and, at
                 a given rate, drops connections, answers 503, stalls past the
                 client's timeout, cuts the body short or trickles it.

moto and boto3 come from the test virtualenv (`make deps`: .venv-test); the
tests skip when they cannot be imported.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server on port %d did not start" % port)


@contextlib.contextmanager
def _process(args, port, env=None, cwd=None):
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    try:
        _wait_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def have_moto():
    try:
        import boto3  # noqa: F401
        import moto  # noqa: F401
        return True
    except ImportError:
        return False


class S3:
    """A running moto server: endpoint, the IAM user's keys, a boto3 client."""

    def __init__(self, endpoint, key_id, secret):
        import boto3
        self.endpoint = endpoint
        self.key_id = key_id
        self.secret = secret
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                                   aws_access_key_id=key_id, aws_secret_access_key=secret)

    def env(self, endpoint=None, key_id=None, secret=None):
        """The AWS_* variables a loader reads (endpoint: another, e.g. a proxy)."""
        return {"AWS_ENDPOINT_URL": endpoint or self.endpoint, "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": key_id or self.key_id,
                "AWS_SECRET_ACCESS_KEY": secret or self.secret}

    def upload(self, bucket, prefix, paths):
        names = []
        for p in paths:
            key = prefix + os.path.basename(p)
            self.client.upload_file(p, bucket, key)
            names.append(key)
        return names


@contextlib.contextmanager
def moto_s3(buckets=("data",)):
    import boto3
    port = free_port()
    endpoint = "http://127.0.0.1:%d" % port
    env = dict(os.environ, AWS_ACCESS_KEY_ID="setup", AWS_SECRET_ACCESS_KEY="setup")
    with _process([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                  port, env=env):
        setup = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                     aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="loader")
        iam.put_user_policy(UserName="loader", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="loader")["AccessKey"]
        s3 = boto3.client("s3", **setup)
        for b in buckets:
            s3.create_bucket(Bucket=b)
        # from now on every request is authenticated and its signature checked
        req = urllib.request.Request(endpoint + "/moto-api/reset-auth", data=b"0",
                                     method="POST", headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(req, timeout=10).read()
        yield S3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])


@contextlib.contextmanager
def http_files(root):
    port = free_port()
    with _process([sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", str(root),
                   str(port)], port):
        yield "http://127.0.0.1:%d" % port


class Proxy:
    def __init__(self, url, log):
        self.url = url
        self.log = log

    def arrivals(self):
        """[(seconds, method, path)]: when each request arrived (time.monotonic())."""
        out = []
        if os.path.exists(self.log + ".times"):
            with open(self.log + ".times") as f:
                for line in f:
                    t, m, p = line.rstrip("\n").split(" ", 2)
                    out.append((float(t), m, p))
        return out

    def requests(self):
        """[(method, path, fault)] so far."""
        out = []
        if os.path.exists(self.log):
            with open(self.log) as f:
                for line in f:
                    m, p, fault = line.rstrip("\n").split(" ", 2)
                    out.append((m, p, fault))
        return out


@contextlib.contextmanager
def fault_proxy(upstream, log, rate=0.0, seed=1, stall_s=3.0, faults="drop,503,stall,truncate",
                hold_s=0.0, hold_match="", bps=0.0, fail_match=""):
    """A proxy on a free port to upstream ("http://127.0.0.1:PORT"); requests
    whose "METHOD PATH" matches the regular expression hold_match wait
    hold_s seconds first, those matching fail_match are answered 503; bps >
    0: each answer at bps bytes/s at most."""
    port = free_port()
    args = [sys.executable, os.path.join(HERE, "rfproxy.py"), "--port", str(port),
            "--upstream", upstream, "--log", str(log), "--rate", str(rate), "--seed", str(seed),
            "--stall", str(stall_s), "--faults", faults, "--hold", str(hold_s),
            "--hold-match", hold_match, "--times", str(log) + ".times", "--bps", str(bps),
            "--fail-match", fail_match]
    with _process(args, port):
        yield Proxy("http://127.0.0.1:%d" % port, str(log))
