// adj_parallel_for: the thread pool that compiled CPU code runs its parallel loops on.
//
// passes/parallel_for.py outlines each parallel loop (a kernel launch) into a function
// body(ctx, lo, hi) that runs iterations [lo, hi) of the loop's first dimension, with what it
// captures packed in `ctx`, and replaces the loop by a call of adj_parallel_for.
//
// Chunks, taken dynamically. The n iterations are cut into up to CHUNKS_PER_THREAD chunks per
// participating thread, and each thread owns a contiguous run of them (its "home": thread t
// the t-th run, the caller being thread 0), so that when every thread runs, the same thread
// gets the same rows launch after launch and its cache still holds them. A thread takes its
// home's chunks first, in order, then takes ("steals") those left in the others' homes.
// Taking a chunk is a compare-and-swap on the home's counter, which also carries the loop's
// epoch, so that a worker that wakes late cannot take a chunk of a loop that has ended. The
// caller takes chunks too and waits only for chunks a worker has taken and not finished: a
// worker that has not started (asleep, or descheduled because another process has its core)
// delays nothing, the caller runs what nobody took. This is what the one-block-per-thread
// split used before lacked: there each loop waited for every worker's block, and a loop ran
// as slowly as its most descheduled worker (a 512^2 stencil 2.2x slower than one thread
// beside one busy process; many small loops with more threads than free cores, 2000x).
//
// Yielding to the machine. A descheduled worker still delays the chunk it holds, by up to a
// scheduler time slice (milliseconds, against loops of microseconds). So the pool watches
// for it: a thread that was preempted while it ran chunks (its involuntary context switches,
// getrusage(RUSAGE_THREAD), rose), or a caller that waited on workers longer than running
// the whole loop itself would have taken, means the cores are not free; the next loops then
// run on the caller alone for a while (SERIAL_MIN_NS, doubling while it recurs, up to
// SERIAL_MAX_NS), after which a loop tries the workers again. On a free machine it seldom
// triggers (a preemption by a kernel thread costs 1 ms of serial loops); a busy one loses
// about one time slice per SERIAL_MAX_NS.
//
// Idle workers: after a loop, a worker polls for the next for SPIN_PAUSE_NS with the CPU's
// pause instruction (launches in a compiled loop follow each other within that), then for
// SPIN_YIELD_NS with sched_yield (launches from Python follow within microseconds; on a
// shared core the yield hands the core to whoever else wants it, the caller included, so a
// polling worker does not slow the thread it waits for), then sleeps on a futex.
//
// Waking sleepers only where it pays. Waking a worker costs the caller the futex syscall and
// the worker the time to reach its CPU: on the shared 2-core VM, 10-45 us in the syscall
// (an idle, halted vCPU) and a first chunk 40-70 us after, or, with the worker placed on the
// caller's own CPU, a cheap syscall and no help before the loop ends. A loop of ~70 us after
// a pause was slower on two threads than on one. So the pool remembers each loop body's
// one-thread time per item (the caller's pace, ESTIMATES entries by the body's address) and
// what waking cost the last times (the syscall plus the wait for a worker's first chunk, or
// the whole loop if none came); with the back-off on, a loop expected to take under
// WAKE_PAYS wake costs runs on the caller and leaves the workers asleep, as does a SMALL
// loop. Only loops in a burst (the previous one ended within the workers' polling time)
// poke them, after running, so that the next loops find them polling. The remembered cost
// fades while the pool does not wake, so that it tries again.
//
// Loops too short to hand off. Even to awake (polling) workers a hand-off costs the caller
// the publish, the join and the cache lines that travel: a few us on the shared VM, more than
// a 48x48 Jacobi sweep's whole work (a solve of many such sweeps ran 2.45x, its gradient
// 3.24x, its one-thread time on two free cores). So the pool keeps a running estimate of that
// cost (`handoff`: a parallel loop's time with awake workers minus its one-thread time over
// the threads, measured on short loops, where it is not lost in the work, and capped so that
// loops slowed by something else, the GIL in tests' Python bodies, do not inflate it); with
// the back-off on, a loop expected to gain less than that runs on the caller even while the
// workers are awake, and in a burst of such loops nobody pokes sleeping workers. So does a
// loop whose body the pool has seen take longer handed off than one thread takes (threads
// that fight over cache lines: the Jacobi solve's gradient, 3.24x one thread, accumulates
// into shared rows); that verdict fades, so the pool tries again now and then. A poke also
// waits for loops worth WAKE_PAYS wake costs, as leave_asleep. A loop the pool has not
// measured yet is handed off (or not) as before, and so measured; chunks are cut alike
// whoever runs them, so results do not change.
//
// Why not MLIR's async runtime (async-parallel-for), used before: its workers sleep on a
// condition variable between tasks, and each launch paid their wake-up and the coroutine
// machinery, 70-90 us on these machines, longer than a 1024^2 stencil step.
//
// Loops run serially on the caller when the pool is busy with another thread's loop (two
// Python threads calling compiled code at once), when called from inside a loop's body
// (nested: a worker's, or the caller's own), or with one thread. After fork() the child has
// none of the parent's workers: the pool forgets them and starts its own on its first
// parallel loop (pthread_atfork).
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <climits>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>

