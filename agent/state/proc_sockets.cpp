#include "gpuguard/state/proc_sockets.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include <arpa/inet.h>
#include <unistd.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/read_file.h"

namespace gpuguard::agent {
namespace {

constexpr uint8_t kEstablished = 1;
constexpr uint8_t kListen = 0x0a;

std::string_view next_token(std::string_view& line) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const size_t end = std::min(line.find(' '), line.size());
    const std::string_view token = line.substr(0, end);
    line.remove_prefix(end);
    return token;
}

template <typename T>
bool hex_number(std::string_view text, T& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    return error == std::errc{} && end == text.data() + text.size() && !text.empty();
}

// "0100007F:0277" (v4: one 32-bit word as the kernel printed it, in host
// byte order) or 32 hex digits (v6: four such words), then the port.
bool parse_endpoint(std::string_view text, bool v6, TcpRow& row) {
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos) return false;
    const std::string_view address = text.substr(0, colon);
    if (!hex_number(text.substr(colon + 1), row.remote_port)) return false;
    uint8_t bytes[16];
    const size_t words = v6 ? 4 : 1;
    if (address.size() != words * 8) return false;
    for (size_t i = 0; i < words; ++i) {
        uint32_t word = 0;
        if (!hex_number(address.substr(i * 8, 8), word)) return false;
        std::memcpy(bytes + i * 4, &word, 4);  // back to the kernel's (network) byte order
    }
    char out[INET6_ADDRSTRLEN];
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (v6 && std::memcmp(bytes, kMapped, sizeof(kMapped)) == 0) {
        row.v4_mapped = true;
        row.ip_version = 4;
        if (!inet_ntop(AF_INET, bytes + 12, out, sizeof(out))) return false;
    } else {
        row.ip_version = v6 ? 6 : 4;
        if (!inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, out, sizeof(out))) return false;
    }
    row.remote_address = out;
    return true;
}

bool loopback(const TcpRow& row) { return loopback_ip(row.remote_address); }

// "" when it cannot be read (the process is gone: ESRCH mid-read too).
std::string read_text(const std::filesystem::path& path) {
    auto text = read_file(path);
    return text ? std::move(text).value() : std::string{};
}

}  // namespace

std::vector<TcpRow> parse_proc_net_tcp(std::string_view text, bool v6) {
    std::vector<TcpRow> rows;
    bool header = true;
    while (!text.empty()) {
        const size_t end = std::min(text.find('\n'), text.size());
        std::string_view line = text.substr(0, end);
        text.remove_prefix(std::min(end + 1, text.size()));
        if (std::exchange(header, false)) continue;
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
        TcpRow row;
        const std::string_view slot = next_token(line);
        const std::string_view local = next_token(line);
        const std::string_view remote = next_token(line);
        const std::string_view state = next_token(line);
        const size_t local_colon = local.find(':');
        if (slot.empty() || local_colon == std::string_view::npos ||
            !hex_number(local.substr(local_colon + 1), row.local_port) ||
            !parse_endpoint(remote, v6, row) || !hex_number(state, row.state)) {
            continue;
        }
        for (int skip = 0; skip < 5; ++skip)
            next_token(line);  // tx:rx tr:when retrnsmt uid timeout
        const std::string_view inode = next_token(line);
        const auto [last, error] =
            std::from_chars(inode.data(), inode.data() + inode.size(), row.inode);
        if (error != std::errc{} || last != inode.data() + inode.size()) continue;
        rows.push_back(std::move(row));
    }
    return rows;
}

