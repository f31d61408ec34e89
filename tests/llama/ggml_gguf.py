#!/usr/bin/python3
"""A GGUF file as ggml's own parser sees it (gguf_init_from_file in libggml-base.so).

Usage: ggml_gguf.py FILE   prints one JSON object:
  version, alignment, data_offset,
  kv: [{key, type, value, raw}] in file order; type as tensorfs names it (uint32,
      string, array[int32], ...); value as Python/JSON has it; raw = the hex of the
      value's bytes for numbers, bools and arrays of them (so floats compare bit for bit).
      ggml hands strings out as C strings: a string with a NUL byte is cut there.
  tensors: [{name, type, type_name, ne (4 dims, padded with 1), offset (in the data
      section), size, sha256 of the bytes at data_offset + offset}] in file order.
Exits 2 with one line on stderr when ggml refuses the file.  Run it as its own process:
ggml may abort the process on input it does not expect.
"""
import ctypes as C
import hashlib
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llamacpp  # noqa: E402

# enum gguf_type -> (tensorfs name, struct format)
GGUF_TYPES = {0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"),
              4: ("uint32", "<I"), 5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<?"),
              8: ("string", None), 10: ("uint64", "<Q"), 11: ("int64", "<q"),
              12: ("float64", "<d")}
T_STRING, T_ARRAY = 8, 9


class InitParams(C.Structure):
    """struct gguf_init_params { bool no_alloc; struct ggml_context ** ctx; }"""
    _fields_ = [("no_alloc", C.c_bool), ("ctx", C.c_void_p)]


def bind(g):
    P, I64, SZ = C.c_void_p, C.c_int64, C.c_size_t
    sigs = {
        "gguf_init_from_file": (P, [C.c_char_p, InitParams]),
        "gguf_free": (None, [P]),
        "gguf_get_version": (C.c_uint32, [P]),
        "gguf_get_alignment": (SZ, [P]),
        "gguf_get_data_offset": (SZ, [P]),
        "gguf_get_n_kv": (I64, [P]),
        "gguf_get_key": (C.c_char_p, [P, I64]),
        "gguf_get_kv_type": (C.c_int, [P, I64]),
        "gguf_get_arr_type": (C.c_int, [P, I64]),
        "gguf_get_arr_n": (SZ, [P, I64]),
        "gguf_get_arr_data": (P, [P, I64]),
        "gguf_get_arr_str": (C.c_char_p, [P, I64, SZ]),
        "gguf_get_val_data": (P, [P, I64]),
        "gguf_get_val_str": (C.c_char_p, [P, I64]),
        "gguf_get_n_tensors": (I64, [P]),
        "gguf_get_tensor_name": (C.c_char_p, [P, I64]),
        "gguf_get_tensor_type": (C.c_int, [P, I64]),
        "gguf_get_tensor_offset": (SZ, [P, I64]),
        "gguf_get_tensor_size": (SZ, [P, I64]),
        "gguf_get_tensor_ne": (C.POINTER(I64), [P, I64]),
        "ggml_type_name": (C.c_char_p, [C.c_int]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(g, name)
        f.restype, f.argtypes = res, args


def _text(b):
    return b.decode("utf-8", "surrogateescape")


def _scalar(g, ctx, i, t):
    name, fmt = GGUF_TYPES[t]
    if t == T_STRING:
        return name, _text(g.gguf_get_val_str(ctx, i)), None
    raw = C.string_at(g.gguf_get_val_data(ctx, i), struct.calcsize(fmt))
    return name, struct.unpack(fmt, raw)[0], raw.hex()


def _array(g, ctx, i):
    t = g.gguf_get_arr_type(ctx, i)
    n = g.gguf_get_arr_n(ctx, i)
    if t == T_STRING:
        return "array[string]", [_text(g.gguf_get_arr_str(ctx, i, j)) for j in range(n)], None
    if t not in GGUF_TYPES:  # nested arrays: ggml's reader refuses them at open already
        raise ValueError("array of gguf type %d" % t)
    name, fmt = GGUF_TYPES[t]
    size = struct.calcsize(fmt)
    raw = C.string_at(g.gguf_get_arr_data(ctx, i), n * size) if n else b""
    return "array[%s]" % name, [v[0] for v in struct.iter_unpack(fmt, raw)], raw.hex()


def read(path, with_bytes=True):
    """ggml's view of the GGUF at path (see the module doc); raises OSError if ggml refuses it."""
    g = llamacpp.load_ggml_base()
    bind(g)
    ctx = g.gguf_init_from_file(os.fsencode(path), InitParams(True, None))
    if not ctx:
        raise OSError("%s: gguf_init_from_file failed" % path)
    try:
        out = {"version": g.gguf_get_version(ctx), "alignment": g.gguf_get_alignment(ctx),
               "data_offset": g.gguf_get_data_offset(ctx), "kv": [], "tensors": []}
        for i in range(g.gguf_get_n_kv(ctx)):
            t = g.gguf_get_kv_type(ctx, i)
            typ, value, raw = _array(g, ctx, i) if t == T_ARRAY else _scalar(g, ctx, i, t)
            out["kv"].append({"key": _text(g.gguf_get_key(ctx, i)), "type": typ, "value": value,
                              "raw": raw})
        with open(path, "rb") as f:
            for i in range(g.gguf_get_n_tensors(ctx)):
                ne = g.gguf_get_tensor_ne(ctx, i)
                t = g.gguf_get_tensor_type(ctx, i)
                ti = {"name": _text(g.gguf_get_tensor_name(ctx, i)), "type": t,
                      "type_name": _text(g.ggml_type_name(t)), "ne": [ne[d] for d in range(4)],
                      "offset": g.gguf_get_tensor_offset(ctx, i),
                      "size": g.gguf_get_tensor_size(ctx, i)}
                if with_bytes:
                    f.seek(out["data_offset"] + ti["offset"])
                    data = f.read(ti["size"])
                    if len(data) != ti["size"]:
                        raise OSError("%s: tensor %s ends past the end of the file" % (path, ti["name"]))
                    ti["sha256"] = hashlib.sha256(data).hexdigest()
                out["tensors"].append(ti)
        return out
    finally:
        g.gguf_free(ctx)


def main():
    if len(sys.argv) != 2:
        print("usage: ggml_gguf.py FILE", file=sys.stderr)
        sys.exit(1)
    try:
        view = read(sys.argv[1])
    except (OSError, ValueError) as e:
        print("ggml_gguf: %s" % e, file=sys.stderr)
        if llamacpp.logged():
            print("ggml said:\n" + llamacpp.logged(), file=sys.stderr)
        sys.exit(2)
    print(json.dumps(view))


if __name__ == "__main__":
    main()
