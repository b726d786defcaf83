// `lumen bench --breakdown`: the profiled run and its analysis (breakdown.h), read top to
// bottom: run -> aggregates -> findings; the reports are breakdown_print.c.
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "breakdown_internal.h"
#include "lumen_prof.h"
#include "prompt.h"

const char *const lm_bd_ph_label[BD_NPH] = {
    "1. Tokenization (encode)", "2. Prefill (full prompt)", "3. Sampling",
    "4. Decode forward", "5. Detokenization (decode)"};

void lm_bench_breakdown_free(struct lm_bench_breakdown *b) {
    if (!b) return;
    free(b->l_attn);
    free(b->l_ffn);
    free(b);
}

// ================================================================ profiler aggregates
// Times are means over the pool's threads, in ms (lm_prof_query_ms).

static double prof_ms(int ph, int op, int layer, bool bar, uint64_t *count0) {
    return lm_prof_query_ms((enum lm_prof_phase)ph, (enum lm_prof_op)op, layer, bar, count0);
}

// Sum over layers -1..n_layer-1 of one op (compute or barrier) in phase ph.
static double prof_op_all(int ph, int op, int n_layer, bool bar, uint64_t *count0) {
    double ms = 0;
    for (int l = -1; l < n_layer && l < LM_PROF_MAX_LAYERS; l++) ms += prof_ms(ph, op, l, bar, count0);
    return ms;
}

static const int k_attn_ops[] = {LM_OP_ATTN_NORM, LM_OP_QKV, LM_OP_QK_NORM, LM_OP_ROPE,
                                 LM_OP_KV_WRITE, LM_OP_ATTENTION, LM_OP_O_PROJ,
                                 LM_OP_POST_ATTN_NORM, LM_OP_ATTN_RESIDUAL, LM_OP_MLA_ABSORB,
                                 LM_OP_MLA_V_UP};
static const int k_ffn_ops[] = {LM_OP_FFN_NORM, LM_OP_GATE_UP, LM_OP_ACTIVATION, LM_OP_DOWN,
                                LM_OP_POST_FFW_NORM, LM_OP_FFN_RESIDUAL, LM_OP_FFN_MOE_ROUTER,
                                LM_OP_FFN_MOE_GATE_UP, LM_OP_FFN_MOE_DOWN};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

// components: groups of ops, with the weight group they read (or -1)
static const struct {
    const char *name;
    int ops[6];
    int n;
    int grp;
} k_comp_defs[] = {
    {"matmul attn_q/k/v", {LM_OP_QKV}, 1, LM_BENCH_GRP_QKV},
    {"matmul attn_output", {LM_OP_O_PROJ}, 1, LM_BENCH_GRP_O},
    {"matmul ffn_gate+up", {LM_OP_GATE_UP, LM_OP_FFN_MOE_GATE_UP}, 2, LM_BENCH_GRP_GATE_UP},
    {"matmul ffn_down", {LM_OP_DOWN, LM_OP_FFN_MOE_DOWN}, 2, LM_BENCH_GRP_DOWN},
    {"experts' router (matmul, top-k, grouping)", {LM_OP_FFN_MOE_ROUTER}, 1, -1},
    {"lm_head (output matmul)", {LM_OP_LM_HEAD}, 1, LM_BENCH_GRP_HEAD},
    {"attention (rope, kv write, softmax.V)", {LM_OP_ROPE, LM_OP_KV_WRITE, LM_OP_ATTENTION}, 3, -1},
    {"MLA per-head wk_b / wv_b (latent in and out)", {LM_OP_MLA_ABSORB, LM_OP_MLA_V_UP}, 2, -1},
    {"norms (rms, qk, post, output)", {LM_OP_ATTN_NORM, LM_OP_QK_NORM, LM_OP_POST_ATTN_NORM,
                                       LM_OP_FFN_NORM, LM_OP_POST_FFW_NORM, LM_OP_OUTPUT_NORM}, 6, -1},
    {"activations (gated GELU/SiLU)", {LM_OP_ACTIVATION}, 1, -1},
    {"residual adds", {LM_OP_ATTN_RESIDUAL, LM_OP_FFN_RESIDUAL}, 2, -1},
    {"embedding", {LM_OP_EMBED}, 1, -1},
};

