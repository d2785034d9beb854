/* The C core's per-event work on the fast path: fields read by slot offset, accumulate's
 * content handlers and the metadata merge (included once, by _native.c).
 *
 * Every object this file reads or writes by offset is of a class whose member descriptors were
 * read once by configure() (msgspec Structs and the store's __slots__ classes), and is checked
 * to be of exactly that class first; anything else goes the Python way. The Python code these
 * functions stand for is named above each: it is their specification.
 */

#ifndef AGUI_META_LOOP_H
#define AGUI_META_LOOP_H

#include <Python.h>
#include <structmember.h> /* T_OBJECT, T_OBJECT_EX, READONLY */

/* -- slots ------------------------------------------------------------------------------- */

/* The object in the slot at offset off of o (borrowed; NULL when the slot is empty). */
static inline PyObject *
slot_get(PyObject *o, Py_ssize_t off)
{
    return *(PyObject **)((char *)o + off);
}

/* Store value (a new reference, stolen) in the slot at offset off of o. */
static inline void
slot_set(PyObject *o, Py_ssize_t off, PyObject *value)
{
    PyObject **p = (PyObject **)((char *)o + off);
    Py_XSETREF(*p, value);
}

/* The deltas a store item holds unjoined, from its _parts or _arg_parts slot (None, or a
 * list): their count, or -1 (no exception) when the slot is not as built. */
static inline Py_ssize_t
parts_count(PyObject *parts)
{
    if (parts == Py_None) {
        return 0;
    }
    return parts != NULL && PyList_CheckExact(parts) ? PyList_GET_SIZE(parts) : -1;
}

/* delta appended to the unjoined deltas in o's slot at off: to the list there, or as a new
 * list [delta] when there is none (None, or an empty list). 0, or -1 with an exception. */
static int
parts_append(PyObject *o, Py_ssize_t off, PyObject *delta)
{
    PyObject *parts = slot_get(o, off);
    if (parts != NULL && PyList_CheckExact(parts) && PyList_GET_SIZE(parts) > 0) {
        return PyList_Append(parts, delta);
    }
    PyObject *list = PyList_New(1);
    if (list == NULL) {
        return -1;
    }
    PyList_SET_ITEM(list, 0, Py_NewRef(delta));
    slot_set(o, off, list);
    return 0;
}

/* o's slot at off (a count) plus by, as `o.count += by` does. 0, or -1 with an exception. */
static int
slot_add(PyObject *o, Py_ssize_t off, long by)
{
    PyObject *was = slot_get(o, off);
    if (was == NULL) {
        PyErr_SetString(PyExc_SystemError, "a count the core adds to is not set");
        return -1;
    }
    PyObject *delta = PyLong_FromLong(by);
    PyObject *now = delta == NULL ? NULL : PyNumber_Add(was, delta);
    Py_XDECREF(delta);
    if (now == NULL) {
        return -1;
    }
    slot_set(o, off, now);
    return 0;
}

/* A name the core reads attributes by, interned once into *slot. */
typedef struct {
    PyObject **slot;
    const char *text;
} Name;

/* Each of names interned (those not yet). 0, or -1 with an exception: a caller that tests
 * one name to know whether it ran tests its table's last. */
static int
intern_names(const Name *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (*names[i].slot == NULL) {
            *names[i].slot = PyUnicode_InternFromString(names[i].text);
            if (*names[i].slot == NULL) {
                return -1;
            }
        }
    }
    return 0;
}

#define INTERN_NAMES(names) intern_names((names), sizeof(names) / sizeof((names)[0]))

/* The offset of cls's writable object slot name (a member descriptor), or -1 with an error
 * (also, without looking, when an error is already set: configure() reads many in a row). */
static Py_ssize_t
slot_offset(PyObject *cls, const char *name)
{
    if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) {
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if ((member->type == T_OBJECT_EX || member->type == T_OBJECT) &&
            !(member->flags & READONLY)) {
            offset = member->offset;
        }
    }
    Py_DECREF(descr);
    if (offset < 0) {
        PyErr_Format(PyExc_TypeError, "configure(): %R.%s is not an object slot", cls, name);
    }
    return offset;
}

