// Matmul of weights sharing one input (matmul.h): the path each weight takes, the
// activations its kernels read (quantized once per activation dtype, repacked for the
// VNNI and il kernels), and the row-range loops over the dispatch table's kernels.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"

_Static_assert(LM_PRIVATE_QUANT_ROWS <= LM_VEC_DOT_MAX_NT, "per_row_n: one vec_dot_n call per row");
_Static_assert(LM_PRIVATE_QUANT_ROWS >= LM_IL_GEMV_MAX_NT, "il_gemv batches use private rows");

// ================================================================ paths

static const char *const k_path_names[LM_MATMUL_PATH_COUNT] = {
    [LM_MATMUL_IL16] = "il16",           [LM_MATMUL_IL_GEMV] = "il_gemv",
    [LM_MATMUL_GEMM_U8] = "gemm_u8",     [LM_MATMUL_MULTITOKEN] = "multitoken",
    [LM_MATMUL_PER_ROW_N] = "per_row_n", [LM_MATMUL_PER_ROW] = "per_row",
    [LM_MATMUL_IL_AMX] = "il_amx",
};

const char *lm_matmul_path_name(enum lm_matmul_path p) {
    return (unsigned)p < LM_MATMUL_PATH_COUNT ? k_path_names[p] : "?";
}

// The path of weight W for n_rows tokens; il: W runs on its il layout (lm_matmul_plan);
// amx: the workspace has AMX activation records.
static enum lm_matmul_path choose_path(const struct lm_kernels *k, const struct lm_weight *W, bool il,
                                       bool amx, int64_t n_rows) {
    if (il && amx && k->il_gemm_amx[W->type] && n_rows >= LM_IL_AMX_MIN_NT) return LM_MATMUL_IL_AMX;
    if (il)
        return k->il_gemv[W->type] && n_rows <= LM_IL_GEMV_MAX_NT &&
                       lm_il_in_place(W->type, W->row_bytes, W->n_in)
                   ? LM_MATMUL_IL_GEMV
                   : LM_MATMUL_IL16;
    // q5_0 / q8_0 in the file layout take the u8 tiles at every batch size, decode included:
    // one code path (same bits as vec_dot, kernels.h)
    if (lm_vec_dot_type(W->type) == LM_DTYPE_Q8_0 && k->vec_dot_n_u8[W->type]) return LM_MATMUL_GEMM_U8;
    if (!k->vec_dot_n[W->type] || n_rows == 1) return LM_MATMUL_PER_ROW;
    return n_rows > LM_PRIVATE_QUANT_ROWS ? LM_MATMUL_MULTITOKEN : LM_MATMUL_PER_ROW_N;
}

// appends "sep" (unless at the start) + s to buf[*len] within n bytes
static void label_append(char *buf, size_t n, size_t *len, const char *sep, const char *s) {
    if (*len + 1 >= n) return;
    const int w = snprintf(buf + *len, n - *len, "%s%s", *len ? sep : "", s);
    if (w > 0) *len += (size_t)w < n - *len ? (size_t)w : n - *len - 1;
}

size_t lm_matmul_decision_label(const struct lm_matmul_decision *d, char *buf, size_t n) {
    if (n == 0) return 0;
    buf[0] = 0;
    size_t len = 0;
    for (int j = 0; j < d->n_w; j++) {
        bool seen = false;
        for (int i = 0; i < j; i++) seen = seen || d->w[i]->type == d->w[j]->type;
        if (!seen) label_append(buf, n, &len, "+", lm_dtype_name(d->w[j]->type));
    }
    label_append(buf, n, &len, "_", d->kern);
    for (int j = 0; j < d->n_w; j++) {
        bool seen = false;
        for (int i = 0; i < j; i++) seen = seen || d->path[i] == d->path[j];
        if (!seen) label_append(buf, n, &len, j ? "+" : "_", d->name[j]);
    }
    return len;
}

// ================================================================ workspace

// the activation dtypes a weight's dot product consumes (lm_vec_dot_type), f32 aside
static const enum lm_dtype k_act[] = {LM_DTYPE_Q8_0, LM_DTYPE_Q8_1, LM_DTYPE_Q8_K, LM_DTYPE_F16,
                                      LM_DTYPE_BF16};
