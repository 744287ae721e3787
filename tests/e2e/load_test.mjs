// Load and disconnect behaviour of `llmserve serve` on loopback, bounded
// in count and time. The server (stories260K) runs with --max-queue 128
// and 64 running sequences, so 256 concurrent streams exceed its capacity:
// every one must complete or be refused with 429, nothing else.
import { BASE, test, finish, deadline, metrics, waitIdle, assert } from './common.mjs';
import { readFileSync } from 'node:fs';

deadline(300);
const PID = process.env.LLMSERVE_PID;
const CHECK_RSS = process.env.LLMSERVE_CHECK_RSS === '1';

function rssKiB() {
  const m = readFileSync(`/proc/${PID}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return Number(m[1]);
}

// One streaming completion with fetch; resolves to 'done', 429, or throws.
async function stream({ maxTokens, signal, onFirst }) {
  const res = await fetch(`${BASE}/v1/completions`, {
    method: 'POST', signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt: 'Once upon a time', max_tokens: maxTokens, stream: true }),
  });
  if (res.status === 429) {
    const body = await res.json();
    if (!body.error || !res.headers.get('retry-after')) throw new Error(`429 without error body or Retry-After`);
    return 429;
  }
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buf = '', first = true;
  for await (const part of res.body) {
    buf += decoder.decode(part, { stream: true });
    if (first && buf.includes('data: ')) {
      first = false;
      if (onFirst) onFirst();
    }
  }
  if (!buf.endsWith('data: [DONE]\n\n')) throw new Error(`stream ended without [DONE]: ${buf.slice(-200)}`);
  if (buf.includes('"error"')) throw new Error(`error event: ${buf.slice(-300)}`);
  return 'done';
}

async function round(n) {
  const outcomes = await Promise.allSettled(Array.from({ length: n }, () => stream({ maxTokens: 48 })));
  const errors = outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason));
  const done = outcomes.filter((o) => o.value === 'done').length;
  const limited = outcomes.filter((o) => o.value === 429).length;
  return { done, limited, errors };
}

let baseline = 0;
await test('256 concurrent streams: each completes or gets 429', async () => {
  const r = await round(256);
  console.log(`     completed ${r.done}, 429 ${r.limited}, errors ${r.errors.length}`);
  assert(r.errors.length === 0, `errors: ${r.errors.slice(0, 3).join(' | ')}`);
  assert(r.done + r.limited === 256 && r.done >= 64, `completed ${r.done} + 429 ${r.limited}`);
  const m = await waitIdle(30);
  assert(m['llmserve:kv_cache_blocks_used'] === 0, 'KV blocks leaked');
  baseline = rssKiB();
});

await test('memory stays flat over more rounds', async () => {
  for (let i = 0; i < 4; i++) {
    const r = await round(256);
    assert(r.errors.length === 0, `round ${i}: ${r.errors.slice(0, 3).join(' | ')}`);
    await waitIdle(30);
  }
  const after = rssKiB();
  console.log(`     RSS ${baseline} KiB after the first round, ${after} KiB after four more`);
  // Allocator caches may settle a little; a leak of even a few KiB per
  // request (1024 requests) would exceed this.
  if (CHECK_RSS) assert(after - baseline < 16 * 1024, `RSS grew by ${after - baseline} KiB`);
});

await test('50 clients killed mid-stream: their blocks are freed', async () => {
  const before = await metrics();
  const controllers = Array.from({ length: 50 }, () => new AbortController());
  let started = 0;
  const allStarted = new Promise((resolve) => {
    controllers.forEach((c) => stream({ maxTokens: 1500, signal: c.signal, onFirst: () => { if (++started === 50) resolve(); } })
      .catch(() => {}));
  });
  await allStarted;
  const busy = await metrics();
  assert(busy['llmserve:kv_cache_blocks_used'] > 0, 'no blocks in use while streaming');
  controllers.forEach((c) => c.abort());
  const idle = await waitIdle(20);
  const aborted = idle['llmserve:request_success_total:abort'] - before['llmserve:request_success_total:abort'];
  assert(aborted === 50, `${aborted} requests ended as aborted`);
});

finish();
