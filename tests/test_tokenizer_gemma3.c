// LM_TEST_LABELS: model
// Gemma 3 tokenizer against llama.cpp golden data (tools/gen_golden_tokens.py): token ids,
// pieces, whole-sequence detokenization, round trips, streaming detok, chat template, EOG.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

#include "format/gguf.h"
#include "lm_test.h"
#include "lm_test_file.h"
#include "tokenizer/tokenizer.h"
#include "tok_golden.h" // hex, file and printing helpers shared with the BPE tests

// Splits line into up to max tab-separated fields (in place).
static int split_tabs(char *line, char **fields, int max) {
    int n = 0;
    fields[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == '\t') {
            *p = 0;
            fields[n++] = p + 1;
        }
    return n;
}

static bool valid_utf8_complete(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static bool find_u2581(const char *s, size_t n) {
    for (size_t i = 0; i + 3 <= n; i++)
        if (memcmp(s + i, "\xe2\x96\x81", 3) == 0) return true;
    return false;
}

static void test_golden_tokens(const struct lm_tokenizer *t) {
    size_t flen;
    char *file = lm_test_read_file(lm_test_path("tests/golden/tokens_gemma3.tsv"), &flen);
    CHECKF(file != NULL, "missing tests/golden/tokens_gemma3.tsv (run tools/gen_golden_tokens.py)");
    if (!file) return;
    int total = 0, matched = 0, detok_ok = 0, shown = 0, rt_total = 0, rt_ok = 0;
    int32_t *exp = malloc(sizeof(int32_t) * 200000);
    for (char *line = file, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *f[5];
        if (split_tabs(line, f, 5) != 5) {
            CHECKF(0, "malformed golden line %d", total + 1);
            continue;
        }
        size_t in_len, dt_len;
        char *in = tg_unhex(f[0], &in_len);
        char *dt = tg_unhex(f[4], &dt_len);
        bool add_bos = f[1][0] == '1', special = f[2][0] == '1';
        size_t n_exp = 0;
        for (char *p = f[3]; *p;) {
            exp[n_exp++] = (int32_t)strtol(p, &p, 10);
            while (*p == ' ') p++;
        }
        int32_t *got = NULL;
        size_t n_got = 0;
        enum lm_status st = lm_tokenize(t, in, in_len, add_bos, special, &got, &n_got);
        total++;
        bool same = st == LM_OK && n_got == n_exp && memcmp(got, exp, n_exp * sizeof *exp) == 0;
        if (same) {
            matched++;
        } else if (shown++ < 8) {
            fprintf(stderr, "  mismatch case %d add_bos=%d special=%d status=%s input=", total, add_bos, special,
                    lm_status_name(st));
            tg_show(in, in_len);
            fputc('\n', stderr);
            tg_show_ids("llama.cpp", exp, n_exp);
            tg_show_ids("lumen    ", got, n_got);
        }
        char *text = NULL;
        size_t n_text = 0;
        if (lm_tokenizer_detokenize(t, exp, n_exp, false, false, &text, &n_text) == LM_OK && n_text == dt_len &&
            memcmp(text, dt, dt_len) == 0)
            detok_ok++;
        else if (shown++ < 8) {
            fprintf(stderr, "  detokenize mismatch case %d: want ", total);
            tg_show(dt, dt_len);
            fprintf(stderr, " got ");
            tg_show(text ? text : "", n_text);
            fputc('\n', stderr);
        }
        free(text);
        // round trip on valid UTF-8 without U+2581 (llama.cpp maps U+2581 in the input to a
        // space, and an invalid lead byte can swallow the escaped space after it)
        if (!special && !add_bos && st == LM_OK && valid_utf8_complete(in, in_len) &&
            !find_u2581(in, in_len)) {
            rt_total++;
            char *back = NULL;
            size_t n_back = 0;
            if (lm_tokenizer_detokenize(t, got, n_got, false, false, &back, &n_back) == LM_OK && n_back == in_len &&
                memcmp(back, in, in_len) == 0)
                rt_ok++;
            else if (shown++ < 8) {
                fprintf(stderr, "  round trip failed case %d: ", total);
                tg_show(in, in_len);
                fputc('\n', stderr);
            }
            free(back);
        }
        free(got);
        free(in);
        free(dt);
    }
    printf("golden tokens: %d / %d cases identical; detokenize %d / %d; round trip %d / %d\n", matched, total,
           detok_ok, total, rt_ok, rt_total);
    CHECK(total >= 800);
    CHECKF(matched == total, "%d of %d golden cases differ", total - matched, total);
    CHECKF(detok_ok == total, "%d of %d detokenizations differ", total - detok_ok, total);
    CHECKF(rt_ok == rt_total, "%d of %d round trips differ", rt_total - rt_ok, rt_total);
    free(exp);
    free(file);
}

static void test_golden_pieces(const struct lm_tokenizer *t) {
    size_t flen;
    char *file = lm_test_read_file(lm_test_path("tests/golden/pieces_gemma3.tsv"), &flen);
    CHECKF(file != NULL, "missing tests/golden/pieces_gemma3.tsv");
    if (!file) return;
    int total = 0, ok = 0;
    for (char *line = file, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *f[3];
        if (split_tabs(line, f, 3) != 3) continue;
        int32_t id = (int32_t)atoi(f[0]);
        bool special = f[1][0] == '1';
        size_t n_exp;
        char *want = tg_unhex(f[2], &n_exp);
        char buf[512];
        size_t n = lm_token_to_piece(t, id, buf, sizeof buf, special);
        total++;
        if (n == n_exp && memcmp(buf, want, n) == 0) ok++;
        else if (total - ok <= 8) {
            fprintf(stderr, "  piece mismatch id %d special=%d: want ", id, special);
            tg_show(want, n_exp);
            fprintf(stderr, " got ");
            tg_show(buf, n < sizeof buf ? n : sizeof buf);
            fputc('\n', stderr);
        }
        free(want);
    }
    printf("golden pieces: %d / %d identical\n", ok, total);
    CHECK(total >= 1000);
    CHECK(ok == total);
    free(file);
}

static void test_streaming(const struct lm_tokenizer *t) {
    // U+13000 and U+10FFFF are not in the vocabulary: they come out as byte-fallback tokens
    const char *s = "A\xf0\x93\x80\x80 b\xf4\x8f\xbf\xbf \xf0\x9f\x98\x80\xe6\x97\xa5\xe6\x9c\xac!";
    int32_t *ids;
    size_t n;
    CHECK(lm_tokenize(t, s, strlen(s), false, false, &ids, &n) == LM_OK);
    int n_byte = 0;
    for (size_t i = 0; i < n; i++) n_byte += (lm_tokenizer_attr(t, ids[i]) & LM_TOK_ATTR_BYTE) != 0;
    CHECKF(n_byte >= 8, "expected byte-fallback tokens, got %d", n_byte);
    struct lm_detok d;
    lm_detok_init(&d, false);
    char acc[256], buf[128];
    size_t n_acc = 0;
    bool chunks_ok = true;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        CHECK(lm_detok_push(t, &d, ids[i], buf, sizeof buf, &k) == LM_OK);
        if (!valid_utf8_complete(buf, k)) chunks_ok = false;
        memcpy(acc + n_acc, buf, k);
        n_acc += k;
    }
    n_acc += lm_detok_flush(&d, acc + n_acc, sizeof acc - n_acc);
    CHECKF(chunks_ok, "a streamed chunk split a UTF-8 character");
    CHECK(n_acc == strlen(s) && memcmp(acc, s, n_acc) == 0);

    // the four bytes of U+1F600 as separate tokens: nothing until the last one
    const uint8_t emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
    lm_detok_init(&d, false);
    size_t k;
    for (int i = 0; i < 4; i++) {
        CHECK(lm_detok_push(t, &d, t->byte_tok[emoji[i]], buf, sizeof buf, &k) == LM_OK);
        CHECK(k == (i < 3 ? 0u : 4u));
    }
    CHECK(memcmp(buf, emoji, 4) == 0);
    // an incomplete tail is flushed at the end; a too-small buffer is refused
    CHECK(lm_detok_push(t, &d, t->byte_tok[0xE6], buf, sizeof buf, &k) == LM_OK && k == 0);
    CHECK(lm_detok_flush(&d, buf, sizeof buf) == 1 && (uint8_t)buf[0] == 0xE6);
    CHECK(lm_detok_push(t, &d, 100, buf, 4, &k) == LM_ERR_ARG);
    // a stray continuation byte is passed through, not held
    CHECK(lm_detok_push(t, &d, t->byte_tok[0x80], buf, sizeof buf, &k) == LM_OK && k == 1);
    free(ids);
}