static void collect_ops(struct lm_bench_breakdown *b, double pool_wait_ms) {
    const int ph = LM_PHASE_DECODE, L = b->n_layer;
    const struct lm_bench_model_info *mi = b->mi;
    uint64_t n_ops = 0, n_bar = 0, n_pre = 0;
    double pre_ops_ms = 0;
    for (int op = 0; op < LM_OP_COUNT; op++) {
        b->ops_ms += prof_op_all(ph, op, L, false, &n_ops);
        b->bar_ms += prof_op_all(ph, op, L, true, &n_bar);
        pre_ops_ms += prof_op_all(LM_PHASE_PREFILL, op, L, false, &n_pre);
        b->pre_bar_ms += prof_op_all(LM_PHASE_PREFILL, op, L, true, NULL);
    }
    b->have_ops = n_ops > 0;
    b->have_pre_ops = n_pre > 0;
    b->have_prof_barriers = n_bar > 0;
    if (b->have_prof_barriers) b->n_barriers = n_bar;
    else b->bar_ms = pool_wait_ms; // the pool's own accounting (lm_context_thread_stats)
    b->pre_other_ms = b->have_pre_ops ? b->ph_ms[BD_PREFILL] - pre_ops_ms - b->pre_bar_ms : 0;

    for (int d = 0; d < NELEM(k_comp_defs); d++) {
        struct bd_comp *c = &b->comp[b->n_comp++];
        c->name = k_comp_defs[d].name;
        for (int i = 0; i < k_comp_defs[d].n; i++) {
            c->ms += prof_op_all(ph, k_comp_defs[d].ops[i], L, false, NULL);
            c->pre_ms += prof_op_all(LM_PHASE_PREFILL, k_comp_defs[d].ops[i], L, false, NULL);
        }
        c->bytes = k_comp_defs[d].grp >= 0 ? mi->grp_bytes[k_comp_defs[d].grp] : 0;
    }
    // matmul shapes (time on thread 0 per execution), all phases
    struct lm_prof_matmul_agg e;
    for (int i = 0; i < lm_prof_matmul_count() && b->n_mm < BD_MAX_MM; i++) {
        if (!lm_prof_matmul_get(i, &e)) break;
        struct bd_mm *x = &b->mm[b->n_mm++];
        snprintf(x->op, sizeof x->op, "%s", lm_prof_op_name(e.op));
        snprintf(x->dtype, sizeof x->dtype, "%s", lm_tensor_type_name(e.wtype));
        snprintf(x->variant, sizeof x->variant, "%s", e.variant[0] ? e.variant : "-");
        x->m = e.m;
        x->n = e.n;
        x->k = e.k;
        x->count = e.count;
        x->ms = e.total_ms;
        x->gbps = e.total_ms > 0 ? (double)e.bytes / (e.total_ms * 1e6) : 0;
    }
    if (!b->have_ops) return;

    for (int l = 0; l < L; l++) {
        for (int i = 0; i < NELEM(k_attn_ops); i++)
            b->l_attn[l] += prof_ms(ph, k_attn_ops[i], l, false, NULL) +
                            prof_ms(ph, k_attn_ops[i], l, true, NULL);
        for (int i = 0; i < NELEM(k_ffn_ops); i++)
            b->l_ffn[l] += prof_ms(ph, k_ffn_ops[i], l, false, NULL) +
                           prof_ms(ph, k_ffn_ops[i], l, true, NULL);
    }
}

// ================================================================ run

