// HTTP sinks through libcurl: a generic webhook, Splunk HEC and the
// Elasticsearch _bulk API. One reused easy handle (keep-alive) per sink.
// 2xx delivers; 408, 429, 5xx and the configuration errors 401/403/404 (and
// HEC's 400s that name a setting: index, channel, acks) are retried, so
// fixing a token loses nothing; other 4xx reject the records. HEC with
// indexer acknowledgement counts a batch once /services/collector/ack says
// so; _bulk is judged item by item.
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include <curl/curl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "siem/transport.h"

namespace gpuguard::siem {
namespace {

using namespace std::chrono_literals;

size_t collect(char* data, size_t size, size_t count, void* user) {
    auto* body = static_cast<std::string*>(user);
    if (body->size() < (1u << 20)) body->append(data, size * count);
    return size * count;
}

bool retryable_status(long status) {
    return status == 408 || status == 429 || status >= 500 || status == 401 || status == 403 ||
           status == 404;
}

// HEC answers 400 with a JSON code; these name a setting, not the data:
// 7 incorrect index, 10 data channel missing, 11 invalid data channel,
// 14 ACK is disabled.
bool hec_setting_error(const std::string& response) {
    const auto json = nlohmann::json::parse(response, nullptr, false);
    if (!json.is_object() || !json.contains("code") || !json["code"].is_number_integer()) {
        return false;
    }
    const int code = json["code"].get<int>();
    return code == 7 || code == 10 || code == 11 || code == 14;
}

std::string without_suffix(std::string base, const std::string& suffix) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    if (base.size() >= suffix.size() &&
        base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
        base.resize(base.size() - suffix.size());
    }
    return base;
}

// A random (version 4) GUID: HEC's data channel of this sink.
std::string random_guid() {
    std::random_device device;
    std::mt19937_64 random(static_cast<uint64_t>(device()) << 32 | device());
    const uint64_t high = (random() & ~0xf000ull) | 0x4000ull;       // version 4
    const uint64_t low = (random() & ~(3ull << 62)) | (2ull << 62);  // RFC 4122 variant
    return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xffff,
                       high & 0xffff, low >> 48, low & 0xffffffffffffull);
}

struct Reply {
    std::string error;  // transport failure (no HTTP status)
    long status = 0;
    std::string body;
};

