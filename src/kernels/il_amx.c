// AMX-INT8 GEMMs on the k-quant row-interleaved layouts (il_layout.h: q4_K, q5_K, q6_K), for
// prefill: groups of 16 weight rows against any number of tokens. Results are
// il_generic.c's bit for bit.
//
// A tile multiply (tdpb*d) sums 64 int8 products per output into int32, but k-quants scale
// every 16 (q6_K) or 32 (q4_K, q5_K) columns, so the scale cannot wait for the sum. It goes
// into the weights instead: w = sc * (q - 32) (q6_K, |w| <= 128 * 32) or w = sc * q (q4_K /
// q5_K, 0..63 * 31) is an exact int16, split as w = 128 * hi + lo with hi = w >> 7 and
// lo = w & 127 (unsigned). Per super-block, token t and row r:
//   isum = 128 * sum_k x[t][k] * hi[r][k] + sum_k x[t][k] * lo[r][k]   (two tdps per step)
// which is the integer of vec_dot (sum_j sc_j * dot(q, x) over the sub-blocks), then the
// same float steps as the VNNI kernels (q4_K / q5_K: their mins term from the bsums). The
// split weights (two bytes per weight) are made per call into a stack panel of AMX_SB
// super-blocks of one group and used for every 16-token tile, so they cost no memory and,
// from LM_IL_AMX_MIN_NT tokens, little time. The activations come as tile records
// (lm_il_act_amx): rows of q8_K blocks are 292 bytes apart, and tile loads of rows that
// straddle cache lines ran ~3x slower.
//
// Per super-block and tile: 8 tdps (~6 ns each on this host) into a C pair, then the pair is
// stored and stepped in float. The C pair alternates between tiles (0, 1) and (2, 3) so that
// one pair's store and float step overlap the next super-block's tdps, and the A tile
// between 4 and 7 so that a step's loads need not wait for the previous step's tdps; the
// next record is prefetched (A from L2 otherwise stalled the tile loads: 190 -> 310 GMAC/s).
// q6_K kernel alone, 1024 rows x 8192 x 512 tokens, 1 thread: ~300 GMAC/s vs the VNNI
// kernel's ~125 (both swing ~2x with this host's load).
//
// Linux hands out the AMX tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM, once
// per process): lm_amx_enable() makes it; kernels.c offers these kernels only if it succeeds.
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

// The split of 64 weights (one run vector of 16 rows x 4 columns) as two int16 halves w0
// (rows 0..7) and w1 (rows 8..15): hi = w >> 7 and lo = w & 127 to B row `row` of step tiles
AI void split_store(__m512i w0, __m512i w1, uint8_t *hi, uint8_t *lo) {
    const __m512i m127 = _mm512_set1_epi16(127);
    _mm512_store_si512((void *)hi, _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srai_epi16(w0, 7))),
                                                      _mm512_cvtepi16_epi8(_mm512_srai_epi16(w1, 7)), 1));
    _mm512_store_si512((void *)lo, _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_and_si512(w0, m127))),
                                                      _mm512_cvtepi16_epi8(_mm512_and_si512(w1, m127)), 1));
}
AI __m512i lo_half16(__m512i q) { return _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q)); }
AI __m512i hi_half16(__m512i q) { return _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q, 1)); }

// index vectors for _mm512_permutexvar_epi16: word w of half h (lanes 8h..8h+7, 4 columns
// each) <- word `stride` * (8h + w / 4) + e of the scale vector
AI __m512i scale_idx(int h, int stride, int e) {
    int16_t v[32];
    for (int w = 0; w < 32; w++) v[w] = (int16_t)(stride * (8 * h + w / 4) + e);
    return _mm512_loadu_si512((const void *)v);
}

// q6_K super-block of 16 rows -> split weights of sc * (q - 32): hi[s][64 i + 4 r + kk],
// lo[s][...] for the 4 column steps s (64 columns each), B row i = columns 4i.. of the step
AI void split_q6(const struct lm_il_q6_K_sb *b, uint8_t hi[4][1024], uint8_t lo[4][1024]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), b32 = _mm512_set1_epi16(32);
    const __m512i idx[2][2] = {{scale_idx(0, 2, 0), scale_idx(0, 2, 1)}, {scale_idx(1, 2, 0), scale_idx(1, 2, 1)}};
    for (int p = 0; p < 8; p++) {
        const __m512i scp = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b->sc[p]));
        const struct lm_il_q6_K_pair *qp = &b->q[p];
        for (int h = 0; h < 2; h++) { // runs 4h..4h+3 = sub-block 2p + h
            const __m512i qh = _mm512_loadu_si512((const void *)qp->qh[h]);
            const __m512i hs[4] = {_mm512_slli_epi16(qh, 4), _mm512_slli_epi16(qh, 2), qh,
                                   _mm512_srli_epi16(qh, 2)};
            const __m512i sc0 = _mm512_permutexvar_epi16(idx[0][h], scp);
            const __m512i sc1 = _mm512_permutexvar_epi16(idx[1][h], scp);
            for (int s = 0; s < 4; s++) {
                const __m512i ql = _mm512_loadu_si512((const void *)qp->ql[s]);
                const __m512i l4 = _mm512_and_si512(h ? _mm512_srli_epi16(ql, 4) : ql, m4);
                const __m512i q = _mm512_ternarylogic_epi32(l4, hs[s], m30, 0xF8); // 0..63
                // run 4h + s of pair p = columns 32p + 16h + 4s..: step p / 2, row 8 (p % 2) + 4h + s
                const int row = 8 * (p % 2) + 4 * h + s;
                split_store(_mm512_mullo_epi16(_mm512_sub_epi16(lo_half16(q), b32), sc0),
                            _mm512_mullo_epi16(_mm512_sub_epi16(hi_half16(q), b32), sc1),
                            hi[p / 2] + 64 * row, lo[p / 2] + 64 * row);
            }
        }
    }
}

