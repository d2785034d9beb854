/* agui_meta._native: the optional C core of the driver's batch loop.
 *
 * The pure-Python implementation (agui_meta/_driver.py, agui_meta/_fastdecode.py) is the
 * specification; this module only does faster what it does, and hands back to it everything
 * unusual, so that every error, report, byte offset and line number is the Python path's.
 *
 * scan(data) -> bool
 *     One pass over JSON text that proves the checks of _fastdecode.fast_decode need not run:
 *     valid UTF-8, nesting no deeper than MAX_NESTING, no key repeated in one object (keys
 *     compared as raw bytes; a key with an escape, an object of more than MAX_KEYS keys, or
 *     more than MAX_TRACKED keys open at once is "unproven"), no \uD800-\uDFFF escape, no
 *     \u003a escape (nor the text "\\u003a"), no run of more than MAX_DIGITS digits outside
 *     strings. True means: if the typed decode of the text succeeds, fast_decode returns that
 *     event. False means only "not proven": the Python fast_decode decides.
 *
 * configure(Update, MessageItem, ToolCallItem, ToolCallArgsEvent, UNSET, deltas, Context,
 *           MergedMetadata, MetadataWrites, metadata_decode)
 *     Once, at import of the driver: the classes the loop builds and compares with, and the
 *     offsets of the slots it reads and writes (see _loop.h).
 *
 * configure_copy(_copy_json), copy_json(value) -> a copy
 *     At import of _metadata: its specification of copy_json, then the copy the C way
 *     (json_copy in _loop.h), which the loop uses for the containers metadata holds too.
 *
 * patch_simple(root, fresh, op) -> the new root | None
 *     _patch._Patcher._simple for a value that is not a container (_patch.h).
 *
 * merge(existing, incoming) -> MergedMetadata | None
 *     _accumulate._merged for the common case (see merge_metadata in _loop.h), for the
 *     handlers that run in Python; None: the Python merge does it.
 *
 * run_batch(payloads, k, number, index, ctx, typed_decode, py_decode, plans, tail, note, rest)
 *     -> (k, event, exc, skipped, replan)
 *     The loop of Runner._run_batch over payloads[k:]. The events that take the fast path go
 *     through it here; plans: by event class, (ids, convert, kind, lookup): ids the tuple of
 *     the stages' containers of open ids (None: any id); kind 1 or 2 says convert is
 *     Accumulate's _text_content or _tool_args, which content_update (_loop.h) does here for
 *     the common case (lookup: the store's message or tool_call lookup), handing the rest to
 *     convert. tail None: the outputs are not wanted, and are counted (skipped), not built.
 *     note None, or a dict into which the candidates that passed are counted by class (in
 *     the order each first passed), for the stages' tallies.
 *     rest None: the loop stops at the first other event and returns its position and its
 *     decoded event (None when the data is None or does not decode). rest = (after_decode,
 *     filters, held, tallies): the loop gives the other events to after_decode itself (the
 *     stages' feeds), what note counts moved into tallies first, and stops only at an event
 *     that does not decode, when a feed or a handler raised (exc), or when a filter's
 *     fast-path members are no longer those in held (replan True: the events before k went
 *     through). k == len(payloads) and replan False: all done. rest's fifth member,
 *     routes (None, or (a dict of routes by event class, the pipeline's own objects they are
 *     taken with: see _steps.h)), says where the run of stages is the default chain's:
 *     STEP_STARTED and STEP_FINISHED then go through its stages here (_steps.h),
 *     TEXT_MESSAGE_END, REASONING_MESSAGE_END and TOOL_CALL_END too (_ends.h), the starts of
 *     text and reasoning messages and of tool calls (_starts.h), TOOL_CALL_RESULT
 *     (_results.h), ACTIVITY_DELTA (_activity.h), the other
 *     events it routes
 *     through the stages' handlers, without their feeds (_direct.h); their outputs go to
 *     rest's sixth member, route_tail (None: counted, nobody reads them). Its seventh, if
 *     given and not None, the driver's _FastPath: when a filter's members changed, the loop
 *     takes the plans it keeps for them (its _made, set on it as its _plan sets them), or
 *     those its replanned() makes, and goes on with them, unless tallies appear where note
 *     is None (then it returns as without it).
 *
 * configure_steps(StepStartedEvent, StepFinishedEvent, StepRecord)
 *     Once, at import of the driver, after configure(): the classes _steps.h makes and
 *     compares with, and every route's names and slot offsets (no route is taken before).
 *
 * new_list(), new_ordered(), untrack_message(item), track_message(item)
 *     What the cyclic collector need not walk (see untrack_cell in _loop.h): an empty list
 *     it does not track, for the ledger's records (_speedups.new_list); an empty
 *     OrderedDict it does not track until it holds what it must (_speedups.new_ordered); a
 *     MessageItem holding no tool calls untracked, and tracked again when it holds some
 *     (_store).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_scan.h"
#include "_loop.h"
#include "_frame.h"
#include "_shape.h"
#include "_steps.h"
#include "_direct.h"
#include "_ends.h"
#include "_starts.h"
#include "_results.h"
#include "_patch.h"
#include "_activity.h"

static PyObject *
native_scan(PyObject *module, PyObject *data)
{
    if (!PyBytes_CheckExact(data)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes bytes");
        return NULL;
    }
    int clean = scan_clean(
        (const unsigned char *)PyBytes_AS_STRING(data), (ptrdiff_t)PyBytes_GET_SIZE(data));
    return PyBool_FromLong(clean);
}

static PyObject *str_index, *str_type, *str_fast_passes, *str_fast_tally, *one;
/* _driver._FastPath's members (plans_kept) */
static PyObject *str_made, *str_held, *str_tallies, *str_plans, *str_native_plans, *str_replanned;
/* Set once by configure(): the classes and the sentinel the loop compares with. */
static PyObject *Update_cls, *Unset;
/* The typed decode of a metadata object alone (msgspec's, for the type of an event's
 * "metadata" field): what a delta's metadata in the written form is decoded with. */
static PyObject *metadata_decode;

/* The class in args[i], checked to be a type (a borrowed reference), or NULL with an error. */
static PyTypeObject *
type_arg(PyObject *const *args, int i)
{
    if (!PyType_Check(args[i])) {
        PyErr_Format(PyExc_TypeError, "configure(): argument %d is not a class", i + 1);
        return NULL;
    }
    return (PyTypeObject *)args[i];
}

/* The method definition of the builtin method name of obj (its address identifies it). */
static PyMethodDef *
method_def(PyObject *obj, const char *name)
{
    if (obj == NULL || PyErr_Occurred()) {
        return NULL;
    }
    PyObject *method = PyObject_GetAttrString(obj, name);
    if (method == NULL) {
        return NULL;
    }
    PyMethodDef *def = PyCFunction_Check(method) ? ((PyCFunctionObject *)method)->m_ml : NULL;
    Py_DECREF(method);
    if (def == NULL) {
        PyErr_Format(PyExc_TypeError, "configure(): %s is not a builtin method", name);
    }
    return def;
}

