// `lumen serve`: flags (named as llama-server names them where it has them) -> the
// server's options; the server itself is src/server/ (docs/server.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "server.h"

static const char *k_serve_help =
    "usage: lumen serve [-m MODEL] [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server (POST /v1/completions, /v1/chat/completions,\n"
    "GET /v1/models, /health, /metrics, POST /tokenize, /detokenize, the chat page at /)\n"
    "on the continuous-batching engine. SIGINT / SIGTERM drain it: no new work, running requests\n"
    "finish within --shutdown-grace, then the rest is cancelled; a second signal exits at once.\n"
    "SIGUSR1 drains without stopping (/health and new requests 503: a balancer sends them to\n"
    "another replica; running requests finish), SIGUSR2 takes work again (deploy/haproxy/).\n"
    "\n"
    "  -m, --model PATH        GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "      --host HOST         address to listen on (default 127.0.0.1)\n"
    "      --port N            port (default 8080; 0 = any free port, printed when ready)\n"
    "  -t, --threads N         threads of the forward pass (default: physical cores)\n"
    "  -c, --ctx-size N        KV pool capacity in tokens, shared by all requests (default 8192);\n"
    "                          a request holds at most min(N, the model's context)\n"
    "  -np, --parallel N       requests decoding at once (default 8)\n"
    "      --queue N           requests waiting beyond which the answer is 429 (default 64)\n"
    "  -b, --batch-size N      tokens per engine step (decode + prefill chunks; default 256)\n"
    "      --embed-step N      embedding tokens per step while requests decode (default 16;\n"
    "                          >= -b: no cap); prompts go first and count against it\n"
    "      --api-key KEY       require 'Authorization: Bearer KEY' (also $LUMEN_API_KEY);\n"
    "                          /health and the page stay open. The command line shows in `ps`:\n"
    "      --api-key-file FILE the key is the file's first line (FILE readable by you only)\n"
    "      --allowed-host NAME a Host header name served besides IP addresses, localhost, the\n"
    "                          --host name and this machine's name (repeatable; '*': any)\n"
    "      --cors-origin ORIGIN  pages of ORIGIN (e.g. https://app.example) may call the API from a\n"
    "                          browser: CORS headers and preflights (repeatable; '*': any);\n"
    "                          other sites' pages are refused (403)\n"
    "      --chat-template T   gemma | llama3 | chatml | phi3 | granite, or a template file\n"
    "                          (default: the model's own, else its architecture's turn format)\n"
    "      --parse-special-in-messages  special-token text in chat messages (\"<start_of_turn>\")\n"
    "                          becomes the token (default: it is text; only the template's count)\n"
    "  -a, --alias NAME        model id in responses (default: the file name)\n"
    "      --stream-buffer N   tokens held for a client before it is cut off as too slow\n"
    "                          (default 1024)\n"
    "      --max-body BYTES    larger request bodies are answered 413 (default: 64 bytes per token\n"
    "                          of a request's context, at least 1 MiB)\n"
    "      --max-connections N connections held at most (default 512); at the cap a new one\n"
    "                          closes the oldest connection waiting for a request, else is\n"
    "                          answered 503 at once\n"
    "      --max-connections-per-ip N  the same cap per client address (an IPv6 /64; default\n"
    "                          --parallel + --queue + 8); behind a proxy, raise it\n"
    "  -to, --timeout N        a request's headers and body must arrive within N seconds of the\n"
    "                          connection being ready for one, and an answer's write may stall\n"
    "                          N seconds at most (default 10)\n"
    "      --keep-alive-timeout N  close a connection that sends nothing for N seconds between\n"
    "                          requests (default 5)\n"
    "      --shutdown-grace S  on SIGINT / SIGTERM, running requests have S seconds to finish\n"
    "                          before they are cancelled (default 10; 0 = cancel at once)\n"
    "      --no-prefix-cache   do not reuse the KV blocks of earlier prompts\n"
    CLI_KV_TYPE_HELP
    "      --reasoning-format F  auto (default): a thinking model's reasoning apart, in\n"
    "                          reasoning_content; none: inline in the content (a request's\n"
    "                          \"reasoning_format\" overrides; docs/server.md, Reasoning)\n"
    "      --reasoning-budget N  thinking tokens at most (-1: no limit, default; 0: no thinking);\n"
    "                          then the end marker is inserted (\"thinking_budget_tokens\" overrides)\n"
    "      --lookup            speculative decoding with prompt-lookup drafts for every request\n"
    "                          (a request's \"lookup\": true/false overrides; docs/speculative.md)\n"
    "  -md, --model-draft PATH  speculative decoding with a draft model of the same vocabulary\n"
    "                          for every request (a request's \"draft_model\": false opts out;\n"
    "                          it wins over lookup; docs/speculative.md)\n"
    "      --draft-max K       drafted tokens per step at most (default 8, <= 32; a request's\n"
    "                          \"draft_max\" overrides)\n"
    "\n"
    "Prints `lumen serve: listening on http://HOST:PORT` on stderr once ready, then one line\n"
    "per request: id, status, prompt and generated tokens, TTFT, tok/s, why it finished.\n";

#define MAX_LIST 32 // --allowed-host and --cors-origin entries

// --api-key-file: the key is the first line, without its line end and surrounding blanks
// (malloc'd: the caller frees it).
static char *read_key_file(const char *cmd, const char *path) {
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    if (!text) cli_usage_error(cmd, "--api-key-file: cannot read '%s'", path);
    const char *p = text;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strcspn(p, "\r\n");
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    if (n == 0) cli_usage_error(cmd, "--api-key-file: '%s' holds no key on its first line", path);
    memmove(text, p, n);
    text[n] = 0;
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & 077))
        fprintf(stderr, "lumen serve: warning: --api-key-file %s is readable by other users (chmod 600 it)\n",
                path);
    return text;
}

