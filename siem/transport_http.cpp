// HTTP sinks through libcurl: a generic webhook, Splunk HEC and the
// Elasticsearch _bulk API. One reused easy handle (keep-alive) per sink.
// 2xx delivers; 408, 429, 5xx and the configuration errors 401/403/404 are
// retried (so fixing a token loses nothing); other 4xx reject the records.
#include <cstring>

#include <curl/curl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "siem/transport.h"

namespace gpuguard::siem {
namespace {

size_t collect(char* data, size_t size, size_t count, void* user) {
    auto* body = static_cast<std::string*>(user);
    if (body->size() < (1u << 20)) body->append(data, size * count);
    return size * count;
}

bool retryable_status(long status) {
    return status == 408 || status == 429 || status >= 500 || status == 401 || status == 403 ||
           status == 404;
}

std::string with_path(std::string base, const std::string& path) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    if (base.size() >= path.size() &&
        base.compare(base.size() - path.size(), path.size(), path) == 0) {
        return base;
    }
    return base + path;
}

class HttpTransport final : public Transport {
  public:
    explicit HttpTransport(const SinkConfig& sink) : sink_(sink) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        switch (sink.type) {
            case SinkType::kSplunkHec:
                url_ = with_path(sink.address, "/services/collector/event");
                add_header("Content-Type: application/json");
                if (!sink.token.empty()) add_header("Authorization: Splunk " + sink.token);
                break;
            case SinkType::kElasticsearch:
                url_ = with_path(sink.address, "/_bulk");
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
        if (!curl_) curl_ = curl_easy_init();
        if (!curl_) {
            delivery.error = "curl_easy_init failed";
            return delivery;
        }
        std::string response;
        char error_buffer[CURL_ERROR_SIZE] = {};
        curl_easy_reset(curl_);
        curl_easy_setopt(curl_, CURLOPT_URL, url_.c_str());
        curl_easy_setopt(curl_, CURLOPT_POST, 1L);
        curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
        curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(sink_.io_timeout.count()));
        curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(sink_.io_timeout.count()));
        curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response);
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
            delivery.error = fmt::format("POST {}: {}", url_,
                                         error_buffer[0] ? error_buffer : curl_easy_strerror(rc));
            return delivery;
        }
        long status = 0;
        curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            if (sink_.type == SinkType::kElasticsearch) return bulk_result(batch, response);
            delivery.delivered = batch.size();
            delivery.bytes = payload;
            return delivery;
        }
        const std::string excerpt = response.substr(0, 200);
        if (retryable_status(status)) {
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

    // _bulk answers 200 with per-item results. create -> 201, or 409 when the
    // _id exists (a duplicate from a retry: delivered). The prefix up to the
    // first retryable failure is done; 4xx items in it are rejected.
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
        for (size_t i = 0; i < batch.size(); ++i) {
            if (i >= items.size()) {
                delivery.error = "Elasticsearch _bulk: fewer items than sent";
                return delivery;
            }
            const auto& item = items[i];
            const auto& result = item.contains("create")  ? item["create"]
                                 : item.contains("index") ? item["index"]
                                                          : item;
            const long status = result.value("status", 0L);
            if ((status >= 200 && status < 300) || status == 409) {
                ++delivery.delivered;
                delivery.bytes += batch[i].data.size();
            } else if (status == 429 || status >= 500 || status == 0) {
                delivery.error = fmt::format("Elasticsearch _bulk item {}: status {}", i, status);
                return delivery;
            } else {
                ++delivery.rejected;
                delivery.rejection =
                    fmt::format("Elasticsearch _bulk item {}: status {} {}", i, status,
                                result.value("error", nlohmann::json()).dump());
            }
        }
        return delivery;
    }

    SinkConfig sink_;
    std::string url_;
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
