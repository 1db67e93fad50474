// Network syslog transports: TCP with RFC 6587 octet counting, the same
// over TLS (RFC 5425, OpenSSL), UDP (RFC 5426) and the local unix datagram
// socket (/dev/log).
//
// Plain syslog over TCP has no application-level acknowledgement, so a
// batch counts as delivered only once the peer's TCP stack has acknowledged
// every byte (SIOCOUTQ drops to 0 while the connection stays established),
// and a connection the peer closed is detected before it is reused. What is
// left is the receiver dying with data unread in its socket buffer.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "siem/transport.h"

namespace gpuguard::siem {
namespace {

using Clock = std::chrono::steady_clock;

// Longest wait for a TLS 1.3 server to confirm (or refuse) the session.
constexpr std::chrono::milliseconds kTls13ConfirmWait{1000};

std::string errno_text(int err) { return strerror(err); }

// OpenSSL's error queue as text; when it is empty (a failed read or write
// system call), `sys_errno`'s text.
std::string ssl_error_text(int sys_errno = 0) {
    std::string text;
    while (const unsigned long code = ERR_get_error()) {
        char buffer[256];
        ERR_error_string_n(code, buffer, sizeof(buffer));
        if (!text.empty()) text += "; ";
        text += buffer;
    }
    if (text.empty()) return sys_errno != 0 ? errno_text(sys_errno) : "unknown TLS error";
    return text;
}

void set_timeouts(int fd, std::chrono::milliseconds timeout) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// Connects a socket of `type` to host:port within `timeout`; returns the fd or
// -1 with `error` set.
int connect_to(const std::string& host, uint16_t port, int type, std::chrono::milliseconds timeout,
               std::string* error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = type;
    addrinfo* result = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0) {
        *error = fmt::format("resolve {}: {}", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            *error = fmt::format("socket: {}", errno_text(errno));
            continue;
        }
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            const int ready = poll(&p, 1, static_cast<int>(timeout.count()));
            if (ready == 1) {
                int so_error = 0;
                socklen_t len = sizeof(so_error);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
                rc = so_error == 0 ? 0 : -1;
                errno = so_error;
            } else {
                rc = -1;
                if (ready == 0) errno = ETIMEDOUT;
            }
        }
        if (rc == 0) {
            const int flags = fcntl(fd, F_GETFL);
            fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
            set_timeouts(fd, timeout);
            break;
        }
        *error = fmt::format("connect {}:{}: {}", host, port, errno_text(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(result);
    return fd;
}

bool is_ip_literal(const std::string& host) {
    in6_addr v6;
    in_addr v4;
    return inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
           inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

struct SslCtxDeleter {
    void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct SslDeleter {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
};

class StreamTransport final : public Transport {
  public:
    StreamTransport(std::string host, uint16_t port, std::chrono::milliseconds timeout,
                    std::unique_ptr<SSL_CTX, SslCtxDeleter> ctx, std::string server_name)
        : host_(std::move(host)),
          port_(port),
          timeout_(timeout),
          ctx_(std::move(ctx)),
          server_name_(std::move(server_name)) {
        if (ctx_) {
            SSL_CTX_set_session_cache_mode(ctx_.get(), SSL_SESS_CACHE_CLIENT);
            SSL_CTX_sess_set_new_cb(ctx_.get(), &StreamTransport::on_new_session);
        }
    }
    ~StreamTransport() override { disconnect(); }

    Delivery deliver(const std::vector<QueuedRecord>& batch) override {
        Delivery delivery;
        if (fd_ >= 0 && !alive()) disconnect();
        if (fd_ < 0) {
            if (std::string error = connect_peer(); !error.empty()) {
                delivery.error = error;
                return delivery;
            }
        }
        std::string buffer;
        size_t payload = 0;
        for (const auto& record : batch) {
            buffer += fmt::format("{} ", record.data.size());
            buffer += record.data;
            payload += record.data.size();
        }
        if (std::string error = write_all(buffer); !error.empty()) {
            disconnect();
            delivery.error = error;
            return delivery;
        }
        if (std::string error = wait_acknowledged(); !error.empty()) {
            disconnect();
            delivery.error = error;
            return delivery;
        }
        delivery.delivered = batch.size();
        delivery.bytes = payload;
        return delivery;
    }

  private:
    std::string connect_peer() {
        std::string error;
        fd_ = connect_to(host_, port_, SOCK_STREAM, timeout_, &error);
        if (fd_ < 0) return error;
        const int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        if (!ctx_) return "";
        ssl_.reset(SSL_new(ctx_.get()));
        if (!ssl_) {
            disconnect();
            return "TLS: " + ssl_error_text();
        }
        SSL_set_fd(ssl_.get(), fd_);
        SSL_set_app_data(ssl_.get(), this);
        if (!is_ip_literal(server_name_)) {
            SSL_set_tlsext_host_name(ssl_.get(), server_name_.c_str());
        }
        if (SSL_get_verify_mode(ssl_.get()) & SSL_VERIFY_PEER) {
            if (is_ip_literal(server_name_)) {
                X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), server_name_.c_str());
            } else {
                SSL_set1_host(ssl_.get(), server_name_.c_str());
            }
        }
        ERR_clear_error();
        errno = 0;
        if (SSL_connect(ssl_.get()) != 1) {
            std::string reason = ssl_error_text(errno);
            const long verify = SSL_get_verify_result(ssl_.get());
            if (verify != X509_V_OK) {
                reason = fmt::format("certificate verification failed: {}",
                                     X509_verify_cert_error_string(verify));
            }
            disconnect();
            return fmt::format("TLS handshake with {}:{}: {}", host_, port_, reason);
        }
        if (SSL_version(ssl_.get()) >= TLS1_3_VERSION) {
            if (std::string error = confirm_tls13_handshake(); !error.empty()) {
                disconnect();
                return fmt::format("TLS handshake with {}:{}: {}", host_, port_, error);
            }
        }
        return "";
    }

    // In TLS 1.3 the client's handshake ends before the server has checked
    // the client's certificate: a server that refuses it (mutual TLS) answers
    // with an alert one round trip later, and whatever was written meanwhile
    // is acknowledged by its TCP stack and thrown away. So wait for the
    // server's first post-handshake record: a session ticket confirms the
    // session, an alert or a hang-up refuses it. A server that sends no
    // tickets costs one bounded wait per connection.
    std::string confirm_tls13_handshake() {
        ticket_seen_ = false;
        const auto deadline = Clock::now() + std::min(timeout_, kTls13ConfirmWait);
        const int flags = fcntl(fd_, F_GETFL);
        fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
        std::string error;
        while (!ticket_seen_) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            if (left.count() <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, static_cast<int>(left.count())) != 1) continue;
            char byte;
            ERR_clear_error();
            const int n = SSL_read(ssl_.get(), &byte, 1);
            const int code = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_.get(), n);
            if (n > 0 || code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) continue;
            error = code == SSL_ERROR_ZERO_RETURN || ERR_peek_error() == 0
                        ? std::string("the server closed the session")
                        : "the server refused the session: " + ssl_error_text();
            break;
        }
        fcntl(fd_, F_SETFL, flags);
        return error;
    }

