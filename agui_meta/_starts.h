/* The default chain's stages on TEXT_MESSAGE_START and REASONING_MESSAGE_START, in the C core
 * (included once, by _native.c, after _ends.h).
 *
 * Each opens a message the fast path then streams into. For an untagged START of a message
 * the store does not hold yet, the stages do:
 *
 *   ExpandChunks.feed   nothing, when no chunk stream is open;
 *   Verify.feed         _text_start / _reasoning_message_start: the id not open already, room
 *                       for one more open item (max_open_items), the id opened, its owner
 *                       recorded when none was (within max_closed_ids);
 *   Accumulate.feed     _text_start / _reasoning_start: a new MessageItem (the event's role,
 *                       "assistant" when absent, or "reasoning"; the event's name), appended to
 *                       the store, the event's metadata merged into it, streaming; the Update
 *                       emitted (a store that evicts nothing);
 *   Ledger.feed         the Update emitted first, then the event's type counted in the open run.
 *
 * And for an untagged TOOL_CALL_START of a call the store does not hold:
 *
 *   Verify.feed         _tool_call_start: the id not open already, no owner recorded for it,
 *                       room for one more open item; the id opened, its owner recorded (its
 *                       parent message's, or none) within max_closed_ids;
 *   Accumulate.feed     _tool_start: the call started in the store's tally (_started, which
 *                       may report), then (_start_call) the call made in its parent message
 *                       when that is an assistant message, else in a new assistant message
 *                       (the parent's id, or the call's) appended to the store; the event's
 *                       metadata merged into the call, the call added to its message, open;
 *                       the Update emitted;
 *   Ledger.feed         the Update emitted first, then its handler called with the Update.
 *
 * Those Python methods are the specification. start_route() does what they do when every
 * condition they test holds, all checked before anything changes (the new message's class
 * and the store's append are called as the handler calls them); otherwise the event goes
 * through the stages' feeds, so that every error and report (an id open already, no room, a
 * message that exists, a subagent's tag) is the Python path's.
 */

#ifndef AGUI_META_STARTS_H
#define AGUI_META_STARTS_H

#include <Python.h>

/* The route: (ROUTE_START, the name of verify's table of open ids, the name of its table of
 * owners, the store's append (Store.append, called with own's store), the type the ledger
 * counts, the role of the message (None: the event's, "assistant" when absent)); own's
 * message lookup finds the message. */
enum { S_ROUTE, S_TABLE, S_OWNERS, S_APPEND, S_KIND, S_ROLE, S_SIZE };

static PyObject *s_role, *s_max_closed_ids, *str_assistant;
/* ("fields",): a new message's keyword (here and _results.h) */
static PyObject *fields_kwnames;

/* What start_route reads, each a new reference (NULL where not read). */
typedef struct {
    PyObject *id, *table, *owners, *role, *name, *incoming;
    int record; /* whether the owner is recorded (none was) */
} StartRead;

static void
start_read_clear(StartRead *r)
{
    Py_XDECREF(r->id);
    Py_XDECREF(r->table);
    Py_XDECREF(r->owners);
    Py_XDECREF(r->role);
    Py_XDECREF(r->name);
    Py_XDECREF(r->incoming);
}

/* The owners' table has room for id (Verify._record within max_closed_ids, as it will be
 * once id is in it): 1, 0 (the Python way), or -1 with an exception. */
