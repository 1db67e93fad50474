// Kernel module loads (bpf/module.bpf.c, GG-CORR-0018), inside vmtests VMs
// only: the tests load the harmless in-tree `dummy` network driver with
// finit_module(2), which must never happen on a build host. vmtests/init.sh
// names the module's file in GPUGUARD_VMTEST_MODULE; the host's CTest never
// registers these suites (tests/bpf/CMakeLists.txt), and a run without the
// variable skips, which vmtests counts as a failure.
//   ModuleLoadTest       the sensor's module_load event: name, taints (as
//                        /proc/modules shows them), the loading process
//   ModuleLoadAgentTest  `gpuguard run` raises GG-CORR-0018 for a load while
//                        a GPU process runs (notice), and at error while a
//                        flagged miner runs
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::agent::ModuleLoad;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::run_in_child;
using gpuguard::testing::SensorHarness;
using gpuguard::testing::Subprocess;

constexpr const char* kModule = "dummy";

// The module file vmtests put in the VM, or "" outside one.
std::string vm_module_file() {
    const char* path = std::getenv("GPUGUARD_VMTEST_MODULE");
    return path ? path : "";
}

#define GG_REQUIRE_VM_MODULE()                                                      \
    do {                                                                            \
        if (vm_module_file().empty()) {                                             \
            GTEST_SKIP() << "loads a kernel module: runs only inside vmtests "      \
                            "(GPUGUARD_VMTEST_MODULE names the module file there)"; \
        }                                                                           \
    } while (0)

// Loads the module file in a child named `comm`: the child's pid, or -1 with
// the errno of its failure in `error`.
pid_t load_in_child(const std::string& comm, int& error) {
    const std::string file = vm_module_file();
    int status = 0;
    const pid_t child = run_in_child(
        comm,
        [&] {
            const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) return 126;
            return syscall(SYS_finit_module, fd, "", 0) == 0 ? 0 : (errno & 0x7f);
        },
        &status);
    error = status;
    return status == 0 ? child : -1;
}

void unload_module() { syscall(SYS_delete_module, kModule, O_NONBLOCK); }

// The module's taint letters as /proc/modules shows them: "(OE)" at the end
// of its line, "" when untainted; nullopt when it is not loaded.
std::optional<std::string> proc_modules_taints(const std::string& name) {
    std::ifstream in("/proc/modules");
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with(name + " ")) continue;
        const auto open = line.rfind('(');
        if (open == std::string::npos || line.back() != ')') return "";
        return line.substr(open + 1, line.size() - open - 2);
    }
    return std::nullopt;
}

class ModuleLoadTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        GG_REQUIRE_VM_MODULE();
        unload_module();  // left by an earlier run
        const auto error = harness_.open(gpuguard::testing::test_sensor_options());
        ASSERT_FALSE(error) << *error;
    }
    void TearDown() override {
        if (!vm_module_file().empty()) unload_module();
    }
    SensorHarness harness_;
};

TEST_F(ModuleLoadTest, a_load_names_the_module_its_taints_and_the_loader) {
    int error = 0;
    const pid_t loader = load_in_child("gg-insmod", error);
    ASSERT_GT(loader, 0) << "finit_module of " << vm_module_file() << ": " << strerror(error);
    const auto loads = harness_.of<ModuleLoad>(loader, 1);
    ASSERT_EQ(loads.size(), 1u);
    const auto& [event, module] = loads[0];
    EXPECT_EQ(module.name, kModule);
    EXPECT_EQ(event.task.comm, "gg-insmod");
    EXPECT_EQ(event.task.ppid, static_cast<uint32_t>(getpid()));
    EXPECT_EQ(event.task.uid, 0u);
    const auto shown = proc_modules_taints(kModule);
    ASSERT_TRUE(shown) << kModule << " is not in /proc/modules after its load";
    EXPECT_EQ(gpuguard::agent::module_taint_letters(module.taints), *shown);
    EXPECT_EQ(module.taints & (1u << 12), 0u) << "an in-tree module is not out-of-tree (O)";

    // A load the kernel refuses (loaded already) is no load.
    const pid_t again = load_in_child("gg-insmod2", error);
    EXPECT_EQ(again, -1);
    EXPECT_EQ(error, EEXIST);
    harness_.drain(200ms);
    for (const auto& seen : harness_.events()) {
        if (std::holds_alternative<ModuleLoad>(seen.data)) {
            EXPECT_EQ(seen.task.pid, static_cast<uint32_t>(loader));
        }
    }
}

