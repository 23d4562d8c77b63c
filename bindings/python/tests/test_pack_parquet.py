"""ringfeed-pack on tables: Parquet in the Hugging Face Hub's layout (a
picture column of {bytes, path} structs, a ClassLabel label column, the
features in the schema's "huggingface" metadata), made here with pyarrow,
packs and loads with the same labels and the same center-224 pixels as its
pictures in a folder; so does a folder datasets' save_to_disk writes (Arrow
files, state.json, dataset_info.json). Columns are found from the schema
when not named, or named; other columns are kept as .json; a row without
bytes is a bad sample named by file and row; without pyarrow the message
says what to install.

pyarrow is optional for users; under CI (CI set) it must be installed and
these tests run.
"""

import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ringfeed
import ringfeed.pack
from packhelpers import members, needs_pack, pack, run_pack
from rfhelpers import imagefolder_samples, pil_folder

if os.environ.get("CI"):
    import pyarrow as pa  # CI installs it (make deps): a skip would hide these tests
    import pyarrow.parquet as pq
else:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

PIL = pytest.importorskip("PIL")

pytestmark = needs_pack

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """4 classes x 5 JPEGs of about 300x240 (larger than 224 + margin, so
    center 224 resizes), gray and progressive among them."""
    root = str(tmp_path_factory.mktemp("pqsrc") / "root")
    pil_folder(root, 4, 5, 300, 240, seed=8)
    return root


def classes_of(folder):
    return sorted(e.name for e in os.scandir(folder) if e.is_dir())


def hub_rows(folder):
    want, _ = imagefolder_samples(folder)
    classes = classes_of(folder)
    rows = [{"image": {"bytes": open(p, "rb").read(), "path": os.path.basename(p)},
             "label": lab, "caption": "picture %d" % i, "score": i / 4}
            for i, (p, lab) in enumerate(want)]
    return rows, classes


def hub_schema(classes):
    feats = {"image": {"_type": "Image"},
             "label": {"names": classes, "_type": "ClassLabel"},
             "caption": {"dtype": "string", "_type": "Value"},
             "score": {"dtype": "float64", "_type": "Value"}}
    return pa.schema([("image", IMAGE_TYPE), ("label", pa.int64()), ("caption", pa.string()),
                      ("score", pa.float64())],
                     metadata={b"huggingface": json.dumps({"info": {"features": feats}}).encode()})


@pytest.fixture(scope="module")
def hub(folder, tmp_path_factory):
    """The folder as the Hub stores a dataset: data/train-0000K-of-00002.parquet,
    row groups of 3 rows."""
    rows, classes = hub_rows(folder)
    t = pa.Table.from_pylist(rows, schema=hub_schema(classes))
    d = tmp_path_factory.mktemp("hub") / "data"
    d.mkdir()
    half = len(rows) // 2
    paths = [str(d / "train-00000-of-00002.parquet"), str(d / "train-00001-of-00002.parquet")]
    pq.write_table(t.slice(0, half), paths[0], row_group_size=3)
    pq.write_table(t.slice(half), paths[1], row_group_size=3)
    return paths


def center(spec, **kw):
    with ringfeed.Loader(spec, batch_size=8, image_size=224, transform="center", shuffle=False,
                         num_workers=2, **kw) as ld:
        xs, ys = [], []
        for x, y in ld:
            xs.append(np.asarray(x))
            ys += list(np.asarray(y))
        return np.concatenate(xs), ys


def test_hub_parquet_loads_as_its_folder(folder, hub, tmp_path):
    out = str(tmp_path / "raw")
    m = pack("\n".join(hub), out, "--store", "raw", "--shard-count", 7)
    want, _ = imagefolder_samples(folder)
    classes = classes_of(folder)
    assert m["classes"] == classes and m["nclasses"] == len(classes)
    assert m["samples"] == len(want) and m["source_kind"] == "table"
    assert m["options"]["image_column"] == "image" and m["options"]["label_column"] == "label"
    x, y = center(os.path.join(out, "*.tar"))
    fx, fy = center(folder, exact=True)
    assert y == fy == [lab for _, lab in want]
    assert np.array_equal(x, fx)
    srcs = sum((s["sources"] for s in m["shards"]), [])
    half = len(want) // 2
    assert srcs[0] == hub[0] + ":0" and srcs[half] == hub[1] + ":0"
    # JPEG at a max side: the same labels, and the same bytes as the folder packed so
    jp, jf = str(tmp_path / "jpg"), str(tmp_path / "jpgf")
    pack("\n".join(hub), jp, "--max-side", 96)
    pack(folder, jf, "--max-side", 96)
    assert members(jp) == members(jf)


def test_python_module_with_the_shell_glob(hub, folder, tmp_path):
    """`python -m ringfeed.pack data/*.parquet OUT`, options after, as users type it."""
    out = str(tmp_path / "o")
    r = subprocess.run([sys.executable, "-m", "ringfeed.pack"] + hub +
                       [out, "--max-side", "64", "--keep-keys"],
                       capture_output=True, text=True, timeout=300,
                       env=ringfeed.pack.environment())
    assert r.returncode == 0, r.stderr
    want, _ = imagefolder_samples(folder)
    assert "%d samples" % len(want) in r.stderr
    # the picture paths repeat across classes (img0000.jpg): numbered, none kept
    assert "keys: 0 of the source's own kept" in r.stderr