static int
owners_room(PyObject *verify, PyObject *owners, PyObject *id)
{
    int known = PyDict_Contains(owners, id);
    if (known < 0) {
        return -1;
    }
    PyObject *limit = PyObject_GetAttr(verify, s_max_closed_ids);
    if (limit == NULL) {
        return -1;
    }
    Py_ssize_t most = limit == Py_None           ? PY_SSIZE_T_MAX
                      : PyLong_CheckExact(limit) ? PyLong_AsSsize_t(limit)
                                                 : -1;
    Py_DECREF(limit);
    if (most == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return most >= 0 && PyDict_GET_SIZE(owners) + !known <= most;
}

/* The conditions, read into r. 1: they hold; 0: not this way; -1 with an exception. */
static int
start_check(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls, PyObject *unset,
            StartRead *r)
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
        return 0; /* a subagent's: its owner checked, its tag a field of the message */
    }
    /* Verify: the id not open, room for one more, the owner's record within its bound. */
    r->id = PyObject_GetAttr(event, s_message_id);
    r->table = r->id == NULL ? NULL : PyObject_GetAttr(verify, PyTuple_GET_ITEM(route, S_TABLE));
    r->owners =
        r->table == NULL ? NULL : PyObject_GetAttr(verify, PyTuple_GET_ITEM(route, S_OWNERS));
    if (r->owners == NULL) {
        return -1;
    }
    /* the owners: a dict, or an OrderedDict (oldest first, for max_closed_ids) */
    if (!PyUnicode_CheckExact(r->id) || !PyDict_CheckExact(r->table) ||
        !(PyDict_CheckExact(r->owners) || PyODict_CheckExact(r->owners))) {
        return 0;
    }
    ok = PyDict_Contains(r->table, r->id);
    if (ok != 0) {
        return ok < 0 ? -1 : 0; /* open already: the verifier's error */
    }
    ok = verify_room(verify);
    if (ok <= 0) {
        return ok;
    }
    ok = PyDict_Contains(r->owners, r->id);
    if (ok < 0) {
        return -1;
    }
    r->record = !ok;
    if (r->record && (ok = owners_room(verify, r->owners, r->id)) <= 0) {
        return ok; /* the oldest forgotten: the Python way */
    }
    /* Accumulate: no message with the id in the store; the role and name as the handler
     * takes them. */
    PyObject *found = call_lookup(OWN(own, O_MESSAGE), r->id);
    if (found == NULL) {
        return -1;
    }
    Py_DECREF(found);
    if (found != Py_None) {
        return 0; /* reopened, or an activity's id: reports */
    }
    PyObject *role = PyTuple_GET_ITEM(route, S_ROLE);
    if (role == Py_None) {
        r->role = PyObject_GetAttr(event, s_role);
        r->name = r->role == NULL ? NULL : PyObject_GetAttr(event, s_name);
        if (r->name == NULL) {
            return -1;
        }
        if (r->role == unset) {
            Py_SETREF(r->role, Py_NewRef(str_assistant));
        }
    }
    else {
        r->role = Py_NewRef(role);
        r->name = Py_NewRef(unset);
    }
    r->incoming = PyObject_GetAttr(event, s_metadata);
    if (r->incoming == NULL) {
        return -1;
    }
    /* merged into a new message's metadata, None (MessageItem's) */
    if (r->incoming != unset && (ok = mergeable(Py_None, r->incoming, unset)) <= 0) {
        return ok;
    }
    /* The ledger: the Update's class known as a wrapper, a run open. */
    return ledger_ready(OWN(own, O_LEDGER), update_cls, 1);
}

/* The verifier's and the accumulator's parts, the conditions held. 1 with *out the Update (a
 * new reference; Py_True when build is false); 0: not this way (nothing changed); -1 with an
 * exception. */
static int
start_route(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls, PyObject *unset,
            int build,
            StartRead *r, PyObject **out)
{
    int ok = start_check(event, route, own, update_cls, unset, r);
    if (ok <= 0) {
        return ok;
    }
    /* Verify: opened, its owner recorded (the event's tag: absent) */
    if (PyDict_SetItem(r->table, r->id, Py_None) < 0 ||
        (r->record && PyObject_SetItem(r->owners, r->id, unset) < 0)) {
        return -1;
    }
    /* Accumulate: MessageItem(id, role, "", fields=fields), appended */
    PyObject *fields = PyDict_New();
    if (fields == NULL || (r->name != unset && PyDict_SetItem(fields, s_name, r->name) < 0)) {
        Py_XDECREF(fields);
        return -1;
    }
    PyObject *args[4] = {r->id, r->role, empty_str, fields};
    PyObject *item = PyObject_Vectorcall((PyObject *)item_slots[1].type, args, 3, fields_kwnames);
    Py_DECREF(fields);
    if (item == NULL) {
        return -1;
    }
    PyObject *back = call_method(PyTuple_GET_ITEM(route, S_APPEND), OWN(own, O_STORE), item);
    if (back == NULL) {
        Py_DECREF(item);
        return -1;
    }
    Py_DECREF(back);
    const ItemSlots *is = &item_slots[1];
    if (r->incoming != unset) {
        PyObject *existing = slot_get(item, is->metadata); /* again: the append ran Python */
        if (existing == NULL) {
            PyErr_SetString(PyExc_SystemError, "start_route(): a message without metadata");
        }
        if (existing == NULL || merge_into(item, is->metadata, existing, r->incoming, unset) < 0) {
            Py_DECREF(item);
            return -1;
        }
    }
    slot_set(item, streaming_off, Py_NewRef(Py_True));
    *out = item_update(update_cls, event, item, Py_False, is->metadata, unset, build);
    Py_DECREF(item);
    return *out == NULL ? -1 : 1;
}

