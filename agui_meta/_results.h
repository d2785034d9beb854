/* The default chain's stages on TOOL_CALL_RESULT, in the C core (included once, by _native.c,
 * after _starts.h).
 *
 * A result makes a tool message and answers its call. For an untagged one with text content,
 * the stages do:
 *
 *   ExpandChunks.feed   nothing, when no chunk stream is open;
 *   Verify.feed         _tool_call_result: the message's owner recorded (within
 *                       max_closed_ids);
 *   Accumulate.feed     _tool_result: the call answered in the store's tally (_answered, which
 *                       may report), a new MessageItem (the event's role, "tool" when absent
 *                       or empty; its content; the call's id), the event's metadata merged
 *                       into it, inserted after the assistant message holding the call; the
 *                       Update (done) emitted (a store that evicts nothing);
 *   Ledger.feed         the Update emitted first, then its handler called with the Update.
 *
 * Those Python methods are the specification. result_route() does what they do when every
 * condition they test holds, all checked before anything changes (the store's and the
 * accumulator's own methods are called as the handler calls them); otherwise the event goes
 * through the stages' feeds.
 */

#ifndef AGUI_META_RESULTS_H
#define AGUI_META_RESULTS_H

#include <Python.h>

/* The route: (ROUTE_RESULT, the name of verify's table of owners, accumulate's _answered, the
 * store's assistant_owner and insert_result, the ledger's handler (each its class's plain
 * function, called with own's stage or store), the tool message's role when the event has
 * none ("tool"), the member of its fields naming the call ("toolCallId")). */
enum { R_ROUTE, R_OWNERS, R_ANSWERED, R_OWNER_OF, R_INSERT, R_HANDLER, R_ROLE, R_FIELD, R_SIZE };

static PyObject *s_content;
/* the ledger's record of a result */
static PyObject *s_answer, *s_k_tool_result, *s_answered, *s_result_message_id,
    *s_result_index, *s_result_at, *s_result_clock, *s_result_metadata;

/* What result_route reads, each a new reference (NULL where not read). */
typedef struct {
    PyObject *id, *call_id, *owners, *role, *content, *incoming;
} ResultRead;

static void
result_read_clear(ResultRead *r)
{
    Py_XDECREF(r->id);
    Py_XDECREF(r->call_id);
    Py_XDECREF(r->owners);
    Py_XDECREF(r->role);
    Py_XDECREF(r->content);
    Py_XDECREF(r->incoming);
}

/* The names the results read: once, by configure_steps(). 0, or -1 with an exception. */
static int
result_configure(void)
{
    static const Name names[] = {
        {&s_content, "content"},
        {&s_answer, "answer"},
        {&s_k_tool_result, "TOOL_CALL_RESULT"},
        {&s_answered, "answered"},
        {&s_result_message_id, "result_message_id"},
        {&s_result_index, "result_index"},
        {&s_result_at, "result_at"},
        {&s_result_clock, "result_clock"},
        {&s_result_metadata, "result_metadata"},
    };
    return INTERN_NAMES(names);
}

/* The conditions, read into r. 1: they hold; 0: not this way; -1 with an exception. */
static int
result_check(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls,
             PyObject *unset, ResultRead *r)
{
    if (!routes_ready) {
        return 0; /* before configure_steps() */
    }
    PyObject *verify = OWN(own, O_VERIFY);
    int ok = chain_ready(OWN(own, O_CHUNKS), verify);
    if (ok <= 0) {
        return ok;
    }
    PyObject *tag = PyObject_GetAttr(event, s_subagent_run_id);
    if (tag == NULL) {
        return -1;
    }
    Py_DECREF(tag);
    if (tag != unset) {
        return 0; /* a subagent's: a field of the message */
    }
    r->id = PyObject_GetAttr(event, s_message_id);
    r->call_id = r->id == NULL ? NULL : PyObject_GetAttr(event, s_tool_call_id);
    r->owners =
        r->call_id == NULL ? NULL : PyObject_GetAttr(verify, PyTuple_GET_ITEM(route, R_OWNERS));
    r->role = r->owners == NULL ? NULL : PyObject_GetAttr(event, s_role);
    r->content = r->role == NULL ? NULL : PyObject_GetAttr(event, s_content);
    r->incoming = r->content == NULL ? NULL : PyObject_GetAttr(event, s_metadata);
    if (r->incoming == NULL) {
        return -1;
    }
    if (!PyUnicode_CheckExact(r->id) || !PyUnicode_CheckExact(r->call_id) ||
        !(PyDict_CheckExact(r->owners) || PyODict_CheckExact(r->owners)) ||
        !PyUnicode_CheckExact(r->content)) {
        return 0; /* content parts: copied to plain data in Python */
    }
    /* event.role or "tool" */
    if (r->role == unset || (PyUnicode_CheckExact(r->role) && PyUnicode_GET_LENGTH(r->role) == 0)) {
        Py_SETREF(r->role, Py_NewRef(PyTuple_GET_ITEM(route, R_ROLE)));
    }
    else if (!PyUnicode_CheckExact(r->role)) {
        return 0;
    }
    ok = owners_room(verify, r->owners, r->id);
    if (ok <= 0) {
        return ok;
    }
    if (r->incoming != unset && (ok = mergeable(unset, r->incoming, unset)) <= 0) {
        return ok;
    }
    return ledger_ready(OWN(own, O_LEDGER), update_cls, 0);
}

/* The verifier's and the accumulator's parts, the conditions held. 1 with *out the Update (a
 * new reference: the ledger's handler reads it); 0: not this way (nothing changed); -1 with an
 * exception. */
