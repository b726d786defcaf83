// Helper of tests/test_kernels_dequant_model.sh (takes arguments, so it is not a ctest):
// reads n_rows rows of ne0 elements of dtype t at a byte offset of a file, dequantizes them
// with every kernel table available, checks the tables agree bit for bit, writes f32 rows.
//   kernels_dequant_dump <file> <offset> <dtype id> <ne0> <n_rows> <out.f32>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s <file> <offset> <dtype id> <ne0> <n_rows> <out.f32>\n", argv[0]);
        return 2;
    }
    long long off = atoll(argv[2]), ne0 = atoll(argv[4]), rows = atoll(argv[5]);
    int t = atoi(argv[3]);
    const struct lm_dtype_traits *tr = lm_dtype_traits(t);
    if (!tr || !tr->supported || ne0 <= 0 || rows <= 0 || ne0 % tr->block_size) {
        fprintf(stderr, "kernels_dequant_dump: bad dtype %d / ne0 %lld / rows %lld\n", t, ne0, rows);
        return 2;
    }
    size_t rb = lm_dtype_row_size((enum lm_dtype)t, ne0), nb = rb * (size_t)rows;
    unsigned char *raw = malloc(nb);
    float *out = malloc((size_t)(ne0 * rows) * sizeof(float)), *alt = malloc((size_t)ne0 * sizeof(float));
    FILE *f = fopen(argv[1], "rb");
    if (!raw || !out || !alt || !f || fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(raw, 1, nb, f) != nb) {
        fprintf(stderr, "kernels_dequant_dump: %s: cannot read %zu bytes at offset %lld\n", argv[1], nb, off);
        return 1;
    }
    fclose(f);
    const struct lm_kernels *tabs[3] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    int bad = 0;
    for (long long r = 0; r < rows; r++) {
        float *y = out + r * ne0;
        tabs[0]->dequant[t](raw + (size_t)r * rb, y, ne0);
        for (int k = 1; k < 3; k++) {
            if (!tabs[k]) continue;
            tabs[k]->dequant[t](raw + (size_t)r * rb, alt, ne0);
            if (memcmp(alt, y, (size_t)ne0 * sizeof(float)) != 0 && bad++ < 5)
                fprintf(stderr, "kernels_dequant_dump: %s dequant of %s row %lld differs from generic\n",
                        tabs[k]->name, tr->name, r);
        }
    }
    FILE *o = fopen(argv[6], "wb");
    if (!o || fwrite(out, sizeof(float), (size_t)(ne0 * rows), o) != (size_t)(ne0 * rows) || fclose(o) != 0) {
        fprintf(stderr, "kernels_dequant_dump: cannot write %s\n", argv[6]);
        return 1;
    }
    free(raw), free(out), free(alt);
    return bad ? 1 : 0;
}
