// `lumen serve`: the OpenAI-compatible HTTP server on the engine (docs/server.md). The
// command line (src/cli/cli_serve.c) fills the options and calls lm_server_run.
#ifndef LM_SERVER_SERVER_H
#define LM_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "lumen.h"

struct lm_server_opts {
    const char *model_path;
    const char *host;           // "127.0.0.1"
    int port;                   // 0: any free port (printed on the listening line)
    const char *api_key;        // NULL: no authentication
    const char *alias;          // model id in responses (NULL: the file's base name)
    const char *chat_template;  // a template name or a file with one (NULL: the model's)
    struct lm_engine_params ep; // parallel, queue, pool, threads, step tokens
    int32_t stream_buffer;      // events held per request before a slow client is cut off
    size_t max_body;            // request bodies above this are answered 413 (0: 64 bytes per token of
                                // a request's context, at least 1 MiB)
    int max_connections;        // connections held at most (more: the oldest idle one is closed, else 503)
    int max_connections_per_ip; // of them, from one address (IPv6: a /64); 0: --parallel + --queue + 8
    int timeout_s;              // a request's headers and body arrive within this of the connection
                                // being ready for one; a write stalled this long ends the connection
    int keepalive_s;            // a connection with nothing received this long is closed
    int shutdown_grace_s;       // SIGTERM: running requests have this long to finish, then are cancelled
    int load_delay_ms;          // test hook (LUMEN_SERVE_LOAD_DELAY_MS): /health says 503 longer
    bool lookup;                // requests draft by prompt lookup unless they say "lookup": false
    bool parse_special_in_messages; // special-token text in chat messages becomes the token
    int32_t draft_max;          // default "draft_max" (0: LM_DRAFT_MAX_DEFAULT)
    const char *draft_path;     // -md: a draft model; requests use it unless "draft_model": false
    const char *const *allowed_hosts; // --allowed-host: names a Host header may carry ("*": any)
    int n_allowed_hosts;
    const char *const *cors_origins;  // --cors-origin: pages that may call the API ("*": any)
    int n_cors_origins;
    bool reasoning_inline;          // --reasoning-format none: thinking stays in the content
    bool reasoning_budget_given;    // --reasoning-budget N (a request's thinking_budget_tokens wins)
    int32_t reasoning_budget;       // -1: no budget, 0: no thinking, N: at most N thinking tokens
};

// Serves until SIGINT or SIGTERM, then drains: no new work, running requests finish within
// shutdown_grace_s, the rest is cancelled. Returns the process exit code (0; 1 when the
// model cannot be loaded or the address cannot be bound; 2 for a --chat-template lumen does
// not know). A signal during the model load ends the process at once (status 0), a second
// signal too (status 128 + the signal).
int lm_server_run(const struct lm_server_opts *o);

#endif
