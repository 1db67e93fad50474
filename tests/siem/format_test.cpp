// The formatters against their specifications: ECS field names, CEF and
// LEEF escaping (with the CEF guide's own examples), OCSF class 2004, RFC
// 5424/3164 headers (with the RFCs' examples), hostile input, determinism.
#include <map>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"
#include "tests/siem/siem_fixtures.h"

namespace gpuguard::siem {
namespace {

using testing::hostile_command_line;
using testing::kTestTimeNs;
using testing::test_detection;
using testing::test_host;
using testing::test_outcome;

bool valid_utf8(const std::string& text) { return sanitize_utf8(text) == text; }

bool one_line(const std::string& text) {
    return text.find('\n') == std::string::npos && text.find('\r') == std::string::npos;
}

// Splits a CEF line into its 7 header fields (unescaped) and extension map.
struct Cef {
    std::vector<std::string> header;
    std::map<std::string, std::string> extension;
};

Cef parse_cef(const std::string& line) {
    Cef cef;
    size_t pos = 0;
    std::string field;
    while (cef.header.size() < 7 && pos < line.size()) {
        const char c = line[pos++];
        if (c == '\\' && pos < line.size()) {
            field.push_back(line[pos++]);
        } else if (c == '|') {
            cef.header.push_back(field);
            field.clear();
        } else {
            field.push_back(c);
        }
    }
    const std::string ext = line.substr(pos);
    // Keys: a word before an unescaped '=' that starts the text or follows a space.
    std::vector<std::pair<size_t, size_t>> keys;  // (key start, '=' position)
    for (size_t i = 0; i < ext.size(); ++i) {
        if (ext[i] == '\\') {
            ++i;
            continue;
        }
        if (ext[i] != '=') continue;
        size_t start = i;
        while (start > 0 && std::isalnum(static_cast<unsigned char>(ext[start - 1]))) --start;
        if (start == 0 || ext[start - 1] == ' ') keys.emplace_back(start, i);
    }
    for (size_t k = 0; k < keys.size(); ++k) {
        const auto [start, eq] = keys[k];
        const size_t end = k + 1 < keys.size() ? keys[k + 1].first - 1 : ext.size();
        std::string value;
        for (size_t i = eq + 1; i < end; ++i) {
            if (ext[i] == '\\' && i + 1 < end) {
                const char n = ext[++i];
                value.push_back(n == 'n' ? '\n' : n == 'r' ? '\r' : n);
            } else {
                value.push_back(ext[i]);
            }
        }
        cef.extension[ext.substr(start, eq - start)] = value;
    }
    return cef;
}

std::string expected_cef_value(const std::string& raw) {
    std::string text = sanitize_utf8(raw);
    for (char& c : text) {
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\r') || c == 0x7f) c = ' ';
    }
    return text;
}

TEST(EcsJson, detection_has_ecs_field_names) {
    const auto line = format_ecs_json(test_detection(), test_host());
    ASSERT_TRUE(one_line(line));
    const auto json = nlohmann::json::parse(line);
    EXPECT_EQ(json["@timestamp"], "2024-05-01T12:00:00.250000Z");
    EXPECT_EQ(json["ecs"]["version"], "8.11.0");
    EXPECT_EQ(json["event"]["kind"], "alert");
    EXPECT_EQ(json["event"]["id"], "d-0001.0");
    EXPECT_EQ(json["event"]["category"],
              nlohmann::json::array({"intrusion_detection", "process", "network"}));
    EXPECT_EQ(json["event"]["action"], "kill");
    EXPECT_EQ(json["event"]["outcome"], "unknown");
    EXPECT_EQ(json["event"]["severity"], 2);
    EXPECT_EQ(json["log"]["syslog"]["severity"]["name"], "critical");
    EXPECT_EQ(json["rule"]["id"], "miner.xmrig.cmdline");
    EXPECT_EQ(json["rule"]["name"], "XMRig miner started");
    EXPECT_EQ(json["rule"]["ruleset"], "gpuguard-correlation");
    EXPECT_EQ(json["threat"]["framework"], "MITRE ATT&CK");
    EXPECT_EQ(json["threat"]["technique"]["id"][0], "T1496");
    EXPECT_EQ(json["threat"]["technique"]["name"][0], "Resource Hijacking");
    EXPECT_EQ(json["threat"]["tactic"]["name"][0], "Impact");
    EXPECT_EQ(json["process"]["pid"], 4242);
    EXPECT_EQ(json["process"]["parent"]["pid"], 1);
    EXPECT_EQ(json["process"]["executable"], "/tmp/.x/xmrig");
    EXPECT_EQ(json["process"]["args"][2], "stratum+tcp://pool.example:3333");
    EXPECT_EQ(json["user"]["id"], "1000");
    EXPECT_EQ(json["user"]["name"], "alice");
    EXPECT_EQ(json["destination"]["ip"], "203.0.113.7");
    EXPECT_EQ(json["destination"]["port"], 3333);
    EXPECT_EQ(json["destination"]["domain"], "pool.example");
    EXPECT_EQ(json["host"]["hostname"], "gpu-node-7");
    EXPECT_EQ(json["host"]["os"]["kernel"], "6.18.0-1-amd64");
    EXPECT_EQ(json["container"]["id"], std::string(64, 'a'));
    EXPECT_EQ(json["gpuguard"]["gpus"][0]["device"], "/dev/nvidia0");
    EXPECT_EQ(json["gpuguard"]["gpus"][0]["utilization_percent"], 99.5);
    EXPECT_EQ(json["gpuguard"]["detection"]["confidence"], 0.95);
    EXPECT_EQ(json["gpuguard"]["detection"]["signature_ids"][1], "pool.port.3333");
}

TEST(EcsJson, outcome_maps_to_ecs_event) {
    const auto json = nlohmann::json::parse(format_ecs_json(test_outcome(), test_host()));
    EXPECT_EQ(json["event"]["kind"], "event");
    EXPECT_EQ(json["event"]["id"], "e-0001");
    EXPECT_EQ(json["event"]["action"], "kill");
    EXPECT_EQ(json["event"]["outcome"], "success");
    EXPECT_EQ(json["event"]["type"][0], "denied");
    EXPECT_EQ(json["rule"]["id"], "miner.xmrig.cmdline");
    EXPECT_EQ(json["gpuguard"]["enforcement"]["detection_id"], "d-0001");
    auto withheld = test_outcome();
    withheld.outcome = "withheld";
    EXPECT_EQ(nlohmann::json::parse(format_ecs_json(withheld, test_host()))["event"]["outcome"],
              "unknown");
}

// A kill that found its process already ended by another detection's kill:
// the outcome says so (not a failure) and names that detection, in the JSON
// forms a SIEM reads (ECS, OCSF) and in CEF's outcome.
TEST(EcsJson, an_already_exited_outcome_names_the_detection_whose_kill_ended_it) {
    auto exited = test_outcome();
    exited.outcome = "already_exited";
    exited.linked_detection_id = "d-0042";
    const auto ecs = nlohmann::json::parse(format_ecs_json(exited, test_host()));
    EXPECT_EQ(ecs["gpuguard"]["enforcement"]["outcome"], "already_exited");
    EXPECT_EQ(ecs["gpuguard"]["enforcement"]["linked_detection_id"], "d-0042");
    EXPECT_EQ(ecs["event"]["outcome"], "unknown") << "ECS has no value for it; not a failure";
    EXPECT_EQ(ecs["event"]["type"][0], "info");
    const auto ocsf = nlohmann::json::parse(format_ocsf(exited, test_host()));
    EXPECT_EQ(ocsf["unmapped"]["gpuguard"]["outcome"], "already_exited");
    EXPECT_EQ(ocsf["unmapped"]["gpuguard"]["linked_detection_id"], "d-0042");
    EXPECT_NE(ocsf["disposition"], "Error");
    EXPECT_EQ(parse_cef(format_cef(exited, test_host())).extension.at("outcome"), "already_exited");
    // Without a link the field is absent, not empty.
    const auto unlinked = nlohmann::json::parse(format_ecs_json(test_outcome(), test_host()));
    EXPECT_FALSE(unlinked["gpuguard"]["enforcement"].contains("linked_detection_id"));
}

TEST(EcsJson, identical_input_gives_identical_bytes_and_fixed_key_order) {
    const auto a = format_ecs_json(test_detection(), test_host());
    const auto b = format_ecs_json(test_detection(), test_host());
    EXPECT_EQ(a, b);
    EXPECT_EQ(
        a.rfind("{\"@timestamp\":\"2024-05-01T12:00:00.250000Z\",\"ecs\":{\"version\":\"8.11.0\"},"
                "\"event\":{\"kind\":\"alert\",\"id\":\"d-0001.0\",",
                0),
        0u)
        << a;
}

TEST(EcsJson, replay_records_without_wall_clock_omit_it) {
    auto d = test_detection();
    d.time_unix_ns = 0;
    const auto line = format_ecs_json(d, test_host());
    const auto json = nlohmann::json::parse(line);
    EXPECT_FALSE(json.contains("@timestamp"));
    EXPECT_FALSE(json["event"].contains("created"));
    EXPECT_EQ(json["gpuguard"]["detection"]["last_seen_ns"], 2000);
    EXPECT_EQ(line, format_ecs_json(d, test_host()));
    auto o = test_outcome();
    o.time_unix_ns = 0;
    EXPECT_FALSE(nlohmann::json::parse(format_ecs_json(o, test_host())).contains("@timestamp"));
}

TEST(AllFormats, hostile_command_line_stays_one_valid_line_and_round_trips) {
    auto d = test_detection();
    d.process.command_line = hostile_command_line();
    d.rule_name = "bad|name\\with\nnewline";
    for (Format format : {Format::kEcsJson, Format::kCef, Format::kLeef, Format::kOcsf}) {
        const auto line = siem::format(format, d, test_host());
        SCOPED_TRACE(to_string(format));
        EXPECT_TRUE(one_line(line));
        EXPECT_TRUE(valid_utf8(line));
        EXPECT_GT(line.size(), 64u * 1024);
    }
    const auto ecs = nlohmann::json::parse(format_ecs_json(d, test_host()));
    EXPECT_EQ(ecs["process"]["command_line"], sanitize_utf8(d.process.command_line));
    const auto ocsf = nlohmann::json::parse(format_ocsf(d, test_host()));
    EXPECT_EQ(ocsf["evidences"][0]["process"]["cmd_line"], sanitize_utf8(d.process.command_line));

    const Cef cef = parse_cef(format_cef(d, test_host()));
    ASSERT_EQ(cef.header.size(), 7u);
    EXPECT_EQ(cef.header[5], "bad|name\\with newline");
    EXPECT_EQ(cef.extension.at("cs3Label"), "commandLine");
    EXPECT_EQ(cef.extension.at("cs3"), expected_cef_value(d.process.command_line));
    EXPECT_EQ(cef.extension.at("dst"), "203.0.113.7");

    const auto leef = format_leef(d, test_host());
    const auto start = leef.find("\tcmdLine=");
    ASSERT_NE(start, std::string::npos);
    const auto end = leef.find('\t', start + 1);
    std::string value = leef.substr(start + 9, end - start - 9);
    std::string unescaped;
    for (size_t i = 0; i < value.size(); ++i) {
        if (value[i] == '\\' && i + 1 < value.size() &&
            (value[i + 1] == 't' || value[i + 1] == 'n' || value[i + 1] == 'r')) {
            const char n = value[++i];
            unescaped.push_back(n == 't' ? '\t' : n == 'n' ? '\n' : '\r');
        } else {
            unescaped.push_back(value[i]);
        }
    }
    EXPECT_EQ(unescaped, sanitize_utf8(d.process.command_line));
}

TEST(Utf8, invalid_sequences_become_replacement_characters) {
    EXPECT_EQ(sanitize_utf8("ok \xc3\xa9"), "ok \xc3\xa9");
    EXPECT_EQ(sanitize_utf8("a\xff"
                            "b"),
              "a\xEF\xBF\xBD"
              "b");
    EXPECT_EQ(sanitize_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
    EXPECT_EQ(sanitize_utf8("\xe2\x82"), "\xEF\xBF\xBD");                              // truncated
    EXPECT_EQ(sanitize_utf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

// The CEF implementation guide's escaping examples, reproduced through our fields.
TEST(Cef, escapes_like_the_specification_examples) {
    auto d = test_detection();
    d.rule_name = "detected a | in message";
    d.action = "blocked a |";
    d.description = "Detected a threat.\nNo action needed.";
    const auto line = format_cef(d, test_host());
    EXPECT_NE(line.find("|detected a \\| in message|8|"), std::string::npos) << line;
    EXPECT_NE(line.find(" act=blocked a | "), std::string::npos) << line;
    EXPECT_NE(line.find(" msg=Detected a threat.\\nNo action needed. "), std::string::npos) << line;

    d.rule_name = "detected a \\ in packet";
    d.action = "detected a \\ here";
    d.description = "detected an = sign a=b";
    const auto line2 = format_cef(d, test_host());
    EXPECT_NE(line2.find("|detected a \\\\ in packet|"), std::string::npos) << line2;
    EXPECT_NE(line2.find(" act=detected a \\\\ here "), std::string::npos) << line2;
    EXPECT_NE(line2.find(" msg=detected an \\= sign a\\=b "), std::string::npos) << line2;
}

TEST(Cef, header_and_severity_mapping) {
    const auto line = format_cef(test_detection(), test_host());
    EXPECT_EQ(
        line.rfind("CEF:0|gpuguard|gpuguard|0.1.0|miner.xmrig.cmdline|XMRig miner started|8|", 0),
        0u)
        << line;
    const Cef cef = parse_cef(line);
    EXPECT_EQ(cef.extension.at("rt"), "1714564800250");
    EXPECT_EQ(cef.extension.at("externalId"), "d-0001.0");
    EXPECT_EQ(cef.extension.at("spid"), "4242");
    EXPECT_EQ(cef.extension.at("dpt"), "3333");
    EXPECT_EQ(cef.extension.at("cs2"), "T1496 Resource Hijacking");
    const int expected[] = {10, 9, 8, 7, 5, 3, 1, 0};
    for (Severity severity : kAllSeverities) {
        EXPECT_EQ(cef_severity(severity), expected[static_cast<int>(severity)]);
    }
    const auto outcome = parse_cef(format_cef(test_outcome(), test_host()));
    EXPECT_EQ(outcome.header[4], "enforcement:kill");
    EXPECT_EQ(outcome.header[6], "7");
    EXPECT_EQ(outcome.extension.at("outcome"), "success");
}

TEST(Leef, version_2_header_and_tab_separated_attributes) {
    const auto line = format_leef(test_detection(), test_host());
    EXPECT_EQ(line.rfind("LEEF:2.0|gpuguard|gpuguard|0.1.0|miner.xmrig.cmdline|x09|", 0), 0u)
        << line;
    const std::string attributes = line.substr(line.find("|x09|") + 5);
    std::map<std::string, std::string> map;
    size_t pos = 0;
    while (pos <= attributes.size()) {
        const size_t tab = std::min(attributes.find('\t', pos), attributes.size());
        const std::string pair = attributes.substr(pos, tab - pos);
        const size_t eq = pair.find('=');
        ASSERT_NE(eq, std::string::npos) << pair;
        map[pair.substr(0, eq)] = pair.substr(eq + 1);
        pos = tab + 1;
    }
    EXPECT_EQ(map["devTime"], "1714564800250");
    EXPECT_EQ(map["sev"], "8");
    EXPECT_EQ(map["dst"], "203.0.113.7");
    EXPECT_EQ(map["dstPort"], "3333");
    EXPECT_EQ(map["usrName"], "alice");
    EXPECT_EQ(map["alertId"], "d-0001.0");
    EXPECT_EQ(map["cmdLine"], "/tmp/.x/xmrig -o stratum+tcp://pool.example:3333");
    auto d = test_detection();
    d.rule_id = "a|b";
    EXPECT_NE(format_leef(d, test_host()).find("|a\\|b|x09|"), std::string::npos);
}

TEST(Ocsf, detection_finding_class_2004) {
    const auto json = nlohmann::json::parse(format_ocsf(test_detection(), test_host()));
    EXPECT_EQ(json["class_uid"], 2004);
    EXPECT_EQ(json["category_uid"], 2);
    EXPECT_EQ(json["activity_id"], 1);
    EXPECT_EQ(json["type_uid"], 200401);
    EXPECT_EQ(json["time"], 1714564800250);
    EXPECT_EQ(json["severity_id"], 5);
    EXPECT_EQ(json["severity"], "Critical");
    EXPECT_EQ(json["confidence_score"], 95);
    EXPECT_EQ(json["metadata"]["version"], "1.1.0");
    EXPECT_EQ(json["metadata"]["product"]["name"], "gpuguard");
    EXPECT_EQ(json["finding_info"]["uid"], "d-0001.0");
    EXPECT_EQ(json["finding_info"]["analytic"]["uid"], "miner.xmrig.cmdline");
    EXPECT_EQ(json["finding_info"]["attacks"][0]["technique"]["uid"], "T1496");
    EXPECT_EQ(json["evidences"][0]["process"]["pid"], 4242);
    EXPECT_EQ(json["evidences"][0]["dst_endpoint"]["port"], 3333);
    EXPECT_EQ(json["device"]["hostname"], "gpu-node-7");
    auto update = test_detection();
    update.update = 3;
    EXPECT_EQ(nlohmann::json::parse(format_ocsf(update, test_host()))["type_uid"], 200402);
    const auto outcome = nlohmann::json::parse(format_ocsf(test_outcome(), test_host()));
    EXPECT_EQ(outcome["disposition_id"], 2);
    EXPECT_EQ(outcome["action_id"], 2);
}

// RFC 5424 section 6.5 example 1: <34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47
// ...
TEST(Syslog, rfc5424_matches_the_rfc_example_header) {
    auto d = test_detection();
    d.severity = Severity::kCritical;
    d.time_unix_ns = 1065910455003000000;  // 2003-10-11T22:14:15.003Z
    SyslogOptions options;
    options.facility = *parse_facility("auth");
    options.app_name = "su";
    const auto line = format_syslog(Framing::kRfc5424, Format::kCef, d,
                                    test_host("mymachine.example.com"), options);
    EXPECT_EQ(
        line.rfind("<34>1 2003-10-11T22:14:15.003000Z mymachine.example.com su - DETECTION "
                   "[gpuguard@32473 id=\"d-0001.0\" rule=\"miner.xmrig.cmdline\" pid=\"4242\" "
                   "severity=\"critical\"] CEF:0|",
                   0),
        0u)
        << line;
    const std::regex grammar(
        R"(^<([0-9]{1,3})>1 (\S+) ([!-~]{1,255}) ([!-~]{1,48}) ([!-~]{1,128}) ([!-~]{1,32}) (\[.*\]) (.*)$)");
    EXPECT_TRUE(std::regex_match(line, grammar));
}

TEST(Syslog, rfc5424_escapes_structured_data_and_uses_nil_time_in_replay) {
    auto d = test_detection();
    d.rule_id = "r\"x]y\\z";
    d.time_unix_ns = 0;
    SyslogOptions options;
    const auto line = format_syslog(Framing::kRfc5424, Format::kEcsJson, d, test_host(), options);
    EXPECT_NE(line.find(" rule=\"r\\\"x\\]y\\\\z\" "), std::string::npos) << line;
    EXPECT_EQ(line.rfind("<130>1 - gpu-node-7 gpuguard - DETECTION [", 0), 0u) << line;
    // The JSON body follows the structured data untouched.
    const auto body = line.substr(line.find("] {") + 2);
    EXPECT_EQ(body, format_ecs_json(d, test_host()));
}

TEST(Syslog, severities_map_to_pri) {
    SyslogOptions options;  // local0 = 16
    for (Severity severity : kAllSeverities) {
        auto d = test_detection();
        d.severity = severity;
        const auto line = format_syslog(Framing::kRfc5424, Format::kCef, d, test_host(), options);
        EXPECT_EQ(line.rfind(fmt::format("<{}>1 ", 128 + static_cast<int>(severity)), 0), 0u);
    }
}

// RFC 3164 section 5.4 example: <34>Oct 11 22:14:15 mymachine su: 'su root' failed ...
TEST(Syslog, rfc3164_matches_the_rfc_example_header) {
    auto d = test_detection();
    d.severity = Severity::kCritical;
    d.time_unix_ns = 1065910455003000000;
    SyslogOptions options;
    options.facility = *parse_facility("auth");
    options.app_name = "su";
    auto line = format_syslog(Framing::kRfc3164, Format::kCef, d, test_host("mymachine"), options);
    EXPECT_EQ(line.rfind("<34>Oct 11 22:14:15 mymachine su: CEF:0|", 0), 0u) << line;
    d.time_unix_ns = 1064966400000000000;  // 2003-10-01: day padded with a space
    options.procid = "77";
    options.rfc3164_hostname = false;
    line = format_syslog(Framing::kRfc3164, Format::kCef, d, test_host("mymachine"), options);
    EXPECT_EQ(line.rfind("<34>Oct  1 00:00:00 su[77]: CEF:0|", 0), 0u) << line;
}

TEST(Names, parse_and_print_round_trip) {
    for (Format format : {Format::kEcsJson, Format::kCef, Format::kLeef, Format::kOcsf}) {
        EXPECT_EQ(parse_format(to_string(format)), format);
    }
    for (SinkType type : {SinkType::kStdout, SinkType::kFile, SinkType::kLocalSyslog,
                          SinkType::kUdp, SinkType::kTcp, SinkType::kTls, SinkType::kWebhook,
                          SinkType::kSplunkHec, SinkType::kElasticsearch}) {
        EXPECT_EQ(parse_sink_type(to_string(type)), type);
    }
    EXPECT_EQ(parse_overflow_policy("block"), OverflowPolicy::kBlock);
    EXPECT_EQ(parse_facility("local7"), 23);
    EXPECT_FALSE(parse_format("xml"));
}

TEST(SinkConfig, validation_names_the_problem) {
    SinkConfig sink;
    sink.name = "soc";
    sink.type = SinkType::kTcp;
    sink.address = "collector";
    auto status = validate(sink);
    ASSERT_FALSE(status);
    EXPECT_NE(status.error().message.find("host:port"), std::string::npos);
    sink.address = "[::1]:6514";
    EXPECT_TRUE(validate(sink));
    sink.tls_ca_file = "/nonexistent/ca.pem";
    EXPECT_FALSE(validate(sink));
    sink.tls_ca_file.clear();
    sink.type = SinkType::kElasticsearch;
    sink.address = "http://127.0.0.1:9200";
    sink.format = Format::kCef;
    EXPECT_FALSE(validate(sink));
    sink.format = Format::kEcsJson;
    EXPECT_TRUE(validate(sink));
    sink.name = "../x";
    EXPECT_FALSE(validate(sink));
}

// The container and its Kubernetes pod, field by field in every format.
TEST(AllFormats, container_image_and_pod_are_named) {
    auto d = test_detection();
    d.process.container_runtime = "podman";
    d.process.container.name = "gg-miner";
    d.process.container.image = "localhost/gg-test-miner:1";
    d.process.container.image_id = std::string(64, 'e');
    d.process.container.pod_name = "miner-pod";
    d.process.container.pod_namespace = "gg-ns";
    d.process.container.pod_uid = "0c7c-11e9";
    d.process.container.kube_container = "miner";

    const auto ecs = nlohmann::json::parse(format_ecs_json(d, test_host()));
    EXPECT_EQ(ecs["container"],
              nlohmann::json::parse(R"({"id":")" + std::string(64, 'a') +
                                    R"(","name":"gg-miner","runtime":"podman","image":{"name":)"
                                    R"("localhost/gg-test-miner:1","hash":{"all":["sha256:)" +
                                    std::string(64, 'e') + R"("]}}})"));
    EXPECT_EQ(ecs["orchestrator"],
              nlohmann::json::parse(R"({"type":"kubernetes","namespace":"gg-ns",)"
                                    R"("resource":{"type":"pod","name":)"
                                    R"("miner-pod","id":"0c7c-11e9"}})"));

