// Part of adjit.runtime._native: calls of compiled CPU code from Python without ctypes.
//
// A `Dispatcher` belongs to one Function or Kernel (lang/functions.py). The Python path
// registers each specialisation it compiled (`add`): what the arguments of a call that takes
// it look like (per argument: an exact NumPy array type, dtype and rank, or the exact Python
// type of a scalar), how to pass each (a memref descriptor, or a scalar converted to the
// parameter's type), and the address of the module's packed entry `_adj_packed_<entry>`
// (void(void**), runtime/packed_entries.py). `call` matches a call against those in native
// code, builds the descriptors on the stack, releases the GIL and calls. Anything it does not
// take exactly as the Python path would (a read-only array where one is written, a
// non-contiguous, byte-swapped or misaligned array, a subclass, an int that does not fit,
// ADJIT_DEBUG changed) returns
// the `miss` object, and the caller takes the Python path, which converts, or refuses with
// the messages of record. A check that failed
// in compiled code (its error cell) is raised by the Python `after_call` of the spec.
//
// Results: none, one scalar (the C interface returns it), or, for array results and several
// results, the struct the C interface fills through a pointer passed first (runtime/abi.py's
// layout: C's, descriptors inline). A returned array becomes an ndarray over its block whose
// base is a capsule that gives the block back to the allocator (allocator.cpp) when the last
// array over it dies, as abi.py's `memory.Block` does: one capsule per block, so an entry that
// returns one block twice frees it once.
#include <nanobind/nanobind.h>

#define PY_ARRAY_UNIQUE_SYMBOL adjit_dispatch_ARRAY_API
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace nb = nanobind;

extern "C" void _mlir_memref_to_llvm_free(void *p);   // allocator.cpp

