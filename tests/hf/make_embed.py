#!/usr/bin/python3
"""Tiny random embedding models (BERT-family encoders: BERT, XLM-RoBERTa, nomic-bert,
ModernBERT; EmbeddingGemma) for the GGUF view's
tests: each variant
is a directory with the tensor names and config.json keys of its class's real repos, which
the reference converter (reference.py) can convert.

    make_embed.py OUTDIR [VARIANT...]     # default: every variant; --list names them

The vocabulary: the converter names a WordPiece tokenizer's pre-tokenizer by the hash of the
ids its check text encodes to, and refuses one it does not know, so a BERT test model needs
a real vocabulary.  It is rebuilt here, at test time, from the reference clone's own
models/ggml-vocab-bert-bge.gguf (BAAI/bge-small-en-v1.5's 30522 WordPiece tokens as the
converter wrote them: "##x" as "x", a word start "x" as U+2581 "x", control tokens as they are)
into the tokenizer.json bge-small ships (BertNormalizer lowercasing, BertPreTokenizer,
[CLS] $A [SEP]); its check hash is then bge's ("bert-bge").  Nothing of it is kept in the
repository.  XLM-RoBERTa's vocabulary is a SentencePiece unigram model trained once at test
time (python3-sentencepiece), laid out as XLM-R's sentencepiece.bpe.model; nomic-bert-moe's
(nomic-embed-text-v2-moe ships tokenizer.json alone) is that model's tokenizer.json with its
Precompiled normalizer, without the model file.  Weights are deterministic (seeded by the
variant's name).
"""
import json
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_model  # noqa: E402
import reference  # noqa: E402

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# name: class, weights' dtype, sizes, extras
VARIANTS = {
    # bge-small-en-v1.5 style: F32 weights, CLS pooling (sentence-transformers modules.json),
    # id2label with one label (the converter writes it as classifier.output_labels)
    "bert-f32": dict(arch="BertModel", dtype="F32", hidden=32, heads=2, layers=2, ff=64,
                     ctx=64, pooling="cls", id2label={"0": "LABEL_0"},
                     name_or_path="BAAI/bge-small-en-v1.5"),
    # all-MiniLM-L6-v2 style: F16 weights (BF16 for the +omit run's auto), mean pooling,
    # the position_ids buffer (int64, dropped) and the pooler (dropped)
    "bert-f16": dict(arch="BertModel", dtype="F16", hidden=32, heads=4, layers=1, ff=96,
                     ctx=128, pooling="mean", position_ids=True,
                     name_or_path="sentence-transformers/all-MiniLM-L6-v2"),
    # no modules.json (no pooling key), BF16, checkpoint names with the "bert." prefix
    "bert-bf16": dict(arch="BertModel", dtype="BF16", hidden=64, heads=2, layers=2, ff=64,
                      ctx=32, prefix="bert."),
    # BGE-M3 style: XLM-RoBERTa, F32, CLS pooling, one token type, positions after
    # pad_token_id (max_position_embeddings 66: 64 after the cut)
    "xlmr-f32": dict(arch="XLMRobertaModel", dtype="F32", hidden=32, heads=2, layers=2, ff=64,
                     ctx=66, pooling="cls", types=1, name_or_path="BAAI/bge-m3"),
    # multilingual-e5 style: F16, mean pooling, checkpoint names with "roberta."
    "xlmr-f16": dict(arch="XLMRobertaModel", dtype="F16", hidden=64, heads=4, layers=1, ff=64,
                     ctx=34, pooling="mean", types=1, prefix="roberta.",
                     name_or_path="intfloat/multilingual-e5-base"),
    # EmbeddingGemma style (Gemma3TextModel, gemma-embedding): F32, the base model's names
    # (no "model."), bidirectional, mean pooling, the Gemma 3 test model's SentencePiece
    # tokenizer.model (make_model.py), a tiny window
    "egemma-f32": dict(arch="Gemma3TextModel", dtype="F32", hidden=32, heads=2, kv_heads=1,
                       head_dim=16, layers=6, ff=64, ctx=64, sliding_window=16,
                       pooling="mean", name_or_path="google/embeddinggemma-300m"),
    # nomic-embed-text-v1.5 style (NomicBertModel, nomic-bert: its own code, config.json
    # read as it is): F32, fused Wqkv, SwiGLU, rotary (no position embeddings), n_positions
    # 8192 written as 2048, vocab_size padded to a multiple of 64 (6 [PADi] tokens), mean
    # pooling
    "nomic-f32": dict(arch="NomicBertModel", dtype="F32", hidden=32, heads=2, layers=2, ff=64,
                      pooling="mean", name_or_path="nomic-ai/nomic-embed-text-v1.5"),
    # nomic-embed-text-v2-moe style (NomicBertModel with moe_every_n_layers: nomic-bert-moe):
    # F32, gelu with biases, layer 1 of 2 a mixture of 4 experts (top 2: router.layer, the
    # experts' w1/w2 stacked as [E x ff, hidden], their bias dropped), n_positions 2048
    # written as 512, XLM-R's Unigram tokenizer.json alone (read through transformers), vocab
    # padded to a multiple of 64 with [PADi], mean pooling
    "nomic-moe-f32": dict(arch="NomicBertModel", dtype="F32", hidden=32, heads=2, layers=2,
                          ff=64, experts=4, top_k=2, every=2, pooling="mean",
                          name_or_path="nomic-ai/nomic-embed-text-v2-moe"),
    # ModernBERT embedding style (ModernBertModel, modern-bert: nomic-ai/modernbert-embed-base,
    # gte-modernbert): F32, no "model." (the base model saved), fused Wqkv, the GLU pair Wi,
    # no attn_norm in layer 0, global attention every 3rd layer and a window of 8 tokens,
    # GPT-NeoX's BPE with ModernBERT's special tokens, mean pooling
    "modernbert-f32": dict(arch="ModernBertModel", dtype="F32", hidden=32, heads=2, layers=2,
                           ff=64, window=8, pooling="mean",
                           name_or_path="answerdotai/ModernBERT-base"),
}


