// Reading an inotify descriptor: what the config watcher and the rule
// watchers share. Header-only.
#pragma once

#include <functional>
#include <string_view>

#include <sys/inotify.h>
#include <unistd.h>

namespace gpuguard {

using InotifyFilter = std::function<bool(const inotify_event&)>;

// Whether an event's name is a Kubernetes ConfigMap (or Secret) volume's
// `..data` link, which kubelet swaps (a rename of `..data_tmp`) to a new
// directory on every update: the files, links through it, see no event of
// their own, so every watcher of such a file watches this name too.
inline bool is_configmap_swap(std::string_view name) { return name == "..data"; }

// Reads every pending event of the non-blocking `inotify_fd`; true when
// `relevant` accepts one of them (each is shown to it).
inline bool drain_inotify(int inotify_fd, const InotifyFilter& relevant) {
    alignas(inotify_event) char buffer[16 * 1024];
    bool any = false;
    for (;;) {
        const ssize_t n = read(inotify_fd, buffer, sizeof buffer);
        if (n <= 0) break;  // EAGAIN: nothing more queued
        for (ssize_t offset = 0; offset < n;) {
            const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
            any |= relevant(*event);
            offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
        }
    }
    return any;
}

}  // namespace gpuguard
