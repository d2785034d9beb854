/* The built-in stages' handling of STEP_STARTED and STEP_FINISHED in the C core (included once,
 * by _native.c, after _loop.h).
 *
 * Steps are the commonest events off the fast path (a step in each turn of a run), and they
 * build no item, so what the default chain does for one is small and all in plain tables:
 *
 *   ExpandChunks.feed   nothing, when no chunk stream is open (else it closes them first);
 *   Verify.feed         _step_started / _step_finished: the open steps by owner and name, and
 *                       the room left under max_open_items;
 *   Accumulate.feed     Update(event) (no item), emitted;
 *   Ledger.feed         the Update emitted first, then _step_started / _step_finished: the
 *                       open run's event count, the time (_time), and the StepRecord made,
 *                       kept in the run's list and by (owner, name), or finished.
 *
 * Those Python methods are the specification. step_route() does what they do when every
 * precondition below holds, checked before anything is changed; otherwise it changes nothing
 * and the event goes through the stages' feeds, so that every error and report (a step
 * already open or not open, no room, a full list, no open run, open chunk streams, a gated
 * verifier) is the Python path's.
 */

#ifndef AGUI_META_STEPS_H
#define AGUI_META_STEPS_H

#include <Python.h>

/* What every route is taken with, "own": the pipeline's own objects (_driver._routes), (chunks
 * or None, verify, accumulate, ledger, the store, its message lookup, its tool-call lookup). A
 * route itself says what to do, with the stages' plain functions, and depends on the stages'
 * classes only: every pipeline of those classes shares one table of routes, and holds a
 * single tuple of its own for the cyclic collector to walk. */
enum { O_CHUNKS, O_VERIFY, O_ACCUMULATE, O_LEDGER, O_STORE, O_MESSAGE, O_CALL, O_SIZE };
#define OWN(own, i) PyTuple_GET_ITEM((own), (i))

