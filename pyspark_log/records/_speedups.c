/* pyspark_log.records._speedups: the producer's per-record loops, compiled.
 *
 * An optional accelerator, as aiokafka ships compiled record code beside its pure Python: every
 * function here has a pure Python twin that gives the same result and is used where this module
 * was not built (``speedups.py`` picks one; ``PYLOG_NO_SPEEDUPS=1`` forces the Python ones).
 *
 *   partition_keys(keys, count)           toPositive(murmur2(key)) % count per key, Kafka's
 *                                         default partitioner (columnar_encode.partitions_for_keys)
 *   group_by_partition(keys, count)       the same partitions, grouped: a stable counting sort
 *   encode_records(rows, bounds)          the records sections of send() rows (row_encode)
 *   LaneSender(writer, fallback)          Producer.send's common case through the producer's lane
 *                                         writer (client/lane_writer.py: its docstring is the
 *                                         contract; LaneWriter.append is the Python twin)
 *
 * Record layout (Kafka documentation §5.3.2 "Record"): length varint, attributes int8, timestampDelta varlong,
 * offsetDelta varint, keyLength varint (-1: null), key, valueLength varint (-1: null), value,
 * headers count varint; every varint zig-zag encoded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2): seed 0x9747b28c, m 0x5bd1e995,
 * r 24; the tail's bytes taken little-endian as in Java's switch fall-through. */
static uint32_t murmur2(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t words = length / 4, i;
    for (i = 0; i < words; i++) {
        const unsigned char *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * words;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* The partition of every key of ``keys`` (a list of bytes, or of other contiguous buffers) into
 * ``parts``; -1 and a TypeError for an item that is no buffer. */
static int partitions_of(PyObject *keys, long count, long *parts)
{
    Py_ssize_t n = PyList_GET_SIZE(keys), i;
    for (i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        uint32_t h;
        if (PyBytes_CheckExact(key))
            h = murmur2((const unsigned char *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key));
        else { /* bytearray, memoryview: any contiguous buffer */
            Py_buffer view;
            if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) < 0) {
                PyErr_Format(PyExc_TypeError, "key %zd is %.100s, not bytes", i, Py_TYPE(key)->tp_name);
                return -1;
            }
            h = murmur2((const unsigned char *)view.buf, view.len);
            PyBuffer_Release(&view);
        }
        parts[i] = (long)((h & 0x7fffffffu) % (uint32_t)count);
    }
    return 0;
}

static int parse_keys_count(PyObject *args, const char *name, PyObject **keys, long *count)
{
    if (!PyArg_ParseTuple(args, "O!l", &PyList_Type, keys, count))
        return -1;
    if (*count <= 0 || *count > 0x7fffffffL) {
        PyErr_Format(PyExc_ValueError, "%s: a topic has 1 to 2**31-1 partitions, not %ld", name, *count);
        return -1;
    }
    return 0;
}

static PyObject *partition_keys(PyObject *self, PyObject *args)
{
    PyObject *keys, *out = NULL;
    long count;
    if (parse_keys_count(args, "partition_keys", &keys, &count) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys), i;
    long *parts = PyMem_Malloc(sizeof(long) * (size_t)(n ? n : 1));
    if (parts == NULL)
        return PyErr_NoMemory();
    if (partitions_of(keys, count, parts) < 0)
        goto done;
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    for (i = 0; i < n; i++) {
        PyObject *p = PyLong_FromLong(parts[i]);
        if (p == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, p);
    }
done:
    PyMem_Free(parts);
    return out;
}

/* group_by_partition(keys, count) -> (order, cuts, run_partitions)
 *
 * ``order[s]`` is the position in ``keys`` of the s-th key sorted by partition, keeping the
 * keys' order within a partition (a stable counting sort); ``cuts`` the sorted positions where
 * each partition's run starts, then ``len(keys)``; ``run_partitions`` the partition of each run.
 * ``order`` is None when all keys go to one partition (the keys keep their order). */
