// Anthropic's Messages API (POST /v1/messages) through the official
// @anthropic-ai/sdk: text replies streamed and not (the same greedy text),
// stop sequences, tool use (tool_choice any / a named tool: tool_use blocks
// whose input ajv validates against input_schema), the round trip with a
// tool_result, and errors as the SDK's own classes.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { url, idle } from './server.mjs';

const client = new Anthropic({ baseURL: url, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: false });
let model;

before(async () => {
  model = (await (await fetch(url + '/v1/models')).json()).data[0].id;
});

const tools = [{
  name: 'get_weather',
  description: 'Get the current weather for a city.',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
    required: ['city'],
  },
}];
const messages = [{ role: 'user', content: "What's the weather in Paris?" }];

test('a text reply, streamed and not: the same greedy text, usage, stop reasons', async () => {
  const r = await client.messages.create({ model, max_tokens: 16, temperature: 0, system: 'Be brief.', messages });
  assert.equal(r.type, 'message');
  assert.equal(r.role, 'assistant');
  assert.match(r.id, /^msg_/);
  assert.equal(r.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(r.stop_reason));
  assert.ok(r.usage.input_tokens + r.usage.cache_read_input_tokens > 0);
  assert.ok(r.usage.output_tokens > 0 && r.usage.output_tokens <= 16);
  const stream = client.messages.stream({ model, max_tokens: 16, temperature: 0, system: 'Be brief.', messages });
  const kinds = new Set();
  stream.on('streamEvent', (e) => kinds.add(e.type));
  const final = await stream.finalMessage();
  assert.equal(final.content[0].text, r.content[0].text);
  assert.equal(final.stop_reason, r.stop_reason);
  for (const k of ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
    assert.ok(kinds.has(k), `event ${k}`);
});

test('stop_sequences end the text with stop_reason stop_sequence', async () => {
  const full = await client.messages.create({ model, max_tokens: 40, temperature: 0, messages });
  const text = full.content[0].text;
  assert.ok(text.length >= 8, JSON.stringify(text));
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
  const r = await client.messages.create({ model, max_tokens: 40, temperature: 0, messages, stop_sequences: [stop] });
  assert.equal(r.content[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(r.stop_reason, 'stop_sequence');
  assert.equal(r.stop_sequence, stop);
});

test('tool use: tool_choice any gives valid tool_use blocks, then a tool_result round trip', async () => {
  for (let run = 0; run < 2; ++run) {
    const r = await client.messages.create({
      model, max_tokens: 200, temperature: 1, messages, tools, tool_choice: { type: 'any' }, metadata: { user_id: 'kt' },
    });
    assert.equal(r.stop_reason, 'tool_use', JSON.stringify(r.content));
    const uses = r.content.filter((b) => b.type === 'tool_use');
    assert.ok(uses.length >= 1);
    for (const u of uses) {
      assert.equal(u.name, 'get_weather');
      assert.ok(ajv.validate(tools[0].input_schema, u.input), `${JSON.stringify(u.input)}: ${ajv.errorsText()}`);
    }
  }
  const r = await client.messages.create({
    model, max_tokens: 200, temperature: 0, messages, tools,
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
  });
  const use = r.content.find((b) => b.type === 'tool_use');
  assert.equal(r.content.filter((b) => b.type === 'tool_use').length, 1);
  const history = [...messages, { role: 'assistant', content: r.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"temperature": 18}' }] }];
  const answer = await client.messages.create({ model, max_tokens: 10, temperature: 0, messages: history, tools });
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(answer.stop_reason));
  // Streamed: the tool_use block's input arrives as input_json_delta.
  const stream = client.messages.stream({ model, max_tokens: 200, temperature: 0, messages, tools, tool_choice: { type: 'any' } });
  const final = await stream.finalMessage();
  const streamed = final.content.filter((b) => b.type === 'tool_use');
  assert.ok(streamed.length >= 1);
  assert.ok(ajv.validate(tools[0].input_schema, streamed[0].input));
  assert.equal(final.stop_reason, 'tool_use');
});

test('errors are the SDK\'s classes', async () => {
  await assert.rejects(client.messages.create({ model, messages }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, String(e));
    assert.match(e.message, /max_tokens/);
    return true;
  });
  await assert.rejects(client.messages.create({ model: 'claude-nope', max_tokens: 4, messages }), Anthropic.NotFoundError);
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages: [{ role: 'system', content: 'x' }] }),
    Anthropic.BadRequestError);
  await assert.rejects(client.messages.create({
    model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'aGk=' } }] }],
  }), Anthropic.BadRequestError);
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages, tools, tool_choice: { type: 'tool', name: 'nope' } }),
    Anthropic.BadRequestError);
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages,
    tools: [{ name: 'f', input_schema: { type: 'object', properties: { a: { not: {} } } } }], tool_choice: { type: 'any' } }),
    (e) => e instanceof Anthropic.BadRequestError && /unsupported keyword 'not'/.test(e.message));
  await idle();
});