static PyObject *
native_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "configure() takes 10 arguments");
        return NULL;
    }
    PyTypeObject *message_item = type_arg(args, 1), *tool_call_item = type_arg(args, 2);
    PyTypeObject *args_cls = type_arg(args, 3), *context = type_arg(args, 6);
    PyTypeObject *merged = type_arg(args, 7), *writes = type_arg(args, 8);
    if (!message_item || !tool_call_item || !args_cls || !context || !merged || !writes) {
        return NULL;
    }
    PyObject *deltas = args[5];
    if (!PyTuple_CheckExact(deltas) || PyTuple_GET_SIZE(deltas) != 3) {
        PyErr_SetString(PyExc_TypeError, "configure(): the content deltas are 3 classes");
        return NULL;
    }
    /* Everything is read before anything is set: a failure leaves the core as it was. */
    DeltaSlots ds[3];
    for (int i = 0; i < 3; i++) {
        PyObject *cls = PyTuple_GET_ITEM(deltas, i);
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "configure(): a content delta is not a class");
            return NULL;
        }
        ds[i].type = (PyTypeObject *)cls;
        ds[i].kind = cls == (PyObject *)args_cls ? 2 : 1;
        ds[i].metadata = slot_offset(cls, "metadata");
        ds[i].subagent_run_id = slot_offset(cls, "subagent_run_id");
        ds[i].id = slot_offset(cls, ds[i].kind == 2 ? "tool_call_id" : "message_id");
        ds[i].delta = slot_offset(cls, "delta");
        if (ds[i].metadata < 0 || ds[i].subagent_run_id < 0 || ds[i].id < 0 || ds[i].delta < 0) {
            for (int j = 0; j < i; j++) {
                Py_DECREF(ds[j].tag);
                Py_DECREF(ds[j].prefix);
            }
            return NULL;
        }
        ds[i].tag = PyObject_GetAttrString(cls, "type");
        ds[i].tag_utf8 = ds[i].tag != NULL && PyUnicode_CheckExact(ds[i].tag)
                             ? PyUnicode_AsUTF8AndSize(ds[i].tag, &ds[i].tag_len)
                             : NULL;
        ds[i].prefix = ds[i].tag_utf8 == NULL
                           ? NULL
                           : PyBytes_FromFormat("{\"type\":\"%s\",\"%s\":\"", ds[i].tag_utf8,
                                                ds[i].kind == 2 ? "toolCallId" : "messageId");
        if (ds[i].prefix == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "configure(): a content delta's type is a str");
            }
            Py_XDECREF(ds[i].tag);
            for (int j = 0; j < i; j++) {
                Py_DECREF(ds[j].tag);
                Py_DECREF(ds[j].prefix);
            }
            return NULL;
        }
    }
    PyObject *m = (PyObject *)message_item, *t = (PyObject *)tool_call_item;
    ItemSlots is[3] = {
        {NULL, 0, 0, 0, 0},
        {message_item, slot_offset(m, "role"), slot_offset(m, "_parts"),
         slot_offset(m, "_content"), slot_offset(m, "metadata")},
        {tool_call_item, slot_offset(t, "function_fields"), slot_offset(t, "_arg_parts"),
         slot_offset(t, "_args"), slot_offset(t, "metadata")},
    };
    for (int i = 1; i < 3; i++) {
        if (is[i].gate < 0 || is[i].parts < 0 || is[i].text < 0 || is[i].metadata < 0) {
            return NULL;
        }
    }
    Py_ssize_t index_off = slot_offset((PyObject *)context, "index");
    PyObject *index_descr =
        index_off < 0 ? NULL : PyObject_GetAttrString((PyObject *)context, "index");
    Py_ssize_t mw = slot_offset((PyObject *)merged, "_writes");
    Py_ssize_t mv = slot_offset((PyObject *)merged, "_version");
    Py_ssize_t ms = slot_offset((PyObject *)merged, "_size");
    Py_ssize_t wv = slot_offset((PyObject *)writes, "version");
    PyObject *d = PyDict_New(), *l = PyList_New(0);
    PyMethodDef *get = method_def(d, "get"), *append = method_def(l, "append");
    Py_XDECREF(d);
    Py_XDECREF(l);
    if (index_off < 0 || index_descr == NULL || mw < 0 || mv < 0 || ms < 0 ||
        !PyType_IsSubtype(writes, &PyDict_Type) || wv < 0 || get == NULL || append == NULL) {
        Py_XDECREF(index_descr);
        for (int i = 0; i < 3; i++) {
            Py_DECREF(ds[i].tag);
            Py_DECREF(ds[i].prefix);
        }
        return NULL;
    }
    /* All read: now set, each class held (and its tag: ds holds a reference already). */
    for (int i = 0; i < 3; i++) {
        Py_INCREF(ds[i].type);
        Py_XDECREF(delta_slots[i].type);
        Py_XDECREF(delta_slots[i].tag);
        Py_XDECREF(delta_slots[i].prefix);
        delta_slots[i] = ds[i];
    }
    for (int i = 1; i < 3; i++) {
        Py_INCREF(is[i].type);
        Py_XDECREF(item_slots[i].type);
        item_slots[i] = is[i];
    }
    ctx_index_off = index_off;
    Py_XSETREF(ctx_index_descr, index_descr);
    Py_INCREF(merged);
    Py_XSETREF(Merged_type, merged);
    Py_INCREF(writes);
    Py_XSETREF(Writes_type, writes);
    mm_writes_off = mw;
    mm_version_off = mv;
    mm_size_off = ms;
    w_version_off = wv;
    dict_get_def = get;
    list_append_def = append;
    Py_INCREF(args[0]);
    Py_XSETREF(Update_cls, args[0]);
    Py_INCREF(args[4]);
    Py_XSETREF(Unset, args[4]);
    Py_INCREF(args[9]);
    Py_XSETREF(metadata_decode, args[9]);
    Py_RETURN_NONE;
}

/* The decoded event of bytes data, or Py_None (new references); NULL only with an exception
 * raised by py_decode for what it does not take. */
static PyObject *
decode_one(PyObject *data, PyObject *typed_decode, PyObject *py_decode, int scanned)
{
    /* scanned: 1 the scan found data clean, 0 not, -1 not scanned yet */
    if (scanned < 0) {
        scanned = PyBytes_CheckExact(data) &&
                  scan_clean((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    }
    if (scanned) {
        PyObject *event = PyObject_CallOneArg(typed_decode, data);
        if (event == NULL) {
            /* Invalid or not an event: fast_decode gives None for any error the typed decode
             * raises (msgspec's DecodeError, RecursionError). Anything else propagates. */
            if (PyErr_ExceptionMatches(PyExc_MemoryError) ||
                PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
                return NULL;
            }
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return event;
    }
    return PyObject_CallOneArg(py_decode, data);
}

static PyObject *
result(Py_ssize_t k, PyObject *event, PyObject *exc, Py_ssize_t skipped, int replan)
{
    /* steals event and exc (either may be NULL for None) */
    PyObject *pos = PyLong_FromSsize_t(k), *count = PyLong_FromSsize_t(skipped);
    PyObject *out = NULL;
    if (pos != NULL && count != NULL) {
        out = PyTuple_Pack(5, pos, event ? event : Py_None, exc ? exc : Py_None, count,
                           replan ? Py_True : Py_False);
    }
    Py_XDECREF(pos);
    Py_XDECREF(count);
    Py_XDECREF(event);
    Py_XDECREF(exc);
    return out;
}

/* Whether the candidate id is in every container of ids (a tuple; dicts looked up directly).
 * 1, 0, or -1 with an exception. */
static int
held_by_all(PyObject *ids, PyObject *id)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ids); i++) {
        PyObject *held = PyTuple_GET_ITEM(ids, i);
        int in = PyDict_CheckExact(held) && PyUnicode_CheckExact(id)
                     ? PyDict_Contains(held, id)
                     : PySequence_Contains(held, id);
        if (in <= 0) {
            return in;
        }
    }
    return 1;
}

/* ctx.index = at (at stolen): by its slot when ctx's class keeps Context's. 0, or -1. */
static int
set_index(PyObject *ctx, int by_slot, PyObject *at)
{
    if (at == NULL) {
        return -1;
    }
    if (by_slot) {
        slot_set(ctx, ctx_index_off, at);
        return 0;
    }
    int status = PyObject_SetAttr(ctx, str_index, at);
    Py_DECREF(at);
    return status;
}

/* ctx.index as run_batch keeps it: set to base + k before Python code can read it (the
 * stages' code, a report's place, an exception raised from the batch), not for each delta
 * taken without its event (shaped), which runs none; at is the k it was last set for (-1:
 * not yet in this call). */
typedef struct {
    PyObject *ctx;
    int number, by_slot;
    Py_ssize_t base, at;
} IndexAt;

/* ctx.index = base + k, unless it is already. 0, or -1. */
static int
index_at(IndexAt *ix, Py_ssize_t k)
{
    if (!ix->number || ix->at == k) {
        return 0;
    }
    if (set_index(ix->ctx, ix->by_slot, PyLong_FromSsize_t(ix->base + k)) < 0) {
        return -1;
    }
    ix->at = k;
    return 0;
}

/* _driver.Runner._tally: the candidates that passed, note (a dict: class -> how many, in the
 * order they first passed), counted by their type into each of the stages' tallies, in
 * order, then note cleared. 0, or -1. */
static int
tally(PyObject *note, PyObject *tallies)
{
    Py_ssize_t pos = 0;
    PyObject *cls, *n;
    while (PyDict_Next(note, &pos, &cls, &n)) {
        PyObject *kind = PyObject_GetAttr(cls, str_type);
        if (kind == NULL) {
            return -1;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(tallies); j++) {
            if (dict_add(PyList_GET_ITEM(tallies, j), kind, n) < 0) {
                Py_DECREF(kind);
                return -1;
            }
        }
        Py_DECREF(kind);
    }
    PyDict_Clear(note);
    return 0;
}

/* What one call of run_batch keeps from event to event: the candidates that passed, by
 * class (the index of their DeltaSlots), in the order each first passed (counted in C, added
 * to note once per batch or before the stages see an event, not once per event); and the id
 * of the last delta taken without its event (shaped), a str to use again for the next one of
 * the same message or call, rather than one made and hashed per delta.
 *
 * Between two deltas taken that way no Python code runs, so what the first read stays true
 * for the next: the plan of its class (plan_type's, borrowed from plans), that last_id is
 * an open item of every stage (held_ids: the plan's ids it was found in) and the store's
 * item of last_id (last_item, found by the lookup item_lookup). Any other event, or a store
 * lookup that is Python code, forgets them (passed_forget). */
typedef struct {
    Py_ssize_t n[3];
    int order[3], len;
    PyObject *last_id, *last_item;
    PyTypeObject *plan_type;
    PyObject *plan, *held_ids, *item_lookup; /* borrowed */
} Passed;

static inline void
passed_forget(Passed *p)
{
    p->plan_type = NULL;
    p->plan = p->held_ids = p->item_lookup = NULL;
    Py_CLEAR(p->last_item);
}

/* note[cls] += n for each class that passed, in the order they first did; the counts
 * reset. 0, or -1. */
static int
passed_flush(Passed *p, PyObject *note)
{
    for (int j = 0; j < p->len; j++) {
        int i = p->order[j];
        PyObject *cls = (PyObject *)delta_slots[i].type;
        PyObject *add = PyLong_FromSsize_t(p->n[i]);
        int status = add == NULL ? -1 : dict_add(note, cls, add);
        Py_XDECREF(add);
        if (status < 0) {
            return -1;
        }
        p->n[i] = 0;
    }
    p->len = 0;
    return 0;
}

