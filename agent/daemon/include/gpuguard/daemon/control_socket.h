// The agent's control socket: a Unix stream socket, root-only (mode 0600 in a
// 0700 directory, and the peer's uid checked with SO_PEERCRED), answering one
// JSON request line with one JSON document. Backs `gpuguard status` and
// `gpuguard ps`.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "gpuguard/common/result.h"

namespace gpuguard::agent {

inline constexpr const char* kDefaultControlSocket = "/run/gpuguard/control.sock";

class ControlServer {
  public:
    // Gets the request's "command" and returns the response document.
    using Handler = std::function<std::string(const std::string& command)>;

    // Binds `path` and serves on its own thread until destroyed. Fails with
    // kInvalidArgument when another agent already answers there.
    static Result<ControlServer> start(const std::filesystem::path& path, Handler handler);

    ControlServer(ControlServer&&) noexcept;
    ControlServer& operator=(ControlServer&&) noexcept;
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;
    ~ControlServer();  // stops the thread, removes the socket file

  private:
    struct Impl;
    explicit ControlServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Sends {"command": command} to the agent at `path` and returns its answer.
// kNotFound when no agent listens there, kPermission when not allowed.
Result<std::string> control_request(const std::filesystem::path& path, const std::string& command,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace gpuguard::agent
