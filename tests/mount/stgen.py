"""One safetensors writer for the tests and scripts/bench/make-sharded.py (the reference crate's
layout: u64 header length, compact JSON header padded with spaces to a multiple of 8,
the tensors' bytes contiguous in the order given)."""
import json
import struct

import numpy as np


def st_header(tensors, metadata=None, compact=True):
    """The length prefix and header of a file of tensors [(name, dtype, shape, nbytes)]."""
    header = {"__metadata__": metadata} if metadata is not None else {}
    off = 0
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    h = json.dumps(header, separators=(",", ":") if compact else None).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h


def st_raw(tensors, metadata=None, compact=True):
    """A safetensors file: tensors [(name, dtype, shape, raw bytes)]."""
    return (st_header([(n, d, s, len(raw)) for n, d, s, raw in tensors], metadata, compact) +
            b"".join(t[3] for t in tensors))


def bf16_bits(a):
    """float32 -> bfloat16 bits, rounded to nearest even (as numpy/torch do)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
