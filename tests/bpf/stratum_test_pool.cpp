#include "tests/bpf/stratum_test_pool.h"

#include <algorithm>

#include <time.h>

#include "tests/support/child_process.h"
#include "tests/support/dns_wire.h"

namespace gpuguard::testing {

std::string id_of(const std::string& line) {
    const auto at = line.find("\"id\":");
    if (at == std::string::npos) return "";
    const auto end = line.find_first_of(",}", at);
    return line.substr(at + 5, end - at - 5);
}

std::vector<Dialect> dialects() {
    return {
        {"stratum1",
         "stratum1",
         "mining.subscribe",
         {R"({"id":1,"method":"mining.subscribe","params":["cgminer/4.10.0"]})",
          R"({"params":["bc1qtestwalletaddressxxxxxxxxxxxxxxxxx.rig1","x"],"id":2,"method":"mining.authorize"})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("mining.subscribe") != std::string::npos) {
                 return {
                     R"({"id":1,"result":[[["mining.notify","ae68"]],"08000002",4],"error":null})",
                     R"({"id":null,"method":"mining.set_difficulty","params":[8]})",
                     R"({"id":null,"method":"mining.notify","params":["bf","4d16","01","02",[],"20000000","1d00ffff","504e86b9",true]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"result":true,"error":null})"};
         },
         [](int i) {
             return R"({"params":["w.rig1","bf","00000001","504e86ed","b2957c02"],"id":)" +
                    std::to_string(100 + i) + R"(,"method":"mining.submit"})";
         },
         8 * 4294967296.0},
        {"cryptonote",
         "cryptonote",
         "login",
         {R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":"44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQBEP3A","pass":"x","agent":"XMRig/6.21.0"}})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("\"login\"") != std::string::npos) {
                 return {
                     R"({"id":1,"jsonrpc":"2.0","error":null,"result":{"id":"s1","job":{"blob":"0707","job_id":"4","target":"b88d0600","seed_hash":"ab"},"status":"OK"}})"};
             }
             return {R"({"id":)" + id_of(line) +
                     R"(,"jsonrpc":"2.0","error":null,"result":{"status":"OK"}})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"jsonrpc":"2.0","method":"submit","params":{"id":"s1","job_id":"4","nonce":"0a0b0c0d","result":"ff"}})";
         },
         10000.0},
        {"ethereumstratum",
         "ethereumstratum",
         "mining.subscribe",
         {R"({"id":1,"method":"mining.subscribe","params":["ethminer/0.19","EthereumStratum/1.0.0"]})",
          R"({"id":2,"method":"mining.authorize","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a.rig2","x"]})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("mining.subscribe") != std::string::npos) {
                 return {
                     R"({"id":1,"result":[["mining.notify","ae68","EthereumStratum/1.0.0"],"080c"],"error":null})",
                     R"({"id":null,"method":"mining.set_target","params":["0000000100000000000000000000000000000000000000000000000000000000"]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"result":true,"error":null})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"method":"mining.submit","params":["rig2","bf","0x6a3c"]})";
         },
         4294967296.0},
        // ETHPROXY (getwork over a stratum connection): the work package's
        // third element is the share target, 2^224: 2^32 hashes per share.
        {"ethproxy",
         "ethproxy",
         "eth_submitLogin",
         {R"({"id":1,"jsonrpc":"2.0","method":"eth_submitLogin","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a"],"worker":"rig3"})",
          R"({"id":2,"jsonrpc":"2.0","method":"eth_submitHashrate","params":["0x1dcd6500","0x59daa26581d0acd1fce254fb7e85952f4c09d0915afd33d3886cd914bc7d283c"]})",
          R"({"id":3,"jsonrpc":"2.0","method":"eth_getWork","params":[]})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("eth_getWork") != std::string::npos) {
                 return {
                     R"({"id":3,"jsonrpc":"2.0","result":["0x645cf20198c2f3861e947d4f67e3ab63b7b2e24dcc9095bd9123e7b33371f6cc","0xabad1dea","0x0000000100000000000000000000000000000000000000000000000000000000"]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"jsonrpc":"2.0","result":true})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"jsonrpc":"2.0","method":"eth_submitWork","params":["0xa60b68765fccd712","0x645cf20198c2f3861e947d4f67e3ab63b7b2e24dcc9095bd9123e7b33371f6cc","0x5bb5ba1e"]})";
         },
         4294967296.0},
        // EthereumStratum/2.0.0: mining.hello first; the target comes in
        // mining.set without its leading zeros (2^224: 2^32 hashes per share).
        {"ethereumstratum2",
         "ethereumstratum",
         "mining.hello",
         {R"({"id":0,"jsonrpc":"2.0","method":"mining.hello","params":{"agent":"ethminer-0.19","host":"127.0.0.1","port":"4444","proto":"EthereumStratum/2.0.0"}})",
          R"({"id":1,"jsonrpc":"2.0","method":"mining.subscribe"})",
          R"({"id":2,"jsonrpc":"2.0","method":"mining.authorize","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a.rig4","x"]})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("mining.hello") != std::string::npos) {
                 return {
                     R"({"id":0,"jsonrpc":"2.0","result":{"proto":"EthereumStratum/2.0.0","encoding":"plain","resume":1,"timeout":30,"maxerrors":5,"node":"test"}})"};
             }
             if (line.find("mining.subscribe") != std::string::npos) {
                 return {R"({"id":1,"jsonrpc":"2.0","result":"s-12345"})"};
             }
             if (line.find("mining.authorize") != std::string::npos) {
                 return {
                     R"({"id":2,"jsonrpc":"2.0","result":"w1"})",
                     R"({"jsonrpc":"2.0","method":"mining.set","params":{"epoch":"dc","target":"0x100000000000000000000000000000000000000000000000000000000","algo":"ethash","extranonce":"af4c"}})",
                     R"({"jsonrpc":"2.0","method":"mining.notify","params":["bf0488aa","0x645cf20198c2f3861e947d4f67e3ab63b7b2e24dcc9095bd9123e7b33371f6cc",false]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"jsonrpc":"2.0"})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"jsonrpc":"2.0","method":"mining.submit","params":["bf0488aa","0xa60b68765fccd712","w1"]})";
         },
         4294967296.0},
    };
}

void sleep_ns(long ns) {
    timespec delay{ns / 1'000'000'000, ns % 1'000'000'000};
    while (nanosleep(&delay, &delay) != 0) {
    }
}

bool write_all(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

bool read_lines(int fd, int lines) {
    char buffer[4096];
    int seen = 0;
    pollfd wait{fd, POLLIN, 0};
    while (seen < lines) {
        if (poll(&wait, 1, 2000) <= 0) return false;
        const ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n <= 0) return false;
        seen += static_cast<int>(std::count(buffer, buffer + n, '\n'));
    }
    return true;
}

void drain_input(int fd) {
    char buffer[4096];
    pollfd wait{fd, POLLIN, 0};
    while (poll(&wait, 1, 0) > 0 && read(fd, buffer, sizeof(buffer)) > 0) {
    }
}

uint16_t free_loopback_port(int type) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(in);
    bind(fd, reinterpret_cast<sockaddr*>(&in), length);
    getsockname(fd, reinterpret_cast<sockaddr*>(&in), &length);
    close(fd);
    return ntohs(in.sin_port);
}

int connect_v4(const char* address, uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    inet_pton(AF_INET, address, &in.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// GET `path` from 127.0.0.1:`port` (HTTP/1.0, 5 s at most): the body, "" on failure.
std::string http_get(uint16_t port, const std::string& path) {
    const int fd = connect_v4("127.0.0.1", port);
    if (fd < 0) return "";
    std::string response;
    if (write_all(fd, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")) {
        char buffer[65536];
        pollfd wait{fd, POLLIN, 0};
        while (poll(&wait, 1, 5000) > 0) {
            const ssize_t n = read(fd, buffer, sizeof(buffer));
            if (n <= 0) break;
            response.append(buffer, static_cast<size_t>(n));
        }
    }
    close(fd);
    const auto body = response.find("\r\n\r\n");
    return body == std::string::npos ? "" : response.substr(body + 4);
}

std::string dns_query(const std::string& name) {
    const std::string header = {0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    return header + dns_question_a(name);
}

int look_up_through_test_resolver(const std::string& name, std::array<uint8_t, 4> address) {
    DnsResponder resolver(name, address);
    if (!resolver.ok()) return -2;
    const std::string query = dns_query(name);
    int lookup_status = -1;
    run_in_child(
        "gg-lookup",
        [&] {
            const int fd = socket(AF_INET, SOCK_DGRAM, 0);
            sockaddr_in server{};
            server.sin_family = AF_INET;
            server.sin_port = htons(53);
            inet_pton(AF_INET, "127.53.53.53", &server.sin_addr);
            if (connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) != 0) {
                return 1;
            }
            if (send(fd, query.data(), query.size(), 0) < 0) return 2;
            char reply[512];
            pollfd ready{fd, POLLIN, 0};
            if (poll(&ready, 1, 5000) <= 0) return 3;
            return recv(fd, reply, sizeof(reply), 0) > 12 ? 0 : 4;
        },
        &lookup_status);
    return lookup_status;
}

}  // namespace gpuguard::testing
