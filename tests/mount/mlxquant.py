"""MLX's quantizers and dequantizers (mx.quantize / mx.dequantize) in numpy float32, written
from the formulas of OLLAMA_FORMATS.md (MLX ops.cpp affine_quantize / fp_quantize, its CPU
kernels), independently of tensorfs' C code: the oracle of the MLX write-back tests.

A matrix is rows x K float32 values; quantized, it is rows x (K * bits / 32) little-endian
uint32 words (element j of the bit stream at bits [bits*j, bits*(j+1))), scales rows x K/G
(affine: in the scale dtype, with biases; mx/nv: uint8 bytes)."""
import numpy as np

F32 = np.float32
FP4_LUT = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)
MODES = {"int4": ("affine", 4, 64), "int8": ("affine", 8, 64), "nvfp4": ("nvfp4", 4, 16),
         "mxfp4": ("mxfp4", 4, 32), "mxfp8": ("mxfp8", 8, 32)}


def to_bf16_bits(a):
    u = np.ascontiguousarray(a, dtype=F32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint32) << 16).astype(np.uint32).view(F32)


def param_encode(a, dtype):
    """float32 scales or biases in dtype ("BF16", "F16", "F32"), nearest-even, as bytes."""
    a = np.asarray(a, dtype=F32)
    if dtype == "BF16":
        return to_bf16_bits(a).tobytes()
    return a.astype("<f2" if dtype == "F16" else "<f4").tobytes()


def param_decode(raw, dtype):
    if dtype == "BF16":
        return from_bf16_bits(np.frombuffer(raw, "<u2"))
    return np.frombuffer(raw, "<f2" if dtype == "F16" else "<f4").astype(F32)


def e4m3_encode(x):
    """MLX's float32 -> E4M3 (PyTorch's fp8e4m3fn conversion, nearest-even, with MLX's bound
    543 << 21: 448 and up saturate to 0x7E)."""
    u = np.atleast_1d(np.asarray(x, dtype=F32)).view(np.uint32).astype(np.uint64)
    sign = u & 0x80000000
    u = u ^ sign
    out = np.zeros(u.shape, dtype=np.uint64)
    big = u >= (543 << 21)
    small = u < (121 << 23)
    norm = ~big & ~small
    out[big] = 0x7E
    dm = np.array([141 << 23], dtype=np.uint32).view(F32)[0]
    s = (u[small].astype(np.uint32).view(F32) + dm).view(np.uint32).astype(np.uint64)
    out[small] = s - (141 << 23)
    n = u[norm]
    n = n + ((7 - 127) % (1 << 32) << 23) + 0x7FFFF + ((n >> 20) & 1)
    out[norm] = (n & 0xFFFFFFFF) >> 20
    return ((out & 0xFF) | (sign >> 24)).astype(np.uint8)


def e4m3_decode(b):
    b = np.asarray(b, dtype=np.uint32)
    e, m = (b >> 3) & 15, b & 7
    v = np.where(e == 0, m.astype(F32) * F32(2.0 ** -9),
                 ((1 + m.astype(F32) / 8) * np.exp2(e.astype(F32) - 7)).astype(F32))
    return np.where(b & 0x80, -v, v).astype(F32)


def e8m0_decode(s):
    s = np.asarray(s, dtype=np.uint32)
    return np.where(s == 0, F32(2.0 ** -127), np.exp2(s.astype(np.float64) - 127)).astype(F32)


def pack(codes, bits):
    """rows x K codes -> rows x (K*bits/32) uint32 words (LSB-first bit stream)."""
    rows, k = codes.shape
    bitarr = ((codes.astype(np.uint64)[:, :, None] >> np.arange(bits, dtype=np.uint64)) & 1)
    bitarr = bitarr.reshape(rows, -1, 32)
    return (bitarr << np.arange(32, dtype=np.uint64)).sum(-1).astype("<u4")


