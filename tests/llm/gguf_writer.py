# SPDX-License-Identifier: Apache-2.0
"""GGUF v3 writing and reading for kiln's test models (numpy only, no gguf-py).

Format (GGUF v3, little-endian), as llama.cpp's gguf.cpp reads it:
  "GGUF", uint32 version (3), uint64 tensor count, uint64 key-value count;
  key-value pairs: string key, uint32 value type, value. Strings are a uint64 byte length and
  UTF-8 bytes; arrays are a uint32 element type, a uint64 count and the elements (an array of
  strings holds length-prefixed strings; arrays of arrays are legal in the format but unused);
  tensor infos: string name, uint32 rank, rank x uint64 dims (ne[0] innermost), uint32 ggml type,
  uint64 offset of the data from the start of the data section (a multiple of the alignment);
  zero padding to `general.alignment` (default 32); the data section, each tensor padded with
  zeros to the alignment (the last one too).
A tensor of ggml dims (ne0, ne1) is numpy's C-order array of shape (ne1, ne0): each row of ne0
elements is ne0 / block_elements blocks of block_bytes bytes.

Writer: GGUFWriter collects typed key-values and tensors (raw bytes, or a callable producing
them, so that a multi-gigabyte file is written one tensor at a time), then write(path) writes the
file atomically (a temporary file renamed into place). Same calls, same bytes.

Reader: GGUFReader(path) memory-maps a file and exposes .version, .kv (key -> python value;
arrays become lists, or numpy arrays for numeric arrays), .kv_types (key -> (type, elem type)),
.tensors (name -> TensorInfo with .raw(), a uint8 view of the tensor's bytes). It validates
lengths and offsets and raises ValueError naming the problem.
"""
import mmap
import os
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# GGUF metadata value types (gguf.h: enum gguf_type).
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = (
    range(13))
VALUE_TYPE_NAMES = {
    UINT8: "u8", INT8: "i8", UINT16: "u16", INT16: "i16", UINT32: "u32", INT32: "i32",
    FLOAT32: "f32", BOOL: "bool", STRING: "str", ARRAY: "arr", UINT64: "u64", INT64: "i64",
    FLOAT64: "f64",
}
_SCALAR_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
               FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_SCALAR_DTYPE = {k: np.dtype(v) for k, v in _SCALAR_FMT.items()}


class GgmlType:
    """A ggml tensor type: number (as GGUF stores it), name, block elements, block bytes."""

    def __init__(self, num, name, block_elements, block_bytes):
        self.num, self.name = num, name
        self.block_elements, self.block_bytes = block_elements, block_bytes

    def row_bytes(self, ne0):
        if ne0 % self.block_elements:
            raise ValueError(f"a row of {ne0} elements is not whole {self.name} blocks "
                             f"({self.block_elements} elements each)")
        return ne0 // self.block_elements * self.block_bytes

    def nbytes(self, dims):
        n_rows = int(np.prod(dims[1:], dtype=np.int64)) if len(dims) > 1 else 1
        return self.row_bytes(int(dims[0])) * n_rows

    def __repr__(self):
        return f"GgmlType({self.name})"


