#!/usr/bin/python3
"""Compares the GGUF view of tiny Hugging Face models (hf_dump) with what llama.cpp's
convert_hf_to_gguf.py writes for them, byte for byte, for each outtype.

    compare.py --hf-dump build/tests/hf_dump [--work DIR] [--no-vocab] [--tap] [--quick]
               [--outtypes auto,f32,...] [--omit-defaults] [--status FILE] [VARIANT...]

The converter is the reference of tests/hf/reference.py (llama.cpp de3ff81, set up by
scripts/setup.sh), run with its stand-ins. Models come from make_model.py (into WORK/models),
the converter's files are kept in WORK/ref (made again when the model is newer, and all of them
when the reference or its stand-ins change). --omit-defaults adds a case VARIANT+omit per
variant: the same model with a config.json that leaves out what transformers' config class
fills in (refconv/transformers/defaults.py: every defaulted key whose value does not shape a
tensor, and the shaping ones, such as head_dim or num_key_value_heads, where the config has
the value the class would fill in), so the view's defaults are compared too. --no-vocab
compares without the tokenizer's keys: hf_dump leaves them out, and they are cut from the
converter's file (its other bytes, tensor offsets included, do not depend on them). Prints a
table (variant x outtype: equal, or the first difference; --status writes it to FILE too) and
exits 1 when any differs. SKIPs when reference.missing_reason() says the converter cannot run.
"""
import argparse
import concurrent.futures
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTTYPES = ["auto", "f32", "f16", "bf16", "q8_0"]
# --quick (the meson test): every variant at auto, every outtype of these (sharded F16 with
# linear rope, permuted biases, Qwen3, special values in F32 and BF16) and of the first
# variant of each architecture class (quick_variants)
QUICK = ("llama-f16-sharded", "llama-bias-f16", "qwen3-bf16", "edge-f32", "edge-bf16")
# ... but a class's first variant with a real tokenizer (128K-250K tokens: make_model's
# npm_tokenizer, which the converter needs to recognise its pre-tokenizer) at these only.  Its
# converter runs cost 2-5 s of CPU each, most of it gguf-py packing the vocabulary, the same
# at every outtype; auto (the checkpoint's own float type) and q8_0 (the tensors a class keeps
# in F32 or F16, the list f16 and bf16 share) are where a class's own code differs by outtype;
# f32, f16 and bf16 of a class are the shared dtype conversions, which the small-vocabulary
# classes check at every outtype.  (hf_convert: 30 converter runs, about 75 s of CPU.)
BIG_VOCAB_QUICK = ("auto", "q8_0")
OMIT = "+omit"

sys.path.insert(0, HERE)
import make_model  # noqa: E402
import reference  # noqa: E402


def in_quick(maker, v, t):
    """Whether --quick converts v (a variant with every outtype in --quick) at outtype t:
    all of them, but only BIG_VOCAB_QUICK for one with a real tokenizer's vocabulary."""
    return not is_big(maker, v) or t in BIG_VOCAB_QUICK


def is_big(maker, v):
    """Whether variant v (or v+omit) has a real tokenizer's vocabulary."""
    sp = maker.spec(v[:-len(OMIT)] if v.endswith(OMIT) else v)
    return "npm_tokenizer" in sp or sp.get("vocab", 0) >= 32768


