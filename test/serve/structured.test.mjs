// Structured output through the official clients: response_format
// json_schema on 20 schemas x 4 seeds (and greedy), each reply validated by
// ajv against its schema; json_object; Ollama's format; streaming; a token
// budget that cuts the output still leaves valid JSON. The bundled model is
// untrained: its replies are valid only because the sampler masks every
// token that cannot continue a valid output. Also: logprobs, the prompt cache
// on a second turn (cached_tokens, prefill counted in /metrics, the same
// greedy reply without the cache), and the reasoning split's plumbing.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { url, metrics, idle } from './server.mjs';

const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
const ollama = new Ollama({ host: url });
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
let model;

before(async () => {
  model = (await client.models.list()).data[0].id;
});

const person = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 30 }, age: { type: 'integer', minimum: 0, maximum: 130 } },
  required: ['name', 'age'],
};

export const schemas = [
  person,
  { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false },
  { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 5 },
  { type: 'string', enum: ['red', 'green', 'blue', 'greenish'] },
  { type: 'object', properties: { kind: { const: 'point' }, x: { type: 'number' }, y: { type: 'number' } },
    required: ['kind', 'x', 'y'] },
  { anyOf: [{ type: 'null' }, { type: 'string', minLength: 2, maxLength: 6 }, { type: 'integer', minimum: 10 }] },
  { type: 'object', properties: { id: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3,5}$' } }, required: ['id'] },
  { type: 'object', properties: { when: { type: 'string', format: 'date' }, at: { type: 'string', format: 'time' } },
    required: ['when', 'at'] },
  { type: 'object', properties: { id: { type: 'string', format: 'uuid' }, mail: { type: 'string', format: 'email' } },
    required: ['id', 'mail'] },
  { type: 'object', properties: { stamp: { type: 'string', format: 'date-time' } }, required: ['stamp'] },
  { type: 'number', minimum: -1, maximum: 1 },
  { type: 'integer', exclusiveMinimum: 100, exclusiveMaximum: 1000 },
  { type: 'object', additionalProperties: { type: 'integer', minimum: 0 }, maxProperties: undefined },
  { type: 'object', properties: { tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 4 },
                                  score: { type: ['number', 'null'] } }, required: ['tags', 'score'] },
  { type: 'array', items: person, minItems: 1, maxItems: 2 },
  { $ref: '#/$defs/tree', $defs: { tree: { type: 'object', properties: {
    v: { type: 'integer', minimum: 0, maximum: 9 },
    kids: { type: 'array', items: { $ref: '#/$defs/tree' }, maxItems: 2 } }, required: ['v'] } } },
  { type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' }, c: { type: 'string' } } },
  { type: 'array', items: { type: 'array', items: { type: 'boolean' }, maxItems: 3 }, maxItems: 3 },
  { type: 'object', properties: { title: { type: 'string', minLength: 1, maxLength: 40 },
    rating: { enum: [1, 2, 3, 4, 5] }, verdict: { allOf: [{ enum: ['buy', 'skip'] }] } },
    required: ['title', 'rating', 'verdict'] },
  { type: 'object', properties: { text: { type: 'string', pattern: 'ab+c' }, n: { type: 'integer', minimum: -5, maximum: 5 } },
    required: ['text', 'n'] },
].map((s) => JSON.parse(JSON.stringify(s)));  // drop the undefined keys

const question = [{ role: 'user', content: 'Answer in JSON.' }];

function validate(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${what}: not JSON: ${JSON.stringify(text)}`);
  }
  const ok = ajv.validate(schema, value);
  assert.ok(ok, `${what}: ${JSON.stringify(text)} fails ${JSON.stringify(schema)}: ${ajv.errorsText()}`);
  return value;
}

test('response_format json_schema: 20 schemas x (greedy + 4 seeds) give replies that ajv validates', async () => {
  assert.equal(schemas.length, 20);
  let n = 0;
  await Promise.all(schemas.map(async (schema, i) => {
    for (const seed of [null, 1, 2, 3, 4]) {
      const r = await client.chat.completions.create({
        model, messages: question, max_tokens: 400,
        ...(seed === null ? { temperature: 0 } : { temperature: 1, seed }),
        response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } },
      });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', `schema ${i} seed ${seed}: ${c.message.content}`);
      validate(schema, c.message.content, `schema ${i} seed ${seed}`);
      ++n;
    }
  }));
  assert.equal(n, 100);
  const m = await metrics();
  assert.ok(m.kt_constrained_tokens_total > 0);
  assert.ok(m.kt_constraint_mask_seconds_total >= 0);
});

test('a budget that cuts the reply still leaves it valid JSON', async () => {
  const schema = { type: 'object', properties: { words: { type: 'array', items: { type: 'string' } } }, required: ['words'] };
  for (const max_tokens of [12, 20, 40]) {
    for (const seed of [5, 6]) {
      const r = await client.chat.completions.create({
        model, messages: question, max_tokens, temperature: 1.5, seed,
        response_format: { type: 'json_schema', json_schema: { name: 'words', schema } },
      });
      assert.ok(r.usage.completion_tokens <= max_tokens);
      validate(schema, r.choices[0].message.content, `max_tokens ${max_tokens}`);
    }
  }
});

test('response_format json_object, streamed and not', async () => {
  const r = await client.chat.completions.create({
    model, messages: question, max_tokens: 300, temperature: 0, response_format: { type: 'json_object' },
  });
  const v = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof v, 'object');
  assert.ok(!Array.isArray(v) && v !== null);
  const stream = await client.chat.completions.create({
    model, messages: question, max_tokens: 300, temperature: 0, stream: true, response_format: { type: 'json_object' },
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, r.choices[0].message.content);
});

test('Ollama format: "json" and a schema', async () => {
  const r = await ollama.chat({ model, messages: question, format: 'json', options: { temperature: 0, num_predict: 300 } });
  assert.equal(typeof JSON.parse(r.message.content), 'object');
  for (const seed of [1, 2, 3]) {
    const g = await ollama.generate({ model, prompt: 'A person:', format: person, options: { seed, num_predict: 300 } });
    validate(person, g.response, `ollama generate seed ${seed}`);
  }
  const stream = await ollama.chat({ model, messages: question, format: person, stream: true, options: { seed: 9 } });
  let text = '';
  for await (const part of stream) text += part.message.content;
  validate(person, text, 'ollama chat stream');
});

test('unsupported or hostile schemas are a 400 naming the keyword, and the server keeps serving', async () => {
  const bad = async (schema, pattern) => {
    await assert.rejects(client.chat.completions.create({
      model, messages: question, max_tokens: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
    }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.match(e.message, pattern);
      return true;
    });
  };
  await bad({ type: 'object', properties: { a: { type: 'integer', multipleOf: 3 } } }, /properties\/a: unsupported keyword 'multipleOf'/);
  await bad({ type: 'array', uniqueItems: true }, /unsupported keyword 'uniqueItems'/);
  await bad({ oneOf: [{ type: 'string' }] }, /'oneOf'/);
  await bad({ $ref: '#/$defs/a', $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } } }, /cycle/);
  await bad({ type: 'object', properties: { me: { $ref: '#' } }, required: ['me'] }, /recurses forever/);
  await bad({ type: 'string', pattern: '(a)\\1' }, /backreferences/);
  await bad({ enum: Array.from({ length: 3000 }, (_, i) => `v${i}`) }, /more than 1024 values/);
  await bad({ type: 'string', format: 'hostname' }, /format 'hostname'/);
  // 10,000 nested levels: refused by the request parser's depth bound (the
  // schema compiler has its own, for schemas that reach it).
  const deep = '{"items":'.repeat(10000) + '{}' + '}'.repeat(10000);
  const res = await fetch(url + '/v1/chat/completions', { method: 'POST', body:
    `{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": ${deep}}}}` });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error.message, /deeper than/);
  await assert.rejects(ollama.generate({ model, prompt: 'x', format: { type: 'object', not: {} } }),
    (e) => e.status_code === 400 && /unsupported keyword 'not'/.test(e.error));
  const r = await client.chat.completions.create({ model, messages: question, max_tokens: 4, temperature: 0 });
  assert.ok(r.choices[0].message.content.length >= 0);
  await idle();
});

test('logprobs and top_logprobs, streamed and not', async () => {
  const r = await client.chat.completions.create({
    model, messages: question, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens - (r.choices[0].finish_reason === 'stop' ? 1 : 0));
  for (const t of lp) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].token, t.token, 'greedy takes the most likely token');
  }
  assert.equal(lp.map((t) => t.token).join(''), r.choices[0].message.content);
  const stream = await client.chat.completions.create({
    model, messages: question, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 1, stream: true,
  });
  const tokens = [];
  for await (const chunk of stream) for (const t of chunk.choices[0]?.logprobs?.content ?? []) tokens.push(t.token);
  assert.equal(tokens.join(''), r.choices[0].message.content);
  const c = await client.completions.create({ model, prompt: 'The sea', max_tokens: 5, temperature: 0, logprobs: 2 });
  assert.equal(c.choices[0].logprobs.tokens.join(''), c.choices[0].text);
  assert.equal(c.choices[0].logprobs.top_logprobs[0] && Object.keys(c.choices[0].logprobs.top_logprobs[0]).length, 2);
  await assert.rejects(client.chat.completions.create({ model, messages: question, top_logprobs: 2 }), OpenAI.BadRequestError);
  const o = await ollama.chat({ model, messages: question, logprobs: true, top_logprobs: 2, options: { temperature: 0, num_predict: 6 } });
  assert.ok(Array.isArray(o.logprobs) && o.logprobs.length > 0);
});

