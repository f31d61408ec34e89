"""A stand-in for the two parts of Hugging Face transformers that llama.cpp's converter uses
on the tests' models (transformers cannot be installed from Debian). See ../README.md.

AutoConfig.from_pretrained(d).to_dict(): config.json with the config class's defaults filled
in, as transformers 4.57 (the converter's pinned version) does; the table is defaults.py.

AutoTokenizer.from_pretrained(d): for tokenizer.json tokenizers. vocab, get_vocab(),
get_added_vocab(), added_tokens_decoder come from tokenizer.json; encode() and decode() are
done by Hugging Face's tokenizers library itself (Rust, npm @anush008/tokenizers) in a node
process (tokenize.js), which is what transformers' fast tokenizers call too.
"""
import hashlib
import json
import marshal
import os
import subprocess
import tempfile

from . import defaults

__version__ = "4.57.6+tensorfs-stand-in"
HERE = os.path.dirname(os.path.abspath(__file__))


def _read_json(d, name):
    p = os.path.join(str(d), name)
    if not os.path.isfile(p):
        return None
    with open(p, encoding="utf-8") as f:
        return json.load(f)


_parsed = {}   # tokenizer.json's identity -> (its JSON, the SHA-256 of its bytes, whole)


def _read_tokenizer_json(d, whole):
    """tokenizer.json's JSON (shared: not to be changed) and the SHA-256 of its bytes; whole
    False: only model.type, model.vocab and added_tokens, what the stand-in reads of it.
    Read once per process and file (the converter may load the tokenizer more than once a
    run), and the parts kept in TFS_REFCONV_TOKCACHE by the file's digest as marshal data:
    parsing a real tokenizer's 11-28 MB of JSON cost 0.4-1 s of CPU in each converter run,
    loading its vocabulary from marshal 0.1-0.2 s."""
    p = os.path.join(str(d), "tokenizer.json")
    st = os.stat(p)
    key = (os.path.realpath(p), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _parsed and (_parsed[key][2] or not whole):
        return _parsed[key][:2]
    with open(p, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    kept = os.environ.get("TFS_REFCONV_TOKCACHE")
    part = os.path.join(kept, digest + ".parts.marshal") if kept else None
    tj = None
    if part and not whole:
        try:
            with open(part, "rb") as f:
                tj = marshal.load(f)
        except (OSError, ValueError, EOFError, TypeError):
            tj = None
    if tj is None:
        tj = json.loads(data.decode("utf-8"))
        if part and not os.path.exists(part):
            model = tj.get("model") or {}
            parts = {"model": {"type": model.get("type"), "vocab": model.get("vocab")},
                     "added_tokens": tj.get("added_tokens")}
            try:
                os.makedirs(kept, exist_ok=True)
                tmp = "%s.%d.tmp" % (part, os.getpid())
                with open(tmp, "wb") as f:
                    marshal.dump(parts, f)
                os.replace(tmp, part)
            except (OSError, ValueError):
                pass
        whole = True
    _parsed[key] = (tj, digest, whole)
    return tj, digest


class _Config:
    def __init__(self, d):
        self._d = d

    def to_dict(self):
        d = json.loads(json.dumps(self._d))
        # PretrainedConfig keeps id2label with int keys ({int(key): value}), as to_dict()
        # returns it (BertModel's converter reads cls_out_labels[0] and sorts the items)
        if isinstance(d.get("id2label"), dict):
            d["id2label"] = {int(k): v for k, v in d["id2label"].items()}
        return d


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kw):
        d = _read_json(path, "config.json")
        if d is None:
            raise OSError("%s has no config.json" % path)
        return _Config(defaults.complete(d, str(path)))


class AddedToken:
    def __init__(self, content, special=False, normalized=True, lstrip=False, rstrip=False,
                 single_word=False):
        self.content, self.special, self.normalized = content, special, normalized
        self.lstrip, self.rstrip, self.single_word = lstrip, rstrip, single_word

    def __str__(self):
        return self.content

    def __repr__(self):
        return "AddedToken(%r, special=%s, normalized=%s)" % (self.content, self.special,
                                                             self.normalized)


# transformers' tokenizer classes that rebuild tokenizer.json's post-processor from
# tokenizer_config.json's add_bos_token / add_eos_token (their update_post_processor), with
# those flags' class defaults
_REBUILT_POST_PROCESSOR = {
    "LlamaTokenizer": (True, False), "LlamaTokenizerFast": (True, False),
    "CodeLlamaTokenizer": (True, False), "CodeLlamaTokenizerFast": (True, False),
    "GemmaTokenizer": (True, False), "GemmaTokenizerFast": (True, False),
    "CohereTokenizer": (True, False), "CohereTokenizerFast": (True, False),
}


def _token_text(t):
    if isinstance(t, dict):
        return t.get("content")
    return t


_SPECIAL_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                       "cls_token", "mask_token")
# the special tokens a tokenizer class's __init__ defaults (GemmaTokenizerFast's)
_CLASS_SPECIALS = {"GemmaTokenizer": {"bos_token": "<bos>", "eos_token": "<eos>",
                                      "unk_token": "<unk>", "pad_token": "<pad>"},
                   "XLMRobertaTokenizer": {"bos_token": "<s>", "eos_token": "</s>",
                                           "sep_token": "</s>", "cls_token": "<s>",
                                           "unk_token": "<unk>", "pad_token": "<pad>",
                                           "mask_token": "<mask>"}}


