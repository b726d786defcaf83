// Sampler chain: greedy, top-k, top-p, min-p, temperature, repetition penalty, and
// seeded reproducibility, on small synthetic logit vectors with known answers.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdlib.h>

#include "lm_test.h"
#include "lumen.h"
#include "sample/sample_internal.h"

static struct lm_sampler *mk(struct lm_sampler_params p, int n) {
    struct lm_sampler *s = NULL;
    CHECK(lm_sampler_init(&s, &p, n) == LM_OK);
    return s;
}

// Grammar masks: a masked draw is the draw on the row with the disallowed logits at -inf, for
// greedy and seeded sampling with every filter, and the LM head's top-k filtered by the mask
// draws the same token when enough allowed candidates remain.
static void test_masked(void) {
    enum { N = 1000 };
    float *lg = malloc(N * sizeof *lg), *ref = malloc(N * sizeof *ref);
    uint32_t mask[(N + 31) / 32];
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        lg[i] = (float)((x >> 40) % 1000) / 100.0f;
    }
    for (int pass = 0; pass < 4; pass++) {
        // pass 0: every 3rd token; 1: one word full, one empty; 2: a single token; 3: none
        memset(mask, 0, sizeof mask);
        for (int i = 0; i < N; i++) {
            const bool on = pass == 0 ? i % 3 == 0 : pass == 1 ? (i >= 64 && i < 96) || i == 999
                          : pass == 2 ? i == 517 : false;
            if (on) mask[i >> 5] |= 1u << (i & 31);
        }
        int allowed = 0;
        for (int i = 0; i < N; i++) {
            const bool on = mask[i >> 5] >> (i & 31) & 1u;
            ref[i] = on ? lg[i] : -INFINITY;
            allowed += on;
        }
        float *tmp = malloc(N * sizeof *tmp);
        CHECK(lm_mask_logits(tmp, lg, mask, N) == allowed);
        for (int i = 0; i < N; i++) CHECK(tmp[i] == ref[i]);
        free(tmp);
        const float temps[] = {0.0f, 0.7f, 1.5f};
        for (int ti = 0; ti < 3; ti++) {
            struct lm_sampler_params p = lm_sampler_params_default();
            p.temperature = temps[ti];
            p.top_k = ti == 2 ? 0 : 40;
            p.seed = 7 + (uint64_t)ti;
            struct lm_sampler *a = mk(p, N), *b = mk(p, N);
            for (int r = 0; r < 50; r++) {
                const int32_t ta = lm_sampler_sample_masked(a, lg, mask);
                if (allowed == 0) {
                    CHECK(ta == -1);
                    break;
                }
                const int32_t tb = lm_sampler_sample(b, ref);
                CHECKF(ta == tb, "pass %d temp %g draw %d: masked %d, -inf row %d", pass,
                       (double)temps[ti], r, ta, tb);
                CHECK(ta >= 0 && (mask[ta >> 5] >> (ta & 31) & 1u));
            }
            lm_sampler_free(a);
            lm_sampler_free(b);
        }
    }
    // the fused head's candidates filtered by the mask (pass 0's mask)
    memset(mask, 0, sizeof mask);
    for (int i = 0; i < N; i += 3) mask[i >> 5] |= 1u << (i & 31);
    struct lm_sampler_params p = lm_sampler_params_default();
    p.temperature = 0.9f;
    p.top_k = 5;
    p.seed = 3;
    struct lm_sampler *a = mk(p, N), *b = mk(p, N);
    struct lm_token_logit top[64], kept[64];
    // the 64 best of the row, best first (ties: lower id), as lm_get_top_k gives them
    int n_top = 0;
    for (int i = 0; i < N; i++) {
        if (n_top == 64 && !(lg[i] > top[63].logit)) continue;
        int j = n_top < 64 ? n_top++ : 63;
        while (j > 0 && lg[i] > top[j - 1].logit) { top[j] = top[j - 1]; j--; }
        top[j] = (struct lm_token_logit){i, lg[i]};
    }
    const int32_t nk = lm_sampler_filter_top_k(top, n_top, mask, kept);
    CHECK(nk >= lm_sampler_top_k_need(a));
    for (int r = 0; r < 50; r++)
        CHECK(lm_sampler_sample_top_k(a, kept, nk) == lm_sampler_sample_masked(b, lg, mask));
    lm_sampler_free(a);
    lm_sampler_free(b);
    free(lg);
    free(ref);
}