def unpack(words, bits, k):
    rows = words.shape[0]
    bitarr = ((words.astype(np.uint64)[:, :, None] >> np.arange(32, dtype=np.uint64)) & 1)
    bitarr = bitarr.reshape(rows, -1)[:, :k * bits].reshape(rows, k, bits)
    return (bitarr << np.arange(bits, dtype=np.uint64)).sum(-1).astype(np.uint32)


def fp4_codes(v):
    return np.argmin(np.abs(v.astype(F32)[..., None] - FP4_LUT), axis=-1).astype(np.uint32)


def quantize_group(mode, bits, x, gscale=None):
    """One group: (codes, scale, bias) with scale/bias float32 (affine) or the scale byte."""
    x = np.asarray(x, dtype=F32)
    if mode == "affine":
        n_bins = F32((1 << bits) - 1)
        w_max, w_min = F32(x.max()), F32(x.min())
        mask = abs(w_min) > abs(w_max)
        scale = max(F32((w_max - w_min) / n_bins), F32(1e-7))
        scale = scale if mask else F32(-scale)
        edge = w_min if mask else w_max
        q0 = np.rint(F32(edge / scale))
        bias = F32(0)
        if q0 != 0:
            scale, bias = F32(edge / q0), edge
        q = np.clip(np.rint(((x - bias) / scale).astype(F32)), 0, n_bins)
        return q.astype(np.uint32), scale, bias
    if mode == "nvfp4":
        v = (x / F32(gscale)).astype(F32) if gscale is not None else x
        sb = e4m3_encode(F32(np.abs(v).max() / F32(6)))[0]
        s = e4m3_decode(sb)
        codes = np.zeros(x.size, np.uint32) if s == 0 else fp4_codes((v / s).astype(F32))
        return codes, sb, None
    maxval = F32(6 if bits == 4 else 448)
    s = F32(np.abs(x).max() / maxval)
    e = 0 if s == 0 else int(np.rint(np.log2(s)))
    assert e >= -127
    v = (x / F32(2.0 ** e)).astype(F32)
    codes = fp4_codes(v) if bits == 4 else e4m3_encode(v).astype(np.uint32)
    return codes, np.uint8(e + 127), None


def quantize(mode, bits, group, w, scale_dtype="BF16", gscale=None):
    """A rows x K matrix: (words, scale bytes, bias bytes or None) as MLX stores them."""
    w = np.asarray(w, dtype=F32)
    rows, k = w.shape
    codes = np.zeros((rows, k), np.uint32)
    scales, biases = [], []
    for r in range(rows):
        g_r = None if gscale is None else gscale[0 if gscale.size == 1 else r]
        for g in range(k // group):
            c, s, b = quantize_group(mode, bits, w[r, g * group:(g + 1) * group], g_r)
            codes[r, g * group:(g + 1) * group] = c
            scales.append(s)
            biases.append(b)
    words = pack(codes, bits)
    if mode == "affine":
        return words, param_encode(scales, scale_dtype), param_encode(biases, scale_dtype)
    return words, np.array(scales, np.uint8).tobytes(), None


def dequantize(mode, bits, group, words, sraw, braw=None, scale_dtype="BF16", gscale=None):
    """The float32 values tensorfs (and MLX, in float32) computes."""
    rows = words.shape[0]
    k = words.shape[1] * 32 // bits
    codes = unpack(words, bits, k)
    gi = np.arange(k) // group
    if mode == "affine":
        s = param_decode(sraw, scale_dtype).reshape(rows, -1)[:, gi]
        b = param_decode(braw, scale_dtype).reshape(rows, -1)[:, gi]
        return (s * codes.astype(F32) + b).astype(F32)
    sb = np.frombuffer(sraw, np.uint8).reshape(rows, -1)[:, gi]
    if mode == "mxfp8":
        return (e4m3_decode(codes) * e8m0_decode(sb)).astype(F32)
    out = FP4_LUT[codes] * (e4m3_decode(sb) if mode == "nvfp4" else e8m0_decode(sb))
    if gscale is not None:
        g = np.asarray(gscale, F32)
        out = out * (g[0] if g.size == 1 else g[:, None])
    return out.astype(F32)