/* _driver._FastPath.refresh's test: whether a filter's fast_passes or fast_tally is no longer
 * the one the plans were made from (held: the members in pairs). 1, 0, or -1. */
static int
members_changed(PyObject *filters, PyObject *held)
{
    if (PyList_GET_SIZE(held) != 2 * PyList_GET_SIZE(filters)) {
        return 1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(filters); i++) {
        PyObject *f = PyList_GET_ITEM(filters, i);
        PyObject *passes = PyObject_GetAttr(f, str_fast_passes);
        if (passes == NULL) {
            return -1;
        }
        Py_DECREF(passes); /* compared by identity only */
        PyObject *counts = PyObject_GetAttr(f, str_fast_tally);
        if (counts == NULL) {
            return -1;
        }
        Py_DECREF(counts);
        if (passes != PyList_GET_ITEM(held, 2 * i) || counts != PyList_GET_ITEM(held, 2 * i + 1)) {
            return 1;
        }
    }
    return 0;
}

/* The exception being raised, normalized with its traceback (a new reference). */
static PyObject *
fetch_raised(void)
{
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL && tb != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (exc == NULL) {
        PyErr_SetString(PyExc_SystemError, "run_batch(): a handler raised nothing");
    }
    return exc;
}

/* The content delta class (its DeltaSlots; *which its index) whose shape s[0:n] has, its id
 * and delta in *sh; or NULL. The written form first: one comparison of its fixed part, and
 * the id and delta proven UTF-8, are all the scan would prove of it when its delta has no
 * escape and it has no metadata (one flat object, its keys fixed, no escape, no number), so
 * it is not scanned (*scanned stays -1); with an escape or metadata it is scanned (*scanned:
 * 1 clean, 0 not), and taken only when clean. Else the scan, and for clean text any order
 * and spacing of the three members. */
static const DeltaSlots *
shape_of(const unsigned char *s, Py_ssize_t n, DeltaShape *sh, int *which, int *scanned)
{
    for (int i = 0; i < 3; i++) {
        PyObject *prefix = delta_slots[i].prefix;
        if (prefix != NULL &&
            shape_written(s, n, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix), sh)) {
            if (sh->escaped || sh->metadata != NULL) {
                *scanned = scan_clean(s, n);
                if (!*scanned) {
                    return NULL; /* the Python path says what is wrong */
                }
            }
            else if ((!sh->ascii && !utf8_valid(sh->delta, sh->delta_len)) ||
                     !utf8_valid(sh->id, sh->id_len)) {
                return NULL; /* the scan refuses it too: the Python path says what is wrong */
            }
            *which = i;
            return &delta_slots[i];
        }
    }
    *scanned = scan_clean(s, n);
    if (!*scanned || !shape_delta(s, n, sh)) {
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (delta_slots[i].tag_utf8 != NULL && delta_slots[i].tag_len == sh->type_len &&
            memcmp(delta_slots[i].tag_utf8, sh->type, (size_t)sh->type_len) == 0) {
            if ((delta_slots[i].kind == 2) != sh->tool) {
                return NULL; /* the other id's name: the typed decode's to judge */
            }
            *which = i;
            return &delta_slots[i];
        }
    }
    return NULL;
}

/* The delta of *sh as a str, its escapes undone. A new reference; Py_None when the escapes
 * are not JSON's own or pair no surrogates (the typed decode is left to refuse them); NULL
 * with an exception. */
static PyObject *
shape_text(const DeltaShape *sh)
{
    if (sh->ascii) { /* proven ASCII: copied, not decoded again */
        PyObject *text = PyUnicode_New(sh->delta_len, 127);
        if (text != NULL && sh->delta_len) {
            memcpy(PyUnicode_1BYTE_DATA(text), sh->delta, (size_t)sh->delta_len);
        }
        return text;
    }
    if (!sh->escaped) {
        return PyUnicode_DecodeUTF8((const char *)sh->delta, sh->delta_len, "strict");
    }
    unsigned char small[256];
    unsigned char *buffer = sh->delta_len <= (ptrdiff_t)sizeof(small)
                                ? small
                                : PyMem_Malloc((size_t)sh->delta_len);
    if (buffer == NULL) {
        return PyErr_NoMemory();
    }
    ptrdiff_t len = shape_unescape(sh->delta, sh->delta_len, buffer);
    PyObject *text = len < 0 ? Py_NewRef(Py_None)
                             : PyUnicode_DecodeUTF8((const char *)buffer, len, "strict");
    if (buffer != small) {
        PyMem_Free(buffer);
    }
    return text;
}

/* The metadata object of *sh, decoded alone. A new reference to a dict; Py_None when it does
 * not decode as one (the typed decode of the whole text says what is wrong); NULL with an
 * exception (only one the typed decode would not be given a report for either). */
static PyObject *
shape_metadata(const DeltaShape *sh)
{
    if (metadata_decode == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *text = PyBytes_FromStringAndSize((const char *)sh->metadata, sh->metadata_len);
    if (text == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(metadata_decode, text);
    Py_DECREF(text);
    if (value == NULL) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError) ||
            PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
            return NULL;
        }
        PyErr_Clear(); /* as decode_one: the usual way reports it */
        Py_RETURN_NONE;
    }
    if (!PyDict_CheckExact(value)) {
        Py_DECREF(value);
        Py_RETURN_NONE;
    }
    return value;
}

/* The delta and metadata (Py_None when absent) of *sh, as new references in *delta and
 * *metadata. 1, 0 when the text is not what it seemed (both NULL), or -1 with an exception. */
static int
shape_values(const DeltaShape *sh, PyObject **delta, PyObject **metadata)
{
    *metadata = NULL;
    *delta = shape_text(sh);
    if (*delta == NULL) {
        return -1;
    }
    if (*delta == Py_None) {
        Py_CLEAR(*delta);
        return 0;
    }
    if (sh->metadata == NULL) {
        *metadata = Py_NewRef(Py_None);
        return 1;
    }
    *metadata = shape_metadata(sh);
    if (*metadata == NULL || *metadata == Py_None) {
        int status = *metadata == NULL ? -1 : 0;
        Py_CLEAR(*metadata);
        Py_CLEAR(*delta);
        return status;
    }
    return 1;
}

/* shape(data) -> (class, id, delta, metadata or None) | None: what the loop reads of a frame
 * without decoding it (for the tests: the typed decode of data must be that class with those
 * fields). */
