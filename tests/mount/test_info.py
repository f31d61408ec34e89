#!/usr/bin/python3
"""The command line around the mount: `tensorfs --version`, help and exit codes, `tensorfs
info` (text, --json, --markdown, --no-tensors), the man pages, the bash completion and what
`meson install` puts where; and two GGUF repack defects seen through real mounts: a tensor
stored with a trailing dimension of 1 keeps it, and a tensor-less GGUF's data offset is the
aligned one (and such a file repacks).

Expected values come from the files themselves, read with tests/mount/ggufgen.py (a reader
independent of tensorfs), from the Ollama store's EXPECTED.json, and from
@huggingface/gguf (npm) when it can be installed.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

import numpy as np

import ggufgen as gg
import stgen
from harness import TENSORFS as _TENSORFS, TESTDATA, Mount, TestCase, main, quick, run

TENSORFS = os.path.abspath(_TENSORFS)

ROOT = os.path.realpath(os.path.join(TESTDATA, "..", ".."))
TINY = os.path.join(ROOT, "examples", "tiny-llama.gguf")
OLLAMA = os.path.join(TESTDATA, "ollama")
# the completion the build wrote from completion/tensorfs.in and the option table
COMPLETION = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(TENSORFS))),
                          "completion", "tensorfs")


def options_of(cmd):
    """The -o option names of a command, as the option table gives them ("staging=")."""
    r = run([TENSORFS, "__options", cmd])
    assert r.returncode == 0, r.stderr
    return r.stdout.split()
MAN1 = os.path.join(ROOT, "man", "tensorfs.1")
MAN8 = os.path.join(ROOT, "man", "mount.tensorfs.8")


def project_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


def info(*args, env=None):
    return run([TENSORFS, "info"] + list(args), env=env)


def commas(n):
    return "{:,}".format(n)


def three_digits(n, units, base):
    """What the summary shows: three significant digits and a unit (an independent
    formulation: Python's %g, not the C code's)."""
    x, u = float(n), 0
    while u + 1 < len(units) and x >= base * 0.9995:
        x /= base
        u += 1
    return ("%.3g %s" % (x, units[u])) if u else None


def summary(text):
    """{label: value} of the summary lines (before the first blank line)."""
    out = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        m = re.match(r"^(\w[\w ]*?)\s{2,}(\S.*)$", line) or re.match(r"^(\w+) (\S.*)$", line)
        out[m.group(1)] = m.group(2)
    return out


def section(text, heading):
    """The indented table lines after the line `heading` (up to the next blank line)."""
    lines = text.splitlines()
    i = lines.index(heading)
    rows = []
    for line in lines[i + 1:]:
        if not line.strip():
            break
        rows.append(line)
    return rows


def prod(v):
    n = 1
    for x in v:
        n *= int(x)
    return n


def gguf_with(path, kvs=(), tensors=(), alignment=None):
    """A GGUF written by ggufgen: kvs (key, type, value); tensors (name, dtype, data, ne)."""
    w = gg.GGUFWriter(alignment=alignment or 32)
    if alignment:
        w.add_kv("general.alignment", gg.UINT32, alignment)
    for k in kvs:
        w.add_kv(*k)
    for t in tensors:
        name, dtype, data, ne = (tuple(t) + (None,))[:4]
        if callable(data):
            w.add_tensor(name, dtype, None, ne=ne, fill=data)
        else:
            w.add_tensor(name, dtype, data, ne=ne)
    w.write(path)
    return path


def sparse(f, n):
    """A fill for GGUFWriter: n bytes of hole."""
    f.seek(n - 1, 1)
    f.write(b"\0")


# ==== --version, --help and exit codes ====

class Cli(TestCase):
    def test_version(self):
        want = "tensorfs %s\n" % project_version()
        for flag in ("--version", "-V"):
            r = run([TENSORFS, flag])
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, want, ""), flag)
        # the same through the mount.tensorfs name
        d = self.tmpdir()
        os.symlink(os.path.realpath(TENSORFS), os.path.join(d, "mount.tensorfs"))
        r = run([os.path.join(d, "mount.tensorfs"), "--version"])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, want, ""))

    def test_help_exits_0_on_stdout(self):
        for args, must in ((["--help"], "tensorfs info SOURCE"), (["-h"], "tensorfs unmount"),
                           (["help"], "tensorfs repack"),
                           (["info", "--help"], "--no-tensors"), (["info", "-h"], "--markdown"),
                           (["help", "info"], "--json"), (["unmount", "--help"], "unmount [-l] MOUNTPOINT"),
                           (["repack", "--help"], "staging=DIR"), (["help", "mount"], "readahead_kb")):
            r = run([TENSORFS] + args)
            self.assertEqual(r.returncode, 0, args)
            self.assertEqual(r.stderr, "", args)
            self.assertIn("usage:", r.stdout, args)
            self.assertIn(must, r.stdout, args)

    def test_usage_errors_exit_2_on_stderr(self):
        for args, must in (([], "usage:"), (["bogus"], "unknown command 'bogus'"),
                           (["--bogus"], "unknown option '--bogus'"), (["help", "nope"], "'nope'"),
                           (["info"], "usage: tensorfs info"),
                           (["info", "--frob", TINY], "unknown option '--frob'"),
                           (["info", TINY, "extra"], "unexpected argument 'extra'"),
                           (["info", TINY, "--json", "--markdown"], "exclude each other")):
            r = run([TENSORFS] + args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stdout, "", args)
            self.assertIn(must, r.stderr, args)
        # an unknown command gets a one-line hint, not the whole usage
        r = run([TENSORFS, "bogus"])
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("tensorfs --help", r.stderr)

    def test_runtime_errors_exit_1(self):
        d = self.tmpdir()
        bad = os.path.join(d, "broken.gguf")
        with open(bad, "wb") as f:
            f.write(b"GGUF\x03\x00\x00\x00" + b"\xff" * 8)
        for path in (bad, os.path.join(d, "missing.gguf")):
            for extra in ([], ["--json"], ["--markdown"]):
                r = info(path, *extra)
                self.assertEqual(r.returncode, 1, (path, extra))
                self.assertEqual(r.stdout, "")
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(os.path.basename(path), lines[0])
        # "--" ends the options: a file named like an option
        dash = os.path.join(d, "--json")
        shutil.copyfile(TINY, dash)
        r = run([TENSORFS, "info", "--", "--json"], cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("24 keys, 21 tensors", r.stdout)


# ==== tensorfs info: the text form ====

class InfoText(TestCase):
    @quick
    def test_summary_of_a_known_model(self):
        rd = gg.read_gguf(TINY)
        r = info(TINY)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        s = summary(r.stdout)
        params = sum(prod(t["ne"]) for t in rd["tensors"])
        nbytes = sum(t["nbytes"] for t in rd["tensors"])
        self.assertEqual(params, 172352)   # the sample's own count, independent of both
        self.assertEqual(s["source"], TINY)
        self.assertEqual(s["format"], "gguf")
        self.assertEqual(s["version"], str(rd["version"]))
        self.assertEqual(s["alignment"], str(rd["alignment"]))
        self.assertEqual(s["data offset"], str(rd["data_offset"]))
        self.assertEqual(s["contents"], "%d keys, %d tensors" % (len(rd["kv"]), len(rd["tensors"])))
        self.assertEqual(s["parameters"], "172 K (172,352)")
        self.assertEqual(s["tensor data"], "%s (%s bytes)" % (
            three_digits(nbytes, ["bytes", "KiB", "MiB"], 1024), commas(nbytes)))
        # every key once, in file order, with its type; every tensor with dtype, shape, bytes
        keys = section(r.stdout, "%d keys" % len(rd["kv"]))
        self.assertEqual(keys[0].split(), ["key", "type", "value"])
        self.assertEqual([k.split()[0] for k in keys[1:]], [k.decode() for k, _, _ in rd["kv"]])
        tensors = section(r.stdout, "%d tensors" % len(rd["tensors"]))
        self.assertEqual(tensors[0].split(), ["tensor", "dtype", "shape", "bytes"])
        for line, t in zip(tensors[1:], rd["tensors"]):
            shape = "[%s]" % ", ".join(str(v) for v in reversed(t["ne"]))
            self.assertRegex(line, r"^  %s +%s +%s +%d$" % (re.escape(t["name"].decode()),
                                                            t["type_name"], re.escape(shape),
                                                            t["nbytes"]))
        self.assertEqual(len(tensors), len(rd["tensors"]) + 1)

    def assertColumnsAligned(self, rows, ncols):
        """Every row of a table starts its columns at the same character positions as its
        header (cells hold no double spaces)."""
        starts = [m.start() for m in re.finditer(r"(?<=  )\S", rows[0])]
        self.assertEqual(len(starts), ncols - 1, rows[0])
        for row in rows[1:]:
            for pos in starts:
                self.assertTrue(pos < len(row) and row[pos - 2:pos] == "  " and row[pos] != " "
                                or row[pos - 1] == " ", "%r: no column at %d" % (row, pos))

    def test_singular_plural_and_alignment(self):
        d = self.tmpdir()
        one = gguf_with(os.path.join(d, "one.gguf"), [("general.name", gg.STRING, "one")],
                        [("only", "F32", np.zeros(4, np.float32))])
        r = info(one)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary(r.stdout)["contents"], "1 key, 1 tensor")
        self.assertIn("\n1 key\n", r.stdout)
        self.assertIn("\n1 tensor\n", r.stdout)
        self.assertEqual(summary(r.stdout)["parameters"], "4")
        self.assertEqual(summary(r.stdout)["tensor data"], "16 bytes")
        two = gguf_with(os.path.join(d, "two.gguf"), [],
                        [("a", "F32", np.zeros(4, np.float32)),
                         ("a.much.longer.tensor.name", "F16", np.zeros((3, 2), np.float16))])
        r = info(two)
        self.assertEqual(summary(r.stdout)["contents"], "0 keys, 2 tensors")
        self.assertIn("\n0 keys\n", r.stdout)
        rows = section(r.stdout, "2 tensors")
        # the dtype column starts at the same place in every row
        col = rows[0].index("dtype")
        for row in rows[1:]:
            self.assertNotEqual(row[col], " ", row)
            self.assertEqual(row[col - 2:col], "  ", row)
        self.assertEqual(rows[2].split(), ["a.much.longer.tensor.name", "F16", "[3,", "2]", "12"])

    def test_parameter_count_units(self):
        d = self.tmpdir()
        # sparse files: the tensors' bytes are holes
        big = gguf_with(os.path.join(d, "big.gguf"), [],
                        [("w", "Q2_K", sparse, [4096, 1768000])])
        r = info(big)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary(r.stdout)["parameters"], "7.24 B (7,241,728,000)")
        nbytes = 7241728000 // 256 * 84
        self.assertEqual(summary(r.stdout)["tensor data"], "2.21 GiB (%s bytes)" % commas(nbytes))
        mid = gguf_with(os.path.join(d, "mid.gguf"), [], [("w", "I8", sparse, [1100000])])
        self.assertEqual(summary(info(mid).stdout)["parameters"], "1.1 M (1,100,000)")
        edge = gguf_with(os.path.join(d, "edge.gguf"), [], [("w", "I8", sparse, [999999])])
        self.assertEqual(summary(info(edge).stdout)["parameters"], "1 M (999,999)")

    def test_mlx_quantized_model(self):
        """Ollama per-tensor int4: the packed weight counts with its logical shape, its
        .scale / .bias companions not at all; the table names the quantization."""
        with open(os.path.join(OLLAMA, "EXPECTED.json")) as f:
            exp = [m for m in json.load(f)["manifests"] if m["name"] == "oracle-st:int4"][0]
        want = 0
        for blob in exp["tensor_blobs"].values():
            want += prod(blob.get("logical_shape") or blob["shape"])
        env = dict(os.environ, OLLAMA_MODELS=os.path.join(OLLAMA, "models"))
        r = info("oracle-st:int4", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(summary(r.stdout)["parameters"], "%s (%s)" % (
            three_digits(want, ["", "K"], 1000), commas(want)))
        rows = section(r.stdout, "4 tensors")
        self.assertEqual(rows[0].split(), ["tensor", "dtype", "shape", "bytes", "quantization"])
        w = [l for l in rows if l.split()[0] == "model.layers.0.mlp.down_proj.weight"][0]
        self.assertRegex(w, r"U32 +\[8, 16\] +512  affine 4-bit, group 64$")
        j = json.loads(info("oracle-st:int4", "--json", env=env).stdout)
        self.assertEqual(j["parameters"], want)

    def test_value_previews(self):
        d = self.tmpdir()
        long = "line one\n" + "x" * 300
        path = gguf_with(os.path.join(d, "v.gguf"), [
            ("u64", gg.UINT64, 2 ** 64 - 1),
            ("f", gg.FLOAT32, 0.1),
            ("long", gg.STRING, long),
            ("short", gg.STRING, "tab\there"),
            ("ints", gg.ARRAY, (gg.UINT32, list(range(1000)))),
            ("toks", gg.ARRAY, (gg.STRING, ["<s>", "</s>", "a\"b"])),
            ("nest", gg.ARRAY, (gg.ARRAY, [(gg.INT8, [1, 2]), (gg.INT8, [3])])),
        ])
        r = info(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {l.split()[0]: l for l in section(r.stdout, "7 keys")[1:]}
        self.assertRegex(rows["u64"], r"uint64 +18446744073709551615$")
        self.assertRegex(rows["f"], r"float32 +0\.1$")
        self.assertRegex(rows["long"], r"string +line one\\nxxx+\u2026 \(309 bytes\)$")
        self.assertLess(len(rows["long"]), 160)
        self.assertRegex(rows["short"], r"string +tab\\there$")
        self.assertRegex(rows["ints"], r"\[uint32 \u00d7 1000\] +\[0, 1, 2, 3, 4, 5, 6, 7, \u2026\]$")
        self.assertRegex(rows["toks"], r'\[string \u00d7 3\] +\["<s>", "</s>", "a\\"b"\]$')
        self.assertRegex(rows["nest"], r"\[array\[int8\] \u00d7 2\] +\[\[1, 2\], \[3\]\]$")
        # one line per key: the newline of the long string did not break the table
        self.assertEqual(len(section(r.stdout, "7 keys")), 8)

    def test_no_tensors(self):
        r = info(TINY, "--no-tensors")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("tensors\n", r.stdout.split("\n\n", 1)[1])
        self.assertNotIn("token_embd.weight", r.stdout)
        self.assertIn("24 keys, 21 tensors", r.stdout)  # still counted
        md = info(TINY, "--markdown", "--no-tensors").stdout
        self.assertNotIn("## Tensors", md)
        self.assertNotIn("token_embd.weight", md)
        j = json.loads(info(TINY, "--json", "--no-tensors").stdout)
        self.assertNotIn("tensors", j)
        self.assertEqual(len(j["keys"]), 24)


# ==== tensorfs info --json ====

class InfoJson(TestCase):
    def test_values_typed_exact_and_full(self):
        d = self.tmpdir()
        toks = ["tok%d" % i for i in range(5000)] + [b"\xff\xferaw", "\u00e9"]
        floats = [0.1, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4028234663852886e38]
        path = gguf_with(os.path.join(d, "v.gguf"), [
            ("u64", gg.UINT64, 2 ** 64 - 1), ("i64", gg.INT64, -2 ** 63),
            ("u32", gg.UINT32, 4294967295), ("i8", gg.INT8, -128), ("b", gg.BOOL, True),
            ("f32", gg.FLOAT32, 0.1), ("f64", gg.FLOAT64, 1e-300),
            ("s", gg.STRING, "quote \" backslash \\ newline \n"),
            ("raw", gg.STRING, b"\x80not utf-8"),
            ("toks", gg.ARRAY, (gg.STRING, toks)),
            ("fl", gg.ARRAY, (gg.FLOAT32, floats)),
            ("u64s", gg.ARRAY, (gg.UINT64, [0, 2 ** 64 - 1, 2 ** 53 + 1])),
            ("nest", gg.ARRAY, (gg.ARRAY, [(gg.INT32, [1, 2]), (gg.INT32, [])])),
        ], [("t", "F32", np.arange(6, dtype=np.float32).reshape(2, 3))])
        r = info(path, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)   # Python's json: NaN / Infinity as it writes them
        v = {k["name"]: k for k in j["keys"]}
        self.assertEqual(v["u64"]["value"], 2 ** 64 - 1)
        self.assertIsInstance(v["u64"]["value"], int)
        self.assertEqual(v["i64"]["value"], -2 ** 63)
        self.assertEqual(v["u32"]["value"], 4294967295)
        self.assertEqual(v["i8"]["value"], -128)
        self.assertIs(v["b"]["value"], True)
        self.assertEqual(struct.pack("<f", v["f32"]["value"]), struct.pack("<f", 0.1))
        self.assertIn('"value": 0.1', r.stdout)   # the shortest text, not 0.10000000149
        self.assertEqual(v["f64"]["value"], 1e-300)
        self.assertEqual(v["s"]["value"], "quote \" backslash \\ newline \n")
        self.assertEqual(v["raw"]["value"].encode("utf-8", "surrogateescape"), b"\x80not utf-8")
        got = v["toks"]["value"]
        self.assertEqual(len(got), len(toks))   # in full, not a preview
        self.assertEqual([t.encode("utf-8", "surrogateescape") for t in got],
                         [t if isinstance(t, bytes) else t.encode() for t in toks])
        fl = v["fl"]["value"]
        for a, b in zip(fl, floats):
            self.assertEqual(struct.pack("<f", a), struct.pack("<f", b), (a, b))
        self.assertEqual(v["u64s"]["value"], [0, 2 ** 64 - 1, 2 ** 53 + 1])
        self.assertEqual(v["nest"]["value"], [[1, 2], []])
        self.assertEqual(v["toks"]["type"], "array[string]")
        t = j["tensors"][0]
        rd = gg.read_gguf(path)
        self.assertEqual((t["name"], t["dtype"], t["shape"], t["offset"], t["nbytes"]),
                         ("t", "F32", [2, 3], rd["tensors"][0]["abs_offset"], 24))
        self.assertEqual(j["parameters"], 6)
        self.assertEqual(j["tensor_bytes"], 24)

    def test_json_is_index_json_plus_values(self):
        """Without the values and the two totals, --json is the mount's index.json."""
        r = info(TINY, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        rd = gg.read_gguf(TINY)
        self.assertEqual(j["parameters"], sum(prod(t["ne"]) for t in rd["tensors"]))
        self.assertEqual(j["tensor_bytes"], sum(t["nbytes"] for t in rd["tensors"]))
        for k, (name, vt, val) in zip(j["keys"], rd["kv"]):
            self.assertEqual(k["name"], name.decode())
            if vt == gg.STRING:
                self.assertEqual(k["value"], val.decode())
            elif vt == gg.ARRAY and val[0] == gg.FLOAT32:
                # float32 elements as the shortest text that reads back to the same float32
                self.assertEqual([struct.pack("<f", x) for x in k["value"]],
                                 [struct.pack("<f", x) for x in val[1]])
            elif vt == gg.ARRAY:
                self.assertEqual(k["value"], [x.decode() if isinstance(x, bytes) else x for x in val[1]])
            elif vt == gg.FLOAT32:
                self.assertEqual(struct.pack("<f", k["value"]), struct.pack("<f", val))
            else:
                self.assertEqual(k["value"], val)
            del k["value"]
        del j["parameters"], j["tensor_bytes"]
        with Mount(self, TINY) as m:
            with open(m.p("index.json")) as f:
                self.assertEqual(json.load(f), j)


# ==== tensorfs info --markdown ====

def md_cells(line):
    """The cells of a Markdown table row (a '|' escaped as '\\|' stays in its cell)."""
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


class InfoMarkdown(TestCase):
    def test_tables(self):
        d = self.tmpdir()
        path = gguf_with(os.path.join(d, "m.gguf"), [
            ("general.name", gg.STRING, "a | b"), ("n", gg.UINT32, 7)],
            [("x", "F32", np.zeros((1, 8), np.float32))])
        r = info(path, "--markdown")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "# " + path)
        keys = lines.index("## Keys (2)")
        self.assertEqual(md_cells(lines[keys + 2]), ["key", "type", "value"])
        self.assertEqual(md_cells(lines[keys + 3]), ["---"] * 3)
        self.assertEqual(md_cells(lines[keys + 4]), ["general.name", "string", "a \\| b"])
        self.assertEqual(md_cells(lines[keys + 5]), ["n", "uint32", "7"])
        ts = lines.index("## Tensors (1)")
        self.assertEqual(md_cells(lines[ts + 2]), ["tensor", "dtype", "shape", "bytes"])
        self.assertEqual(md_cells(lines[ts + 3]), ["---", "---", "---", "---:"])
        self.assertEqual(md_cells(lines[ts + 4]), ["x", "F32", "[1, 8]", "32"])
        head = {md_cells(l)[0]: md_cells(l)[1] for l in lines[2:lines.index("## Keys (2)")] if l.startswith("| ")}
        self.assertEqual(head["contents"], "2 keys, 1 tensor")
        self.assertEqual(head["format"], "gguf")

    def test_known_model(self):
        r = info(TINY, "--markdown")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [l for l in r.stdout.splitlines() if l.startswith("| ")]
        self.assertEqual(len([l for l in rows if len(md_cells(l)) == 3]), 25)   # header + 24 keys
        self.assertEqual(len([l for l in rows if len(md_cells(l)) == 4]), 22)   # header + 21


