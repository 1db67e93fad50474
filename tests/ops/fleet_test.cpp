// The fleet shape of docs/fleet.md with real engines: three hosts (three
// network namespaces), each running gpuguard with a fake NVML GPU and a
// node-local Prometheus in agent mode that scrapes the agent's loopback
// /metrics and remote-writes to one central Prometheus (a fourth namespace,
// joined to each host by a veth pair). A query on the central Prometheus
// returns each host's GPU series, with that host's own values.
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/ops/service_support.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;

constexpr int kHosts = 3;
constexpr int kCentralPort = 9090;  // inside the collector namespace only
constexpr int kPrometheusAgentPort = 9091;

// `ip` with the arguments; the failure text (empty on success).
std::string ip(const std::vector<std::string>& arguments) {
    std::vector<std::string> argv{"/usr/sbin/ip"};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    const auto result = run_command(argv, 20s);
    if (result.exit_code == 0) return "";
    std::string text = "ip";
    for (const auto& argument : arguments) text += " " + argument;
    return text + ": " + result.stderr_text;
}

class FleetTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        const std::string prefix = "ggfleet" + std::to_string(getpid());
        collector_ = prefix + "c";
        ASSERT_EQ(ip({"netns", "add", collector_}), "");
        namespaces_.push_back(collector_);
        ASSERT_EQ(ip({"-n", collector_, "link", "set", "lo", "up"}), "");
        for (int host = 1; host <= kHosts; ++host) {
            const std::string ns = prefix + "h" + std::to_string(host);
            ASSERT_EQ(ip({"netns", "add", ns}), "");
            namespaces_.push_back(ns);
            hosts_.push_back(ns);
            // Created inside the collector namespace, so no name can clash with the host's.
            const std::string near = "ggfc" + std::to_string(host);
            const std::string subnet = "10.68." + std::to_string(host) + ".";
            ASSERT_EQ(ip({"-n", collector_, "link", "add", near, "type", "veth", "peer", "name",
                          "ggfh", "netns", ns}),
                      "");
            ASSERT_EQ(ip({"-n", collector_, "addr", "add", subnet + "1/24", "dev", near}), "");
            ASSERT_EQ(ip({"-n", collector_, "link", "set", near, "up"}), "");
            ASSERT_EQ(ip({"-n", ns, "addr", "add", subnet + "2/24", "dev", "ggfh"}), "");
            ASSERT_EQ(ip({"-n", ns, "link", "set", "ggfh", "up"}), "");
            ASSERT_EQ(ip({"-n", ns, "link", "set", "lo", "up"}), "");
        }
    }

    void TearDown() override {
        for (auto& process : processes_) process->stop(SIGTERM, 15s);
        processes_.clear();
        for (const auto& ns : namespaces_) EXPECT_EQ(ip({"netns", "del", ns}), "");
    }

    // Starts `argv` inside network namespace `ns`.
    Subprocess& start_in(const std::string& ns, std::vector<std::string> argv) {
        argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", ns});
        processes_.push_back(std::make_unique<Subprocess>(argv));
        return *processes_.back();
    }

    // An instant query on the central Prometheus, run from its namespace with
    // promtool: one "labels => value @[time]" line per series.
    std::string central_query(const std::string& expression) {
        const auto result =
            run_command({"/usr/sbin/ip", "netns", "exec", collector_, "promtool", "query",
                         "instant", "http://127.0.0.1:" + std::to_string(kCentralPort), expression},
                        20s);
        return result.stdout_text;
    }

    TempDir dir_{"gg-fleet"};
    std::string collector_;
    std::vector<std::string> hosts_;
    std::vector<std::string> namespaces_;
    std::vector<std::unique_ptr<Subprocess>> processes_;
};