/* func(self, arg), as the bound method would be called (a new reference, or NULL). */
static PyObject *
call_method(PyObject *func, PyObject *self, PyObject *arg)
{
    PyObject *args[3] = {NULL, self, arg};
    return PyObject_Vectorcall(func, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* func(self, a, b), the same with two arguments. */
static PyObject *
call_method2(PyObject *func, PyObject *self, PyObject *a, PyObject *b)
{
    PyObject *args[4] = {NULL, self, a, b};
    return PyObject_Vectorcall(func, args + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* The route: (ROUTE_STEP,); the stages it takes are own's. */
enum { P_ROUTE, P_SIZE };

/* Whether configure_steps() read every route's names and offsets (here, _ends.h, _starts.h,
 * _results.h, _activity.h): until then no route is taken. */
static int routes_ready;

static PyTypeObject *StepStarted_type, *StepFinished_type;
static PyObject *StepRecord_cls, *step_kwnames;
static PyObject *s_lanes, *s_gate, *s_steps_v, *s_max_open_items, *s_text, *s_tool_calls,
    *s_reasoning_messages, *s_reasoning_spans, *s_open_steps, *s_subagents, *s_current,
    *s_wrappers, *s_event_counts, *s_clock, *s_max_entries, *s_ctx, *s_latest, *s_timestamp,
    *s_step_name, *s_subagent_run_id, *s_metadata, *s_steps, *s_status, *s_finished_index,
    *s_finished_metadata, *s_ended_at, *s_ended_clock, *s_index, *s_k_started, *s_k_finished,
    *s_receipt, *s_event, *s_finished, *s_counts, *s_item;

/* configure_steps(StepStartedEvent, StepFinishedEvent, StepRecord): once, at the driver's
 * import. 0, or -1 with an exception. */
static int
steps_configure(PyObject *started, PyObject *finished, PyObject *record)
{
    if (!PyType_Check(started) || !PyType_Check(finished) || !PyType_Check(record)) {
        PyErr_SetString(PyExc_TypeError, "configure_steps() takes three classes");
        return -1;
    }
    static const Name names[] = {
        {&s_lanes, "_lanes"},
        {&s_gate, "_gate"},
        {&s_steps_v, "_steps"},
        {&s_max_open_items, "max_open_items"},
        {&s_text, "_text"},
        {&s_tool_calls, "_tool_calls"},
        {&s_reasoning_messages, "_reasoning_messages"},
        {&s_reasoning_spans, "_reasoning_spans"},
        {&s_open_steps, "_open_steps"},
        {&s_subagents, "_subagents"},
        {&s_current, "_current"},
        {&s_wrappers, "_wrappers"},
        {&s_event_counts, "event_counts"},
        {&s_clock, "_clock"},
        {&s_max_entries, "max_entries"},
        {&s_ctx, "ctx"},
        {&s_latest, "_latest"},
        {&s_timestamp, "timestamp"},
        {&s_step_name, "step_name"},
        {&s_subagent_run_id, "subagent_run_id"},
        {&s_metadata, "metadata"},
        {&s_steps, "steps"},
        {&s_status, "status"},
        {&s_finished_index, "finished_index"},
        {&s_finished_metadata, "finished_metadata"},
        {&s_ended_at, "ended_at"},
        {&s_ended_clock, "ended_clock"},
        {&s_index, "index"},
        {&s_k_started, "STEP_STARTED"},
        {&s_k_finished, "STEP_FINISHED"},
        {&s_receipt, "receipt"},
        {&s_event, "event"},
        {&s_finished, "finished"},
        {&s_counts, "_counts"},
        {&s_item, "_item"},
    };
    if (INTERN_NAMES(names) < 0) {
        return -1;
    }
    if (step_kwnames == NULL) {
        step_kwnames = Py_BuildValue("(ssssss)", "name", "subagent_run_id", "started_index",
                                     "started_metadata", "started_at", "started_clock");
        if (step_kwnames == NULL) {
            return -1;
        }
    }
    Py_INCREF(started);
    Py_XSETREF(StepStarted_type, (PyTypeObject *)started);
    Py_INCREF(finished);
    Py_XSETREF(StepFinished_type, (PyTypeObject *)finished);
    Py_INCREF(record);
    Py_XSETREF(StepRecord_cls, record);
    return 0;
}

/* len() of o, an exact dict, or -1 (not this way: no exception). */
static Py_ssize_t
dict_len(PyObject *o)
{
    return o != NULL && PyDict_CheckExact(o) ? PyDict_GET_SIZE(o) : -1;
}

/* The items the verifier holds open (what Verify._room sums), or -1: not as built (no
 * exception) or an error (exception set). */
static Py_ssize_t
verify_open(PyObject *verify)
{
    PyObject *const names[] = {s_text, s_tool_calls, s_reasoning_messages, s_reasoning_spans,
                               s_subagents};
    Py_ssize_t total = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        PyObject *table = PyObject_GetAttr(verify, names[i]);
        if (table == NULL) {
            return -1;
        }
        Py_ssize_t n = dict_len(table);
        Py_DECREF(table);
        if (n < 0) {
            return -1;
        }
        total += n;
    }
    PyObject *steps = PyObject_GetAttr(verify, s_open_steps);
    if (steps == NULL) {
        return -1;
    }
    Py_ssize_t n = PyLong_CheckExact(steps) ? PyLong_AsSsize_t(steps) : -1;
    Py_DECREF(steps);
    if (n < 0) {
        return -1;
    }
    return total + n;
}

/* Verify._room: room for one more open item (1), not, or not as built (0: the Python way
 * says which), or -1 with an exception. */
static int
verify_room(PyObject *verify)
{
    PyObject *limit = PyObject_GetAttr(verify, s_max_open_items);
    if (limit == NULL) {
        return -1;
    }
    if (limit == Py_None) {
        Py_DECREF(limit);
        return 1;
    }
    Py_ssize_t most = PyLong_CheckExact(limit) ? PyLong_AsSsize_t(limit) : -1;
    Py_DECREF(limit);
    if (most == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* a bound too large for a Py_ssize_t: the Python way */
        return 0;
    }
    Py_ssize_t open = verify_open(verify);
    if (open < 0) {
        return PyErr_Occurred() ? -1 : 0;
    }
    return most >= 0 && open < most;
}

/* o.name += by, for an int attribute. 0, or -1 with an exception. */
static int
attr_add(PyObject *o, PyObject *name, long by)
{
    PyObject *was = PyObject_GetAttr(o, name);
    if (was == NULL) {
        return -1;
    }
    PyObject *delta = PyLong_FromLong(by);
    PyObject *now = delta == NULL ? NULL : PyNumber_Add(was, delta);
    Py_DECREF(was);
    Py_XDECREF(delta);
    if (now == NULL) {
        return -1;
    }
    int status = PyObject_SetAttr(o, name, now);
    Py_DECREF(now);
    return status;
}

/* counts[kind] = counts.get(kind, 0) + 1. 0, or -1 with an exception. */
static int
count_one(PyObject *counts, PyObject *kind)
{
    PyObject *inc = PyLong_FromLong(1);
    int status = inc == NULL ? -1 : dict_add(counts, kind, inc);
    Py_XDECREF(inc);
    return status;
}

/* Ledger._time(event): (the event's timestamp, "event"), else the context's (an event a chunk
 * synthesized), else (the ledger's clock(), "receipt"); remembered as the ledger's _latest.
 * A new reference to the pair, or NULL with an exception. */
static PyObject *
ledger_time(PyObject *ledger, PyObject *ctx, PyObject *event, PyObject *unset)
{
    PyObject *stamp = PyObject_GetAttr(event, s_timestamp);
    if (stamp == NULL) {
        return NULL;
    }
    if (stamp == unset) {
        Py_SETREF(stamp, PyObject_GetAttr(ctx, s_timestamp));
        if (stamp == NULL) {
            return NULL;
        }
    }
    PyObject *when;
    if (stamp == Py_None) {
        PyObject *clock = PyObject_GetAttr(ledger, s_clock);
        PyObject *now = clock == NULL ? NULL : PyObject_CallNoArgs(clock);
        Py_XDECREF(clock);
        when = now == NULL ? NULL : PyTuple_Pack(2, now, s_receipt);
        Py_XDECREF(now);
    }
    else {
        when = PyTuple_Pack(2, stamp, s_event);
    }
    Py_DECREF(stamp);
    if (when != NULL && PyObject_SetAttr(ledger, s_latest, when) < 0) {
        Py_CLEAR(when);
    }
    return when;
}

/* What step_route reads, each a new reference (NULL where not read). */
typedef struct {
    PyObject *name, *owner, *steps, *current, *counts, *open, *ctx, *key, *record_steps;
    PyObject *names; /* verify._steps[owner], or NULL */
    PyObject *step;  /* the ledger's open record (STEP_FINISHED), or NULL */
} StepRead;

static void
step_read_clear(StepRead *r)
{
    Py_XDECREF(r->name);
    Py_XDECREF(r->owner);
    Py_XDECREF(r->steps);
    Py_XDECREF(r->current);
    Py_XDECREF(r->counts);
    Py_XDECREF(r->open);
    Py_XDECREF(r->ctx);
    Py_XDECREF(r->key);
    Py_XDECREF(r->record_steps);
    Py_XDECREF(r->names);
    Py_XDECREF(r->step);
}

/* Whether attribute name of o is false (1), true (0), or -1 with an exception. */
static int
attr_false(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(v);
    Py_DECREF(v);
    return truth < 0 ? -1 : !truth;
}

/* No chunk stream open (ExpandChunks' feed closes them before the event). 1, 0 (not this
 * way), or -1 with an exception. */
static int
lanes_closed(PyObject *chunks)
{
    if (chunks != Py_None) {
        PyObject *lanes = PyObject_GetAttr(chunks, s_lanes);
        if (lanes == NULL) {
            return -1;
        }
        Py_ssize_t open = dict_len(lanes);
        Py_DECREF(lanes);
        if (open != 0) {
            return 0; /* chunk streams open, or not a dict */
        }
    }
    return 1;
}

/* What every route of the default chain checks first (here, _ends.h, _starts.h, _direct.h):
 * no chunk stream open, the verifier not gated (its feed checks the run's state first; None:
 * an event the gate lets through, RUN_STARTED). 1, 0 (not this way), or -1 with an exception. */
static int
chain_ready(PyObject *chunks, PyObject *verify)
{
    int ok = lanes_closed(chunks);
    return ok <= 0 || verify == Py_None ? ok : attr_false(verify, s_gate);
}

/* And the ledger's: the Update's class among the wrappers it knows (its feed learns it from
 * the first one); with counts, a run open whose counts it keeps (_counts). 1, 0, or -1. */
static int
ledger_ready(PyObject *ledger, PyObject *update_cls, int counts)
{
    PyObject *wrappers = PyObject_GetAttr(ledger, s_wrappers);
    if (wrappers == NULL) {
        return -1;
    }
    int known = PySet_CheckExact(wrappers) ? PySet_Contains(wrappers, update_cls) : 0;
    Py_DECREF(wrappers);
    if (known <= 0 || !counts) {
        return known;
    }
    PyObject *open = PyObject_GetAttr(ledger, s_counts);
    if (open == NULL) {
        return -1;
    }
    int ok = PyDict_CheckExact(open);
    Py_DECREF(open);
    return ok; /* no run open: the ledger opens one first */
}

/* The ledger's count of kind in its open run (ledger_ready held). 0, or -1 with an exception. */
static int
ledger_count(PyObject *ledger, PyObject *kind)
{
    PyObject *counts = PyObject_GetAttr(ledger, s_counts);
    if (counts == NULL) {
        return -1;
    }
    int status;
    if (PyDict_CheckExact(counts)) {
        status = count_one(counts, kind);
    }
    else {
        PyErr_SetString(PyExc_SystemError, "the ledger's run closed during the event");
        status = -1;
    }
    Py_DECREF(counts);
    return status;
}

/* The ledger's item (_item) let go once its handler is done, as Ledger.feed lets it go: the
 * last event's Update is not kept while the pipeline waits for its next chunk. 0, or -1 with
 * an exception. */
static int
ledger_done(PyObject *ledger)
{
    return PyObject_SetAttr(ledger, s_item, Py_None);
}

/* The ledger's part after its record was made in C (native: 1) or not (0: the handler, the
 * ledger's plain function, called with the ledger and the event), its item being update (set
 * by the caller) until it is done, as in Ledger.feed. native -1: the exception raised. 0, or -1
 * with an exception. */
static int
ledger_handled(int native, PyObject *handler, PyObject *ledger, PyObject *event)
{
    if (native != 0) {
        return native < 0 ? -1 : ledger_done(ledger);
    }
    PyObject *back = call_method(handler, ledger, event);
    Py_XDECREF(back);
    return back == NULL ? -1 : ledger_done(ledger);
}

/* The preconditions (see the top of the file), read into r. 1: they hold; 0: not this way;
 * -1 with an exception. Changes nothing. */
static int
step_check(int started, PyObject *event, PyObject *chunks, PyObject *verify, PyObject *ledger,
           PyObject *update_cls, StepRead *r)
{
    int ok = chain_ready(chunks, verify);
    if (ok <= 0) {
        return ok;
    }
    r->name = PyObject_GetAttr(event, s_step_name);
    r->owner = r->name == NULL ? NULL : PyObject_GetAttr(event, s_subagent_run_id);
    r->steps = r->owner == NULL ? NULL : PyObject_GetAttr(verify, s_steps_v);
    if (r->steps == NULL) {
        return -1;
    }
    if (!PyUnicode_CheckExact(r->name) || !PyDict_CheckExact(r->steps)) {
        return 0;
    }
    r->names = PyDict_GetItemWithError(r->steps, r->owner);
    if (r->names == NULL && PyErr_Occurred()) {
        return -1;
    }
    Py_XINCREF(r->names);
    if (r->names != NULL && !PyDict_CheckExact(r->names)) {
        return 0;
    }
    int held = r->names == NULL ? 0 : PyDict_Contains(r->names, r->name);
    if (held < 0) {
        return -1;
    }
    if (held == started) {
        return 0; /* already open, or not open: the verifier's error */
    }
    /* The ledger: an open run whose counts it keeps, and Update among the wrappers it knows. */
    r->current = PyObject_GetAttr(ledger, s_current);
    if (r->current == NULL) {
        return -1;
    }
    if (r->current == Py_None) {
        return 0; /* the ledger opens a run first */
    }
    if ((ok = ledger_ready(ledger, update_cls, 0)) <= 0) {
        return ok;
    }
    r->counts = PyObject_GetAttr(r->current, s_event_counts);
    r->open = r->counts == NULL ? NULL : PyObject_GetAttr(ledger, s_open_steps);
    r->ctx = r->open == NULL ? NULL : PyObject_GetAttr(ledger, s_ctx);
    r->key = r->ctx == NULL ? NULL : PyTuple_Pack(2, r->owner, r->name);
    if (r->key == NULL) {
        return -1;
    }
    if (!PyDict_CheckExact(r->counts) || !PyDict_CheckExact(r->open)) {
        return 0;
    }
    if (started) {
        ok = verify_room(verify);
        if (ok <= 0) {
            return ok;
        }
        /* Ledger._keep: room in the run's list of steps */
        r->record_steps = PyObject_GetAttr(r->current, s_steps);
        if (r->record_steps == NULL) {
            return -1;
        }
        if (!PyList_CheckExact(r->record_steps)) {
            return 0;
        }
        PyObject *bound = PyObject_GetAttr(ledger, s_max_entries);
        if (bound == NULL) {
            return -1;
        }
        int full = 0;
        if (bound != Py_None) {
            Py_ssize_t most = PyLong_CheckExact(bound) ? PyLong_AsSsize_t(bound) : -1;
            if (most == -1 && PyErr_Occurred()) {
                PyErr_Clear();
            }
            full = most < 0 || PyList_GET_SIZE(r->record_steps) >= most;
        }
        Py_DECREF(bound);
        if (full) {
            return 0; /* the ledger counts a dropped entry */
        }
    }
    else {
        r->step = PyDict_GetItemWithError(r->open, r->key);
        if (r->step == NULL) {
            return PyErr_Occurred() ? -1 : 0; /* no record to finish: the ledger makes one */
        }
        Py_INCREF(r->step);
    }
    return 1;
}

/* The verifier's part, the preconditions held. 0, or -1 with an exception. */
static int
step_verify(int started, PyObject *verify, StepRead *r)
{
    if (started) {
        PyObject *names = r->names;
        if (names == NULL) {
            names = PyDict_New();
            if (names == NULL || PyDict_SetItem(r->steps, r->owner, names) < 0) {
                Py_XDECREF(names);
                return -1;
            }
            Py_DECREF(names); /* the table holds it */
        }
        if (PyDict_SetItem(names, r->name, Py_None) < 0) {
            return -1;
        }
        return attr_add(verify, s_open_steps, 1);
    }
    int status = PyDict_DelItem(r->names, r->name);
    if (status == 0) {
        status = attr_add(verify, s_open_steps, -1);
    }
    if (status == 0 && PyDict_GET_SIZE(r->names) == 0) {
        status = PyDict_DelItem(r->steps, r->owner);
    }
    return status;
}

/* The ledger's part, the preconditions held. 0, or -1 with an exception. */
static int
step_ledger(int started, PyObject *event, PyObject *ledger, PyObject *unset, StepRead *r)
{
    if (count_one(r->counts, started ? s_k_started : s_k_finished) < 0) {
        return -1;
    }
    PyObject *when = ledger_time(ledger, r->ctx, event, unset);
    if (when == NULL) {
        return -1;
    }
    PyObject *index = PyObject_GetAttr(r->ctx, s_index);
    PyObject *metadata = index == NULL ? NULL : PyObject_GetAttr(event, s_metadata);
    int status = -1;
    if (metadata == NULL) {
        goto done;
    }
    if (metadata == unset) {
        Py_SETREF(metadata, Py_NewRef(Py_None));
    }
    PyObject *at = PyTuple_GET_ITEM(when, 0), *source = PyTuple_GET_ITEM(when, 1);
    if (started) {
        PyObject *args[6] = {r->name, r->owner == unset ? Py_None : r->owner, index, metadata,
                             at, source};
        PyObject *step = PyObject_Vectorcall(StepRecord_cls, args, 0, step_kwnames);
        if (step == NULL) {
            goto done;
        }
        status = PyList_Append(r->record_steps, step) < 0 ||
                         PyDict_SetItem(r->open, r->key, step) < 0
                     ? -1
                     : 0;
        Py_DECREF(step);
    }
    else {
        PyObject *step = r->step;
        status = PyDict_DelItem(r->open, r->key) < 0 ||
                         PyObject_SetAttr(step, s_status, s_finished) < 0 ||
                         PyObject_SetAttr(step, s_finished_index, index) < 0 ||
                         PyObject_SetAttr(step, s_finished_metadata, metadata) < 0 ||
                         PyObject_SetAttr(step, s_ended_at, at) < 0 ||
                         PyObject_SetAttr(step, s_ended_clock, source) < 0
                     ? -1
                     : 0;
    }
done:
    Py_XDECREF(metadata);
    Py_XDECREF(index);
    Py_DECREF(when);
    return status;
}

/* A STEP_STARTED or STEP_FINISHED through the default chain's stages (own's chunks or None,
 * verify and ledger, the run of stages exactly ExpandChunks, Verify, Accumulate, Ledger or the
 * same without ExpandChunks). *out: the Update to emit (a new reference; Py_True when build
 * is false: nobody reads it). 1: done as far as the emit (the caller emits it, then calls
 * step_after); 0: not this way, nothing changed; -1 with an exception. */
static int
step_route(PyObject *event, PyObject *own, PyObject *update_cls, PyObject *unset, int build,
           StepRead *r, PyObject **out)
{
    int started = Py_IS_TYPE(event, StepStarted_type);
    PyObject *chunks = OWN(own, O_CHUNKS), *verify = OWN(own, O_VERIFY);
    PyObject *ledger = OWN(own, O_LEDGER);
    int ok = step_check(started, event, chunks, verify, ledger, update_cls, r);
    if (ok <= 0) {
        return ok;
    }
    if (step_verify(started, verify, r) < 0) {
        return -1;
    }
    if (build) {
        *out = PyObject_CallOneArg(update_cls, event);
        if (*out == NULL) {
            return -1;
        }
    }
    else {
        *out = Py_NewRef(Py_True);
    }
    return 1;
}

/* The ledger's part, once the Update was emitted (the ledger emits before it records). */
static int
step_after(PyObject *event, PyObject *own, PyObject *unset, StepRead *r)
{
    return step_ledger(Py_IS_TYPE(event, StepStarted_type), event, OWN(own, O_LEDGER), unset, r);
}

#endif /* AGUI_META_STEPS_H */