# ggml's enum ggml_type (the types kiln names; geometry from ggml-common.h).
QK_K = 256
GGML_TYPES = {t.num: t for t in [
    GgmlType(0, "F32", 1, 4),
    GgmlType(1, "F16", 1, 2),
    GgmlType(2, "Q4_0", 32, 2 + 16),
    GgmlType(3, "Q4_1", 32, 2 + 2 + 16),
    GgmlType(6, "Q5_0", 32, 2 + 4 + 16),
    GgmlType(7, "Q5_1", 32, 2 + 2 + 4 + 16),
    GgmlType(8, "Q8_0", 32, 2 + 32),
    GgmlType(9, "Q8_1", 32, 4 + 32),
    GgmlType(10, "Q2_K", QK_K, QK_K // 16 + QK_K // 4 + 2 + 2),
    GgmlType(11, "Q3_K", QK_K, QK_K // 8 + QK_K // 4 + 12 + 2),
    GgmlType(12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K // 2),
    GgmlType(13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K // 8 + QK_K // 2),
    GgmlType(14, "Q6_K", QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + 2),
    GgmlType(15, "Q8_K", QK_K, 4 + QK_K + QK_K // 16 * 2),
    GgmlType(24, "I8", 1, 1),
    GgmlType(25, "I16", 1, 2),
    GgmlType(26, "I32", 1, 4),
    GgmlType(27, "I64", 1, 8),
    GgmlType(28, "F64", 1, 8),
    GgmlType(30, "BF16", 1, 2),
]}
GGML_TYPE_BY_NAME = {t.name: t for t in GGML_TYPES.values()}


def ggml_type(t):
    """A GgmlType from a number, a name ("q4_K", "Q4_K", "f16") or a GgmlType."""
    if isinstance(t, GgmlType):
        return t
    if isinstance(t, (int, np.integer)):
        if int(t) not in GGML_TYPES:
            raise ValueError(f"ggml type {int(t)} is not known to gguf_writer.py")
        return GGML_TYPES[int(t)]
    up = str(t).upper()
    if up not in GGML_TYPE_BY_NAME:
        raise ValueError(f"ggml type {t!r} is not known; known: {', '.join(GGML_TYPE_BY_NAME)}")
    return GGML_TYPE_BY_NAME[up]


# ----------------------------------------------------------------------------------------------
# Encoding


def encode_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype, v):
    """The bytes of a value of GGUF type `vtype` (without the type tag). For ARRAY, v is
    (element type, items); items of numeric type may be a numpy array; nested arrays are
    (ARRAY, [(etype, items), ...])."""
    if vtype == STRING:
        return encode_string(v)
    if vtype == ARRAY:
        etype, items = v
        head = struct.pack("<IQ", etype, len(items))
        if etype == STRING:
            return head + b"".join(encode_string(s) for s in items)
        if etype == ARRAY:
            return head + b"".join(encode_value(ARRAY, (e, it)) for e, it in items)
        if etype == BOOL:
            return head + np.asarray(items, dtype=np.bool_).astype(np.uint8).tobytes()
        return head + np.asarray(items, dtype=_SCALAR_DTYPE[etype]).tobytes()
    if vtype not in _SCALAR_FMT:
        raise ValueError(f"unknown GGUF value type {vtype}")
    return struct.pack(_SCALAR_FMT[vtype], v)


def _pad(n, alignment):
    return (alignment - n % alignment) % alignment


class GGUFWriter:
    """Collects metadata and tensors; write(path) produces the GGUF v3 file.

    Key-values and tensors are written in the order added. Tensor data is bytes-like, a numpy
    array (its raw bytes, C order), or a zero-argument callable returning either, called while
    writing in tensor order (so random data drawn inside callables keeps its order).
    """

    def __init__(self, alignment=DEFAULT_ALIGNMENT, version=GGUF_VERSION):
        if alignment <= 0 or alignment % 8:
            raise ValueError("alignment must be a positive multiple of 8")
        self.alignment = alignment
        self.version = version
        self.kv = []        # (key, vtype, value)
        self.tensors = []   # (name, dims, GgmlType, data)

    # -- metadata
    def add(self, key, vtype, value):
        if any(k == key for k, _, _ in self.kv):
            raise ValueError(f"duplicate key {key!r}")
        self.kv.append((key, vtype, value))

    def add_uint8(self, key, v): self.add(key, UINT8, v)
    def add_int8(self, key, v): self.add(key, INT8, v)
    def add_uint16(self, key, v): self.add(key, UINT16, v)
    def add_int16(self, key, v): self.add(key, INT16, v)
    def add_uint32(self, key, v): self.add(key, UINT32, v)
    def add_int32(self, key, v): self.add(key, INT32, v)
    def add_uint64(self, key, v): self.add(key, UINT64, v)
    def add_int64(self, key, v): self.add(key, INT64, v)
    def add_float32(self, key, v): self.add(key, FLOAT32, v)
    def add_float64(self, key, v): self.add(key, FLOAT64, v)
    def add_bool(self, key, v): self.add(key, BOOL, bool(v))
    def add_string(self, key, v): self.add(key, STRING, v)

    def add_array(self, key, etype, items):
        self.add(key, ARRAY, (etype, items))

    # -- tensors
    def add_tensor(self, name, dims, gtype, data):
        """dims in ggml order (ne[0] innermost); gtype a ggml type number/name/GgmlType."""
        if any(t[0] == name for t in self.tensors):
            raise ValueError(f"duplicate tensor {name!r}")
        dims = tuple(int(d) for d in dims)
        if not 1 <= len(dims) <= 4 or any(d <= 0 for d in dims):
            raise ValueError(f"tensor {name!r}: bad dims {dims}")
        gt = ggml_type(gtype)
        gt.nbytes(dims)  # validates block divisibility
        self.tensors.append((name, dims, gt, data))

    def _header(self):
        alignment_key = [v for k, _, v in self.kv if k == "general.alignment"]
        if alignment_key and alignment_key[0] != self.alignment:
            raise ValueError("general.alignment disagrees with the writer's alignment")
        out = [GGUF_MAGIC, struct.pack("<IQQ", self.version, len(self.tensors), len(self.kv))]
        for key, vtype, v in self.kv:
            out += [encode_string(key), struct.pack("<I", vtype), encode_value(vtype, v)]
        offset = 0
        for name, dims, gt, _ in self.tensors:
            out += [encode_string(name), struct.pack("<I", len(dims)),
                    struct.pack(f"<{len(dims)}Q", *dims), struct.pack("<IQ", gt.num, offset)]
            offset += gt.nbytes(dims)
            offset += _pad(offset, self.alignment)
        return b"".join(out)

    def write(self, path):
        """Writes the file (atomically: path + ".tmp" renamed). Returns the total size."""
        head = self._header()
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(head + b"\0" * _pad(len(head), self.alignment))
            for name, dims, gt, data in self.tensors:
                if callable(data):
                    data = data()
                raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
                want = gt.nbytes(dims)
                if len(raw) != want:
                    raise ValueError(f"tensor {name!r} ({gt.name} {dims}) has {len(raw)} bytes, "
                                     f"expected {want}")
                f.write(raw + b"\0" * _pad(len(raw), self.alignment))
            size = f.tell()
        os.replace(tmp, path)
        return size


# ----------------------------------------------------------------------------------------------
# Reading


class TensorInfo:
    """One tensor of a GGUFReader: name, dims (ggml order), type (GgmlType), offset (absolute),
    nbytes; raw() is a read-only uint8 numpy view of its bytes."""

    def __init__(self, reader, name, dims, gtype, offset, nbytes):
        self._reader = reader
        self.name, self.dims, self.type = name, dims, gtype
        self.offset, self.nbytes = offset, nbytes

    @property
    def shape(self):
        """numpy shape (outermost first)."""
        return tuple(reversed(self.dims))

    def raw(self):
        return self._reader._buf[self.offset:self.offset + self.nbytes]

    def __repr__(self):
        return f"TensorInfo({self.name}, {self.type.name}, {self.dims})"


class GGUFReader:
    """A memory-mapped GGUF v2/v3 file (see the module docstring)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise ValueError(f"{path}: {size} bytes is too short for a GGUF header")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._buf = np.frombuffer(self._mm, dtype=np.uint8)
        self._pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file (bad magic)")
        self.version = self._scalar(UINT32)
        if self.version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {self.version} is not supported")
        n_tensors = self._scalar(UINT64)
        n_kv = self._scalar(UINT64)
        if n_tensors > size or n_kv > size:
            raise ValueError(f"{path}: implausible counts ({n_tensors} tensors, {n_kv} keys)")
        self.kv, self.kv_types = {}, {}
        for _ in range(n_kv):
            key = self._string()
            vtype = self._scalar(UINT32)
            val, etype = self._value(vtype)
            if key in self.kv:
                raise ValueError(f"{path}: duplicate key {key!r}")
            self.kv[key] = val
            self.kv_types[key] = (vtype, etype)
        self.alignment = int(self.kv.get("general.alignment", DEFAULT_ALIGNMENT))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise ValueError(f"{path}: general.alignment {self.alignment} is not a power of two")
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            rank = self._scalar(UINT32)
            if not 1 <= rank <= 4:
                raise ValueError(f"{path}: tensor {name!r} has rank {rank}")
            dims = tuple(self._scalar(UINT64) for _ in range(rank))
            tnum = self._scalar(UINT32)
            off = self._scalar(UINT64)
            infos.append((name, dims, tnum, off))
        self.data_offset = self._pos + _pad(self._pos, self.alignment)
        self.tensors = {}
        for name, dims, tnum, off in infos:
            gt = ggml_type(tnum)
            nbytes = gt.nbytes(dims)
            if off % self.alignment:
                raise ValueError(f"{path}: tensor {name!r} offset {off} is not aligned")
            start = self.data_offset + off
            if start + nbytes > size:
                raise ValueError(f"{path}: tensor {name!r} ({nbytes} bytes at {start}) runs past "
                                 f"the end of the file ({size} bytes)")
            if name in self.tensors:
                raise ValueError(f"{path}: duplicate tensor {name!r}")
            self.tensors[name] = TensorInfo(self, name, dims, gt, start, nbytes)

    def _take(self, n):
        if self._pos + n > len(self._buf):
            raise ValueError(f"{self.path}: truncated at byte {self._pos} (wanted {n} more)")
        b = self._mm[self._pos:self._pos + n]
        self._pos += n
        return b

    def _scalar(self, vtype):
        fmt = _SCALAR_FMT[vtype]
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _string(self):
        n = self._scalar(UINT64)
        return self._take(n).decode("utf-8")

    def _value(self, vtype):
        if vtype == STRING:
            return self._string(), None
        if vtype == ARRAY:
            etype = self._scalar(UINT32)
            n = self._scalar(UINT64)
            if etype == STRING:
                return [self._string() for _ in range(n)], etype
            if etype == ARRAY:
                return [self._value(ARRAY)[0] for _ in range(n)], etype
            if etype not in _SCALAR_DTYPE:
                raise ValueError(f"{self.path}: unknown array element type {etype}")
            dt = _SCALAR_DTYPE[etype]
            arr = np.frombuffer(self._take(n * dt.itemsize), dtype=dt)
            return (arr.astype(bool) if etype == BOOL else arr.copy()), etype
        if vtype not in _SCALAR_FMT:
            raise ValueError(f"{self.path}: unknown value type {vtype}")
        v = self._scalar(vtype)
        return (bool(v) if vtype == BOOL else v), None

    def get(self, key, default=None):
        return self.kv.get(key, default)


# ----------------------------------------------------------------------------------------------
# Self-test: `python3 gguf_writer.py` writes a file with every value type, nested arrays and
# tensors of several types and alignments, reads it back and checks every field and byte offset.


def _selftest():
    import sys
    import tempfile
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.gguf")
        w = GGUFWriter(alignment=64)
        w.add_uint32("general.alignment", 64)
        scalars = [("u8", UINT8, 200), ("i8", INT8, -100), ("u16", UINT16, 60000),
                   ("i16", INT16, -30000), ("u32", UINT32, 4000000000),
                   ("i32", INT32, -2000000000), ("f32", FLOAT32, 1.5), ("bool", BOOL, True),
                   ("str", STRING, "h\u00e9llo \u6771\u4eac"), ("u64", UINT64, 2 ** 63 + 5),
                   ("i64", INT64, -(2 ** 62)), ("f64", FLOAT64, -2.25)]
        for k, t, v in scalars:
            w.add(k, t, v)
        w.add_array("a.str", STRING, ["a", "", "\u00fc"])
        w.add_array("a.i32", INT32, [1, -2, 3])
        w.add_array("a.f32", FLOAT32, np.array([0.5, -1.0], dtype=np.float32))
        w.add_array("a.bool", BOOL, [True, False, True])
        w.add_array("a.nested", ARRAY, [(INT16, [1, 2]), (STRING, ["x"])])
        w.add_array("a.empty", UINT8, [])
        t1 = np.arange(6, dtype=np.float32).reshape(2, 3)
        w.add_tensor("t.f32", (3, 2), "F32", t1)
        w.add_tensor("t.q8", (64,), "Q8_0", bytes(range(68)))
        w.add_tensor("t.lazy", (5,), "F16", lambda: np.ones(5, dtype=np.float16))
        size = w.write(path)
        check(size == os.path.getsize(path) and size % 64 == 0,
              f"file written, {size} bytes, padded to 64")
        r = GGUFReader(path)
        check(r.version == 3 and r.alignment == 64, "version 3, alignment 64")
        for k, t, v in scalars:
            got = r.kv[k]
            same = abs(got - v) < 1e-6 if t in (FLOAT32, FLOAT64) else got == v
            check(same and r.kv_types[k][0] == t, f"scalar {k} = {got!r} ({VALUE_TYPE_NAMES[t]})")
        check(r.kv["a.str"] == ["a", "", "\u00fc"], "string array")
        check(r.kv["a.i32"].tolist() == [1, -2, 3] and r.kv_types["a.i32"] == (ARRAY, INT32),
              "int32 array")
        check(r.kv["a.f32"].tolist() == [0.5, -1.0], "float32 array")
        check(r.kv["a.bool"].tolist() == [True, False, True], "bool array")
        check(r.kv["a.nested"][0].tolist() == [1, 2] and r.kv["a.nested"][1] == ["x"],
              "nested arrays")
        check(len(r.kv["a.empty"]) == 0, "empty array")
        ti = r.tensors["t.f32"]
        check(ti.dims == (3, 2) and ti.shape == (2, 3) and ti.offset % 64 == 0
              and np.array_equal(ti.raw().view("<f4").reshape(2, 3), t1),
              "F32 tensor data and offset")
        tq = r.tensors["t.q8"]
        check(tq.nbytes == 68 and tq.offset % 64 == 0 and tq.raw().tolist() == list(range(68)),
              "Q8_0 tensor (2 blocks of 34 bytes)")
        tl = r.tensors["t.lazy"]
        check(tl.raw().view("<f2").tolist() == [1.0] * 5, "lazily produced tensor")
        # Errors: wrong byte count, bad magic, truncation.
        try:
            w2 = GGUFWriter()
            w2.add_tensor("x", (32,), "Q4_0", b"\0" * 17)
            w2.write(os.path.join(d, "bad.gguf"))
            check(False, "short tensor data rejected")
        except ValueError as e:
            check("expected 18" in str(e), f"short tensor data rejected ({e})")
        blob = open(path, "rb").read()
        for name, data in (("magic", b"GGUX" + blob[4:]), ("truncated", blob[:100])):
            p = os.path.join(d, name + ".gguf")
            open(p, "wb").write(data)
            try:
                GGUFReader(p)
                check(False, f"{name} file rejected")
            except ValueError as e:
                check(True, f"{name} file rejected ({e})")
    print("gguf_writer self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    import sys
    sys.exit(_selftest())
