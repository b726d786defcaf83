// GGUF v2/v3 reader: mmap (or a caller buffer), parse, and validate every count,
// length, type, dim, offset and size against the file and against overflow.
// Lookups by key / tensor name go through open-addressing hash indices (O(1)); the typed
// getters and shape checks on top of them are gguf_get.c.
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAX_KEY_LEN (1u << 20)    // keys and tensor names
#define GGUF_MAX_COUNT (1ull << 24)    // n_kv, n_tensors (sanity, beside the size bound)
#define GGUF_MAX_NEST 8                // nesting depth of arrays of arrays
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MIN_KV_BYTES 13           // key len (8) + type (4) + smallest value (1)
#define GGUF_MIN_TENSOR_BYTES 32       // name len (8) + n_dims (4) + ne (8) + type (4) + offset (8)

// ============================================================================
// Internal state (g->owned)
// ============================================================================

struct gguf_index {
    uint32_t *slots; // index + 1, 0 = empty
    uint64_t mask;
};

struct gguf_owned {
    struct lm_gguf_str *kv_strs; // one per kv; used by STRING scalars
    void **allocs;               // string-array element tables
    size_t n_allocs, cap_allocs;
    struct gguf_index kv_index;
    struct gguf_index tensor_index;
};

// ============================================================================
// Messages
// ============================================================================

enum lm_status lm_gguf_error(const struct lm_gguf *g, enum lm_status st, const char *fmt, ...) {
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return lm_error_set(st, "gguf: %s: %s", g->path, buf);
}

// Printable, bounded copy of a file string for messages (keeps messages one line).
static const char *show(char *buf, size_t cap, struct lm_gguf_str s) {
    size_t n = 0, lim = cap - 4;
    for (uint64_t i = 0; i < s.len && n < lim; i++) {
        unsigned char c = (unsigned char)s.data[i];
        buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s.len > lim) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

// ============================================================================
// Type helpers
// ============================================================================

static size_t scalar_size(uint32_t t) {
    switch (t) {
    case LM_GGUF_TYPE_UINT8: case LM_GGUF_TYPE_INT8: case LM_GGUF_TYPE_BOOL: return 1;
    case LM_GGUF_TYPE_UINT16: case LM_GGUF_TYPE_INT16: return 2;
    case LM_GGUF_TYPE_UINT32: case LM_GGUF_TYPE_INT32: case LM_GGUF_TYPE_FLOAT32: return 4;
    case LM_GGUF_TYPE_UINT64: case LM_GGUF_TYPE_INT64: case LM_GGUF_TYPE_FLOAT64: return 8;
    default: return 0; // STRING, ARRAY, unknown
    }
}

const char *lm_gguf_type_name(enum lm_gguf_type t) {
    switch (t) {
    case LM_GGUF_TYPE_UINT8: return "uint8";
    case LM_GGUF_TYPE_INT8: return "int8";
    case LM_GGUF_TYPE_UINT16: return "uint16";
    case LM_GGUF_TYPE_INT16: return "int16";
    case LM_GGUF_TYPE_UINT32: return "uint32";
    case LM_GGUF_TYPE_INT32: return "int32";
    case LM_GGUF_TYPE_FLOAT32: return "float32";
    case LM_GGUF_TYPE_BOOL: return "bool";
    case LM_GGUF_TYPE_STRING: return "string";
    case LM_GGUF_TYPE_ARRAY: return "array";
    case LM_GGUF_TYPE_UINT64: return "uint64";
    case LM_GGUF_TYPE_INT64: return "int64";
    case LM_GGUF_TYPE_FLOAT64: return "float64";
    case LM_GGUF_TYPE_COUNT: break;
    }
    return "?";
}

bool lm_gguf_str_eq(struct lm_gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.data, c, n) == 0);
}

// ============================================================================
// Hash index (FNV-1a, linear probing)
// ============================================================================

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool index_init(struct gguf_index *ix, uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    ix->slots = calloc((size_t)cap, sizeof *ix->slots);
    ix->mask = cap - 1;
    return ix->slots != NULL;
}

