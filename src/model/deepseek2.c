// DeepSeek-V2-style models (llama.cpp's `deepseek2`: DeepSeek-V2 / V2-Lite, Moonlight,
// GLM-4.7-Flash) as data: multi-head latent attention as the converter writes it (split
// attn_k_b / attn_v_b, MLA as MQA over the latent; runtime/ops_mla.c), dense first layers,
// then routed experts with shared experts and the file's routing (runtime/ops_moe.c).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "model/model.h"

// ================================================================ hyper-parameters

// The MLA sizes: what the file says and what lumen's attention needs of them.
static enum lm_status load_mla_hparams(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    hp->head_dim_v = 0;
    if ((st = lm_model_key_i32(m, "attention.value_length", &hp->head_dim_v, false))) return st;
    if ((st = lm_model_key_i32(m, "attention.kv_lora_rank", &hp->mla_kv_rank, true))) return st;
    hp->mla_q_rank = 0;
    if ((st = lm_model_key_i32(m, "attention.q_lora_rank", &hp->mla_q_rank, false))) return st;
    hp->mla_hd_k = hp->mla_hd_v = 0;
    if ((st = lm_model_key_i32(m, "attention.key_length_mla", &hp->mla_hd_k, false))) return st;
    if ((st = lm_model_key_i32(m, "attention.value_length_mla", &hp->mla_hd_v, false))) return st;
    if (hp->mla_hd_k == 0 || hp->mla_hd_v == 0)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "deepseek2: %s: no attention.key_length_mla / value_length_mla: a file "
                            "of an older converter (one attn_kv_b, MLA without absorption) is not "
                            "supported; convert it again", m->path);
    if ((st = lm_model_key_i32(m, "rope.dimension_count", &hp->n_rot, true))) return st;
    const int32_t kvr = hp->mla_kv_rank, rot = hp->n_rot;
    if (kvr <= 0 || kvr > 4096 || kvr % 32 != 0 || rot <= 0 || rot % 16 != 0 || rot > 256 ||
        hp->mla_hd_k <= rot || hp->mla_hd_k > 1024 || hp->mla_hd_v <= 0 || hp->mla_hd_v > 1024 ||
        hp->mla_q_rank < 0 || hp->mla_q_rank > 16384 || hp->n_head_kv != 1 ||
        hp->head_dim_k != kvr + rot || hp->head_dim_v != kvr)
        return lm_error_set(LM_ERR_FORMAT,
                            "deepseek2: %s: inconsistent MLA sizes: kv_lora_rank %d (a multiple of "
                            "32), rope.dimension_count %d (a multiple of 16, <= 256), "
                            "key_length_mla %d (> rope dims), value_length_mla %d, q_lora_rank %d; "
                            "expected head_count_kv 1 (got %d), key_length = kv_lora_rank + rope "
                            "dims (got %d), value_length = kv_lora_rank (got %d)",
                            m->path, kvr, rot, hp->mla_hd_k, hp->mla_hd_v, hp->mla_q_rank,
                            hp->n_head_kv, hp->head_dim_k, hp->head_dim_v);
    return LM_OK;
}

