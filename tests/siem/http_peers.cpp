// The peers' answers follow the receivers' public documentation:
// Elasticsearch "Bulk API" (docs/reference/rest-api: response body `took`,
// `errors`, `items[].<action>.status|error`), Splunk "Format events for HTTP
// Event Collector", "About HTTP Event Collector Indexer Acknowledgment" and
// "Troubleshoot HTTP Event Collector" (the error codes), and RFC 6750 for the
// webhook's bearer token.
#include "tests/siem/http_peers.h"

#include <algorithm>
#include <chrono>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

namespace gpuguard::testing {
namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

PeerResponse json_answer(int status, const nlohmann::json& body) { return {status, body.dump()}; }

// Elasticsearch's error envelope for a failed request as a whole.
PeerResponse es_error(int status, const std::string& type, const std::string& reason) {
    const nlohmann::json cause = {{"type", type}, {"reason", reason}};
    return json_answer(
        status,
        {{"error",
          {{"root_cause", nlohmann::json::array({cause})}, {"type", type}, {"reason", reason}}},
         {"status", status}});
}

PeerResponse hec_error(int status, int code, const std::string& text) {
    return json_answer(status, {{"text", text}, {"code", code}});
}

bool is_guid(const std::string& text) {
    static const std::regex guid(
        "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
    return std::regex_match(text, guid);
}

}  // namespace

std::string PeerRequest::header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
}

// ---- HttpPeer ----------------------------------------------------------------

struct HttpPeer::Server {
    std::unique_ptr<httplib::Server> http;
    std::thread thread;
};

HttpPeer::HttpPeer(const TestPki* pki, uint16_t port) : pki_(pki), port_(port) {}

HttpPeer::~HttpPeer() { stop(); }

