// MPI communication for compiled code (adjit/mpi/): halo exchanges, allreduce, broadcast,
// send/recv, and the adjoints of each, called by name from the code that adjit compiles.
//
// No MPI header or library at build time: adjit builds without MPI. When adjit.mpi starts,
// it hands this file the addresses of the MPI functions of the library that mpi4py loaded
// (adj_mpi_bind) and the handles of the datatypes and operations it uses, so the only
// assumption is the MPICH ABI of handles (MPI_Comm, MPI_Datatype, MPI_Op and MPI_Request
// are C ints; MPICH, Intel MPI, Cray MPICH and MVAPICH share it). adjit.mpi checks it.
//
// Errors never hang the ranks: every operation is non-blocking underneath and is waited
// for by polling, which also polls a failure channel (a private duplicate of
// MPI_COMM_WORLD). A rank that finds an error (a message of the wrong size, an MPI error,
// a timeout, or an exception in its Python code: adj_mpi_fail) sends a notice to every
// rank, and from then on each operation on every rank that sees it returns at once with
// the failure recorded (adj_mpi_status, adj_mpi_error); the code adjit compiles checks the
// status after each operation and raises when the call returns.
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define ADJ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Handle = int;   // MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request in the MPICH ABI
struct Status { int words[8]; };   // MPICH's MPI_Status is 5 ints; room to spare

// The MPI functions, in the order adjit/mpi/_native.py passes them.
struct Api {
    int (*Isend)(const void*, int, Handle, int, int, Handle, Handle*);
    int (*Irecv)(void*, int, Handle, int, int, Handle, Handle*);
    int (*Test)(Handle*, int*, Status*);
    int (*Iallreduce)(const void*, void*, int, Handle, Handle, Handle, Handle*);
    int (*Ireduce)(const void*, void*, int, Handle, Handle, int, Handle, Handle*);
    int (*Ibcast)(void*, int, Handle, int, Handle, Handle*);
    int (*Iprobe)(int, int, Handle, int*, Status*);
    int (*Recv)(void*, int, Handle, int, int, Handle, Status*);
    int (*Get_count)(const Status*, Handle, int*);
    int (*Comm_rank)(Handle, int*);
    int (*Comm_size)(Handle, int*);
    int (*Topo_test)(Handle, int*);
    int (*Cartdim_get)(Handle, int*);
    int (*Cart_get)(Handle, int, int*, int*, int*);
    int (*Cart_shift)(Handle, int, int, int*, int*);
    int (*Cancel)(Handle*);
    int (*Request_free)(Handle*);
    int (*Abort)(Handle, int);
    int (*Error_string)(int, char*, int*);
};
constexpr int API_SIZE = sizeof(Api) / sizeof(void*);

// Handles and constants, in the order adjit/mpi/_native.py passes them.
enum Constant {
    C_DOUBLE, C_FLOAT, C_INT64, C_INT32, C_DOUBLE_INT, C_CHAR, C_SUM, C_MAX, C_MIN,
    C_MAXLOC, C_MINLOC, C_PROC_NULL, C_ANY_SOURCE, C_CART, C_REQUEST_NULL, C_FAIL_COMM,
    C_COUNT
};

// What compiled code asks for (adjit/mpi/_ops.py spells the same numbers).
// CHANNEL does nothing: it is how compiled code shows the autodiff pass that a send's data
// reaches a recv (adjit/mpi/_ops.py).
enum ArrayOp : int64_t { HALO = 0, ALLREDUCE_SUM = 1, BCAST = 2, SEND = 3, RECV = 4, CHANNEL = 5 };
enum ScalarOp : int64_t { S_SUM = 0, S_MAX = 1, S_MIN = 2, S_BCAST = 3 };
enum Kind : int64_t { K_F64 = 0, K_F32 = 1, K_I64 = 2, K_I32 = 3 };

constexpr int TAG_FAIL = 1;          // on the failure channel
constexpr int TAG_HALO = 30000;      // + 2 * axis + direction, on the user's communicator
constexpr int TAG_ADJOINT = 16384;   // added to a send/recv tag by their adjoints
constexpr int NOTICE = 512;          // bytes of a failure notice

