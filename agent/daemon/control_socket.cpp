#include "gpuguard/daemon/control_socket.h"

#include <cerrno>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/unique_fd.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxRequestBytes = 4096;

Result<sockaddr_un> socket_address(const std::filesystem::path& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string text = path.string();
    if (text.size() >= sizeof(address.sun_path)) {
        return fail(ErrorCode::kInvalidArgument, "control socket path too long: " + text);
    }
    std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
    return address;
}

bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
    pollfd entry{fd, events, 0};
    return poll(&entry, 1, static_cast<int>(timeout.count())) == 1;
}

}  // namespace

struct ControlServer::Impl {
    std::filesystem::path path;
    Handler handler;
    UniqueFd listener;
    UniqueFd wakeup;  // eventfd: written by the destructor to stop the thread
    std::thread thread;

    void serve() {
        pollfd fds[2] = {{listener.get(), POLLIN, 0}, {wakeup.get(), POLLIN, 0}};
        while (true) {
            if (poll(fds, 2, -1) < 0) {
                if (errno == EINTR) continue;
                logger("agent")->error("control socket: poll failed: {}", std::strerror(errno));
                return;
            }
            if (fds[1].revents) return;
            if (fds[0].revents & POLLIN) answer_one();
        }
    }

    void answer_one() {
        UniqueFd client(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (client.get() < 0) return;
        ucred peer{};
        socklen_t length = sizeof(peer);
        if (getsockopt(client.get(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
            peer.uid != 0) {
            const std::string refusal =
                R"({"error":"permission denied: the control socket is root-only"})";
            (void)!write(client.get(), refusal.data(), refusal.size());
            return;
        }
        std::string request;
        char buffer[512];
        // One line, bounded in size and time: a stuck client cannot hold the agent.
        while (request.find('\n') == std::string::npos && request.size() < kMaxRequestBytes &&
               wait_for(client.get(), POLLIN, std::chrono::milliseconds(1000))) {
            const ssize_t n = read(client.get(), buffer, sizeof(buffer));
            if (n <= 0) break;
            request.append(buffer, static_cast<size_t>(n));
        }
        std::string response;
        const auto parsed = nlohmann::json::parse(request, nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("command") ||
            !parsed["command"].is_string()) {
            response = R"({"error":"bad request: expected {\"command\": \"...\"}"})";
        } else {
            response = handler(parsed["command"].get<std::string>());
        }
        response += '\n';
        size_t sent = 0;
        while (sent < response.size() &&
               wait_for(client.get(), POLLOUT, std::chrono::milliseconds(1000))) {
            const ssize_t n = write(client.get(), response.data() + sent, response.size() - sent);
            if (n <= 0) break;
            sent += static_cast<size_t>(n);
        }
    }
};

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControlServer::ControlServer(ControlServer&&) noexcept = default;
ControlServer& ControlServer::operator=(ControlServer&&) noexcept = default;

ControlServer::~ControlServer() {
    if (!impl_) return;
    const uint64_t one = 1;
    (void)!write(impl_->wakeup.get(), &one, sizeof(one));
    if (impl_->thread.joinable()) impl_->thread.join();
    std::error_code ec;
    std::filesystem::remove(impl_->path, ec);
}

Result<ControlServer> ControlServer::start(const std::filesystem::path& path, Handler handler) {
    auto address = socket_address(path);
    if (!address) return Unexpected{address.error()};
    std::error_code ec;
    const auto dir = path.parent_path();
    if (!std::filesystem::exists(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        if (ec) {
            return fail(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message(),
                        ec.value());
        }
        chmod(dir.c_str(), 0700);
    }
    // A socket file left by a crashed agent is removed; a live agent is not displaced.
    if (std::filesystem::is_socket(path, ec)) {
        if (control_request(path, "ping", std::chrono::milliseconds(500)).ok()) {
            return fail(ErrorCode::kInvalidArgument,
                        "another gpuguard agent answers on " + path.string() +
                            ": stop it first or set control.socket to another path");
        }
        std::filesystem::remove(path, ec);
    }
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->handler = std::move(handler);
    impl->listener = UniqueFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    impl->wakeup = UniqueFd(eventfd(0, EFD_CLOEXEC));
    if (impl->listener.get() < 0 || impl->wakeup.get() < 0) {
        return fail(ErrorCode::kIo, std::string("control socket: ") + std::strerror(errno), errno);
    }
    const mode_t old_mask = umask(0177);  // the socket is created 0600
    const int bound =
        bind(impl->listener.get(), reinterpret_cast<const sockaddr*>(&address.value()),
             sizeof(sockaddr_un));
    const int bind_errno = errno;
    umask(old_mask);
    if (bound != 0 || listen(impl->listener.get(), 16) != 0) {
        const int err = bound != 0 ? bind_errno : errno;
        return fail(err == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                    "cannot listen on " + path.string() + ": " + std::strerror(err), err);
    }
    chmod(path.c_str(), 0600);
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->serve(); });
    return ControlServer(std::move(impl));
}

Result<std::string> control_request(const std::filesystem::path& path, const std::string& command,
                                    std::chrono::milliseconds timeout) {
    auto address = socket_address(path);
    if (!address) return Unexpected{address.error()};
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.value()),
                sizeof(sockaddr_un)) != 0) {
        const int err = errno;
        if (err == EACCES || err == EPERM) {
            return fail(
                ErrorCode::kPermission,
                "permission denied on " + path.string() + ": the control socket is root-only", err);
        }
        return fail(ErrorCode::kNotFound,
                    "no gpuguard agent answers on " + path.string() + " (" + std::strerror(err) +
                        "): start it with `gpuguard run`",
                    err);
    }
    const std::string request = nlohmann::json{{"command", command}}.dump() + "\n";
    if (write(fd.get(), request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
        return fail(ErrorCode::kIo, "writing to " + path.string() + ": " + std::strerror(errno),
                    errno);
    }
    std::string response;
    char buffer[4096];
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !wait_for(fd.get(), POLLIN, left)) {
            return fail(ErrorCode::kIo,
                        "the agent on " + path.string() + " did not answer in time");
        }
        const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
        if (n < 0)
            return fail(ErrorCode::kIo, std::string("reading: ") + std::strerror(errno), errno);
        if (n == 0) break;
        response.append(buffer, static_cast<size_t>(n));
    }
    const auto parsed = nlohmann::json::parse(response, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("error")) {
        const std::string message =
            parsed["error"].is_string() ? parsed["error"].get<std::string>() : "error";
        return fail(message.rfind("permission", 0) == 0 ? ErrorCode::kPermission
                                                        : ErrorCode::kInvalidArgument,
                    message);
    }
    return response;
}

}  // namespace gpuguard::agent
