// libFuzzer target for the GGUF reader: open arbitrary bytes, then exercise the
// lookups and typed getters on whatever parsed (ASan/UBSan catch bad reads).
#include <stdint.h>
#include <string.h>

#include "format/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lm_gguf g;
    if (lm_gguf_open_memory(&g, data, size, "fuzz.gguf") != LM_OK) return 0;

    uint32_t u32;
    int32_t i32;
    uint64_t u64, n;
    float f;
    bool b;
    struct lm_gguf_str s;
    const void *arr;
    volatile uint64_t sink = 0;
    // every key through every getter: all must return cleanly
    for (uint64_t i = 0; i < g.n_kv && i < 64; i++) {
        char key[128];
        const struct lm_gguf_kv *kv = &g.kv[i];
        if (kv->key.len >= sizeof key || memchr(kv->key.data, 0, kv->key.len)) continue;
        memcpy(key, kv->key.data, kv->key.len);
        key[kv->key.len] = 0;
        if (lm_gguf_find_kv(&g, key) != kv) __builtin_trap();
        (void)lm_gguf_get_u32(&g, key, &u32, true);
        (void)lm_gguf_get_i32(&g, key, &i32, true);
        (void)lm_gguf_get_u64(&g, key, &u64, true);
        (void)lm_gguf_get_f32(&g, key, &f, true);
        (void)lm_gguf_get_bool(&g, key, &b, true);
        if (lm_gguf_get_str(&g, key, &s, true) == LM_OK && s.len) sink += (uint8_t)s.data[s.len - 1];
        if (lm_gguf_get_arr(&g, key, kv->arr_type, &n, &arr, true) == LM_OK && arr && n) {
            if (kv->arr_type == LM_GGUF_TYPE_STRING) {
                const struct lm_gguf_str *ss = arr;
                if (ss[n - 1].len) sink += (uint8_t)ss[n - 1].data[ss[n - 1].len - 1];
            } else {
                sink += ((const uint8_t *)arr)[0];
            }
        }
    }
    // every tensor's first and last data byte must be readable
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const struct lm_gguf_tensor *t = &g.tensors[i];
        const uint8_t *p = t->data;
        sink += p[0] + p[t->nbytes - 1];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        char name[128];
        if (t->name.len < sizeof name && !memchr(t->name.data, 0, t->name.len)) {
            memcpy(name, t->name.data, t->name.len);
            name[t->name.len] = 0;
            if (lm_gguf_find_tensor(&g, name) != t) __builtin_trap();
            (void)lm_gguf_expect_tensor(&g, name, t->n_dims, ne, NULL);
        }
    }
    (void)lm_gguf_get_str(&g, "general.architecture", &s, false);
    (void)sink;
    lm_gguf_close(&g);
    return 0;
}
