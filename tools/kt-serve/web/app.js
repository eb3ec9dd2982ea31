// kt-serve's chat page: talks to this server's OpenAI endpoint
// (/v1/chat/completions, streamed as server-sent events), keeps the
// conversation in memory, renders replies as markdown (marked) sanitized by
// DOMPurify, and shows tokens per second. Settings stay in localStorage.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const SETTINGS = ['system', 'temperature', 'max-tokens', 'api-key'];
  // Model output is untrusted: no scripts, styles, frames, forms or remote
  // images (the page's CSP would refuse them anyway, noisily).
  const PURIFY = {
    FORBID_TAGS: ['style', 'img', 'iframe', 'form', 'input', 'button', 'svg', 'math', 'video', 'audio', 'source'],
    FORBID_ATTR: ['style'],
  };

  const state = {
    history: [],        // [{role, content}] of the conversation so far
    controller: null,   // AbortController of the reply being streamed
    model: null,
  };

  function headers() {
    const h = { 'Content-Type': 'application/json' };
    const key = $('api-key').value.trim();
    if (key) h.Authorization = 'Bearer ' + key;
    return h;
  }

  function setStatus(text) { $('status').textContent = text; }

  function loadSettings() {
    for (const id of SETTINGS) {
      const v = localStorage.getItem('kt-serve.' + id);
      if (v !== null) $(id).value = v;
      $(id).addEventListener('change', () => localStorage.setItem('kt-serve.' + id, $(id).value));
    }
  }

  async function loadModel() {
    try {
      const res = await fetch('/v1/models', { headers: headers() });
      if (res.status === 401) {
        $('model').textContent = 'API key needed (Settings)';
        return;
      }
      const body = await res.json();
      state.model = body.data && body.data[0] ? body.data[0].id : null;
      const meta = body.data && body.data[0] && body.data[0].meta;
      $('model').textContent = state.model
        ? state.model + (meta ? ` · ${meta.arch} · context ${meta.n_ctx}` : '')
        : 'no model';
    } catch (e) {
      $('model').textContent = 'server unreachable';
    }
  }

  function addMessage(role) {
    const el = document.createElement('div');
    el.className = 'message ' + role;
    const content = document.createElement('div');
    content.className = 'content';
    el.appendChild(content);
    $('messages').appendChild(el);
    return el;
  }

  function renderMarkdown(el, text) {
    el.querySelector('.content').innerHTML = DOMPurify.sanitize(marked.parse(text), PURIFY);
    el.dataset.raw = text;
  }

  function setMeta(el, text) {
    let meta = el.querySelector('.meta');
    if (!meta) {
      meta = document.createElement('div');
      meta.className = 'meta';
      el.appendChild(meta);
    }
    meta.textContent = text;
  }

  function scrollDown() { $('messages').scrollTop = $('messages').scrollHeight; }

  function setBusy(busy) {
    $('send').disabled = busy;
    $('stop').hidden = !busy;
    $('new-chat').disabled = busy;
  }

  function requestBody() {
    const messages = [];
    const system = $('system').value.trim();
    if (system) messages.push({ role: 'system', content: system });
    messages.push(...state.history);
    const body = { messages, stream: true, stream_options: { include_usage: true } };
    if (state.model) body.model = state.model;
    const temperature = parseFloat($('temperature').value);
    if (Number.isFinite(temperature)) body.temperature = Math.min(Math.max(temperature, 0), 2);
    const maxTokens = parseInt($('max-tokens').value, 10);
    if (Number.isFinite(maxTokens) && maxTokens > 0) body.max_tokens = maxTokens;
    return body;
  }

  // Splits a server-sent event stream into the JSON of its data lines.
  async function* sseData(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const data = line.slice(6);
          if (data === '[DONE]') return;
          yield JSON.parse(data);
        }
      }
    }
  }

  async function send(text) {
    state.history.push({ role: 'user', content: text });
    const userEl = addMessage('user');
    userEl.querySelector('.content').textContent = text;
    const el = addMessage('assistant');
    el.dataset.state = 'streaming';
    scrollDown();

    const controller = new AbortController();
    state.controller = controller;
    setBusy(true);
    setStatus('waiting for the first token…');
    let reply = '';
    let pieces = 0;
    let first = 0;
    let usage = null;
    let timings = null;
    let pending = false;
    const show = () => {
      pending = false;
      if (el.dataset.state !== 'streaming') return;  // the final render is done
      renderMarkdown(el, reply);
      const secs = (performance.now() - first) / 1000;
      if (pieces > 1 && secs > 0) setStatus(`${pieces} tokens · ${((pieces - 1) / secs).toFixed(1)} tok/s`);
      scrollDown();
    };
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST', headers: headers(), body: JSON.stringify(requestBody()), signal: controller.signal,
      });
      if (!res.ok) {
        const err = await res.json().catch(() => null);
        throw new Error((err && err.error && err.error.message) || `HTTP ${res.status}`);
      }
      for await (const chunk of sseData(res)) {
        if (chunk.error) throw new Error(chunk.error.message || 'the server failed');
        if (chunk.usage) usage = chunk.usage;
        if (chunk.timings) timings = chunk.timings;
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && delta.content) {
          if (!first) first = performance.now();
          reply += delta.content;
          ++pieces;
          if (!pending) {
            pending = true;
            requestAnimationFrame(show);
          }
        }
      }
      renderMarkdown(el, reply);
      el.dataset.state = 'done';
      const n = usage ? usage.completion_tokens : pieces;
      const tps = timings && timings.predicted_per_second ? timings.predicted_per_second
        : (first && pieces > 1 ? (pieces - 1) / ((performance.now() - first) / 1000) : 0);
      const summary = `${n} tokens · ${tps.toFixed(1)} tok/s`;
      setMeta(el, summary);
      setStatus(summary);
    } catch (e) {
      renderMarkdown(el, reply);
      if (e.name === 'AbortError') {
        el.dataset.state = 'stopped';
        setMeta(el, `${pieces} tokens`);
        setStatus('stopped');
      } else {
        el.dataset.state = 'error';
        el.classList.add('error');
        setMeta(el, e.message);
        setStatus('error: ' + e.message);
      }
    } finally {
      // What was said stays in the conversation, a stopped reply too.
      if (reply || el.dataset.state === 'done') state.history.push({ role: 'assistant', content: reply });
      else state.history.pop();
      state.controller = null;
      setBusy(false);
      scrollDown();
    }
  }

  function init() {
    loadSettings();
    loadModel();
    $('api-key').addEventListener('change', loadModel);
    $('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      const text = $('input').value.trim();
      if (!text || state.controller) return;
      $('input').value = '';
      send(text);
    });
    $('input').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        $('composer').requestSubmit();
      }
    });
    $('stop').addEventListener('click', () => { if (state.controller) state.controller.abort(); });
    $('new-chat').addEventListener('click', () => {
      state.history = [];
      $('messages').replaceChildren();
      setStatus('');
      $('input').focus();
    });
    $('input').focus();
  }

  document.addEventListener('DOMContentLoaded', init);
})();