// Slot for the name (p, n): either the entry with that name or the empty slot where it
// would go. Entry i's name is the lm_gguf_str at names + i * stride (the key of g->kv[i] or
// the name of g->tensors[i]).
static uint64_t index_probe(const struct gguf_index *ix, const char *p, uint64_t n, const void *names, size_t stride) {
    uint64_t h = hash_bytes(p, n) & ix->mask;
    for (;;) {
        uint32_t v = ix->slots[h];
        if (v == 0) break;
        const struct lm_gguf_str *s = (const void *)((const char *)names + (size_t)(v - 1) * stride);
        if (s->len == n && (n == 0 || memcmp(s->data, p, (size_t)n) == 0)) break;
        h = (h + 1) & ix->mask;
    }
    return h;
}

// Entry i of the section, named `name`, into the index; a name already there is an error
// ("duplicate <what> 'NAME' (<whats> #j and #i)"), shown: the name as messages print it.
static enum lm_status index_add(const struct lm_gguf *g, struct gguf_index *ix, struct lm_gguf_str name, uint64_t i,
                                const void *names, size_t stride, const char *what, const char *whats,
                                const char *shown) {
    uint64_t slot = index_probe(ix, name.data, name.len, names, stride);
    if (ix->slots[slot] != 0)
        return lm_gguf_error(g, LM_ERR_FORMAT, "duplicate %s '%s' (%s #%u and #%llu)", what, shown, whats,
                    ix->slots[slot] - 1, (unsigned long long)i);
    ix->slots[slot] = (uint32_t)(i + 1);
    return LM_OK;
}

// Index of the entry named `name` (NUL-terminated), or -1.
static int64_t index_find(const struct gguf_index *ix, const char *name, const void *names, size_t stride) {
    uint32_t v = ix->slots[index_probe(ix, name, strlen(name), names, stride)];
    return v ? (int64_t)v - 1 : -1;
}

// ============================================================================
// Bounded reader
// ============================================================================

struct rd {
    const uint8_t *p;
    size_t size;
    size_t pos;
};

static size_t rd_left(const struct rd *r) { return r->size - r->pos; }

static bool rd_bytes(struct rd *r, void *out, size_t n) {
    if (rd_left(r) < n) return false;
    if (n) memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return true;
}
static bool rd_u32(struct rd *r, uint32_t *v) { return rd_bytes(r, v, 4); } // LE host
static bool rd_u64(struct rd *r, uint64_t *v) { return rd_bytes(r, v, 8); }

static bool rd_skip(struct rd *r, uint64_t n) {
    if ((uint64_t)rd_left(r) < n) return false;
    r->pos += (size_t)n;
    return true;
}

// String: u64 length + bytes. Returns 0 ok, 1 truncated length, 2 length past end, 3 cap.
static int rd_str(struct rd *r, struct lm_gguf_str *s, uint64_t cap) {
    uint64_t len;
    if (!rd_u64(r, &len)) return 1;
    if (len > (uint64_t)rd_left(r)) return 2;
    if (len > cap) return 3;
    s->len = len;
    s->data = (const char *)(r->p + r->pos);
    r->pos += (size_t)len;
    return 0;
}

static enum lm_status err_trunc(const struct lm_gguf *g, const struct rd *r, const char *what) {
    return lm_gguf_error(g, LM_ERR_FORMAT, "truncated: %s at offset %zu needs more bytes (file is %zu bytes)",
                what, r->pos, r->size);
}

static enum lm_status err_str(const struct lm_gguf *g, const struct rd *r, int rc,
                              const char *what, uint64_t cap) {
    if (rc == 1) return err_trunc(g, r, what);
    uint64_t len;
    memcpy(&len, r->p + r->pos - 8, 8);
    if (rc == 2)
        return lm_gguf_error(g, LM_ERR_FORMAT,
                    "%s: string length %llu at offset %zu extends past end of file "
                    "(%zu bytes left)",
                    what, (unsigned long long)len, r->pos - 8, rd_left(r));
    return lm_gguf_error(g, LM_ERR_FORMAT, "%s: string length %llu exceeds the limit of %llu", what,
                (unsigned long long)len, (unsigned long long)cap);
}

