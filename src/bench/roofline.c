// The bench's view of a model (roofline.h): description, size, and the bytes a decode
// step reads per weight group, from the tensor table of the public API.
#include "roofline.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

// llama.cpp's llama_model_ftype_name(), for general.file_type
static const char *ftype_name(uint32_t ft) {
    switch (ft) {
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 32: return "BF16";
    case 38: return "MXFP4 MoE";
    default: return NULL;
    }
}

static bool name_is(const struct lm_tensor_info *t, const char *s) {
    return t->name_len == strlen(s) && !memcmp(t->name, s, t->name_len);
}

static bool name_has(const struct lm_tensor_info *t, const char *sub) {
    const size_t n = strlen(sub);
    for (size_t i = 0; i + n <= t->name_len; i++)
        if (!memcmp(t->name + i, sub, n)) return true;
    return false;
}

// The matmul group a tensor's bytes count in (the head and embedding are decided before).
static enum lm_bench_grp layer_group(const struct lm_tensor_info *t) {
    if (name_has(t, ".attn_q.") || name_has(t, ".attn_k.") || name_has(t, ".attn_v.") ||
        name_has(t, ".attn_qkv.") || name_has(t, ".attn_q_a.") || name_has(t, ".attn_q_b.") ||
        name_has(t, ".attn_kv_a_mqa."))
        return LM_BENCH_GRP_QKV;
    if (name_has(t, ".attn_output.")) return LM_BENCH_GRP_O;
    if (name_has(t, ".ffn_gate.") || name_has(t, ".ffn_up.") || name_has(t, ".ffn_gate_up.") ||
        name_has(t, ".ffn_gate_exps.") || name_has(t, ".ffn_up_exps.") ||
        name_has(t, ".ffn_gate_shexp.") || name_has(t, ".ffn_up_shexp."))
        return LM_BENCH_GRP_GATE_UP;
    if (name_has(t, ".ffn_down.") || name_has(t, ".ffn_down_exps.") || name_has(t, ".ffn_down_shexp."))
        return LM_BENCH_GRP_DOWN;
    return LM_BENCH_GRP_OTHER;
}

// Bytes a decode step reads: every tensor except the token embedding (one row of it is
// read), and the whole embedding when it doubles as the output head (tied); of the 3-D
// expert tensors, the share of the experts one token uses (its active bytes).
static uint64_t kv_row_bytes(enum lm_kv_type t, uint64_t n) { return t == LM_KV_Q8_0 ? n / 32 * 34 : n * 2; }

void lm_bench_model_info_kv_types(struct lm_bench_model_info *mi, enum lm_kv_type tk, enum lm_kv_type tv) {
    mi->kv_cell_bytes = kv_row_bytes(tk, mi->kv_k_elems) + kv_row_bytes(tv, mi->kv_v_elems);
}