Api api;
int64_t consts[C_COUNT];
bool bound = false;
std::mutex lock;                 // one operation at a time (compiled code and Python)
bool failed = false;
std::string error_text;
// A rank that died (sys.exit, a crash) or never reaches an operation would leave the others
// waiting forever: each wait ends after this many seconds (ADJIT_MPI_TIMEOUT, read by
// adjit/mpi/_native.py, which holds the default; 0: wait forever).
double timeout_s = 0;
std::vector<Handle> comms;       // the communicators adjit.mpi.Comm made (adj_mpi_add_comm)
bool check_agreement = true;     // `agree` before each collective (ADJIT_MPI_CHECK=0: off)
int64_t held_last = 0;           // whether this rank held the extreme of the last max/min
char outgoing[NOTICE];           // the notice this rank sent (alive until exit)
std::vector<Handle> leaked;      // requests of notices, never waited for

Handle h(Constant c) { return Handle(consts[c]); }

int world_rank() {
    int r = -1;
    if (bound) api.Comm_rank(h(C_FAIL_COMM), &r);
    return r;
}

// Records a failure found here and tells every other rank (once).
void fail_here(const std::string& why) {
    if (failed) return;
    failed = true;
    int me = world_rank(), n = 0;
    error_text = "rank " + std::to_string(me) + ": " + why;
    std::snprintf(outgoing, NOTICE, "%s", error_text.c_str());
    std::fprintf(stderr, "adjit.mpi: %s\n", error_text.c_str());
    std::fflush(stderr);
    api.Comm_size(h(C_FAIL_COMM), &n);
    for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        Handle req = h(C_REQUEST_NULL);
        if (api.Isend(outgoing, NOTICE, h(C_CHAR), r, TAG_FAIL, h(C_FAIL_COMM), &req) == 0)
            leaked.push_back(req);
    }
}

// Whether another rank has sent a failure notice (then recorded here).
bool notice_arrived() {
    if (failed) return true;
    int flag = 0;
    Status st{};
    if (api.Iprobe(h(C_ANY_SOURCE), TAG_FAIL, h(C_FAIL_COMM), &flag, &st) != 0 || !flag)
        return false;
    char text[NOTICE] = {0};
    api.Recv(text, NOTICE, h(C_CHAR), st.words[2], TAG_FAIL, h(C_FAIL_COMM), &st);
    text[NOTICE - 1] = 0;
    failed = true;
    error_text = std::string("another rank failed: ") + text;
    return true;
}

std::string mpi_error(int code) {
    char text[1024] = {0};
    int len = 0;
    api.Error_string(code, text, &len);
    return std::string(text, std::max(0, std::min(len, 1023)));
}

struct Pending {
    Handle req;
    int64_t expect;     // elements a receive must get (-1: a send)
    Handle type;
    int peer;
    const char* what;
};

