// Greedy tokens from real llama.cpp (the prebuilt CPU binaries of the npm package
// node-llama-cpp), for nightlora's tests: llama.cpp is the oracle our GGUF files, LoRA
// adapters and merged models must agree with. Never builds or downloads anything: the
// package's prebuilt linux-x64 CPU binary is used, or the script fails.
//
//   node llama_greedy.mjs --model M.gguf --prompt-ids "1 2 3" [-n 30] [--lora A.gguf[:SCALE]]...
//
// Prints the generated token ids, space-separated, on one line. Stops after n tokens or at
// an end-of-generation or BOS token (as `nightlora generate` does).
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
  console.error(`llama_greedy.mjs: ${msg}\nusage: node llama_greedy.mjs --model M.gguf --prompt-ids "1 2 3" [-n N] [--lora A.gguf[:SCALE]]...`);
  process.exit(2);
}

const args = { model: "", ids: null, n: 30, lora: [] };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${argv[i]} needs a value`));
  switch (argv[i]) {
    case "--model": args.model = value(); break;
    case "--prompt-ids": args.ids = value().trim().split(/\s+/).map(Number); break;
    case "-n": args.n = Number(value()); break;
    case "--lora": {
      const spec = value();
      const m = /^(.*):(-?[0-9.eE+-]+)$/.exec(spec);
      args.lora.push(m ? { filePath: m[1], scale: Number(m[2]) } : { filePath: spec, scale: 1 });
      break;
    }
    default: usage(`unknown argument ${argv[i]}`);
  }
}
if (!args.model || !args.ids || args.ids.some((x) => !Number.isInteger(x) || x < 0)) usage("give --model and --prompt-ids");

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               progressLogs: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: Math.max(64, args.ids.length + args.n + 8),
  batchSize: 512,
  threads: 1,
  ...(args.lora.length ? { lora: { adapters: args.lora } } : {}),
});
const seq = context.getSequence();
const out = [];
if (args.n > 0) {
  for await (const token of seq.evaluate(args.ids, { temperature: 0 })) {
    if (model.isEogToken(token) || token === model.tokens.bos) break;
    out.push(token);
    if (out.length >= args.n) break;
  }
}
process.stdout.write(out.join(" ") + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