/* The ledger's part, once the Update was emitted: the event's type counted. */
static int
start_after(PyObject *route, PyObject *own)
{
    return ledger_count(OWN(own, O_LEDGER), PyTuple_GET_ITEM(route, S_KIND));
}

/* The tool call's route: (ROUTE_TOOL_START, accumulate's _started and _start_call, the store's
 * append and add_tool_call, the ledger's handler (each its class's plain function, called with
 * own's stage or store), the ledger's ToolCallRecord); own's tool-call and message lookups
 * find what the store holds. */
enum { T_ROUTE, T_STARTED, T_START_CALL, T_APPEND, T_ADD_CALL, T_HANDLER, T_RECORD, T_SIZE };

static PyObject *s_item_u; /* Update.item */
static PyObject *s_parent_message_id, *s_tool_call_name, *s_message_owners,
    *s_tool_call_owners, *s_forgot_messages;
/* the ToolCallRecord's keywords (tool_start_ledger) */
static PyObject *record_kwnames;
static Py_ssize_t tool_calls_off = -1; /* MessageItem._tool_calls */

/* What tool_start_route reads, each a new reference (NULL where not read). */
typedef struct {
    PyObject *id, *name, *parent, *open, *owners, *record, *incoming;
} ToolStartRead;

static void
tool_start_read_clear(ToolStartRead *r)
{
    Py_XDECREF(r->id);
    Py_XDECREF(r->name);
    Py_XDECREF(r->parent);
    Py_XDECREF(r->open);
    Py_XDECREF(r->owners);
    Py_XDECREF(r->record);
    Py_XDECREF(r->incoming);
}

/* The offsets and names the starts read: once, by configure_steps(). 0, or -1. */
static int
start_configure(void)
{
    tool_calls_off = slot_offset((PyObject *)item_slots[1].type, "_tool_calls");
    if (tool_calls_off < 0) {
        return -1;
    }
    static const Name names[] = {
        {&s_role, "role"},
        {&s_max_closed_ids, "max_closed_ids"},
        {&str_assistant, "assistant"},
        {&s_item_u, "item"},
        {&s_parent_message_id, "parent_message_id"},
        {&s_tool_call_name, "tool_call_name"},
        {&s_message_owners, "_message_owners"},
        {&s_tool_call_owners, "_tool_call_owners"},
        {&s_forgot_messages, "_forgot_messages"},
    };
    if (INTERN_NAMES(names) < 0) {
        return -1;
    }
    if (fields_kwnames == NULL && (fields_kwnames = Py_BuildValue("(s)", "fields")) == NULL) {
        return -1;
    }
    if (record_kwnames == NULL) {
        record_kwnames = Py_BuildValue("(sssss)", "tool_call_id", "subagent_run_id",
                                       "started_index", "started_at", "started_clock");
    }
    return record_kwnames == NULL ? -1 : 0;
}

/* The store's part that the core does: no call with the id in the store, and the call's
 * message, if the parent names one the store holds, the store's own assistant message with a
 * count of open calls. *owner: that message (a new reference), or NULL (a new one is made).
 * 1: so; 0: not this way (the Python _start_call does it); -1 with an exception. */