/* The content deltas the fast path takes, each with its fields' offsets. */
typedef struct {
    PyTypeObject *type;
    long kind; /* 1: a text or reasoning delta (of a message), 2: TOOL_CALL_ARGS (of a call) */
    Py_ssize_t metadata, subagent_run_id, id, delta;
    PyObject *tag; /* the class's type, a str: its UTF-8 is tag_utf8 (tag_len bytes) */
    const char *tag_utf8;
    Py_ssize_t tag_len;
    PyObject *prefix; /* bytes: {"type":"<tag>","<id key>":" (see shape_written) */
} DeltaSlots;

/* A store item class: MessageItem (kind 1) or ToolCallItem (kind 2). gate is the slot that
 * says whether the fast path may append (role of a message: not "activity"; function_fields of
 * a call: not None); parts and text the streamed deltas and the text they follow. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t gate, parts, text, metadata;
} ItemSlots;

static DeltaSlots delta_slots[3];
static ItemSlots item_slots[3]; /* by kind; [0] unused */

/* Context.index, and its member descriptor (a subclass of Context that keeps it qualifies). */
static Py_ssize_t ctx_index_off = -1;
static PyObject *ctx_index_descr;

/* MergedMetadata (_writes, _version, _size) and _Writes (a dict subclass: the cells, and
 * version). */
static PyTypeObject *Merged_type, *Writes_type;
static Py_ssize_t mm_writes_off, mm_version_off, mm_size_off;
static Py_ssize_t w_version_off;
/* The kinds of the routes the loop takes the events off the fast path by (each route's first
 * member; _driver._routes makes them): the stages' handlers without their feeds (_direct.h),
 * a step's stages (_steps.h), an item's end (_ends.h), a message's start (_starts.h), a tool
 * result (_results.h), a tool call's start (_starts.h), an activity's delta (_activity.h). */
enum {
    ROUTE_DIRECT,
    ROUTE_STEP,
    ROUTE_END,
    ROUTE_START,
    ROUTE_RESULT,
    ROUTE_TOOL_START,
    ROUTE_ACTIVITY,
};

/* _metadata._copy_json, the specification of json_copy, which calls it for what it does not
 * take (set once by configure_copy, at import of _metadata). */
static PyObject *copy_json_func;

/* _metadata.copy_json: a deep copy of a JSON value, new dicts and lists, everything else
 * shared. Exact dicts and lists are copied here, and JSON's scalars shared; anything else (a
 * subclass of dict or list, a MergedMetadata, any other object) goes to copy_json_func, which
 * does it as the specification. New reference, or NULL with an exception. */
static PyObject *
json_copy(PyObject *value)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type != &PyDict_Type && type != &PyList_Type) {
        if (type == &PyUnicode_Type || type == &PyLong_Type || type == &PyFloat_Type ||
            type == &PyBool_Type || value == Py_None) {
            Py_INCREF(value);
            return value;
        }
        if (copy_json_func == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "copy_json(): configure_copy() was not called");
            return NULL;
        }
        return PyObject_CallOneArg(copy_json_func, value);
    }
    if (Py_EnterRecursiveCall(" while copying a JSON value")) {
        return NULL;
    }
    PyObject *out;
    if (type == &PyList_Type) {
        /* Element by element while the list has them, as a list comprehension reads it (a
         * subclass's copy runs Python code, which may change the list). */
        out = PyList_New(0);
        for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(value); i++) {
            PyObject *element = PyList_GET_ITEM(value, i);
            PyObject *copy;
            if (PyDict_Check(element) || PyList_Check(element)) {
                Py_INCREF(element);
                copy = json_copy(element);
                Py_DECREF(element);
            }
            else {
                copy = element;
                Py_INCREF(copy);
            }
            if (copy == NULL || PyList_Append(out, copy) < 0) {
                Py_CLEAR(out);
            }
            Py_XDECREF(copy);
        }
    }
    else {
        out = PyDict_New();
        Py_ssize_t pos = 0, size = PyDict_GET_SIZE(value);
        PyObject *key, *item;
        while (out != NULL && PyDict_Next(value, &pos, &key, &item)) {
            int status;
            if (PyDict_Check(item) || PyList_Check(item)) {
                Py_INCREF(key);
                Py_INCREF(item);
                PyObject *copy = json_copy(item);
                status = copy == NULL ? -1 : PyDict_SetItem(out, key, copy);
                Py_XDECREF(copy);
                Py_DECREF(item);
                Py_DECREF(key);
                if (status == 0 && PyDict_GET_SIZE(value) != size) {
                    PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
                    status = -1;
                }
            }
            else {
                status = PyDict_SetItem(out, key, item);
            }
            if (status < 0) {
                Py_CLEAR(out);
            }
        }
    }
    Py_LeaveRecursiveCall();
    return out;
}

