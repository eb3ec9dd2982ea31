// Load: 16 concurrent streaming clients (the openai npm client), each with a
// few requests in turn. Every reply must be correct, and equal, greedy, to
// the same request's reply when it ran alone; the throughput of 16 streams
// against 1 is reported (stdout and $KT_SERVE_OUT/load.json) and must show
// that continuous batching shares decode steps (mean decode batch) for a real
// gain (MIN_GAIN, KT_SERVE_MIN_GAIN: the better of up to two rounds in which
// other jobs left the machine alone, QUIET; a shared machine can slow either
// half of a round). run.sh starts
// kt-serve with --parallel 16 --no-prompt-cache, so both runs compute every
// prompt in full.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { url, outDir, idle, metrics } from './server.mjs';

const CLIENTS = 16;
const PER_CLIENT = 3;
const MAX_TOKENS = 48;
// At least this much faster with 16 streams than with 1, on a quiet machine.
const MIN_GAIN = Number(process.env.KT_SERVE_MIN_GAIN || 1.3);
// When other jobs take more than this share of the machine's CPU time during
// a round, its throughput says more about them than about batching (on a
// 2-core VM, kt-serve's compute threads then wait for a core at every step):
// the gain is reported, not asserted.
const QUIET = 0.15;

const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'not-needed', maxRetries: 0, timeout: 300_000 });
let model;

before(async () => {
  model = (await client.models.list()).data[0].id;
});

// A burst of new connections, all at once, each answered at once: a listen
// backlog smaller than the burst makes the kernel drop SYNs, and a dropped
// client waits a second for its retransmit (with httplib's backlog of 5,
// 16 streams starting together ran at half one stream's speed, 1 round in 4).
const BURST = 128;
const BURST_MAX_MS = 900;  // a SYN retransmit takes 1 s
test(`${BURST} connections opened at once are all answered within ${BURST_MAX_MS} ms`, async () => {
  const { hostname, port } = new URL(url);
  const one = () => new Promise((resolve, reject) => {
    const t0 = performance.now();
    let reply = '';
    const s = connect({ host: hostname, port: Number(port) }, () => {
      s.write(`GET /health HTTP/1.1\r\nHost: ${hostname}\r\nConnection: close\r\n\r\n`);
    });
    s.setEncoding('latin1');
    s.on('data', (d) => { reply += d; });
    s.on('end', () => resolve({ ms: performance.now() - t0, reply }));
    s.on('error', reject);
  });
  const got = await Promise.all(Array.from({ length: BURST }, one));
  for (const g of got) assert.match(g.reply, /^HTTP\/1\.1 200 /);
  const slowest = Math.max(...got.map((g) => g.ms));
  console.log(`load: ${BURST} connections at once, slowest answered in ${slowest.toFixed(0)} ms`);
  assert.ok(slowest < BURST_MAX_MS, `a connection of the burst waited ${slowest.toFixed(0)} ms (a dropped SYN?)`);
});

const topics = ['the sea', 'mountains', 'a lighthouse', 'winter', 'a robot', 'bread', 'rivers', 'the moon'];
function request(i) {
  return {
    model,
    messages: [{ role: 'user', content: `Request ${i}: write a short story about ${topics[i % topics.length]}.` }],
    temperature: 0,
    max_tokens: MAX_TOKENS,
    stream: true,
    stream_options: { include_usage: true },
  };
}

async function run(i) {
  const stream = await client.chat.completions.create(request(i));
  let text = '';
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.content) {
      text += c.delta.content;
      ++chunks;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.ok(usage, `request ${i}: usage in the last chunk`);
  assert.ok(['stop', 'length'].includes(finish), `request ${i}: finish_reason ${finish}`);
  assert.ok(usage.completion_tokens <= MAX_TOKENS);
  return { text, tokens: usage.completion_tokens, chunks };
}

// Each request alone, one after another.
async function alone(n) {
  const out = [];
  const t0 = performance.now();
  for (let i = 0; i < n; ++i) out.push(await run(i));
  return { out, seconds: (performance.now() - t0) / 1000 };
}

// CLIENTS clients, each sending its requests one after another.
async function together(n) {
  const out = new Array(n);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    for (let k = 0; k < n / CLIENTS; ++k) {
      const i = c * (n / CLIENTS) + k;
      out[i] = await run(i);
    }
  }));
  return { out, seconds: (performance.now() - t0) / 1000 };
}

