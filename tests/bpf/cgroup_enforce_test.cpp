// Kernel enforcement on cgroups the test creates: cgroup/dev denies the fake
// GPU node (1:7), cgroup/connect4/6 refuses blocked addresses (inside a
// network namespace pair the test creates), cgroup-scoped kills, and the LSM
// path where the kernel runs BPF LSM (vmtests; refused on the build host).
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/daemon/kernel_enforcement.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/sensor/sensor_enforce.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/state/process_handle.h"
#include "tests/support/child_process.h"
#include "tests/support/netns.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;
using gpuguard::testing::NetnsScope;
using gpuguard::testing::RequestChild;
using gpuguard::testing::tcp_connect;
using gpuguard::testing::TempDir;
using gpuguard::testing::TestCgroup;
using gpuguard::testing::VethPeer;

// A child that runs one probe per request: 'o' opens `node`, 'c'/'d'/'6'/'7'
// connect to 10.67.0.2/.3, fd00:67::2/::3; it answers with the errno (0 = ok).
RequestChild make_prober(const std::string& node) {
    return RequestChild([node](char request) {
        if (request == 'o') {
            const int fd = open(node.c_str(), O_RDONLY);
            const int result = fd >= 0 ? 0 : errno;
            if (fd >= 0) close(fd);
            return result;
        }
        const char* ip = request == 'c'   ? "10.67.0.2"
                         : request == 'd' ? "10.67.0.3"
                         : request == '6' ? "fd00:67::2"
                                          : "fd00:67::3";
        return tcp_connect(ip, 14433, 1000);
    });
}

class CgroupEnforceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        ASSERT_EQ(cgroup_.error(), "");
        node_ = (dir_ / "gpu0").string();
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        auto opened = KernelEnforcer::open(KernelEnforcerOptions{});
        ASSERT_TRUE(opened.ok()) << opened.error().message;
        kernel_ = std::move(*opened);
        ASSERT_TRUE(kernel_->set_denied_devices({GpuDeviceNumber{1, 7, "test"}}).ok());
    }

    TempDir dir_{"gg-cgroup"};
    TestCgroup cgroup_;
    std::string node_;
    std::unique_ptr<KernelEnforcer> kernel_;
};

