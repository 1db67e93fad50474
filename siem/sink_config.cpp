// validate(SinkConfig): everything that can be checked before the first send.
#include <fmt/format.h>
#include <unistd.h>

#include "gpuguard/siem/siem.h"
#include "siem/transport.h"

namespace gpuguard::siem {
namespace {

Unexpected bad(const SinkConfig& sink, const std::string& what) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("sink '{}' ({}): {}", sink.name, to_string(sink.type), what));
}

bool readable(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

}  // namespace

Status validate(const SinkConfig& sink) {
    if (sink.name.empty()) return bad(sink, "name is empty");
    for (char c : sink.name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
            return bad(sink, "name may only hold letters, digits, '-', '_' and '.'");
        }
    }
    if (sink.name == "." || sink.name == "..") return bad(sink, "name may not be . or ..");
    switch (sink.type) {
        case SinkType::kStdout:
        case SinkType::kLocalSyslog:
            break;
        case SinkType::kFile:
            if (sink.address.empty()) return bad(sink, "address (the file path) is empty");
            break;
        case SinkType::kUdp:
        case SinkType::kTcp:
        case SinkType::kTls:
            if (auto address = split_host_port(sink.address); !address) {
                return bad(sink, address.error().message);
            }
            break;
        case SinkType::kWebhook:
        case SinkType::kSplunkHec:
        case SinkType::kElasticsearch:
            if (sink.address.rfind("http://", 0) != 0 && sink.address.rfind("https://", 0) != 0) {
                return bad(sink, fmt::format("address '{}' is not an http(s) URL", sink.address));
            }
            break;
    }
    if (sink.type == SinkType::kElasticsearch && sink.format != Format::kEcsJson &&
        sink.format != Format::kOcsf) {
        return bad(sink, "elasticsearch needs a JSON format (ecs_json or ocsf)");
    }
    for (const auto* file : {&sink.tls_ca_file, &sink.tls_cert_file, &sink.tls_key_file}) {
        if (!file->empty() && !readable(*file)) {
            return bad(sink, fmt::format("cannot read TLS file {}", *file));
        }
    }
    if (!sink.tls_key_file.empty() && sink.tls_cert_file.empty()) {
        return bad(sink, "tls_key_file given without tls_cert_file");
    }
    for (const auto& header : sink.http_headers) {
        const auto colon = header.find(':');
        if (colon == 0 || colon == std::string::npos ||
            header.find_first_of("\r\n") != std::string::npos) {
            return bad(sink,
                       fmt::format("http_headers: '{}' is not a \"Name: value\" line", header));
        }
    }
    if (!parse_facility(sink.facility)) {
        return bad(sink, fmt::format("unknown syslog facility '{}'", sink.facility));
    }
    if (sink.queue_max_bytes < (64u << 10)) return bad(sink, "queue_max_bytes must be >= 64 KiB");
    if (sink.retry_initial.count() <= 0 || sink.retry_max < sink.retry_initial) {
        return bad(sink, "need 0 < retry_initial <= retry_max");
    }
    if (sink.io_timeout.count() <= 0) return bad(sink, "io_timeout must be > 0");
    return {};
}

}  // namespace gpuguard::siem
