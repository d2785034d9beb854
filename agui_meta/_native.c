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
 * configure(Update, MessageItem, ToolCallItem, ToolCallArgsEvent, UNSET)
 *     Once, at import of the driver: the classes the loop builds and compares with.
 *
 * run_batch(payloads, k, number, index, ctx, typed_decode, py_decode, plans, tail, note)
 *     -> (k, event, exc)
 *     The loop of Runner._run_batch over payloads[k:], for the events that take the fast path
 *     (see _driver.Runner._run_batch): it stops at the first event that does not, and returns
 *     its position, its decoded event (None when the data is None or does not decode) and the
 *     exception its fast-path handler raised (None if none). k == len(payloads): all done.
 *     plans: by event class, (ids, convert, kind, lookup): kind 1 or 2 says convert is
 *     Accumulate's _text_content or _tool_args, which content_update does here for the common
 *     case (lookup: the store's message or tool_call lookup), handing the rest to convert.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_scan.h"

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

static PyObject *str_index, *str_subagent_run_id, *str_message_id, *str_tool_call_id;
static PyObject *str_metadata, *str_delta, *str_role, *str_parts, *str_content, *str_activity;
static PyObject *str_function_fields, *str_arg_parts, *str_args;
/* Set once by configure(): the classes and the sentinel the loop compares with. */
static PyObject *Update_cls, *MessageItem_cls, *ToolCallItem_cls, *ToolCallArgs_cls, *Unset;

static PyObject *
native_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "configure() takes 5 arguments");
        return NULL;
    }
    PyObject **slots[5] = {&Update_cls, &MessageItem_cls, &ToolCallItem_cls, &ToolCallArgs_cls,
                           &Unset};
    for (int i = 0; i < 5; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(*slots[i], args[i]);
    }
    Py_RETURN_NONE;
}

/* The content handler of Accumulate (_text_content, kind 1; _tool_args, kind 2) for the common
 * case: no metadata on the event, the item found, of the store's own class, with parts already
 * begun or text content. Returns the Update (new reference), Py_None (new reference: "not
 * this way", the Python handler runs) or NULL with an exception. */
static PyObject *
content_update(PyObject *event, long kind, PyObject *lookup)
{
    PyObject *metadata = PyObject_GetAttr(event, str_metadata);
    if (metadata == NULL) {
        return NULL;
    }
    Py_DECREF(metadata);
    if (metadata != Unset) {
        Py_RETURN_NONE;
    }
    PyObject *id = PyObject_GetAttr(event, kind == 1 ? str_message_id : str_tool_call_id);
    if (id == NULL) {
        return NULL;
    }
    PyObject *item = PyObject_CallOneArg(lookup, id);
    Py_DECREF(id);
    if (item == NULL) {
        return NULL;
    }
    PyObject *parts = NULL, *update = NULL;
    if ((PyObject *)Py_TYPE(item) != (kind == 1 ? MessageItem_cls : ToolCallItem_cls)) {
        goto other_way; /* None (missing), or a store's own item class */
    }
    if (kind == 1) {
        PyObject *role = PyObject_GetAttr(item, str_role);
        if (role == NULL) {
            goto fail;
        }
        int activity = PyObject_RichCompareBool(role, str_activity, Py_EQ);
        Py_DECREF(role);
        if (activity != 0) {
            if (activity < 0) {
                goto fail;
            }
            goto other_way;
        }
    }
    else {
        PyObject *fields = PyObject_GetAttr(item, str_function_fields);
        if (fields == NULL) {
            goto fail;
        }
        Py_DECREF(fields);
        if (fields == Py_None) {
            goto other_way;
        }
    }
    parts = PyObject_GetAttr(item, kind == 1 ? str_parts : str_arg_parts);
    if (parts == NULL) {
        goto fail;
    }
    if (!PyList_CheckExact(parts)) {
        goto other_way;
    }
    if (PyList_GET_SIZE(parts) == 0) {
        PyObject *content = PyObject_GetAttr(item, kind == 1 ? str_content : str_args);
        if (content == NULL) {
            goto fail;
        }
        int text = PyUnicode_CheckExact(content);
        Py_DECREF(content);
        if (!text) {
            goto other_way;
        }
    }
    PyObject *delta = PyObject_GetAttr(event, str_delta);
    if (delta == NULL) {
        goto fail;
    }
    int appended = PyList_Append(parts, delta);
    Py_DECREF(delta);
    if (appended < 0) {
        goto fail;
    }
    metadata = PyObject_GetAttr(item, str_metadata);
    if (metadata == NULL) {
        goto fail;
    }
    if (metadata == Unset) {
        Py_DECREF(metadata);
        metadata = Py_None;
        Py_INCREF(metadata);
    }
    PyObject *fields[4] = {event, item, Py_False, metadata};
    update = PyObject_Vectorcall(Update_cls, fields, 4, NULL);
    Py_DECREF(metadata);
    Py_DECREF(parts);
    Py_DECREF(item);
    return update;
other_way:
    Py_XDECREF(parts);
    Py_DECREF(item);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(parts);
    Py_DECREF(item);
    return NULL;
}