def spec(name):
    return dict(VARIANTS[name])


# ==== tokenizer ====

def bge_vocab():
    """bge-small-en-v1.5's WordPiece vocabulary (id order) from the reference clone's
    models/ggml-vocab-bert-bge.gguf, the phantom-space form undone.  (Read with
    vocab_gguf_pre's struct reader: gguf-py's GGUFReader, a numpy memmap per field part,
    took 1.9 s of CPU for its 30522 tokens, 0.04 s this way.)"""
    import vocab_gguf_pre
    kv = vocab_gguf_pre.read_gguf(os.path.join(reference.llama_cpp_dir(), "models",
                                               "ggml-vocab-bert-bge.gguf"))
    out = []
    for t, ty in zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]):
        t.encode("utf-8")   # (UTF-8 or an error, as the strict decoding was)
        if ty == 3:   # CONTROL: written as it is
            out.append(t)
        elif t.startswith("\u2581"):
            out.append(t[1:])
        else:
            out.append("##" + t)
    return out


def write_bert_tokenizer(d, vocab, ctx):
    ids = {t: i for i, t in enumerate(vocab)}
    added = [{"id": ids[t], "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True} for t in BERT_SPECIALS]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "BertNormalizer", "clean_text": True,
                         "handle_chinese_chars": True, "strip_accents": None,
                         "lowercase": True},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {
              "type": "TemplateProcessing",
              "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
              "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                       {"Sequence": {"id": "B", "type_id": 1}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
              "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]}
                                 for t in ("[CLS]", "[SEP]")}},
          "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
          "model": {"type": "WordPiece", "unk_token": "[UNK]",
                    "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                    "vocab": ids}}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(tj, ensure_ascii=False))
    tc = {"clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "do_basic_tokenize": True,
          "do_lower_case": True, "mask_token": "[MASK]", "model_max_length": ctx,
          "never_split": None, "pad_token": "[PAD]", "sep_token": "[SEP]",
          "strip_accents": None, "tokenize_chinese_chars": True,
          "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
        json.dump({k: v for k, v in tc.items() if k.endswith("_token")}, f, indent=2)
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))