class ModuleLoadAgentTest : public AgentDetectTest {
  protected:
    void SetUp() override {
        AgentDetectTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        GG_REQUIRE_VM_MODULE();
        unload_module();
    }
    void TearDown() override {
        if (!vm_module_file().empty()) unload_module();
    }

    // Loads the module from a child named `comm` and waits for GG-CORR-0018
    // on it (nullopt after a failed expectation).
    std::optional<nlohmann::json> load_and_detect(Subprocess& agent, const std::string& comm) {
        int error = 0;
        const pid_t loader = load_in_child(comm, error);
        EXPECT_GT(loader, 0) << "finit_module: " << strerror(error);
        if (loader <= 0) return std::nullopt;
        auto detection = wait_for_detection(agent, loader, "GG-CORR-0018", 60s);
        EXPECT_TRUE(detection) << agent.stderr_text();
        return detection;
    }

    // The detection's evidence details, one per line.
    static std::string evidence_of(const nlohmann::json& detection) {
        std::string details;
        for (const auto& item : detection["gpuguard"]["detection"]["evidence"]) {
            details += item.value("detail", "") + "\n";
        }
        return details;
    }
};

TEST_F(ModuleLoadAgentTest, a_load_beside_a_gpu_process_is_a_notice_and_beside_a_miner_an_error) {
    use_control_socket();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    // Generous: under emulation (TCG) on a busy host compiling the signature
    // database alone takes a minute; no latency is claimed here.
    ASSERT_TRUE(agent.wait_for_agent_ready(300s)) << agent.stderr_text();

    // A GPU process (it holds the fake GPU node) and nothing flagged: /bin/sleep,
    // not a fork of this binary, whose test strings YARA takes for a miner's.
    const pid_t render = start_child("gg-render", {"/bin/sleep", "30"});
    ASSERT_GT(render, 0);
    ChildReaper reap_render(render);
    // The agent holds it for a GPU process (its table, as gpuguard ps shows
    // it) before the load: no fixed wait, however slow emulation is.
    ASSERT_TRUE(wait_until_known_on_gpu(render, 60s))
        << "the agent never saw gg-render open the GPU\n"
        << agent.stderr_text();
    auto notice = load_and_detect(agent, "gg-insmod");
    ASSERT_TRUE(notice);
    EXPECT_EQ((*notice)["log"]["level"], "notice") << notice->dump();
    std::string evidence = evidence_of(*notice);
    EXPECT_NE(evidence.find("kernel module dummy"), std::string::npos) << evidence;
    EXPECT_NE(evidence.find("GPU processes running: " + std::to_string(render) + " (sleep)"),
              std::string::npos)
        << evidence;
    EXPECT_EQ(evidence.find("flagged"), std::string::npos) << evidence;
    unload_module();

    // A miner on the GPU (its command line names a pool): flagged, so the
    // next load, by an unrelated process, is an error naming it.
    const pid_t miner =
        start_child("gg-miner", {"/bin/bash", "-c", "sleep 30; true", "xmrig", "--cuda", "-o",
                                 "stratum+tcp://127.0.0.1:3333", "-u", "wallet"});
    ASSERT_GT(miner, 0);
    ChildReaper reap_miner(miner);
    ASSERT_TRUE(wait_for_detection(agent, miner, "GG-CORR-0001", 60s)) << agent.stderr_text();
    auto error = load_and_detect(agent, "gg-insmod");
    ASSERT_TRUE(error);
    EXPECT_EQ((*error)["log"]["level"], "error") << error->dump();
    evidence = evidence_of(*error);
    EXPECT_NE(evidence.find("miners running on the host: "), std::string::npos) << evidence;
    EXPECT_NE(evidence.find(std::to_string(miner) + " (bash) flagged by GG-CORR-"),
              std::string::npos)
        << evidence;
    // Exactly these: the two loads (by their loaders) and the miner's own.
    const pid_t first_loader = pid_of(*notice), second_loader = pid_of(*error);
    expect_whole_output(agent,
                        {{"GG-CORR-0018", first_loader, "notice"},
                         {"GG-CORR-0018", second_loader, "error"},
                         {"GG-CORR-0012", miner, "error", /*optional=*/true},
                         {"GG-CORR-0001", miner, "critical"}},
                        {render, miner, first_loader, second_loader}, SIGTERM, 60s);
}

}  // namespace