    const auto ocsf = nlohmann::json::parse(format_ocsf(d, test_host()));
    EXPECT_EQ(ocsf["evidences"][0]["process"]["container"],
              nlohmann::json::parse(R"({"uid":")" + std::string(64, 'a') +
                                    R"(","name":"gg-miner","runtime":"podman","image":{"name":)"
                                    R"("localhost/gg-test-miner:1","uid":"sha256:)" +
                                    std::string(64, 'e') +
                                    R"("},"pod_uuid":"0c7c-11e9","orchestrator":"Kubernetes"})"));
    EXPECT_EQ(ocsf["unmapped"]["kubernetes"],
              nlohmann::json::parse(R"({"pod_name":"miner-pod","namespace":"gg-ns",)"
                                    R"("pod_uid":"0c7c-11e9","container_name":"miner"})"));

    const auto cef = format_cef(d, test_host());
    for (const char* pair :
         {" containerName=gg-miner ", " containerImage=localhost/gg-test-miner:1 ",
          " containerRuntime=podman ", " podName=miner-pod ", " podNamespace=gg-ns"}) {
        EXPECT_NE(cef.find(pair), std::string::npos) << pair << " in " << cef;
    }
    const auto leef = format_leef(d, test_host());
    for (const char* pair :
         {"\tcontainerName=gg-miner\t", "\tcontainerImage=localhost/gg-test-miner:1\t",
          "\tcontainerRuntime=podman\t", "\tpodName=miner-pod\t", "\tpodNamespace=gg-ns"}) {
        EXPECT_NE(leef.find(pair), std::string::npos) << pair << " in " << leef;
    }

    // On the host: none of it.
    d.process.container_id.clear();
    const auto host = nlohmann::json::parse(format_ecs_json(d, test_host()));
    EXPECT_FALSE(host.contains("container"));
    EXPECT_FALSE(host.contains("orchestrator"));
    EXPECT_EQ(format_cef(d, test_host()).find("containerName"), std::string::npos);
}

