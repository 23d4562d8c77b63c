"""ringfeed._pack_tables: the table reader of ringfeed-pack (started by it; not an API).

ringfeed-pack (tools/pack_table.c) runs `python -m ringfeed._pack_tables
--image-column C --label-column C --extras-columns L --keys|--no-keys -- SRC`
with pipes on standard input and output, SRC being its sources separated by
newlines: Parquet files (the Hugging Face Hub's layout: a picture column of
{bytes, path} structs, a label column, the features in the schema's
"huggingface" metadata), Arrow files, or folders written by datasets'
save_to_disk (state.json names their Arrow files, dataset_info.json their
features). This module reads them with pyarrow and answers the packer in
the binary protocol tools/pack_table.h describes: first what the tables
hold (rows, classes, files, the columns used, each row's own key when asked
for), then the rows asked for, in the order asked.

Columns not named are found: the picture column is the feature of type
Image, else the one binary column (or struct with a binary "bytes" field);
the label column is the ClassLabel feature (its names are the classes),
else the one integer column, else the one named label, labels, class, target
or cls. --extras-columns keeps other columns ("a,b", or "all") as each
sample's JSON (bytes as base64 text).

Memory is bounded: Parquet is read row group by row group, only the columns
used, and one row group is kept between requests (the packer asks in file
order unless it shuffles); Arrow files are memory-mapped. A row without
picture bytes or label is answered as a bad row with its reason (the packer
stops or, with --on-error skip, leaves it out). Anything wrong with the
tables themselves ends the reader with a message on standard error.
"""

import base64
import datetime
import decimal
import json
import os
import struct
import sys

LABEL_NAMES = ("label", "labels", "class", "target", "cls")
MAX_KEY = 65535


class TableError(Exception):
    pass


def _features(schema, folder_info):
    """The Hugging Face features of a table: its schema's "huggingface"
    metadata, else the dataset_info.json of its folder; {} when none."""
    meta = schema.metadata or {}
    raw = meta.get(b"huggingface")
    if raw:
        try:
            info = json.loads(raw)
            feats = info.get("info", {}).get("features") or info.get("features")
            if isinstance(feats, dict):
                return feats
        except (ValueError, AttributeError):
            pass
    return folder_info or {}


class _File:
    """One table: a Parquet file read by row groups, or a memory-mapped Arrow
    file read by record batches; group g holds rows [starts[g], starts[g+1])."""

    def __init__(self, pa, pq, path, features):
        self.path = path
        self.features = features
        if path.lower().endswith(".parquet"):
            self.pf = pq.ParquetFile(path)
            self.schema = self.pf.schema_arrow
            sizes = [self.pf.metadata.row_group(g).num_rows
                     for g in range(self.pf.metadata.num_row_groups)]
            self.batches = None
        else:
            self.pf = None
            source = pa.memory_map(path, "r")
            try:
                table = pa.ipc.open_file(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                table = pa.ipc.open_stream(source).read_all()
            self.schema = table.schema
            self.batches = table.to_batches()
            sizes = [b.num_rows for b in self.batches]
        self.starts = [0]
        for n in sizes:
            self.starts.append(self.starts[-1] + n)
        self.rows = self.starts[-1]
        if not self.features:
            self.features = _features(self.schema, None)

    def group(self, g, columns):
        """Group g's rows, those columns only, as a pyarrow Table."""
        if self.pf is not None:
            return self.pf.read_row_group(g, columns=columns)
        import pyarrow as pa
        return pa.Table.from_batches([self.batches[g]]).select(columns)

    def column(self, name):
        """One column whole, group by group (for labels and keys)."""
        for g in range(len(self.starts) - 1):
            yield self.group(g, [name]).column(0)


def _sources(entries):
    """The table files the entries name, and the features a save_to_disk
    folder states for its files: [(path, features or None)]."""
    files = []
    for e in entries:
        if os.path.isdir(e):
            try:
                with open(os.path.join(e, "state.json")) as f:
                    state = json.load(f)
                names = [d["filename"] for d in state["_data_files"]]
            except (OSError, ValueError, KeyError, TypeError) as x:
                raise TableError("%s: not a folder datasets' save_to_disk wrote (state.json: %s)"
                                 % (e, x))
            feats = None
            try:
                with open(os.path.join(e, "dataset_info.json")) as f:
                    feats = json.load(f).get("features")
            except (OSError, ValueError, AttributeError):
                pass
            for n in names:
                if "/" in n or n.startswith("."):
                    raise TableError("%s: state.json names %r, not a file of the folder" % (e, n))
                files.append((os.path.join(e, n), feats))
        else:
            files.append((e, None))
    return files


def _is_picture_type(pa, t):
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return True
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            f = t.field(i)
            if f.name == "bytes" and (pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)):
                return True
    return False


def _describe(schema):
    return ", ".join("%s (%s)" % (f.name, f.type) for f in schema)