TEST_F(FleetTest, central_prometheus_has_every_hosts_gpu_series) {
    // The central Prometheus receives remote writes (docs/fleet.md).
    const auto central_dir = dir_ / "central";
    std::filesystem::create_directories(central_dir);
    std::ofstream(central_dir / "prometheus.yml") << "global:\n  scrape_interval: 1s\n";
    auto& central = start_in(
        collector_, {"prometheus", "--config.file=" + (central_dir / "prometheus.yml").string(),
                     "--storage.tsdb.path=" + (central_dir / "data").string(),
                     "--web.listen-address=0.0.0.0:" + std::to_string(kCentralPort),
                     "--web.enable-remote-write-receiver"});
    ASSERT_TRUE(central.wait_for_stderr("Server is ready to receive web requests", 60s))
        << central.stderr_text();

    // Each host: gpuguard with its own GPU load, and a Prometheus agent that
    // scrapes it and names the host in `instance` (the dashboard's host selector).
    std::map<std::string, std::string> expected_utilization;  // instance -> value
    std::vector<Subprocess*> agents;
    for (int host = 1; host <= kHosts; ++host) {
        const std::string name = "gpu-host-" + std::to_string(host);
        const auto host_dir = dir_ / name;
        std::filesystem::create_directories(host_dir);
        const unsigned utilization = 10 * host + 1;  // 11 %, 21 %, 31 %
        expected_utilization[name] = "0." + std::to_string(utilization);
        gpuguard::testing::FakeH100 gpu;
        gpu.gpu_utilization = utilization;
        std::ofstream(host_dir / "nvml.json") << gpuguard::testing::fake_nvml_script(gpu);
        std::ofstream(host_dir / "gpuguard.yaml") << gpuguard::testing::scratch_agent_config(
            host_dir, "1:7",
            "backends:\n  interval_ms: 200\n  nvml_library: \"" GPUGUARD_FAKE_NVML_PATH
            "\"\n"
            "metrics:\n  enabled: true\n");
        auto& agent =
            start_in(hosts_[host - 1],
                     {"env", "GPUGUARD_FAKE_NVML_SCRIPT=" + (host_dir / "nvml.json").string(),
                      GPUGUARD_BINARY, "run", "--config", (host_dir / "gpuguard.yaml").string()});
        agents.push_back(&agent);

        std::ofstream(host_dir / "prometheus-agent.yml")
            << "global:\n  scrape_interval: 1s\n"
               "scrape_configs:\n"
               "  - job_name: gpuguard\n"
               "    static_configs:\n"
               "      - targets: [\"127.0.0.1:9842\"]\n"
               "        labels: {instance: \""
            << name
            << "\"}\n"
               "remote_write:\n"
               "  - url: http://10.68."
            << host << ".1:" << kCentralPort
            << "/api/v1/write\n"
               "    queue_config: {batch_send_deadline: 1s}\n";
        start_in(hosts_[host - 1],
                 {"prometheus", "--enable-feature=agent",
                  "--config.file=" + (host_dir / "prometheus-agent.yml").string(),
                  "--storage.agent.path=" + (host_dir / "wal").string(),
                  "--web.listen-address=127.0.0.1:" + std::to_string(kPrometheusAgentPort)});
    }

    for (auto* agent : agents) {
        ASSERT_TRUE(agent->wait_for_agent_ready(60s)) << agent->stderr_text();
    }

    // promtool prints `{labels} => value @[time]` per series.
    const std::regex series(R"re(instance="([^"]+)"[^\n]*=> ([0-9.]+) @)re");
    std::map<std::string, std::string> seen;
    std::string answer;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (seen.size() < kHosts && std::chrono::steady_clock::now() < deadline) {
        answer = central_query("gpuguard_gpu_utilization_ratio{job=\"gpuguard\"}");
        seen.clear();
        for (std::sregex_iterator it(answer.begin(), answer.end(), series), end; it != end; ++it) {
            seen[(*it)[1]] = (*it)[2];
        }
        if (seen.size() < kHosts) std::this_thread::sleep_for(1s);
    }
    EXPECT_EQ(seen, expected_utilization) << answer;

    // Every agent's scrape is up, each under its own name.
    const auto up = central_query("up{job=\"gpuguard\"} == 1");
    for (const auto& [name, value] : expected_utilization) {
        EXPECT_NE(up.find("instance=\"" + name + "\""), std::string::npos) << up;
    }
}

}  // namespace