static void test_chat(const struct lm_tokenizer *t) {
    struct lm_chat_msg msgs[] = {{"system", "  You are terse.\n"},
                                 {"user", "Hi there! "},
                                 {"assistant", "\nHello.\n"},
                                 {"user", "What is 2+2?"}};
    // expected text from llama.cpp: llama_chat_apply_template("gemma", msgs, add_ass=true)
    const char *want = "<start_of_turn>user\nYou are terse.\n\nHi there!<end_of_turn>\n"
                       "<start_of_turn>model\nHello.<end_of_turn>\n"
                       "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n";
    char *out;
    size_t n;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GEMMA, msgs, 4, true, &out, &n) == LM_OK);
    CHECKF(n == strlen(want) && strcmp(out, want) == 0, "chat template gave: %s", out);
    int32_t *ids;
    size_t n_ids;
    CHECK(lm_tokenize(t, out, n, true, true, &ids, &n_ids) == LM_OK);
    CHECK(n_ids > 3 && ids[0] == 2 && ids[1] == 105); // <bos> <start_of_turn>
    int n_eot = 0;
    for (size_t i = 0; i < n_ids; i++) n_eot += ids[i] == 106;
    CHECK(n_eot == 3);
    free(ids);
    free(out);
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GEMMA, msgs + 1, 1, false, &out, &n) == LM_OK);
    CHECK(strcmp(out, "<start_of_turn>user\nHi there!<end_of_turn>\n") == 0);
    free(out);
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GEMMA, msgs, 0, true, &out, &n) == LM_OK);
    CHECK(strcmp(out, "<start_of_turn>model\n") == 0);
    free(out);
}