static PyObject *
native_shape(PyObject *module, PyObject *data)
{
    if (!PyBytes_CheckExact(data)) {
        PyErr_SetString(PyExc_TypeError, "shape() takes bytes");
        return NULL;
    }
    DeltaShape sh = {0};
    int which = 0, scanned = -1;
    const DeltaSlots *es = shape_of((const unsigned char *)PyBytes_AS_STRING(data),
                                    PyBytes_GET_SIZE(data), &sh, &which, &scanned);
    if (es == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *delta, *metadata;
    int ok = shape_values(&sh, &delta, &metadata);
    if (ok <= 0) {
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *back = Py_BuildValue("(Os#NN)", (PyObject *)es->type, (const char *)sh.id,
                                   sh.id_len, delta, metadata);
    return back;
}

/* A frame of a shape shape_of() recognizes (s[0:n]), when nobody reads the outputs: what the
 * loop does for its event, from the class, id, delta and metadata alone, without the event.
 * ix and k: ctx.index set before a store lookup that is Python code. 1: done (*which: the
 * DeltaSlots it counts as); 0: not this way (nothing changed: the event is decoded and goes
 * the usual way); -1 with an exception. */
static int
shaped(const unsigned char *s, Py_ssize_t n, PyObject *plans, PyObject *unset,
       PyObject *update_cls, int *which, Passed *p, int *scanned, IndexAt *ix, Py_ssize_t k)
{
    DeltaShape sh = {0};
    const DeltaSlots *es = shape_of(s, n, &sh, which, scanned);
    if (es == NULL) {
        return 0;
    }
    PyObject *plan = p->plan; /* borrowed */
    if (p->plan_type != es->type) {
        p->plan_type = NULL;
        p->held_ids = NULL;
        plan = PyDict_GetItemWithError(plans, (PyObject *)es->type);
        if (plan == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 4 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(plan, 2)) ||
            (PyTuple_GET_ITEM(plan, 0) != Py_None && !PyTuple_CheckExact(PyTuple_GET_ITEM(plan, 0)))) {
            return 0; /* the usual way says what is wrong */
        }
        p->plan_type = es->type;
        p->plan = plan;
    }
    PyObject *ids = PyTuple_GET_ITEM(plan, 0), *convert = PyTuple_GET_ITEM(plan, 1);
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(plan, 2));
    if (kind == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (convert != Py_None && kind != es->kind) {
        return 0; /* a conversion that needs the event */
    }
    Py_INCREF(plan); /* held: the lookups may run Python code */
    int status = -1;
    PyObject *delta = NULL, *metadata = NULL;
    PyObject *id = p->last_id;
    if (id != NULL && PyUnicode_IS_COMPACT_ASCII(id) && PyUnicode_GET_LENGTH(id) == sh.id_len &&
        memcmp(PyUnicode_DATA(id), sh.id, (size_t)sh.id_len) == 0) {
        Py_INCREF(id); /* the last delta's id again: its str, hash cached */
    }
    else {
        p->held_ids = p->item_lookup = NULL;
        Py_CLEAR(p->last_item);
        id = PyUnicode_DecodeUTF8((const char *)sh.id, sh.id_len, "strict");
        if (id == NULL) {
            goto done;
        }
        Py_INCREF(id);
        Py_XSETREF(p->last_id, id);
    }
    if (ids != Py_None && p->held_ids != ids) {
        int held = held_by_all(ids, id);
        if (held <= 0) {
            status = held; /* not an open item of every stage: the usual way */
            goto done;
        }
        p->held_ids = ids;
    }
    if (convert == Py_None && !sh.escaped && sh.metadata == NULL) {
        status = 1; /* the event itself is the output, and nobody reads it */
        goto done;
    }
    /* The delta and the metadata, read (and so proven as the typed decode would) even when
     * only the event would go on. */
    status = shape_values(&sh, &delta, &metadata);
    if (status <= 0 || convert == Py_None) {
        goto done;
    }
    PyObject *lookup = PyTuple_GET_ITEM(plan, 3), **known = &p->last_item;
    if (!bound_builtin(lookup, dict_get_def, &PyDict_Type)) {
        /* the store's own lookup, Python code: ctx as the stages' code sees it, called for
         * every delta, and what the last delta read is read again */
        passed_forget(p);
        known = NULL;
        if (index_at(ix, k) < 0) {
            status = -1;
            goto done;
        }
    }
    else if (p->item_lookup != lookup) {
        Py_CLEAR(p->last_item); /* found by another lookup (the other kind of item) */
        p->item_lookup = lookup;
    }
    PyObject *out = content_apply(NULL, id, metadata == Py_None ? unset : metadata, delta,
                                  es->kind, lookup, unset, update_cls, 0, known);
    status = -1;
    if (out != NULL) {
        status = out == Py_None ? 0 : 1;
        Py_DECREF(out);
    }
done:
    Py_XDECREF(id);
    Py_XDECREF(delta);
    Py_XDECREF(metadata);
    Py_DECREF(plan);
    return status;
}

/* An output of the loop to the end of the fast path's run: appended to the output list,
 * given to tail, or only counted when nobody reads it (build false). 0, or -1. */
static int
emit_out(PyObject *out, int build, PyObject *out_list, PyObject *tail, Py_ssize_t *skipped)
{
    if (!build) {
        (*skipped)++;
        return 0;
    }
    if (out_list != NULL) {
        return PyList_Append(out_list, out);
    }
    PyObject *back = PyObject_CallOneArg(tail, out);
    Py_XDECREF(back);
    return back == NULL ? -1 : 0;
}

/* result(...) once the counts of what passed are in note (when wanted). */
static PyObject *
finish(Passed *p, PyObject *note, Py_ssize_t k, PyObject *event, PyObject *exc,
       Py_ssize_t skipped, int replan)
{
    Py_CLEAR(p->last_id);
    Py_CLEAR(p->last_item);
    if (note != Py_None && passed_flush(p, note) < 0) {
        Py_XDECREF(event);
        Py_XDECREF(exc);
        return NULL;
    }
    return result(k, event, exc, skipped, replan);
}

/* NULL, the exception kept, once the counts of what passed are in note (as far as they can
 * be: a failure to count is dropped for the exception already raised). */
static PyObject *
bail(Passed *p, PyObject *note)
{
    Py_CLEAR(p->last_id);
    Py_CLEAR(p->last_item);
    if (note != Py_None && p->len > 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (passed_flush(p, note) < 0) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, tb);
    }
    return NULL;
}

/* The plans _FastPath._plan keeps for the filters' members as they are now (its _made, by the
 * identities of their fast_passes), taken as _plan takes them: the fast path's _held and
 * tallies refilled (in place when they are lists, as _plan refills them: a replan makes no
 * list that would outlive the chunk), plans and native_plans set. A new (native_plans, held,
 * tallies); Py_None (a new reference) when none are kept for these members (_plan makes them);
 * NULL with an exception. */
static PyObject *
plans_kept(PyObject *fast, PyObject *filters)
{
    Py_ssize_t n = PyList_GET_SIZE(filters);
    PyObject *made = PyObject_GetAttr(fast, str_made);
    PyObject *held = made == NULL ? NULL : PyObject_GetAttr(fast, str_held);
    PyObject *tallies = held == NULL ? NULL : PyObject_GetAttr(fast, str_tallies);
    PyObject *key = tallies == NULL ? NULL : PyTuple_New(n);
    PyObject *out = NULL;
    if (key == NULL) {
        goto done;
    }
    int own = !(PyList_CheckExact(held) && PyList_CheckExact(tallies));
    if (own) { /* not the lists _plan makes: new ones, set on the fast path below */
        Py_SETREF(held, PyList_New(0));
        Py_SETREF(tallies, held == NULL ? NULL : PyList_New(0));
        if (tallies == NULL) {
            goto done;
        }
    }
    if (!PyDict_CheckExact(made)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    /* Refilled from empty: a filter's members read below may run Python code. */
    if (PyList_SetSlice(held, 0, PY_SSIZE_T_MAX, NULL) < 0 ||
        PyList_SetSlice(tallies, 0, PY_SSIZE_T_MAX, NULL) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(filters); i++) {
        PyObject *f = PyList_GET_ITEM(filters, i);
        PyObject *passes = PyObject_GetAttr(f, str_fast_passes);
        if (passes == NULL) {
            goto done;
        }
        int failed = PyList_Append(held, passes);
        PyObject *id = failed ? NULL : PyLong_FromVoidPtr(passes);
        Py_DECREF(passes);
        if (id == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(key, i, id);
        PyObject *tally = PyObject_GetAttr(f, str_fast_tally);
        if (tally == NULL) {
            goto done;
        }
        failed = PyList_Append(held, tally) < 0 ||
                 (tally != Py_None && PyList_Append(tallies, tally) < 0);
        Py_DECREF(tally);
        if (failed) {
            goto done;
        }
    }
    if (PyList_GET_SIZE(held) != 2 * n) { /* the filters changed while read */
        out = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *entry = PyDict_GetItemWithError(made, key);
    if (entry == NULL) {
        out = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(entry, 1)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(entry, 2))) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *native = PyTuple_GET_ITEM(entry, 2);
    Py_INCREF(entry); /* held: setting attributes may run Python code */
    if ((!own || (PyObject_SetAttr(fast, str_held, held) == 0 &&
                  PyObject_SetAttr(fast, str_tallies, tallies) == 0)) &&
        PyObject_SetAttr(fast, str_plans, PyTuple_GET_ITEM(entry, 1)) == 0 &&
        PyObject_SetAttr(fast, str_native_plans, native) == 0) {
        out = PyTuple_Pack(3, native, held, tallies);
    }
    Py_DECREF(entry);
done:
    Py_XDECREF(made);
    Py_XDECREF(held);
    Py_XDECREF(tallies);
    Py_XDECREF(key);
    return out;
}

/* A filter's fast-path members changed (members_changed): the plans for them, those kept
 * (plans_kept) or made again by the fast path (rest's seventh member, whose replanned() gives
 * (plans, held, tallies)), taken here so that the loop goes on. 1: taken (*kept holds them;
 * the loop's plans, held and tallies are theirs); 0: the loop returns, and the driver reads
 * them (tallies where note is None, or one that is not a dict); -1 with an exception. */
static int
replan_here(PyObject *fast, PyObject *filters, PyObject **kept, PyObject **plans,
            PyObject **held, PyObject **tallies, PyObject *note)
{
    PyObject *got = plans_kept(fast, filters);
    if (got == Py_None) {
        Py_DECREF(got);
        got = PyObject_CallMethodNoArgs(fast, str_replanned);
    }
    if (got == NULL) {
        return -1;
    }
    if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != 3 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(got, 0)) || !PyList_CheckExact(PyTuple_GET_ITEM(got, 1)) ||
        !PyList_CheckExact(PyTuple_GET_ITEM(got, 2))) {
        Py_DECREF(got);
        PyErr_SetString(PyExc_TypeError, "run_batch(): replanned() gives (plans, held, tallies)");
        return -1;
    }
    PyObject *t = PyTuple_GET_ITEM(got, 2);
    int ok = note != Py_None || PyList_GET_SIZE(t) == 0;
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(t); i++) {
        ok = PyDict_CheckExact(PyList_GET_ITEM(t, i));
    }
    if (!ok) {
        Py_DECREF(got);
        return 0;
    }
    Py_XSETREF(*kept, got);
    *plans = PyTuple_GET_ITEM(got, 0);
    *held = PyTuple_GET_ITEM(got, 1);
    *tallies = t;
    return 1;
}

