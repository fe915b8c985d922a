/* ldouble.c: the float text handling of the Cairn engine that has to be done
 * in C to be byte-exact with Redis 7.0.
 *
 * Mirrors Redis 7.0 src/util.c: string2ld(), string2d(), ld2string() in
 * LD_STR_HUMAN mode, and the "%.17g" formatting of addReplyDouble()
 * (networking.c), plus the arithmetic of incrbyfloatCommand() (t_string.c)
 * and hincrbyfloatCommand() (t_hash.c).
 *
 * Why C: Redis adds in C `long double` (80-bit x87 extended precision on
 * x86_64, IEEE quad on aarch64) and parses with libc strtod()/strtold(),
 * which accept hex floats, "inf"/"infinity", and round in the platform's
 * way. Rust has no f80 and its float parser accepts a different syntax, so
 * we call the same libc functions Redis does. Redis never calls setlocale()
 * for LC_NUMERIC or LC_CTYPE, so the "C" locale Rust processes run in gives
 * the same strtod()/isspace()/printf() behaviour.
 *
 * Everything here is re-entrant: errno is thread-local and no static state
 * is used.
 */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis: #define MAX_LONG_DOUBLE_CHARS 5*1024 (util.h). It bounds both the
 * accepted input length of string2ld() and the output buffer of
 * ld2string(). */
#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

/* Return codes shared with src/util/num.rs. Keep in sync. */
#define CAIRN_LD_OK 0
#define CAIRN_LD_CUR_NOT_FLOAT 1
#define CAIRN_LD_INCR_NOT_FLOAT 2
#define CAIRN_LD_NAN_OR_INF 3
#define CAIRN_LD_NO_ROOM 4

/* Redis string2ld(): the whole string must be consumed by strtold(), no
 * leading space (strtold would skip it), no NaN, and overflow/underflow to
 * zero are errors while underflow to a denormal is accepted. */
static int cairn_string2ld(const char *s, size_t slen, long double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    long double value;
    char *eptr;

    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' ||
        (size_t)(eptr - buf) != slen ||
        (errno == ERANGE &&
         (value == HUGE_VAL || value == -HUGE_VAL || value == 0)) ||
        errno == EINVAL || isnan(value))
        return 0;

    if (dp) *dp = value;
    return 1;
}

/* Redis ld2string(buf, len, value, LD_STR_HUMAN): "%.17Lf", then trailing
 * zeros after the '.' and a bare trailing '.' are removed, and "-0" becomes
 * "0". Returns the length, or 0 when the buffer is too small (Redis returns 0
 * too; with len == MAX_LONG_DOUBLE_CHARS that cannot happen for a finite
 * long double, whose largest value has 4933 integer digits). */
static size_t cairn_ld2string_human(char *buf, size_t len, long double value) {
    size_t l;

    if (isinf(value)) {
        /* Same explicit spelling as Redis, which does not trust libc here. */
        if (len < 5) return 0;
        if (value > 0) {
            memcpy(buf, "inf", 3);
            l = 3;
        } else {
            memcpy(buf, "-inf", 4);
            l = 4;
        }
    } else {
        int n = snprintf(buf, len, "%.17Lf", value);
        if (n < 0) return 0;
        l = (size_t)n;
        if (l + 1 > len) return 0;
        if (strchr(buf, '.') != NULL) {
            char *p = buf + l - 1;
            while (*p == '0') {
                p--;
                l--;
            }
            if (*p == '.') l--;
        }
        if (l == 2 && buf[0] == '-' && buf[1] == '0') {
            buf[0] = '0';
            l = 1;
        }
    }
    buf[l] = '\0';
    return l;
}

/* Classify a string as string2ld() sees it, for HINCRBYFLOAT, which rejects
 * an invalid increment ("value is not a valid float") and an infinite one
 * ("value is NaN or Infinity") before looking at the key.
 * Returns 0 invalid, 1 finite, 2 infinite. */