namespace {

// Parameter kinds (runtime/native_dispatch.py spells them the same way).
// PY_FLOAT and PY_INT are results only: a weak scalar (core/types.py: a Python float or int
// in compiled code, an f64 or i64) returned as a Python float or int, as NumPy 2 does.
enum Kind : int { ARRAY = 0, F32 = 1, F64 = 2, I32 = 3, I64 = 4, BOOL = 5, NONE = 6,
                  PY_FLOAT = 7, PY_INT = 8 };
constexpr int MAX_RANK = 8;
constexpr int MAX_ARGS = 64;
constexpr size_t MAX_RESULT_BYTES = 2048;   // more goes to the Python path
constexpr int MAX_RESULTS = 16;

struct Param {
    int kind;          // Kind
    PyTypeObject *type;  // the exact type a call's value has (ndarray, float, int, np.float32...)
    int type_num;      // ARRAY: the NumPy dtype number
    int rank;          // ARRAY
    bool written;      // ARRAY: the compiled code may write it (read-only arrays refused)
    uint32_t units;    // ARRAY: bit r set where dimension r is 1 (a specialisation of its own)
};

struct Result {                  // a field of the results struct
    int kind;                    // Kind (ARRAY, or a scalar's)
    int type_num;                // ARRAY: the NumPy dtype number
    int rank;                    // ARRAY
    size_t offset;               // in the struct, by C's layout rules (abi.py's ctypes struct)
};

struct Spec {
    std::vector<Param> params;   // the call's arguments, then for kernels the ndrange extents
    size_t user_args;            // how many come from the call's positional arguments
    int ndim;                    // kernels: the ndrange's rank (0: not a kernel)
    void (*packed)(void **);
    int result;                  // Kind of the single scalar result, or NONE (no struct)
    std::vector<Result> fields;  // the results struct's fields (empty: no struct)
    size_t struct_size;
    bool as_tuple;               // return a tuple (several results, or `return (x,)`)
    bool cell;                   // the entry takes an error cell last
    std::string debug;           // ADJIT_DEBUG when compiled ("\x01" for unset)
    nb::object after_call;       // after_call(number): raises check `number`'s error
    nb::object keep;             // what keeps the module loaded
};

struct Descriptor {              // a memref descriptor of rank <= MAX_RANK
    void *allocated, *aligned;
    int64_t offset, sizes_strides[2 * MAX_RANK];
};

union Slot {                     // a scalar argument or result, in the parameter's type
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
    bool b;
};

std::string debug_setting() {
    const char *v = std::getenv("ADJIT_DEBUG");
    return v ? std::string(v) : std::string("\x01");
}

// Whether ADJIT_DEBUG is what it was when spec `s` was added (no string made: every call
// asks).
bool debug_unchanged(const std::string &was) {
    const char *v = std::getenv("ADJIT_DEBUG");
    return v ? was != "\x01" && std::strcmp(v, was.c_str()) == 0 : was == "\x01";
}

// A scalar `obj` of exact type `p.type` converted to the parameter's kind, as
// runtime/abi.py's _scalar_converter does; false where that path would refuse or differ.
bool scalar(PyObject *obj, const Param &p, Slot &out) {
    double d = 0;
    long long i = 0;
    bool is_float = false;
    if (PyFloat_CheckExact(obj)) {
        d = PyFloat_AS_DOUBLE(obj);
        is_float = true;
    } else if (PyBool_Check(obj)) {
        i = obj == Py_True;
    } else if (PyLong_CheckExact(obj)) {
        int overflow = 0;
        i = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow || (i == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return false;
        }
    } else if (PyArray_IsScalar(obj, Float)) {
        d = PyArrayScalar_VAL(obj, Float);
        is_float = true;
    } else if (PyArray_IsScalar(obj, Double)) {
        d = PyArrayScalar_VAL(obj, Double);
        is_float = true;
    } else if (PyArray_IsScalar(obj, Int)) {
        i = PyArrayScalar_VAL(obj, Int);
    } else if (PyArray_IsScalar(obj, Long)) {
        i = PyArrayScalar_VAL(obj, Long);
    } else if (PyArray_IsScalar(obj, LongLong)) {
        i = PyArrayScalar_VAL(obj, LongLong);
    } else if (PyArray_IsScalar(obj, Bool)) {
        i = PyArrayScalar_VAL(obj, Bool) != 0;
    } else {
        return false;
    }
    bool is_bool = PyBool_Check(obj) || PyArray_IsScalar(obj, Bool);
    switch (p.kind) {
        case F32:
            // An int through a double rounds twice beyond 2^53: NumPy rounds once.
            if (!is_float && (i > (1LL << 53) || i < -(1LL << 53))) return false;
            out.f32 = (float)(is_float ? d : (double)i);
            return true;
        case F64: out.f64 = is_float ? d : (double)i; return true;
        case BOOL:
            if (!is_bool) return false;
            out.b = i != 0;
            return true;
        case I32:
            if (is_float || i < INT32_MIN || i > INT32_MAX) return false;
            out.i32 = (int32_t)i;
            return true;
        case I64:
            if (is_float) return false;
            out.i64 = i;
            return true;
    }
    return false;
}

class Dispatcher {
public:
    explicit Dispatcher(nb::object miss) : miss_(std::move(miss)) {}

    // `results`: (kind, dtype number, rank) per result of the entry; `as_tuple`: the call
    // returns a tuple even of one result. A spec the native path cannot take is not added.
    void add(nb::list params, size_t user_args, int ndim, uintptr_t packed, nb::list results,
             bool as_tuple, bool cell, nb::object after_call, nb::object keep) {
        Spec s;
        for (nb::handle h : params) {
            nb::tuple t = nb::borrow<nb::tuple>(h);
            Param p;
            p.kind = nb::cast<int>(t[0]);
            p.type = (PyTypeObject *)t[1].ptr();
            p.type_num = nb::cast<int>(t[2]);
            p.rank = nb::cast<int>(t[3]);
            p.written = nb::cast<bool>(t[4]);
            p.units = nb::cast<uint32_t>(t[5]);
            if (p.kind == ARRAY && p.rank > MAX_RANK) return;   // the Python path takes it
            s.params.push_back(p);
        }
        if (s.params.size() + 1 > MAX_ARGS) return;
        s.user_args = user_args;
        s.ndim = ndim;
        s.packed = reinterpret_cast<void (*)(void **)>(packed);
        if (!layout(results, s)) return;
        s.as_tuple = as_tuple || results.size() > 1;
        s.cell = cell;
        s.debug = debug_setting();
        s.after_call = std::move(after_call);
        s.keep = std::move(keep);
        // Type objects stay alive: the spec holds references through `params` below.
        for (nb::handle h : params) types_.push_back(nb::borrow(nb::borrow<nb::tuple>(h)[1]));
        specs_.push_back(std::move(s));
    }

