/* The framing of the common shapes of a chunk, for the SSE and JSON-lines decoders
 * (agui_meta/_framing/_sse.py and _jsonl.py), included by _native.c.
 *
 * Both functions take a chunk that starts at a line start and either prove that all of it up
 * to its last complete block (SSE) or line (JSON lines) is of the one common shape, giving
 * the payloads and where the run ends, or return None: then the Python decoder frames the
 * chunk itself, so every unusual case (CR, other fields, comments, blank lines, a line over
 * max_frame_size, bad UTF-8) gets the Python path's frames and errors. Their Python
 * specification is sse_run and jsonl_run in _framing/_common.py.
 */

#ifndef AGUI_META_FRAME_H
#define AGUI_META_FRAME_H

#include <stddef.h>
#include <string.h>

#include "_scan.h"

/* The C part, without Python (fuzz/fuzz_scan.c includes it with FRAME_NO_PYTHON). */

/* Whether s[0:n] is valid UTF-8 free of CR. */
static int
frame_clean(const unsigned char *s, ptrdiff_t n)
{
    return utf8_clean(s, n, 1);
}

/* SSE: the end of the run a chunk may hold, just after its last "\n\n"; -1 when below 8. */
static ptrdiff_t
frame_sse_end(const unsigned char *s, ptrdiff_t n)
{
    ptrdiff_t end = n;
    while (end >= 2 && !(s[end - 1] == '\n' && s[end - 2] == '\n')) {
        end--;
    }
    return end < 8 ? -1 : end;
}

/* SSE: the block at pos (< end, as frame_sse_end gave it): when it is "data: <payload>\n\n",
 * the payload free of CR and LF, valid UTF-8, with len + 6 <= limit, sets *len and returns the
 * position after it (payload at pos + 6); else -1. */
static ptrdiff_t
frame_sse_block(const unsigned char *s, ptrdiff_t end, ptrdiff_t pos, ptrdiff_t limit,
                ptrdiff_t *len)
{
    if (end - pos < 8 || memcmp(s + pos, "data: ", 6) != 0) {
        return -1;
    }
    /* s[end - 2] is LF and pos + 6 <= end - 2: found, at most at end - 2. */
    const unsigned char *lf = memchr(s + pos + 6, '\n', (size_t)(end - pos - 6));
    *len = lf - (s + pos + 6);
    if (lf[1] != '\n' || *len > limit - 6 || !frame_clean(s + pos + 6, *len)) {
        return -1;
    }
    return lf - s + 2;
}

/* JSON lines: the end of the run a chunk may hold, just after its last LF; -1 when none. */
static ptrdiff_t
frame_jsonl_end(const unsigned char *s, ptrdiff_t n)
{
    ptrdiff_t end = n;
    while (end >= 1 && s[end - 1] != '\n') {
        end--;
    }
    return end < 1 ? -1 : end;
}

/* JSON lines: the line at pos (< end, as frame_jsonl_end gave it): when it is free of CR, not
 * only spaces and tabs, valid UTF-8, of at most limit bytes, sets *len and returns the
 * position after its LF; else -1. */
static ptrdiff_t
frame_jsonl_line(const unsigned char *s, ptrdiff_t end, ptrdiff_t pos, ptrdiff_t limit,
                 ptrdiff_t *len)
{
    const unsigned char *lf = memchr(s + pos, '\n', (size_t)(end - pos));
    ptrdiff_t n = lf - (s + pos), i = 0;
    while (i < n && (s[pos + i] == ' ' || s[pos + i] == '\t')) {
        i++;
    }
    if (i == n || n > limit || !frame_clean(s + pos, n)) {
        return -1;
    }
    *len = n;
    return lf - s + 1;
}

#ifndef FRAME_NO_PYTHON

#include <Python.h>

static int
frame_args(PyObject *const *args, Py_ssize_t nargs, const char *name, Py_ssize_t *limit)
{
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyLong_CheckExact(args[1])) {
        PyErr_Format(PyExc_TypeError, "%s(chunk: bytes, limit: int)", name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow > 0 || v > PY_SSIZE_T_MAX) {
        *limit = PY_SSIZE_T_MAX;
    }
    else if (overflow < 0 || v < 1) {
        *limit = 0;
    }
    else {
        *limit = (Py_ssize_t)v;
    }
    return 0;
}

static PyObject *
frame_result(PyObject *payloads, Py_ssize_t end)
{
    PyObject *at = PyLong_FromSsize_t(end);
    if (at == NULL) {
        Py_DECREF(payloads);
        return NULL;
    }
    PyObject *out = PyTuple_New(2);
    if (out == NULL) {
        Py_DECREF(payloads);
        Py_DECREF(at);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, payloads);
    PyTuple_SET_ITEM(out, 1, at);
    return out;
}

/* sse_run(chunk, limit): chunk[:end], end just after its last "\n\n", is exactly blocks
 * "data: <payload>\n\n", each payload free of CR and LF, valid UTF-8, with len + 6 <= limit:
 * ([payload, ...], end); else None. */
typedef ptrdiff_t (*frame_end_fn)(const unsigned char *, ptrdiff_t);
typedef ptrdiff_t (*frame_step_fn)(const unsigned char *, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                                   ptrdiff_t *);

/* ([payload, ...], end) of the run of chunk, or None; offset: where a payload starts in its
 * block (6 for SSE's "data: ", 0 for a JSON line). */
static PyObject *
frame_run(PyObject *const *args, Py_ssize_t nargs, const char *name, frame_end_fn end_of,
          frame_step_fn step, ptrdiff_t offset)
{
    Py_ssize_t limit;
    if (frame_args(args, nargs, name, &limit) < 0) {
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    ptrdiff_t end = end_of(s, PyBytes_GET_SIZE(args[0]));
    if (end < 0) {
        Py_RETURN_NONE;
    }
    PyObject *payloads = PyList_New(0);
    if (payloads == NULL) {
        return NULL;
    }
    /* Bytes only, never in a cycle: untracked, as _speedups.new_list's (a run's payloads stay
     * the context's while a pipeline waits for its next chunk, see _driver._RunFrames). */
    PyObject_GC_UnTrack(payloads);
    ptrdiff_t pos = 0, len = 0;
    while (pos < end) {
        ptrdiff_t next = step(s, end, pos, limit, &len);
        if (next < 0) {
            Py_DECREF(payloads);
            Py_RETURN_NONE;
        }
        PyObject *payload = PyBytes_FromStringAndSize((const char *)s + pos + offset, len);
        if (payload == NULL || PyList_Append(payloads, payload) < 0) {
            Py_XDECREF(payload);
            Py_DECREF(payloads);
            return NULL;
        }
        Py_DECREF(payload);
        pos = next;
    }
    return frame_result(payloads, end);
}

/* sse_run(chunk, limit): chunk[:end], end just after its last "\n\n", is exactly blocks
 * "data: <payload>\n\n", each payload free of CR and LF, valid UTF-8, with len + 6 <= limit:
 * ([payload, ...], end); else None. */
static PyObject *
frame_sse_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return frame_run(args, nargs, "sse_run", frame_sse_end, frame_sse_block, 6);
}

/* jsonl_run(chunk, limit): chunk[:end], end just after its last LF, is exactly lines each
 * free of CR, not only spaces and tabs (so not empty), valid UTF-8, of at most limit bytes:
 * ([line, ...], end); else None. */
static PyObject *
frame_jsonl_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return frame_run(args, nargs, "jsonl_run", frame_jsonl_end, frame_jsonl_line, 0);
}

#endif /* FRAME_NO_PYTHON */

#endif
