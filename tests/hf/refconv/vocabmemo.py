"""gguf-py's work on a real vocabulary kept by its content, so that it is done once per
vocabulary and not once per converter run.

The tests run the converter hundreds of times on repos with real 128K-262K-token
vocabularies (a few tokenizer.json files shared by many variants and outtypes). Two pieces of
gguf-py redo the same work on them in every run, about 1 s of the 1.5 s of CPU of a run of
a tiny model in the fork server (for qwen3's 151K tokens and merges):

- GGUFWriter._pack_val packs an array with one struct.pack per element (tokens, merges and
  token types: 455K elements);
- SpecialVocab._try_load_from_tokenizer_json parses the 11-28 MB of tokenizer.json again and
  rewrites each of its merges (the [a, b] pairs of tokenizers >= 0.20 as "a b").

Each is a function of what it is given and of files: the memo computes it with gguf-py's own
code the first time, keeps the result in TFS_REFCONV_TOKCACHE (reference.py sets it: a
folder of the converter's cache, which is keyed by the reference and these sources) under
the SHA-256 of all of its inputs, and gives the kept result to a later call with the same
inputs. What does not fit the rules below goes to gguf-py as before.

- _pack_val(val, vtype, add_vtype, sub_type) on the writer's byte order: an array of at least
  MIN_LEN elements, all of one type, `str` or `int` or one int subclass (gguf-py's
  TokenType; the type's name is in the key; a bool or a float is never taken for an int),
  keyed with its elements as marshal writes them (lossless: distinct lists, distinct
  bytes). An array gguf-py refuses (mixed types, a value out of range) raises in the first
  call and is never kept, so it raises every time.
- _try_load_from_tokenizer_json(path): the bytes of every file it may read (tokenizer.json,
  tokenizer_config.json, chat_template.jinja, chat_template.json and
  additional_chat_templates/*.jinja in the order glob lists them; absent ones marked so) and
  the SpecialVocab's attributes before the call (it reads load_merges, special_token_types,
  n_vocab and adds to the others), as marshal writes them. Kept: its return value and the
  attributes after. When an attribute is not marshal data, it is not kept. gguf-py's
  warnings (a template it does not understand) are logged by the first call only: the
  converter's files are the same either way, and the tests read its messages only when it
  fails.
"""
import hashlib
import marshal
import os
from pathlib import Path

MIN_LEN = 4096   # shorter arrays pack in a few ms: not worth a file


def _kept(folder, key):
    try:
        with open(os.path.join(folder, key), "rb") as f:
            return f.read()
    except OSError:
        return None


def _keep(folder, key, data):
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, key)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass   # (the memo only saves time)


def _array_key(writer, val, vtype, add_vtype, sub_type):
    kind = type(val[0])
    # (one set of the types, built in C: a generator over 455K elements took 0.14 s)
    if not (kind is str or (issubclass(kind, int) and kind is not bool)) or \
            set(map(type, val)) != {kind}:
        return None
    h = hashlib.sha256(repr(("pack", int(vtype), None if sub_type is None else int(sub_type),
                             bool(add_vtype), int(writer.endianess), kind.__module__,
                             kind.__qualname__)).encode())
    h.update(marshal.dumps(list(val) if kind is str else [int(x) for x in val]))
    return h.hexdigest()


def _file_part(h, p):
    h.update(repr(p.name).encode())
    try:
        with open(p, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        h.update(b"absent\0")
        return
    h.update(b"%d\0" % len(data))
    h.update(data)


def _tokenizer_json_key(vocab, path):
    try:
        before = marshal.dumps(vocab.__dict__)
    except ValueError:
        return None
    h = hashlib.sha256(b"special-vocab\0" + before)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                 "chat_template.json"):
        _file_part(h, path / name)
    for p in (path / "additional_chat_templates").glob("*.jinja"):
        _file_part(h, p)
    return h.hexdigest()


def install():
    """Wraps the two when TFS_REFCONV_TOKCACHE names a folder; nothing changes without one."""
    d = os.environ.get("TFS_REFCONV_TOKCACHE")
    if not d:
        return
    from gguf.constants import GGUFValueType
    from gguf.gguf_writer import GGUFWriter
    from gguf.vocab import SpecialVocab
    folder = os.path.join(d, "gguf-py")
    plain_pack = GGUFWriter._pack_val
    plain_load = SpecialVocab._try_load_from_tokenizer_json

    def pack_val(self, val, vtype, add_vtype, sub_type=None):
        key = None
        if vtype == GGUFValueType.ARRAY and isinstance(val, (list, tuple)) and \
                len(val) >= MIN_LEN:
            key = _array_key(self, val, vtype, add_vtype, sub_type)
        if key is None:
            return plain_pack(self, val, vtype, add_vtype, sub_type)
        out = _kept(folder, key)
        if out is None:
            out = plain_pack(self, val, vtype, add_vtype, sub_type)
            _keep(folder, key, out)
        return out

    def load_tokenizer_json(self, path):
        key = _tokenizer_json_key(self, Path(path))
        if key is None:
            return plain_load(self, path)
        data = _kept(folder, key)
        if data is not None:
            try:
                ret, after = marshal.loads(data)
                self.__dict__.clear()
                self.__dict__.update(after)
                return ret
            except (ValueError, EOFError, TypeError):
                pass
        ret = plain_load(self, path)
        try:
            _keep(folder, key, marshal.dumps((ret, self.__dict__)))
        except ValueError:
            pass   # (an attribute that is not marshal data: not kept)
        return ret

    GGUFWriter._pack_val = pack_val
    SpecialVocab._try_load_from_tokenizer_json = load_tokenizer_json