static int
result_route(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls,
             PyObject *unset, ResultRead *r, PyObject **out)
{
    int ok = result_check(event, route, own, update_cls, unset, r);
    if (ok <= 0) {
        return ok;
    }
    /* Verify: the newest result's owner (absent: no tag) recorded */
    if (PyObject_SetItem(r->owners, r->id, unset) < 0) {
        return -1;
    }
    /* Accumulate: the call answered (reported as the handler does), the tool message made */
    PyObject *back = call_method(PyTuple_GET_ITEM(route, R_ANSWERED), OWN(own, O_ACCUMULATE), event);
    if (back == NULL) {
        return -1;
    }
    Py_DECREF(back);
    PyObject *fields = PyDict_New();
    if (fields == NULL || PyDict_SetItem(fields, PyTuple_GET_ITEM(route, R_FIELD), r->call_id) < 0) {
        Py_XDECREF(fields);
        return -1;
    }
    PyObject *args[4] = {r->id, r->role, r->content, fields};
    PyObject *item = PyObject_Vectorcall((PyObject *)item_slots[1].type, args, 3, fields_kwnames);
    Py_DECREF(fields);
    if (item == NULL) {
        return -1;
    }
    const ItemSlots *is = &item_slots[1];
    if (r->incoming != unset && merge_into(item, is->metadata, unset, r->incoming, unset) < 0) {
        Py_DECREF(item);
        return -1;
    }
    PyObject *store = OWN(own, O_STORE);
    PyObject *owner = call_method(PyTuple_GET_ITEM(route, R_OWNER_OF), store, r->call_id);
    back = owner == NULL ? NULL : call_method2(PyTuple_GET_ITEM(route, R_INSERT), store, item, owner);
    Py_XDECREF(owner);
    if (back == NULL) {
        Py_DECREF(item);
        return -1;
    }
    Py_DECREF(back);
    /* built always: the ledger's part reads it */
    *out = item_update(update_cls, event, item, Py_True, is->metadata, unset, 1);
    Py_DECREF(item);
    return *out == NULL ? -1 : 1;
}

/* Ledger._tool_call_result, for a call the ledger has a record of in a run it has open:
 * counted, answered in the ledger's tally (a dropped entry when it forgot one), timed, the
 * record answered with the tool message's id, place, time and plain metadata (the Update's).
 * 1: done; 0: not this way (nothing changed: the handler does it); -1 with an exception. */
static int
result_ledger(PyObject *event, PyObject *ledger, PyObject *update, PyObject *unset,
              ResultRead *r)
{
    int status = -1;
    PyObject *current = PyObject_GetAttr(ledger, s_current);
    PyObject *counts = current == NULL ? NULL : PyObject_GetAttr(ledger, s_counts);
    PyObject *tools = counts == NULL ? NULL : PyObject_GetAttr(ledger, s_tools);
    PyObject *tally = tools == NULL ? NULL : PyObject_GetAttr(ledger, s_tally);
    PyObject *metadata = tally == NULL ? NULL : PyObject_GetAttr(update, s_metadata);
    PyObject *ctx = metadata == NULL ? NULL : PyObject_GetAttr(ledger, s_ctx);
    PyObject *tool = NULL, *plain = NULL, *when = NULL, *at = NULL;
    if (ctx == NULL) {
        goto done;
    }
    status = 0;
    if (current == Py_None || !PyDict_CheckExact(counts) || !PyDict_CheckExact(tools)) {
        goto done; /* no run open (the handler opens one), or not as built */
    }
    tool = Py_XNewRef(PyDict_GetItemWithError(tools, r->call_id));
    if (tool == NULL) {
        status = PyErr_Occurred() ? -1 : 0; /* a call not started in the run: the handler's */
        goto done;
    }
    if ((status = plain_metadata(metadata, unset, &plain)) <= 0) {
        goto done;
    }
    /* All read: now as the handler does, in its order. */
    status = -1;
    if (ledger_tallied(counts, s_k_tool_result, tally, s_answer, r->call_id, current) < 0) {
        goto done;
    }
    when = ledger_time(ledger, ctx, event, unset);
    at = when == NULL ? NULL : PyObject_GetAttr(ctx, s_index);
    if (at == NULL || PyObject_SetAttr(tool, s_status, s_answered) < 0 ||
        PyObject_SetAttr(tool, s_result_message_id, r->id) < 0 ||
        PyObject_SetAttr(tool, s_result_index, at) < 0 ||
        PyObject_SetAttr(tool, s_result_at, PyTuple_GET_ITEM(when, 0)) < 0 ||
        PyObject_SetAttr(tool, s_result_clock, PyTuple_GET_ITEM(when, 1)) < 0 ||
        PyObject_SetAttr(tool, s_result_metadata, plain) < 0) {
        goto done;
    }
    status = 1;
done:
    Py_XDECREF(current);
    Py_XDECREF(counts);
    Py_XDECREF(tools);
    Py_XDECREF(tally);
    Py_XDECREF(metadata);
    Py_XDECREF(ctx);
    Py_XDECREF(tool);
    Py_XDECREF(plain);
    Py_XDECREF(when);
    Py_XDECREF(at);
    return status;
}

/* The ledger's part, once the Update was emitted: the call's record answered here
 * (result_ledger) or by its handler, with the Update as its item (as Ledger.feed does). */
static int
result_after(PyObject *event, PyObject *route, PyObject *own, PyObject *update,
             PyObject *unset, ResultRead *r)
{
    PyObject *ledger = OWN(own, O_LEDGER);
    if (PyObject_SetAttr(ledger, s_item, update) < 0) {
        return -1;
    }
    return ledger_handled(result_ledger(event, ledger, update, unset, r),
                          PyTuple_GET_ITEM(route, R_HANDLER), ledger, event);
}

#endif /* AGUI_META_RESULTS_H */
