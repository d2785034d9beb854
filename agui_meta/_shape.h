/* The shape of a bare content delta, recognized without decoding (plain C, no Python, so
 * that the fuzz target runs it alone; included by _native.c).
 *
 * Nine events in ten are content deltas, and most are exactly one JSON object of three string
 * members: "type", the id ("messageId", or "toolCallId" for TOOL_CALL_ARGS) and "delta", in
 * any order. When nobody reads the events (drain()), the C loop needs only the class, the id
 * and the delta of such a frame, not the event object: shape_delta() finds them, and only
 * when the text is that and nothing else, so that the typed decode would give the event of
 * that class with those two strings and every other field absent. Each string must be free
 * of escapes and control characters (its UTF-8 is then its value; the scan proved it valid);
 * anything else (another member, an escape, a number, a nested value, text after the object)
 * is "not this shape", and the event is decoded as any other.
 *
 * The written form (shape_written) also takes a delta with escapes and a last member
 * "metadata" holding an object: the core then scans the text (which proves the escapes and
 * the object free of what the guards refuse), unescapes the delta (shape_unescape) and decodes
 * the object alone with the typed decode's own type for it.
 */

#ifndef AGUI_META_SHAPE_H
#define AGUI_META_SHAPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_scan.h" /* the SWAR helpers */

typedef struct {
    const unsigned char *type, *id, *delta;
    ptrdiff_t type_len, id_len, delta_len;
    int tool;    /* 1: the id came as "toolCallId", 0: as "messageId" */
    int escaped; /* 1: the delta holds escapes (shape_written only; else always 0) */
    int ascii;   /* 1: the delta is ASCII, without escapes (shape_written only; else 0) */
    const unsigned char *metadata; /* the text of the "metadata" object, or NULL */
    ptrdiff_t metadata_len;
} DeltaShape;

static inline ptrdiff_t
shape_ws(const unsigned char *s, ptrdiff_t n, ptrdiff_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) {
        i++;
    }
    return i;
}

/* The string at s[i] (a quote): its contents' start and length, free of '\\' and of
 * control characters; the position after its closing quote, or -1. */
static inline ptrdiff_t
shape_string(const unsigned char *s, ptrdiff_t n, ptrdiff_t i, const unsigned char **start,
             ptrdiff_t *len)
{
    if (i >= n || s[i] != '"') {
        return -1;
    }
    ptrdiff_t j = ++i;
    while (j < n && s[j] != '"') {
        if (s[j] == '\\' || s[j] < 0x20) {
            return -1;
        }
        j++;
    }
    if (j >= n) {
        return -1;
    }
    *start = s + i;
    *len = j - i;
    return j + 1;
}

static inline int
shape_is(const unsigned char *key, ptrdiff_t len, const char *name)
{
    size_t size = strlen(name);
    return (size_t)len == size && memcmp(key, name, size) == 0;
}

/* The end of the plain string contents at s[i:] (the position of its closing quote), or -1
 * when a backslash or a control character comes first, or no quote. Eight bytes at a time
 * while none is a quote, a backslash or below 0x20. */
static inline ptrdiff_t
shape_plain_end(const unsigned char *s, ptrdiff_t n, ptrdiff_t i)
{
    while (i + 8 <= n) {
        uint64_t w = swar_load(s + i);
        uint64_t m = swar_has(w, '"') | swar_has(w, '\\') |
                     ((w - SWAR_ONES * 0x20) & ~w & SWAR_HIGHS); /* a byte below 0x20 */
        if (m != 0) {
            int at = swar_first(m);
            if (at < 0) {
                break;
            }
            i += at;
            return s[i] == '"' ? i : -1;
        }
        i += 8;
    }
    for (; i < n; i++) {
        if (s[i] == '"') {
            return i;
        }
        if (s[i] == '\\' || s[i] < 0x20) {
            return -1;
        }
    }
    return -1;
}

