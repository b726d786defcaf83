// lm_json_schema_to_gbnf: each keyword's output, each refusal and its message (JSON pointer
// and keyword), the limits against hostile schemas, malformed JSON text, the range emitter.
#include <stdarg.h>
#include <string.h>

#include "base/timer.h"
#include "grammar/regex.h"
#include "grammar/schema.h"
#include "lm_test.h"
#include "lumen.h"

static char *conv(const char *schema, enum lm_status *st) {
    char *g = NULL;
    size_t n = 0;
    *st = lm_json_schema_to_gbnf(schema, strlen(schema), &g, &n);
    if (*st == LM_OK && (!g || strlen(g) != n)) {
        fprintf(stderr, "length mismatch\n");
        *st = LM_ERR_STATE;
    }
    return g;
}

// The schema converts and its GBNF contains each of the NULL-terminated needles.
static void ok_has(const char *schema, ...) {
    enum lm_status st;
    char *g = conv(schema, &st);
    CHECKF(st == LM_OK, "%s: %s", schema, lm_error_msg());
    va_list ap;
    va_start(ap, schema);
    for (const char *n; (n = va_arg(ap, const char *));)
        CHECKF(g && strstr(g, n), "%s: no '%s' in\n%s", schema, n, g ? g : "(null)");
    va_end(ap);
    free(g);
}

// The schema is refused with LM_ERR_ARG and a message containing want.
static void refused(const char *schema, const char *want) {
    enum lm_status st;
    char *g = conv(schema, &st);
    CHECKF(st == LM_ERR_ARG && !g && strstr(lm_error_msg(), want), "%.120s: status %d, message '%s', want '%s'",
           schema, (int)st, lm_error_msg(), want);
    free(g);
}