static void add_line(char (*lines)[BD_LINE], int *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_line(char (*lines)[BD_LINE], int *n, const char *fmt, ...) {
    if (*n >= BD_MAX_LINES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lines[(*n)++], BD_LINE, fmt, ap);
    va_end(ap);
}

static void analyze(struct lm_bench_breakdown *b);

// The unprofiled part: with warmup > 0 the prompt and 4 decode steps, then rolled back; then
// depth positions the profiled prompt and decode steps run after.
static enum lm_status warm_and_fill(struct lm_model *m, struct lm_context *c,
                                    const struct lm_bench_breakdown *b, int warmup, int n_ctx,
                                    struct lm_batch_entry *batch) {
    enum lm_status st = LM_OK;
    if (warmup > 0) {
        int32_t *w = lm_bench_tokens(m, b->n_prompt + 4);
        if (!w) return LM_ERR_NOMEM;
        st = lm_bench_prefill(c, w, b->n_prompt, batch);
        for (int i = 0; i < 4 && st == LM_OK && b->n_prompt + i < n_ctx; i++) {
            struct lm_batch_entry e = {.token = w[b->n_prompt + i], .pos = b->n_prompt + i, .seq = 0,
                                       .want_logits = true};
            st = lm_decode(c, &e, 1);
        }
        free(w);
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        if (st != LM_OK) return st;
    }
    if (b->depth > 0) {
        int32_t *w = lm_bench_tokens(m, b->depth);
        if (!w) return LM_ERR_NOMEM;
        st = lm_bench_prefill(c, w, b->depth, batch);
        free(w);
    }
    return st;
}

// Appends np bytes of a detokenized piece to the printable preview (control characters
// escaped), while it fits.
static void preview_append(struct lm_bench_breakdown *b, size_t *len, const char *piece, size_t np) {
    size_t out_len = *len;
    for (size_t k = 0; k < np && out_len + 2 < sizeof b->output; k++) {
        const char ch = piece[k];
        if (ch == '\n' || ch == '\r' || ch == '\t') {
            b->output[out_len++] = '\\';
            b->output[out_len++] = ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't';
        } else {
            b->output[out_len++] = ch;
        }
    }
    b->output[out_len] = 0;
    *len = out_len;
}

// Phases 3-5, profiled: each step samples, detokenizes and (but the last) decodes the token.
// t_start: when tokenization began (the time to first token counts from it).
static enum lm_status generate(struct lm_bench_breakdown *b, struct lm_context *c,
                               struct lm_sampler *smp, const struct lm_tokenizer *tok, char *piece,
                               size_t piece_cap, uint64_t t_start) {
    enum lm_status st = LM_OK;
    lm_context_thread_stats_reset(c);
    struct lm_detok dt;
    lm_detok_init(&dt, false);
    size_t out_len = 0;
    for (int i = 0; i < b->n_gen; i++) {
        uint64_t w0 = lm_time_ns(), pt = lm_prof_phase_begin(LM_PHASE_SAMPLE);
        const int32_t id = lm_sampler_sample(smp, lm_get_logits(c, 0));
        lm_sampler_accept(smp, id);
        lm_prof_phase_end(LM_PHASE_SAMPLE, pt, i, 1);
        const uint64_t w1 = lm_time_ns();
        b->ph_ms[BD_SAMPLE] += (double)(w1 - w0) / 1e6;
        b->ph_count[BD_SAMPLE]++;
        if (i == 0) b->ttft_ms = (double)(w1 - t_start) / 1e6;

        pt = lm_prof_phase_begin(LM_PHASE_DETOKENIZE);
        size_t np = 0;
        st = lm_detok_push(tok, &dt, id, piece, piece_cap, &np);
        lm_prof_phase_end(LM_PHASE_DETOKENIZE, pt, i, 1);
        b->ph_ms[BD_DETOK] += (double)(lm_time_ns() - w1) / 1e6;
        b->ph_count[BD_DETOK]++;
        if (st != LM_OK) return st;
        preview_append(b, &out_len, piece, np);
        if (i == b->n_gen - 1) break; // the last sampled token needs no forward pass

        struct lm_batch_entry e = {.token = id, .pos = b->depth + b->n_prompt + i, .seq = 0,
                                   .want_logits = true};
        w0 = lm_time_ns();
        pt = lm_prof_phase_begin(LM_PHASE_DECODE);
        st = lm_decode(c, &e, 1);
        lm_prof_phase_end(LM_PHASE_DECODE, pt, i, 1);
        b->ph_ms[BD_DECODE] += (double)(lm_time_ns() - w0) / 1e6;
        b->ph_count[BD_DECODE]++;
        if (st != LM_OK) return st;
    }
    return LM_OK;
}

enum lm_status lm_bench_breakdown_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                      const struct lm_bench_bw *bw, int n_bw,
                                      const struct lm_bench_breakdown_params *p,
                                      struct lm_bench_breakdown **out) {
    *out = NULL;
    struct lm_bench_breakdown *b = calloc(1, sizeof *b);
    if (!b) return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    b->mi = mi;
    b->n_threads = p->n_threads;
    b->n_prompt = p->n_prompt;
    b->depth = p->depth > 0 ? p->depth : 0;
    b->sampling = p->sampling;
    b->n_gen = p->n_gen < 1 ? 1 : p->n_gen;
    b->n_layer = mi->n_layer;
    b->tg_ref_ts = p->tg_ref_ts;
    b->bw_gbps = lm_bench_bw_for(bw, n_bw, p->n_threads);
    b->l_attn = calloc((size_t)(b->n_layer > 0 ? b->n_layer : 1), sizeof(double));
    b->l_ffn = calloc((size_t)(b->n_layer > 0 ? b->n_layer : 1), sizeof(double));
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    size_t text_len = 0;
    char *text = NULL;
    struct lm_batch_entry *batch = malloc(LM_BENCH_N_BATCH * sizeof *batch);
    const size_t piece_cap = lm_tokenizer_max_piece(tok) + 8;
    char *piece = malloc(piece_cap);
    struct lm_context *c = NULL;
    struct lm_sampler *smp = NULL;
    int32_t *ids = NULL;
    enum lm_status st = LM_OK;
    if (!b->l_attn || !b->l_ffn || !batch || !piece) {
        st = lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
        goto done;
    }
    if ((st = lm_bench_prompt_text(tok, b->n_prompt, &text, &text_len)) != LM_OK) goto done;
    struct lm_context_params cp = {.n_ctx = b->depth + b->n_prompt + b->n_gen, .n_seq_max = 1,
                                   .n_batch = LM_BENCH_N_BATCH, .n_threads = p->n_threads};
    if ((st = lm_context_init(&c, m, &cp)) != LM_OK) goto done;
    if ((st = lm_sampler_init(&smp, &p->sampling, mi->n_vocab)) != LM_OK) goto done;

    // ---- warm-up and depth (unprofiled)
    if ((st = warm_and_fill(m, c, b, p->warmup, cp.n_ctx, batch)) != LM_OK) goto done;

    if ((st = lm_prof_init(LM_PROF_SUMMARY, p->n_threads, 0)) != LM_OK) goto done;
    // ---- 1. tokenize
    uint64_t w0 = lm_time_ns(), pt = lm_prof_phase_begin(LM_PHASE_TOKENIZE);
    size_t n_ids = 0;
    st = lm_tokenize(tok, text, text_len, true, false, &ids, &n_ids);
    lm_prof_phase_end(LM_PHASE_TOKENIZE, pt, -1, (int32_t)n_ids);
    b->ph_ms[BD_TOKENIZE] = (double)(lm_time_ns() - w0) / 1e6;
    b->ph_count[BD_TOKENIZE] = 1;
    b->n_tok_text = (int)n_ids;
    const uint64_t t_start = w0;
    if (st != LM_OK) goto done;

    // ---- 2. prefill (chunks of LM_BENCH_N_BATCH, logits on the last prompt token)
    for (int off = 0; off < b->n_prompt; off += LM_BENCH_N_BATCH) {
        const int nb = b->n_prompt - off < LM_BENCH_N_BATCH ? b->n_prompt - off : LM_BENCH_N_BATCH;
        for (int j = 0; j < nb; j++)
            batch[j] = (struct lm_batch_entry){.token = ids[off + j], .pos = b->depth + off + j,
                                               .seq = 0, .want_logits = off + j == b->n_prompt - 1};
        w0 = lm_time_ns();
        pt = lm_prof_phase_begin(LM_PHASE_PREFILL);
        st = lm_decode(c, batch, nb);
        lm_prof_phase_end(LM_PHASE_PREFILL, pt, -1, nb);
        b->ph_ms[BD_PREFILL] += (double)(lm_time_ns() - w0) / 1e6;
        b->ph_count[BD_PREFILL]++;
        if (st != LM_OK) goto done;
    }
    for (int i = 0; i < b->n_prompt; i++) lm_sampler_accept(smp, ids[i]);

    // ---- 3-5. sample, detokenize, decode
    if ((st = generate(b, c, smp, tok, piece, piece_cap, t_start)) != LM_OK) goto done;
    b->total_ms = 0;
    for (int i = 0; i < BD_NPH; i++) b->total_ms += b->ph_ms[i];

    // barrier waits during the decode steps (sampling/detok run no barriers)
    double wait_ns = 0;
    uint64_t n_barriers = 0;
    const int nth = lm_context_n_threads(c);
    for (int t = 0; t < nth; t++) {
        struct lm_context_thread_stats ps;
        lm_context_thread_stats(c, t, &ps);
        wait_ns += (double)ps.wait_ns;
        if (t == 0) n_barriers = ps.n_barriers;
    }
    b->n_barriers = n_barriers;
    collect_ops(b, wait_ns / nth / 1e6);
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    lm_bd_tables_collect(&b->tables, b->n_layer, hp.n_expert_used);
    analyze(b);

done:
    lm_prof_shutdown();
    free(ids);
    free(text);
    free(batch);
    free(piece);
    lm_sampler_free(smp);
    lm_context_free(c);
    if (st != LM_OK) {
        lm_bench_breakdown_free(b);
        return st;
    }
    *out = b;
    return LM_OK;
}