/* The decoded event of bytes data, or Py_None (new references); NULL only with an exception
 * raised by py_decode for what it does not take. */
static PyObject *
decode_one(PyObject *data, PyObject *typed_decode, PyObject *py_decode)
{
    if (PyBytes_CheckExact(data) &&
        scan_clean((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))) {
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
result(Py_ssize_t k, PyObject *event, PyObject *exc)
{
    /* steals event and exc (either may be NULL for None) */
    PyObject *pos = PyLong_FromSsize_t(k);
    if (pos == NULL) {
        Py_XDECREF(event);
        Py_XDECREF(exc);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(3, pos, event ? event : Py_None, exc ? exc : Py_None);
    Py_DECREF(pos);
    Py_XDECREF(event);
    Py_XDECREF(exc);
    return out;
}

static PyObject *
native_run_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "run_batch() takes 10 arguments");
        return NULL;
    }
    if (Update_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "run_batch(): configure() first");
        return NULL;
    }
    PyObject *payloads = args[0];
    Py_ssize_t k = PyLong_AsSsize_t(args[1]);
    int number = PyObject_IsTrue(args[2]);
    Py_ssize_t index = PyLong_AsSsize_t(args[3]);
    PyObject *ctx = args[4], *typed_decode = args[5], *py_decode = args[6];
    PyObject *plans = args[7], *tail = args[8], *note = args[9];
    PyObject *args_cls = ToolCallArgs_cls, *unset = Unset;
    if ((k == -1 || index == -1 || number < 0) && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_CheckExact(payloads) || !PyDict_CheckExact(plans) ||
        (note != Py_None && !PyList_CheckExact(note))) {
        PyErr_SetString(PyExc_TypeError, "run_batch(): payloads and note lists, plans a dict");
        return NULL;
    }
    for (; k < PyList_GET_SIZE(payloads); k++) {
        if (number) {
            PyObject *at = PyLong_FromSsize_t(index + k);
            if (at == NULL || PyObject_SetAttr(ctx, str_index, at) < 0) {
                Py_XDECREF(at);
                return NULL;
            }
            Py_DECREF(at);
        }
        PyObject *data = PyList_GET_ITEM(payloads, k); /* borrowed */
        if (data == Py_None) {
            return result(k, NULL, NULL);
        }
        Py_INCREF(data);
        PyObject *event = decode_one(data, typed_decode, py_decode);
        Py_DECREF(data);
        if (event == NULL) {
            return NULL;
        }
        if (event == Py_None) {
            Py_DECREF(event);
            return result(k, NULL, NULL);
        }
        PyObject *cls = (PyObject *)Py_TYPE(event);
        PyObject *plan = PyDict_GetItemWithError(plans, cls); /* borrowed */
        if (plan == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(event);
                return NULL;
            }
            return result(k, event, NULL);
        }
        if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 4) {
            Py_DECREF(event);
            PyErr_SetString(PyExc_TypeError, "run_batch(): a plan is (ids, convert, kind, lookup)");
            return NULL;
        }
        Py_INCREF(plan); /* held: the handlers run Python code */
        PyObject *tag = PyObject_GetAttr(event, str_subagent_run_id);
        if (tag == NULL) {
            Py_DECREF(event);
            Py_DECREF(plan);
            return NULL;
        }
        Py_DECREF(tag);
        if (tag != unset) {
            Py_DECREF(plan);
            return result(k, event, NULL);
        }
        PyObject *ids = PyTuple_GET_ITEM(plan, 0), *convert = PyTuple_GET_ITEM(plan, 1);
        if (ids != Py_None) {
            PyObject *id = PyObject_GetAttr(
                event, cls == args_cls ? str_tool_call_id : str_message_id);
            if (id == NULL) {
                Py_DECREF(event);
                Py_DECREF(plan);
                return NULL;
            }
            int held = PySequence_Contains(ids, id);
            Py_DECREF(id);
            if (held < 0) {
                Py_DECREF(event);
                Py_DECREF(plan);
                return NULL;
            }
            if (!held) {
                Py_DECREF(plan);
                return result(k, event, NULL);
            }
        }
        PyObject *out;
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(plan, 2));
        if (kind == -1 && PyErr_Occurred()) {
            Py_DECREF(event);
            Py_DECREF(plan);
            return NULL;
        }
        if (convert == Py_None) {
            out = event;
            Py_INCREF(out);
        }
        else if (kind == 0) {
            out = PyObject_CallOneArg(convert, event);
        }
        else {
            out = content_update(event, kind, PyTuple_GET_ITEM(plan, 3));
            if (out == Py_None) {
                Py_DECREF(out);
                out = PyObject_CallOneArg(convert, event);
            }
        }
        PyObject *done = NULL;
        if (out != NULL) {
            done = PyObject_CallOneArg(tail, out);
            Py_DECREF(out);
        }
        if (done == NULL) {
            /* The fast path's handler raised: the driver handles it as its own loop does. */
            PyObject *type, *exc, *tb;
            PyErr_Fetch(&type, &exc, &tb);
            PyErr_NormalizeException(&type, &exc, &tb);
            if (exc != NULL && tb != NULL) {
                PyException_SetTraceback(exc, tb);
            }
            Py_XDECREF(type);
            Py_XDECREF(tb);
            if (exc == NULL) {
                Py_DECREF(event);
                PyErr_SetString(PyExc_SystemError, "run_batch(): a handler raised nothing");
                Py_DECREF(plan);
                return NULL;
            }
            Py_DECREF(plan);
            return result(k, event, exc);
        }
        Py_DECREF(done);
        if (note != Py_None && PyList_Append(note, cls) < 0) {
            Py_DECREF(event);
            Py_DECREF(plan);
            return NULL;
        }
        Py_DECREF(event);
        Py_DECREF(plan);
    }
    return result(k, NULL, NULL);
}

