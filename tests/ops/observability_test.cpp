// contrib/grafana/gpuguard.json and contrib/prometheus/gpuguard-alerts.yml
// query only series a running agent exports: the agent runs with a fake
// NVML GPU, a GPU holder and an output sink, and its /metrics is scraped.
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuguard/version.h"
#include "tests/ops/service_support.h"
#include "tests/support/child_process.h"
#include "tests/support/detection_ledger.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/json_at.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::json_at;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;

const std::filesystem::path kContrib = GPUGUARD_SOURCE_DIR "/contrib";

using gpuguard::testing::file_text;

// gpuguard_* metric names a PromQL expression refers to.
std::set<std::string> metrics_in(const std::string& expression) {
    static const std::regex name(R"(\bgpuguard_[a-z0-9_]+)");
    std::set<std::string> names;
    for (std::sregex_iterator it(expression.begin(), expression.end(), name), end; it != end;
         ++it) {
        names.insert(it->str());
    }
    return names;
}

void collect_dashboard_expressions(const nlohmann::json& node, std::vector<std::string>& out) {
    if (node.is_object()) {
        for (const auto& [key, value] : node.items()) {
            if (key == "expr" && value.is_string()) out.push_back(value.get<std::string>());
            collect_dashboard_expressions(value, out);
        }
    } else if (node.is_array()) {
        for (const auto& item : node) collect_dashboard_expressions(item, out);
    }
}

// Family names from "# TYPE <name> <type>" lines.
std::set<std::string> exported_families(const std::string& exposition) {
    std::set<std::string> names;
    static const std::regex type_line(R"(^# TYPE (\S+) \S+$)", std::regex::multiline);
    for (std::sregex_iterator it(exposition.begin(), exposition.end(), type_line), end; it != end;
         ++it) {
        names.insert((*it)[1]);
    }
    return names;
}

TEST(Dashboard, queries_the_series_the_issue_asks_for) {
    const auto dashboard = nlohmann::json::parse(file_text(kContrib / "grafana/gpuguard.json"));
    std::vector<std::string> expressions;
    collect_dashboard_expressions(dashboard, expressions);
    std::set<std::string> used;
    for (const auto& expression : expressions) used.merge(metrics_in(expression));
    // GPU utilisation and memory per GPU, GPU processes, detections, drops, sink queues.
    for (const char* metric :
         {"gpuguard_gpu_utilization_ratio", "gpuguard_gpu_memory_used_bytes",
          "gpuguard_processes_holding_gpu", "gpuguard_process_gpu_memory_bytes",
          "gpuguard_detections_total", "gpuguard_events_dropped_total",
          "gpuguard_output_queue_records", "gpuguard_output_records_total"}) {
        EXPECT_TRUE(used.contains(metric)) << metric;
    }
    // Every panel has a query and a unique id.
    std::set<int> ids;
    for (const auto& panel : dashboard["panels"]) {
        EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << panel["title"];
        if (panel["type"] != "row") {
            EXPECT_FALSE(panel["targets"].empty()) << panel["title"];
        }
    }
}

