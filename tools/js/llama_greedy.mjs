// Greedy tokens from real llama.cpp (the prebuilt CPU binaries of the npm package
// node-llama-cpp), for nightlora's tests: llama.cpp is the oracle our GGUF files, LoRA
// adapters and merged models must agree with. Never builds or downloads anything: the
// package's prebuilt linux-x64 CPU binary is used, or the script fails.
//
//   node llama_greedy.mjs --model M.gguf --prompt-ids "1 2 3" [-n 30] [--lora A.gguf[:SCALE]]...
//   node llama_greedy.mjs --jobs JOBS.json
//
// Prints the generated token ids, space-separated, on one line. Stops after n tokens or at
// an end-of-generation or BOS token (as `nightlora generate` does). With --jobs, the file is
// a JSON array of {"model", "ids" (a string of ids), "n", "lora": [path or "path:scale"...]}
// and the output one line per job, in order: llama.cpp starts once for all of them (the
// tests' many small runs would otherwise spend most of their time starting it).
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
  console.error(`llama_greedy.mjs: ${msg}\nusage: node llama_greedy.mjs --model M.gguf --prompt-ids "1 2 3" [-n N] [--lora A.gguf[:SCALE]]...`);
  process.exit(2);
}

import { readFileSync } from "node:fs";

function lora(spec) {
  const m = /^(.*):(-?[0-9.eE+-]+)$/.exec(spec);
  return m ? { filePath: m[1], scale: Number(m[2]) } : { filePath: spec, scale: 1 };
}
const parseIds = (text) => String(text).trim().split(/\s+/).map(Number);

const args = { model: "", ids: null, n: 30, lora: [] };
let jobs = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${argv[i]} needs a value`));
  switch (argv[i]) {
    case "--model": args.model = value(); break;
    case "--prompt-ids": args.ids = parseIds(value()); break;
    case "-n": args.n = Number(value()); break;
    case "--lora": args.lora.push(lora(value())); break;
    case "--jobs":
      jobs = JSON.parse(readFileSync(value(), "utf8")).map((j) => ({
        model: j.model, ids: parseIds(j.ids), n: j.n ?? 30, lora: (j.lora ?? []).map(lora) }));
      break;
    default: usage(`unknown argument ${argv[i]}`);
  }
}
if (!jobs) jobs = [args];
for (const job of jobs)
  if (!job.model || !job.ids || job.ids.some((x) => !Number.isInteger(x) || x < 0)) usage("give --model and --prompt-ids");

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               progressLogs: false, logLevel: LlamaLogLevel.error });
async function greedy(job) {
  const model = await llama.loadModel({ modelPath: job.model, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize: Math.max(64, job.ids.length + job.n + 8),
    batchSize: 512,
    threads: 1,
    ...(job.lora.length ? { lora: { adapters: job.lora } } : {}),
  });
  const seq = context.getSequence();
  const out = [];
  if (job.n > 0) {
    for await (const token of seq.evaluate(job.ids, { temperature: 0 })) {
      if (model.isEogToken(token) || token === model.tokens.bos) break;
      out.push(token);
      if (out.length >= job.n) break;
    }
  }
  await context.dispose();
  await model.dispose();
  return out.join(" ");
}
for (const job of jobs) process.stdout.write((await greedy(job)) + "\n");
await llama.dispose();