/* A route's kind (its first member), its size checked: ROUTE_..., or -1 with an exception. */
static long
route_kind(PyObject *route)
{
    static const Py_ssize_t sizes[] = {
        [ROUTE_DIRECT] = D_SIZE, [ROUTE_STEP] = P_SIZE, [ROUTE_END] = E_SIZE,
        [ROUTE_START] = S_SIZE,  [ROUTE_RESULT] = R_SIZE, [ROUTE_TOOL_START] = T_SIZE,
        [ROUTE_ACTIVITY] = A_SIZE,
    };
    long kind = -1;
    if (PyTuple_CheckExact(route) && PyTuple_GET_SIZE(route) > 0 &&
        PyLong_CheckExact(PyTuple_GET_ITEM(route, 0))) {
        kind = PyLong_AsLong(PyTuple_GET_ITEM(route, 0));
        if (kind == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        }
    }
    if (kind < 0 || kind >= (long)(sizeof(sizes) / sizeof(sizes[0])) ||
        PyTuple_GET_SIZE(route) != sizes[kind]) {
        PyErr_SetString(PyExc_TypeError,
                        "run_batch(): a route is (kind, ...): the stages' handlers (0, "
                        "_direct.h), a step's (1, _steps.h), an item end's (2, _ends.h), a "
                        "message start's (3, _starts.h), a tool result's (4, _results.h), a "
                        "tool call start's (5, _starts.h) or an activity delta's (6, "
                        "_activity.h)");
        return -1;
    }
    return kind;
}

/* Whether routes are (a dict, the pipeline's own objects: a tuple of O_SIZE, see _steps.h). */
static int
routes_pair(PyObject *pair)
{
    return PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2 &&
           PyDict_CheckExact(PyTuple_GET_ITEM(pair, 0)) &&
           PyTuple_CheckExact(PyTuple_GET_ITEM(pair, 1)) &&
           PyTuple_GET_SIZE(PyTuple_GET_ITEM(pair, 1)) == O_SIZE;
}

static PyObject *run_batch(PyObject *const *args, Py_ssize_t nargs, PyObject **kept);

static PyObject *
native_run_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *kept = NULL; /* the plans of a replan made in the loop (replan_here) */
    PyObject *back = run_batch(args, nargs, &kept);
    Py_XDECREF(kept);
    return back;
}

static PyObject *
run_batch(PyObject *const *args, Py_ssize_t nargs, PyObject **kept)
{
    Passed passed = {{0, 0, 0}, {0, 0, 0}, 0, NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *note = nargs == 11 ? args[9] : Py_None;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "run_batch() takes 11 arguments");
        return bail(&passed, note);
    }
    if (Update_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "run_batch(): configure() first");
        return bail(&passed, note);
    }
    PyObject *payloads = args[0];
    Py_ssize_t k = PyLong_AsSsize_t(args[1]);
    int number = PyObject_IsTrue(args[2]);
    Py_ssize_t index = PyLong_AsSsize_t(args[3]);
    PyObject *ctx = args[4], *typed_decode = args[5], *py_decode = args[6];
    PyObject *plans = args[7], *tail = args[8], *rest = args[10];
    PyObject *unset = Unset, *update_cls = Update_cls;
    PyObject *after_decode = NULL, *filters = NULL, *held = NULL, *tallies = NULL;
    PyObject *routes = NULL, *own = NULL, *route_tail = Py_None;
    PyObject *replan = NULL; /* the _FastPath */
    if (rest != Py_None) {
        if (!PyTuple_CheckExact(rest) || PyTuple_GET_SIZE(rest) < 6 || PyTuple_GET_SIZE(rest) > 7 ||
            !PyList_CheckExact(PyTuple_GET_ITEM(rest, 1)) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(rest, 2)) ||
            !PyList_CheckExact(PyTuple_GET_ITEM(rest, 3)) ||
            (PyTuple_GET_ITEM(rest, 4) != Py_None && !routes_pair(PyTuple_GET_ITEM(rest, 4)))) {
            PyErr_SetString(PyExc_TypeError, "run_batch(): rest is (after_decode, filters, held, "
                                             "tallies, routes, route_tail[, replan]), routes None "
                                             "or (a dict, a tuple of the pipeline's own)");
            return bail(&passed, note);
        }
        after_decode = PyTuple_GET_ITEM(rest, 0);
        filters = PyTuple_GET_ITEM(rest, 1);
        held = PyTuple_GET_ITEM(rest, 2);
        tallies = PyTuple_GET_ITEM(rest, 3);
        PyObject *pair = PyTuple_GET_ITEM(rest, 4);
        if (pair != Py_None && StepRecord_cls != NULL) {
            routes = PyTuple_GET_ITEM(pair, 0);
            own = PyTuple_GET_ITEM(pair, 1);
        }
        route_tail = PyTuple_GET_ITEM(rest, 5);
        if (PyTuple_GET_SIZE(rest) == 7 && PyTuple_GET_ITEM(rest, 6) != Py_None) {
            replan = PyTuple_GET_ITEM(rest, 6);
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tallies); i++) {
            if (!PyDict_CheckExact(PyList_GET_ITEM(tallies, i))) {
                PyErr_SetString(PyExc_TypeError, "run_batch(): a tally is a dict");
                return bail(&passed, note);
            }
        }
    }
    if ((k == -1 || index == -1 || number < 0) && PyErr_Occurred()) {
        return bail(&passed, note);
    }
    if (!PyList_CheckExact(payloads) || !PyDict_CheckExact(plans) ||
        (note != Py_None && !PyDict_CheckExact(note))) {
        PyErr_SetString(PyExc_TypeError, "run_batch(): payloads a list, plans and note dicts");
        return bail(&passed, note);
    }
    /* ctx.index by its slot, when ctx's class keeps Context's slot and plain setattr. */
    PyTypeObject *ctx_type = Py_TYPE(ctx);
    int index_slot = ctx_type->tp_setattro == PyObject_GenericSetAttr &&
                     _PyType_Lookup(ctx_type, str_index) == ctx_index_descr;
    /* tail None: the outputs are not wanted (drain()); they are counted, not built. */
    int build = tail != Py_None;
    PyObject *out_list = build && bound_builtin(tail, list_append_def, &PyList_Type)
                             ? PyCFunction_GET_SELF(tail)
                             : NULL;
    /* The routes' outputs (events off the fast path, some completing an item) go to
     * route_tail: None only when nothing reads any output (then counted, as the fast path's). */
    int route_build = route_tail != Py_None;
    PyObject *route_list = route_build && bound_builtin(route_tail, list_append_def, &PyList_Type)
                               ? PyCFunction_GET_SELF(route_tail)
                               : NULL;
    Py_ssize_t skipped = 0, first = k;
    IndexAt ix = {ctx, number, index_slot, index, -1};
    for (; k < PyList_GET_SIZE(payloads); k++) {
        PyObject *data = PyList_GET_ITEM(payloads, k); /* borrowed */
        int scanned = -1;
        if (!build && PyBytes_CheckExact(data)) {
            /* Nobody reads the outputs: a delta of the common shape needs no event. */
            int which = 0;
            Py_INCREF(data);
            int took = shaped((const unsigned char *)PyBytes_AS_STRING(data),
                              PyBytes_GET_SIZE(data), plans, unset, update_cls, &which,
                              &passed, &scanned, &ix, k);
            Py_DECREF(data);
            if (took < 0) {
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                if (index_at(&ix, k) < 0) {
                    PyErr_Clear();
                }
                PyErr_Restore(type, value, tb);
                return bail(&passed, note);
            }
            if (took > 0) {
                skipped++;
                if (note != Py_None && passed.n[which]++ == 0) {
                    passed.order[passed.len++] = which;
                }
                continue; /* ctx.index left behind: no Python code ran */
            }
        }
        passed_forget(&passed); /* Python code may run from here */
        if (index_at(&ix, k) < 0) {
            return bail(&passed, note);
        }
        if (data == Py_None) {
            return finish(&passed, note, k, NULL, NULL, skipped, 0);
        }
        Py_INCREF(data);
        PyObject *event = decode_one(data, typed_decode, py_decode, scanned);
        Py_DECREF(data);
        if (event == NULL) {
            return bail(&passed, note);
        }
        if (event == Py_None) {
            Py_DECREF(event);
            return finish(&passed, note, k, NULL, NULL, skipped, 0);
        }
        PyObject *cls = (PyObject *)Py_TYPE(event);
        const DeltaSlots *es = delta_slots_of(Py_TYPE(event));
        PyObject *plan = es ? PyDict_GetItemWithError(plans, cls) : NULL; /* borrowed */
        if (plan == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(event);
                return bail(&passed, note);
            }
            goto to_stages; /* not a candidate: the stages' feeds */
        }
        if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 4 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(plan, 2)) ||
            (PyTuple_GET_ITEM(plan, 0) != Py_None && !PyTuple_CheckExact(PyTuple_GET_ITEM(plan, 0)))) {
            Py_DECREF(event);
            PyErr_SetString(PyExc_TypeError, "run_batch(): a plan is (ids, convert, kind, lookup)");
            return bail(&passed, note);
        }
        PyObject *tag = slot_get(event, es->subagent_run_id), *id = slot_get(event, es->id);
        if (tag != unset || id == NULL) {
            goto to_stages; /* tagged (or not as decoded): the feeds */
        }
        Py_INCREF(plan); /* held: the handlers run Python code */
        PyObject *ids = PyTuple_GET_ITEM(plan, 0), *convert = PyTuple_GET_ITEM(plan, 1);
        if (ids != Py_None) {
            int held = held_by_all(ids, id);
            if (held <= 0) {
                Py_DECREF(plan);
                if (held < 0) {
                    Py_DECREF(event);
                    return bail(&passed, note);
                }
                goto to_stages; /* not an open item of every stage */
            }
        }
        PyObject *out;
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(plan, 2));
        if (kind == -1 && PyErr_Occurred()) {
            Py_DECREF(event);
            Py_DECREF(plan);
            return bail(&passed, note);
        }
        if (convert == Py_None) {
            out = event;
            Py_INCREF(out);
        }
        else if (kind == 0) {
            out = PyObject_CallOneArg(convert, event);
        }
        else {
            out = content_update(event, es, PyTuple_GET_ITEM(plan, 3), unset, update_cls, build);
            if (out == Py_None) {
                Py_DECREF(out);
                out = PyObject_CallOneArg(convert, event);
            }
        }
        int done = -1;
        if (out != NULL) {
            done = emit_out(out, build, out_list, tail, &skipped);
            Py_DECREF(out);
        }
        Py_DECREF(plan);
        if (done < 0) {
            /* The fast path's handler raised: the driver handles it as its own loop does. */
            PyObject *exc = fetch_raised();
            if (exc == NULL) {
                Py_DECREF(event);
                return bail(&passed, note);
            }
            return finish(&passed, note, k, event, exc, skipped, 0);
        }
        if (note != Py_None) {
            int i = (int)(es - delta_slots);
            if (passed.n[i]++ == 0) {
                passed.order[passed.len++] = i;
            }
        }
        Py_DECREF(event);
        continue;
    to_stages:
        /* An event off the fast path (event held). Without rest, the driver takes it; with
         * rest, as the driver's loop does: the candidates that passed counted into the
         * stages' tallies first, then the event to the stages' feeds (an exception is handed
         * back, as a handler's), then, when a stage changed its fast-path members, back to
         * the driver to make the plans again. */
        if (rest == Py_None) {
            return finish(&passed, note, k, event, NULL, skipped, 0);
        }
        if (note != Py_None && (passed_flush(&passed, note) < 0 ||
                                (PyDict_GET_SIZE(note) > 0 && tally(note, tallies) < 0))) {
            Py_DECREF(event);
            return bail(&passed, note);
        }
        /* When the run of stages is the default chain's: the event's stages' work here, or
         * its stages' handlers without their feeds; a route's first member says which. */
        PyObject *route = routes == NULL ? NULL : PyDict_GetItemWithError(routes, cls);
        if (route == NULL && PyErr_Occurred()) {
            Py_DECREF(event);
            return bail(&passed, note);
        }
        if (route != NULL) {
            long kind = route_kind(route);
            if (kind < 0) {
                Py_DECREF(event);
                return bail(&passed, note);
            }
            /* whether Python code of the stages runs (their handlers) */
            int handlers = kind == ROUTE_DIRECT || kind == ROUTE_START || kind == ROUTE_RESULT ||
                           kind == ROUTE_TOOL_START ||
                           (kind == ROUTE_END && PyTuple_GET_ITEM(route, E_LEDGER_HANDLER) != Py_None);
            StepRead read = {0};
            EndRead ended = {0};
            StartRead started = {0};
            ResultRead answered = {0};
            ToolStartRead called = {0};
            ActivityRead patched = {0};
            PyObject *out = NULL;
            Py_INCREF(route); /* held: the stages' attributes may run Python code */
            int took;
            switch (kind) {
            case ROUTE_STEP:
                took = step_route(event, own, update_cls, unset, route_build, &read, &out);
                break;
            case ROUTE_END:
                took = end_route(event, route, own, update_cls, unset, route_build, &ended, &out);
                break;
            case ROUTE_START:
                took = start_route(event, route, own, update_cls, unset, route_build, &started,
                                   &out);
                break;
            case ROUTE_RESULT:
                took = result_route(event, route, own, update_cls, unset, &answered, &out);
                break;
            case ROUTE_TOOL_START:
                took = tool_start_route(event, route, own, update_cls, unset, &called, &out);
                break;
            case ROUTE_ACTIVITY:
                took = activity_route(event, route, own, update_cls, unset, route_build, &patched,
                                      &out);
                break;
            default:
                took = direct_route(event, route, own, update_cls, &out);
            }
            if (took == 1) {
                /* emitted, then the ledger's part (it emits before it records) */
                int status = emit_out(out, route_build, route_list, route_tail, &skipped);
                if (status == 0) {
                    switch (kind) {
                    case ROUTE_STEP:
                        status = step_after(event, own, unset, &read);
                        break;
                    case ROUTE_END:
                        status = end_after(event, route, own, out, unset, &ended);
                        break;
                    case ROUTE_START:
                        status = start_after(route, own);
                        break;
                    case ROUTE_RESULT:
                        status = result_after(event, route, own, out, unset, &answered);
                        break;
                    case ROUTE_TOOL_START:
                        status = tool_start_after(event, route, own, out, unset, &called);
                        break;
                    case ROUTE_ACTIVITY:
                        status = activity_after(route, own);
                        break;
                    default:
                        status = direct_after(event, route, own, out);
                    }
                }
                if (status < 0) {
                    took = -1;
                }
                Py_DECREF(out);
            }
            step_read_clear(&read);
            end_read_clear(&ended);
            start_read_clear(&started);
            result_read_clear(&answered);
            tool_start_read_clear(&called);
            activity_read_clear(&patched);
            Py_DECREF(route);
            if (took < 0) {
                PyObject *exc = fetch_raised();
                if (exc == NULL) {
                    Py_DECREF(event);
                    return bail(&passed, note);
                }
                return finish(&passed, note, k, event, exc, skipped, 0);
            }
            if (took == 1) {
                Py_DECREF(event);
                if (handlers) { /* a handler may have changed a stage's fast-path members */
                    int changed = members_changed(filters, held);
                    if (changed > 0 && replan != NULL) {
                        changed = replan_here(replan, filters, kept, &plans, &held, &tallies, note);
                        changed = changed < 0 ? -1 : !changed;
                    }
                    if (changed != 0) {
                        return changed < 0 ? bail(&passed, note)
                                           : finish(&passed, note, k + 1, NULL, NULL, skipped, 1);
                    }
                }
                continue;
            }
        }
        PyObject *back = PyObject_CallOneArg(after_decode, event);
        if (back == NULL) {
            PyObject *exc = fetch_raised();
            if (exc == NULL) {
                Py_DECREF(event);
                return bail(&passed, note);
            }
            return finish(&passed, note, k, event, exc, skipped, 0);
        }
        Py_DECREF(back);
        Py_DECREF(event);
        int changed = members_changed(filters, held);
        if (changed > 0 && replan != NULL) {
            changed = replan_here(replan, filters, kept, &plans, &held, &tallies, note);
            changed = changed < 0 ? -1 : !changed;
        }
        if (changed != 0) {
            return changed < 0 ? bail(&passed, note)
                               : finish(&passed, note, k + 1, NULL, NULL, skipped, 1);
        }
    }
    if (k > first && index_at(&ix, k - 1) < 0) { /* the last event's, as the driver expects */
        return bail(&passed, note);
    }
    return finish(&passed, note, k, NULL, NULL, skipped, 0);
}

