// adj_gemm_f32 / adj_gemm_f64: the matrix products of compiled code (compiler/matmul.py),
// C (+)= op(A) @ op(B) over a batch, through a BLAS sgemm/dgemm when one was registered
// (adj_gemm_register: runtime/extension.py finds the OpenBLAS that NumPy's wheel bundles and
// passes its cblas_?gemm), else through the blocked loop nest below.
//
// Why a BLAS: a product is the one kernel where a tuned library is far ahead of a loop
// nest (packing into cache-sized panels, register-blocked micro-kernels per CPU, threads);
// NumPy's OpenBLAS is already in the process whenever adjit is, so calling it costs no
// dependency, and it is what NumPy's own `@` uses: the same speed, the same rounding.
//
// Called with three 3-D memrefs as MLIR's default calling convention passes them (each
// expanded into allocated pointer, aligned pointer, offset, 3 sizes, 3 strides) and `flags`:
//   TRANS_A: op(A) is A[b]'s transpose; TRANS_B: likewise for B;
//   ACCUMULATE: C += product (else C = product).
// The batch is C's first dimension, or A's/B's where C's is 1: an operand whose batch is 1
// is broadcast over it (NumPy's matmul), and a C whose batch is 1 sums the products of the
// batch (the adjoint of a broadcast operand). The caller (matmul.py) has checked that the
// inner dimensions agree. Any strides: a matrix whose rows or columns are contiguous goes to
// the BLAS as it is (its transpose, for column-major data), any other is copied first.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#define ADJ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum Flags : int64_t { TRANS_A = 1, TRANS_B = 2, ACCUMULATE = 4 };

// CBLAS's enums (cblas.h): the same values in every CBLAS.
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

// cblas_?gemm with 32-bit (LP64) or 64-bit (ILP64, NumPy's scipy_openblas64_) integers.
template <class T, class I>
using Gemm = void (*)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I);

struct Blas {
    void *sgemm = nullptr;
    void *dgemm = nullptr;
    bool ilp64 = true;
    bool enabled = true;
    // openblas_set_num_threads_local: the threads of BLAS calls made from this thread.
    int (*set_local_threads)(int) = nullptr;
    int64_t threads = 1;       // adjit's (core/threads.py), over which products are split
};
Blas blas;

// parallel.cpp's pool, the one compiled code's parallel loops run on.
extern "C" void adj_parallel_for(void (*body)(void *, int64_t, int64_t), void *ctx, int64_t n,
                                 int64_t threads, int64_t size);
// Work (multiply-adds) below which a product runs on the caller alone, and per block above:
// about 20 us of a core's sgemm, more than a hand-off to the pool costs.
constexpr int64_t SERIAL_WORK = int64_t(1) << 20;
constexpr int64_t MIN_ROWS = 16;

template <class T> void *blas_fn() {
    return sizeof(T) == 4 ? blas.sgemm : blas.dgemm;
}

// One matrix of a batch: rows x cols with strides (in elements).
template <class T> struct Mat {
    T *p;
    int64_t rows, cols, rs, cs;

    Mat transposed() const { return {p, cols, rows, cs, rs}; }
    T &at(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
};

// A 3-D memref as MLIR passes it.
template <class T> struct Memref3 {
    T *aligned;
    int64_t offset, size[3], stride[3];

    Mat<T> matrix(int64_t b) const {
        return {aligned + offset + (size[0] == 1 ? 0 : b * stride[0]), size[1], size[2],
                stride[1], stride[2]};
    }
};

// Whether `m` is row-major for a BLAS: unit column stride and a leading dimension at least
// its width (strides of a dimension of size 1 mean nothing, so they are ignored).
template <class T> bool row_major(const Mat<T> &m, int64_t &ld) {
    if (m.cols > 1 && m.cs != 1) return false;
    ld = m.rows > 1 ? m.rs : std::max<int64_t>(1, m.cols);
    return ld >= std::max<int64_t>(1, m.cols);
}

// The BLAS's view of an operand: pointer, leading dimension and whether to transpose it;
// a contiguous copy in `scratch` when neither its rows nor its columns are contiguous.
template <class T> const T *operand(Mat<T> m, bool trans, std::vector<T> &scratch,
                                    int64_t &ld, bool &t) {
    if (row_major(m, ld)) {
        t = trans;
        return m.p;
    }
    if (row_major(m.transposed(), ld)) {      // column-major: the BLAS reads its transpose
        t = !trans;
        return m.p;
    }
    scratch.resize(size_t(m.rows * m.cols));
    for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t j = 0; j < m.cols; ++j) scratch[size_t(i * m.cols + j)] = m.at(i, j);
    ld = std::max<int64_t>(1, m.cols);
    t = trans;
    return scratch.data();
}

