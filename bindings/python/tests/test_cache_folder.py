"""The remote shards' cache folder against a real server on 127.0.0.1
(rfservers.http_files), as a user meets it (docs/remote.md, "Cache folder").

What is checked: the cache's names are the documented SHA-256 of the
version; a shard planted at a cache name (a symbolic link to a file of the
same size, a copy) is not read, but fetched anew, and what the link pointed
to is untouched; a shard is read through its pin, so a file renamed over
a pinned shard changes no batch; a file of the user's filling cache_limit
fails the start at once with an error naming it, and is never deleted; the
folder's real use on disk (blocks, with the files the process holds open
after their removal) stays under cache_limit under the global shuffle with
a small cache; a cache too small for two shards per loader warns once, on
stderr and in stats; a folder others may write, or a lock file of another
user's, is refused with an error naming it.
"""

import hashlib
import io
import os
import tarfile
import threading
import time
import urllib.request

import pytest

import rfhelpers
import rfservers
import ringfeed

FORMAT = b"ringfeed-cache 3"  # lib/remote/cache.h RF__CACHE_FORMAT
OPTS = dict(image_size=32, transform="center", num_workers=2)


def _shard(path, s, n, side, tmp):
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(n):
            jp = os.path.join(tmp, "x.jpg")
            rfhelpers.write_jpeg(jp, side, side * 3 // 4, seed=s * 1000 + i)
            tf.add(jp, arcname="s%02d/k%03d.jpg" % (s, i))
            info = tarfile.TarInfo("s%02d/k%03d.cls" % (s, i))
            info.size = 1
            tf.addfile(info, io.BytesIO(b"%d" % (i % 5)))
    os.remove(os.path.join(tmp, "x.jpg"))


def _shards(d, count, n, side):
    d.mkdir()
    for s in range(count):
        _shard(str(d / ("t-%04d.tar" % s)), s, n, side, str(d))
    return str(d)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """5 shards of 12 small pictures."""
    return _shards(tmp_path_factory.mktemp("cf") / "small", 5, 12, 40)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """8 shards of 8 larger pictures (a shard takes many disk blocks)."""
    return _shards(tmp_path_factory.mktemp("cf") / "big", 8, 8, 160)


def _pattern(n):
    return "/t-{0000..%04d}.tar" % (n - 1)


def _epoch(src, **kw):
    with ringfeed.Loader(src, **dict(OPTS, **kw)) as ld:
        return [rfhelpers.batch_digest(i, l) for i, l in ld], ld.stats()


def _name(url):
    """The cache's BASE for url, as the library names it: the first 16 bytes
    of SHA-256 over the format, URL, size and validator, each ended by NUL
    (http.server sends no ETag: its Last-Modified is the validator)."""
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as r:
        size, lm = r.headers["Content-Length"], r.headers["Last-Modified"]
    h = hashlib.sha256(b"\0".join([FORMAT, url.encode(), size.encode(), b"lm:" + lm.encode()])
                       + b"\0")
    return h.hexdigest()[:32]


def test_names_are_sha256(small, tmp_path):
    """The cache names each shard by the documented digest of its version
    (docs/remote.md): the shards', indexes' and locks' names are those."""
    cache = tmp_path / "c"
    with rfservers.http_files(small) as url:
        _epoch(url + _pattern(5), batch_size=8, cache_dir=str(cache))
        names = {_name(url + "/t-%04d.tar" % s) for s in range(5)}
    for ext in ("tar", "idx", "lock"):
        assert {n[:-len(ext) - 1] for n in os.listdir(cache)
                if n.endswith("." + ext) and not n.startswith(".")} == names


def test_planted_shard_is_fetched_anew(small, tmp_path):
    """A link at a shard's name to a file of the shard's size, and a copy of
    other bytes (cp's mode 0644), are not read: the batches are the local
    shards', the link's target is unchanged, the names are regular files
    again."""
    local = _epoch(small + _pattern(5), batch_size=8)[0]
    cache = tmp_path / "c"
    with rfservers.http_files(small) as url:
        assert _epoch(url + _pattern(5), batch_size=8, cache_dir=str(cache))[0] == local
        names = sorted(n for n in os.listdir(cache) if n.endswith(".tar"))
        assert len(names) == 5
        victim = tmp_path / "victim"
        victim.write_bytes(b"v" * os.path.getsize(cache / names[0]))
        (cache / names[0]).unlink()
        os.symlink(victim, cache / names[0])
        copy = cache / names[1]
        size = os.path.getsize(copy)
        copy.unlink()
        copy.write_bytes(b"c" * size)
        os.chmod(copy, 0o644)
        got, st = _epoch(url + _pattern(5), batch_size=8, cache_dir=str(cache))
    assert got == local
    assert st["remote"]["cache_misses"] == 2, st["remote"]
    assert victim.read_bytes() == b"v" * len(victim.read_bytes())
    for n in names[:2]:
        assert not os.path.islink(cache / n)
        assert os.stat(cache / n).st_mode & 0o777 == 0o600


def test_pinned_shard_is_read_through_its_pin(small, tmp_path):
    """Once every shard is pinned, a file renamed over each shard's name (of
    its size, of the cache's own mode) changes no batch: a pinned shard is
    read through the pin's descriptor, never by its name again."""
    local = _epoch(small + _pattern(5), batch_size=4, prefetch=2)[0]
    cache = tmp_path / "c"
    with rfservers.http_files(small) as url:
        with ringfeed.Loader(url + _pattern(5), batch_size=4, prefetch=2, cache_dir=str(cache),
                             **OPTS) as ld:
            it = iter(ld)
            first = next(it)
            got = [rfhelpers.batch_digest(*first)]
            deadline = time.monotonic() + 30
            while ld.stats()["remote"]["pinned"] < 5:
                assert time.monotonic() < deadline, ld.stats()["remote"]
                time.sleep(0.01)
            for name in os.listdir(cache):
                if name.endswith(".tar"):
                    p = cache / name
                    other = cache / (name + ".new")
                    other.write_bytes(b"\0" * os.path.getsize(p))
                    os.chmod(other, 0o600)
                    os.replace(other, p)
            got += [rfhelpers.batch_digest(i, l) for i, l in it]
    assert got == local


def test_foreign_file_filling_the_limit_fails_the_start(small, tmp_path):
    """A file of the user's in cache_dir that leaves no room for a shard:
    the start fails at once, naming it (no wait without end), and the file
    is never deleted (it counts against the limit all the same)."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    mine = cache / "my-own-dataset.tar"
    mine.write_bytes(b"m" * 50000)
    os.utime(mine, (1, 1))  # older than any shard: the first an LRU would take
    notes = cache / "notes.tmp.txt"
    notes.write_text("mine too")
    size = os.path.getsize(os.path.join(small, "t-0000.tar"))
    with rfservers.http_files(small) as url:
        out = rfhelpers.run_python("""
            import json, ringfeed
            try:
                ringfeed.Loader(sys.argv[1], cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]),
                                batch_size=4, image_size=32, output="numpy")
                print(json.dumps({"error": None}))
            except ringfeed.RingfeedError as e:
                print(json.dumps({"error": str(e)}))
        """, args=(url + _pattern(5), str(cache), str(50000 + size // 2)), timeout=60)
    assert out["error"] and "my-own-dataset.tar" in out["error"], out
    assert "did not make" in out["error"]
    assert mine.read_bytes() == b"m" * 50000
    assert notes.read_text() == "mine too"


def _real_use(cache):
    """The folder's disk use (blocks) with what this process holds open of
    it after removal, each file once; and how many files: (bytes, files)."""
    seen, use = set(), 0
    for name in os.listdir(cache):
        try:
            st = os.stat(os.path.join(cache, name), follow_symlinks=False)
        except FileNotFoundError:
            continue
        seen.add((st.st_dev, st.st_ino))
        use += st.st_blocks * 512
    files = len(seen)
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
            if not (target.startswith(str(cache) + "/") and target.endswith(" (deleted)")):
                continue
            st = os.fstat(int(fd))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            use += st.st_blocks * 512
    return use, files


def test_disk_use_stays_under_the_limit(big, tmp_path):
    """The global shuffle over 8 shards with room for 2: the folder's real
    use, counting the shards this process holds open after their eviction,
    never passes cache_limit (files are counted by size: each may take up to
    one 4 KiB block more on disk). Before, evicted shards held open for a
    sync deferred past the first batch took several shards' room more."""
    size = max(os.path.getsize(os.path.join(big, "t-%04d.tar" % s)) for s in range(8))
    limit = 2 * size + 32768
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    over, done = [0, 0], threading.Event()

    def watch():
        while not done.is_set():
            use, files = _real_use(cache)
            if use - 4096 * files > over[0]:
                over[:] = [use - 4096 * files, use]
            time.sleep(0.001)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        with rfservers.http_files(big) as url:
            _, st = _epoch(url + _pattern(8), batch_size=4, shuffle=True, seed=5,
                           cache_dir=str(cache), cache_limit=limit)
    finally:
        done.set()
        t.join()
    assert st["remote"]["refetches"] > 0, st["remote"]
    assert over[0] <= limit, (over, limit, size)