static PyMethodDef native_methods[] = {
    {"scan", (PyCFunction)native_scan, METH_O,
     "scan(data: bytes) -> bool: whether JSON text is proven free of what fast_decode checks."},
    {"configure", (PyCFunction)(void (*)(void))native_configure, METH_FASTCALL,
     "configure(Update, MessageItem, ToolCallItem, ToolCallArgsEvent, UNSET): once."},
    {"run_batch", (PyCFunction)(void (*)(void))native_run_batch, METH_FASTCALL,
     "run_batch(...) -> (k, event, exc): the driver's fast-path loop (see _driver)."},
    {NULL, NULL, 0, NULL},
};

static int
native_exec(PyObject *module)
{
    str_index = PyUnicode_InternFromString("index");
    str_subagent_run_id = PyUnicode_InternFromString("subagent_run_id");
    str_message_id = PyUnicode_InternFromString("message_id");
    str_tool_call_id = PyUnicode_InternFromString("tool_call_id");
    str_metadata = PyUnicode_InternFromString("metadata");
    str_delta = PyUnicode_InternFromString("delta");
    str_role = PyUnicode_InternFromString("role");
    str_parts = PyUnicode_InternFromString("_parts");
    str_content = PyUnicode_InternFromString("_content");
    str_activity = PyUnicode_InternFromString("activity");
    str_function_fields = PyUnicode_InternFromString("function_fields");
    str_arg_parts = PyUnicode_InternFromString("_arg_parts");
    str_args = PyUnicode_InternFromString("_args");
    if (!str_index || !str_subagent_run_id || !str_message_id || !str_tool_call_id ||
        !str_metadata || !str_delta || !str_role || !str_parts || !str_content ||
        !str_activity || !str_function_fields || !str_arg_parts || !str_args) {
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