/* dict.get and list.append, known by their method definitions (a bound one is called
 * directly on its dict or list). */
static PyMethodDef *dict_get_def, *list_append_def;

static PyObject *str_activity;

static const DeltaSlots *
delta_slots_of(PyTypeObject *type)
{
    for (int i = 0; i < 3; i++) {
        if (delta_slots[i].type == type) {
            return &delta_slots[i];
        }
    }
    return NULL;
}

/* Whether f is the builtin method def bound to an object of exactly the type check says. */
static inline int
bound_builtin(PyObject *f, PyMethodDef *def, PyTypeObject *self_type)
{
    return PyCFunction_Check(f) && ((PyCFunctionObject *)f)->m_ml == def &&
           Py_IS_TYPE(PyCFunction_GET_SELF(f), self_type);
}

/* lookup(key) for a store lookup (new reference), a dict's get called directly. */
static PyObject *
call_lookup(PyObject *lookup, PyObject *key)
{
    if (bound_builtin(lookup, dict_get_def, &PyDict_Type) && PyUnicode_CheckExact(key)) {
        PyObject *found = PyDict_GetItemWithError(PyCFunction_GET_SELF(lookup), key);
        if (found == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            found = Py_None;
        }
        Py_INCREF(found);
        return found;
    }
    return PyObject_CallOneArg(lookup, key);
}

/* d[key] = d.get(key, 0) + n, for counts kept in a dict (n an int). 0, or -1 with an
 * exception. */
static int
dict_add(PyObject *d, PyObject *key, PyObject *n)
{
    PyObject *was = PyDict_GetItemWithError(d, key); /* borrowed */
    if (was == NULL && PyErr_Occurred()) {
        return -1;
    }
    PyObject *now = was == NULL ? Py_NewRef(n) : PyNumber_Add(was, n);
    if (now == NULL) {
        return -1;
    }
    int status = PyDict_SetItem(d, key, now);
    Py_DECREF(now);
    return status;
}

/* -- the metadata merge ------------------------------------------------------------------ */

/* What the cyclic collector need not walk. A record of writes holds its cells, a cell holds
 * a version and a value the merge was given, a view holds its record: nothing any of them
 * reaches refers back to it, so none can be part of a reference cycle, and every one is freed
 * by its reference count. They are made untracked, as CPython makes a dict of atomic values
 * and (at its first collection) a tuple of untracked values: a record is tracked again by the
 * dict's own rule as soon as it holds a cell that is (a cell of a tracked value, or a
 * cell's lists of several writes). A process holding many stores has that many fewer objects
 * for each full collection to walk (see docs/performance.md). The Python path keeps them
 * tracked: the difference is the collector's work, never a result. */
static inline void
untrack_cell(PyObject *cell, PyObject *value)
{
    if (!PyObject_GC_IsTracked(value)) {
        PyObject_GC_UnTrack(cell);
    }
}

