"""ggufgen.py - a tiny GGUF v3 writer and a lenient reader, for the mount tests and benchmarks.

Writer:
    w = GGUFWriter(alignment=32)
    w.add_kv("general.architecture", STRING, "llama")
    w.add_kv("tok", ARRAY, (STRING, ["a", b"\\xff"]))          # arrays: (elem_type, values)
    w.add_kv("nested", ARRAY, (ARRAY, [(INT32, [1, 2])]))       # arrays of arrays
    w.add_tensor("a/b", "F32", np.zeros((2, 8), np.float32))   # numpy shape, data
    w.add_tensor("q", "Q8_0", quantize_q8_0(x), ne=[64, 4])     # GGUF ne (ne[0] fastest)
    w.add_tensor("big", "F16", None, ne=[4096, 4096], fill=fn)  # fn(f, nbytes): streams bytes
    w.write(path)

Writes as ggml's gguf.cpp does: every tensor's offset is the running sum of the padded sizes,
the data section starts at an alignment boundary, and every tensor is zero-padded to the
alignment (the last one too).  Strings are str (UTF-8) or bytes (written as they are).

Reader (`read_gguf(path)`): header, key/values (Python values; strings as bytes) and tensor
infos, lenient like gguf-py (any alignment, up to 8 dims, either endianness); raises ValueError
on a malformed file.  Used as an independent oracle for what the mount serves.

Needs only Python 3 and numpy.
"""
import struct

import numpy as np

# GGUF value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
TYPE_NAMES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
              "string", "array", "uint64", "int64", "float64"]
_SCALAR_FMT = {UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I", INT32: "i",
               FLOAT32: "f", BOOL: "?", UINT64: "Q", INT64: "q", FLOAT64: "d"}

# ggml types: name -> (id, elements per block, bytes per block)
GGML_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292),
    "IQ2_XXS": (16, 256, 66), "IQ2_XS": (17, 256, 74), "IQ3_XXS": (18, 256, 98),
    "IQ1_S": (19, 256, 50), "IQ4_NL": (20, 32, 18), "IQ3_S": (21, 256, 110),
    "IQ2_S": (22, 256, 82), "IQ4_XS": (23, 256, 136), "I8": (24, 1, 1), "I16": (25, 1, 2),
    "I32": (26, 1, 4), "I64": (27, 1, 8), "F64": (28, 1, 8), "IQ1_M": (29, 256, 56),
    "BF16": (30, 1, 2), "TQ1_0": (34, 256, 54), "TQ2_0": (35, 256, 66),
    "MXFP4": (39, 32, 17),
}
GGML_NAME = {v[0]: k for k, v in GGML_TYPES.items()}


def type_nbytes(dtype, nelems):
    _, be, bb = GGML_TYPES[dtype]
    if nelems % be:
        raise ValueError("%d elements are not whole %s blocks" % (nelems, dtype))
    return nelems // be * bb


def pad(n, a):
    return (n + a - 1) // a * a


# ==== values ====

def _enc_str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype, value):
    """The GGUF payload of a value (without the type field)."""
    if vtype == STRING:
        return _enc_str(value)
    if vtype == ARRAY:
        et, items = value
        out = [struct.pack("<IQ", et, len(items))]
        if et in _SCALAR_FMT and not isinstance(items, (list, tuple)):
            items = list(items)
        if et in _SCALAR_FMT:
            out.append(struct.pack("<%d%s" % (len(items), _SCALAR_FMT[et]), *items))
        else:
            out.extend(encode_value(et, v) for v in items)
        return b"".join(out)
    return struct.pack("<" + _SCALAR_FMT[vtype], value)


def type_name(vtype, value):
    """The name the mount's user.tensorfs.type xattr gives: "uint32", "array[array[int8]]"."""
    if vtype != ARRAY:
        return TYPE_NAMES[vtype]
    et, items = value
    if et == ARRAY:
        inner = type_name(ARRAY, items[0]) if items else "array"
        return "array[%s]" % inner
    return "array[%s]" % TYPE_NAMES[et]


# ==== quantizers (valid blocks; not ggml's exact rounding, which the tests do not need) ====

def f16_bytes(a):
    return np.ascontiguousarray(a, dtype="<f2").tobytes()


