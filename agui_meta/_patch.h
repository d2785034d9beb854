/* The C core's part of agui_meta/_patch.py: _Patcher._simple, the commonest JSON Patch
 * operation (replace of a location that exists, add of a member of an object that exists) in
 * one walk, for a value that is not a container.
 *
 * patch_simple(root, fresh, op) -> the new root, or None
 *     What _Patcher._simple does with the patcher's root and fresh (its containers made during
 *     this patch, by id), when every container on op's path is an exact dict or list, every
 *     key plain (no "~", no "__proto__" or "prototype", an array index canonical, of fewer than
 *     19 digits and within the array) and op["value"] is not a dict or list: the containers on
 *     the path copied once (each copy added to fresh), the value written, the root returned
 *     (a copy, or root itself when it was fresh already). None, nothing changed, for anything
 *     else: the Python _simple (then the general walk) decides, so that every failure and its
 *     message are the Python path's. */

#ifndef AGUI_META_PATCH_H
#define AGUI_META_PATCH_H

#include <Python.h>

static PyObject *str_op, *str_path, *str_value, *str_replace, *str_add, *str_proto,
    *str_prototype, *str_slash;

/* The most keys a path may have here (a deeper one goes to the Python _simple). */
#define PATCH_MAX_KEYS 32

/* A key of the path as an array index: its value, or -1 when it is not a canonical decimal of
 * fewer than 19 ASCII digits (_MAX_INDEX_DIGITS). */
static Py_ssize_t
patch_index(PyObject *key)
{
    if (!PyUnicode_IS_ASCII(key)) {
        return -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    const char *s = (const char *)PyUnicode_DATA(key);
    if (n == 0 || n >= 19 || (n > 1 && s[0] == '0')) {
        return -1;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        at = at * 10 + (s[i] - '0');
    }
    return at;
}

/* A copy of container obj made for this patch, recorded in fresh (as _Patcher does: by id). */
static PyObject *
patch_own(PyObject *obj, PyObject *fresh)
{
    PyObject *copy = PyDict_CheckExact(obj) ? PyDict_Copy(obj) : PyList_GetSlice(obj, 0, PY_SSIZE_T_MAX);
    if (copy == NULL) {
        return NULL;
    }
    PyObject *id = PyLong_FromVoidPtr(copy);
    if (id == NULL || PyDict_SetItem(fresh, id, copy) < 0) {
        Py_XDECREF(id);
        Py_DECREF(copy);
        return NULL;
    }
    Py_DECREF(id);
    return copy;
}

/* container[key] = value, key the path's i-th (an index when container is a list). 0, or -1. */
static int
patch_set(PyObject *container, PyObject *keys, const Py_ssize_t *index, Py_ssize_t i,
          PyObject *value)
{
    if (index[i] < 0) {
        return PyDict_SetItem(container, PyList_GET_ITEM(keys, i), value);
    }
    Py_INCREF(value);
    return PyList_SetItem(container, index[i], value);
}

/* patch_simple's work (fresh an exact dict): the new root, Py_None, or NULL. */
static PyObject *
patch_one(PyObject *root, PyObject *fresh, PyObject *op)
{
    if (!PyDict_CheckExact(op) || (!PyDict_CheckExact(root) && !PyList_CheckExact(root))) {
        Py_RETURN_NONE;
    }
    PyObject *kind = PyDict_GetItemWithError(op, str_op);
    PyObject *path = kind == NULL ? NULL : PyDict_GetItemWithError(op, str_path);
    PyObject *value = path == NULL ? NULL : PyDict_GetItemWithError(op, str_value);
    if (value == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    int add;
    if (PyUnicode_CheckExact(kind) && PyUnicode_Compare(kind, str_replace) == 0) {
        add = 0;
    }
    else if (PyUnicode_CheckExact(kind) && PyUnicode_Compare(kind, str_add) == 0) {
        add = 1;
    }
    else {
        Py_RETURN_NONE;
    }
    if (!PyUnicode_CheckExact(path) || !PyUnicode_IS_ASCII(path) ||
        PyUnicode_GET_LENGTH(path) < 2 || PyUnicode_READ_CHAR(path, 0) != '/' ||
        PyUnicode_FindChar(path, '~', 0, PyUnicode_GET_LENGTH(path), 1) != -1 ||
        PyDict_Check(value) || PyList_Check(value)) {
        Py_RETURN_NONE; /* a non-ASCII path too: the Python _simple (rare, and still exact) */
    }
    PyObject *tail = PyUnicode_Substring(path, 1, PyUnicode_GET_LENGTH(path));
    PyObject *keys = tail == NULL ? NULL : PyUnicode_Split(tail, str_slash, -1);
    Py_XDECREF(tail);
    if (keys == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys), last = n - 1;
    if (n > PATCH_MAX_KEYS) {
        Py_DECREF(keys);
        Py_RETURN_NONE; /* a deep path: the Python _simple */
    }
    /* First the proof, changing nothing: every container on the path exists (each held, with
     * its index when it is a list: -1 for a dict). */
    PyObject *chain[PATCH_MAX_KEYS];
    Py_ssize_t index[PATCH_MAX_KEYS];
    Py_ssize_t held = 0;
    PyObject *obj = root, *out = NULL;
    int simple = 1;
    for (Py_ssize_t i = 0; simple && i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (PyUnicode_Compare(key, str_proto) == 0 || PyUnicode_Compare(key, str_prototype) == 0) {
            simple = 0;
            break;
        }
        PyObject *next = NULL;
        if (PyDict_CheckExact(obj)) {
            next = PyDict_GetItemWithError(obj, key);
            if (next == NULL) {
                if (PyErr_Occurred()) {
                    goto done;
                }
                if (i != last || !add) {
                    simple = 0;
                    break;
                }
            }
            index[i] = -1;
        }
        else if (PyList_CheckExact(obj)) {
            Py_ssize_t at = patch_index(key);
            if ((i == last && add) || at < 0 || at >= PyList_GET_SIZE(obj)) {
                simple = 0; /* an array's add inserts: the general walk's */
                break;
            }
            next = PyList_GET_ITEM(obj, at);
            index[i] = at;
        }
        else {
            simple = 0;
            break;
        }
        Py_INCREF(obj);
        chain[held++] = obj;
        obj = next;
    }
    if (!simple) {
        Py_INCREF(Py_None);
        out = Py_None;
        goto done;
    }
    /* Then the copies on write along the path (each container at most once per patch), and
     * the write. */
    PyObject *parent = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        obj = chain[i];
        PyObject *id = PyLong_FromVoidPtr(obj);
        int known = id == NULL ? -1 : PyDict_Contains(fresh, id);
        Py_XDECREF(id);
        if (known < 0) {
            goto done;
        }
        if (!known) {
            obj = patch_own(obj, fresh);
            if (obj == NULL) {
                goto done;
            }
            Py_DECREF(obj); /* fresh holds it */
            if (parent != NULL && patch_set(parent, keys, index, i - 1, obj) < 0) {
                goto done;
            }
        }
        if (parent == NULL) {
            out = obj;
            Py_INCREF(out);
        }
        parent = obj;
    }
    if (patch_set(parent, keys, index, last, value) < 0) {
        Py_CLEAR(out);
    }
done:
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(chain[i]);
    }
    Py_DECREF(keys);
    return out;
}

static PyObject *
native_patch_simple(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "patch_simple(root, fresh: dict, op)");
        return NULL;
    }
    return patch_one(args[0], args[1], args[2]);
}

#endif /* AGUI_META_PATCH_H */
