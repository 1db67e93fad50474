// exchange_once (gpuguard/siem/siem.h): one request and its answer over a
// connection of the agent's own, plain or TLS, with libcurl's CONNECT_ONLY
// (curl_easy_send / curl_easy_recv), for the daemon's probe of a suspected
// mining pool. A "http://" URL with CONNECT_ONLY is a bare TCP connection,
// a "https://" one a TLS session on it; the server name rides in the URL
// and CURLOPT_RESOLVE pins it to the address, so nothing is resolved.
#include <chrono>
#include <memory>

#include <curl/curl.h>
#include <poll.h>

#include "gpuguard/siem/siem.h"

namespace gpuguard::siem {
namespace {

using ExchangeClock = std::chrono::steady_clock;

struct CurlDeleter {
    void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct SlistDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

// Waits for the socket to be readable (or writable) until `deadline`.
bool wait_socket(curl_socket_t socket, bool for_read, ExchangeClock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - ExchangeClock::now())
            .count();
    if (left <= 0) return false;
    pollfd wait{socket, static_cast<short>(for_read ? POLLIN : POLLOUT), 0};
    return poll(&wait, 1, static_cast<int>(left)) > 0;
}

}  // namespace

ExchangeResult exchange_once(const ExchangeRequest& request) {
    ExchangeResult result;
    const auto deadline = ExchangeClock::now() + request.timeout;
    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    if (!curl) {
        result.error = "curl_easy_init failed";
        return result;
    }
    const bool v6 = request.address.find(':') != std::string::npos;
    const std::string host = request.tls && !request.server_name.empty()
                                 ? request.server_name
                                 : (v6 ? "[" + request.address + "]" : request.address);
    const std::string url = std::string(request.tls ? "https://" : "http://") + host + ":" +
                            std::to_string(request.port);
    std::unique_ptr<curl_slist, SlistDeleter> resolve;
    if (request.tls && !request.server_name.empty()) {
        const std::string pin = request.server_name + ":" + std::to_string(request.port) + ":" +
                                (v6 ? "[" + request.address + "]" : request.address);
        resolve.reset(curl_slist_append(nullptr, pin.c_str()));
        curl_easy_setopt(curl.get(), CURLOPT_RESOLVE, resolve.get());
    }
    char error_buffer[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_NOPROXY, "*");  // never through the host's proxy
    curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(request.timeout.count()));
    curl_easy_setopt(curl.get(), CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl.get(), CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl.get(), CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(curl.get(), CURLOPT_PROTOCOLS_STR, "http,https");
    if (const CURLcode code = curl_easy_perform(curl.get()); code != CURLE_OK) {
        result.error = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
        result.timed_out = code == CURLE_OPERATION_TIMEDOUT;
        return result;
    }
    curl_socket_t socket = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(curl.get(), CURLINFO_ACTIVESOCKET, &socket) != CURLE_OK ||
        socket == CURL_SOCKET_BAD) {
        result.error = "no socket after connecting";
        return result;
    }
    for (size_t sent = 0; sent < request.message.size();) {
        size_t now = 0;
        const CURLcode code = curl_easy_send(curl.get(), request.message.data() + sent,
                                             request.message.size() - sent, &now);
        if (code == CURLE_AGAIN) {
            if (!wait_socket(socket, false, deadline)) {
                result.timed_out = true;
                result.error = "send: timed out";
                return result;
            }
            continue;
        }
        if (code != CURLE_OK) {
            result.error = std::string("send: ") + curl_easy_strerror(code);
            return result;
        }
        sent += now;
    }
    char buffer[1024];
    while (result.answer.size() < request.max_answer &&
           result.answer.find('\n') == std::string::npos) {
        size_t got = 0;
        const size_t want = std::min(sizeof(buffer), request.max_answer - result.answer.size());
        const CURLcode code = curl_easy_recv(curl.get(), buffer, want, &got);
        if (code == CURLE_AGAIN) {
            if (!wait_socket(socket, true, deadline)) {
                result.timed_out = true;
                break;
            }
            continue;
        }
        if (code != CURLE_OK || got == 0) {
            // 0 bytes: the peer closed; an error after connecting (a reset) ends it too.
            result.closed = true;
            break;
        }
        result.answer.append(buffer, got);
    }
    return result;
}

}  // namespace gpuguard::siem
