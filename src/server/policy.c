// Host, Origin and Content-Type rules of lumen serve (policy.h): what a browser tab of
// another site could make the server do is refused before any route runs.
#include "policy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void policy_init(struct policy *p, const struct lm_server_opts *o) {
    memset(p, 0, sizeof *p);
    p->allowed_hosts = o->allowed_hosts;
    p->n_allowed_hosts = o->n_allowed_hosts;
    p->bind_host = o->host;
    if (gethostname(p->hostname, sizeof p->hostname - 1) != 0) p->hostname[0] = 0;
    p->cors_origins = o->cors_origins;
    p->n_cors_origins = o->n_cors_origins;
}

// The host part of "name[:port]" or "[v6]:port" into out (lowercase, no trailing dot);
// false when it does not parse or does not fit.
static bool host_part(const char *authority, char *out, size_t cap, bool *bracketed) {
    const char *s = authority, *end;
    *bracketed = s[0] == '[';
    if (*bracketed) {
        end = strchr(s, ']');
        if (!end || (end[1] && end[1] != ':')) return false;
        s++;
    } else {
        end = strchr(s, ':');
        if (!end) end = s + strlen(s);
    }
    size_t n = (size_t)(end - s);
    if (n > 0 && s[n - 1] == '.' && !*bracketed) n--; // "localhost." is localhost
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        if ((unsigned char)ch <= ' ' || ch == '/' || ch == '@') return false;
        out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    out[n] = 0;
    const char *port = *bracketed ? end + 1 : end;
    if (*port == ':')
        for (const char *q = port + 1; *q; q++)
            if (*q < '0' || *q > '9') return false;
    return true;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

bool policy_host_ok(const struct policy *p, const char *host) {
    if (!host) return true; // HTTP/1.0 without Host: not a browser (MHD refuses 1.1 without one)
    char h[256];
    bool bracketed;
    if (!host_part(host, h, sizeof h, &bracketed)) return false;
    unsigned char addr[16];
    if (bracketed) return inet_pton(AF_INET6, h, addr) == 1;
    if (inet_pton(AF_INET, h, addr) == 1) return true;
    if (!strcmp(h, "localhost") || ends_with(h, ".localhost")) return true;
    if (p->bind_host && !strcasecmp(p->bind_host, h)) return true;
    if (p->hostname[0] && !strcasecmp(p->hostname, h)) return true;
    for (int i = 0; i < p->n_allowed_hosts; i++)
        if (!strcmp(p->allowed_hosts[i], "*") || !strcasecmp(p->allowed_hosts[i], h)) return true;
    return false;
}

enum policy_origin policy_origin(const struct policy *p, const char *origin, const char *host) {
    if (!origin) return ORIGIN_NONE;
    for (int i = 0; i < p->n_cors_origins; i++)
        if (!strcmp(p->cors_origins[i], "*") || !strcasecmp(p->cors_origins[i], origin)) return ORIGIN_CORS;
    // same origin: the scheme, then the Host header (the page came from this server, or from
    // a TLS proxy in front of it)
    const char *auth = !strncasecmp(origin, "http://", 7) ? origin + 7 : !strncasecmp(origin, "https://", 8) ? origin + 8 : NULL;
    if (auth && host && !strcasecmp(auth, host)) return ORIGIN_SAME;
    return ORIGIN_REFUSED;
}

const char *policy_cors_value(const struct policy *p, const char *origin) {
    for (int i = 0; i < p->n_cors_origins; i++)
        if (!strcmp(p->cors_origins[i], "*")) return "*";
    return origin;
}

bool policy_json_type(const char *ct) {
    if (!ct) return false;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, "application/json", 16) != 0) return false;
    ct += 16;
    while (*ct == ' ' || *ct == '\t') ct++;
    return *ct == 0 || *ct == ';';
}
