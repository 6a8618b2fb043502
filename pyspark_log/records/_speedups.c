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
 *
 * Record layout (seed 002 §5.3.2): length varint, attributes int8, timestampDelta varlong,
 * offsetDelta varint, keyLength varint (-1: null), key, valueLength varint (-1: null), value,
 * headers count varint; every varint zig-zag encoded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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
    return PyModule_Create(&module);
}
