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
 *                       its gate lets through (the route's D_GATED is None);
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

/* The route: (ROUTE_DIRECT, True or None (None: the verifier's gate lets the event through),
 * verify's handler or None, accumulate's handler, the type the ledger counts or None, the
 * ledger's handler or None). The handlers are the stages' plain functions, called with own's
 * stages (see _steps.h). */
enum { D_ROUTE, D_GATED, D_VERIFY_HANDLER, D_ACCUMULATE_HANDLER, D_KIND, D_LEDGER_HANDLER,
       D_SIZE };

/* Whether the conditions hold (1), not (0), or -1 with an exception. Changes nothing. */
static int
direct_check(PyObject *route, PyObject *own, PyObject *update_cls)
{
    PyObject *verify = PyTuple_GET_ITEM(route, D_GATED) == Py_None ? Py_None : OWN(own, O_VERIFY);
    int ok = chain_ready(OWN(own, O_CHUNKS), verify);
    if (ok <= 0) {
        return ok;
    }
    return ledger_ready(OWN(own, O_LEDGER), update_cls, PyTuple_GET_ITEM(route, D_KIND) != Py_None);
}

/* The verifier's and the accumulator's handlers, the conditions held. 1 with *out the
 * Update (a new reference); 0: not this way (nothing done); -1 with an exception (raised by
 * a handler: as it would from the feeds). */
static int
direct_route(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls,
             PyObject **out)
{
    int ok = direct_check(route, own, update_cls);
    if (ok <= 0) {
        return ok;
    }
    PyObject *verify = PyTuple_GET_ITEM(route, D_VERIFY_HANDLER);
    if (verify != Py_None) {
        PyObject *back = call_method(verify, OWN(own, O_VERIFY), event);
        if (back == NULL) {
            return -1;
        }
        Py_DECREF(back);
    }
    *out = call_method(PyTuple_GET_ITEM(route, D_ACCUMULATE_HANDLER), OWN(own, O_ACCUMULATE),
                       event);
    return *out == NULL ? -1 : 1;
}

/* The ledger's part, once the Update was emitted. 0, or -1 with an exception. */
static int
direct_after(PyObject *event, PyObject *route, PyObject *own, PyObject *update)
{
    PyObject *ledger = OWN(own, O_LEDGER), *kind = PyTuple_GET_ITEM(route, D_KIND);
    if (kind != Py_None) {
        return ledger_count(ledger, kind);
    }
    /* the ledger's handler called with update as its item, as Ledger.feed calls it */
    if (PyObject_SetAttr(ledger, s_item, update) < 0) {
        return -1;
    }
    return ledger_handled(0, PyTuple_GET_ITEM(route, D_LEDGER_HANDLER), ledger, event);
}

#endif /* AGUI_META_DIRECT_H */
