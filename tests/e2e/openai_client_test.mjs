// The official `openai` npm client against `llmserve serve` on loopback.
// The server runs stories260K (no chat template: ChatML fallback), which
// every request names, and TinyStories-656K with
//   -m stories260K=FILE -m TinyStories-656K=FILE --api-key sk-main --api-key sk-burst --rate-limit 20 --rate-burst 40 --max-body 65536
//   --allowed-origins http://app.example
import OpenAI from 'openai';
import { BASE, test, finish, deadline, waitIdle, assert } from './common.mjs';

deadline(240);
const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'sk-main', maxRetries: 0 });
const model = 'stories260K';
const messages = [{ role: 'user', content: 'Tell me a story.' }];

async function expectError(promise, status, type) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof OpenAI.APIError, `expected an APIError, got ${e}`);
    assert(e.status === status, `expected status ${status}, got ${e.status}: ${e.message}`);
    assert(e.error && typeof e.error.message === 'string', `no OpenAI error body: ${JSON.stringify(e.error)}`);
    if (type) assert(e.error.type === type, `expected type ${type}, got ${e.error.type}`);
    return e;
  }
  throw new Error(`expected HTTP ${status}, but the request succeeded`);
}

await test('models: both listed, each answering under its name', async () => {
  const list = await client.models.list();
  assert(list.data.map((m) => m.id).join() === `${model},TinyStories-656K`, JSON.stringify(list.data));
  const r = await client.completions.create({ model: 'TinyStories-656K', prompt: 'Once upon a time', max_tokens: 4 });
  assert(r.model === 'TinyStories-656K', JSON.stringify(r));
});