/* merge(existing, incoming) -> the merged metadata, or None: _accumulate._merged for the
 * common case (merge_metadata in _loop.h), None for the Python merge to do (or before
 * configure()). */
static PyObject *
native_merge(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "merge() takes 2 arguments");
        return NULL;
    }
    if (Merged_type == NULL) {
        Py_RETURN_NONE;
    }
    return merge_metadata(args[0], args[1], Unset);
}

static PyObject *
native_configure_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "configure_steps() takes 3 arguments");
        return NULL;
    }
    if (item_slots[1].type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure_steps(): configure() first");
        return NULL;
    }
    /* every route's names and offsets, before any route is taken */
    if (steps_configure(args[0], args[1], args[2]) < 0 || end_configure() < 0 ||
        start_configure() < 0 || result_configure() < 0 || activity_configure() < 0) {
        return NULL;
    }
    routes_ready = 1;
    Py_RETURN_NONE;
}

/* _metadata.copy_wire(value) (the specification, called for what this does not take: fallback):
 * new exact dicts and lists, the newest version of a MergedMetadata as a new dict of its
 * values (copied), anything else shared. A dict or list subclass, an older version of merged
 * metadata, or a call before configure() goes to fallback. New reference, or NULL. */
static PyObject *
wire_copy(PyObject *value, PyObject *fallback)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type || type == &PyLong_Type || type == &PyFloat_Type ||
        type == &PyBool_Type || value == Py_None) {
        Py_INCREF(value);
        return value;
    }
    PyObject *out = NULL, *source = NULL;
    if (type == &PyDict_Type) {
        source = value;
    }
    else if (type == &PyList_Type) {
        if (Py_EnterRecursiveCall(" while copying a JSON value")) {
            return NULL;
        }
        Py_ssize_t n = PyList_GET_SIZE(value);
        out = PyList_New(n);
        for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
            PyObject *element = i < PyList_GET_SIZE(value) ? PyList_GET_ITEM(value, i) : NULL;
            PyObject *copy = NULL;
            if (element != NULL) {
                Py_INCREF(element); /* held while copied: a fallback may run Python */
                copy = wire_copy(element, fallback);
                Py_DECREF(element);
            }
            if (copy == NULL) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_RuntimeError, "list changed size during copy");
                }
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, copy);
        }
        Py_LeaveRecursiveCall();
        return out;
    }
    else if (Merged_type != NULL && type == Merged_type) {
        PyObject *writes = slot_get(value, mm_writes_off);
        PyObject *version = slot_get(value, mm_version_off);
        int record = writes != NULL && Py_IS_TYPE(writes, Writes_type);
        PyObject *newest = record ? slot_get(writes, w_version_off) : NULL;
        PyObject *cells = record ? writes : NULL; /* the record is the cells' dict */
        int same = version != NULL && newest != NULL
                       ? PyObject_RichCompareBool(version, newest, Py_EQ)
                       : 0;
        if (same < 0) {
            return NULL;
        }
        if (same) {
            source = cells; /* the newest version: each cell's last value (see _plain_dict) */
        }
    }
    if (source == NULL) {
        if (Merged_type == NULL || PyDict_Check(value) || PyList_Check(value) ||
            type == Merged_type) {
            return PyObject_CallOneArg(fallback, value);
        }
        Py_INCREF(value);
        return value;
    }
    if (Py_EnterRecursiveCall(" while copying a JSON value")) {
        return NULL;
    }
    int cells = source != value;
    out = PyDict_New();
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (out != NULL && PyDict_Next(source, &pos, &key, &item)) {
        if (cells && (item = cell_last(item)) == NULL) {
            PyErr_SetString(PyExc_SystemError, "the metadata's writes are not as built");
            Py_CLEAR(out);
            break;
        }
        Py_INCREF(item); /* held while copied: a fallback may run Python */
        PyObject *copy = wire_copy(item, fallback);
        Py_DECREF(item);
        if (copy == NULL || PyDict_SetItem(out, key, copy) < 0) {
            Py_XDECREF(copy);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(copy);
    }
    Py_LeaveRecursiveCall();
    return out;
}