// A running agent with everything the dashboard and the status page show:
// a fake NVML GPU, a GPU holder it reports, a file output sink and a TCP
// sink whose collector refuses connections, metrics and
// the status page on, and a local rule (action kill, in dry run) that a
// child the test starts triggers, so detections and actions exist.
class ObservedAgentTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        node_ = dir_ / "gpu0";
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        int ready[2];
        ASSERT_EQ(pipe(ready), 0);
        const pid_t test = getpid();
        holder_ = fork();
        ASSERT_GE(holder_, 0);
        if (holder_ == 0) {
            gpuguard::testing::end_with_parent(test, SIGKILL);
            const int fd = open(node_.c_str(), O_RDWR);
            char byte = fd >= 0 ? 'y' : 'n';
            (void)!write(ready[1], &byte, 1);
            pause();
            _exit(0);
        }
        holder_reaper_.emplace(holder_);
        char byte = 0;
        ASSERT_EQ(read(ready[0], &byte, 1), 1);
        ASSERT_EQ(byte, 'y');
        close(ready[0]);
        close(ready[1]);

        const auto script = dir_ / "nvml.json";
        std::ofstream(script) << gpuguard::testing::fake_nvml_script(
            {.processes = {{holder_, 1ull << 30}}});
        std::ofstream(dir_ / "miner-rules.yaml") << R"(rules:
  - id: local-dash-miner
    name: Test miner on the fake GPU
    severity: critical
    confidence: 0.9
    action: kill
    process_name: ["gg-dash-miner"]
    tests:
      match: ["gg-dash-miner"]
      no_match: ["gg-dash"]
)";
        port_ = gpuguard::testing::free_loopback_port();
        ASSERT_NE(port_, 0);
        const auto config = dir_ / "gpuguard.yaml";
        std::ofstream(config) << gpuguard::testing::scratch_agent_config(
            dir_.path(), "1:7",
            "backends:\n  interval_ms: 200\n  nvml_library: \"" GPUGUARD_FAKE_NVML_PATH
            "\"\n"
            "metrics:\n  enabled: true\n  status_page: true\n  port: " +
                std::to_string(port_) + "\noutputs:\n  - name: local\n    type: file\n" +
                "    address: " + (dir_ / "alerts.json").string() + "\n" +
                "  - name: collector\n    type: tcp\n    address: " + refused_.address() +
                "\n    retry_initial_ms: 50\n    retry_max_ms: 200\n");
        agent_.emplace(std::vector<std::string>{
            "/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(), GPUGUARD_BINARY, "run",
            "--config", config.string(), "--json"});
        ASSERT_TRUE(agent_->wait_for_agent_ready(60s)) << agent_->stderr_text();

        const std::string node = node_.string();
        miner_ = fork();
        ASSERT_GE(miner_, 0);
        if (miner_ == 0) {
            gpuguard::testing::end_with_parent(test, SIGKILL);
            prctl(PR_SET_NAME, "gg-dash-miner");
            if (open(node.c_str(), O_RDWR) < 0) _exit(1);
            pause();
            _exit(0);
        }
        miner_reaper_.emplace(miner_);
        // The detection and its (dry-run) kill, as printed with --json.
        bool detected = false, acted = false;
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!(detected && acted) && std::chrono::steady_clock::now() < deadline) {
            auto line = agent_->read_stdout_line(200ms);
            if (!line) continue;
            printed_.push_back(*line);
            const auto record = nlohmann::json::parse(*line);
            if (json_at(record, "/process/pid") != miner_) continue;
            detected |= json_at(record, "/gpuguard/record") == "detection";
            acted |= json_at(record, "/gpuguard/record") == "enforcement";
        }
        ASSERT_TRUE(detected && acted) << agent_->stderr_text();
    }

    // Ends on the whole output: the miner's detection (by its name at its
    // exec, GG-CORR-0012, or with its GPU open, GG-CORR-0001: the two race)
    // and nothing at warning or above for the holder beside it.
    void TearDown() override {
        if (!agent_) return;
        EXPECT_EQ(agent_->stop(SIGTERM, 15s), 0) << agent_->stderr_text();
        while (auto line = agent_->read_stdout_line(0ms)) printed_.push_back(*line);
        EXPECT_TRUE(gpuguard::testing::DetectionLedger(printed_).expect_exactly(
            {{"GG-CORR-0001", miner_, "critical", true},
             {"GG-CORR-0012", miner_, "critical", true},
             {"GG-CORR-0012", miner_, "error", true}},
            {miner_, holder_}));
    }

    httplib::Result get(const std::string& path) {
        httplib::Client client("127.0.0.1", port_);
        return client.Get(path);
    }

    TempDir dir_{"gg-observed"};
    std::filesystem::path node_;
    pid_t holder_ = -1, miner_ = -1;
    std::optional<gpuguard::testing::ChildReaper> holder_reaper_, miner_reaper_;
    uint16_t port_ = 0;
    gpuguard::testing::RefusedPort refused_;
    std::optional<Subprocess> agent_;
    std::vector<std::string> printed_;  // every line the agent printed, for TearDown
};

