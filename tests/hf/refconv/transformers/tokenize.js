// tokenize.js - the tokenizer stand-in's engine: Hugging Face's tokenizers (Rust, through npm
// @anush008/tokenizers) on one tokenizer.json, serving requests line by line.
//   node tokenize.js NPM_DIR TOKENIZER_JSON
// stdin: {"op":"encode","text":..,"special":bool} or {"op":"decode","ids":[..],"skip":bool},
//        or the same for many at once: {"op":"encode_batch","texts":[..],"special":bool},
//        {"op":"decode_batch","ids":[[..],..],"skip":bool} (each item as its own request)
// stdout: {"result": ids or text (a list of them for a batch)} or {"error": message}, one
// line per request.
'use strict';
const path = require('path');
const readline = require('readline');
const { Tokenizer } = require(path.join(path.resolve(process.argv[2]), 'node_modules', '@anush008/tokenizers'));
const tok = Tokenizer.fromFile(process.argv[3]);
const rl = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
rl.on('line', (line) => {
  queue = queue.then(async () => {
    let out;
    try {
      const r = JSON.parse(line);
      if (r.op === 'encode') {
        out = { result: Array.from((await tok.encode(r.text, null, { addSpecialTokens: r.special })).getIds()) };
      } else if (r.op === 'decode') {
        out = { result: await tok.decode(r.ids, r.skip) };
      } else if (r.op === 'encode_batch') {
        const res = [];
        for (const t of r.texts)
          res.push(Array.from((await tok.encode(t, null, { addSpecialTokens: r.special })).getIds()));
        out = { result: res };
      } else if (r.op === 'decode_batch') {
        const res = [];
        for (const ids of r.ids)
          res.push(await tok.decode(ids, r.skip));
        out = { result: res };
      } else {
        out = { error: 'unknown op ' + r.op };
      }
    } catch (e) {
      out = { error: String(e && e.message || e) };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  });
});