def quantize_q8_0(x):
    """float32 values (a multiple of 32) -> Q8_0 blocks: |f16 d|32 x int8|."""
    x = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / 127.0).astype(np.float32)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.rint(x * inv[:, None]), -127, 127).astype(np.int8)
    blocks = np.zeros(len(x), dtype=[("d", "<f2"), ("q", "i1", 32)])
    blocks["d"] = d.astype(np.float16)
    blocks["q"] = q
    return blocks.tobytes()


def dequantize_q8_0(raw):
    blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "i1", 32)])
    return (blocks["d"].astype(np.float32)[:, None] * blocks["q"].astype(np.float32)).reshape(-1)


def random_blocks(dtype, nblocks, rng):
    """nblocks random but valid blocks of a quantized type: every f16 scale is a finite,
    modest positive value; the other bytes are random."""
    _, be, bb = GGML_TYPES[dtype]
    raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)

    def set_f16(col, lo=0.001, hi=0.05):
        v = rng.uniform(lo, hi, size=nblocks).astype("<f2").view(np.uint8).reshape(nblocks, 2)
        raw[:, col:col + 2] = v

    if dtype in ("Q4_0", "Q8_0", "IQ4_NL", "Q5_0"):
        set_f16(0)
    elif dtype in ("Q4_1", "Q5_1"):
        set_f16(0)
        set_f16(2)
    elif dtype in ("Q4_K", "Q5_K"):
        set_f16(0)
        set_f16(2)
    elif dtype == "Q2_K":
        set_f16(80)
        set_f16(82)
    elif dtype == "Q3_K":
        set_f16(108)
    elif dtype == "Q6_K":
        set_f16(208)
    elif dtype in ("F16",):
        return f16_bytes(rng.standard_normal(nblocks))
    elif dtype in ("F32",):
        return rng.standard_normal(nblocks).astype("<f4").tobytes()
    else:
        raise ValueError("random_blocks: unsupported type " + dtype)
    return raw.tobytes()


# ==== writer ====