TEST_F(ObservedAgentTest, every_metric_the_dashboard_and_alerts_query_is_exported) {
    std::set<std::string> exported;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto response = get("/metrics");
        ASSERT_TRUE(response) << agent_->stderr_text();
        ASSERT_EQ(response->status, 200);
        exported = exported_families(response->body);
        if (exported.contains("gpuguard_process_gpu_memory_bytes") &&
            exported.contains("gpuguard_actions_total")) {
            break;
        }
        std::this_thread::sleep_for(200ms);
    }
    ASSERT_TRUE(exported.contains("gpuguard_gpu_utilization_ratio")) << agent_->stderr_text();
    ASSERT_TRUE(exported.contains("gpuguard_process_gpu_memory_bytes")) << agent_->stderr_text();

    std::vector<std::string> expressions;
    collect_dashboard_expressions(
        nlohmann::json::parse(file_text(kContrib / "grafana/gpuguard.json")), expressions);
    static const std::regex alert_expr(R"(^\s*expr:\s*(.+)$)", std::regex::multiline);
    const std::string alerts = file_text(kContrib / "prometheus/gpuguard-alerts.yml");
    for (std::sregex_iterator it(alerts.begin(), alerts.end(), alert_expr), end; it != end; ++it) {
        expressions.push_back((*it)[1]);
    }
    ASSERT_GT(expressions.size(), 20u);
    for (const auto& expression : expressions) {
        for (const auto& metric : metrics_in(expression)) {
            EXPECT_TRUE(exported.contains(metric))
                << metric << " (in `" << expression << "`) is not exported";
        }
    }
    // Per rule: the local rule's detection and its dry-run kill. The file
    // sink writes on its own thread: scraped until it says it sent.
    static const std::regex file_sent(
        R"(gpuguard_output_records_total\{sink="local",type="file",state="sent"\} [1-9])");
    std::string body;
    const auto sent_deadline = std::chrono::steady_clock::now() + 10s;
    do {
        body = get("/metrics")->body;
        if (std::regex_search(body, file_sent)) break;
        std::this_thread::sleep_for(100ms);
    } while (std::chrono::steady_clock::now() < sent_deadline);
    EXPECT_NE(
        body.find("gpuguard_rule_detections_total{rule=\"GG-CORR-0001\",severity=\"critical\"}"),
        std::string::npos)
        << body;
    EXPECT_TRUE(
        std::regex_search(body,
                          // The kill is the first rule's: 0012 at the exec or 0001 at the GPU open.
                          std::regex(R"re(gpuguard_actions_total\{rule="GG-CORR-00(01|12)",)re"
                                     R"re(action="kill",outcome="dry_run"\} [1-9])re")))
        << body;
    // Per sink and state: the file sink wrote the alerts, the refused
    // collector holds them queued (in memory: no queue_dir here, so none
    // persisted), and every state of docs/outputs.md is a series.
    EXPECT_TRUE(std::regex_search(body, file_sent)) << body;
    EXPECT_TRUE(std::regex_search(
        body,
        std::regex(
            R"(gpuguard_output_records_total\{sink="collector",type="tcp",state="queued"\} [1-9])")))
        << body;
    for (const char* state : {"queued", "persisted", "sent", "retried", "dropped", "filtered"}) {
        EXPECT_NE(
            body.find(
                std::string(
                    "gpuguard_output_records_total{sink=\"collector\",type=\"tcp\",state=\"") +
                state + "\"}"),
            std::string::npos)
            << state;
    }
    EXPECT_NE(
        body.find(
            "gpuguard_output_records_total{sink=\"collector\",type=\"tcp\",state=\"persisted\"} 0"),
        std::string::npos)
        << body;
}