// Waits for `reqs` by polling them and the failure channel. 0 when all completed as
// expected; 1 after a failure (this rank's or another's), with the others cancelled.
int wait_all(std::vector<Pending>& reqs, const char* op) {
    auto start = std::chrono::steady_clock::now();
    size_t left = reqs.size();
    if (!left) return 0;
    std::vector<bool> done(reqs.size(), false);
    for (int64_t spins = 0; left; ++spins) {
        for (size_t k = 0; k < reqs.size(); ++k) {
            if (done[k]) continue;
            int flag = 0;
            Status st{};
            int rc = api.Test(&reqs[k].req, &flag, &st);
            if (rc != 0) {
                fail_here(std::string(op) + ": " + reqs[k].what + " rank " +
                          std::to_string(reqs[k].peer) + " failed: " + mpi_error(rc) +
                          " (do the ranks' arrays differ in shape?)");
                break;
            }
            if (!flag) continue;
            done[k] = true;
            --left;
            if (reqs[k].expect >= 0) {
                int got = -1;
                api.Get_count(&st, reqs[k].type, &got);
                if (got != reqs[k].expect) {
                    fail_here(std::string(op) + ": received " + std::to_string(got) +
                              " elements from rank " + std::to_string(reqs[k].peer) +
                              " where this rank's array needs " +
                              std::to_string(reqs[k].expect) +
                              " (the ranks' arrays differ in shape)");
                    break;
                }
            }
        }
        if (!left && !failed) return 0;
        if (failed || notice_arrived()) break;
        if (timeout_s > 0 && spins % 1024 == 0) {
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                     start).count();
            if (s > timeout_s) {
                char secs[32];
                std::snprintf(secs, sizeof secs, "%.0f", s);
                fail_here(std::string(op) + ": no message after " + secs +
                          " s (ADJIT_MPI_TIMEOUT, 300 s by default): a rank is not taking "
                          "part in this operation (it ended, crashed or is stuck, or the "
                          "ranks' control flow differs)");
                break;
            }
        }
        // Ranks may outnumber cores: let the others run.
        if (spins > 64) sched_yield();
    }
    for (size_t k = 0; k < reqs.size(); ++k) {
        if (done[k] || reqs[k].req == h(C_REQUEST_NULL)) continue;
        api.Cancel(&reqs[k].req);
        api.Request_free(&reqs[k].req);
    }
    return 1;
}

Handle type_of(int64_t kind) {
    switch (kind) {
        case K_F64: return h(C_DOUBLE);
        case K_F32: return h(C_FLOAT);
        case K_I64: return h(C_INT64);
        default: return h(C_INT32);
    }
}

size_t size_of(int64_t kind) { return kind == K_F64 || kind == K_I64 ? 8 : 4; }

// dst[i] += src[i] for n elements of `kind`.
void add_into(char* dst, const char* src, int64_t n, int64_t kind) {
    switch (kind) {
        case K_F64: { auto d = (double*)dst; auto s = (const double*)src;
                      for (int64_t i = 0; i < n; ++i) d[i] += s[i]; break; }
        case K_F32: { auto d = (float*)dst; auto s = (const float*)src;
                      for (int64_t i = 0; i < n; ++i) d[i] += s[i]; break; }
        case K_I64: { auto d = (int64_t*)dst; auto s = (const int64_t*)src;
                      for (int64_t i = 0; i < n; ++i) d[i] += s[i]; break; }
        default:    { auto d = (int32_t*)dst; auto s = (const int32_t*)src;
                      for (int64_t i = 0; i < n; ++i) d[i] += s[i]; break; }
    }
}

bool ready(const char* op) {
    if (!bound) {
        failed = true;
        error_text = std::string(op) + ": adjit.mpi is not started (create an adjit.mpi.Comm "
                     "first)";
    }
    return !failed;
}

bool fits_int(int64_t n, const char* op) {
    if (n < (int64_t(1) << 31)) return true;
    fail_here(std::string(op) + ": a message of " + std::to_string(n) +
              " elements (at most 2^31 - 1)");
    return false;
}

// The slab of an N-D C-order array whose index along `axis` is in [lo, hi): `outer` blocks
// of `block` elements, `stride` apart.
struct Slab { int64_t outer, block, stride, first; };

Slab slab(const int64_t* sizes, int ndim, int axis, int64_t lo, int64_t hi) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= sizes[d];
    for (int d = axis + 1; d < ndim; ++d) inner *= sizes[d];
    return {outer, (hi - lo) * inner, sizes[axis] * inner, lo * inner};
}

void pack(std::vector<char>& buf, const char* a, const Slab& s, size_t es) {
    buf.resize(size_t(s.outer * s.block) * es);
    for (int64_t o = 0; o < s.outer; ++o)
        std::memcpy(buf.data() + o * s.block * es, a + (o * s.stride + s.first) * es,
                    s.block * es);
}

