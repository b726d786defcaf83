// The row-interleaved ("il") layouts: matmul weights repacked at load (il_pack.c) into groups
// of LM_IL_ROWS = 16 output rows whose bytes the il kernels (il_<isa>.c) stream front to back,
// and the activation rows those kernels read. One section per dtype; kernels.h states the
// numerics. Vector byte 4r + kk of a layout puts row r in i32 lane r, so one vpdpbusd
// (16 rows x 4 unsigned weight bytes against 4 broadcast activation bytes) does 16 rows x 4
// columns.
#ifndef LM_KERNELS_IL_LAYOUT_H
#define LM_KERNELS_IL_LAYOUT_H

#include "kernels/kernels.h"

// ---- q8_0 / q5_0 / q4_0: one record per 32-element block b, records in block order:
//   d   16 x f16          the 16 rows' block scales
//   q   q8_0: 8 x 64 bytes: vector g holds elements 4g..4g+3 of every row, byte r*4 + kk =
//                (q(r, 4g + kk) + 128) as an unsigned byte
//       q5_0: 4 x 64 bytes of nibbles: vector j, byte r*4 + kk: low nibble = low 4 bits of
//                element 8j + kk, high nibble = of element 8j + 4 + kk (raw 0..15)
//             + 8 x 8 bytes of high bits: u64 g, bit r*4 + kk = bit 4 of element 4g + kk
//       q4_0: q5_0's 4 x 64 bytes of nibbles (the raw 0..15), no high bits
//       iq4_nl: q4_0's record (its blocks have q4_0's bytes); the kernels look each index up
//             as kv + 128 (lm_kvalues_iq4nl) and undo the + 128 as q8_0 does
// so one vector of 16 rows x 4 elements, unsigned (q8_0: q + 128, q5_0: the raw 0..31 =
// q + 16, q4_0: the raw 0..15 = q + 8), meets 4 broadcast activation bytes in one vpdpbusd.
// The offsets come back through the activation sums: sum (q + c) x = sum q x + c sum x
// (q4_0's -8 sum x is half the stored -16 sum x).
#define LM_IL_Q8_0_REC (32 + 512)
#define LM_IL_Q5_0_REC (32 + 256 + 64)
#define LM_IL_Q4_0_REC (32 + 256)
// mxfp4: per block the 16 rows' E8M0 bytes (row r at byte r), then q4_0's 4 x 64 bytes of
// nibbles (the raw codes); the kernels look each code up as kv + 128 (lm_kvalues_mxfp4) and
// undo the + 128 as q8_0 does. Activations: the xq8 rows below.
#define LM_IL_MXFP4_REC (16 + 256)
// Their activation rows, "xq8" (n_in elements, nb = n_in / 32 blocks): nb x 32 int8 quants,
// then nb floats (the q8_0 scale), nb int32 (-16 * sum of the block's quants), nb int32
// (-128 * sum). The quants and scales are those of the q8_0 row it is made from, so results
// do not depend on which table's quant[Q8_0] made that row (they agree).
#define LM_IL_XQ8_BLOCK (32 + 4 + 4 + 4)

// ---- q4_1 / q5_1 (w = d q + m, q unsigned): q4_0's / q5_0's record with the 16 rows' mins
// after their scales, the raw quants used as they are (no offset: the min term is
// sum_k m x_k = m s per block, s = d_x sum q_x of the q8_1 activation block):
//   d 16 x f16, m 16 x f16, then q4_0's 4 x 64 bytes of nibbles (+ q5_1: q5_0's 8 x 8 bytes
//   of high bits), the raw 0..15 (q4_1) or 0..31 (q5_1). Same bytes as the ggml rows.
#define LM_IL_Q4_1_REC (64 + 256)
#define LM_IL_Q5_1_REC (64 + 256 + 64)
// Their activation rows, "xq81" (made from the q8_1 row, lm_il_act_q81): nb x 32 int8
// quants, nb floats (d), nb floats (s, the f16 sum widened).
#define LM_IL_XQ81_BLOCK (32 + 4 + 4)
// il_pack_q1.c: one group (lm_il_pack_group's contract) and one xq81 row
void lm_il_pack_q1(enum lm_dtype t, void *dst, const void *src, size_t row_bytes, int64_t n_in);
void lm_il_act_q81(const void *xq, int64_t n_in, void *xa);

// ---- q4_K / q5_K / q6_K: one struct per 256 columns (super-block) of the 16 rows, in column order.
// r = row in the group (0..15), kk = column within a run of 4 (0..3). Their activation rows
// are the q8_K rows themselves.

// q4_K: q[r][e] in 0..15 for the super-block's columns e (0..255); sub-block j = 32 columns.
// Low nibbles of qs[j][v] give the 4 columns 32j + 4v.. and high nibbles 32j + 16 + 4v..,
// so one 64-byte load yields two vpdpbusd operands (and / shift+and).
struct lm_il_q4_K_sb {
    lm_f16 d[LM_IL_ROWS];             // super-block scale of row r (as in the ggml block)
    lm_f16 dmin[LM_IL_ROWS];          // super-block min scale of row r
    uint8_t sc[8][LM_IL_ROWS];        // sc[j][r]: 6-bit scale of sub-block j, decoded
    uint8_t mn[4][LM_IL_ROWS][2];     // mn[p][r][e]: 6-bit min of sub-block 2p + e, decoded
    uint8_t qs[8][4][4 * LM_IL_ROWS]; // qs[j][v][4r + kk]: lo = q[r][32j + 4v + kk],
                                      //                    hi = q[r][32j + 16 + 4v + kk]
};