    void clear() { specs_.clear(); }

    nb::handle miss() const { return miss_; }

    size_t size() const { return specs_.size(); }

    // The call's result, or the `miss` object where the Python path must take the call.
    nb::object call(nb::handle args, nb::handle ndrange) {
        if (specs_.empty()) return miss_;
        PyObject *tuple = args.ptr();
        if (!PyTuple_Check(tuple)) return miss_;
        Py_ssize_t n = PyTuple_GET_SIZE(tuple);
        int64_t extents[MAX_RANK];
        int ndim = 0;
        if (!ndrange.is_none()) {
            PyObject *nd = ndrange.ptr();
            if (PyLong_CheckExact(nd)) {
                ndim = 1;
                if (!extent(nd, extents[0])) return miss_;
            } else if (PyTuple_CheckExact(nd)) {
                ndim = (int)PyTuple_GET_SIZE(nd);
                if (ndim < 1 || ndim > MAX_RANK) return miss_;
                for (int d = 0; d < ndim; ++d)
                    if (!extent(PyTuple_GET_ITEM(nd, d), extents[d])) return miss_;
            } else {
                return miss_;
            }
        }
        for (const Spec &s : specs_) {
            if (s.ndim != ndim || (Py_ssize_t)s.user_args != n) continue;
            nb::object out;
            if (invoke(s, tuple, extents, out)) return out;
        }
        return miss_;
    }

private:
    // Fills s.result or s.fields and s.struct_size from `results`; false where the native
    // path does not take them.
    static bool layout(nb::list results, Spec &s) {
        s.result = NONE;
        s.struct_size = 0;
        size_t n = results.size();
        if (n == 0) return true;
        if (n > (size_t)MAX_RESULTS) return false;
        if (n == 1 && nb::cast<int>(nb::borrow<nb::tuple>(results[0])[0]) != ARRAY) {
            s.result = nb::cast<int>(nb::borrow<nb::tuple>(results[0])[0]);   // returned
            return s.result != NONE;
        }
        size_t at = 0;
        for (nb::handle h : results) {
            nb::tuple t = nb::borrow<nb::tuple>(h);
            Result r{nb::cast<int>(t[0]), nb::cast<int>(t[1]), nb::cast<int>(t[2]), 0};
            size_t size, align;
            switch (r.kind) {
                case ARRAY:
                    if (r.rank < 0 || r.rank > MAX_RANK) return false;
                    size = 24 + 16 * (size_t)r.rank;   // {ptr, ptr, i64, sizes[], strides[]}
                    align = 8;
                    break;
                case F32: case I32: size = align = 4; break;
                case F64: case I64: case PY_FLOAT: case PY_INT: size = align = 8; break;
                case BOOL: size = align = 1; break;
                default: return false;
            }
            at = (at + align - 1) & ~(align - 1);
            r.offset = at;
            at += size;
            s.fields.push_back(r);
        }
        s.struct_size = (at + 7) & ~size_t(7);
        return s.struct_size <= MAX_RESULT_BYTES;
    }

