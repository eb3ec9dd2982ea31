// Hostile requests: a table of malformed or abusive requests, each with the
// status it must get and, where there is a body, the API's error shape; then
// abuse at the socket level (garbage, lies about lengths, half-sent
// requests, piles of idle connections), the queue bound (503), a client that
// vanishes mid-stream; after all of it the server still answers /health and
// serves a normal request. run.sh starts kt-serve with --parallel 1 --queue 1
// --ctx 256 --max-body 65536 --api-key kt-test-key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { url, apiKey, idle, metrics } from './server.mjs';

assert.ok(apiKey, 'the hostile tests expect kt-serve --api-key');
const auth = { Authorization: `Bearer ${apiKey}` };
const json = { 'Content-Type': 'application/json' };
const chat = (body) => JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...body });
const anthropic = (body) => JSON.stringify({ model: '', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...body });

// [name, method, path, headers, body, status]
const cases = [
  ['no API key', 'POST', '/v1/chat/completions', json, chat({}), 401],
  ['wrong API key', 'POST', '/v1/chat/completions', { ...json, Authorization: 'Bearer nope' }, chat({}), 401],
  ['API key without Bearer', 'POST', '/v1/chat/completions', { ...json, Authorization: apiKey }, chat({}), 401],
  ['Ollama API without key', 'POST', '/api/chat', json, '{}', 401],
  ['metrics without key', 'GET', '/metrics', {}, null, 401],
  ['malformed JSON', 'POST', '/v1/chat/completions', auth, '{"messages": [', 400],
  ['empty body', 'POST', '/v1/chat/completions', auth, '', 400],
  ['body is a list', 'POST', '/v1/chat/completions', auth, '[1, 2, 3]', 400],
  ['body is a string', 'POST', '/v1/completions', auth, '"prompt"', 400],
  ['messages not a list', 'POST', '/v1/chat/completions', auth, '{"messages": "hi"}', 400],
  ['messages empty', 'POST', '/v1/chat/completions', auth, '{"messages": []}', 400],
  ['unknown role', 'POST', '/v1/chat/completions', auth, chat({ messages: [{ role: 'root', content: 'x' }] }), 400],
  ['content is a number', 'POST', '/v1/chat/completions', auth, chat({ messages: [{ role: 'user', content: 7 }] }), 400],
  ['image content', 'POST', '/v1/chat/completions', auth,
   chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] }), 400],
  ['temperature is a string', 'POST', '/v1/chat/completions', auth, chat({ temperature: 'hot' }), 400],
  ['temperature out of range', 'POST', '/v1/chat/completions', auth, chat({ temperature: 3 }), 400],
  ['top_p out of range', 'POST', '/v1/chat/completions', auth, chat({ top_p: 1.5 }), 400],
  ['negative max_tokens', 'POST', '/v1/chat/completions', auth, chat({ max_tokens: -5 }), 400],
  ['fractional max_tokens', 'POST', '/v1/chat/completions', auth, chat({ max_tokens: 1.5 }), 400],
  ['huge max_tokens number', 'POST', '/v1/chat/completions', auth, chat({ max_tokens: 1e300 }), 400],
  ['n = 2', 'POST', '/v1/chat/completions', auth, chat({ n: 2 }), 400],
  ['stream is a string', 'POST', '/v1/chat/completions', auth, chat({ stream: 'yes' }), 400],
  ['seed is a string', 'POST', '/v1/chat/completions', auth, chat({ seed: 'abc' }), 400],
  ['100 stop strings', 'POST', '/v1/chat/completions', auth, chat({ stop: Array(100).fill('x') }), 400],
  ['stop holds numbers', 'POST', '/v1/chat/completions', auth, chat({ stop: [1, 2] }), 400],
  ['a tool without a name', 'POST', '/v1/chat/completions', auth,
   chat({ tools: [{ type: 'function', function: { parameters: {} } }] }), 400],
  ['unknown model', 'POST', '/v1/chat/completions', auth, chat({ model: 'gpt-4o' }), 404],
  ['prompt longer than the context', 'POST', '/v1/chat/completions', auth,
   chat({ messages: [{ role: 'user', content: 'word '.repeat(2000) }] }), 400],
  ['token ids outside the vocabulary', 'POST', '/v1/completions', auth, '{"prompt": [1, 99999999]}', 400],
  ['negative token id', 'POST', '/v1/completions', auth, '{"prompt": [-1]}', 400],
  ['two prompts (n = 1)', 'POST', '/v1/completions', auth, '{"prompt": ["a", "b"]}', 400],
  ['prompt is an object', 'POST', '/v1/completions', auth, '{"prompt": {"a": 1}}', 400],
  ['body over the size limit', 'POST', '/v1/chat/completions', auth,
   chat({ messages: [{ role: 'user', content: 'x'.repeat(70000) }] }), 413],
  ['nesting 5000 deep', 'POST', '/v1/chat/completions', auth, '{"messages": ' + '['.repeat(5000) + ']'.repeat(5000) + '}', 400],
  ['invalid UTF-8', 'POST', '/v1/chat/completions', auth,
   Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'), Buffer.from([0xff, 0xfe, 0xc0]),
                  Buffer.from('"}]}')]), 400],
  ['NaN is not JSON', 'POST', '/v1/chat/completions', auth, '{"messages": [], "temperature": NaN}', 400],
  ['unknown path', 'GET', '/v1/nothing', auth, null, 404],
  ['wrong method', 'DELETE', '/v1/models', auth, null, 404],
  ['path traversal', 'GET', '/static/..%2f..%2fetc%2fpasswd', {}, null, 404],
  ['unknown model by name', 'GET', '/v1/models/gpt-4o', auth, null, 404],
  ['Ollama: no model', 'POST', '/api/generate', auth, '{"prompt": "hi"}', 400],
  ['Ollama: unknown model', 'POST', '/api/chat', auth, '{"model": "llama3", "messages": []}', 404],
  ['Ollama: options not an object', 'POST', '/api/generate', auth, '{"model": "tiny-dsv3", "prompt": "x", "options": 5}', 400],
  ['Ollama: bad option type', 'POST', '/api/generate', auth,
   '{"model": "tiny-dsv3", "prompt": "x", "options": {"num_predict": "many"}}', 400],
  ['Ollama: images', 'POST', '/api/chat', auth,
   '{"model": "tiny-dsv3", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}', 400],
  ['Ollama: context of strings', 'POST', '/api/generate', auth, '{"model": "tiny-dsv3", "prompt": "x", "context": ["a"]}', 400],
  ['Ollama: show unknown model', 'POST', '/api/show', auth, '{"model": "nope"}', 404],
  ['Ollama: malformed JSON', 'POST', '/api/chat', auth, '{"model":', 400],
  // Agents' requests gone wrong: tools, tool choices, JSON schemas.
  ['tools is a string', 'POST', '/v1/chat/completions', auth, chat({ tools: 'get_weather' }), 400],
  ['a tool without function', 'POST', '/v1/chat/completions', auth, chat({ tools: [{ type: 'function' }] }), 400],
  ['a tool name with spaces', 'POST', '/v1/chat/completions', auth,
   chat({ tools: [{ type: 'function', function: { name: 'rm -rf' } }] }), 400],
  ['tool parameters not a schema', 'POST', '/v1/chat/completions', auth,
   chat({ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }), 400],
  ['300 tools', 'POST', '/v1/chat/completions', auth,
   chat({ tools: Array.from({ length: 300 }, (_, i) => ({ type: 'function', function: { name: `f${i}` } })) }), 400],
  ['tool_choice names no tool', 'POST', '/v1/chat/completions', auth,
   chat({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }), 400],
  ['tool_calls not a list', 'POST', '/v1/chat/completions', auth,
   chat({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: 'f()' }] }), 400],
  ['tool call arguments a number', 'POST', '/v1/chat/completions', auth,
   chat({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: [{ id: 'a', type: 'function',
     function: { name: 'f', arguments: 7 } }] }] }), 400],
  ['required tool with a cyclic schema', 'POST', '/v1/chat/completions', auth,
   chat({ tools: [{ type: 'function', function: { name: 'f', parameters: { $ref: '#/$defs/a',
     $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } } } } }], tool_choice: 'required' }), 400],
  ['schema with a $ref cycle', 'POST', '/v1/chat/completions', auth,
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'c', schema: { $ref: '#' } } } }), 400],
  ['schema with a required self-reference', 'POST', '/v1/chat/completions', auth,
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'c', schema: {
     type: 'object', properties: { me: { $ref: '#' } }, required: ['me'] } } } }), 400],
  ['schema nested 10,000 levels', 'POST', '/v1/chat/completions', auth,
   '{"response_format": {"type": "json_schema", "json_schema": {"schema": ' + '{"items":'.repeat(10000) + '{}' +
   '}'.repeat(10000) + '}}, "messages": [{"role": "user", "content": "x"}]}', 413],
  ['schema nested 5,000 levels', 'POST', '/v1/chat/completions', auth,
   '{"response_format": {"type": "json_schema", "json_schema": {"schema": ' + '{"items":'.repeat(5000) + '{}' +
   '}'.repeat(5000) + '}}, "messages": [{"role": "user", "content": "x"}]}', 400],
  ['unsupported schema keyword', 'POST', '/v1/chat/completions', auth,
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'u', schema: { type: 'string', contentMediaType: 'x' } } } }), 400],
  ['huge enum', 'POST', '/v1/chat/completions', auth,
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'e', schema: { enum: Array.from({ length: 5000 }, (_, i) => i) } } } }), 400],
  ['an object with 5,000 keys', 'POST', '/v1/chat/completions', auth,
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'k', schema: { type: 'object',
     properties: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`p${i}`, {}])) } } } }), 400],
  ['a pattern with lookahead', 'POST', '/v1/chat/completions', auth,
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: '(?=x)' } } } }), 400],
  ['response_format of an unknown type', 'POST', '/v1/chat/completions', auth, chat({ response_format: { type: 'xml' } }), 400],
  ['Ollama: format with a cycle', 'POST', '/api/chat', auth,
   '{"model": "tiny-dsv3", "messages": [{"role": "user", "content": "x"}], "format": {"$ref": "#"}}', 400],
  ['Ollama: format of an unknown kind', 'POST', '/api/generate', auth, '{"model": "tiny-dsv3", "prompt": "x", "format": "yaml"}', 400],
  ['Ollama: malformed tools', 'POST', '/api/chat', auth,
   '{"model": "tiny-dsv3", "messages": [{"role": "user", "content": "x"}], "tools": [{"function": 3}]}', 400],
  // Anthropic's blocks with fields of the wrong type: 400s (these were json
  // type_errors, 500s, before every field's type was checked).
  ['Anthropic: a block whose type is a number', 'POST', '/v1/messages', auth,
   anthropic({ messages: [{ role: 'user', content: [{ type: 7, text: 'x' }] }] }), 400],
  ['Anthropic: a tool whose type is a number', 'POST', '/v1/messages', auth,
   anthropic({ tools: [{ type: 1, name: 'f', input_schema: { type: 'object' } }] }), 400],
  ['Anthropic: tool_use id a number', 'POST', '/v1/messages', auth,
   anthropic({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 3, name: 'f', input: {} }] }] }), 400],
  ['Anthropic: thinking a string', 'POST', '/v1/messages', auth, anthropic({ thinking: 'on' }), 400],
  ['Anthropic: tool_choice a string', 'POST', '/v1/messages', auth, anthropic({ tool_choice: 'auto' }), 400],
];