def _special_tokens(d, cfg):
    """all_special_tokens as transformers 5 has it (Gemma 4's LlamaHfVocab; 4.57 cannot load
    a Gemma 4 tokenizer_config.json, whose extra_special_tokens is a list: 'list' object has
    no attribute 'keys'): the named special tokens (tokenizer_config.json over the class's
    defaults, special_tokens_map.json over both), every other top-level "*_token" of
    tokenizer_config.json, additional_special_tokens, extra_special_tokens (a list's entries
    or a dict's values).  Duplicates dropped, first kept."""
    named = dict(_CLASS_SPECIALS.get(str(cfg.get("tokenizer_class", "")).removesuffix("Fast"),
                                     {}))
    stm = _read_json(d, "special_tokens_map.json") or {}
    extra = cfg.get("extra_special_tokens") or {}
    out = []
    for src in (cfg, stm):
        for k in _SPECIAL_ATTRIBUTES:
            if k in src:
                named[k] = _token_text(src[k])
    out += [named[k] for k in _SPECIAL_ATTRIBUTES if named.get(k)]
    out += [v for k, v in cfg.items() if k.endswith("_token") and
            k not in _SPECIAL_ATTRIBUTES and isinstance(v, str) and v]
    for src in (stm, cfg):
        if src.get("additional_special_tokens"):
            out += [_token_text(t) for t in src["additional_special_tokens"]]
            break
    out += [_token_text(t) for t in (extra if isinstance(extra, list) else extra.values())]
    seen = set()
    return [t for t in out if t is not None and not (t in seen or seen.add(t))]


