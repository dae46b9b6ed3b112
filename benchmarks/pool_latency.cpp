// How soon a worker of adjit's thread pool (adjit/runtime/native/parallel.cpp) joins a loop
// after the one before, by the time the caller spends between loops (its "gap"): polling
// with `pause`, polling with sched_yield, or asleep on a futex (ADJ_SPIN_PAUSE_NS and
// ADJ_SPIN_YIELD_NS set the phases). Each loop: 8 chunks of ~4 us on 2 threads. Prints how
// many loops the worker took part in and the latency from the launch to its first chunk.
//
//   g++ -O2 -std=c++17 -pthread benchmarks/pool_latency.cpp adjit/runtime/native/parallel.cpp \
//       -o /tmp/pool_latency [-DADJ_SPIN_PAUSE_NS=5000 -DADJ_SPIN_YIELD_NS=100000] && /tmp/pool_latency
//
// Measured on the shared 2-core machine (load 6-7): a polling worker takes its first chunk
// 0.8-0.9 us after the launch (pause or yield phase alike), a sleeping one 24-38 us after; a
// worker whose core another process holds ~4 ms after (a scheduler tick at HZ=250), and in
// most runs then joined under 5% of the loops: the caller must never wait for one to start.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <time.h>
#include <vector>
#include <atomic>
#include <algorithm>
#include <thread>
extern "C" void adj_parallel_for(void (*)(void*, int64_t, int64_t), void*, int64_t, int64_t, int64_t);
extern "C" int adj_set_backoff(int);
static int64_t now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static thread_local bool is_caller = false;
static std::atomic<int64_t> first_worker{0};
static int64_t t_pub;
static void body(void*, int64_t lo, int64_t hi) {
    if (!is_caller) { int64_t z = 0; first_worker.compare_exchange_strong(z, now()); }
    int64_t e = now() + 2000 * (hi - lo);   // 2 us a chunk-iteration
    while (now() < e) {}
}
int main(int argc, char** argv) {
    is_caller = true;
    adj_set_backoff(0);
    for (int64_t gap : {1000, 4000, 20000, 60000, 300000}) {
        std::vector<double> lat; int helped = 0, N = 400;
        for (int k = 0; k < N; ++k) {
            int64_t e = now() + gap; while (now() < e) {}
            first_worker = 0; t_pub = now();
            adj_parallel_for(body, nullptr, 16, 2, 0);   // 8 chunks of 2 iterations, ~32 us total
            if (first_worker) { ++helped; lat.push_back((first_worker - t_pub) / 1000.0); }
        }
        std::sort(lat.begin(), lat.end());
        printf("gap %6lld us: worker helped %3d/%d launches, latency to its first chunk: median %.1f us, p90 %.1f us\n",
               (long long)gap / 1000, helped, N, lat.empty() ? -1.0 : lat[lat.size() / 2], lat.empty() ? -1.0 : lat[lat.size() * 9 / 10]);
    }
}