// ================================================================ analysis

// The components the findings and suggestions name: the largest in decode, lm_head, attention.
struct bd_picks {
    const struct bd_comp *big, *head, *attn;
};

static struct bd_picks pick_components(const struct lm_bench_breakdown *b) {
    struct bd_picks k = {0};
    for (int i = 0; i < b->n_comp; i++) {
        if (!k.big || b->comp[i].ms > k.big->ms) k.big = &b->comp[i];
        if (!strncmp(b->comp[i].name, "lm_head", 7)) k.head = &b->comp[i];
        if (!strncmp(b->comp[i].name, "attention", 9)) k.attn = &b->comp[i];
    }
    return k;
}

// The phase with the most time (the primary bottleneck).
static int top_phase(const struct lm_bench_breakdown *b) {
    int top = 0;
    for (int i = 1; i < BD_NPH; i++) if (b->ph_ms[i] > b->ph_ms[top]) top = i;
    return top;
}

// The output head's share of the bytes a decode step reads.
static double head_share(const struct lm_bench_breakdown *b) {
    return (double)b->mi->grp_bytes[LM_BENCH_GRP_HEAD] / b->bytes_tok;
}

// Sampling time per sampled token (ms).
static double sample_ms_tok(const struct lm_bench_breakdown *b) {
    return b->ph_count[BD_SAMPLE] ? b->ph_ms[BD_SAMPLE] / b->ph_count[BD_SAMPLE] : 0;
}

