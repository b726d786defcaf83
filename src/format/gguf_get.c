// Typed access to a parsed GGUF (gguf.h): getters that check a key's type and convert
// integers with range checks, and the check of a tensor's shape and dtype, each failing
// with a message that names the key or tensor, expected vs actual.
#include "format/gguf.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// ============================================================================
// Typed getters
// ============================================================================

// Looks up key; returns NULL with *st set (LM_OK if absent and optional).
static const struct lm_gguf_kv *get_kv(const struct lm_gguf *g, const char *key, bool required,
                                       enum lm_status *st) {
    const struct lm_gguf_kv *kv = lm_gguf_find_kv(g, key);
    *st = LM_OK;
    if (!kv && required) *st = lm_gguf_error(g, LM_ERR_FORMAT, "missing required key '%s'", key);
    return kv;
}

static enum lm_status wrong_type(const struct lm_gguf *g, const char *key,
                                 const struct lm_gguf_kv *kv, const char *expected) {
    if (kv->type == LM_GGUF_TYPE_ARRAY)
        return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s' has type array of %s, expected %s", key,
                    lm_gguf_type_name(kv->arr_type), expected);
    return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s' has type %s, expected %s", key,
                lm_gguf_type_name(kv->type), expected);
}

// Integer value of kv: *neg set if negative (then *mag holds the magnitude as -v).
static bool kv_int(const struct lm_gguf_kv *kv, bool *neg, uint64_t *mag) {
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed = false;
    switch (kv->type) {
    case LM_GGUF_TYPE_UINT8: { uint8_t v; memcpy(&v, kv->data, 1); u = v; break; }
    case LM_GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, kv->data, 2); u = v; break; }
    case LM_GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, kv->data, 4); u = v; break; }
    case LM_GGUF_TYPE_UINT64: { memcpy(&u, kv->data, 8); break; }
    case LM_GGUF_TYPE_INT8: { int8_t v; memcpy(&v, kv->data, 1); s = v; is_signed = true; break; }
    case LM_GGUF_TYPE_INT16: { int16_t v; memcpy(&v, kv->data, 2); s = v; is_signed = true; break; }
    case LM_GGUF_TYPE_INT32: { int32_t v; memcpy(&v, kv->data, 4); s = v; is_signed = true; break; }
    case LM_GGUF_TYPE_INT64: { memcpy(&s, kv->data, 8); is_signed = true; break; }
    default: return false;
    }
    if (is_signed && s < 0) {
        *neg = true;
        *mag = (uint64_t)0 - (uint64_t)s;
    } else {
        *neg = false;
        *mag = is_signed ? (uint64_t)s : u;
    }
    return true;
}

static enum lm_status out_of_range(const struct lm_gguf *g, const char *key, bool neg,
                                   uint64_t mag, const struct lm_gguf_kv *kv, const char *to) {
    return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s' = %s%llu (%s) is out of range for %s", key,
                neg ? "-" : "", (unsigned long long)mag, lm_gguf_type_name(kv->type), to);
}

enum lm_status lm_gguf_get_u64(const struct lm_gguf *g, const char *key, uint64_t *out,
                               bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    bool neg;
    uint64_t mag;
    if (!kv_int(kv, &neg, &mag)) return wrong_type(g, key, kv, "an integer (uint64)");
    if (neg) return out_of_range(g, key, neg, mag, kv, "uint64");
    *out = mag;
    return LM_OK;
}

enum lm_status lm_gguf_get_u32(const struct lm_gguf *g, const char *key, uint32_t *out,
                               bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    bool neg;
    uint64_t mag;
    if (!kv_int(kv, &neg, &mag)) return wrong_type(g, key, kv, "an integer (uint32)");
    if (neg || mag > UINT32_MAX) return out_of_range(g, key, neg, mag, kv, "uint32");
    *out = (uint32_t)mag;
    return LM_OK;
}

enum lm_status lm_gguf_get_i32(const struct lm_gguf *g, const char *key, int32_t *out,
                               bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    bool neg;
    uint64_t mag;
    if (!kv_int(kv, &neg, &mag)) return wrong_type(g, key, kv, "an integer (int32)");
    if (neg ? mag > (uint64_t)INT32_MAX + 1 : mag > INT32_MAX)
        return out_of_range(g, key, neg, mag, kv, "int32");
    *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return LM_OK;
}

