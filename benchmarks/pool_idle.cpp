// A parallel loop after an idle gap on adjit's thread pool (adjit/runtime/native/parallel.cpp),
// one thread against two, paired: each sample runs the gap then the loop on one thread, and
// the gap then the loop on two, and prints the medians and their ratio. The loop is an
// exp-like polynomial over 262144 float32 (~45-75 us on one core here); the gap is 0 (the
// loop right after another), or 0.1, 1, 5 ms of nanosleep or of busy work over 4 MiB. After
// 100 us the workers sleep on a futex, so these loops find them asleep.
//
//   g++ -O3 -march=native -std=c++17 -pthread benchmarks/pool_idle.cpp adjit/runtime/native/parallel.cpp -o /tmp/pool_idle
//   /tmp/pool_idle [samples] [backoff 0/1] [traces] [n]
//
// traces > 0 prints that many two-thread loops per row as their chunks: who ran each (C the
// caller, W a worker), on which CPU, from and to (us after the launch).
// Measured on the shared 2-core VM (load 1-2, four interleaved runs, 100-300 samples): the
// pool before leave_asleep, 2 threads / 1 thread after a gap: sleep 1.01-1.10, busy
// 1.00-1.43 (up to 1.30 and 1.43 where the back-off did not mask it); the traces showed the
// caller 30-45 us inside the futex wake before its first chunk, the worker's first chunk
// ~12 us after that, or no worker chunk at all. After: sleep 1.00-1.06, busy 0.99-1.05.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" void adj_parallel_for(void (*)(void *, int64_t, int64_t), void *, int64_t, int64_t,
                                 int64_t);
extern "C" int adj_set_backoff(int);
extern "C" int adj_parallel_backed_off();

static int64_t now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static thread_local int who = 1;   // 0: the caller
struct Rec { int who; int64_t lo, t0, t1; int cpu; };
static Rec recs[64];
static std::atomic<int> nrec{0};
static float *X, *Y;
static int64_t N_ITEMS;

__attribute__((noinline)) static void expk(const float *x, float *y, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
        float v = x[i];
        float r = 1.f + v * (1.f + v * (0.5f + v * (0.1666f + v * (0.04166f + v * (0.00833f +
                  v * (0.00138f + v * (0.000198f + v * (0.0000248f + v * 0.00000275f))))))));
        y[i] = r * r;
    }
}
static void body(void *, int64_t lo, int64_t hi) {
    int64_t t0 = now();
    expk(X, Y, lo, hi);
    int k = nrec.fetch_add(1);
    if (k < 64) recs[k] = {who, lo, t0, now(), sched_getcpu()};
}
static volatile double sink;
static void gap(int busy, int64_t ns) {
    if (!busy) {
        timespec t{0, long(ns)};
        nanosleep(&t, nullptr);
        return;
    }
    static std::vector<double> junk(1 << 19, 1.0);
    int64_t e = now() + ns;
    double s = 0;
    size_t j = 0;
    while (now() < e)
        for (int q = 0; q < 512; ++q) s += junk[j], j = (j + 64) & ((1 << 19) - 1);
    sink = s;
}
int main(int argc, char **argv) {
    who = 0;
    int samples = argc > 1 ? atoi(argv[1]) : 200;
    int backoff = argc > 2 ? atoi(argv[2]) : 1;
    int traces = argc > 3 ? atoi(argv[3]) : 0;
    N_ITEMS = argc > 4 ? atoll(argv[4]) : 262144;
    const int64_t n = N_ITEMS;
    adj_set_backoff(backoff);
    X = static_cast<float *>(aligned_alloc(64, n * 4));
    Y = static_cast<float *>(aligned_alloc(64, n * 4));
    for (int64_t i = 0; i < n; ++i) X[i] = (i % 1000) * 0.001f;
    for (int i = 0; i < 50; ++i) adj_parallel_for(body, nullptr, n, 2, 0), adj_parallel_for(body, nullptr, n, 1, 0);
    for (int busy : {0, 1})
        for (int64_t g : {0LL, 100000LL, 1000000LL, 5000000LL}) {
            std::vector<double> one, two;
            int backed = 0;
            for (int k = 0; k < samples; ++k)
                for (int th : {1, 2}) {
                    if (g) gap(busy, g);
                    else adj_parallel_for(body, nullptr, n, 2, 0);
                    nrec = 0;
                    int64_t t0 = now();
                    adj_parallel_for(body, nullptr, n, th, 0);
                    int64_t t1 = now();
                    (th == 1 ? one : two).push_back((t1 - t0) / 1000.0);
                    if (th == 2 && adj_parallel_backed_off()) ++backed;
                    if (th == 2 && traces && k % std::max(1, samples / traces) == 0) {
                        printf("   %.1f us:", (t1 - t0) / 1000.0);
                        for (int q = 0, m = std::min(nrec.load(), 64); q < m; ++q)
                            printf(" [%c%d %.1f-%.1f]", recs[q].who ? 'W' : 'C', recs[q].cpu,
                                   (recs[q].t0 - t0) / 1000.0, (recs[q].t1 - t0) / 1000.0);
                        printf("\n");
                    }
                }
            auto q = [](std::vector<double> v, double p) {
                std::sort(v.begin(), v.end());
                return v[size_t(v.size() * p)];
            };
            printf("%s gap %5lld us: 1 thread %.1f us (p90 %.1f), 2 threads %.1f (p90 %.1f), "
                   "ratio %.2f; backed off after %d/%d\n", busy ? "busy " : "sleep",
                   (long long)g / 1000, q(one, .5), q(one, .9), q(two, .5), q(two, .9),
                   q(two, .5) / q(one, .5), backed, samples);
        }
}