#define N_ACT (sizeof k_act / sizeof k_act[0])

static size_t act_row_bytes(enum lm_dtype t, int64_t n_in) {
    const struct lm_dtype_traits *tr = lm_dtype_traits(t);
    return ((size_t)n_in + (size_t)tr->block_size - 1) / (size_t)tr->block_size * tr->type_size;
}

// One buffer of the workspace: 64-byte aligned for SIMD loads; not cleared (every row is
// written before it is read). dry: only counts the bytes (lm_matmul_ws_bytes).
static void *ws_buf(struct lm_matmul_ws *ws, size_t bytes, bool dry, bool *ok) {
    ws->bytes += bytes;
    if (dry) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        *ok = false;
        return NULL;
    }
    return p;
}

static bool ws_layout(struct lm_matmul_ws *ws, const struct lm_matmul_ws_params *p, bool dry) {
    memset(ws, 0, sizeof *ws);
    ws->p = *p;
    bool ok = true;
    const size_t R = (size_t)p->n_rows, P = (size_t)p->n_threads * LM_PRIVATE_QUANT_ROWS;
    for (size_t i = 0; i < N_ACT; i++) ws->xq[k_act[i]] = ws_buf(ws, R * act_row_bytes(k_act[i], p->n_in), dry, &ok);
    ws->xu8_stride = (size_t)p->n_in;
    ws->xdyv_stride = (((size_t)p->n_in / 32 + 1) / 2 + 1) * 16;
    ws->xu8 = ws_buf(ws, R * ws->xu8_stride, dry, &ok);
    ws->xdyv = ws_buf(ws, R * ws->xdyv_stride * sizeof(float), dry, &ok);
    ws->xu8_priv = ws_buf(ws, P * ws->xu8_stride, dry, &ok);
    ws->xdyv_priv = ws_buf(ws, P * ws->xdyv_stride * sizeof(float), dry, &ok);
    ws->xil_stride = lm_il_act_row_bytes(LM_DTYPE_Q8_0, (p->n_in + 31) / 32 * 32);
    if (p->f16_il) { // f32 activation rows, 64-byte multiples
        const size_t f = (lm_il_act_row_bytes(LM_DTYPE_F16, p->n_in) + 63) / 64 * 64;
        if (f > ws->xil_stride) ws->xil_stride = f;
    }
    ws->xil = ws_buf(ws, R * ws->xil_stride, dry, &ok);
    if (p->amx) ws->xamx = ws_buf(ws, lm_il_act_amx_bytes(p->n_rows, p->n_in), dry, &ok);
    ws->xil_priv = ws_buf(ws, P * ws->xil_stride, dry, &ok);
    if (p->q81_il) {
        ws->xil81_stride = lm_il_act_row_bytes(LM_DTYPE_Q4_1, (p->n_in + 31) / 32 * 32);
        ws->xil81 = ws_buf(ws, R * ws->xil81_stride, dry, &ok);
        ws->xil81_priv = ws_buf(ws, P * ws->xil81_stride, dry, &ok);
    }
    if (!dry) {
        ws->xq_priv = calloc((size_t)p->n_threads * LM_DTYPE_COUNT, sizeof(void *));
        if (!ws->xq_priv) return false;
    }
    for (int t = 0; ok && t < p->n_threads; t++)
        for (size_t i = 0; i < N_ACT; i++) {
            void *b = ws_buf(ws, LM_PRIVATE_QUANT_ROWS * act_row_bytes(k_act[i], p->n_in), dry, &ok);
            if (!dry) ws->xq_priv[t * LM_DTYPE_COUNT + k_act[i]] = b;
        }
    return ok;
}

void lm_matmul_ws_fit(struct lm_matmul_ws_params *p, const struct lm_weight *w) {
    if (!w->data) return;
    if (w->n_in > p->n_in) p->n_in = w->n_in;
    if (w->il && w->type == LM_DTYPE_F16) p->f16_il = true;
    if (w->il && (w->type == LM_DTYPE_Q4_1 || w->type == LM_DTYPE_Q5_1)) p->q81_il = true;
    if (w->il && (w->type == LM_DTYPE_Q4_K || w->type == LM_DTYPE_Q5_K || w->type == LM_DTYPE_Q6_K)) p->amx = true;
}

