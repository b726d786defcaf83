// LM_TEST_LABELS: model
// SentencePiece Unigram on llama.cpp's XLM-RoBERTa test vocabulary ggml-vocab-nomic-bert-moe
// (models/vocab/, written by tools/fetch_bpe_vocabs.py from llama-cpp-python's sdist; 6.8 MB,
// not committed) against llama.cpp golden ids (tools/gen_golden_encoder_tokens.py), and its
// real charsmap cut into the malformed forms the loader refuses.
#include "format/gguf.h"
#include "tok_golden.h"

int main(void) {
    const char *rel = "models/vocab/ggml-vocab-nomic-bert-moe.gguf";
    if (!tg_file_exists(lm_test_path(rel))) {
        if (getenv("LUMEN_ALLOW_SKIP")) {
            printf("SKIP: %s not found (python3 tools/fetch_bpe_vocabs.py)\n", rel);
            return lm_test_finish();
        }
        CHECKF(0, "%s not found: run python3 tools/fetch_bpe_vocabs.py", rel);
        return lm_test_finish();
    }
    struct lm_tokenizer *t = NULL;
    double t0 = tg_now_ms();
    CHECKF(lm_tokenizer_open(&t, lm_test_path(rel)) == LM_OK, "%s", lm_error_msg());
    if (!t) return lm_test_finish();
    printf("nomic-bert-moe: load %.1f ms (%d tokens)\n", tg_now_ms() - t0, t->n_vocab);
    CHECK(t->kind == LM_TOK_KIND_UGM && lm_tokenizer_kind(t) == LM_TOKENIZER_UGM);
    CHECK(t->add_bos && t->add_eos && t->add_space_prefix && t->remove_extra_ws);
    CHECK(t->bos == 0 && t->eos == 2 && t->unk == 3 && t->sep == 2);
    tg_check_golden_ex(t, "tests/golden/tokens_nomic-bert-moe.tsv", "nomic-bert-moe", false, 100);
    tg_bench(t, "nomic-bert-moe");
    lm_tokenizer_close(t);
    return lm_test_finish();
}