// A Slurm job, field by field in every format (and in enforcement outcomes).
TEST(AllFormats, slurm_job_is_named) {
    auto d = test_detection();
    d.process.container_id.clear();
    d.process.slurm = SlurmJob{"4242", "batch", "alice", "physics", "gpu", "0"};

    const auto ecs = nlohmann::json::parse(format_ecs_json(d, test_host()));
    EXPECT_EQ(ecs["orchestrator"],
              nlohmann::json::parse(R"({"type":"slurm","resource":{"type":"job","id":"4242"}})"));
    const auto job = nlohmann::json::parse(
        R"({"job_id":"4242","step_id":"batch","user":"alice","account":"physics",)"
        R"("partition":"gpu","gpus":"0"})");
    EXPECT_EQ(ecs["gpuguard"]["slurm"], job);
    EXPECT_EQ(nlohmann::json::parse(format_ocsf(d, test_host()))["unmapped"]["slurm"], job);
    const auto cef = format_cef(d, test_host());
    for (const char* pair : {" slurmJobId=4242 ", " slurmStepId=batch ", " slurmUser=alice ",
                             " slurmAccount=physics ", " slurmPartition=gpu ", " slurmGpus=0"}) {
        EXPECT_NE(cef.find(pair), std::string::npos) << pair << " in " << cef;
    }
    EXPECT_NE(format_leef(d, test_host()).find("\tslurmJobId=4242\t"), std::string::npos);

    EnforcementOutcome outcome;
    outcome.id = "o1";
    outcome.action = "kill";
    outcome.outcome = "success";
    outcome.process = d.process;
    const auto outcome_ecs = nlohmann::json::parse(format_ecs_json(outcome, test_host()));
    EXPECT_EQ(outcome_ecs["gpuguard"]["slurm"], job);
    EXPECT_EQ(nlohmann::json::parse(format_ocsf(outcome, test_host()))["unmapped"]["slurm"], job);

    // Outside a job: none of it.
    d.process.slurm = {};
    const auto host = nlohmann::json::parse(format_ecs_json(d, test_host()));
    EXPECT_FALSE(host.contains("orchestrator"));
    EXPECT_FALSE(host["gpuguard"].contains("slurm"));
    EXPECT_EQ(format_cef(d, test_host()).find("slurmJobId"), std::string::npos);
}

}  // namespace
}  // namespace gpuguard::siem