def write_pooling(d, mode):
    """sentence-transformers' modules.json and 1_Pooling/config.json (make_model.py's)."""
    make_model.write_st_pooling(d, mode)


# ==== XLM-RoBERTa: a SentencePiece unigram model (sentencepiece.bpe.model) ====

XLMR_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")


def train_unigram(outdir):
    """A SentencePiece unigram model as XLM-R's sentencepiece.bpe.model is laid out (<unk> 0,
    <s> 1, </s> 2, then the pieces), trained once (python3-sentencepiece) into
    OUTDIR/_xlmr_spm from make_model's word list, with the default NFKC normalization (a
    precompiled_charsmap, as XLM-R's has)."""
    d = os.path.join(outdir, "_xlmr_spm")
    path = os.path.join(d, "sentencepiece.bpe.model")
    if os.path.exists(path):
        return path
    rng = np.random.default_rng(4321)
    corpus = []
    for _ in range(2000):
        n = int(rng.integers(4, 14))
        words = make_model.WORDS
        corpus.append(" ".join(words[int(i)] for i in rng.integers(0, len(words), n)) +
                      " naïve café %d." % int(rng.integers(0, 1000)))
    make_model.spm_train(corpus, path, vocab_size=250, model_type="unigram")
    return path


def write_xlmr_tokenizer(d, spm_path, ctx):
    import shutil
    shutil.copy(spm_path, os.path.join(d, "sentencepiece.bpe.model"))
    tc = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
          "model_max_length": ctx, "pad_token": "<pad>", "sep_token": "</s>",
          "tokenizer_class": "XLMRobertaTokenizer", "unk_token": "<unk>"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
        json.dump({k: v for k, v in tc.items() if k.endswith("_token")}, f, indent=2)