def test_columns_found_named_and_kept(folder, tmp_path):
    rows, classes = hub_rows(folder)
    # no Hugging Face metadata: a binary column, an integer "label", others
    plain = pa.table({"jpeg": [r["image"]["bytes"] for r in rows],
                      "id": list(range(100, 100 + len(rows))),
                      "label": [r["label"] for r in rows],
                      "caption": [r["caption"] for r in rows]})
    p = str(tmp_path / "plain.parquet")
    pq.write_table(plain, p, row_group_size=4)
    out = str(tmp_path / "found")  # two integer columns: the one named "label"
    m = pack(p, out, "--max-side", 48, "--extras-columns", "caption,id")
    assert m["options"]["image_column"] == "jpeg" and m["options"]["label_column"] == "label"
    assert m["nclasses"] == len(classes) and m["classes"] == []
    rows_out = members(out)
    js = [json.loads(r[3]) for r in rows_out if r[2] == "json"]
    assert js == [{"caption": r["caption"], "id": 100 + i} for i, r in enumerate(rows)]
    assert [int(r[3]) for r in rows_out if r[2] == "cls"] == [r["label"] for r in rows]
    # two integer columns, neither named like a label: ask, listing them
    t2 = plain.rename_columns(["jpeg", "id", "klass", "caption"])
    p2 = str(tmp_path / "two.parquet")
    pq.write_table(t2, p2)
    r = run_pack(p2, str(tmp_path / "x"))
    assert r.returncode == 1
    assert "several could be the label (id, klass)" in r.stderr and "--label-column" in r.stderr
    m = pack(p2, str(tmp_path / "named"), "--label-column", "klass", "--image-column", "jpeg",
             "--extras-columns", "all", "--max-side", 32)
    assert m["options"]["extras_columns"] == "id,caption"
    r = run_pack(p2, str(tmp_path / "y"), "--label-column", "nope")
    assert r.returncode == 1 and "no column 'nope'" in r.stderr and "klass (int64)" in r.stderr
    r = run_pack(p2, str(tmp_path / "z"), "--label-column", "caption")
    assert r.returncode == 1 and "not integers" in r.stderr
    r = run_pack(str(tmp_path / "named"), str(tmp_path / "w"), "--label-column", "x")
    assert r.returncode == 2 and "--label-column" in r.stderr


def test_save_to_disk_folder(folder, tmp_path):
    """The layout datasets' save_to_disk writes: Arrow stream files named in
    state.json, the features in dataset_info.json."""
    rows, classes = hub_rows(folder)
    schema = hub_schema(classes)
    d = tmp_path / "saved"
    d.mkdir()
    t = pa.Table.from_pylist(rows, schema=schema.remove_metadata())
    names = ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    half = len(rows) // 2
    for name, part in zip(names, (t.slice(0, half), t.slice(half))):
        with pa.OSFile(str(d / name), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
            for b in part.to_batches(max_chunksize=4):
                w.write_batch(b)
    feats = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    (d / "dataset_info.json").write_text(json.dumps({"features": feats}))
    (d / "state.json").write_text(json.dumps({"_data_files": [{"filename": n} for n in names]}))
    out = str(tmp_path / "o")
    m = pack(str(d), out, "--store", "raw")
    assert m["classes"] == classes
    x, y = center(os.path.join(out, "*.tar"))
    fx, fy = center(folder, exact=True)
    assert y == fy and np.array_equal(x, fx)
    (d / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../x.arrow"}]}))
    r = run_pack(str(d), str(tmp_path / "bad"))
    assert r.returncode == 1 and "not a file of the folder" in r.stderr


def test_bad_rows_named_and_skipped(folder, tmp_path):
    rows, classes = hub_rows(folder)
    rows[2]["image"] = {"bytes": None, "path": "/somewhere/else.jpg"}
    rows[5]["label"] = None
    rows[7]["image"]["bytes"] = b"not a picture"
    p = str(tmp_path / "bad.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=hub_schema(classes)), p)
    r = run_pack(p, str(tmp_path / "raise"), "--max-side", 32)
    assert r.returncode == 1
    assert p + ":2: the picture is a path alone ('/somewhere/else.jpg')" in r.stderr
    out = str(tmp_path / "skip")
    r = run_pack(p, out, "--max-side", 32, "--on-error", "skip")
    assert r.returncode == 0, r.stderr
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert [(s["key"], s["source"]) for s in m["skipped_samples"]] == \
        [(2, p + ":2"), (5, p + ":5"), (7, p + ":7")]
    assert "no label" in m["skipped_samples"][1]["reason"]
    assert "not a picture" in m["skipped_samples"][2]["reason"]


def test_parts_of_a_table(hub, tmp_path):
    one = str(tmp_path / "one")
    pack("\n".join(hub), one, "--max-side", 48, "--shard-count", 4, "--shuffle")
    out = str(tmp_path / "parts")
    for k in range(3):
        r = run_pack("\n".join(hub), out, "--max-side", 48, "--shard-count", 4, "--shuffle",
                     "--part", "%d/3" % k)
        assert r.returncode == 0, r.stderr
    assert ringfeed.pack.run(["merge", out], capture_output=True).returncode == 0
    assert [r[1:] for r in members(one)] == \
        [r[1:] for r in sorted(members(out), key=lambda r: (r[0], r[1]))]


def test_without_pyarrow_the_message_says_so(hub, tmp_path):
    fake = tmp_path / "nopyarrow" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named pyarrow (test)')\n")
    env = ringfeed.pack.environment()
    env["PYTHONPATH"] = str(fake.parent) + os.pathsep + env.get("PYTHONPATH", "")
    r = ringfeed.pack.run([hub[0], str(tmp_path / "o")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert r.returncode == 1
    assert "needs pyarrow" in r.stderr and "pip install pyarrow" in r.stderr, r.stderr
    env["RINGFEED_PYTHON"] = str(tmp_path / "no-such-python")
    r = ringfeed.pack.run([hub[0], str(tmp_path / "o")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert r.returncode == 1 and "cannot run" in r.stderr and "RINGFEED_PYTHON" in r.stderr