def test_small_cache_warns_once(small, tmp_path, capfd):
    """Two loaders on one folder whose cache_limit holds two shards: fewer
    than two per loader. Each says so once on stderr, and its stats carry
    the warning with the refetches so far."""
    size = max(os.path.getsize(os.path.join(small, "t-%04d.tar" % s)) for s in range(5))
    cache = tmp_path / "c"
    with rfservers.http_files(small) as url:
        lds = [ringfeed.Loader(url + _pattern(5), batch_size=4, rank=r, world_size=2,
                               shuffle=True, seed=2, cache_dir=str(cache),
                               cache_limit=2 * size + 8192, **OPTS) for r in range(2)]
        try:
            for _ in zip(*lds):
                pass
            st = [ld.stats()["remote"] for ld in lds]
        finally:
            for ld in lds:
                ld.close()
    err = capfd.readouterr().err
    assert err.count("ringfeed: warning: cache_limit=") == 2, err
    for s in st:
        assert s["loaders"] == 2, s
        w = s["warning"]
        assert "fewer than two per loader" in w and "refetches so far: %d" % s["refetches"] in w


def test_folder_not_private_is_refused(tmp_path):
    """A cache folder others may write is refused, and so is a lock file of
    another user's in it, each error naming the path at fault (before any
    request: no server is needed)."""
    cache = tmp_path / "c"
    cache.mkdir()
    os.chmod(cache, 0o777)
    with pytest.raises(ringfeed.RingfeedError, match="writable by others"):
        ringfeed.Loader("http://127.0.0.1:9/x.tar", cache_dir=str(cache), batch_size=4)
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    os.chmod(cache, 0o700)
    (cache / ".lock").write_bytes(b"")
    os.chown(cache / ".lock", 12345, 12345)
    with pytest.raises(ringfeed.RingfeedError, match=str(cache / ".lock") + ": owned by uid 12345"):
        ringfeed.Loader("http://127.0.0.1:9/x.tar", cache_dir=str(cache), batch_size=4)