    // OpenSSL's new-session callback: a TLS 1.3 ticket arrived. The session
    // itself is not kept (returning 0 lets OpenSSL free it).
    static int on_new_session(SSL* ssl, SSL_SESSION*) {
        if (auto* self = static_cast<StreamTransport*>(SSL_get_app_data(ssl))) {
            self->ticket_seen_ = true;
        }
        return 0;
    }

    void disconnect() {
        if (ssl_) {
            SSL_shutdown(ssl_.get());
            ssl_.reset();
        }
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
    }

    // False when the peer closed or reset the connection since the last batch.
    bool alive() {
        pollfd p{fd_, POLLIN | POLLRDHUP, 0};
        if (poll(&p, 1, 0) < 0) return false;
        if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
        if (!(p.revents & POLLIN)) return true;
        // Receivers send nothing on a syslog stream but TLS records
        // (session tickets, close_notify); read them without blocking.
        char buffer[4096];
        const int flags = fcntl(fd_, F_GETFL);
        fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
        bool ok = true;
        if (ssl_) {
            for (;;) {
                ERR_clear_error();
                const int n = SSL_read(ssl_.get(), buffer, sizeof(buffer));
                if (n > 0) continue;
                const int code = SSL_get_error(ssl_.get(), n);
                ok = code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE;
                break;
            }
        } else {
            const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
            ok = n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        }
        fcntl(fd_, F_SETFL, flags);
        return ok;
    }