class GGUFWriter:
    def __init__(self, alignment=32, version=3):
        self.alignment = alignment
        self.version = version
        self.kv = []        # (key, type, value)
        self.tensors = []   # dict(name, dtype, ne, nbytes, data, fill)

    def add_kv(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    def add_tensor(self, name, dtype, data, ne=None, fill=None):
        """data: numpy array (its shape gives ne unless ne is given) or bytes; or None with
        fill(f, nbytes) writing exactly nbytes (for big files)."""
        if ne is None:
            ne = list(reversed(np.asarray(data).shape)) or [1]
        ne = [int(v) for v in ne]
        n = 1
        for v in ne:
            n *= v
        nbytes = type_nbytes(dtype, n)
        if data is not None:
            b = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
            if len(b) != nbytes:
                raise ValueError("tensor %r: %d bytes, %s %s needs %d" % (name, len(b), dtype, ne, nbytes))
            data = b
        self.tensors.append(dict(name=name, dtype=dtype, ne=ne, nbytes=nbytes, data=data, fill=fill))

    def layout(self):
        """Assigns offsets (relative to the data section); returns the header bytes."""
        out = [b"GGUF", struct.pack("<IqQ", self.version, len(self.tensors), len(self.kv))]
        for key, vtype, value in self.kv:
            out.append(_enc_str(key))
            out.append(struct.pack("<I", vtype))
            out.append(encode_value(vtype, value))
        off = 0
        for t in self.tensors:
            t["offset"] = off
            out.append(_enc_str(t["name"]))
            out.append(struct.pack("<I", len(t["ne"])))
            out.append(struct.pack("<%dq" % len(t["ne"]), *t["ne"]))
            out.append(struct.pack("<IQ", GGML_TYPES[t["dtype"]][0], off))
            off += pad(t["nbytes"], self.alignment)
        head = b"".join(out)
        head += b"\0" * (pad(len(head), self.alignment) - len(head))
        self.data_offset = len(head)
        for t in self.tensors:
            t["abs_offset"] = self.data_offset + t["offset"]
        return head

    def write(self, path):
        head = self.layout()
        with open(path, "wb") as f:
            f.write(head)
            for t in self.tensors:
                if t["data"] is not None:
                    f.write(t["data"])
                else:
                    start = f.tell()
                    t["fill"](f, t["nbytes"])
                    if f.tell() - start != t["nbytes"]:
                        raise ValueError("fill of %r wrote %d bytes, not %d" % (t["name"], f.tell() - start, t["nbytes"]))
                f.write(b"\0" * (pad(t["nbytes"], self.alignment) - t["nbytes"]))
        return self


# ==== reader ====

class _Cur:
    def __init__(self, buf, endian="<"):
        self.b = buf
        self.p = 0
        self.e = endian

    def take(self, n):
        if n < 0 or self.p + n > len(self.b):
            raise ValueError("read of %d bytes at %d past the end (%d)" % (n, self.p, len(self.b)))
        r = self.b[self.p:self.p + n]
        self.p += n
        return r

    def un(self, fmt):
        s = struct.calcsize(self.e + fmt)
        return struct.unpack(self.e + fmt, self.take(s))

    def string(self):
        (n,) = self.un("Q")
        return bytes(self.take(n))

    def value(self, vtype, depth=0):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            et, n = self.un("IQ")
            if depth > 8:
                raise ValueError("arrays nested too deep")
            if et in _SCALAR_FMT:
                sz = struct.calcsize(_SCALAR_FMT[et])
                if n * sz > len(self.b) - self.p:
                    raise ValueError("array past the end")
                return (et, list(self.un("%d%s" % (n, _SCALAR_FMT[et]))))
            if et not in (STRING, ARRAY):
                raise ValueError("bad array element type %d" % et)
            if n * 8 > len(self.b) - self.p:
                raise ValueError("array past the end")
            return (et, [self.value(et, depth + 1) for _ in range(n)])
        if vtype not in _SCALAR_FMT:
            raise ValueError("bad value type %d" % vtype)
        v = self.un(_SCALAR_FMT[vtype])[0]
        if vtype == BOOL:
            v = bool(v)
        return v


def read_gguf(path):
    """Returns dict(version, alignment, data_offset, kv=[(key bytes, type, value)],
    tensors=[dict(name bytes, dtype id, ne, offset (relative), abs_offset, nbytes)],
    raw_bool=[...]).  Lenient; raises ValueError when the file cannot be parsed."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:4] != b"GGUF":
        raise ValueError("bad magic")
    endian = "<"
    (ver,) = struct.unpack("<I", buf[4:8])
    if ver & 0xFFFF == 0:
        endian = ">"
        (ver,) = struct.unpack(">I", buf[4:8])
    c = _Cur(buf, endian)
    c.p = 8
    n_t, n_kv = c.un("qq")
    if n_t < 0 or n_kv < 0:
        raise ValueError("negative counts")
    kv = []
    alignment = 32
    for _ in range(n_kv):
        key = c.string()
        (vt,) = c.un("I")
        v = c.value(vt)
        kv.append((key, vt, v))
        if key == b"general.alignment" and vt == UINT32:
            alignment = v
    tensors = []
    for _ in range(n_t):
        name = c.string()
        (nd,) = c.un("I")
        if nd > 8:
            raise ValueError("too many dims")
        ne = list(c.un("%dq" % nd))
        dt, off = c.un("IQ")
        n = 1
        for v in ne:
            n *= v
        tname = GGML_NAME.get(dt)
        if tname is None:
            raise ValueError("bad type %d" % dt)
        tensors.append(dict(name=name, dtype=dt, type_name=tname, ne=ne, offset=off,
                            nbytes=type_nbytes(tname, n)))
    data_offset = pad(c.p, alignment)  # also without tensors, as gguf-py says
    for t in tensors:
        t["abs_offset"] = data_offset + t["offset"]
    return dict(version=ver, alignment=alignment, data_offset=data_offset, kv=kv,
                tensors=tensors, size=len(buf))


# ==== names on the mount (tfs_name_encode in codec/model/index.c) ====

def fnv1a64(b):
    h = 1469598103934665603
    for c in b:
        h ^= c
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def encode_name(name):
    """The file name the mount gives a tensor / key name (bytes in, bytes out)."""
    if isinstance(name, str):
        name = name.encode()
    if name == b".":
        return b"%2E"
    if name == b"..":
        return b"%2E%2E"
    e = name.replace(b"%", b"%25").replace(b"/", b"%2F")
    if len(e) > 255:
        cut = 200
        for k in (1, 2):
            if e[cut - k:cut - k + 1] == b"%":
                cut -= k
        e = e[:cut] + b"%%~%016x" % fnv1a64(name)
    return e


def npy_name(name):
    """npy/ file name of a tensor: <encoded>.npy, or the encoding of name + ".npy" as a whole
    when that would be longer than 255 bytes (fs/names.c encode_name)."""
    if isinstance(name, str):
        name = name.encode()
    e = encode_name(name)
    if len(e) + 4 > 255:
        return encode_name(name + b".npy")
    return e + b".npy"