# ==== GGUF shapes and offsets through real mounts and repacks ====

def hf_gguf(tc, path):
    """The file read by @huggingface/gguf: {tensors: [{name, shape}], tensorDataOffset},
    or None when npm/node or the package are not available here."""
    if not shutil.which("npm") or not shutil.which("node"):
        return None
    cache = os.environ.get("TFS_NPM_CACHE") or os.path.join(tempfile.gettempdir(), "tfs-npm-gguf")
    if not os.path.isdir(os.path.join(cache, "node_modules", "@huggingface", "gguf")):
        try:
            r = run(["npm", "install", "--no-audit", "--no-fund", "--prefix", cache,
                     "@huggingface/gguf"], timeout=180)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
    script = os.path.join(cache, "shapes.mjs")
    with open(script, "w") as f:
        f.write('import { gguf } from "@huggingface/gguf";\n'
                'const r = await gguf(process.argv[2], { allowLocalFile: true });\n'
                'console.log(JSON.stringify({ tensors: r.tensorInfos.map((t) => ({ name: t.name,'
                ' shape: t.shape.map(String), dtype: t.dtype })),'
                ' tensorDataOffset: String(r.tensorDataOffset) }));\n')
    r = run(["node", script, os.path.abspath(path)], cwd=cache, timeout=60)
    tc.assertEqual(r.returncode, 0, r.stderr)
    return json.loads(r.stdout)