static PyObject *group_by_partition(PyObject *self, PyObject *args)
{
    PyObject *keys, *order = NULL, *cuts = NULL, *runs = NULL, *out = NULL;
    long count;
    if (parse_keys_count(args, "group_by_partition", &keys, &count) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys), i;
    long *parts = PyMem_Malloc(sizeof(long) * (size_t)(n ? n : 1));
    /* per partition: how many keys, then where its run starts */
    Py_ssize_t *next = NULL;
    int spread = 0;
    if (parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (partitions_of(keys, count, parts) < 0)
        goto done;
    for (i = 1; i < n; i++) {
        if (parts[i] != parts[0]) {
            spread = 1;
            break;
        }
    }
    cuts = PyList_New(0);
    runs = PyList_New(0);
    if (cuts == NULL || runs == NULL)
        goto done;
    if (!spread) {
        if (n > 0) {
            PyObject *zero = PyLong_FromLong(0), *p = PyLong_FromLong(parts[0]);
            int bad = zero == NULL || p == NULL || PyList_Append(cuts, zero) < 0 || PyList_Append(runs, p) < 0;
            Py_XDECREF(zero);
            Py_XDECREF(p);
            if (bad)
                goto done;
        }
        order = Py_None;
        Py_INCREF(order);
    }
    else {
        next = PyMem_Calloc((size_t)count, sizeof(Py_ssize_t));
        if (next == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (i = 0; i < n; i++)
            next[parts[i]]++;
        Py_ssize_t at = 0;
        long p;
        for (p = 0; p < count; p++) {
            Py_ssize_t c = next[p];
            next[p] = at;
            if (c) {
                PyObject *start = PyLong_FromSsize_t(at), *part = PyLong_FromLong(p);
                int bad = start == NULL || part == NULL || PyList_Append(cuts, start) < 0 || PyList_Append(runs, part) < 0;
                Py_XDECREF(start);
                Py_XDECREF(part);
                if (bad)
                    goto done;
            }
            at += c;
        }
        order = PyList_New(n);
        if (order == NULL)
            goto done;
        for (i = 0; i < n; i++) {
            PyObject *pos = PyLong_FromSsize_t(i);
            if (pos == NULL)
                goto done;
            PyList_SET_ITEM(order, next[parts[i]]++, pos);
        }
    }
    {
        PyObject *end = PyLong_FromSsize_t(n);
        if (end == NULL || PyList_Append(cuts, end) < 0) {
            Py_XDECREF(end);
            goto done;
        }
        Py_DECREF(end);
    }
    out = PyTuple_Pack(3, order, cuts, runs);
done:
    Py_XDECREF(order);
    Py_XDECREF(cuts);
    Py_XDECREF(runs);
    PyMem_Free(parts);
    PyMem_Free(next);
    return out;
}

static inline uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int varint_size(uint64_t z)
{
    int size = 1;
    while (z >= 0x80) {
        z >>= 7;
        size++;
    }
    return size;
}

static inline char *put_varint(char *at, uint64_t z)
{
    while (z >= 0x80) {
        *at++ = (char)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    *at++ = (char)z;
    return at;
}

/* A row's fields, borrowed: NULL key or value for None. */
typedef struct {
    PyObject *key, *value;
    int64_t ts;
} row_fields;

/* Read row ``i``: 1 if it is a plain send() row (a 4-tuple of bytes or None key, bytes or None
 * value, an int timestamp within int64 and empty headers), 0 if not, -1 on an error. */
static int read_row(PyObject *row, row_fields *out)
{
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 4)
        return 0;
    PyObject *key = PyTuple_GET_ITEM(row, 0), *value = PyTuple_GET_ITEM(row, 1);
    PyObject *ts = PyTuple_GET_ITEM(row, 2), *headers = PyTuple_GET_ITEM(row, 3);
    if (key != Py_None && !PyBytes_CheckExact(key))
        return 0;
    if (value != Py_None && !PyBytes_CheckExact(value))
        return 0;
    if (!PyLong_CheckExact(ts))
        return 0;
    if (!(PyTuple_CheckExact(headers) && PyTuple_GET_SIZE(headers) == 0)
        && !(PyList_CheckExact(headers) && PyList_GET_SIZE(headers) == 0))
        return 0;
    int overflow = 0;
    long long stamp = PyLong_AsLongLongAndOverflow(ts, &overflow);
    if (stamp == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        return 0;
    out->key = key == Py_None ? NULL : key;
    out->value = value == Py_None ? NULL : value;
    out->ts = (int64_t)stamp;
    return 1;
}

/* A delta that does not fit an int64 (timestamps near both ends of the range): not plain. */
static int delta_of(int64_t ts, int64_t base, int64_t *delta)
{
    if ((base < 0 && ts > INT64_MAX + base) || (base > 0 && ts < INT64_MIN + base))
        return 0;
    *delta = ts - base;
    return 1;
}

/* encode_records(rows, bounds) -> (data, byte_starts, base_timestamps, max_timestamps) | None
 *
 * ``rows`` a list of ``(key, value, timestamp, headers)`` tuples; ``bounds`` the first row of
 * each batch, then ``len(rows)`` (rising strictly from 0). ``data`` holds the batches' records
 * sections back to back, batch b's at ``byte_starts[b]:byte_starts[b+1]``, offset and timestamp
 * deltas relative to the batch's first record. None when a row is not a plain send() row
 * (headers, other types, a timestamp outside int64): the caller's Python encoder takes those. */
static PyObject *encode_records(PyObject *self, PyObject *args)
{
    PyObject *rows, *bounds, *data = NULL, *starts = NULL, *bases = NULL, *maxes = NULL, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &rows, &PyList_Type, &bounds))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows), nb = PyList_GET_SIZE(bounds) - 1, i, b;
    if (n == 0 || nb < 1) {
        PyErr_SetString(PyExc_ValueError, "starts must rise strictly from 0 to the number of records (at least one record)");
        return NULL;
    }
    row_fields *fields = PyMem_Malloc(sizeof(row_fields) * (size_t)n);
    uint64_t *bodies = PyMem_Malloc(sizeof(uint64_t) * (size_t)n);
    Py_ssize_t *cut = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(nb + 1));
    int64_t *base_ts = PyMem_Malloc(sizeof(int64_t) * (size_t)nb);
    if (fields == NULL || bodies == NULL || cut == NULL || base_ts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (b = 0; b <= nb; b++) {
        cut[b] = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, b));
        if (cut[b] == -1 && PyErr_Occurred())
            goto done;
        if ((b == 0 && cut[b] != 0) || (b > 0 && cut[b] <= cut[b - 1]) || (b == nb && cut[b] != n)) {
            PyErr_SetString(PyExc_ValueError, "starts must rise strictly from 0 to the number of records (at least one record)");
            goto done;
        }
    }
    for (i = 0; i < n; i++) {
        int plain = read_row(PyList_GET_ITEM(rows, i), &fields[i]);
        if (plain < 0)
            goto done;
        if (plain == 0) {
            out = Py_None;
            Py_INCREF(out);
            goto done;
        }
    }
    /* pass 1: every record's body size, the sections' sizes */
    starts = PyList_New(nb + 1);
    bases = PyList_New(nb);
    maxes = PyList_New(nb);
    if (starts == NULL || bases == NULL || maxes == NULL)
        goto done;
    Py_ssize_t total = 0;
    for (b = 0; b < nb; b++) {
        int64_t base = fields[cut[b]].ts, top = base;
        PyObject *start = PyLong_FromSsize_t(total);
        if (start == NULL)
            goto done;
        PyList_SET_ITEM(starts, b, start);
        base_ts[b] = base;
        for (i = cut[b]; i < cut[b + 1]; i++) {
            const row_fields *f = &fields[i];
            int64_t delta;
            if (!delta_of(f->ts, base, &delta)) {
                out = Py_None;
                Py_INCREF(out);
                goto done;
            }
            if (f->ts > top)
                top = f->ts;
            Py_ssize_t klen = f->key ? PyBytes_GET_SIZE(f->key) : -1;
            Py_ssize_t vlen = f->value ? PyBytes_GET_SIZE(f->value) : -1;
            uint64_t body = 1 + (uint64_t)varint_size(zigzag(delta)) + (uint64_t)varint_size(zigzag(i - cut[b]))
                + (uint64_t)varint_size(zigzag(klen)) + (uint64_t)(klen > 0 ? klen : 0)
                + (uint64_t)varint_size(zigzag(vlen)) + (uint64_t)(vlen > 0 ? vlen : 0) + 1;
            if (body > 0x3fffffffu) {
                out = Py_None; /* beyond a varint32 length: not a record Kafka accepts anyway */
                Py_INCREF(out);
                goto done;
            }
            bodies[i] = body;
            total += (Py_ssize_t)(body + (uint64_t)varint_size(zigzag((int64_t)body)));
        }
        PyObject *bt = PyLong_FromLongLong(base), *mt = PyLong_FromLongLong(top);
        if (bt == NULL || mt == NULL) {
            Py_XDECREF(bt);
            Py_XDECREF(mt);
            goto done;
        }
        PyList_SET_ITEM(bases, b, bt);
        PyList_SET_ITEM(maxes, b, mt);
    }
    {
        PyObject *end = PyLong_FromSsize_t(total);
        if (end == NULL)
            goto done;
        PyList_SET_ITEM(starts, nb, end);
    }
    /* pass 2: the bytes */
    data = PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL)
        goto done;
    char *at = PyBytes_AS_STRING(data);
    for (b = 0; b < nb; b++) {
        for (i = cut[b]; i < cut[b + 1]; i++) {
            const row_fields *f = &fields[i];
            at = put_varint(at, zigzag((int64_t)bodies[i]));
            *at++ = 0; /* attributes */
            at = put_varint(at, zigzag(f->ts - base_ts[b]));
            at = put_varint(at, zigzag(i - cut[b]));
            if (f->key) {
                Py_ssize_t klen = PyBytes_GET_SIZE(f->key);
                at = put_varint(at, zigzag(klen));
                memcpy(at, PyBytes_AS_STRING(f->key), (size_t)klen);
                at += klen;
            }
            else
                *at++ = 1; /* zigzag(-1) */
            if (f->value) {
                Py_ssize_t vlen = PyBytes_GET_SIZE(f->value);
                at = put_varint(at, zigzag(vlen));
                memcpy(at, PyBytes_AS_STRING(f->value), (size_t)vlen);
                at += vlen;
            }
            else
                *at++ = 1;
            *at++ = 0; /* headers count */
        }
    }
    if (at != PyBytes_AS_STRING(data) + total) {
        PyErr_SetString(PyExc_AssertionError, "encode_records: the sizes and the bytes written disagree");
        goto done;
    }
    out = PyTuple_Pack(4, data, starts, bases, maxes);
