// Checkpointing schedules for the reverse pass of a checkpointed loop
// (passes/autodiff/rules/checkpoint.py): which steps to run again, which states to keep, in which
// order the steps are reversed. Compiled code asks for the actions one at a time:
//
//   ctx = adj_ckpt_new(steps, snapshots, kind, every)
//   loop: switch (adj_ckpt_next(ctx)) {
//     ADVANCE:  run steps adj_ckpt_from(ctx) .. adj_ckpt_to(ctx) - 1 forward (primal only)
//     TAKESHOT: copy the current state into working slot adj_ckpt_slot(ctx)
//     RESTORE:  copy slot adj_ckpt_slot(ctx) into the state (-1: the loop's initial state,
//               which the augmented pass keeps on the tape); it is the state before step
//               adj_ckpt_to(ctx)
//     TURN:     reverse step adj_ckpt_to(ctx) from the current state (which it overwrites)
//     DONE:     stop; adj_ckpt_free(ctx) }
//
// Schedules (`kind`):
// - REVOLVE, binomial checkpointing (Griewank 1992; Griewank & Walther, "Algorithm 799:
//   revolve", 2000): with c states kept (the initial one and c - 1 working slots), the
//   fewest forward steps, t n - beta(c + 1, t - 1) for beta(c, t - 1) < n <= beta(c, t),
//   beta(c, t) = (c + t)! / (c! t!). Reversing [a, b) from the state at a with s free slots:
//   advance to a + j, keep that state, reverse [a + j, b) with s - 1 slots, then [a, a + j)
//   with s; j = max(beta(s + 1, t - 2), n - beta(s, t)), which is optimal (checked against
//   the dynamic program of that recursion for n < 120, s < 8: tests/runtime).
// - PERIODIC: a state every `every` steps (the first of each segment), each segment
//   reversed from it with the remaining slots by the binomial rule.
// A schedule is generated lazily from an explicit stack (depth below the slots plus
// log n), so its memory does not grow with the number of steps.
#include <algorithm>
#include <cstdint>
#include <vector>

#define ADJ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum Action : int64_t { DONE = 0, ADVANCE = 1, TAKESHOT = 2, RESTORE = 3, TURN = 4 };
enum Kind : int64_t { REVOLVE = 0, PERIODIC = 1 };

constexpr int64_t CAP = int64_t(1) << 62;

// beta(s, t) = C(s + t, s), saturated at CAP (only compared with step counts below it).
int64_t beta(int64_t s, int64_t t) {
    if (s < 0 || t < 0) return 0;
    int64_t k = std::min(s, t), n = s + t;
    __int128 r = 1;
    for (int64_t i = 1; i <= k; ++i) {
        r = r * (n - k + i) / i;
        if (r >= CAP) return CAP;
    }
    return int64_t(r);
}

// The first step to keep when reversing n > 1 steps with the state at the start kept and
// s >= 1 free slots: the optimal offset of the binomial schedule.
int64_t split(int64_t n, int64_t s) {
    int64_t c = s + 1, t = 0;
    while (beta(c, t) < n) ++t;
    int64_t j = std::max(t >= 2 ? beta(c, t - 2) : int64_t(1), n - beta(c - 1, t));
    return std::clamp<int64_t>(j, 1, n - 1);
}

struct Task {
    enum Op { REVERSE, LINEAR, FREE } op;
    int64_t a, b, s, slot;   // reverse [a, b) from the state at a (in `slot`), s free slots
};

struct Schedule {
    std::vector<Task> stack;
    std::vector<int64_t> queue;   // pending actions: (action, from, to, slot) quadruples
    size_t head = 0;
    int64_t at = -1;              // the position the current state is at; -1: unknown
    int64_t next_slot = 0;        // working slots are taken and given back LIFO
    int64_t from = 0, to = 0, slot = 0;

    void emit(int64_t action, int64_t f, int64_t t, int64_t s) {
        queue.insert(queue.end(), {action, f, t, s});
    }
    void be_at(int64_t a, int64_t slot_a) {
        if (at != a) emit(RESTORE, a, a, slot_a);
        at = a;
    }
    void advance(int64_t a, int64_t b) {
        if (b > a) emit(ADVANCE, a, b, 0);
        at = b;
    }
    void turn(int64_t i) {
        emit(TURN, i, i, 0);
        at = -1;                  // the turn ran step i forward again: state unknown
    }