#define ADJ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Body = void (*)(void *ctx, int64_t lo, int64_t hi);

constexpr int MAX_THREADS = 1024;
constexpr int CHUNKS_PER_THREAD = 4;        // a thread's home: this many chunks
#ifndef ADJ_SPIN_PAUSE_NS   // (macros: benchmarks/pool_latency.cpp measures other settings)
#define ADJ_SPIN_PAUSE_NS 5000
#endif
#ifndef ADJ_SPIN_YIELD_NS
#define ADJ_SPIN_YIELD_NS 100000
#endif
constexpr int64_t SPIN_PAUSE_NS = ADJ_SPIN_PAUSE_NS;   // an idle worker polls with `pause`,
constexpr int64_t SPIN_YIELD_NS = ADJ_SPIN_YIELD_NS;   // then sched_yield up to this, then sleeps
#ifndef ADJ_WAKE_PAYS
#define ADJ_WAKE_PAYS 2
#endif
constexpr int64_t WAKE_PAYS = ADJ_WAKE_PAYS;    // wake sleepers for loops this many wake costs long
#ifndef ADJ_HANDOFF_NS
#define ADJ_HANDOFF_NS 2000
#endif
constexpr int64_t HANDOFF_PRIOR_NS = ADJ_HANDOFF_NS;   // a hand-off to awake workers, until measured
constexpr int64_t HANDOFF_MAX_NS = 10000;   // a sample above this is something else (the GIL)
constexpr int ESTIMATES = 256;              // loops whose one-thread time the pool remembers
constexpr int64_t WAIT_PAUSE_NS = 20000;    // the caller polls for unfinished chunks this long
constexpr int64_t SERIAL_MIN_NS = 1000000;  // after contention: serial for this long,
constexpr int64_t SERIAL_MAX_NS = 256000000; // doubling while it recurs, up to this (a probe
                                              // can cost a time slice: ~1.5% of this)

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

int64_t now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// This thread's involuntary context switches: preemptions (and yields that gave the core
// away). ~0.13 us.
long preemptions() {
#if defined(RUSAGE_THREAD)
    rusage r;
    if (getrusage(RUSAGE_THREAD, &r) == 0) return r.ru_nivcsw;
#endif
    return 0;
}

// Sleeps while *word == expected (or for at most timeout_ns, or spuriously): the caller
// re-checks. Without futexes, a short sleep.
void futex_wait(std::atomic<uint32_t> &word, uint32_t expected, int64_t timeout_ns) {
#if defined(__linux__)
    timespec t{time_t(timeout_ns / 1000000000), long(timeout_ns % 1000000000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_PRIVATE, expected, &t,
            nullptr, 0);
#else
    (void)word, (void)expected;
    timespec t{0, long(timeout_ns < 100000 ? timeout_ns : 100000)};
    nanosleep(&t, nullptr);
#endif
}

void futex_wake(std::atomic<uint32_t> &word, int count) {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
            nullptr, 0);
#else
    (void)word, (void)count;
#endif
}

// A home's counter: epoch (32 bits) | next chunk (16) | end (16).
constexpr uint64_t pack(uint32_t epoch, uint32_t next, uint32_t end) {
    return uint64_t(epoch) << 32 | uint64_t(next) << 16 | end;
}

struct alignas(64) Home {
    std::atomic<uint64_t> counter{0};
};