done:
    Py_XDECREF(data);
    Py_XDECREF(starts);
    Py_XDECREF(bases);
    Py_XDECREF(maxes);
    PyMem_Free(fields);
    PyMem_Free(bodies);
    PyMem_Free(cut);
    PyMem_Free(base_ts);
    return out;
}


/* LaneSender: ``Producer.send``'s common case, compiled (sync.py's fast path, the same steps).
 *
 * Installed as a producer's ``send`` attribute (so ``producer.send(...)`` calls it without a
 * Python frame). It takes ``send(topic, value, key)`` with a ``str`` topic, ``bytes`` or None
 * key and value and nothing else set, when the producer's lane writer is ``accepting``, the
 * topic's metadata is known and ``buffer.memory`` has room: it reserves the record's size under
 * the pool's lock, appends the row ``(key, value, now_ms, ())`` and its size to the open lane (a
 * new one when the topic or the keyed/sticky kind changes) and returns the future of (lane,
 * position), kicking the drain as ``send`` does. Anything else is handed, before any side
 * effect, to the Python method (``fallback``, ``Producer.send`` bound), which gives the same
 * result by the general path and raises what it raises.
 *
 * It knows one object of the client: the ``LaneWriter`` (client/lane_writer.py), whose
 * docstring is the contract: the names below (``writer_names``) and nothing else. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *writer, *fallback;
    /* fixed for the writer's life, read once */
    PyObject *pool, *cluster, *acquire, *release, *future_type, *chunk_slot, *pos_slot;
    PyObject *meta, *topics; /* the metadata object whose known topics ``topics`` holds (a memo) */
    /* the writer's open lane when last seen and its fields (fixed while it is open; a sealed
     * lane is never reopened, and holding it keeps its identity unique) */
    PyObject *lane, *lane_topic, *lane_sticky, *lane_rows, *lane_sizes;
    Py_ssize_t overhead, chunk_limit, size_limit;
    int ignore_keys;
} LaneSender;

