// `lumen tokenize`: print the token ids and pieces of a text as `lumen run` tokenizes a
// prompt (BOS per the vocabulary, control-token text kept as text unless --parse-special).
// Only the tokenizer is loaded, so encoder models and vocabulary-only files work too.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lumen.h"

static const char *k_tokenize_help =
    "usage: lumen tokenize [-m MODEL] (-p TEXT | -f FILE) [--ids] [--pieces] [options]\n"
    "\n"
    "  -m, --model PATH      GGUF model (default: " LM_DEFAULT_MODEL ")\n"
    "  -p, --prompt TEXT     text to tokenize\n"
    "  -f, --file PATH       read the text from a file\n"
    "      --ids             print only the ids, as one list: [2, 651, 6037]\n"
    "      --pieces          print only the pieces, one per line\n"
    "      --no-bos          do not add BOS/EOS (default: as the vocabulary says, like `run`)\n"
    "      --parse-special   control-token text (<start_of_turn>) becomes the token (as `run\n"
    "                        --chat` does)\n"
    "\n"
    "Default output, one token per line: its id, then its piece in single quotes. Pieces are\n"
    "escaped: \\n \\t \\r \\\\ \\' and \\xHH for other control bytes and bytes that are not\n"
    "whole UTF-8 characters (byte-fallback tokens).\n";

// Length of the valid UTF-8 character at s[0..n), or 0.
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t len;
    if (s[0] < 0x80) return 1;
    if ((s[0] & 0xE0) == 0xC0 && s[0] >= 0xC2) len = 2;
    else if ((s[0] & 0xF0) == 0xE0) len = 3;
    else if ((s[0] & 0xF8) == 0xF0 && s[0] <= 0xF4) len = 4;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

static void put_escaped(FILE *f, const char *p, size_t n, bool quote) {
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\\') fputs("\\\\", f);
        else if (c == '\'' && quote) fputs("\\'", f);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\x%02X", c);
        else if (c >= 0x80) {
            const size_t l = utf8_len(s + i, n - i);
            if (l == 0) fprintf(f, "\\x%02X", c);
            else fwrite(s + i, 1, l, f);
            i += l ? l : 1;
            continue;
        } else fputc(c, f);
        i++;
    }
}

int cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize";
    const char *model_path = NULL, *text = NULL, *file = NULL;
    bool ids_only = false, pieces_only = false, add_special = true, parse_special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(k_tokenize_help, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) text = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = cli_value(cmd, argc, argv, &i);
        else if (!strcmp(a, "--ids")) ids_only = true;
        else if (!strcmp(a, "--pieces")) pieces_only = true;
        else if (!strcmp(a, "--no-bos")) add_special = false;
        else if (!strcmp(a, "--parse-special")) parse_special = true;
        else cli_usage_error(cmd, "unknown option '%s' (try `lumen tokenize --help`)", a);
    }
    if (!text && !file) cli_usage_error(cmd, "no text: give -p TEXT or -f FILE");
    if (text && file) cli_usage_error(cmd, "give either -p or -f, not both");
    if (ids_only && pieces_only) ids_only = pieces_only = false; // both: the default table
    char *file_text = NULL;
    size_t len = 0;
    if (file) {
        if (!(file_text = cli_read_file(file, &len))) cli_usage_error(cmd, "cannot read file '%s'", file);
        text = file_text;
    } else {
        len = strlen(text);
    }
    if (!model_path) model_path = cli_default_model();
    struct lm_tokenizer *tok = NULL;
    enum lm_status st = lm_tokenizer_open(&tok, model_path);
    if (st != LM_OK) {
        fprintf(stderr, "lumen tokenize: %s\n", lm_error_msg());
        free(file_text);
        return st == LM_ERR_IO ? LM_EXIT_USAGE : 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if ((st = lm_tokenize(tok, text, len, add_special, parse_special, &ids, &n)) != LM_OK) {
        fprintf(stderr, "lumen tokenize: %s\n", lm_error_msg());
        lm_tokenizer_close(tok);
        free(file_text);
        return 1;
    }
    const size_t cap = lm_tokenizer_max_piece(tok) + 1;
    char *piece = malloc(cap);
    if (!piece) {
        fputs("lumen tokenize: out of memory\n", stderr);
        return 1;
    }
    if (ids_only) {
        fputc('[', stdout);
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        fputs("]\n", stdout);
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t np = lm_token_to_piece(tok, ids[i], piece, cap, true);
            if (np > cap) np = cap;
            if (pieces_only) {
                put_escaped(stdout, piece, np, false);
                fputc('\n', stdout);
            } else {
                printf("%6d -> '", ids[i]);
                put_escaped(stdout, piece, np, true);
                fputs("'\n", stdout);
            }
        }
    }
    free(piece);
    free(ids);
    free(file_text);
    lm_tokenizer_close(tok);
    return 0;
}