class Shapes(TestCase):
    def test_trailing_one_survives_repack(self):
        """A tensor stored with n_dims 2, ne [8, 1] (numpy (1, 8)) shows shape 1,8 and comes
        back from a repack exactly as it was: same n_dims, ne, type and bytes."""
        d = self.tmpdir()
        src = os.path.join(d, "m.gguf")
        row = np.arange(8, dtype=np.float32)
        gguf_with(src, [("general.name", gg.STRING, "before")], [
            ("row", "F32", row, [8, 1]),
            ("col4", "F16", np.ones(8, np.float16), [8, 1, 1, 1]),
            ("flat", "F32", row, [8]),
            ("q", "Q8_0", gg.quantize_q8_0(np.linspace(-1, 1, 64)), [32, 1, 2]),
        ])
        before = gg.read_gguf(src)
        with open(src, "rb") as f:
            raw = f.read()
        with Mount(self, src, ["rw"]) as m:
            p = m.p("tensors", "row")
            self.assertEqual(os.getxattr(p, "user.tensorfs.shape"), b"1,8")
            self.assertEqual(os.getxattr(m.p("npy", "row.npy"), "user.tensorfs.shape"), b"1,8")
            self.assertEqual(np.load(m.p("npy", "row.npy")).shape, (1, 8))
            self.assertEqual(np.load(m.p("npy", "col4.npy")).shape, (1, 1, 1, 8))
            self.assertEqual(os.getxattr(m.p("tensors", "q"), "user.tensorfs.shape"), b"2,1,32")
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("after")
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
        after = gg.read_gguf(src)
        self.assertEqual([kv[2] for kv in after["kv"]], [b"after"])
        with open(src, "rb") as f:
            new = f.read()
        self.assertEqual(len(after["tensors"]), 4)
        for a, b in zip(before["tensors"], after["tensors"]):
            self.assertEqual((b["name"], b["ne"], b["dtype"], b["nbytes"]),
                             (a["name"], a["ne"], a["dtype"], a["nbytes"]), a["name"])
            self.assertEqual(new[b["abs_offset"]:b["abs_offset"] + b["nbytes"]],
                             raw[a["abs_offset"]:a["abs_offset"] + a["nbytes"]], a["name"])
        # an independent reader agrees
        hf = hf_gguf(self, src)
        if hf is not None:
            self.assertEqual([(t["name"], [int(x) for x in t["shape"]]) for t in hf["tensors"]],
                             [(t["name"].decode(), t["ne"]) for t in before["tensors"]])
        with Mount(self, src) as m:
            self.assertEqual(os.getxattr(m.p("tensors", "row"), "user.tensorfs.shape"), b"1,8")
            self.assertEqual(np.load(m.p("npy", "row.npy")).shape, (1, 8))
        j = json.loads(info(src, "--json").stdout)
        self.assertEqual({t["name"]: t["shape"] for t in j["tensors"]},
                         {"row": [1, 8], "col4": [1, 1, 1, 8], "flat": [8], "q": [2, 1, 32]})

    def test_tensorless_data_offset_and_repack(self):
        """A GGUF without tensors that ends right after its keys (as llama.cpp's vocab files
        do): index.json's data_offset is the aligned end of the header, and the file repacks."""
        d = self.tmpdir()
        src = os.path.join(d, "vocab.gguf")
        w = gg.GGUFWriter()
        w.add_kv("general.name", gg.STRING, "v")
        w.add_kv("tokenizer.ggml.tokens", gg.ARRAY, (gg.STRING, ["a", "bb", "ccc"]))
        head = w.layout()
        end = len(head.rstrip(b"\0"))   # the unpadded header
        with open(src, "wb") as f:
            f.write(head[:end])
        self.assertNotEqual(end % 32, 0)
        aligned = gg.pad(end, 32)
        self.assertEqual(gg.read_gguf(src)["data_offset"], aligned)
        hf = hf_gguf(self, src)
        if hf is not None:
            self.assertEqual(int(hf["tensorDataOffset"]), aligned)
        with Mount(self, src, ["rw"]) as m:
            with open(m.p("index.json")) as f:
                self.assertEqual(json.load(f)["data_offset"], aligned)
            with open(m.p("metadata", "general.name"), "w") as f:
                f.write("repacked")
            r = m.unmount()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("done:", r.stderr)
        rd = gg.read_gguf(src)
        self.assertEqual(rd["kv"][0][2], b"repacked")
        self.assertEqual(os.path.getsize(src) % 32, 0)
        self.assertEqual(json.loads(info(src, "--json").stdout)["data_offset"], rd["data_offset"])