/* the LaneWriter contract, then the pool's counter, the cluster's metadata, the lock's calls */
static PyObject *s_accepting, *s_scheduled, *s_lane, *s_lane_topic, *s_lane_sticky, *s_rows, *s_sizes,
    *s_known, *s_open_lane, *s_kick, *s_lock, *s_pool, *s_cluster, *s_overhead, *s_size_limit, *s_chunk_limit,
    *s_ignore_keys, *s_future_type, *s_future_slots, *s_available, *s_metadata, *s_acquire, *s_release;
static PyObject *names[7]; /* send's parameters, in order */

static int intern_names(void)
{
    static const char *strs[] = {"accepting", "scheduled", "lane", "lane_topic", "lane_sticky", "rows", "sizes",
        "known", "open_lane", "kick", "lock", "pool", "cluster", "overhead", "size_limit", "chunk_limit",
        "ignore_keys", "future_type", "future_slots", "available", "metadata", "acquire", "release"};
    PyObject **slots[] = {&s_accepting, &s_scheduled, &s_lane, &s_lane_topic, &s_lane_sticky, &s_rows, &s_sizes,
        &s_known, &s_open_lane, &s_kick, &s_lock, &s_pool, &s_cluster, &s_overhead, &s_size_limit, &s_chunk_limit,
        &s_ignore_keys, &s_future_type, &s_future_slots, &s_available, &s_metadata, &s_acquire, &s_release};
    static const char *params[] = {"topic", "value", "key", "headers", "partition", "timestamp_ms", "on_delivery"};
    size_t i;
    for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        if ((*slots[i] = PyUnicode_InternFromString(strs[i])) == NULL)
            return -1;
    for (i = 0; i < 7; i++)
        if ((names[i] = PyUnicode_InternFromString(params[i])) == NULL)
            return -1;
    return 0;
}