test(`a table of ${cases.length} hostile requests gets the expected statuses and error bodies`, async () => {
  assert.ok(cases.length >= 20);
  for (const [name, method, path, headers, body, status] of cases) {
    const res = await fetch(url + path, { method, headers, body: body ?? undefined });
    const text = await res.text();
    assert.equal(res.status, status, `${name}: ${method} ${path} -> ${res.status} ${text.slice(0, 200)}`);
    const err = JSON.parse(text);
    if (path.startsWith('/api/')) {
      assert.equal(typeof err.error, 'string', `${name}: Ollama's {"error": string}`);
    } else {
      assert.equal(typeof err.error?.message, 'string', `${name}: OpenAI's {"error": {"message", ...}}`);
      assert.equal(typeof err.error.type, 'string', name);
    }
  }
});

// Sends raw bytes and returns what came back within timeoutMs (or until the
// server closed the connection).
function raw(bytes, timeoutMs = 500) {
  return new Promise((resolve) => {
    const port = Number(new URL(url).port);
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      s.destroy();
      resolve(got);
    };
    s.on('data', (d) => { got += d.toString('latin1'); });
    s.on('close', done);
    s.on('error', done);
    setTimeout(done, timeoutMs);
    s.write(bytes);
  });
}

test('socket-level abuse: garbage, lying lengths, half requests, idle connections', async () => {
  assert.match(await raw('GARBAGE\r\n\r\n'), /^HTTP\/1\.1 400/);
  assert.match(await raw('GET / HTTP/9.9\r\n\r\n'), /^HTTP\/1\.1 (200|400|505)/);
  assert.match(await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(100000)}\r\n\r\n`), /^HTTP\/1\.1 4\d\d/);
  // Content-Length larger than what is sent, then the connection closes.
  await raw(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\n` +
            'Content-Length: 1000\r\n\r\n{"messages":');
  // A chunked body that lies about its chunk sizes.
  await raw(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\n` +
            'Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc\r\n0\r\n\r\n');
  // Negative and absurd lengths.
  await raw('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n');
  await raw('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n');
  // Slowloris: many connections that send half a request and wait, while
  // the server keeps answering others.
  const held = [];
  const port = Number(new URL(url).port);
  for (let i = 0; i < 40; ++i) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    held.push(s);
  }
  const h = await fetch(url + '/health');
  assert.equal(h.status, 200);
  for (const s of held) s.destroy();
});

test('the queue bound turns the excess away with 503, and the rest complete', async () => {
  await idle();
  // One slot and a queue of one: of 8 requests at once, at most 2 are held.
  const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 60, temperature: 0 });
  const statuses = await Promise.all(Array.from({ length: 8 }, async () => {
    const res = await fetch(url + '/v1/completions', { method: 'POST', headers: { ...auth, ...json }, body });
    const b = await res.json();
    if (res.status === 503) assert.equal(b.error.type, 'server_error');
    if (res.status === 200) assert.ok(b.choices[0].text.length >= 0);
    return res.status;
  }));
  assert.ok(statuses.every((s) => s === 200 || s === 503), statuses.join(','));
  assert.ok(statuses.includes(503), `some were turned away: ${statuses}`);
  assert.ok(statuses.filter((s) => s === 200).length >= 1, `some completed: ${statuses}`);
  const m = await metrics();
  assert.ok(m['kt_requests_rejected_total{reason="queue_full"}'] >= 1);
  await idle();
});

test('a client that vanishes mid-stream frees the only slot at once', async () => {
  await idle();
  const cancelled = async () => (await metrics())['kt_requests_finished_total{reason="cancelled"}'];
  const before = await cancelled();
  const controller = new AbortController();
  const res = await fetch(url + '/v1/chat/completions', {
    method: 'POST', headers: { ...auth, ...json }, signal: controller.signal,
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me everything.' }], stream: true, temperature: 0 }),
  });
  assert.equal(res.status, 200);
  // Read until the reply's text has begun: the request holds the slot.
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let seen = '';
  while (!/"content":"[^"]/.test(seen)) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before its text began');
    seen += value;
  }
  controller.abort();
  const until = Date.now() + 3000;
  while (await cancelled() === before) {
    assert.ok(Date.now() < until, 'the request was not cancelled within 3 s of the client leaving');
    await new Promise((r) => setTimeout(r, 20));
  }
  await idle(3000);
  // The slot is free: the next request runs at once.
  const ok = await fetch(url + '/v1/completions', {
    method: 'POST', headers: { ...auth, ...json }, body: JSON.stringify({ prompt: 'Hello', max_tokens: 4 }),
  });
  assert.equal(ok.status, 200);
});

test('after all of it the server is healthy and serves normally', async () => {
  const h = await fetch(url + '/health');
  assert.equal(h.status, 200);
  assert.equal((await h.json()).status, 'ok');
  const res = await fetch(url + '/v1/chat/completions', {
    method: 'POST', headers: { ...auth, ...json }, body: chat({ max_tokens: 8, temperature: 0 }),
  });
  assert.equal(res.status, 200);
  const b = await res.json();
  assert.equal(b.object, 'chat.completion');
  await idle();
});