/* The end of the string contents at s[i:n] (the position of its closing quote), escapes
 * stepped over (*escaped set when there is one), or -1 at a control character or with no
 * closing quote. Eight bytes at a time while none is a quote, a backslash or below 0x20.
 * *high: whether a byte stepped over, other than an escaped one, is not ASCII. */
static inline ptrdiff_t
shape_string_end(const unsigned char *s, ptrdiff_t n, ptrdiff_t i, int *escaped, int *high)
{
    uint64_t bits = 0;
    for (;;) {
        while (i + 8 <= n) {
            uint64_t w = swar_load(s + i);
            if (swar_has(w, '"') | swar_has(w, '\\') | ((w - SWAR_ONES * 0x20) & ~w & SWAR_HIGHS)) {
                break;
            }
            bits |= w;
            i += 8;
        }
        while (i < n && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20) {
            bits |= s[i];
            i++;
        }
        *high = (bits & SWAR_HIGHS) != 0;
        if (i >= n || s[i] < 0x20) {
            return -1;
        }
        if (s[i] == '"') {
            return i;
        }
        *escaped = 1; /* a backslash: it and the byte it escapes */
        i += 2;
    }
}

/* The written form of the shape, as producers write it: prefix ({"type":"<T>","<id key>":")
 * then the id (plain), then ","delta":", the delta (escapes allowed), and either "} or
 * ","metadata": an object and }. 1 when s[0:n] is that, setting the id, the delta, escaped
 * and the metadata's text of *out (not type or tool: the prefix says them); else 0. Of the
 * object, only that it starts with '{' and s ends with "}}" is checked here: the core decodes
 * it alone (which refuses anything but one object), after the scan. */
static int
shape_written(const unsigned char *s, ptrdiff_t n, const char *prefix, ptrdiff_t prefix_len,
              DeltaShape *out)
{
    static const char middle[] = "\",\"delta\":\"";
    static const char member[] = ",\"metadata\":{";
    const ptrdiff_t middle_len = (ptrdiff_t)sizeof(middle) - 1;
    const ptrdiff_t member_len = (ptrdiff_t)sizeof(member) - 1;
    if (n < prefix_len + middle_len + 2 || memcmp(s, prefix, (size_t)prefix_len) != 0 ||
        s[n - 1] != '}') {
        return 0;
    }
    ptrdiff_t id_end = shape_plain_end(s, n - 1, prefix_len);
    if (id_end < 0 || id_end + middle_len > n - 2 ||
        memcmp(s + id_end, middle, (size_t)middle_len) != 0) {
        return 0;
    }
    ptrdiff_t delta_start = id_end + middle_len;
    int escaped = 0, high = 0;
    ptrdiff_t delta_end = shape_string_end(s, n - 1, delta_start, &escaped, &high);
    if (delta_end < 0) {
        return 0;
    }
    out->metadata = NULL;
    out->metadata_len = 0;
    if (delta_end != n - 2) {
        ptrdiff_t at = delta_end + 1;
        if (n - 1 - at < member_len + 1 || memcmp(s + at, member, (size_t)member_len) != 0 ||
            s[n - 2] != '}') {
            return 0;
        }
        out->metadata = s + at + member_len - 1; /* from its '{' */
        out->metadata_len = n - 1 - (at + member_len - 1);
    }
    out->id = s + prefix_len;
    out->id_len = id_end - prefix_len;
    out->delta = s + delta_start;
    out->delta_len = delta_end - delta_start;
    out->escaped = escaped;
    out->ascii = !escaped && !high;
    return 1;
}

