// `memrefCopy`, which compiled code calls for a memref.copy between memrefs that are not one
// contiguous block (finalize-memref-to-llvm lowers the contiguous case to a memcpy). MLIR's
// own is in libmlir_c_runner_utils, which links libMLIR and costs ~40 ms to load in every
// process that needs it; this one has the same signature and meaning, and is found the same
// way (the extension is loaded RTLD_GLOBAL; ExecutionEngines are given its address).
#include <cstdint>
#include <cstring>
#include <memory>

namespace {

struct Unranked {            // UnrankedMemRefType: a rank and a ranked descriptor
    int64_t rank;
    void *descriptor;
};

struct Ranked {              // the ranked descriptor's fixed part; sizes, strides follow
    char *allocated;
    char *aligned;
    int64_t offset;
    int64_t sizes_strides[];
};

}  // namespace

extern "C" __attribute__((visibility("default"))) void memrefCopy(int64_t elem_size,
                                                                   Unranked *src_arg,
                                                                   Unranked *dst_arg) {
    int64_t rank = src_arg->rank;
    auto *src = static_cast<Ranked *>(src_arg->descriptor);
    auto *dst = static_cast<Ranked *>(dst_arg->descriptor);
    char *s = src->aligned + src->offset * elem_size;
    char *d = dst->aligned + dst->offset * elem_size;
    if (rank == 0) {
        std::memcpy(d, s, size_t(elem_size));
        return;
    }
    const int64_t *sizes = src->sizes_strides;
    const int64_t *s_strides = src->sizes_strides + rank;
    const int64_t *d_strides = dst->sizes_strides + rank;
    for (int64_t k = 0; k < rank; ++k)
        if (sizes[k] == 0) return;
    // Rows along the last dimension, which are one block where both strides are 1.
    int64_t last = rank - 1, n = sizes[last];
    bool rows = s_strides[last] == 1 && d_strides[last] == 1;
    int64_t on_stack[16] = {0};
    std::unique_ptr<int64_t[]> on_heap(rank > 16 ? new int64_t[rank]() : nullptr);
    int64_t *index = rank > 16 ? on_heap.get() : on_stack;
    for (;;) {
        if (rows) {
            std::memcpy(d, s, size_t(n * elem_size));
        } else {
            for (int64_t i = 0; i < n; ++i)
                std::memcpy(d + i * d_strides[last] * elem_size,
                            s + i * s_strides[last] * elem_size, size_t(elem_size));
        }
        // The next row: odometer over the outer dimensions.
        int64_t k = last - 1;
        for (; k >= 0; --k) {
            s += s_strides[k] * elem_size;
            d += d_strides[k] * elem_size;
            if (++index[k] < sizes[k]) break;
            s -= sizes[k] * s_strides[k] * elem_size;
            d -= sizes[k] * d_strides[k] * elem_size;
            index[k] = 0;
        }
        if (k < 0) return;
    }
}
