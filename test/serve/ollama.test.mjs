// kt-serve through the `ollama` npm client: tags, version, show, ps, chat and
// generate streamed (NDJSON) and not (the two agree when greedy), the
// returned context continuing a conversation, aborting a stream, and errors
// as the client's ResponseError with the HTTP status.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { url, idle } from './server.mjs';

const ollama = new Ollama({ host: url });
let model;

before(async () => {
  model = (await ollama.list()).models[0].name;
});

const greedy = { temperature: 0, num_predict: 20 };
const messages = [{ role: 'user', content: 'Why is the sky blue?' }];

async function collect(stream, pick) {
  let text = '';
  let last = null;
  for await (const part of stream) {
    text += pick(part);
    last = part;
  }
  return { text, last };
}

test('tags, ps, version and show describe the model', async () => {
  const tags = await ollama.list();
  assert.equal(tags.models.length, 1);
  const m = tags.models[0];
  assert.equal(m.details.format, 'gguf');
  assert.ok(m.size > 0);
  assert.ok(m.details.family.length > 0);
  assert.match(m.modified_at, /^\d{4}-\d\d-\d\dT/);
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, model);
  const v = await ollama.version();
  assert.match(v.version, /^\d+\.\d+\.\d+$/);
  const show = await ollama.show({ model });
  assert.equal(show.details.format, 'gguf');
  assert.ok(show.template.length > 0, 'the chat template kt-serve uses');
  assert.ok(show.model_info['general.parameter_count'] > 0);
  // Ollama's spelling with the default tag names the same model.
  await ollama.show({ model: `${model}:latest` });
});

test('chat, not streamed', async () => {
  const r = await ollama.chat({ model, messages, options: greedy });
  assert.equal(r.model, model);
  assert.equal(r.message.role, 'assistant');
  assert.ok(r.message.content.length > 0);
  assert.equal(r.done, true);
  assert.ok(['stop', 'length'].includes(r.done_reason));
  assert.ok(r.eval_count > 0 && r.eval_count <= 20);
  assert.ok(r.prompt_eval_count > 0 || r.eval_count > 0);
  assert.ok(r.total_duration > 0);
});

test('chat, streamed: the parts add up to the same greedy reply', async () => {
  const whole = await ollama.chat({ model, messages, options: greedy });
  const { text, last } = await collect(await ollama.chat({ model, messages, options: greedy, stream: true }),
                                      (p) => p.message.content);
  assert.equal(text, whole.message.content);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, whole.done_reason);
  assert.equal(last.eval_count, whole.eval_count);
});

test('generate, streamed and not, and its context continues the conversation', async () => {
  const prompt = 'Write a haiku about autumn.';
  const whole = await ollama.generate({ model, prompt, options: greedy });
  assert.ok(whole.response.length > 0);
  assert.equal(whole.done, true);
  assert.ok(Array.isArray(whole.context) && whole.context.length > 0);
  const { text, last } = await collect(await ollama.generate({ model, prompt, options: greedy, stream: true }),
                                      (p) => p.response);
  assert.equal(text, whole.response);
  assert.deepEqual(last.context, whole.context);
  // raw: the prompt as is, no template.
  const raw = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options: greedy });
  assert.ok(raw.response.length > 0);
  // The context of the first reply goes in front of the next prompt.
  const next = await ollama.generate({ model, prompt: 'Another one.', context: whole.context, options: greedy });
  assert.ok(next.context.length > whole.context.length);
  // stop strings end the text before them
  const stop = whole.response.slice(4, 6);
  const stopped = await ollama.generate({ model, prompt, options: { ...greedy, stop: [stop] } });
  assert.equal(stopped.response, whole.response.slice(0, whole.response.indexOf(stop)));
  assert.equal(stopped.done_reason, 'stop');
});

test('an empty request loads the model, as Ollama answers it', async () => {
  const r = await ollama.generate({ model, prompt: '' });
  assert.equal(r.done, true);
  assert.equal(r.done_reason, 'load');
});

test('errors are ResponseErrors with the HTTP status', async () => {
  const expectStatus = (status) => (e) => {
    assert.equal(e.name, 'ResponseError', String(e));
    assert.equal(e.status_code, status);
    assert.equal(typeof e.error, 'string');
    return true;
  };
  await assert.rejects(ollama.chat({ model: 'no-such-model', messages }), expectStatus(404));
  await assert.rejects(ollama.show({ model: 'no-such-model' }), expectStatus(404));
  await assert.rejects(ollama.chat({ model, messages, options: { temperature: 'hot' } }), expectStatus(400));
  await assert.rejects(ollama.chat({ model, messages: [{ role: 'wizard', content: 'x' }] }), expectStatus(400));
  await assert.rejects(ollama.generate({ model, prompt: 'x', format: { type: 'object', oneOf: [] } }), expectStatus(400));
  await assert.rejects(ollama.generate({ model, prompt: 'x', format: 'yaml' }), expectStatus(400));
  await idle();
});

test('an aborted stream frees its slot', async () => {
  const stream = await ollama.chat({ model, messages, stream: true, options: { temperature: 0, num_predict: -1 } });
  let n = 0;
  await assert.rejects(async () => {
    for await (const part of stream) {
      if (part.message.content && ++n === 3) stream.abort();
    }
  }, (e) => e.name === 'AbortError');
  await idle();
});