void unpack(char* a, const std::vector<char>& buf, const Slab& s, size_t es, int64_t kind,
            bool add) {
    for (int64_t o = 0; o < s.outer; ++o) {
        char* dst = a + (o * s.stride + s.first) * es;
        const char* src = buf.data() + o * s.block * es;
        if (add) add_into(dst, src, s.block, kind);
        else std::memcpy(dst, src, s.block * es);
    }
}

void zero(char* a, const Slab& s, size_t es) {
    for (int64_t o = 0; o < s.outer; ++o)
        std::memset(a + (o * s.stride + s.first) * es, 0, s.block * es);
}

// The neighbours along each decomposed axis: a Cartesian communicator's (its dimensions
// are the array's first axes), else the ranks in a line along axis 0 (not periodic).
int neighbours(Handle comm, int ndim, int lows[], int highs[], const char* op) {
    int topo = -1, axes = 1;
    api.Topo_test(comm, &topo);
    if (topo == int(consts[C_CART])) {
        api.Cartdim_get(comm, &axes);
        if (axes > ndim) {
            fail_here(std::string(op) + ": the communicator's process grid has " +
                      std::to_string(axes) + " dimensions, the array " +
                      std::to_string(ndim));
            return -1;
        }
        for (int d = 0; d < axes; ++d) api.Cart_shift(comm, d, 1, &lows[d], &highs[d]);
    } else {
        int me = 0, n = 1;
        api.Comm_rank(comm, &me);
        api.Comm_size(comm, &n);
        lows[0] = me > 0 ? me - 1 : int(consts[C_PROC_NULL]);
        highs[0] = me + 1 < n ? me + 1 : int(consts[C_PROC_NULL]);
    }
    return axes;
}

// Halo exchange of ghost width w along the decomposed axes, one axis after another (each
// exchange carries the ghosts of the axes before it, so corners arrive too). adjoint:
// the transpose, axes in reverse order: the ghosts' adjoints go back to the ranks that own
// those cells, who add them into their boundary cells; the ghosts' adjoints become zero.
int halo(char* a, const int64_t* sizes, int ndim, Handle comm, int64_t kind, int64_t w,
         bool adjoint) {
    const char* op = adjoint ? "adjoint of halo_exchange" : "halo_exchange";
    int lows[8], highs[8];
    int axes = neighbours(comm, ndim, lows, highs, op);
    if (axes < 0) return 1;
    for (int d = 0; d < axes; ++d)
        if (w < 1 || sizes[d] < 3 * w) {
            fail_here(std::string(op) + ": axis " + std::to_string(d) + " has " +
                      std::to_string(sizes[d]) + " cells with ghost width " +
                      std::to_string(w) + " (it needs w >= 1 and at least 3 w cells: " +
                      "w ghosts on each side and w owned)");
            return 1;
        }
    size_t es = size_of(kind);
    Handle type = type_of(kind);
    int null = int(consts[C_PROC_NULL]);
    static thread_local std::vector<char> out[2], in[2];
    for (int step = 0; step < axes; ++step) {
        int d = adjoint ? axes - 1 - step : step;
        int64_t n = sizes[d];
        // side 0: low, side 1: high. Ghost and owned boundary layers of each side.
        Slab ghost[2] = {slab(sizes, ndim, d, 0, w), slab(sizes, ndim, d, n - w, n)};
        Slab owned[2] = {slab(sizes, ndim, d, w, 2 * w), slab(sizes, ndim, d, n - 2 * w, n - w)};
        int peer[2] = {lows[d], highs[d]};
        int64_t count = ghost[0].outer * ghost[0].block;
        if (!fits_int(count, op)) return 1;
        // A message that leaves through side s arrives through the peer's other side: its
        // tag names the side it arrives at, so a rank that is its own neighbour (periodic,
        // one rank along d) matches them up. Receives first, then sends.
        std::vector<Pending> reqs;
        for (int s = 0; s < 2; ++s) {
            if (peer[s] == null) continue;
            in[s].resize(size_t(count) * es);
            Pending r{h(C_REQUEST_NULL), count, type, peer[s], "receiving from"};
            int tag = TAG_HALO + 2 * d + s;  // arrives at my side s
            int rc = api.Irecv(in[s].data(), int(count), type, peer[s], tag, comm, &r.req);
            if (rc != 0) { fail_here(std::string(op) + ": " + mpi_error(rc)); return 1; }
            reqs.push_back(r);
        }
        for (int s = 0; s < 2; ++s) {
            if (peer[s] == null) continue;
            // Primal: my owned boundary on side s fills the peer's ghosts on its side 1-s.
            // Adjoint: my ghosts' adjoints on side s go to the peer's owned side 1-s.
            if (adjoint) {
                pack(out[s], a, ghost[s], es);
                zero(a, ghost[s], es);
            } else {
                pack(out[s], a, owned[s], es);
            }
            Pending r{h(C_REQUEST_NULL), -1, type, peer[s], "sending to"};
            int tag = TAG_HALO + 2 * d + (1 - s);
            int rc = api.Isend(out[s].data(), int(count), type, peer[s], tag, comm, &r.req);
            if (rc != 0) { fail_here(std::string(op) + ": " + mpi_error(rc)); return 1; }
            reqs.push_back(r);
        }
        if (wait_all(reqs, op)) return 1;
        for (int s = 0; s < 2; ++s) {
            if (peer[s] == null) continue;
            if (adjoint) unpack(a, in[s], owned[s], es, kind, true);
            else unpack(a, in[s], ghost[s], es, kind, false);
        }
    }
    return 0;
}