int cairn_ld_class(const char *s, size_t slen) {
    long double v;
    if (!cairn_string2ld(s, slen, &v)) return 0;
    return isinf(v) ? 2 : 1;
}

/* current (NULL means 0, as for a missing key or field) + increment, both
 * parsed with string2ld(), current first (the order of Redis's checks), then
 * formatted with ld2string(LD_STR_HUMAN).
 * On CAIRN_LD_NO_ROOM, *outlen holds the needed length. */
int cairn_ld_incr(const char *cur, size_t curlen, const char *incr,
                  size_t incrlen, char *out, size_t outcap, size_t *outlen) {
    long double value = 0, inc;
    char buf[MAX_LONG_DOUBLE_CHARS];
    size_t l;

    *outlen = 0;
    if (cur != NULL && !cairn_string2ld(cur, curlen, &value))
        return CAIRN_LD_CUR_NOT_FLOAT;
    if (!cairn_string2ld(incr, incrlen, &inc)) return CAIRN_LD_INCR_NOT_FLOAT;

    value += inc;
    if (isnan(value) || isinf(value)) return CAIRN_LD_NAN_OR_INF;

    l = cairn_ld2string_human(buf, sizeof(buf), value);
    *outlen = l;
    if (l > outcap) return CAIRN_LD_NO_ROOM;
    memcpy(out, buf, l);
    return CAIRN_LD_OK;
}

/* Redis string2d() (used by getDoubleFromObject(), hence ZADD scores,
 * INCRBYFLOAT-free double arguments, etc.). Redis calls strtod() directly on
 * the NUL-terminated sds; we copy to get the terminator. An embedded NUL
 * stops strtod() early and so fails the "whole string consumed" test, as in
 * Redis. Returns 1 and sets *dp on success, 0 otherwise. */
int cairn_string2d(const char *s, size_t slen, double *dp) {
    char stackbuf[256];
    char *buf = stackbuf;
    char *eptr;
    double value;
    int ok;

    if (slen == 0) return 0;
    if (slen >= sizeof(stackbuf)) {
        buf = malloc(slen + 1);
        if (buf == NULL) return 0;
    }
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtod(buf, &eptr);
    ok = !(isspace((unsigned char)buf[0]) || (size_t)(eptr - buf) != slen ||
           (errno == ERANGE &&
            (value == HUGE_VAL || value == -HUGE_VAL ||
             fpclassify(value) == FP_ZERO)) ||
           isnan(value));
    if (buf != stackbuf) free(buf);
    if (ok) *dp = value;
    return ok;
}

/* snprintf(buf, cap, "%.17g", v): how Redis 7.0 addReplyDouble() spells a
 * finite double. Returns the length snprintf wanted (may exceed cap - 1, in
 * which case the caller retries with a larger buffer). */
size_t cairn_fmt_g17(double v, char *out, size_t cap) {
    int n = snprintf(out, cap, "%.17g", v);
    return n < 0 ? 0 : (size_t)n;
}

/* The score test of Redis's sortCommandGeneric() (sort.c): strtod() over
 * the value as a C string (so a NUL ends it, leading space is skipped and
 * an empty string is 0), failing if anything is left before the NUL, on
 * ERANGE (overflow or underflow), or on NaN. Returns 1 and stores the
 * value on success, 0 otherwise. Long values are copied to the heap. */
int cairn_sort_strtod(const char *s, size_t slen, double *dp) {
    char stackbuf[128];
    char *buf = stackbuf;
    char *eptr;
    double value;
    int ok;

    if (slen >= sizeof(stackbuf)) {
        buf = malloc(slen + 1);
        if (buf == NULL) return 0;
    }
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    errno = 0;
    value = strtod(buf, &eptr);
    ok = !(eptr[0] != '\0' || errno == ERANGE || isnan(value));
    if (buf != stackbuf) free(buf);
    if (ok) *dp = value;
    return ok;
}