uint64_t lm_matmul_ws_bytes(const struct lm_matmul_ws_params *p) {
    struct lm_matmul_ws ws;
    ws_layout(&ws, p, true);
    return ws.bytes;
}

enum lm_status lm_matmul_ws_init(struct lm_matmul_ws *ws, const struct lm_matmul_ws_params *p) {
    if (p->n_threads <= 0 || p->n_rows <= 0 || p->n_in <= 0)
        return lm_error_set(LM_ERR_ARG, "matmul: workspace for %d threads, %lld rows of %lld",
                            p->n_threads, (long long)p->n_rows, (long long)p->n_in);
    if (!ws_layout(ws, p, false)) {
        lm_matmul_ws_free(ws);
        return lm_error_set(LM_ERR_NOMEM, "matmul: cannot allocate the workspace (%d threads, %lld rows of %lld)",
                            p->n_threads, (long long)p->n_rows, (long long)p->n_in);
    }
    return LM_OK;
}

void lm_matmul_ws_free(struct lm_matmul_ws *ws) {
    for (int i = 0; i < LM_DTYPE_COUNT; i++) free(ws->xq[i]);
    if (ws->xq_priv)
        for (int i = 0; i < ws->p.n_threads * LM_DTYPE_COUNT; i++) free(ws->xq_priv[i]);
    free(ws->xq_priv);
    free(ws->xu8);
    free(ws->xdyv);
    free(ws->xu8_priv);
    free(ws->xdyv_priv);
    free(ws->xil);
    free(ws->xil_priv);
    free(ws->xil81);
    free(ws->xil81_priv);
    free(ws->xamx);
    memset(ws, 0, sizeof *ws);
}

// ================================================================ plan

