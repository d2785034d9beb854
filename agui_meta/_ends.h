/* The default chain's stages on TEXT_MESSAGE_END, REASONING_MESSAGE_END and TOOL_CALL_END,
 * in the C core (included once, by _native.c, after _direct.h).
 *
 * The commonest events off the fast path after steps: each ends an item whose deltas the
 * fast path appended, and most carry metadata (usage). For an untagged one, the stages do:
 *
 *   ExpandChunks.feed   nothing, when no chunk stream is open;
 *   Verify.feed         _text_end / _reasoning_message_end / _tool_call_end: the id open in
 *                       its table, removed;
 *   Accumulate.feed     _text_end: the store's message (not an activity message), its metadata
 *                       merged with the event's, no longer streaming, its deltas joined; the
 *                       Update (done) emitted (a store that evicts nothing);
 *                       _tool_end: the store's call, its metadata merged, no longer open (one
 *                       call fewer open in its owner), its deltas joined; the Update emitted;
 *   Ledger.feed         the Update emitted first, then the event's type counted in the open run
 *                       (a message's end), or its handler called with the Update (a call's).
 *
 * Those Python methods are the specification. end_route() does what they do when every
 * condition they test holds, all checked before anything changes (the metadata's merge
 * included: mergeable() is merge_metadata's own test); otherwise the event goes through the
 * stages' feeds, so every error and report is theirs.
 */

#ifndef AGUI_META_ENDS_H
#define AGUI_META_ENDS_H

#include <Python.h>

/* The route: (ROUTE_END, the name of verify's table of open ids, the type the ledger counts or
 * None, the item's kind (1 a message, 2 a tool call, as item_slots: own's message or
 * tool-call lookup finds it), the ledger's handler or None). */
enum { E_ROUTE, E_TABLE, E_KIND, E_ITEM, E_LEDGER_HANDLER, E_SIZE };

static Py_ssize_t streaming_off = -1;   /* MessageItem._streaming */
static Py_ssize_t open_calls_off = -1;  /* MessageItem._open_calls */
static Py_ssize_t open_off = -1;        /* ToolCallItem._open */
static Py_ssize_t owner_off = -1;       /* ToolCallItem.owner */
static PyObject *s_message_id, *s_tool_call_id, *s_name, *empty_str;
/* the ledger's records of tool calls */
static PyObject *s_tools, *s_live, *s_k_tool_end, *s_started, *s_ended, *s_ended_index,
    *s_tally, *s_start, *s_tool_calls_r, *s_dropped_entries, *s_k_tool_start,
    *s_arguments_length;

/* Whether merge_metadata(existing, incoming) takes the common case (it merges rather than
 * handing the merge to Python): the same tests, nothing changed. 1, 0, or -1. */