    std::string write_all(const std::string& buffer) {
        size_t done = 0;
        while (done < buffer.size()) {
            if (ssl_) {
                ERR_clear_error();
                errno = 0;
                const int n =
                    SSL_write(ssl_.get(), buffer.data() + done,
                              static_cast<int>(std::min<size_t>(buffer.size() - done, 1 << 30)));
                if (n <= 0) return "TLS write: " + ssl_error_text(errno);
                done += static_cast<size_t>(n);
            } else {
                const ssize_t n =
                    send(fd_, buffer.data() + done, buffer.size() - done, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0)
                    return fmt::format("send to {}:{}: {}", host_, port_, errno_text(errno));
                done += static_cast<size_t>(n);
            }
        }
        return "";
    }

    // Waits until the peer has acknowledged every byte written.
    std::string wait_acknowledged() {
        const auto deadline = Clock::now() + timeout_;
        for (int round = 0;; ++round) {
            int outq = 0;
            if (ioctl(fd_, SIOCOUTQ, &outq) != 0) return "SIOCOUTQ: " + errno_text(errno);
            tcp_info info{};
            socklen_t len = sizeof(info);
            getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &info, &len);
            if (info.tcpi_state != TCP_ESTABLISHED && info.tcpi_state != TCP_CLOSE_WAIT) {
                return fmt::format("connection to {}:{} closed before acknowledging", host_, port_);
            }
            if (outq == 0) return "";
            if (Clock::now() >= deadline) {
                return fmt::format("{}:{} did not acknowledge {} bytes in time", host_, port_,
                                   outq);
            }
            if (round < 50) {
                std::this_thread::yield();
            } else {
                pollfd p{fd_, POLLRDHUP, 0};
                poll(&p, 1, 1);
                if (p.revents & (POLLERR | POLLHUP)) {
                    return fmt::format("connection to {}:{} reset", host_, port_);
                }
            }
        }
    }

    std::string host_;
    uint16_t port_;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<SSL_CTX, SslCtxDeleter> ctx_;
    std::string server_name_;
    int fd_ = -1;
    std::unique_ptr<SSL, SslDeleter> ssl_;
    bool ticket_seen_ = false;
};

// One datagram per record: UDP (RFC 5426) or a unix datagram socket.
class DatagramTransport final : public Transport {
  public:
    DatagramTransport(std::string host, uint16_t port, std::string unix_path,
                      std::chrono::milliseconds timeout)
        : host_(std::move(host)),
          port_(port),
          unix_path_(std::move(unix_path)),
          timeout_(timeout) {}
    ~DatagramTransport() override {
        if (fd_ >= 0) close(fd_);
    }

    Delivery deliver(const std::vector<QueuedRecord>& batch) override {
        Delivery delivery;
        if (fd_ < 0) {
            if (std::string error = open_socket(); !error.empty()) {
                delivery.error = error;
                return delivery;
            }
        }
        // Over IPv4/IPv6 a datagram holds at most 65507 bytes of payload.
        const size_t limit = unix_path_.empty() ? 65507 : SIZE_MAX;
        for (const auto& record : batch) {
            const size_t size = std::min(record.data.size(), limit);
            const ssize_t n = send(fd_, record.data.data(), size, MSG_NOSIGNAL);
            if (n < 0 && errno == EMSGSIZE) {
                ++delivery.rejected;
                continue;
            }
            if (n < 0) {
                delivery.error = fmt::format("send to {}: {}", where(), errno_text(errno));
                close(fd_);
                fd_ = -1;
                return delivery;
            }
            ++delivery.delivered;
            delivery.bytes += size;
        }
        return delivery;
    }

  private:
    std::string where() const {
        return unix_path_.empty() ? fmt::format("{}:{}", host_, port_) : unix_path_;
    }

    std::string open_socket() {
        if (unix_path_.empty()) {
            std::string error;
            fd_ = connect_to(host_, port_, SOCK_DGRAM, timeout_, &error);
            return fd_ < 0 ? error : "";
        }
        fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return "socket: " + errno_text(errno);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, unix_path_.c_str(), sizeof(addr.sun_path) - 1);
        if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
            const int err = errno;
            close(fd_);
            fd_ = -1;
            return fmt::format("connect {}: {}", unix_path_, errno_text(err));
        }
        set_timeouts(fd_, timeout_);
        return "";
    }

    std::string host_;
    uint16_t port_;
    std::string unix_path_;
    std::chrono::milliseconds timeout_;
    int fd_ = -1;
};

}  // namespace

