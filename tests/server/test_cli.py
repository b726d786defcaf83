"""lumen serve's command line: --help, bad flags (one line, exit 2), --chat-template by
name and by file, LUMEN_API_KEY, a port already in use (one line, exit 1)."""
import json
import socket
import subprocess

from conftest import BIN, MODEL, Server


def run(*args, env=None):
    return subprocess.run([BIN, "serve", *args], capture_output=True, text=True, timeout=120, env=env)


def test_help_and_bad_flags():
    r = run("--help")
    assert r.returncode == 0 and "usage: lumen serve" in r.stdout and "--api-key" in r.stdout
    assert "--embed-step N" in r.stdout
    for args, pat in ((["--bogus"], "unknown option '--bogus'"), (["--port", "70000"], "out of range"),
                      (["--parallel", "x"], "not an integer"), (["--port"], "needs a value"),
                      (["--parallel", "16", "-b", "8"], "--batch-size 8 is below --parallel 16"),
                      (["--embed-step", "0"], "out of range")):
        r = run(*args)
        assert r.returncode == 2 and pat in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def test_unknown_chat_template_exits_2(tmp_path):
    r = run("-m", MODEL, "--port", "0", "--chat-template", "no-such-template")
    assert r.returncode == 2 and "neither a template name" in r.stderr, r.stderr
    f = tmp_path / "t.jinja"
    f.write_text("{{ messages }} plain jinja lumen does not know")
    r = run("-m", MODEL, "--port", "0", "--chat-template", str(f))
    assert r.returncode == 2 and "not a template lumen knows" in r.stderr, r.stderr


def test_port_in_use_exits_1():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        r = run("-m", MODEL, "--port", str(port))
        assert r.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in r.stderr, r.stderr
    finally:
        s.close()


def test_chat_template_override_and_env_key(tmp_path):
    f = tmp_path / "chatml.jinja"
    f.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    for tmpl, source in (("chatml", "--chat-template"), (str(f), "--chat-template file")):
        s = Server("--chat-template", tmpl, env={"LUMEN_API_KEY": "env-key"})
        try:
            assert f"chat template chatml ({source})" in s.log()
            st, _, _ = s.request("GET", "/v1/models", key="test-key-123")
            assert st == 401  # the key from the environment is the one required
            st, _, body = s.request("GET", "/v1/models", key="env-key")
            meta = json.loads(body)["data"][0]["meta"]
            assert meta["chat_template"] == "chatml" and meta["chat_template_source"] == source
            st, _, body = s.request("POST", "/v1/chat/completions", key="env-key",
                                    body={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
            want = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            st2, _, tok = s.request("POST", "/tokenize", key="env-key", body={"content": want, "add_special": True})
            assert json.loads(body)["usage"]["prompt_tokens"] == len(json.loads(tok)["tokens"])
        finally:
            s.stop()