const tokensOf = (rs) => rs.reduce((s, r) => s + r.tokens, 0);

// CPU time on this machine, in clock ticks (Linux /proc; null elsewhere):
// all CPUs busy and in total, and that of kt-serve (run.sh exports its pid)
// and of this process.
function cpuSample() {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    const ticksOf = (pid) => {
      // utime and stime: fields 14 and 15, counted after the parenthesized name
      const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const rest = st.slice(st.lastIndexOf(')') + 2).split(' ');
      return Number(rest[11]) + Number(rest[12]);
    };
    const ours = ticksOf(process.env.KT_SERVE_PID) + ticksOf(process.pid);
    return { busy: total - f[3] - f[4], total, ours };
  } catch {
    return null;
  }
}

// The share of the machine's CPU time that other jobs took between samples.
function othersShare(a, b) {
  if (!a || !b || b.total <= a.total) return 0;
  return Math.max(0, (b.busy - a.busy) - (b.ours - a.ours)) / (b.total - a.total);
}

test(`${CLIENTS} concurrent streams x ${PER_CLIENT} requests: same replies as alone, and faster together`,
     { timeout: 600_000 }, async () => {
  const n = CLIENTS * PER_CLIENT;
  await run(n);  // warm up: first touch of the weights and caches
  const rounds = [];
  // A second round only when the first shows too little gain: a machine
  // shared with other jobs can slow either half of one round.
  for (let round = 0; round < 2; ++round) {
    await idle();
    const c0 = cpuSample();
    const a = await alone(n);
    await idle();
    const before = await metrics();
    const t = await together(n);
    const after = await metrics();
    const c1 = cpuSample();
    const busy = othersShare(c0, c1);
    for (let i = 0; i < n; ++i) {
      assert.equal(t.out[i].text, a.out[i].text, `request ${i}: the reply among ${CLIENTS} differs from alone`);
      assert.equal(t.out[i].tokens, a.out[i].tokens, `request ${i}: token counts`);
    }
    const tokens = tokensOf(a.out);
    assert.equal(tokensOf(t.out), tokens);
    const steps = after.kt_decode_steps_total - before.kt_decode_steps_total;
    const stepTokens = after.kt_decode_step_tokens_total - before.kt_decode_step_tokens_total;
    rounds.push({
      others_cpu_share: busy,
      completion_tokens: tokens,
      one_stream: { seconds: a.seconds, tokens_per_second: tokens / a.seconds },
      concurrent: { seconds: t.seconds, tokens_per_second: tokens / t.seconds },
      gain: a.seconds / t.seconds,
      mean_decode_batch: stepTokens / steps,
    });
    const r = rounds[round];
    console.log(`load: 1 stream ${r.one_stream.tokens_per_second.toFixed(1)} tok/s, ` +
                `${CLIENTS} streams ${r.concurrent.tokens_per_second.toFixed(1)} tok/s (x${r.gain.toFixed(2)}), ` +
                `mean decode batch ${r.mean_decode_batch.toFixed(1)}, ${tokens} tokens in ${n} requests; ` +
                `other jobs took ${(100 * busy).toFixed(0)}% of the machine`);
    assert.ok(r.mean_decode_batch > 4, `decode steps were shared: mean batch ${r.mean_decode_batch}`);
    if (r.gain >= MIN_GAIN && busy <= QUIET) break;
  }
  const quiet = rounds.filter((r) => r.others_cpu_share <= QUIET);
  const best = (quiet.length ? quiet : rounds).reduce((b, r) => (r.gain > b.gain ? r : b));
  writeFileSync(`${outDir}/load.json`, JSON.stringify({ requests: n, clients: CLIENTS, max_tokens: MAX_TOKENS,
                                                        rounds, best_gain: best.gain, gain_asserted: quiet.length > 0 },
                                                      null, 2) + '\n');
  if (quiet.length) {
    assert.ok(best.gain >= MIN_GAIN, `16 streams give x${best.gain.toFixed(2)} the throughput of 1 (want >= ${MIN_GAIN})`);
  } else {
    console.log(`load: the gain is not asserted: other jobs took over ${100 * QUIET}% of the machine in every round`);
  }
  await idle();
});