    static bool extent(PyObject *v, int64_t &out) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || x < 0) {
            PyErr_Clear();
            return false;
        }
        out = x;
        return true;
    }

    // Matches and, if the call is the spec's, runs it: true with `out` set (or a Python
    // error raised through nb::python_error), false for a miss, before anything ran.
    bool invoke(const Spec &s, PyObject *tuple, const int64_t *extents, nb::object &out) {
        size_t np = s.params.size();
        Descriptor desc[MAX_ARGS];
        Slot slots[MAX_ARGS + 1];
        void *slots_of[MAX_ARGS + 3];
        // With a results struct its pointer comes first (the C interface's first parameter).
        bool has_struct = !s.fields.empty();
        void **ptrs = has_struct ? slots_of + 1 : slots_of;
        size_t k = 0;
        for (; k < s.user_args; ++k) {
            const Param &p = s.params[k];
            PyObject *obj = PyTuple_GET_ITEM(tuple, (Py_ssize_t)k);
            if (Py_TYPE(obj) != p.type) return false;
            if (p.kind == ARRAY) {
                PyArrayObject *a = (PyArrayObject *)obj;
                // The type number does not say the byte order: a '>f8' array is NPY_DOUBLE
                // too, and read as native doubles it is garbage (the Python path refuses
                // it). Misaligned data is left to the Python path as well.
                if (PyArray_TYPE(a) != p.type_num || PyArray_NDIM(a) != p.rank ||
                    !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISNOTSWAPPED(a) ||
                    !PyArray_ISALIGNED(a) || (p.written && !PyArray_ISWRITEABLE(a)))
                    return false;
                Descriptor &d = desc[k];
                d.allocated = d.aligned = PyArray_DATA(a);
                d.offset = 0;
                const npy_intp *shape = PyArray_DIMS(a);
                int64_t stride = 1;
                for (int r = p.rank - 1; r >= 0; --r) {   // row-major, as abi.py's strides
                    // (which dimensions are 1 is part of the specialisation: core/types.py)
                    if ((shape[r] == 1) != ((p.units >> r) & 1u)) return false;
                    d.sizes_strides[r] = shape[r];
                    d.sizes_strides[p.rank + r] = stride;
                    stride *= shape[r];
                }
                ptrs[k] = &d;
            } else {
                if (!scalar(obj, p, slots[k])) return false;
                ptrs[k] = &slots[k];
            }
        }
        for (size_t d = 0; k < np; ++k, ++d) {   // a kernel's extents: i64
            slots[k].i64 = extents[d];
            ptrs[k] = &slots[k];
        }
        if (!debug_unchanged(s.debug)) return false;
        int64_t cell = 0;
        Descriptor cell_desc;
        size_t last = np;
        if (s.cell) {
            cell_desc.allocated = cell_desc.aligned = &cell;
            cell_desc.offset = 0;
            cell_desc.sizes_strides[0] = 1;
            cell_desc.sizes_strides[1] = 1;
            ptrs[last++] = &cell_desc;
        }
        Slot result;
        if (s.result != NONE) ptrs[last++] = &result;
        // Zeroed, as abi.py's ctypes struct: a failed check may leave fields unwritten.
        alignas(16) unsigned char fields[MAX_RESULT_BYTES];
        if (has_struct) {
            std::memset(fields, 0, s.struct_size);
            slots_of[0] = fields;
        }
        {
            nb::gil_scoped_release release;
            s.packed(slots_of);
        }
        if (!has_struct) {
            if (cell) s.after_call(cell);   // raises the check's error (nb::python_error)
            out = result_object(s.result, result);
            if (s.as_tuple) out = nb::make_tuple(out);
            return true;
        }
        out = struct_results(s, fields, cell);
        return true;
    }

    // The results in `fields` as Python objects, then the failed check's error if any. Every
    // returned block gets its owner first, so that whatever is raised afterwards (the check's
    // error, a failure making an array) frees them all.
    static nb::object struct_results(const Spec &s, const unsigned char *fields, int64_t cell) {
        size_t n = s.fields.size();
        Descriptor d[MAX_RESULTS];
        nb::object owners[MAX_RESULTS];   // per result: the capsule owning its block
        for (size_t i = 0; i < n; ++i) {
            const Result &r = s.fields[i];
            if (r.kind != ARRAY) continue;
            std::memcpy(&d[i], fields + r.offset, 24 + 16 * (size_t)r.rank);
            if (!d[i].allocated) continue;
            for (size_t j = 0; j < i && !owners[i].is_valid(); ++j)   // one block twice
                if (s.fields[j].kind == ARRAY && d[j].allocated == d[i].allocated)
                    owners[i] = owners[j];
            if (!owners[i].is_valid()) {
                PyObject *c = PyCapsule_New(d[i].allocated, "adjit.block", free_block);
                if (!c) throw nb::python_error();
                owners[i] = nb::steal(c);
            }
        }
        if (cell) s.after_call(cell);   // raises the check's error (nb::python_error)
        nb::object items[MAX_RESULTS];
        for (size_t i = 0; i < n; ++i) {
            const Result &r = s.fields[i];
            if (r.kind != ARRAY) {
                Slot v;
                std::memcpy(&v, fields + r.offset,
                            r.kind == BOOL ? 1 : (r.kind == F32 || r.kind == I32) ? 4 : 8);
                items[i] = result_object(r.kind, v);
                continue;
            }
            npy_intp dims[MAX_RANK];
            for (int q = 0; q < r.rank; ++q) {
                dims[q] = (npy_intp)d[i].sizes_strides[q];
                if (dims[q] < 0) throw std::bad_alloc();   // (never, but not an array)
            }
            if (!owners[i].is_valid())   // an allocation failed without a check saying so
                throw std::bad_alloc();  // (abi.py's path fails in ctypes here)
            PyArray_Descr *descr = PyArray_DescrFromType(r.type_num);
            char *data = static_cast<char *>(d[i].aligned) + d[i].offset * PyDataType_ELSIZE(descr);
            PyObject *a = PyArray_NewFromDescr(&PyArray_Type, descr, r.rank, dims, nullptr,
                                               data, NPY_ARRAY_CARRAY, nullptr);
            if (!a) throw nb::python_error();
            items[i] = nb::steal(a);
            if (PyArray_SetBaseObject((PyArrayObject *)a, owners[i].inc_ref().ptr()) < 0)
                throw nb::python_error();   // (it stole the reference even so)
        }
        if (!s.as_tuple) return items[0];
        PyObject *t = PyTuple_New((Py_ssize_t)n);
        if (!t) throw nb::python_error();
        for (size_t i = 0; i < n; ++i) PyTuple_SET_ITEM(t, (Py_ssize_t)i, items[i].release().ptr());
        return nb::steal(t);
    }

    static void free_block(PyObject *capsule) {
        _mlir_memref_to_llvm_free(PyCapsule_GetPointer(capsule, "adjit.block"));
    }

    static nb::object result_object(int kind, const Slot &r) {
        int type_num;
        const void *value = &r;
        switch (kind) {
            case NONE: return nb::none();
            case PY_FLOAT: return nb::steal(PyFloat_FromDouble(r.f64));
            case PY_INT: return nb::steal(PyLong_FromLongLong(r.i64));
            case F32: type_num = NPY_FLOAT32; break;
            case F64: type_num = NPY_FLOAT64; break;
            case I32: type_num = NPY_INT32; break;
            case I64: type_num = NPY_INT64; break;
            case BOOL: type_num = NPY_BOOL; break;
            default: return nb::none();
        }
        npy_bool b = r.b;
        if (kind == BOOL) value = &b;
        PyArray_Descr *descr = PyArray_DescrFromType(type_num);
        PyObject *obj = PyArray_Scalar(const_cast<void *>(value), descr, nullptr);
        Py_DECREF(descr);
        if (!obj) throw nb::python_error();
        return nb::steal(obj);
    }

    nb::object miss_;
    std::vector<Spec> specs_;
    std::vector<nb::object> types_;
};

