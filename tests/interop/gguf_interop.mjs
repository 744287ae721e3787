// Loads a GGUF written by llmserve with an independent parser (Hugging Face's
// @huggingface/gguf) and checks what it sees: the writer's files must load
// in other GGUF tools, not only in our own reader.
import { gguf } from "@huggingface/gguf";
import { statSync } from "node:fs";
import assert from "node:assert/strict";

const [path, expectTensors] = process.argv.slice(2);
const { metadata, tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true });
const fileSize = BigInt(statSync(path).size);

assert.equal(metadata["general.architecture"], "llama");
assert.equal(tensorInfos.length, Number(expectTensors));
const vocab = metadata["tokenizer.ggml.tokens"].length;
assert.equal(metadata["tokenizer.ggml.scores"].length, vocab);
assert.equal(metadata["tokenizer.ggml.token_type"].length, vocab);
const dim = Number(metadata["llama.embedding_length"]);
const embd = tensorInfos.find((t) => t.name === "token_embd.weight");
assert.deepEqual(embd.shape.map(Number), [dim, vocab]);

// Bytes per block of the types gen-model writes (ggml type ids).
const blocks = { 0: [1, 4], 1: [1, 2], 2: [32, 18], 8: [32, 34] };
const align = BigInt(metadata["general.alignment"] ?? 32);
assert.equal(tensorDataOffset % align, 0n);
for (const t of tensorInfos) {
  assert.equal(t.offset % align, 0n, `${t.name} offset is aligned`);
  const [elems, bytes] = blocks[t.dtype];
  const n = t.shape.reduce((a, b) => a * b, 1n);
  const size = (n / BigInt(elems)) * BigInt(bytes);
  assert.ok(tensorDataOffset + t.offset + size <= fileSize, `${t.name} lies inside the file`);
}
console.log(`ok: ${tensorInfos.length} tensors, ${Object.keys(metadata).length} metadata entries, vocab ${vocab}`);