/* 1 if ``obj.name`` is true, 0 if false, -1 on an error */
static int attr_true(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* 1 if ``topic``'s metadata is known (the writer's ``known`` asked when the metadata object
 * changed or the topic is new to it), 0 if not, -1 on an error. */
static int sender_topic_known(LaneSender *self, PyObject *topic)
{
    PyObject *meta = PyObject_GetAttr(self->cluster, s_metadata);
    if (meta == NULL)
        return -1;
    int known = meta == self->meta ? PySet_Contains(self->topics, topic) : 0;
    if (known == 0) {
        PyObject *r = PyObject_CallMethodObjArgs(self->writer, s_known, meta, topic, NULL);
        if (r == NULL)
            known = -1;
        else {
            known = PyObject_IsTrue(r);
            Py_DECREF(r);
            if (known == 1) {
                if (meta != self->meta) {
                    Py_INCREF(meta);
                    Py_SETREF(self->meta, meta);
                    if (PySet_Clear(self->topics) < 0)
                        known = -1;
                }
                if (known == 1 && PySet_Add(self->topics, topic) < 0)
                    known = -1;
            }
        }
    }
    Py_DECREF(meta);
    return known;
}

static PyObject *now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Remember the writer's open ``lane`` and its topic, kind, rows and sizes (under the lock). */
static int lane_fields(LaneSender *self, PyObject *lane)
{
    PyObject *topic = PyObject_GetAttr(self->writer, s_lane_topic), *sticky = NULL, *rows = NULL, *sizes = NULL;
    if (topic == NULL || (sticky = PyObject_GetAttr(self->writer, s_lane_sticky)) == NULL
        || (rows = PyObject_GetAttr(self->writer, s_rows)) == NULL
        || (sizes = PyObject_GetAttr(self->writer, s_sizes)) == NULL)
        goto bad;
    if (!PyList_CheckExact(rows) || !PyList_CheckExact(sizes)) {
        PyErr_SetString(PyExc_TypeError, "a lane writer's rows and sizes are lists while a lane is open");
        goto bad;
    }
    Py_INCREF(lane);
    Py_XSETREF(self->lane, lane);
    Py_XSETREF(self->lane_topic, topic);
    Py_XSETREF(self->lane_sticky, sticky);
    Py_XSETREF(self->lane_rows, rows);
    Py_XSETREF(self->lane_sizes, sizes);
    return 0;
bad:
    Py_XDECREF(topic);
    Py_XDECREF(sticky);
    Py_XDECREF(rows);
    Py_XDECREF(sizes);
    return -1;
}

/* ``descr.__set__(obj, value)``: one of the writer's ``future_slots`` */
static int set_slot(PyObject *descr, PyObject *obj, PyObject *value)
{
    descrsetfunc set = Py_TYPE(descr)->tp_descr_set;
    if (set == NULL) {
        PyErr_SetString(PyExc_TypeError, "a lane writer's future_slots are data descriptors");
        return -1;
    }
    return set(descr, obj, value);
}

