"""Writers of PNG, BMP and PNM files byte by byte, for the variants PIL cannot
write itself (16-bit PNG colour, Adam7, short palettes, tRNS on gray/RGB,
ancillary chunks; BMP bit fields, RLE, OS/2 and V5 headers, top-down; plain
PNM, odd maxvals, comments). The tests compare what ringfeed makes of them
with what PIL makes of them, so these writers need only be valid enough for
PIL to read."""

import struct
import zlib

import numpy as np

# ---------------------------------------------------------------------- PNG

ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2))


def png_chunk(kind, data):
    c = struct.pack(">I", len(data)) + kind + data
    return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _pack_rows(a, depth):
    """a: [h, w, c] samples -> one bytes object per row, as PNG stores them."""
    rows = []
    for r in a.reshape(a.shape[0], -1):
        if depth == 16:
            rows.append(r.astype(">u2").tobytes())
        elif depth == 8:
            rows.append(r.astype(np.uint8).tobytes())
        else:
            per = 8 // depth
            pad = (-len(r)) % per
            v = np.concatenate([r.astype(np.uint8), np.zeros(pad, np.uint8)]).reshape(-1, per)
            shifts = np.arange(8 - depth, -1, -depth, dtype=np.uint8)
            rows.append((v << shifts).sum(axis=1).astype(np.uint8).tobytes())
    return rows


def _filtered(row, prev, bpp, kind):
    """PNG filter `kind` (0..4) applied to one row."""
    x = np.frombuffer(row, np.uint8).astype(np.int32)
    b = np.frombuffer(prev, np.uint8).astype(np.int32) if prev else np.zeros_like(x)
    a = np.zeros_like(x)  # the byte bpp to the left, and the one above that
    c = np.zeros_like(x)
    a[bpp:] = x[:-bpp]
    c[bpp:] = b[:-bpp]
    if kind == 0:
        pred = np.zeros_like(x)
    elif kind == 1:
        pred = a
    elif kind == 2:
        pred = b
    elif kind == 3:
        pred = (a + b) // 2
    else:
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
    return bytes([kind]) + ((x - pred) & 255).astype(np.uint8).tobytes()


