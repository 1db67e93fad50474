// The service manager's side of `Type=notify` (packaging/gpuguard.service):
// READY=1 once the sensor is attached, WATCHDOG=1 from the agent's loop,
// RELOADING=1 around a configuration reload, STOPPING=1 on the way out.
// Without $NOTIFY_SOCKET (not started by systemd) every call does nothing.
#pragma once

#include <chrono>
#include <string>

namespace gpuguard::agent {

class ServiceNotifier {
  public:
    // Reads $NOTIFY_SOCKET and the watchdog interval ($WATCHDOG_USEC, for
    // this pid when $WATCHDOG_PID is set).
    ServiceNotifier();
    ServiceNotifier(const ServiceNotifier&) = delete;
    ServiceNotifier& operator=(const ServiceNotifier&) = delete;

    bool watchdog_enabled() const { return watchdog_interval_.count() > 0; }

    // Each sends one datagram; a failure to send is logged once, never fatal.
    void ready(const std::string& status);
    void reloading();
    void stopping();

    // Sends WATCHDOG=1 when half the watchdog interval has passed since the
    // last one. Call it from the loop whose progress the watchdog vouches for.
    void ping_watchdog_if_due();

  private:
    void notify(const std::string& message);

    std::chrono::microseconds watchdog_interval_{0};
    std::chrono::steady_clock::time_point last_ping_{};
    bool send_failed_logged_ = false;
};

}  // namespace gpuguard::agent
