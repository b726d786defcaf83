// The mixture-of-experts FFN (qwen3moe; llama with experts; deepseek2 with its shared experts,
// sigmoid gating, selection bias and groups; gpt-oss with biases, softmax over the chosen
// logits and the clamped SwiGLU): the router, each token's top-k of its softmax
// (or sigmoid), and the chosen experts' SwiGLU FFNs over the tokens grouped by expert, so
// a chosen expert's weights are read once per step (llama.cpp's mul_mat_id) and decode
// touches only the chosen experts.
#include <math.h>
#include <string.h>

#include "runtime/forward.h"

// [start, end) of n items for thread ith of nth, in whole il groups when n is a multiple
// of one (as ops.c splits matmul rows)
static void split_rows(int64_t n, int ith, int nth, int64_t *s, int64_t *e) {
    const int64_t g = n % LM_MATMUL_ROW_ALIGN == 0 ? LM_MATMUL_ROW_ALIGN : 1, ng = n / g;
    const int64_t per = (ng + nth - 1) / nth;
    *s = per * ith < ng ? per * ith : ng;
    *e = *s + per < ng ? *s + per : ng;
    *s *= g;
    *e *= g;
}

// ================================================================ routing

// One thread's routing arrays, carved from its lm_context.moe_route stride.
struct moe_route {
    int32_t *sel;  // (n, K) chosen experts of each token, by descending probability
    float *w;      // (n, K) their weights
    int32_t *off;  // (n_expert + 1) start of each expert's slots
    int32_t *cur;  // (n_expert) fill cursor
    int32_t *tok;  // (n K) token of each slot, grouped by expert, tokens ascending
    float *tw;     // (n K) weight of each slot
    float *p;      // (n_expert) probabilities of one token
    float *s;      // (n_expert) its selection scores (p + exp_probs_b; groups masked)
};

static size_t al64(size_t b) { return (b + 63) & ~(size_t)63; }

size_t lm_moe_route_bytes(int64_t n_tokens, int n_used, int n_expert) {
    const size_t nk = (size_t)n_tokens * (size_t)n_used, x = (size_t)n_expert;
    return al64(nk * 4) * 4 + al64((x + 1) * 4) + al64(x * 4) * 3;
}

static struct moe_route route_of(struct lm_context *c, int ith) {
    const int K = c->m->hp.n_expert_used, X = c->m->hp.n_expert;
    const size_t nk = (size_t)c->n_batch * (size_t)K;
    char *b = (char *)c->moe_route + (size_t)ith * c->moe_route_stride;
    struct moe_route r;
    r.sel = (int32_t *)b, b += al64(nk * 4);
    r.w = (float *)b, b += al64(nk * 4);
    r.tok = (int32_t *)b, b += al64(nk * 4);
    r.tw = (float *)b, b += al64(nk * 4);
    r.off = (int32_t *)b, b += al64((size_t)(X + 1) * 4);
    r.cur = (int32_t *)b, b += al64((size_t)X * 4);
    r.p = (float *)b, b += al64((size_t)X * 4);
    r.s = (float *)b;
    return r;
}

// Group-limited choice (deepseek2, llama.cpp's build_moe_ffn): a group's score is the sum
// of its two best selection scores; all but the n_used best groups (ties: the lower index)
// are masked out of s.
static void route_groups(float *s, int X, int n_groups, int n_used) {
    const int per = X / n_groups;
    float gs[64], top[64];
    for (int g = 0; g < n_groups; g++) {
        float a = -INFINITY, b = -INFINITY; // the best two
        for (int e = g * per; e < (g + 1) * per; e++) {
            if (s[e] > a) { b = a; a = s[e]; }
            else if (s[e] > b) b = s[e];
        }
        gs[g] = per > 1 ? a + b : a;
        top[g] = 0.0f;
    }
    for (int j = 0; j < n_used; j++) {
        int best = -1;
        for (int g = 0; g < n_groups; g++)
            if (top[g] == 0.0f && (best < 0 || gs[g] > gs[best])) best = g;
        top[best] = 1.0f;
    }
    for (int g = 0; g < n_groups; g++)
        if (top[g] == 0.0f)
            for (int e = g * per; e < (g + 1) * per; e++) s[e] = -INFINITY;
}