// q5_K: q4_K's struct for the low 4 bits (q[r][e] in 0..31 = lo | hb << 4), and per run of
// 16 rows x 4 columns one u64 of fifth bits, bit 4r + kk, so that a masked add of 16 after
// the nibble unpack gives the vpdpbusd operand (as q5_0 does).
struct lm_il_q5_K_sb {
    struct lm_il_q4_K_sb lo;      // d, dmin, scales, mins, low nibbles as in q4_K
    uint64_t qh[8][8];            // qh[j][u], bit 4r + kk: bit 4 of q[r][32j + 4u + kk]
};

// q6_K: q[r][e] in 0..63 (the stored value; the weight is q - 32); sub-block = 16 columns,
// pair p = sub-blocks 2p and 2p + 1 = columns 32p..32p + 31, 4-column run u = 0..7 of the
// pair = columns 32p + 4u... Low 4 bits as q4_K's nibbles, high 2 bits four runs per byte.
struct lm_il_q6_K_pair {
    uint8_t ql[4][4 * LM_IL_ROWS]; // ql[v][4r + kk]: lo = q & 15 of run v, hi = of run v + 4
    uint8_t qh[2][4 * LM_IL_ROWS]; // qh[h][4r + kk]: bits 2s..2s+1 = q >> 4 of run 4h + s
};
struct lm_il_q6_K_sb {
    float d[LM_IL_ROWS];                 // super-block scale of row r (f16 widened, exact)
    int8_t sc[8][LM_IL_ROWS][2];         // sc[p][r][e]: scale of sub-block 2p + e of row r
    struct lm_il_q6_K_pair q[8];         // column pairs in order
};

// q4_K: 2368 bytes per 256 columns of 16 rows (ggml: 16 x 144 = 2304); q6_K: 3392 (16 x 210 = 3360)
_Static_assert(sizeof(struct lm_il_q4_K_sb) == 2368, "il q4_K super-block size");
_Static_assert(sizeof(struct lm_il_q6_K_sb) == 3392, "il q6_K super-block size");
// q5_K: 2880 (16 x 176 = 2816)
_Static_assert(sizeof(struct lm_il_q5_K_sb) == 2880, "il q5_K super-block size");

// ---- q2_K / q3_K: one struct per 256 columns of the 16 rows, in column order. Sub-block j =
// 16 columns = runs 4j..4j+3 (run u = columns 4u..4u+3). The low 2 bits of the quants:
// qs[j][4r + kk] bits 2s..2s+1 = column 16j + 4s + kk of row r, so one 64-byte load yields
// the four vpdpbusd operands of a sub-block (shift and mask).
// q2_K: q in 0..3, the weight (d sc) q - (dmin mn); the scale bytes are the file's (low 4 bits
// sc, high 4 bits mn), two sub-blocks per row side by side so that a widening load gives
// the int16 pairs of vpdpwssd. 1344 bytes (16 x 84: the file's size).
struct lm_il_q2_K_sb {
    lm_f16 d[LM_IL_ROWS];             // super-block scale of row r (as in the ggml block)
    lm_f16 dmin[LM_IL_ROWS];          // super-block min scale of row r
    uint8_t sc[8][LM_IL_ROWS][2];     // sc[p][r][e]: scale byte of sub-block 2p + e of row r
    uint8_t qs[16][4 * LM_IL_ROWS];   // qs[j][4r + kk], bits 2s..: q of column 16j + 4s + kk
};
// q3_K: u = low 2 bits + 4 * high bit in 0..7 (the weight d sc (u - 4)); the signed 6-bit
// scales decoded (- 32 applied); per run one u64 of high bits, bit 4r + kk (a masked add of 4
// after the 2-bit unpack, as q5_K's fifth bit). 1824 bytes (16 x 110 = 1760).
struct lm_il_q3_K_sb {
    lm_f16 d[LM_IL_ROWS];             // super-block scale of row r
    int8_t sc[8][LM_IL_ROWS][2];      // sc[p][r][e]: scale of sub-block 2p + e of row r
    uint8_t qs[16][4 * LM_IL_ROWS];   // low 2 bits of u, as q2_K's qs
    uint64_t qh[16][4];               // qh[j][s], bit 4r + kk: bit 2 of u of column 16j + 4s + kk
};
_Static_assert(sizeof(struct lm_il_q2_K_sb) == 1344, "il q2_K super-block size");
_Static_assert(sizeof(struct lm_il_q3_K_sb) == 1824, "il q3_K super-block size");
// iq4_xs: q4_K's nibble arrangement of the 4-bit table indices, the signed sub-block scales
// decoded; the kernels look each index up as kv + 128 (unsigned) and undo the + 128 through
// the q8_K row's bsums.
struct lm_il_iq4_xs_sb {
    lm_f16 d[LM_IL_ROWS];             // super-block scale of row r
    int8_t sc[8][LM_IL_ROWS];         // sc[j][r]: scale of sub-block j (-32..31)
    uint8_t qs[8][4][4 * LM_IL_ROWS]; // qs[j][v][4r + kk]: lo = idx[r][32j + 4v + kk],
                                      //                    hi = idx[r][32j + 16 + 4v + kk]
};
_Static_assert(sizeof(struct lm_il_iq4_xs_sb) == 2208, "il iq4_xs super-block size"); // 16 x 136 = 2176

// ---- f16: the file layout itself, 16 rows of n_in halves one after another (row_bytes =
// 2 n_in), so the weights are used in place and nothing is copied at load (lm_il_in_place).
// Its activation rows are f32: the f16-rounded activations (the f16 row vec_dot reads)
// widened once, so the kernels broadcast or load them without a convert per use.

#endif