def test_start_beside_a_loader_holding_the_room(small, tmp_path):
    """A loader whose prefetch pins fill the folder (its consumer not
    reading), and a second one that must fetch shards to index them (other
    member options: the kept indexes are not its): the second's start asks
    the first to give up the pins it holds for later samples, as a
    dispatcher's next sample does, and completes, with the local shards'
    batches. Before, the start waited for room for ever."""
    size = max(os.path.getsize(os.path.join(small, "t-%04d.tar" % s)) for s in range(5))
    cache = tmp_path / "c"
    with rfservers.http_files(small) as url:
        out = rfhelpers.run_python("""
            import json, time, ringfeed, rfhelpers
            kw = dict(batch_size=4, image_size=32, transform="center", num_workers=2, output="numpy",
                      cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]))
            a = ringfeed.Loader(sys.argv[1], **kw)
            time.sleep(0.5)  # its prefetch pins the folder full
            b = ringfeed.Loader(sys.argv[1], label=None, **kw)
            got = [rfhelpers.batch_digest(i, i[:, 0, 0, 0]) for i in b]
            n = sum(1 for _ in a)
            print(json.dumps({"b": got, "a": n, "releases": a.stats()["remote"]["releases"]}))
        """, args=(url + _pattern(5), str(cache), str(2 * size + 4096)), timeout=60)
    with ringfeed.Loader(small + _pattern(5), batch_size=4, label=None, output="numpy",
                         **OPTS) as ld:
        local = [rfhelpers.batch_digest(i, i[:, 0, 0, 0]) for i in ld]
    assert out["b"] == local and out["a"] == 15
    assert out["releases"] > 0, out
