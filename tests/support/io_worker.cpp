#include "tests/support/io_worker.h"

#include <cstdint>
#include <cstdlib>
#include <thread>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace gpuguard::testing {

namespace {

// Reads one line (up to 1 KiB, ending in '\n') from `fd`: 0, or the errno
// (ECONNRESET at end of stream, EMSGSIZE for a longer line).
int read_line(int fd) {
    char line[1024];
    size_t got = 0;
    while (got < sizeof(line)) {
        const ssize_t n = read(fd, line + got, sizeof(line) - got);
        if (n <= 0) return n == 0 ? ECONNRESET : errno;
        got += static_cast<size_t>(n);
        if (line[got - 1] == '\n') return 0;
    }
    return EMSGSIZE;
}

// RFC 1928 CONNECT without authentication on the connected `fd`: 0 when
// the proxy granted it, else an errno (ECONNREFUSED when it refused).
int socks5_connect(int fd, const std::string& target, uint16_t port) {
    const auto exchange = [fd](const std::string& out, size_t answer) -> int {
        if (write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return errno;
        char in[64];
        size_t got = 0;
        while (got < answer) {
            const ssize_t n = read(fd, in + got, answer - got);
            if (n <= 0) return n == 0 ? ECONNRESET : errno;
            got += static_cast<size_t>(n);
        }
        return in[1] == 0 ? 0 : ECONNREFUSED;
    };
    if (const int refused = exchange(std::string("\x05\x01\x00", 3), 2)) return refused;
    std::string request("\x05\x01\x00", 3);
    in_addr address{};
    if (inet_pton(AF_INET, target.c_str(), &address) == 1) {
        request += '\x01';
        request.append(reinterpret_cast<const char*>(&address), 4);
    } else {
        request += '\x03';
        request += static_cast<char>(target.size());
        request += target;
    }
    request += static_cast<char>(port >> 8);
    request += static_cast<char>(port & 0xff);
    return exchange(request, 10);  // the reply with an IPv4 bound address
}

}  // namespace

int io_worker_request(const IoWorkerOptions& options, char request) {
    // The child's own state (it runs one worker).
    static int tcp = -1, udp = -1;
    static char block[kIoFileBytes];
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    switch (request) {
        case 'g':
            return open(options.gpu_node.c_str(), O_RDWR | O_CLOEXEC) >= 0 ? 0 : errno;
        case 'c':
            tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            to.sin_port = htons(options.tcp_port);
            if (inet_pton(AF_INET, options.tcp_address.c_str(), &to.sin_addr) != 1) {
                return EINVAL;
            }
            return connect(tcp, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 ? 0 : errno;
        case 's':
            return write(tcp, block, kIoMessageBytes) == kIoMessageBytes ? 0 : errno;
        case 'p':
            return socks5_connect(tcp, options.socks_target, options.socks_port);
        case 'h': {
            // A handshake record (22), TLS 1.0 on the wire, a ClientHello's start.
            const char hello[] = {0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b,
                                  0x03, 0x03, 0x5a, 0x3c, 0x11, 0x7e, 0x42, 0x09};
            return write(tcp, hello, sizeof(hello)) == sizeof(hello) ? 0 : errno;
        }
        case 'q': {
            // A line out, then the peer's one-line answer read in full.
            if (write(tcp, "ping\n", 5) != 5) return errno;
            return read_line(tcp);
        }
        case 'r': {
            // One line the peer sends on its own, waited for at most 10 s.
            const timeval wait{10, 0};
            setsockopt(tcp, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
            return read_line(tcp);
        }
        case 'x':
            close(tcp);
            tcp = -1;
            return 0;
        case 't': {
            // Type 23 (application data), TLS 1.2 on the wire, then the ciphertext.
            char record[kIoMessageBytes] = {0x17, 0x03, 0x03, 0x00,
                                            static_cast<char>(kIoMessageBytes - 5)};
            for (size_t i = 5; i < sizeof(record); ++i) record[i] = static_cast<char>(i * 37);
            return write(tcp, record, sizeof(record)) == sizeof(record) ? 0 : errno;
        }
        case 'b':
            std::thread([] {
                volatile uint64_t spins = 0;
                for (;;) spins = spins + 1;  // ends with the process
            }).detach();
            return 0;
        case 'u':
            to.sin_port = htons(options.udp_port);
            return sendto(udp, block, kIoDatagramBytes, 0, reinterpret_cast<sockaddr*>(&to),
                          sizeof(to)) == kIoDatagramBytes
                       ? 0
                       : errno;
        case 'f': {
            const int fd =
                open(options.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0) return errno;
            const bool whole = write(fd, block, sizeof(block)) == sizeof(block);
            close(fd);
            return whole ? 0 : EIO;
        }
    }
    return EINVAL;
}

std::vector<std::string> io_worker_args(const IoWorkerOptions& options) {
    return {options.comm,
            options.gpu_node,
            options.file,
            std::to_string(options.tcp_port),
            std::to_string(options.udp_port),
            options.tcp_address,
            options.socks_target,
            std::to_string(options.socks_port)};
}

std::optional<IoWorkerOptions> io_worker_options(const std::vector<std::string>& args) {
    if (args.size() != 8) return std::nullopt;
    const auto port = [](const std::string& text) {
        return static_cast<uint16_t>(std::strtoul(text.c_str(), nullptr, 10));
    };
    return IoWorkerOptions{.comm = args[0],
                           .gpu_node = args[1],
                           .file = args[2],
                           .tcp_port = port(args[3]),
                           .udp_port = port(args[4]),
                           .tcp_address = args[5],
                           .socks_target = args[6],
                           .socks_port = port(args[7])};
}

}  // namespace gpuguard::testing