static int
tool_start_store(PyObject *own, ToolStartRead *r, PyObject **owner)
{
    *owner = NULL;
    PyObject *call = call_lookup(OWN(own, O_CALL), r->id);
    if (call == NULL) {
        return -1;
    }
    Py_DECREF(call);
    if (call != Py_None) {
        return 0; /* a replayed start: the call updated in place */
    }
    if (!PyUnicode_Check(r->parent) || PyUnicode_GET_LENGTH(r->parent) == 0) {
        return 1; /* no parent named: a new message, the call's id */
    }
    PyObject *found = call_lookup(OWN(own, O_MESSAGE), r->parent);
    if (found == NULL) {
        return -1;
    }
    if (found == Py_None) {
        Py_DECREF(found);
        return 1; /* a new message, the parent's id */
    }
    PyObject *role = Py_TYPE(found) == item_slots[1].type ? slot_get(found, item_slots[1].gate)
                                                           : NULL;
    PyObject *count = role == NULL ? NULL : slot_get(found, open_calls_off);
    if (role == NULL || !PyUnicode_CheckExact(role) || count == NULL ||
        !PyLong_CheckExact(count) || PyUnicode_Compare(role, str_assistant) != 0) {
        Py_DECREF(found);
        return 0; /* not an assistant message: reported, a new one made */
    }
    *owner = found;
    return 1;
}