// ============================================================================
// Owned allocations
// ============================================================================

static void *owned_alloc(struct gguf_owned *o, size_t bytes) {
    if (o->n_allocs == o->cap_allocs) {
        size_t nc = o->cap_allocs ? o->cap_allocs * 2 : 16;
        void **na = realloc(o->allocs, nc * sizeof *na);
        if (!na) return NULL;
        o->allocs = na;
        o->cap_allocs = nc;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (p) o->allocs[o->n_allocs++] = p;
    return p;
}

static void owned_free(struct gguf_owned *o) {
    if (!o) return;
    for (size_t i = 0; i < o->n_allocs; i++) free(o->allocs[i]);
    free(o->allocs);
    free(o->kv_strs);
    free(o->kv_index.slots);
    free(o->tensor_index.slots);
    free(o);
}

// ============================================================================
// Key/value section
// ============================================================================

// Validate and skip an array body (elem type + count + elements) nested at `depth`.
static enum lm_status skip_array(const struct lm_gguf *g, struct rd *r, const char *key,
                                 int depth) {
    if (depth > GGUF_MAX_NEST)
        return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s': arrays nested deeper than %d", key,
                    GGUF_MAX_NEST);
    uint32_t et;
    uint64_t n;
    if (!rd_u32(r, &et)) return err_trunc(g, r, "nested array element type");
    if (!rd_u64(r, &n)) return err_trunc(g, r, "nested array count");
    if (et >= LM_GGUF_TYPE_COUNT)
        return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s': nested array has unknown element type %u", key,
                    et);
    if (et == LM_GGUF_TYPE_STRING) {
        if (n > rd_left(r) / 8)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key '%s': nested array of %llu strings cannot fit in the %zu bytes left",
                        key, (unsigned long long)n, rd_left(r));
        for (uint64_t i = 0; i < n; i++) {
            struct lm_gguf_str s;
            int rc = rd_str(r, &s, UINT64_MAX);
            if (rc) return err_str(g, r, rc, "nested array string", UINT64_MAX);
        }
    } else if (et == LM_GGUF_TYPE_ARRAY) {
        if (n > rd_left(r) / 12)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key '%s': nested array of %llu arrays cannot fit in the %zu bytes left",
                        key, (unsigned long long)n, rd_left(r));
        for (uint64_t i = 0; i < n; i++) {
            enum lm_status st = skip_array(g, r, key, depth + 1);
            if (st) return st;
        }
    } else {
        uint64_t bytes;
        if (__builtin_mul_overflow(n, (uint64_t)scalar_size(et), &bytes) ||
            bytes > rd_left(r))
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key '%s': nested array of %llu %s extends past end of file "
                        "(%zu bytes left)",
                        key, (unsigned long long)n, lm_gguf_type_name((enum lm_gguf_type)et),
                        rd_left(r));
        r->pos += (size_t)bytes;
    }
    return LM_OK;
}

