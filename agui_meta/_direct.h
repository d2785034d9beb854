/* The events off the fast path through the default chain's stages' own handlers, without
 * their feeds (included once, by _native.c, after _steps.h).
 *
 * For an event the fast path does not take, the C loop gives it to the first stage's feed,
 * and each feed then tests what it is, finds its handler and calls the next stage's feed.
 * When the run of stages is the default chain's (see _driver._routes), each feed does, for
 * the event classes routed, exactly this:
 *
 *   ExpandChunks.feed   nothing, when no chunk stream is open;
 *   Verify.feed         its handler for the event's type (if any), when the verifier is not
 *                       gated (the run started and did not end);
 *   Accumulate.feed     its handler, whose Update it emits (a store that evicts nothing);
 *   Ledger.feed         the Update emitted first; then, the event's type counted in the open
 *                       run, or the ledger's handler called with the Update as its item.
 *
 * direct_route() checks those conditions before anything is done, then calls the handlers
 * (the same Python methods: every rule, report and error is theirs) in that order. Otherwise
 * it does nothing and the event goes through the feeds.
 */

#ifndef AGUI_META_DIRECT_H
#define AGUI_META_DIRECT_H

#include <Python.h>

static PyObject *s_counts, *s_item;

/* The route: (chunks or None, verify, verify's handler or None, accumulate's handler,
 * ledger, the type the ledger counts or None, the ledger's handler or None). */
enum { D_CHUNKS, D_VERIFY, D_VERIFY_HANDLER, D_ACCUMULATE_HANDLER, D_LEDGER, D_KIND,
       D_LEDGER_HANDLER, D_SIZE };

/* The names read here, once. 0, or -1 with an exception. */
static int
direct_names(void)
{
    if (s_counts == NULL) {
        s_counts = PyUnicode_InternFromString("_counts");
        s_item = PyUnicode_InternFromString("_item");
        if (s_counts == NULL || s_item == NULL) {
            Py_CLEAR(s_counts);
            return -1;
        }
    }
    return 0;
}

/* Whether the conditions hold (1), not (0), or -1 with an exception. Changes nothing. */
static int
direct_check(PyObject *route, PyObject *update_cls)
{
    if (direct_names() < 0) {
        return -1;
    }
    PyObject *chunks = PyTuple_GET_ITEM(route, D_CHUNKS);
    if (chunks != Py_None) {
        PyObject *lanes = PyObject_GetAttr(chunks, s_lanes);
        if (lanes == NULL) {
            return -1;
        }
        Py_ssize_t open = dict_len(lanes);
        Py_DECREF(lanes);
        if (open != 0) {
            return 0;
        }
    }
    int ok = attr_false(PyTuple_GET_ITEM(route, D_VERIFY), s_gate);
    if (ok <= 0) {
        return ok;
    }
    PyObject *ledger = PyTuple_GET_ITEM(route, D_LEDGER);
    PyObject *wrappers = PyObject_GetAttr(ledger, s_wrappers);
    if (wrappers == NULL) {
        return -1;
    }
    int known = PySet_CheckExact(wrappers) ? PySet_Contains(wrappers, update_cls) : 0;
    Py_DECREF(wrappers);
    if (known <= 0) {
        return known;
    }
    if (PyTuple_GET_ITEM(route, D_KIND) != Py_None) {
        PyObject *counts = PyObject_GetAttr(ledger, s_counts);
        if (counts == NULL) {
            return -1;
        }
        int open = PyDict_CheckExact(counts);
        Py_DECREF(counts);
        if (!open) {
            return 0; /* no run open: the ledger opens one first */
        }
    }
    return 1;
}

/* The verifier's and the accumulator's handlers, the conditions held. 1 with *out the
 * Update (a new reference); 0: not this way (nothing done); -1 with an exception (raised by
 * a handler: as it would from the feeds). */
static int
direct_route(PyObject *event, PyObject *route, PyObject *update_cls, PyObject **out)
{
    int ok = direct_check(route, update_cls);
    if (ok <= 0) {
        return ok;
    }
    PyObject *verify = PyTuple_GET_ITEM(route, D_VERIFY_HANDLER);
    if (verify != Py_None) {
        PyObject *back = PyObject_CallOneArg(verify, event);
        if (back == NULL) {
            return -1;
        }
        Py_DECREF(back);
    }
    *out = PyObject_CallOneArg(PyTuple_GET_ITEM(route, D_ACCUMULATE_HANDLER), event);
    return *out == NULL ? -1 : 1;
}

/* The ledger's part, once the Update was emitted. 0, or -1 with an exception. */
static int
direct_after(PyObject *event, PyObject *route, PyObject *update)
{
    PyObject *ledger = PyTuple_GET_ITEM(route, D_LEDGER), *kind = PyTuple_GET_ITEM(route, D_KIND);
    if (kind != Py_None) {
        PyObject *counts = PyObject_GetAttr(ledger, s_counts);
        if (counts == NULL) {
            return -1;
        }
        int status;
        if (PyDict_CheckExact(counts)) {
            status = count_one(counts, kind);
        }
        else {
            PyErr_SetString(PyExc_SystemError, "the ledger's run closed during the event");
            status = -1;
        }
        Py_DECREF(counts);
        return status;
    }
    if (PyObject_SetAttr(ledger, s_item, update) < 0) {
        return -1;
    }
    PyObject *back = PyObject_CallOneArg(PyTuple_GET_ITEM(route, D_LEDGER_HANDLER), event);
    Py_XDECREF(back);
    return back == NULL ? -1 : 0;
}

#endif /* AGUI_META_DIRECT_H */
