// The counting allocator of compiled code and Python (runtime/memory.py says what it is for).
//
// Compiled modules lower memref.alloc/dealloc to calls of `_mlir_memref_to_llvm_alloc` and
// `_mlir_memref_to_llvm_free` (passes/pipeline.py). runtime/memory.py loads this extension
// RTLD_GLOBAL, so the shared objects of the disk cache find these functions by name, and
// registers their addresses with every ExecutionEngine. It is native code because the async
// runtime's worker threads allocate, where a Python callback would need the GIL; it is part of
// the extension `pip install` builds, so that no process compiles it at run time.
//
// Each block has a 32-byte header before its data pointer p:
//   p[-1] the requested size, p[-2] the offset from the block's start to p,
//   p[-3] the kind (1: a cacheable large block), p[-4] its capacity (large blocks only).
// Counters and the slots of kept blocks are updated with atomic instructions, no locks.
#include <cstdint>
#include <cstdlib>

#define ADJ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// runtime/memory.py spells these the same way (CACHE_MIN_BYTES, CACHE_SLOTS, CACHE_LIMIT_BYTES).
constexpr int64_t CACHE_MIN = int64_t(1) << 20;
constexpr int SLOTS = 64;
constexpr int64_t LIMIT = int64_t(256) << 20;
constexpr int64_t HUGE = int64_t(1) << 40;   // never cached: 2 * size would overflow nothing
constexpr int64_t HEADER = 32;
constexpr int64_t PAGE = 4096;

int64_t slots[SLOTS];   // kept blocks' data pointers (0: empty)
int64_t caps[SLOTS];    // their capacities, as hints read without taking the slot

int64_t load(const int64_t *at) { return __atomic_load_n(at, __ATOMIC_RELAXED); }
int64_t add(int64_t *at, int64_t v) { return __atomic_fetch_add(at, v, __ATOMIC_SEQ_CST); }
int64_t *header(void *p) { return static_cast<int64_t *>(p); }
void *block_of(void *p) { return static_cast<char *>(p) - header(p)[-2]; }

}  // namespace

ADJ_EXPORT int64_t adj_bytes_in_use = 0;
ADJ_EXPORT int64_t adj_peak_bytes = 0;
ADJ_EXPORT int64_t adj_cached_bytes = 0;    // kept for reuse, not in use
ADJ_EXPORT int64_t adj_cache_limit = LIMIT;

// Frees every kept block; returns their capacities' sum.
ADJ_EXPORT int64_t adj_release_cached_memory() {
    int64_t total = 0;
    for (int i = 0; i < SLOTS; ++i) {
        int64_t b = __atomic_exchange_n(&slots[i], 0, __ATOMIC_SEQ_CST);
        if (!b) continue;
        void *p = reinterpret_cast<void *>(b);
        int64_t cap = header(p)[-4];
        add(&adj_cached_bytes, -cap);
        std::free(block_of(p));
        total += cap;
    }
    return total;
}

namespace {

void *checked_malloc(int64_t total) {
    void *block = std::malloc(size_t(total));
    if (!block && adj_release_cached_memory() != 0) block = std::malloc(size_t(total));
    return block;
}

// `bytes` of data on an `align` boundary (a power of 2) after the header, which gets its
// offset and kind; the data pointer, or null.
void *aligned(int64_t bytes, int64_t align, int64_t kind) {
    char *block = static_cast<char *>(checked_malloc(bytes + HEADER + align));
    if (!block) return nullptr;
    uintptr_t lowest = reinterpret_cast<uintptr_t>(block) + HEADER;
    uintptr_t at = (lowest + uintptr_t(align) - 1) & ~(uintptr_t(align) - 1);
    void *p = reinterpret_cast<void *>(at);
    header(p)[-2] = int64_t(at - reinterpret_cast<uintptr_t>(block));
    header(p)[-3] = kind;
    return p;
}

// Keeps large block `p` in a free slot; false where all are taken.
bool cache_put(void *p, int64_t cap) {
    int64_t value = int64_t(reinterpret_cast<uintptr_t>(p));
    for (int i = 0; i < SLOTS; ++i) {
        if (load(&slots[i]) != 0) continue;
        int64_t empty = 0;
        if (__atomic_compare_exchange_n(&slots[i], &empty, value, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            __atomic_store_n(&caps[i], cap, __ATOMIC_RELAXED);
            return true;
        }
    }
    return false;
}

// A kept block of capacity in [size, 2 size), the smallest such; null if none.
void *take_kept(int64_t size) {
    int best = -1;
    int64_t best_cap = -1;   // as unsigned: the largest
    for (int i = 0; i < SLOTS; ++i) {
        if (load(&slots[i]) == 0) continue;
        uint64_t hint = uint64_t(load(&caps[i]));
        if (hint >= uint64_t(size) && hint < uint64_t(2 * size) && hint < uint64_t(best_cap)) {
            best = i;
            best_cap = int64_t(hint);
        }
    }
    if (best < 0) return nullptr;
    int64_t b = __atomic_exchange_n(&slots[best], 0, __ATOMIC_SEQ_CST);
    if (!b) return nullptr;                   // another thread took it
    void *p = reinterpret_cast<void *>(b);
    int64_t cap = header(p)[-4];              // the hint may be stale: check the block's own
    if (cap >= size && cap < 2 * size) {
        add(&adj_cached_bytes, -cap);
        return p;
    }
    if (!cache_put(p, cap)) {
        add(&adj_cached_bytes, -cap);
        std::free(block_of(p));
    }
    return nullptr;
}

}  // namespace

ADJ_EXPORT void *_mlir_memref_to_llvm_alloc(int64_t size) {
    void *p;
    if (size >= CACHE_MIN && size < HUGE) {
        p = take_kept(size);
        if (!p) {
            int64_t cap = (size + PAGE - 1) & -PAGE;
            p = aligned(cap, PAGE, 1);
            if (!p) return nullptr;
            header(p)[-4] = cap;
        }
    } else {
        // A cache line; from 64 KiB on, a page: two arrays at different offsets within a
        // page make a kernel's loads of one falsely wait on its stores to the other (4K
        // aliasing: a stencil over heap-placed 256 KiB arrays ran 6x slower).
        p = aligned(size, size >= 65536 ? PAGE : 64, 0);
        if (!p) return nullptr;
    }
    header(p)[-1] = size;
    int64_t now = add(&adj_bytes_in_use, size) + size;
    int64_t peak = load(&adj_peak_bytes);
    while (now > peak && !__atomic_compare_exchange_n(&adj_peak_bytes, &peak, now, true,
                                                      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return p;
}

ADJ_EXPORT void _mlir_memref_to_llvm_free(void *p) {
    if (!p) return;
    add(&adj_bytes_in_use, -header(p)[-1]);
    if (header(p)[-3] == 1) {
        int64_t cap = header(p)[-4];
        int64_t after = add(&adj_cached_bytes, cap) + cap;
        if (after <= load(&adj_cache_limit) && cache_put(p, cap)) return;
        add(&adj_cached_bytes, -cap);
    }
    std::free(block_of(p));
}