static PyObject *sender_fast(LaneSender *self, PyObject *topic, PyObject *value, PyObject *key, int *taken);

static PyObject *sender_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    LaneSender *self = (LaneSender *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, i, j;
    PyObject *given[7] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int plain = nargs <= 6; /* (more: Python's TypeError) */
    for (i = 0; plain && i < nargs; i++)
        given[i] = args[i];
    for (i = 0; plain && i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        for (j = 0; j < 7; j++)
            if (name == names[j] || PyUnicode_Compare(name, names[j]) == 0)
                break;
        if (PyErr_Occurred())
            PyErr_Clear();
        if (j == 7 || given[j] != NULL)
            plain = 0; /* an unknown or repeated argument: Python's TypeError */
        else
            given[j] = args[nargs + i];
    }
    if (plain) {
        for (j = 3; j < 7; j++)
            if (given[j] != NULL && given[j] != Py_None)
                plain = 0;
    }
    if (plain && given[0] != NULL && PyUnicode_CheckExact(given[0])) {
        PyObject *value = given[1] == NULL ? Py_None : given[1], *key = given[2] == NULL ? Py_None : given[2];
        if ((value == Py_None || PyBytes_CheckExact(value)) && (key == Py_None || PyBytes_CheckExact(key))) {
            int taken = 0;
            PyObject *future = sender_fast(self, given[0], value, key, &taken);
            if (taken || future != NULL)
                return future;
            if (PyErr_Occurred())
                return NULL;
        }
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* The fast path: the future (``*taken`` set once the record is queued), or NULL with no error
 * set when the Python method must take the call (nothing was changed), or NULL and an error. */
static PyObject *sender_fast(LaneSender *self, PyObject *topic, PyObject *value, PyObject *key, int *taken)
{
    int t = attr_true(self->writer, s_accepting);
    if (t <= 0)
        return NULL;
    Py_ssize_t size = self->overhead + (key != Py_None ? PyBytes_GET_SIZE(key) : 0)
        + (value != Py_None ? PyBytes_GET_SIZE(value) : 0);
    if (size > self->size_limit)
        return NULL;
    if ((t = sender_topic_known(self, topic)) <= 0)
        return NULL;
    PyObject *r = PyObject_CallNoArgs(self->acquire);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    /* under the pool's lock: buffer.memory, then the lane */
    PyObject *lane = NULL, *rows = NULL, *sizes = NULL, *row = NULL, *stamp = NULL, *size_obj = NULL;
    int reserved = 0, failed = 1;
    Py_ssize_t pos = -1;
    PyObject *available = PyObject_GetAttr(self->pool, s_available);
    if (available == NULL)
        goto unlock;
    Py_ssize_t room = PyLong_AsSsize_t(available);
    Py_DECREF(available);
    if (room == -1 && PyErr_Occurred())
        goto unlock;
    if (room < size) { /* the Python method blocks for room (max.block.ms) */
        failed = 0;
        goto unlock;
    }
    PyObject *rest = PyLong_FromSsize_t(room - size);
    if (rest == NULL || PyObject_SetAttr(self->pool, s_available, rest) < 0) {
        Py_XDECREF(rest);
        goto unlock;
    }
    Py_DECREF(rest);
    reserved = 1;
    PyObject *sticky = (key == Py_None || self->ignore_keys) ? Py_True : Py_False;
    lane = PyObject_GetAttr(self->writer, s_lane);
    if (lane == NULL)
        goto unlock;
    if (lane != Py_None && lane != self->lane) { /* a lane not seen yet: read its fields */
        if (lane_fields(self, lane) < 0)
            goto unlock;
    }
    int same = lane != Py_None;
    if (same) {
        same = self->lane_topic == topic ? 1 : PyObject_RichCompareBool(self->lane_topic, topic, Py_EQ);
        if (same < 0)
            goto unlock;
        same = same && self->lane_sticky == sticky;
    }
    if (!same) {
        Py_SETREF(lane, PyObject_CallMethodObjArgs(self->writer, s_open_lane, topic, sticky, NULL));
        if (lane == NULL || lane_fields(self, lane) < 0)
            goto unlock;
    }
    rows = self->lane_rows;
    sizes = self->lane_sizes;
    Py_INCREF(rows);
    Py_INCREF(sizes);
    stamp = now_ms();
    size_obj = PyLong_FromSsize_t(size);
    if (stamp == NULL || size_obj == NULL)
        goto unlock;
    row = PyTuple_Pack(4, key, value, stamp, PyTuple_New(0)); /* (the empty tuple is a singleton) */
    if (row == NULL)
        goto unlock;
    Py_DECREF(PyTuple_GET_ITEM(row, 3)); /* PyTuple_New's reference, now the row's */
    /* bytes, None, an int and (): nothing the collector could find a cycle through (it untracks
     * such tuples itself at their first collection; here they never burden one) */
    PyObject_GC_UnTrack(row);
    pos = PyList_GET_SIZE(rows);
    if (PyList_Append(rows, row) < 0)
        goto unlock;
    if (PyList_Append(sizes, size_obj) < 0) {
        /* (cannot happen short of memory: take the row back so the lane stays consistent) */
        PyList_SetSlice(rows, pos, pos + 1, NULL);
        goto unlock;
    }
    failed = 0;
    *taken = 1;
unlock:
    if (failed && reserved) { /* give the reservation back */
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        PyObject *now = PyObject_GetAttr(self->pool, s_available);
        if (now != NULL) {
            PyObject *back = PyLong_FromSsize_t(PyLong_AsSsize_t(now) + size);
            if (back != NULL)
                PyObject_SetAttr(self->pool, s_available, back);
            Py_XDECREF(back);
            Py_DECREF(now);
        }
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        r = PyObject_CallNoArgs(self->release);
        Py_XDECREF(r);
        if (exc_type != NULL)
            PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    Py_XDECREF(rows);
    Py_XDECREF(sizes);
    Py_XDECREF(row);
    Py_XDECREF(stamp);
    Py_XDECREF(size_obj);
    if (!*taken) {
        Py_XDECREF(lane);
        return NULL;
    }
    if (r == NULL) { /* the release failed: the record is queued, the error is the caller's */
        Py_DECREF(lane);
        return NULL;
    }
    /* the future: the writer's future_type, made as object.__new__, its two slots set */
    PyTypeObject *type = (PyTypeObject *)self->future_type;
    PyObject *future = type->tp_alloc(type, 0);
    PyObject *pos_obj = NULL;
    if (future == NULL)
        goto out;
    pos_obj = PyLong_FromSsize_t(pos);
    if (pos_obj == NULL || set_slot(self->chunk_slot, future, lane) < 0 || set_slot(self->pos_slot, future, pos_obj) < 0) {
        Py_CLEAR(future);
        goto out;
    }
    {
        int on = attr_true(self->writer, s_scheduled);
        if (on < 0 || !on || pos >= self->chunk_limit) {
            PyObject *done = on < 0 ? NULL : PyObject_CallMethodObjArgs(self->writer, s_kick, NULL);
            if (done == NULL)
                Py_CLEAR(future);
            Py_XDECREF(done);
        }
    }
out:
    Py_XDECREF(pos_obj);
    Py_DECREF(lane);
    return future;
}

static int sender_traverse(LaneSender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->writer);
    Py_VISIT(self->fallback);
    Py_VISIT(self->pool);
    Py_VISIT(self->cluster);
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->future_type);
    Py_VISIT(self->chunk_slot);
    Py_VISIT(self->pos_slot);
    Py_VISIT(self->meta);
    Py_VISIT(self->topics);
    Py_VISIT(self->lane);
    Py_VISIT(self->lane_topic);
    Py_VISIT(self->lane_sticky);
    Py_VISIT(self->lane_rows);
    Py_VISIT(self->lane_sizes);
    return 0;
}

static int sender_clear(LaneSender *self)
{
    Py_CLEAR(self->writer);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->pool);
    Py_CLEAR(self->cluster);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->chunk_slot);
    Py_CLEAR(self->pos_slot);
    Py_CLEAR(self->meta);
    Py_CLEAR(self->topics);
    Py_CLEAR(self->lane);
    Py_CLEAR(self->lane_topic);
    Py_CLEAR(self->lane_sticky);
    Py_CLEAR(self->lane_rows);
    Py_CLEAR(self->lane_sizes);
    return 0;
}

