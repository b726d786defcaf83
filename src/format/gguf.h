// GGUF v2/v3 reader on mmap: parse and validate only, no compute.
// Every count, length, dim, type, offset and size is checked against the file
// and against overflow before use; after lm_gguf_open() succeeds the rest of
// lumen may trust the structures below.
#ifndef LM_FORMAT_GGUF_H
#define LM_FORMAT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

enum lm_gguf_type {
    LM_GGUF_TYPE_UINT8 = 0,
    LM_GGUF_TYPE_INT8 = 1,
    LM_GGUF_TYPE_UINT16 = 2,
    LM_GGUF_TYPE_INT16 = 3,
    LM_GGUF_TYPE_UINT32 = 4,
    LM_GGUF_TYPE_INT32 = 5,
    LM_GGUF_TYPE_FLOAT32 = 6,
    LM_GGUF_TYPE_BOOL = 7,
    LM_GGUF_TYPE_STRING = 8,
    LM_GGUF_TYPE_ARRAY = 9,
    LM_GGUF_TYPE_UINT64 = 10,
    LM_GGUF_TYPE_INT64 = 11,
    LM_GGUF_TYPE_FLOAT64 = 12,
    LM_GGUF_TYPE_COUNT
};

#define LM_GGUF_MAX_DIMS 4

// A string inside the mapping: NOT NUL-terminated.
struct lm_gguf_str {
    uint64_t len;
    const char *data;
};

struct lm_gguf_kv {
    struct lm_gguf_str key;
    enum lm_gguf_type type;     // value type
    enum lm_gguf_type arr_type; // element type when type == ARRAY
    uint64_t arr_n;             // element count when type == ARRAY
    // scalars: points at the (possibly unaligned) value in the mapping; use memcpy.
    // STRING: points at a struct lm_gguf_str owned by the reader.
    // ARRAY of scalars: points at the first element in the mapping (unaligned).
    // ARRAY of STRING: points at arr_n struct lm_gguf_str owned by the reader.
    // ARRAY of ARRAY: not decoded (data == NULL), but validated and skipped.
    const void *data;
};

struct lm_gguf_tensor {
    struct lm_gguf_str name;
    uint32_t n_dims;
    int64_t ne[LM_GGUF_MAX_DIMS]; // ne[0] is the contiguous (row) dimension; unused dims = 1
    enum lm_dtype type;
    uint64_t offset;   // relative to the data section, multiple of alignment
    uint64_t nbytes;   // row size * rows
    const void *data;  // inside the mapping, nbytes long
};

struct lm_gguf {
    char path[512];     // for messages
    const uint8_t *base; // mapping (or caller's buffer)
    size_t size;
    bool mapped;        // true if base came from mmap (unmapped on close)
    uint32_t version;
    uint64_t n_kv;
    struct lm_gguf_kv *kv;
    uint64_t n_tensors;
    struct lm_gguf_tensor *tensors;
    uint64_t alignment;   // general.alignment or 32
    uint64_t data_offset; // start of the tensor data section
    void *owned;          // internal allocations
};

// mmap + parse + validate. On error: g is left closed, lm_error_msg() has one line
// starting "gguf: <path>: ...".
enum lm_status lm_gguf_open(struct lm_gguf *g, const char *path);
// Same on a caller-owned buffer (tests, fuzzing); name is used in messages.
enum lm_status lm_gguf_open_memory(struct lm_gguf *g, const void *buf, size_t size,
                                   const char *name);
void lm_gguf_close(struct lm_gguf *g);

const struct lm_gguf_kv *lm_gguf_find_kv(const struct lm_gguf *g, const char *key);
const struct lm_gguf_tensor *lm_gguf_find_tensor(const struct lm_gguf *g, const char *name);
const char *lm_gguf_type_name(enum lm_gguf_type t);

// Typed getters. If the key is absent: required -> LM_ERR_FORMAT ("missing required key"),
// otherwise LM_OK with *out untouched. Present with an incompatible type or a value
// out of range for the output -> LM_ERR_FORMAT naming key, expected and actual type.
// Integer getters accept any integer type whose value fits.
enum lm_status lm_gguf_get_u32(const struct lm_gguf *g, const char *key, uint32_t *out,
                               bool required);
enum lm_status lm_gguf_get_i32(const struct lm_gguf *g, const char *key, int32_t *out,
                               bool required);
enum lm_status lm_gguf_get_u64(const struct lm_gguf *g, const char *key, uint64_t *out,
                               bool required);
enum lm_status lm_gguf_get_f32(const struct lm_gguf *g, const char *key, float *out,
                               bool required); // FLOAT32 or FLOAT64
enum lm_status lm_gguf_get_bool(const struct lm_gguf *g, const char *key, bool *out,
                                bool required);
enum lm_status lm_gguf_get_str(const struct lm_gguf *g, const char *key,
                               struct lm_gguf_str *out, bool required);
// Array of the given element type; *n and *data as in struct lm_gguf_kv.
enum lm_status lm_gguf_get_arr(const struct lm_gguf *g, const char *key,
                               enum lm_gguf_type elem_type, uint64_t *n, const void **data,
                               bool required);

// Checks that tensor `name` exists with dtype among any supported ones and exactly
// the given shape (n_dims entries of ne); message names tensor, expected vs actual.
enum lm_status lm_gguf_expect_tensor(const struct lm_gguf *g, const char *name, uint32_t n_dims,
                                     const int64_t *ne, const struct lm_gguf_tensor **out);

// Sets the error message "gguf: PATH: <fmt...>" and returns st (for gguf.c, gguf_get.c).
enum lm_status lm_gguf_error(const struct lm_gguf *g, enum lm_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// helper: compare an lm_gguf_str with a C string
bool lm_gguf_str_eq(struct lm_gguf_str s, const char *c);

#endif
