// AVX-512 attention on a Q8_0 KV cache (kernels.h, attn_q8): attn_avx512.c's kernel with
// each K / V row read as q8_0 blocks (or f16, K and V independently), same float order.
// Kept apart from attn_avx512.c so that the f16 kernel stays as it is.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// The loops are attn_avx512.c's (its comments explain the order and the tiling); what
// changes is the row read. A q8_0 value d * q is exact in float (11 + 8 significant bits),
// so converting 16 quants and multiplying by the block's d gives the same floats as the
// generic kernel's dequantization, and the fmas after it see the same inputs. K and V being
// compile-time flags (kq, vq) below, each combination gets its own loops.

static inline __m512 q8_tree16(const float *x, int64_t stride) {
    __m512 s[8];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_add_ps(_mm512_loadu_ps(x + stride * (i + 8)), _mm512_loadu_ps(x + stride * i));
    for (int i = 0; i < 4; i++) s[i] = _mm512_add_ps(s[i + 4], s[i]);
    return _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
}

struct q8_ctx {
    const uint8_t *kb, *vb;
    size_t block_bytes;
    const int32_t *blocks;
    const uint64_t *present;
    size_t krow, vrow;        // bytes from one cell's K / V row to the next
    size_t vhead;             // bytes of this head's V in a row (prefetched with the K row)
    int32_t p0, p, base, end;
    int64_t hdk, hdv;
    const float *qf;          // (nh, hdk) queries (rounded to f16 if K is f16)
    float *e;
    size_t e_stride;
    float *xbuf;
};

static inline __attribute__((always_inline)) const uint8_t *q8_k(const struct q8_ctx *j, const int sh, int32_t c) {
    return j->kb + (size_t)j->blocks[c >> sh] * j->block_bytes + (size_t)(c & ((1 << sh) - 1)) * j->krow;
}
static inline __attribute__((always_inline)) const uint8_t *q8_v(const struct q8_ctx *j, const int sh, int32_t c) {
    return j->vb + (size_t)j->blocks[c >> sh] * j->block_bytes + (size_t)(c & ((1 << sh) - 1)) * j->vrow;
}

// values [i, i + 16) of a row (i a multiple of 16) as floats
static inline __attribute__((always_inline)) __m512 q8_load16(const uint8_t *row, const bool q8, int64_t i) {
    if (!q8) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * i)));
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)row + i / LM_QK8_0;
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + i % LM_QK8_0))));
    return _mm512_mul_ps(q, _mm512_set1_ps(lm_f16_to_f32(b->d)));
}
// value i of a row
static inline float q8_load1(const uint8_t *row, const bool q8, int64_t i) {
    if (!q8) return lm_f16_to_f32(((const lm_f16 *)row)[i]);
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)row + i / LM_QK8_0;
    return lm_f16_to_f32(b->d) * (float)b->qs[i % LM_QK8_0];
}

static inline __mmask16 q8_valid16(const struct q8_ctx *j, int32_t c0) {
    const int lo = j->p0 > c0 ? j->p0 - c0 : 0, hi = j->p - c0 + 1 < 16 ? j->p - c0 + 1 : 16;
    uint32_t m = lo < hi ? (0xffffu >> (16 - hi)) & (0xffffu << lo) : 0;
    if (j->present) m &= (uint32_t)(j->present[c0 >> 6] >> (c0 & 63)) & 0xffffu;
    return (__mmask16)m;
}

