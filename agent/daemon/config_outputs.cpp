// The `outputs:` section of the config: one sink per entry, each key
// checked where it stands, then siem::validate on the sink as a whole.
#include "config_reader.h"

namespace gpuguard::agent {
namespace {

std::string header_line_problem(const std::string& line) {
    if (line.find_first_of("\r\n") != std::string::npos) return "contains a line break";
    const auto colon = line.find(':');
    bool token = colon != 0 && colon != std::string::npos;
    for (size_t i = 0; token && i < colon; ++i) {
        const auto c = static_cast<unsigned char>(line[i]);
        token = std::isalnum(c) ||
                std::string_view("!#$%&'*+-.^_`|~").find(line[i]) != std::string_view::npos;
    }
    return token ? "" : "'" + line + "' is not a \"Name: value\" header line";
}

// One sink of `outputs:`. Each key is checked where it stands (file:line of
// the value); siem::validate then checks the sink as a whole (address forms,
// readable TLS files).
siem::SinkConfig read_sink(const ConfigReader& reader, const YAML::Node& node,
                           const std::string& key) {
    reader.check_keys(node, key,
                      {"name",
                       "type",
                       "format",
                       "framing",
                       "min_severity",
                       "detections",
                       "enforcement",
                       "address",
                       "tls_ca_file",
                       "tls_cert_file",
                       "tls_key_file",
                       "tls_server_name",
                       "tls_verify",
                       "token",
                       "index",
                       "http_headers",
                       "facility",
                       "app_name",
                       "file_max_bytes",
                       "file_max_files",
                       "queue_dir",
                       "queue_max_mb",
                       "queue_fsync",
                       "overflow",
                       "block_timeout_ms",
                       "batch_max_records",
                       "retry_initial_ms",
                       "retry_max_ms",
                       "io_timeout_ms"});
    siem::SinkConfig sink;
    auto text = [&](const char* name) {
        return reader.scalar<std::string>(node[name], key + "." + name, "a string");
    };
    auto choice = [&](const char* name, auto parse, const char* known) {
        const std::string value = text(name);
        auto parsed = parse(value);
        if (!parsed)
            reader.fail_at(node[name], key + "." + name, "'" + value + "' is not one of " + known);
        return *parsed;
    };
    auto number = [&](const char* name, uint64_t min, uint64_t max) {
        return reader.bounded<uint64_t>(node[name], key + "." + name, min, max);
    };
    auto millis = [&](const char* name, uint64_t min, uint64_t max) {
        return std::chrono::milliseconds(number(name, min, max));
    };
    if (!node["name"]) reader.fail_at(node, key, "name: missing");
    sink.name = text("name");
    if (!node["type"]) reader.fail_at(node, key, "type: missing");
    sink.type = choice("type", siem::parse_sink_type,
                       "stdout, file, syslog, udp, tcp, tls, webhook, splunk_hec, elasticsearch");
    if (node["format"])
        sink.format = choice("format", siem::parse_format, "ecs_json, cef, leef, ocsf");
    if (node["framing"])
        sink.framing = choice("framing", siem::parse_framing, "none, rfc5424, rfc3164");
    if (node["min_severity"]) {
        sink.min_severity =
            choice("min_severity", parse_severity,
                   "emergency, alert, critical, error, warning, notice, info, debug");
    }
    if (node["overflow"])
        sink.overflow = choice("overflow", siem::parse_overflow_policy, "drop_oldest, block");
    for (auto [name, target] :
         {std::pair{"detections", &sink.detections}, std::pair{"enforcement", &sink.enforcement},
          std::pair{"tls_verify", &sink.tls_verify}, std::pair{"queue_fsync", &sink.queue_fsync}}) {
        if (node[name])
            *target = reader.scalar<bool>(node[name], key + "." + name, "true or false");
    }
    for (auto [name, target] :
         {std::pair{"address", &sink.address}, std::pair{"tls_ca_file", &sink.tls_ca_file},
          std::pair{"tls_cert_file", &sink.tls_cert_file},
          std::pair{"tls_key_file", &sink.tls_key_file},
          std::pair{"tls_server_name", &sink.tls_server_name}, std::pair{"token", &sink.token},
          std::pair{"index", &sink.index}, std::pair{"facility", &sink.facility},
          std::pair{"app_name", &sink.app_name}}) {
        if (node[name]) *target = text(name);
    }
    if (node["facility"] && !siem::parse_facility(sink.facility)) {
        reader.fail_at(node["facility"], key + ".facility",
                       "'" + sink.facility + "' is not a syslog facility (kern, user, daemon, " +
                           "auth, authpriv, local0 .. local7, ...)");
    }
    if (const auto headers = node["http_headers"]) {
        read_string_list(reader, headers, key + ".http_headers", sink.http_headers);
        for (size_t i = 0; i < sink.http_headers.size(); ++i) {
            if (auto problem = header_line_problem(sink.http_headers[i]); !problem.empty()) {
                reader.fail_at(headers[i], key + ".http_headers[" + std::to_string(i) + "]",
                               problem);
            }
        }
    }
    if (node["file_max_bytes"]) sink.file_max_bytes = number("file_max_bytes", 0, 1ull << 40);
    if (node["file_max_files"]) {
        sink.file_max_files = static_cast<uint32_t>(number("file_max_files", 0, 1000));
    }
    if (node["queue_dir"]) sink.queue_dir = text("queue_dir");
    if (node["queue_max_mb"]) sink.queue_max_bytes = number("queue_max_mb", 1, 1u << 20) << 20;
    if (node["block_timeout_ms"]) sink.block_timeout = millis("block_timeout_ms", 0, 600'000);
    if (node["batch_max_records"]) sink.batch_max_records = number("batch_max_records", 0, 100'000);
    if (node["retry_initial_ms"]) sink.retry_initial = millis("retry_initial_ms", 1, 3'600'000);
    if (node["retry_max_ms"]) sink.retry_max = millis("retry_max_ms", 1, 3'600'000);
    if (sink.retry_max < sink.retry_initial) {
        const char* at = node["retry_max_ms"] ? "retry_max_ms" : "retry_initial_ms";
        reader.fail_at(node[at], key + "." + at,
                       "retry_max_ms (" + std::to_string(sink.retry_max.count()) +
                           ") is smaller than retry_initial_ms (" +
                           std::to_string(sink.retry_initial.count()) + ")");
    }
    if (node["io_timeout_ms"]) sink.io_timeout = millis("io_timeout_ms", 1, 600'000);
    if (auto valid = siem::validate(sink); !valid) reader.fail_at(node, key, valid.error().message);
    return sink;
}

}  // namespace

void read_outputs(const ConfigReader& reader, const YAML::Node& node,
                  std::vector<siem::SinkConfig>& outputs) {
    if (!node.IsSequence()) reader.fail_at(node, "outputs", "must be a list of sinks");
    outputs.clear();
    std::set<std::string> names;
    for (size_t i = 0; i < node.size(); ++i) {
        const std::string key = "outputs[" + std::to_string(i) + "]";
        outputs.push_back(read_sink(reader, node[i], key));
        if (!names.insert(outputs.back().name).second) {
            reader.fail_at(node[i]["name"], key + ".name",
                           "'" + outputs.back().name + "' is used by another sink");
        }
    }
}

}  // namespace gpuguard::agent