await test('CORS: preflight, then a cross-origin request from an allowed origin', async () => {
  const origin = 'http://app.example';
  const pre = await fetch(`${BASE}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
  });
  assert(pre.status === 204, `preflight status ${pre.status}`);
  assert(pre.headers.get('access-control-allow-origin') === origin, `allow-origin ${pre.headers.get('access-control-allow-origin')}`);
  assert(/POST/.test(pre.headers.get('access-control-allow-methods')), `allow-methods ${pre.headers.get('access-control-allow-methods')}`);
  assert(/authorization/.test(pre.headers.get('access-control-allow-headers')), 'allow-headers');
  const res = await fetch(`${BASE}/v1/chat/completions`, {
    method: 'POST',
    headers: { origin, authorization: 'Bearer sk-main', 'content-type': 'application/json', 'x-request-id': 'e2e-cors-1' },
    body: JSON.stringify({ model, messages, max_tokens: 4 }),
  });
  assert(res.status === 200, `status ${res.status}`);
  assert(res.headers.get('access-control-allow-origin') === origin, 'no allow-origin on the answer');
  assert(res.headers.get('x-request-id') === 'e2e-cors-1', `x-request-id ${res.headers.get('x-request-id')}`);
  assert(/x-request-id/.test(res.headers.get('access-control-expose-headers')), 'x-request-id not exposed');
  const other = await fetch(`${BASE}/v1/models`, { headers: { origin: 'http://evil.example', authorization: 'Bearer sk-main' } });
  assert(other.headers.get('access-control-allow-origin') === null, 'a disallowed origin got allow-origin');
});

await test('models.retrieve', async () => {
  const m = await client.models.retrieve(model);
  assert(m.id === model && m.object === 'model', JSON.stringify(m));
  const e = await expectError(client.models.retrieve('gpt-4'), 404);
  assert(e.code === 'model_not_found', `code ${e.code}`);
});

// A request to /tokenize or /detokenize, for `model`.
async function post(path, body) {
  const res = await fetch(`${BASE}${path}`, {
    method: 'POST', headers: { authorization: 'Bearer sk-main', 'content-type': 'application/json' },
    body: JSON.stringify({ model, ...body }),
  });
  return { status: res.status, body: await res.json() };
}

await test('tokenize and detokenize (llama-server and vLLM shapes)', async () => {
  const prompt = 'Once upon a time';
  const r = await client.completions.create({ model, prompt, max_tokens: 1 });
  const vllm = await post('/tokenize', { prompt });
  assert(vllm.status === 200 && vllm.body.count === r.usage.prompt_tokens && vllm.body.tokens.length === vllm.body.count,
    `tokenize ${JSON.stringify(vllm)} vs prompt_tokens ${r.usage.prompt_tokens}`);
  assert(vllm.body.max_model_len > 0, 'max_model_len');
  const llama = await post('/tokenize', { content: prompt });
  assert(llama.body.count === vllm.body.count - 1, `content without BOS: ${llama.body.count}`);
  const back = await post('/detokenize', { tokens: llama.body.tokens });
  assert(back.status === 200 && back.body.content === prompt && back.body.prompt === prompt, JSON.stringify(back.body));
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 1 });
  const counted = await post('/tokenize', { messages });
  assert(counted.body.count === chat.usage.prompt_tokens, `chat form ${counted.body.count} vs ${chat.usage.prompt_tokens}`);
  const bad = await post('/detokenize', { tokens: [1, 10000000] });
  assert(bad.status === 400 && /10000000/.test(bad.body.error.message), JSON.stringify(bad));
});

await test('chat, non-streaming', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  assert(r.object === 'chat.completion', r.object);
  assert(r.choices.length === 1 && r.choices[0].message.role === 'assistant', JSON.stringify(r.choices));
  assert(typeof r.choices[0].message.content === 'string' && r.choices[0].message.content.length > 0, 'empty content');
  assert(['stop', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  assert(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, JSON.stringify(r.usage));
  assert(r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'total_tokens');
});

await test('chat, streaming with usage', async () => {
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, role = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert(chunks >= 2, `only ${chunks} chunks`);
  assert(role === 'assistant', `role ${role}`);
  assert(text === whole.choices[0].message.content, `stream ${JSON.stringify(text)} != ${JSON.stringify(whole.choices[0].message.content)}`);
  assert(finish === whole.choices[0].finish_reason, `finish ${finish}`);
  assert(usage && usage.completion_tokens === whole.usage.completion_tokens, `usage ${JSON.stringify(usage)}`);
});

await test('completions, non-streaming and streaming', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  assert(r.object === 'text_completion' && r.choices[0].text.length > 0, JSON.stringify(r));
  const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert(text === r.choices[0].text, `stream ${JSON.stringify(text)} != ${JSON.stringify(r.choices[0].text)}`);
});

await test('n=2', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 16, n: 2, seed: 1 });
  assert(r.choices.length === 2, `${r.choices.length} choices`);
  assert(r.choices.map((c) => c.index).sort().join() === '0,1', 'indexes');
  const stream = await client.completions.create({ model, prompt: 'Once', max_tokens: 8, n: 2, stream: true });
  const seen = new Set();
  for await (const chunk of stream) for (const c of chunk.choices) seen.add(c.index);
  assert(seen.size === 2, `streamed indexes ${[...seen]}`);
});

await test('stop strings', async () => {
  const base = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0 });
  const text = base.choices[0].text;
  const stop = text.slice(8, 12);  // inside the text, likely across a token boundary
  const cut = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: [stop] });
  assert(cut.choices[0].text === text.slice(0, text.indexOf(stop)), `${JSON.stringify(cut.choices[0].text)} (stop ${JSON.stringify(stop)})`);
  assert(cut.choices[0].finish_reason === 'stop', cut.choices[0].finish_reason);
  const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop, stream: true });
  let streamed = '';
  for await (const chunk of stream) for (const c of chunk.choices) streamed += c.text;
  assert(streamed === cut.choices[0].text, `streamed ${JSON.stringify(streamed)}`);
});

await test('logprobs', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 3 });
  const lp = r.choices[0].logprobs;
  assert(lp.tokens.length > 0 && lp.tokens.length === lp.token_logprobs.length, JSON.stringify(lp));
  assert(lp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 3), 'top_logprobs size');
  assert(lp.token_logprobs.every((x) => x <= 0), 'logprob > 0');
  assert(lp.tokens.join('') === r.choices[0].text, 'tokens do not spell the text');
  const c = await client.chat.completions.create({ model, messages, max_tokens: 8, logprobs: true, top_logprobs: 2 });
  const content = c.choices[0].logprobs.content;
  assert(content.length > 0 && content.every((t) => t.top_logprobs.length === 2 && Array.isArray(t.bytes)), JSON.stringify(content[0]));
});

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

await test('embeddings: string and list input, float and base64', async () => {
  const text = 'Once upon a time';
  const asFloat = await client.embeddings.create({ model, input: text, encoding_format: 'float' });
  assert(asFloat.object === 'list' && asFloat.data.length === 1 && asFloat.data[0].object === 'embedding', JSON.stringify(asFloat).slice(0, 200));
  const v = asFloat.data[0].embedding;
  assert(Array.isArray(v) && v.length > 0 && Math.abs(norm(v) - 1) < 1e-5, `norm ${norm(v)}`);
  assert(asFloat.usage.prompt_tokens > 0 && asFloat.usage.total_tokens === asFloat.usage.prompt_tokens, JSON.stringify(asFloat.usage));
  // The npm client asks for base64 by default and decodes it to numbers.
  const decoded = await client.embeddings.create({ model, input: [text, 'The cat sat on the mat.'] });
  assert(decoded.data.length === 2 && decoded.data[1].index === 1, JSON.stringify(decoded.data.map((d) => d.index)));
  const w = decoded.data[0].embedding;
  assert(w.length === v.length && Math.abs(norm(w) - 1) < 1e-5, `decoded norm ${norm(w)}, length ${w.length}`);
  assert(w.every((x, i) => Math.abs(x - v[i]) < 1e-6), 'the base64 vector differs from the float one');
  assert(decoded.usage.prompt_tokens > asFloat.usage.prompt_tokens, JSON.stringify(decoded.usage));
  const e = await expectError(client.embeddings.create({ model, input: [] }), 400, 'invalid_request_error');
  assert(e.param === 'input', `param ${e.param}`);
});

await test('invalid request: 400 with an OpenAI error body', async () => {
  const e = await expectError(client.chat.completions.create({ model, messages, temperature: 5 }), 400, 'invalid_request_error');
  assert(e.param === 'temperature', `param ${e.param}`);
  await expectError(client.chat.completions.create({ model, messages: [] }), 400, 'invalid_request_error');
});

await test('wrong API key: 401', async () => {
  const bad = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
  await expectError(bad.chat.completions.create({ model, messages, max_tokens: 4 }), 401);
  await expectError(bad.models.list(), 401);
});

await test('body over the size limit: 413', async () => {
  await expectError(client.completions.create({ model, prompt: 'x'.repeat(100_000), max_tokens: 1 }), 413);
});

await test('over-limit burst: 429 with Retry-After', async () => {
  const burst = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'sk-burst', maxRetries: 0 });
  const outcomes = await Promise.allSettled(
    Array.from({ length: 80 }, () => burst.completions.create({ model, prompt: 'Hi', max_tokens: 1 })));
  const limited = outcomes.filter((o) => o.status === 'rejected' && o.reason.status === 429);
  const ok = outcomes.filter((o) => o.status === 'fulfilled');
  assert(ok.length + limited.length === 80, `unexpected failures: ${outcomes.filter((o) => o.status === 'rejected' && o.reason.status !== 429).map((o) => o.reason.message)}`);
  assert(ok.length >= 1 && limited.length >= 1, `ok ${ok.length}, 429 ${limited.length}`);
  const e = limited[0].reason;
  assert(e.headers['retry-after'] && Number(e.headers['retry-after']) >= 1, `Retry-After ${e.headers['retry-after']}`);
  assert(e.headers['x-ratelimit-limit-requests'] === '40' && e.headers['x-ratelimit-remaining-requests'] === '0' &&
         /s$/.test(e.headers['x-ratelimit-reset-requests']), `x-ratelimit-* ${JSON.stringify(e.headers)}`);
  assert(e.error && e.error.type === 'rate_limit_error', JSON.stringify(e.error));
});

await test('idle afterwards: no KV block held', async () => {
  await waitIdle(30);
});

finish();