struct Pool {
    // The current loop: written by the submitter before it publishes the homes' counters
    // (release), read by a thread only after it has taken one of the loop's chunks (acquire),
    // so always the loop's own: a loop cannot end, nor the next be written, while a chunk
    // taken from it is unfinished.
    Body body = nullptr;
    void *ctx = nullptr;
    int64_t n = 0;
    int64_t chunks = 0;
    alignas(64) std::atomic<int> homes{0};         // homes of the current loop (racy hint)
    alignas(64) std::atomic<uint32_t> generation{0};   // the epoch; sleeping workers' futex
    alignas(64) std::atomic<uint32_t> done{0};     // chunks finished by workers; the caller's futex
    std::atomic<int> caller_waiting{0};
    alignas(64) std::atomic<int> sleepers{0};
    std::atomic<int> preempted{0};                 // a worker was preempted holding chunks
    std::atomic<int64_t> limit{0};                 // adj_set_thread_limit's (0: none)
    bool backoff = true;                           // adj_set_backoff's
    alignas(64) int workers = 0;                   // started (only the submitter changes these)
    int64_t serial_until = 0;                      // contention seen: serial until then
    int64_t serial_for = SERIAL_MIN_NS;
    int64_t last_end = INT64_MIN / 2;              // when the last loop under `submit` ended
    int64_t wake_cost = 0;                         // waking sleepers: the caller's syscall plus
                                                   // the first worker's arrival (average; 0: unknown)
    struct Estimate {        // picoseconds per item:
        Body body;
        int64_t ps_per_item;     // one thread (a run on the caller's; else the caller's pace)
        int64_t handed_ps;       // the whole loop handed to awake workers (0: not measured)
        bool alone;              // ps_per_item was measured on the caller alone
    };
    Estimate estimate[ESTIMATES] = {};
    int64_t handoff = HANDOFF_PRIOR_NS;           // handing a loop to awake workers (running
                                                   // average)
    bool handoff_fixed = false;                    // adj_set_handoff_cost's (tests)
    int64_t wakes = 0;                             // futex wakes issued (tests)
    alignas(64) std::atomic<int64_t> joined{0};    // when a worker took its first chunk of the loop
    std::mutex submit;                             // one loop at a time
    Home home[MAX_THREADS];
};

// Leaked on purpose: workers may still be polling it while the process exits.
Pool &pool = *new Pool;
thread_local bool in_loop = false;   // inside a loop's body (a worker, or a caller's chunk)

// Takes the next chunk of home `h` in loop `epoch`: its index, or -1 if none is left (or
// the loop is over).
int64_t take(Home &h, uint32_t epoch) {
    uint64_t c = h.counter.load(std::memory_order_acquire);
    for (;;) {
        if (uint32_t(c >> 32) != epoch) return -1;
        uint32_t next = uint32_t(c >> 16) & 0xffff, end = uint32_t(c) & 0xffff;
        if (next >= end) return -1;
        if (h.counter.compare_exchange_weak(c, c + (uint64_t(1) << 16),
                                            std::memory_order_acq_rel,
                                            std::memory_order_acquire))
            return next;
    }
}

void run_chunk(int64_t k) {
    int64_t n = pool.n, chunks = pool.chunks;
    int64_t lo = int64_t(__int128(n) * k / chunks), hi = int64_t(__int128(n) * (k + 1) / chunks);
    if (lo < hi) pool.body(pool.ctx, lo, hi);
}

// Runs chunks of loop `epoch` from home `first` on, then the other homes': how many.
int run_chunks(uint32_t epoch, int first) {
    int homes = pool.homes.load(std::memory_order_acquire), count = 0;
    if (homes <= 0) return 0;
    for (int j = 0; j < homes; ++j) {
        Home &h = pool.home[(first + j) % homes];
        for (int64_t k; (k = take(h, epoch)) >= 0; ++count) run_chunk(k);
    }
    return count;
}