static const float logits[8] = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, -5.0f, 1.5f};

// greedy, then top-k (the parameters carry over from one check to the next)
static void test_greedy_top_k(void) {
    struct lm_sampler_params p = lm_sampler_params_default();
    struct lm_sampler *s;

    // greedy
    p.temperature = 0.0f;
    s = mk(p, 8);
    CHECK(lm_sampler_sample(s, logits) == 1);
    lm_sampler_free(s);

    // top-k = 1 is greedy at any temperature
    p = lm_sampler_params_default();
    p.temperature = 5.0f; p.top_k = 1; p.top_p = 1.0f; p.min_p = 0.0f;
    s = mk(p, 8);
    for (int i = 0; i < 100; i++) CHECK(lm_sampler_sample(s, logits) == 1);
    lm_sampler_free(s);

    // top-k = 3 only ever returns ids {1, 5, 2}
    p.top_k = 3;
    s = mk(p, 8);
    int seen[8] = {0};
    for (int i = 0; i < 3000; i++) seen[lm_sampler_sample(s, logits)]++;
    CHECK(seen[1] > 0 && seen[5] > 0 && seen[2] > 0);
    CHECK(seen[0] + seen[3] + seen[4] + seen[6] + seen[7] == 0);
    lm_sampler_free(s);
}

// top-k over a large vocabulary with many ties (the vectorized scan): the kept set is
// the k best by (logit desc, id asc), whatever the vocabulary size's remainder mod 16
static void test_top_k_ties(void) {
    struct lm_sampler_params p;
    struct lm_sampler *s;
    enum { NV = 4103, K = 40 };
    static float big[NV];
    uint64_t st = 12345;
    for (int i = 0; i < NV; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        big[i] = (float)((st >> 33) % 64) * 0.25f; // values repeat ~64 times
    }
    // reference: the K-th best value and how many of it are kept (lowest ids first)
    float kth = 0.0f;
    int above = 0;
    for (int v = 63; v >= 0; v--) {
        int cnt = 0;
        for (int i = 0; i < NV; i++) cnt += big[i] == (float)v * 0.25f;
        if (above + cnt >= K) { kth = (float)v * 0.25f; break; }
        above += cnt;
    }
    static char want[NV];
    int need_eq = K - above;
    for (int i = 0; i < NV; i++) {
        want[i] = big[i] > kth || (big[i] == kth && need_eq > 0);
        if (big[i] == kth && need_eq > 0) need_eq--;
    }
    p = lm_sampler_params_default();
    p.temperature = 1e4f; p.top_k = K; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 3;
    s = mk(p, NV);
    static int hits[NV];
    int outside = 0, covered = 0;
    for (int i = 0; i < 20000; i++) {
        const int id = lm_sampler_sample(s, big);
        outside += !want[id];
        hits[id]++;
    }
    for (int i = 0; i < NV; i++) covered += want[i] && hits[i] > 0;
    CHECKF(outside == 0, "top-k %d of %d: %d draws outside the expected set", K, NV, outside);
    CHECKF(covered == K, "top-k %d of %d: only %d of the set drawn", K, NV, covered);
    lm_sampler_free(s);
}