/* A new _Writes() (no cells, version 0), or NULL with an exception. */
static PyObject *
new_writes(void)
{
    PyObject *none = PyTuple_New(0);
    PyObject *writes = none == NULL ? NULL : Writes_type->tp_new(Writes_type, none, NULL);
    Py_XDECREF(none);
    if (writes == NULL) {
        return NULL;
    }
    if (!PyDict_Check(writes)) {
        Py_DECREF(writes);
        PyErr_SetString(PyExc_SystemError, "the metadata's writes are not as built");
        return NULL;
    }
    PyObject *version = PyLong_FromLong(0);
    if (version == NULL) {
        Py_DECREF(writes);
        return NULL;
    }
    slot_set(writes, w_version_off, version);
    PyObject_GC_UnTrack(writes); /* see untrack_cell */
    return writes;
}

/* MergedMetadata._at(writes): the view of writes as of its newest merge (new reference). */
static PyObject *
merged_at(PyObject *writes)
{
    PyObject *version = Py_IS_TYPE(writes, Writes_type) ? slot_get(writes, w_version_off) : NULL;
    if (version == NULL) {
        PyErr_SetString(PyExc_SystemError, "the metadata's writes are not as built");
        return NULL;
    }
    PyObject *size = PyLong_FromSsize_t(PyDict_GET_SIZE(writes));
    if (size == NULL) {
        return NULL;
    }
    PyObject *view = Merged_type->tp_alloc(Merged_type, 0);
    if (view == NULL) {
        Py_DECREF(size);
        return NULL;
    }
    Py_INCREF(writes);
    slot_set(view, mm_writes_off, writes);
    Py_INCREF(version);
    slot_set(view, mm_version_off, version);
    slot_set(view, mm_size_off, size);
    PyObject_GC_UnTrack(view); /* see untrack_cell */
    return view;
}

/* A cell of a _Writes record, (version, value) or [versions, values]: its last value
 * (borrowed), or NULL (no exception) when the cell is not as built. */
static PyObject *
cell_last(PyObject *cell)
{
    if (PyTuple_CheckExact(cell) && PyTuple_GET_SIZE(cell) == 2) {
        return PyTuple_GET_ITEM(cell, 1);
    }
    if (PyList_CheckExact(cell) && PyList_GET_SIZE(cell) == 2) {
        PyObject *values = PyList_GET_ITEM(cell, 1);
        if (PyList_CheckExact(values) && PyList_GET_SIZE(values) > 0) {
            return PyList_GET_ITEM(values, PyList_GET_SIZE(values) - 1);
        }
    }
    return NULL;
}

/* _Writes.write(incoming): one more merge of incoming (an exact dict of str keys) into
 * writes. sole: no version but the newest can ever read the record (see merge_metadata), so
 * a key written again keeps its newest write only, (version, value), not its history.
 * Returns 0, or -1 with an exception. */