/* The slots of MessageItem and ToolCallItem that wire_item reads, found at its first call. */
typedef struct {
    Py_ssize_t id, nulls, fields, metadata, parts, text; /* text: _content or _args */
    Py_ssize_t role, tool_calls;                         /* a message's */
    Py_ssize_t name, function_fields;                    /* a call's */
} WireSlots;
static WireSlots wire_slots[3]; /* by kind, as item_slots; [0] unused */
static int wire_slots_read;     /* 1: read, -1: they could not be (wire_item always falls back) */

static int
read_wire_slots(void)
{
    if (wire_slots_read == 0) {
        wire_slots_read = -1;
        for (int kind = 1; kind < 3; kind++) {
            PyObject *cls = (PyObject *)item_slots[kind].type;
            if (cls == NULL) {
                return -1;
            }
            WireSlots *ws = &wire_slots[kind];
            ws->id = slot_offset(cls, "id");
            ws->nulls = slot_offset(cls, "_nulls");
            ws->fields = slot_offset(cls, "fields");
            ws->metadata = slot_offset(cls, "metadata");
            ws->parts = slot_offset(cls, kind == 1 ? "_parts" : "_arg_parts");
            ws->text = slot_offset(cls, kind == 1 ? "_content" : "_args");
            ws->role = kind == 1 ? slot_offset(cls, "role") : 0;
            ws->tool_calls = kind == 1 ? slot_offset(cls, "_tool_calls") : 0;
            ws->name = kind == 2 ? slot_offset(cls, "name") : 0;
            ws->function_fields = kind == 2 ? slot_offset(cls, "function_fields") : 0;
            if (PyErr_Occurred()) {
                PyErr_Clear(); /* no fast way: the Python one, always */
                return -1;
            }
        }
        wire_slots_read = 1;
    }
    return wire_slots_read;
}

/* The wire members' names (interned by native_exec). */
static PyObject *str_id, *str_role, *str_content, *str_tool_calls, *str_function, *str_name,
    *str_arguments, *str_metadata;

/* out[key] = wire_copy(value); 0, or -1 with an exception. */
static int
wire_set(PyObject *out, PyObject *key, PyObject *value, PyObject *fallback)
{
    PyObject *copy = wire_copy(value, fallback);
    if (copy == NULL) {
        return -1;
    }
    int status = PyDict_SetItem(out, key, copy);
    Py_DECREF(copy);
    return status;
}

/* out.update(fields), each value copied; 0, or -1 with an exception. */
static int
wire_update(PyObject *out, PyObject *fields, PyObject *fallback)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(fields, &pos, &key, &value)) {
        Py_INCREF(value);
        PyObject *copy = wire_copy(value, fallback);
        Py_DECREF(value);
        if (copy == NULL) {
            return -1;
        }
        int status = PyDict_SetItem(out, key, copy);
        Py_DECREF(copy);
        if (status < 0) {
            return -1;
        }
    }
    return 0;
}

/* copy_wire(item._wire_view()) for a MessageItem or ToolCallItem in the common case (every
 * slot set, no null member a history held, no deltas left to join, plain dicts and lists);
 * anything else is fallback(item)'s. New reference, or NULL. */
static PyObject *
wire_item(PyObject *item, PyObject *fallback)
{
    int kind = 0;
    if (read_wire_slots() == 1) {
        kind = Py_IS_TYPE(item, item_slots[1].type) ? 1 : Py_IS_TYPE(item, item_slots[2].type) ? 2 : 0;
    }
    if (kind == 0) {
        return PyObject_CallOneArg(fallback, item);
    }
    const WireSlots *ws = &wire_slots[kind];
    PyObject *id = slot_get(item, ws->id), *nulls = slot_get(item, ws->nulls);
    PyObject *fields = slot_get(item, ws->fields), *metadata = slot_get(item, ws->metadata);
    Py_ssize_t pending = parts_count(slot_get(item, ws->parts));
    PyObject *text = slot_get(item, ws->text);
    PyObject *role = NULL, *calls = NULL, *name = NULL, *function_fields = NULL;
    int common = id != NULL && nulls != NULL && PyFrozenSet_CheckExact(nulls) &&
                 PySet_GET_SIZE(nulls) == 0 && fields != NULL && PyDict_CheckExact(fields) &&
                 metadata != NULL && pending == 0 && text != NULL;
    if (common && kind == 1) {
        role = slot_get(item, ws->role);
        calls = slot_get(item, ws->tool_calls);
        common = role != NULL && calls != NULL && (calls == Py_None || PyList_CheckExact(calls));
    }
    else if (common) {
        name = slot_get(item, ws->name);
        function_fields = slot_get(item, ws->function_fields);
        common = name != NULL && function_fields != NULL &&
                 (function_fields == Py_None || PyDict_CheckExact(function_fields));
    }
    if (!common) {
        return PyObject_CallOneArg(fallback, item);
    }
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    if (id != Py_None && wire_set(out, str_id, id, fallback) < 0) {
        goto fail;
    }
    if (kind == 1) {
        if (role != Py_None && wire_set(out, str_role, role, fallback) < 0) {
            goto fail;
        }
        if (text != Unset && wire_set(out, str_content, text, fallback) < 0) {
            goto fail;
        }
        if (wire_update(out, fields, fallback) < 0) {
            goto fail;
        }
        if (calls != Py_None) {
            Py_INCREF(calls);
            Py_ssize_t n = PyList_GET_SIZE(calls);
            PyObject *wired = PyList_New(n);
            for (Py_ssize_t i = 0; wired != NULL && i < n; i++) {
                PyObject *call = i < PyList_GET_SIZE(calls) ? PyList_GET_ITEM(calls, i) : NULL;
                PyObject *copy = NULL;
                if (call != NULL) {
                    Py_INCREF(call);
                    copy = wire_item(call, fallback);
                    Py_DECREF(call);
                }
                if (copy == NULL) {
                    if (!PyErr_Occurred()) {
                        PyErr_SetString(PyExc_RuntimeError, "tool calls changed during copy");
                    }
                    Py_CLEAR(wired);
                    break;
                }
                PyList_SET_ITEM(wired, i, copy);
            }
            Py_DECREF(calls);
            if (wired == NULL) {
                goto fail;
            }
            int status = PyDict_SetItem(out, str_tool_calls, wired);
            Py_DECREF(wired);
            if (status < 0) {
                goto fail;
            }
        }
    }
    else {
        if (wire_update(out, fields, fallback) < 0) {
            goto fail;
        }
        if (function_fields != Py_None) {
            PyObject *function = PyDict_New();
            int status = function == NULL ? -1 : 0;
            if (status == 0 && name != Py_None) {
                status = wire_set(function, str_name, name, fallback);
            }
            if (status == 0 && text != Unset) {
                status = wire_set(function, str_arguments, text, fallback);
            }
            if (status == 0) {
                status = wire_update(function, function_fields, fallback);
            }
            if (status == 0) {
                status = PyDict_SetItem(out, str_function, function);
            }
            Py_XDECREF(function);
            if (status < 0) {
                goto fail;
            }
        }
    }
    if (metadata != Py_None && wire_set(out, str_metadata, metadata, fallback) < 0) {
        goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* wire_item(item, fallback) -> item.to_wire(): see wire_item (fallback: the Python way). */
static PyObject *
native_wire_item(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wire_item() takes 2 arguments");
        return NULL;
    }
    return wire_item(args[0], args[1]);
}

/* configure_copy(fallback): _metadata._copy_json, which json_copy calls for what it does not
 * take; once, at import of _metadata. */
static PyObject *
native_configure_copy(PyObject *module, PyObject *fallback)
{
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "configure_copy() takes a callable");
        return NULL;
    }
    Py_INCREF(fallback);
    Py_XSETREF(copy_json_func, fallback);
    Py_RETURN_NONE;
}