def quick_pairs(maker, variants, outtypes, quick):
    """--quick's (variant, outtype) pairs: every variant at auto, quick's variants at every
    outtype (in_quick), the +omit ones at auto; but a real tokenizer's variant V with V+omit
    among variants: V at auto and V+omit at q8_0, where V, V+omit and V at q8_0 were three
    runs of 3-8 s of CPU each (gguf-py packing the vocabulary).  What V at q8_0 checked, the
    tensors a class keeps out of Q8_0, V+omit's q8_0 checks (config.json's defaulted keys
    do not choose tensor types: SHAPING's are left out only where the class fills in the
    same value), and its defaulted keys are still compared, at q8_0."""
    merged = {v for v in variants if v + OMIT in variants and v in quick and
              is_big(maker, v) and "q8_0" in outtypes and in_quick(maker, v, "q8_0")}
    pairs = []
    for v in variants:
        base = v[:-len(OMIT)] if v.endswith(OMIT) else v
        for t in outtypes:
            if v.endswith(OMIT):
                want = t == ("q8_0" if base in merged else "auto")
            else:
                want = t == "auto" or (v in quick and in_quick(maker, v, t) and
                                       not (v in merged and t == "q8_0"))
            if want:
                pairs.append((v, t))
    return pairs


def quick_variants():
    """QUICK and the first make_model variant of each architecture class."""
    first = {}
    for v in make_model.VARIANTS:
        first.setdefault(make_model.spec(v)["arch"], v)
    return set(QUICK) | set(first.values())


def _load_defaults():
    path = os.path.join(HERE, "refconv", "transformers", "defaults.py")
    sp = importlib.util.spec_from_file_location("refconv_defaults", path)
    m = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(m)
    return m


defaults = _load_defaults()

# keys whose value shapes tensors (or the converter's handling of them): left out only where
# the class would fill in the same value
SHAPING = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
           "num_attention_heads", "num_key_value_heads", "head_dim", "tie_word_embeddings",
           "rope_scaling", "attention_bias", "mlp_bias", "layer_types", "no_rope_layers",
           "hidden_act", "hidden_activation", "partial_rotary_factor", "text_config",
           "sliding_window", "use_sliding_window", "max_window_layers", "query_pre_attn_scalar",
           # a vision tower's (VISION)
           "depth", "in_channels", "patch_size", "temporal_patch_size", "spatial_merge_size",
           "out_hidden_size", "num_position_embeddings", "deepstack_visual_indexes"}


def omit_defaults(config, keep=()):
    """config.json's dict without the keys its config class would fill in (see SHAPING);
    keep: keys left in all the same (a variant's omit_keep: those its converter asserts on)."""
    def strip(c):
        entry = defaults.CLASSES.get(c.get("model_type"))
        if entry is None:
            return c
        out = dict(c)
        try:
            full = defaults.complete(c)
        except KeyError:   # a sub-config AutoConfig does not know: config.json as written
            return c
        if isinstance(out.get("text_config"), dict):
            out["text_config"] = strip(out["text_config"])
        # a flat config.json (Qwen2.5-VL's): its text class's keys at the top, read there
        flat = defaults.FLAT_TEXT.get(c.get("model_type"))
        own = list(entry[0])
        if flat and not isinstance(c.get("text_config"), dict):
            own += [k for k in defaults.CLASSES[flat][0] if k not in entry[0]]

        def value(d, k):
            return d.get(k) if k in entry[0] else (d.get("text_config") or {}).get(k)
        for k in own:
            if k not in out or k == "text_config" or k in keep:
                continue
            if k in SHAPING:
                trial = dict(out)
                del trial[k]
                try:
                    same = value(defaults.complete(trial), k) == value(full, k)
                except Exception:   # AutoConfig fails without it: kept
                    same = False
                if not same:
                    continue
            del out[k]
        vd = defaults.VISION.get(c.get("model_type"))
        if vd and isinstance(out.get("vision_config"), dict):   # its class's defaults too
            out["vision_config"] = {k: v for k, v in out["vision_config"].items()
                                    if k not in vd or k in keep or
                                    (k in SHAPING and v != vd[k])}
        return out
    return strip(config)


def omit_keep(models, v):
    """The keys variant v's +omit keeps (make_model's spec omit_keep; other makers': none)."""
    return make_model.VARIANTS.get(v, {}).get("omit_keep", ())


