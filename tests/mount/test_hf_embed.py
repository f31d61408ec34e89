#!/usr/bin/env python3
"""Embedding models through a mount (issue 36): tests/hf/make_embed.py's tiny encoders (BERT:
bge-small style with CLS pooling, all-MiniLM style with mean pooling, no pooling;
XLM-RoBERTa: BGE-M3 style with CLS pooling, multilingual-e5 style with mean pooling;
EmbeddingGemma: Gemma3TextModel with mean pooling; nomic-bert: NomicBertModel with mean
pooling, and its MoE variant nomic-bert-moe (nomic-embed-text-v2-moe style: XLM-R's Unigram
tokenizer.json alone); ModernBERT: ModernBertModel with mean pooling), their
model.gguf against llama.cpp's converter (tests/hf/reference.py):

- model.gguf is cmp-equal to the converter's file;
- llama.cpp (libllama of npm @node-llama-cpp/linux-x64, tests/llama/embed.py) embeds a few
  texts from the mount's model.gguf exactly as from the converter's file: the same tokens
  (bge's real WordPiece ids, nomic's too: [CLS] ... [SEP]; ModernBERT's GPT-NeoX BPE ids:
  [CLS] ... [SEP]; XLM-R's unigram pieces, nomic-bert-moe's too: <s> ... </s>) and the
  same vectors, pooled as the file's pooling_type says (CLS, mean) or per token (none);
- bad input: a pooling mode the converter does not support, a tokenizer.json that is not
  WordPiece, nomic's n_positions the converter does not know, nomic-bert-moe's swiglu or
  sentencepiece.bpe.model: the mount works without model.gguf and says why, naming the file.

Without the converter's packages or llama.cpp's library the tests that need them SKIP.
"""
import json
import math
import os
import sys
import tempfile

from harness import SANITIZED, TENSORFS, Mount, TestCase, main, quick, run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
sys.path.insert(0, os.path.join(HERE, "..", "llama"))
import compare  # noqa: E402
import hfutil  # noqa: E402
import llamacpp  # noqa: E402
import make_embed  # noqa: E402

WORK = os.environ.get("TFS_HF_EMBED_WORK") or os.path.join(tempfile.gettempdir(),
                                                           "tfs-hf-embed-mount")
# (variant, outtype, llama.cpp's pooling type: 0 none, 1 mean, 2 cls)
CASES = [("bert-f32", "auto", 2), ("bert-f32", "q8_0", 2), ("bert-f16", "auto", 1),
         ("bert-bf16", "bf16", 0), ("xlmr-f32", "auto", 2), ("xlmr-f16", "q8_0", 1),
         ("egemma-f32", "auto", 1), ("nomic-f32", "q8_0", 1), ("nomic-moe-f32", "auto", 1),
         ("modernbert-f32", "auto", 1)]
# the ids encode puts around a text: BERT's [CLS] [SEP], XLM-R's <s> </s>; EmbeddingGemma's
# <bos> (config.json's bos_token_id 2) and no end
ENDS = {"bert": (101, 102), "xlmr": (0, 2), "egemma": (2, None), "nomic": (101, 102),
        "nomic-moe": (0, 2), "modernbert": (50281, 50282)}
TEXTS = ["Hello, world!", "The tiny model embeds this sentence.",
         "naïve café: 3.14 tokens; ĀĒĪ 中文"]

REPOS = hfutil.Repos(WORK, make_embed)
model = REPOS.model
converted = REPOS.converted


def read(path):
    with open(path, "rb") as f:
        return f.read()