// q4_K / q5_K (Q5) super-block -> split weights of sc * q (0..63 * 31: hi 0..15, both halves
// unsigned); the mins stay a vector step (amx_flush45)
AI void split_q45(const int Q5, const struct lm_il_q4_K_sb *b, uint8_t hi[4][1024], uint8_t lo[4][1024]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(16);
    const __m512i idx[2] = {scale_idx(0, 1, 0), scale_idx(1, 1, 0)};
    const uint64_t *qh = Q5 ? &((const struct lm_il_q5_K_sb *)b)->qh[0][0] : NULL;
    for (int j = 0; j < 8; j++) {
        const __m512i scj = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b->sc[j])));
        const __m512i sc0 = _mm512_permutexvar_epi16(idx[0], scj), sc1 = _mm512_permutexvar_epi16(idx[1], scj);
        for (int v = 0; v < 4; v++) {
            const __m512i raw = _mm512_loadu_si512((const void *)b->qs[j][v]);
            __m512i l = _mm512_and_si512(raw, m4), h = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if (Q5) {
                l = _mm512_mask_add_epi8(l, (__mmask64)qh[8 * j + v], l, b16);
                h = _mm512_mask_add_epi8(h, (__mmask64)qh[8 * j + 4 + v], h, b16);
            }
            // sub-block j = columns 32j..: step j / 2, rows 8 (j % 2) + v (l) and + 4 + v (h)
            const int row = 8 * (j % 2) + v;
            split_store(_mm512_mullo_epi16(lo_half16(l), sc0), _mm512_mullo_epi16(hi_half16(l), sc1),
                        hi[j / 2] + 64 * row, lo[j / 2] + 64 * row);
            split_store(_mm512_mullo_epi16(lo_half16(h), sc0), _mm512_mullo_epi16(hi_half16(h), sc1),
                        hi[j / 2] + 64 * (row + 4), lo[j / 2] + 64 * (row + 4));
        }
    }
}

// tdp steps of one super-block for 16 tokens (a: the record's 4 A tiles of 16 x 64
// activation bytes) into C tiles CH (hi) and CL (lo); SH: hi bytes signed (q6_K). A
// alternates between tiles 4 and 7 and B takes 5 (hi) and 6 (lo). The caller alternates the
// C pair (0, 1) / (2, 3) between super-blocks and stores one pair while the tdps of the
// other run.
#define SB_STEP(s, CH, CL, TA)                                                               \
    _tile_loadd(TA, a + 1024 * (s), 64);                                                     \
    _tile_loadd(5, hi[s], 64);                                                               \
    _tile_loadd(6, lo[s], 64);                                                               \
    if (SH) _tile_dpbssd(CH, TA, 5);                                                         \
    else _tile_dpbsud(CH, TA, 5);                                                            \
    _tile_dpbsud(CL, TA, 6);
#define SB_TDP(CH, CL)                                                                       \
    _tile_zero(CH);                                                                          \
    _tile_zero(CL);                                                                          \
    SB_STEP(0, CH, CL, 4) SB_STEP(1, CH, CL, 7) SB_STEP(2, CH, CL, 4) SB_STEP(3, CH, CL, 7)
AI void sb_tdp(const int SH, int pair, const uint8_t hi[4][1024], const uint8_t lo[4][1024], const char *a) {
    for (int l = 0; l < LM_IL_AMX_REC / 64; l++) // the next record
        _mm_prefetch(a + LM_IL_AMX_REC + 64 * l, _MM_HINT_T0);
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

AI __m512i isum_of(const int32_t c[2][16][16], int t) {
    return _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512((const void *)c[0][t]), 7),
                            _mm512_load_si512((const void *)c[1][t]));
}

// q6_K's float step from the stored C pair: sum[t] += (d * x.d) * (float)isum
AI void flush_q6(__m512 *sum, const int32_t c[2][16][16], const struct lm_il_q6_K_sb *b, const char *rec) {
    const float *xd = (const float *)(rec + 4096);
    const __m512 dv = _mm512_loadu_ps(b->d);
    for (int t = 0; t < 16; t++)
        sum[t] = _mm512_add_ps(sum[t], _mm512_mul_ps(_mm512_mul_ps(dv, _mm512_set1_ps(xd[t])), _mm512_cvtepi32_ps(isum_of(c, t))));
}

