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
 *                       gated (the run started and did not end), or for RUN_STARTED, which
 *                       its gate lets through (the route's verify is None);
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

/* The route: (ROUTE_DIRECT, chunks or None, verify or None, verify's handler or None,
 * accumulate's handler, ledger, the type the ledger counts or None, the ledger's handler or
 * None, the verifier, the accumulator). The handlers are the stages' plain functions, called
 * with their stage: one route per event class and pipeline holds no bound method of its own,
 * which the cyclic collector would walk for as long as the pipeline lives. */
enum { D_ROUTE, D_CHUNKS, D_VERIFY, D_VERIFY_HANDLER, D_ACCUMULATE_HANDLER, D_LEDGER, D_KIND,
       D_LEDGER_HANDLER, D_VERIFIER, D_ACCUMULATOR, D_SIZE };

/* func(self, arg), as the bound method would be called (a new reference, or NULL). */
static PyObject *
call_method(PyObject *func, PyObject *self, PyObject *arg)
{
    PyObject *args[3] = {NULL, self, arg};
    return PyObject_Vectorcall(func, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Whether the conditions hold (1), not (0), or -1 with an exception. Changes nothing. */
static int
direct_check(PyObject *route, PyObject *update_cls)
{
    int ok = chain_ready(PyTuple_GET_ITEM(route, D_CHUNKS), PyTuple_GET_ITEM(route, D_VERIFY));
    if (ok <= 0) {
        return ok;
    }
    return ledger_ready(PyTuple_GET_ITEM(route, D_LEDGER), update_cls,
                        PyTuple_GET_ITEM(route, D_KIND) != Py_None);
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
        PyObject *back = call_method(verify, PyTuple_GET_ITEM(route, D_VERIFIER), event);
        if (back == NULL) {
            return -1;
        }
        Py_DECREF(back);
    }
    *out = call_method(PyTuple_GET_ITEM(route, D_ACCUMULATE_HANDLER),
                       PyTuple_GET_ITEM(route, D_ACCUMULATOR), event);
    return *out == NULL ? -1 : 1;
}

/* The ledger's part, once the Update was emitted. 0, or -1 with an exception. */
static int
direct_after(PyObject *event, PyObject *route, PyObject *update)
{
    PyObject *ledger = PyTuple_GET_ITEM(route, D_LEDGER), *kind = PyTuple_GET_ITEM(route, D_KIND);
    if (kind != Py_None) {
        return ledger_count(ledger, kind);
    }
    /* the ledger's handler called with update as its item, as Ledger.feed calls it */
    if (PyObject_SetAttr(ledger, s_item, update) < 0) {
        return -1;
    }
    PyObject *back = call_method(PyTuple_GET_ITEM(route, D_LEDGER_HANDLER), ledger, event);
    Py_XDECREF(back);
    return back == NULL ? -1 : 0;
}

#endif /* AGUI_META_DIRECT_H */
