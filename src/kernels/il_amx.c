// AMX-INT8 GEMM on the q6_K row-interleaved layout (il_layout.h), for prefill: groups of 16
// weight rows against any number of tokens. Results are il_generic.c's bit for bit.
//
// A tile multiply (tdpb*d) sums 64 int8 products per output into int32, but q6_K scales
// every 16 columns, so the scale cannot wait for the sum. It goes into the weights instead:
// w = sc * (q - 32) is an exact int16 (|w| <= 128 * 32), split as w = 128 * hi + lo with
// hi = w >> 7 (signed, -32..32) and lo = w & 127 (unsigned). Per super-block, token t, row r:
//   isum = 128 * sum_k x[t][k] * hi[r][k] + sum_k x[t][k] * lo[r][k]     (tdpbssd, tdpbsud)
// which is the integer of vec_dot_q6_K (sum_j sc_j * dot(q - 32, x) over its sub-blocks), and
// then the same float step: sum += (d * x.d) * (float)isum. The split weights (two bytes per
// weight) are made per call into a stack panel of AMX_SB super-blocks of one group and used
// for every 16-token tile, so they cost no memory and, from LM_IL_AMX_MIN_NT tokens, little
// time. The activations come as tile records (lm_il_act_amx): rows of Q8_K blocks are
// 292 bytes apart, and tile loads of rows that straddle cache lines ran ~3x slower.
//
// Per super-block and tile: 8 tdps (~6 ns each on this host) into a C pair, then the pair is
// stored and stepped in float. The C pair alternates between tiles (0, 1) and (2, 3) so that
// one pair's store and float step overlap the next super-block's tdps, and the A tile
// between 4 and 7 so that a step's loads need not wait for the previous step's tdps; the
// next record is prefetched (A from L2 otherwise stalled the tile loads: 190 -> 310 GMAC/s).
// Kernel alone, 1024 rows x 8192 x 512 tokens, 1 thread: ~300 GMAC/s vs the VNNI kernel's
// ~125 (both swing ~2x with this host's load).
//
// Linux hands out the AMX tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM, once
// per process): lm_amx_enable() makes it; kernels.c offers this kernel only if it succeeds.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <stddef.h>
#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/simd_avx512.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int lm_amx_enable(void) {
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return 0; // AMX-TILE, AMX-INT8
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

// super-blocks per panel: AMX_SB x 8 KB of split weights
#define AMX_SB 4

// tile registers, all 16 x 64 bytes: C pairs (hi, lo) 0, 1 and 2, 3 (16 tokens x 16 rows of
// int32); A 4 and 7 (16 tokens x 64 activation bytes); B 5 (hi) and 6 (lo) (row i = the 16
// weight rows' 4 columns 4i.. of the 64-column step, the VNNI lane order of the il layout)
struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

// one super-block of 16 rows -> split weights hi[s][64 * i + 4 * r + kk], lo[s][...] for the
// 4 column steps s (64 columns each)
AI void split_sb(const struct lm_il_q6_K_sb *b, int8_t hi[4][1024], uint8_t lo[4][1024]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i b32 = _mm512_set1_epi16(32), m127 = _mm512_set1_epi16(127);
    // word w of a half vector (lanes 8h..8h+7, 4 columns each) -> scale word 2 * (8h + w / 4) + e
    __m512i idx[2][2];
    for (int h = 0; h < 2; h++)
        for (int e = 0; e < 2; e++) {
            int16_t v[32];
            for (int w = 0; w < 32; w++) v[w] = (int16_t)(2 * (8 * h + w / 4) + e);
            idx[h][e] = _mm512_loadu_si512((const void *)v);
        }
    for (int p = 0; p < 8; p++) {
        const __m512i scp = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b->sc[p]));
        const struct lm_il_q6_K_pair *qp = &b->q[p];
        for (int h = 0; h < 2; h++) {
            const __m512i qh = _mm512_loadu_si512((const void *)qp->qh[h]);
            const __m512i hs[4] = {_mm512_slli_epi16(qh, 4), _mm512_slli_epi16(qh, 2), qh,
                                   _mm512_srli_epi16(qh, 2)};
            // runs 4h..4h+3 = sub-block 2p + h
            const __m512i sc0 = _mm512_permutexvar_epi16(idx[0][h], scp);
            const __m512i sc1 = _mm512_permutexvar_epi16(idx[1][h], scp);
            for (int s = 0; s < 4; s++) {
                const __m512i ql = _mm512_loadu_si512((const void *)qp->ql[s]);
                const __m512i l4 = _mm512_and_si512(h ? _mm512_srli_epi16(ql, 4) : ql, m4);
                const __m512i q = _mm512_ternarylogic_epi32(l4, hs[s], m30, 0xF8); // 0..63
                const __m512i w0 = _mm512_mullo_epi16(
                    _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(q)), b32), sc0);
                const __m512i w1 = _mm512_mullo_epi16(
                    _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q, 1)), b32), sc1);
                const __m512i vh = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srai_epi16(w0, 7))),
                    _mm512_cvtepi16_epi8(_mm512_srai_epi16(w1, 7)), 1);
                const __m512i vl = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_and_si512(w0, m127))),
                    _mm512_cvtepi16_epi8(_mm512_and_si512(w1, m127)), 1);
                // run 4h + s of pair p = columns 32p + 16h + 4s..: step p / 2, row 8 (p % 2) + 4h + s
                const int row = 8 * (p % 2) + 4 * h + s;
                _mm512_store_si512((void *)(hi[p / 2] + 64 * row), vh);
                _mm512_store_si512((void *)(lo[p / 2] + 64 * row), vl);
            }
        }
    }
}