def omit_adds_nothing(models, v):
    """Whether V+omit would be V itself: config.json has no key its class fills in (a
    model_type refconv/transformers/defaults.py does not mirror, as transformers 4.57 does not
    know it), so that V+omit's converter run would compare the same config again under
    another name (--omit-defaults leaves such a case out)."""
    cfg = json.load(open(os.path.join(models, v, "config.json"), encoding="utf-8"))
    return omit_defaults(cfg, omit_keep(models, v)) == cfg


def make_omit_variant(models, v):
    """WORK/models/V+omit: V's files (hard links) with config.json's defaulted keys left out."""
    src, dst = os.path.join(models, v), os.path.join(models, v + OMIT)
    cfg = json.load(open(os.path.join(src, "config.json"), encoding="utf-8"))
    text = json.dumps(omit_defaults(cfg, omit_keep(models, v)), indent=2) + "\n"
    p = os.path.join(dst, "config.json")
    if os.path.isdir(dst) and os.path.exists(p) and open(p, encoding="utf-8").read() == text \
            and os.path.getmtime(p) >= newest_mtime(src):
        return
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for f in os.listdir(src):
        if os.path.isdir(os.path.join(src, f)):   # sentence-transformers' 1_Pooling/
            shutil.copytree(os.path.join(src, f), os.path.join(dst, f), copy_function=os.link)
        elif f != "config.json":
            os.link(os.path.join(src, f), os.path.join(dst, f))
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)


def reference_stamp():
    """Changes when the reference or its stand-ins do (WORK/ref is made again then)."""
    return reference.stamp()


def work_dirs(work):
    """WORK/models, WORK/ref, WORK/out, made; ref/ emptied when the reference or its
    stand-ins changed since its files were made (reference_stamp())."""
    dirs = [os.path.join(work, x) for x in ("models", "ref", "out")]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    stamp = reference_stamp()
    stamp_file = os.path.join(dirs[1], "STAMP")
    if not os.path.exists(stamp_file) or open(stamp_file).read() != stamp:
        for f in os.listdir(dirs[1]):
            os.unlink(os.path.join(dirs[1], f))
        with open(stamp_file, "w") as f:
            f.write(stamp)
    return dirs


def done_with(work, ok):
    """Removes a module's work folder (models/, ref/, out/) when all its cases passed,
    unless TFS_KEEP_WORK=1: its repos are copies of cached_repo()'s and its ref/ links of
    the converter's cache, made again in seconds, and the modules' folders kept 19 GB of a
    fresh-clone run's 30 (a CI machine ran out of disk).  A failure keeps it to look at."""
    if ok and os.environ.get("TFS_KEEP_WORK") != "1":
        shutil.rmtree(work, ignore_errors=True)


def copy_tree(src, dst):
    """src copied to dst (a new folder), reflinked where the file system can: made under a
    temporary name, then renamed."""
    tmp = "%s.%d.tmp" % (dst, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    r = subprocess.run(["cp", "-r", "--reflink=auto", src, tmp], capture_output=True)
    if r.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp, dst)


