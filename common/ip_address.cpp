#include "gpuguard/common/ip_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace gpuguard {

Result<std::pair<std::string, int>> canonical_ip(const std::string& text) {
    char out[INET6_ADDRSTRLEN] = {};
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
        inet_ntop(AF_INET, &v4, out, sizeof(out));
        return std::pair<std::string, int>{out, 4};
    }
    if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
        if (IN6_IS_ADDR_V4MAPPED(&v6)) {
            inet_ntop(AF_INET, &v6.s6_addr[12], out, sizeof(out));
            return std::pair<std::string, int>{out, 4};
        }
        inet_ntop(AF_INET6, &v6, out, sizeof(out));
        return std::pair<std::string, int>{out, 6};
    }
    return fail(ErrorCode::kInvalidArgument, "'" + text + "' is not an IPv4 or IPv6 address");
}

bool loopback_ip(std::string_view address) {
    return address.starts_with("127.") || address == "::1" || address.starts_with("::ffff:127.");
}

std::string endpoint_text(std::string_view address, uint16_t port) {
    const bool v6 = address.find(':') != std::string_view::npos;
    return (v6 ? "[" + std::string(address) + "]" : std::string(address)) + ":" +
           std::to_string(port);
}

}  // namespace gpuguard