static void test_special_ids(const struct lm_tokenizer *t) {
    CHECK(lm_tokenizer_n_vocab(t) == 262144);
    CHECK(lm_tokenizer_bos(t) == 2);
    CHECK(lm_tokenizer_eos(t) == 1);
    CHECK(lm_tokenizer_is_eog(t, 1));
    CHECK(lm_tokenizer_is_eog(t, 106));
    CHECK(lm_tokenizer_is_eog(t, 212)); // "</s>": llama.cpp makes it CONTROL + EOG by text
    CHECK(!lm_tokenizer_is_eog(t, 2));
    CHECK(!lm_tokenizer_is_eog(t, 105));
    CHECK(!lm_tokenizer_is_eog(t, -1) && !lm_tokenizer_is_eog(t, 262144));
    CHECK(lm_tokenizer_attr(t, 212) == (LM_TOK_ATTR_USER_DEFINED | LM_TOK_ATTR_CONTROL | LM_TOK_FLAG_EOG));
    CHECK(lm_tokenizer_attr(t, 6) == (LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_UNUSED)); // <unused0>
    char buf[8];
    CHECK(lm_token_to_piece(t, 262144, buf, sizeof buf, true) == 0);
    CHECK(lm_token_to_piece(t, 106, buf, 3, true) == 13 && memcmp(buf, "<en", 3) == 0);
}

static void bench(const struct lm_tokenizer *t) {
    const char *para = "Large language models are trained on vast amounts of text. They predict the next "
                       "token given the previous ones. Über-naïve façades, 日本語, 한국어, emoji 😀👍🏽.\n";
    size_t pl = strlen(para), reps = 2000, n = pl * reps;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < reps; i++) memcpy(big + i * pl, para, pl);
    big[n] = 0;
    int32_t *ids;
    size_t n_ids;
    double t0 = tg_now_ms();
    CHECK(lm_tokenize(t, big, n, true, false, &ids, &n_ids) == LM_OK);
    double ms = tg_now_ms() - t0;
    printf("encode: %zu bytes -> %zu tokens in %.1f ms (%.2f MB/s, %.0f tokens/s)\n", n, n_ids, ms,
           n / ms / 1e3, n_ids / ms * 1e3);
    free(ids);
    free(big);
}

int main(void) {
    const char *path = lm_test_model_path();
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (getenv("LUMEN_ALLOW_SKIP")) {
            printf("SKIP: %s not found\n", path);
            return 0;
        }
        fprintf(stderr, "model not found: %s\n", path);
        return 1;
    }
    fclose(f);
    struct lm_gguf g;
    CHECKF(lm_gguf_open(&g, path) == LM_OK, "%s", lm_error_msg());
    struct lm_tokenizer *t = NULL;
    double t0 = tg_now_ms();
    enum lm_status st = lm_tokenizer_load(&t, &g);
    double load_ms = tg_now_ms() - t0;
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    lm_gguf_close(&g); // the tokenizer owns its copies
    if (!t) return lm_test_finish();
    printf("tokenizer load: %.1f ms (%d tokens, %d special)\n", load_ms, t->n_vocab, t->n_special);

    test_special_ids(t);
    test_golden_tokens(t);
    test_golden_pieces(t);
    test_streaming(t);
    test_chat(t);
    bench(t);
    lm_tokenizer_free(t);
    return lm_test_finish();
}
