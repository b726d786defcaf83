// The web page's files, embedded at build time (cmake/embed_assets.cmake turns
// src/server/web/* into server_assets.c in the build tree).
#ifndef LM_SERVER_ASSETS_H
#define LM_SERVER_ASSETS_H

#include <stddef.h>

struct lm_srv_asset {
    const char *path;          // "/index.html" (GET / serves /index.html)
    const char *mime;          // "text/html; charset=utf-8", ...
    const unsigned char *data;
    size_t len;
};

extern const struct lm_srv_asset lm_srv_assets[];
extern const size_t lm_srv_n_assets;

#endif