def cached_repo(maker, name):
    """The variant's repo in the converter's cache folder (reference.cache_dir()/repos), made
    there once for every module and chain: they make the same bytes (seeded weights, the
    same tokenizers), and making one is up to 2.5 s of CPU (numpy's weights, a real
    tokenizer's 11 MB of JSON read and written).  Keyed by the generators' sources, the
    variant's spec and the npm folder; None without a cache."""
    cache = reference.cache_dir()
    if not cache:
        return None
    h = hashlib.sha256()
    for f in sorted(glob.glob(os.path.join(HERE, "make_*.py"))):
        with open(f, "rb") as fp:
            h.update(os.path.basename(f).encode() + b"\0" + fp.read())
    h.update(repr((maker.__name__, reference.npm_dir())).encode())
    made = os.path.join(cache, "repos", "made-" + h.hexdigest()[:16])
    specs = (getattr(maker, "VARIANTS", {}).get(name), make_model.VARIANTS.get(name))
    h.update(repr((name, specs)).encode())
    top = os.path.join(cache, "repos", h.hexdigest()[:32])
    d = os.path.join(top, name)
    if os.path.exists(os.path.join(d, "config.json")):
        return d
    try:
        reference._make_cache(cache)
        os.makedirs(top, exist_ok=True)
    except OSError:
        return None
    lock = reference.key_lock(top)
    try:
        if not os.path.exists(os.path.join(d, "config.json")):
            # (made in one folder for all the variants of these generators, where they keep
            # what their variants share: make_model.py's SentencePiece model, trained once;
            # not for other sources, makers or npm folders: two checkouts sharing the cache
            # made a variant there at once, one removing the other's files)
            shutil.rmtree(os.path.join(made, name), ignore_errors=True)
            maker.make(made, name)
            shutil.rmtree(d, ignore_errors=True)
            os.rename(os.path.join(made, name), d)
    finally:
        if lock:
            lock.close()
    return d


def make_variants(models, variants, maker):
    """Each variant's repo in models (maker.make(models, name), once, or a copy of
    cached_repo()'s), and each VARIANT+omit's (make_omit_variant)."""
    for v in variants:
        base = v[:-len(OMIT)] if v.endswith(OMIT) else v
        if not os.path.isdir(os.path.join(models, base)):
            src = cached_repo(maker, base)
            if src is None:
                maker.make(models, base)
            else:
                copy_tree(src, os.path.join(models, base))
        if v != base:
            make_omit_variant(models, base)


def newest_mtime(d):
    return max(os.path.getmtime(os.path.join(d, f)) for f in os.listdir(d))


def run_converter(model, outtype, out):
    if os.path.exists(out) and os.path.getmtime(out) > newest_mtime(model):
        return None
    if not os.path.exists(os.path.join(model, "tokenizer.model")):
        why = reference.missing_reason(bpe=True)
        if why:
            return "SKIP " + why
    return reference.convert(model, out, "--outtype", outtype)


# ==== reading GGUF (enough to cut keys and to say where two files differ) ====

_U64 = struct.Struct("<Q")