// Rates, bytes per token and the roofline fraction from the measured phases.
static void derive_metrics(struct lm_bench_breakdown *b) {
    const struct lm_bench_model_info *mi = b->mi;
    const double dec = b->ph_ms[BD_DECODE];
    const int steps = b->ph_count[BD_DECODE];
    b->dec_ms_tok = steps ? dec / steps : 0;
    b->dec_ts = dec > 0 ? steps / (dec / 1e3) : 0;
    b->pre_ts = b->ph_ms[BD_PREFILL] > 0 ? b->n_prompt / (b->ph_ms[BD_PREFILL] / 1e3) : 0;
    // weights and the KV cache each step read (step i attends to depth + prompt + i + 1)
    for (int i = 0; i < steps; i++)
        b->kv_tok += (double)lm_bench_kv_bytes(mi, b->depth + b->n_prompt + i + 1) / steps;
    b->bytes_tok = (double)mi->bytes_per_token + b->kv_tok;
    b->ach_gbps = b->bytes_tok * b->dec_ts / 1e9;
    b->roof_frac = b->bw_gbps > 0 ? b->ach_gbps / b->bw_gbps : 0;
    b->other_ms = b->have_ops ? dec - b->ops_ms - b->bar_ms : 0;
}

// Findings on the run as a whole: the primary phase, decode against the roofline, the
// output head's bytes, the largest prefill component.
static void find_run(struct lm_bench_breakdown *b) {
    const struct lm_bench_model_info *mi = b->mi;
    const int steps = b->ph_count[BD_DECODE];
    const double mb = 1e6;
    // ---- primary phase
    const int top = top_phase(b);
    b->primary = lm_bd_ph_label[top] + 3;
    add_line(b->find, &b->n_find, "primary bottleneck: %s, %.1f ms (%.1f%% of the run)",
             b->primary, b->ph_ms[top], bd_pct(b->ph_ms[top], b->total_ms));

    // ---- decode vs the roofline
    if (steps > 0 && b->bw_gbps > 0)
        add_line(b->find, &b->n_find,
                 "decode: %.2f tok/s (%.2f ms/token); %.1f MB read per token (weights %.1f, KV "
                 "cache %.1f) -> %.2f GB/s achieved = %.0f%% of the %.2f GB/s read bandwidth "
                 "measured with %d thread%s (roofline %.1f tok/s)",
                 b->dec_ts, b->dec_ms_tok, b->bytes_tok / mb, (double)mi->bytes_per_token / mb,
                 b->kv_tok / mb, b->ach_gbps, 100 * b->roof_frac,
                 b->bw_gbps, b->n_threads, b->n_threads == 1 ? "" : "s",
                 b->bw_gbps * 1e9 / b->bytes_tok);
    else if (steps > 0)
        add_line(b->find, &b->n_find, "decode: %.2f tok/s, %.2f GB/s of weights (no bandwidth probe: --bw-mib 0)",
                 b->dec_ts, b->ach_gbps);
    if (b->roof_frac > 1.05 || (b->bw_gbps > 0 && b->bytes_tok <= 32.0 * (1 << 20)))
        add_line(b->find, &b->n_find,
                 "caution: %s; the roofline fraction is not a DRAM bound here",
                 b->roof_frac > 1.05 ? "decode beats the measured bandwidth (probe disturbed by "
                                       "other load, or weights served from cache)"
                                     : "the weights per token (<= 32 MiB) may fit in the last-level cache");
    add_line(b->find, &b->n_find, "output head: %.1f MB (%s) = %.0f%% of the bytes read per token",
             (double)mi->grp_bytes[LM_BENCH_GRP_HEAD] / mb, mi->head_dtype, 100 * head_share(b));

    // ---- prefill
    if (b->have_pre_ops) {
        const struct bd_comp *pb = NULL;
        for (int i = 0; i < b->n_comp; i++)
            if (!pb || b->comp[i].pre_ms > pb->pre_ms) pb = &b->comp[i];
        if (pb)
            add_line(b->find, &b->n_find,
                     "prefill (%d tokens, %.2f ms): largest component %s, %.1f%%; barrier waits %.1f%%",
                     b->n_prompt, b->ph_ms[BD_PREFILL], pb->name, bd_pct(pb->pre_ms, b->ph_ms[BD_PREFILL]),
                     bd_pct(b->pre_bar_ms, b->ph_ms[BD_PREFILL]));
    }
}