// Whether `comm` is a communicator adjit.mpi.Comm made (anything else, an int that is no
// handle, would reach MPI as garbage: a no-op on some ranks, an abort on others).
bool known_comm(Handle comm, const char* op) {
    for (Handle c : comms)
        if (c == comm) return true;
    fail_here(std::string(op) + ": its communicator argument (" + std::to_string(comm) +
              ") is not an adjit.mpi.Comm: pass adjit.mpi.Comm() or comm.cart(...)");
    return false;
}

const char* kind_name(int64_t kind) {
    switch (kind) {
        case K_F64: return "f64";
        case K_F32: return "f32";
        case K_I64: return "i64";
        case K_I32: return "i32";
        default: return "a scalar";
    }
}

// What a rank's operation is, as every rank must agree on it before any data moves (the
// data messages of ranks that disagree would be truncated, misread as another type, or
// abort inside MPI): the operation, the dtype, the rank of the array, `x` (a halo's ghost
// width, a broadcast's root) and the sizes of the axes that must match (all of them for a
// reduction or broadcast; for a halo exchange those it does not decompose: the blocks of
// an uneven split differ along the decomposed ones, whose messages are checked by size).
constexpr int SIG = 8;
enum SigField { F_OP, F_KIND, F_NDIM, F_X, F_SIZES };
constexpr int OP_SCALAR = 100;      // + ScalarOp: scalar collectives in the same numbering
const char* op_name(int64_t code) {
    static const char* arrays[] = {"halo_exchange", "the adjoint of halo_exchange",
                                   "allreduce_array", "the adjoint of allreduce_array",
                                   "bcast_array", "the adjoint of bcast_array"};
    static const char* scalars[] = {"allreduce(op='sum')", "allreduce(op='max')",
                                    "allreduce(op='min')", "bcast"};
    if (code >= 0 && code < 6) return arrays[code];
    if (code >= OP_SCALAR && code < OP_SCALAR + 4) return scalars[code - OP_SCALAR];
    return "another operation";
}