static void sender_dealloc(LaneSender *self)
{
    PyObject_GC_UnTrack(self);
    sender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ``writer.<name>`` as a Py_ssize_t (-1 and an error on failure) */
static Py_ssize_t attr_ssize(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    Py_ssize_t n = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    return n;
}

/* LaneSender(writer, fallback): the fixed part of the writer's contract is read here, once. */
static PyObject *sender_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"writer", "fallback", NULL};
    PyObject *writer, *fallback, *lock = NULL, *slots = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:LaneSender", kw, &writer, &fallback))
        return NULL;
    LaneSender *self = (LaneSender *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = sender_vectorcall;
    Py_INCREF(writer);
    self->writer = writer;
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(Py_None);
    self->meta = Py_None;
    if ((self->topics = PySet_New(NULL)) == NULL || (lock = PyObject_GetAttr(writer, s_lock)) == NULL
        || (self->acquire = PyObject_GetAttr(lock, s_acquire)) == NULL
        || (self->release = PyObject_GetAttr(lock, s_release)) == NULL
        || (self->pool = PyObject_GetAttr(writer, s_pool)) == NULL
        || (self->cluster = PyObject_GetAttr(writer, s_cluster)) == NULL
        || (self->future_type = PyObject_GetAttr(writer, s_future_type)) == NULL
        || (slots = PyObject_GetAttr(writer, s_future_slots)) == NULL)
        goto bad;
    if (!PyType_Check(self->future_type) || !PyTuple_CheckExact(slots) || PyTuple_GET_SIZE(slots) != 2) {
        PyErr_SetString(PyExc_TypeError, "a lane writer's future_type is a type and its future_slots two descriptors");
        goto bad;
    }
    self->chunk_slot = PyTuple_GET_ITEM(slots, 0);
    self->pos_slot = PyTuple_GET_ITEM(slots, 1);
    Py_INCREF(self->chunk_slot);
    Py_INCREF(self->pos_slot);
    if ((self->overhead = attr_ssize(writer, s_overhead)) == -1 && PyErr_Occurred())
        goto bad;
    if ((self->chunk_limit = attr_ssize(writer, s_chunk_limit)) == -1 && PyErr_Occurred())
        goto bad;
    if ((self->size_limit = attr_ssize(writer, s_size_limit)) == -1 && PyErr_Occurred())
        goto bad;
    if ((self->ignore_keys = attr_true(writer, s_ignore_keys)) < 0)
        goto bad;
    Py_DECREF(lock);
    Py_DECREF(slots);
    return (PyObject *)self;
bad:
    Py_XDECREF(lock);
    Py_XDECREF(slots);
    Py_DECREF(self);
    return NULL;
}