def _choose(pa, first, image, label):
    """The picture and label columns: as given, else found. (image, label,
    class names or None)."""
    schema, feats = first.schema, first.features
    names = schema.names
    if image:
        if image not in names:
            raise TableError("%s: no column %r (columns: %s)" % (first.path, image,
                                                                 _describe(schema)))
    else:
        cands = [n for n, f in feats.items() if isinstance(f, dict) and f.get("_type") == "Image"
                 and n in names]
        if not cands:
            cands = [f.name for f in schema if _is_picture_type(pa, f.type)]
        if len(cands) != 1:
            raise TableError("%s: %s: name the picture column with --image-column (columns: %s)"
                             % (first.path, "several could be the picture (%s)" % ", ".join(cands)
                                if cands else "no picture column found", _describe(schema)))
        image = cands[0]
    if not _is_picture_type(pa, schema.field(image).type):
        raise TableError("%s: column %r is %s, not binary or a struct with binary bytes"
                         % (first.path, image, schema.field(image).type))
    classes = None
    if label:
        if label not in names:
            raise TableError("%s: no column %r (columns: %s)" % (first.path, label,
                                                                 _describe(schema)))
    else:
        cands = [n for n, f in feats.items() if isinstance(f, dict)
                 and f.get("_type") == "ClassLabel" and n in names]
        if not cands:
            ints = [f.name for f in schema if pa.types.is_integer(f.type)]
            named = [n for n in ints if n.lower() in LABEL_NAMES]
            cands = named if len(ints) > 1 and named else ints
        if len(cands) != 1:
            raise TableError("%s: %s: name the label column with --label-column (columns: %s)"
                             % (first.path, "several could be the label (%s)" % ", ".join(cands)
                                if cands else "no integer label column found", _describe(schema)))
        label = cands[0]
    if not pa.types.is_integer(schema.field(label).type):
        raise TableError("%s: column %r is %s, not integers" % (first.path, label,
                                                                schema.field(label).type))
    f = feats.get(label)
    if isinstance(f, dict) and f.get("_type") == "ClassLabel" and isinstance(f.get("names"), list):
        classes = [str(c) for c in f["names"]]
    return image, label, classes


