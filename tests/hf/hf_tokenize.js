// hf_tokenize.js - Hugging Face's tokenization of texts, for tests/hf/tokenize_compare.py.
//   node hf_tokenize.js NPM_DIR TOKENIZER_DIR [--max-id] < texts.json > ids.json
// texts.json: a list of strings; prints, per text, [lenml ids, tokenizers ids] without special
// tokens: @lenml/tokenizers (transformers.js) and @anush008/tokenizers (the Rust library).
// --max-id: prints {"max_id": the largest id of tokenizer.json's vocabulary and added tokens,
// "ids": that list} (read from the JSON parsed here anyway: tokenize_compare.py parsing a
// real tokenizer.json again for it cost 0.3-1.2 s of CPU each)
'use strict';
const fs = require('fs');
const path = require('path');
const npm = path.resolve(process.argv[2], 'node_modules');
const dir = process.argv[3];
const { TokenizerLoader } = require(path.join(npm, '@lenml/tokenizers'));
const { Tokenizer } = require(path.join(npm, '@anush008/tokenizers'));
const read = (f) => { try { return JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')); } catch (e) { return {}; } };
const tj = read('tokenizer.json');
let maxId = -1;
if (process.argv[4] === '--max-id') {
  for (const id of Object.values((tj.model || {}).vocab || {})) maxId = Math.max(maxId, id);
  for (const a of tj.added_tokens || []) maxId = Math.max(maxId, a.id);
}
const lenml = TokenizerLoader.fromPreTrained({ tokenizerJSON: tj,
                                               tokenizerConfig: read('tokenizer_config.json') });
const rust = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
const texts = JSON.parse(fs.readFileSync(0, 'utf8'));
(async () => {
  const out = [];
  for (const t of texts) {
    const a = Array.from(lenml.encode(t, { add_special_tokens: false }));
    const b = (await rust.encode(t, null, { addSpecialTokens: false })).getIds();
    out.push([a, b]);
  }
  process.stdout.write(JSON.stringify(maxId >= 0 ? { max_id: maxId, ids: out } : out));
})();