// `Kernel.__call__` and `Function.__call__` (lang/functions.py) in native code: the
// call's positional arguments go to self._native when the keywords allow the native path
// (kernels: ndrange=, no workgroupsize=, device "cpu"; functions: no device=), and
// otherwise, or on a miss, to self._call_python(*args, **kwargs), the Python path. Saves
// the Python frame of a __call__ (~200 ns of a 0.4 us call).
nb::object call_method(nb::handle self, nb::args args, nb::kwargs kwargs, bool kernel) {
    static PyObject *name = PyUnicode_InternFromString("_native");
    nb::object found = nb::steal(PyObject_GetAttr(self.ptr(), name));
    if (!found.is_valid()) throw nb::python_error();
    PyObject *native = found.ptr();
    if (native != Py_None) {
        nb::handle ndrange = nb::none();
        bool plain = true;
        for (auto [key, value] : kwargs) {
            const char *k = PyUnicode_AsUTF8(key.ptr());
            if (!k) {
                PyErr_Clear();
                plain = false;
            } else if (kernel && std::strcmp(k, "ndrange") == 0) {
                ndrange = value;
            } else if (kernel && std::strcmp(k, "device") == 0) {
                const char *d = PyUnicode_Check(value.ptr()) ? PyUnicode_AsUTF8(value.ptr()) : nullptr;
                plain = plain && d && std::strcmp(d, "cpu") == 0;
            } else if (kernel && std::strcmp(k, "workgroupsize") == 0) {
                plain = plain && value.is_none();
            } else if (!kernel && std::strcmp(k, "device") == 0) {
                plain = plain && value.is_none();
            } else {
                plain = false;
            }
        }
        if (plain && (!kernel || !ndrange.is_none())) {
            Dispatcher &d = nb::cast<Dispatcher &>(nb::handle(native));
            nb::object out = d.call(args, ndrange);
            if (!out.is(d.miss())) return out;
        }
    }
    return self.attr("_call_python")(*args, **kwargs);
}

}  // namespace