void lm_matmul_plan(struct lm_matmul_plan *p, const struct lm_kernels *k,
                    const struct lm_matmul_ws *ws, const struct lm_weight *const *Ws, int n_w,
                    const float *X, int64_t n_rows, int ith) {
    const int64_t n_in = Ws[0]->n_in;
    LM_ASSERT(n_w >= 1 && n_w <= LM_MATMUL_MAX_W);
    LM_ASSERT(n_rows <= ws->p.n_rows && n_in <= ws->p.n_in && ith >= 0 && ith < ws->p.n_threads);
    const bool priv = n_rows <= LM_PRIVATE_QUANT_ROWS;
    const size_t pr = (size_t)ith * LM_PRIVATE_QUANT_ROWS; // this thread's first private row
    p->d.kern = k->name;
    p->d.n_w = n_w;
    p->d.n_rows = n_rows;
    p->k = k;
    p->X = X;
    p->n_in = n_in;
    p->xu_stride = ws->xu8_stride;
    p->xdy_stride = ws->xdyv_stride;
    p->xil_stride = ws->xil_stride;
    p->xu = priv ? ws->xu8_priv + pr * ws->xu8_stride : ws->xu8;
    p->xdy = priv ? ws->xdyv_priv + pr * ws->xdyv_stride : ws->xdyv;
    p->xil = priv ? ws->xil_priv + pr * ws->xil_stride : ws->xil;
    p->xamx = priv ? NULL : ws->xamx;
    p->xil81_stride = ws->xil81_stride;
    p->xil81 = priv ? (ws->xil81_priv ? ws->xil81_priv + pr * ws->xil81_stride : NULL) : ws->xil81;
    p->n_q = 0;
    // which activation rows the q8_0 consumers need (il "xq8" rows, u8 rows for the file
    // layout), and whether f16 il weights get their f32 rows: not when q8_0 il rows take xil
    bool q8_il = false, q8_flat = false, f16_il = false, q81_il = false;
    for (int j = 0; j < n_w; j++) {
        const enum lm_dtype vt = lm_vec_dot_type(Ws[j]->type);
        if (vt == LM_DTYPE_Q8_0) {
            if (Ws[j]->il) q8_il = true;
            else q8_flat = true;
        }
        if (Ws[j]->type == LM_DTYPE_F16 && Ws[j]->il) f16_il = true;
        if (vt == LM_DTYPE_Q8_1 && Ws[j]->il) q81_il = true; // own buffer (xil81)
    }
    if (q8_il) f16_il = false;
    for (int j = 0; j < n_w; j++) {
        const struct lm_weight *W = Ws[j];
        const enum lm_dtype vt = lm_vec_dot_type(W->type);
        LM_ASSERT(W->n_in == n_in && vt != LM_DTYPE_COUNT);
        const bool il = W->il && (vt == LM_DTYPE_F16 ? f16_il : true);
        p->d.w[j] = W;
        p->d.path[j] = choose_path(k, W, il, p->xamx != NULL, n_rows);
        p->d.name[j] = k_path_names[p->d.path[j]];
        if (vt == LM_DTYPE_F32) { // X itself
            p->xa[j] = (const char *)X;
            p->xrow[j] = (size_t)n_in * sizeof(float);
            continue;
        }
        const size_t qrow = lm_dtype_row_size(vt, n_in);
        char *buf = priv ? ws->xq_priv[ith * LM_DTYPE_COUNT + vt] : ws->xq[vt];
        p->xa[j] = buf;
        p->xrow[j] = qrow;
        if (il && (vt == LM_DTYPE_Q8_0 || vt == LM_DTYPE_F16)) { // k-quant il kernels read q8_K rows
            p->xa[j] = (const char *)p->xil;
            p->xrow[j] = p->xil_stride;
        }
        if (il && vt == LM_DTYPE_Q8_1) { // xq81 rows (the ws was fitted to this weight)
            LM_ASSERT(p->xil81 != NULL);
            p->xa[j] = (const char *)p->xil81;
            p->xrow[j] = p->xil81_stride;
        }
        int q = 0;
        while (q < p->n_q && p->q[q].vt != vt) q++;
        if (q < p->n_q) { // quantized once per activation dtype
            p->q[q].amx = p->q[q].amx || p->d.path[j] == LM_MATMUL_IL_AMX;
            continue;
        }
        p->q[p->n_q++] = (struct lm_matmul_quant){
            .vt = vt, .buf = buf, .qrow = qrow,
            .widen = vt == LM_DTYPE_F16 && f16_il,
            .u8 = vt == LM_DTYPE_Q8_0 && q8_flat,
            .xq8 = vt == LM_DTYPE_Q8_0 && q8_il,
            .xq81 = vt == LM_DTYPE_Q8_1 && q81_il,
            .amx = p->d.path[j] == LM_MATMUL_IL_AMX,
        };
    }
    p->shared = !priv && p->n_q > 0;
}

void lm_matmul_quantize(const struct lm_matmul_plan *p, int64_t r0, int64_t r1) {
    const struct lm_kernels *k = p->k;
    const int64_t n_in = p->n_in;
    for (int q = 0; q < p->n_q; q++) {
        const struct lm_matmul_quant *Q = &p->q[q];
        for (int64_t i = r0; i < r1; i++) {
            char *row = Q->buf + (size_t)i * Q->qrow;
            k->quant[Q->vt](p->X + i * n_in, row, n_in);
            if (Q->widen) // the f16 il rows: that row widened (lm_il_act_from)
                k->dequant[LM_DTYPE_F16](row, (float *)(p->xil + (size_t)i * p->xil_stride), n_in);
            if (Q->u8)
                lm_q8_0_repack_u8(row, n_in, p->xu + (size_t)i * p->xu_stride, p->xdy + (size_t)i * p->xdy_stride);
            if (Q->xq8) // one "xq8" layout for q8_0 and q5_0 weights
                lm_il_act_from(LM_DTYPE_Q8_0, row, n_in, p->xil + (size_t)i * p->xil_stride);
            if (Q->xq81) lm_il_act_from(LM_DTYPE_Q4_1, row, n_in, p->xil81 + (size_t)i * p->xil81_stride);
            if (Q->amx) lm_il_act_amx(row, n_in, i, p->xamx);
        }
        if (Q->amx && r0 < r1 && r1 == p->d.n_rows) // zero rows pad the last record
            for (int64_t i = r1; i % 16; i++) lm_il_act_amx(NULL, n_in, i, p->xamx);
    }
}

