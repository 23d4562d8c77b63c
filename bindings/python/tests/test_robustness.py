"""Robustness of the Python binding (issue 6): a folder mixing valid JPEGs with
broken files under on_error="skip" and "raise", Ctrl-C while waiting for a
batch, and a forked child touching the parent's loader."""

import gc
import os
import shutil
import struct
import subprocess
import time

import numpy as np
import pytest

import ringfeed
from rfhelpers import (epoch_under_raise, find_gen, photo_like, psnr, reference_center, run_python,
                       wait_child, write_jpeg)

S = 32  # output side


# ------------------------------------------------------------------ data

def _segments(data):
    """(marker, offset of the marker) of each header segment, up to SOS."""
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        m = data[i + 1]
        yield m, i
        if m == 0xDA:
            return
        i += 2 + struct.unpack(">H", data[i + 2:i + 4])[0]


def _sof(data):
    for m, i in _segments(data):
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            return i
    raise AssertionError("no SOF marker")


def _sos_data(data):
    for m, i in _segments(data):
        if m == 0xDA:
            return i + 2 + struct.unpack(">H", data[i + 2:i + 4])[0]
    raise AssertionError("no SOS marker")


def _valid_pictures(root):
    """Valid JPEGs in root/class00, root/class01: rf-gen-folder's every-variant
    mix (baseline 4:2:0/4:2:2/4:4:4, gray, progressive, restart markers,
    arithmetic coding) when it is available, PIL's variants otherwise, plus a
    CMYK (Adobe) JPEG and a picture in a subfolder."""
    gen = find_gen()
    kinds = "pil"
    if gen:
        r = subprocess.run([gen, root, "--classes", "2", "--per-class", "8", "--width", "64",
                            "--height", "48", "--seed", "6", "--mix", "cycle"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            kinds = "rf-gen-folder --mix cycle"
        else:
            shutil.rmtree(root, ignore_errors=True)
    if kinds == "pil":
        for i in range(16):
            write_jpeg(os.path.join(root, "class%02d" % (i // 8), "img%04d.jpg" % (i % 8)),
                       60 + i % 7, 44 + i % 5, 100 + i, gray=i % 4 == 1, progressive=i % 4 == 2,
                       subsampling=0 if i % 4 == 3 else None)
    from PIL import Image
    Image.fromarray(photo_like(50, 40, 77), "RGB").convert("CMYK").save(
        os.path.join(root, "class01", "cmyk.jpg"), "JPEG", quality=90)
    os.makedirs(os.path.join(root, "class00", "nested"))
    write_jpeg(os.path.join(root, "class00", "nested", "deep.jpg"), 56, 56, 78)
    return kinds


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    """(mixed root, valid-only root, {relative path: expected reason fragment}
    for the bad files, which kinds of valid files)."""
    base = tmp_path_factory.mktemp("robust")
    valid = str(base / "valid")
    kinds = _valid_pictures(valid)
    mixed = str(base / "mixed")
    shutil.copytree(valid, mixed)

    good = open(os.path.join(valid, "class00", "img0000.jpg"), "rb").read()
    bad = {}

    def put(rel, data, why):
        with open(os.path.join(mixed, rel), "wb") as f:
            f.write(data)
        bad[rel] = why

    put("class00/img0001_truncated.jpg", good[:len(good) // 2], "Premature end")
    # Two bytes of the entropy-coded data flipped into a bogus marker.
    d = bytearray(good)
    at = _sos_data(good) + (len(good) - _sos_data(good)) // 3
    d[at], d[at + 1] = 0xFF, 0x99
    put("class00/img0003_bitflip.jpg", bytes(d), "Corrupt JPEG data")
    put("class00/img0005_empty.jpg", b"", "empty file")
    put("class01/img0002_random.jpg", np.random.default_rng(5).integers(
        0, 256, 5000, dtype=np.uint8).tobytes().replace(b"\xff", b"\x00"), "not a JPEG")
    # Formats are sniffed from the bytes, not the name: a PNG named .jpg is
    # decoded, so this one is cut short (an error with or without libspng).
    import io
    from PIL import Image
    png = io.BytesIO()
    Image.fromarray(photo_like(30, 20, 79), "RGB").save(png, "PNG")
    put("class01/img0004_png.jpg", png.getvalue()[:len(png.getvalue()) // 2], "PNG")
    d = bytearray(good)
    sof = _sof(good)
    d[sof + 5:sof + 9] = struct.pack(">HH", 60000, 60000)
    put("class01/img0006_huge.jpg", bytes(d), "60000x60000")
    os.mkfifo(os.path.join(mixed, "class01", "img0007_fifo.jpg"))
    bad["class01/img0007_fifo.jpg"] = "not a regular file"
    # A directory named like an image holds no picture: not a sample.
    os.makedirs(os.path.join(mixed, "class00", "img0009_dir.jpg"))
    with open(os.path.join(mixed, "class00", "img0009_dir.jpg", "notes.txt"), "w") as f:
        f.write("x")
    return mixed, valid, bad, kinds


def _rel(root, p):
    p = p if os.path.isabs(p) else os.path.join(root, p)
    return os.path.relpath(p, root)


def _make(src, **kw):
    kw.setdefault("image_size", S)
    kw.setdefault("batch_size", 5)
    kw.setdefault("num_workers", 2)
    kw.setdefault("transform", "center")
    kw.setdefault("flip", False)
    kw.setdefault("output", "numpy")
    return ringfeed.Loader(src, **kw)


def _valid_refs(valid):
    """{relative path: S x S x 3 pixels} from a loader over the valid files."""
    refs = {}
    with _make(valid, shuffle=False) as ld:
        for images, _, idx in ld.iter_with_indices():
            for k, s in enumerate(idx.tolist()):
                refs[_rel(valid, ld.sample_path(s))] = images[k].copy()
    return refs


# ----------------------------------------------------------------- skip

def test_skip_delivers_every_valid_picture_and_lists_bad_ones(bad_folder):
    mixed, valid, bad, kinds = bad_folder
    print("valid pictures from", kinds)
    refs = _valid_refs(valid)
    n = len(refs) + len(bad)
    with _make(mixed, on_error="skip", shuffle=True, seed=3, num_workers=3) as ld:
        assert ld.num_samples == n  # the directory named .jpg is not a sample
        for epoch in range(2):
            ld.set_epoch(epoch)
            seen = set()
            total = 0
            for b, (images, labels, idx) in enumerate(ld.iter_with_indices()):
                assert len(idx) == min(5, n - 5 * b), "batch %d is not full" % b
                for k, s in enumerate(idx.tolist()):
                    rel = _rel(mixed, ld.sample_path(s))
                    assert rel in refs, "epoch %d: %s delivered" % (epoch, rel)
                    assert labels[k] == int(rel.startswith("class01")), rel
                    assert np.array_equal(images[k], refs[rel]), "%s: wrong pixels" % rel
                    seen.add(rel)
                total += len(idx)
            assert total == n
            assert seen == set(refs), "never delivered: %s" % sorted(set(refs) - seen)
        st = ld.stats()
        assert st["errors_count"] == 2 * len(bad)
        listed = {}
        for e in st["errors"]:
            assert set(e) >= {"path", "reason", "sample"}, e
            rel = _rel(mixed, e["path"])
            assert rel in bad, "error for a valid file: %s" % e
            assert bad[rel] in e["reason"], "%s: reason %r lacks %r" % (rel, e["reason"], bad[rel])
            assert _rel(mixed, ld.sample_path(e["sample"])) == rel
            listed[rel] = e["reason"]
        assert set(listed) == set(bad), "not listed: %s" % sorted(set(bad) - set(listed))


def test_valid_pictures_match_torchvision(bad_folder):
    """The valid pictures, unusual ones included (arithmetic, restart
    markers, progressive, CMYK), decode like torchvision's pipeline on PIL."""
    mixed, valid, bad, kinds = bad_folder
    refs = _valid_refs(valid)
    scores = {rel: psnr(img, reference_center(os.path.join(valid, rel), S))
              for rel, img in refs.items()}
    worst = min(scores, key=scores.get)
    assert scores[worst] >= 30, "%s: %.1f dB against torchvision" % (worst, scores[worst])


# ---------------------------------------------------------------- raise

def test_raise_names_path_sample_and_reason_then_goes_on(bad_folder):
    mixed, valid, bad, kinds = bad_folder
    n_valid = len(_valid_refs(valid))
    ld = _make(mixed, on_error="raise", shuffle=False, batch_size=1)
    # Resumes after each failed batch (it was consumed); when that was the
    # epoch's last, the state dict names batch 0 of the next epoch.
    ok, raised, state = epoch_under_raise(ld)
    if state is not None and state["epoch"] != 0:
        assert state["batch"] == 0 and state["epoch"] == 1
    errors = {}
    for e in raised:
        msg = str(e)
        assert e.status is not None and e.status < 0
        hits = [rel for rel in bad if os.path.join(mixed, rel) in msg]
        assert len(hits) == 1, "error names no bad file: %s" % msg
        rel = hits[0]
        assert bad[rel] in msg, "reason %r missing: %s" % (bad[rel], msg)
        assert "(sample " in msg, msg
        sample = int(msg.split("(sample ", 1)[1].split(")", 1)[0])
        assert _rel(mixed, ld.sample_path(sample)) == rel
        errors[rel] = msg
    assert ok == n_valid
    assert set(errors) == set(bad)
    # After an error the loader goes on to the next epoch ...
    ld.set_epoch(1)
    with pytest.raises(ringfeed.RingfeedError):
        for _ in ld:
            pass
    ld.set_epoch(2)
    it = iter(ld)
    images, labels = next(it)
    assert images.shape == (1, S, S, 3)
    del it, images, labels
    # ... or is closed cleanly, right after one.
    with pytest.raises(ringfeed.RingfeedError):
        for _ in ld:
            pass
    ld.close()
    assert ld.closed
    with pytest.raises(ringfeed.RingfeedError, match="closed"):
        next(iter(ld))


# --------------------------------------------------------------- Ctrl-C

def test_ctrl_c_while_waiting_raises_within_200ms(tmp_path):
    """SIGINT from a timer thread while the main thread waits in next() on a
    slow source (one worker, large pictures) raises KeyboardInterrupt within
    200 ms, and the loader then closes promptly."""
    big = str(tmp_path / "big.jpg")
    write_jpeg(big, 2400, 1800, 9, quality=95)
    lst = str(tmp_path / "slow.txt")
    with open(lst, "w") as f:
        for i in range(4000):
            f.write("big.jpg\t%d\n" % (i % 2))
    res = run_python("""
        import os, signal, threading, time, ringfeed
        ld = ringfeed.Loader(sys.argv[1], batch_size=64, image_size=1024, num_workers=1,
                             transform="center", shuffle=False, output="numpy")
        sent = []
        def fire():
            time.sleep(0.3)
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        out = {"batches": 0}
        threading.Thread(target=fire, daemon=True).start()
        try:
            for images, labels in ld:
                out["batches"] += 1
            out["error"] = "epoch ended before the interrupt"
        except KeyboardInterrupt:
            out["latency"] = time.monotonic() - sent[0]
        t0 = time.monotonic()
        ld.close()
        out["close"] = time.monotonic() - t0
        print(json.dumps(out))
    """, args=[lst], timeout=240)
    assert "error" not in res, res
    print("Ctrl-C: KeyboardInterrupt after %.0f ms, close took %.0f ms, %d batches before"
          % (1000 * res["latency"], 1000 * res["close"], res["batches"]))
    assert res["latency"] < 0.2, res
    assert res["close"] < 10, res


# ----------------------------------------------------------------- fork

def _wait_child(pid, timeout=60):
    status = wait_child(pid, timeout)
    if status is None:
        pytest.fail("forked child hung using the parent's loader")
    return status


def test_forked_child_gets_clear_errors_while_parent_is_busy(bad_folder):
    """Fork while the loader's threads are busy (locks may be held at that
    moment): every call in the child that would reach the native loader
    raises RingfeedError naming the fork, at once; close and garbage
    collection in the child do not hang; the parent goes on."""
    mixed, valid, bad, kinds = bad_folder
    ld = _make(valid, batch_size=2, num_workers=3, prefetch=6, transform="random_resized_crop")
    it = iter(ld)
    images, _ = next(it)  # workers are filling the ring right now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 0
        try:
            os.close(r)
            calls = {
                "next": lambda: next(iter(ld)),
                "iterator": lambda: next(it),
                "stats": ld.stats,
                "set_epoch": lambda: ld.set_epoch(3),
                "state_dict": ld.state_dict,
                "sample_path": lambda: ld.sample_path(0),
                "epoch": lambda: ld.epoch,
            }
            for name, call in calls.items():
                t0 = time.monotonic()
                try:
                    call()
                    os.write(w, ("%s: no error\n" % name).encode())
                    code = 1
                except ringfeed.RingfeedError as e:
                    if "fork" not in str(e) or time.monotonic() - t0 > 1:
                        os.write(w, ("%s: %s\n" % (name, e)).encode())
                        code = 1
            assert images.sum() >= 0  # the lent batch's memory is still mapped
            ld.close()
            del images, it, ld
            gc.collect()
        except BaseException as e:  # noqa: BLE001 - report anything
            os.write(w, ("child: %r\n" % (e,)).encode())
            code = 2
        finally:
            os._exit(code)
    os.close(w)
    status = _wait_child(pid)
    report = os.read(r, 65536).decode()
    os.close(r)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, report
    # The parent is unaffected.
    rest = sum(1 for _ in it)
    assert rest == len(ld) - 1
    assert ld.stats()["batches"] == len(ld)
    ld.close()


def test_forked_child_exits_normally_with_a_live_loader(bad_folder):
    """A child that forgets the loader and exits through the interpreter's
    normal shutdown (finalizers, atexit) neither hangs nor crashes."""
    mixed, valid, bad, kinds = bad_folder
    res = run_python("""
        import gc, os, time, ringfeed
        from rfhelpers import wait_child
        ld = ringfeed.Loader(sys.argv[1], batch_size=3, image_size=24, num_workers=2,
                             output="numpy")
        it = iter(ld)
        batch = next(it)
        pid = os.fork()
        if pid == 0:
            try:
                next(iter(ld))
            except ringfeed.RingfeedError:
                pass
            sys.exit(0)  # normal shutdown with ld, it and batch alive
        status = wait_child(pid)
        ok = status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        n = 1 + sum(1 for _ in it)
        ld.close()
        print(json.dumps({"child_ok": ok, "status": str(status), "batches": n, "len": len(ld)}))
    """, args=[valid], timeout=240)
    assert res["child_ok"], res
    assert res["batches"] == res["len"], res


# ---------------------------------------------------------------- verify

def test_verify_option(tmp_path):
    """A picture cut in rows the center crop never reads: verify="once" (the
    default) and "always" report it in every epoch, "none" delivers its crop;
    stats()["verified"] counts the files decoded to their end under "once"."""
    root = tmp_path / "v"
    for i in range(4):
        write_jpeg(str(root / "a" / ("good%d.jpg" % i)), 96, 200, seed=40 + i)
    write_jpeg(str(root / "a" / "cut.jpg"), 96, 200, seed=50)
    cut = root / "a" / "cut.jpg"
    data = cut.read_bytes()
    cut.write_bytes(data[:len(data) - len(data) // 10])

    def errors_per_epoch(**kw):
        out = []
        with _make(str(root), image_size=64, batch_size=2, on_error="skip", **kw) as ld:
            for epoch in range(2):
                ld.set_epoch(epoch)
                for _ in ld:
                    pass
                st = ld.stats()
                out.append((st["errors_count"], st["verified"]))
        return out

    assert errors_per_epoch() == [(1, 4), (2, 4)]
    assert errors_per_epoch(verify="always") == [(1, 0), (2, 0)]
    assert errors_per_epoch(verify="none") == [(0, 0), (0, 0)]
    with pytest.raises(ValueError, match="verify"):
        _make(str(root), verify="sometimes")


# ---------------------------------------------------------- max_file_bytes

def test_max_file_bytes(tmp_path):
    """A sample file larger than max_file_bytes is an error that names it.
    The default is not sent, so a library without RF_P_MAX_FILE_BYTES still
    runs; such a library refuses any other value as an option error."""
    bounds = ringfeed._lib.param_bounds(ringfeed._lib.RF_P_MAX_FILE_BYTES)
    limit = max(64 << 10, bounds[0] if bounds else 0)
    root = tmp_path / "m"
    for i in range(3):
        write_jpeg(str(root / "a" / ("small%d.jpg" % i)), 16, 16, seed=60 + i)
    big = root / "a" / "big.jpg"
    write_jpeg(str(big), 64, 48, seed=63)
    data = big.read_bytes()  # a valid JPEG, padded past the limit after its end
    big.write_bytes(data + b"\0" * (limit + 1 - len(data)))

    with _make(str(root), batch_size=2) as ld:  # the default limit: every file is read
        assert sum(len(labels) for _, labels in ld) == 4
    if bounds is None:
        with pytest.raises(ValueError, match="max_file_bytes"):
            _make(str(root), max_file_bytes=limit)
        return
    with _make(str(root), batch_size=2, max_file_bytes=limit) as ld:
        with pytest.raises(ringfeed.RingfeedError, match="big.jpg"):
            list(ld)
    with _make(str(root), batch_size=2, max_file_bytes=limit + 1) as ld:
        assert sum(len(labels) for _, labels in ld) == 4