static int
mergeable(PyObject *existing, PyObject *incoming, PyObject *unset)
{
    if (!PyDict_CheckExact(incoming)) {
        return 0;
    }
    if (existing != Py_None && existing != unset) {
        if (!Py_IS_TYPE(existing, Merged_type)) {
            return 0;
        }
        PyObject *record = slot_get(existing, mm_writes_off);
        PyObject *version = slot_get(existing, mm_version_off);
        if (record == NULL || version == NULL || !Py_IS_TYPE(record, Writes_type)) {
            return 0;
        }
        PyObject *newest = slot_get(record, w_version_off);
        if (newest == NULL || !PyLong_CheckExact(version) || !PyLong_CheckExact(newest)) {
            return 0;
        }
        int same = PyObject_RichCompareBool(version, newest, Py_EQ);
        if (same <= 0) {
            return same;
        }
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(incoming, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
    }
    return 1;
}

/* What end_route reads, each a new reference (NULL where not read); kind: the item's. */
typedef struct {
    PyObject *id, *table, *item, *incoming;
    int kind;
} EndRead;

static void
end_read_clear(EndRead *r)
{
    Py_XDECREF(r->id);
    Py_XDECREF(r->table);
    Py_XDECREF(r->item);
    Py_XDECREF(r->incoming);
}

/* The offsets and names the ends (and the other routes' ledger parts) read: once, by
 * configure_steps(). 0, or -1 with an exception. */
static int
end_configure(void)
{
    PyObject *m = (PyObject *)item_slots[1].type, *t = (PyObject *)item_slots[2].type;
    streaming_off = slot_offset(m, "_streaming");
    open_calls_off = slot_offset(m, "_open_calls");
    open_off = slot_offset(t, "_open");
    owner_off = slot_offset(t, "owner");
    if (PyErr_Occurred()) {
        return -1;
    }
    static const Name names[] = {
        {&s_tool_call_id, "tool_call_id"},
        {&s_message_id, "message_id"},
        {&s_name, "name"},
        {&s_tools, "_tools"},
        {&s_live, "_live"},
        {&s_k_tool_end, "TOOL_CALL_END"},
        {&s_started, "started"},
        {&s_ended, "ended"},
        {&s_ended_index, "ended_index"},
        {&s_tally, "_tally"},
        {&s_start, "start"},
        {&s_tool_calls_r, "tool_calls"},
        {&s_dropped_entries, "dropped_entries"},
        {&s_k_tool_start, "TOOL_CALL_START"},
        {&s_arguments_length, "arguments_length"},
    };
    if (empty_str == NULL && (empty_str = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        return -1;
    }
    return INTERN_NAMES(names);
}

/* The conditions, read into r. 1: they hold; 0: not this way; -1 with an exception. */
static int
end_check(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls, PyObject *unset,
          EndRead *r)
{
    if (!routes_ready) {
        return 0; /* before configure_steps() */
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(route, E_ITEM));
    if (kind != 1 && kind != 2) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "end_route(): an item's kind is 1 or 2");
        }
        return -1;
    }
    r->kind = (int)kind;
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
        return 0; /* a subagent's: verify checks its owner */
    }
    r->id = PyObject_GetAttr(event, kind == 1 ? s_message_id : s_tool_call_id);
    r->table = r->id == NULL ? NULL : PyObject_GetAttr(verify, PyTuple_GET_ITEM(route, E_TABLE));
    if (r->table == NULL) {
        return -1;
    }
    if (!PyUnicode_CheckExact(r->id) || !PyDict_CheckExact(r->table)) {
        return 0;
    }
    int open = PyDict_Contains(r->table, r->id);
    if (open <= 0) {
        return open; /* not open: the verifier's error */
    }
    /* Accumulate: the store's own message, not an activity message, its text a str; or the
     * store's own call, whose owner (if it is open) is the store's own message with a count of
     * open calls. */
    const ItemSlots *is = &item_slots[kind];
    r->item = call_lookup(OWN(own, kind == 1 ? O_MESSAGE : O_CALL), r->id);
    if (r->item == NULL) {
        return -1;
    }
    if (Py_TYPE(r->item) != is->type) {
        return 0; /* missing (a report), or not the store's class */
    }
    PyObject *role = slot_get(r->item, is->gate);
    Py_ssize_t pending = parts_count(slot_get(r->item, is->parts));
    PyObject *text = slot_get(r->item, is->text), *metadata = slot_get(r->item, is->metadata);
    if (role == NULL || (kind == 1 && !PyUnicode_CheckExact(role)) || pending < 0 ||
        text == NULL || metadata == NULL || (pending > 0 && !PyUnicode_CheckExact(text))) {
        return 0;
    }
    if (kind == 1 && PyUnicode_GET_LENGTH(role) == PyUnicode_GET_LENGTH(str_activity) &&
        PyUnicode_Compare(role, str_activity) == 0) {
        return 0; /* an activity message: accumulate reports the collision */
    }
    if (kind == 2) {
        PyObject *open = slot_get(r->item, open_off);
        if (open != Py_True && open != Py_False) {
            return 0;
        }
        if (open == Py_True) {
            PyObject *owner = slot_get(r->item, owner_off);
            PyObject *count = owner == NULL || Py_TYPE(owner) != item_slots[1].type
                                  ? NULL
                                  : slot_get(owner, open_calls_off);
            if (count == NULL || !PyLong_CheckExact(count)) {
                return 0;
            }
        }
    }
    r->incoming = PyObject_GetAttr(event, s_metadata);
    if (r->incoming == NULL) {
        return -1;
    }
    if (r->incoming != unset && (ok = mergeable(metadata, r->incoming, unset)) <= 0) {
        return ok;
    }
    /* The ledger: the Update's class known as a wrapper, a run open (when it counts). */
    return ledger_ready(OWN(own, O_LEDGER), update_cls, PyTuple_GET_ITEM(route, E_KIND) != Py_None);
}

/* The verifier's and the accumulator's parts, the conditions held. 1 with *out the Update (a
 * new reference; Py_True when build is false); 0: not this way (nothing changed); -1 with an
 * exception. */
