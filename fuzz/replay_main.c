// Without libFuzzer (gcc builds: the Release, ASan+UBSan and TSan trees), each fuzz target is
// linked with this driver and run by ctest over its committed corpus (fuzz/corpus_<name>/), so
// every target keeps compiling and its corpus replays under the sanitizers in every test pass.
//   fuzz_<name> FILE_OR_DIR...   one line per input; exit 0 when every input returned
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) { fprintf(stderr, "replay: out of memory reading %s\n", path); free(buf); fclose(f); return 1; }
            buf = nb;
        }
        const size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    printf("ok %s (%zu bytes)\n", path, n);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_path(const char *path, int *count) {
    struct stat st;
    if (stat(path, &st) != 0) { fprintf(stderr, "replay: no such file or folder: %s\n", path); return 1; }
    if (!S_ISDIR(st.st_mode)) { ++*count; return run_file(path); }
    DIR *d = opendir(path);
    if (!d) { fprintf(stderr, "replay: cannot read folder %s\n", path); return 1; }
    char **names = NULL;
    size_t nn = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char **nb = realloc(names, (nn + 1) * sizeof *names);
        if (!nb) { rc = 1; break; }
        names = nb;
        const size_t len = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[nn] = malloc(len))) { rc = 1; break; }
        snprintf(names[nn++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str); // a stable order for the log
    for (size_t i = 0; i < nn; i++) {
        if (!rc) rc = run_path(names[i], count);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    int count = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) rc = run_path(argv[i], &count);
    if (!rc && count == 0) { fprintf(stderr, "replay: no input given\n"); rc = 1; }
    printf("%d passed, %d failed\n", rc ? 0 : count, rc ? 1 : 0);
    return rc;
}
