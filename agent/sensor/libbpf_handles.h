// Owning handles for libbpf's objects (links, ring buffers, skeletons),
// shared by the sensor's sources: unique_ptr with the object's own
// destructor function.
#pragma once

#include <memory>

#include <bpf/libbpf.h>

namespace gpuguard::agent {

// Calls Destroy (bpf_link__destroy, a skeleton's __destroy, ...) on the held pointer.
template <auto Destroy>
struct LibbpfDestroy {
    template <typename T>
    void operator()(T* object) const {
        Destroy(object);
    }
};

template <typename T, auto Destroy>
using LibbpfPtr = std::unique_ptr<T, LibbpfDestroy<Destroy>>;

using LinkPtr = LibbpfPtr<bpf_link, bpf_link__destroy>;
using RingBufferPtr = LibbpfPtr<ring_buffer, ring_buffer__free>;

}  // namespace gpuguard::agent