// YaRN as llama.cpp sets it up for deepseek2 (llama_context's cparams, the graph's
// kq_scale): freq_scale 1/factor, ext_factor 1, beta_fast 32 / beta_slow 1 over
// original_context_length, the magnitude factor from yarn_log_multiplier (the converter's
// 0.1 x mscale_all_dim, divided by 0.1 again), and the attention scale mscale^2 / sqrt(key
// size) that pre-scales for it; float arithmetic as llama.cpp's.
static float yarn_get_mscale(float scale, float mscale) {
    return scale <= 1.0f ? 1.0f : 0.1f * mscale * logf(scale) + 1.0f;
}
static float yarn_corr_dim(int n_dims, float n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}
enum lm_status lm_model_yarn(struct lm_model *m, float factor, float *mscale) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    uint32_t orig = (uint32_t)hp->n_ctx_train;
    float log_mul = 0.0f, rope_attn = 1.0f;
    if ((st = lm_model_key_u32(m, "rope.scaling.original_context_length", &orig, false))) return st;
    const bool ds2 = m->arch == &lm_arch_deepseek2; // llama.cpp reads the multiplier for it only
    if (ds2 && (st = lm_model_key_f32(m, "rope.scaling.yarn_log_multiplier", &log_mul, false)))
        return st;
    if ((st = lm_model_key_f32(m, "rope.scaling.attn_factor", &rope_attn, false))) return st;
    if (!(factor > 1.0f && factor < 1e6f) || orig == 0 || orig > (1u << 24) || !(log_mul >= 0.0f))
        return lm_error_set(LM_ERR_FORMAT,
                            "%s: %s: YaRN rope scaling needs factor > 1, "
                            "original_context_length in [1, 2^24] and yarn_log_multiplier >= 0 "
                            "(got %g, %u, %g)", m->arch->name, m->path, factor, orig, log_mul);
    if (ds2) log_mul /= 0.1f; // [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]
    const float freq_scale = 1.0f / factor;
    float af;
    if (log_mul != 0.0f) {
        const float mscale = log_mul != 1.0f ? log_mul : 1.0f;
        af = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, log_mul);
    } else {
        af = yarn_get_mscale(factor, 1.0f);
    }
    af *= 1.0f / (1.0f + 0.1f * logf(factor));
    af *= rope_attn;
    hp->rope_scaling = LM_ROPE_SCALING_YARN;
    hp->rope_scale = freq_scale;
    hp->yarn_ext_factor = 1.0f;
    hp->yarn_attn_factor = af;
    const float lo = floorf(yarn_corr_dim(hp->n_rot, (float)orig, 32.0f, hp->rope_base));
    const float hi = ceilf(yarn_corr_dim(hp->n_rot, (float)orig, 1.0f, hp->rope_base));
    hp->yarn_corr[0] = lo > 0.0f ? lo : 0.0f;
    hp->yarn_corr[1] = hi < (float)(hp->n_rot - 1) ? hi : (float)(hp->n_rot - 1);
    const float af_org = af * (1.0f + 0.1f * logf(1.0f / freq_scale));
    *mscale = af_org * (1.0f + 0.1f * log_mul * logf(1.0f / freq_scale));
    return LM_OK;
}

static enum lm_status load_yarn(struct lm_model *m, float factor) {
    float ms = 1.0f;
    enum lm_status st = lm_model_yarn(m, factor, &ms);
    m->hp.attn_scale = 1.0f * ms * ms / sqrtf((float)m->hp.mla_hd_k);
    return st;
}

// RoPE: NORM rotation of the rope dims, none or YaRN scaling; the attention scale is
// llama.cpp's kq_scale, 1/sqrt(key_length_mla) without YaRN.
static enum lm_status load_rope(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    if (!(hp->rope_base > 0.0f))
        return lm_error_set(LM_ERR_FORMAT, "deepseek2: %s: rope.freq_base = %g must be > 0",
                            m->path, hp->rope_base);
    char key[128];
    struct lm_gguf_str s = {0, ""};
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    if ((st = lm_gguf_get_str(&m->gguf, key, &s, false))) return st;
    float factor = 0.0f, temp = 0.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    // llama.cpp: a missing type is linear, and the factor alone decides
    const bool none = lm_gguf_str_eq(s, "none") ||
                      ((s.len == 0 || lm_gguf_str_eq(s, "linear")) && (factor == 0.0f || factor == 1.0f));
    const bool yarn = lm_gguf_str_eq(s, "yarn");
    if (!none && !yarn)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "deepseek2: %s: rope scaling '%.*s' (factor %g) is not supported "
                            "(supported: none, yarn)",
                            m->path, (int)(s.len > 32 ? 32 : s.len), s.data, factor);
    if ((st = lm_model_key_f32(m, "attention.temperature_scale", &temp, false))) return st;
    if (temp != 0.0f)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "deepseek2: %s: attention.temperature_scale %g (llama 4 temperature "
                            "tuning) is not supported", m->path, temp);
    hp->rope_base_swa = hp->rope_base;
    hp->rope_scale = 1.0f;
    hp->rope_scaling = LM_ROPE_SCALING_NONE;
    hp->rope_type = LM_ROPE_NORM;
    hp->attn_scale = 1.0f / sqrtf((float)hp->mla_hd_k);
    hp->yarn_ext_factor = 0.0f;
    hp->yarn_attn_factor = 1.0f;
    m->rope_freqs = NULL;
    return yarn ? load_yarn(m, factor) : LM_OK;
}