def write_xlmr_tokenizer_json(d, spm_path, precompiled=False):
    """tokenizer.json as XLM-R repos ship it beside the SentencePiece model (the converter reads
    the model; gguf-py's SpecialVocab reads this file's added tokens and <s> $A </s>), without
    the Precompiled normalizer (nothing here reads it); precompiled: with it (the model's
    precompiled_charsmap, base64), as nomic-embed-text-v2-moe's, read without the model."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    vocab = [[t, 0.0] for t in XLMR_SPECIALS] + [[sp.IdToPiece(i), sp.GetScore(i)]
                                                  for i in range(3, sp.GetPieceSize())]
    vocab.append(["<mask>", 0.0])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": t == "<mask>",
              "rstrip": False, "normalized": False, "special": True}
             for i, t in list(enumerate(XLMR_SPECIALS)) + [(len(vocab) - 1, "<mask>")]]
    tmpl = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                            "prepend_scheme": "always", "split": True},
          "post_processor": tmpl,
          "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                      "split": True},
          "model": {"type": "Unigram", "unk_id": 3, "vocab": vocab, "byte_fallback": False}}
    if precompiled:
        import base64
        from sentencepiece import sentencepiece_model_pb2 as pb
        m = pb.ModelProto()
        with open(spm_path, "rb") as f:
            m.ParseFromString(f.read())
        tj["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(
            m.normalizer_spec.precompiled_charsmap).decode("ascii")}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(tj, ensure_ascii=False))
    return len(vocab)


# ==== weights and config ====

def bert_shapes(s, vocab):
    h, ff, p = s["hidden"], s["ff"], s.get("prefix", "")
    t = {p + "embeddings.word_embeddings.weight": (vocab, h),
         p + "embeddings.position_embeddings.weight": (s["ctx"], h),
         p + "embeddings.token_type_embeddings.weight": (s.get("types", 2), h),
         p + "embeddings.LayerNorm.weight": (h,), p + "embeddings.LayerNorm.bias": (h,)}
    for i in range(s["layers"]):
        b = "%sencoder.layer.%d." % (p, i)
        for m in ("query", "key", "value"):
            t[b + "attention.self.%s.weight" % m] = (h, h)
            t[b + "attention.self.%s.bias" % m] = (h,)
        for m, shp in (("attention.output.dense", (h, h)), ("intermediate.dense", (ff, h)),
                       ("output.dense", (h, ff))):
            t[b + m + ".weight"] = shp
            t[b + m + ".bias"] = (shp[0],)
        for m in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[b + m + ".weight"] = (h,)
            t[b + m + ".bias"] = (h,)
    t[p + "pooler.dense.weight"] = (h, h)
    t[p + "pooler.dense.bias"] = (h,)
    return t


# ==== ModernBERT: GPT-NeoX's BPE with OLMo's and ModernBERT's tokens ====

MODERNBERT_VOCAB = 50368


def write_modernbert_tokenizer(d):
    """ModernBERT's tokenizer.json (answerdotai/ModernBERT-base: GPT-NeoX-20B's BPE, OLMo's
    PII tokens, [UNK] [CLS] [SEP] [PAD] [MASK] and [unusedN] up to 50368 ids, [CLS] $A [SEP])
    rebuilt from the reference clone's models/ggml-vocab-gpt-neox.gguf (its tokens, types and
    merges); HF tokenizers hashes its check text as the converter's modern-bert."""
    import vocab_gguf_pre
    kv = vocab_gguf_pre.read_gguf(os.path.join(reference.llama_cpp_dir(), "models",
                                               "ggml-vocab-gpt-neox.gguf"))
    toks = list(kv["tokenizer.ggml.tokens"][:50277])
    types = list(kv["tokenizer.ggml.token_type"][:50277])
    toks[0], types[0] = "|||IP_ADDRESS|||", 4   # OLMo's: <|endoftext|> moved to 50279
    extra = [("|||EMAIL_ADDRESS|||", 4), ("|||PHONE_NUMBER|||", 4), ("<|endoftext|>", 3),
             ("[UNK]", 3), ("[CLS]", 3), ("[SEP]", 3), ("[PAD]", 3), ("[MASK]", 3)]
    extra += [("[unused%d]" % i, 3) for i in range(MODERNBERT_VOCAB - 50285)]
    for t, ty in extra:
        toks.append(t)
        types.append(ty)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": t == "[MASK]",
              "rstrip": False, "normalized": types[i] == 4, "special": types[i] == 3}
             for i, t in enumerate(toks) if types[i] in (3, 4)]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
          "use_regex": True}
    cls, sep = toks.index("[CLS]"), toks.index("[SEP]")
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]}}}
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "NFC"}, "pre_tokenizer": bl, "post_processor": post,
          "decoder": dict(bl), "model": {
              "type": "BPE", "dropout": None, "unk_token": None,
              "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
              "byte_fallback": False, "vocab": {t: i for i, t in enumerate(toks)},
              "merges": kv["tokenizer.ggml.merges"]}}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(tj, ensure_ascii=False))
    tc = {"clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "mask_token": "[MASK]",
          "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 8192,
          "pad_token": "[PAD]", "sep_token": "[SEP]",
          "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
        json.dump({k: v for k, v in tc.items() if k.endswith("_token")}, f, indent=2)
    return len(toks)


def modernbert_shapes(s, vocab):
    """ModernBertModel's checkpoint (the base model's names: no "model.")."""
    h, ff = s["hidden"], s["ff"]
    t = {"embeddings.tok_embeddings.weight": (vocab, h), "embeddings.norm.weight": (h,)}
    for i in range(s["layers"]):
        b = "layers.%d." % i
        if i:   # layer 0's attn_norm is an identity
            t[b + "attn_norm.weight"] = (h,)
        t[b + "attn.Wqkv.weight"] = (3 * h, h)
        t[b + "attn.Wo.weight"] = (h, h)
        t[b + "mlp_norm.weight"] = (h,)
        t[b + "mlp.Wi.weight"] = (2 * ff, h)
        t[b + "mlp.Wo.weight"] = (h, ff)
    t["final_norm.weight"] = (h,)
    return t


def modernbert_config(s, vocab):
    """An embedding model's config.json on ModernBERT-base (nomic-ai/modernbert-embed-base)."""
    return {"_name_or_path": s["name_or_path"], "architectures": [s["arch"]],
            "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 50281,
            "classifier_activation": "gelu", "classifier_bias": False,
            "classifier_dropout": 0.0, "classifier_pooling": "mean", "cls_token_id": 50281,
            "decoder_bias": True, "deterministic_flash_attn": False, "embedding_dropout": 0.0,
            "eos_token_id": 50282, "global_attn_every_n_layers": 3,
            "global_rope_theta": 160000.0, "gradient_checkpointing": False,
            "hidden_activation": "gelu", "hidden_size": s["hidden"],
            "initializer_cutoff_factor": 2.0, "initializer_range": 0.02,
            "intermediate_size": s["ff"], "layer_norm_eps": 1e-05,
            "local_attention": s["window"], "local_rope_theta": 10000.0,
            "max_position_embeddings": 8192, "mlp_bias": False, "mlp_dropout": 0.0,
            "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05,
            "num_attention_heads": s["heads"], "num_hidden_layers": s["layers"],
            "pad_token_id": 50283, "position_embedding_type": "absolute",
            "reference_compile": True, "sep_token_id": 50282, "sparse_pred_ignore_index": -100,
            "sparse_prediction": False, "torch_dtype": "float32",
            "transformers_version": "4.48.0", "vocab_size": vocab}


def nomic_shapes(s, vocab):
    """NomicBertModel's checkpoint (nomic-embed-text-v1.5's names)."""
    h, ff = s["hidden"], s["ff"]
    t = {"embeddings.word_embeddings.weight": (vocab, h),
         "embeddings.token_type_embeddings.weight": (2, h),
         "emb_ln.weight": (h,), "emb_ln.bias": (h,)}
    for i in range(s["layers"]):
        b = "encoder.layers.%d." % i
        t[b + "attn.Wqkv.weight"] = (3 * h, h)
        t[b + "attn.out_proj.weight"] = (h, h)
        t[b + "mlp.fc11.weight"] = (ff, h)
        t[b + "mlp.fc12.weight"] = (ff, h)
        t[b + "mlp.fc2.weight"] = (h, ff)
        for m in ("norm1", "norm2"):
            t[b + m + ".weight"] = (h,)
            t[b + m + ".bias"] = (h,)
    return t


def nomic_config(s, vocab):
    """nomic-embed-text-v1.5's config.json (its own model_type and code)."""
    return {"_name_or_path": "nomic-ai/nomic-bert-2048", "activation_function": "swiglu",
            "architectures": [s["arch"]], "attn_pdrop": 0.0,
            "auto_map": {"AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert."
                                       "NomicBertConfig",
                         "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert."
                                      "NomicBertModel"},
            "bos_token_id": None, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0,
            "eos_token_id": None, "fused_bias_fc": True, "fused_dropout_add_ln": True,
            "initializer_range": 0.02, "layer_norm_epsilon": 1e-12,
            "max_trained_positions": 2048, "mlp_fc1_bias": False, "mlp_fc2_bias": False,
            "model_type": "nomic_bert", "n_embd": s["hidden"], "n_head": s["heads"],
            "n_inner": s["ff"], "n_layer": s["layers"], "n_positions": 8192,
            "pad_vocab_size_multiple": 64, "parallel_block": False,
            "parallel_block_tied_norm": False, "prenorm": False, "qkv_proj_bias": False,
            "reorder_and_upcast_attn": False, "resid_pdrop": 0.0, "rotary_emb_base": 1000,
            "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
            "rotary_emb_scale_base": None, "rotary_scaling_factor": None,
            "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
            "summary_activation": None, "summary_first_dropout": 0.0,
            "summary_proj_to_labels": True, "summary_type": "cls_index",
            "summary_use_proj": True, "torch_dtype": "float32",
            "transformers_version": "4.34.0", "type_vocab_size": 2, "use_cache": True,
            "use_flash_attn": True, "use_rms_norm": False, "use_xentropy": True,
            "vocab_size": vocab}


def nomic_moe_shapes(s, vocab):
    """nomic-embed-text-v2-moe's checkpoint: biases everywhere, fc1/fc2 in the dense layers,
    in every `every`-th (i % every == 1, as its code picks them) the router and the experts
    stacked ([E x ff, hidden] both, w2 transposed by the converter) with their shared bias."""
    h, ff, e = s["hidden"], s["ff"], s["experts"]
    t = {"embeddings.word_embeddings.weight": (vocab, h),
         "embeddings.token_type_embeddings.weight": (1, h),
         "emb_ln.weight": (h,), "emb_ln.bias": (h,)}
    for i in range(s["layers"]):
        b = "encoder.layers.%d." % i
        t[b + "attn.Wqkv.weight"] = (3 * h, h)
        t[b + "attn.Wqkv.bias"] = (3 * h,)
        t[b + "attn.out_proj.weight"] = (h, h)
        t[b + "attn.out_proj.bias"] = (h,)
        if i % s["every"] == 1:
            t[b + "mlp.router.layer.weight"] = (e, h)
            t[b + "mlp.experts.mlp.w1"] = (e * ff, h)
            t[b + "mlp.experts.mlp.w2"] = (e * ff, h)
            t[b + "mlp.experts.bias"] = (h,)
        else:
            t[b + "mlp.fc1.weight"] = (ff, h)
            t[b + "mlp.fc1.bias"] = (ff,)
            t[b + "mlp.fc2.weight"] = (h, ff)
            t[b + "mlp.fc2.bias"] = (h,)
        for m in ("norm1", "norm2"):
            t[b + m + ".weight"] = (h,)
            t[b + m + ".bias"] = (h,)
    return t


def nomic_moe_config(s, vocab):
    """nomic-embed-text-v2-moe's config.json keys (nomic_bert with the MoE settings)."""
    c = nomic_config(s, vocab)
    c.update(_name_or_path="nomic-ai/nomic-xlm-2048", activation_function="gelu",
             n_positions=2048, max_trained_positions=2048, qkv_proj_bias=True,
             mlp_fc1_bias=True, mlp_fc2_bias=True, layer_norm_epsilon=1e-05,
             rotary_emb_base=10000, pad_token_id=1, type_vocab_size=1, use_rms_norm=None,
             moe_every_n_layers=s["every"], moe_top_k=s["top_k"], num_experts=s["experts"],
             num_shared_experts=0, moe_impl="megablocks", moe_normalize_expert_weights=False,
             moe_resid_pdrop=0.0, router_aux_loss_coef=0.1, expert_choice_router=False,
             ffn_div=1, transformers_version="4.47.0")
    return c


def write_weights(d, s, name, shapes):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    items = []
    for n, shp in shapes.items():
        # norms near 1 (make_model's rule for names ending in norm.weight)
        w = make_model.make_weights(s, n.replace("LayerNorm.weight", "norm.weight")
                                    .replace("emb_ln.weight", "emb_norm.weight")
                                    .replace("norm1.weight", "norm.weight")
                                    .replace("norm2.weight", "norm.weight"), shp, rng)
        items.append((n, s["dtype"], shp, w))
    if s.get("position_ids"):
        items.append((s.get("prefix", "") + "embeddings.position_ids", "I64", (1, s["ctx"]),
                      np.arange(s["ctx"], dtype=np.int64).reshape(1, -1).tobytes()))
    make_model.write_safetensors(os.path.join(d, "model.safetensors"), items)


def bert_config(s, vocab):
    c = {"architectures": [s["arch"]], "attention_probs_dropout_prob": 0.1,
         "classifier_dropout": None, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
         "hidden_size": s["hidden"], "initializer_range": 0.02,
         "intermediate_size": s["ff"], "layer_norm_eps": 1e-12,
         "max_position_embeddings": s["ctx"], "model_type": "bert",
         "num_attention_heads": s["heads"], "num_hidden_layers": s["layers"],
         "pad_token_id": 0, "position_embedding_type": "absolute",
         "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[s["dtype"]],
         "transformers_version": "4.30.0", "type_vocab_size": s.get("types", 2),
         "use_cache": True, "vocab_size": vocab}
    if s["arch"] == "XLMRobertaModel":   # as BAAI/bge-m3's config.json
        c.update(model_type="xlm-roberta", pad_token_id=1, bos_token_id=0, eos_token_id=2,
                 layer_norm_eps=1e-05, output_past=True, transformers_version="4.33.0")
    if "id2label" in s:
        c["id2label"] = s["id2label"]
        c["label2id"] = {v: int(k) for k, v in s["id2label"].items()}
    if "name_or_path" in s:
        c["_name_or_path"] = s["name_or_path"]
    return c


def make_egemma(outdir, name, s, d):
    """Gemma3TextModel: make_model.py's Gemma 3 text model with the base model's names and
    embeddinggemma-300m's config.json keys."""
    m = dict(make_model.BASE, **s)
    m.update(arch="Gemma3ForCausalLM", shards=1, tied=True, qk_norm=True)
    m.pop("name_or_path")
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    items = []
    for n, shp in make_model.tensor_shapes(m).items():
        items.append((n[len("model."):], "F32", shp, make_model.make_weights(m, n, shp, rng)))
    make_model.write_safetensors(os.path.join(d, "model.safetensors"), items)
    make_model.write_tokenizer(d, m, make_model.train_spm(outdir, m["vocab"]))
    make_model.write_config(d, m)
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    n = s["layers"]
    c.update(architectures=[s["arch"]], use_bidirectional_attention=True,
             _name_or_path=s["name_or_path"], _sliding_window_pattern=6,
             layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                          for i in range(n)])
    c.pop("sliding_window_pattern", None)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    write_pooling(d, s["pooling"])
    return d


