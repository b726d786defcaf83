// `lumen info MODEL`: architecture, hyper-parameters, tokenizer, tensor table.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "lumen.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

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
    const struct lm_hparams *hp = &m->hp;
    struct lm_gguf_str name = {0, ""};
    lm_gguf_get_str(&m->gguf, "general.name", &name, false);
    printf("model          %s\n", path);
    printf("name           %.*s\n", (int)(name.len > 200 ? 200 : name.len), name.data);
    printf("architecture   %s\n", m->arch->name);
    printf("gguf version   %u (%llu tensors, %llu metadata keys, alignment %llu)\n",
           m->gguf.version, (unsigned long long)m->gguf.n_tensors,
           (unsigned long long)m->gguf.n_kv, (unsigned long long)m->gguf.alignment);
    printf("load           %.1f ms (mmap + validate)\n", (double)m->load_ns / 1e6);
    printf("\nhyper-parameters\n");
    printf("  n_vocab        %d\n", hp->n_vocab);
    printf("  n_embd         %d\n", hp->n_embd);
    printf("  n_layer        %d\n", hp->n_layer);
    printf("  n_head         %d (kv %d, GQA group %d)\n", hp->n_head, hp->n_head_kv,
           hp->n_head / hp->n_head_kv);
    printf("  head_dim       %d (k) / %d (v)\n", hp->head_dim_k, hp->head_dim_v);
    printf("  n_ff           %d\n", hp->n_ff);
    printf("  n_ctx_train    %d\n", hp->n_ctx_train);
    printf("  rms_eps        %g\n", hp->rms_eps);
    printf("  rope           %s, %d dims, base %g (global)", hp->rope_type == LM_ROPE_NEOX ? "neox" : "norm",
           hp->n_rot, hp->rope_base);
    if (hp->n_swa > 0) printf(", base %g (sliding)", hp->rope_base_swa);
    if (hp->rope_scale != 1.0f) printf(", linear scaling x%g", 1.0f / hp->rope_scale);
    if (hp->rope_scaling == LM_ROPE_SCALING_LLAMA3 && m->rope_freqs) {
        // llama3: per-dimension frequency divisors (1 = high frequencies untouched)
        const int half = hp->n_rot / 2;
        float lo = m->rope_freqs[0], hi = m->rope_freqs[0];
        for (int i = 1; i < half; i++) {
            if (m->rope_freqs[i] < lo) lo = m->rope_freqs[i];
            if (m->rope_freqs[i] > hi) hi = m->rope_freqs[i];
        }
        printf(", llama3 scaling (frequency factors %g..%g, %s)", lo, hi,
               m->rope_freqs == m->rope_freqs_buf ? "from rope.scaling.* metadata"
                                                  : "rope_freqs.weight");
    }
    printf("\n");
    if (hp->n_swa > 0) {
        int n_global = 0;
        for (int l = 0; l < hp->n_layer; l++) n_global += !m->layers[l].swa;
        printf("  sliding window %d tokens, pattern: every %d%s layer global (%d sliding, %d "
               "global); global layers:",
               hp->n_swa, hp->swa_period,
               hp->swa_period == 1 ? "st" : hp->swa_period == 2 ? "nd" : hp->swa_period == 3 ? "rd" : "th",
               hp->n_layer - n_global, n_global);
        for (int l = 0; l < hp->n_layer; l++) if (!m->layers[l].swa) printf(" %d", l);
        printf("\n");
    } else {
        printf("  attention      full (no sliding window)\n");
    }
    {
        int nb = 0, nqk = 0, npost = 0;
        for (int l = 0; l < hp->n_layer; l++) {
            nb += m->layers[l].bq.data || m->layers[l].bk.data || m->layers[l].bv.data;
            nqk += m->layers[l].q_norm.data != NULL;
            npost += m->layers[l].post_attn_norm.data != NULL;
        }
        printf("  qkv biases     %s\n", nb ? (nb == hp->n_layer ? "yes (all layers)" : "some layers") : "no");
        printf("  qk-norm        %s\n", nqk ? "per-head RMS norm on q and k" : "no");
        printf("  post norms     %s\n", npost ? "after attention and FFN" : "no");
    }
    printf("  attn scale     %g\n", hp->attn_scale);
    printf("  embd scale     %g\n", hp->embd_scale);
    if (hp->final_softcap > 0) printf("  logit softcap  %g\n", hp->final_softcap);
    printf("  output         %s%s\n", m->tied_output ? "tied to token_embd" : "separate output.weight",
           m->output_b.data ? " + output.bias" : "");
    printf("\ntokenizer\n");
    printf("  kind           %s\n", m->tok->kind == LM_TOK_KIND_SPM ? "SentencePiece (llama)" : "byte-level BPE (gpt2)");
    printf("  tokens         %d (bos %d, eos %d)\n", lm_tokenizer_n_vocab(m->tok),
           lm_tokenizer_bos(m->tok), lm_tokenizer_eos(m->tok));

    uint64_t by_type[LM_DTYPE_COUNT] = {0}, n_by_type[LM_DTYPE_COUNT] = {0}, total = 0, params = 0;
    if (tensors) printf("\n%-40s %-6s %-22s %12s\n", "tensor", "dtype", "shape", "bytes");
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) {
        const struct lm_gguf_tensor *t = &m->gguf.tensors[i];
        char shape[64];
        int o = snprintf(shape, sizeof shape, "[");
        uint64_t ne = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
            ne *= (uint64_t)t->ne[d];
        }
        snprintf(shape + o, sizeof shape - (size_t)o, "]");
        if (tensors)
            printf("%-40.*s %-6s %-22s %12llu\n", (int)(t->name.len > 40 ? 40 : t->name.len),
                   t->name.data, lm_dtype_name(t->type), shape, (unsigned long long)t->nbytes);
        by_type[t->type] += t->nbytes;
        n_by_type[t->type]++;
        total += t->nbytes;
        params += ne;
    }
    char hb[32];
    printf("\ntotals by dtype\n");
    for (int d = 0; d < LM_DTYPE_COUNT; d++) {
        if (!n_by_type[d]) continue;
        human((double)by_type[d], hb, sizeof hb);
        printf("  %-6s %4llu tensors %12llu bytes (%s, %.1f%%)\n", lm_dtype_name(d),
               (unsigned long long)n_by_type[d], (unsigned long long)by_type[d], hb,
               100.0 * (double)by_type[d] / (double)total);
    }
    human((double)total, hb, sizeof hb);
    printf("  total  %4llu tensors %12llu bytes (%s), %.1f M parameters, %.2f bits/weight\n",
           (unsigned long long)m->gguf.n_tensors, (unsigned long long)total, hb, (double)params / 1e6,
           8.0 * (double)total / (double)params);
    lm_model_free(m);
    return 0;
}
