"""Secrets, credentials and timeouts of remote shards, against the real
servers the suite starts (rfservers.py): Python's http.server, the
fault-injecting proxy (rfproxy.py) and moto's S3 checking SigV4.

What is checked: shards named by URLs with user:password and a query
(?token=..., as a presigned URL has) are accepted in an explicit list and
read as the same shards on local disk, and the password and the query appear
nowhere the library shows a URL - errors, stats, sample paths and names,
the Loader's repr, RINGFEED_TRACE's lines (a second process, its stderr
read); a server that
trickles its answer fails within the retry window fetch_timeout_ms promises;
a 403 from S3 names S3's code and message and whether and with what key the
request was signed; credentials come from the shared credentials file
(AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE) when the environment has none.
"""

import json
import subprocess
import sys
import time

import pytest

import rfhelpers
import rfservers
import ringfeed

NSHARDS, PER_SHARD = 3, 6
SECRETS = ("hunter2", "SECRET", "reader:")
OPTS = dict(batch_size=6, image_size=24, transform="center", num_workers=1)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("secret_shards")
    paths = [rfhelpers.write_cls_shard(str(d / ("train-%04d.tar" % s)),
                                       ["k%d-%03d" % (s, i) for i in range(PER_SHARD)], 32, 28,
                                       s * 100, [i % 3 for i in range(PER_SHARD)])
             for s in range(NSHARDS)]
    return str(d), paths


def _epoch(src, **kw):
    with ringfeed.Loader(src, **dict(OPTS, **kw)) as ld:
        return ([rfhelpers.batch_digest(x, l) for x, l in ld], ld.stats(),
                [ld.sample_path(i) for i in range(ld.num_samples)])


def _no_secret(text):
    for s in SECRETS:
        assert s not in text, text


def _secret_urls(url):
    """The shards behind url with user:password and a token each."""
    host = url.split("//", 1)[1]
    return ["http://reader:hunter2@%s/train-%04d.tar?token=SECRET%d&x=%%2F" % (host, s, s)
            for s in range(NSHARDS)]


def test_userinfo_and_query_never_shown(shards, tmp_path):
    local, _, _ = _epoch(shards[1])
    with rfservers.http_files(shards[0]) as url:
        urls = _secret_urls(url)
        got, st, names = _epoch(urls, cache_dir=str(tmp_path / "c"))
        assert got == local  # the query is part of the name, not a glob
        host = url.split("//", 1)[1]
        assert names[0] == "http://***@%s/train-0000.tar?***:k0-000" % host
        _no_secret(json.dumps(st))
        _no_secret("\n".join(names))
        with ringfeed.Loader(urls, cache_dir=str(tmp_path / "c"), **OPTS) as ld:
            _no_secret(repr(ld))
            assert "http://***@%s/train-0001.tar?***" % host in repr(ld)
        # a missing shard: the error shows the URL without its secrets
        with pytest.raises(ringfeed.RingfeedError) as e:
            _epoch(urls[:1] + ["http://reader:hunter2@%s/gone.tar?token=SECRET9" % host],
                   cache_dir=str(tmp_path / "c"), fetch_retries=0)
        assert "HEAD http://***@%s/gone.tar?***: HTTP status 404" % host in str(e.value)
        _no_secret(str(e.value))
        # RINGFEED_TRACE, in a process of its own (the switch is read once)
        code = ("import ringfeed, sys; l = ringfeed.Loader(sys.argv[1:], cache_dir=%r, "
                "batch_size=6, image_size=24, num_workers=1); next(iter(l)); l.close()"
                % str(tmp_path / "c2"))
        env = rfhelpers.child_env({"RINGFEED_TRACE": "1"})
        p = subprocess.run([sys.executable, "-c", code] + urls, env=env, capture_output=True,
                           text=True, errors="replace", timeout=120)
        assert p.returncode == 0, p.stderr
        assert "GET submitted: http://***@%s/train-0000.tar?***" % host in p.stderr, p.stderr
        _no_secret(p.stderr)


def test_trickling_server_times_out_in_the_window(shards, tmp_path):
    """Every answer 2 bytes a second: each try fails when its first
    fetch_timeout_ms brought too few bytes, so the start fails within
    (retries + 1) x 17/16 x timeout plus the backoff."""
    with rfservers.http_files(shards[0]) as url, \
            rfservers.fault_proxy(url, tmp_path / "log", rate=1.0, faults="trickle",
                                  stall_s=12) as px:
        t0 = time.monotonic()
        timed_out = r"Timeout was reached: (no answer|\d+ bytes) in (the last )?1000 ms"
        with pytest.raises(ringfeed.RingfeedError, match=timed_out):
            _epoch(px.url + "/train-0000.tar", cache_dir=str(tmp_path / "c"),
                   fetch_timeout_ms=1000, fetch_retries=1)
        secs = time.monotonic() - t0
        assert 2.0 <= secs < 2 * 1.0625 + 0.15 + 1.0, secs  # 2 tries, 1 backoff, slack
        assert [m for m, _, _ in px.requests()].count("HEAD") == 2


@pytest.fixture(scope="module")
def s3(shards):
    if not rfservers.have_moto():
        pytest.skip("moto[server] and boto3 not importable (make deps)")
    with rfservers.moto_s3(buckets=("data",)) as srv:
        srv.upload("data", "sec/", shards[1])
        yield srv


def _clear_aws(monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
              "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def test_s3_403_says_code_message_and_signing(s3, tmp_path, monkeypatch):
    _clear_aws(monkeypatch, tmp_path)
    for k, v in s3.env(secret="wrong-secret").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ringfeed.RingfeedError) as e:
        _epoch("s3://data/sec/train-0000.tar", cache_dir=str(tmp_path / "c"))
    msg = str(e.value)
    assert "HTTP status 403" in msg and "SignatureDoesNotMatch: " in msg, msg
    assert "(signed with access key ****%s from the environment; read again: unchanged)" \
        % s3.key_id[-4:] in msg, msg
    assert "wrong-secret" not in msg
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ringfeed.RingfeedError) as e:
        _epoch("s3://data/sec/train-0000.tar", cache_dir=str(tmp_path / "c"))
    msg = str(e.value)
    assert "HTTP status 403" in msg and "(not signed: no credentials: " in msg, msg
    assert str(tmp_path / "no-credentials") in msg, msg


def test_s3_credentials_from_the_shared_file(shards, s3, tmp_path, monkeypatch):
    _clear_aws(monkeypatch, tmp_path)
    for k, v in s3.env().items():
        if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET"):
            monkeypatch.setenv(k, v)
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n\n"
                     "[ml]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                     % (s3.key_id, s3.secret))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_PROFILE", "ml")
    got, _, _ = _epoch("s3://data/sec/train-{0000..%04d}.tar" % (NSHARDS - 1),
                       cache_dir=str(tmp_path / "c"))
    assert got == _epoch(shards[1])[0]