static enum lm_status parse_value(struct lm_gguf *g, struct gguf_owned *o, struct rd *r,
                                  uint64_t i, const char *key) {
    struct lm_gguf_kv *kv = &g->kv[i];
    char what[300];
    if (kv->type == LM_GGUF_TYPE_STRING) {
        snprintf(what, sizeof what, "value of key '%s'", key);
        int rc = rd_str(r, &o->kv_strs[i], UINT64_MAX);
        if (rc) return err_str(g, r, rc, what, UINT64_MAX);
        kv->data = &o->kv_strs[i];
        return LM_OK;
    }
    if (kv->type != LM_GGUF_TYPE_ARRAY) {
        size_t sz = scalar_size(kv->type);
        kv->data = r->p + r->pos;
        if (!rd_skip(r, sz)) {
            snprintf(what, sizeof what, "%s value of key '%s'",
                     lm_gguf_type_name(kv->type), key);
            return err_trunc(g, r, what);
        }
        return LM_OK;
    }
    // array
    uint32_t et;
    uint64_t n;
    snprintf(what, sizeof what, "array header of key '%s'", key);
    if (!rd_u32(r, &et) || !rd_u64(r, &n)) return err_trunc(g, r, what);
    if (et >= LM_GGUF_TYPE_COUNT)
        return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s': unknown array element type %u (expected 0..%d)",
                    key, et, LM_GGUF_TYPE_COUNT - 1);
    kv->arr_type = (enum lm_gguf_type)et;
    kv->arr_n = n;
    if (et == LM_GGUF_TYPE_STRING) {
        if (n > rd_left(r) / 8)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key '%s': array of %llu strings cannot fit in the %zu bytes left", key,
                        (unsigned long long)n, rd_left(r));
        // n <= size / 8, so n * 16 cannot overflow size_t.
        struct lm_gguf_str *arr = owned_alloc(o, (size_t)n * sizeof *arr);
        if (!arr)
            return lm_gguf_error(g, LM_ERR_NOMEM, "key '%s': cannot allocate %llu strings", key,
                        (unsigned long long)n);
        for (uint64_t j = 0; j < n; j++) {
            int rc = rd_str(r, &arr[j], UINT64_MAX);
            if (rc) {
                snprintf(what, sizeof what, "element %llu of key '%s'", (unsigned long long)j,
                         key);
                return err_str(g, r, rc, what, UINT64_MAX);
            }
        }
        kv->data = arr;
    } else if (et == LM_GGUF_TYPE_ARRAY) {
        if (n > rd_left(r) / 12)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key '%s': array of %llu arrays cannot fit in the %zu bytes left", key,
                        (unsigned long long)n, rd_left(r));
        for (uint64_t j = 0; j < n; j++) {
            enum lm_status st = skip_array(g, r, key, 2);
            if (st) return st;
        }
        kv->data = NULL;
    } else {
        uint64_t bytes;
        if (__builtin_mul_overflow(n, (uint64_t)scalar_size(et), &bytes))
            return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s': array of %llu %s overflows (n * %zu bytes)",
                        key, (unsigned long long)n, lm_gguf_type_name(kv->arr_type),
                        scalar_size(et));
        if (bytes > rd_left(r))
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key '%s': array of %llu %s (%llu bytes) extends past end of file "
                        "(%zu bytes left)",
                        key, (unsigned long long)n, lm_gguf_type_name(kv->arr_type),
                        (unsigned long long)bytes, rd_left(r));
        kv->data = r->p + r->pos;
        r->pos += (size_t)bytes;
    }
    return LM_OK;
}

static enum lm_status parse_kvs(struct lm_gguf *g, struct gguf_owned *o, struct rd *r) {
    char kbuf[200], what[300];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        struct lm_gguf_kv *kv = &g->kv[i];
        snprintf(what, sizeof what, "key #%llu", (unsigned long long)i);
        int rc = rd_str(r, &kv->key, GGUF_MAX_KEY_LEN);
        if (rc) return err_str(g, r, rc, what, GGUF_MAX_KEY_LEN);
        const char *key = show(kbuf, sizeof kbuf, kv->key);
        enum lm_status st = index_add(g, &o->kv_index, kv->key, i, &g->kv[0].key, sizeof *g->kv, "key", "kv", key);
        if (st) return st;

        uint32_t t;
        snprintf(what, sizeof what, "type of key '%s'", key);
        if (!rd_u32(r, &t)) return err_trunc(g, r, what);
        if (t >= LM_GGUF_TYPE_COUNT)
            return lm_gguf_error(g, LM_ERR_FORMAT, "key '%s': unknown value type %u (expected 0..%d)", key,
                        t, LM_GGUF_TYPE_COUNT - 1);
        kv->type = (enum lm_gguf_type)t;
        kv->arr_type = LM_GGUF_TYPE_COUNT;
        st = parse_value(g, o, r, i, key);
        if (st) return st;
    }
    return LM_OK;
}

