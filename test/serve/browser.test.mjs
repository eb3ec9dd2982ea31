// The web chat page in a real browser: headless Chromium (Debian's, found by
// run.sh: KT_CHROMIUM) driven by puppeteer-core opens kt-serve's page, sends
// a message with greedy settings, waits for the streamed reply, sends a
// second turn, stops a third mid-stream, and saves a screenshot
// ($KT_SERVE_OUT/browser.png). The page must show the reply text and tokens
// per second and log no console errors, failed requests or page errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';
import { url, outDir, idle } from './server.mjs';

let browser;
let page;
const problems = [];

before(async () => {
  browser = await puppeteer.launch({
    executablePath: process.env.KT_CHROMIUM,
    headless: true,
    // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 760 });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    // The stop button aborts its own request on purpose.
    if (!r.url().endsWith('/v1/chat/completions')) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
});

after(async () => {
  if (browser) await browser.close();
});

async function setField(id, value) {
  await page.$eval(`#${id}`, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event('change'));
  }, String(value));
}

async function send(text) {
  await page.type('#input', text);
  await page.click('#send');
}

// Waits for the n-th assistant message (1-based) to reach one of the states.
async function replyState(n, states, timeout = 60_000) {
  await page.waitForFunction((n, states) => {
    const m = document.querySelectorAll('.message.assistant')[n - 1];
    return m && states.includes(m.dataset.state);
  }, { timeout }, n, states);
  return page.evaluate((n) => {
    const m = document.querySelectorAll('.message.assistant')[n - 1];
    return { state: m.dataset.state, raw: m.dataset.raw ?? '', text: m.querySelector('.content').innerText,
             meta: m.querySelector('.meta')?.textContent ?? '' };
  }, n);
}

test('the page loads with its scripts and names the model', { timeout: 60_000 }, async () => {
  const res = await page.goto(url + '/', { waitUntil: 'networkidle0' });
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-security-policy'], /script-src 'self'/);
  await page.waitForFunction(() => !document.querySelector('#model').textContent.includes('connecting'));
  const model = await page.$eval('#model', (el) => el.textContent);
  assert.match(model, /tiny-dsv3/);
  assert.equal(await page.evaluate(() => typeof marked.parse === 'function' && typeof DOMPurify.sanitize), 'function');
});

test('a message gets a streamed reply, and the conversation goes on', { timeout: 120_000 }, async () => {
  await setField('temperature', 0);
  await setField('max-tokens', 24);
  await send('Hello! Who are you?');
  const first = await replyState(1, ['done', 'error']);
  assert.equal(first.state, 'done', first.meta);
  assert.ok(first.raw.length > 0, 'the reply has text');
  assert.ok(first.text.trim().length > 0, 'the reply is shown');
  assert.match(first.meta, /\d+ tokens · [\d.]+ tok\/s/);
  assert.match(await page.$eval('#status', (el) => el.textContent), /tok\/s/);

  await send('Tell me more.');
  const second = await replyState(2, ['done', 'error']);
  assert.equal(second.state, 'done', second.meta);
  assert.equal(await page.$$eval('.message.user', (els) => els.length), 2);
  await page.screenshot({ path: `${outDir}/browser.png`, fullPage: true });
});

test('the stop button ends a reply mid-stream and frees the server', { timeout: 120_000 }, async () => {
  await setField('max-tokens', 100000);
  await send('Now talk for as long as you can.');
  await page.waitForFunction(() => {
    const m = document.querySelectorAll('.message.assistant')[2];
    return m && (m.dataset.raw ?? '').length > 0;
  }, { timeout: 60_000 });
  await page.click('#stop');
  const third = await replyState(3, ['stopped', 'done', 'error']);
  assert.equal(third.state, 'stopped');
  await idle(5000);
  assert.equal(await page.$eval('#send', (el) => el.disabled), false);
});

test('no console errors, failed requests or page errors', () => {
  assert.deepEqual(problems, []);
});
