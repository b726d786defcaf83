"""The chat page at GET / in a real browser (Debian's chromium driven by playwright): it loads
with nothing but the server's own routes, a reply streams in, Stop cancels it, the next turn
sends the whole conversation with the settings, and a screenshot shows the transcript (pixels
checked where the DOM says the bubbles are; the PNGs are kept as artifacts). Run by
tests/server/test_server_web.sh; the model is a base model, so no assertion is about its words.

Env: LUMEN_BIN (the lumen binary), LUMEN_MODEL, LUMEN_WEB_TEST_SERVER=lumen|llama-server
(llama-server serves src/server/web with --path: for developing the page without lumen serve),
LUMEN_TEST_ARTIFACTS (where the screenshots go), LUMEN_CHROMIUM (default /usr/bin/chromium).
"""
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import servers  # noqa: E402

servers.stop_servers_on_sigterm()  # a timeout's SIGTERM still stops the server we started

WEB = ROOT / "src" / "server" / "web"
BIN = Path(os.environ.get("LUMEN_BIN", ROOT / "build" / "lumen"))
KIND = os.environ.get("LUMEN_WEB_TEST_SERVER", "lumen")
ARTIFACTS = Path(os.environ.get("LUMEN_TEST_ARTIFACTS", BIN.parent / "test-artifacts" / "server_web"))
CHROMIUM = os.environ.get("LUMEN_CHROMIUM", "/usr/bin/chromium")
ASAN = servers.is_asan_binary(BIN) if KIND == "lumen" else False
SLOW = 4 if ASAN else 1  # timeouts scale under the sanitizers
# Prompts whose replies run long enough to watch them stream (the default model loops on them);
# a reply that ends before Stop is pressed just moves the test to the next prompt.
PROMPTS = ["Write a short story about a lighthouse keeper.", "Tell me about the history of Rome.",
           "List the numbers from 1 to 100."]


@pytest.fixture(scope="module")
def server():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / ("%s.log" % KIND)
    if KIND == "lumen":
        argv = servers.lumen_serve_argv(BIN, threads=1)
    elif KIND == "llama-server":
        sys.path.insert(0, str(ROOT / "bench"))
        import reference
        argv = servers.llama_server_argv(reference.tool("llama-server"), threads=1, parallel=2,
                                         ctx=8192, static_path=WEB)
    else:
        raise ValueError("LUMEN_WEB_TEST_SERVER=%r: use lumen or llama-server" % KIND)
    srv = servers.Server(KIND, argv, log_path=log)
    srv.start(timeout=120 * SLOW)
    try:
        yield srv
    finally:
        code = srv.stop()
        report = srv.sanitizer_report()
        assert not report, "sanitizer report in %s:\n%s" % (log, report)
        if KIND == "lumen":
            assert code in (0, -2, 130), "lumen serve exited with %s on SIGINT; log %s:\n%s" % (
                code, log, srv.log_tail())


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        # playwright passes --no-sandbox unless chromium_sandbox=True: Debian's chromium refuses
        # to start as root with its sandbox ("Running as root without --no-sandbox is not
        # supported"), and the tests run as root here.
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()


class PageWatch:
    """Every request the page makes, console errors and uncaught exceptions."""

    def __init__(self, page):
        self.requests, self.errors = [], []
        page.on("request", lambda r: self.requests.append(r))
        page.on("pageerror", lambda e: self.errors.append("pageerror: %s" % e))
        page.on("console", lambda m: m.type == "error" and self.errors.append("console: %s" % m.text))

    def chat_bodies(self):
        return [r.post_data_json for r in self.requests
                if r.method == "POST" and r.url.endswith("/v1/chat/completions")]


def open_page(browser, server, width, height):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(60_000 * SLOW)
    watch = PageWatch(page)
    page.goto(server.url + "/")
    page.wait_for_function("window.lumenChat && window.lumenChat.model !== null")
    return ctx, page, watch


def content_len(page, i):
    return page.evaluate("(i) => document.querySelectorAll('.msg.assistant .content')[i]"
                         ".textContent.length", i)