// 0 when every rank of `comm` passed the same signature; 1 after recording (on every rank:
// each sees the same result) what differs. One small allreduce (the maximum of the
// signature and of its negation gives each field's range over the ranks).
int agree(const int64_t sig[SIG], Handle comm, const char* op) {
    static thread_local int64_t in[2 * SIG], out[2 * SIG];
    for (int j = 0; j < SIG; ++j) {
        in[j] = sig[j];
        in[SIG + j] = -sig[j];
    }
    std::vector<Pending> reqs;
    Pending r{h(C_REQUEST_NULL), -1, h(C_INT64), -1, "checking the arguments with"};
    int rc = api.Iallreduce(in, out, 2 * SIG, h(C_INT64), h(C_MAX), comm, &r.req);
    if (rc != 0) { fail_here(std::string(op) + ": " + mpi_error(rc)); return 1; }
    reqs.push_back(r);
    if (wait_all(reqs, op)) return 1;
    for (int j = 0; j < SIG; ++j) {
        int64_t hi = out[j], lo = -out[SIG + j];
        if (hi == lo) continue;
        std::string what;
        if (j == F_OP) {
            what = std::string("the ranks call different operations here: ") + op_name(lo) +
                   " on some, " + op_name(hi) + " on others (different control flow?)";
        } else if (j == F_KIND) {
            what = std::string("the ranks' arrays differ in dtype: ") + kind_name(lo) +
                   " on some, " + kind_name(hi) + " on others";
        } else if (j == F_NDIM) {
            what = "the ranks' arrays differ in rank: from " + std::to_string(lo) + " to " +
                   std::to_string(hi) + " dimensions";
        } else if (j == F_X) {
            what = std::string(sig[F_OP] == HALO * 2 || sig[F_OP] == HALO * 2 + 1
                                   ? "the ranks' ghost widths differ"
                                   : "the ranks name different roots") +
                   ": from " + std::to_string(lo) + " to " + std::to_string(hi);
        } else {
            what = "the ranks' arrays differ in shape: axis " + std::to_string(j - F_SIZES) +
                   " has from " + std::to_string(lo) + " to " + std::to_string(hi) +
                   " elements";
        }
        fail_here(std::string(op) + ": " + what);
        return 1;
    }
    return 0;
}

// The number of axes a halo exchange on `comm` decomposes (its process grid's, else 1).
int grid_axes(Handle comm) {
    int topo = -1, axes = 1;
    api.Topo_test(comm, &topo);
    if (topo == int(consts[C_CART])) api.Cartdim_get(comm, &axes);
    return axes;
}

int array_op(char* a, const int64_t* sizes, int ndim, int64_t opcode, Handle comm,
             int64_t kind, int64_t x, int64_t y, int64_t adjoint) {
    static const char* names[] = {"halo_exchange", "allreduce_array", "bcast_array", "send",
                                  "recv"};
    if (opcode == CHANNEL) return 0;
    const char* op = opcode >= 0 && opcode <= RECV ? names[opcode] : "?";
    std::lock_guard<std::mutex> guard(lock);
    if (!ready(op) || notice_arrived() || !known_comm(comm, op)) return 1;
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    if (opcode == HALO || opcode == ALLREDUCE_SUM || opcode == BCAST) {
        // (send and recv are between two ranks: the receiver checks the message's size)
        int64_t sig[SIG] = {opcode * 2 + (adjoint != 0), kind, ndim,
                            opcode == ALLREDUCE_SUM ? 0 : x, -1, -1, -1, -1};
        int decomposed = opcode == HALO ? grid_axes(comm) : 0;
        for (int d = 0; d < ndim && d < SIG - F_SIZES; ++d)
            sig[F_SIZES + d] = d < decomposed ? -2 : sizes[d];
        if (check_agreement && agree(sig, comm, op)) return 1;
    }
    if (opcode == HALO) return halo(a, sizes, ndim, comm, kind, x, adjoint != 0);
    if (!fits_int(n, op)) return 1;
    size_t es = size_of(kind);
    Handle type = type_of(kind);
    std::vector<Pending> reqs;
    Pending r{h(C_REQUEST_NULL), -1, type, -1, "exchanging with"};
    int rc = 0;
    int me = 0;
    api.Comm_rank(comm, &me);
    static thread_local std::vector<char> tmp;
    if (opcode == ALLREDUCE_SUM) {
        // The sum over ranks, in place; its own transpose (adjoint == primal).
        tmp.assign(a, a + n * es);
        rc = api.Iallreduce(tmp.data(), a, int(n), type, h(C_SUM), comm, &r.req);
    } else if (opcode == BCAST && !adjoint) {
        rc = api.Ibcast(a, int(n), type, int(x), comm, &r.req);
    } else if (opcode == BCAST) {
        // Transpose of a broadcast from root x: the root's adjoint gets the sum of every
        // rank's, the other ranks' become zero (their values were overwritten).
        tmp.assign(a, a + n * es);
        rc = api.Ireduce(tmp.data(), me == x ? a : nullptr, int(n), type, h(C_SUM), int(x),
                         comm, &r.req);
    } else if ((opcode == SEND) != (adjoint != 0)) {
        // A send, or the adjoint of a recv: send the buffer (the recv's adjoint then zeroes
        // it, below: the received values had overwritten it).
        int tag = int(y) + (adjoint ? TAG_ADJOINT : 0);
        r.peer = int(x);
        r.what = "sending to";
        rc = api.Isend(a, int(n), type, int(x), tag, comm, &r.req);
    } else {
        // A recv, or the adjoint of a send (received into a buffer, added into the array).
        int tag = int(y) + (adjoint ? TAG_ADJOINT : 0);
        r.peer = int(x);
        r.what = "receiving from";
        r.expect = n;
        if (adjoint) tmp.resize(n * es);
        rc = api.Irecv(adjoint ? tmp.data() : a, int(n), type, int(x), tag, comm, &r.req);
    }
    if (rc != 0) { fail_here(std::string(op) + ": " + mpi_error(rc)); return 1; }
    reqs.push_back(r);
    if (wait_all(reqs, op)) return 1;
    if (opcode == BCAST && adjoint && me != x) std::memset(a, 0, n * es);
    if (opcode == RECV && adjoint) std::memset(a, 0, n * es);
    if (opcode == SEND && adjoint) add_into(a, tmp.data(), n, kind);
    return 0;
}

}  // namespace

