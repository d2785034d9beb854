/* The scan of agui_meta._native (see _native.c): plain C, no Python, so that the fuzz target
 * (fuzz/fuzz_scan.c) runs it alone under the sanitizers. */

#ifndef AGUI_META_SCAN_H
#define AGUI_META_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_NESTING 128
#define MAX_KEYS 32
#define MAX_TRACKED 512
#define MAX_DIGITS 18

typedef struct {
    ptrdiff_t start;
    ptrdiff_t len;
} span_t;

/* Length of a valid UTF-8 sequence starting at s[0] (a non-ASCII lead byte), or 0. */
static ptrdiff_t
utf8_seq(const unsigned char *s, ptrdiff_t left)
{
    unsigned char c = s[0];
    if (c >= 0xC2 && c <= 0xDF) {
        return (left >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) {
            return 0;
        }
        if (c == 0xE0 && s[1] < 0xA0) {
            return 0; /* overlong */
        }
        if (c == 0xED && s[1] >= 0xA0) {
            return 0; /* a surrogate */
        }
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
            (s[3] & 0xC0) != 0x80) {
            return 0;
        }
        if (c == 0xF0 && s[1] < 0x90) {
            return 0; /* overlong */
        }
        if (c == 0xF4 && s[1] >= 0x90) {
            return 0; /* above U+10FFFF */
        }
        return 4;
    }
    return 0;
}

/* Eight bytes at a time (SWAR): a word read from s (any alignment), and whether any of its
 * bytes is zero, or equals b. The zero-byte test is exact for "any": a borrow can only
 * propagate from a byte that is zero already. */
#define SWAR_ONES 0x0101010101010101ULL
#define SWAR_HIGHS 0x8080808080808080ULL

static inline uint64_t
swar_load(const unsigned char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static inline uint64_t
swar_zero(uint64_t w)
{
    return (w - SWAR_ONES) & ~w & SWAR_HIGHS;
}

static inline uint64_t
swar_has(uint64_t w, unsigned char b)
{
    return swar_zero(w ^ (SWAR_ONES * b));
}

/* The place in its word of the first byte whose flag (the high bit) m has set, m not zero:
 * exact for the masks above (a false flag only ever stands above a true one). Where the
 * bytes' order in a word is not known to be little-endian, -1: the caller steps byte by
 * byte. */
static inline int
swar_first(uint64_t m)
{
#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) &&                      \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_ctzll(m) >> 3;
#else
    (void)m;
    return -1;
#endif
}

/* Whether s[0:n] is valid UTF-8, and free of CR when no_cr (eight ASCII bytes at a time). */
static inline int
utf8_clean(const unsigned char *s, ptrdiff_t n, int no_cr)
{
    ptrdiff_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w = swar_load(s + i);
            if (!((w & SWAR_HIGHS) | (no_cr ? swar_has(w, '\r') : 0))) {
                i += 8;
                continue;
            }
        }
        if (s[i] < 0x80) {
            if (no_cr && s[i] == '\r') {
                return 0;
            }
            i++;
            continue;
        }
        ptrdiff_t len = utf8_seq(s + i, n - i);
        if (len == 0) {
            return 0;
        }
        i += len;
    }
    return 1;
}

/* Whether s[0:n] is valid UTF-8. */
static int
utf8_valid(const unsigned char *s, ptrdiff_t n)
{
    return utf8_clean(s, n, 0);
}

/* 1 for a byte that is plain inside a JSON string: ASCII, neither '"' nor '\\'. */
static const unsigned char PLAIN[256] = {
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
    P16, P16,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20: '"' at 0x22 */
    P16, P16,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50: '\\' at 0x5C */
    P16, P16,
#undef P16
    /* 0x80-0xFF: 0 (UTF-8, checked sequence by sequence) */
};