def set_settings(page, temperature, max_tokens, system=None):
    if page.locator("#settings").is_hidden():
        page.click("#settings-toggle")
    page.fill("#temperature", str(temperature))
    page.fill("#max-tokens", str(max_tokens))
    if system is not None:
        page.fill("#system", system)
    page.click("#settings-close")
    assert page.locator("#settings").is_hidden()


def send(page, text):
    page.fill("#input", text)
    page.press("#input", "Enter")


def wait_idle(page):
    page.wait_for_function("!window.lumenChat.busy")


def pixel_stats(browser, png_path, rects):
    """Per rect {x, y, width, height} of the screenshot: its most common colour, the fraction of
    pixels far from that colour (text, borders) and the number of distinct colours. The PNG is
    decoded by the browser itself (a blank page, a canvas), so no image library is needed."""
    import base64
    page = browser.new_page()
    try:
        data = "data:image/png;base64," + base64.b64encode(png_path.read_bytes()).decode()
        return page.evaluate("""async ([src, rects]) => {
            const img = new Image(); img.src = src; await img.decode();
            const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            return rects.map((r) => {
              const x = Math.max(0, Math.floor(r.x)), y = Math.max(0, Math.floor(r.y));
              const w = Math.min(img.width - x, Math.ceil(r.width)), h = Math.min(img.height - y, Math.ceil(r.height));
              if (w <= 0 || h <= 0) return null;
              const d = g.getImageData(x, y, w, h).data, count = new Map();
              for (let i = 0; i < d.length; i += 4) {
                const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
                count.set(k, (count.get(k) || 0) + 1);
              }
              let top = 0, topN = -1;
              for (const [k, n] of count) if (n > topN) { top = k; topN = n; }
              const t = [top >> 16, (top >> 8) & 255, top & 255];
              let far = 0;
              for (let i = 0; i < d.length; i += 4)
                if (Math.abs(d[i] - t[0]) + Math.abs(d[i + 1] - t[1]) + Math.abs(d[i + 2] - t[2]) > 96) far++;
              return {top: t, far: far / (w * h), colors: count.size, w, h};
            });
        }""", [data, rects])
    finally:
        page.close()