class HttpTransport final : public Transport {
  public:
    explicit HttpTransport(const SinkConfig& sink) : sink_(sink) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        switch (sink.type) {
            case SinkType::kSplunkHec: {
                const std::string base =
                    without_suffix(without_suffix(sink.address, "/services/collector/event"),
                                   "/services/collector");
                url_ = base + "/services/collector/event";
                ack_url_ = base + "/services/collector/ack";
                add_header("Content-Type: application/json");
                if (!sink.token.empty()) add_header("Authorization: Splunk " + sink.token);
                // Required by HEC tokens with indexer acknowledgement, harmless without.
                add_header("X-Splunk-Request-Channel: " + random_guid());
                break;
            }
            case SinkType::kElasticsearch:
                url_ = without_suffix(sink.address, "/_bulk") + "/_bulk";
                add_header("Content-Type: application/x-ndjson");
                if (!sink.token.empty()) add_header("Authorization: ApiKey " + sink.token);
                break;
            default:
                url_ = sink.address;
                add_header(sink.format == Format::kEcsJson || sink.format == Format::kOcsf
                               ? "Content-Type: application/json"
                               : "Content-Type: text/plain; charset=utf-8");
                if (!sink.token.empty()) add_header("Authorization: Bearer " + sink.token);
                break;
        }
        for (const auto& header : sink.http_headers) add_header(header);
        add_header("Expect:");  // no 100-continue round trip
    }

    ~HttpTransport() override {
        if (curl_) curl_easy_cleanup(curl_);
        curl_slist_free_all(headers_);
        curl_global_cleanup();
    }

    Delivery deliver(const std::vector<QueuedRecord>& batch) override {
        Delivery delivery;
        std::string body;
        size_t payload = 0;
        for (const auto& record : batch) {
            body += record.data;
            body.push_back('\n');
            payload += record.data.size();
        }
        const Reply reply = post(url_, body);
        if (!reply.error.empty()) {
            delivery.error = reply.error;
            return delivery;
        }
        const long status = reply.status;
        if (status >= 200 && status < 300) {
            if (sink_.type == SinkType::kElasticsearch) return bulk_result(batch, reply.body);
            if (sink_.type == SinkType::kSplunkHec) {
                const auto json = nlohmann::json::parse(reply.body, nullptr, false);
                if (json.is_object() && json.contains("ackId") &&
                    json["ackId"].is_number_unsigned()) {
                    if (std::string error = await_ack(json["ackId"].get<uint64_t>());
                        !error.empty()) {
                        delivery.error = error;
                        return delivery;
                    }
                }
            }
            delivery.delivered = batch.size();
            delivery.bytes = payload;
            return delivery;
        }
        const std::string excerpt = reply.body.substr(0, 200);
        if (retryable_status(status) || (sink_.type == SinkType::kSplunkHec && status == 400 &&
                                         hec_setting_error(reply.body))) {
            delivery.error = fmt::format("POST {}: HTTP {} {}", url_, status, excerpt);
            return delivery;
        }
        if (batch.size() > 1) {
            // Which record was refused is unknown: retry them one by one.
            delivery.error =
                fmt::format("POST {}: HTTP {} {} (retrying singly)", url_, status, excerpt);
            delivery.retry_singly = true;
            return delivery;
        }
        delivery.rejected = batch.size();
        delivery.rejection = fmt::format("HTTP {} {}", status, excerpt);
        return delivery;
    }

  private:
    void add_header(const std::string& header) {
        headers_ = curl_slist_append(headers_, header.c_str());
    }

    Reply post(const std::string& url, const std::string& body) {
        Reply reply;
        if (!curl_) curl_ = curl_easy_init();
        if (!curl_) {
            reply.error = "curl_easy_init failed";
            return reply;
        }
        char error_buffer[CURL_ERROR_SIZE] = {};
        curl_easy_reset(curl_);
        curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
        curl_easy_setopt(curl_, CURLOPT_POST, 1L);
        curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
        curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(sink_.io_timeout.count()));
        curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(sink_.io_timeout.count()));
        curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &reply.body);
        curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error_buffer);
        curl_easy_setopt(curl_, CURLOPT_USERAGENT, "gpuguard-siem");
        curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, sink_.tls_verify ? 1L : 0L);
        curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, sink_.tls_verify ? 2L : 0L);
        if (!sink_.tls_ca_file.empty())
            curl_easy_setopt(curl_, CURLOPT_CAINFO, sink_.tls_ca_file.c_str());
        if (!sink_.tls_cert_file.empty()) {
            curl_easy_setopt(curl_, CURLOPT_SSLCERT, sink_.tls_cert_file.c_str());
        }
        if (!sink_.tls_key_file.empty())
            curl_easy_setopt(curl_, CURLOPT_SSLKEY, sink_.tls_key_file.c_str());

        const CURLcode rc = curl_easy_perform(curl_);
        if (rc != CURLE_OK) {
            reply.error = fmt::format("POST {}: {}", url,
                                      error_buffer[0] ? error_buffer : curl_easy_strerror(rc));
            return reply;
        }
        curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &reply.status);
        return reply;
    }

    // HEC indexer acknowledgement: polls /services/collector/ack (20 ms,
    // doubling to 1 s) until `ack_id` is true, for up to io_timeout. Returns
    // "" once it is, else why not (the batch is then sent again).
    std::string await_ack(uint64_t ack_id) {
        const auto deadline = std::chrono::steady_clock::now() + sink_.io_timeout;
        const std::string query = fmt::format(R"({{"acks":[{}]}})", ack_id);
        const std::string key = std::to_string(ack_id);
        auto interval = 20ms;
        for (;;) {
            const Reply reply = post(ack_url_, query);
            if (!reply.error.empty()) return reply.error;
            if (reply.status < 200 || reply.status >= 300) {
                return fmt::format("POST {}: HTTP {} {}", ack_url_, reply.status,
                                   reply.body.substr(0, 200));
            }
            const auto json = nlohmann::json::parse(reply.body, nullptr, false);
            if (json.is_object() && json.contains("acks") && json["acks"].is_object() &&
                json["acks"].value(key, false)) {
                return "";
            }
            if (std::chrono::steady_clock::now() + interval >= deadline) {
                return fmt::format(
                    "Splunk HEC: ackId {} not acknowledged within {} ms (batch sent again)", ack_id,
                    sink_.io_timeout.count());
            }
            std::this_thread::sleep_for(interval);
            interval = std::min<std::chrono::milliseconds>(interval * 2, 1s);
        }
    }

    // _bulk answers 200 with one result per action, in order. create -> 201,
    // or 409 when the _id exists (a duplicate from a retry: delivered); 429,
    // 5xx -> that item is sent again; other 4xx (a mapping error) -> that
    // item is rejected. Each item is settled on its own.
    Delivery bulk_result(const std::vector<QueuedRecord>& batch, const std::string& response) {
        Delivery delivery;
        auto json = nlohmann::json::parse(response, nullptr, false);
        if (json.is_discarded() || !json.contains("items") || !json["items"].is_array()) {
            if (json.is_object() && json.value("errors", true) == false) {
                delivery.delivered = batch.size();
                return delivery;
            }
            delivery.error = "Elasticsearch _bulk: unreadable response";
            return delivery;
        }
        const auto& items = json["items"];
        bool in_prefix = true;
        for (size_t i = 0; i < batch.size(); ++i) {
            long status = 0;
            nlohmann::json error;
            if (i < items.size() && items[i].is_object() && !items[i].empty()) {
                const auto& result = items[i].begin().value();  // {"create": {...}}
                if (result.is_object()) {
                    status = result.value("status", 0L);
                    error = result.value("error", nlohmann::json());
                }
            }
            if ((status >= 200 && status < 300) || status == 409) {
                ++delivery.delivered;
                delivery.bytes += batch[i].data.size();
            } else if (status == 429 || status >= 500 || status == 0) {
                if (delivery.error.empty()) {
                    delivery.error = i < items.size()
                                         ? fmt::format("Elasticsearch _bulk item {}: status {} {}",
                                                       i, status, error.dump())
                                         : "Elasticsearch _bulk: fewer items than sent";
                }
                in_prefix = false;
                continue;
            } else {
                ++delivery.rejected;
                delivery.rejection = fmt::format("Elasticsearch _bulk item {}: status {} {}", i,
                                                 status, error.dump());
            }
            if (!in_prefix) delivery.done_later.push_back(i);
        }
        return delivery;
    }

    SinkConfig sink_;
    std::string url_;
    std::string ack_url_;  // splunk_hec
    curl_slist* headers_ = nullptr;
    CURL* curl_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_http_transport(const SinkConfig& sink) {
    if (sink.address.rfind("http://", 0) != 0 && sink.address.rfind("https://", 0) != 0) {
        return fail(ErrorCode::kInvalidArgument,
                    fmt::format("sink '{}': address must be an http:// or https:// URL, not '{}'",
                                sink.name, sink.address));
    }
    return std::unique_ptr<Transport>(std::make_unique<HttpTransport>(sink));
}

}  // namespace gpuguard::siem