static inline int
shape_hex(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The four hex digits at s[0:4] as a code unit, or -1. */
static inline long
shape_unit(const unsigned char *s, const unsigned char *end)
{
    if (end - s < 4) {
        return -1;
    }
    long unit = 0;
    for (int k = 0; k < 4; k++) {
        int h = shape_hex(s[k]);
        if (h < 0) {
            return -1;
        }
        unit = unit * 16 + h;
    }
    return unit;
}

/* The JSON string contents s[0:n] (no quote, no control character: shape_string_end's) with
 * their escapes undone, as UTF-8 into out (room for n bytes: unescaping never lengthens).
 * The length written, or -1 for an escape JSON does not have, or a surrogate escape that is
 * not half of a pair (the typed decode, or the scan, refuses those: the core leaves such
 * text to them). The bytes between escapes are copied as they are (the caller proves them
 * UTF-8). */
static ptrdiff_t
shape_unescape(const unsigned char *s, ptrdiff_t n, unsigned char *out)
{
    const unsigned char *end = s + n;
    unsigned char *o = out;
    while (s < end) {
        const unsigned char *bs = memchr(s, '\\', (size_t)(end - s));
        if (bs == NULL) {
            bs = end;
        }
        memcpy(o, s, (size_t)(bs - s));
        o += bs - s;
        s = bs;
        if (s == end) {
            break;
        }
        if (end - s < 2) {
            return -1;
        }
        unsigned char c = s[1];
        s += 2;
        switch (c) {
        case '"': *o++ = '"'; continue;
        case '\\': *o++ = '\\'; continue;
        case '/': *o++ = '/'; continue;
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u': break;
        default: return -1;
        }
        long cp = shape_unit(s, end);
        if (cp < 0) {
            return -1;
        }
        s += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return -1; /* a low surrogate first */
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            long low = end - s >= 6 && s[0] == '\\' && s[1] == 'u' ? shape_unit(s + 2, end) : -1;
            if (low < 0xDC00 || low > 0xDFFF) {
                return -1; /* a high surrogate alone */
            }
            s += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        if (cp < 0x80) {
            *o++ = (unsigned char)cp;
        }
        else if (cp < 0x800) {
            *o++ = (unsigned char)(0xC0 | (cp >> 6));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else if (cp < 0x10000) {
            *o++ = (unsigned char)(0xE0 | (cp >> 12));
            *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else {
            *o++ = (unsigned char)(0xF0 | (cp >> 18));
            *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    return o - out;
}

/* 1 when s[0:n] is exactly {"type": "...", "<id key>": "...", "delta": "..."} (any order,
 * JSON whitespace between tokens) with plain strings, setting *out; else 0. */
static int
shape_delta(const unsigned char *s, ptrdiff_t n, DeltaShape *out)
{
    int seen_type = 0, seen_id = 0, seen_delta = 0;
    out->escaped = 0;
    out->metadata = NULL;
    out->metadata_len = 0;
    ptrdiff_t i = shape_ws(s, n, 0);
    if (i >= n || s[i] != '{') {
        return 0;
    }
    i++;
    for (int member = 0; member < 3; member++) {
        const unsigned char *key, *value;
        ptrdiff_t key_len, value_len;
        i = shape_string(s, n, shape_ws(s, n, i), &key, &key_len);
        if (i < 0) {
            return 0;
        }
        i = shape_ws(s, n, i);
        if (i >= n || s[i] != ':') {
            return 0;
        }
        i = shape_string(s, n, shape_ws(s, n, i + 1), &value, &value_len);
        if (i < 0) {
            return 0;
        }
        if (shape_is(key, key_len, "type") && !seen_type) {
            seen_type = 1;
            out->type = value;
            out->type_len = value_len;
        }
        else if (shape_is(key, key_len, "delta") && !seen_delta) {
            seen_delta = 1;
            out->delta = value;
            out->delta_len = value_len;
        }
        else if (!seen_id && (shape_is(key, key_len, "messageId") ||
                              shape_is(key, key_len, "toolCallId"))) {
            seen_id = 1;
            out->tool = key_len == 10;
            out->id = value;
            out->id_len = value_len;
        }
        else {
            return 0; /* another member, or one repeated */
        }
        i = shape_ws(s, n, i);
        if (i >= n || s[i] != (member < 2 ? ',' : '}')) {
            return 0;
        }
        i++;
    }
    return shape_ws(s, n, i) == n;
}

#endif /* AGUI_META_SHAPE_H */
