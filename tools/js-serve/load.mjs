// A bounded load test of `nightlora serve` with the official openai client: first each
// (model, prompt) pair's greedy answer alone, then a fine-tuning job is started and, while it
// trains, CLIENTS concurrent clients send REQUESTS requests each (models and prompts mixed,
// every other one streamed, chat and text completions, each checked against the same
// kind of request alone). Prints one JSON object: every answer
// that differed from its single-request answer, and the job's end.
//   node load.mjs BASE_URL TRAIN_JSONL MODELS(comma-separated) CLIENTS REQUESTS MAX_TOKENS HYPERPARAMETERS_JSON SEED
import fs from 'node:fs';
import OpenAI from 'openai';

const [baseURL, dataFile, modelsArg, clientsArg, requestsArg, maxTokensArg, hpJson, seedArg] = process.argv.slice(2);
const models = modelsArg.split(',');
const clients = Number(clientsArg), requests = Number(requestsArg), maxTokens = Number(maxTokensArg);
const prompts = ['Once upon a time', 'The little dragon', 'Lily went to the park and', 'One day, a big'];
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 300_000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function answer(model, prompt, stream, chat) {
  if (chat) {
    const req = { model, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, temperature: 0 };
    if (!stream) return (await client.chat.completions.create(req)).choices[0].message.content;
    let text = '';
    for await (const ch of await client.chat.completions.create({ ...req, stream: true })) text += ch.choices[0]?.delta?.content ?? '';
    return text;
  }
  const req = { model, prompt, max_tokens: maxTokens, temperature: 0 };
  if (!stream) return (await client.completions.create(req)).choices[0].text;
  let text = '';
  for await (const ch of await client.completions.create({ ...req, stream: true })) text += ch.choices[0]?.text ?? '';
  return text;
}

// Chat and text completions differ where the model has a chat template: a reference for each.
const reference = {};
for (const m of models) for (const p of prompts) for (const chat of [false, true]) reference[`${m}|${p}|${chat}`] = await answer(m, p, false, chat);

const file = await client.files.create({ file: fs.createReadStream(dataFile), purpose: 'fine-tune' });
const job = await client.fineTuning.jobs.create({ model: models[0], training_file: file.id, seed: Number(seedArg), hyperparameters: JSON.parse(hpJson) });
let status = job.status;
while (status === 'queued') status = (await client.fineTuning.jobs.retrieve(job.id)).status, await sleep(10);
const statusAtStart = status;

const mismatches = [];
let answered = 0;
const t0 = Date.now();
await Promise.all(Array.from({ length: clients }, async (_, c) => {
  for (let r = 0; r < requests; r++) {
    const model = models[(c + r) % models.length];
    const prompt = prompts[(c * 3 + r) % prompts.length];
    const stream = (c + r) % 2 === 0, chat = (c >> 1) % 2 === 0;
    const text = await answer(model, prompt, stream, chat);
    answered++;
    const expected = reference[`${model}|${prompt}|${chat}`];
    if (text !== expected) mismatches.push({ model, prompt, stream, chat, text, expected });
  }
}));
const loadSeconds = (Date.now() - t0) / 1000;
const statusAfterLoad = (await client.fineTuning.jobs.retrieve(job.id)).status;
let end;
for (;;) {
  end = await client.fineTuning.jobs.retrieve(job.id);
  if (!['validating_files', 'queued', 'running'].includes(end.status)) break;
  await sleep(100);
}
console.log(JSON.stringify({ answered, mismatches, load_seconds: loadSeconds, status_at_start: statusAtStart,
  status_after_load: statusAfterLoad, job: { id: end.id, status: end.status, fine_tuned_model: end.fine_tuned_model, error: end.error } }));