TEST_F(ObservedAgentTest, status_page_shows_live_gpu_processes_detections_and_actions) {
    const auto page = get("/status");
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200);
    EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(page->get_header_value("Content-Security-Policy").find("script-src 'self'"),
              std::string::npos);
    EXPECT_NE(page->body.find("<script src=\"/status.js\""), std::string::npos);
    const auto script = get("/status.js");
    ASSERT_TRUE(script);
    EXPECT_EQ(script->status, 200);
    EXPECT_EQ(script->body.find("innerHTML"), std::string::npos) << "values must go in as text";

    const auto data = get("/status.json");
    ASSERT_TRUE(data);
    ASSERT_EQ(data->status, 200);
    const auto status = nlohmann::json::parse(data->body);
    // The fake NVML GPU, live.
    ASSERT_EQ(status["telemetry"]["devices"].size(), 1u) << status["telemetry"].dump();
    EXPECT_EQ(status["telemetry"]["devices"][0]["model"], "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(status["telemetry"]["devices"][0]["metrics"]["gpu_utilization_percent"], 97);
    EXPECT_EQ(status["telemetry"]["devices"][0]["metrics"]["memory_used_bytes"], 1073741824ull);
    // GPU processes: the holder and the miner.
    std::set<pid_t> pids;
    for (const auto& process : status["agent"]["ps"]["processes"])
        pids.insert(process["pid"].get<pid_t>());
    EXPECT_TRUE(pids.contains(holder_));
    EXPECT_TRUE(pids.contains(miner_));
    // The detection with its evidence, and the action it asked for.
    // (Other rules may name the test's processes too: a checkout under /tmp
    // makes them "GPU used from a temporary location" as well.)
    const auto of_miner = [&](const nlohmann::json& records, const std::string& rule) {
        for (const auto& record : records) {
            if (json_at(record, "/process/pid") == miner_ && json_at(record, "/rule/id") == rule) {
                return record;
            }
        }
        return nlohmann::json();
    };
    const auto detection = of_miner(status["agent"]["activity"]["detections"], "GG-CORR-0001");
    ASSERT_FALSE(detection.is_null()) << status["agent"]["activity"].dump();
    EXPECT_EQ(json_at(detection, "/gpuguard/detection/signature_ids/0"), "local-dash-miner");
    // One kill per process: the rule that asked first owns it. The miner's
    // name may be judged at its exec, before its GPU open (GG-CORR-0012,
    // "known miner without a GPU"), or with the open (GG-CORR-0001).
    auto action = of_miner(status["agent"]["activity"]["actions"], "GG-CORR-0001");
    if (action.is_null()) action = of_miner(status["agent"]["activity"]["actions"], "GG-CORR-0012");
    ASSERT_FALSE(action.is_null()) << status["agent"]["activity"].dump();
    EXPECT_EQ(json_at(action, "/event/action"), "kill");
    EXPECT_EQ(json_at(action, "/gpuguard/enforcement/outcome"), "dry_run");
    EXPECT_TRUE(status["agent"]["activity"]["blocked"].is_array());
    EXPECT_EQ(status["agent"]["status"]["version"], GPUGUARD_VERSION);
}