// softmax_weight gating (gpt-oss): w (K) = softmax of the chosen logits, as ggml_soft_max on
// a row of K: max, e = expf(w - max), summed in double, times (float)(1 / sum). ggml takes libm
// expf for rows under 16 (gpt-oss chooses 4) and its vector polynomial over whole 16s.
static void softmax_k(float *w, int K) {
    float mx = -INFINITY;
    for (int j = 0; j < K; j++) mx = w[j] > mx ? w[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < K; j++) {
        w[j] = expf(w[j] - mx);
        sum += (double)w[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < K; j++) w[j] *= inv;
}

// The router's probabilities p over the X logits (plus the router's bias, gpt-oss: softmax,
// sigmoid, or the logits themselves for softmax_weight, as the file says), the K best by
// selection score (p plus the optional selection bias, within the chosen groups; ties: the
// lower index), their probabilities (softmax_weight: a softmax of the K) renormalised to sum 1
// (sum clamped as llama.cpp: >= 2^-14) and scaled
static void route_token(const float *logits, const struct lm_hparams *hp, const float *bias,
                        const float *rb, float *p, float *s, int32_t *sel, float *w) {
    const int X = hp->n_expert, K = hp->n_expert_used;
    const bool norm = hp->expert_norm_w;
    const float scale = hp->expert_w_scale;
    if (rb) { // ggml_add of the router's bias, into p (the gating reads it from there)
        for (int e = 0; e < X; e++) p[e] = logits[e] + rb[e];
        logits = p;
    }
    if (hp->expert_gating == LM_EXPERT_GATING_SOFTMAX_WEIGHT) {
        if (logits != p) memcpy(p, logits, (size_t)X * sizeof *p);
    } else if (hp->expert_gating == LM_EXPERT_GATING_SIGMOID) {
        for (int e = 0; e < X; e++) p[e] = 1.0f / (1.0f + expf(-logits[e]));
    } else {
        float mx = -INFINITY;
        for (int e = 0; e < X; e++) mx = logits[e] > mx ? logits[e] : mx;
        double sum = 0.0;
        for (int e = 0; e < X; e++) {
            p[e] = expf(logits[e] - mx);
            sum += p[e];
        }
        const float inv = (float)(1.0 / sum);
        for (int e = 0; e < X; e++) p[e] *= inv;
    }
    for (int e = 0; e < X; e++) s[e] = bias ? p[e] + bias[e] : p[e];
    if (hp->n_expert_groups > 1) route_groups(s, X, hp->n_expert_groups, hp->n_group_used);
    for (int j = 0; j < K; j++) {
        int best = 0;
        for (int e = 1; e < X; e++)
            if (s[e] > s[best]) best = e;
        sel[j] = best;
        w[j] = p[best];
        s[best] = -INFINITY; // taken
    }
    if (hp->expert_gating == LM_EXPERT_GATING_SOFTMAX_WEIGHT) softmax_k(w, K);
    if (norm) {
        float s = 0.0f;
        for (int j = 0; j < K; j++) s += w[j];
        if (s < 6.103515625e-5f) s = 6.103515625e-5f;
        for (int j = 0; j < K; j++) w[j] /= s;
    }
    if (scale != 0.0f && scale != 1.0f)
        for (int j = 0; j < K; j++) w[j] *= scale;
}

// Routes tokens [0, n) and groups their (token, expert) slots by expert (counting sort:
// tokens ascending within an expert). Every thread does this for all tokens into its own
// arrays: the same result everywhere, no barrier, and ~n * n_expert expf per layer.
static void route_all(struct lm_context *c, const struct moe_route *r, const struct lm_layer *L,
                      int64_t n) {
    const struct lm_hparams *hp = &c->m->hp;
    const int X = hp->n_expert, K = hp->n_expert_used;
    const float *bias = L->exp_probs_b.data, *rb = L->router_b.data;
    for (int64_t i = 0; i < n; i++)
        route_token(c->moe_logits + i * X, hp, bias, rb, r->p, r->s, r->sel + i * K, r->w + i * K);
    memset(r->off, 0, (size_t)(X + 1) * sizeof *r->off);
    for (int64_t s = 0; s < n * K; s++) r->off[r->sel[s] + 1]++;
    for (int e = 0; e < X; e++) {
        r->off[e + 1] += r->off[e];
        r->cur[e] = r->off[e];
    }
    for (int64_t s = 0; s < n * K; s++) {
        const int32_t slot = r->cur[r->sel[s]]++;
        r->tok[slot] = (int32_t)(s / K);
        r->tw[slot] = r->w[s];
    }
}

// ================================================================ experts

// Plans Ws @ Xe (cnt rows) and quantizes Xe: all rows into this thread's buffers (small
// groups), or its share into the shared ones, then a barrier (every thread makes the same
// choice, so the barriers match).
static void expert_begin(struct lm_context *c, struct lm_matmul_plan *p,
                         const struct lm_weight *const *Ws, int n_w, const float *Xe,
                         int64_t cnt, int ith, int nth) {
    lm_matmul_plan(p, c->kern, &c->mm, Ws, n_w, Xe, cnt, ith);
    int64_t s = 0, e = cnt;
    if (p->shared) {
        const int64_t per = (cnt + nth - 1) / nth;
        s = per * ith < cnt ? per * ith : cnt;
        e = s + per < cnt ? s + per : cnt;
    }
    lm_matmul_quantize(p, s, e);
    if (p->shared) lm_pool_barrier(c->pool);
}

// y rows (n, w), columns [a, b) += the expert's bias (gpt-oss: ggml_add_id after the matmul)
static void expert_bias_rows(float *y, const float *bias, int64_t n, int64_t w, int64_t a, int64_t b) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = a; d < b; d++) y[i * w + d] += bias[d];
}