// Experts: routed (expert_count, expert_used_count, expert_feed_forward_length), shared
// (expert_shared_count, each expert_feed_forward_length wide, as one FFN), the weights'
// normalisation and scale, the gating function and group-limited top-k.
static enum lm_status load_expert_hparams(struct lm_model *m, int32_t *n_dense, int32_t *n_shared) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    *n_dense = *n_shared = 0;
    if ((st = lm_model_key_i32(m, "leading_dense_block_count", n_dense, false))) return st;
    hp->n_expert = hp->n_expert_used = hp->n_ff_exp = 0;
    if ((st = lm_model_key_i32(m, "expert_count", &hp->n_expert, false))) return st;
    if ((st = lm_model_key_i32(m, "expert_used_count", &hp->n_expert_used, false))) return st;
    if ((st = lm_model_key_i32(m, "expert_feed_forward_length", &hp->n_ff_exp, true))) return st;
    if ((st = lm_model_key_i32(m, "expert_shared_count", n_shared, true))) return st;
    hp->expert_w_scale = 0.0f;
    if ((st = lm_model_key_f32(m, "expert_weights_scale", &hp->expert_w_scale, false))) return st;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    hp->expert_norm_w = false;
    if ((st = lm_gguf_get_bool(&m->gguf, key, &hp->expert_norm_w, false))) return st;
    uint32_t gating = 0;
    if ((st = lm_model_key_u32(m, "expert_gating_func", &gating, false))) return st;
    if (gating == 0) // llama.cpp: files without the key are DeepSeek V2 (softmax), GLM 4.7 Lite
        gating = (hp->n_layer == 47 || hp->n_layer == 48) && hp->n_vocab == 154880 ? 2 : 1;
    if (gating != LM_EXPERT_GATING_SOFTMAX && gating != LM_EXPERT_GATING_SIGMOID)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "deepseek2: %s: expert_gating_func %u is not supported (1 softmax, "
                            "2 sigmoid)", m->path, gating);
    hp->expert_gating = (enum lm_expert_gating)gating;
    hp->n_expert_groups = hp->n_group_used = 0;
    if ((st = lm_model_key_i32(m, "expert_group_count", &hp->n_expert_groups, false))) return st;
    if ((st = lm_model_key_i32(m, "expert_group_used_count", &hp->n_group_used, false))) return st;
    const bool moe = *n_dense < hp->n_layer;
    if (*n_dense < 0 || *n_shared < 0 || *n_shared > 64 ||
        (moe && (hp->n_expert <= 0 || hp->n_expert > LM_MAX_EXPERTS || hp->n_expert_used <= 0 ||
                 hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0)) ||
        (hp->n_expert_groups > 1 &&
         (hp->n_expert_groups > 64 || hp->n_expert % hp->n_expert_groups != 0 || hp->n_group_used <= 0 ||
          hp->n_group_used > hp->n_expert_groups ||
          hp->n_group_used * (hp->n_expert / hp->n_expert_groups) < hp->n_expert_used)))
        return lm_error_set(LM_ERR_FORMAT,
                            "deepseek2: %s: inconsistent experts: leading_dense_block_count %d, "
                            "expert_count %d, expert_used_count %d, expert_feed_forward_length "
                            "%d, expert_shared_count %d, expert_group_count %d, "
                            "expert_group_used_count %d (need 0 < used <= count <= %d, at most "
                            "64 groups dividing the count and holding the used ones)",
                            m->path, *n_dense, hp->n_expert, hp->n_expert_used, hp->n_ff_exp,
                            *n_shared, hp->n_expert_groups, hp->n_group_used, LM_MAX_EXPERTS);
    if (!moe) hp->n_expert = hp->n_expert_used = 0;
    // the shared experts' FFN runs in the dense FFN's scratch (runtime/context.c)
    if (moe && (int64_t)hp->n_ff_exp * *n_shared > hp->n_ff)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "deepseek2: %s: shared experts %d x %d wider than "
                            "feed_forward_length %d are not supported",
                            m->path, *n_shared, hp->n_ff_exp, hp->n_ff);
    return LM_OK;
}