// Setup (adjit/mpi/_native.py, through ctypes): the MPI functions and constants.
ADJ_EXPORT int64_t adj_mpi_bind(void* const* functions, int64_t nfunctions,
                                const int64_t* constants, int64_t nconstants) {
    std::lock_guard<std::mutex> guard(lock);
    if (nfunctions != API_SIZE || nconstants != C_COUNT) return -1;
    std::memcpy(&api, functions, sizeof(Api));
    std::memcpy(consts, constants, sizeof(consts));
    bound = true;
    return 0;
}

ADJ_EXPORT void adj_mpi_set_timeout(double seconds) { timeout_s = seconds; }

ADJ_EXPORT double adj_mpi_timeout() { return timeout_s; }

ADJ_EXPORT void adj_mpi_set_check(int64_t on) { check_agreement = on != 0; }

// A communicator adjit.mpi.Comm made: the operations take these only.
ADJ_EXPORT void adj_mpi_add_comm(int64_t comm) {
    std::lock_guard<std::mutex> guard(lock);
    comms.push_back(Handle(comm));
}

// 0 while nothing failed, 1 after (sticky: every later operation returns at once).
ADJ_EXPORT int64_t adj_mpi_status() {
    std::lock_guard<std::mutex> guard(lock);
    if (!failed && bound) notice_arrived();
    return failed ? 1 : 0;
}

ADJ_EXPORT const char* adj_mpi_error() { return error_text.c_str(); }

// A failure this rank found outside compiled code (an exception in its Python code).
ADJ_EXPORT void adj_mpi_fail(const char* why) {
    std::lock_guard<std::mutex> guard(lock);
    if (bound) fail_here(why);
}

ADJ_EXPORT void adj_mpi_abort(int64_t code) {
    if (bound) api.Abort(h(C_FAIL_COMM), int(code));
}

// 1 if this rank held the extreme of the last scalar max/min allreduce (the lowest rank
// holding it, on a tie), else 0: where the adjoint goes.
ADJ_EXPORT int64_t adj_mpi_held_extreme() { return held_last; }

// This rank's number in `comm`.
ADJ_EXPORT int64_t adj_mpi_rank(int64_t comm) {
    int r = -1;
    bool known = false;
    for (Handle c : comms) known = known || c == Handle(comm);
    if (bound && known) api.Comm_rank(Handle(comm), &r);
    return r;
}

