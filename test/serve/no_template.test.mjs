// A model without a chat template (the bundled tiny models have none, and
// run.sh starts this server without --chat-template): chat endpoints answer
// 400 saying so, in each API's shape; completions and raw generation work.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { url, modelName, idle } from './server.mjs';

const post = async (path, body) => {
  const res = await fetch(url + path, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
};

test('chat endpoints refuse with a clear 400; completions still work', async () => {
  const model = await modelName();
  const messages = [{ role: 'user', content: 'Hello' }];
  const openai = await post('/v1/chat/completions', { model, messages, max_tokens: 4 });
  assert.equal(openai.status, 400);
  assert.equal(openai.body.error.code, 'no_chat_template');
  assert.match(openai.body.error.message, /no chat template.*--chat-template/);
  const ollama = await post('/api/chat', { model, messages, stream: false });
  assert.equal(ollama.status, 400);
  assert.match(ollama.body.error, /no chat template/);

  const completion = await post('/v1/completions', { model, prompt: 'Hello', max_tokens: 4, temperature: 0 });
  assert.equal(completion.status, 200);
  assert.ok(completion.body.usage.completion_tokens > 0);
  // Without a template, /api/generate gives the model the prompt as it is.
  const generate = await post('/api/generate', { model, prompt: 'Hello', stream: false, options: { num_predict: 4 } });
  assert.equal(generate.status, 200);
  assert.equal(generate.body.done, true);
  const show = await post('/api/show', { model });
  assert.equal(show.body.template, '');
  await idle();
});