void lm_op_moe_ffn(struct lm_context *c, float *out, const float *X, const struct lm_layer *L,
                   int64_t n, int il, int ith, int nth, uint64_t *t) {
    const struct lm_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, K = hp->n_expert_used;
    const int NX = hp->n_expert;
    const bool oai = c->m->arch->decoder.ffn_act == LM_FFN_ACT_SWIGLU_OAI; // gpt-oss

    // ---- router: logits (n, n_expert), then every thread's own routing and grouping
    lm_op_matmul(c, c->moe_logits, X, &L->router, n, ith, nth);
    lm_pool_barrier(c->pool);
    const struct moe_route r = route_of(c, ith);
    route_all(c, &r, L, n);
    if (ith == 0 && c->moe_tokens)
        for (int e = 0; e < NX; e++)
            c->moe_tokens[(size_t)il * NX + e] += (uint64_t)(r.off[e + 1] - r.off[e]);
    // the per-expert profile: thread 0's routing, and below its time in each expert
    const bool prof = ith == 0 && lm_prof_on();
    if (prof) lm_prof_moe_route(il, NX, r.off, n);
    // one token (decode): every expert reads X itself; otherwise gather rows by slot
    const bool gather = n > 1;
    if (gather) {
        const int64_t ns = n * K, per = (ns + nth - 1) / nth;
        const int64_t s0 = per * ith < ns ? per * ith : ns, s1 = s0 + per < ns ? s0 + per : ns;
        for (int64_t s = s0; s < s1; s++)
            memcpy(c->moe_xg + s * E, X + (int64_t)r.tok[s] * E, (size_t)E * sizeof(float));
    }
    if (gather) *t = lm_fwd_sync(c, ith, LM_OP_FFN_MOE_ROUTER, il, *t);
    else *t = lm_fwd_mark(ith, LM_OP_FFN_MOE_ROUTER, il, *t);

    // ---- gate/up + SwiGLU: this thread's rows [a, b) of every chosen expert
    int64_t a, b;
    split_rows(F, ith, nth, &a, &b);
    for (int e = 0; e < NX; e++) {
        const int64_t o0 = r.off[e], cnt = r.off[e + 1] - o0;
        if (cnt == 0) continue;
        const uint64_t te = prof ? lm_prof_ticks() : 0;
        const struct lm_weight *const ws[2] = {&L->gate_exps[e], &L->up_exps[e]};
        struct lm_matmul_plan p;
        expert_begin(c, &p, ws, 2, gather ? c->moe_xg + o0 * E : X, cnt, ith, nth);
        float *g = c->moe_g + o0 * F, *u = c->moe_u + o0 * F;
        if (a < b) {
            lm_matmul_rows(&p, 0, g, a, b);
            lm_matmul_rows(&p, 1, u, a, b);
            if (L->gate_exps_b) expert_bias_rows(g, L->gate_exps_b + e * F, cnt, F, a, b);
            if (L->up_exps_b) expert_bias_rows(u, L->up_exps_b + e * F, cnt, F, a, b);
            for (int64_t i = 0; i < cnt; i++) {
                if (oai) c->kern->swiglu_oai(g + i * F, u + i * F, a, b, 1.702f, 7.0f);
                else c->kern->swiglu(g + i * F, u + i * F, a, b, F);
            }
        }
        if (prof) lm_prof_expert_rec(LM_OP_FFN_MOE_GATE_UP, il, e, (int32_t)cnt, te, lm_prof_ticks());
        if (p.shared) lm_pool_barrier(c->pool); // the shared activations are reused next
    }
    *t = lm_fwd_sync(c, ith, LM_OP_FFN_MOE_GATE_UP, il, *t);

    // ---- down, weighted into out: this thread's columns [a, b) of every expert's output,
    // added in ascending expert order, so a token's sum does not depend on the batch
    split_rows(E, ith, nth, &a, &b);
    for (int64_t i = 0; i < n; i++) memset(out + i * E + a, 0, (size_t)(b - a) * sizeof(float));
    for (int e = 0; e < NX; e++) {
        const int64_t o0 = r.off[e], cnt = r.off[e + 1] - o0;
        if (cnt == 0) continue;
        const uint64_t te = prof ? lm_prof_ticks() : 0;
        const struct lm_weight *const ws[1] = {&L->down_exps[e]};
        struct lm_matmul_plan p;
        expert_begin(c, &p, ws, 1, c->moe_g + o0 * F, cnt, ith, nth);
        if (a < b) {
            lm_matmul_rows(&p, 0, c->moe_y, a, b);
            if (L->down_exps_b) expert_bias_rows(c->moe_y, L->down_exps_b + e * E, cnt, E, a, b);
            for (int64_t i = 0; i < cnt; i++) {
                float *dst = out + (int64_t)r.tok[o0 + i] * E;
                const float *y = c->moe_y + i * E, w = r.tw[o0 + i];
                for (int64_t d = a; d < b; d++) dst[d] += w * y[d];
            }
        }
        if (prof) lm_prof_expert_rec(LM_OP_FFN_MOE_DOWN, il, e, (int32_t)cnt, te, lm_prof_ticks());
        if (p.shared) lm_pool_barrier(c->pool);
    }
    *t = lm_fwd_sync(c, ith, LM_OP_FFN_MOE_DOWN, il, *t);
}

