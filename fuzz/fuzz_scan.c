/* libFuzzer target for the C core's JSON scan (agui_meta/_scan.h), built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by fuzz/run.sh (or tests/test_fuzz.py).
 *
 * Besides memory safety and undefined behaviour, it checks what the scan promises about
 * nesting, which needs no Python: text it calls clean nests no deeper than MAX_NESTING
 * brackets outside strings. (That a clean scan means fast_decode gives the typed decode is
 * checked with Python by fuzz/fuzz_native.py and tests/test_native.py.)
 */

#include <stdint.h>
#include <stdlib.h>

#include "../agui_meta/_scan.h"

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
    free(copy);
    return 0;
}