// softmax frequencies, then top-p and min-p on the same parameters
static void test_softmax_top_p_min_p(void) {
    struct lm_sampler_params p;
    struct lm_sampler *s;
    int seen[8];

    // temperature 1, no filters: frequencies follow softmax (4-sigma bound per id)
    p = lm_sampler_params_default();
    p.temperature = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 42;
    s = mk(p, 8);
    double z = 0, prob[8];
    for (int i = 0; i < 8; i++) z += exp(logits[i]);
    for (int i = 0; i < 8; i++) prob[i] = exp(logits[i]) / z;
    int cnt[8] = {0};
    const int N = 200000;
    for (int i = 0; i < N; i++) cnt[lm_sampler_sample(s, logits)]++;
    for (int i = 0; i < 8; i++) {
        const double sd = sqrt(N * prob[i] * (1 - prob[i])) + 1;
        CHECKF(fabs(cnt[i] - N * prob[i]) < 4 * sd, "id %d: %d draws, expected %.0f", i, cnt[i],
               N * prob[i]);
    }
    lm_sampler_free(s);

    // top-p 0.5: the nucleus of {1: .30, 5: .27, 2: .18 ...} is {1, 5}
    p.top_p = 0.5f;
    s = mk(p, 8);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 5000; i++) seen[lm_sampler_sample(s, logits)]++;
    CHECK(seen[1] > 0 && seen[5] > 0);
    CHECK(seen[1] + seen[5] == 5000);
    lm_sampler_free(s);

    // min-p 0.5: keep p_i >= 0.5 * p_max  <=> logit >= 3 - ln 2 = 2.307: {1, 5, 2}
    p.top_p = 1.0f; p.min_p = 0.5f;
    s = mk(p, 8);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 5000; i++) seen[lm_sampler_sample(s, logits)]++;
    CHECK(seen[1] > 0 && seen[5] > 0 && seen[2] > 0);
    CHECK(seen[1] + seen[5] + seen[2] == 5000);
    lm_sampler_free(s);
}

// same seed -> same sequence; different seed -> (almost surely) different
static void test_seeds(void) {
    struct lm_sampler_params p;
    p = lm_sampler_params_default();
    p.temperature = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 7;
    struct lm_sampler *a = mk(p, 8), *b = mk(p, 8);
    p.seed = 8;
    struct lm_sampler *c = mk(p, 8);
    int same = 1, diff = 0;
    for (int i = 0; i < 200; i++) {
        int x = lm_sampler_sample(a, logits), y = lm_sampler_sample(b, logits);
        int w = lm_sampler_sample(c, logits);
        if (x != y) same = 0;
        if (x != w) diff = 1;
    }
    CHECK(same);
    CHECK(diff);
    lm_sampler_free(a); lm_sampler_free(b); lm_sampler_free(c);
}

// repetition, presence and frequency penalties (the parameters carry over)
static void test_penalties(void) {
    struct lm_sampler_params p;
    struct lm_sampler *s;

    // repetition penalty: after accepting token 1, greedy picks 5 (3/1.2=2.5 < 2.9)
    p = lm_sampler_params_default();
    p.temperature = 0.0f; p.repeat_penalty = 1.2f;
    s = mk(p, 8);
    CHECK(lm_sampler_sample(s, logits) == 1);
    lm_sampler_accept(s, 1);
    CHECK(lm_sampler_sample(s, logits) == 5);
    // negative logits are multiplied: token 4 (0.0) stays, token 3 (-1) goes to -1.2
    lm_sampler_free(s);

    // window: with repeat_last_n = 1, the penalty follows only the last token
    p.repeat_last_n = 1;
    s = mk(p, 8);
    lm_sampler_accept(s, 1);
    lm_sampler_accept(s, 3);
    CHECK(lm_sampler_sample(s, logits) == 1);
    lm_sampler_free(s);

    // presence / frequency penalties (OpenAI): logit -= count * freq + (count > 0) * presence
    p = lm_sampler_params_default();
    p.temperature = 0.0f;
    p.presence_penalty = 0.2f; // 3.0 - 0.2 = 2.8 < 2.9: token 5 wins
    s = mk(p, 8);
    lm_sampler_accept(s, 1);
    CHECK(lm_sampler_sample(s, logits) == 5);
    lm_sampler_free(s);
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.06f; // once: 3.0 - 0.06 = 2.94 > 2.9; twice: 2.88 < 2.9
    s = mk(p, 8);
    lm_sampler_accept(s, 1);
    CHECK(lm_sampler_sample(s, logits) == 1);
    lm_sampler_accept(s, 1);
    CHECK(lm_sampler_sample(s, logits) == 5);
    lm_sampler_free(s);
    p.frequency_penalty = -1.0f; // negative values favour repeats: token 6, -5 + 9 = 4 > 3
    s = mk(p, 8);
    for (int i = 0; i < 9; i++) lm_sampler_accept(s, 6);
    CHECK(lm_sampler_sample(s, logits) == 6);
    lm_sampler_free(s);
    p.frequency_penalty = NAN;
    {
        struct lm_sampler *bad = NULL;
        CHECK(lm_sampler_init(&bad, &p, 8) == LM_ERR_ARG && bad == NULL);
    }
}

