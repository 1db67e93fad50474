// Runs a function in a forked child named `comm` and reaps it. Tests use it
// so that every event they expect comes from a pid they started.
#pragma once

#include <functional>
#include <string>

#include <sys/types.h>

namespace gpuguard::testing {

// Forks, sets the child's comm, runs `body` (which must only make
// async-signal-safe calls) and _exit()s with its return value. Waits for the
// child and returns its pid; `exit_code` receives its exit status.
pid_t run_in_child(const std::string& comm, const std::function<int()>& body,
                   int* exit_code = nullptr);

// Kills (SIGKILL) and reaps a child the test started, when the scope ends.
class ChildReaper {
  public:
    explicit ChildReaper(pid_t pid) : pid_(pid) {}
    ~ChildReaper();
    ChildReaper(const ChildReaper&) = delete;
    ChildReaper& operator=(const ChildReaper&) = delete;

  private:
    pid_t pid_;
};

}  // namespace gpuguard::testing
