// lumen chat page: keeps the conversation (an OpenAI messages array) in the page, streams each
// reply from POST /v1/chat/completions (fetch + ReadableStream over server-sent events), stops a
// reply by aborting the fetch (the server cancels the request when the connection closes), and
// shows each reply's time to first token and generation rate. No framework, no network but
// this server's own routes.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const ui = {
    transcript: $('transcript'), empty: $('empty'), input: $('input'), send: $('send'),
    stop: $('stop'), composer: $('composer'), model: $('model'), status: $('status'),
    newChat: $('new-chat'), settings: $('settings'), settingsToggle: $('settings-toggle'),
    settingsClose: $('settings-close'), settingsReset: $('settings-reset'), system: $('system'),
    temperature: $('temperature'), temperatureRange: $('temperature-range'),
    temperatureOut: $('temperature-out'), maxTokens: $('max-tokens'), apiKey: $('api-key'),
  };

  const DEFAULTS = { system: '', temperature: 0.8, maxTokens: 256 };
  const SETTINGS_KEY = 'lumen.chat.settings';
  const API_KEY_KEY = 'lumen.chat.apiKey';  // sessionStorage: this tab only

  // Everything the page knows; window.lumenChat exposes it to tests and the console.
  const state = {
    messages: [],        // [{role, content}] sent whole with every request (system prompt excluded)
    busy: false,
    controller: null,    // AbortController of the reply in flight
    model: null,         // id from GET /v1/models
    replies: [],         // per reply: {state, ttftMs, tokPerSec, tokens, finish, error}
  };
  window.lumenChat = state;

  // ---------------------------------------------------------------- settings
  function readSettings() {
    let s = {};
    try { s = JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}') || {}; } catch (_) { s = {}; }
    return { ...DEFAULTS, ...s };
  }
  function showSettings(s) {
    ui.system.value = s.system;
    ui.temperature.value = s.temperature;
    ui.temperatureRange.value = s.temperature;
    ui.temperatureOut.textContent = Number(s.temperature).toFixed(2);
    ui.maxTokens.value = s.maxTokens;
  }
  function currentSettings() {
    const t = parseFloat(ui.temperature.value);
    const n = parseInt(ui.maxTokens.value, 10);
    return {
      system: ui.system.value,
      temperature: Number.isFinite(t) ? Math.min(Math.max(t, 0), 2) : DEFAULTS.temperature,
      maxTokens: Number.isFinite(n) && n > 0 ? n : DEFAULTS.maxTokens,
    };
  }
  function saveSettings() {
    const s = currentSettings();
    ui.temperatureOut.textContent = s.temperature.toFixed(2);
    try { localStorage.setItem(SETTINGS_KEY, JSON.stringify(s)); } catch (_) { /* private mode */ }
  }
  ui.temperatureRange.addEventListener('input', () => {
    ui.temperature.value = ui.temperatureRange.value;
    saveSettings();
  });
  ui.temperature.addEventListener('input', () => {
    ui.temperatureRange.value = ui.temperature.value;
    saveSettings();
  });
  ui.system.addEventListener('input', saveSettings);
  ui.maxTokens.addEventListener('input', saveSettings);
  ui.settingsReset.addEventListener('click', () => { showSettings(DEFAULTS); saveSettings(); });

  // With `lumen serve --api-key`, every API route wants `Authorization: Bearer KEY` (the page
  // and /health do not): the key comes from the settings panel.
  function apiKey() { return ui.apiKey.value.trim(); }
  function apiHeaders(extra) {
    const h = { ...(extra || {}) };
    if (apiKey()) h.Authorization = 'Bearer ' + apiKey();
    return h;
  }
  function askForKey() {
    setSettingsOpen(true);
    ui.apiKey.focus();
  }
  try { ui.apiKey.value = sessionStorage.getItem(API_KEY_KEY) || ''; } catch (_) { /* no storage */ }
  ui.apiKey.addEventListener('change', () => {
    try { sessionStorage.setItem(API_KEY_KEY, apiKey()); } catch (_) { /* no storage */ }
    loadModel();
  });

  function setSettingsOpen(open) {
    ui.settings.hidden = !open;
    ui.settingsToggle.setAttribute('aria-expanded', String(open));
  }
  ui.settingsToggle.addEventListener('click', () => setSettingsOpen(ui.settings.hidden));
  ui.settingsClose.addEventListener('click', () => setSettingsOpen(false));

  // ---------------------------------------------------------------- transcript
  function nearBottom() {
    const t = ui.transcript;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
  }
  function scrollDown(force) {
    if (force || nearBottom()) ui.transcript.scrollTop = ui.transcript.scrollHeight;
  }
  function addMessage(role, text) {
    ui.empty.hidden = true;
    const el = document.createElement('div');
    el.className = 'msg ' + role;
    const who = document.createElement('div');
    who.className = 'role';
    who.textContent = role === 'user' ? 'You' : role === 'system' ? 'System' : 'Assistant';
    const content = document.createElement('div');
    content.className = 'content';
    content.textContent = text;
    el.append(who, content);
    ui.transcript.append(el);
    scrollDown(true);
    return el;
  }
  function setStats(el, parts) {
    let stats = el.querySelector('.stats');
    if (!stats) {
      stats = document.createElement('div');
      stats.className = 'stats';
      el.append(stats);
    }
    stats.replaceChildren(...parts.map(([text, cls]) => {
      const span = document.createElement('span');
      span.textContent = text;
      if (cls) span.className = cls;
      return span;
    }));
  }
  function fmtMs(ms) {
    return ms >= 10000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms) + ' ms';
  }

  // ---------------------------------------------------------------- server
  async function checkServer() {
    try {
      const r = await fetch('health', { cache: 'no-store' });
      ui.status.dataset.state = r.ok ? 'ok' : 'down';
      ui.status.title = r.ok ? 'server ready' : 'server answered ' + r.status;
    } catch (_) {
      ui.status.dataset.state = 'down';
      ui.status.title = 'server unreachable';
    }
  }
  async function loadModel() {
    try {
      const r = await fetch('v1/models', { cache: 'no-store', headers: apiHeaders() });
      if (r.status === 401 || r.status === 403) {
        state.model = null;
        ui.model.textContent = apiKey() ? '(API key refused)' : '(API key needed)';
        askForKey();
        return;
      }
      const j = await r.json();
      const m = j && Array.isArray(j.data) && j.data[0];
      state.model = m ? String(m.id) : null;
      // a path-like id (llama-server's) shows as its file name; the full id is the tooltip
      ui.model.textContent = state.model ? state.model.split('/').pop() : '(no model)';
      ui.model.title = state.model || '';
    } catch (_) {
      ui.model.textContent = '(server unreachable)';
    }
  }

  // Server-sent events from a fetch body: yields each event's data (data: lines joined by \n).
  // Line ends may be \n, \r\n or \r; a \r at the end of a chunk waits for the next one.
  async function* sseData(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let raw = '';   // undecided tail (a trailing \r)
    let buf = '';   // normalized to \n
    const blocks = function* (final) {
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0 || (final && buf.trim())) {
        const block = i >= 0 ? buf.slice(0, i) : buf;
        buf = i >= 0 ? buf.slice(i + 2) : '';
        const data = block.split('\n').filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n');
        if (data) yield data;
      }
    };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        raw += done ? decoder.decode() : decoder.decode(value, { stream: true });
        const keep = !done && raw.endsWith('\r') ? 1 : 0;
        buf += raw.slice(0, raw.length - keep).replace(/\r\n?/g, '\n');
        raw = raw.slice(raw.length - keep);
        yield* blocks(done);
        if (done) break;
      }
    } finally {
      reader.cancel().catch(() => {});  // after [DONE], an error or a stop: let the body go
    }
  }

  async function errorMessage(resp) {
    let text = '';
    try { text = await resp.text(); } catch (_) { /* body lost */ }
    try {
      const j = JSON.parse(text);
      if (j && j.error) return typeof j.error === 'string' ? j.error : (j.error.message || text);
    } catch (_) { /* not JSON */ }
    return text.trim().slice(0, 300) || resp.statusText || 'request failed';
  }

  // ---------------------------------------------------------------- one turn
  async function send(text) {
    const settings = currentSettings();
    const userEl = addMessage('user', text);
    state.messages.push({ role: 'user', content: text });
    const el = addMessage('assistant', '');
    const content = el.querySelector('.content');
    const reply = { state: 'streaming', ttftMs: null, tokPerSec: null, tokens: 0, finish: null, error: null };
    state.replies.push(reply);
    el.dataset.state = 'streaming';
    setStats(el, [['waiting for the first token…']]);
    setBusy(true);

    const messages = settings.system.trim()
      ? [{ role: 'system', content: settings.system }, ...state.messages] : [...state.messages];
    const body = {
      messages, stream: true, stream_options: { include_usage: true },
      temperature: settings.temperature, max_tokens: settings.maxTokens,
    };
    if (state.model) body.model = state.model;

    const controller = new AbortController();
    state.controller = controller;
    const t0 = performance.now();
    let tFirst = null, tLast = null, chunks = 0, usage = null, out = '';
    try {
      const resp = await fetch('v1/chat/completions', {
        method: 'POST', headers: apiHeaders({ 'Content-Type': 'application/json' }),
        body: JSON.stringify(body), signal: controller.signal,
      });
      if (resp.status === 401 || resp.status === 403) askForKey();
      if (!resp.ok) throw new Error(`HTTP ${resp.status}: ${await errorMessage(resp)}`);
      for await (const data of sseData(resp.body)) {
        if (data === '[DONE]') break;
        let j;
        try { j = JSON.parse(data); } catch (_) { continue; }
        if (j.error) throw new Error(j.error.message || String(j.error));
        const choice = j.choices && j.choices[0];
        const delta = choice && choice.delta && choice.delta.content;
        if (delta) {
          const now = performance.now();
          if (tFirst === null) tFirst = now;
          tLast = now;
          chunks++;
          out += delta;
          const stick = nearBottom();
          content.textContent = out;
          if (stick) scrollDown(true);
          reply.ttftMs = tFirst - t0;
          reply.tokens = chunks;
          setStats(el, [[`TTFT ${fmtMs(reply.ttftMs)}`], [`${chunks} tokens…`]]);
        }
        if (choice && choice.finish_reason) reply.finish = choice.finish_reason;
        if (j.usage) usage = j.usage;
      }
      reply.state = 'done';
    } catch (e) {
      if (e.name === 'AbortError') {
        reply.state = 'stopped';
      } else {
        reply.state = 'error';
        reply.error = String(e.message || e);
      }
    }
    const tEnd = performance.now();
    if (state.controller === controller) state.controller = null;

    // tokens: the server's count when it sent usage, else one per content chunk
    if (usage && Number.isFinite(usage.completion_tokens)) reply.tokens = usage.completion_tokens;
    if (tFirst !== null && reply.tokens > 1 && tLast > tFirst) {
      // generation rate after the first token (TTFT is shown on its own)
      reply.tokPerSec = ((reply.tokens - 1) * 1000) / (tLast - tFirst);
    }
    el.dataset.state = reply.state;
    const parts = [];
    if (reply.state === 'stopped') parts.push(['stopped', 'tag stopped']);
    if (reply.state === 'error') parts.push(['error', 'tag error']);
    if (reply.ttftMs !== null) parts.push([`TTFT ${fmtMs(reply.ttftMs)}`]);
    if (reply.tokPerSec !== null) parts.push([`${reply.tokPerSec.toFixed(1)} tok/s`]);
    if (reply.tokens) parts.push([`${reply.tokens} tokens`]);
    parts.push([`total ${fmtMs(tEnd - t0)}`]);
    if (reply.finish && reply.state === 'done') parts.push([reply.finish, 'tag']);
    setStats(el, parts);

    if (out) {
      // a stopped reply stays in the conversation as far as it got
      state.messages.push({ role: 'assistant', content: out });
      if (reply.state === 'error') content.textContent = out + '\n\n[' + reply.error + ']';
    } else {
      // nothing came back: the turn leaves the conversation (roles keep alternating)
      state.messages.pop();
      userEl.classList.add('dropped');
      el.classList.add('dropped');
      content.textContent = reply.state === 'stopped' ? '(stopped before the first token)'
        : reply.state === 'error' ? reply.error : '(empty reply)';
      if (reply.state !== 'done' && !ui.input.value) { ui.input.value = text; autosize(); }
    }
    if (reply.state === 'error') checkServer();
    setBusy(false);
  }

  function setBusy(busy) {
    state.busy = busy;
    document.body.dataset.busy = String(busy);
    ui.send.hidden = busy;
    ui.stop.hidden = !busy;
    ui.newChat.disabled = busy;
    if (!busy) ui.input.focus();
  }

  function stop() {
    if (state.controller) state.controller.abort();
  }

  // ---------------------------------------------------------------- composer
  function autosize() {
    ui.input.style.height = 'auto';
    ui.input.style.height = Math.min(ui.input.scrollHeight + 2, window.innerHeight * 0.4) + 'px';
  }
  ui.input.addEventListener('input', autosize);
  ui.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      ui.composer.requestSubmit();
    }
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      if (state.busy) stop();
      else if (!ui.settings.hidden) setSettingsOpen(false);
    }
  });
  ui.composer.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = ui.input.value.trim();
    if (!text || state.busy) return;
    ui.input.value = '';
    autosize();
    send(text);
  });
  ui.stop.addEventListener('click', stop);
  ui.newChat.addEventListener('click', () => {
    if (state.busy) return;
    state.messages.length = 0;
    state.replies.length = 0;
    ui.transcript.querySelectorAll('.msg').forEach((m) => m.remove());
    ui.empty.hidden = false;
    ui.input.focus();
  });

  // ---------------------------------------------------------------- start
  showSettings(readSettings());
  setSettingsOpen(window.matchMedia('(min-width: 1100px)').matches);
  setBusy(false);
  checkServer();
  loadModel();
})();