static inline __attribute__((always_inline)) void q8_scores16(const struct q8_ctx *j, const int sh, const int nh,
                                                               const bool kq, int32_t c0, __m512 *mx) {
    const int64_t hdk = j->hdk, np = hdk & ~(int64_t)63;
    const __mmask16 valid = q8_valid16(j, c0);
    for (int l = 0; l < 16; l++) {
        float *xr = j->xbuf + 16 * lm_reduce16_slot(l);
        if (!((valid >> l) & 1)) {
            for (int h = 0; h < nh; h++) _mm512_storeu_ps(xr + 256 * h, _mm512_setzero_ps());
            continue;
        }
        const uint8_t *kr = q8_k(j, sh, c0 + l);
        const uint8_t *vr = q8_v(j, sh, c0 + l);
        for (size_t o = 0; o < j->vhead; o += 64) _mm_prefetch((const char *)(vr + o), _MM_HINT_T1);
        __m512 acc[LM_ATTN_MAX_HEADS][4];
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) acc[h][a] = _mm512_setzero_ps();
        for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) {
                const __m512 kv = q8_load16(kr, kq, i + 16 * a);
#pragma GCC unroll 4
                for (int h = 0; h < nh; h++)
                    acc[h][a] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(j->qf + h * hdk + i + 16 * a), acc[h][a]);
            }
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
            _mm512_storeu_ps(xr + 256 * h, _mm512_add_ps(_mm512_add_ps(acc[h][0], acc[h][2]),
                                                         _mm512_add_ps(acc[h][1], acc[h][3])));
    }
    for (int h = 0; h < nh; h++) {
        __m512 s = lm_reduce_add16(j->xbuf + 256 * h);
        if (np < hdk) { // the dot product's tail, in double
            float sv[16];
            _mm512_storeu_ps(sv, s);
            for (int l = 0; l < 16; l++) {
                if (!((valid >> l) & 1)) continue;
                const uint8_t *kr = q8_k(j, sh, c0 + l);
                double sum = (double)sv[l];
                for (int64_t i = np; i < hdk; i++) sum += (double)(q8_load1(kr, kq, i) * j->qf[h * hdk + i]);
                sv[l] = (float)sum;
            }
            s = _mm512_loadu_ps(sv);
        }
        s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, s);
        _mm512_storeu_ps(j->e + h * j->e_stride + (c0 - j->base), s);
        mx[h] = _mm512_max_ps(s, mx[h]);
    }
}

// the first n < 16 halves at x, then zeros (an f16 V whose head size is not a multiple of 16)
static inline __m256i q8_load_part(const uint8_t *x, int n) {
    lm_f16 t[16] = {0};
    memcpy(t, x, (size_t)n * sizeof(lm_f16));
    return _mm256_loadu_si256((const __m256i *)t);
}

