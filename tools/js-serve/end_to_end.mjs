// Drives `nightlora serve` with the official openai client as an app would: list models, chat
// (streaming and not), a text completion, upload a JSONL, fine-tune, poll the job to its end,
// chat with the fine-tuned model, cancel a second job. Prints one JSON object with what it saw;
// tests/serve/serve_openai_test.cpp checks it against the CLI (`nightlora generate`, `train`).
//   node end_to_end.mjs BASE_URL API_KEY TRAIN_JSONL PROMPT MAX_TOKENS HYPERPARAMETERS_JSON SEED
import fs from 'node:fs';
import OpenAI from 'openai';

const [baseURL, apiKey, dataFile, prompt, maxTokensArg, hpJson, seedArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};

async function chatText(model, stream) {
  const req = { model, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, temperature: 0 };
  if (!stream) {
    const r = await client.chat.completions.create(req);
    return { text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  const s = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    const c = ch.choices[0];
    if (!c) continue;
    chunks++;
    text += c.delta?.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, usage, chunks };
}

async function waitForEnd(id) {
  for (;;) {
    const job = await client.fineTuning.jobs.retrieve(id);
    if (!['validating_files', 'queued', 'running'].includes(job.status)) return job;
    await sleep(100);
  }
}

const models = [];
for await (const m of client.models.list()) models.push(m.id);
out.models = models;
const base = models[0];
out.chat = await chatText(base, false);
out.chat_stream = await chatText(base, true);
const comp = await client.completions.create({ model: base, prompt, max_tokens: maxTokens, temperature: 0 });
out.completion = comp.choices[0].text;

const file = await client.files.create({ file: fs.createReadStream(dataFile), purpose: 'fine-tune' });
out.file = { id: file.id, bytes: file.bytes, purpose: file.purpose };
out.file_listed = (await client.files.list()).data.some((f) => f.id === file.id);

const hyperparameters = JSON.parse(hpJson);
const created = await client.fineTuning.jobs.create({ model: base, training_file: file.id, seed: Number(seedArg), hyperparameters });
out.created_status = created.status;
const job = await waitForEnd(created.id);
out.job = { id: job.id, status: job.status, fine_tuned_model: job.fine_tuned_model, error: job.error };
const events = await client.fineTuning.jobs.listEvents(job.id, { limit: 1000 });
out.events = events.data.map((e) => e.message);
out.jobs_listed = (await client.fineTuning.jobs.list()).data.map((j) => j.id);
const after = [];
for await (const m of client.models.list()) after.push(m.id);
out.models_after = after;
if (job.fine_tuned_model) {
  out.retrieved = (await client.models.retrieve(job.fine_tuned_model)).id;
  out.ft_chat = await chatText(job.fine_tuned_model, false);
  out.ft_chat_stream = await chatText(job.fine_tuned_model, true);
}

// A second job, cancelled at once: it must end as cancelled, with no model.
const long = await client.fineTuning.jobs.create({ model: base, training_file: file.id, hyperparameters: { ...hyperparameters, n_steps: 100000 } });
const cancelled = await client.fineTuning.jobs.cancel(long.id);
out.cancel = { status: cancelled.status };
await sleep(300);
const later = await client.fineTuning.jobs.retrieve(long.id);
out.cancel.later = later.status;
out.cancel.fine_tuned_model = later.fine_tuned_model;
try {
  await client.fineTuning.jobs.cancel(long.id);
  out.cancel.again = 'accepted';
} catch (e) {
  out.cancel.again = e.status;
}
console.log(JSON.stringify(out));
