/* The default chain's stages on ACTIVITY_DELTA, in the C core (included once, by _native.c,
 * after _patch.h).
 *
 * An activity delta patches an activity message's content. For an untagged one whose every
 * operation is the commonest kind (_patch.h's patch_one: a replace, or an object's member
 * added, of a scalar on a plain path), the stages do:
 *
 *   ExpandChunks.feed   nothing, when no chunk stream is open;
 *   Verify.feed         _activity_delta: nothing (its owner is checked for a tagged one);
 *   Accumulate.feed     _activity_delta: the store's activity message (held by one position
 *                       of the store), the event's metadata merged into it, its content
 *                       patched (the patch on a copy, the document never changed), its
 *                       activityType field set; the Update (done) emitted;
 *   Ledger.feed         the Update emitted first, then the event's type counted in the open run.
 *
 * Those Python methods are the specification. activity_route() does what they do when every
 * condition they test holds, the patch applied first (to copies: nothing anyone sees changes
 * until it applied whole); otherwise the event goes through the stages' feeds, so that every
 * report (a message missing or not an activity, a failed patch) is the Python path's.
 */

#ifndef AGUI_META_ACTIVITY_H
#define AGUI_META_ACTIVITY_H

#include <Python.h>

/* The route: (ROUTE_ACTIVITY, the type the ledger counts, the field the activity's type is kept
 * in ("activityType")); own's message lookup finds the message. */
enum { A_ROUTE, A_KIND, A_FIELD, A_SIZE };

static PyObject *s_patch, *s_activity_type;
static Py_ssize_t refs_off = -1, fields_off = -1; /* MessageItem._refs, .fields */

/* What activity_route reads, each a new reference (NULL where not read). */
typedef struct {
    PyObject *item, *incoming, *content, *kind;
} ActivityRead;

static void
activity_read_clear(ActivityRead *r)
{
    Py_XDECREF(r->item);
    Py_XDECREF(r->incoming);
    Py_XDECREF(r->content);
    Py_XDECREF(r->kind);
}

/* The offsets and names the activity deltas read: once, by configure_steps(). 0, or -1. */
static int
activity_configure(void)
{
    PyObject *m = (PyObject *)item_slots[1].type;
    refs_off = slot_offset(m, "_refs");
    fields_off = slot_offset(m, "fields");
    if (PyErr_Occurred()) {
        return -1;
    }
    static const Name names[] = {{&s_patch, "patch"}, {&s_activity_type, "activity_type"}};
    return INTERN_NAMES(names);
}

/* The conditions, read into r (the patched content in r->content). 1: they hold; 0: not
 * this way; -1 with an exception. Changes nothing anyone sees. */