def _json_default(v):
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, (datetime.date, datetime.time, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return str(v)


def _key_of(path):
    """A row's own key: its picture's path without the extension (the base
    name alone when the path is absolute: another machine's folders)."""
    if not path:
        return ""
    if os.path.isabs(path):
        path = os.path.basename(path)
    return os.path.splitext(path)[0]


class Tables:
    def __init__(self, entries, image, label, extras):
        import pyarrow as pa
        import pyarrow.parquet as pq
        self.pa = pa
        self.files = []
        for path, feats in _sources(entries):
            try:
                self.files.append(_File(pa, pq, path, feats))
            except (OSError, pa.ArrowException) as e:
                raise TableError("%s: cannot read it as a Parquet or Arrow table: %s" % (path, e))
        first = self.files[0]
        self.image, self.label, self.classes = _choose(pa, first, image, label)
        names = first.schema.names
        if extras == "all":
            self.extras = [n for n in names if n not in (self.image, self.label)]
        elif extras:
            self.extras = [c for c in extras.split(",") if c]
            for c in self.extras:
                if c not in names or c in (self.image, self.label):
                    raise TableError("%s: --extras-columns: %r is %s" % (
                        first.path, c, "the picture or the label" if c in names
                        else "no column (columns: %s)" % _describe(first.schema)))
        else:
            self.extras = []
        for f in self.files[1:]:
            for c in [self.image, self.label] + self.extras:
                if c not in f.schema.names or f.schema.field(c).type != first.schema.field(c).type:
                    raise TableError("%s: column %r is not as in %s" % (f.path, c, first.path))
        self.starts = [0]
        for f in self.files:
            self.starts.append(self.starts[-1] + f.rows)
        self.rows = self.starts[-1]
        self.cached = None  # (file, group, table)

    def nclasses(self):
        if self.classes is not None:
            return len(self.classes)
        top = -1
        import pyarrow.compute as pc
        for f in self.files:
            for col in f.column(self.label):
                m = pc.max(col).as_py()
                if m is not None and m > top:
                    top = m
        return top + 1

    def keys(self):
        """Each row's own key (from the picture's path), in order."""
        pa = self.pa
        for f in self.files:
            t = f.schema.field(self.image).type
            has_path = pa.types.is_struct(t) and t.get_field_index("path") >= 0
            for g in range(len(f.starts) - 1):
                n = f.starts[g + 1] - f.starts[g]
                if not has_path:
                    yield from [""] * n
                    continue
                col = f.group(g, [self.image]).column(0).combine_chunks().field("path")
                for p in col.to_pylist():
                    yield _key_of(p)

    def _locate(self, i):
        import bisect
        fi = bisect.bisect_right(self.starts, i) - 1
        f = self.files[fi]
        r = i - self.starts[fi]
        g = bisect.bisect_right(f.starts, r) - 1
        return fi, g, r - f.starts[g]

    def _group(self, fi, g):
        if self.cached is None or self.cached[:2] != (fi, g):
            self.cached = None  # the old group goes before the new one is read
            cols = [self.image, self.label] + self.extras
            try:
                self.cached = (fi, g, self.files[fi].group(g, cols).combine_chunks())
            except (OSError, self.pa.ArrowException) as e:
                raise TableError("%s: row group %d: %s" % (self.files[fi].path, g, e))
        return self.cached[2]

    def row(self, i, fi, g, r):
        """Row i's answer (bytes), read from its group."""
        t = self._group(fi, g)
        where = "%s:%d" % (self.files[fi].path, i - self.starts[fi])
        pic = t.column(self.image)[r]
        if self.pa.types.is_struct(pic.type):
            v = pic.as_py() or {}
            data, path = v.get("bytes"), v.get("path")
        else:
            data, path = pic.as_py(), None
        if data is None:
            why = ("%s: the picture is a path alone (%r), no bytes: only embedded pictures are "
                   "packed" % (where, path)) if path else "%s: no picture (null)" % where
            return _bad(why)
        label = t.column(self.label)[r].as_py()
        if label is None or label < 0:
            return _bad("%s: no label (%r)" % (where, label))
        out = [struct.pack("<BqI", 0, label, len(data)), data]
        if self.extras:
            x = json.dumps({c: t.column(c)[r].as_py() for c in self.extras},
                           default=_json_default, ensure_ascii=False).encode("utf-8")
            out += [struct.pack("<I", len(x)), x]
        else:
            out.append(struct.pack("<I", 0xFFFFFFFF))
        return b"".join(out)

    def answer(self, idx):
        """The rows idx, read group by group (each group once), answered in
        the order asked."""
        where = sorted(range(len(idx)), key=lambda k: self._locate(idx[k])[:2])
        parts = [None] * len(idx)
        for k in where:
            i = idx[k]
            if not 0 <= i < self.rows:
                raise TableError("row %d asked for, of %d" % (i, self.rows))
            parts[k] = self.row(i, *self._locate(i))
        return b"".join(parts)


def _bad(why):
    m = why.encode("utf-8", "replace")[:500]
    return struct.pack("<BI", 1, len(m)) + m


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


def _read_exact(f, n):
    b = f.read(n)
    if b is None or len(b) != n:
        return None
    return b


def serve(tables, inp, out, keys):
    head = [b"RFTABLE1", struct.pack("<Qq", tables.rows, tables.nclasses())]
    names = tables.classes or []
    head.append(struct.pack("<I", len(names)))
    head += [_str(n) for n in names]
    head.append(struct.pack("<I", len(tables.files)))
    for f in tables.files:
        head += [_str(f.path), struct.pack("<Q", f.rows)]
    head += [_str(tables.image), _str(tables.label), _str(",".join(tables.extras))]
    head.append(struct.pack("<B", 1 if keys else 0))
    out.write(b"".join(head))
    if keys:
        buf = []
        for k in tables.keys():
            b = k.encode("utf-8", "replace")
            if len(b) > MAX_KEY:
                b = b""
            buf.append(struct.pack("<H", len(b)) + b)
            if len(buf) >= 4096:
                out.write(b"".join(buf))
                buf = []
        out.write(b"".join(buf))
    out.flush()
    while True:
        b = _read_exact(inp, 4)
        if b is None:
            return 0
        (n,) = struct.unpack("<I", b)
        if n == 0:
            return 0
        b = _read_exact(inp, 8 * n)
        if b is None:
            return 0
        out.write(tables.answer(struct.unpack("<%dQ" % n, b)))
        out.flush()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    opts = {"--image-column": "", "--label-column": "", "--extras-columns": ""}
    keys = False
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] in opts and i + 1 < len(argv):
            opts[argv[i]] = argv[i + 1]
            i += 2
        elif argv[i] in ("--keys", "--no-keys"):
            keys = argv[i] == "--keys"
            i += 1
        else:
            print("ringfeed._pack_tables: started by ringfeed-pack, not by hand", file=sys.stderr)
            return 2
    entries = [e for e in (argv[i + 1] if i + 1 < len(argv) else "").split("\n") if e]
    # the protocol owns the real standard output; print() goes to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = os.fdopen(0, "rb", buffering=0)
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        print("ringfeed-pack: reading Parquet and Arrow tables needs pyarrow, which %s cannot "
              "import (%s): pip install pyarrow" % (sys.executable, e), file=sys.stderr)
        return 2
    try:
        if not entries:
            raise TableError("no tables named")
        tables = Tables(entries, opts["--image-column"], opts["--label-column"],
                        opts["--extras-columns"])
        return serve(tables, inp, out, keys)
    except TableError as e:
        print("ringfeed-pack: %s" % e, file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0  # the packer went first (it says why)


if __name__ == "__main__":
    sys.exit(main())