// tdp steps of one super-block for 16 tokens (a: 4 A tiles of 16 x 64 activation bytes)
// into C tiles CH (hi) and CL (lo); A alternates between tiles 4 and 7 and B takes 5 (hi)
// and 6 (lo). The caller alternates the C pair (0, 1) / (2, 3) between super-blocks and
// stores one pair while the tdps of the other run.
#define SB_STEP(s, CH, CL, TA)                                                               \
    _tile_loadd(TA, a[s], 64);                                                               \
    _tile_loadd(5, hi[s], 64);                                                               \
    _tile_loadd(6, lo[s], 64);                                                               \
    _tile_dpbssd(CH, TA, 5);                                                                 \
    _tile_dpbsud(CL, TA, 6);
#define SB_TDP(CH, CL)                                                                       \
    _tile_zero(CH);                                                                          \
    _tile_zero(CL);                                                                          \
    SB_STEP(0, CH, CL, 4) SB_STEP(1, CH, CL, 7) SB_STEP(2, CH, CL, 4) SB_STEP(3, CH, CL, 7)
AI void sb_tdp(int pair, const int8_t hi[4][1024], const uint8_t lo[4][1024], const int8_t a[4][1024]) {
    for (int l = 0; l < LM_IL_AMX_REC / 64; l++) // the next record
        _mm_prefetch((const char *)a + LM_IL_AMX_REC + 64 * l, _MM_HINT_T0);
    if (pair) {
        SB_TDP(2, 3)
    } else {
        SB_TDP(0, 1)
    }
}
AI void sb_store(int pair, int32_t c[2][16][16]) {
    if (pair) {
        _tile_stored(2, c[0], 64);
        _tile_stored(3, c[1], 64);
    } else {
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
    }
}

// the float step of super-block i from the stored C tiles: sum[t] += (d * x.d) * (float)isum
AI void sb_flush(__m512 *sum, const int32_t c[2][16][16], const float *d, const float *xd) {
    const __m512 dv = _mm512_loadu_ps(d);
    for (int t = 0; t < 16; t++) {
        const __m512i is = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512((const void *)c[0][t]), 7),
                                            _mm512_load_si512((const void *)c[1][t]));
        sum[t] = _mm512_add_ps(sum[t], _mm512_mul_ps(_mm512_mul_ps(dv, _mm512_set1_ps(xd[t])), _mm512_cvtepi32_ps(is)));
    }
}

void lm_il_gemm_amx_q6_K(int64_t n_in, int64_t n_groups, size_t group_bytes, int64_t nt, float *y,
                         size_t ys, const void *wg, const void *xt) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1);
    const int64_t nsb = n_in / LM_QK_K, ntile = (nt + 15) / 16;
    _Alignas(64) int8_t hi[AMX_SB][4][1024];
    _Alignas(64) uint8_t lo[AMX_SB][4][1024];
    _Alignas(64) int32_t c[2][2][16][16];
    struct amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int r = 0; r < 8; r++) {
        cfg.rows[r] = 16;
        cfg.colsb[r] = 64;
    }
    _tile_loadconfig(&cfg);
    for (int64_t i0 = 0; i0 < nsb; i0 += AMX_SB) {
        const int n = nsb - i0 < AMX_SB ? (int)(nsb - i0) : AMX_SB;
        for (int64_t g = 0; g < n_groups; g++) {
            const struct lm_il_q6_K_sb *w = (const struct lm_il_q6_K_sb *)((const char *)wg + (size_t)g * group_bytes) + i0;
            for (int j = 0; j < n; j++) split_sb(&w[j], hi[j], lo[j]);
            for (int64_t tt = 0; tt < ntile; tt++) {
                const char *rec = (const char *)xt + (size_t)(tt * nsb + i0) * LM_IL_AMX_REC;
                float *yt = y + (size_t)(16 * tt) * ys + 16 * g;
                const int nv = nt - 16 * tt < 16 ? (int)(nt - 16 * tt) : 16; // tokens of the batch
                __m512 sum[16];
                for (int t = 0; t < 16; t++)
                    sum[t] = i0 && t < nv ? _mm512_loadu_ps(yt + (size_t)t * ys) : _mm512_setzero_ps();
#define REC(j) ((const int8_t(*)[1024])(rec + (size_t)(j) * LM_IL_AMX_REC))
#define REC_D(j) ((const float *)(rec + (size_t)(j) * LM_IL_AMX_REC + 4096))
                for (int j = 0; j < n; j++) {
                    sb_tdp(j % 2, hi[j], lo[j], REC(j));
                    if (j) {
                        sb_store((j - 1) % 2, c[(j - 1) % 2]);
                        sb_flush(sum, c[(j - 1) % 2], w[j - 1].d, REC_D(j - 1));
                    }
                }
                sb_store((n - 1) % 2, c[(n - 1) % 2]);
                sb_flush(sum, c[(n - 1) % 2], w[n - 1].d, REC_D(n - 1));
#undef REC
#undef REC_D
                for (int t = 0; t < nv; t++) _mm512_storeu_ps(yt + (size_t)t * ys, sum[t]);
            }
        }
    }
    _tile_release();
}

#else
int lm_amx_enable(void) { return 0; }
#endif
