// What run.sh tells the tests about the kt-serve it started.
import assert from 'node:assert/strict';

export const url = process.env.KT_SERVE_URL;
assert.ok(url, 'KT_SERVE_URL is not set: run the tests through run.sh');
export const outDir = process.env.KT_SERVE_OUT || '.';

// The server's options, e.g. {'--parallel': '4', '--api-key': 'k'}.
export const args = (() => {
  const words = (process.env.KT_SERVE_ARGS || '').split(/\s+/).filter(Boolean);
  const out = {};
  for (let i = 0; i < words.length; ++i) {
    if (!words[i].startsWith('--')) continue;
    const next = words[i + 1];
    out[words[i]] = next && !next.startsWith('--') ? next : true;
  }
  return out;
})();

export const apiKey = typeof args['--api-key'] === 'string' ? args['--api-key'] : null;
export const authHeaders = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};

export async function getJson(path) {
  const res = await fetch(url + path, { headers: authHeaders });
  assert.equal(res.status, 200, `GET ${path}`);
  return res.json();
}

export async function modelName() {
  return (await getJson('/v1/models')).data[0].id;
}

// One sample of /metrics, as {name{labels}: value}.
export async function metrics() {
  const res = await fetch(url + '/metrics', { headers: authHeaders });
  assert.equal(res.status, 200);
  const out = {};
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

// Waits until the server holds no running request (its slots are free).
export async function idle(timeoutMs = 5000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const h = await (await fetch(url + '/health')).json();
    if (h.slots_active === 0 && h.queue_length === 0) return h;
    if (Date.now() > until) assert.fail(`the server is still busy: ${JSON.stringify(h)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