// ================================================================ compute

// Rows [a, b) of W against all n_rows activation rows, in blocks of 16 weight rows x tiles
// of 8 tokens. Blocks of 16 weight rows (~7 KB of q5_0 at n_in 640) stay in L1 while tiles
// of 8 tokens stream past them; going row by row instead re-read every token's activations
// from L2 once per weight row.
#define LM_GEMM_ROW_BLOCK 16

// W (n_out, n_in) @ u8 rows xu (n_rows, n_in) -> Y (n_rows, n_out), columns [a, b)
static void rows_u8(const struct lm_matmul_plan *p, lm_vec_dot_n_u8_fn dotu, float *Y,
                    const struct lm_weight *W, int64_t a, int64_t b) {
    const int64_t n_in = W->n_in, n_out = W->n_out, n_rows = p->d.n_rows;
    for (int64_t rb = a; rb < b; rb += LM_GEMM_ROW_BLOCK) {
        const int64_t re = rb + LM_GEMM_ROW_BLOCK < b ? rb + LM_GEMM_ROW_BLOCK : b;
        for (int64_t i = 0; i < n_rows; i += LM_VEC_DOT_MAX_NT) {
            const int nt = n_rows - i < LM_VEC_DOT_MAX_NT ? (int)(n_rows - i) : LM_VEC_DOT_MAX_NT;
            const uint8_t *xu = p->xu + (size_t)i * p->xu_stride;
            const float *dy = p->xdy + (size_t)i * p->xdy_stride;
            for (int64_t r = rb; r < re; r++)
                dotu(n_in, nt, &Y[i * n_out + r], (size_t)n_out,
                     (const char *)W->data + (size_t)r * W->row_bytes, xu, p->xu_stride, dy,
                     p->xdy_stride);
        }
    }
}

// W (n_out, n_in) @ xq (n_rows, n_in; xrow bytes apart) -> Y (n_rows, n_out), columns [a, b)
static void rows_n(lm_vec_dot_n_fn dotn, float *Y, const struct lm_weight *W, const char *xq,
                   size_t xrow, int64_t n_rows, int64_t a, int64_t b) {
    const int64_t n_in = W->n_in, n_out = W->n_out;
    for (int64_t rb = a; rb < b; rb += LM_GEMM_ROW_BLOCK) {
        const int64_t re = rb + LM_GEMM_ROW_BLOCK < b ? rb + LM_GEMM_ROW_BLOCK : b;
        for (int64_t i = 0; i < n_rows; i += LM_VEC_DOT_MAX_NT) {
            const int nt = n_rows - i < LM_VEC_DOT_MAX_NT ? (int)(n_rows - i) : LM_VEC_DOT_MAX_NT;
            for (int64_t r = rb; r < re; r++)
                dotn(n_in, nt, &Y[i * n_out + r], (size_t)n_out,
                     (const char *)W->data + (size_t)r * W->row_bytes, xq + (size_t)i * xrow, xrow);
        }
    }
}

