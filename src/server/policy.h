// Which requests lumen serve answers at all, against web pages that reach a local server
// through the visitor's browser: the Host (DNS rebinding: a page's own name pointed at
// 127.0.0.1), the Origin (cross-site pages), the Content-Type of a POST (a form or
// text/plain POST needs no CORS preflight) and the CORS answers for --cors-origin.
// Pure functions of the headers and the options (docs/server.md, "Security model").
#ifndef LM_SERVER_POLICY_H
#define LM_SERVER_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

// The names a Host header may carry besides IP literals and localhost: --host (when it is
// a name), --allowed-host NAME... ("*": any), and the machine's own name.
struct policy {
    const char *const *allowed_hosts;
    int n_allowed_hosts;
    const char *bind_host;
    char hostname[256];
    const char *const *cors_origins; // "scheme://host[:port]" or "*"
    int n_cors_origins;
};

void policy_init(struct policy *p, const struct lm_server_opts *o);

// host: the Host header (NULL: none, as HTTP/1.0 clients may send). True for an IP literal
// (a rebinding page cannot send one: its Host is its own name), localhost and *.localhost
// (browsers resolve them to loopback themselves), and the configured names.
bool policy_host_ok(const struct policy *p, const char *host);

enum policy_origin {
    ORIGIN_NONE,    // no Origin header: not a cross-site browser request
    ORIGIN_SAME,    // the page is one of ours (its origin's host:port is the Host)
    ORIGIN_CORS,    // a --cors-origin: answered with CORS headers
    ORIGIN_REFUSED, // another site (or "null"): 403
};
enum policy_origin policy_origin(const struct policy *p, const char *origin, const char *host);

// The Access-Control-Allow-Origin value for an ORIGIN_CORS request ("*" or the origin).
const char *policy_cors_value(const struct policy *p, const char *origin);

// True for "application/json" with optional parameters ("; charset=utf-8"), any case.
bool policy_json_type(const char *content_type);

#endif