enum lm_status lm_gguf_get_f32(const struct lm_gguf *g, const char *key, float *out,
                               bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    if (kv->type == LM_GGUF_TYPE_FLOAT32) {
        memcpy(out, kv->data, 4);
        return LM_OK;
    }
    if (kv->type != LM_GGUF_TYPE_FLOAT64) return wrong_type(g, key, kv, "float32 or float64");
    double d;
    memcpy(&d, kv->data, 8);
    if (isfinite(d) && fabs(d) > FLT_MAX)
        return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s' = %g (float64) is out of range for float32", key,
                    d);
    *out = (float)d;
    return LM_OK;
}

enum lm_status lm_gguf_get_bool(const struct lm_gguf *g, const char *key, bool *out,
                                bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    if (kv->type != LM_GGUF_TYPE_BOOL) return wrong_type(g, key, kv, "bool");
    uint8_t v;
    memcpy(&v, kv->data, 1);
    *out = v != 0;
    return LM_OK;
}

enum lm_status lm_gguf_get_str(const struct lm_gguf *g, const char *key,
                               struct lm_gguf_str *out, bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    if (kv->type != LM_GGUF_TYPE_STRING) return wrong_type(g, key, kv, "string");
    *out = *(const struct lm_gguf_str *)kv->data;
    return LM_OK;
}

enum lm_status lm_gguf_get_arr(const struct lm_gguf *g, const char *key,
                               enum lm_gguf_type elem_type, uint64_t *n, const void **data,
                               bool required) {
    enum lm_status st;
    const struct lm_gguf_kv *kv = get_kv(g, key, required, &st);
    if (!kv) return st;
    if (kv->type != LM_GGUF_TYPE_ARRAY || kv->arr_type != elem_type) {
        char exp[64];
        snprintf(exp, sizeof exp, "array of %s", lm_gguf_type_name(elem_type));
        return wrong_type(g, key, kv, exp);
    }
    *n = kv->arr_n;
    *data = kv->data;
    return LM_OK;
}

// ============================================================================
// Tensor shape checks
// ============================================================================

static void fmt_shape(char *buf, size_t cap, uint32_t n_dims, const int64_t *ne) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "{");
    for (uint32_t d = 0; d < n_dims && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)ne[d]);
    if (n < cap) snprintf(buf + n, cap - n, "}");
}

enum lm_status lm_gguf_expect_tensor(const struct lm_gguf *g, const char *name, uint32_t n_dims,
                                     const int64_t *ne, const struct lm_gguf_tensor **out) {
    if (n_dims < 1 || n_dims > LM_GGUF_MAX_DIMS || !ne || !name)
        return lm_gguf_error(g, LM_ERR_ARG, "lm_gguf_expect_tensor: bad arguments for '%s'",
                    name ? name : "(null)");
    const struct lm_gguf_tensor *t = lm_gguf_find_tensor(g, name);
    if (!t) return lm_gguf_error(g, LM_ERR_FORMAT, "missing tensor '%s'", name);
    // Trailing dims of 1 are equivalent ({640} == {640, 1}).
    bool same = true;
    for (int d = 0; d < LM_GGUF_MAX_DIMS; d++) {
        int64_t want = (uint32_t)d < n_dims ? ne[d] : 1;
        if (t->ne[d] != want) same = false;
    }
    if (!same) {
        char a[128], e[128];
        fmt_shape(a, sizeof a, t->n_dims, t->ne);
        fmt_shape(e, sizeof e, n_dims, ne);
        return lm_gguf_error(g, LM_ERR_FORMAT, "tensor '%s' has shape %s, expected %s", name, a, e);
    }
    const struct lm_dtype_traits *tr = lm_dtype_traits((int)t->type);
    if (!tr || !tr->supported) {
        char names[256];
        return lm_gguf_error(g, LM_ERR_UNSUPPORTED,
                             "tensor '%s' has type %s, which lumen cannot run (supported: %s)", name,
                             lm_dtype_name((int)t->type), lm_dtype_supported_names(names, sizeof names));
    }
    if (out) *out = t;
    return LM_OK;
}