// Findings on decode's components: the largest, barrier waits, time outside ops, sampling,
// the prefill rate, the unprofiled tg rate.
static void find_components(struct lm_bench_breakdown *b, const struct bd_picks *k) {
    const struct lm_bench_model_info *mi = b->mi;
    const double dec = b->ph_ms[BD_DECODE];
    const int steps = b->ph_count[BD_DECODE];
    const double mb = 1e6;
    const struct bd_comp *big = k->big;
    if (!b->have_ops) {
        add_line(b->find, &b->n_find,
                 steps ? "per-op times: none recorded (the forward pass of this build does not call "
                         "lm_prof_op); components and per-layer rows are omitted"
                       : "per-op times: no decode step ran (the per-op breakdown covers decode; "
                         "generate 2 or more tokens)");
    } else if (big) {
        if (big->bytes && steps)
            add_line(b->find, &b->n_find,
                     "largest decode component: %s, %.1f%% of decode time, reading %.1f MB/token "
                     "at %.2f GB/s (%.0f%% of measured bandwidth)",
                     big->name, bd_pct(big->ms, dec), (double)big->bytes / mb,
                     (double)big->bytes * steps / (big->ms * 1e6),
                     b->bw_gbps > 0 ? 100 * ((double)big->bytes * steps / (big->ms * 1e6)) / b->bw_gbps : 0);
        else
            add_line(b->find, &b->n_find, "largest decode component: %s, %.1f%% of decode time",
                     big->name, bd_pct(big->ms, dec));
    }
    const double bar_share = bd_pct(b->bar_ms, dec);
    if (b->n_threads > 1 && steps)
        add_line(b->find, &b->n_find,
                 "barrier waits: %.1f%% of decode time (%.0f barriers/token, %.1f us mean wait per "
                 "barrier per thread)%s",
                 bar_share, (double)b->n_barriers / steps,
                 b->n_barriers ? b->bar_ms * 1e3 / (double)b->n_barriers : 0.0,
                 b->have_prof_barriers ? "" : " [thread-pool accounting]");
    if (b->have_ops && b->other_ms > 0.05 * dec)
        add_line(b->find, &b->n_find, "outside recorded ops (dispatch, batch checks): %.1f%% of decode time",
                 bd_pct(b->other_ms, dec));
    const double smp_tok = sample_ms_tok(b);
    if (b->dec_ms_tok > 0)
        add_line(b->find, &b->n_find, "sampling: %.3f ms/token = %.1f%% of a decode step (n_vocab %d)",
                 smp_tok, bd_pct(smp_tok, b->dec_ms_tok), mi->n_vocab);
    else
        add_line(b->find, &b->n_find, "sampling: %.3f ms/token (n_vocab %d)", smp_tok, mi->n_vocab);
    const double gflops = 2.0 * (double)mi->layer_params * b->pre_ts / 1e9;
    if (b->dec_ts > 0)
        add_line(b->find, &b->n_find, "prefill: %.1f tok/s = %.1f GFLOP/s in the layer matmuls "
                 "(2 x %.1f M layer weights x tok/s); %.1fx the decode rate",
                 b->pre_ts, gflops, (double)mi->layer_params / 1e6, b->pre_ts / b->dec_ts);
    else
        add_line(b->find, &b->n_find, "prefill: %.1f tok/s = %.1f GFLOP/s in the layer matmuls "
                 "(2 x %.1f M layer weights x tok/s)",
                 b->pre_ts, gflops, (double)mi->layer_params / 1e6);
    if (b->tg_ref_ts > 0 && b->dec_ts > 0)
        add_line(b->find, &b->n_find, "decode here %.2f tok/s (profiled, sampling the full "
                 "vocabulary between steps) vs %.2f tok/s in the tg test (unprofiled, no sampling): "
                 "the gap includes the sampler's cache footprint, so it is not the profiler's cost "
                 "(bench/prof_overhead.py measures that like for like)",
                 b->dec_ts, b->tg_ref_ts);
}

