"""What the Hugging Face mount tests (test_hf.py, test_hf_moe.py) share: a work folder of
tiny random repos, made by one of tests/hf's generators (make_model.py, make_moe.py), and the
reference converter's files of them (tests/hf/reference.py).

    repos = hfutil.Repos(WORK, make_model)
    repos.model("llama-bf16")                 # WORK/models/llama-bf16, made once
    repos.converted(tc, "llama-bf16", "f16")  # WORK/ref/llama-bf16.f16.gguf (tc SKIPs
                                              # without the converter, fails if it fails)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
import compare  # noqa: E402  (tests/hf: the converter's runs, GGUF reading)
import reference  # noqa: E402
from harness import SANITIZED  # noqa: E402

_decoded = [0]   # llama.cpp runs on a mount in this process so far (see same_tokens)


class Repos:
    def __init__(self, work, maker):
        """work: the folder (models/, ref/); maker: a module with make(folder, variant)."""
        self.work, self.maker = work, maker
        self.why = reference.missing_reason()   # None, or why the converter cannot run

    def model(self, name):
        """The repo directory of the generator's variant (made once; copied from
        compare.cached_repo(), which a module or chain before may have made); V+omit: V's
        files with config.json's class-defaulted keys left out (compare.make_omit_variant), as
        the --omit-defaults runs of tests/hf make it."""
        d = os.path.join(self.work, "models", name)
        if name.endswith(compare.OMIT):
            v = name[:-len(compare.OMIT)]
            self.model(v)
            compare.make_omit_variant(os.path.join(self.work, "models"), v)
            return d
        if not os.path.exists(os.path.join(d, "config.json")):
            src = compare.cached_repo(self.maker, name)
            if src is None:
                self.maker.make(os.path.join(self.work, "models"), name)
            else:
                compare.copy_tree(src, d)
        return d

    def converted(self, tc, name, outtype):
        """The converter's file for the variant and outtype (kept in WORK/ref, made again
        when the model is newer)."""
        if self.why:
            tc.skipTest(self.why)
        out = os.path.join(self.work, "ref", "%s.%s.gguf" % (name, outtype))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        err = compare.run_converter(self.model(name), outtype, out)
        if err and err.startswith("SKIP "):
            tc.skipTest(err[5:])
        if err:
            tc.fail("%s %s: %s" % (name, outtype, err))
        return out


def same_tokens(tc, name, ref, mounted, decode):
    """llama.cpp decodes the mount's model.gguf (mounted, a path) as the converter's file
    (ref): decode(path) is generate.py's JSON of a file.  The mount's file is decoded first,
    through the mount (llama.cpp's mmap reads go to the daemon); then its bytes are read:
    when they are the converter's, the converter's file decodes to the same tokens (the same
    bytes, greedy decoding), and only when they differ is it decoded too and the tokens
    compared (a run of libllama less per case: about 1 s of CPU with a 150K-token vocab).

    Under the sanitizers (harness.SANITIZED) llama.cpp decodes the first case of a module
    only: the others read the mount's file whole, which runs the same daemon code (each
    class's own transforms) as llama.cpp's mmap did, and stop there when its bytes are the
    converter's (the tokens are the normal run's to compare; mount_hf spent 47 s of CPU in
    the sanitizer chain, most of it libllama loading 128K-token vocabularies)."""
    if SANITIZED and _decoded[0] >= 1:
        with open(mounted, "rb") as f:
            ours = f.read()
        with open(ref, "rb") as f:
            if f.read() == ours:
                return True
    _decoded[0] += 1
    got = decode(mounted)
    tc.assertEqual(len(got["tokens"]), 12, name)
    with open(mounted, "rb") as f:
        ours = f.read()
    with open(ref, "rb") as f:
        same = f.read() == ours
    if not same:
        want = decode(ref)
        tc.assertEqual(got["tokens"], want["tokens"], name)
        tc.assertEqual(got["prompt_tokens"], want["prompt_tokens"], name)
    return same
