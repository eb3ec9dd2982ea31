// kt-serve through the official `openai` npm client: models, chat and text
// completions streamed and not (the two must agree token for token when
// greedy), max_tokens, seeds, stop sequences, prompt caching, and errors
// surfacing as the client's own error classes.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { url, idle } from './server.mjs';

const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'not-needed', maxRetries: 0, timeout: 60_000 });
let model;

before(async () => {
  model = (await client.models.list()).data[0].id;
});

const hello = [{ role: 'user', content: 'Hello! Tell me about the sea.' }];

async function chatText(params) {
  const r = await client.chat.completions.create({ model, messages: hello, temperature: 0, ...params });
  return r.choices[0].message.content;
}

async function streamChat(params) {
  const stream = await client.chat.completions.create({
    model, messages: hello, temperature: 0, stream: true, stream_options: { include_usage: true }, ...params,
  });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, usage, role };
}

test('models: the list and the model by name', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].object, 'model');
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
});

test('chat completion, not streamed', async () => {
  const r = await client.chat.completions.create({ model, messages: hello, max_tokens: 16, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.length > 0, 'the reply has text');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 16);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat completion, streamed: the chunks add up to the same greedy reply', async () => {
  const whole = await chatText({ max_tokens: 24 });
  const s = await streamChat({ max_tokens: 24 });
  assert.equal(s.role, 'assistant');
  assert.equal(s.text, whole);
  assert.ok(['stop', 'length'].includes(s.finish));
  assert.ok(s.usage && s.usage.completion_tokens > 0 && s.usage.completion_tokens <= 24);
});

test('text completion, streamed and not', async () => {
  const prompt = 'The capital of France is';
  const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.ok(r.choices[0].text.length > 0);
  assert.ok(r.usage.completion_tokens <= 12);
  const stream = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, r.choices[0].finish_reason);
  // OpenAI's default budget for completions is 16 tokens.
  const d = await client.completions.create({ model, prompt, temperature: 0 });
  assert.ok(d.usage.completion_tokens <= 16);
});

test('max_tokens bounds the reply and a seed repeats a sampled one', async () => {
  const r = await client.chat.completions.create({ model, messages: hello, max_tokens: 3, temperature: 0 });
  assert.ok(r.usage.completion_tokens <= 3);
  if (r.usage.completion_tokens === 3) assert.equal(r.choices[0].finish_reason, 'length');
  const a = await chatText({ max_tokens: 20, temperature: 1.2, seed: 1234 });
  const b = await chatText({ max_tokens: 20, temperature: 1.2, seed: 1234 });
  assert.equal(a, b);
});

test('stop sequences end the text before them, streamed or not', async () => {
  const full = await chatText({ max_tokens: 40 });
  assert.ok(full.length >= 8, `a long enough greedy reply: ${JSON.stringify(full)}`);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2);
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ model, messages: hello, max_tokens: 40, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].message.content, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const s = await streamChat({ max_tokens: 40, stop });
  assert.equal(s.text, expected);
  assert.equal(s.finish, 'stop');
});

test('multi-turn: the next turn finds the conversation in the prompt cache', async () => {
  const first = await client.chat.completions.create({ model, messages: hello, max_tokens: 8, temperature: 0 });
  const messages = [...hello, first.choices[0].message, { role: 'user', content: 'And about the mountains?' }];
  const second = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > 0, 'some of the prompt came from the cache');
});

test('errors surface as the client\'s error types', async () => {
  const bad = (params) => client.chat.completions.create({ model, messages: hello, max_tokens: 4, ...params });
  await assert.rejects(bad({ model: 'no-such-model' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, e.constructor.name);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  for (const params of [{ temperature: 5 }, { n: 2 }, { messages: [] }, { max_tokens: 0 }, { stop: [''] },
                        { messages: [{ role: 'wizard', content: 'x' }] }]) {
    await assert.rejects(bad(params), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(params)}: ${e.constructor.name}`);
      assert.equal(e.status, 400);
      assert.equal(typeof e.message, 'string');
      return true;
    });
  }
  // Longer than the context: refused before anything runs, with OpenAI's code.
  const long = [{ role: 'user', content: 'sea '.repeat(5000) }];
  await assert.rejects(bad({ messages: long }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  // A streamed request is refused before its stream starts.
  await assert.rejects(bad({ stream: true, temperature: -1 }), OpenAI.BadRequestError);
  await assert.rejects(client.completions.create({ model, prompt: [[1, 2], [3, 4]] }), OpenAI.BadRequestError);
  // Nothing is left running.
  await idle();
});

test('a streamed reply that the client abandons frees its slot', async () => {
  const stream = await client.chat.completions.create({
    model, messages: hello, temperature: 0, stream: true, max_tokens: 100000,
  });
  let n = 0;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content && ++n === 3) break;  // break aborts the request
  }
  await idle();
});