class _Bridge:
    """A node process running tokenize.js on one tokenizer.json: one JSON request per line.

    Its answers are kept in TFS_REFCONV_TOKCACHE (set by ../reference.py: a folder of the
    converter's cache, keyed like it by the stand-ins' sources), one file per tokenizer.json
    content: the converter asks the same questions of every model with the same tokenizer
    (hf_moe's and the mounts' variants share a few real tokenizer.json files), and node with a
    150K-token tokenizer.json costs about a second of CPU per run.  node starts only when a
    question has no kept answer."""

    def __init__(self, tokenizer_json, digest):
        """digest: the SHA-256 (hex) of tokenizer_json's bytes."""
        self.path, self.p = tokenizer_json, None
        self.kept, self.file = {}, None
        d = os.environ.get("TFS_REFCONV_TOKCACHE")
        if d:
            self.file = os.path.join(d, digest + ".json")
            try:
                with open(self.file, encoding="utf-8") as f:
                    self.kept = json.load(f)
            except (OSError, ValueError):
                pass

    def _node(self, req):
        if self.p is None:
            npm = os.environ.get("TFS_REFCONV_NPM", "")
            self.p = subprocess.Popen(["node", os.path.join(HERE, "tokenize.js"), npm,
                                       self.path], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("tokenizer stand-in: node tokenize.js ended (see its error above)")
        r = json.loads(line)
        if "error" in r:
            raise RuntimeError("tokenizer stand-in: " + r["error"])
        return r["result"]

    def call(self, **req):
        key = json.dumps(req, sort_keys=True, ensure_ascii=False)
        if key in self.kept:
            return self.kept[key]
        result = self._node(req)
        self.kept[key] = result
        if self.file:
            try:   # (merged with what another run kept meanwhile; the cache only saves time)
                try:
                    with open(self.file, encoding="utf-8") as f:
                        self.kept = dict(json.load(f), **self.kept)
                except (OSError, ValueError):
                    pass
                os.makedirs(os.path.dirname(self.file), exist_ok=True)
                tmp = "%s.%d.tmp" % (self.file, os.getpid())
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(json.dumps(self.kept, ensure_ascii=False))
                os.replace(tmp, self.file)
            except OSError:
                pass
        return result

    def close(self):
        if self.p is not None:
            self.p.stdin.close()
            self.p.wait(timeout=10)


class _FastTokenizer:
    is_fast = True

    def __init__(self, d):
        cfg = _read_json(d, "tokenizer_config.json") or {}
        cls = cfg.get("tokenizer_class")
        tj, digest = _read_tokenizer_json(d, cls in _REBUILT_POST_PROCESSOR)
        model = tj.get("model") or {}
        unigram = model.get("type") == "Unigram" and isinstance(model.get("vocab"), list)
        if model.get("type") not in ("BPE", "WordPiece", "WordLevel") and \
                not isinstance(model.get("vocab"), dict) and not unigram:
            raise NotImplementedError("tokenizer stand-in: %s model in %s/tokenizer.json"
                                      % (model.get("type"), d))
        # a Unigram model's vocab is a list of [piece, score], the piece's id its index
        # (XLM-R's tokenizer.json read by _xlmroberta_set_vocab: nomic-embed-text-v2-moe)
        self._pieces = [p for p, _ in model["vocab"]] if unigram else None
        self.vocab = {p: i for i, p in enumerate(self._pieces)} if unigram else \
            dict(model["vocab"])
        self.added_tokens_decoder = {}
        for t in tj.get("added_tokens") or []:
            self.vocab[t["content"]] = t["id"]
            self.added_tokens_decoder[t["id"]] = AddedToken(
                t["content"], special=t.get("special", False),
                normalized=t.get("normalized", True), lstrip=t.get("lstrip", False),
                rstrip=t.get("rstrip", False), single_word=t.get("single_word", False))
        self.vocab_size = len(model["vocab"])
        self.all_special_tokens = _special_tokens(d, cfg)
        self.all_special_ids = [self.vocab[t] for t in self.all_special_tokens
                                if t in self.vocab]
        self._cleanup = bool(cfg.get("clean_up_tokenization_spaces", False))
        # PreTrainedTokenizerBase's attribute (the kwarg, else 4.57's default False), and
        # PreTrainedTokenizerFast's add_prefix_space (kwargs.get("add_prefix_space", False):
        # tokenizer_config.json's, whatever tokenizer.json's pre-tokenizer says); both as
        # tokenizer_config.json has them (_xlmroberta_set_vocab writes them as keys)
        self.clean_up_tokenization_spaces = cfg.get("clean_up_tokenization_spaces", False)
        self.add_prefix_space = cfg.get("add_prefix_space", False)
        self._tmp = None
        path = os.path.join(d, "tokenizer.json")
        if cls in _REBUILT_POST_PROCESSOR:
            bos_default, eos_default = _REBUILT_POST_PROCESSOR[cls]
            tj = dict(tj)   # (a copy: the parsed file is shared)
            tj["post_processor"] = self._template(
                tj, cfg, cfg.get("add_bos_token", bos_default), cfg.get("add_eos_token", eos_default))
            self._tmp = tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False)
            # (json.dumps: the C encoder; json.dump's Python one took half a minute for a
            # 262K-token tokenizer.json)
            data = json.dumps(tj, ensure_ascii=False).encode("utf-8")
            self._tmp.write(data)
            self._tmp.close()
            path, digest = self._tmp.name, hashlib.sha256(data).hexdigest()
        self._bridge = _Bridge(path, digest)
        # the converter encodes and decodes back each added token that is not normalized, one
        # by one: thousands of round trips to node.  Its first such encode asks node for all
        # of them at once (_prefetch); the answers are the ones each call would get.
        self._enc, self._dec, self._fetched = {}, {}, False

    def _template(self, tj, cfg, add_bos, add_eos):
        """The TemplateProcessing that update_post_processor builds (single and pair)."""
        bos, eos = _token_text(cfg.get("bos_token")), _token_text(cfg.get("eos_token"))
        if add_bos and bos is None:
            raise ValueError("add_bos_token = True but bos_token = None")
        if add_eos and eos is None:
            raise ValueError("add_eos_token = True but eos_token = None")
        single = ([{"SpecialToken": {"id": bos, "type_id": 0}}] if add_bos else []) + \
            [{"Sequence": {"id": "A", "type_id": 0}}] + \
            ([{"SpecialToken": {"id": eos, "type_id": 0}}] if add_eos else [])
        pair = single + ([{"SpecialToken": {"id": bos, "type_id": 1}}] if add_bos else []) + \
            [{"Sequence": {"id": "B", "type_id": 1}}] + \
            ([{"SpecialToken": {"id": eos, "type_id": 1}}] if add_eos else [])
        special = {}
        for tok, on in ((bos, add_bos), (eos, add_eos)):
            if on:
                special[tok] = {"id": tok, "ids": [self.vocab[tok]], "tokens": [tok]}
        return {"type": "TemplateProcessing", "single": single, "pair": pair,
                "special_tokens": special}

    def get_vocab(self):
        return dict(self.vocab)

    def _convert_id_to_token(self, index):
        """tokenizers' id_to_token: an added token's content, else the model's token (None
        past both)."""
        index = int(index)
        if index in self.added_tokens_decoder:
            return self.added_tokens_decoder[index].content
        if self._pieces is not None:
            return self._pieces[index] if 0 <= index < len(self._pieces) else None
        for t, i in self.vocab.items():
            if i == index:
                return t
        return None

    def get_added_vocab(self):
        return {t.content: i for i, t in sorted(self.added_tokens_decoder.items())}

    def _prefetch(self):
        self._fetched = True
        texts = sorted({t.content for t in self.added_tokens_decoder.values() if not t.normalized})
        if not texts:
            return
        ids = self._bridge.call(op="encode_batch", texts=texts, special=False)
        back = self._bridge.call(op="decode_batch", ids=ids, skip=False)
        self._enc.update(((t, False), i) for t, i in zip(texts, ids))
        self._dec.update(((tuple(i), False), b) for i, b in zip(ids, back))

    def encode(self, text, add_special_tokens=True):
        key = (text, bool(add_special_tokens))
        if not self._fetched and not key[1]:
            self._prefetch()
        if key in self._enc:
            return list(self._enc[key])
        return self._bridge.call(op="encode", text=text, special=key[1])

    def decode(self, ids, skip_special_tokens=False):
        key = (tuple(ids), bool(skip_special_tokens))
        text = self._dec[key] if key in self._dec else \
            self._bridge.call(op="decode", ids=list(ids), skip=key[1])
        if self._cleanup:
            # transformers' clean_up_tokenization (tokenizer_config.json's
            # clean_up_tokenization_spaces; 4.57's default is False)
            for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                         (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                         (" 're", "'re")):
                text = text.replace(a, b)
        return text

    def __del__(self):
        try:
            self._bridge.close()
            if self._tmp is not None:
                os.unlink(self._tmp.name)
        except Exception:
            pass


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **kw):
        if not os.path.isfile(os.path.join(str(path), "tokenizer.json")):
            raise OSError("tokenizer stand-in: %s has no tokenizer.json" % path)
        return _FastTokenizer(str(path))
