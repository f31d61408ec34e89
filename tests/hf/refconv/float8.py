"""float8 checkpoints for the converter on a torch without float8 dtypes (Debian 12's 1.13).

The converter loads a safetensors tensor lazily (LazyTorchTensor.from_local_tensor, its
dtype from _dtype_str_map) and reads float8 weights only as `weight.float() * scale`
(ModelBase.dequant_model's dequant_simple). So a tensor stored as F8_E4M3 or F8_E5M2 is
loaded here directly as the float32 tensor `.float()` would give: each byte through a table
of the 256 values of the format. That is exact: every finite float8 value (E4M3: 4 exponent
bits, bias 7, 3 mantissa bits, subnormals down to 2^-9, no infinities; E5M2: 5 exponent bits,
bias 15, 2 mantissa bits, as the top byte of an IEEE half) is a float32 value, and torch's own
float8 -> float32 conversion is that value. `.float()` of a float32 tensor is the tensor
itself, so the converter's arithmetic afterwards is the same float32 multiplication. The
lazy tensor reports the float8 dtype (run.py's placeholder for it), as ModelOpt's
`--fp8-as-q8` check `w().dtype in (float8_e4m3fn, ...)` asks; its meta tensor is float32,
which only the lazy machinery sees (the outtype guess, "is it bfloat16 or float16", passes
the placeholder over as it passes float8 over). NaN codes (E4M3 S.1111.111, E5M2 exponent
31 with a mantissa) decode to a float32 NaN of that sign; the tests' checkpoints hold none.
A loaded float8 tensor keeps its codes (the file's bytes): `t.view(torch.uint8)` gives them,
as the view of a real float8 tensor does (ModelOpt NVFP4's _nvfp4_pack reads its E4M3 block
scales so; codes_view()), also after a method that only moves elements (reshape, swapaxes,
transpose, permute, contiguous, index_select, indexing: LlamaModel.permute of an NVFP4
weight's block scales), which moves the codes alike (carry_codes()), and torch.cat of such
tensors (Qwen3.5's value-head reorder of an NVFP4 weight's scales: cat_codes()).

torch 1.13 also cannot compute the shape of `repeat_interleave` on a meta tensor without
`output_size` (newer torch can), and the converter's lazy tensors run each operation on meta
tensors first: dequant_simple's `scale.repeat_interleave(size, dim)` of block-wise scales
fails there. meta_repeat_interleave() gives the meta call its output_size
(repeats x the axis' length, what the operation makes); a real tensor's call is unchanged.
"""
import numpy as np
import torch


DTYPES = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def table(fmt):
    """The 256 float32 values of the format's codes."""
    exp_bits, man_bits, bias = {"F8_E4M3": (4, 3, 7), "F8_E5M2": (5, 2, 15)}[fmt]
    out = np.zeros(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if fmt == "F8_E4M3" and e == 15 and m == 7:
            v = np.nan
        elif fmt == "F8_E5M2" and e == 31:
            v = np.inf if m == 0 else np.nan
        elif e == 0:
            v = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        out[code] = sign * v
    return out.astype(np.float32)


def meta_repeat_interleave():
    """Tensor.repeat_interleave(int, dim) on a meta tensor given its output_size."""
    plain = torch.Tensor.repeat_interleave

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        if self.is_meta and output_size is None and isinstance(repeats, int) and \
                dim is not None:
            output_size = repeats * self.shape[dim]
        return plain(self, repeats, dim, output_size=output_size)
    torch.Tensor.repeat_interleave = repeat_interleave


def codes_view():
    """`t.view(torch.uint8)` of a loaded float8 tensor: its codes, the file's bytes (what the
    view of a real float8 tensor gives; ModelOpt NVFP4's block scales are read so)."""
    plain = torch.Tensor.view

    def view(self, *args, **kwargs):
        codes = getattr(self, "_tfs_f8_codes", None)
        if codes is not None and args == (torch.uint8,) and not kwargs:
            return codes
        return plain(self, *args, **kwargs)
    torch.Tensor.view = view
    for name in MOVES:
        carry_codes(name)


# the tensor methods that only move elements: a loaded float8 tensor's codes move with them
# (LlamaModel.permute's reshape/swapaxes of an NVFP4 weight's block scales)
MOVES = ("reshape", "swapaxes", "transpose", "permute", "contiguous", "index_select",
         "__getitem__")


def carry_codes(name):
    """Tensor method `name` (one that only moves elements) also applied to a loaded float8
    tensor's codes, which its result keeps: the same codes at the same places, as the
    result of a real float8 tensor holds them."""
    plain = getattr(torch.Tensor, name)

    def method(self, *args, **kwargs):
        out = plain(self, *args, **kwargs)
        codes = getattr(self, "_tfs_f8_codes", None)
        if codes is not None and isinstance(out, torch.Tensor) and out is not self:
            out._tfs_f8_codes = plain(codes, *args, **kwargs)
        return out
    setattr(torch.Tensor, name, method)


def cat_codes():
    """torch.cat of loaded float8 tensors (Qwen3.5's _transform_nvfp4_weight joins the q, k
    and reordered v rows of an NVFP4 weight's block scales): its result keeps their codes
    joined alike."""
    plain = torch.cat

    def cat(tensors, *args, **kwargs):
        out = plain(tensors, *args, **kwargs)
        codes = [getattr(t, "_tfs_f8_codes", None) for t in tensors]
        if codes and all(c is not None for c in codes):
            out._tfs_f8_codes = plain(codes, *args, **kwargs)
        return out
    torch.cat = cat


def install():
    """Makes LazyTorchTensor load F8_E4M3 / F8_E5M2 safetensors tensors as float32, where
    this torch has no such dtype (a torch that has them is left alone)."""
    formats = [f for f, d in (("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"))
               if not isinstance(getattr(torch, d, None), torch.dtype)]
    if not formats:
        return
    meta_repeat_interleave()
    codes_view()
    cat_codes()
    from conversion.base import LazyTorchTensor
    tables = {f: table(f) for f in formats}
    plain = LazyTorchTensor.from_local_tensor.__func__

    def from_local_tensor(cls, t):
        values = tables.get(t.dtype)
        if values is None:
            return plain(cls, t)
        shape = tuple(t.shape)

        def load(r):
            codes = np.asarray(r.mmap_bytes())
            out = torch.from_numpy(values[codes].reshape(shape))
            out._tfs_f8_codes = torch.from_numpy(codes.copy().reshape(shape))
            return out
        lazy = cls(meta=cls.meta_with_dtype_and_shape(torch.float32, shape), args=(t,),
                   func=load)
        # the dtype it reports: the float8 one (run.py's placeholder), as ModelOpt's
        # --fp8-as-q8 test `w().dtype in (float8_e4m3fn, float8_e5m2)` asks
        lazy.dtype = getattr(torch, DTYPES[t.dtype])
        return lazy
    LazyTorchTensor.from_local_tensor = classmethod(from_local_tensor)