void worker(int index, uint32_t seen) {
    in_loop = true;
    for (;;) {
        uint32_t g = pool.generation.load(std::memory_order_acquire);
        if (g == seen) {
            int64_t start = now_ns();
            for (int i = 0; (g = pool.generation.load(std::memory_order_acquire)) == seen; ++i) {
                if ((i & 63) != 63) {
                    cpu_relax();
                    continue;
                }
                int64_t t = now_ns() - start;
                if (t > SPIN_YIELD_NS) break;
                if (t > SPIN_PAUSE_NS) sched_yield();
            }
            if (g == seen) {
                pool.sleepers.fetch_add(1, std::memory_order_seq_cst);
                while ((g = pool.generation.load(std::memory_order_seq_cst)) == seen)
                    futex_wait(pool.generation, seen, 1000000000);
                pool.sleepers.fetch_sub(1, std::memory_order_seq_cst);
            }
        }
        seen = g;
        long before = preemptions();
        // Its own home first, then the others'. A worker beyond the loop's homes takes
        // nothing: the loop asked for fewer threads (the process's limit, a product split
        // into few parts) and gets no more.
        int homes = pool.homes.load(std::memory_order_acquire);
        int64_t arrived = now_ns();
        int count = index < homes ? run_chunks(g, index) : 0;
        if (count > 0) {
            int64_t none = 0;   // (before `done`: the caller reads it once all is done)
            pool.joined.compare_exchange_strong(none, arrived, std::memory_order_relaxed);
            if (preemptions() != before) pool.preempted.store(1, std::memory_order_relaxed);
            pool.done.fetch_add(uint32_t(count), std::memory_order_seq_cst);
            if (pool.caller_waiting.load(std::memory_order_seq_cst)) futex_wake(pool.done, 1);
        }
    }
}

void after_fork_in_child() {
    // The workers are the parent's: none runs here. Forget them (their Thread objects and
    // stacks are lost, as a fork loses them anyway) and make the lock anew.
    new (&pool.submit) std::mutex;
    pool.workers = 0;
    pool.sleepers.store(0);
    pool.caller_waiting.store(0);
    pool.preempted.store(0);
    pool.serial_until = 0;
    pool.serial_for = SERIAL_MIN_NS;
    pool.wake_cost = 0;   // the child's workers are new: measure anew
    pool.handoff = HANDOFF_PRIOR_NS;
}

bool start_workers(int wanted) {
    static bool registered = [] { return pthread_atfork(nullptr, nullptr, after_fork_in_child) == 0; }();
    (void)registered;
    try {
        while (pool.workers < wanted) {
            int index = pool.workers + 1;
            std::thread(worker, index, pool.generation.load()).detach();
            pool.workers = index;
        }
    } catch (...) {   // no more threads: use those there are
    }
    return pool.workers > 0;
}

// Publishes a new epoch: a loop (its homes already set), or none (a poke: sleeping workers
// wake and poll again, so that the next loops find them awake).
void publish(uint32_t epoch, int wake) {
    pool.generation.store(epoch, std::memory_order_seq_cst);
    if (pool.sleepers.load(std::memory_order_seq_cst) > 0) {
        futex_wake(pool.generation, wake);
        ++pool.wakes;
    }
}

void run_here(Body body, void *ctx, int64_t n) { body(ctx, 0, n); }

Pool::Estimate &estimate_of(Body body) {
    uintptr_t h = reinterpret_cast<uintptr_t>(body);
    return pool.estimate[(h >> 4 ^ h >> 12) % ESTIMATES];
}

// A loop's one-thread time as the pool last measured it (per item, so any n), or -1.
int64_t expected_ns(Body body, int64_t n) {
    Pool::Estimate &e = estimate_of(body);
    return e.body == body ? int64_t(__int128(e.ps_per_item) * n / 1000) : -1;
}

// Remembers a loop's one-thread time: `alone`, from a run on the caller alone, else the
// caller's pace in a parallel run (which threads that share cache lines or memory slow: it
// does not replace one measured alone).
void remember(Body body, int64_t n, int64_t ns, bool alone) {
    if (n <= 0 || ns < 0) return;
    Pool::Estimate &e = estimate_of(body);
    int64_t ps = int64_t(__int128(ns) * 1000 / n);
    if (e.body != body) e = {body, ps, 0, alone};
    else if (alone || !e.alone) e.ps_per_item = ps, e.alone = alone;
}

// Remembers what the whole loop took handed to awake workers.
void remember_handed(Body body, int64_t n, int64_t ns) {
    Pool::Estimate &e = estimate_of(body);
    if (n > 0 && e.body == body) e.handed_ps = int64_t(__int128(ns) * 1000 / n);
}