// ================================================================ tensors

// Tensors llama.cpp's deepseek2 may hold that lumen does not implement.
static enum lm_status reject_unsupported(struct lm_model *m, int il) {
    static const char *const k_names[] = {"attn_kv_b.weight", "ffn_gate_up_exps.weight",
                                          "attn_q.bias", "attn_output.bias"};
    char name[96];
    for (size_t k = 0; k < sizeof k_names / sizeof k_names[0]; k++) {
        snprintf(name, sizeof name, "blk.%d.%s", il, k_names[k]);
        if (lm_gguf_find_tensor(&m->gguf, name))
            return lm_error_set(LM_ERR_UNSUPPORTED,
                                "deepseek2: %s: tensor '%s' (unsplit attn_kv_b, fused expert "
                                "gate/up, attention biases) is not supported", m->path, name);
    }
    return LM_OK;
}

// Layer il's attention tensors: q (direct or through the q low-rank pair), the latent
// projection with its norm, the per-head absorption matrices, the output.
static enum lm_status load_layer_attn(struct lm_model *m, int il, struct lm_weight *heads) {
    const struct lm_hparams *hp = &m->hp;
    struct lm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, H = hp->n_head, qr = hp->mla_q_rank, kvr = hp->mla_kv_rank;
    const int64_t nope = hp->mla_hd_k - hp->n_rot;
    enum lm_status st;
    const struct lm_layer_tensor ts[] = {
        {&L->attn_norm, "attn_norm.weight", E, 1, true},
        {&L->wk, "attn_kv_a_mqa.weight", E, kvr + hp->n_rot, true},
        {&L->kv_a_norm, "attn_kv_a_norm.weight", kvr, 1, true},
        {&L->wo, "attn_output.weight", H * hp->mla_hd_v, E, true},
        {&L->ffn_norm, "ffn_norm.weight", E, 1, true},
    };
    if ((st = lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0])))) return st;
    if (qr > 0) {
        const struct lm_layer_tensor tq[] = {
            {&L->wq_a, "attn_q_a.weight", E, qr, true},
            {&L->q_a_norm, "attn_q_a_norm.weight", qr, 1, true},
            {&L->wq, "attn_q_b.weight", qr, H * hp->mla_hd_k, true},
        };
        if ((st = lm_model_layer_weights(m, il, tq, 3))) return st;
    } else if ((st = lm_model_weightf(m, &L->wq, true, E, H * hp->mla_hd_k, "blk.%d.attn_q.weight",
                                      il))) {
        return st;
    }
    L->wk_b = heads;
    L->wv_b = heads + H;
    if ((st = lm_model_expert_weights(m, L->wk_b, il, "attn_k_b.weight", nope, kvr, H))) return st;
    return lm_model_expert_weights(m, L->wv_b, il, "attn_v_b.weight", kvr, hp->mla_hd_v, H);
}

