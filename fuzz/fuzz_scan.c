/* libFuzzer target for the C core's JSON scan (agui_meta/_scan.h) and its framing of the
 * common SSE and JSON-lines shapes (agui_meta/_frame.h, without Python), built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by fuzz/run.sh (or tests/test_fuzz.py).
 *
 * Besides memory safety and undefined behaviour, it checks what the scan promises about
 * nesting, which needs no Python: text it calls clean nests no deeper than MAX_NESTING
 * brackets outside strings. (That a clean scan means fast_decode gives the typed decode is
 * checked with Python by fuzz/fuzz_native.py and tests/test_native.py.) Of the framing, that
 * a run it accepts is exactly its blocks or lines rebuilt from the payloads it cut, each
 * payload free of CR and LF, within the limit, valid UTF-8 (by the scan's own sequence check,
 * so only memory safety there) and, for JSON lines, not blank; that it equals its Python
 * specification is checked by tests/test_native_framing.py. Of the shape of a bare content
 * delta (agui_meta/_shape.h), that what it accepts is a JSON object whose id and delta are
 * plain strings inside the text: free of quotes, backslashes and control characters; for the
 * written form, exactly the prefix, the id, the middle, the delta (escapes allowed: unescaping
 * it stays within its length) and either the end or a metadata object, which the scan finds
 * clean when there is neither escape nor metadata and the two strings are UTF-8 (the core then
 * skips the scan; that the typed decode agrees is checked with Python by tests/test_native.py).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../agui_meta/_scan.h"
#define FRAME_NO_PYTHON
#include "../agui_meta/_frame.h"
#include "../agui_meta/_shape.h"

static void
check_plain(const unsigned char *s, size_t n, const unsigned char *p, ptrdiff_t len)
{
    if (len < 0 || p < s || p + len > s + n) {
        abort();
    }
    for (ptrdiff_t i = 0; i < len; i++) {
        if (p[i] == '"' || p[i] == '\\' || p[i] < 0x20) {
            abort();
        }
    }
}

static void
check_shape(const unsigned char *s, size_t n)
{
    DeltaShape sh;
    if (shape_delta(s, (ptrdiff_t)n, &sh)) {
        check_plain(s, n, sh.type, sh.type_len);
        check_plain(s, n, sh.id, sh.id_len);
        check_plain(s, n, sh.delta, sh.delta_len);
        if (sh.delta[sh.delta_len] != '"' || sh.id[sh.id_len] != '"') {
            abort();
        }
    }
    static const char prefix[] = "{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"";
    const ptrdiff_t prefix_len = (ptrdiff_t)sizeof(prefix) - 1;
    if (shape_written(s, (ptrdiff_t)n, prefix, prefix_len, &sh)) {
        check_plain(s, n, sh.id, sh.id_len);
        if (memcmp(s, prefix, (size_t)prefix_len) != 0 || sh.id != s + prefix_len ||
            memcmp(sh.id + sh.id_len, "\",\"delta\":\"", 11) != 0 ||
            sh.delta != sh.id + sh.id_len + 11 || sh.delta_len < 0 ||
            sh.delta + sh.delta_len >= s + n || sh.delta[sh.delta_len] != '"') {
            abort();
        }
        /* the delta: one string's contents, escapes stepped over, escaped said truly */
        int backslash = 0;
        for (ptrdiff_t i = 0; i < sh.delta_len; i++) {
            if (sh.delta[i] < 0x20 || sh.delta[i] == '"') {
                abort();
            }
            if (sh.delta[i] == '\\') {
                backslash = 1;
                i++;
            }
        }
        if (backslash != sh.escaped) {
            abort();
        }
        if (sh.metadata == NULL) {
            if (sh.delta + sh.delta_len + 2 != s + n || memcmp(sh.delta + sh.delta_len, "\"}", 2)) {
                abort();
            }
        }
        else if (memcmp(sh.delta + sh.delta_len, "\",\"metadata\":{", 14) != 0 ||
                 sh.metadata != sh.delta + sh.delta_len + 13 || sh.metadata_len < 2 ||
                 sh.metadata + sh.metadata_len + 1 != s + n || s[n - 1] != '}' ||
                 sh.metadata[sh.metadata_len - 1] != '}') {
            abort();
        }
        if (sh.escaped) {
            /* undone escapes never lengthen the text: the buffer has exactly its room */
            unsigned char *out = malloc((size_t)sh.delta_len + 1);
            if (out == NULL || shape_unescape(sh.delta, sh.delta_len, out) > sh.delta_len) {
                abort();
            }
            free(out);
        }
        else if (sh.metadata == NULL) {
            /* the core skips the scan of such text when its strings are UTF-8: the scan must
             * find it clean */
            if (utf8_valid(sh.id, sh.id_len) && utf8_valid(sh.delta, sh.delta_len) &&
                !scan_clean(s, (ptrdiff_t)n)) {
                abort();
            }
            /* the plain written form is one of the shapes the general recognizer takes */
            DeltaShape any;
            if (!shape_delta(s, (ptrdiff_t)n, &any) || any.id_len != sh.id_len ||
                any.delta_len != sh.delta_len) {
                abort();
            }
        }
    }
}