static int
end_route(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls, PyObject *unset,
          int build, EndRead *r, PyObject **out)
{
    int ok = end_check(event, route, own, update_cls, unset, r);
    if (ok <= 0) {
        return ok;
    }
    if (PyDict_DelItem(r->table, r->id) < 0) { /* Verify: closed */
        return -1;
    }
    const ItemSlots *is = &item_slots[r->kind];
    PyObject *item = r->item;
    if (r->incoming != unset &&
        merge_into(item, is->metadata, slot_get(item, is->metadata), r->incoming, unset) < 0) {
        return -1;
    }
    if (r->kind == 1) {
        slot_set(item, streaming_off, Py_NewRef(Py_False));
    }
    else if (slot_get(item, open_off) == Py_True) {
        /* call.owner._open_calls -= 1 (both read by end_check; nothing ran since) */
        if (slot_add(slot_get(item, owner_off), open_calls_off, -1) < 0) {
            return -1;
        }
        slot_set(item, open_off, Py_NewRef(Py_False));
    }
    PyObject *parts = slot_get(item, is->parts);
    if (parts_count(parts) > 0) {
        /* item.content: the deltas joined now, once (and the list dropped) */
        PyObject *joined = PyUnicode_Join(empty_str, parts);
        PyObject *text = joined == NULL ? NULL : PyUnicode_Concat(slot_get(item, is->text), joined);
        Py_XDECREF(joined);
        if (text == NULL) {
            return -1;
        }
        slot_set(item, is->text, text);
        slot_set(item, is->parts, Py_NewRef(Py_None));
    }
    /* a call's Update is built always: the ledger's handler reads it */
    *out = item_update(update_cls, event, item, Py_True, is->metadata, unset,
                       build || r->kind == 2);
    return *out == NULL ? -1 : 1;
}

/* A store item's merged metadata as a plain dict of the record's own, or None: the ledger's
 * _plain, for what it is commonly (None, UNSET, a dict, the newest version of a
 * MergedMetadata). A new reference; Py_None (not a new reference: *plain stays NULL) when it
 * is something else (the Python way); NULL with an exception. */
static int
plain_metadata(PyObject *metadata, PyObject *unset, PyObject **plain)
{
    *plain = NULL;
    if (metadata == Py_None || metadata == unset) {
        *plain = Py_NewRef(Py_None);
        return 1;
    }
    if (PyDict_CheckExact(metadata)) {
        *plain = PyDict_Copy(metadata);
        return *plain == NULL ? -1 : 1;
    }
    if (!Py_IS_TYPE(metadata, Merged_type)) {
        return 0;
    }
    PyObject *writes = slot_get(metadata, mm_writes_off);
    PyObject *version = slot_get(metadata, mm_version_off);
    PyObject *newest = writes == NULL || !Py_IS_TYPE(writes, Writes_type)
                           ? NULL
                           : slot_get(writes, w_version_off);
    PyObject *cells = newest == NULL ? NULL : writes; /* the record is the cells' dict */
    if (cells == NULL || version == NULL || !PyLong_CheckExact(version) ||
        !PyLong_CheckExact(newest)) {
        return 0;
    }
    int same = PyObject_RichCompareBool(version, newest, Py_EQ);
    if (same <= 0) {
        return same; /* an older version: looked up write by write, in Python */
    }
    /* the newest version: each cell's last value */
    PyObject *out = PyDict_New();
    Py_ssize_t pos = 0;
    PyObject *key, *cell;
    while (out != NULL && PyDict_Next(cells, &pos, &key, &cell)) {
        PyObject *value = cell_last(cell);
        if (value == NULL) {
            Py_DECREF(out);
            return 0;
        }
        if (PyDict_SetItem(out, key, value) < 0) {
            Py_CLEAR(out);
        }
    }
    *plain = out;
    return out == NULL ? -1 : 1;
}

/* What Ledger._tool_call_start and _tool_call_result do first: the event's type counted
 * (kind), the call told to the run's tally (tally.method(id)), and an entry counted as
 * dropped from the run (current) when the tally did not keep it. 0, or -1 with an
 * exception. */
static int
ledger_tallied(PyObject *counts, PyObject *kind, PyObject *tally, PyObject *method, PyObject *id,
               PyObject *current)
{
    if (count_one(counts, kind) < 0) {
        return -1;
    }
    PyObject *back = PyObject_CallMethodOneArg(tally, method, id);
    int kept = back == NULL ? -1 : PyObject_IsTrue(back);
    Py_XDECREF(back);
    return kept < 0 || (!kept && attr_add(current, s_dropped_entries, 1) < 0) ? -1 : 0;
}

/* Ledger._tool_call_end, for a call whose record the ledger keeps and whose store call it
 * holds (_live), in a run it has open: counted, timed, ended, the call's arguments' length
 * and merged metadata read (_sync), the call let go. 1: done; 0: not this way (nothing
 * changed: the handler does it); -1 with an exception. */