// The page as a browser shows it: Debian's chromium, headless, runs the
// page's script against the live agent; the rendered DOM has the fake GPU,
// the miner's verdict and its detection. The screenshot is left in the
// build tree for people to look at.
TEST_F(ObservedAgentTest, status_page_renders_live_data_in_headless_chromium) {
    const std::string url = "http://127.0.0.1:" + std::to_string(port_) + "/status";
    auto chromium = [&](const std::string& action) {
        return gpuguard::testing::run_command(
            {"/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--user-data-dir=" + (dir_ / "chromium").string(),
             "--virtual-time-budget=5000", "--window-size=1280,1400", action, url},
            60s);
    };
    const auto dom = chromium("--dump-dom");
    ASSERT_EQ(dom.exit_code, 0) << dom.stderr_text;
    // Filled in by the script from /status.json (the static page has none of it).
    EXPECT_NE(dom.stdout_text.find("<td>NVIDIA H100 80GB HBM3</td>"), std::string::npos)
        << dom.stdout_text;
    EXPECT_NE(dom.stdout_text.find(" 97 %"), std::string::npos);
    EXPECT_NE(dom.stdout_text.find("1.0 GiB / 80.0 GiB"), std::string::npos);
    EXPECT_NE(dom.stdout_text.find("<td>pid " + std::to_string(miner_) + " gg-dash-miner</td>"),
              std::string::npos);
    EXPECT_NE(dom.stdout_text.find("class=\"verdict-detected\">GG-CORR-0001"), std::string::npos);
    EXPECT_NE(dom.stdout_text.find("local-dash-miner"), std::string::npos) << "evidence";
    EXPECT_NE(dom.stdout_text.find("<td>dry_run</td>"), std::string::npos);
    EXPECT_EQ(dom.stdout_text.find("cannot load /status.json"), std::string::npos);

    const auto screenshot = std::filesystem::path(GPUGUARD_BUILD_DIR) / "tests/ops/status-page.png";
    std::filesystem::remove(screenshot);
    const auto shot = chromium("--screenshot=" + screenshot.string());
    ASSERT_EQ(shot.exit_code, 0) << shot.stderr_text;
    ASSERT_TRUE(std::filesystem::exists(screenshot));
    EXPECT_GT(std::filesystem::file_size(screenshot), 10000u);
    std::cout << "status page screenshot: " << screenshot.string() << "\n";
    RecordProperty("screenshot", screenshot.string());
}

// Plain `gpuguard status` prints one row per sink: its counters, what waits
// in its queue, and "ok" or the last delivery error.
TEST_F(ObservedAgentTest, plain_status_prints_every_sinks_counters_and_health) {
    const auto config = (dir_ / "gpuguard.yaml").string();
    nlohmann::json outputs;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    do {
        const auto report =
            gpuguard::testing::run_command({GPUGUARD_BINARY, "status", "--json", "-c", config});
        ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
        outputs = nlohmann::json::parse(report.stdout_text)["outputs"];
        ASSERT_EQ(outputs.size(), 2u) << report.stdout_text;
        if (outputs[1]["retried"].get<uint64_t>() > 0 && outputs[0]["sent"].get<uint64_t>() >= 2) {
            break;
        }
        std::this_thread::sleep_for(100ms);
    } while (std::chrono::steady_clock::now() < deadline);

    const auto text = gpuguard::testing::run_command({GPUGUARD_BINARY, "status", "-c", config});
    ASSERT_EQ(text.exit_code, 0) << text.stderr_text;
    EXPECT_NE(text.stdout_text.find("outputs: 2 sink(s)\n"), std::string::npos) << text.stdout_text;
    // Each row: name type queued sent retried dropped bytes waiting state...
    std::map<std::string, std::vector<std::string>> rows;
    std::istringstream lines(text.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::vector<std::string> row;
        for (std::string field; row.size() < 8 && fields >> field;) row.push_back(field);
        std::string state;
        std::getline(fields >> std::ws, state);
        row.push_back(state);
        if (row[0] == "local" || row[0] == "collector") rows[row[0]] = row;
    }
    ASSERT_EQ(rows.size(), 2u) << text.stdout_text;
    const auto number = [](const std::string& field) { return std::stoull(field); };

    const auto& local = rows["local"];
    EXPECT_EQ(local[1], "file");
    EXPECT_GE(number(local[3]), 2u) << "sent";
    EXPECT_LE(number(local[3]), number(local[2])) << "sent <= queued";
    EXPECT_EQ(local[4], "0") << "retried";
    EXPECT_EQ(local[5], "0") << "dropped";
    EXPECT_GT(number(local[6]), 100u) << "bytes";
    EXPECT_EQ(local[8], "ok");

    const auto& collector = rows["collector"];
    EXPECT_EQ(collector[1], "tcp");
    EXPECT_GE(number(collector[2]), 2u) << "queued: the detection and the action";
    EXPECT_EQ(collector[3], "0") << "sent";
    EXPECT_GE(number(collector[4]), outputs[1]["retried"].get<uint64_t>()) << "retried";
    EXPECT_EQ(collector[5], "0") << "dropped";
    EXPECT_EQ(collector[6], "0") << "bytes";
    EXPECT_EQ(number(collector[7]), number(collector[2])) << "all still waiting";
    EXPECT_EQ(collector[8], "failing: connect " + refused_.address() + ": Connection refused");
}

}  // namespace