NB_MODULE(_native, m) {
    if (_import_array() < 0) throw nb::python_error();
    // Dispatchers live as long as the decorated functions, module globals that the
    // interpreter does not always free at exit: not leaks worth a warning.
    nb::set_leak_warnings(false);
    m.doc() = "Calls of compiled CPU code without ctypes (runtime/native/dispatch.cpp).";
    nb::class_<Dispatcher>(m, "Dispatcher")
        .def(nb::init<nb::object>())
        .def("add", &Dispatcher::add)
        .def("clear", &Dispatcher::clear)
        .def("__len__", &Dispatcher::size)
        .def("__call__", &Dispatcher::call, nb::arg("args"), nb::arg("ndrange").none());
    // frontend/functions.debug_enabled: ADJIT_DEBUG set to other than "" or "0", read from
    // the C environment, which os.environ's changes write through (putenv), at each call.
    m.def("debug_enabled", []() {
        const char *v = std::getenv("ADJIT_DEBUG");
        return v && *v && std::strcmp(v, "0") != 0;
    });
    // runtime/native_dispatch.interpret_enabled's first look: ADJIT_INTERPRET set to other
    // than "" or "0", read as debug_enabled reads ADJIT_DEBUG (~0.05 us; os.environ.get
    // ~0.6 us a call); the Python path then reads and checks the value.
    m.def("interpret_enabled", []() {
        const char *v = std::getenv("ADJIT_INTERPRET");
        return v && *v && std::strcmp(v, "0") != 0;
    });
    m.def("kernel_call", [](nb::handle self, nb::args args, nb::kwargs kwargs) {
        return call_method(self, args, kwargs, true);
    }, nb::is_method());
    m.def("function_call", [](nb::handle self, nb::args args, nb::kwargs kwargs) {
        return call_method(self, args, kwargs, false);
    }, nb::is_method());
    m.attr("ARRAY") = (int)ARRAY;
    m.attr("F32") = (int)F32;
    m.attr("F64") = (int)F64;
    m.attr("I32") = (int)I32;
    m.attr("I64") = (int)I64;
    m.attr("BOOL") = (int)BOOL;
    m.attr("NONE") = (int)NONE;
    m.attr("PY_FLOAT") = (int)PY_FLOAT;
    m.attr("PY_INT") = (int)PY_INT;
    // `add` takes (kind, dtype number, rank) per result, arrays included (native_dispatch.py
    // checks for this name: an extension built before takes scalar results only).
    m.attr("ARRAY_RESULTS") = true;
}
