// siem/json_writer.h against nlohmann, byte for byte: strings (escapes,
// invalid UTF-8), numbers, and whole ECS records against the nlohmann DOM
// build they replaced (kept below as the reference, as it was written).
#include "siem/json_writer.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"
#include "tests/siem/siem_fixtures.h"

namespace gpuguard::siem {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kEcsVersion = "8.11.0";

// ---- the reference: ECS records as the nlohmann DOM built them ----

std::string dump(const Json& json) {
    return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void put_if(Json& json, const char* key, const std::string& value) {
    if (!value.empty()) json[key] = value;
}

// A double as JSON, null when not finite (JSON has no NaN).
Json number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json ecs_process(const DetectionProcess& process) {
    Json json;
    json["pid"] = process.pid;
    if (process.ppid != 0) json["parent"] = {{"pid", process.ppid}};
    put_if(json, "name", process.comm);
    put_if(json, "executable", process.executable);
    if (!process.argv.empty()) {
        json["args"] = process.argv;
        json["args_count"] = process.argv.size();
    }
    put_if(json, "command_line", process.command_line);
    if (!process.sha256.empty()) json["hash"] = {{"sha256", process.sha256}};
    Json user;
    user["id"] = std::to_string(process.uid);
    put_if(user, "name", process.user);
    json["user"] = std::move(user);
    json["group"] = {{"id", std::to_string(process.gid)}};
    return json;
}

void ecs_common_tail(Json& json, const DetectionProcess& process,
                     const std::optional<DetectionPeer>& peer, const HostInfo& host) {
    if (process.pid != 0 || !process.executable.empty()) {
        json["process"] = ecs_process(process);
        Json user;
        user["id"] = std::to_string(process.uid);
        put_if(user, "name", process.user);
        json["user"] = std::move(user);
    }
    if (peer) {
        Json destination;
        put_if(destination, "ip", peer->ip);
        if (peer->port != 0) destination["port"] = peer->port;
        put_if(destination, "domain", peer->domain);
        json["destination"] = std::move(destination);
        Json network;
        network["transport"] = "tcp";
        put_if(network, "protocol", peer->protocol);
        json["network"] = std::move(network);
    }
    Json host_json;
    put_if(host_json, "hostname", host.hostname);
    put_if(host_json, "name", host.hostname);
    if (!host.boot_id.empty()) host_json["boot"] = {{"id", host.boot_id}};
    Json os;
    os["type"] = "linux";
    put_if(os, "kernel", host.kernel);
    host_json["os"] = std::move(os);
    json["host"] = std::move(host_json);
    Json agent;
    agent["type"] = "gpuguard";
    put_if(agent, "version", host.agent_version);
    json["agent"] = std::move(agent);
    if (!process.container_id.empty()) {
        const ContainerDetails& c = process.container;
        Json container;
        container["id"] = process.container_id;
        put_if(container, "name", c.name);
        put_if(container, "runtime", process.container_runtime);
        if (!c.image.empty() || !c.image_id.empty()) {
            Json image;
            put_if(image, "name", c.image);
            if (!c.image_id.empty()) image["hash"] = {{"all", Json::array({c.image_id})}};
            container["image"] = std::move(image);
        }
        json["container"] = std::move(container);
        if (!c.pod_name.empty() || !c.pod_namespace.empty()) {
            Json orchestrator;
            orchestrator["type"] = "kubernetes";
            put_if(orchestrator, "namespace", c.pod_namespace);
            Json resource;
            resource["type"] = "pod";
            put_if(resource, "name", c.pod_name);
            put_if(resource, "id", c.pod_uid);
            orchestrator["resource"] = std::move(resource);
            json["orchestrator"] = std::move(orchestrator);
        }
    }
}

Json gpuguard_process(const DetectionProcess& process) {
    Json json;
    put_if(json, "comm", process.comm);
    put_if(json, "cgroup_path", process.cgroup_path);
    if (process.start_time_ns != 0) json["start_time_ns"] = process.start_time_ns;
    return json;
}

Json gpu_json(const DetectionGpu& gpu) {
    Json json;
    json["major"] = gpu.major;
    json["minor"] = gpu.minor;
    put_if(json, "device", gpu.device);
    if (gpu.index >= 0) json["index"] = gpu.index;
    put_if(json, "vendor", gpu.vendor);
    if (gpu.utilization_percent) json["utilization_percent"] = number(*gpu.utilization_percent);
    if (gpu.memory_used_bytes) json["memory_used_bytes"] = *gpu.memory_used_bytes;
    if (gpu.process_utilization_percent) {
        json["process_utilization_percent"] = number(*gpu.process_utilization_percent);
    }
    if (gpu.mig_gpu_instance) json["mig_gpu_instance"] = *gpu.mig_gpu_instance;
    return json;
}

Json evidence_json(const Evidence& evidence) {
    Json json;
    json["ts_ns"] = evidence.ts_ns;
    json["kind"] = evidence.kind;
    put_if(json, "event_type", evidence.event_type);
    put_if(json, "signature_id", evidence.signature_id);
    put_if(json, "field", evidence.field);
    put_if(json, "detail", evidence.detail);
    return json;
}

Json severity_log(Severity severity) {
    return {{"level", to_string(severity)},
            {"syslog",
             {{"severity", {{"code", syslog_level(severity)}, {"name", to_string(severity)}}}}}};
}

// ECS event.outcome allows success, failure, unknown only.
const char* ecs_outcome(const std::string& outcome) {
    if (outcome == "success") return "success";
    if (outcome == "failure") return "failure";
    return "unknown";
}

std::string dom_ecs_json(const Detection& d, const HostInfo& host) {
    Json json;
    if (d.time_unix_ns != 0) json["@timestamp"] = rfc3339_utc(d.time_unix_ns);
    json["ecs"] = {{"version", kEcsVersion}};
    Json event;
    event["kind"] = "alert";
    event["id"] = alert_id(d);
    Json category = Json::array({"intrusion_detection"});
    if (d.process.pid != 0) category.push_back("process");
    if (d.peer) category.push_back("network");
    event["category"] = std::move(category);
    event["type"] = Json::array({"info"});
    put_if(event, "action", d.action);
    event["outcome"] = "unknown";
    event["severity"] = syslog_level(d.severity);
    event["risk_score"] = risk_score(d.severity);
    put_if(event, "reason", d.description);
    event["module"] = "gpuguard";
    event["dataset"] = "gpuguard.detection";
    if (d.time_unix_ns != 0) event["created"] = rfc3339_utc(d.time_unix_ns);
    json["event"] = std::move(event);
    json["log"] = severity_log(d.severity);
    Json rule;
    rule["id"] = d.rule_id;
    rule["name"] = d.rule_name;
    put_if(rule, "ruleset", d.ruleset);
    put_if(rule, "description", d.description);
    json["rule"] = std::move(rule);
    if (!d.mitre_technique_id.empty()) {
        Json threat;
        threat["framework"] = "MITRE ATT&CK";
        Json technique;
        technique["id"] = Json::array({d.mitre_technique_id});
        if (!d.mitre_technique_name.empty()) {
            technique["name"] = Json::array({d.mitre_technique_name});
        }
        technique["reference"] = Json::array(
            {fmt::format("https://attack.mitre.org/techniques/{}/", d.mitre_technique_id)});
        threat["technique"] = std::move(technique);
        if (!d.mitre_tactic.empty()) {
            threat["tactic"] = {{"name", Json::array({d.mitre_tactic})}};
        }
        json["threat"] = std::move(threat);
    }
    ecs_common_tail(json, d.process, d.peer, host);

    Json detection;
    detection["id"] = d.id;
    detection["update"] = d.update;
    detection["confidence"] = number(d.confidence);
    detection["first_seen_ns"] = d.first_seen_ns;
    detection["last_seen_ns"] = d.last_seen_ns;
    detection["dry_run"] = d.dry_run;
    detection["signature_ids"] = d.signature_ids;
    Json evidence = Json::array();
    for (const auto& item : d.evidence) evidence.push_back(evidence_json(item));
    detection["evidence"] = std::move(evidence);
    Json gpuguard;
    gpuguard["record"] = "detection";
    gpuguard["detection"] = std::move(detection);
    gpuguard["process"] = gpuguard_process(d.process);
    Json gpus = Json::array();
    for (const auto& gpu : d.gpus) gpus.push_back(gpu_json(gpu));
    gpuguard["gpus"] = std::move(gpus);
    if (d.peer && !d.peer->protocol.empty()) gpuguard["peer_protocol"] = d.peer->protocol;
    json["gpuguard"] = std::move(gpuguard);
    return dump(json);
}

std::string dom_ecs_json(const EnforcementOutcome& o, const HostInfo& host) {
    Json json;
    if (o.time_unix_ns != 0) json["@timestamp"] = rfc3339_utc(o.time_unix_ns);
    json["ecs"] = {{"version", kEcsVersion}};
    Json event;
    event["kind"] = "event";
    event["id"] = alert_id(o);
    Json category = Json::array({"intrusion_detection"});
    if (o.process.pid != 0) category.push_back("process");
    if (o.peer) category.push_back("network");
    event["category"] = std::move(category);
    event["type"] = Json::array({o.outcome == "success" ? "denied" : "info"});
    event["action"] = o.action;
    event["outcome"] = ecs_outcome(o.outcome);
    event["severity"] = syslog_level(o.severity);
    event["risk_score"] = risk_score(o.severity);
    put_if(event, "reason", o.reason);
    event["module"] = "gpuguard";
    event["dataset"] = "gpuguard.enforcement";
    if (o.time_unix_ns != 0) event["created"] = rfc3339_utc(o.time_unix_ns);
    if (o.latency_ns != 0) event["duration"] = o.latency_ns;
    json["event"] = std::move(event);
    json["log"] = severity_log(o.severity);
    json["rule"] = {{"id", o.rule_id}};
    ecs_common_tail(json, o.process, o.peer, host);

    Json enforcement;
    enforcement["id"] = o.id;
    enforcement["detection_id"] = o.detection_id;
    enforcement["action"] = o.action;
    enforcement["outcome"] = o.outcome;
    put_if(enforcement, "reason", o.reason);
    enforcement["ts_ns"] = o.ts_ns;
    enforcement["latency_ns"] = o.latency_ns;
    Json gpuguard;
    gpuguard["record"] = "enforcement";
    gpuguard["enforcement"] = std::move(enforcement);
    gpuguard["process"] = gpuguard_process(o.process);
    json["gpuguard"] = std::move(gpuguard);
    return dump(json);
}

// ---- random inputs ----

// Bytes that exercise every branch: controls, quotes, backslash, DEL,
// valid 2/3/4-byte sequences, and invalid or cut ones.
std::string random_text(std::mt19937& rng, size_t max_pieces = 12) {
    static const std::vector<std::string> kPieces = {"a",
                                                     "Z",
                                                     "0",
                                                     " ",
                                                     "/",
                                                     "\"",
                                                     "\\",
                                                     "\x7f",
                                                     "\x01",
                                                     "\x1f",
                                                     "\b",
                                                     "\t",
                                                     "\n",
                                                     "\f",
                                                     "\r",
                                                     std::string(1, '\0'),
                                                     "\xc3\xa9",
                                                     "\xe2\x82\xac",
                                                     "\xf0\x9d\x84\x9e",
                                                     "\x80",
                                                     "\xbf",
                                                     "\xc0",
                                                     "\xc1\x81",
                                                     "\xc2",
                                                     "\xe0\x80",
                                                     "\xe0\xa0",
                                                     "\xed\xa0\x80",
                                                     "\xef\xbf\xbd",
                                                     "\xf0\x80",
                                                     "\xf4\x90\x80\x80",
                                                     "\xf5",
                                                     "\xff",
                                                     "\xe2\x82",
                                                     "\xf0\x9d\x84",
                                                     "xmrig --cuda",
                                                     "stratum+tcp://pool:3333"};
    std::uniform_int_distribution<size_t> count(0, max_pieces);
    std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
    std::string text;
    for (size_t n = count(rng); n > 0; --n) text += kPieces[pick(rng)];
    return text;
}

std::string nlohmann_string(const std::string& text) {
    return Json(text).dump(-1, ' ', false, Json::error_handler_t::replace);
}

TEST(JsonWriter, StringsAreNlohmannsEscapesAndReplacements) {
    std::mt19937 rng(20261125);
    for (int i = 0; i < 20000; ++i) {
        const std::string text = random_text(rng);
        std::string ours;
        JsonWriter::append_string(ours, text);
        ASSERT_EQ(ours, nlohmann_string(text))
            << "input bytes: " << Json::binary({text.begin(), text.end()}).dump();
    }
    // Every single byte value, alone and before a letter.
    for (int byte = 0; byte < 256; ++byte) {
        for (const std::string& text : {std::string(1, static_cast<char>(byte)),
                                        std::string(1, static_cast<char>(byte)) + "x"}) {
            std::string ours;
            JsonWriter::append_string(ours, text);
            EXPECT_EQ(ours, nlohmann_string(text)) << "byte " << byte;
        }
    }
}

TEST(JsonWriter, NumbersAreNlohmanns) {
    const auto ours = [](auto number) {
        std::string text;
        JsonWriter(text).value(number);
        return text;
    };
    for (int64_t number : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max()}) {
        EXPECT_EQ(ours(number), Json(number).dump());
    }
    for (uint64_t number : {uint64_t{0}, uint64_t{7}, std::numeric_limits<uint64_t>::max()}) {
        EXPECT_EQ(ours(number), Json(number).dump());
    }
    EXPECT_EQ(ours(uint16_t{3333}), "3333");
    EXPECT_EQ(ours(-5), "-5");
    std::mt19937_64 rng(7);
    for (int i = 0; i < 5000; ++i) {
        const double number = std::bit_cast<double>(rng());
        if (!std::isfinite(number)) continue;
        ASSERT_EQ(ours(number), Json(number).dump());
    }
    for (double number : {0.0, -0.0, 0.999, 97.0, 1e20, 1e-7, 0.1 + 0.2, 5e-324}) {
        EXPECT_EQ(ours(number), Json(number).dump());
    }
    EXPECT_EQ(ours(std::nan("")), "null");
    EXPECT_EQ(ours(std::numeric_limits<double>::infinity()), "null");
    EXPECT_EQ(ours(nullptr), "null");
    EXPECT_EQ(ours(true), "true");
}

TEST(JsonWriter, NestingPutsCommasOnlyBetweenMembers) {
    std::string text;
    JsonWriter out(text);
    out.begin_object();
    out.key("a");
    out.begin_array();
    out.end_array();
    out.key("b");
    out.begin_object();
    out.end_object();
    out.key("c");
    out.begin_array();
    out.value(1);
    out.begin_object();
    out.member("d", "e");
    out.end_object();
    out.begin_array();
    out.end_array();
    out.end_array();
    out.member_if("skipped", "");
    out.member("f", false);
    out.end_object();
    EXPECT_EQ(text, R"({"a":[],"b":{},"c":[1,{"d":"e"},[]],"f":false})");
}

DetectionProcess random_process(std::mt19937& rng) {
    std::bernoulli_distribution coin(0.5);
    DetectionProcess process;
    process.pid = coin(rng) ? 0 : static_cast<uint32_t>(rng());
    process.ppid = coin(rng) ? 0 : static_cast<uint32_t>(rng());
    process.uid = static_cast<uint32_t>(rng());
    process.gid = static_cast<uint32_t>(rng());
    process.start_time_ns = coin(rng) ? 0 : rng();
    process.comm = random_text(rng, 2);
    process.executable = random_text(rng, 3);
    for (size_t n = rng() % 4; n > 0; --n) process.argv.push_back(random_text(rng, 3));
    process.command_line = random_text(rng, 4);
    process.user = random_text(rng, 2);
    process.cgroup_path = random_text(rng, 2);
    process.container_id = coin(rng) ? "" : random_text(rng, 2);
    process.container_runtime = random_text(rng, 1);
    for (std::string* field : {&process.container.name, &process.container.image,
                               &process.container.image_id, &process.container.pod_name,
                               &process.container.pod_namespace, &process.container.pod_uid}) {
        *field = coin(rng) ? "" : random_text(rng, 1);
    }
    process.sha256 = coin(rng) ? "" : random_text(rng, 2);
    return process;
}

std::optional<DetectionPeer> random_peer(std::mt19937& rng) {
    if (rng() % 3 == 0) return std::nullopt;
    DetectionPeer peer;
    peer.ip = random_text(rng, 1);
    peer.port = rng() % 2 ? 0 : static_cast<uint16_t>(rng());
    peer.domain = random_text(rng, 1);
    peer.protocol = random_text(rng, 1);
    return peer;
}

HostInfo random_host(std::mt19937& rng) {
    return HostInfo{random_text(rng, 1), random_text(rng, 1), random_text(rng, 1),
                    random_text(rng, 1)};
}

std::optional<double> random_percent(std::mt19937& rng) {
    switch (rng() % 4) {
        case 0:
            return std::nullopt;
        case 1:
            return std::nan("");
        default:
            return static_cast<double>(rng() % 10000) / 100.0;
    }
}

TEST(JsonWriter, EcsRecordsAreTheBytesTheDomBuilt) {
    std::mt19937 rng(424242);
    const auto severities = {Severity::kEmergency, Severity::kCritical, Severity::kWarning,
                             Severity::kInfo};
    for (int i = 0; i < 3000; ++i) {
        Detection d;
        d.id = random_text(rng, 2);
        d.rule_id = random_text(rng, 2);
        d.rule_name = random_text(rng, 3);
        d.ruleset = random_text(rng, 1);
        d.description = random_text(rng, 4);
        d.severity = *(severities.begin() + rng() % severities.size());
        d.confidence = rng() % 5 == 0 ? std::nan("") : static_cast<double>(rng() % 1001) / 1000;
        d.mitre_technique_id = rng() % 3 == 0 ? "" : random_text(rng, 1);
        d.mitre_technique_name = random_text(rng, 1);
        d.mitre_tactic = random_text(rng, 1);
        d.first_seen_ns = rng();
        d.last_seen_ns = rng();
        d.time_unix_ns = rng() % 2 ? 0 : int64_t{1'790'000'000} * 1'000'000'000 + rng();
        d.update = rng() % 3;
        d.process = random_process(rng);
        for (size_t n = rng() % 3; n > 0; --n) {
            DetectionGpu gpu;
            gpu.major = rng() % 256;
            gpu.minor = rng() % 256;
            gpu.device = random_text(rng, 1);
            gpu.index = static_cast<int>(rng() % 4) - 1;
            gpu.vendor = random_text(rng, 1);
            gpu.utilization_percent = random_percent(rng);
            if (rng() % 2) gpu.memory_used_bytes = uint64_t{rng()} << 20;
            gpu.process_utilization_percent = random_percent(rng);
            if (rng() % 2) gpu.mig_gpu_instance = rng() % 14;
            d.gpus.push_back(gpu);
        }
        d.peer = random_peer(rng);
        for (size_t n = rng() % 3; n > 0; --n) d.signature_ids.push_back(random_text(rng, 1));
        for (size_t n = rng() % 4; n > 0; --n) {
            d.evidence.push_back(Evidence{rng(), random_text(rng, 1), random_text(rng, 1),
                                          random_text(rng, 1), random_text(rng, 1),
                                          random_text(rng, 3)});
        }
        d.action = random_text(rng, 1);
        d.dry_run = rng() % 2;
        const HostInfo host = random_host(rng);
        ASSERT_EQ(format_ecs_json(d, host), dom_ecs_json(d, host)) << "detection " << i;

        EnforcementOutcome o;
        o.id = random_text(rng, 1);
        o.detection_id = random_text(rng, 1);
        o.rule_id = random_text(rng, 1);
        o.action = random_text(rng, 1);
        o.outcome = rng() % 2 ? "success" : random_text(rng, 1);
        o.reason = random_text(rng, 2);
        o.severity = d.severity;
        o.ts_ns = rng();
        o.time_unix_ns = d.time_unix_ns;
        o.process = random_process(rng);
        o.peer = random_peer(rng);
        o.latency_ns = rng() % 2 ? 0 : rng();
        ASSERT_EQ(format_ecs_json(o, host), dom_ecs_json(o, host)) << "outcome " << i;
    }
    // And the fixtures the other tests use.
    EXPECT_EQ(format_ecs_json(testing::test_detection(), testing::test_host()),
              dom_ecs_json(testing::test_detection(), testing::test_host()));
}

}  // namespace
}  // namespace gpuguard::siem
