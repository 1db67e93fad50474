// A stand-in for a CPU miner, for the live watch-list tests (not a miner:
// it connects, sends one XMRig login and waits). Exec'ed with argv like
// XMRig's:   xmrig -o stratum+tcp://127.0.0.1:PORT -u WALLET [-p x]
// or with no pool URL at all:   worker --host 127.0.0.1 --port PORT
// It waits GG_CLIENT_DELAY_MS (default 0), and with GG_CLIENT_WAIT set for a
// byte on its stdin (it ends if stdin closes first), before connecting; then
// sends the
// login line, reads one answer line (2 s at most), and stays connected
// until its stdin closes or 20 s pass. Exit codes: 0 done, 2 bad usage,
// 3 connect failed, 4 send failed.
#include <cstdlib>
#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

namespace {

bool parse_url(const std::string& url, std::string& host, int& port) {
    const auto scheme = url.find("://");
    const std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 3);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos) return false;
    host = rest.substr(0, colon);
    port = std::atoi(rest.c_str() + colon + 1);
    return port > 0 && port < 65536;
}

}  // namespace

int main(int argc, char** argv) {
    std::string host, wallet = "x";
    int port = 0;
    for (int i = 1; i + 1 < argc; ++i) {
        const std::string flag = argv[i];
        const char* value = argv[i + 1];
        if (flag == "-o" || flag == "--url") {
            if (!parse_url(value, host, port)) return 2;
        } else if (flag == "-u" || flag == "--user") {
            wallet = value;
        } else if (flag == "--host") {
            host = value;
        } else if (flag == "--port") {
            port = std::atoi(value);
        }
    }
    if (host.empty() || port <= 0 || port > 65535) return 2;
    if (const char* delay = std::getenv("GG_CLIENT_DELAY_MS")) {
        const long ms = std::atol(delay);
        timespec wait{ms / 1000, (ms % 1000) * 1'000'000};
        nanosleep(&wait, nullptr);
    }
    char go = 0;
    if (std::getenv("GG_CLIENT_WAIT") && read(STDIN_FILENO, &go, 1) != 1) return 0;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &peer.sin_addr) != 1) return 2;
    if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) return 3;
    // XMRig's first message (its login request, src/base/net/stratum/Client.cpp).
    const std::string login =
        R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":")" + wallet +
        R"(","pass":"x","agent":"XMRig/6.21.0 (Linux x86_64) libuv/1.44.2 gcc/12.2.0",)"
        R"("algo":["rx/0","cn/r"]}})"
        "\n";
    if (write(fd, login.data(), login.size()) != static_cast<ssize_t>(login.size())) return 4;
    char buffer[4096];
    pollfd answer{fd, POLLIN, 0};
    if (poll(&answer, 1, 2000) > 0) (void)!read(fd, buffer, sizeof(buffer));
    pollfd input{STDIN_FILENO, POLLIN, 0};
    poll(&input, 1, 20000);  // until the test closes our stdin (or it is not a pipe)
    close(fd);
    return 0;
}