// Suggestions, each tied to a number of the findings.
static void suggest(struct lm_bench_breakdown *b, const struct bd_picks *k) {
    const struct lm_bench_model_info *mi = b->mi;
    const double dec = b->ph_ms[BD_DECODE];
    const int steps = b->ph_count[BD_DECODE];
    const double mb = 1e6;
    const struct bd_comp *big = k->big, *head = k->head, *attn = k->attn;
    const double bar_share = bd_pct(b->bar_ms, dec), smp_tok = sample_ms_tok(b);
    const int top = top_phase(b);
    if (b->roof_frac >= 0.6) {
        add_line(b->sugg, &b->n_sugg,
                 "decode is memory-bound (%.0f%% of measured bandwidth): only fewer bytes per token "
                 "help: smaller weight dtypes, or amortizing each weight read over more tokens "
                 "(batched decode, speculative decoding)", 100 * b->roof_frac);
    } else if (b->bw_gbps > 0 && steps) {
        add_line(b->sugg, &b->n_sugg,
                 "decode reaches %.0f%% of the bandwidth roofline: time goes to compute and "
                 "overhead, not DRAM; faster kernels and fewer synchronizations are the lever "
                 "(up to %.1fx before memory limits)", 100 * b->roof_frac,
                 b->roof_frac > 0 ? 1 / b->roof_frac : 0);
    }
    if (head_share(b) >= 0.3) {
        // q8_0 = 8.5 bits/weight, q6_K = 6.5625, q4_K = 4.5
        const double hp = (double)mi->head_params;
        if (head && steps && head->ms > 0) {
            const double g = (double)head->bytes * steps / (head->ms * 1e6);
            add_line(b->sugg, &b->n_sugg,
                     "lm_head is %.0f%% of decode time at %.2f GB/s = %.0f%% of measured bandwidth: "
                     "%s; a smaller output dtype would help (q6_K: %.1f MB, q4_K: %.1f MB vs %.1f MB now)",
                     bd_pct(head->ms, dec), g, b->bw_gbps > 0 ? 100 * g / b->bw_gbps : 0,
                     b->bw_gbps > 0 && g / b->bw_gbps >= 0.6 ? "memory-bound" : "below bandwidth, so its kernel matters too",
                     hp * 6.5625 / 8 / mb, hp * 4.5 / 8 / mb, (double)mi->grp_bytes[LM_BENCH_GRP_HEAD] / mb);
        } else {
            add_line(b->sugg, &b->n_sugg,
                     "the output head is %.0f%% of the bytes per token: a smaller output dtype would "
                     "help most (q6_K: %.1f MB, q4_K: %.1f MB vs %.1f MB now)", 100 * head_share(b),
                     hp * 6.5625 / 8 / mb, hp * 4.5 / 8 / mb, (double)mi->grp_bytes[LM_BENCH_GRP_HEAD] / mb);
        }
    }
    if (b->have_ops && big && big != head && big->bytes && steps && b->bw_gbps > 0) {
        const double g = (double)big->bytes * steps / (big->ms * 1e6);
        if (g / b->bw_gbps < 0.5)
            add_line(b->sugg, &b->n_sugg,
                     "%s streams its weights at %.2f GB/s, %.0f%% of bandwidth: its dot-product "
                     "kernel (%s table) is compute-bound; check the variant in the matmul table",
                     big->name, g, 100 * g / b->bw_gbps, mi->kernels);
    }
    if (b->n_threads > 1 && bar_share >= 10)
        add_line(b->sugg, &b->n_sugg,
                 "barrier waits are %.1f%% of decode time over %.0f barriers/token: fuse element-wise "
                 "ops (norm + residual, rope + kv write) to cut barriers, or balance the matmul split",
                 bar_share, steps ? (double)b->n_barriers / steps : 0);
    if (attn && bd_pct(attn->ms, dec) >= 20)
        add_line(b->sugg, &b->n_sugg,
                 "attention is %.0f%% of decode time at context %d: a fused/vectorized f16 KV path "
                 "would help; it grows with context length", bd_pct(attn->ms, dec),
                 b->depth + b->n_prompt + b->n_gen);
    if (bd_pct(smp_tok, b->dec_ms_tok) >= 10)
        add_line(b->sugg, &b->n_sugg,
                 "sampling costs %.0f%% of a decode step (%.3f ms over %d logits): select the top-k "
                 "before the softmax/sort", bd_pct(smp_tok, b->dec_ms_tok), smp_tok, mi->n_vocab);
    if (bd_pct(b->ph_ms[BD_TOKENIZE] + b->ph_ms[BD_DETOK], b->total_ms) >= 5)
        add_line(b->sugg, &b->n_sugg, "tokenizer work is %.1f%% of the run: worth optimizing",
                 bd_pct(b->ph_ms[BD_TOKENIZE] + b->ph_ms[BD_DETOK], b->total_ms));
    if (b->n_sugg == 0)
        add_line(b->sugg, &b->n_sugg, "no single cost stands out (largest phase %s, %.0f%%)",
                 b->primary, bd_pct(b->ph_ms[top], b->total_ms));
}

static void analyze(struct lm_bench_breakdown *b) {
    derive_metrics(b);
    const struct bd_picks k = pick_components(b);
    find_run(b);
    find_components(b, &k);
    suggest(b, &k);
}