def make(outdir, name):
    import shutil
    s = spec(name)
    d = os.path.join(outdir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    if s["arch"] == "Gemma3TextModel":
        return make_egemma(outdir, name, s, d)
    if s["arch"] == "ModernBertModel":
        n_vocab = write_modernbert_tokenizer(d)
        write_weights(d, s, name, modernbert_shapes(s, n_vocab))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(modernbert_config(s, n_vocab), f, indent=2)
        write_pooling(d, s["pooling"])
        return d
    if s["arch"] == "XLMRobertaModel":
        spm_path = train_unigram(outdir)
        write_xlmr_tokenizer(d, spm_path, s["ctx"])
        n_vocab = write_xlmr_tokenizer_json(d, spm_path)
    elif "experts" in s:   # tokenizer.json (with its Precompiled normalizer) alone
        spm_path = train_unigram(outdir)
        write_xlmr_tokenizer(d, spm_path, 512)
        os.unlink(os.path.join(d, "sentencepiece.bpe.model"))
        n_vocab = write_xlmr_tokenizer_json(d, spm_path, precompiled=True)
    else:
        vocab = bge_vocab()
        write_bert_tokenizer(d, vocab, s.get("ctx", 512))
        n_vocab = len(vocab)
    if s["arch"] == "NomicBertModel":
        n_vocab = (n_vocab + 63) // 64 * 64   # pad_vocab_size_multiple
        shapes, config = nomic_shapes(s, n_vocab), nomic_config(s, n_vocab)
        if "experts" in s:
            shapes, config = nomic_moe_shapes(s, n_vocab), nomic_moe_config(s, n_vocab)
    else:
        shapes, config = bert_shapes(s, n_vocab), bert_config(s, n_vocab)
    write_weights(d, s, name, shapes)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if s.get("pooling"):
        write_pooling(d, s["pooling"])
    return d


def main(argv):
    if len(argv) > 1 and argv[1] == "--list":
        print("\n".join(VARIANTS))
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for v in argv[2:] or VARIANTS:
        make(argv[1], v)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