bool HttpPeer::start() {
    stop();
    auto server = std::make_unique<Server>();
    if (pki_ != nullptr) {
        auto tls = std::make_unique<httplib::SSLServer>(pki_->server_cert.c_str(),
                                                        pki_->server_key.c_str());
        if (!tls->is_valid()) {
            ADD_FAILURE() << "HTTPS peer: cannot load " << pki_->server_cert;
            return false;
        }
        server->http = std::move(tls);
    } else {
        server->http = std::make_unique<httplib::Server>();
    }
    server->http->Post(".*", [this](const httplib::Request& in, httplib::Response& out) {
        PeerRequest request;
        request.path = in.path;
        for (const auto& [name, value] : in.headers) request.headers[lower(name)] = value;
        if (in.has_param("channel")) request.query_channel = in.get_param_value("channel");
        request.body = in.body;
        std::lock_guard lock(mutex_);
        const PeerResponse answer = handle(request);
        request.status = answer.status;
        requests_.push_back(std::move(request));
        out.status = answer.status;
        out.set_content(answer.body, "application/json");
    });
    if (port_ == 0) {
        const int bound = server->http->bind_to_any_port("127.0.0.1");
        if (bound <= 0) {
            ADD_FAILURE() << "HTTP peer: cannot bind a loopback port";
            return false;
        }
        port_ = static_cast<uint16_t>(bound);
    } else if (!server->http->bind_to_port("127.0.0.1", port_)) {
        ADD_FAILURE() << "HTTP peer: cannot bind 127.0.0.1:" << port_;
        return false;
    }
    httplib::Server* http = server->http.get();
    server->thread = std::thread([http] { http->listen_after_bind(); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!http->is_running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    server_ = std::move(server);
    return server_->http->is_running();
}

void HttpPeer::stop() {
    if (!server_) return;
    server_->http->stop();
    if (server_->thread.joinable()) server_->thread.join();
    server_.reset();
}

std::string HttpPeer::url() const {
    return fmt::format("{}://127.0.0.1:{}", pki_ != nullptr ? "https" : "http", port_);
}

std::vector<PeerRequest> HttpPeer::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

// ---- Elasticsearch -------------------------------------------------------------

ElasticsearchPeer::ElasticsearchPeer(const TestPki* pki, std::string api_key, uint16_t port)
    : HttpPeer(pki, port), api_key_(std::move(api_key)) {}

void ElasticsearchPeer::fail_item(const std::string& id, int status, int times) {
    std::lock_guard lock(mutex_);
    faults_[id] = {status, times};
}

void ElasticsearchPeer::preload(const std::string& id) {
    std::lock_guard lock(mutex_);
    documents_[id] = nlohmann::json::object();
}

std::map<std::string, nlohmann::json> ElasticsearchPeer::documents() const {
    std::lock_guard lock(mutex_);
    return documents_;
}

std::map<std::string, int> ElasticsearchPeer::attempts() const {
    std::lock_guard lock(mutex_);
    return attempts_;
}

std::vector<size_t> ElasticsearchPeer::batch_sizes() const {
    std::lock_guard lock(mutex_);
    return batch_sizes_;
}

PeerResponse ElasticsearchPeer::handle(const PeerRequest& request) {
    const std::string auth = request.header("authorization");
    if (auth.empty()) {
        return es_error(401, "security_exception",
                        "missing authentication credentials for REST request [/_bulk]");
    }
    if (auth != "ApiKey " + api_key_) {
        return es_error(401, "security_exception",
                        "unable to authenticate with provided credentials");
    }
    if (request.path != "/_bulk") {
        return es_error(400, "illegal_argument_exception", "no handler for " + request.path);
    }
    const std::string type = request.header("content-type");
    if (type.rfind("application/json", 0) != 0 && type.rfind("application/x-ndjson", 0) != 0) {
        return json_answer(
            406, {{"error", fmt::format("Content-Type header [{}] is not supported", type)},
                  {"status", 406}});
    }
    return bulk(request.body);
}

PeerResponse ElasticsearchPeer::bulk(const std::string& body) {
    if (body.empty() || body.back() != '\n') {
        return es_error(400, "illegal_argument_exception",
                        "The bulk request must be terminated by a newline [\\n]");
    }
    std::vector<nlohmann::json> lines;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        auto json = nlohmann::json::parse(line, nullptr, false);
        if (json.is_discarded() || !json.is_object()) {
            return es_error(400, "x_content_parse_exception", "[1:1] Unexpected character");
        }
        lines.push_back(std::move(json));
    }
    nlohmann::json items = nlohmann::json::array();
    bool errors = false;
    for (size_t i = 0; i < lines.size(); ++i) {
        const auto& action = lines[i];
        const std::string op = action.empty() ? "" : action.begin().key();
        if ((op != "create" && op != "index") || i + 1 >= lines.size()) {
            return es_error(400, "illegal_argument_exception",
                            fmt::format("Malformed action/metadata line [{}]", i + 1));
        }
        const auto& meta = action[op];
        const std::string index = meta.value("_index", "");
        const std::string id = meta.value("_id", "");
        const nlohmann::json& document = lines[++i];
        ++attempts_[id];
        nlohmann::json result = {{"_index", index}, {"_id", id}};
        auto fault = faults_.find(id);
        if (fault != faults_.end() && fault->second.times != 0) {
            if (fault->second.times > 0) --fault->second.times;
            result["status"] = fault->second.status;
            result["error"] =
                fault->second.status == 429
                    ? nlohmann::json{{"type", "es_rejected_execution_exception"},
                                     {"reason",
                                      "rejected execution of coordinating operation "
                                      "[coordinating_and_primary_bytes=0, "
                                      "max_coordinating_and_primary_bytes=0]"}}
                    : nlohmann::json{
                          {"type", "document_parsing_exception"},
                          {"reason", fmt::format("[1:1] failed to parse field [process.pid] of "
                                                 "type [long] in document with id '{}'",
                                                 id)}};
            errors = true;
        } else if (op == "create" && documents_.count(id)) {
            result["status"] = 409;
            result["error"] = {
                {"type", "version_conflict_engine_exception"},
                {"reason", fmt::format("[{}]: version conflict, document already exists "
                                       "(current version [1])",
                                       id)},
                {"index", index},
                {"shard", "0"}};
            errors = true;
        } else {
            const bool existed = documents_.count(id) > 0;
            documents_[id] = document;
            result["_version"] = 1;
            result["result"] = existed ? "updated" : "created";
            result["_shards"] = {{"total", 2}, {"successful", 1}, {"failed", 0}};
            result["_seq_no"] = seq_no_++;
            result["_primary_term"] = 1;
            result["status"] = existed ? 200 : 201;
        }
        items.push_back({{op, result}});
    }
    batch_sizes_.push_back(items.size());
    return json_answer(200, {{"took", 3}, {"errors", errors}, {"items", items}});
}

// ---- Splunk HEC ----------------------------------------------------------------

SplunkHecPeer::SplunkHecPeer(const TestPki* pki, HecOptions options, uint16_t port)
    : HttpPeer(pki, port), options_(std::move(options)) {}

std::vector<nlohmann::json> SplunkHecPeer::events() const {
    std::lock_guard lock(mutex_);
    return events_;
}

std::vector<size_t> SplunkHecPeer::batch_sizes() const {
    std::lock_guard lock(mutex_);
    return batch_sizes_;
}

std::set<std::string> SplunkHecPeer::channels() const {
    std::lock_guard lock(mutex_);
    return channels_;
}

size_t SplunkHecPeer::ack_queries() const {
    std::lock_guard lock(mutex_);
    return ack_queries_;
}

PeerResponse SplunkHecPeer::handle(const PeerRequest& request) {
    const std::string auth = request.header("authorization");
    if (auth.empty()) return hec_error(401, 2, "Token is required");
    if (auth.rfind("Splunk ", 0) != 0) return hec_error(401, 3, "Invalid authorization");
    if (auth != "Splunk " + options_.token) return hec_error(403, 4, "Invalid token");
    std::string channel = request.header("x-splunk-request-channel");
    if (channel.empty()) channel = request.query_channel;
    if (options_.acks) {
        if (channel.empty()) return hec_error(400, 10, "Data channel is missing");
        if (!is_guid(channel)) return hec_error(400, 11, "Invalid data channel");
    }
    if (request.path == "/services/collector/event") return event(request, channel);
    if (request.path == "/services/collector/ack") return ack(request, channel);
    return hec_error(404, 404, "The requested URL was not found on this server.");
}

PeerResponse SplunkHecPeer::event(const PeerRequest& request, const std::string& channel) {
    // A batch is event objects one after another, whitespace between them optional.
    std::vector<nlohmann::json> batch;
    std::istringstream in(request.body);
    for (int number = 0; (in >> std::ws).peek() != std::char_traits<char>::eof(); ++number) {
        nlohmann::json event;
        try {
            in >> event;
        } catch (const nlohmann::json::exception&) {
            return json_answer(
                400,
                {{"text", "Invalid data format"}, {"code", 6}, {"invalid-event-number", number}});
        }
        if (!event.is_object() || !event.contains("event")) {
            return json_answer(400, {{"text", "Event field is required"},
                                     {"code", 12},
                                     {"invalid-event-number", number}});
        }
        if (event.contains("index") && !options_.indexes.empty() &&
            !options_.indexes.count(event["index"].get<std::string>())) {
            return json_answer(
                400, {{"text", "Incorrect index"}, {"code", 7}, {"invalid-event-number", number}});
        }
        if (event["event"] == "") {
            return json_answer(400, {{"text", "Event field cannot be blank"},
                                     {"code", 13},
                                     {"invalid-event-number", number}});
        }
        batch.push_back(std::move(event));
    }
    if (batch.empty()) return hec_error(400, 5, "No data");
    if (!channel.empty()) channels_.insert(channel);
    const bool lost = batches_++ < options_.lose_batches;
    if (!lost) {
        events_.insert(events_.end(), batch.begin(), batch.end());
        batch_sizes_.push_back(batch.size());
    }
    if (!options_.acks) return json_answer(200, {{"text", "Success"}, {"code", 0}});
    const uint64_t ack_id = next_ack_id_[channel]++;
    pending_acks_[channel][ack_id] = Pending{lost, 0};
    return json_answer(200, {{"text", "Success"}, {"code", 0}, {"ackId", ack_id}});
}

PeerResponse SplunkHecPeer::ack(const PeerRequest& request, const std::string& channel) {
    if (!options_.acks) return hec_error(400, 14, "ACK is disabled");
    const auto query = nlohmann::json::parse(request.body, nullptr, false);
    if (!query.is_object() || !query.contains("acks") || !query["acks"].is_array()) {
        return hec_error(400, 6, "Invalid data format");
    }
    ++ack_queries_;
    auto& pending = pending_acks_[channel];
    nlohmann::json acks = nlohmann::json::object();
    for (const auto& id_json : query["acks"]) {
        if (!id_json.is_number_unsigned()) return hec_error(400, 6, "Invalid data format");
        const uint64_t id = id_json.get<uint64_t>();
        bool indexed = false;
        if (auto it = pending.find(id); it != pending.end() && !it->second.lost) {
            indexed = ++it->second.queries >= options_.ack_after_queries;
            // A true status is reported once, then the ackId is forgotten.
            if (indexed) pending.erase(it);
        }
        acks[std::to_string(id)] = indexed;
    }
    return json_answer(200, {{"acks", acks}});
}

// ---- webhook -------------------------------------------------------------------

WebhookPeer::WebhookPeer(const TestPki* pki, std::string token,
                         std::map<std::string, std::string> required_headers, uint16_t port)
    : HttpPeer(pki, port),
      token_(std::move(token)),
      required_headers_(std::move(required_headers)) {}

std::vector<nlohmann::json> WebhookPeer::records() const {
    std::lock_guard lock(mutex_);
    return records_;
}

std::vector<size_t> WebhookPeer::batch_sizes() const {
    std::lock_guard lock(mutex_);
    return batch_sizes_;
}

PeerResponse WebhookPeer::handle(const PeerRequest& request) {
    const std::string auth = request.header("authorization");
    if (auth.rfind("Bearer ", 0) != 0) return {401, R"({"error":"invalid_request"})"};
    if (auth != "Bearer " + token_) return {403, R"({"error":"invalid_token"})"};
    for (const auto& [name, value] : required_headers_) {
        if (request.header(lower(name)) != value) {
            return {403, fmt::format(R"({{"error":"header {} missing or wrong"}})", name)};
        }
    }
    if (request.header("content-type").rfind("application/json", 0) != 0) {
        return {415, R"({"error":"JSON only"})"};
    }
    std::vector<nlohmann::json> batch;
    std::istringstream in(request.body);
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        auto record = nlohmann::json::parse(line, nullptr, false);
        if (record.is_discarded()) return {400, R"({"error":"not JSON lines"})"};
        batch.push_back(std::move(record));
    }
    batch_sizes_.push_back(batch.size());
    records_.insert(records_.end(), batch.begin(), batch.end());
    return {204, ""};
}

}  // namespace gpuguard::testing
