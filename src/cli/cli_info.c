// `lumen info MODEL`: architecture, hyper-parameters, tokenizer, tensor table.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lumen.h"

static const char *k_info_help =
    "usage: lumen info [MODEL] [--no-tensors]\n"
    "\n"
    "Prints the architecture, hyper-parameters, tokenizer kind and size, and a table of\n"
    "tensors (name, dtype, shape, bytes) with totals per dtype.\n"
    "MODEL defaults to " LM_DEFAULT_MODEL ".\n";

static void human(double b, char *out, size_t n) {
    if (b >= 1 << 30) snprintf(out, n, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(out, n, "%.2f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(out, n, "%.2f KiB", b / (1 << 10));
    else snprintf(out, n, "%.0f B", b);
}

// The layers whose q and k RoPE does not rotate (smollm3's every 4th), if any.
static void print_no_rope(const struct lm_model *m, int32_t n_layer) {
    int n = 0;
    for (int l = 0; l < n_layer; l++) {
        struct lm_model_layer_info li;
        lm_model_layer_info(m, l, &li);
        if (!li.no_rope) continue;
        printf(n++ ? " %d" : "  no rope        layers %d", l);
    }
    if (n) printf(" (%d of %d)\n", n, n_layer);
}

// the tokenizer section: kind, sizes, and the chat format lumen reads from the model's own
// template (lumen run/chat's choice without --template)
static void print_tokenizer(const struct lm_model *m) {
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    printf("\ntokenizer\n");
    static const char *const k_kinds[] = {"SentencePiece (llama)", "byte-level BPE (gpt2)", "WordPiece (bert)",
                                           "SentencePiece Unigram (t5)"};
    printf("  kind           %s\n", k_kinds[lm_tokenizer_kind(tok)]);
    printf("  tokens         %d (bos %d, eos %d)\n", lm_tokenizer_n_vocab(tok), lm_tokenizer_bos(tok),
           lm_tokenizer_eos(tok));
    // the model's own template as lumen reads it (lumen run/chat's choice without --template)
    const char *tmpl_text = lm_model_chat_template(m);
    const enum lm_chat_template tmpl =
        tmpl_text && *tmpl_text ? lm_chat_template_detect(tok, lm_model_arch(m), tmpl_text) : LM_CHAT_TEMPLATE_NONE;
    printf("  chat format    %s\n", !tmpl_text || !*tmpl_text ? "none (no tokenizer.chat_template)"
                                    : tmpl != LM_CHAT_TEMPLATE_NONE ? lm_chat_template_name(tmpl)
                                                                    : "unknown template");
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool tensors = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(k_info_help, stdout); return 0; }
        else if (!strcmp(argv[i], "--no-tensors")) tensors = false;
        else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) path = cli_value("info", argc, argv, &i);
        else if (argv[i][0] == '-') cli_usage_error("info", "unknown option '%s' (try `lumen info --help`)", argv[i]);
        else if (!path) path = argv[i];
        else cli_usage_error("info", "more than one model given ('%s' and '%s')", path, argv[i]);
    }
    if (!path) path = cli_default_model();
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, path, NULL);
    if (st != LM_OK) {
        fprintf(stderr, "lumen info: %s\n", lm_error_msg());
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    struct lm_model_info info;
    struct lm_model_hparams hp;
    lm_model_info(m, &info);
    lm_model_hparams(m, &hp);
    printf("model          %s\n", path);
    printf("name           %.*s\n", (int)(info.name_len > 200 ? 200 : info.name_len), info.name);
    printf("architecture   %s\n", info.arch);
    printf("gguf version   %u (%llu tensors, %llu metadata keys, alignment %llu)\n",
           info.gguf_version, (unsigned long long)info.n_tensors,
           (unsigned long long)info.n_metadata, (unsigned long long)info.alignment);
    printf("load           %.1f ms (mmap + validate)\n", (double)info.load_ns / 1e6);
    printf("\nhyper-parameters\n");
    printf("  n_vocab        %d\n", hp.n_vocab);
    printf("  n_embd         %d\n", hp.n_embd);
    printf("  n_layer        %d\n", hp.n_layer);
    printf("  n_head         %d (kv %d, GQA group %d)\n", hp.n_head, hp.n_head_kv,
           hp.n_head / hp.n_head_kv);
    printf("  head_dim       %d (k) / %d (v)\n", hp.head_dim_k, hp.head_dim_v);
    printf("  n_ff           %d\n", hp.n_ff);
    if (hp.mla_kv_rank > 0) // deepseek2: the KV cache holds the latent and the RoPE key
        printf("  mla            latent %d + rope key %d per position and layer (KV cache: "
               "%d values, no V rows)\n", hp.mla_kv_rank, hp.head_dim_k - hp.mla_kv_rank,
               hp.head_dim_k);
    if (hp.n_expert > 0 && hp.mla_kv_rank > 0)
        printf("  experts        %d of %d per token, each %d wide (routing as the file says)\n",
               hp.n_expert_used, hp.n_expert, hp.n_ff_exp);
    else if (hp.n_expert > 0 && hp.expert_softmax_k) // gpt-oss
        printf("  experts        %d of %d per token, each %d wide (router: top-k of the biased "
               "logits, softmax over those; biased experts, clamped SwiGLU)\n",
               hp.n_expert_used, hp.n_expert, hp.n_ff_exp);
    else if (hp.n_expert > 0)
        printf("  experts        %d of %d per token, each %d wide (router: softmax, top-k, "
               "renormalised)\n", hp.n_expert_used, hp.n_expert, hp.n_ff_exp);
    printf("  n_ctx_train    %d\n", hp.n_ctx_train);
    printf("  rms_eps        %g\n", hp.rms_eps);
    printf("  rope           %s, %d dims, base %g (global)", hp.rope_neox ? "neox" : "norm", hp.n_rot,
           hp.rope_base);
    if (hp.n_swa > 0) printf(", base %g (sliding)", hp.rope_base_swa);
    if (hp.rope_scale != 1.0f) printf(", %s scaling x%g", hp.rope_yarn ? "yarn" : "linear", 1.0f / hp.rope_scale);
    if (hp.rope_llama3) // per-dimension frequency divisors (1 = high frequencies untouched)
        printf(", llama3 scaling (frequency factors %g..%g, %s)", hp.rope_factor_min,
               hp.rope_factor_max,
               hp.rope_factors_from_tensor ? "rope_freqs.weight" : "from rope.scaling.* metadata");
    if (hp.rope_longrope) // phi3: which factors a context uses depends on its n_ctx
        printf(", LongRoPE (long factors when n_ctx, rounded up to 256, exceeds %d; attn_factor %g)",
               hp.rope_orig_ctx, hp.rope_attn_factor);
    printf("\n");
    print_no_rope(m, hp.n_layer);
    // per-layer features, counted over the layers
    int n_global = 0, n_bias = 0, n_qk_norm = 0, n_post = 0, n_sinks = 0, n_obias = 0;
    for (int l = 0; l < hp.n_layer; l++) {
        struct lm_model_layer_info li;
        lm_model_layer_info(m, l, &li);
        n_global += !li.sliding;
        n_bias += li.qkv_bias;
        n_qk_norm += li.qk_norm;
        n_post += li.post_norms;
        n_sinks += li.attn_sinks;
        n_obias += li.o_bias;
    }
    if (hp.n_swa > 0) {
        printf("  sliding window %d tokens, pattern: every %d%s layer global (%d sliding, %d "
               "global); global layers:",
               hp.n_swa, hp.swa_period,
               hp.swa_period == 1 ? "st" : hp.swa_period == 2 ? "nd" : hp.swa_period == 3 ? "rd" : "th",
               hp.n_layer - n_global, n_global);
        for (int l = 0; l < hp.n_layer; l++) {
            struct lm_model_layer_info li;
            lm_model_layer_info(m, l, &li);
            if (!li.sliding) printf(" %d", l);
        }
        printf("\n");
    } else {
        printf("  attention      full (no sliding window)\n");
    }
    printf("  qkv biases     %s\n",
           n_bias ? (n_bias == hp.n_layer ? "yes (all layers)" : "some layers") : "no");
    if (n_obias) printf("  output bias    attention output projection (%d layers)\n", n_obias);
    if (n_sinks) printf("  attn sinks     one learned logit per query head (%d layers)\n", n_sinks);
    printf("  qk-norm        %s\n", n_qk_norm ? "per-head RMS norm on q and k" : "no");
    printf("  post norms     %s\n", n_post ? "after attention and FFN" : "no");
    printf("  attn scale     %g\n", hp.attn_scale);
    printf("  embd scale     %g\n", hp.embd_scale);
    if (hp.final_softcap > 0) printf("  logit softcap  %g\n", hp.final_softcap);
    if (hp.residual_scale > 0) printf("  residual scale %g (block outputs)\n", hp.residual_scale);
    if (hp.logit_scale > 0) printf("  logit scale    %g (logits divided by it)\n", hp.logit_scale);
    printf("  output         %s%s\n", hp.tied_output ? "tied to token_embd" : "separate output.weight",
           hp.output_bias ? " + output.bias" : "");
    print_tokenizer(m);

    // the tensor table, and totals by element type
    uint64_t by_type[LM_TENSOR_TYPE_COUNT] = {0}, n_by_type[LM_TENSOR_TYPE_COUNT] = {0};
    uint64_t total = 0, params = 0;
    if (tensors) printf("\n%-40s %-6s %-22s %12s\n", "tensor", "dtype", "shape", "bytes");
    for (uint64_t i = 0; i < info.n_tensors; i++) {
        struct lm_tensor_info t;
        lm_model_tensor(m, i, &t);
        char shape[64];
        int o = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t.n_dims; d++)
            o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", d ? ", " : "", (long long)t.ne[d]);
        snprintf(shape + o, sizeof shape - (size_t)o, "]");
        if (tensors)
            printf("%-40.*s %-6s %-22s %12llu\n", (int)(t.name_len > 40 ? 40 : t.name_len), t.name,
                   lm_tensor_type_name(t.type), shape, (unsigned long long)t.n_bytes);
        by_type[t.type] += t.n_bytes;
        n_by_type[t.type]++;
        total += t.n_bytes;
        params += t.n_elements;
    }
    char hb[32];
    printf("\ntotals by dtype\n");
    for (int d = 0; d < LM_TENSOR_TYPE_COUNT; d++) {
        if (!n_by_type[d]) continue;
        human((double)by_type[d], hb, sizeof hb);
        printf("  %-6s %4llu tensors %12llu bytes (%s, %.1f%%)\n", lm_tensor_type_name(d),
               (unsigned long long)n_by_type[d], (unsigned long long)by_type[d], hb,
               100.0 * (double)by_type[d] / (double)total);
    }
    human((double)total, hb, sizeof hb);
    printf("  total  %4llu tensors %12llu bytes (%s), %.1f M parameters, %.2f bits/weight\n",
           (unsigned long long)info.n_tensors, (unsigned long long)total, hb, (double)params / 1e6,
           8.0 * (double)total / (double)params);
    lm_model_free(m);
    return 0;
}
