// GBNF parser (src/grammar/gbnf.c): llama.cpp's example grammars parse; malformed and hostile
// grammars are refused with one "gbnf:LINE:COL: ..." message naming what was expected.
#include <string.h>

#include "grammar/gbnf.h"
#include "lm_test.h"
#include "lm_test_file.h"

static void accepts(const char *text) {
    struct gb_grammar g;
    enum lm_status st = gb_parse(&g, text, strlen(text), NULL, NULL);
    CHECKF(st == LM_OK, "%s -> %s", text, lm_error_msg());
    if (st == LM_OK) gb_free(&g);
}

// Refused, with a message containing want (line:col and the reason).
static void refuses(const char *text, const char *want) {
    struct gb_grammar g;
    enum lm_status st = gb_parse(&g, text, strlen(text), NULL, NULL);
    CHECKF(st == LM_ERR_ARG && strstr(lm_error_msg(), want), "%s -> %s (want %s)", text,
           st == LM_OK ? "accepted" : lm_error_msg(), want);
    if (st == LM_OK) gb_free(&g);
}

int main(void) {
    const char *files[] = {"json", "json_arr", "arithmetic", "list", "chess", "japanese"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/data/gbnf/%s.gbnf", files[i]);
        size_t n;
        char *t = lm_test_read_file(lm_test_path(rel), &n);
        CHECKF(t != NULL, "%s", rel);
        if (!t) continue;
        struct gb_grammar g;
        enum lm_status st = gb_parse(&g, t, n, NULL, NULL);
        CHECKF(st == LM_OK, "%s: %s", rel, lm_error_msg());
        if (st == LM_OK) {
            CHECK(g.n_rules > 1 && g.ret[g.root] == GB_RET_ROOT);
            gb_free(&g);
        }
        free(t);
    }
    accepts("root ::= \"a\" | \"b\" \"c\"*");
    accepts("root ::= [^\"\\\\\\x7F\\x00-\\x1F] \"\\u00e9\\U0001F600\" . # comment\n");
    accepts("root ::= x{2} x{0,3} x{2,}\nx ::= \"x\"");
    accepts("root ::= ( \"a\"\n  | \"b\" )+\n\n# trailing comment");
    accepts("root ::= \"é\" [α-ω]");
    accepts("root::=\"a\"\r\nb ::= \"b\"\r\n");
    // malformed
    refuses("root ::= \"abc", "1:10: unterminated string literal");
    refuses("root ::= [abc", "1:10: unterminated character class");
    refuses("root ::= \"\\q\"", "1:11: unknown escape");
    refuses("root ::= \"\\x4\"", "1:11: expected 2 hex digits");
    refuses("root ::= [\\u12]", "expected 4 hex digits");
    refuses("root ::= \"\\U00110000\"", "above U+10FFFF");
    refuses("root ::= [z-a]", "1:11: character range end below its start");
    refuses("root ::= ( \"a\"", "expected ')'");
    refuses("root ::= \"a\" )", "unexpected ')'");
    refuses("root = \"a\"", "1:6: expected '::='");
    refuses("root ::= *", "1:10: expected an item before the repetition");
    refuses("root ::= \"a\"{3", "expected '}'");
    refuses("root ::= \"a\"{3,1}", "n below m");
    refuses("root ::= \"a\"{99999999}", "1:14: repetition count above the limit");
    refuses("root ::= \"a\"\n\nroot ::= \"b\"", "3:1: rule defined twice");
    refuses("root ::= foo\n", "1:10: undefined rule 'foo'");
    refuses("main ::= \"a\"", "no rule named 'root'");
    refuses("root ::= root \"a\" | \"b\"", "1:1: rule 'root' is left-recursive");
    refuses("root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "is left-recursive");
    refuses("root ::= (\"\")*", "left-recursive");
    refuses("root ::= \"a\" root", "1:1: rule 'root' can derive no finite string");
    refuses("root ::= x\nx ::= \"(\" x \")\"", "2:1: rule 'x' can derive no finite string");
    refuses("root ::= [^\\x00-\\U0010FFFF]", "can derive no finite string");
    refuses("root ::= \"\\xff\xff\"", "invalid UTF-8");
    refuses("root ::= \"a\"\n  \"b\"", "2:3: expected a rule name");
    refuses("root ::= <token>", "1:10: token references (<...>) are not supported");
    refuses("root ::= \"a\" ]", "1:14: expected a newline");
    refuses("", "no rule named 'root'");
    // truncated
    refuses("root ::", "1:6: expected '::='");
    refuses("root ::= (\"a\" |", "expected ')'");
    refuses("root ::= [a-", "1:10: unterminated character class");
    refuses("root ::= \"\\", "unexpected end of input after '\\'");
    refuses("root ::= \"a\"{2,", "expected '}'");
    refuses("root ::= x\nx ::= \"\\u00", "expected 4 hex digits");
    // limits: rules after expansion, elements after expansion
    struct gb_limits lim = {.max_rules = 8};
    struct gb_grammar g;
    const char *many = "root ::= \"a\"{0,20}";
    CHECK(gb_parse(&g, many, strlen(many), NULL, &lim) == LM_ERR_ARG && strstr(lm_error_msg(), "more rules than the limit"));
    const char *big = "root ::= \"0123456789012345678901234567890123456789012345678901234567890123456789\"{10000} "
                      "\"0123456789012345678901234567890123456789012345678901234567890123456789\"{10000}";
    CHECK(gb_parse(&g, big, strlen(big), NULL, NULL) == LM_ERR_ARG && strstr(lm_error_msg(), "grammar too large"));
    // deep nesting is refused, not a stack overflow
    char *deep = malloc(200020);
    size_t dn = (size_t)sprintf(deep, "root ::= ");
    for (int i = 0; i < 100000; i++) deep[dn++] = '(';
    deep[dn++] = '"', deep[dn++] = 'a', deep[dn++] = '"';
    for (int i = 0; i < 100000; i++) deep[dn++] = ')';
    CHECK(gb_parse(&g, deep, dn, NULL, NULL) == LM_ERR_ARG && strstr(lm_error_msg(), "1:266: groups nested deeper than 256"));
    free(deep);
    // named start rule
    const char *named = "start ::= \"s\"";
    CHECK(gb_parse(&g, named, strlen(named), "start", NULL) == LM_OK);
    gb_free(&g);
    return lm_test_finish();
}