Result<std::pair<std::string, uint16_t>> split_host_port(const std::string& address) {
    std::string host;
    std::string port_text;
    if (!address.empty() && address.front() == '[') {
        const auto close = address.find(']');
        if (close == std::string::npos || close + 1 >= address.size() ||
            address[close + 1] != ':') {
            return fail(ErrorCode::kInvalidArgument,
                        fmt::format("address '{}': expected [v6]:port", address));
        }
        host = address.substr(1, close - 1);
        port_text = address.substr(close + 2);
    } else {
        const auto colon = address.rfind(':');
        if (colon == std::string::npos || colon == 0) {
            return fail(ErrorCode::kInvalidArgument,
                        fmt::format("address '{}': expected host:port", address));
        }
        host = address.substr(0, colon);
        port_text = address.substr(colon + 1);
    }
    unsigned long port = 0;
    try {
        size_t used = 0;
        port = std::stoul(port_text, &used);
        if (used != port_text.size()) port = 0;
    } catch (...) {
        port = 0;
    }
    if (port == 0 || port > 65535 || host.empty()) {
        return fail(ErrorCode::kInvalidArgument,
                    fmt::format("address '{}': bad host or port", address));
    }
    return std::make_pair(host, static_cast<uint16_t>(port));
}

Result<std::unique_ptr<Transport>> make_stream_transport(const SinkConfig& sink) {
    auto address = split_host_port(sink.address);
    if (!address) return Unexpected{address.error()};
    auto [host, port] = address.value();
    std::unique_ptr<SSL_CTX, SslCtxDeleter> ctx;
    if (sink.type == SinkType::kTls) {
        ctx.reset(SSL_CTX_new(TLS_client_method()));
        if (!ctx) return fail(ErrorCode::kInternal, "TLS: " + ssl_error_text());
        SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
        const auto bad = [&](const std::string& what) {
            return fail(ErrorCode::kInvalidArgument,
                        fmt::format("sink '{}': {}: {}", sink.name, what, ssl_error_text()));
        };
        if (sink.tls_verify) {
            if (!sink.tls_ca_file.empty()) {
                if (SSL_CTX_load_verify_locations(ctx.get(), sink.tls_ca_file.c_str(), nullptr) !=
                    1) {
                    return bad("cannot load tls_ca_file " + sink.tls_ca_file);
                }
            } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
                return bad("cannot load the system trust store");
            }
            SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
        } else {
            SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
        }
        if (!sink.tls_cert_file.empty()) {
            if (SSL_CTX_use_certificate_chain_file(ctx.get(), sink.tls_cert_file.c_str()) != 1) {
                return bad("cannot load tls_cert_file " + sink.tls_cert_file);
            }
            const std::string& key =
                sink.tls_key_file.empty() ? sink.tls_cert_file : sink.tls_key_file;
            if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1 ||
                SSL_CTX_check_private_key(ctx.get()) != 1) {
                return bad("cannot load tls_key_file " + key);
            }
        }
    }
    const std::string server_name = sink.tls_server_name.empty() ? host : sink.tls_server_name;
    return std::unique_ptr<Transport>(std::make_unique<StreamTransport>(
        host, port, sink.io_timeout, std::move(ctx), server_name));
}

Result<std::unique_ptr<Transport>> make_datagram_transport(const SinkConfig& sink) {
    if (sink.type == SinkType::kLocalSyslog) {
        const std::string path = sink.address.empty() ? "/dev/log" : sink.address;
        if (path.size() >= sizeof(sockaddr_un::sun_path)) {
            return fail(ErrorCode::kInvalidArgument,
                        fmt::format("sink '{}': socket path too long: {}", sink.name, path));
        }
        return std::unique_ptr<Transport>(
            std::make_unique<DatagramTransport>("", 0, path, sink.io_timeout));
    }
    auto address = split_host_port(sink.address);
    if (!address) return Unexpected{address.error()};
    return std::unique_ptr<Transport>(
        std::make_unique<DatagramTransport>(address->first, address->second, "", sink.io_timeout));
}

}  // namespace gpuguard::siem