// bad parameters are rejected with a message
static void test_bad_params(void) {
    struct lm_sampler_params p;
    p = lm_sampler_params_default();
    p.repeat_penalty = 0.0f;
    struct lm_sampler *bad = NULL;
    CHECK(lm_sampler_init(&bad, &p, 8) == LM_ERR_ARG && bad == NULL);
    CHECK(strstr(lm_error_msg(), "sampler") != NULL);
    p = lm_sampler_params_default();
    CHECK(lm_sampler_init(&bad, &p, 0) == LM_ERR_ARG);
}

// large vocabulary with top-k: the heap keeps exactly the k largest
static void test_large_top_k(void) {
    struct lm_sampler_params p;
    struct lm_sampler *s;
    enum { NV = 100003 };
    static float big[NV];
    for (int i = 0; i < NV; i++) big[i] = (float)((i * 7919) % NV) / NV; // a permutation
    p = lm_sampler_params_default();
    p.temperature = 0.01f; p.top_k = 5; p.top_p = 1.0f; p.min_p = 0.0f;
    s = mk(p, NV);
    int best = 0;
    for (int i = 1; i < NV; i++) if (big[i] > big[best]) best = i;
    for (int i = 0; i < 200; i++) { // only the 5 largest (values within 5/NV of the max) appear
        const int id = lm_sampler_sample(s, big);
        if (!(big[id] > big[best] - 5.5f / NV)) { CHECKF(0, "id %d (%g) not in the top 5", id, big[id]); break; }
    }
    lm_sampler_free(s);
}

// greedy = the first index of the largest logit, NaN ranking as -inf (never above a
// number, wherever it stands), on odd lengths with many ties and NaNs (the vectorized
// selection against the plain loop)
static void test_greedy_nan_ties(void) {
    struct lm_sampler_params p;
    struct lm_sampler *s;
    static float v[4099];
    const int lens[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 65, 1000, 4099};
    int bad = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int n = lens[li];
        for (int rep = 0; rep < 40; rep++) {
            for (int i = 0; i < n; i++) v[i] = (float)(lm_test_rng_u64() % 7);
            if (rep % 5 == 1) v[lm_test_rng_u64() % n] = NAN;
            if (rep % 5 == 2) v[0] = NAN; // the first element too
            int want = 0;
            for (int i = 1; i < n; i++)
                if (v[i] > (isnan(v[want]) ? -INFINITY : v[want])) want = i;
            p = lm_sampler_params_default();
            p.temperature = 0.0f;
            s = mk(p, n);
            if (lm_sampler_sample(s, v) != want) bad++;
            lm_sampler_free(s);
        }
    }
    CHECKF(bad == 0, "%d greedy picks differ from the first maximum", bad);
}

int main(void) {
    test_masked();
    test_greedy_top_k();
    test_top_k_ties();
    test_softmax_top_p_min_p();
    test_seeds();
    test_penalties();
    test_bad_params();
    test_large_top_k();
    test_greedy_nan_ties();
    return lm_test_finish();
}