static void test_keywords(void) {
    ok_has("{}", "root ::= value\n", "value ::= object | array | string | number | boolean | null", NULL);
    ok_has("true", "root ::= value\n", NULL);
    ok_has("{\"type\":\"object\"}", "root ::= object\n", NULL);
    ok_has("{\"type\":\"string\"}", "root ::= string\n", "char ::=", NULL);
    ok_has("{\"type\":\"boolean\"}", "root ::= boolean\n", NULL);
    ok_has("{\"type\":\"null\"}", "root ::= null\n", NULL);
    ok_has("{\"type\":\"integer\"}", "root ::= integer\n", NULL);
    ok_has("{\"type\":\"number\",\"title\":\"t\",\"description\":\"d\",\"examples\":[1],\"default\":2,"
           "\"$comment\":\"c\",\"deprecated\":false,\"readOnly\":true,\"writeOnly\":false,\"$id\":\"x\","
           "\"$schema\":\"https://json-schema.org/draft/2020-12/schema\"}",
           "root ::= number\n", NULL);
    ok_has("{\"type\":[\"string\",\"null\"]}", "root ::= null | string", NULL);
    // properties: required first, optional as an in-order subset, ", " and ": " spacing
    ok_has("{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"},\"a\":{\"type\":\"string\"}},"
           "\"required\":[\"a\"],\"additionalProperties\":false}",
           "\"\\\"a\\\": \" string", "\"\\\"b\\\": \" integer", "\"{\" root-a-kv (\", \" (root-b-kv))? \"}\"", NULL);
    ok_has("{\"properties\":{\"a\":{\"type\":\"null\"}},\"additionalProperties\":{\"type\":\"integer\"}}",
           "additional-kv ::= \"\\\"\" (\"a\" ", "\": \" integer", "(\", \" root-additional-kv)*", NULL);
    ok_has("{\"type\":\"object\",\"additionalProperties\":false}", "root ::= \"{}\"", NULL);
    ok_has("{\"enum\":[\"a\",1,null,{\"k\":[true,2.5]}]}", "\"\\\"a\\\"\" | \"1\" | \"null\" | \"{\\\"k\\\": [true, 2.5]}\"", NULL);
    ok_has("{\"type\":\"string\",\"enum\":[\"a\",1]}", "root ::= \"\\\"a\\\"\"\n", NULL);
    ok_has("{\"const\":\"x\\ny\"}", "root ::= \"\\\"x\\\\ny\\\"\"\n", NULL);
    ok_has("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "root ::= string | integer", NULL);
    ok_has("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "root ::= string | null", NULL);
    ok_has("{\"type\":\"string\",\"oneOf\":[{\"format\":\"date\"},{\"format\":\"uuid\"}]}",
           "root ::= format-date | format-uuid", NULL);
    ok_has("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"null\"}},\"required\":[\"a\"]},"
           "{\"properties\":{\"b\":{\"type\":\"null\"}},\"required\":[\"b\"]}]}",
           "\"{\" root-a-kv \", \" root-b-kv \"}\"", NULL);
    ok_has("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
           "\"[\" integer (\", \" integer){0,2} \"]\"", NULL);
    ok_has("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
           "\"[\" ( integer ( \", \" string)?)? \"]\"", NULL);
    ok_has("{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}", "\"\\\"\" char{2,4} \"\\\"\"", NULL);
    ok_has("{\"type\":\"string\",\"pattern\":\"^a[0-9]+b?$\"}", "(\"a\" [0-9]+ \"b\"?)", NULL);
    ok_has("{\"type\":\"string\",\"pattern\":\"x\"}", "(char* \"x\" char*)", NULL);
    ok_has("{\"type\":\"string\",\"pattern\":\"^.\\\\d\\\\.(?:ab|c){2}$\"}", "regex-dot [0-9] \".\" (\"ab\" | \"c\"){2}", NULL);
    ok_has("{\"type\":\"string\",\"format\":\"date\"}", "root ::= format-date", "leap-year ::=", NULL);
    ok_has("{\"type\":\"string\",\"format\":\"date-time\"}", "date-time ::= date \"T\" time", NULL);
    ok_has("{\"type\":\"string\",\"format\":\"time\"}", "time ::=", NULL);
    ok_has("{\"type\":\"string\",\"format\":\"uuid\"}", "uuid ::= [0-9a-f]{8}", NULL);
    ok_has("{\"type\":\"string\",\"format\":\"ipv4\"}", "root ::= format-ipv4", "octet ::= \"25\" [0-5]", NULL);
    ok_has("{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}",
           "(([0-9] | [1-9] [0-9] | \"1\" ([0-4] [0-9] | \"5\" \"0\")))", NULL);
    ok_has("{\"type\":\"integer\",\"exclusiveMinimum\":-3,\"maximum\":-1}", "\"-\" (([1-2]))", NULL);
    ok_has("{\"type\":\"number\",\"minimum\":1,\"exclusiveMinimum\":true}", "(\"1\") \".\" ([1-9]", NULL);
    ok_has("{\"$defs\":{\"n\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/n\"}", "root ::= ref-n\n", "ref-n ::= integer", NULL);
    ok_has("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}}}", "\"\\\"next\\\": \" root", NULL);
    ok_has("{\"definitions\":{\"a~b\":{\"type\":\"null\"}},\"$ref\":\"#/definitions/a~0b\"}", "null", NULL);
    // 30 levels of anyOf through $ref, each target twice: linear output, fast
    char big[8192];
    size_t k = (size_t)snprintf(big, sizeof big, "{\"$ref\":\"#/$defs/a0\",\"$defs\":{");
    for (int i = 0; i < 30; i++)
        k += (size_t)snprintf(big + k, sizeof big - k,
                              "\"a%d\":{\"anyOf\":[{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a%d\"}},"
                              "{\"$ref\":\"#/$defs/a%d\"}]},", i, i + 1, i + 1);
    snprintf(big + k, sizeof big - k, "\"a30\":{\"type\":\"null\"}}}");
    uint64_t t0 = lm_now_ns();
    ok_has(big, "ref-a29 ::=", NULL);
    CHECK(lm_now_ns() - t0 < 100000000ull);
}

static void test_refusals(void) {
    refused("{\"properties\":{\"age\":{\"type\":\"integer\",\"multipleOf\":3}}}",
            "json schema: /properties/age: unsupported keyword 'multipleOf'");
    refused("{\"type\":\"object\",\"patternProperties\":{}}", "json schema: (root): unsupported keyword 'patternProperties'");
    refused("{\"not\":{}}", "unsupported keyword 'not'");
    refused("{\"items\":{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}}", "/items/pattern: pattern: backreference is not supported");
    refused("{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", "lookaround is not supported");
    refused("{\"type\":\"string\",\"pattern\":\"a(?<!b)\"}", "lookaround is not supported");
    refused("{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "word boundary");
    refused("{\"type\":\"string\",\"pattern\":\"a^b\"}", "anchor ^ inside the pattern");
    refused("{\"type\":\"string\",\"pattern\":\"(a\"}", "unbalanced parenthesis");
    refused("{\"type\":\"string\",\"pattern\":\"[a\"}", "unterminated character class");
    refused("{\"type\":\"string\",\"pattern\":\"*a\"}", "nothing to repeat");
    refused("{\"type\":\"string\",\"pattern\":\"a{99999}\"}", "repetition count above 10000");
    refused("{\"type\":\"string\",\"pattern\":\"(?i)a\"}", "group flags");
    refused("{\"type\":\"string\",\"format\":\"email\"}", "unsupported format 'email'");
    refused("{\"type\":\"string\",\"format\":\"date\",\"maxLength\":3}", "'format' with");
    refused("{\"type\":\"string\",\"pattern\":\"a\",\"minLength\":3}", "'pattern' with");
    ok_has("{\"type\":\"number\",\"minimum\":0.5,\"exclusiveMaximum\":2.25}", "\"5\"", "\"2\"", NULL);
    refused("{\"type\":\"number\",\"minimum\":1e-30}", "'minimum' 1e-30: more than 20 fraction digits");
    refused("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer satisfies the bounds");
    refused("{\"type\":\"integer\",\"exclusiveMinimum\":4,\"exclusiveMaximum\":5}", "no integer satisfies");
    refused("{\"type\":\"number\",\"minimum\":1e30}", "out of the supported range");
    refused("{\"$ref\":\"other.json#/a\"}", "only local references");
    refused("{\"$ref\":\"#/$defs/missing\"}", "'#/$defs/missing' points at nothing");
    refused("{\"$ref\":\"#\"}", "$ref cycle that consumes no text");
    refused("{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", "$ref cycle that consumes no text");
    refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
            "$ref cycle");
    refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\",\"type\":\"string\"}},\"$ref\":\"#/$defs/a\"}",
            "/$defs/a: '$ref' in a schema merged with its siblings is not supported");
    ok_has("{\"$defs\":{\"s\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}},\"$ref\":\"#/$defs/s\",\"maxItems\":2}",
           "root ::= \"[\" (integer (\", \" integer)?)? \"]\"", NULL);
    ok_has("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", "root ::= \"\\\"\" char{0,3} \"\\\"\"", NULL);
    refused("{\"properties\":{\"a\":{}},\"anyOf\":[{\"additionalProperties\":false}]}",
            "/anyOf/0: 'properties' and 'additionalProperties' from two schemas");
    refused("{\"type\":\"string\",\"anyOf\":[{\"type\":\"integer\"}]}", "no value has the types");
    refused("{\"pattern\":\"a\",\"oneOf\":[{\"pattern\":\"b\"}]}", "keyword 'pattern' with different values");
    refused("{\"type\":\"object\",\"anyOf\":[{\"$ref\":\"#\"}]}", "'$ref' in a schema merged with its siblings");
    refused("{\"enum\":[1],\"minimum\":0}", "keyword 'minimum' beside 'enum'/'const'");
    refused("{\"type\":\"string\",\"enum\":[1,2]}", "no value of 'enum'/'const'");
    refused("{\"allOf\":[{\"type\":\"string\"},{\"type\":\"object\"}]}", "/allOf/1: no value has the types");
    refused("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}}},{\"properties\":{\"a\":{\"type\":\"null\"}}}]}",
            "property 'a' is defined differently");
    refused("{\"required\":3}", "json schema: (root): 'required' must be an array of strings");
    refused("{\"required\":[\"a\",3]}", "'required' must be an array of strings");
    refused("{\"type\":5}", "'type' must be a string");
    refused("{\"type\":\"float\"}", "unknown type 'float'");
    refused("{\"properties\":[]}", "'properties' must be an object");
    refused("{\"type\":\"array\",\"minItems\":-1}", "'minItems' must be a non-negative integer");
    refused("{\"type\":\"array\",\"maxItems\":1.5}", "'maxItems' must be a non-negative integer");
    refused("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "'maxItems' is below 'minItems'");
    refused("{\"type\":\"string\",\"maxLength\":100000}", "exceeds 10000 (LM_SCHEMA_MAX_REPEAT)");
    refused("{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", "required property 'a' has schema false");
    refused("{\"type\":\"object\",\"required\":[\"x\"],\"additionalProperties\":false}", "required property 'x' is neither");
    refused("false", "schema false accepts no value");
    refused("3", "a schema must be an object or a boolean");
    refused("{\"items\":{\"type\":\"string\",\"pattern\":5}}", "/items: 'pattern' must be a string");
}

static void test_malformed(void) {
    refused("", "not valid JSON");
    refused("{\"type\":\"obj", "not valid JSON: line 1");
    refused("{\"type\":\"object\",", "not valid JSON");
    refused("{\"a\":1,\"a\":2}", "not valid JSON"); // duplicate keys are ambiguous
    refused("{\"type\":\"string\"} x", "not valid JSON");
    enum lm_status st = lm_json_schema_to_gbnf(NULL, 0, NULL, NULL);
    CHECK(st == LM_ERR_ARG);
    char *g = (char *)1;
    CHECK(lm_json_schema_to_gbnf("{}", 2, &g, NULL) == LM_OK && g);
    free(g);
    // NUL inside the text
    g = (char *)1;
    CHECK(lm_json_schema_to_gbnf("{}\0{}", 5, &g, NULL) == LM_ERR_ARG && g == NULL);
}

static void test_limits(void) {
    // nesting: 200 levels of items (the JSON itself is fine)
    static char deep[16384];
    size_t k = 0;
    for (int i = 0; i < 200; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"items\":");
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{}");
    for (int i = 0; i < 200; i++) deep[k++] = '}';
    deep[k] = 0;
    refused(deep, "nested deeper than 128 (LM_SCHEMA_MAX_DEPTH)");
    // JSON nested past the parser's own bound
    char *jd = malloc(200001);
    memset(jd, '[', 100000);
    memset(jd + 100000, ']', 100000);
    jd[200000] = 0;
    refused(jd, "not valid JSON");
    free(jd);
    // a large enum passes the output bound
    size_t cap = 3u << 20;
    char *e = malloc(cap);
    k = (size_t)snprintf(e, cap, "{\"enum\":[");
    for (int i = 0; i < 15000; i++) // each \" doubles in GBNF
        k += (size_t)snprintf(e + k, cap - k, "%s\"%05d\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\"", i ? "," : "", i);
    snprintf(e + k, cap - k, "]}");
    refused(e, "grammar exceeds 1048576 bytes");
    // more $ref targets than allowed
    k = (size_t)snprintf(e, cap, "{\"type\":\"array\",\"prefixItems\":[");
    for (int i = 0; i < 1001; i++) k += (size_t)snprintf(e + k, cap - k, "%s{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i);
    k += (size_t)snprintf(e + k, cap - k, "],\"$defs\":{");
    for (int i = 0; i < 1001; i++) k += (size_t)snprintf(e + k, cap - k, "%s\"d%d\":{\"const\":%d}", i ? "," : "", i, i);
    snprintf(e + k, cap - k, "}}");
    refused(e, "more than 1000 $ref targets");
    // many subschemas
    k = (size_t)snprintf(e, cap, "{\"anyOf\":[");
    for (int i = 0; i < 30000; i++) k += (size_t)snprintf(e + k, cap - k, "%s{\"type\":\"null\"}", i ? "," : "");
    snprintf(e + k, cap - k, "]}");
    refused(e, "more than 20000 subschemas");
    // allOf folded member by member, each merge copying a growing properties object: the
    // time bound ends it
    k = (size_t)snprintf(e, cap, "{\"allOf\":[{\"maxLength\":1}");
    for (int i = 0; i < 30000; i++) k += (size_t)snprintf(e + k, cap - k, ",{\"properties\":{\"p%d\":{}}}", i);
    snprintf(e + k, cap - k, "]}");
    uint64_t t0 = lm_now_ns();
    refused(e, "(LM_SCHEMA_MAX_MS)");
    CHECK(lm_now_ns() - t0 < 2000000000ull);
    free(e);
    // a long key beside additionalProperties (the key trie recurses per character)
    static char longkey[2048];
    k = (size_t)snprintf(longkey, sizeof longkey, "{\"additionalProperties\":true,\"properties\":{\"");
    memset(longkey + k, 'k', 300);
    snprintf(longkey + k + 300, sizeof longkey - k - 300, "\":{}}}");
    refused(longkey, "property name longer than 256 bytes");
    // input size
    char *huge = malloc(LM_SCHEMA_MAX_INPUT + 2);
    memset(huge, ' ', LM_SCHEMA_MAX_INPUT + 1);
    huge[0] = '{', huge[LM_SCHEMA_MAX_INPUT] = '}', huge[LM_SCHEMA_MAX_INPUT + 1] = 0;
    refused(huge, "(LM_SCHEMA_MAX_INPUT)");
    free(huge);
}

// The range emitter directly: a single value, an empty range, the whole int64 range (the
// corpus test checks ranges against jsonschema by sampling).
static void test_number_emit(void) {
    struct lm_num_bounds nb = {.has_lo = true, .has_hi = true};
    lm_dec_from_int(&nb.lo, 5);
    lm_dec_from_int(&nb.hi, 5);
    struct lm_strbuf b = {0};
    CHECK(lm_schema_emit_number(&b, &nb, true));
    CHECK(b.p && strstr(b.p, "\"5\""));
    free(b.p);
    memset(&b, 0, sizeof b);
    nb.hi_excl = true;
    CHECK(lm_schema_emit_number(&b, &nb, false) == false); // 5 <= x < 5
    free(b.p);
    memset(&b, 0, sizeof b);
    lm_dec_from_int(&nb.lo, INT64_MIN);
    lm_dec_from_int(&nb.hi, INT64_MAX);
    nb.hi_excl = false;
    CHECK(lm_schema_emit_number(&b, &nb, true));
    CHECK(b.p && strstr(b.p, "\"9\" ([0-1] [0-9]{17}") && strstr(b.p, "\"-\" ("));
    free(b.p);
    // decimals beyond a double, 15 significant digits
    struct lm_dec d;
    CHECK(lm_dec_beyond(&d, 0.1, true) && d.ip == 0 && !strcmp(d.frac, "100000000000001"));
    CHECK(lm_dec_beyond(&d, 0.1, false) && d.ip == 0 && !strcmp(d.frac, "099999999999999"));
    CHECK(lm_dec_beyond(&d, -2.0, true) && d.neg && d.ip == 1 && !strcmp(d.frac, "99999999999999"));
    CHECK(lm_dec_beyond(&d, 999999999999999.0, true) && d.ip == 1000000000000000ull && !d.frac[0]);
    CHECK(lm_dec_from_double(&d, -12.375) && d.neg && d.ip == 12 && !strcmp(d.frac, "375"));
    CHECK(lm_dec_from_double(&d, 1e-25) == false);
}

int main(void) {
    test_keywords();
    test_refusals();
    test_malformed();
    test_limits();
    test_number_emit();
    return lm_test_finish();
}