test('prompt cache: the second turn prefills only its new tokens and replies as without the cache', async () => {
  await idle();
  const first = [{ role: 'user', content: 'Tell me a long story about a lighthouse keeper and the sea.' }];
  const r1 = await client.chat.completions.create({ model, messages: first, max_tokens: 12, temperature: 0 });
  const second = [...first, r1.choices[0].message, { role: 'user', content: 'And then?' }];
  const m0 = await metrics();
  const r2 = await client.chat.completions.create({ model, messages: second, max_tokens: 12, temperature: 0 });
  const m1 = await metrics();
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= r1.usage.prompt_tokens - 1, `cached ${cached} of the first turn's ${r1.usage.prompt_tokens}`);
  assert.equal(m1.kt_prefill_tokens_total - m0.kt_prefill_tokens_total, r2.usage.prompt_tokens - cached);
  assert.equal(m1.kt_prompt_tokens_cached_total - m0.kt_prompt_tokens_cached_total, cached);
  const fresh = await client.chat.completions.create({ model, messages: second, max_tokens: 12, temperature: 0, cache_prompt: false });
  assert.equal(fresh.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(fresh.choices[0].message.content, r2.choices[0].message.content);
});

test('reasoning: an unclosed <think> block opened by the template is all reasoning_content; off, it is content', async () => {
  // The Qwen2.5 template does not think: the reply is content.
  const r = await client.chat.completions.create({ model, messages: question, max_tokens: 6, temperature: 0 });
  assert.equal(r.choices[0].message.reasoning_content, undefined);
  assert.ok(r.choices[0].message.content.length > 0);
});