static int
hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* 1: proven clean (see the module comment); 0: not proven. Never reads past s[n - 1]. */
static int
scan_clean(const unsigned char *s, ptrdiff_t n)
{
    span_t keys[MAX_TRACKED];
    ptrdiff_t first_key[MAX_NESTING + 1]; /* per open level: its first key in keys[] */
    unsigned char is_object[MAX_NESTING + 1];
    unsigned char want_key[MAX_NESTING + 1];
    ptrdiff_t nkeys = 0;
    int depth = 0;
    ptrdiff_t i = 0;
    ptrdiff_t digits = 0;

    while (i < n) {
        unsigned char c = s[i];
        if (c >= '0' && c <= '9') {
            if (++digits > MAX_DIGITS) {
                return 0;
            }
            i++;
            continue;
        }
        digits = 0;
        if (c == '"') {
            ptrdiff_t start = ++i;
            int escaped = 0;
            for (;;) {
                /* The run of plain characters (ASCII, not a quote or a backslash), eight at
                 * a time: a word's first other byte is found at once. */
                while (i + 8 <= n) {
                    uint64_t w = swar_load(s + i);
                    uint64_t m = (w & SWAR_HIGHS) | swar_has(w, '"') | swar_has(w, '\\');
                    if (m != 0) {
                        int at = swar_first(m);
                        i += at < 0 ? 0 : at;
                        break;
                    }
                    i += 8;
                }
                while (i < n && PLAIN[s[i]]) {
                    i++;
                }
                if (i >= n) {
                    return 0; /* unterminated: not JSON */
                }
                c = s[i];
                if (c == '"') {
                    break;
                }
                if (c == '\\') {
                    escaped = 1;
                    if (i + 1 >= n) {
                        return 0;
                    }
                    unsigned char e = s[i + 1];
                    if (e == 'u') {
                        if (i + 5 >= n) {
                            return 0;
                        }
                        int a = hexval(s[i + 2]), b = hexval(s[i + 3]);
                        int d = hexval(s[i + 4]), f = hexval(s[i + 5]);
                        if (a < 0 || b < 0 || d < 0 || f < 0) {
                            return 0;
                        }
                        int code = (a << 12) | (b << 8) | (d << 4) | f;
                        if ((code >= 0xD800 && code <= 0xDFFF) || code == 0x3A) {
                            return 0;
                        }
                        i += 6;
                        continue;
                    }
                    if (e == '\\' && i + 2 < n && s[i + 2] == 'u') {
                        return 0; /* the text "\\u...": the Python check reads it as an escape */
                    }
                    i += 2;
                    continue;
                }
                if (c < 0x80) {
                    i++;
                    continue;
                }
                ptrdiff_t len = utf8_seq(s + i, n - i);
                if (len == 0) {
                    return 0;
                }
                i += len;
            }
            /* s[i] is the closing quote */
            if (depth > 0 && is_object[depth] && want_key[depth]) {
                if (escaped) {
                    return 0;
                }
                ptrdiff_t len = i - start;
                ptrdiff_t from = first_key[depth];
                if (nkeys - from >= MAX_KEYS || nkeys >= MAX_TRACKED) {
                    return 0;
                }
                for (ptrdiff_t j = from; j < nkeys; j++) {
                    if (keys[j].len == len && memcmp(s + keys[j].start, s + start, len) == 0) {
                        return 0; /* a repeated key */
                    }
                }
                keys[nkeys].start = start;
                keys[nkeys].len = len;
                nkeys++;
                want_key[depth] = 0;
            }
            i++;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth >= MAX_NESTING) {
                return 0;
            }
            depth++;
            is_object[depth] = (c == '{');
            want_key[depth] = (c == '{');
            first_key[depth] = nkeys;
        }
        else if (c == '}' || c == ']') {
            if (depth == 0) {
                return 0;
            }
            nkeys = first_key[depth];
            depth--;
        }
        else if (c == ',') {
            if (depth > 0 && is_object[depth]) {
                want_key[depth] = 1;
            }
        }
        else if (c >= 0x80) {
            return 0; /* outside strings, not JSON */
        }
        i++;
    }
    return 1;
}

#endif /* AGUI_META_SCAN_H */