// q4_K / q5_K's: the mins term from the record's bsums, then the float steps of il_avx512.c's
// q45_K_il: sum[t] += (d * x.d) * (float)isum - (dmin * x.d) * (float)summs
AI void flush_q45(__m512 *sum, const int32_t c[2][16][16], const struct lm_il_q4_K_sb *b, const char *rec) {
    const float *xd = (const float *)(rec + 4096);
    const int16_t *bsums = (const int16_t *)(rec + 4096 + 64);
    const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
    const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));
    __m512i mnv[4]; // lane r: (mn[2p][r], mn[2p+1][r]) as int16
    for (int p = 0; p < 4; p++) mnv[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)b->mn[p]));
    for (int t = 0; t < 16; t++) {
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(bsums + 16 * t));
        const __m512i s2 = _mm512_castsi128_si512(_mm256_cvtepi32_epi16(_mm256_add_epi16(bs, _mm256_srli_epi32(bs, 16))));
        __m512i acc = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++)
            acc = _mm512_dpwssd_epi32(acc, mnv[p], _mm512_permutexvar_epi32(_mm512_set1_epi32(p), s2));
        const __m512 yd = _mm512_set1_ps(xd[t]);
        const __m512 mterm = _mm512_mul_ps(_mm512_mul_ps(dm, yd), _mm512_cvtepi32_ps(acc));
        const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, yd), _mm512_cvtepi32_ps(isum_of(c, t)));
        sum[t] = _mm512_add_ps(sum[t], _mm512_sub_ps(a, mterm));
    }
}

// Q: 6 (q6_K), 5 (q5_K) or 4 (q4_K)
AI void amx_gemm(const int Q, int64_t n_in, int64_t n_groups, size_t group_bytes, int64_t nt, float *y, size_t ys,
                 const void *wg, const void *xt) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1);
    const size_t sb_bytes = Q == 6 ? sizeof(struct lm_il_q6_K_sb) : Q == 5 ? sizeof(struct lm_il_q5_K_sb)
                                                                          : sizeof(struct lm_il_q4_K_sb);
    const int64_t nsb = n_in / LM_QK_K, ntile = (nt + 15) / 16;
    _Alignas(64) uint8_t hi[AMX_SB][4][1024];
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
            const char *w = (const char *)wg + (size_t)g * group_bytes + (size_t)i0 * sb_bytes;
#define SB(j) (w + (size_t)(j) * sb_bytes)
            for (int j = 0; j < n; j++) {
                if (Q == 6) split_q6((const struct lm_il_q6_K_sb *)SB(j), hi[j], lo[j]);
                else split_q45(Q == 5, (const struct lm_il_q4_K_sb *)SB(j), hi[j], lo[j]);
            }
            for (int64_t tt = 0; tt < ntile; tt++) {
                const char *rec = (const char *)xt + (size_t)(tt * nsb + i0) * LM_IL_AMX_REC;
                float *yt = y + (size_t)(16 * tt) * ys + 16 * g;
                const int nv = nt - 16 * tt < 16 ? (int)(nt - 16 * tt) : 16; // tokens of the batch
                __m512 sum[16];
                for (int t = 0; t < 16; t++)
                    sum[t] = i0 && t < nv ? _mm512_loadu_ps(yt + (size_t)t * ys) : _mm512_setzero_ps();
#define REC(j) (rec + (size_t)(j) * LM_IL_AMX_REC)
#define FLUSH(j)                                                                             \
    do {                                                                                     \
        sb_store((j) % 2, c[(j) % 2]);                                                       \
        if (Q == 6) flush_q6(sum, c[(j) % 2], (const struct lm_il_q6_K_sb *)SB(j), REC(j));  \
        else flush_q45(sum, c[(j) % 2], (const struct lm_il_q4_K_sb *)SB(j), REC(j));      \
    } while (0)
                for (int j = 0; j < n; j++) {
                    sb_tdp(Q == 6, j % 2, hi[j], lo[j], REC(j));
                    if (j) FLUSH(j - 1);
                }
                FLUSH(n - 1);
#undef FLUSH
#undef REC
                for (int t = 0; t < nv; t++) _mm512_storeu_ps(yt + (size_t)t * ys, sum[t]);
            }
#undef SB
        }
    }
    _tile_release();
}

#define AMX_DEF(name, Q)                                                                               \
    void name(int64_t n_in, int64_t n_groups, size_t group_bytes, int64_t nt, float *y, size_t ys,     \
              const void *wg, const void *xt) {                                                        \
        amx_gemm(Q, n_in, n_groups, group_bytes, nt, y, ys, wg, xt);                                   \
    }
AMX_DEF(lm_il_gemm_amx_q4_K, 4)
AMX_DEF(lm_il_gemm_amx_q5_K, 5)
AMX_DEF(lm_il_gemm_amx_q6_K, 6)

#else
int lm_amx_enable(void) { return 0; }
#endif