// W il groups (n_out / 16, group bytes) @ il activation rows -> Y columns [a, b), a and b
// multiples of LM_IL_ROWS: each group decoded once per tile of up to LM_IL_MAX_NT tokens.
// The groups go in chunks of about LM_IL_CHUNK_BYTES of weights, each tile running over the
// whole chunk before the next tile: the chunk stays in L2 and a tile's activation rows are
// reused across its groups, where one group at a time streamed every token's row past each
// group (il GEMM alone, 1 thread, 256 tokens, CPU time per group and tile, n_in 2048: iq4_xs
// 1691 -> 1542 ns, q4_K 1955 -> 1760, q3_K 2041 -> 1851, q2_K 1954 -> 1776; n_in 8192: 5-10%).
// The same kernel calls, so the same results.
#define LM_IL_CHUNK_BYTES (256 * 1024)
static void rows_il16(lm_il_gemm_fn gemm, float *Y, const struct lm_weight *W, const char *xa,
                      size_t xrow, int64_t n_rows, int64_t a, int64_t b) {
    const int64_t n_out = W->n_out, g_end = b / LM_IL_ROWS;
    int64_t chunk = (int64_t)(LM_IL_CHUNK_BYTES / W->il_group_bytes);
    if (chunk < 1) chunk = 1;
    for (int64_t g0 = a / LM_IL_ROWS; g0 < g_end; g0 += chunk) {
        const int64_t g1 = g0 + chunk < g_end ? g0 + chunk : g_end;
        for (int64_t i = 0; i < n_rows; i += LM_IL_MAX_NT) {
            const int nt = n_rows - i < LM_IL_MAX_NT ? (int)(n_rows - i) : LM_IL_MAX_NT;
            for (int64_t g = g0; g < g1; g++)
                gemm(W->n_in, nt, &Y[i * n_out + g * LM_IL_ROWS], (size_t)n_out,
                     (const char *)W->il + (size_t)g * W->il_group_bytes, xa + (size_t)i * xrow, xrow);
        }
    }
}

void lm_matmul_rows(const struct lm_matmul_plan *p, int j, float *Y, int64_t a, int64_t b) {
    const struct lm_kernels *k = p->k;
    const struct lm_weight *W = p->d.w[j];
    const int64_t n_in = W->n_in, n_out = W->n_out, n_rows = p->d.n_rows;
    const char *xq = p->xa[j];
    const size_t xrow = p->xrow[j];
    switch (p->d.path[j]) {
    case LM_MATMUL_IL_GEMV:
        LM_ASSERT(a % LM_IL_ROWS == 0 && b % LM_IL_ROWS == 0);
        k->il_gemv[W->type](n_in, b - a, (int)n_rows, &Y[a], (size_t)n_out,
                            (const char *)W->il + (size_t)a * W->row_bytes, xq, xrow);
        return;
    case LM_MATMUL_IL16:
        LM_ASSERT(k->il_gemm[W->type] && a % LM_IL_ROWS == 0 && b % LM_IL_ROWS == 0);
        rows_il16(k->il_gemm[W->type], Y, W, xq, xrow, n_rows, a, b);
        return;
    case LM_MATMUL_IL_AMX:
        LM_ASSERT(k->il_gemm_amx[W->type] && a % LM_IL_ROWS == 0 && b % LM_IL_ROWS == 0);
        if (b > a)
            k->il_gemm_amx[W->type](n_in, (b - a) / LM_IL_ROWS, W->il_group_bytes, n_rows, &Y[a], (size_t)n_out,
                                    (const char *)W->il + (size_t)(a / LM_IL_ROWS) * W->il_group_bytes, p->xamx);
        return;
    case LM_MATMUL_GEMM_U8:
        rows_u8(p, k->vec_dot_n_u8[W->type], Y, W, a, b);
        return;
    case LM_MATMUL_MULTITOKEN:
        rows_n(k->vec_dot_n[W->type], Y, W, xq, xrow, n_rows, a, b);
        return;
    case LM_MATMUL_PER_ROW_N: { // n_rows <= LM_VEC_DOT_MAX_NT: one call per weight row
        const lm_vec_dot_n_fn dotn = k->vec_dot_n[W->type];
        for (int64_t r = a; r < b; r++)
            dotn(n_in, (int)n_rows, &Y[r], (size_t)n_out, (const char *)W->data + (size_t)r * W->row_bytes, xq, xrow);
        return;
    }
    case LM_MATMUL_PER_ROW:
    default: {
        const lm_vec_dot_fn dot = k->vec_dot[W->type];
        for (int64_t r = a; r < b; r++) {
            const void *wr = (const char *)W->data + (size_t)r * W->row_bytes;
            for (int64_t i = 0; i < n_rows; i++) dot(n_in, &Y[i * n_out + r], wr, xq + (size_t)i * xrow);
        }
        return;
    }
    }
}