void lm_bench_model_info(const struct lm_model *m, const char *path, struct lm_bench_model_info *out) {
    struct lm_bench_model_info *mi = out;
    memset(mi, 0, sizeof *mi);
    mi->path = path;
    mi->arch = lm_model_arch(m);
    struct lm_model_info info;
    struct lm_model_hparams hp;
    lm_model_info(m, &info);
    lm_model_hparams(m, &hp);
    bool has_output = false;
    for (uint64_t i = 0; i < info.n_tensors && !has_output; i++) {
        struct lm_tensor_info t;
        lm_model_tensor(m, i, &t);
        has_output = name_is(&t, "output.weight");
    }
    uint64_t by_dtype[LM_TENSOR_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < info.n_tensors; i++) {
        struct lm_tensor_info t;
        lm_model_tensor(m, i, &t);
        mi->size_bytes += t.n_bytes;
        mi->n_params += t.n_elements;
        if ((unsigned)t.type < LM_TENSOR_TYPE_COUNT) by_dtype[t.type] += t.n_bytes;
        const bool is_embd = name_is(&t, "token_embd.weight");
        const bool is_head = name_is(&t, "output.weight") || name_is(&t, "output.bias") ||
                             (is_embd && !has_output);
        const uint64_t row_bytes = t.ne[1] ? t.n_bytes / (uint64_t)t.ne[1] : 0;
        enum lm_bench_grp grp = LM_BENCH_GRP_OTHER;
        uint64_t bytes = t.n_bytes;
        if (is_head) {
            grp = LM_BENCH_GRP_HEAD;
            if (!name_is(&t, "output.bias")) {
                mi->head_params += t.n_elements;
                snprintf(mi->head_dtype, sizeof mi->head_dtype, "%s", lm_tensor_type_name(t.type));
            }
            if (is_embd) mi->grp_bytes[LM_BENCH_GRP_OTHER] += row_bytes; // the embedding's row too
        } else if (is_embd) {
            bytes = row_bytes;
        } else {
            grp = layer_group(&t);
            if (hp.n_expert > 0 && t.n_dims == 3 && t.ne[2] == hp.n_expert)
                bytes = t.n_bytes / (uint64_t)hp.n_expert * (uint64_t)hp.n_expert_used;
        }
        mi->grp_bytes[grp] += bytes;
        if (t.n_dims >= 2 && t.name_len > 4 && !memcmp(t.name, "blk.", 4)) mi->layer_params += t.n_elements;
    }
    for (int i = 0; i < LM_BENCH_GRP_COUNT; i++) mi->bytes_per_token += mi->grp_bytes[i];
    mi->n_layer = hp.n_layer;
    mi->n_vocab = hp.n_vocab;
    mi->n_ctx_train = hp.n_ctx_train;
    mi->kernels = info.kernels;
    mi->kv_k_elems = (uint64_t)hp.n_head_kv * (uint64_t)hp.head_dim_k;
    mi->kv_v_elems = hp.mla_kv_rank > 0 ? 0 : (uint64_t)hp.n_head_kv * (uint64_t)hp.head_dim_v;
    lm_bench_model_info_kv_types(mi, LM_KV_F16, LM_KV_F16);
    mi->n_swa = hp.n_swa;
    for (int32_t l = 0; l < hp.n_layer && hp.n_swa > 0; l++) {
        struct lm_model_layer_info li;
        if (lm_model_layer_info(m, l, &li) == LM_OK && li.sliding) mi->n_layer_swa++;
    }

    char size_lbl[32];
    if (mi->n_params >= 1000000000ull) snprintf(size_lbl, sizeof size_lbl, "%.1fB", (double)mi->n_params / 1e9);
    else if (mi->n_params >= 1000000ull) snprintf(size_lbl, sizeof size_lbl, "%.0fM", (double)mi->n_params / 1e6);
    else snprintf(size_lbl, sizeof size_lbl, "%.0fK", (double)mi->n_params / 1e3);
    const char *ftn = info.file_type != UINT32_MAX ? ftype_name(info.file_type) : NULL;
    char ft_buf[32];
    if (!ftn) { // the dtype holding the most bytes
        int best = 0;
        for (int d = 1; d < LM_TENSOR_TYPE_COUNT; d++) if (by_dtype[d] > by_dtype[best]) best = d;
        snprintf(ft_buf, sizeof ft_buf, "%s", lm_tensor_type_name(best));
        ftn = ft_buf;
    }
    snprintf(mi->desc, sizeof mi->desc, "%s %s %s", mi->arch, size_lbl, ftn);
}

uint64_t lm_bench_kv_bytes(const struct lm_bench_model_info *mi, int64_t n_pos) {
    const int64_t win = mi->n_swa > 0 && n_pos > mi->n_swa ? mi->n_swa : n_pos;
    const uint64_t cells = (uint64_t)(mi->n_layer - mi->n_layer_swa) * (uint64_t)n_pos +
                           (uint64_t)mi->n_layer_swa * (uint64_t)win;
    return cells * mi->kv_cell_bytes;
}
