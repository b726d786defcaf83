// Draft-model speculative decoding helpers (docs/speculative.md): the vocabulary check
// that refuses a target/draft pair whose token ids mean different things, and the draft
// length choice when each drafted token also costs a forward of the draft model.
#include <string.h>

#include "base/status.h"
#include "model/model.h"
#include "runtime/spec.h"
#include "tokenizer/tokenizer.h"

// a token's text for a message: at most 24 bytes, non-printable bytes as '?'
static void tok_show(const struct lm_tokenizer *t, int32_t id, char *out, size_t cap) {
    const uint32_t a = t->off[id], b = t->off[id + 1];
    size_t k = 0;
    for (uint32_t i = a; i < b && k + 4 < cap && i - a < 24; i++) {
        const unsigned char ch = (unsigned char)t->blob[i];
        out[k++] = ch >= 0x20 && ch != 0x7f ? (char)ch : '?';
    }
    if (b - a > 24 && k + 4 < cap) { out[k++] = '.'; out[k++] = '.'; out[k++] = '.'; }
    out[k] = 0;
}

enum lm_status lm_spec_vocab_check(const struct lm_model *target, const struct lm_model *draft) {
    const struct lm_tokenizer *a = lm_model_tokenizer(target), *b = lm_model_tokenizer(draft);
    const char *pa = target->path, *pb = draft->path;
    if (a->n_vocab != b->n_vocab || target->hp.n_vocab != draft->hp.n_vocab)
        return lm_error_set(LM_ERR_ARG, "draft model %s: vocabulary of %d tokens (logits %d), the "
                            "target %s has %d (logits %d): the pair must share one vocabulary", pb,
                            b->n_vocab, draft->hp.n_vocab, pa, a->n_vocab, target->hp.n_vocab);
    const struct { const char *name; int32_t x, y; } sp[] = {
        {"BOS", a->bos, b->bos}, {"EOS", a->eos, b->eos}, {"EOT", a->eot, b->eot},
    };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        if (sp[i].x != sp[i].y)
            return lm_error_set(LM_ERR_ARG, "draft model %s: %s token %d, the target %s has %d: the "
                                "pair must share one vocabulary", pb, sp[i].name, sp[i].y, pa, sp[i].x);
    for (int32_t id = 0; id < a->n_vocab; id++) {
        const uint32_t la = a->off[id + 1] - a->off[id], lb = b->off[id + 1] - b->off[id];
        const bool eog_a = (a->attr[id] & LM_TOK_FLAG_EOG) != 0, eog_b = (b->attr[id] & LM_TOK_FLAG_EOG) != 0;
        if (la == lb && !memcmp(a->blob + a->off[id], b->blob + b->off[id], la) && eog_a == eog_b)
            continue;
        char ta[40], tb[40];
        tok_show(a, id, ta, sizeof ta);
        tok_show(b, id, tb, sizeof tb);
        if (eog_a != eog_b && la == lb && !memcmp(a->blob + a->off[id], b->blob + b->off[id], la))
            return lm_error_set(LM_ERR_ARG, "draft model %s: token %d '%s' %s end generation in the "
                                "draft and %s in the target %s: the pair must share one vocabulary",
                                pb, id, tb, eog_b ? "does" : "does not", eog_a ? "does" : "does not", pa);
        return lm_error_set(LM_ERR_ARG, "draft model %s: token %d is '%s', in the target %s it is "
                            "'%s' (first differing id): the pair must share one vocabulary", pb, id,
                            tb, pa, ta);
    }
    return LM_OK;
}