// out (n, n_embd) += the shared experts' FFN of X (deepseek2: L->gate/up/down, SwiGLU), after
// the routed experts' sum, as llama.cpp adds them: each thread adds the columns of the down
// matmul it computed, so one barrier ends it.
void lm_op_shared_ffn(struct lm_context *c, float *out, const float *X, const struct lm_layer *L,
                      int64_t n, int il, int ith, int nth, uint64_t *t) {
    const int64_t E = c->m->hp.n_embd;
    lm_op_gate_up_act(c, c->gate, c->up, X, &L->gate, &L->up, n, 1, il, ith, nth, t);
    *t = lm_fwd_sync(c, ith, LM_OP_ACTIVATION, il, *t);
    const struct lm_weight *const ws[1] = {&L->down};
    struct lm_matmul_plan p;
    expert_begin(c, &p, ws, 1, c->gate, n, ith, nth);
    if (ith == 0 && lm_prof_on()) c->mm_last = p.d;
    int64_t a, b;
    split_rows(E, ith, nth, &a, &b);
    if (a < b) {
        lm_matmul_rows(&p, 0, c->moe_y, a, b);
        for (int64_t i = 0; i < n; i++)
            for (int64_t d = a; d < b; d++) out[i * E + d] += c->moe_y[i * E + d];
    }
    *t = lm_fwd_sync_mm(c, ith, LM_OP_DOWN, il, *t, ws, 1);
}
