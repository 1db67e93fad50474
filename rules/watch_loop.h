// What both rule watchers (watcher.cpp: miner-rules; guard_watcher.cpp:
// correlation files and guard policies) do on their own thread: wait for
// inotify events that matter, let an editor finish writing, reload; and how
// they report a rejected change.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "gpuguard/common/inotify.h"
#include "gpuguard/common/logging.h"

namespace gpuguard::rules {

// Runs until `stop_fd` is readable: after an inotify event `relevant`
// accepts and `debounce` of quiet, `reload` runs.
inline void run_watch_loop(int inotify_fd, int stop_fd, std::chrono::milliseconds debounce,
                           const InotifyFilter& relevant, const std::function<void()>& reload,
                           const char* name) {
    const auto drain = [&] { return drain_inotify(inotify_fd, relevant); };
    pollfd fds[2] = {{inotify_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            logger("rules")->error("{} stopped: poll: {}", name, std::strerror(errno));
            return;
        }
        if (fds[1].revents) return;
        if (!drain()) continue;
        // Debounce: editors write in several steps; wait for quiet.
        for (;;) {
            const int ready = poll(fds, 2, static_cast<int>(debounce.count()));
            if (ready > 0 && fds[1].revents) return;
            if (ready <= 0) break;
            drain();
        }
        reload();
    }
}

// Logs `headline`, then each line of `problems` indented (logger "rules").
inline void log_rejection(const std::string& headline, const std::string& problems) {
    auto log = logger("rules");
    log->error("{}", headline);
    size_t start = 0;
    while (start <= problems.size()) {
        const size_t end = std::min(problems.find('\n', start), problems.size());
        log->error("  {}", problems.substr(start, end - start));
        start = end + 1;
    }
}

}  // namespace gpuguard::rules