/* copy_json(value) -> the copy: _metadata.copy_json (see json_copy in _loop.h). */
static PyObject *
native_copy_json(PyObject *module, PyObject *value)
{
    return json_copy(value);
}

/* copy_wire(value, fallback) -> the copy: _metadata.copy_wire (see wire_copy). */
static PyObject *
native_copy_wire(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "copy_wire() takes 2 arguments");
        return NULL;
    }
    return wire_copy(args[0], args[1]);
}

/* new_list() -> an empty list the cyclic collector does not track: the ledger's records'
 * lists (_speedups.new_list). A record is untracked (gc=False) and holds JSON values and other
 * records, never itself, its ledger or one of its lists, so a list of records cannot be part
 * of a reference cycle either; a process that keeps many ledgers has that many fewer objects
 * for each full collection to walk. */
static PyObject *
native_new_list(PyObject *module, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    if (list != NULL) {
        PyObject_GC_UnTrack(list);
    }
    return list;
}

/* new_ordered() -> OrderedDict(): empty and not tracked by the cyclic collector, for the
 * verifier's and the tally's tables of ids (_speedups.new_ordered). An OrderedDict inserts
 * through the dict's own code, which tracks it again as soon as it holds a value or key that
 * may be tracked (a tuple holding an event, say); one of strings, None and UNSET cannot be
 * part of a reference cycle, and is one object fewer for each full collection to walk. */
static PyObject *
native_new_ordered(PyObject *module, PyObject *unused)
{
    PyObject *table = PyODict_New();
    if (table != NULL) {
        PyObject_GC_UnTrack(table);
    }
    return table;
}

/* untrack_message(item) -> None: a MessageItem holding no tool calls, no longer tracked by
 * the cyclic collector. Its members (its fields, content, metadata) never refer back to it;
 * only a message holding tool calls is in a cycle (each call's owner is the message), and
 * MessageItem tracks itself again (track_message) as soon as it holds them. A thread's store
 * then costs the collector no walk for a message of text. Left tracked before
 * configure_steps(); anything but a MessageItem (a subclass's included): a TypeError. */
static PyObject *
native_untrack_message(PyObject *module, PyObject *item)
{
    if (item_slots[1].type == NULL || tool_calls_off < 0) {
        Py_RETURN_NONE; /* before configure_steps(): left tracked */
    }
    if (!Py_IS_TYPE(item, item_slots[1].type)) {
        PyErr_SetString(PyExc_TypeError, "untrack_message() takes a MessageItem");
        return NULL;
    }
    PyObject *calls = slot_get(item, tool_calls_off);
    if ((calls == NULL || calls == Py_None) && PyObject_GC_IsTracked(item)) {
        PyObject_GC_UnTrack(item);
    }
    Py_RETURN_NONE;
}

/* track_message(item) -> None: a MessageItem tracked again (it holds tool calls). */
static PyObject *
native_track_message(PyObject *module, PyObject *item)
{
    if (item_slots[1].type == NULL || !Py_IS_TYPE(item, item_slots[1].type)) {
        PyErr_SetString(PyExc_TypeError, "track_message() takes a MessageItem");
        return NULL;
    }
    if (!PyObject_GC_IsTracked(item)) {
        PyObject_GC_Track(item);
    }
    Py_RETURN_NONE;
}

static PyMethodDef native_methods[] = {
    {"scan", (PyCFunction)native_scan, METH_O,
     "scan(data: bytes) -> bool: whether JSON text is proven free of what fast_decode checks."},
    {"configure", (PyCFunction)(void (*)(void))native_configure, METH_FASTCALL,
     "configure(Update, MessageItem, ToolCallItem, ToolCallArgsEvent, UNSET, deltas, Context, "
     "MergedMetadata, _Writes, metadata_decode): once."},
    {"configure_copy", (PyCFunction)native_configure_copy, METH_O,
     "configure_copy(fallback): _metadata._copy_json, for what copy_json does not take."},
    {"untrack_message", (PyCFunction)native_untrack_message, METH_O,
     "untrack_message(item) -> None: a MessageItem without tool calls, untracked by the collector."},
    {"track_message", (PyCFunction)native_track_message, METH_O,
     "track_message(item) -> None: a MessageItem tracked by the collector again."},
    {"new_list", (PyCFunction)native_new_list, METH_NOARGS,
     "new_list() -> []: an empty list the cyclic collector does not track (_speedups.new_list)."},
    {"new_ordered", (PyCFunction)native_new_ordered, METH_NOARGS,
     "new_ordered() -> OrderedDict(): empty, untracked until it holds what may be tracked "
     "(_speedups.new_ordered)."},
    {"copy_json", (PyCFunction)native_copy_json, METH_O,
     "copy_json(value) -> a deep copy: _metadata.copy_json (new dicts and lists)."},
    {"shape", (PyCFunction)native_shape, METH_O,
     "shape(data: bytes) -> (class, id, delta) | None: a bare content delta, undecoded."},
    {"configure_steps", (PyCFunction)(void (*)(void))native_configure_steps, METH_FASTCALL,
     "configure_steps(StepStartedEvent, StepFinishedEvent, StepRecord): once, after configure() "
     "(see _steps.h): the routes' names and offsets."},
    {"merge", (PyCFunction)(void (*)(void))native_merge, METH_FASTCALL,
     "merge(existing, incoming) -> MergedMetadata | None: accumulate's merge, or None."},
    {"copy_wire", (PyCFunction)(void (*)(void))native_copy_wire, METH_FASTCALL,
     "copy_wire(value, fallback) -> a copy: _metadata.copy_wire (fallback: the Python one)."},
    {"wire_item", (PyCFunction)(void (*)(void))native_wire_item, METH_FASTCALL,
     "wire_item(item, fallback) -> item.to_wire(), copied in one go (fallback: the Python way)."},
    {"run_batch", (PyCFunction)(void (*)(void))native_run_batch, METH_FASTCALL,
     "run_batch(...) -> (k, event, exc, skipped): the driver's fast-path loop (see _driver)."},
    {"sse_run", (PyCFunction)(void (*)(void))frame_sse_run, METH_FASTCALL,
     "sse_run(chunk: bytes, limit: int) -> (payloads, end) | None: _framing's sse_run."},
    {"jsonl_run", (PyCFunction)(void (*)(void))frame_jsonl_run, METH_FASTCALL,
     "jsonl_run(chunk: bytes, limit: int) -> (payloads, end) | None: _framing's jsonl_run."},
    {"patch_simple", (PyCFunction)(void (*)(void))native_patch_simple, METH_FASTCALL,
     "patch_simple(root, fresh, op) -> the new root | None: _patch._Patcher._simple's common "
     "case (see _patch.h)."},
    {NULL, NULL, 0, NULL},
};

static int
native_exec(PyObject *module)
{
    str_index = PyUnicode_InternFromString("index");
    str_activity = PyUnicode_InternFromString("activity");
    str_type = PyUnicode_InternFromString("type");
    str_fast_passes = PyUnicode_InternFromString("fast_passes");
    str_fast_tally = PyUnicode_InternFromString("fast_tally");
    str_made = PyUnicode_InternFromString("_made");
    str_held = PyUnicode_InternFromString("_held");
    str_tallies = PyUnicode_InternFromString("tallies");
    str_plans = PyUnicode_InternFromString("plans");
    str_native_plans = PyUnicode_InternFromString("native_plans");
    str_replanned = PyUnicode_InternFromString("replanned");
    if (!str_made || !str_held || !str_tallies || !str_plans || !str_native_plans ||
        !str_replanned) {
        return -1;
    }
    one = PyLong_FromLong(1);
    if (!str_index || !str_activity || !str_type || !str_fast_passes || !str_fast_tally || !one) {
        return -1;
    }
    str_op = PyUnicode_InternFromString("op");
    str_path = PyUnicode_InternFromString("path");
    str_value = PyUnicode_InternFromString("value");
    str_replace = PyUnicode_InternFromString("replace");
    str_add = PyUnicode_InternFromString("add");
    str_proto = PyUnicode_InternFromString("__proto__");
    str_prototype = PyUnicode_InternFromString("prototype");
    str_slash = PyUnicode_InternFromString("/");
    if (!str_op || !str_path || !str_value || !str_replace || !str_add || !str_proto ||
        !str_prototype || !str_slash) {
        return -1;
    }
    str_id = PyUnicode_InternFromString("id");
    str_role = PyUnicode_InternFromString("role");
    str_content = PyUnicode_InternFromString("content");
    str_tool_calls = PyUnicode_InternFromString("toolCalls");
    str_function = PyUnicode_InternFromString("function");
    str_name = PyUnicode_InternFromString("name");
    str_arguments = PyUnicode_InternFromString("arguments");
    str_metadata = PyUnicode_InternFromString("metadata");
    if (!str_id || !str_role || !str_content || !str_tool_calls || !str_function || !str_name ||
        !str_arguments || !str_metadata) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "MAX_NESTING", MAX_NESTING) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot native_slots[] = {
    {Py_mod_exec, native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    "agui_meta._native",
    "The optional C core of agui_meta's driver (the Python implementation is its specification).",
    0,
    native_methods,
    native_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModuleDef_Init(&native_module);
}