/* The conditions, read into r. 1: they hold; 0: not this way; -1 with an exception. */
static int
tool_start_check(PyObject *event, PyObject *own, PyObject *update_cls, PyObject *unset,
                 ToolStartRead *r)
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
        return 0; /* a subagent's: its owners checked, a field of a new message */
    }
    r->id = PyObject_GetAttr(event, s_tool_call_id);
    r->name = r->id == NULL ? NULL : PyObject_GetAttr(event, s_tool_call_name);
    r->parent = r->name == NULL ? NULL : PyObject_GetAttr(event, s_parent_message_id);
    r->open = r->parent == NULL ? NULL : PyObject_GetAttr(verify, s_tool_calls);
    r->owners = r->open == NULL ? NULL : PyObject_GetAttr(verify, s_tool_call_owners);
    r->incoming = r->owners == NULL ? NULL : PyObject_GetAttr(event, s_metadata);
    if (r->incoming == NULL) {
        return -1;
    }
    if (!PyUnicode_CheckExact(r->id) || !(r->parent == unset || PyUnicode_CheckExact(r->parent)) ||
        !PyDict_CheckExact(r->open) ||
        !(PyDict_CheckExact(r->owners) || PyODict_CheckExact(r->owners))) {
        return 0;
    }
    /* Verify: not open, no owner recorded for the call (else its checks), room for one more */
    ok = PyDict_Contains(r->open, r->id);
    if (ok != 0) {
        return ok < 0 ? -1 : 0;
    }
    ok = PyDict_Contains(r->owners, r->id);
    if (ok != 0) {
        return ok < 0 ? -1 : 0;
    }
    ok = verify_room(verify);
    if (ok <= 0) {
        return ok;
    }
    /* the owner recorded: the parent message's (when it has one), else none when the parent's
     * owner may have been forgotten, else absent */
    if (r->parent != unset) {
        PyObject *messages = PyObject_GetAttr(verify, s_message_owners);
        if (messages == NULL) {
            return -1;
        }
        if (!PyDict_CheckExact(messages) && !PyODict_CheckExact(messages)) {
            Py_DECREF(messages);
            return 0;
        }
        /* an OrderedDict is a dict: its lookup is the dict's */
        PyObject *inherited = PyDict_GetItemWithError(messages, r->parent);
        r->record = inherited == NULL ? NULL : Py_NewRef(inherited);
        Py_DECREF(messages);
        if (inherited == NULL && PyErr_Occurred()) {
            return -1;
        }
    }
    if (r->record == NULL) {
        int forgot = attr_false(verify, s_forgot_messages); /* 1: not forgotten */
        if (forgot < 0) {
            return -1;
        }
        if (r->parent == unset || forgot == 1) {
            r->record = Py_NewRef(unset);
        }
    }
    if (r->record != NULL && (ok = owners_room(verify, r->owners, r->id)) <= 0) {
        return ok;
    }
    /* Accumulate's part (checked again after its tally's part, which may report) */
    PyObject *owner;
    ok = tool_start_store(own, r, &owner);
    Py_XDECREF(owner);
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
tool_start_route(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls,
                 PyObject *unset, ToolStartRead *r, PyObject **out)
{
    int ok = tool_start_check(event, own, update_cls, unset, r);
    if (ok <= 0) {
        return ok;
    }
    /* Verify: opened, its owner recorded */
    if (PyDict_SetItem(r->open, r->id, Py_None) < 0 ||
        (r->record != NULL && PyObject_SetItem(r->owners, r->id, r->record) < 0)) {
        return -1;
    }
    /* Accumulate: the tally's part, then the store's (in Python if its conditions changed) */
    PyObject *back = call_method(PyTuple_GET_ITEM(route, T_STARTED), OWN(own, O_ACCUMULATE), event);
    if (back == NULL) {
        return -1;
    }
    Py_DECREF(back);
    PyObject *owner;
    ok = tool_start_store(own, r, &owner);
    if (ok < 0) {
        return -1;
    }
    if (ok == 0) {
        *out = call_method(PyTuple_GET_ITEM(route, T_START_CALL), OWN(own, O_ACCUMULATE), event);
        return *out == NULL ? -1 : 1;
    }
    if (owner == NULL) {
        /* MessageItem(the parent's id or the call's, "assistant"), tool_calls [], appended */
        PyObject *id = PyUnicode_Check(r->parent) && PyUnicode_GET_LENGTH(r->parent) > 0
                           ? r->parent
                           : r->id;
        PyObject *args[2] = {id, str_assistant};
        owner = PyObject_Vectorcall((PyObject *)item_slots[1].type, args, 2, NULL);
        PyObject *calls = owner == NULL ? NULL : PyList_New(0);
        if (calls == NULL) {
            Py_XDECREF(owner);
            return -1;
        }
        slot_set(owner, tool_calls_off, calls);
        if (!PyObject_GC_IsTracked(owner)) { /* MessageItem.tool_calls' setter, as it does */
            PyObject_GC_Track(owner);
        }
        back = call_method(PyTuple_GET_ITEM(route, T_APPEND), OWN(own, O_STORE), owner);
        if (back == NULL) {
            Py_DECREF(owner);
            return -1;
        }
        Py_DECREF(back);
    }
    /* ToolCallItem(id, name, owner), its metadata merged, added to its message, open */
    PyObject *args[3] = {r->id, r->name, owner};
    PyObject *call = PyObject_Vectorcall((PyObject *)item_slots[2].type, args, 3, NULL);
    if (call == NULL) {
        Py_DECREF(owner);
        return -1;
    }
    const ItemSlots *is = &item_slots[2];
    if (r->incoming != unset && merge_into(call, is->metadata, unset, r->incoming, unset) < 0) {
        Py_DECREF(call);
        Py_DECREF(owner);
        return -1;
    }
    /* added to its message, open: owner._open_calls += 1 */
    back = call_method2(PyTuple_GET_ITEM(route, T_ADD_CALL), OWN(own, O_STORE), owner, call);
    if (back == NULL || slot_add(owner, open_calls_off, 1) < 0) {
        Py_XDECREF(back);
        Py_DECREF(call);
        Py_DECREF(owner);
        return -1;
    }
    Py_DECREF(back);
    Py_DECREF(owner);
    slot_set(call, open_off, Py_NewRef(Py_True));
    /* built always: the ledger's part reads it */
    *out = item_update(update_cls, event, call, Py_False, is->metadata, unset, 1);
    Py_DECREF(call);
    return *out == NULL ? -1 : 1;
}

/* Ledger._tool_call_start, for a call the ledger has no record of in a run it has open, its
 * record kept (room in the run's list): counted, the call started in the ledger's tally (a
 * dropped entry when it cannot track it), timed, its ToolCallRecord made and kept, the store's
 * call (the Update's item) held, its name, parent and merged metadata read. 1: done; 0: not
 * this way (nothing changed: the handler does it); -1 with an exception. */