// ============================================================================
// Tensor infos
// ============================================================================

static enum lm_status parse_tensors(struct lm_gguf *g, struct gguf_owned *o, struct rd *r) {
    char nbuf[200], what[300];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct lm_gguf_tensor *t = &g->tensors[i];
        snprintf(what, sizeof what, "name of tensor #%llu", (unsigned long long)i);
        int rc = rd_str(r, &t->name, GGUF_MAX_KEY_LEN);
        if (rc) return err_str(g, r, rc, what, GGUF_MAX_KEY_LEN);
        const char *name = show(nbuf, sizeof nbuf, t->name);
        enum lm_status st = index_add(g, &o->tensor_index, t->name, i, &g->tensors[0].name, sizeof *g->tensors,
                                      "tensor name", "tensors", name);
        if (st) return st;

        snprintf(what, sizeof what, "info of tensor '%s'", name);
        if (!rd_u32(r, &t->n_dims)) return err_trunc(g, r, what);
        if (t->n_dims < 1 || t->n_dims > LM_GGUF_MAX_DIMS)
            return lm_gguf_error(g, LM_ERR_FORMAT, "tensor '%s': n_dims %u out of range (expected 1..%d)",
                        name, t->n_dims, LM_GGUF_MAX_DIMS);
        for (int d = 0; d < LM_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            if (!rd_u64(r, &ne)) return err_trunc(g, r, what);
            if (ne == 0 || ne > (uint64_t)INT64_MAX)
                return lm_gguf_error(g, LM_ERR_FORMAT,
                            "tensor '%s': ne[%u] = %lld is invalid (expected >= 1)", name, d,
                            (long long)ne);
            t->ne[d] = (int64_t)ne;
        }
        uint32_t type;
        if (!rd_u32(r, &type)) return err_trunc(g, r, what);
        if (!rd_u64(r, &t->offset)) return err_trunc(g, r, what);
        const struct lm_dtype_traits *tr = type < LM_DTYPE_COUNT ? lm_dtype_traits((int)type) : NULL;
        if (!tr) {
            char names[256];
            return lm_gguf_error(g, LM_ERR_UNSUPPORTED,
                                 "tensor '%s': unknown dtype id %u, which lumen cannot run "
                                 "(supported: %s)",
                                 name, type, lm_dtype_supported_names(names, sizeof names));
        }
        t->type = (enum lm_dtype)type;

        int64_t nel = t->ne[0];
        for (int d = 1; d < LM_GGUF_MAX_DIMS; d++)
            if (__builtin_mul_overflow(nel, t->ne[d], &nel))
                return lm_gguf_error(g, LM_ERR_FORMAT,
                            "tensor '%s': element count overflows (ne = {%lld, %lld, %lld, %lld})",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3]);
        if (t->ne[0] % tr->block_size != 0)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "tensor '%s': ne[0] = %lld is not a multiple of the %s block size %lld",
                        name, (long long)t->ne[0], tr->name, (long long)tr->block_size);
        uint64_t row = (uint64_t)(t->ne[0] / tr->block_size), bytes;
        uint64_t rows = (uint64_t)(nel / t->ne[0]);
        if (__builtin_mul_overflow(row, (uint64_t)tr->type_size, &row) ||
            __builtin_mul_overflow(row, rows, &bytes) || bytes > (uint64_t)SIZE_MAX)
            return lm_gguf_error(g, LM_ERR_FORMAT, "tensor '%s': byte size overflows", name);
        t->nbytes = bytes;
    }
    return LM_OK;
}