class Gguf:
    def __init__(self, data):
        self.data = data
        magic, ver, nt, nkv = struct.unpack_from("<IIQQ", data, 0)
        assert magic == 0x46554747 and ver == 3
        pos = 24
        self.kvs = []   # (name, type, start, end) of the whole entry
        for _ in range(nkv):
            start = pos
            name, pos = self._str(pos)
            (t,), pos = struct.unpack_from("<I", data, pos), pos + 4
            vstart = pos
            pos = self._skip(t, pos)
            self.kvs.append((name, t, start, vstart, pos))
        self.ti_start = pos
        self.tensors = []   # (name, dims, type, offset)
        for _ in range(nt):
            name, pos = self._str(pos)
            (nd,) = struct.unpack_from("<I", data, pos)
            dims = struct.unpack_from("<%dQ" % nd, data, pos + 4)
            t, off = struct.unpack_from("<IQ", data, pos + 4 + 8 * nd)
            pos += 4 + 8 * nd + 12
            self.tensors.append((name, dims, t, off))
        self.ti_end = pos
        self.data_start = (pos + 31) // 32 * 32

    def _str(self, pos):
        (n,) = struct.unpack_from("<Q", self.data, pos)
        return self.data[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n

    SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def _skip(self, t, pos):
        if t in self.SIZES:
            return pos + self.SIZES[t]
        if t == 8:
            return self._str(pos)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", self.data, pos)
            pos += 12
            if et in self.SIZES:
                return pos + n * self.SIZES[et]
            if et == 8:   # (a vocabulary's 150K-200K strings: lengths only, not decoded)
                length, data = _U64.unpack_from, self.data
                for _ in range(n):
                    pos += 8 + length(data, pos)[0]
                return pos
            for _ in range(n):
                pos = self._skip(et, pos)
            return pos
        raise ValueError("bad GGUF type %d" % t)

    def value(self, i):
        _, _, _, vs, ve = self.kvs[i]
        return self.data[vs:ve]

    def without_keys(self, prefix):
        """The same file without the keys whose name starts with prefix."""
        keep = [k for k in self.kvs if not k[0].startswith(prefix)]
        out = bytearray(self.data[:8])
        out += struct.pack("<QQ", len(self.tensors), len(keep))
        for _, _, s, _, e in keep:
            out += self.data[s:e]
        out += self.data[self.ti_start:self.ti_end]
        out += b"\0" * (-len(out) % 32)
        out += self.data[self.data_start:]
        return bytes(out)


def tensor_bytes(g, i):
    name, dims, t, off = g.tensors[i]
    nxt = [o for _, _, _, o in g.tensors if o > off]
    end = g.data_start + (min(nxt) if nxt else len(g.data) - g.data_start)
    return g.data[g.data_start + off:end]


def first_difference(ref, ours):
    """A short text saying where two GGUF files differ (and, when the first difference is in
    the keys, whether the tensors are alike).  The tests build their assertion messages
    with it eagerly (`assertTrue(a == b, first_difference(a, b))`), so equal files return at
    once: parsing both (their token arrays in Python) cost 2-5 s of CPU per MoE model, 70 of
    mount_hf_moe's 94 s."""
    if ref == ours:
        return "no difference"
    try:
        a, b = Gguf(ref), Gguf(ours)
    except Exception as e:
        return "unreadable: %s" % e
    d = _first_difference(a, b)
    if d.startswith(("keys", "key ")):
        same = [t[:3] for t in a.tensors] == [t[:3] for t in b.tensors] and all(
            tensor_bytes(a, i) == tensor_bytes(b, i) for i in range(len(a.tensors)))
        d += "; tensors %s" % ("equal" if same else "DIFFER")
    return d


def _first_difference(a, b):
    ka = [k[0] for k in a.kvs]
    kb = [k[0] for k in b.kvs]
    if ka != kb:
        extra = [k for k in kb if k not in ka]
        missing = [k for k in ka if k not in kb]
        if extra or missing:
            return "keys: missing %s, extra %s" % (missing[:4], extra[:4])
        return "key order: %s" % next("%s vs %s" % (x, y) for x, y in zip(ka, kb) if x != y)
    for i, k in enumerate(ka):
        if a.kvs[i][1] != b.kvs[i][1] or a.value(i) != b.value(i):
            return "key %s: %r vs %r" % (k, a.value(i)[:48], b.value(i)[:48])
    if [t[:3] for t in a.tensors] != [t[:3] for t in b.tensors]:
        for x, y in zip(a.tensors, b.tensors):
            if x[:3] != y[:3]:
                return "tensor info: %s vs %s" % (x[:3], y[:3])
        return "tensor count %d vs %d" % (len(a.tensors), len(b.tensors))
    for i, t in enumerate(a.tensors):
        x, y = tensor_bytes(a, i), tensor_bytes(b, i)
        if x != y:
            j = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]), min(len(x), len(y)))
            return "tensor %s (type %d): byte %d of %d: %s vs %s" % (
                t[0], t[2], j, len(x), x[j:j + 4].hex(), y[j:j + 4].hex())
    return "sizes %d vs %d" % (len(a.data), len(b.data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-dump", required=True)
    ap.add_argument("--work", default="/tmp/tfs-hf-compare")
    ap.add_argument("--no-vocab", action="store_true")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--quick", action="store_true",
                    help="every variant at auto, the other outtypes on quick_variants() only (see "
                    "quick_pairs)")
    ap.add_argument("--omit-defaults", action="store_true",
                    help="also VARIANT+omit: config.json without the class-defaulted keys")
    ap.add_argument("--status", help="also write the table to this file")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args()
    why = reference.missing_reason()
    if why:
        print("1..0 # SKIP %s" % why if a.tap else "SKIP: %s" % why)
        return 0 if a.tap else 77  # (meson's TAP protocol: a plan of 0 with SKIP)
    base = [v[:-len(OMIT)] if v.endswith(OMIT) else v for v in a.variants] or \
        list(make_model.VARIANTS)
    base = list(dict.fromkeys(base))
    variants = []
    for v in base:
        if not a.variants or v in a.variants:
            variants.append(v)
        if (a.omit_defaults and not a.variants) or v + OMIT in a.variants:
            variants.append(v + OMIT)
    outtypes = a.outtypes.split(",")
    quick = quick_variants()
    models, refdir, outdir = work_dirs(a.work)
    for v in base:
        # (through cached_repo: made once for mount_hf and mount_hf_export too, in each chain)
        make_variants(models, [v], make_model)
        if v + OMIT in variants and v + OMIT not in a.variants and omit_adds_nothing(models, v):
            variants.remove(v + OMIT)
            if a.tap:
                print("# %s%s left out: its config.json has no class-defaulted key" % (v, OMIT))
        if any(x == v + OMIT for x in variants):
            make_omit_variant(models, v)
    pairs = quick_pairs(make_model, variants, outtypes, quick) if a.quick else \
        [(v, t) for v in variants for t in outtypes]
    # the converter's runs first, one per core (each is mostly one busy Python process)
    refs = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        for v, t in pairs:
            refs[v, t] = pool.submit(run_converter, os.path.join(models, v), t,
                                     os.path.join(refdir, "%s.%s.gguf" % (v, t)))
    results = {}
    n = 0
    if a.tap:
        print("1..%d" % len(pairs))
    for v in variants:
        for t in outtypes:
            if (v, t) not in pairs:
                continue
            n += 1
            model = os.path.join(models, v)
            ref = os.path.join(refdir, "%s.%s.gguf" % (v, t))
            ours = os.path.join(outdir, "%s.%s.gguf" % (v, t))
            err = refs[v, t].result()
            if err is None:
                cmd = [a.hf_dump, "--outtype", t] + (["--no-vocab"] if a.no_vocab else [])
                r = subprocess.run(cmd + [model, ours], capture_output=True, text=True)
                if r.returncode:
                    err = "hf_dump failed: " + r.stderr.strip()
            if err is None:
                rb = open(ref, "rb").read()
                if a.no_vocab:
                    rb = Gguf(rb).without_keys("tokenizer.")
                ob = open(ours, "rb").read()
                err = None if rb == ob else first_difference(rb, ob)
            results[v, t] = err
            if a.tap:
                if err is not None and err.startswith("SKIP "):
                    print("ok %d - %s %s # SKIP %s" % (n, v, t, err[5:]))
                else:
                    print("%s %d - %s %s%s" % ("ok" if err is None else "not ok", n, v, t,
                                               "" if err is None else " # " + err))
            sys.stdout.flush()
    width = max(len(v) for v in variants)
    lines = ["%-*s  %s" % (width, "", "  ".join("%-6s" % t for t in outtypes))]
    for v in variants:
        lines.append("%-*s  %s" % (width, v, "  ".join(
            "%-6s" % ("-" if (v, t) not in results else "equal" if results[v, t] is None
                      else "skip" if results[v, t].startswith("SKIP ") else "DIFF")
            for t in outtypes)))
    for (v, t), e in results.items():
        if e is not None:
            lines.append("%s %s: %s" % (v, t, e))
    print("\n".join(("# " + x if a.tap else x) for x in lines))
    if a.status:
        with open(a.status, "w") as f:
            f.write("\n".join(lines) + "\n")
    ok = all(e is None or e.startswith("SKIP ") for e in results.values())
    done_with(a.work, ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