def embed(tc, path):
    r = run(["/usr/bin/python3", os.path.join(HERE, "..", "llama", "embed.py"), path] + TEXTS,
            timeout=120)
    if r.returncode:
        tc.fail("embed.py failed (%d): %s" % (r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


class Equal(TestCase):
    @quick
    def test_model_gguf_equals_the_converter(self):
        for name, t, _ in CASES:
            ref = read(converted(self, name, t))
            with Mount(self, model(name), ["outtype=" + t]) as m:
                ours = read(m.p("model.gguf"))
                self.assertTrue(ours == ref, "%s %s: %s" % (name, t,
                                compare.first_difference(ref, ours)))


class Embeddings(TestCase):
    def setUp(self):
        if llamacpp.lib_dir() is None:
            self.skipTest(llamacpp.missing_reason())

    def test_same_embeddings_as_from_the_converter(self):
        # (under the sanitizers, harness.SANITIZED, the first case: llama.cpp's mmap reads
        # through the daemon; the others' bytes are Equal's to compare there, their
        # embeddings the normal run's: llama.cpp's 18 runs, not the daemon's code)
        for name, t, pooling in CASES if not SANITIZED else CASES[:1]:
            want = embed(self, converted(self, name, t))
            with Mount(self, model(name), ["outtype=" + t]) as m:
                got = embed(self, m.p("model.gguf"))
            self.assertEqual(want["pooling"], pooling, name)
            self.assertEqual(got["pooling"], pooling, name)
            for w, g in zip(want["texts"], got["texts"]):
                self.assertEqual(g["tokens"], w["tokens"], (name, g["text"]))
                first, last = ENDS[name.rsplit("-", 1)[0]]
                self.assertEqual(g["tokens"][0], first, (name, g["text"]))
                if last is not None:
                    self.assertEqual(g["tokens"][-1], last, (name, g["text"]))
                self.assertEqual(g["embedding"], w["embedding"], (name, t, g["text"]))
                flat = g["embedding"] if pooling else [x for row in g["embedding"] for x in row]
                self.assertEqual(len(flat) % want["n_embd"], 0)
                self.assertTrue(all(math.isfinite(x) for x in flat), name)
                self.assertGreater(max(flat) - min(flat), 1e-3, "a vector, not a constant")
            self.assertNotEqual(got["texts"][0]["embedding"], got["texts"][1]["embedding"])


class BadInput(TestCase):
    def variant_copy(self, change, name="bert-f16"):
        """A copy of variant name (hard links) with change(dir) applied."""
        src = model(name)
        d = os.path.join(self.tmpdir(), "bert")
        os.makedirs(os.path.join(d, "1_Pooling"))
        for root, _, files in os.walk(src):
            for f in files:
                p = os.path.join(root, f)
                os.link(p, os.path.join(d, os.path.relpath(p, src)))
        change(d)
        return d

    def refused(self, d, *want):
        r = run([TENSORFS, "info", "--gguf", d])
        self.assertNotEqual(r.returncode, 0, r.stdout[-500:])
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for w in want:
            self.assertIn(w, r.stderr)
        with Mount(self, d, allow_stderr=True) as m:
            self.assertNotIn("model.gguf", os.listdir(m.path))
            why = json.loads(read(m.p("index.json")))["gguf_view"]["unavailable"]
            self.assertIn(want[-1], why)

    def test_a_pooling_mode_the_converter_lacks(self):
        def change(d):
            p = os.path.join(d, "1_Pooling", "config.json")
            os.unlink(p)
            with open(p, "w") as f:
                json.dump({"pooling_mode_max_tokens": True}, f)
        self.refused(self.variant_copy(change), "1_Pooling/config.json",
                     "a pooling mode other than mean, cls and lasttoken")

    def test_a_tokenizer_that_is_not_wordpiece(self):
        def change(d):
            p = os.path.join(d, "tokenizer.json")
            tj = json.loads(read(p))
            os.unlink(p)
            tj["model"]["type"] = "WordLevel"
            with open(p, "w") as f:
                f.write(json.dumps(tj))
        self.refused(self.variant_copy(change), "tokenizer.json",
                     "BERT's conversion reads a WordPiece vocabulary")

    def test_embeddinggemma_without_sliding_window(self):
        """EmbeddingGemma's converter reads config.json's own sliding_window (transformers
        halves it): refused without one, as the converter does."""
        def change(d):
            p = os.path.join(d, "config.json")
            c = json.loads(read(p))
            os.unlink(p)
            del c["sliding_window"]
            with open(p, "w") as f:
                json.dump(c, f)
        self.refused(self.variant_copy(change, "egemma-f32"), "config.json",
                     "sliding_window not found in model config")

    def test_nomic_positions_the_converter_does_not_know(self):
        """NomicBertModel: n_positions 8192 / max_trained_positions 2048 (v1, v1.5) is the
        only dense pair the converter knows; another is refused as it refuses it."""
        def change(d):
            p = os.path.join(d, "config.json")
            c = json.loads(read(p))
            os.unlink(p)
            c["n_positions"] = 4096
            with open(p, "w") as f:
                json.dump(c, f)
        self.refused(self.variant_copy(change, "nomic-f32"), "config.json",
                     "unrecognized parameters: n_positions=4096")

    def test_nomic_moe_what_it_refuses(self):
        """nomic-bert-moe: the dense model's swiglu is refused as the converter's assert
        refuses it; a sentencepiece.bpe.model beside tokenizer.json, which the converter
        would read instead (then setting token 250001 to <mask>), by tensorfs."""
        def swiglu(d):
            p = os.path.join(d, "config.json")
            c = json.loads(read(p))
            os.unlink(p)
            c["activation_function"] = "swiglu"
            with open(p, "w") as f:
                json.dump(c, f)
        self.refused(self.variant_copy(swiglu, "nomic-moe-f32"), "config.json",
                     "activation_function: the converter supports nomic-bert-moe with "
                     "\"gelu\" only")

        def spm(d):
            with open(os.path.join(d, "sentencepiece.bpe.model"), "wb") as f:
                f.write(b"\n")
        self.refused(self.variant_copy(spm, "nomic-moe-f32"), "sentencepiece.bpe.model",
                     "nomic-bert-moe's vocabulary from it")

    def test_xlmr_without_its_sentencepiece_model(self):
        """tokenizer.json alone: the converter reads it with transformers' tokenizer, which
        tensorfs does not reproduce: refused naming the file it lacks."""
        def change(d):
            os.unlink(os.path.join(d, "sentencepiece.bpe.model"))
        self.refused(self.variant_copy(change, "xlmr-f16"), "sentencepiece.bpe.model: no such file")


if __name__ == "__main__":
    main(work=WORK)