template <class T, class I>
void call_blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
               const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {
    auto f = reinterpret_cast<Gemm<T, I>>(blas_fn<T>());
    f(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, I(m), I(n), I(k), T(1), a,
      I(lda), b, I(ldb), beta, c, I(ldc));
}

// C (+)= A @ B without a BLAS, in the order (i, k, j) so that the inner loop runs along
// rows of B and C (vectorised where their columns are contiguous), in blocks of K and N
// that keep a panel of B in cache while the rows of A pass over it.
template <class T> void loops(Mat<T> a, Mat<T> b, Mat<T> c, bool accumulate) {
    if (!accumulate)
        for (int64_t i = 0; i < c.rows; ++i)
            for (int64_t j = 0; j < c.cols; ++j) c.at(i, j) = T(0);
    constexpr int64_t KB = 128, NB = 512;
    const bool unit = b.cs == 1 && c.cs == 1;
    for (int64_t j0 = 0; j0 < c.cols; j0 += NB) {
        int64_t j1 = std::min(c.cols, j0 + NB);
        for (int64_t k0 = 0; k0 < a.cols; k0 += KB) {
            int64_t k1 = std::min(a.cols, k0 + KB);
            for (int64_t i = 0; i < c.rows; ++i) {
                T *ci = &c.at(i, 0);
                for (int64_t kk = k0; kk < k1; ++kk) {
                    T aik = a.at(i, kk);
                    const T *bk = &b.at(kk, 0);
                    if (unit) {
                        for (int64_t j = j0; j < j1; ++j) ci[j] += aik * bk[j];
                    } else {
                        for (int64_t j = j0; j < j1; ++j) ci[j * c.cs] += aik * bk[j * b.cs];
                    }
                }
            }
        }
    }
}

template <class T> void product(Mat<T> a, Mat<T> b, Mat<T> c, bool ta, bool tb,
                                bool accumulate) {
    Mat<T> oa = ta ? a.transposed() : a, ob = tb ? b.transposed() : b;
    int64_t m = c.rows, n = c.cols, k = oa.cols;
    if (m == 0 || n == 0) return;
    if (k == 0 || blas_fn<T>() == nullptr || !blas.enabled) {
        loops(oa, ob, c, accumulate);
        return;
    }
    // C = op(A) op(B) with a column-major C is C^T = op(B)^T op(A)^T, row-major.
    int64_t ldc;
    std::vector<T> sa, sb, sc;
    bool c_rows = row_major(c, ldc);
    if (!c_rows && row_major(c.transposed(), ldc)) {
        std::swap(a, b);
        std::swap(ta, tb);
        ta = !ta;
        tb = !tb;
        c = c.transposed();
        std::swap(m, n);
        c_rows = true;
    }
    int64_t lda, ldb;
    bool fa, fb;
    const T *pa = operand(a, ta, sa, lda, fa);
    const T *pb = operand(b, tb, sb, ldb, fb);
    T *pc = c.p;
    if (!c_rows) {      // neither layout: a contiguous result, then added or copied in
        sc.assign(size_t(m * n), T(0));
        pc = sc.data();
        ldc = std::max<int64_t>(1, n);
    }
    T beta = accumulate && c_rows ? T(1) : T(0);
    if (blas.ilp64)
        call_blas<T, int64_t>(fa, fb, m, n, k, pa, lda, pb, ldb, beta, pc, ldc);
    else
        call_blas<T, int32_t>(fa, fb, m, n, k, pa, lda, pb, ldb, beta, pc, ldc);
    if (!c_rows)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
                c.at(i, j) = (accumulate ? c.at(i, j) : T(0)) + sc[size_t(i * n + j)];
}

// Rows [lo, hi) of op(A) and C: a product of its own.
template <class T> struct Rows {
    Mat<T> a, b, c;       // op(A) (its rows split), B, C
    bool tb, accumulate;

    static void run(void *ctx, int64_t lo, int64_t hi) {
        auto *r = static_cast<Rows *>(ctx);
        // The BLAS's own threads would compete with the pool's for the cores (both spin
        // while they wait): each block is one thread's product.
        if (blas.set_local_threads) blas.set_local_threads(1);
        Mat<T> a{r->a.p + lo * r->a.rs, hi - lo, r->a.cols, r->a.rs, r->a.cs};
        Mat<T> c{r->c.p + lo * r->c.rs, hi - lo, r->c.cols, r->c.rs, r->c.cs};
        product(a, r->b, c, false, r->tb, r->accumulate);
    }
};