def png_bytes(a, depth, ctype, plte=None, trns=None, interlace=False, chunks=(), filters=True):
    """A PNG of samples a ([h, w] or [h, w, c]) at `depth` bits, colour type
    `ctype`; plte: [n, 3] entries; trns: the tRNS payload; chunks: (type,
    payload) pairs written before PLTE. Rows cycle through the five filters."""
    a = np.asarray(a)
    if a.ndim == 2:
        a = a[..., None]
    h, w, c = a.shape
    bpp = max(1, c * depth // 8)
    raw = bytearray()
    passes = ADAM7 if interlace else ((0, 0, 1, 1),)
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        prev = None
        for i, r in enumerate(_pack_rows(sub, depth)):
            raw += _filtered(r, prev, bpp, (i % 5) if filters else 0)
            prev = r
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
    for kind, data in chunks:
        out += png_chunk(kind, data)
    if plte is not None:
        out += png_chunk(b"PLTE", np.asarray(plte, np.uint8).tobytes())
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    z = zlib.compress(bytes(raw), 6)
    half = len(z) // 2  # two IDAT chunks: the decoder must join them
    out += png_chunk(b"IDAT", z[:half]) + png_chunk(b"IDAT", z[half:])
    return out + png_chunk(b"IEND", b"")


# ---------------------------------------------------------------------- BMP

def bmp_bytes(w, h, bits, raster, comp=0, palette=None, header=40, masks=None, topdown=False,
              colors=0, offset=None):
    """A BMP with the given raster bytes (rows as stored: bottom-up unless
    topdown, each padded to 4 bytes, or an RLE stream), palette [n, 3] RGB,
    header size 12 (OS/2), 40, 108 or 124; masks (r, g, b[, a]) for
    compression 3."""
    entry = 3 if header == 12 else 4
    pal = b""
    if palette is not None:
        pal = b"".join(bytes([b, g, r]) + b"\0" * (entry - 3) for r, g, b in palette)
    extra = b""
    if header == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        info = struct.pack("<IiiHHIIiiII", header, w, -h if topdown else h, 1, bits, comp,
                           len(raster), 2835, 2835, colors, 0)
        if header == 40 and masks is not None:
            extra = struct.pack("<III", *masks[:3])
        elif header > 40:
            m = (list(masks) if masks is not None else []) + [0, 0, 0, 0]
            info += struct.pack("<IIII", *m[:4]) + b"\0" * (header - 56)
    off = 14 + len(info) + len(extra) + len(pal) if offset is None else offset
    head = b"BM" + struct.pack("<IHHI", off + len(raster), 0, 0, off)
    return head + info + extra + pal + raster


def bmp_rows(pixels, bits, topdown=False):
    """Raster of an uncompressed BMP from per-row byte arrays ([h, nbytes] or
    [h, w] indices packed at `bits` < 8)."""
    rows = []
    for r in np.asarray(pixels):
        if bits < 8:
            rb = _pack_rows(r[None, :, None], bits)[0]
        else:
            rb = np.asarray(r, np.uint8).tobytes()
        rows.append(rb + b"\0" * ((-len(rb)) % 4))
    if not topdown:
        rows = rows[::-1]
    return b"".join(rows)


def rle8(indices):
    """An RLE8 stream of indices [h, w]: runs and absolute runs, bottom-up,
    end of line after each row, end of bitmap."""
    out = bytearray()
    for row in np.asarray(indices, np.uint8)[::-1]:
        x, w = 0, len(row)
        while x < w:
            n = 1
            while x + n < w and n < 255 and row[x + n] == row[x]:
                n += 1
            if n >= 3 or w - x < 3:
                out += bytes([n, row[x]])
                x += n
            else:  # absolute: up to the next run of 3
                e = x
                while e < w and e - x < 255 and not (e + 2 < w and row[e] == row[e + 1] == row[e + 2]):
                    e += 1
                if e - x < 3:
                    out += bytes([1, row[x]])
                    x += 1
                    continue
                out += bytes([0, e - x]) + row[x:e].tobytes()
                if (e - x) % 2:
                    out += b"\0"
                x = e
        out += b"\0\0"
    return bytes(out + b"\0\1")


def rle4(indices):
    """An RLE4 stream of 4-bit indices [h, w]: two-colour runs only (the part
    of RLE4 PIL's decoder reads as the format means it)."""
    out = bytearray()
    for row in np.asarray(indices, np.uint8)[::-1]:
        x, w = 0, len(row)
        while x < w:
            a = row[x]
            b = row[x + 1] if x + 1 < w else 0
            n = 2
            while x + n < w and n < 254 and row[x + n] == (a if n % 2 == 0 else b):
                n += 1
            n = min(n, w - x)
            out += bytes([n, (a << 4) | b])
            x += n
        out += b"\0\0"
    return bytes(out + b"\0\1")


# ---------------------------------------------------------------------- PNM

def pnm_plain(magic, samples, w, h, maxval=None, comments=True):
    """Plain P1/P2/P3 text, comments in the header and between samples."""
    head = "P%d\n" % magic
    if comments:
        head += "# written by the ringfeed tests\n"
    head += "%d %d\n" % (w, h)
    if maxval is not None:
        head += "%d\n" % maxval
    lines = []
    flat = [int(v) for v in np.asarray(samples).reshape(-1)]
    sep = "" if magic == 1 else " "
    for i in range(0, len(flat), 17):
        lines.append(sep.join(str(v) for v in flat[i:i + 17]))
        if comments and i % 5 == 0:
            lines.append("#a comment line")
    return (head + "\n".join(lines) + "\n").encode()


def pnm_binary(magic, samples, w, h, maxval=255):
    """Binary P5/P6 of samples [h, w(, 3)] at maxval (2 bytes when > 255)."""
    s = np.asarray(samples)
    body = s.astype(">u2").tobytes() if maxval > 255 else s.astype(np.uint8).tobytes()
    return b"P%d\n%d %d\n%d\n" % (magic, w, h, maxval) + body
