/* The disk tier's LZ4 coding outside the server (branch tierw;
 * docs/design.md, "The tier's codec on the write path"): codes 1,000 of
 * E4's values with the bundled liblz4 the way zcomp_lz4::compress does
 * (mode 0: LZ4_resetStream_fast, LZ4_attach_dictionary,
 * LZ4_compress_fast_continue), or with the dictionary's stream copied in
 * (mode 1: liblz4's extDict path), or with no dictionary (mode 2); then
 * decodes them as reads do (the dictionary as the output's prefix).
 * run.sh counts the instructions of code() and decode() under callgrind.
 * usage: cost MODE ACCELERATION SLOW(0|1: LZ4_loadDictSlow) */
#define LZ4_STATIC_LINKING_ONLY
#include "lz4.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE 2800
static char coded[1000][8192];
static int clen[1000];
static char out[(64 << 10) + 8192];

static char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) { perror(p); exit(1); }
    fseek(f, 0, SEEK_END); *n = (size_t)ftell(f); rewind(f);
    char *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) { perror(p); exit(1); }
    fclose(f);
    return b;
}

__attribute__((noinline, noclone)) static long code(int mode, int accel, LZ4_stream_t *dict,
                                           LZ4_stream_t *w, const char *v, int nv) {
    long total = 0;
    for (int i = 0; i < nv; i++) {
        const char *src = v + (size_t)i * VALUE;
        if (mode == 0) {
            LZ4_resetStream_fast(w);
            LZ4_attach_dictionary(w, dict);
            clen[i] = LZ4_compress_fast_continue(w, src, coded[i], VALUE, 8192, accel);
        } else if (mode == 1) {
            memcpy(w, dict, sizeof *w);
            clen[i] = LZ4_compress_fast_continue(w, src, coded[i], VALUE, 8192, accel);
        } else {
            clen[i] = LZ4_compress_fast_extState_fastReset(w, src, coded[i], VALUE, 8192, accel);
        }
        total += clen[i];
    }
    return total;
}

__attribute__((noinline, noclone)) static long decode(const char *d, int dn, int nv) {
    long total = 0;
    for (int i = 0; i < nv; i++)
        total += LZ4_decompress_safe_usingDict(coded[i], out + dn, clen[i], VALUE, out, dn);
    return total;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: cost MODE ACCEL SLOW\n"); return 2; }
    int mode = atoi(argv[1]), accel = atoi(argv[2]), slow = atoi(argv[3]);
    size_t dn, vn;
    char *d = slurp("dict.bin", &dn), *v = slurp("values.bin", &vn);
    int nv = (int)(vn / VALUE);
    LZ4_stream_t *ds = LZ4_createStream(), *w = LZ4_createStream();
    if (slow) LZ4_loadDictSlow(ds, d, (int)dn); else LZ4_loadDict(ds, d, (int)dn);
    long total = code(mode, accel, ds, w, v, nv);
    int pn = mode == 2 ? 0 : (int)dn;
    memcpy(out, d, (size_t)pn);
    long plain = decode(d, pn, nv);
    printf("mode %d accel %d slow %d: ratio %.3f, %.0f B a value, decoded %s\n", mode, accel,
           slow, (double)vn / total, (double)total / nv, plain == (long)vn ? "intact" : "WRONG");
    return plain == (long)vn ? 0 : 1;
}