def metric(text, name):
    """A sample's value from Prometheus text ('name' may include its {labels})."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def test_page_loads_from_the_server_alone(browser, server):
    ctx, page, watch = open_page(browser, server, 1280, 800)
    try:
        assert page.title() == "lumen chat"
        page.wait_for_function("document.getElementById('status').dataset.state === 'ok'")
        model = page.inner_text("#model")
        assert model and "connecting" not in model and "unreachable" not in model, model
        assert page.locator("#send").is_visible() and page.locator("#stop").is_hidden()
        # every request went to this server: no CDN, no fonts, no favicon elsewhere
        origin = server.url
        urls = [r.url for r in watch.requests]
        assert urls and all(u.startswith(origin + "/") or u.startswith("data:") for u in urls), urls
        assert {"/", "/v1/models", "/health"} <= {u[len(origin):] for u in urls}, urls
        assert not watch.errors, watch.errors
    finally:
        ctx.close()


def test_stream_stop_continue_screenshot(browser, server):
    ctx, page, watch = open_page(browser, server, 1280, 800)
    try:
        set_settings(page, temperature=0, max_tokens=400 if SLOW == 1 else 200)

        # 1. a reply streams in (its text grows while it is marked streaming), then Stop
        streamed = False
        for i, prompt in enumerate(PROMPTS):
            send(page, prompt)
            page.wait_for_function("(i) => { const m = document.querySelectorAll('.msg.assistant')[i];"
                                   " return m && m.querySelector('.content').textContent.length > 0; }",
                                   arg=i)
            n0 = content_len(page, i)
            try:
                page.wait_for_function("([i, n]) => { const m = document.querySelectorAll('.msg.assistant')[i];"
                                       " return m.dataset.state !== 'streaming' ||"
                                       " m.querySelector('.content').textContent.length > n; }",
                                       arg=[i, n0])
            except Exception:
                pass
            state = page.evaluate("(i) => document.querySelectorAll('.msg.assistant')[i].dataset.state", i)
            if state == "streaming" and content_len(page, i) > n0:
                assert page.locator("#stop").is_visible() and page.locator("#send").is_hidden()
                page.click("#stop")
                streamed = True
                break
            wait_idle(page)  # the model ended this reply on its own before we saw it grow
        assert streamed, "no reply was seen streaming: %s" % page.evaluate("JSON.stringify(lumenChat.replies)")
        idx = i
        msg = page.locator(".msg.assistant").nth(idx)
        page.wait_for_function("(i) => document.querySelectorAll('.msg.assistant')[i].dataset.state === 'stopped'",
                               arg=idx)
        assert page.locator("#send").is_visible() and page.locator("#stop").is_hidden()
        assert "stopped" in msg.locator(".stats").inner_text()
        stopped_text = msg.locator(".content").inner_text()
        time.sleep(1.0)
        assert msg.locator(".content").inner_text() == stopped_text, "text grew after Stop"
        convo = page.evaluate("lumenChat.messages")
        assert convo[-1]["role"] == "assistant" and convo[-1]["content"], convo
        assert convo[-1]["content"].strip() == stopped_text.strip()
        reply = page.evaluate("lumenChat.replies")[idx]
        assert reply["state"] == "stopped" and reply["ttftMs"] > 0, reply
        if KIND == "lumen":
            # the server saw the client go away and cancelled the request
            deadline = time.monotonic() + 10 * SLOW
            while True:
                text = server.get("/metrics")[1]
                cancelled = metric(text, 'lumen_requests_finished_total{reason="cancelled"}')
                running = metric(text, "lumen_requests_running")
                if cancelled and cancelled >= 1 and running == 0:
                    break
                assert time.monotonic() < deadline, "no cancelled request in /metrics:\n" + text
                time.sleep(0.2)

        # 2. the next turn completes: the whole conversation and the settings go with it, and
        #    the reply shows its TTFT and rate
        set_settings(page, temperature=0.5, max_tokens=12, system="You are terse.")
        send(page, "And then?")
        wait_idle(page)
        last = page.locator(".msg.assistant").last
        assert last.get_attribute("data-state") == "done", page.evaluate("JSON.stringify(lumenChat.replies)")
        stats = last.locator(".stats").inner_text()
        assert re.search(r"TTFT \d+(\.\d)? m?s", stats), stats
        assert re.search(r"\d+\.\d tok/s", stats), stats
        assert re.search(r"\b([1-9]|1[0-2]) tokens\b", stats), stats
        body = watch.chat_bodies()[-1]
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}, body
        assert body["temperature"] == 0.5 and body["max_tokens"] == 12, body
        roles = [m["role"] for m in body["messages"]]
        assert roles[0] == "system" and body["messages"][0]["content"] == "You are terse.", roles
        assert roles[-3:] == ["user", "assistant", "user"], roles
        assert body["messages"][-2]["content"].strip() == stopped_text.strip()
        assert body["messages"][-1]["content"] == "And then?"
        assert watch.chat_bodies()[0]["temperature"] == 0

        # 3. the screenshot shows the transcript where the DOM has it
        png = ARTIFACTS / "chat-wide.png"
        page.screenshot(path=str(png))
        boxes = page.evaluate("""() => {
            const r = (el) => { const b = el.getBoundingClientRect(); return {x: b.x, y: b.y, width: b.width, height: b.height}; };
            return {
              user: r(document.querySelector('.msg.user .content')),
              bot: r(document.querySelectorAll('.msg.assistant .content')[%d]),
              transcript: r(document.getElementById('transcript')),
              stop: r(document.querySelector('.msg.assistant .stats .tag.stopped')),
            };
        }""" % idx)
        st = pixel_stats(browser, png, [boxes["user"], boxes["bot"], boxes["transcript"], boxes["stop"]])
        user, bot, transcript, tag = st
        assert user["top"][2] > user["top"][0] + 80, ("user bubble is not blue", user)   # --user
        assert user["far"] > 0.01, ("no text drawn in the user bubble", user)
        assert min(bot["top"]) > 200 or max(bot["top"]) < 60, ("assistant bubble background", bot)
        assert bot["far"] > 0.02, ("no text drawn in the stopped reply", bot)
        assert transcript["colors"] > 20 and transcript["far"] > 0.02, ("transcript looks blank", transcript)
        assert tag["far"] > 0.03, ("the 'stopped' tag is not drawn", tag)
        assert not watch.errors, watch.errors
    finally:
        ctx.close()


def test_narrow_window(browser, server):
    ctx, page, watch = open_page(browser, server, 380, 720)
    try:
        assert page.locator("#settings").is_hidden()  # a drawer, closed by default
        set_settings(page, temperature=0, max_tokens=8)
        send(page, "Hello there, how are you today?")
        wait_idle(page)
        assert page.locator(".msg.assistant").last.get_attribute("data-state") == "done"
        geo = page.evaluate("""() => ({
            sw: document.documentElement.scrollWidth, vw: window.innerWidth,
            composer: document.getElementById('composer').getBoundingClientRect().bottom,
            send: document.getElementById('send').getBoundingClientRect().right,
            vh: window.innerHeight })""")
        assert geo["sw"] <= geo["vw"], ("page scrolls sideways", geo)
        assert geo["composer"] <= geo["vh"] + 1 and geo["send"] <= geo["vw"], geo
        page.screenshot(path=str(ARTIFACTS / "chat-narrow.png"))
        page.click("#settings-toggle")
        drawer = page.evaluate("(() => { const b = document.getElementById('settings').getBoundingClientRect();"
                               " return {x: b.x, right: b.right, w: b.width}; })()")
        assert drawer["x"] >= 0 and drawer["right"] <= 381, drawer
        page.screenshot(path=str(ARTIFACTS / "chat-narrow-settings.png"))
        assert not watch.errors, watch.errors
    finally:
        ctx.close()


def test_refusal_is_shown_and_not_kept(browser, server):
    """A 429 (the server's queue is full) shows as an error on that turn; the turn leaves the
    conversation and its text goes back into the input box. The refusal is the browser's own
    (playwright answers the request), so it needs no overloaded server."""
    ctx, page, watch = open_page(browser, server, 1000, 700)
    try:
        page.route("**/v1/chat/completions", lambda route: route.fulfill(
            status=429, content_type="application/json",
            body='{"error":{"message":"the server is busy (64 requests waiting)","type":"server_busy"}}'))
        send(page, "Are you there?")
        wait_idle(page)
        msg = page.locator(".msg.assistant").last
        assert msg.get_attribute("data-state") == "error"
        assert "HTTP 429: the server is busy" in msg.locator(".content").inner_text()
        assert page.input_value("#input") == "Are you there?"
        assert page.evaluate("lumenChat.messages") == []
        assert page.locator(".msg.dropped").count() == 2
    finally:
        ctx.close()


def test_api_key(browser):
    """Against `--api-key`: the page loads (it is open), says it needs the key and opens the
    settings; once the key is typed the model appears and a reply streams with the key sent."""
    if KIND != "lumen":
        pytest.skip("llama-server answers /v1/models without the key")
    key = "page-test-key"
    argv = servers.lumen_serve_argv(BIN, threads=1, extra=["--api-key", key])
    srv = servers.Server(KIND + "-key", argv, log_path=ARTIFACTS / ("%s-api-key.log" % KIND))
    srv.start(timeout=120 * SLOW)
    try:
        ctx = browser.new_context(viewport={"width": 1000, "height": 700})
        page = ctx.new_page()
        page.set_default_timeout(60_000 * SLOW)
        watch = PageWatch(page)
        page.goto(srv.url + "/")
        page.wait_for_function("document.getElementById('model').textContent.includes('API key needed')")
        assert page.locator("#settings").is_visible()
        page.fill("#api-key", key)
        page.press("#api-key", "Tab")  # 'change' fires on leaving the field
        page.wait_for_function("window.lumenChat.model !== null")
        set_settings(page, temperature=0, max_tokens=4)
        send(page, "Hello")
        wait_idle(page)
        assert page.locator(".msg.assistant").last.get_attribute("data-state") == "done"
        chat = [r for r in watch.requests if r.url.endswith("/v1/chat/completions")]
        assert chat and chat[-1].headers.get("authorization") == "Bearer " + key
        ctx.close()
    finally:
        srv.stop()
    assert not srv.sanitizer_report(), srv.sanitizer_report()