// Whether to leave sleeping workers asleep and run the loop on the caller (the file's
// comment: waking them pays only for a loop longer than a few wake costs).
bool leave_asleep(Body body, int64_t n) {
    if (!pool.backoff || pool.sleepers.load(std::memory_order_seq_cst) == 0) return false;
    int64_t expected = expected_ns(body, n);
    if (expected < 0 || expected >= WAKE_PAYS * pool.wake_cost) return false;
    // The cost was measured only when the pool woke workers: let it fade while it is not, so
    // that the pool tries again (a wake that found the other core busy cost a whole loop).
    pool.wake_cost -= pool.wake_cost / 64;
    return true;
}

// Whether handing the loop to `parts` threads gains less than the hand-off costs, even with
// the workers awake (the file's comment): its one-thread time T against T/parts + handoff.
// Or whether the loop, handed to awake workers, took longer than on the caller alone (a
// body whose threads fight over cache lines: a gradient's accumulations); that verdict
// fades, so that the pool tries again.
bool too_short(Body body, int64_t n, int64_t parts) {
    if (!pool.backoff) return false;
    int64_t expected = expected_ns(body, n);
    if (expected < 0) return false;
    if (expected * (parts - 1) < pool.handoff * parts) return true;
    Pool::Estimate &e = estimate_of(body);
    if (pool.handoff > 0 && e.handed_ps >= e.ps_per_item) {   // (0: tests, hand off all)
        e.handed_ps -= e.handed_ps / 64 + 1;
        return true;
    }
    return false;
}

// Runs the loop on the caller, measuring it (the estimate leave_asleep and too_short read).
void run_here_measured(Body body, void *ctx, int64_t n, int64_t start) {
    in_loop = true;
    run_here(body, ctx, n);
    in_loop = false;
    int64_t end = now_ns();
    remember(body, n, end - start, true);
    pool.last_end = end;
}

// Whether a poke (waking the sleepers for the next loops) may pay for loops like this one:
// not if it is too short to hand off, nor (with the back-off on) shorter than WAKE_PAYS
// wake costs, as leave_asleep judges a loop.
bool worth_waking_for(Body body, int64_t n, int64_t parts) {
    if (!pool.backoff) return true;
    int64_t expected = expected_ns(body, n);
    return !too_short(body, n, parts) &&
           (expected < 0 || expected >= WAKE_PAYS * pool.wake_cost);
}

// Runs the loop on the caller, measuring it, and pokes the workers when loops come in a
// burst, unless waking them does not pay for loops like this one (a burst of those would
// pay the wake's syscall, tens of us, for nothing).
void run_here_alone(Body body, void *ctx, int64_t n, int64_t start, uint32_t epoch,
                    int64_t parts) {
    bool burst = start - pool.last_end < SPIN_YIELD_NS;
    run_here_measured(body, ctx, n, start);
    if (burst && worth_waking_for(body, n, parts)) {
        publish(epoch, INT_MAX);
        pool.last_end = now_ns();
    }
}

}  // namespace

// Size classes of a loop (passes/parallel_for.py spells them alike), and a flag.
enum Size : int64_t { PARALLEL = 0, SMALL = 1, TINY = 2, SIZE_MASK = 3,
                      COARSE = 4 /* one chunk per thread (gemm.cpp: each a product) */ };