namespace {

// `gpuguard status` is one screen: the rule version in force, the hooks
// attached, how enforcement runs, the event rate, each GPU with its load and
// memory, and the last hour's detections and actions (issue 12).
TEST_F(ObservedAgentTest, status_is_one_screen_of_rules_hooks_gpus_rates_and_the_last_hour) {
    const auto config = (dir_ / "gpuguard.yaml").string();
    nlohmann::json status;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    do {  // the rate needs two of the loop's once-a-second samples
        const auto report =
            gpuguard::testing::run_command({GPUGUARD_BINARY, "status", "--json", "-c", config});
        ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
        status = nlohmann::json::parse(report.stdout_text);
        if (status["events_per_s"].is_number()) break;
        std::this_thread::sleep_for(200ms);
    } while (std::chrono::steady_clock::now() < deadline);
    ASSERT_TRUE(status["events_per_s"].is_number()) << status.dump(2);
    EXPECT_GE(status["events_per_s"].get<double>(), 0.0);
    EXPECT_TRUE(std::regex_match(status["rules"]["version"].get<std::string>(),
                                 std::regex(R"(\d+s\d+c-[0-9a-f]{16})")))
        << status["rules"];
    EXPECT_EQ(status["last_hour"]["detections"].get<uint64_t>() >= 1, true) << status["last_hour"];
    EXPECT_GE(status["last_hour"]["actions"].value("dry_run", 0u), 1u) << status["last_hour"];
    EXPECT_EQ(status["enforcement"]["dry_run"], true);
    ASSERT_EQ(status["gpus"].size(), 1u) << status["gpus"];
    EXPECT_EQ(status["gpus"][0]["utilization_percent"], 97);
    EXPECT_EQ(status["gpus"][0]["memory_used_bytes"], 1ull << 30);

    const auto text = gpuguard::testing::run_command({GPUGUARD_BINARY, "status", "-c", config});
    ASSERT_EQ(text.exit_code, 0) << text.stderr_text;
    const std::string& screen = text.stdout_text;
    EXPECT_NE(screen.find("rules: " + status["rules"]["version"].get<std::string>() + ", "),
              std::string::npos)
        << screen;
    // The mode auto chose, why, and its hooks by name.
    const std::string mode = status["attach_mode"].get<std::string>();
    EXPECT_NE(screen.find("attach mode: " + mode + " ("), std::string::npos) << screen;
    EXPECT_FALSE(status["attach_reason"].get<std::string>().empty());
    EXPECT_NE(screen.find(mode == "raw_syscalls"       ? " tp_btf/sys_exit"
                          : mode == "kernel_functions" ? " fexit/__x64_sys_openat"
                                                       : " syscalls/sys_exit_openat"),
              std::string::npos)
        << "hooks by name\n"
        << screen;
    EXPECT_NE(screen.find("enforcement: dry run;"), std::string::npos) << screen;
    EXPECT_NE(screen.find("/s over the last minute"), std::string::npos) << screen;
    EXPECT_NE(screen.find("GPU 0: NVIDIA H100 80GB HBM3 (nvidia, 0000:3b:00.0), utilisation "
                          "97%, memory 1024 / 81920 MiB"),
              std::string::npos)
        << screen;
    EXPECT_TRUE(std::regex_search(
        screen, std::regex(R"(last hour: [1-9]\d* detection\(s\); actions: .*\d+ dry_run)")))
        << screen;
}

}  // namespace
