// llama.cpp's side of bench/run_infer.sh: prompt processing (pp) and greedy decode (tg)
// tokens/s of real llama.cpp (node-llama-cpp's prebuilt CPU binary, never built or
// downloaded) on a GGUF, for the same prompt token ids and threads as nl_bench_infer.
//
//   node llama_bench_infer.mjs --model M.gguf --prompt-ids-file F [-n 64] [--threads 2]
//        [--reps 1] [--warmup 1] [--flash-attention auto|on|off]
//   (--warmup: short untimed runs first, 16 prompt tokens and 2 decoded)
//
// One JSON line per measured rep on stdout:
//   {"side":"llama.cpp","pp_tokens":256,"pp_s":..,"pp_tps":..,"tg_tokens":64,"tg_s":..,"tg_tps":..}
// What is timed, per rep, on a sequence whose history was cleared first (no prompt cache
// reuse between reps; nightlora's side starts each rep from an empty KV cache too):
//   pp: the whole prompt in one batch (batchSize >= prompt length) until the first greedy
//       token is out (llama.cpp computes only the last position's logits, as ours returns
//       only the last token's);
//   tg: n more tokens, each one decode of the previous token and a greedy pick.
// Greedy is llama.cpp's own greedy sampler (temperature 0) in native code; generation never
// stops at an end-of-generation token (random weights emit them), as on nightlora's side.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
  console.error(`llama_bench_infer.mjs: ${msg}\nusage: node llama_bench_infer.mjs --model M.gguf --prompt-ids-file F ` +
                `[-n N] [--threads T] [--reps R] [--warmup W] [--flash-attention auto|on|off]`);
  process.exit(2);
}

const args = { model: "", idsFile: "", n: 64, threads: 2, reps: 1, warmup: 1, fa: "auto" };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${argv[i]} needs a value`));
  switch (argv[i]) {
    case "--model": args.model = value(); break;
    case "--prompt-ids-file": args.idsFile = value(); break;
    case "-n": args.n = Number(value()); break;
    case "--threads": args.threads = Number(value()); break;
    case "--reps": args.reps = Number(value()); break;
    case "--warmup": args.warmup = Number(value()); break;
    case "--flash-attention": args.fa = value(); break;
    default: usage(`unknown argument ${argv[i]}`);
  }
}
if (!args.model || !args.idsFile) usage("give --model and --prompt-ids-file");
if (![args.n, args.threads, args.reps, args.warmup].every((x) => Number.isInteger(x) && x >= 0) || args.threads < 1 || args.n < 1)
  usage("-n, --threads must be positive integers; --reps, --warmup non-negative");
if (!["auto", "on", "off"].includes(args.fa)) usage(`--flash-attention ${args.fa}: use auto, on or off`);
const ids = readFileSync(args.idsFile, "utf8").trim().split(/\s+/).map(Number);
if (ids.length === 0 || ids.some((x) => !Number.isInteger(x) || x < 0)) usage(`${args.idsFile}: expected token ids separated by spaces`);

// maxThreads pins llama.cpp's thread count: with a Llama instance limit, `threads` is only a hint.
const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               progressLogs: false, logLevel: LlamaLogLevel.error, maxThreads: args.threads });
const tLoad0 = performance.now();
const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
const loadS = (performance.now() - tLoad0) / 1e3;
const context = await model.createContext({
  contextSize: ids.length + args.n + 16,
  batchSize: Math.max(512, ids.length),  // the whole prompt in one batch, as nightlora's one forward
  sequences: 1,
  threads: args.threads,
  flashAttention: args.fa === "auto" ? "auto" : args.fa === "on",
});
const seq = context.getSequence();

async function once(ids, nGen) {
  await seq.clearHistory();  // an empty KV cache: nothing of the previous rep is reused
  let n = 0, tFirst = 0;
  const t0 = performance.now();
  for await (const token of seq.evaluate(ids, { temperature: 0 })) {
    void token;
    if (n === 0) tFirst = performance.now();
    if (++n > nGen) break;  // the first token closes pp; nGen more tokens are tg
  }
  const t1 = performance.now();
  const ppS = (tFirst - t0) / 1e3, tgS = (t1 - tFirst) / 1e3;
  return { pp_tokens: ids.length, pp_s: ppS, pp_tps: ids.length / ppS, tg_tokens: nGen, tg_s: tgS, tg_tps: nGen / tgS };
}

// Warm-up: a short run (16 prompt tokens, 2 decoded), as on nightlora's side.
for (let r = 0; r < args.warmup; r++) await once(ids.slice(0, 16), 2);
for (let r = 0; r < args.reps; r++) {
  const m = await once(ids, args.n);
  process.stdout.write(JSON.stringify({ side: "llama.cpp", model: args.model, threads: args.threads,
                                        flash_attention: args.fa, load_s: loadS, ...m }) + "\n");
}
await context.dispose();
await model.dispose();
await llama.dispose();