static int
writes_write(PyObject *writes, PyObject *incoming, int sole)
{
    PyObject *cells = writes; /* the record is the cells' dict */
    PyObject *last = Py_IS_TYPE(writes, Writes_type) ? slot_get(writes, w_version_off) : NULL;
    if (last == NULL) {
        PyErr_SetString(PyExc_SystemError, "the metadata's writes are not as built");
        return -1;
    }
    PyObject *one = PyLong_FromLong(1);
    if (one == NULL) {
        return -1;
    }
    PyObject *version = PyNumber_Add(last, one);
    Py_DECREF(one);
    if (version == NULL) {
        return -1;
    }
    Py_INCREF(version);
    slot_set(writes, w_version_off, version); /* the slot's reference; ours is released below */
    Py_INCREF(cells);
    int status = -1;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(incoming, &pos, &key, &value)) {
        PyObject *cell = PyDict_GetItemWithError(cells, key); /* borrowed */
        PyObject *made = NULL;
        if (cell == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            /* cells[key] = (version, value): a new key, last in the order */
            made = PyTuple_Pack(2, version, value);
            if (made != NULL) {
                untrack_cell(made, value);
            }
            if (made == NULL || PyDict_SetItem(cells, key, made) < 0) {
                Py_XDECREF(made);
                goto done;
            }
        }
        else if (sole) {
            /* cells[key] = (version, value): the earlier writes are nobody's to read */
            made = PyTuple_Pack(2, version, value);
            if (made != NULL) {
                untrack_cell(made, value);
            }
            if (made == NULL || PyDict_SetItem(cells, key, made) < 0) {
                Py_XDECREF(made);
                goto done;
            }
        }
        else if (PyTuple_CheckExact(cell) && PyTuple_GET_SIZE(cell) == 2) {
            /* cells[key] = [[cell[0], version], [cell[1], value]] */
            PyObject *versions = PyList_New(2), *values = PyList_New(2);
            if (versions == NULL || values == NULL) {
                Py_XDECREF(versions);
                Py_XDECREF(values);
                goto done;
            }
            PyObject *first = PyTuple_GET_ITEM(cell, 0), *was = PyTuple_GET_ITEM(cell, 1);
            Py_INCREF(first);
            PyList_SET_ITEM(versions, 0, first);
            Py_INCREF(version);
            PyList_SET_ITEM(versions, 1, version);
            Py_INCREF(was);
            PyList_SET_ITEM(values, 0, was);
            Py_INCREF(value);
            PyList_SET_ITEM(values, 1, value);
            made = PyList_New(2);
            if (made == NULL) {
                Py_DECREF(versions);
                Py_DECREF(values);
                goto done;
            }
            PyList_SET_ITEM(made, 0, versions);
            PyList_SET_ITEM(made, 1, values);
            if (PyDict_SetItem(cells, key, made) < 0) {
                Py_DECREF(made);
                goto done;
            }
        }
        else if (PyList_CheckExact(cell) && PyList_GET_SIZE(cell) == 2 &&
                 PyList_CheckExact(PyList_GET_ITEM(cell, 0)) &&
                 PyList_CheckExact(PyList_GET_ITEM(cell, 1))) {
            /* cell[0].append(version); cell[1].append(value) */
            if (PyList_Append(PyList_GET_ITEM(cell, 0), version) < 0 ||
                PyList_Append(PyList_GET_ITEM(cell, 1), value) < 0) {
                goto done;
            }
        }
        else {
            PyErr_SetString(PyExc_SystemError, "the metadata's writes are not as built");
            goto done;
        }
        Py_XDECREF(made);
    }
    status = 0;
done:
    Py_DECREF(version);
    Py_DECREF(cells);
    return status;
}

/* _accumulate._merged(existing, incoming) for the common case: existing absent (None or
 * UNSET) or the newest version of a MergedMetadata, incoming an exact dict of str keys.
 * Returns the merged metadata (new reference), Py_None (new reference: not this case, the
 * Python merge runs; nothing was changed) or NULL with an exception. */