// Runs body(ctx, lo, hi) over [0, n) on up to `threads` threads (the file's comment) and
// returns when all is done. A SMALL loop (small_loops.py: up to ~30 us of work) runs on the
// caller alone unless the workers are awake: waking a sleeping one takes longer (tens of
// us) than such a loop's work; when loops come in a burst (or always, with the back-off
// off) it pokes them, so that the next launches of a loop of launches find them awake. A
// PARALLEL loop the pool has measured shorter than WAKE_PAYS wake costs also runs on the
// caller while the workers sleep (leave_asleep), and one measured too short to hand off,
// or slower handed off, even while they are awake (too_short). A TINY loop (under ~1 us) always runs on
// the caller, and wakes no one.
ADJ_EXPORT void adj_parallel_for(Body body, void *ctx, int64_t n, int64_t threads,
                                 int64_t size) {
    if (n <= 0) return;
    int64_t limit = pool.limit.load(std::memory_order_relaxed);
    if (limit > 0 && threads > limit) threads = limit;
    int64_t parts = threads < n ? threads : n;
    if (parts > MAX_THREADS) parts = MAX_THREADS;
    int64_t cls = size & SIZE_MASK;
    if (parts <= 1 || cls == TINY || in_loop || !pool.submit.try_lock()) {
        run_here(body, ctx, n);
        return;
    }
    std::lock_guard<std::mutex> hold(pool.submit, std::adopt_lock);
    int64_t start = now_ns();
    if (start < pool.serial_until && pool.backoff) {   // the cores were not free a moment ago
        run_here(body, ctx, n);
        pool.last_end = now_ns();
        return;
    }
    if (too_short(body, n, parts)) {   // awake workers or not: the hand-off costs more
        run_here_measured(body, ctx, n, start);
        return;
    }
    uint32_t epoch = pool.generation.load(std::memory_order_relaxed) + 1;
    if (cls == SMALL &&
        (pool.workers < parts - 1 || pool.sleepers.load(std::memory_order_seq_cst))) {
        // Waking costs more than such a loop's work. With the back-off on, only a burst of
        // loops pokes the workers (after running: the caller pays the syscall, tens of us
        // here, once per burst rather than for a lone small loop after a pause).
        start_workers(int(parts) - 1);
        if (pool.backoff) {
            run_here_alone(body, ctx, n, start, epoch, parts);
            return;
        }
        publish(epoch, INT_MAX);
        run_here(body, ctx, n);
        return;
    }
    if (leave_asleep(body, n)) {
        run_here_alone(body, ctx, n, start, epoch, parts);
        return;
    }
    int had = pool.workers;
    if (!start_workers(int(parts) - 1)) {
        run_here(body, ctx, n);
        return;
    }
    // Workers started for this loop join it after their thread's creation (tens of us to
    // ms): such a loop says nothing of what handing off costs, nor of busy cores. Judged as
    // one, the first loops of a process ran serial for their next ~64 launches (too_short's
    // fading verdict) and backed off: W4's first 20 ms of calls at one thread's speed.
    bool fresh = pool.workers != had;
    if (parts > pool.workers + 1) parts = pool.workers + 1;
    int64_t per = (size & COARSE) ? 1 : CHUNKS_PER_THREAD;
    int64_t chunks = parts * per < n ? parts * per : n;
    pool.body = body;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunks = chunks;
    pool.homes.store(int(parts), std::memory_order_relaxed);
    for (int64_t t = 0; t < parts; ++t)
        pool.home[t].counter.store(pack(epoch, uint32_t(chunks * t / parts),
                                        uint32_t(chunks * (t + 1) / parts)),
                                   std::memory_order_release);
    pool.done.store(0, std::memory_order_relaxed);
    pool.preempted.store(0, std::memory_order_relaxed);
    pool.joined.store(0, std::memory_order_relaxed);
    long before = preemptions();
    bool waking = pool.sleepers.load(std::memory_order_seq_cst) > 0;
    int64_t published = now_ns();
    publish(epoch, int(parts) - 1);                 // (seq_cst: publishes all of the above)
    int64_t woke = now_ns();

    in_loop = true;
    int mine = run_chunks(epoch, 0);
    in_loop = false;
    int64_t ran = now_ns();
    uint32_t theirs = uint32_t(chunks - mine);
    uint32_t d = pool.done.load(std::memory_order_acquire);
    for (int i = 0; d != theirs; ++i, d = pool.done.load(std::memory_order_acquire)) {
        if ((i & 63) != 63 || now_ns() - ran < WAIT_PAUSE_NS) {
            cpu_relax();
            continue;
        }
        // A worker holds a chunk and is slow, or descheduled: sleep until it reports.
        pool.caller_waiting.store(1, std::memory_order_seq_cst);
        d = pool.done.load(std::memory_order_seq_cst);
        if (d != theirs) futex_wait(pool.done, d, 1000000);
        pool.caller_waiting.store(0, std::memory_order_relaxed);
    }
    int64_t end = now_ns();
    pool.last_end = end;
    // The caller's pace, as one thread's time for the loop (its chunks are even); if the
    // workers took every chunk (the caller was held up in the wake), the loop's time.
    int64_t one = mine > 0 ? int64_t(__int128(ran - woke) * chunks / mine) : end - woke;
    remember(body, n, one, false);
    if (!waking && !fresh && !pool.preempted.load(std::memory_order_relaxed))
        remember_handed(body, n, end - start);
    if (waking) {   // what waking cost: the syscall, and the wait for a worker's first chunk
        int64_t joined = pool.joined.load(std::memory_order_relaxed);
        int64_t cost = (woke - published) + ((joined ? joined : end) - published);
        // Up at once, down slowly: a wake that did not pay should not be retried soon.
        pool.wake_cost = cost > pool.wake_cost ? cost : (3 * pool.wake_cost + cost) / 4;
    }

    // Did the workers help? Not if a thread was preempted mid-loop (another thread or process
    // wants the cores), nor if waiting for them took longer than the rest would have taken
    // the caller (its own pace times the chunks it did not run).
    bool contended = pool.preempted.load(std::memory_order_relaxed) || preemptions() != before;
    if (!contended && !fresh && mine > 0 && theirs > 0)
        contended = (end - ran) > (ran - start) / mine * int64_t(theirs) + WAIT_PAUSE_NS;
    if (!pool.handoff_fixed && !waking && !fresh && !contended && mine > 0 && theirs > 0 && one < 32 * HANDOFF_MAX_NS) {
        // What handing off to awake workers cost beyond the work split evenly (a short
        // loop's: in a long one it is lost in the work's noise and memory bandwidth).
        int64_t cost = (end - start) - one / parts;
        cost = cost < 0 ? 0 : cost > HANDOFF_MAX_NS ? HANDOFF_MAX_NS : cost;
        pool.handoff = (3 * pool.handoff + cost) / 4;
    }
    if (contended) {
        pool.serial_until = end + pool.serial_for;
        pool.serial_for = pool.serial_for * 2 < SERIAL_MAX_NS ? pool.serial_for * 2 : SERIAL_MAX_NS;
    } else if (theirs > 0) {
        pool.serial_for = SERIAL_MIN_NS;
    }
}

