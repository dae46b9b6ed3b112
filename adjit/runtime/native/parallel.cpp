// adj_parallel_for: the thread pool that compiled CPU code runs its parallel loops on.
//
// passes/parallel_for.py outlines each parallel loop (a kernel launch) into a function
// body(ctx, lo, hi) that runs iterations [lo, hi) of the loop's first dimension, with what it
// captures packed in `ctx`, and replaces the loop by a call of adj_parallel_for. Here the
// iterations are split into one contiguous block per thread: the caller runs the first and
// the pool's workers the others, so the same thread gets the same block launch after launch
// (its cache still holds it) and nothing is queued or allocated per launch.
//
// Why not MLIR's async runtime (async-parallel-for), used before: its workers sleep on a
// condition variable between tasks, and each launch paid their wake-up and the coroutine
// machinery, 70-90 us on these machines, longer than a 1024^2 stencil step. Here workers
// spin for a while after a launch (SPIN_NS) before they sleep, so that launches in a loop
// find them awake: a hand-off costs a few cache-line transfers.
//
// Loops run serially on the caller when the pool is busy with another thread's loop (two
// Python threads calling compiled code at once), when called from inside a worker (nested),
// or with one thread. After fork() the child has none of the parent's workers: the pool
// forgets them and starts its own on its first parallel loop.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>

#define ADJ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Body = void (*)(void *ctx, int64_t lo, int64_t hi);

constexpr int MAX_THREADS = 1024;
constexpr int64_t SPIN_NS = 200000;   // how long an idle worker polls before it sleeps

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

struct alignas(64) Pool {
    // The current loop, published by bumping `generation` (release) after these are set.
    Body body = nullptr;
    void *ctx = nullptr;
    int64_t n = 0;
    int parts = 0;                               // blocks: the caller's and parts-1 workers'
    alignas(64) std::atomic<uint64_t> generation{0};
    alignas(64) std::atomic<int> remaining{0};   // workers that have not finished the loop
    alignas(64) std::atomic<int> sleepers{0};
    std::atomic<uint64_t> pokes{0};              // bumped to send sleeping workers spinning
    int workers = 0;                             // started (only the submitter changes it)
    std::mutex submit;                           // one loop at a time
    std::mutex sleep_lock;
    std::condition_variable wake;
};

// Leaked on purpose: workers may still be polling it while the process exits.
Pool &pool = *new Pool;
thread_local bool in_worker = false;

void run_block(Body body, void *ctx, int64_t n, int parts, int k) {
    int64_t lo = n * k / parts, hi = n * (k + 1) / parts;   // n < 2^62: no overflow in practice
    if (lo < hi) body(ctx, lo, hi);
}

// Worker `index` (>= 1) runs block `index` of each loop with more parts than that, and
// reports every loop done, its block or none: so no worker can fall a loop behind, and read
// the next loop's fields for the one it saw. `seen`: the generation before its first loop.
void worker(int index, uint64_t seen) {
    in_worker = true;
    for (;;) {
        uint64_t g = pool.generation.load(std::memory_order_acquire);
        if (g == seen) {
            uint64_t poked = pool.pokes.load(std::memory_order_seq_cst);
            int64_t until = now_ns() + SPIN_NS;
            for (int i = 0; (g = pool.generation.load(std::memory_order_acquire)) == seen; ++i) {
                cpu_relax();
                if ((i & 255) == 255 && now_ns() > until) break;
            }
            if (g == seen) {
                std::unique_lock<std::mutex> lock(pool.sleep_lock);
                pool.sleepers.fetch_add(1, std::memory_order_seq_cst);
                while ((g = pool.generation.load(std::memory_order_seq_cst)) == seen &&
                       pool.pokes.load(std::memory_order_seq_cst) == poked)
                    pool.wake.wait(lock);
                pool.sleepers.fetch_sub(1, std::memory_order_relaxed);
                if (g == seen) continue;   // poked: spin again
            }
        }
        seen = g;
        if (index < pool.parts) run_block(pool.body, pool.ctx, pool.n, pool.parts, index);
        pool.remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void after_fork_in_child() {
    // The workers are the parent's: none runs here. Forget them (their Thread objects and
    // stacks are lost, as a fork loses them anyway) and make the locks anew.
    new (&pool.submit) std::mutex;
    new (&pool.sleep_lock) std::mutex;
    new (&pool.wake) std::condition_variable;
    pool.workers = 0;
    pool.sleepers.store(0);
    pool.remaining.store(0);
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

// Sends sleeping workers back to spinning, without a loop for them.
void poke() {
    pool.pokes.fetch_add(1, std::memory_order_seq_cst);
    if (pool.sleepers.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lock(pool.sleep_lock); }
        pool.wake.notify_all();
    }
}

}  // namespace

// Size classes of a loop (passes/parallel_for.py spells them alike).
enum Size : int64_t { PARALLEL = 0, SMALL = 1, TINY = 2 };

// Runs body(ctx, lo, hi) over [0, n) in up to `threads` contiguous blocks, one per thread,
// and returns when all are done. A SMALL loop (small_loops.py: up to ~30 us of work) runs on
// the caller alone unless the workers are awake: waking a sleeping one costs more (70-220 us
// here) than such a loop's work, while handing a loop to spinning ones costs ~0.25 us; it
// pokes them, so that the next launches of a loop of launches find them awake. A TINY loop
// (under ~1 us) always runs on the caller, and wakes no one.
ADJ_EXPORT void adj_parallel_for(Body body, void *ctx, int64_t n, int64_t threads,
                                 int64_t size) {
    if (n <= 0) return;
    int64_t parts = threads < n ? threads : n;
    if (parts > MAX_THREADS) parts = MAX_THREADS;
    if (parts <= 1 || size == TINY || in_worker || !pool.submit.try_lock()) {
        body(ctx, 0, n);
        return;
    }
    std::lock_guard<std::mutex> hold(pool.submit, std::adopt_lock);
    if (size == SMALL &&
        (pool.workers < parts - 1 || pool.sleepers.load(std::memory_order_seq_cst))) {
        start_workers(int(parts) - 1);
        poke();
        body(ctx, 0, n);
        return;
    }
    if (!start_workers(int(parts) - 1)) {
        body(ctx, 0, n);
        return;
    }
    if (parts > pool.workers + 1) parts = pool.workers + 1;
    pool.body = body;
    pool.ctx = ctx;
    pool.n = n;
    pool.parts = int(parts);
    pool.remaining.store(pool.workers, std::memory_order_relaxed);
    pool.generation.fetch_add(1, std::memory_order_seq_cst);   // publishes the fields above
    if (pool.sleepers.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lock(pool.sleep_lock); }
        pool.wake.notify_all();
    }
    run_block(body, ctx, n, int(parts), 0);
    for (int i = 0; pool.remaining.load(std::memory_order_acquire) > 0; ++i) {
        if (i < 1 << 16) cpu_relax();
        else sched_yield();
    }
}

// How many threads the pool has started (tests: the pool grows on demand, and anew in a
// forked child).
ADJ_EXPORT int adj_parallel_workers() { return pool.workers; }
