// Tool calling through the official clients, run once per chat template
// (test/serve/CMakeLists.txt: Qwen2.5, Qwen3, DeepSeek-R1 and V3.1, Mistral
// Nemo and Small 3.2): each template writes the tools and calls in its own
// syntax, and kt-serve parses the model's output back into tool_calls.
// The bundled model is untrained, so it calls a tool only when told to
// (tool_choice required or a named function): then the constrained decoder
// makes every reply a valid call, whose arguments ajv validates against the
// tool's schema. A round trip: request with tools -> tool_calls -> a tool
// message -> an answer, streamed and not; parallel_tool_calls; none; the
// Ollama API's tools and history; reasoning_content where the template opens
// a <think> block.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import Ajv from 'ajv';
import { url, idle, metrics } from './server.mjs';

const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
const ollama = new Ollama({ host: url });
const ajv = new Ajv({ strict: false });
let model, template;

before(async () => {
  model = (await client.models.list()).data[0].id;
  template = (await ollama.show({ model })).template;
});

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather for a city.',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 24 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'search_docs',
      description: 'Search the documentation.',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', maxLength: 32 },
          max_results: { type: 'integer', minimum: 1, maximum: 20 },
          filters: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 },
        },
        required: ['query'],
      },
    },
  },
];
const byName = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const question = [{ role: 'user', content: "What's the weather in Paris?" }];

function checkCall(call, what) {
  assert.equal(call.type, 'function', what);
  assert.match(call.id, /^[A-Za-z0-9]{9}$/, `${what}: id`);
  const schema = byName[call.function.name];
  assert.ok(schema, `${what}: unknown function ${call.function.name}`);
  assert.equal(typeof call.function.arguments, 'string', what);
  const args = JSON.parse(call.function.arguments);
  assert.ok(ajv.validate(schema, args), `${what}: ${call.function.arguments}: ${ajv.errorsText()}`);
  return args;
}

async function required(params = {}) {
  return client.chat.completions.create({
    model, messages: question, tools, tool_choice: 'required', max_tokens: 250, ...params,
  });
}

test('tool_choice required: every reply is a valid call of a declared function (greedy and 6 seeds)', async () => {
  for (const seed of [null, 1, 2, 3, 4, 5, 6]) {
    const r = await required(seed === null ? { temperature: 0 } : { temperature: 1, seed });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.ok(c.message.tool_calls.length >= 1);
    for (const call of c.message.tool_calls) checkCall(call, `seed ${seed}`);
  }
  assert.ok((await metrics()).kt_constrained_tokens_total > 0);
});

test('a named function and parallel_tool_calls: false give exactly one call of it', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model, messages: question, tools, max_tokens: 250, temperature: 1, seed,
      tool_choice: { type: 'function', function: { name: 'search_docs' } },
    });
    const calls = r.choices[0].message.tool_calls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.name, 'search_docs');
    checkCall(calls[0], `named, seed ${seed}`);
    const one = await required({ parallel_tool_calls: false, temperature: 1, seed });
    assert.equal(one.choices[0].message.tool_calls.length, 1);
  }
});

test('round trip, not streamed: tools -> tool_calls -> tool message -> answer', async () => {
  const r = await required({ temperature: 0 });
  const msg = r.choices[0].message;
  assert.equal(msg.role, 'assistant');
  assert.ok(msg.content === null || msg.content === '');
  const call = msg.tool_calls[0];
  checkCall(call, 'round trip');
  const messages = [...question, msg,
    { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 18, condition: 'sunny' }) }];
  const answer = await client.chat.completions.create({ model, messages, tools, max_tokens: 12, temperature: 0 });
  const a = answer.choices[0];
  assert.ok(['stop', 'length', 'tool_calls'].includes(a.finish_reason));
  assert.ok(answer.usage.prompt_tokens > r.usage.prompt_tokens);
  // Without tools in the follow-up (tool_choice none), no call can come back.
  const none = await client.chat.completions.create({
    model, messages, tools, tool_choice: 'none', max_tokens: 12, temperature: 0,
  });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.notEqual(none.choices[0].finish_reason, 'tool_calls');
});