// Layer il's FFN: dense (the first n_dense layers), or the router, the routed experts and
// the shared experts' FFN (in gate/up/down).
static enum lm_status load_layer_ffn(struct lm_model *m, int il, bool dense, int32_t n_shared) {
    const struct lm_hparams *hp = &m->hp;
    struct lm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
    enum lm_status st;
    if (dense) {
        const struct lm_layer_tensor ts[] = {
            {&L->gate, "ffn_gate.weight", E, hp->n_ff, true},
            {&L->up, "ffn_up.weight", E, hp->n_ff, true},
            {&L->down, "ffn_down.weight", hp->n_ff, E, true},
        };
        return lm_model_layer_weights(m, il, ts, 3);
    }
    L->gate_exps = m->exps_buf + (size_t)3 * il * X;
    L->up_exps = L->gate_exps + X;
    L->down_exps = L->up_exps + X;
    if ((st = lm_model_weightf(m, &L->router, true, E, X, "blk.%d.ffn_gate_inp.weight", il)))
        return st;
    if ((st = lm_model_weightf(m, &L->exp_probs_b, false, X, 1, "blk.%d.exp_probs_b.bias", il)))
        return st;
    if ((st = lm_model_expert_weights(m, L->gate_exps, il, "ffn_gate_exps.weight", E, F, X)))
        return st;
    if ((st = lm_model_expert_weights(m, L->up_exps, il, "ffn_up_exps.weight", E, F, X)))
        return st;
    if ((st = lm_model_expert_weights(m, L->down_exps, il, "ffn_down_exps.weight", F, E, X)))
        return st;
    if (n_shared == 0) return LM_OK;
    const int64_t FS = F * n_shared;
    const struct lm_layer_tensor ts[] = {
        {&L->gate, "ffn_gate_shexp.weight", E, FS, true},
        {&L->up, "ffn_up_shexp.weight", E, FS, true},
        {&L->down, "ffn_down_shexp.weight", FS, E, true},
    };
    return lm_model_layer_weights(m, il, ts, 3);
}

static enum lm_status deepseek2_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_block_dims(m))) return st;
    int32_t nextn = 0; // trailing multi-token-prediction layers (GLM-4.7): not run
    if ((st = lm_model_key_i32(m, "nextn_predict_layers", &nextn, false))) return st;
    if (nextn < 0 || nextn >= hp->n_layer)
        return lm_error_set(LM_ERR_FORMAT, "deepseek2: %s: nextn_predict_layers %d of %d blocks",
                            m->path, nextn, hp->n_layer);
    hp->n_layer -= nextn;
    if ((st = load_mla_hparams(m))) return st;
    hp->n_ctx_train = 4096;
    if ((st = lm_model_key_i32(m, "context_length", &hp->n_ctx_train, false))) return st;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    // the generic ranges, on the per-head sizes before absorption
    const int32_t hk = hp->head_dim_k, hv = hp->head_dim_v;
    hp->head_dim_k = hp->mla_hd_k;
    hp->head_dim_v = hp->mla_hd_v;
    hp->n_head_kv = hp->n_head;
    st = lm_model_check_dims(m);
    hp->head_dim_k = hk;
    hp->head_dim_v = hv;
    hp->n_head_kv = 1;
    if (st) return st;
    if ((st = lm_model_io_weights(m))) return st;
    memset(&m->output_b, 0, sizeof m->output_b);
    int32_t n_dense, n_shared;
    if ((st = load_expert_hparams(m, &n_dense, &n_shared))) return st;
    if ((st = load_rope(m))) return st;
    hp->n_swa = hp->swa_period = 0;
    hp->embd_scale = 1.0f;
    hp->final_softcap = 0.0f;

    const size_t H = (size_t)hp->n_head, NL = (size_t)hp->n_layer, X = (size_t)hp->n_expert;
    if (!(m->mla_buf = calloc(2 * NL * H, sizeof *m->mla_buf)) ||
        (X > 0 && !(m->exps_buf = calloc(3 * NL * X, sizeof *m->exps_buf))))
        return lm_error_set(LM_ERR_NOMEM, "deepseek2: out of memory (weight views)");
    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->swa = false;
        L->rope_base = hp->rope_base;
        L->rope_scale = hp->rope_scale;
        if ((st = reject_unsupported(m, il))) return st;
        if ((st = load_layer_attn(m, il, m->mla_buf + (size_t)il * 2 * H))) return st;
        if ((st = load_layer_ffn(m, il, il < n_dense || X == 0, n_shared))) return st;
    }
    return LM_OK;
}

// pre-norm blocks, SwiGLU (dense layers, routed and shared experts)
const struct lm_arch lm_arch_deepseek2 = {
    .name = "deepseek2",
    .load = deepseek2_load,
    .decoder = {.post_norms = false, .ffn_act = LM_FFN_ACT_SILU},
};
