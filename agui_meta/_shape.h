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
    int tool; /* 1: the id came as "toolCallId", 0: as "messageId" */
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

/* Whether s[i:end] holds no quote, backslash or control character. */
static inline int
shape_plain_all(const unsigned char *s, ptrdiff_t i, ptrdiff_t end)
{
    for (; i + 8 <= end; i += 8) {
        uint64_t w = swar_load(s + i);
        if (swar_has(w, '"') | swar_has(w, '\\') | ((w - SWAR_ONES * 0x20) & ~w & SWAR_HIGHS)) {
            return 0;
        }
    }
    for (; i < end; i++) {
        if (s[i] == '"' || s[i] == '\\' || s[i] < 0x20) {
            return 0;
        }
    }
    return 1;
}

/* The written form of the shape, as producers write it: prefix ({"type":"<T>","<id key>":")
 * then the id, then ","delta":", the delta and "}, with no whitespace. 1 when s[0:n] is
 * exactly that, setting the id and delta of *out (not type or tool: the prefix says them);
 * else 0. */
static int
shape_written(const unsigned char *s, ptrdiff_t n, const char *prefix, ptrdiff_t prefix_len,
              DeltaShape *out)
{
    static const char middle[] = "\",\"delta\":\"";
    const ptrdiff_t middle_len = (ptrdiff_t)sizeof(middle) - 1;
    if (n < prefix_len + middle_len + 2 || memcmp(s, prefix, (size_t)prefix_len) != 0 ||
        s[n - 1] != '}' || s[n - 2] != '"') {
        return 0;
    }
    ptrdiff_t id_end = shape_plain_end(s, n - 2, prefix_len);
    if (id_end < 0 || id_end + middle_len > n - 2 ||
        memcmp(s + id_end, middle, (size_t)middle_len) != 0) {
        return 0;
    }
    ptrdiff_t delta_start = id_end + middle_len;
    if (!shape_plain_all(s, delta_start, n - 2)) {
        return 0; /* a quote before the last two bytes (not one string), an escape... */
    }
    out->id = s + prefix_len;
    out->id_len = id_end - prefix_len;
    out->delta = s + delta_start;
    out->delta_len = n - 2 - delta_start;
    return 1;
}

/* 1 when s[0:n] is exactly {"type": "...", "<id key>": "...", "delta": "..."} (any order,
 * JSON whitespace between tokens) with plain strings, setting *out; else 0. */
static int
shape_delta(const unsigned char *s, ptrdiff_t n, DeltaShape *out)
{
    int seen_type = 0, seen_id = 0, seen_delta = 0;
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