int cmd_serve(int argc, char **argv) {
    const char *cmd = "serve";
    char *key_file = NULL; // --api-key-file's key
    static const char *hosts[MAX_LIST], *origins[MAX_LIST];
    int kv_type_k = 0, kv_type_v = 0;
    struct lm_server_opts o = {
        .host = "127.0.0.1",
        .port = 8080,
        .ep = {.max_running = 8, .max_waiting = 64, .step_tokens = 256, .kv_tokens = 8192},
        .stream_buffer = 1024,
        .max_connections = 512,
        .timeout_s = 10,
        .keepalive_s = 5,
        .shutdown_grace_s = 10,
    };
    const char *env_key = getenv("LUMEN_API_KEY");
    if (env_key && *env_key) o.api_key = env_key;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_serve_help, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--host")) o.host = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--port")) o.port = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 65535);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            o.ep.n_threads = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            o.ep.kv_tokens = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 16, 1 << 24);
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel"))
            o.ep.max_running = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 256);
        else if (!strcmp(a, "--queue"))
            o.ep.max_waiting = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 16);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            o.ep.step_tokens = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 8192);
        else if (!strcmp(a, "--embed-step"))
            o.ep.embed_step_tokens = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 8192);
        else if (!strcmp(a, "--api-key")) o.api_key = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--api-key-file")) {
            free(key_file);
            o.api_key = key_file = read_key_file(cmd, cli_value(cmd, argc, argv, &i));
        }
        else if (!strcmp(a, "--allowed-host")) {
            if (o.n_allowed_hosts == MAX_LIST) cli_usage_error(cmd, "--allowed-host: at most %d names", MAX_LIST);
            hosts[o.n_allowed_hosts++] = cli_value(cmd, argc, argv, &i);
        } else if (!strcmp(a, "--cors-origin")) {
            if (o.n_cors_origins == MAX_LIST) cli_usage_error(cmd, "--cors-origin: at most %d origins", MAX_LIST);
            const char *v = cli_value(cmd, argc, argv, &i);
            if (strcmp(v, "*") != 0 && strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
                cli_usage_error(cmd, "--cors-origin '%s': an origin is scheme://host[:port] (or '*')", v);
            if (v[strlen(v) - 1] == '/') cli_usage_error(cmd, "--cors-origin '%s': an origin has no path", v);
            origins[o.n_cors_origins++] = v;
        }
        else if (!strcmp(a, "--chat-template")) o.chat_template = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-a") || !strcmp(a, "--alias")) o.alias = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--stream-buffer"))
            o.stream_buffer = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 1 << 20);
        else if (!strcmp(a, "--max-body"))
            o.max_body = (size_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1024, (int64_t)1 << 30);
        else if (!strcmp(a, "--max-connections"))
            o.max_connections = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 65536);
        else if (!strcmp(a, "--max-connections-per-ip"))
            o.max_connections_per_ip = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 65536);
        else if (!strcmp(a, "-to") || !strcmp(a, "--timeout"))
            o.timeout_s = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 3600);
        else if (!strcmp(a, "--keep-alive-timeout"))
            o.keepalive_s = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, 3600);
        else if (!strcmp(a, "--shutdown-grace"))
            o.shutdown_grace_s = (int)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 0, 24 * 3600);
        else if (!strcmp(a, "--no-prefix-cache")) o.ep.no_prefix_cache = true;
        else if (cli_kv_type(cmd, argc, argv, &i, &kv_type_k, &kv_type_v)) {
            o.ep.kv_type_k = (enum lm_kv_type)kv_type_k;
            o.ep.kv_type_v = (enum lm_kv_type)kv_type_v;
        }
        else if (!strcmp(a, "--lookup")) o.lookup = true;
        else if (!strcmp(a, "--reasoning-format")) {
            const char *v = cli_value(cmd, argc, argv, &i);
            if (strcmp(v, "none") && strcmp(v, "auto") && strcmp(v, "deepseek"))
                cli_usage_error(cmd, "--reasoning-format '%s': expected none, auto or deepseek", v);
            o.reasoning_inline = !strcmp(v, "none");
        } else if (!strcmp(a, "--reasoning-budget")) {
            o.reasoning_budget_given = true;
            o.reasoning_budget = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), -1, 1 << 24);
        }
        else if (!strcmp(a, "--parse-special-in-messages")) o.parse_special_in_messages = true;
        else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft")) o.draft_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--draft-max"))
            o.draft_max = (int32_t)cli_int(cmd, a, cli_value(cmd, argc, argv, &i), 1, LM_DRAFT_MAX_LIMIT);
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen serve --help`)", a);
    }
    if (o.api_key && !*o.api_key) cli_usage_error(cmd, "--api-key: the key is empty");
    o.allowed_hosts = hosts;
    o.cors_origins = origins;
    if (!o.max_connections_per_ip) { // one address may fill every place of the queue, and a few more
        const int64_t n = (int64_t)o.ep.max_running + o.ep.max_waiting + 8;
        o.max_connections_per_ip = n < o.max_connections ? (int)n : o.max_connections;
    }
    if (o.ep.step_tokens < o.ep.max_running)
        cli_usage_error(cmd, "--batch-size %d is below --parallel %d (each running request decodes one "
                        "token per step)", o.ep.step_tokens, o.ep.max_running);
    if (!o.model_path) o.model_path = cli_default_model();
    const char *delay = getenv("LUMEN_SERVE_LOAD_DELAY_MS"); // test hook: a longer "loading" phase
    if (delay && *delay) o.load_delay_ms = atoi(delay);
    const int rc = lm_server_run(&o);
    free(key_file);
    return rc;
}