// Offsets and sizes, once the data section start is known.
static enum lm_status check_tensor_data(struct lm_gguf *g) {
    char nbuf[200];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct lm_gguf_tensor *t = &g->tensors[i];
        const char *name = show(nbuf, sizeof nbuf, t->name);
        if (t->offset % g->alignment != 0)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "tensor '%s': offset %llu is not a multiple of the alignment %llu", name,
                        (unsigned long long)t->offset, (unsigned long long)g->alignment);
        uint64_t start, end;
        if (__builtin_add_overflow(g->data_offset, t->offset, &start) || start > g->size)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "tensor '%s' starts past end of file (data offset %llu + offset %llu > "
                        "%zu)",
                        name, (unsigned long long)g->data_offset, (unsigned long long)t->offset,
                        g->size);
        if (__builtin_add_overflow(start, t->nbytes, &end) || end > g->size)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "tensor '%s' extends past end of file (offset %llu + %llu > %zu)", name,
                        (unsigned long long)start, (unsigned long long)t->nbytes, g->size);
        t->data = g->base + start;
    }
    return LM_OK;
}

// ============================================================================
// Open / close
// ============================================================================

static enum lm_status parse(struct lm_gguf *g) {
    struct rd r = {g->base, g->size, 0};
    char magic[4];
    if (!rd_bytes(&r, magic, 4)) return err_trunc(g, &r, "magic");
    if (memcmp(magic, "GGUF", 4) != 0)
        return lm_gguf_error(g, LM_ERR_FORMAT, "bad magic %02x %02x %02x %02x (expected \"GGUF\")",
                    (unsigned char)magic[0], (unsigned char)magic[1], (unsigned char)magic[2],
                    (unsigned char)magic[3]);
    if (!rd_u32(&r, &g->version)) return err_trunc(g, &r, "version");
    if (g->version != 2 && g->version != 3) {
        if (g->version == 0x02000000u || g->version == 0x03000000u)
            return lm_gguf_error(g, LM_ERR_UNSUPPORTED,
                        "version field 0x%08x looks big-endian; only little-endian GGUF is "
                        "supported",
                        g->version);
        return lm_gguf_error(g, LM_ERR_UNSUPPORTED, "GGUF version %u is not supported (expected 2 or 3)",
                    g->version);
    }
    if (!rd_u64(&r, &g->n_tensors)) return err_trunc(g, &r, "n_tensors");
    if (!rd_u64(&r, &g->n_kv)) return err_trunc(g, &r, "n_kv");
    size_t left = rd_left(&r);
    if (g->n_kv > GGUF_MAX_COUNT || g->n_kv > left / GGUF_MIN_KV_BYTES)
        return lm_gguf_error(g, LM_ERR_FORMAT,
                    "n_kv %llu is more than the %zu bytes left can hold (at least %d bytes each)",
                    (unsigned long long)g->n_kv, left, GGUF_MIN_KV_BYTES);
    left -= (size_t)g->n_kv * GGUF_MIN_KV_BYTES;
    if (g->n_tensors > GGUF_MAX_COUNT || g->n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        return lm_gguf_error(g, LM_ERR_FORMAT,
                    "n_tensors %llu is more than the bytes left after the kv section can hold "
                    "(at least %d bytes each)",
                    (unsigned long long)g->n_tensors, GGUF_MIN_TENSOR_BYTES);

    struct gguf_owned *o = calloc(1, sizeof *o);
    if (!o) return lm_gguf_error(g, LM_ERR_NOMEM, "cannot allocate reader state");
    g->owned = o;
    g->kv = calloc((size_t)g->n_kv + 1, sizeof *g->kv);
    g->tensors = calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
    o->kv_strs = calloc((size_t)g->n_kv + 1, sizeof *o->kv_strs);
    if (!g->kv || !g->tensors || !o->kv_strs || !index_init(&o->kv_index, g->n_kv) ||
        !index_init(&o->tensor_index, g->n_tensors))
        return lm_gguf_error(g, LM_ERR_NOMEM, "cannot allocate %llu kvs / %llu tensors",
                    (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);

    enum lm_status st = parse_kvs(g, o, &r);
    if (st) return st;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct lm_gguf_kv *akv = lm_gguf_find_kv(g, "general.alignment");
    if (akv) {
        if (akv->type != LM_GGUF_TYPE_UINT32)
            return lm_gguf_error(g, LM_ERR_FORMAT, "key 'general.alignment' has type %s, expected uint32",
                        lm_gguf_type_name(akv->type));
        uint32_t a;
        memcpy(&a, akv->data, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return lm_gguf_error(g, LM_ERR_FORMAT,
                        "key 'general.alignment' = %u is not a nonzero power of two", a);
        g->alignment = a;
    }

    st = parse_tensors(g, o, &r);
    if (st) return st;

    // Data section: aligned end of the tensor infos (may lie past EOF only if no tensor data).
    uint64_t end = r.pos, pad = (g->alignment - end % g->alignment) % g->alignment;
    g->data_offset = end + pad; // end <= size_t max, pad < 2^32: no overflow in uint64
    return check_tensor_data(g);
}

static void set_path(struct lm_gguf *g, const char *name) {
    snprintf(g->path, sizeof g->path, "%s", name ? name : "<memory>");
}

enum lm_status lm_gguf_open_memory(struct lm_gguf *g, const void *buf, size_t size,
                                   const char *name) {
    if (!g) return lm_error_set(LM_ERR_ARG, "gguf: lm_gguf_open_memory: g is NULL");
    memset(g, 0, sizeof *g);
    set_path(g, name);
    if (!buf && size) return lm_gguf_error(g, LM_ERR_ARG, "buffer is NULL");
    g->base = buf;
    g->size = buf ? size : 0;
    enum lm_status st = parse(g);
    if (st) lm_gguf_close(g);
    return st;
}

enum lm_status lm_gguf_open(struct lm_gguf *g, const char *path) {
    if (!g || !path) return lm_error_set(LM_ERR_ARG, "gguf: lm_gguf_open: NULL argument");
    memset(g, 0, sizeof *g);
    set_path(g, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lm_gguf_error(g, LM_ERR_IO, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return lm_gguf_error(g, LM_ERR_IO, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lm_gguf_error(g, LM_ERR_IO, "not a regular file");
    }
    if (sb.st_size == 0) {
        close(fd);
        return lm_gguf_error(g, LM_ERR_FORMAT, "file is empty");
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return lm_gguf_error(g, LM_ERR_NOMEM, "file of %lld bytes does not fit in memory",
                    (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) return lm_gguf_error(g, LM_ERR_IO, "mmap of %zu bytes failed: %s", size, strerror(e));
    // Start reading the weights in the background now: the first forward pass would
    // otherwise page-fault its way through the whole file (hundreds of ms of TTFT).
    madvise(m, size, MADV_WILLNEED);
    g->base = m;
    g->size = size;
    g->mapped = true;
    enum lm_status st = parse(g);
    if (st) lm_gguf_close(g);
    return st;
}

void lm_gguf_close(struct lm_gguf *g) {
    if (!g) return;
    owned_free(g->owned);
    free(g->kv);
    free(g->tensors);
    if (g->mapped && g->base) munmap((void *)g->base, g->size);
    char path[sizeof g->path];
    memcpy(path, g->path, sizeof path);
    memset(g, 0, sizeof *g);
    memcpy(g->path, path, sizeof path); // keep the name for late messages
}

// ============================================================================
// Lookup
// ============================================================================

const struct lm_gguf_kv *lm_gguf_find_kv(const struct lm_gguf *g, const char *key) {
    if (!g || !g->owned || !key) return NULL;
    const struct gguf_owned *o = g->owned;
    int64_t i = index_find(&o->kv_index, key, &g->kv[0].key, sizeof *g->kv);
    return i >= 0 ? &g->kv[i] : NULL;
}

const struct lm_gguf_tensor *lm_gguf_find_tensor(const struct lm_gguf *g, const char *name) {
    if (!g || !g->owned || !name) return NULL;
    const struct gguf_owned *o = g->owned;
    int64_t i = index_find(&o->tensor_index, name, &g->tensors[0].name, sizeof *g->tensors);
    return i >= 0 ? &g->tensors[i] : NULL;
}