static int
activity_check(PyObject *event, PyObject *own, PyObject *update_cls, PyObject *unset,
               ActivityRead *r)
{
    if (!routes_ready) {
        return 0; /* before configure_steps() */
    }
    int ok = chain_ready(OWN(own, O_CHUNKS), OWN(own, O_VERIFY));
    if (ok <= 0) {
        return ok;
    }
    PyObject *tag = PyObject_GetAttr(event, s_subagent_run_id);
    if (tag == NULL) {
        return -1;
    }
    Py_DECREF(tag);
    if (tag != unset) {
        return 0; /* a subagent's: the verifier checks its owner */
    }
    PyObject *id = PyObject_GetAttr(event, s_message_id);
    if (id == NULL) {
        return -1;
    }
    r->item = PyUnicode_CheckExact(id) ? call_lookup(OWN(own, O_MESSAGE), id) : NULL;
    int exact = PyUnicode_CheckExact(id);
    Py_DECREF(id);
    if (!exact) {
        return 0;
    }
    if (r->item == NULL) {
        return -1;
    }
    /* Accumulate: the store's own activity message, held once, no text deltas pending */
    const ItemSlots *is = &item_slots[1];
    if (Py_TYPE(r->item) != is->type) {
        return 0; /* missing (a report), or not the store's class */
    }
    PyObject *role = slot_get(r->item, is->gate);
    PyObject *refs = slot_get(r->item, refs_off), *fields = slot_get(r->item, fields_off);
    PyObject *content = slot_get(r->item, is->text), *metadata = slot_get(r->item, is->metadata);
    if (role == NULL || !PyUnicode_CheckExact(role) || PyUnicode_Compare(role, str_activity) != 0 ||
        parts_count(slot_get(r->item, is->parts)) != 0 ||
        refs == NULL || !PyLong_CheckExact(refs) || PyLong_AsLong(refs) > 1 || fields == NULL ||
        !PyDict_CheckExact(fields) || content == NULL || metadata == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        return 0; /* not an activity (a report), or a message held twice (copied first) */
    }
    r->incoming = PyObject_GetAttr(event, s_metadata);
    r->kind = r->incoming == NULL ? NULL : PyObject_GetAttr(event, s_activity_type);
    PyObject *patch = r->kind == NULL ? NULL : PyObject_GetAttr(event, s_patch);
    if (patch == NULL) {
        return -1;
    }
    if (!PyList_CheckExact(patch) ||
        (r->incoming != unset && (ok = mergeable(metadata, r->incoming, unset)) <= 0)) {
        Py_DECREF(patch);
        return PyList_CheckExact(patch) ? ok : 0;
    }
    /* The patch, to copies (each container copied once: fresh): every operation the
     * commonest kind, or nothing of it is kept. */
    PyObject *fresh = PyDict_New();
    PyObject *root = fresh == NULL ? NULL
                     : content == unset || content == Py_None ? PyDict_New()
                                                                : Py_NewRef(content);
    for (Py_ssize_t i = 0; root != NULL && i < PyList_GET_SIZE(patch); i++) {
        PyObject *op = PyList_GET_ITEM(patch, i);
        Py_INCREF(op);
        PyObject *next = patch_one(root, fresh, op);
        Py_DECREF(op);
        Py_SETREF(root, next);
        if (root == Py_None) {
            Py_CLEAR(root);
            Py_XDECREF(fresh);
            Py_DECREF(patch);
            return 0; /* an operation of another kind: the Python patcher's */
        }
    }
    Py_XDECREF(fresh);
    Py_DECREF(patch);
    if (root == NULL) {
        return -1;
    }
    r->content = root;
    return ledger_ready(OWN(own, O_LEDGER), update_cls, 1);
}

/* The accumulator's part, the conditions held. 1 with *out the Update (a new reference;
 * Py_True when build is false); 0: not this way (nothing changed); -1 with an exception. */
static int
activity_route(PyObject *event, PyObject *route, PyObject *own, PyObject *update_cls,
               PyObject *unset, int build, ActivityRead *r, PyObject **out)
{
    int ok = activity_check(event, own, update_cls, unset, r);
    if (ok <= 0) {
        return ok;
    }
    const ItemSlots *is = &item_slots[1];
    PyObject *item = r->item;
    /* merged before the patch is set, as the handler does (a failing patch keeps it) */
    if (r->incoming != unset &&
        merge_into(item, is->metadata, slot_get(item, is->metadata), r->incoming, unset) < 0) {
        return -1;
    }
    slot_set(item, is->text, Py_NewRef(r->content)); /* item.content = content (no parts) */
    if (PyDict_SetItem(slot_get(item, fields_off), PyTuple_GET_ITEM(route, A_FIELD), r->kind) < 0) {
        return -1;
    }
    *out = item_update(update_cls, event, item, Py_True, is->metadata, unset, build);
    return *out == NULL ? -1 : 1;
}

/* The ledger's part, once the Update was emitted: the event's type counted. */
static int
activity_after(PyObject *route, PyObject *own)
{
    return ledger_count(OWN(own, O_LEDGER), PyTuple_GET_ITEM(route, A_KIND));
}

#endif /* AGUI_META_ACTIVITY_H */
