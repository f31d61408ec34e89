"""Integer-packed checkpoints (compressed-tensors pack-quantized, GPTQ; issue 38) for the
converter on Debian 12's torch 1.13, which lacks three things newer torch has and the
converter's dequant_packed / dequant_gptq use (ModelBase.dequant_model, conversion/base.py):

- `Tensor >> Tensor` on a meta tensor (torch 1.13 has no Meta kernel for aten::__rshift__;
  torch.bitwise_right_shift, the same operation, has one).  The converter's lazy tensors run
  each operation on meta tensors first, only to know the result's dtype and shape; without
  it the lazy wrapper falls back to computing eagerly, and the next operation mixes a real
  tensor with a meta one and fails.  meta_rshift(): a meta `a >> b` is computed as
  torch.bitwise_right_shift(a, b) (same broadcast, same dtype: only the shape and dtype of a
  meta tensor exist); a real tensor's `>>` is unchanged, so the values are torch's own.
- Indexing with an int32 index tensor (GPTQ's `scales[g_idx]`, g_idx stored as I32):
  torch 1.13 accepts long, byte or bool indices only; newer torch accepts int32 too, with the
  same meaning (the index values select the same rows).  int_index(): an int32 index
  tensor is converted to int64 (every int32 is an int64 of the same value) before indexing.
- `torch.dtype.itemsize` (GPTQ's `qweight.dtype.itemsize * 8`, torch >= 2.1): added to the
  dtype type as the element size in bytes that torch.empty((), dtype=d).element_size()
  gives (what itemsize is).  torch.dtype is an immutable C type, so the attribute is put in
  its type dictionary directly (the one place this stand-in reaches into CPython).
"""
import ctypes
import gc

import torch


def meta_rshift():
    plain = torch.Tensor.__rshift__

    def rshift(self, other):
        if isinstance(other, torch.Tensor) and (self.is_meta or other.is_meta):
            return torch.bitwise_right_shift(self, other)
        return plain(self, other)
    torch.Tensor.__rshift__ = rshift


def int_index():
    plain = torch.Tensor.__getitem__

    def fix(i):
        if isinstance(i, torch.Tensor) and i.dtype == torch.int32:
            return i.long()
        if isinstance(i, tuple):
            return tuple(fix(x) for x in i)
        return i

    def getitem(self, index):
        return plain(self, fix(index))
    torch.Tensor.__getitem__ = getitem


def dtype_itemsize():
    d = gc.get_referents(torch.dtype.__dict__)[0]
    d["itemsize"] = property(lambda dt: torch.empty((), dtype=dt).element_size())
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(torch.dtype))


def install():
    """Each stand-in only where this torch lacks the feature."""
    try:
        torch.empty((2,), dtype=torch.int32, device="meta") >> \
            torch.empty((2,), dtype=torch.int32, device="meta")
    except NotImplementedError:
        meta_rshift()
    try:
        torch.zeros(1)[torch.zeros(1, dtype=torch.int32)]
    except IndexError:
        int_index()
    if not hasattr(torch.int32, "itemsize"):
        dtype_itemsize()