// C (+)= op(A) op(B), its rows split over adjit's pool where the work is large enough.
template <class T> void split_product(Mat<T> a, Mat<T> b, Mat<T> c, bool ta, bool tb,
                                      bool accumulate) {
    Rows<T> rows{ta ? a.transposed() : a, b, c, tb, accumulate};
    int64_t work = c.rows * c.cols * rows.a.cols;
    int64_t parts = std::min({blas.threads, c.rows / MIN_ROWS, work / SERIAL_WORK});
    bool blas_on = blas.enabled && blas_fn<T>() != nullptr;
    if (parts <= 1 || !blas_on || blas.set_local_threads == nullptr) {
        // one product (the BLAS's own threads, if it cannot be told to use one)
        if (blas_on && blas.set_local_threads) blas.set_local_threads(1);
        product(a, b, c, ta, tb, accumulate);
        return;
    }
    // COARSE (parallel.cpp): one chunk per thread, each a product of its own (more, smaller
    // products would pack B again each).
    adj_parallel_for(&Rows<T>::run, &rows, c.rows, parts, 4);
}

template <class T> void gemm(int64_t flags, const Memref3<T> &a, const Memref3<T> &b,
                             const Memref3<T> &c) {
    bool ta = flags & TRANS_A, tb = flags & TRANS_B, acc = flags & ACCUMULATE;
    int64_t batch = std::max({a.size[0], b.size[0], c.size[0]});
    for (int64_t k = 0; k < batch; ++k) {
        // A C of batch 1 sums the batch: the first product sets it (unless accumulating),
        // the others add.
        bool add = acc || (c.size[0] == 1 && k > 0);
        split_product(a.matrix(k), b.matrix(k), c.matrix(k), ta, tb, add);
    }
}

}  // namespace

#define MEMREF3(T, name)                                                                  \
    T *name##_allocated, T *name##_aligned, int64_t name##_offset, int64_t name##_s0,      \
        int64_t name##_s1, int64_t name##_s2, int64_t name##_t0, int64_t name##_t1,        \
        int64_t name##_t2
#define VIEW3(T, name)                                                                     \
    Memref3<T> {                                                                           \
        name##_aligned, name##_offset, {name##_s0, name##_s1, name##_s2},                  \
            {name##_t0, name##_t1, name##_t2}                                              \
    }

ADJ_EXPORT void adj_gemm_f32(int64_t flags, MEMREF3(float, a), MEMREF3(float, b),
                             MEMREF3(float, c)) {
    (void)a_allocated, (void)b_allocated, (void)c_allocated;
    gemm<float>(flags, VIEW3(float, a), VIEW3(float, b), VIEW3(float, c));
}

ADJ_EXPORT void adj_gemm_f64(int64_t flags, MEMREF3(double, a), MEMREF3(double, b),
                             MEMREF3(double, c)) {
    (void)a_allocated, (void)b_allocated, (void)c_allocated;
    gemm<double>(flags, VIEW3(double, a), VIEW3(double, b), VIEW3(double, c));
}

// The BLAS to call: cblas_sgemm and cblas_dgemm's addresses (0: none), with 64-bit integers
// if `ilp64`; openblas_set_num_threads_local's (0: none); adjit's thread count. Called once
// when the extension loads (runtime/extension.py).
ADJ_EXPORT void adj_gemm_register(int64_t sgemm, int64_t dgemm, int64_t ilp64,
                                  int64_t set_local_threads, int64_t threads) {
    blas.sgemm = reinterpret_cast<void *>(sgemm);
    blas.dgemm = reinterpret_cast<void *>(dgemm);
    blas.ilp64 = ilp64 != 0;
    blas.set_local_threads = reinterpret_cast<int (*)(int)>(set_local_threads);
    blas.threads = std::max<int64_t>(1, threads);
}

// Whether products go to the registered BLAS (1) or the loop nest (0), which tests switch to
// check the loop nest against NumPy too; returns the previous setting.
ADJ_EXPORT int64_t adj_gemm_use_blas(int64_t on) {
    int64_t was = blas.enabled;
    blas.enabled = on != 0;
    return was;
}