// A scalar collective: allreduce (sum, max, min) or a broadcast from rank `root`.
ADJ_EXPORT double adj_mpi_scalar(double x, int64_t opcode, int64_t comm, int64_t root) {
    static const char* names[] = {"allreduce(op='sum')", "allreduce(op='max')",
                                  "allreduce(op='min')", "bcast"};
    const char* op = opcode >= 0 && opcode <= S_BCAST ? names[opcode] : "?";
    std::lock_guard<std::mutex> guard(lock);
    if (!ready(op) || notice_arrived() || !known_comm(Handle(comm), op)) return 0.0;
    int64_t sig[SIG] = {OP_SCALAR + opcode, -1, 0, opcode == S_BCAST ? root : 0, -1, -1, -1, -1};
    if (check_agreement && agree(sig, Handle(comm), op)) return 0.0;
    std::vector<Pending> reqs;
    Pending r{h(C_REQUEST_NULL), -1, h(C_DOUBLE), -1, "reducing with"};
    struct { double v; int rank; } in{x, 0}, out{0.0, -1};
    double sum = 0.0, value = x;
    int rc;
    if (opcode == S_SUM) {
        rc = api.Iallreduce(&x, &sum, 1, h(C_DOUBLE), h(C_SUM), Handle(comm), &r.req);
    } else if (opcode == S_BCAST) {
        rc = api.Ibcast(&value, 1, h(C_DOUBLE), int(root), Handle(comm), &r.req);
    } else {
        // MAXLOC/MINLOC: the extreme and the (lowest) rank holding it, for the adjoint.
        api.Comm_rank(Handle(comm), &in.rank);
        rc = api.Iallreduce(&in, &out, 1, h(C_DOUBLE_INT),
                            opcode == S_MAX ? h(C_MAXLOC) : h(C_MINLOC), Handle(comm),
                            &r.req);
    }
    if (rc != 0) { fail_here(std::string(op) + ": " + mpi_error(rc)); return 0.0; }
    reqs.push_back(r);
    if (wait_all(reqs, op)) return 0.0;
    if (opcode == S_SUM) return sum;
    if (opcode == S_BCAST) return value;
    held_last = out.rank == in.rank ? 1 : 0;
    return out.v;
}

// Array operations: one entry per rank of the array (compiled code passes the memref as
// MLIR's descriptor, expanded: allocated and aligned pointers, offset, sizes, strides).
#define ADJ_MPI_ARRAY(N)                                                                    \
    ADJ_EXPORT int64_t adj_mpi_array_##N##d(void* allocated, char* aligned, int64_t offset, \
                                            ADJ_SIZES_##N, int64_t opcode, int64_t comm,    \
                                            int64_t kind, int64_t x, int64_t y,             \
                                            int64_t adjoint) {                              \
        (void)allocated;                                                                    \
        int64_t sizes[N] = {ADJ_NAMES_##N};                                                 \
        return array_op(aligned + offset * size_of(kind), sizes, N, opcode, Handle(comm),   \
                        kind, x, y, adjoint);                                               \
    }
#define ADJ_SIZES_1 int64_t s0, int64_t t0
#define ADJ_NAMES_1 s0
#define ADJ_SIZES_2 int64_t s0, int64_t s1, int64_t t0, int64_t t1
#define ADJ_NAMES_2 s0, s1
#define ADJ_SIZES_3 int64_t s0, int64_t s1, int64_t s2, int64_t t0, int64_t t1, int64_t t2
#define ADJ_NAMES_3 s0, s1, s2
#define ADJ_SIZES_4 int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t t0, int64_t t1, \
                    int64_t t2, int64_t t3
#define ADJ_NAMES_4 s0, s1, s2, s3
ADJ_MPI_ARRAY(1)
ADJ_MPI_ARRAY(2)
ADJ_MPI_ARRAY(3)
ADJ_MPI_ARRAY(4)