static PyObject *
merge_metadata(PyObject *existing, PyObject *incoming, PyObject *unset)
{
    if (!PyDict_CheckExact(incoming)) {
        Py_RETURN_NONE;
    }
    PyObject *writes = NULL; /* the record merged into (a strong reference), or NULL: new */
    if (existing == Py_None || existing == unset) {
        /* base = MergedMetadata(): a new record */
    }
    else if (Py_IS_TYPE(existing, Merged_type)) {
        PyObject *record = slot_get(existing, mm_writes_off);
        PyObject *version = slot_get(existing, mm_version_off);
        if (record == NULL || version == NULL || !Py_IS_TYPE(record, Writes_type)) {
            Py_RETURN_NONE;
        }
        PyObject *newest = slot_get(record, w_version_off);
        if (newest == NULL || !PyLong_CheckExact(version) || !PyLong_CheckExact(newest)) {
            Py_RETURN_NONE;
        }
        int same = PyObject_RichCompareBool(version, newest, Py_EQ);
        if (same <= 0) {
            /* an older version (its own record from here on: Python), or an error */
            if (same < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        if (PyDict_GET_SIZE(incoming) == 0) {
            /* merge_wire: merging nothing into a MergedMetadata gives it back */
            Py_INCREF(existing);
            return existing;
        }
        writes = record;
        Py_INCREF(writes); /* held: copy_json below runs Python code */
    }
    else {
        Py_RETURN_NONE; /* a history's dict, list or string: Python */
    }
    /* Each str key checked, and the containers among the values copied (copy_json), as
     * _merged copies them: a later mutation of the event cannot reach the item. */
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int containers = 0;
    while (PyDict_Next(incoming, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            Py_XDECREF(writes);
            Py_RETURN_NONE;
        }
        if (PyDict_Check(value) || PyList_Check(value)) {
            containers = 1;
        }
    }
    PyObject *copied = incoming;
    Py_INCREF(copied);
    if (containers) {
        Py_SETREF(copied, PyDict_New());
        if (copied == NULL) {
            Py_XDECREF(writes);
            return NULL;
        }
        pos = 0;
        while (PyDict_Next(incoming, &pos, &key, &value)) {
            int status;
            if (PyDict_Check(value) || PyList_Check(value)) {
                PyObject *copy = json_copy(value);
                if (copy == NULL) {
                    Py_DECREF(copied);
                    Py_XDECREF(writes);
                    return NULL;
                }
                status = PyDict_SetItem(copied, key, copy);
                Py_DECREF(copy);
            }
            else {
                status = PyDict_SetItem(copied, key, value);
            }
            if (status < 0) {
                Py_DECREF(copied);
                Py_XDECREF(writes);
                return NULL;
            }
        }
    }
    if (writes == NULL) {
        writes = new_writes();
        if (writes == NULL) {
            Py_DECREF(copied);
            return NULL;
        }
    }
    PyObject *merged = NULL;
    /* The newest version held by its item alone (the caller's reference is borrowed from the
     * item's slot), its record by it alone (and us): no other version exists or can, so the
     * merge is made in place, unobservably, rather than as a new version over a record that
     * keeps every write (which only other versions read). Under drain(), where nobody holds
     * an Update, an item's metadata then stays one object and one write per key. */
    int sole = existing != Py_None && existing != unset && Py_REFCNT(existing) == 1 &&
               Py_REFCNT(writes) == 2;
    if (PyDict_GET_SIZE(copied) == 0) {
        merged = merged_at(writes);
    }
    else if (writes_write(writes, copied, sole) == 0) {
        if (sole) {
            PyObject *version = slot_get(writes, w_version_off);
            PyObject *size = PyLong_FromSsize_t(PyDict_GET_SIZE(writes));
            if (size != NULL) {
                Py_INCREF(version);
                slot_set(existing, mm_version_off, version);
                slot_set(existing, mm_size_off, size);
                merged = Py_NewRef(existing);
            }
        }
        else {
            merged = merged_at(writes);
        }
    }
    Py_DECREF(writes);
    Py_DECREF(copied);
    return merged;
}

/* -- accumulate's content handlers -------------------------------------------------------- */

/* Accumulate._text_content (kind 1) and _tool_args (kind 2) for the common case: the item
 * of id found, of the store's own class, not an activity message (a call with a function
 * object), with parts already begun or text content; the metadata incoming absent (unset)
 * or merged by merge_metadata; delta appended. build: whether the Update (of event) is wanted
 * (else Py_True stands for it, and event may be NULL). Returns the Update (new reference),
 * Py_None (new reference: "not this way", the Python handler runs; nothing was changed) or
 * NULL with an exception. */
/* The Update of item for event (done: Py_True or Py_False), with the item's metadata (None
 * for UNSET), as the handlers build it; when build is false, Py_True, standing for the Update
 * nobody reads. A new reference, or NULL with an exception. */
static PyObject *
item_update(PyObject *update_cls, PyObject *event, PyObject *item, PyObject *done,
            Py_ssize_t metadata_off, PyObject *unset, int build)
{
    if (!build) {
        return Py_NewRef(Py_True);
    }
    PyObject *metadata = slot_get(item, metadata_off);
    PyObject *fields[4] = {event, item, done,
                           metadata == NULL || metadata == unset ? Py_None : metadata};
    return PyObject_Vectorcall(update_cls, fields, 4, NULL);
}

/* item.metadata (the slot at off) = merge_metadata(existing, incoming), for a merge whose
 * own test (mergeable) the caller ran. 0, or -1 with an exception. */
static int
merge_into(PyObject *item, Py_ssize_t off, PyObject *existing, PyObject *incoming,
           PyObject *unset)
{
    PyObject *merged = merge_metadata(existing, incoming, unset);
    if (merged == NULL) {
        return -1;
    }
    if (merged == Py_None) {
        Py_DECREF(merged);
        PyErr_SetString(PyExc_SystemError, "the core's merge refused what it takes");
        return -1;
    }
    slot_set(item, off, merged);
    return 0;
}

static PyObject *
content_apply(PyObject *event, PyObject *id, PyObject *incoming, PyObject *delta, long kind,
              PyObject *lookup, PyObject *unset, PyObject *update_cls, int build, PyObject **known)
{
    const ItemSlots *is = &item_slots[kind];
    /* known: where the caller keeps the item the last delta of id found (or NULL), when no
     * Python code ran since; the lookup's item is kept there when it takes this one */
    PyObject *item = known != NULL && *known != NULL ? Py_NewRef(*known) : call_lookup(lookup, id);
    if (item == NULL) {
        return NULL;
    }
    PyObject *merged = NULL;
    if (Py_TYPE(item) != is->type) {
        goto other_way; /* None (missing), or a store's own item class */
    }
    /* Read after the lookup (which may have run Python code), each checked. */
    PyObject *gate = slot_get(item, is->gate);
    if (gate == NULL) {
        goto other_way;
    }
    if (kind == 1) {
        /* item.role == "activity": a role that is not a str goes the Python way */
        if (!PyUnicode_CheckExact(gate) ||
            (PyUnicode_GET_LENGTH(gate) == PyUnicode_GET_LENGTH(str_activity) &&
             PyUnicode_Compare(gate, str_activity) == 0)) {
            goto other_way;
        }
    }
    else if (gate == Py_None) {
        goto other_way; /* a call without a function object: the Python handler raises */
    }
    Py_ssize_t pending = parts_count(slot_get(item, is->parts));
    PyObject *metadata = slot_get(item, is->metadata);
    if (pending < 0 || metadata == NULL) {
        goto other_way;
    }
    if (pending == 0) {
        PyObject *text = slot_get(item, is->text);
        if (text == NULL || !PyUnicode_CheckExact(text)) {
            goto other_way;
        }
    }
    if (incoming != unset) {
        merged = merge_metadata(metadata, incoming, unset);
        if (merged == NULL) {
            goto fail;
        }
        if (merged == Py_None) {
            Py_CLEAR(merged);
            goto other_way;
        }
    }
    if (parts_append(item, is->parts, delta) < 0) {
        goto fail;
    }
    if (merged != NULL) {
        slot_set(item, is->metadata, merged); /* item.metadata = merged (the reference moves) */
        merged = NULL;
    }
    PyObject *update = item_update(update_cls, event, item, Py_False, is->metadata, unset, build);
    if (known != NULL && *known != item) {
        Py_XSETREF(*known, Py_NewRef(item));
    }
    Py_DECREF(item);
    return update;
other_way:
    Py_DECREF(item);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(merged);
    Py_DECREF(item);
    return NULL;
}

/* content_apply for a decoded event (its fields read by slot). */
static PyObject *
content_update(PyObject *event, const DeltaSlots *es, PyObject *lookup, PyObject *unset,
               PyObject *update_cls, int build)
{
    PyObject *id = slot_get(event, es->id), *incoming = slot_get(event, es->metadata);
    PyObject *delta = slot_get(event, es->delta);
    if (id == NULL || incoming == NULL || delta == NULL) {
        Py_RETURN_NONE;
    }
    return content_apply(event, id, incoming, delta, es->kind, lookup, unset, update_cls, build,
                         NULL);
}

#endif /* AGUI_META_LOOP_H */
