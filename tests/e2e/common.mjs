// Shared helpers for the end-to-end scripts: a tiny test runner that ends
// with the "N passed, N failed" line, and /metrics reading.
export const BASE = process.env.LLMSERVE_URL;  // e.g. http://127.0.0.1:PORT

const results = { passed: 0, failed: 0 };

export async function test(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.failed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

export function finish() {
  console.log(`${results.passed} passed, ${results.failed} failed`);
  process.exit(results.failed === 0 ? 0 : 1);
}

// Every run is bounded in time, whatever the server does.
export function deadline(seconds) {
  setTimeout(() => {
    console.log(`FAIL: gave up after ${seconds} s`);
    finish();
  }, seconds * 1000).unref();
}

export async function metrics() {
  const text = await (await fetch(`${BASE}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^([^{]+)\{([^}]*)\} (.+)$/);
    if (!m) continue;
    const reason = m[2].match(/finished_reason="([^"]+)"/);
    const key = m[1] + (reason ? `:${reason[1]}` : '');
    values[key] = (values[key] ?? 0) + Number(m[3]);  // summed over models
  }
  return values;
}

// Polls /metrics until no request is in flight and no KV block is held.
export async function waitIdle(seconds = 30) {
  const until = Date.now() + seconds * 1000;
  let m;
  while (Date.now() < until) {
    m = await metrics();
    if (m['llmserve:num_requests_in_flight'] === 0 && m['llmserve:num_requests_running'] === 0 &&
        m['llmserve:num_requests_waiting'] === 0 && m['llmserve:kv_cache_blocks_used'] === 0)
      return m;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`server not idle after ${seconds} s: ${JSON.stringify(m)}`);
}

export function assert(cond, message) {
  if (!cond) throw new Error(message);
}
