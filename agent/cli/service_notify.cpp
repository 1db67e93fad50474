#include "service_notify.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <systemd/sd-daemon.h>

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {

ServiceNotifier::ServiceNotifier() {
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        watchdog_interval_ = std::chrono::microseconds(usec);
        logger("agent")->info("systemd watchdog: every {} ms, pinged every {} ms", usec / 1000,
                              usec / 4000);
    }
}

void ServiceNotifier::notify(const std::string& message) {
    const int sent = sd_notify(0, message.c_str());
    if (sent < 0 && !send_failed_logged_) {
        send_failed_logged_ = true;
        logger("agent")->warn("sd_notify {}: {} (NOTIFY_SOCKET={})", message, std::strerror(-sent),
                              std::getenv("NOTIFY_SOCKET") ? std::getenv("NOTIFY_SOCKET") : "");
    }
}

void ServiceNotifier::ready(const std::string& status) {
    notify("READY=1\nSTATUS=" + status);
    last_ping_ = std::chrono::steady_clock::now();
}

void ServiceNotifier::reloading() { notify("RELOADING=1"); }

void ServiceNotifier::stopping() { notify("STOPPING=1"); }

void ServiceNotifier::ping_watchdog_if_due() {
    if (!watchdog_enabled()) return;
    const auto now = std::chrono::steady_clock::now();
    // A quarter interval: a loop slowed by a loaded host (a watchdog kill
    // needs three pings missed in a row) is not taken for a stuck one.
    if (now - last_ping_ < watchdog_interval_ / 4) return;
    last_ping_ = now;
    notify("WATCHDOG=1");
}

}  // namespace gpuguard::agent