TEST_F(CgroupEnforceTest, a_denied_cgroup_cannot_open_the_gpu_node_and_could_before) {
    auto prober = make_prober(node_);
    ASSERT_TRUE(cgroup_.add(prober.pid()));
    EXPECT_EQ(prober.ask('o'), 0) << "before the deny";
    ASSERT_TRUE(kernel_->deny_cgroup(cgroup_.path()).ok());
    ASSERT_TRUE(kernel_->deny_cgroup(cgroup_.path()).ok()) << "idempotent";
    EXPECT_EQ(prober.ask('o'), EPERM) << "after the deny";
    // Outside the cgroup (this test process) nothing changed.
    const int fd = open(node_.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
    EXPECT_GE(kernel_->stats().denied_device, 1u);
    ASSERT_TRUE(kernel_->allow_cgroup(cgroup_.path()).ok());
    EXPECT_EQ(prober.ask('o'), 0) << "after allow";
}

TEST_F(CgroupEnforceTest, the_enforcer_denies_gpus_to_a_detections_cgroup) {
    auto prober = make_prober(node_);
    ASSERT_TRUE(cgroup_.add(prober.pid()));
    EnforcerDependencies deps;
    KernelGpuDenier denier(*kernel_);
    deps.gpu_denier = &denier;
    Enforcer enforcer(EnforcementConfig{}, deps);
    Detection detection;
    detection.action = "deny_gpu";
    detection.process.pid = static_cast<uint32_t>(prober.pid());
    const auto outcome = enforcer.enforce(detection);
    ASSERT_TRUE(outcome);
    EXPECT_EQ(outcome->outcome, "success") << outcome->reason;
    EXPECT_EQ(outcome->process.cgroup_path, cgroup_.path());
    EXPECT_EQ(prober.ask('o'), EPERM);

    // The test process's own cgroup (holding "the agent") is never denied.
    detection.process.pid = static_cast<uint32_t>(getpid());
    EXPECT_EQ(enforcer.enforce(detection)->outcome, "withheld");
}

TEST_F(CgroupEnforceTest, connect_filter_refuses_blocked_addresses_in_its_cgroup_only) {
    NetnsScope netns;
    ASSERT_EQ(netns.error(), "");
    VethPeer peer(14433);
    ASSERT_EQ(peer.error(), "");
    auto prober = make_prober(node_);
    ASSERT_TRUE(cgroup_.add(prober.pid()));
    ASSERT_TRUE(kernel_->attach_connect_filter(cgroup_.path()).ok());
    ASSERT_TRUE(kernel_->block_address("10.67.0.2", 0s).ok());
    ASSERT_TRUE(kernel_->block_address("fd00:67::2", 0s).ok());
    EXPECT_EQ(prober.ask('c'), EPERM);
    EXPECT_EQ(prober.ask('d'), 0);
    EXPECT_EQ(prober.ask('6'), EPERM);
    EXPECT_EQ(prober.ask('7'), 0);
    EXPECT_EQ(tcp_connect("10.67.0.2", 14433, 1000), 0) << "outside the cgroup: not filtered";
    EXPECT_GE(kernel_->stats().denied_connect4, 1u);
    EXPECT_GE(kernel_->stats().denied_connect6, 1u);

    // Expiry: a 1 s entry stops blocking after a second, not before.
    const auto blocked_at = std::chrono::steady_clock::now();
    ASSERT_TRUE(kernel_->block_address("10.67.0.3", 1s).ok());
    EXPECT_EQ(prober.ask('d'), EPERM);
    int answer = EPERM;
    while (answer == EPERM && std::chrono::steady_clock::now() < blocked_at + 5s) {
        std::this_thread::sleep_for(20ms);
        answer = prober.ask('d');
    }
    EXPECT_EQ(answer, 0) << "the 1 s entry still blocks after 5 s";
    EXPECT_GE(std::chrono::steady_clock::now() - blocked_at, 1s);

    // Through the Enforcer, as block_ip's fallback.
    ASSERT_TRUE(kernel_->unblock_address("10.67.0.2").ok());
    EXPECT_EQ(prober.ask('c'), 0);
    CgroupConnectBlocker blocker(*kernel_);
    EnforcerDependencies deps;
    deps.blocker = &blocker;
    Enforcer enforcer(EnforcementConfig{}, deps);
    Detection detection;
    detection.action = "block_ip";
    detection.peer = DetectionPeer{"10.67.0.2", 14433, "", ""};
    EXPECT_EQ(enforcer.enforce(detection)->outcome, "success");
    EXPECT_EQ(prober.ask('c'), EPERM);
}

TEST_F(CgroupEnforceTest, cgroup_scope_kills_every_process_of_the_cgroup) {
    auto first = make_prober(node_);
    auto second = make_prober(node_);
    ASSERT_TRUE(cgroup_.add(first.pid()));
    ASSERT_TRUE(cgroup_.add(second.pid()));
    auto second_handle = ProcessHandle::open(static_cast<uint32_t>(second.pid()), 0);
    ASSERT_TRUE(second_handle.ok());
    EnforcementConfig config;
    config.grace_period_ms = 200;
    Enforcer enforcer(config);
    KillOptions options;
    options.scope = KillScope::kCgroup;
    DetectionProcess target;
    target.pid = static_cast<uint32_t>(first.pid());
    const auto outcome = enforcer.kill(target, options);
    EXPECT_EQ(outcome.outcome, "success") << outcome.reason;
    EXPECT_NE(outcome.reason.find("2 processes of cgroup"), std::string::npos) << outcome.reason;
    EXPECT_TRUE(second_handle->wait_exit(2s));
}

TEST(LsmEnforce, file_open_denies_gpu_opens_where_bpf_lsm_runs) {
    GG_REQUIRE_PRIVILEGED();
    bool lsm = false;
    for (const auto& feature : probe_kernel_features(ProbeOptions{})) {
        if (feature.name == "bpf_lsm") lsm = feature.available;
    }
    if (!lsm) GTEST_SKIP() << "BPF LSM is not available on this kernel (vmtests cover it)";
    TempDir dir("gg-lsm");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    KernelEnforcerOptions options;
    options.load_lsm = true;
    auto kernel = KernelEnforcer::open(options);
    ASSERT_TRUE(kernel.ok()) << kernel.error().message;
    ASSERT_TRUE((*kernel)->set_denied_devices({GpuDeviceNumber{1, 7, "test"}}).ok());
    auto prober = make_prober(node);
    EXPECT_EQ(prober.ask('o'), 0);
    ASSERT_TRUE((*kernel)->deny_process(static_cast<uint32_t>(prober.pid())).ok());
    EXPECT_EQ(prober.ask('o'), EPERM);
    EXPECT_GE((*kernel)->stats().denied_lsm_open, 1u);
}

// The probe's bpf_lsm row predicts the outcome: where it says BPF LSM runs,
// loading it succeeds; elsewhere the load fails naming BPF LSM and the
// enforcer without it still opens.
TEST(LsmEnforce, loading_lsm_where_the_kernel_refuses_it_fails_cleanly) {
    GG_REQUIRE_PRIVILEGED();
    std::optional<bool> lsm;
    std::string why;
    for (const auto& feature : probe_kernel_features(ProbeOptions{})) {
        if (feature.name != "bpf_lsm") continue;
        lsm = feature.available;
        why = feature.detail;
    }
    ASSERT_TRUE(lsm) << "the probe has no bpf_lsm row";
    KernelEnforcerOptions options;
    options.load_lsm = true;
    auto kernel = KernelEnforcer::open(options);
    ASSERT_EQ(kernel.ok(), *lsm) << "probe: " << why
                                 << "; load: " << (kernel.ok() ? "loaded" : kernel.error().message);
    if (*lsm) {
        EXPECT_TRUE((*kernel)->lsm_loaded());
        EXPECT_EQ((*kernel)->name(), "cgroup_device+bpf_lsm");
    } else {
        EXPECT_NE(kernel.error().message.find("BPF LSM"), std::string::npos)
            << kernel.error().message;
        auto plain = KernelEnforcer::open(KernelEnforcerOptions{});
        ASSERT_TRUE(plain.ok());
        EXPECT_FALSE((*plain)->lsm_loaded());
        EXPECT_FALSE((*plain)->deny_process(1).ok());
    }
}

}  // namespace
}  // namespace gpuguard::agent