/* ``__wrapped__`` (the Python method, so ``inspect.signature`` and ``help`` show its signature)
 * and ``__doc__`` (its docstring). */
static PyObject *sender_wrapped(LaneSender *self, void *closure)
{
    if (self->fallback == NULL)
        Py_RETURN_NONE;
    Py_INCREF(self->fallback);
    return self->fallback;
}

static PyObject *sender_doc(LaneSender *self, void *closure)
{
    if (self->fallback == NULL)
        Py_RETURN_NONE;
    return PyObject_GetAttrString(self->fallback, "__doc__");
}

static PyGetSetDef sender_getset[] = {
    {"__wrapped__", (getter)sender_wrapped, NULL, NULL, NULL},
    {"__doc__", (getter)sender_doc, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LaneSenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyspark_log.records._speedups.LaneSender",
    .tp_basicsize = sizeof(LaneSender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_getset = sender_getset,
    .tp_new = sender_new,
    .tp_traverse = (traverseproc)sender_traverse,
    .tp_clear = (inquiry)sender_clear,
    .tp_dealloc = (destructor)sender_dealloc,
    .tp_vectorcall_offset = offsetof(LaneSender, vectorcall),
    .tp_call = PyVectorcall_Call,
};

static PyMethodDef methods[] = {
    {"partition_keys", partition_keys, METH_VARARGS,
     "partition_keys(keys, count) -> list of toPositive(murmur2(key)) % count"},
    {"group_by_partition", group_by_partition, METH_VARARGS,
     "group_by_partition(keys, count) -> (order | None, cuts, run_partitions)"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(rows, bounds) -> (data, byte_starts, base_timestamps, max_timestamps) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "pylog's compiled producer loops (optional; see speedups.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    if (intern_names() < 0 || PyType_Ready(&LaneSenderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LaneSenderType);
    if (PyModule_AddObject(m, "LaneSender", (PyObject *)&LaneSenderType) < 0) {
        Py_DECREF(&LaneSenderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