test('round trip, streamed: delta.tool_calls chunks, then the answer', async () => {
  const whole = await required({ temperature: 0 });
  const stream = await client.chat.completions.create({
    model, messages: question, tools, tool_choice: 'required', max_tokens: 250, temperature: 0, stream: true,
  });
  const calls = [];
  let finish = null;
  let content = '';
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    content += c.delta.content ?? '';
    for (const d of c.delta.tool_calls ?? []) {
      const at = d.index;
      calls[at] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
      if (d.id) calls[at].id = d.id;
      if (d.function?.name) calls[at].function.name += d.function.name;
      if (d.function?.arguments) calls[at].function.arguments += d.function.arguments;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  assert.equal(calls.length, whole.choices[0].message.tool_calls.length);
  calls.forEach((c, i) => {
    checkCall(c, 'streamed');
    assert.equal(c.function.name, whole.choices[0].message.tool_calls[i].function.name);
    assert.equal(c.function.arguments, whole.choices[0].message.tool_calls[i].function.arguments);
  });
  const messages = [...question, { role: 'assistant', content: null, tool_calls: calls },
    ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"ok": true}' }))];
  const answer = await client.chat.completions.create({ model, messages, tools, max_tokens: 8, temperature: 0, stream: true });
  let done = null;
  for await (const chunk of answer) done = chunk.choices[0]?.finish_reason ?? done;
  assert.ok(['stop', 'length', 'tool_calls'].includes(done));
});

test('history in the shapes clients send: content parts, null content, arguments as text', async () => {
  const messages = [
    { role: 'system', content: [{ type: 'text', text: 'You are' }, { type: 'text', text: 'helpful.' }] },
    { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo and Rome?' }] },
    { role: 'assistant', content: null, tool_calls: [
      { id: 'callA0001', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } },
      { id: 'callB0002', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Rome"}' } }] },
    { role: 'tool', tool_call_id: 'callA0001', content: '{"temperature": 3}' },
    { role: 'tool', tool_call_id: 'callB0002', content: [{ type: 'text', text: '{"temperature": 21}' }] },
  ];
  const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 6, temperature: 0 });
  assert.ok(r.usage.prompt_tokens > 20);
});

test('malformed tools and tool choices are a 400 naming the field', async () => {
  const bad = async (params, pattern) => {
    await assert.rejects(client.chat.completions.create({ model, messages: question, max_tokens: 4, ...params }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.match(e.message, pattern);
      return true;
    });
  };
  await bad({ tools: [{ type: 'function', function: { parameters: {} } }] }, /tools\[0\]\.function\.name/);
  await bad({ tools: [{ type: 'function', function: { name: 'a b' } }] }, /may hold only/);
  await bad({ tools: 'get_weather' }, /'tools' must be a list/);
  await bad({ tools: [tools[0], tools[0]] }, /two tools are called/);
  await bad({ tools, tool_choice: 'always' }, /tool_choice/);
  await bad({ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, /not among the tools/);
  await bad({ tool_choice: 'required' }, /no tools/);
  await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {
    x: { type: 'string', contentEncoding: 'base64' } } } } }], tool_choice: 'required' }, /unsupported keyword 'contentEncoding'/);
  await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }], tool_choice: 'required' },
    /must be an object schema/);
  await bad({ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, /cannot be combined/);
  await idle();
});

test('Ollama: tools, a history with tool_calls and a tool result', async () => {
  const messages = [
    ...question,
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: '{"temperature": 18}', tool_name: 'get_weather' },
  ];
  const r = await ollama.chat({ model, messages, tools, options: { temperature: 0, num_predict: 8 } });
  assert.equal(r.done, true);
  assert.equal(typeof r.message.content, 'string');
  const show = await ollama.show({ model });
  assert.ok(show.capabilities.includes('tools'));
});

test('reasoning: where the template opens a <think> block, the reply is reasoning_content (a flag turns it off)', async (t) => {
  // DeepSeek-R1's (llama.cpp's copy) ends its generation prompt with "<think>\n" when thinking.
  if (!template.includes("<｜Assistant｜><think>\\n")) return t.skip('this template does not open a think block');
  const kwargs = { chat_template_kwargs: { enable_thinking: true } };
  const r = await client.chat.completions.create({ model, messages: question, max_tokens: 10, temperature: 0, ...kwargs });
  const m = r.choices[0].message;
  // The untrained model never closes the block: everything is reasoning.
  assert.ok(m.reasoning_content && m.reasoning_content.length > 0, JSON.stringify(m));
  assert.equal(m.content, '');
  const off = await client.chat.completions.create({
    model, messages: question, max_tokens: 10, temperature: 0, reasoning_format: 'none', ...kwargs });
  assert.equal(off.choices[0].message.reasoning_content, undefined);
  assert.equal(off.choices[0].message.content, m.reasoning_content);
  const stream = await client.chat.completions.create({
    model, messages: question, max_tokens: 10, temperature: 0, stream: true, ...kwargs });
  let reasoning = '';
  for await (const chunk of stream) reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
  assert.equal(reasoning, m.reasoning_content);
  // Ollama's default repeat_penalty (1.1) would change the greedy reply.
  const o = await ollama.chat({ model, messages: question, think: true,
                                options: { temperature: 0, repeat_penalty: 1, num_predict: 10 } });
  assert.equal(o.message.thinking, m.reasoning_content);
  assert.equal(o.message.content, '');
});