static int
end_ledger_tool(PyObject *event, PyObject *ledger, PyObject *id, PyObject *unset)
{
    int status = -1;
    PyObject *counts = PyObject_GetAttr(ledger, s_counts);
    PyObject *tools = counts == NULL ? NULL : PyObject_GetAttr(ledger, s_tools);
    PyObject *live_map = tools == NULL ? NULL : PyObject_GetAttr(ledger, s_live);
    PyObject *tool = NULL, *plain = NULL, *state = NULL, *ctx = NULL, *when = NULL, *at = NULL;
    if (live_map == NULL) {
        goto done;
    }
    status = 0;
    if (!PyDict_CheckExact(counts) || !PyDict_CheckExact(tools) || !PyDict_CheckExact(live_map)) {
        goto done; /* no run open, or not as built */
    }
    tool = Py_XNewRef(PyDict_GetItemWithError(tools, id));
    PyObject *live = tool == NULL ? NULL : PyDict_GetItemWithError(live_map, id);
    if (live == NULL) {
        status = PyErr_Occurred() ? -1 : 0; /* no record, or no store call: the handler's */
        goto done;
    }
    const ItemSlots *is = &item_slots[2];
    PyObject *args = Py_TYPE(live) == is->type ? slot_get(live, is->text) : NULL;
    if (args == NULL || parts_count(slot_get(live, is->parts)) != 0 ||
        !(args == unset || PyUnicode_CheckExact(args))) {
        goto done; /* arguments not joined yet, or not a str */
    }
    state = PyObject_GetAttr(tool, s_status);
    if (state == NULL) {
        status = -1;
        goto done;
    }
    if (!PyUnicode_CheckExact(state) ||
        (status = plain_metadata(slot_get(live, is->metadata), unset, &plain)) <= 0) {
        goto done;
    }
    /* All read: now as the handler does, in its order. */
    status = -1;
    ctx = PyObject_GetAttr(ledger, s_ctx);
    if (ctx == NULL || count_one(counts, s_k_tool_end) < 0) {
        goto done;
    }
    when = ledger_time(ledger, ctx, event, unset);
    if (when == NULL) {
        goto done;
    }
    if (PyUnicode_Compare(state, s_started) == 0 &&
        PyObject_SetAttr(tool, s_status, s_ended) < 0) {
        goto done;
    }
    at = PyObject_GetAttr(ctx, s_index);
    if (at == NULL || PyObject_SetAttr(tool, s_ended_index, at) < 0 ||
        PyObject_SetAttr(tool, s_ended_at, PyTuple_GET_ITEM(when, 0)) < 0 ||
        PyObject_SetAttr(tool, s_ended_clock, PyTuple_GET_ITEM(when, 1)) < 0) {
        goto done;
    }
    Py_INCREF(live); /* held: popped from the map, read below */
    if (PyDict_DelItem(live_map, id) < 0) {
        Py_DECREF(live);
        goto done;
    }
    PyObject *length = args == unset ? NULL : PyLong_FromSsize_t(PyUnicode_GET_LENGTH(args));
    int failed = (args != unset && (length == NULL ||
                                    PyObject_SetAttr(tool, s_arguments_length, length) < 0)) ||
                 PyObject_SetAttr(tool, s_metadata, plain) < 0;
    Py_XDECREF(length);
    Py_DECREF(live);
    status = failed ? -1 : 1;
done:
    Py_XDECREF(counts);
    Py_XDECREF(tools);
    Py_XDECREF(live_map);
    Py_XDECREF(tool);
    Py_XDECREF(plain);
    Py_XDECREF(state);
    Py_XDECREF(ctx);
    Py_XDECREF(when);
    Py_XDECREF(at);
    return status;
}

/* The ledger's part, once the Update was emitted: the event's type counted, or (a call's end)
 * its record ended here (end_ledger_tool) or by its handler, called with the Update as its
 * item (as Ledger.feed does). 0, or -1 with an exception. */
static int
end_after(PyObject *event, PyObject *route, PyObject *own, PyObject *update, PyObject *unset,
          EndRead *r)
{
    PyObject *ledger = OWN(own, O_LEDGER), *kind = PyTuple_GET_ITEM(route, E_KIND);
    if (kind != Py_None) {
        return ledger_count(ledger, kind);
    }
    if (PyObject_SetAttr(ledger, s_item, update) < 0) {
        return -1;
    }
    return ledger_handled(end_ledger_tool(event, ledger, r->id, unset),
                          PyTuple_GET_ITEM(route, E_LEDGER_HANDLER), ledger, event);
}

#endif /* AGUI_META_ENDS_H */
