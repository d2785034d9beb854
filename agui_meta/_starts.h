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
 * Those Python methods are the specification. start_route() does what they do when every
 * condition they test holds, all checked before anything changes (the new message's class
 * and the store's append are called as the handler calls them); otherwise the event goes
 * through the stages' feeds, so that every error and report (an id open already, no room, a
 * message that exists, a subagent's tag) is the Python path's.
 */

#ifndef AGUI_META_STARTS_H
#define AGUI_META_STARTS_H

#include <Python.h>

/* The route: (chunks or None, verify, the name of verify's table of open ids, the name of its
 * table of owners, accumulate's message lookup, the store's append, ledger, the type the ledger
 * counts, the role of the message (None: the event's, "assistant" when absent)). */
enum { S_CHUNKS, S_VERIFY, S_TABLE, S_OWNERS, S_LOOKUP, S_APPEND, S_LEDGER, S_KIND, S_ROLE,
       S_SIZE };

static PyObject *s_role, *s_name, *s_max_closed_ids, *str_assistant, *start_kwnames,
    *name_key;

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

static int
start_configure(void)
{
    s_role = PyUnicode_InternFromString("role");
    s_name = s_role == NULL ? NULL : PyUnicode_InternFromString("name");
    s_max_closed_ids = s_name == NULL ? NULL : PyUnicode_InternFromString("max_closed_ids");
    str_assistant = s_max_closed_ids == NULL ? NULL : PyUnicode_InternFromString("assistant");
    name_key = str_assistant == NULL ? NULL : PyUnicode_InternFromString("name");
    start_kwnames = name_key == NULL ? NULL : Py_BuildValue("(s)", "fields");
    return start_kwnames == NULL ? -1 : 0;
}

/* The conditions, read into r. 1: they hold; 0: not this way; -1 with an exception. */
static int
start_check(PyObject *event, PyObject *route, PyObject *update_cls, PyObject *unset,
            StartRead *r)
{
    if (item_slots[1].type == NULL || item_slots[2].type == NULL) {
        return 0; /* before configure() */
    }
    if ((s_message_id == NULL && end_configure() < 0) ||
        (start_kwnames == NULL && start_configure() < 0)) {
        return -1;
    }
    PyObject *verify = PyTuple_GET_ITEM(route, S_VERIFY);
    int ok = chain_ready(PyTuple_GET_ITEM(route, S_CHUNKS), verify);
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
    if (r->record) {
        PyObject *limit = PyObject_GetAttr(verify, s_max_closed_ids);
        if (limit == NULL) {
            return -1;
        }
        Py_ssize_t most = limit == Py_None         ? PY_SSIZE_T_MAX
                          : PyLong_CheckExact(limit) ? PyLong_AsSsize_t(limit)
                                                     : -1;
        Py_DECREF(limit);
        if (most == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (most < 0 || PyDict_GET_SIZE(r->owners) + 1 > most) {
            return 0; /* the oldest forgotten: the Python way */
        }
    }
    /* Accumulate: no message with the id in the store; the role and name as the handler
     * takes them. */
    PyObject *found = call_lookup(PyTuple_GET_ITEM(route, S_LOOKUP), r->id);
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
    return ledger_ready(PyTuple_GET_ITEM(route, S_LEDGER), update_cls, 1);
}

/* The verifier's and the accumulator's parts, the conditions held. 1 with *out the Update (a
 * new reference; Py_True when build is false); 0: not this way (nothing changed); -1 with an
 * exception. */
static int
start_route(PyObject *event, PyObject *route, PyObject *update_cls, PyObject *unset, int build,
            StartRead *r, PyObject **out)
{
    int ok = start_check(event, route, update_cls, unset, r);
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
    if (fields == NULL || (r->name != unset && PyDict_SetItem(fields, name_key, r->name) < 0)) {
        Py_XDECREF(fields);
        return -1;
    }
    PyObject *args[4] = {r->id, r->role, empty_str, fields};
    PyObject *item = PyObject_Vectorcall((PyObject *)item_slots[1].type, args, 3, start_kwnames);
    Py_DECREF(fields);
    if (item == NULL) {
        return -1;
    }
    PyObject *back = PyObject_CallOneArg(PyTuple_GET_ITEM(route, S_APPEND), item);
    if (back == NULL) {
        Py_DECREF(item);
        return -1;
    }
    Py_DECREF(back);
    const ItemSlots *is = &item_slots[1];
    if (r->incoming != unset) {
        /* read again: the append ran Python code */
        PyObject *existing = slot_get(item, is->metadata);
        PyObject *merged = existing == NULL ? NULL : merge_metadata(existing, r->incoming, unset);
        if (merged == NULL || merged == Py_None) {
            if (merged == Py_None) {
                Py_DECREF(merged);
                PyErr_SetString(PyExc_SystemError, "start_route(): the merge refused a message");
            }
            else if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_SystemError, "start_route(): a message without metadata");
            }
            Py_DECREF(item);
            return -1;
        }
        slot_set(item, is->metadata, merged);
    }
    slot_set(item, streaming_off, Py_NewRef(Py_True));
    if (build) {
        PyObject *metadata = slot_get(item, is->metadata);
        PyObject *fields4[4] = {event, item, Py_False,
                                metadata == NULL || metadata == unset ? Py_None : metadata};
        *out = PyObject_Vectorcall(update_cls, fields4, 4, NULL);
    }
    else {
        *out = Py_NewRef(Py_True);
    }
    Py_DECREF(item);
    return *out == NULL ? -1 : 1;
}

/* The ledger's part, once the Update was emitted: the event's type counted. */
static int
start_after(PyObject *route)
{
    return ledger_count(PyTuple_GET_ITEM(route, S_LEDGER), PyTuple_GET_ITEM(route, S_KIND));
}

#endif /* AGUI_META_STARTS_H */