static int
tool_start_ledger(PyObject *event, PyObject *route, PyObject *ledger, PyObject *update,
                  PyObject *unset, ToolStartRead *r)
{
    PyObject *call = PyObject_GetAttr(update, s_item_u);
    int status = -1;
    PyObject *current = call == NULL ? NULL : PyObject_GetAttr(ledger, s_current);
    PyObject *counts = current == NULL ? NULL : PyObject_GetAttr(ledger, s_counts);
    PyObject *tools = counts == NULL ? NULL : PyObject_GetAttr(ledger, s_tools);
    PyObject *live_map = tools == NULL ? NULL : PyObject_GetAttr(ledger, s_live);
    PyObject *tally = live_map == NULL ? NULL : PyObject_GetAttr(ledger, s_tally);
    PyObject *calls = tally == NULL ? NULL : PyObject_GetAttr(current, s_tool_calls_r);
    PyObject *bound = calls == NULL ? NULL : PyObject_GetAttr(ledger, s_max_entries);
    PyObject *ctx = bound == NULL ? NULL : PyObject_GetAttr(ledger, s_ctx);
    PyObject *plain = NULL, *when = NULL, *at = NULL, *tool = NULL;
    if (ctx == NULL) {
        goto done;
    }
    status = 0;
    if (current == Py_None || !PyDict_CheckExact(counts) || !PyDict_CheckExact(tools) ||
        !PyDict_CheckExact(live_map) || !PyList_CheckExact(calls) ||
        Py_TYPE(call) != item_slots[2].type) {
        goto done; /* no run open (the handler opens one), or not as built */
    }
    if (bound != Py_None) {
        Py_ssize_t most = PyLong_CheckExact(bound) ? PyLong_AsSsize_t(bound) : -1;
        if (most == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        }
        if (most < 0 || PyList_GET_SIZE(calls) >= most) {
            goto done; /* no room: a dropped entry, the handler's */
        }
    }
    int known = PyDict_Contains(tools, r->id);
    if (known != 0) {
        status = known < 0 ? -1 : 0; /* a START repeated in the run: the handler's */
        goto done;
    }
    if ((status = plain_metadata(slot_get(call, item_slots[2].metadata), unset, &plain)) <= 0) {
        goto done;
    }
    /* All read: now as the handler does, in its order. */
    status = -1;
    if (ledger_tallied(counts, s_k_tool_start, tally, s_start, r->id, current) < 0) {
        goto done;
    }
    when = ledger_time(ledger, ctx, event, unset);
    at = when == NULL ? NULL : PyObject_GetAttr(ctx, s_index);
    if (at == NULL) {
        goto done;
    }
    PyObject *args[5] = {r->id, Py_None, at, PyTuple_GET_ITEM(when, 0), PyTuple_GET_ITEM(when, 1)};
    tool = PyObject_Vectorcall(PyTuple_GET_ITEM(route, T_RECORD), args, 0, record_kwnames);
    if (tool == NULL || PyList_Append(calls, tool) < 0 || PyDict_SetItem(tools, r->id, tool) < 0 ||
        PyDict_SetItem(live_map, r->id, call) < 0 ||
        PyObject_SetAttr(tool, s_name, r->name) < 0 ||
        PyObject_SetAttr(tool, s_parent_message_id, r->parent == unset ? Py_None : r->parent) < 0 ||
        PyObject_SetAttr(tool, s_metadata, plain) < 0) {
        goto done;
    }
    status = 1;
done:
    Py_XDECREF(call);
    Py_XDECREF(current);
    Py_XDECREF(counts);
    Py_XDECREF(tools);
    Py_XDECREF(live_map);
    Py_XDECREF(tally);
    Py_XDECREF(calls);
    Py_XDECREF(bound);
    Py_XDECREF(ctx);
    Py_XDECREF(plain);
    Py_XDECREF(when);
    Py_XDECREF(at);
    Py_XDECREF(tool);
    return status;
}

/* The ledger's part, once the Update was emitted: the call's record made here
 * (tool_start_ledger) or by its handler, with the Update as its item (as Ledger.feed does). */
static int
tool_start_after(PyObject *event, PyObject *route, PyObject *own, PyObject *update,
                 PyObject *unset, ToolStartRead *r)
{
    PyObject *ledger = OWN(own, O_LEDGER);
    if (PyObject_SetAttr(ledger, s_item, update) < 0) {
        return -1;
    }
    return ledger_handled(tool_start_ledger(event, route, ledger, update, unset, r),
                          PyTuple_GET_ITEM(route, T_HANDLER), ledger, event);
}

#endif /* AGUI_META_STARTS_H */