// How many threads the pool has started (tests: the pool grows on demand, and anew in a
// forked child).
ADJ_EXPORT int adj_parallel_workers() { return pool.workers; }

// Whether loops run on the caller alone for now because the cores were found busy (tests,
// benchmarks).
ADJ_EXPORT int adj_parallel_backed_off() { return pool.backoff && now_ns() < pool.serial_until; }

// How many workers sleep on the futex now, and how many times the pool has woken sleeping
// workers (tests: a lone small loop after a pause wakes none).
ADJ_EXPORT int adj_parallel_sleeping() { return pool.sleepers.load(); }
ADJ_EXPORT int64_t adj_parallel_wakes() {
    std::lock_guard<std::mutex> hold(pool.submit);
    return pool.wakes;
}

// Sets what the pool takes waking its sleeping workers to cost (ns; 0: unknown, wake) and
// returns the previous value (tests: make the choice to leave them asleep deterministic).
ADJ_EXPORT int64_t adj_set_wake_cost(int64_t ns) {
    std::lock_guard<std::mutex> hold(pool.submit);
    int64_t was = pool.wake_cost;
    pool.wake_cost = ns < 0 ? 0 : ns;
    return was;
}

// Sets what the pool takes handing a loop to awake workers to cost (ns) and returns the
// previous value (tests: make the choice to keep a short loop on the caller deterministic;
// 0 hands off every loop as before, including those measured slower handed off). The pool
// keeps the value until called with -1: measure again from the prior.
ADJ_EXPORT int64_t adj_set_handoff_cost(int64_t ns) {
    std::lock_guard<std::mutex> hold(pool.submit);
    int64_t was = pool.handoff;
    pool.handoff_fixed = ns >= 0;
    pool.handoff = ns >= 0 ? ns : HANDOFF_PRIOR_NS;
    return was;
}

// The most threads a loop runs on in this process, whatever its module was compiled for
// (core/threads.py: thread_limit); 0: no limit. Set by runtime/extension.py when it loads,
// and in a forked child.
ADJ_EXPORT void adj_set_thread_limit(int64_t limit) { pool.limit.store(limit < 0 ? 0 : limit); }

// Whether the pool backs off to serial loops when it finds the cores busy (default 1; tests
// of the chunking, and benchmarks comparing, turn it off). Returns the previous setting.
ADJ_EXPORT int adj_set_backoff(int on) {
    std::lock_guard<std::mutex> hold(pool.submit);
    int was = pool.backoff;
    pool.backoff = on != 0;
    pool.serial_until = 0;
    pool.serial_for = SERIAL_MIN_NS;
    return was;
}

// adj_set_thread_limit's value (tests: a forked child's).
ADJ_EXPORT int64_t adj_thread_limit() { return pool.limit.load(); }