# ==== man pages ====

class Man(TestCase):
    def render(self, page):
        env = dict(os.environ, MANWIDTH="100", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
        r = run(["groff", "-man", "-ww", "-z", page])
        self.assertEqual((r.returncode, r.stderr), (0, ""), page)
        if shutil.which("man"):
            r = run(["man", "--warnings", "-l", page], env=env)
            self.assertEqual((r.returncode, r.stderr), (0, ""), page)
        r = run(["groff", "-man", "-Tutf8", "-P", "-cbou", page])
        self.assertEqual(r.returncode, 0, r.stderr)
        return re.sub(r"\s+", " ", r.stdout.replace("\u2010\n", "").replace("\u2010", "-"))

    def test_tensorfs_1(self):
        text = self.render(MAN1)
        for word in ("tensorfs mount", "tensorfs unmount", "tensorfs info", "tensorfs repack",
                     "tensorfs convert", "THE QUANTIZED VIEW", "--quantize=",
                     "--json", "--markdown", "--no-tensors", "--version", "-V,", "--help",
                     "EXIT STATUS", "OLLAMA_MODELS", "XDG_RUNTIME_DIR", ".tensorfs-staging",
                     "journal.json", "tensorfs/PID.status", "mount.tensorfs(8)",
                     "model.gguf", "user.tensorfs.last_error", "unmount [-l]"):
            self.assertIn(word, text, word)
        with open(MAN1) as f:
            th = re.search(r'^\.TH .*"tensorfs ([^"]+)"', f.read(), re.M).group(1)
        self.assertEqual(th, project_version())

    def test_every_architecture_documented(self):
        """The GGUF view's architectures (`tensorfs __hf_classes`: its table) are the ones
        tensorfs(1) lists (and docs/hf-view.md's table names each); a repo of an unknown one
        is refused by name, told how many there are and where they are listed (the list
        itself outgrew an error message, TFS_ERRMSG_MAX)."""
        r = run([TENSORFS, "__hf_classes"])
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = r.stdout.split()
        code = set(listed)
        self.assertEqual(len(code), len(listed), listed)
        self.assertGreaterEqual(len(code), 20, code)
        d = self.tmpdir()
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["NoSuchForCausalLM"], "model_type": "nosuch"}, f)
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(stgen.st_raw([("w", "F32", [2], b"\0" * 8)]))
        r = info(d, "--gguf")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("config.json: architecture NoSuchForCausalLM is not supported for the "
                      "GGUF view (%d model classes are: tensorfs(1) and docs/hf-view.md list "
                      "them)" % len(code), r.stderr)
        self.assertLess(len(r.stderr), 512, r.stderr)
        man = self.render(MAN1)
        part = man[man.index("Architectures:"):man.index("Tokenizers:")]
        self.assertEqual(set(re.findall(
            r"\b[A-Za-z0-9_]+(?:For(?:CausalLM|ConditionalGeneration)|Model)\b", part)), code)
        with open(os.path.join(ROOT, "docs", "hf-view.md")) as f:
            docs = f.read()
        for name in code:
            self.assertIn("`%s`" % name, docs, name)

    def test_every_option_documented(self):
        """Every -o option of the option table (fs/cli/optable.c, `tensorfs __options CMD`)
        is in its command's usage (`tensorfs help CMD`), in the man page (mount.tensorfs(8)
        for mount's, tensorfs(1) for convert's and repack's) and in docs/using.md's table."""
        man8, man1 = self.render(MAN8), self.render(MAN1)
        with open(os.path.join(ROOT, "docs", "using.md")) as f:
            docs = f.read()
        table = docs[docs.index("## Options"):]
        table = table[:table.index("\n\n", table.index("|---"))]
        in_docs = {n.split("=")[0] for cell in re.findall(r"^\| `([^|]+)\|", table, re.M)
                   for n in re.findall(r"`?([a-z0-9_]+=?)", cell)}
        for cmd, man in (("mount", man8), ("convert", man1), ("repack", man1)):
            names = options_of(cmd)
            self.assertGreaterEqual(len(names), 8 if cmd == "mount" else 5, names)
            usage = run([TENSORFS, "help", cmd]).stdout
            for n in names:
                self.assertRegex(usage, r"(?m)^  %s\b" % re.escape(n), (cmd, n))
                self.assertIn(n, man, "%s's option %s is not in its man page" % (cmd, n))
                self.assertIn(n.rstrip("="), in_docs, "%s is not in docs/using.md" % n)
        for o in ("nonempty", "fuse.tensorfs", "mount.fuse.tensorfs", "OLLAMA_MODELS"):
            self.assertIn(o, man8)

    def test_meson_install(self):
        """meson install puts the man pages and the completion (with its aliases) in place."""
        build = os.path.dirname(os.path.dirname(os.path.realpath(TENSORFS)))
        if not os.path.exists(os.path.join(build, "meson-private")):
            self.skipTest("not a meson build directory: " + build)
        dest = self.tmpdir()
        r = run(["meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest],
                timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        files = {}
        for top, _, names in os.walk(dest):
            for n in names:
                files[n] = os.path.join(top, n)
        self.assertTrue(files["tensorfs.1"].endswith("/man/man1/tensorfs.1"))
        self.assertTrue(files["mount.tensorfs.8"].endswith("/man/man8/mount.tensorfs.8"))
        comp = files["tensorfs"] if "bash-completion" in files.get("tensorfs", "") else \
            [os.path.join(t, n) for t, _, ns in os.walk(dest) for n in ns
             if n == "tensorfs" and "bash-completion/completions" in t][0]
        with open(comp) as a, open(COMPLETION) as b:
            self.assertEqual(a.read(), b.read())
        cdir = os.path.dirname(comp)
        for alias in ("mount.tensorfs", "mount.fuse.tensorfs"):
            self.assertEqual(os.readlink(os.path.join(cdir, alias)), "tensorfs")
        self.assertEqual(os.readlink(os.path.join(os.path.dirname(files["mount.tensorfs.8"]),
                                                  "mount.fuse.tensorfs.8")), "mount.tensorfs.8")


# ==== bash completion ====

class Completion(TestCase):
    def setUp(self):
        self.dir = self.tmpdir()
        os.mkdir(os.path.join(self.dir, "mnt"))
        os.mkdir(os.path.join(self.dir, "models"))
        for n in ("model.gguf", "model.safetensors", "notes.txt"):
            open(os.path.join(self.dir, n), "w").close()

    def complete(self, line):
        """The candidates bash gets from the completion function for the line typed so far
        (cursor at its end), sourced into a real bash."""
        script = r'''
source "$1" || exit 3
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_WORDBREAKS=$' \t\n"'"'"'><=;|&(:'
complete -p "${COMP_WORDS[0]}" >/dev/null || exit 4
fn=$(complete -p "${COMP_WORDS[0]}" | sed -E 's/.*-F ([^ ]+).*/\1/')
"$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''
        r = run(["bash", "--norc", "-c", script, "bash", COMPLETION, line], cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return sorted(l for l in r.stdout.split("\n") if l)

    def test_subcommands_and_options(self):
        self.assertEqual(self.complete("tensorfs "),
                         sorted(["mount", "unmount", "info", "repack", "convert", "help", "--version",
                                 "--help"]))
        self.assertEqual(self.complete("tensorfs in"), ["info"])
        self.assertEqual(self.complete("tensorfs info --"),
                         ["--gguf", "--help", "--imatrix=", "--json", "--markdown", "--no-tensors",
                          "--outtype=", "--quantize="])
        self.assertEqual(self.complete("tensorfs info --quantize=IQ4"), ["IQ4_NL", "IQ4_XS"])
        self.assertEqual(self.complete("tensorfs mount -"), sorted(["-f", "-d", "-s", "-o", "-h", "--help"]))
        self.assertEqual(self.complete("tensorfs help re"), ["repack"])
        self.assertEqual(self.complete("tensorfs repack m -o "), sorted(options_of("repack")))
        self.assertIn("output=", options_of("repack"))
        self.assertEqual(self.complete("tensorfs convert model.gguf out.gguf -o "),
                         sorted(options_of("convert")))
        self.assertIn("quantize_threads=", options_of("convert"))
        self.assertEqual(self.complete("tensorfs convert model.gguf mo"),
                         ["model.gguf", "model.safetensors", "models/"])

    def test_mount_option_names(self):
        every = sorted(options_of("mount"))
        for o in ("ro", "rw", "staging=", "quantize=", "quantize_threads=", "cache_size="):
            self.assertIn(o, every)
        self.assertEqual(self.complete("tensorfs mount -o "), every)
        self.assertEqual(self.complete("mount.tensorfs -o "), every)
        self.assertEqual(self.complete("mount.fuse.tensorfs x y -o "), every)
        self.assertEqual(self.complete("tensorfs mount -o r"), ["readahead_kb=", "ro", "rw"])
        # the last item of a comma-separated list
        self.assertEqual(self.complete("tensorfs mount -o ro,st"), ["ro,staging="])
        # a value after '=': readline replaces the text after the '=' only
        self.assertEqual(self.complete("tensorfs mount -o rw,staging=m"), ["mnt", "models"])
        self.assertEqual(self.complete("tensorfs mount -o output=model.s"), ["model.safetensors"])
        self.assertEqual(self.complete("tensorfs mount -o rw,imatrix=model.g"), ["model.gguf"])
        self.assertEqual(self.complete("tensorfs mount -o ro,quantize=q"), [])
        self.assertEqual(self.complete("tensorfs mount -o ro,quantize=Q4_K"), ["Q4_K_M", "Q4_K_S"])

    def test_files_and_directories(self):
        # SOURCE: files (directories with their slash, to go on); MOUNTPOINT: directories
        self.assertEqual(self.complete("tensorfs info mo"), ["model.gguf", "model.safetensors", "models/"])
        self.assertEqual(self.complete("tensorfs mount mod"), ["model.gguf", "model.safetensors", "models/"])
        self.assertEqual(self.complete("tensorfs mount model.gguf m"), ["mnt", "models"])
        self.assertEqual(self.complete("mount.tensorfs -o ro model.gguf m"), ["mnt", "models"])
        self.assertEqual(self.complete("tensorfs unmount m"), ["mnt", "models"])
        self.assertEqual(self.complete("tensorfs mount model.gguf mnt "), [])


if __name__ == "__main__":
    main()
