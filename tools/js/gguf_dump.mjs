// Prints what the npm package @huggingface/gguf (an independent GGUF parser) reads from a
// local GGUF file, as JSON: version, data offset, every metadata key with its type and
// value, every tensor's name, shape, type and offset. nightlora's tests compare it with
// what our own reader sees.
import { gguf } from "@huggingface/gguf";

const path = process.argv[2];
if (!path) {
  console.error("usage: node gguf_dump.mjs FILE.gguf");
  process.exit(2);
}
const r = await gguf(path, { allowLocalFile: true, typedMetadata: true });
const plain = (v) => (typeof v === "bigint" ? v.toString() : Array.isArray(v) ? v.map(plain) : v);
const metadata = {};
for (const [key, tv] of Object.entries(r.typedMetadata)) {
  if (key === "version" || key === "tensor_count" || key === "kv_count") continue;
  metadata[key] = { type: tv.type, subType: tv.subType ?? null, value: plain(tv.value) };
}
const out = {
  version: Number(r.metadata.version),
  tensor_count: Number(r.metadata.tensor_count),
  kv_count: Number(r.metadata.kv_count),
  tensorDataOffset: Number(r.tensorDataOffset),
  metadata,
  tensors: r.tensorInfos.map((t) => ({ name: t.name, shape: t.shape.map(Number), dtype: t.dtype, offset: Number(t.offset) })),
};
process.stdout.write(JSON.stringify(out));