namespace {

// The socket inodes the fds of the process in `dir` hold, with the fd.
std::unordered_map<uint64_t, int> socket_fds(const std::filesystem::path& dir) {
    std::unordered_map<uint64_t, int> fd_of_inode;
    const auto fds = list_numbered_entries(dir / "fd");
    if (!fds) return fd_of_inode;
    for (const uint32_t fd : fds.value()) {
        char target[64];
        const std::string link = (dir / "fd" / std::to_string(fd)).string();
        const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
        if (n <= 0) continue;
        const std::string_view text(target, static_cast<size_t>(n));
        if (!text.starts_with("socket:[") || !text.ends_with("]")) continue;
        uint64_t inode = 0;
        const std::string_view digits = text.substr(8, text.size() - 9);
        const auto [last, error] =
            std::from_chars(digits.data(), digits.data() + digits.size(), inode);
        if (error == std::errc{} && last == digits.data() + digits.size()) {
            fd_of_inode.emplace(inode, static_cast<int>(fd));
        }
    }
    return fd_of_inode;
}

// The TCP rows of the network namespace of the process in `dir`.
std::vector<TcpRow> tcp_rows(const std::filesystem::path& dir) {
    std::vector<TcpRow> rows;
    for (const bool v6 : {false, true}) {
        for (TcpRow& row : parse_proc_net_tcp(read_text(dir / "net" / (v6 ? "tcp6" : "tcp")), v6)) {
            rows.push_back(std::move(row));
        }
    }
    return rows;
}

// The connections the process made (not accepted) that are established,
// loopback ones or the others.
std::vector<Connect> made_connections(const std::filesystem::path& proc_root, uint32_t pid,
                                      bool loopback_ones, bool gpu_holder) {
    const std::filesystem::path dir = proc_root / std::to_string(pid);
    const auto fd_of_inode = socket_fds(dir);
    std::vector<Connect> connects;
    if (fd_of_inode.empty()) return connects;
    const std::vector<TcpRow> rows = tcp_rows(dir);
    // Ports something listens on: a connection on one was accepted, not made.
    std::unordered_set<uint16_t> listening;
    for (const TcpRow& row : rows) {
        if (row.state == kListen) listening.insert(row.local_port);
    }
    for (const TcpRow& row : rows) {
        const auto fd = fd_of_inode.find(row.inode);
        if (row.state != kEstablished || fd == fd_of_inode.end() ||
            loopback(row) != loopback_ones || listening.contains(row.local_port)) {
            continue;
        }
        Connect connect;
        connect.fd = fd->second;
        connect.result = 0;
        connect.ip_version = row.ip_version;
        connect.v4_mapped = row.v4_mapped;
        connect.address = row.remote_address;
        connect.port = row.remote_port;
        connect.loopback = loopback_ones;
        connect.watched_tgid = !gpu_holder;
        connect.gpu_holder = gpu_holder;
        connect.established = true;
        connects.push_back(std::move(connect));
    }
    return connects;
}

}  // namespace

std::vector<Connect> established_connects(const std::filesystem::path& proc_root, uint32_t pid,
                                          bool gpu_holder) {
    return made_connections(proc_root, pid, false, gpu_holder);
}

std::vector<Connect> established_loopback_connects(const std::filesystem::path& proc_root,
                                                   uint32_t pid) {
    return made_connections(proc_root, pid, true, false);
}

std::optional<uint32_t> server_of(const std::filesystem::path& proc_root, uint32_t pid,
                                  uint16_t port) {
    const std::filesystem::path dir = proc_root / std::to_string(pid);
    const std::vector<TcpRow> rows = tcp_rows(dir);
    // The client's end: its established loopback connection to `port`.
    const auto client_sockets = socket_fds(dir);
    std::unordered_set<uint16_t> client_ports;
    for (const TcpRow& row : rows) {
        if (row.state == kEstablished && row.remote_port == port && loopback(row) &&
            client_sockets.contains(row.inode)) {
            client_ports.insert(row.local_port);
        }
    }
    // The other end: the socket the server accepted (held by whichever of
    // its processes serves the connection: a forking forwarder's child),
    // else the one that listens on the port.
    std::unordered_set<uint64_t> accepted, listening;
    for (const TcpRow& row : rows) {
        if (row.local_port != port) continue;
        if (row.state == kEstablished && loopback(row) && client_ports.contains(row.remote_port)) {
            accepted.insert(row.inode);
        } else if (row.state == kListen) {
            listening.insert(row.inode);
        }
    }
    if (accepted.empty() && listening.empty()) return std::nullopt;
    // Only processes of the same network namespace can hold them.
    std::error_code error;
    const auto netns = std::filesystem::read_symlink(dir / "ns" / "net", error);
    if (error) return std::nullopt;
    const auto pids = list_numbered_entries(proc_root);
    if (!pids) return std::nullopt;
    std::optional<uint32_t> listener;
    for (const uint32_t other : pids.value()) {
        const std::filesystem::path other_dir = proc_root / std::to_string(other);
        if (other == pid ||
            std::filesystem::read_symlink(other_dir / "ns" / "net", error) != netns) {
            continue;
        }
        for (const auto& [inode, fd] : socket_fds(other_dir)) {
            if (accepted.contains(inode)) return other;
            if (!listener && listening.contains(inode)) listener = other;
        }
    }
    return listener;
}

}  // namespace gpuguard::agent