// attn_avx512.c's attn_pv_tile with the V row read by q8_load16
static inline __attribute__((always_inline)) void
q8_pv_tile(const struct q8_ctx *j, const int sh, const int nh, const bool vq, const int td, const int nq,
           const int tl, int l0, int m0, int64_t d, int vn) {
    __m512 acc[LM_ATTN_MAX_HEADS][2][4][2];
    const uint32_t nwin = (uint32_t)(j->p - j->p0 + 1);
    const int mstep = nq == 4 ? 1 : 2;
#pragma GCC unroll 4
    for (int t = 0; t < tl; t++)
#pragma GCC unroll 4
        for (int qi = 0; qi < nq; qi++) {
            const uint32_t slot = (uint32_t)(16 * (m0 + qi * mstep) + l0 + t);
            const bool reached = nwin >= 64 || ((slot - (uint32_t)j->p0) & 63) < nwin;
            const __m512 init = reached ? _mm512_set1_ps(-0.0f) : _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++)
#pragma GCC unroll 2
                for (int v = 0; v < td; v++) acc[h][t][qi][v] = init;
        }
    for (int32_t k = j->p0 >> 6; k <= j->p >> 6; k++) {
        const int32_t c64 = 64 * k;
        const bool full = c64 >= j->p0 && c64 + 63 <= j->p && (!j->present || j->present[k] == ~0ull);
#pragma GCC unroll 4
        for (int qi = 0; qi < nq; qi++) {
            const int32_t cq = c64 + 16 * (m0 + qi * mstep);
            const int32_t bq = j->blocks[cq >> sh];
            if (bq < 0) continue;
            const uint8_t *vq0 = j->vb + (size_t)bq * j->block_bytes + (size_t)(cq & ((1 << sh) - 1)) * j->vrow;
#pragma GCC unroll 4
            for (int t = 0; t < tl; t++) {
                const int32_t c = cq + l0 + t;
                if (!full && (c < j->p0 || c > j->p ||
                              (j->present && !((j->present[c >> 6] >> (c & 63)) & 1))))
                    continue;
                const uint8_t *vr = vq0 + (size_t)(l0 + t) * j->vrow;
                __m512 vv[2];
#pragma GCC unroll 2
                for (int v = 0; v < td; v++)
                    vv[v] = vq || vn == 16 || v < td - 1 ? q8_load16(vr, vq, d + 16 * v)
                                                         : _mm512_cvtph_ps(q8_load_part(vr + 2 * (d + 16 * v), vn));
#pragma GCC unroll 4
                for (int h = 0; h < nh; h++) {
                    const __m512 pb = _mm512_set1_ps(j->e[h * j->e_stride + (c - j->base)]);
#pragma GCC unroll 2
                    for (int v = 0; v < td; v++)
                        acc[h][t][qi][v] = _mm512_fmadd_ps(vv[v], pb, acc[h][t][qi][v]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++)
#pragma GCC unroll 2
        for (int t = 0; t < tl; t++)
#pragma GCC unroll 2
            for (int v = 0; v < td; v++) {
                float *x = j->xbuf + 512 * h + 32 * (l0 + t) + 16 * v;
                if (nq == 4)
                    _mm512_storeu_ps(x, _mm512_add_ps(_mm512_add_ps(acc[h][t][0][v], acc[h][t][2][v]),
                                                      _mm512_add_ps(acc[h][t][1][v], acc[h][t][3][v])));
                else if (m0 == 0)
                    _mm512_storeu_ps(x, _mm512_add_ps(acc[h][t][0][v], acc[h][t][1][v]));
                else
                    _mm512_storeu_ps(x, _mm512_add_ps(_mm512_loadu_ps(x),
                                                      _mm512_add_ps(acc[h][t][0][v], acc[h][t][1][v])));
            }
}

static inline __attribute__((always_inline)) void q8_pv(const struct q8_ctx *j, const int sh, const int nh,
                                                         const bool vq, const int td, int64_t d, int vn,
                                                         float *out) {
    if (nh >= 3) {
        for (int l0 = 0; l0 < 16; l0++) {
            q8_pv_tile(j, sh, nh, vq, td, 2, 1, l0, 0, d, vn);
            q8_pv_tile(j, sh, nh, vq, td, 2, 1, l0, 1, d, vn);
        }
    } else if (nh == 2) {
        for (int l0 = 0; l0 < 16; l0++) q8_pv_tile(j, sh, 2, vq, td, 4, 1, l0, 0, d, vn);
    } else {
        for (int l0 = 0; l0 < 16; l0 += 2) q8_pv_tile(j, sh, 1, vq, td, 4, 2, l0, 0, d, vn);
    }
    for (int h = 0; h < nh; h++)
        for (int v = 0; v < td; v++)
            _mm512_mask_storeu_ps(out + h * j->hdv + d + 16 * v,
                                  v < td - 1 || vn == 16 ? 0xffff : (__mmask16)((1u << vn) - 1),
                                  q8_tree16(j->xbuf + 512 * h + 16 * v, 32));
}

static inline __attribute__((always_inline)) void q8_heads(const struct q8_ctx *j, const int sh, const int nh,
                                                            const bool kq, const bool vq, float *out) {
    __m512 mx[LM_ATTN_MAX_HEADS];
    for (int h = 0; h < nh; h++) mx[h] = _mm512_set1_ps(-INFINITY);
    for (int32_t c0 = j->base; c0 < j->end; c0 += 16) q8_scores16(j, sh, nh, kq, c0, mx);
    for (int h = 0; h < nh; h++) {
        float *e = j->e + h * j->e_stride;
        const __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(mx[h]));
        double sum = 0.0;
        for (int32_t c = 0; c < j->end - j->base; c += 16) {
            const __m512 x = _mm512_loadu_ps(e + c);
            const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
            const __m512 ex = _mm512_maskz_mov_ps(valid, lm_expf_ggml_512(_mm512_sub_ps(x, vmx)));
            _mm512_storeu_ps(e + c, ex);
            sum += (double)_mm512_reduce_add_ps(ex);
        }
        const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
        for (int32_t c = 0; c < j->end - j->base; c += 16)
            _mm512_storeu_ps(e + c, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                        _mm512_mul_ps(_mm512_loadu_ps(e + c), inv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    }
    int64_t d = 0;
    for (; d + 32 <= j->hdv; d += 32) q8_pv(j, sh, nh, vq, 2, d, 16, out);
    if (d + 16 <= j->hdv) {
        q8_pv(j, sh, nh, vq, 1, d, 16, out);
        d += 16;
    }
    if (d < j->hdv) q8_pv(j, sh, nh, vq, 1, d, (int)(j->hdv - d), out);
}

// one (K type, V type) pair: the block shift a constant for 16-cell blocks, as attn_avx512.c
#define Q8_HEADS(KQ, VQ)                                                                   \
    static void q8_run_##KQ##VQ(const struct q8_ctx *j, int shift, int nh, float *out) {   \
        if (shift == 4) {                                                                  \
            switch (nh) {                                                                  \
            case 1: q8_heads(j, 4, 1, KQ, VQ, out); break;                                 \
            case 2: q8_heads(j, 4, 2, KQ, VQ, out); break;                                 \
            case 3: q8_heads(j, 4, 3, KQ, VQ, out); break;                                 \
            default: q8_heads(j, 4, 4, KQ, VQ, out); break;                                \
            }                                                                              \
        } else {                                                                           \
            switch (nh) {                                                                  \
            case 1: q8_heads(j, shift, 1, KQ, VQ, out); break;                             \
            case 2: q8_heads(j, shift, 2, KQ, VQ, out); break;                             \
            case 3: q8_heads(j, shift, 3, KQ, VQ, out); break;                             \
            default: q8_heads(j, shift, 4, KQ, VQ, out); break;                            \
            }                                                                              \
        }                                                                                  \
    }
Q8_HEADS(1, 1)
Q8_HEADS(1, 0)
Q8_HEADS(0, 1)
#undef Q8_HEADS

void lm_attn_q8_avx512(const struct lm_attn_job *job) {
    if (!job->k_q8 && !job->v_q8) {
        lm_attn_avx512(job);
        return;
    }
    const int nh = job->nh;
    const int64_t hdk = job->hdk;
    struct q8_ctx j = {
        .kb = job->kb, .vb = job->vb, .block_bytes = job->block_bytes, .blocks = job->blocks,
        .present = job->present,
        .krow = job->k_q8 ? job->kstride / LM_QK8_0 * sizeof(struct lm_block_q8_0) : job->kstride * sizeof(lm_f16),
        .vrow = job->v_q8 ? job->vstride / LM_QK8_0 * sizeof(struct lm_block_q8_0) : job->vstride * sizeof(lm_f16),
        .vhead = job->v_q8 ? (size_t)job->hdv / LM_QK8_0 * sizeof(struct lm_block_q8_0) : (size_t)job->hdv * sizeof(lm_f16),
        .p0 = job->p0, .p = job->p, .hdk = hdk, .hdv = job->hdv,
    };
    j.base = j.p0 & ~15;
    j.end = (j.p + 16) & ~15;
    // scratch as attn_avx512.c: xbuf (LM_ATTN_MAX_HEADS, 512), qf (nh, hdk), e (nh, end - base)
    float *s = job->scratch;
    j.xbuf = s;
    s += LM_ATTN_MAX_HEADS * 512;
    float *qf = s;
    s += LM_ATTN_MAX_HEADS * ((hdk + 15) & ~(int64_t)15);
    j.qf = qf;
    j.e = s;
    j.e_stride = (size_t)(j.end - j.base);
    if (job->k_q8) {
        memcpy(qf, job->q, (size_t)(nh * hdk) * sizeof(float));
    } else { // q rounded to f16 for an f16 K, as attn_avx512.c
        for (int64_t d = 0; d < nh * hdk; d += 16) {
            const __mmask16 mk = nh * hdk - d >= 16 ? 0xffff : (__mmask16)((1u << (nh * hdk - d)) - 1);
            _mm512_mask_storeu_ps(qf + d, mk, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                                  _mm512_maskz_loadu_ps(mk, job->q + d),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        }
    }
    if (job->k_q8 && job->v_q8) q8_run_11(&j, job->block_shift, nh, job->out);
    else if (job->k_q8) q8_run_10(&j, job->block_shift, nh, job->out);
    else q8_run_01(&j, job->block_shift, nh, job->out);
}

#endif