    void expand(const Task &k) {
        if (k.op == Task::FREE) {
            next_slot = k.slot;
            return;
        }
        if (k.op == Task::LINEAR) {   // no free slot: step b - 1 from the state at a
            be_at(k.a, k.slot);
            advance(k.a, k.b - 1);
            turn(k.b - 1);
            if (k.b - 1 > k.a) stack.push_back({Task::LINEAR, k.a, k.b - 1, 0, k.slot});
            return;
        }
        int64_t n = k.b - k.a;
        if (n <= 0) return;
        if (n == 1) {
            be_at(k.a, k.slot);
            turn(k.a);
            return;
        }
        if (k.s == 0) {
            stack.push_back({Task::LINEAR, k.a, k.b, 0, k.slot});
            return;
        }
        int64_t m = k.a + split(n, k.s);
        be_at(k.a, k.slot);
        advance(k.a, m);
        int64_t kept = next_slot++;
        emit(TAKESHOT, m, m, kept);
        // Run in this order: [m, b) with one slot fewer, give the slot back, then [a, m).
        stack.push_back({Task::REVERSE, k.a, m, k.s, k.slot});
        stack.push_back({Task::FREE, 0, 0, 0, kept});
        stack.push_back({Task::REVERSE, m, k.b, k.s - 1, kept});
    }

    int64_t next() {
        while (head == queue.size()) {
            queue.clear();
            head = 0;
            if (stack.empty()) return DONE;
            Task k = stack.back();
            stack.pop_back();
            expand(k);
        }
        int64_t action = queue[head];
        from = queue[head + 1];
        to = queue[head + 2];
        slot = queue[head + 3];
        head += 4;
        return action;
    }
};

int64_t recomputed = 0;

}  // namespace

// Steps run forward again by the reverse passes of checkpointed loops so far: they count
// what they run (an advance the augmented pass's forward sweep ran is the loop's own run,
// not counted). Tests compare it with the optimum; runtime/memory.py reads it.
ADJ_EXPORT void adj_ckpt_count(int64_t steps) {
    __atomic_fetch_add(&recomputed, steps, __ATOMIC_RELAXED);
}
ADJ_EXPORT int64_t adj_ckpt_steps_recomputed() {
    return __atomic_load_n(&recomputed, __ATOMIC_RELAXED);
}

// A schedule reversing `steps` steps. REVOLVE keeps at most `snapshots` states (the initial
// one included: snapshots - 1 working slots). PERIODIC keeps the state before every
// `every`-th step (the forward sweep: ceil(steps / every) states) and reverses each segment
// keeping all its states (every - 1 more slots): two-level checkpointing, each step run
// forward about twice. Returns the context, 0 for a bad argument.
ADJ_EXPORT int64_t adj_ckpt_new(int64_t steps, int64_t snapshots, int64_t kind,
                                int64_t every) {
    if (steps < 0 || (kind == REVOLVE && snapshots < 1) || (kind == PERIODIC && every < 1))
        return 0;
    auto *s = new Schedule();
    if (kind == REVOLVE) {
        s->stack.push_back({Task::REVERSE, 0, steps, snapshots - 1, -1});
        return reinterpret_cast<int64_t>(s);
    }
    int64_t segments = steps == 0 ? 0 : (steps + every - 1) / every;
    // Reversed last segment first (pushed last); segment k starts from the state kept in
    // slot k - 1 (segment 0: the initial state, slot -1).
    for (int64_t k = 0; k < segments; ++k) {
        int64_t a = k * every, b = std::min(steps, a + every);
        s->stack.push_back({Task::REVERSE, a, b, every - 1, k == 0 ? -1 : k - 1});
    }
    s->next_slot = std::max<int64_t>(segments - 1, 0);
    // The forward sweep, run before: from the initial state, keep each segment's start.
    if (segments > 1) s->be_at(0, -1);
    for (int64_t k = 1; k < segments; ++k) {
        s->advance((k - 1) * every, k * every);
        s->emit(TAKESHOT, k * every, k * every, k - 1);
    }
    return reinterpret_cast<int64_t>(s);
}

ADJ_EXPORT int64_t adj_ckpt_next(int64_t ctx) { return reinterpret_cast<Schedule *>(ctx)->next(); }
ADJ_EXPORT int64_t adj_ckpt_from(int64_t ctx) { return reinterpret_cast<Schedule *>(ctx)->from; }
ADJ_EXPORT int64_t adj_ckpt_to(int64_t ctx) { return reinterpret_cast<Schedule *>(ctx)->to; }
ADJ_EXPORT int64_t adj_ckpt_slot(int64_t ctx) { return reinterpret_cast<Schedule *>(ctx)->slot; }
ADJ_EXPORT void adj_ckpt_free(int64_t ctx) { delete reinterpret_cast<Schedule *>(ctx); }