static int
max_depth(const unsigned char *s, size_t n)
{
    int depth = 0, deepest = 0, in_string = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (in_string) {
            if (c == '\\') {
                i++;
            }
            else if (c == '"') {
                in_string = 0;
            }
        }
        else if (c == '"') {
            in_string = 1;
        }
        else if (c == '[' || c == '{') {
            if (++depth > deepest) {
                deepest = depth;
            }
        }
        else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return deepest;
}

static void
check_payload(const unsigned char *p, ptrdiff_t len, ptrdiff_t limit, int jsonl)
{
    int blank = 1;
    for (ptrdiff_t i = 0; i < len; i++) {
        if (p[i] == '\n' || p[i] == '\r') {
            abort();
        }
        if (p[i] != ' ' && p[i] != '\t') {
            blank = 0;
        }
    }
    if ((jsonl && (blank || len > limit)) || (!jsonl && len + 6 > limit)) {
        abort();
    }
}

/* Both framings of s[0:n], a copy of exactly n bytes, with the limit limit. */
static void
check_framing(const unsigned char *s, ptrdiff_t n, ptrdiff_t limit)
{
    ptrdiff_t end = frame_sse_end(s, n), pos = 0, len = 0;
    if (end >= 0) {
        if (end < 8 || end > n || s[end - 1] != '\n' || s[end - 2] != '\n') {
            abort();
        }
        while (pos < end) {
            ptrdiff_t next = frame_sse_block(s, end, pos, limit, &len);
            if (next < 0) {
                break;
            }
            /* The block is rebuilt from its payload: "data: " payload "\n\n". */
            if (next != pos + 6 + len + 2 || next > end || memcmp(s + pos, "data: ", 6) != 0 ||
                s[next - 1] != '\n' || s[next - 2] != '\n') {
                abort();
            }
            check_payload(s + pos + 6, len, limit, 0);
            pos = next;
        }
    }
    end = frame_jsonl_end(s, n);
    pos = 0;
    if (end >= 0) {
        if (end < 1 || end > n || s[end - 1] != '\n') {
            abort();
        }
        while (pos < end) {
            ptrdiff_t next = frame_jsonl_line(s, end, pos, limit, &len);
            if (next < 0) {
                break;
            }
            if (next != pos + len + 1 || next > end || s[next - 1] != '\n') {
                abort();
            }
            check_payload(s + pos, len, limit, 1);
            pos = next;
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes: ASan reports any read past the end. */
    unsigned char *copy = malloc(size ? size : 1);
    if (copy == NULL) {
        return 0;
    }
    memcpy(copy, data, size);
    int clean = scan_clean(copy, (ptrdiff_t)size);
    if (clean && max_depth(copy, size) > MAX_NESTING) {
        abort();
    }
    check_shape(copy, size);
    /* The first byte picks the framing's limit (1 to 256, or unbounded), the rest is the chunk. */
    if (size > 0) {
        ptrdiff_t limit = copy[0] == 255 ? PTRDIFF_MAX : (ptrdiff_t)copy[0] + 1;
        unsigned char *chunk = malloc(size - 1 ? size - 1 : 1);
        if (chunk == NULL) {
            free(copy);
            return 0;
        }
        memcpy(chunk, copy + 1, size - 1);
        check_framing(chunk, (ptrdiff_t)size - 1, limit);
        free(chunk);
    }
    free(copy);
    return 0;
}
